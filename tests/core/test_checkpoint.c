/*
 * Object-based checkpoints: the scope rules (README.md, "Using libckpt in a
 * trainer"), save / restore /
 * load, restore-on-create, the restore status, transactional restore,
 * sync-on-read metrics across replica counts, files checked by the Python
 * oracle.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

static int contains(const char *hay, const char *needle)
{
	return hay && needle && strstr(hay, needle) != NULL;
}

static ckpt_shape shp(int rank, int64_t d0, int64_t d1)
{
	ckpt_shape s;
	int64_t d[2] = { d0, d1 };
	cr_assert_eq(ckpt_shape_make(&s, rank, d), CKPT_OK);
	return s;
}

static ckpt_strategy *mirrored(int n)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, n), CKPT_OK);
	return s;
}

static void fill(ckpt_variable *v, float base)
{
	size_t n = (size_t)ckpt_variable_nbytes(v) / sizeof(float);
	float *buf = malloc(n * sizeof(float) + 1);
	for (size_t i = 0; i < n; i++)
		buf[i] = base + (float)i;
	cr_assert_eq(ckpt_variable_assign(v, buf, n * sizeof(float)), CKPT_OK, "%s", ckpt_error_last()->message);
	free(buf);
}

static float at(ckpt_variable *v, size_t i)
{
	float buf[64];
	cr_assert(ckpt_variable_nbytes(v) <= sizeof(buf));
	cr_assert_eq(ckpt_variable_read(v, buf, (size_t)ckpt_variable_nbytes(v)), CKPT_OK);
	return buf[i];
}

/* A tiny Keras-like model: root/model/layer_with_weights-0/{kernel,bias}, root/optimizer (Adam: iter). */
typedef struct tmodel {
	ckpt_checkpoint *ck;
	ckpt_object *model, *dense, *opt;
	ckpt_variable *kernel, *bias, *iter;
} tmodel;

static void build_model(tmodel *m, int with_optimizer)
{
	memset(m, 0, sizeof(*m));
	cr_assert_eq(ckpt_checkpoint_new(&m->ck, NULL), CKPT_OK);
	ckpt_object *root = ckpt_checkpoint_root(m->ck);
	cr_assert_eq(ckpt_status_of(m->model = ckpt_object_new_child(root, "model")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(m->dense = ckpt_object_new_child(m->model, "layer_with_weights-0")), CKPT_OK);
	ckpt_shape k = shp(2, 2, 3), b = shp(1, 3, 0);
	cr_assert_eq(ckpt_status_of(m->kernel = ckpt_object_add_variable(m->dense, "kernel", "dense/kernel", CKPT_DT_FLOAT, &k, NULL)),
		     CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_status_of(m->bias = ckpt_object_add_variable(m->dense, "bias", "dense/bias", CKPT_DT_FLOAT, &b, NULL)),
		     CKPT_OK);
	if (with_optimizer) {
		cr_assert_eq(ckpt_optimizer_new(&m->opt, "Adam"), CKPT_OK);
		cr_assert_eq(ckpt_checkpoint_add(m->ck, "optimizer", m->opt), CKPT_OK, "%s", ckpt_error_last()->message);
		ckpt_shape sc = shp(0, 0, 0);
		cr_assert_eq(ckpt_status_of(m->iter = ckpt_object_add_variable(m->opt, "iter", "Adam/iter", CKPT_DT_INT64, &sc, NULL)),
			     CKPT_OK);
	}
}

static void create_slots(tmodel *m)
{
	ckpt_variable *s;
	cr_assert_eq(ckpt_status_of(s = ckpt_optimizer_create_slot(m->opt, m->kernel, "m", NULL)), CKPT_OK, "%s",
		     ckpt_error_last()->message);
	cr_assert_eq(ckpt_status_of(s = ckpt_optimizer_create_slot(m->opt, m->bias, "m", NULL)), CKPT_OK);
}

static void free_model(tmodel *m)
{
	ckpt_object_free(m->opt);
	ckpt_checkpoint_free(m->ck);
}

typedef struct update_arg {
	ckpt_variable *v;
} update_arg;

static int update_fn(ckpt_replica_ctx *ctx, void *arg)
{
	update_arg *u = arg;
	void *p;
	int rc = ckpt_status_of(p = ckpt_variable_local(u->v));
	if (rc < 0)
		return rc;
	((float *)p)[0] += 1.0f;
	return CKPT_OK;
}

static char *tmp_prefix(char **dir, const char *name)
{
	*dir = ts_tmpdir();
	cr_assert_not_null(*dir);
	return ts_join(*dir, name);
}

/* ---------------------------------------------------------------- */

Test(checkpoint, created_inside_scope_is_mirrored)
{
	ckpt_strategy *s = mirrored(3);
	tmodel m;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	build_model(&m, 1);
	create_slots(&m);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(m.kernel), CKPT_VAR_MIRRORED);
	cr_assert_eq(ckpt_variable_num_replicas(m.kernel), 3);
	ckpt_variable *slot;
	cr_assert_eq(ckpt_status_of(slot = ckpt_optimizer_slot(m.opt, m.kernel, "m")), CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(slot), CKPT_VAR_MIRRORED);
	cr_assert_str_eq(ckpt_variable_name(slot), "Adam/dense/kernel/m");
	/* a mirrored run may update them */
	update_arg u = { m.kernel };
	cr_assert_eq(ckpt_strategy_run(s, update_fn, &u), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(ckpt_variable_replicas_identical(m.kernel));
	free_model(&m);
	ckpt_strategy_free(s);
}

Test(checkpoint, created_outside_is_plain_and_replica_update_fails)
{
	ckpt_strategy *s = mirrored(2);
	tmodel m;
	build_model(&m, 0);
	cr_assert_eq(ckpt_variable_kind(m.kernel), CKPT_VAR_PLAIN);
	update_arg u = { m.kernel };
	cr_assert_eq(ckpt_strategy_run(s, update_fn, &u), CKPT_ESCOPE);
	const ckpt_error *e = ckpt_error_last();
	cr_assert(contains(e->message, "dense/kernel"), "%s", e->message);
	cr_assert(contains(e->message, "created outside strategy scope"), "%s", e->message);
	free_model(&m);
	ckpt_strategy_free(s);
}

Test(checkpoint, model_outside_optimizer_inside_is_an_error)
{
	ckpt_strategy *s = mirrored(2);
	tmodel m;
	build_model(&m, 1);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	ckpt_variable *slot = (ckpt_variable *)1;
	cr_assert_eq(ckpt_status_of(slot = ckpt_optimizer_create_slot(m.opt, m.kernel, "m", NULL)), CKPT_ESCOPE);
	cr_assert_null(slot);
	const ckpt_error *e = ckpt_error_last();
	cr_assert(contains(e->message, "dense/kernel"), "%s", e->message);
	cr_assert(contains(e->message, ckpt_strategy_describe(s)), "%s", e->message);
	cr_assert(contains(e->message, ckpt_strategy_describe(ckpt_strategy_default())), "%s", e->message);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	/* the failed slot was not created */
	cr_assert_eq(ckpt_status_of(slot = ckpt_optimizer_slot(m.opt, m.kernel, "m")), CKPT_ENOTFOUND);
	/* the other way round: model inside, slots outside */
	tmodel m2;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	build_model(&m2, 1);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(ckpt_status_of(slot = ckpt_optimizer_create_slot(m2.opt, m2.kernel, "m", NULL)), CKPT_ESCOPE);
	free_model(&m2);
	free_model(&m);
	ckpt_strategy_free(s);
}

static ckpt_variable *g_step; /* a "global" created before any scope */

Test(checkpoint, global_created_before_scope_stays_plain)
{
	ckpt_shape sc = shp(0, 0, 0);
	cr_assert_eq(ckpt_variable_new(&g_step, "global_step", CKPT_DT_INT64, &sc, NULL), CKPT_OK);
	ckpt_strategy *s = mirrored(2);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	tmodel m;
	build_model(&m, 1);
	cr_assert_eq(ckpt_object_track_variable(ckpt_checkpoint_root(m.ck), "step", g_step), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(g_step), CKPT_VAR_PLAIN);
	cr_assert_eq(ckpt_variable_kind(m.kernel), CKPT_VAR_MIRRORED);
	update_arg u = { g_step };
	cr_assert_eq(ckpt_strategy_run(s, update_fn, &u), CKPT_ESCOPE);
	cr_assert(contains(ckpt_error_last()->message, "global_step"));
	free_model(&m);
	ckpt_variable_free(g_step);
	ckpt_strategy_free(s);
}

static void save_trained(const char *prefix)
{
	tmodel m;
	build_model(&m, 1);
	create_slots(&m);
	fill(m.kernel, 1.0f);
	fill(m.bias, 10.0f);
	ckpt_variable *slot;
	cr_assert_eq(ckpt_status_of(slot = ckpt_optimizer_slot(m.opt, m.kernel, "m")), CKPT_OK);
	fill(slot, 100.0f);
	cr_assert_eq(ckpt_status_of(slot = ckpt_optimizer_slot(m.opt, m.bias, "m")), CKPT_OK);
	fill(slot, 200.0f);
	int64_t it = 7;
	cr_assert_eq(ckpt_variable_assign(m.iter, &it, sizeof(it)), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_write(m.ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	free_model(&m);
}

Test(checkpoint, load_outside_then_fine_tune_in_mirrored_run_fails)
{
	char *dir, *prefix = tmp_prefix(&dir, "model");
	save_trained(prefix);
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_load(&ck, NULL, prefix, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_variable *k;
	cr_assert_eq(ckpt_status_of(k = ckpt_checkpoint_find_variable(ck, "model/layer_with_weights-0/kernel")),
		     CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(k), CKPT_VAR_PLAIN);
	cr_assert_float_eq(at(k, 0), 1.0f, 0);
	ckpt_strategy *s = mirrored(2);
	update_arg u = { k };
	cr_assert_eq(ckpt_strategy_run(s, update_fn, &u), CKPT_ESCOPE);
	cr_assert(contains(ckpt_error_last()->message, "created outside strategy scope"), "%s", ckpt_error_last()->message);
	/* and a new slot for it inside the scope is refused too */
	ckpt_object *opt;
	cr_assert_eq(ckpt_status_of(opt = ckpt_object_find(ckpt_checkpoint_root(ck), "optimizer")), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	ckpt_variable *v;
	cr_assert_eq(ckpt_status_of(v = ckpt_optimizer_create_slot(opt, k, "v", NULL)), CKPT_ESCOPE);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

Test(checkpoint, load_inside_is_mirrored_with_slots)
{
	char *dir, *prefix = tmp_prefix(&dir, "model");
	save_trained(prefix);
	ckpt_strategy *s = mirrored(4);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	ckpt_checkpoint *ck;
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_load(&ck, &st, prefix, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_tracked_list *l;
	cr_assert_eq(ckpt_checkpoint_variables(&l, ck), CKPT_OK);
	cr_assert_eq(ckpt_tracked_list_num_entries(l), 5);
	int slots = 0;
	for (size_t i = 0; i < ckpt_tracked_list_num_entries(l); i++) {
		const ckpt_tracked_variable *t = ckpt_tracked_list_get(l, i);
		cr_assert_eq(ckpt_variable_kind(t->variable), CKPT_VAR_MIRRORED, "%s", t->key);
		cr_assert_eq(ckpt_variable_num_replicas(t->variable), 4);
		cr_assert(ckpt_variable_replicas_identical(t->variable));
		cr_assert_str_eq(t->key, t->source_key);
		if (t->slot_name) {
			slots++;
			cr_assert_str_eq(t->slot_name, "m");
			cr_assert_not_null(t->primary);
		}
	}
	cr_assert_eq(slots, 2);
	ckpt_variable *k, *mk;
	cr_assert_eq(ckpt_status_of(k = ckpt_checkpoint_find_variable(ck, "model/layer_with_weights-0/kernel")),
		     CKPT_OK);
	ckpt_object *opt;
	cr_assert_eq(ckpt_status_of(opt = ckpt_object_find(ckpt_checkpoint_root(ck), "optimizer")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(mk = ckpt_optimizer_slot(opt, k, "m")), CKPT_OK);
	cr_assert_float_eq(at(mk, 5), 105.0f, 0);
	for (int r = 0; r < 4; r++)
		cr_assert_float_eq(((const float *)ckpt_variable_replica_data(mk, r))[5], 105.0f, 0);
	/* fine-tuning in a mirrored run works */
	update_arg u = { k };
	cr_assert_eq(ckpt_strategy_run(s, update_fn, &u), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_float_eq(at(k, 0), 2.0f, 0);
	ckpt_tracked_list_free(l);
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

Test(checkpoint, restore_inside_scope_restores_slots_on_create)
{
	char *dir, *prefix = tmp_prefix(&dir, "model");
	save_trained(prefix);
	ckpt_strategy *s = mirrored(2);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	tmodel m;
	build_model(&m, 1);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, m.ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_float_eq(at(m.kernel, 2), 3.0f, 0);
	cr_assert_float_eq(at(m.bias, 1), 11.0f, 0);
	int64_t it = 0;
	cr_assert_eq(ckpt_variable_read(m.iter, &it, sizeof(it)), CKPT_OK);
	cr_assert_eq(it, 7);
	/* the slots do not exist yet: their values are pending */
	cr_assert_eq(ckpt_restore_status_num_unmatched(st), 2);
	cr_assert(contains(ckpt_restore_status_unmatched(st, 0), ".OPTIMIZER_SLOT/optimizer/m/"));
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_ENOTFOUND);
	cr_assert_eq(ckpt_restore_status_assert_existing_objects_matched(st), CKPT_OK, "%s",
		ckpt_error_last()->message);
	create_slots(&m); /* e.g. on the first training step */
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	ckpt_variable *slot;
	cr_assert_eq(ckpt_status_of(slot = ckpt_optimizer_slot(m.opt, m.bias, "m")), CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(slot), CKPT_VAR_MIRRORED);
	cr_assert_float_eq(at(slot, 2), 202.0f, 0);
	cr_assert(ckpt_variable_replicas_identical(slot));
	cr_assert_eq(ckpt_restore_status_num_unmatched(st), 0);
	cr_assert_eq(ckpt_restore_status_num_restored(st), 5);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	free_model(&m);
	ckpt_strategy_free(s);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

Test(checkpoint, restore_on_create_of_a_child_added_later)
{
	char *dir, *prefix = tmp_prefix(&dir, "model");
	save_trained(prefix);
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, prefix), CKPT_OK);
	cr_assert_eq(ckpt_restore_status_num_unmatched(st), 5);
	/* the whole model appears after the restore */
	ckpt_object *model, *dense;
	cr_assert_eq(ckpt_object_new(&model), CKPT_OK);
	cr_assert_eq(ckpt_status_of(dense = ckpt_object_new_child(model, "layer_with_weights-0")), CKPT_OK);
	ckpt_shape k = shp(2, 2, 3), wrong = shp(1, 3, 0);
	ckpt_variable *kernel, *bias;
	cr_assert_eq(ckpt_status_of(kernel = ckpt_object_add_variable(dense, "kernel", "dense/kernel", CKPT_DT_FLOAT, &k, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_add(ck, "model", model), CKPT_OK);
	cr_assert_float_eq(at(kernel, 4), 5.0f, 0);
	/* a later variable of the wrong shape is refused, with both shapes named */
	ckpt_shape bad = shp(1, 4, 0);
	cr_assert_eq(ckpt_status_of(bias = ckpt_object_add_variable(dense, "bias", "dense/bias", CKPT_DT_FLOAT, &bad, NULL)),
		     CKPT_EMISMATCH);
	cr_assert(contains(ckpt_error_last()->message, "[3]"), "%s", ckpt_error_last()->message);
	cr_assert(contains(ckpt_error_last()->message, "[4]"), "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_status_of(bias = ckpt_object_variable(dense, "bias")), CKPT_ENOTFOUND);
	cr_assert_eq(ckpt_status_of(bias = ckpt_object_add_variable(dense, "bias", "dense/bias", CKPT_DT_FLOAT, &wrong, NULL)),
		     CKPT_OK);
	cr_assert_float_eq(at(bias, 0), 10.0f, 0);
	/* what is still held can be dropped: a later optimizer gets nothing */
	ckpt_checkpoint_discard_pending(ck);
	ckpt_object *opt;
	cr_assert_eq(ckpt_status_of(opt = ckpt_object_new_child(ckpt_checkpoint_root(ck), "optimizer")), CKPT_OK);
	ckpt_shape sc = shp(0, 0, 0);
	ckpt_variable *iter;
	cr_assert_eq(ckpt_status_of(iter = ckpt_object_add_variable(opt, "iter", "Adam/iter", CKPT_DT_INT64, &sc, NULL)),
		     CKPT_OK);
	int64_t it = -1;
	cr_assert_eq(ckpt_variable_read(iter, &it, sizeof(it)), CKPT_OK);
	cr_assert_eq(it, 0);
	ckpt_checkpoint_discard_pending(NULL);
	ckpt_restore_status_expect_partial(st);
	ckpt_restore_status_free(st);
	ckpt_object_free(model);
	ckpt_checkpoint_free(ck);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

Test(checkpoint, transactional_restore_on_shape_mismatch)
{
	char *dir, *prefix = tmp_prefix(&dir, "model");
	save_trained(prefix);
	/* live model whose bias (matched after the kernel, in BFS order) has the wrong shape */
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_object *model, *dense;
	cr_assert_eq(ckpt_status_of(model = ckpt_object_new_child(ckpt_checkpoint_root(ck), "model")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(dense = ckpt_object_new_child(model, "layer_with_weights-0")), CKPT_OK);
	ckpt_shape k = shp(2, 2, 3), b = shp(2, 1, 3);
	ckpt_variable *kernel, *bias;
	cr_assert_eq(ckpt_status_of(kernel = ckpt_object_add_variable(dense, "kernel", "dense/kernel", CKPT_DT_FLOAT, &k, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(bias = ckpt_object_add_variable(dense, "bias", "dense/bias", CKPT_DT_FLOAT, &b, NULL)),
		     CKPT_OK);
	fill(kernel, -1.0f);
	fill(bias, -2.0f);
	ckpt_restore_status *st = (ckpt_restore_status *)1;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, prefix), CKPT_EMISMATCH);
	cr_assert_null(st);
	const ckpt_error *e = ckpt_error_last();
	cr_assert(contains(e->message, "dense/bias"), "%s", e->message);
	cr_assert(contains(e->message, "[3]"), "%s", e->message);
	cr_assert(contains(e->message, "[1, 3]"), "%s", e->message);
	cr_assert_str_eq(e->variable, "dense/bias");
	/* nothing changed, not even the kernel that matched */
	cr_assert_float_eq(at(kernel, 0), -1.0f, 0);
	cr_assert_float_eq(at(kernel, 5), 4.0f, 0);
	cr_assert_float_eq(at(bias, 0), -2.0f, 0);
	/* and nothing is pending: a later optimizer does not pick values up */
	ckpt_object *opt;
	cr_assert_eq(ckpt_optimizer_new(&opt, "Adam"), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_add(ck, "optimizer", opt), CKPT_OK);
	ckpt_shape sc = shp(0, 0, 0);
	ckpt_variable *iter;
	cr_assert_eq(ckpt_status_of(iter = ckpt_object_add_variable(opt, "iter", "Adam/iter", CKPT_DT_INT64, &sc, NULL)),
		     CKPT_OK);
	int64_t it = -1;
	cr_assert_eq(ckpt_variable_read(iter, &it, sizeof(it)), CKPT_OK);
	cr_assert_eq(it, 0);
	ckpt_object_free(opt);
	ckpt_checkpoint_free(ck);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

Test(checkpoint, dtype_mismatch_is_emismatch)
{
	char *dir, *prefix = tmp_prefix(&dir, "model");
	save_trained(prefix);
	tmodel m;
	build_model(&m, 0);
	ckpt_object *opt;
	cr_assert_eq(ckpt_status_of(opt = ckpt_object_new_child(ckpt_checkpoint_root(m.ck), "optimizer")), CKPT_OK);
	ckpt_shape sc = shp(0, 0, 0);
	ckpt_variable *iter;
	cr_assert_eq(ckpt_status_of(iter = ckpt_object_add_variable(opt, "iter", "iter", CKPT_DT_FLOAT, &sc, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_restore(NULL, m.ck, prefix), CKPT_EMISMATCH);
	cr_assert(contains(ckpt_error_last()->message, "int64"), "%s", ckpt_error_last()->message);
	cr_assert(contains(ckpt_error_last()->message, "float32"), "%s", ckpt_error_last()->message);
	free_model(&m);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

/* ---- sync-on-read metrics ---- */

typedef struct metric {
	ckpt_variable *total, *count;
} metric;

static int metric_update(ckpt_replica_ctx *ctx, void *arg)
{
	metric *mt = arg;
	void *t = NULL, *c = NULL;
	int rc = ckpt_status_of(t = ckpt_variable_local(mt->total));
	if (rc == CKPT_OK)
		rc = ckpt_status_of(c = ckpt_variable_local(mt->count));
	if (rc < 0)
		return rc;
	/* replica r saw samples with error r+1 */
	((float *)t)[0] += (float)(ckpt_replica_id(ctx) + 1) * 2.0f;
	((float *)c)[0] += 2.0f;
	return CKPT_OK;
}

static void make_metric(ckpt_checkpoint *ck, metric *mt)
{
	ckpt_object *mae;
	cr_assert_eq(ckpt_status_of(mae = ckpt_object_new_child(ckpt_checkpoint_root(ck), "mae")), CKPT_OK);
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.sync = CKPT_SYNC_ON_READ;
	o.aggregation = CKPT_AGG_SUM;
	o.trainable = 0;
	ckpt_shape sc = shp(0, 0, 0);
	cr_assert_eq(ckpt_status_of(mt->total = ckpt_object_add_variable(mae, "total", "mae/total", CKPT_DT_FLOAT, &sc, &o)),
		     CKPT_OK,
		     "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_status_of(mt->count = ckpt_object_add_variable(mae, "count", "mae/count", CKPT_DT_FLOAT, &sc, &o)),
		     CKPT_OK);
}

static void check_metric_round_trip(int save_replicas, int restore_replicas)
{
	char *dir, *prefix = tmp_prefix(&dir, "metric");
	ckpt_strategy *s = mirrored(save_replicas);
	ckpt_checkpoint *ck;
	metric mt;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	make_metric(ck, &mt);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	if (save_replicas > 1)
		cr_assert_eq(ckpt_variable_kind(mt.total), CKPT_VAR_SYNC_ON_READ);
	cr_assert_eq(ckpt_strategy_run(s, metric_update, &mt), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_strategy_run(s, metric_update, &mt), CKPT_OK);
	float total = 0, count = 0;
	cr_assert_eq(ckpt_variable_read(mt.total, &total, sizeof(total)), CKPT_OK);
	cr_assert_eq(ckpt_variable_read(mt.count, &count, sizeof(count)), CKPT_OK);
	/* sum over replicas of 2 * 2 * (r + 1) */
	float want_total = 2.0f * (float)(save_replicas * (save_replicas + 1)), want_count = 4.0f * (float)save_replicas;
	cr_assert_float_eq(total, want_total, 0);
	cr_assert_float_eq(count, want_count, 0);
	cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_checkpoint_free(ck);
	/* the file holds the aggregate */
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, prefix, NULL), CKPT_OK);
	size_t idx;
	cr_assert_eq(ckpt_reader_find(&idx, r, "mae/total/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	float stored;
	cr_assert_eq(ckpt_reader_read_into(r, idx, &stored, sizeof(stored)), CKPT_OK);
	cr_assert_float_eq(stored, want_total, 0);
	ckpt_reader_free(r);
	/* restore under another replica count: the aggregate comes back */
	ckpt_strategy *s2 = mirrored(restore_replicas);
	cr_assert_eq(ckpt_scope_enter(s2), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	make_metric(ck, &mt);
	cr_assert_eq(ckpt_scope_exit(s2), CKPT_OK);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK);
	cr_assert_eq(ckpt_variable_read(mt.total, &total, sizeof(total)), CKPT_OK);
	cr_assert_eq(ckpt_variable_read(mt.count, &count, sizeof(count)), CKPT_OK);
	cr_assert_float_eq(total, want_total, 0);
	cr_assert_float_eq(count, want_count, 0);
	/* a SUM value goes to replica 0, zeros elsewhere: the aggregate is exact for every N */
	cr_assert_float_eq(*(const float *)ckpt_variable_replica_data(mt.count, 0), want_count, 0);
	for (int i = 1; i < ckpt_variable_num_replicas(mt.count); i++)
		cr_assert_float_eq(*(const float *)ckpt_variable_replica_data(mt.count, i), 0.0f, 0);
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	ckpt_strategy_free(s2);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

Test(checkpoint, sync_on_read_metrics_1_replica) { check_metric_round_trip(1, 1); }
Test(checkpoint, sync_on_read_metrics_2_replicas) { check_metric_round_trip(2, 2); }
Test(checkpoint, sync_on_read_metrics_4_replicas) { check_metric_round_trip(4, 4); }
Test(checkpoint, sync_on_read_metrics_2_to_4_and_4_to_1) { check_metric_round_trip(2, 4); check_metric_round_trip(4, 1); }

/* ---- save: naming, counter, oracle ---- */

Test(checkpoint, save_numbers_like_tf_and_restores_the_counter)
{
	char *dir, *prefix = tmp_prefix(&dir, "ckpt");
	tmodel m;
	build_model(&m, 1);
	const char *p;
	cr_assert_eq(ckpt_checkpoint_save_counter(m.ck), 0);
	cr_assert_eq(ckpt_status_of(p = ckpt_checkpoint_save(m.ck, prefix)), CKPT_OK, "%s", ckpt_error_last()->message);
	char want[4096];
	snprintf(want, sizeof(want), "%s-1", prefix);
	cr_assert_str_eq(p, want);
	cr_assert_eq(ckpt_status_of(p = ckpt_checkpoint_save(m.ck, prefix)), CKPT_OK);
	snprintf(want, sizeof(want), "%s-2", prefix);
	cr_assert_str_eq(p, want);
	cr_assert_eq(ckpt_checkpoint_save_counter(m.ck), 2);
	/* the key TF writes */
	ckpt_reader *r;
	size_t idx;
	cr_assert_eq(ckpt_reader_open(&r, want, NULL), CKPT_OK);
	cr_assert_eq(ckpt_reader_find(&idx, r, "save_counter/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	cr_assert_eq(ckpt_reader_var(r, idx)->dtype, CKPT_DT_INT64);
	ckpt_reader_free(r);
	/* a failed save leaves the counter alone */
	char bad[4200];
	snprintf(bad, sizeof(bad), "%s.index/ckpt", want); /* parent is a file */
	cr_assert_lt(ckpt_status_of(p = ckpt_checkpoint_save(m.ck, bad)), 0);
	cr_assert_eq(ckpt_checkpoint_save_counter(m.ck), 2);
	/* a new process restoring it continues the numbering */
	tmodel m2;
	build_model(&m2, 1);
	cr_assert_eq(ckpt_checkpoint_restore(NULL, m2.ck, want), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_save_counter(m2.ck), 2);
	cr_assert_eq(ckpt_status_of(p = ckpt_checkpoint_save(m2.ck, prefix)), CKPT_OK);
	snprintf(want, sizeof(want), "%s-3", prefix);
	cr_assert_str_eq(p, want);
	free_model(&m2);
	free_model(&m);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

Test(checkpoint, saved_files_pass_the_python_oracle_and_reread_equal)
{
	char *dir, *prefix = tmp_prefix(&dir, "ckpt");
	ckpt_strategy *s = mirrored(2);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	tmodel m;
	build_model(&m, 1);
	create_slots(&m);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	fill(m.kernel, 0.5f);
	fill(m.bias, -3.0f);
	/* a name with "/" and "." is escaped */
	ckpt_shape sc = shp(1, 2, 0);
	ckpt_variable *odd;
	cr_assert_eq(ckpt_status_of(odd = ckpt_object_add_variable(ckpt_checkpoint_root(m.ck), "rng/state.v1", "rng", CKPT_DT_FLOAT, &sc, NULL)),
		     CKPT_OK);
	fill(odd, 42.0f);
	const char *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_checkpoint_save(m.ck, prefix)), CKPT_OK, "%s", ckpt_error_last()->message);
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "%s %s/tests/scripts/bundle_check.py '%s'", TS_PYTHON, CKPT_SOURCE_DIR, p);
	ts_run_result rr;
	cr_assert_eq(ts_run_sh(&rr, cmd), 0);
	ts_assert_exit(&rr, 0, "%s\n%s", rr.out, rr.err);
	cr_assert(contains(rr.out, "CHECKS: ALL OK"), "%s", rr.out);
	cr_assert(contains(rr.out, "rng.Sstate..v1/.ATTRIBUTES/VARIABLE_VALUE"), "%s", rr.out);
	cr_assert(contains(rr.out, "model/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE"),
		"%s", rr.out);
	ts_run_free(&rr);
	/* re-read: every live value equals the stored one, keys as enumerated */
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, p, NULL), CKPT_OK);
	ckpt_tracked_list *l;
	cr_assert_eq(ckpt_checkpoint_variables(&l, m.ck), CKPT_OK);
	cr_assert_eq(ckpt_reader_num_entries(r), ckpt_tracked_list_num_entries(l) + 1);
	for (size_t i = 0; i < ckpt_tracked_list_num_entries(l); i++) {
		const ckpt_tracked_variable *t = ckpt_tracked_list_get(l, i);
		size_t idx;
		cr_assert_eq(ckpt_reader_find(&idx, r, t->key), CKPT_OK, "%s", t->key);
		ckpt_tensor *stored;
		cr_assert_eq(ckpt_reader_read(&stored, r, idx), CKPT_OK);
		cr_assert_eq(stored->nbytes, ckpt_variable_nbytes(t->variable));
		cr_assert_eq(memcmp(stored->data, ckpt_variable_replica_data(t->variable, 0), stored->nbytes), 0, "%s", t->key);
		ckpt_tensor_free(stored);
	}
	/* the stored object graph is the one the live tree gives */
	const ckpt_object_graph *g = ckpt_reader_object_graph(r);
	ckpt_object_graph *live;
	cr_assert_eq(ckpt_checkpoint_object_graph(&live, m.ck), CKPT_OK);
	cr_assert_not_null(g);
	cr_assert_eq(g->nnodes, live->nnodes);
	void *a, *b;
	size_t na, nb;
	cr_assert_eq(ckpt_object_graph_serialize(&a, &na, g), CKPT_OK);
	cr_assert_eq(ckpt_object_graph_serialize(&b, &nb, live), CKPT_OK);
	cr_assert_eq(na, nb);
	cr_assert_eq(memcmp(a, b, na), 0);
	free(a);
	free(b);
	ckpt_object_graph_free(live);
	ckpt_tracked_list_free(l);
	ckpt_reader_free(r);
	free_model(&m);
	ckpt_strategy_free(s);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

Test(checkpoint, object_graph_order_is_bfs_then_slots)
{
	tmodel m;
	build_model(&m, 1);
	/* an alias (Keras layer-0) and a second slot name */
	cr_assert_eq(ckpt_object_add_child(m.model, "layer-0", m.dense), CKPT_OK);
	create_slots(&m);
	ckpt_variable *v;
	cr_assert_eq(ckpt_status_of(v = ckpt_optimizer_create_slot(m.opt, m.kernel, "v", NULL)), CKPT_OK);
	cr_assert_eq(ckpt_status_of(v = ckpt_optimizer_create_slot(m.opt, m.bias, "v", NULL)), CKPT_OK);
	ckpt_object_graph *g;
	cr_assert_eq(ckpt_checkpoint_object_graph(&g, m.ck), CKPT_OK);
	/* 0 root; 1 model, 2 optimizer; 3 dense; 4 iter; 5 kernel, 6 bias; slots 7..10 */
	cr_assert_eq(g->nnodes, 11);
	cr_assert_str_eq(g->nodes[0].children[0].local_name, "model");
	cr_assert_eq(g->nodes[1].nchildren, 2);
	cr_assert_eq(g->nodes[1].children[0].node_id, 3);
	cr_assert_eq(g->nodes[1].children[1].node_id, 3);
	cr_assert_str_eq(g->nodes[4].attrs[0].checkpoint_key, "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE");
	cr_assert_str_eq(g->nodes[5].attrs[0].full_name, "dense/kernel");
	cr_assert_eq(g->nodes[2].nslots, 4);
	const char *want[4] = { "m", "m", "v", "v" };
	const int orig[4] = { 5, 6, 5, 6 };
	for (int i = 0; i < 4; i++) {
		cr_assert_str_eq(g->nodes[2].slots[i].slot_name, want[i]);
		cr_assert_eq(g->nodes[2].slots[i].original_variable_node_id, orig[i]);
		cr_assert_eq(g->nodes[2].slots[i].slot_variable_node_id, 7 + i);
	}
	cr_assert_str_eq(g->nodes[9].attrs[0].checkpoint_key,
		"model/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE");
	cr_assert_eq(ckpt_object_graph_validate(g), CKPT_OK);
	ckpt_object_graph_free(g);
	free_model(&m);
}

Test(checkpoint, status_lists_unmatched_and_unrestored)
{
	char *dir, *prefix = tmp_prefix(&dir, "model");
	save_trained(prefix);
	tmodel m;
	build_model(&m, 0);
	ckpt_shape sc = shp(0, 0, 0);
	ckpt_variable *extra;
	cr_assert_eq(ckpt_status_of(extra = ckpt_object_add_variable(m.dense, "extra", "dense/extra", CKPT_DT_FLOAT, &sc, NULL)),
		     CKPT_OK);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, m.ck, prefix), CKPT_OK);
	/* optimizer/iter and both slots have no live object */
	cr_assert_eq(ckpt_restore_status_num_unmatched(st), 3);
	cr_assert_eq(ckpt_restore_status_num_unrestored(st), 1);
	cr_assert_str_eq(ckpt_restore_status_unrestored(st, 0), "model/layer_with_weights-0/extra/.ATTRIBUTES/VARIABLE_VALUE");
	cr_assert_eq(ckpt_restore_status_assert_existing_objects_matched(st), CKPT_ENOTFOUND);
	cr_assert(contains(ckpt_error_last()->message, "extra"));
	cr_assert_null(ckpt_restore_status_unmatched(st, 3));
	cr_assert_not_null(ckpt_restore_status_path(st));
	ckpt_restore_status_expect_partial(st);
	ckpt_restore_status_free(st);
	free_model(&m);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

Test(checkpoint, tf1_name_based_restore_and_flat_load)
{
	const char *path = ts_fixture("tf/tensorflow__half_plus_two_v1/00000123/variables/variables");
	/* restore matches live variables by name */
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_shape sc = shp(0, 0, 0);
	ckpt_variable *a, *b;
	cr_assert_eq(ckpt_status_of(a = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "slope", "a", CKPT_DT_FLOAT, &sc, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(b = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "b", "b", CKPT_DT_FLOAT, &sc, NULL)),
		     CKPT_OK);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, path), CKPT_OK, "%s", ckpt_error_last()->message);
	float v;
	cr_assert_eq(ckpt_variable_read(a, &v, sizeof(v)), CKPT_OK);
	cr_assert_float_eq(v, 0.5f, 0);
	cr_assert_eq(ckpt_variable_read(b, &v, sizeof(v)), CKPT_OK);
	cr_assert_float_eq(v, 2.0f, 0);
	cr_assert_eq(ckpt_restore_status_num_unmatched(st), 1); /* "c" */
	ckpt_restore_status_expect_partial(st);
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(ck);
	/* load: a flat tree of the keys */
	cr_assert_eq(ckpt_checkpoint_load(&ck, &st, path, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK);
	ckpt_variable *c;
	cr_assert_eq(ckpt_status_of(c = ckpt_checkpoint_find_variable(ck, "c")), CKPT_OK);
	cr_assert_eq(ckpt_variable_read(c, &v, sizeof(v)), CKPT_OK);
	cr_assert_float_eq(v, 3.0f, 0);
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(ck);
}

Test(checkpoint, object_api_checks_its_arguments)
{
	ckpt_object *o, *c, *found;
	cr_assert_eq(ckpt_object_new(&o), CKPT_OK);
	cr_assert_eq(ckpt_status_of(c = ckpt_object_new_child(o, "a/b.c")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(c = ckpt_object_new_child(o, "a/b.c")), CKPT_EINVAL);
	cr_assert_eq(ckpt_status_of(c = ckpt_object_new_child(o, "")), CKPT_EINVAL);
	cr_assert_eq(ckpt_status_of(found = ckpt_object_find(o, "a.Sb..c")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(found = ckpt_object_find(o, "nope")), CKPT_ENOTFOUND);
	cr_assert_eq(ckpt_status_of(found = ckpt_object_find(o, "")), CKPT_OK);
	cr_assert_eq(found, o);
	/* a cycle is allowed (held as a non-owning edge) and frees cleanly */
	ckpt_object *back;
	cr_assert_eq(ckpt_status_of(back = ckpt_object_child(o, "a/b.c")), CKPT_OK);
	cr_assert_eq(ckpt_object_add_child(back, "parent", o), CKPT_OK);
	cr_assert_eq(ckpt_object_num_children(back), 1);
	const char *nm;
	cr_assert_eq(ckpt_status_of((nm = ckpt_object_child_name(back, 0)) ? (found = ckpt_object_child_at(back, 0)) : NULL),
		     CKPT_OK);
	cr_assert_str_eq(nm, "parent");
	cr_assert_eq(ckpt_status_of((nm = ckpt_object_child_name(back, 1)) ? (found = ckpt_object_child_at(back, 1)) : NULL),
		     CKPT_EINVAL);
	ckpt_variable *v;
	cr_assert_eq(ckpt_status_of(v = ckpt_object_variable(o, "a/b.c")), CKPT_ENOTFOUND);
	cr_assert_null(ckpt_object_node_variable(o));
	ckpt_object_free(o);
	ckpt_object_free(NULL);
	ckpt_checkpoint_free(NULL);
	ckpt_restore_status_free(NULL);
	ckpt_tracked_list_free(NULL);
	ckpt_manager_free(NULL);
	cr_assert_eq(ckpt_checkpoint_new(NULL, NULL), CKPT_EINVAL);
	cr_assert_eq(ckpt_checkpoint_restore(NULL, NULL, "x"), CKPT_EINVAL);
}

static int restore_in_replica(ckpt_replica_ctx *ctx, void *arg)
{
	return ckpt_checkpoint_write((ckpt_checkpoint *)arg, "/nonexistent/x");
}

Test(checkpoint, replica_context_is_refused)
{
	tmodel m;
	build_model(&m, 0);
	cr_assert_eq(ckpt_strategy_run(ckpt_strategy_default(), restore_in_replica, m.ck), CKPT_ESCOPE);
	cr_assert(contains(ckpt_error_last()->message, "replica context"));
	free_model(&m);
}

Test(checkpoint, graphs_deeper_than_the_cap_are_refused)
{
	/* a file whose object graph is a chain of 600 nodes */
	char *dir, *prefix = tmp_prefix(&dir, "deep");
	enum { N = 600 };
	ckpt_object_graph g = { N, calloc(N, sizeof(ckpt_og_node)) };
	char key[8192] = "";
	for (int i = 0; i < N; i++) {
		g.nodes[i].has_checkpoint_values = -1;
		if (i + 1 < N) {
			g.nodes[i].nchildren = 1;
			g.nodes[i].children = calloc(1, sizeof(ckpt_og_child));
			g.nodes[i].children[0].node_id = i + 1;
			g.nodes[i].children[0].local_name = "c";
			strcat(key, i ? "/c" : "c");
		}
	}
	strcat(key, "/.ATTRIBUTES/VARIABLE_VALUE");
	ckpt_og_attr at = { "VARIABLE_VALUE", "deep", key, 0 };
	g.nodes[N - 1].nattrs = 1;
	g.nodes[N - 1].attrs = &at;
	ckpt_writer *w;
	cr_assert_eq(ckpt_writer_open(&w, prefix, NULL, NULL), CKPT_OK);
	ckpt_shape sc = shp(0, 0, 0);
	ckpt_tensor *t;
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &sc), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, key, t, 0), CKPT_OK);
	cr_assert_eq(ckpt_writer_set_object_graph(w, &g), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_writer_free(w);
	ckpt_tensor_free(t);
	for (int i = 0; i < N; i++)
		free(g.nodes[i].children);
	free(g.nodes);
	ckpt_checkpoint *ck = NULL;
	cr_assert_eq(ckpt_checkpoint_load(&ck, NULL, prefix, NULL), CKPT_ELIMIT);
	cr_assert_null(ck);
	cr_assert(contains(ckpt_error_last()->message, "deeper than"), "%s", ckpt_error_last()->message);
	/* a live tree that deep cannot be saved either */
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_object *cur = ckpt_checkpoint_root(ck), *next;
	for (int i = 0; i < N; i++) {
		cr_assert_eq(ckpt_status_of(next = ckpt_object_new_child(cur, "c")), CKPT_OK);
		cur = next;
	}
	cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_ELIMIT);
	ckpt_checkpoint_free(ck);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

/* ---- string variables ---- */

static const char *const g_tokens[3] = { "alpha", "", "a much longer token" };

static ckpt_variable *add_tokens(ckpt_object *root, const char *const *vals)
{
	ckpt_object *vocab;
	cr_assert_eq(ckpt_status_of(vocab = ckpt_object_new_child(root, "vocab")), CKPT_OK);
	ckpt_bytes e[3];
	for (int i = 0; i < 3; i++) {
		e[i].len = strlen(vals[i]);
		e[i].data = (char *)vals[i];
	}
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.initial_value = e;
	ckpt_shape sh = shp(1, 3, 0);
	ckpt_variable *v;
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(vocab, "tokens", "vocab/tokens", CKPT_DT_STRING, &sh, &o)),
		     CKPT_OK,
		     "%s", ckpt_error_last()->message);
	return v;
}

static void check_tokens(const ckpt_variable *v, const char *const *want, int replicas)
{
	cr_assert_eq(ckpt_variable_dtype(v), CKPT_DT_STRING);
	cr_assert_eq(ckpt_variable_num_replicas(v), replicas);
	cr_assert(ckpt_variable_replicas_identical(v));
	for (int r = 0; r < replicas; r++) {
		const ckpt_bytes *e = ckpt_variable_replica_data(v, r);
		for (int i = 0; i < 3; i++) {
			cr_assert_eq(e[i].len, strlen(want[i]), "replica %d element %d", r, i);
			cr_assert(e[i].len == 0 || memcmp(e[i].data, want[i], e[i].len) == 0, "replica %d element %d", r, i);
		}
	}
}

/* root/vocab/tokens (string [3]) and root/w (float [2, 3]), saved from 4 mirrored replicas. */
static void save_strings(const char *prefix)
{
	ckpt_strategy *s = mirrored(4);
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_variable *tokens = add_tokens(ckpt_checkpoint_root(ck), g_tokens);
	ckpt_shape k = shp(2, 2, 3);
	ckpt_variable *w;
	cr_assert_eq(ckpt_status_of(w = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "w", "w", CKPT_DT_FLOAT, &k, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	check_tokens(tokens, g_tokens, 4);
	fill(w, 1.0f);
	cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
}

Test(checkpoint, string_variable_save_restore_load_mirrored_4)
{
	char *dir, *prefix = tmp_prefix(&dir, "strings");
	save_strings(prefix);
	/* the file holds the string tensor as saved */
	ckpt_reader *rd;
	cr_assert_eq(ckpt_reader_open(&rd, prefix, NULL), CKPT_OK);
	size_t idx;
	cr_assert_eq(ckpt_reader_find(&idx, rd, "vocab/tokens/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	ckpt_tensor *t;
	cr_assert_eq(ckpt_reader_read(&t, rd, idx), CKPT_OK);
	cr_assert_eq(t->dtype, CKPT_DT_STRING);
	cr_assert_eq(((ckpt_bytes *)t->data)[2].len, strlen(g_tokens[2]));
	ckpt_tensor_free(t);
	ckpt_reader_free(rd);

	/* restore into live mirrored variables */
	ckpt_strategy *s = mirrored(4);
	ckpt_checkpoint *ck;
	static const char *const empty[3] = { "", "", "" };
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_variable *tokens = add_tokens(ckpt_checkpoint_root(ck), empty);
	ckpt_shape k = shp(2, 2, 3);
	ckpt_variable *w;
	cr_assert_eq(ckpt_status_of(w = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "w", "w", CKPT_DT_FLOAT, &k, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_num_unmatched(st), 0);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	check_tokens(tokens, g_tokens, 4);
	cr_assert_float_eq(at(w, 5), 6.0f, 0);
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(ck);

	/* load inside the scope: the string variable is created mirrored from the stored value */
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	int rc = ckpt_checkpoint_load(&ck, &st, prefix, NULL);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(rc, CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_num_unmatched(st), 0);
	ckpt_variable *lt;
	cr_assert_eq(ckpt_status_of(lt = ckpt_checkpoint_find_variable(ck, "vocab/tokens")), CKPT_OK, "%s",
		     ckpt_error_last()->message);
	cr_assert_eq(ckpt_variable_kind(lt), CKPT_VAR_MIRRORED);
	check_tokens(lt, g_tokens, 4);
	/* and it saves again, byte for byte the same strings */
	char *again = ts_join(dir, "again");
	cr_assert_eq(ckpt_checkpoint_write(ck, again), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(ck);
	cr_assert_eq(ckpt_checkpoint_load(&ck, NULL, again, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_status_of(lt = ckpt_checkpoint_find_variable(ck, "vocab/tokens")), CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(lt), CKPT_VAR_PLAIN);
	check_tokens(lt, g_tokens, 1);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	ts_rmtree(dir);
	free(dir);
	free(again);
	free(prefix);
}

Test(checkpoint, transactional_restore_leaves_strings_unchanged)
{
	char *dir, *prefix = tmp_prefix(&dir, "strings");
	save_strings(prefix);
	ckpt_strategy *s = mirrored(4);
	ckpt_checkpoint *ck;
	static const char *const old[3] = { "old", "values", "stay" };
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_variable *tokens = add_tokens(ckpt_checkpoint_root(ck), old);
	/* w, matched after the tokens, has the wrong shape */
	ckpt_shape bad = shp(1, 6, 0);
	ckpt_variable *w;
	cr_assert_eq(ckpt_status_of(w = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "w", "w", CKPT_DT_FLOAT, &bad, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	ckpt_restore_status *st = (ckpt_restore_status *)1;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, prefix), CKPT_EMISMATCH);
	cr_assert_null(st);
	cr_assert(contains(ckpt_error_last()->message, "[2, 3]"), "%s", ckpt_error_last()->message);
	cr_assert(contains(ckpt_error_last()->message, "[6]"), "%s", ckpt_error_last()->message);
	check_tokens(tokens, old, 4);
	/* a string variable of the wrong shape is refused the same way, naming both shapes */
	ckpt_checkpoint_free(ck);
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_object *vocab;
	cr_assert_eq(ckpt_status_of(vocab = ckpt_object_new_child(ckpt_checkpoint_root(ck), "vocab")), CKPT_OK);
	ckpt_shape two = shp(1, 2, 0);
	cr_assert_eq(ckpt_status_of(tokens = ckpt_object_add_variable(vocab, "tokens", "vocab/tokens", CKPT_DT_STRING, &two, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_restore(NULL, ck, prefix), CKPT_EMISMATCH);
	cr_assert(contains(ckpt_error_last()->message, "vocab/tokens"), "%s", ckpt_error_last()->message);
	cr_assert(contains(ckpt_error_last()->message, "[3]"), "%s", ckpt_error_last()->message);
	cr_assert(contains(ckpt_error_last()->message, "[2]"), "%s", ckpt_error_last()->message);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

Test(checkpoint, string_variable_restore_on_create)
{
	char *dir, *prefix = tmp_prefix(&dir, "strings");
	save_strings(prefix);
	ckpt_strategy *s = mirrored(2);
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	/* the vocabulary appears after the restore, inside a mirrored scope */
	static const char *const empty[3] = { "", "", "" };
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	ckpt_variable *tokens = add_tokens(ckpt_checkpoint_root(ck), empty);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	check_tokens(tokens, g_tokens, 2);
	ckpt_restore_status_expect_partial(st);
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

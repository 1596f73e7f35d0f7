/*
 * Object-based checkpoints against real TensorFlow files: load of every TF
 * fixture inside a 4-replica mirrored scope, and key / object-graph
 * derivation matching TF's for a rebuilt live graph (lso_ckpt: Dense + SGD
 * momentum under a loss-scale optimizer; the Keras Adam SavedModel).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

static ckpt_shape shp(int rank, int64_t d0, int64_t d1)
{
	ckpt_shape s;
	int64_t d[2] = { d0, d1 };
	cr_assert_eq(ckpt_shape_make(&s, rank, d), CKPT_OK);
	return s;
}

/* Every "*.index" under dir, as prefixes. */
static void find_prefixes(const char *dir, char ***out, size_t *n)
{
	DIR *d = opendir(dir);
	cr_assert_not_null(d, "%s", dir);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char *p = ts_join(dir, e->d_name);
		struct stat st;
		cr_assert_eq(stat(p, &st), 0);
		size_t l = strlen(p);
		if (S_ISDIR(st.st_mode)) {
			find_prefixes(p, out, n);
			free(p);
		} else if (l > 6 && strcmp(p + l - 6, ".index") == 0) {
			p[l - 6] = '\0';
			*out = realloc(*out, (*n + 1) * sizeof(char *));
			(*out)[(*n)++] = p;
		} else {
			free(p);
		}
	}
	closedir(d);
}

static int read_crc(ckpt_reader *r, const char *key, uint32_t *crc)
{
	size_t idx;
	if (ckpt_reader_find(&idx, r, key) != CKPT_OK)
		return -1;
	ckpt_tensor *t;
	cr_assert_eq(ckpt_reader_read(&t, r, idx), CKPT_OK);
	*crc = ckpt_tensor_crc32(t);
	ckpt_tensor_free(t);
	return 0;
}

static void check_load_mirrored(const char *prefix, int replicas, size_t *nvars)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, replicas), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	ckpt_checkpoint *ck;
	ckpt_restore_status *st;
	int rc = ckpt_checkpoint_load(&ck, &st, prefix, NULL);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(rc, CKPT_OK, "%s: %s", prefix, ckpt_error_last()->message);
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, prefix, NULL), CKPT_OK);
	ckpt_tracked_list *l;
	cr_assert_eq(ckpt_checkpoint_variables(&l, ck), CKPT_OK);
	size_t n = ckpt_tracked_list_num_entries(l);
	cr_assert_gt(n, 0, "%s", prefix);
	for (size_t i = 0; i < n; i++) {
		const ckpt_tracked_variable *t = ckpt_tracked_list_get(l, i);
		cr_assert_not_null(t->source_key, "%s %s", prefix, t->key);
		size_t vi;
		cr_assert_eq(ckpt_reader_find(&vi, r, t->source_key), CKPT_OK, "%s %s", prefix, t->source_key);
		if (ckpt_reader_var(r, vi)->sync == CKPT_SYNC_ON_READ) {
			/* a SavedModel's metrics: saved_model.pb says sync-on-read (tests/formats/test_saved_model.c) */
			cr_assert_eq(ckpt_variable_kind(t->variable), CKPT_VAR_SYNC_ON_READ, "%s %s", prefix, t->key);
			cr_assert_eq(ckpt_variable_aggregation(t->variable), ckpt_reader_var(r, vi)->aggregation);
		} else {
			cr_assert_eq(ckpt_variable_kind(t->variable), CKPT_VAR_MIRRORED, "%s %s", prefix, t->key);
			cr_assert(ckpt_variable_replicas_identical(t->variable), "%s %s", prefix, t->key);
		}
		cr_assert_eq(ckpt_variable_num_replicas(t->variable), replicas);
		uint32_t want;
		cr_assert_eq(read_crc(r, t->source_key, &want), 0, "%s %s", prefix, t->source_key);
		ckpt_tensor *v;
		cr_assert_eq(ckpt_variable_read_tensor(&v, t->variable), CKPT_OK, "%s %s", prefix, t->key);
		cr_assert_eq(ckpt_tensor_crc32(v), want, "%s %s", prefix, t->source_key);
		ckpt_tensor_free(v);
		/* a mirrored run may train it */
		cr_assert_eq(ckpt_variable_strategy(t->variable), s);
	}
	/* every stored value (strings included) becomes a variable */
	size_t un = ckpt_restore_status_num_unmatched(st);
	cr_assert_eq(un, 0, "%s: %zu entries not loaded, first %s", prefix, un,
		un ? ckpt_restore_status_unmatched(st, 0) : "");
	*nvars += n;
	ckpt_restore_status_expect_partial(st);
	ckpt_restore_status_free(st);
	ckpt_tracked_list_free(l);
	ckpt_reader_free(r);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
}

Test(checkpoint_tf, load_every_tf_fixture_mirrored_4_replicas, .timeout = 120)
{
	char **prefixes = NULL;
	size_t n = 0, nvars = 0;
	find_prefixes(ts_fixture("tf"), &prefixes, &n);
	cr_assert_geq(n, 11);
	for (size_t i = 0; i < n; i++) {
		check_load_mirrored(prefixes[i], 4, &nvars);
		free(prefixes[i]);
	}
	free(prefixes);
	cr_assert_gt(nvars, 300);
}

Test(checkpoint_tf, load_by_directory_follows_the_state_file)
{
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_load(&ck, NULL, ts_fixture("tf/tfx__estimator_ckpts"), NULL), CKPT_OK, "%s",
		ckpt_error_last()->message);
	ckpt_variable *gs;
	cr_assert_eq(ckpt_status_of(gs = ckpt_checkpoint_find_variable(ck, "global_step")), CKPT_OK);
	int64_t step = 0;
	cr_assert_eq(ckpt_variable_read(gs, &step, sizeof(step)), CKPT_OK);
	cr_assert_eq(step, 1000);
	cr_assert_eq(ckpt_variable_kind(gs), CKPT_VAR_PLAIN);
	ckpt_checkpoint_free(ck);
}

/* ---- comparing object graphs ---- */

static void assert_graphs_equal_but_values(const ckpt_object_graph *a, const ckpt_object_graph *b, int values);

static void assert_graphs_equal(const ckpt_object_graph *a, const ckpt_object_graph *b)
{
	assert_graphs_equal_but_values(a, b, 1);
}

/* Node for node; has_checkpoint_values too when `values`. */
static void assert_graphs_equal_but_values(const ckpt_object_graph *a, const ckpt_object_graph *b, int values)
{
	cr_assert_eq(a->nnodes, b->nnodes);
	for (size_t i = 0; i < a->nnodes; i++) {
		const ckpt_og_node *x = &a->nodes[i], *y = &b->nodes[i];
		cr_assert_eq(x->nchildren, y->nchildren, "node %zu", i);
		for (size_t c = 0; c < x->nchildren; c++) {
			cr_assert_str_eq(x->children[c].local_name, y->children[c].local_name, "node %zu", i);
			cr_assert_eq(x->children[c].node_id, y->children[c].node_id, "node %zu", i);
		}
		cr_assert_eq(x->nattrs, y->nattrs, "node %zu", i);
		for (size_t k = 0; k < x->nattrs; k++) {
			cr_assert_str_eq(x->attrs[k].name, y->attrs[k].name);
			cr_assert_str_eq(x->attrs[k].full_name, y->attrs[k].full_name);
			cr_assert_str_eq(x->attrs[k].checkpoint_key, y->attrs[k].checkpoint_key);
		}
		cr_assert_eq(x->nslots, y->nslots, "node %zu", i);
		for (size_t k = 0; k < x->nslots; k++) {
			cr_assert_str_eq(x->slots[k].slot_name, y->slots[k].slot_name);
			cr_assert_eq(x->slots[k].original_variable_node_id, y->slots[k].original_variable_node_id);
			cr_assert_eq(x->slots[k].slot_variable_node_id, y->slots[k].slot_variable_node_id);
		}
		cr_assert(!values || x->has_checkpoint_values == y->has_checkpoint_values, "node %zu: has_checkpoint_values %d, "
			"written again %d (-1: absent)", i, x->has_checkpoint_values, y->has_checkpoint_values);
		cr_assert((!x->registered_saver && !y->registered_saver) ||
			(x->registered_saver && y->registered_saver && strcmp(x->registered_saver, y->registered_saver) == 0),
			"node %zu: registered_saver", i);
	}
}

static void assert_same_keys(ckpt_reader *a, ckpt_reader *b)
{
	cr_assert_eq(ckpt_reader_num_entries(a), ckpt_reader_num_entries(b));
	for (size_t i = 0; i < ckpt_reader_num_entries(a); i++) {
		const ckpt_var_info *va = ckpt_reader_var(a, i);
		size_t j;
		cr_assert_eq(ckpt_reader_find(&j, b, va->name), CKPT_OK, "%s", va->name);
		const ckpt_var_info *vb = ckpt_reader_var(b, j);
		cr_assert_eq(va->dtype, vb->dtype, "%s", va->name);
		cr_assert(ckpt_shape_equal(&va->shape, &vb->shape), "%s", va->name);
	}
}

/* The serialized _CHECKPOINTABLE_OBJECT_GRAPH entries of two bundles are byte-identical. */
static void assert_graph_bytes_equal(ckpt_reader *a, ckpt_reader *b)
{
	ckpt_tensor *t[2];
	ckpt_reader *r[2] = { a, b };
	for (int i = 0; i < 2; i++) {
		size_t idx;
		cr_assert_eq(ckpt_reader_find(&idx, r[i], CKPT_OBJECT_GRAPH_KEY), CKPT_OK);
		cr_assert_eq(ckpt_reader_read(&t[i], r[i], idx), CKPT_OK);
	}
	const ckpt_bytes *x = t[0]->data, *y = t[1]->data;
	cr_assert_eq(x->len, y->len);
	cr_assert_eq(memcmp(x->data, y->data, (size_t)x->len), 0, "object graph bytes differ from TF's");
	ckpt_tensor_free(t[0]);
	ckpt_tensor_free(t[1]);
}

static void check_oracle(const char *prefix)
{
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "%s %s/tests/scripts/bundle_check.py '%s'", TS_PYTHON, CKPT_SOURCE_DIR, prefix);
	ts_run_result rr;
	cr_assert_eq(ts_run_sh(&rr, cmd), 0);
	ts_assert_exit(&rr, 0, "%s\n%s", rr.out, rr.err);
	cr_assert(strstr(rr.out, "CHECKS: ALL OK"), "%s", rr.out);
	ts_run_free(&rr);
}

/*
 * tf.keras Sequential([Dense(2)]) with LossScaleOptimizer(SGD(momentum)),
 * saved by model.save_weights in TF 2.2: the model is the root.
 */
typedef struct lso {
	ckpt_checkpoint *ck;
	ckpt_object *base;
	ckpt_variable *kernel, *bias;
} lso;

static void build_lso(lso *m)
{
	ckpt_shape s22 = shp(2, 2, 2), s2 = shp(1, 2, 0), sc = shp(0, 0, 0);
	cr_assert_eq(ckpt_checkpoint_new(&m->ck, NULL), CKPT_OK);
	ckpt_object *root = ckpt_checkpoint_root(m->ck), *dense, *opt, *ls;
	cr_assert_eq(ckpt_status_of(dense = ckpt_object_new_child(root, "layer_with_weights-0")), CKPT_OK);
	cr_assert_eq(ckpt_object_add_child(root, "layer-0", dense), CKPT_OK);
	cr_assert_eq(ckpt_status_of(opt = ckpt_object_new_child(root, "optimizer")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(m->kernel = ckpt_object_add_variable(dense, "kernel", "sequential/dense/kernel", CKPT_DT_FLOAT, &s22, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(m->bias = ckpt_object_add_variable(dense, "bias", "sequential/dense/bias", CKPT_DT_FLOAT, &s2, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_optimizer_new(&m->base, "SGD"), CKPT_OK);
	cr_assert_eq(ckpt_object_add_child(opt, "base_optimizer", m->base), CKPT_OK);
	cr_assert_eq(ckpt_status_of(ls = ckpt_object_new_child(opt, "loss_scale")), CKPT_OK);
	ckpt_variable *v;
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(m->base, "iter", "SGD/iter", CKPT_DT_INT64, &sc, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(m->base, "decay", "SGD/decay", CKPT_DT_FLOAT, &sc, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(m->base, "learning_rate", "SGD/learning_rate", CKPT_DT_FLOAT, &sc, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(m->base, "momentum", "SGD/momentum", CKPT_DT_FLOAT, &sc, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(ls, "current_loss_scale", "current_loss_scale", CKPT_DT_FLOAT, &sc, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(ls, "good_steps", "good_steps", CKPT_DT_INT64, &sc, NULL)),
		     CKPT_OK);
}

Test(checkpoint_tf, lso_ckpt_keys_and_object_graph_match_tf)
{
	const char *fixture = ts_fixture("tf/tensorflow__lso_ckpt_tf2.2/ckpt");
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 2), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	lso m;
	build_lso(&m);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, m.ck, fixture), CKPT_OK, "%s", ckpt_error_last()->message);
	/* the momentum slots are created by the optimizer later: restored on create */
	cr_assert_eq(ckpt_restore_status_num_unmatched(st), 2);
	ckpt_variable *mk, *mb;
	cr_assert_eq(ckpt_status_of(mk = ckpt_optimizer_create_slot(m.base, m.kernel, "momentum", NULL)), CKPT_OK);
	cr_assert_eq(ckpt_status_of(mb = ckpt_optimizer_create_slot(m.base, m.bias, "momentum", NULL)), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	float k[4], mom[4];
	cr_assert_eq(ckpt_variable_read(m.kernel, k, sizeof(k)), CKPT_OK);
	cr_assert_float_eq(k[0], 9.22968483f, 1e-6);
	cr_assert_float_eq(k[3], 9.75736237f, 1e-6);
	cr_assert_eq(ckpt_variable_read(mk, mom, sizeof(mom)), CKPT_OK);
	cr_assert_float_eq(mom[1], 9.91769123f, 1e-6);
	cr_assert(ckpt_variable_replicas_identical(mk));
	cr_assert_eq(ckpt_variable_kind(mk), CKPT_VAR_MIRRORED);
	cr_assert_str_eq(ckpt_variable_name(mk), "SGD/sequential/dense/kernel/momentum");

	/* write it back: same keys, same object graph, same values */
	char *dir = ts_tmpdir(), *prefix = ts_join(dir, "ckpt");
	cr_assert_eq(ckpt_checkpoint_write(m.ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	check_oracle(prefix);
	ckpt_reader *a, *b;
	cr_assert_eq(ckpt_reader_open(&a, fixture, NULL), CKPT_OK);
	cr_assert_eq(ckpt_reader_open(&b, prefix, NULL), CKPT_OK);
	assert_same_keys(a, b);
	/*
	 * TF 2.2 wrote no has_checkpoint_values; this tree is built here, so it is
	 * written as today's TF writes it, with the field on every node
	 * (new_tree_writes_has_checkpoint_values_on_every_node checks the values).
	 * Everything else is TF's graph, byte for byte.
	 */
	const ckpt_object_graph *ga = ckpt_reader_object_graph(a), *gb = ckpt_reader_object_graph(b);
	assert_graphs_equal_but_values(ga, gb, 0);
	ckpt_object_graph *want;
	cr_assert_eq(ckpt_object_graph_copy(&want, ga), CKPT_OK);
	for (size_t i = 0; i < want->nnodes; i++) {
		cr_assert_eq(ga->nodes[i].has_checkpoint_values, -1);
		cr_assert_geq(gb->nodes[i].has_checkpoint_values, 0, "node %zu", i);
		want->nodes[i].has_checkpoint_values = gb->nodes[i].has_checkpoint_values;
	}
	void *wb;
	size_t wn;
	cr_assert_eq(ckpt_object_graph_serialize(&wb, &wn, want), CKPT_OK);
	size_t gi;
	ckpt_tensor *gt;
	cr_assert_eq(ckpt_reader_find(&gi, b, CKPT_OBJECT_GRAPH_KEY), CKPT_OK);
	cr_assert_eq(ckpt_reader_read(&gt, b, gi), CKPT_OK);
	const ckpt_bytes *ours = gt->data;
	cr_assert(ours->len == wn && memcmp(ours->data, wb, wn) == 0, "the graph differs from TF's beyond has_checkpoint_values");
	free(wb);
	ckpt_tensor_free(gt);
	ckpt_object_graph_free(want);
	for (size_t i = 0; i < ckpt_reader_num_entries(a); i++) {
		const char *key = ckpt_reader_var(a, i)->name;
		if (strcmp(key, CKPT_OBJECT_GRAPH_KEY) == 0)
			continue;
		uint32_t x, y;
		cr_assert_eq(read_crc(a, key, &x), 0);
		cr_assert_eq(read_crc(b, key, &y), 0);
		cr_assert_eq(x, y, "%s", key);
	}
	ckpt_reader_free(a);
	ckpt_reader_free(b);
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(m.ck);
	ckpt_object_free(m.base);
	ckpt_strategy_free(s);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

/* tf.keras Sequential of three Dense layers with Adam and two metrics, saved as a SavedModel (TF 2.x). */
Test(checkpoint_tf, keras_adam_savedmodel_keys_match_tf)
{
	const char *fixture = ts_fixture("tf/tfx__keras_adam_savedmodel/variables/variables");
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_object *root = ckpt_checkpoint_root(ck), *opt, *keras_api, *metrics;
	const int64_t dims[3][2] = { { 4, 8 }, { 8, 8 }, { 8, 3 } };
	ckpt_variable *vars[6];
	for (int i = 0; i < 3; i++) {
		char name[64];
		snprintf(name, sizeof(name), "layer_with_weights-%d", i);
		ckpt_object *layer;
		cr_assert_eq(ckpt_status_of(layer = ckpt_object_new_child(root, name)), CKPT_OK);
		ckpt_shape ks = shp(2, dims[i][0], dims[i][1]), bs = shp(1, dims[i][1], 0);
		snprintf(name, sizeof(name), "dense_%d/kernel", i);
		cr_assert_eq(ckpt_status_of(vars[2 * i] = ckpt_object_add_variable(layer, "kernel", name, CKPT_DT_FLOAT, &ks, NULL)),
			     CKPT_OK);
		snprintf(name, sizeof(name), "dense_%d/bias", i);
		cr_assert_eq(ckpt_status_of(vars[2 * i + 1] = ckpt_object_add_variable(layer, "bias", name, CKPT_DT_FLOAT, &bs, NULL)),
			     CKPT_OK);
	}
	cr_assert_eq(ckpt_optimizer_new(&opt, "Adam"), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_add(ck, "optimizer", opt), CKPT_OK);
	ckpt_shape sc = shp(0, 0, 0);
	ckpt_variable *v;
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(opt, "iter", "Adam/iter", CKPT_DT_INT64, &sc, NULL)),
		     CKPT_OK);
	const char *hyper[] = { "beta_1", "beta_2", "decay", "learning_rate" };
	for (int i = 0; i < 4; i++)
		cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(opt, hyper[i], hyper[i], CKPT_DT_FLOAT, &sc, NULL)),
			     CKPT_OK);
	/* slots are added per name, then per variable (Keras add_slot order) */
	const char *slot_names[2] = { "m", "v" };
	for (int sn = 0; sn < 2; sn++)
		for (int i = 0; i < 6; i++)
			cr_assert_eq(ckpt_status_of(v = ckpt_optimizer_create_slot(opt, vars[i], slot_names[sn], NULL)),
				     CKPT_OK);
	cr_assert_eq(ckpt_status_of(keras_api = ckpt_object_new_child(root, "keras_api")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(metrics = ckpt_object_new_child(keras_api, "metrics")), CKPT_OK);
	for (int i = 0; i < 2; i++) {
		char name[8];
		snprintf(name, sizeof(name), "%d", i);
		ckpt_object *mt;
		cr_assert_eq(ckpt_status_of(mt = ckpt_object_new_child(metrics, name)), CKPT_OK);
		cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(mt, "total", "total", CKPT_DT_FLOAT, &sc, NULL)),
			     CKPT_OK);
		cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(mt, "count", "count", CKPT_DT_FLOAT, &sc, NULL)),
			     CKPT_OK);
	}
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, fixture), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);

	char *dir = ts_tmpdir(), *prefix = ts_join(dir, "ckpt");
	cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	check_oracle(prefix);
	ckpt_reader *a, *b;
	cr_assert_eq(ckpt_reader_open(&a, fixture, NULL), CKPT_OK);
	cr_assert_eq(ckpt_reader_open(&b, prefix, NULL), CKPT_OK);
	assert_same_keys(a, b);
	/*
	 * The SavedModel graph also has function and signature nodes; compare
	 * what describes the values: each key's attribute and every slot
	 * reference (primary key, slot name, slot key).
	 */
	const ckpt_object_graph *ga = ckpt_reader_object_graph(a), *gb = ckpt_reader_object_graph(b);
	size_t slots_a = 0, slots_b = 0;
	for (int pass = 0; pass < 2; pass++) {
		const ckpt_object_graph *x = pass ? gb : ga, *y = pass ? ga : gb;
		for (size_t i = 0; i < x->nnodes; i++) {
			for (size_t k = 0; k < x->nodes[i].nslots; k++) {
				const ckpt_og_slot *sx = &x->nodes[i].slots[k];
				const char *pk = x->nodes[sx->original_variable_node_id].attrs[0].checkpoint_key;
				const char *sk = x->nodes[sx->slot_variable_node_id].attrs[0].checkpoint_key;
				int found = 0;
				for (size_t j = 0; j < y->nnodes && !found; j++)
					for (size_t q = 0; q < y->nodes[j].nslots && !found; q++) {
						const ckpt_og_slot *sy = &y->nodes[j].slots[q];
						found = strcmp(sy->slot_name, sx->slot_name) == 0 &&
							strcmp(y->nodes[sy->original_variable_node_id].attrs[0].checkpoint_key, pk) == 0 &&
							strcmp(y->nodes[sy->slot_variable_node_id].attrs[0].checkpoint_key, sk) == 0;
					}
				cr_assert(found, "slot %s of %s (%s) only in %s", sx->slot_name, pk, sk, pass ? "ours" : "TF's");
				if (pass)
					slots_b++;
				else
					slots_a++;
			}
		}
	}
	cr_assert_eq(slots_a, 12);
	cr_assert_eq(slots_b, 12);
	ckpt_reader_free(a);
	ckpt_reader_free(b);
	ckpt_object_free(opt);
	ckpt_checkpoint_free(ck);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

/* load then write: TF's own object graph comes back node for node */
Test(checkpoint_tf, load_then_write_reproduces_tf_object_graph)
{
	const char *fixtures[] = { "tf/tensorflow__lso_ckpt_tf2.2/ckpt", "tf/tensorflow__VarsAndArithmeticObjectGraph",
		"tf/tfjs__int64_multiply" };
	for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++) {
		const char *fixture = ts_fixture(fixtures[f]);
		ckpt_strategy *s;
		cr_assert_eq(ckpt_strategy_mirrored_new(&s, 2), CKPT_OK);
		cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
		ckpt_checkpoint *ck;
		cr_assert_eq(ckpt_checkpoint_load(&ck, NULL, fixture, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
		cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
		char *dir = ts_tmpdir(), *prefix = ts_join(dir, "ckpt");
		cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
		check_oracle(prefix);
		ckpt_reader *a, *b;
		cr_assert_eq(ckpt_reader_open(&a, fixture, NULL), CKPT_OK);
		cr_assert_eq(ckpt_reader_open(&b, prefix, NULL), CKPT_OK);
		const ckpt_object_graph *ga = ckpt_reader_object_graph(a), *gb = ckpt_reader_object_graph(b);
		if (f == 0) {
			assert_same_keys(a, b);
			assert_graphs_equal(ga, gb);
			assert_graph_bytes_equal(a, b);
		} else {
			/* every key comes back, string-valued ones included */
			for (size_t i = 0; i < ckpt_reader_num_entries(a); i++) {
				const ckpt_var_info *vi = ckpt_reader_var(a, i);
				size_t j;
				cr_assert_eq(ckpt_reader_find(&j, b, vi->name), CKPT_OK, "%s", vi->name);
			}
		}
		ckpt_reader_free(a);
		ckpt_reader_free(b);
		ckpt_checkpoint_free(ck);
		ckpt_strategy_free(s);
		ts_rmtree(dir);
		free(dir);
		free(prefix);
	}
}

/*
 * Every TensorFlow fixture with an object graph, loaded and written again:
 * its graph comes back node for node, has_checkpoint_values (present or
 * absent as TF wrote it) and empty full_names included, and byte for byte
 * where TF wrote its fields in field-number order (serving's half_plus_two
 * has them in another order). A TF_TABLE written by TensorFlow is in
 * tf_interop (TensorFlow writes it at test time).
 */
Test(checkpoint_tf, resave_writes_has_checkpoint_values_as_tensorflow, .timeout = 120)
{
	static const struct {
		const char *path;
		int same_bytes;
	} fixtures[] = {
		{ "tf/tensorflow__lso_ckpt_tf2.2/ckpt", 1 },
		{ "tf/tensorflow__VarsAndArithmeticObjectGraph", 1 },
		{ "tf/tensorflow__OptimizerSlotVariableModule_snappy", 1 },
		{ "tf/serving__half_plus_two_tf2_cpu_snappy/00000123", 0 },
		{ "tf/tfx__keras_adam_savedmodel", 1 },
		{ "tf/tfjs__int64_multiply", 1 },
	};
	int with_field = 0;
	for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++) {
		const char *fixture = ts_fixture(fixtures[f].path);
		ckpt_checkpoint *ck;
		cr_assert_eq(ckpt_checkpoint_load(&ck, NULL, fixture, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
		char *dir = ts_tmpdir(), *prefix = ts_join(dir, "ckpt");
		cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
		ckpt_reader *a, *b;
		cr_assert_eq(ckpt_reader_open(&a, fixture, NULL), CKPT_OK);
		cr_assert_eq(ckpt_reader_open(&b, prefix, NULL), CKPT_OK);
		const ckpt_object_graph *ga = ckpt_reader_object_graph(a), *gb = ckpt_reader_object_graph(b);
		cr_assert(ga && gb, "%s", fixtures[f].path);
		with_field += ga->nnodes && ga->nodes[0].has_checkpoint_values >= 0;
		assert_same_keys(a, b);
		assert_graphs_equal(ga, gb);
		if (fixtures[f].same_bytes)
			assert_graph_bytes_equal(a, b);
		ckpt_reader_free(a);
		ckpt_reader_free(b);
		ckpt_checkpoint_free(ck);
		ts_rmtree(dir);
		free(dir);
		free(prefix);
	}
	cr_assert_eq(with_field, 2, "fixtures whose graph has has_checkpoint_values: the test covers both kinds");
}

/* A tree the library builds: has_checkpoint_values on every node, by TensorFlow's rule. */
Test(checkpoint_tf, new_tree_writes_has_checkpoint_values_on_every_node)
{
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_object *root = ckpt_checkpoint_root(ck), *model, *dense, *empty, *holder, *opt;
	cr_assert_eq(ckpt_status_of(model = ckpt_object_new_child(root, "model")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(dense = ckpt_object_new_child(model, "dense")), CKPT_OK);
	ckpt_shape sh = shp(1, 3, 0);
	ckpt_variable *kernel;
	cr_assert_eq(ckpt_status_of(kernel = ckpt_object_add_variable(dense, "kernel", "dense/kernel", CKPT_DT_FLOAT, &sh, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(empty = ckpt_object_new_child(root, "empty")), CKPT_OK); /* no values below it */
	cr_assert_eq(ckpt_status_of(holder = ckpt_object_new_child(root, "holder")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(empty = ckpt_object_new_child(holder, "nothing")), CKPT_OK); /* children, but no values */
	cr_assert_eq(ckpt_optimizer_new(&opt, "Adam"), CKPT_OK);
	cr_assert_eq(ckpt_object_add_child(root, "optimizer", opt), CKPT_OK);
	cr_assert_eq(ckpt_status_of(ckpt_optimizer_create_slot(opt, kernel, "m", NULL)), CKPT_OK);
	char *dir = ts_tmpdir(), *prefix = ts_join(dir, "ckpt");
	cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, prefix, NULL), CKPT_OK);
	const ckpt_object_graph *g = ckpt_reader_object_graph(r);
	cr_assert_not_null(g);
	/* the path of each node, from the root's edges (BFS ids), and what TF would write for it */
	static const struct {
		const char *path;
		int want;
	} expect[] = { { "", 1 }, { "model", 1 }, { "model/dense", 1 }, { "model/dense/kernel", 1 }, { "empty", 0 },
		{ "holder", 0 }, { "holder/nothing", 0 }, { "optimizer", 1 } };
	char **paths = calloc(g->nnodes, sizeof(*paths));
	paths[0] = strdup("");
	for (size_t i = 0; i < g->nnodes; i++) {
		cr_assert(g->nodes[i].has_checkpoint_values >= 0, "node %zu has no has_checkpoint_values", i);
		for (size_t c = 0; paths[i] && c < g->nodes[i].nchildren; c++) {
			int id = g->nodes[i].children[c].node_id;
			if (!paths[id])
				paths[id] = *paths[i] ? ts_join(paths[i], g->nodes[i].children[c].local_name)
					: strdup(g->nodes[i].children[c].local_name);
		}
	}
	for (size_t e = 0; e < sizeof(expect) / sizeof(expect[0]); e++) {
		size_t i = 0;
		while (i < g->nnodes && !(paths[i] && strcmp(paths[i], expect[e].path) == 0))
			i++;
		cr_assert_lt(i, g->nnodes, "no node '%s'", expect[e].path);
		cr_assert_eq(g->nodes[i].has_checkpoint_values, expect[e].want, "'%s'", expect[e].path);
	}
	/* the slot variable's node (reached through the optimizer's slot_variables only) holds a value */
	int slot_seen = 0;
	for (size_t i = 0; i < g->nnodes; i++)
		for (size_t k = 0; k < g->nodes[i].nslots; k++) {
			cr_assert_eq(g->nodes[g->nodes[i].slots[k].slot_variable_node_id].has_checkpoint_values, 1);
			slot_seen = 1;
		}
	cr_assert(slot_seen);
	for (size_t i = 0; i < g->nnodes; i++)
		free(paths[i]);
	free(paths);
	ckpt_reader_free(r);
	ckpt_checkpoint_free(ck);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

/*
 * Every Keras fixture, each expected to load (the suite is built with HDF5
 * and libarchive: keras_test.h). A fixture added to the directory without
 * an entry here fails the test; none is unsupported today.
 */
static const char *const keras_fixtures[] = {
	"FlowNet-ANN__keras3.9.2_mlp_adam.keras",
	"dl4j-test-resources__keras1.2.2_bidirectional_lstm.h5",
	"dl4j-test-resources__keras1.2.2_lstm_tf_fullmodel.h5",
	"dl4j-test-resources__keras1.2.2_lstm_tf_weightsonly.h5",
	"dl4j-test-resources__keras2.0.6_lstm_fullmodel_rmsprop.h5",
	"dl4j-test-resources__keras2.0.6_lstm_weightsonly.h5",
	"dl4j-test-resources__keras2.0.9_sequential_lambda.h5",
	"dl4j-test-resources__keras2.1.3_cnn_batchnorm.h5",
	"dl4j-test-resources__tfkeras2.4.0_embedding_conv1d_adam.hdf5",
	"hls4ml__tfkeras2.11.0_conv1d_weightsonly.h5",
	"keras__keras3.15.0_nested_container.keras",
	"keras__keras3.8.0_masking_lstm_mlx.keras",
	"tiny__keras3.7.0_legacy_h5_resnet_adam.h5",
	"tiny__tfkeras2.4.0_resnet_batchnorm_adam.h5",
	"synthetic/SYNTHETIC_keras3_float16.weights.h5",
	"synthetic/SYNTHETIC_legacy_chunked_layer_names.h5",
};
#define NKERAS (sizeof(keras_fixtures) / sizeof(keras_fixtures[0]))

static int is_keras_name(const char *n)
{
	size_t l = strlen(n);
	return (l > 3 && strcmp(n + l - 3, ".h5") == 0) || (l > 5 && strcmp(n + l - 5, ".hdf5") == 0) ||
		(l > 6 && strcmp(n + l - 6, ".keras") == 0);
}

/* Every Keras file under fixtures/keras (and synthetic/) is in keras_fixtures. */
static void check_keras_listing(const char *sub)
{
	char *dir = ts_join(ts_fixture("keras"), sub);
	DIR *d = opendir(dir);
	cr_assert_not_null(d, "%s", dir);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!is_keras_name(e->d_name))
			continue;
		char rel[512];
		snprintf(rel, sizeof(rel), "%s%s", sub, e->d_name);
		int listed = 0;
		for (size_t i = 0; i < NKERAS; i++)
			listed |= strcmp(keras_fixtures[i], rel) == 0;
		cr_assert(listed, "fixture keras/%s has no expected outcome in keras_fixtures", rel);
	}
	closedir(d);
	free(dir);
}

/* Keras files: the reader's synthesized graph (or, where it maps nothing, a flat tree of the datasets) */
Test(checkpoint_tf, load_every_keras_fixture_mirrored, .timeout = 120)
{
	check_keras_listing("");
	check_keras_listing("synthetic/");
	size_t loaded = 0;
	for (size_t fi = 0; fi < NKERAS; fi++) {
		char *path = ts_join(ts_fixture("keras"), keras_fixtures[fi]);
		ckpt_reader *r;
		int rc = ckpt_reader_open(&r, path, NULL);
		cr_assert_eq(rc, CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
		ckpt_strategy *s;
		cr_assert_eq(ckpt_strategy_mirrored_new(&s, 2), CKPT_OK);
		cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
		ckpt_checkpoint *ck;
		ckpt_restore_status *st;
		rc = ckpt_checkpoint_load(&ck, &st, path, NULL);
		cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
		cr_assert_eq(rc, CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
		ckpt_tracked_list *l2;
		cr_assert_eq(ckpt_checkpoint_variables(&l2, ck), CKPT_OK);
		size_t nstored = 0;
		for (size_t i = 0; i < ckpt_reader_num_entries(r); i++)
			nstored += ckpt_reader_var(r, i)->dtype != CKPT_DT_STRING;
		cr_assert_eq(ckpt_tracked_list_num_entries(l2), nstored, "%s", path);
		cr_assert_eq(ckpt_restore_status_num_unmatched(st), ckpt_reader_num_entries(r) - nstored, "%s", path);
		for (size_t i = 0; i < ckpt_tracked_list_num_entries(l2); i++) {
			const ckpt_tracked_variable *t = ckpt_tracked_list_get(l2, i);
			uint32_t want;
			cr_assert_eq(read_crc(r, t->source_key, &want), 0, "%s %s", path, t->source_key);
			ckpt_tensor *v;
			cr_assert_eq(ckpt_tensor_new(&v, ckpt_variable_dtype(t->variable), ckpt_variable_shape(t->variable)),
				CKPT_OK);
			cr_assert_eq(ckpt_variable_read(t->variable, v->data, (size_t)v->nbytes), CKPT_OK);
			cr_assert_eq(ckpt_tensor_crc32(v), want, "%s %s", path, t->source_key);
			cr_assert_eq(ckpt_variable_kind(t->variable), CKPT_VAR_MIRRORED);
			cr_assert(ckpt_variable_replicas_identical(t->variable));
			ckpt_tensor_free(v);
		}
		loaded++;
		ckpt_restore_status_expect_partial(st);
		ckpt_restore_status_free(st);
		ckpt_tracked_list_free(l2);
		ckpt_checkpoint_free(ck);
		ckpt_strategy_free(s);
		ckpt_reader_free(r);
		free(path);
	}
	cr_assert_eq(loaded, NKERAS);
}

static int metrics_sync_on_read(ckpt_variable_options *o, const char *key, const ckpt_var_info *info, void *ctx)
{
	int *calls = ctx;
	(*calls)++;
	if (info->role == CKPT_ROLE_METRIC || strstr(key, "/metrics/")) {
		o->sync = CKPT_SYNC_ON_READ;
		o->aggregation = CKPT_AGG_SUM;
		o->trainable = 0;
	}
	return CKPT_OK;
}

Test(checkpoint_tf, load_hook_makes_metrics_sync_on_read)
{
	const char *fixture = ts_fixture("tf/tfx__keras_adam_savedmodel/variables/variables");
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 4), CKPT_OK);
	int calls = 0;
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.load_variable = metrics_sync_on_read;
	o.load_ctx = &calls;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_load(&ck, NULL, fixture, &o), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(calls, 27); /* 6 weights, 12 slots, 5 optimizer scalars, 4 metric accumulators */
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, fixture, NULL), CKPT_OK);
	ckpt_tracked_list *l;
	cr_assert_eq(ckpt_checkpoint_variables(&l, ck), CKPT_OK);
	int metrics = 0;
	for (size_t i = 0; i < ckpt_tracked_list_num_entries(l); i++) {
		const ckpt_tracked_variable *t = ckpt_tracked_list_get(l, i);
		size_t idx;
		cr_assert_eq(ckpt_reader_find(&idx, r, t->source_key), CKPT_OK);
		if (!strstr(t->key, "/metrics/")) {
			cr_assert_eq(ckpt_variable_kind(t->variable), CKPT_VAR_MIRRORED, "%s", t->key);
			continue;
		}
		metrics++;
		cr_assert_eq(ckpt_variable_kind(t->variable), CKPT_VAR_SYNC_ON_READ, "%s", t->key);
		float stored, agg;
		cr_assert_eq(ckpt_reader_read_into(r, idx, &stored, sizeof(stored)), CKPT_OK);
		cr_assert_eq(ckpt_variable_read(t->variable, &agg, sizeof(agg)), CKPT_OK);
		cr_assert_eq(memcmp(&agg, &stored, sizeof(agg)), 0, "%s: aggregate %g, stored %g", t->key, (double)agg,
			(double)stored);
		/* the whole value in replica 0, zeros elsewhere: the aggregate is exact */
		cr_assert_eq(*(const float *)ckpt_variable_replica_data(t->variable, 0), stored, "%s", t->key);
		for (int k = 1; k < 4; k++)
			cr_assert_eq(*(const float *)ckpt_variable_replica_data(t->variable, k), 0.0f, "%s", t->key);
	}
	cr_assert_eq(metrics, 4);
	ckpt_tracked_list_free(l);
	ckpt_reader_free(r);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
}

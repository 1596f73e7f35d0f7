/*
 * The mirrored checkpoint paths with replicas in device memory: the same
 * model built over the host (ckpt_strategy_mirrored_new) and over the
 * guarded test provider (ckpt_strategy_mirrored_on: PROT_NONE device
 * memory, copies landing only at synchronize), so a path that dereferences
 * a replica crashes and one that forgets to synchronize reads stale bytes.
 * Save, async save and the divergence check write files byte-identical to
 * the host's; restore, load and restore-on-create of slots put the file's
 * values in every device replica; mistakes are caught without changing a
 * live variable.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "guarded_provider.h"
#include "test_support.h"

#define NW 70000   /* floats in w (several staging chunks of the aggregation) */
#define NB 33
#define REPLICAS 3

typedef struct model {
	ckpt_checkpoint *ck;
	ckpt_object *net, *opt;
	ckpt_variable *w, *b, *total, *acc, *plain, *step;
} model;

static ckpt_shape shape1(int64_t n)
{
	ckpt_shape s;
	ckpt_shape_make(&s, 1, &n);
	return s;
}

static void fill_f32(ckpt_variable *v, float base)
{
	size_t n = (size_t)ckpt_variable_nbytes(v) / sizeof(float);
	float *buf = malloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		buf[i] = base + (float)i * 0.25f;
	cr_assert_eq(ckpt_variable_assign(v, buf, n * sizeof(float)), CKPT_OK, "%s", ckpt_error_last()->message);
	free(buf);
}

static void expect_f32(ckpt_variable *v, float base)
{
	size_t n = (size_t)ckpt_variable_nbytes(v) / sizeof(float);
	float *buf = malloc(n * sizeof(float));
	cr_assert_eq(ckpt_variable_read(v, buf, n * sizeof(float)), CKPT_OK, "%s", ckpt_error_last()->message);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(buf[i], base + (float)i * 0.25f, "'%s'[%zu] = %g, want %g", ckpt_variable_name(v), i,
			(double)buf[i], (double)(base + (float)i * 0.25f));
	free(buf);
	cr_assert_eq(ckpt_variable_replicas_identical(v), 1, "'%s': replicas differ", ckpt_variable_name(v));
}

/* model/{w, b} mirrored, model/total sync-on-read SUM int64, model/acc MEAN float, plain (outside the scope), step. */
static void build(model *m, ckpt_strategy *s, int check_mirrored)
{
	memset(m, 0, sizeof(*m));
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	o.check_mirrored = check_mirrored;
	cr_assert_eq(ckpt_checkpoint_new(&m->ck, &o), CKPT_OK);
	ckpt_shape sw = shape1(NW), sb = shape1(NB), s4 = shape1(4), sc = { 0 };
	cr_assert_eq(ckpt_status_of(m->net = ckpt_object_new_child(ckpt_checkpoint_root(m->ck), "model")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(m->plain = ckpt_object_add_variable(m->net, "plain", "plain", CKPT_DT_FLOAT, &sb, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_status_of(m->w = ckpt_object_add_variable(m->net, "w", "w", CKPT_DT_FLOAT, &sw, NULL)),
		     CKPT_OK,
		     "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_status_of(m->b = ckpt_object_add_variable(m->net, "b", "b", CKPT_DT_FLOAT, &sb, NULL)),
		     CKPT_OK);
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.sync = CKPT_SYNC_ON_READ;
	vo.aggregation = CKPT_AGG_SUM;
	cr_assert_eq(ckpt_status_of(m->total = ckpt_object_add_variable(m->net, "total", "total", CKPT_DT_INT64, &s4, &vo)),
		     CKPT_OK);
	vo.aggregation = CKPT_AGG_MEAN;
	cr_assert_eq(ckpt_status_of(m->acc = ckpt_object_add_variable(m->net, "acc", "acc", CKPT_DT_FLOAT, &s4, &vo)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(m->step = ckpt_object_add_variable(ckpt_checkpoint_root(m->ck), "step", "step", CKPT_DT_INT64, &sc, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_optimizer_new(&m->opt, "Adam"), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_add(m->ck, "optimizer", m->opt), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
}

static void create_slots(model *m, ckpt_strategy *s, ckpt_variable **slot)
{
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_status_of(slot ? (*slot = ckpt_optimizer_create_slot(m->opt, m->w, "m", NULL)) : ckpt_optimizer_create_slot(m->opt, m->w, "m", NULL)),
		     CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
}

static void set_values(model *m, float base)
{
	fill_f32(m->w, base);
	fill_f32(m->b, base + 1000);
	fill_f32(m->plain, base - 5);
	fill_f32(m->acc, base + 7);
	int64_t tot[4] = { 1, -2, (int64_t)base, 1ll << 40 }, step = (int64_t)base * 3;
	cr_assert_eq(ckpt_variable_assign(m->total, tot, sizeof(tot)), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign(m->step, &step, sizeof(step)), CKPT_OK);
}

static void expect_values(model *m, float base)
{
	expect_f32(m->w, base);
	expect_f32(m->b, base + 1000);
	expect_f32(m->plain, base - 5);
	float acc[4];
	cr_assert_eq(ckpt_variable_read(m->acc, acc, sizeof(acc)), CKPT_OK);
	cr_assert_eq(acc[3], base + 7 + 0.75f);
	int64_t tot[4], step;
	cr_assert_eq(ckpt_variable_read(m->total, tot, sizeof(tot)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(tot[2], (int64_t)base);
	cr_assert_eq(tot[3], 1ll << 40);
	cr_assert_eq(ckpt_variable_read(m->step, &step, sizeof(step)), CKPT_OK);
	cr_assert_eq(step, (int64_t)base * 3);
}

static void free_model(model *m)
{
	ckpt_object_free(m->opt);
	ckpt_checkpoint_free(m->ck);
}

static ckpt_strategy *guarded_strategy(ts_guarded *g)
{
	ckpt_strategy *s;
	int devs[REPLICAS] = { 0, 0, 1 }; /* two replicas share device 0 */
	cr_assert_eq(ckpt_strategy_mirrored_on(&s, ts_guarded_provider(g), devs, REPLICAS), CKPT_OK,
		"%s", ckpt_error_last()->message);
	return s;
}

static ckpt_strategy *host_strategy(void)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, REPLICAS), CKPT_OK);
	return s;
}

static void assert_same_file(const char *a, const char *b)
{
	size_t na, nb;
	char *x = ts_read_file(a, &na), *y = ts_read_file(b, &nb);
	cr_assert(x && y, "cannot read %s or %s", a, b);
	cr_assert_eq(na, nb, "%s is %zu bytes, %s %zu", a, na, b, nb);
	cr_assert_eq(memcmp(x, y, na), 0, "%s and %s differ", a, b);
	free(x);
	free(y);
}

static void assert_same_bundle(const char *a, const char *b)
{
	char pa[4096], pb[4096];
	snprintf(pa, sizeof(pa), "%s.index", a);
	snprintf(pb, sizeof(pb), "%s.index", b);
	assert_same_file(pa, pb);
	snprintf(pa, sizeof(pa), "%s.data-00000-of-00001", a);
	snprintf(pb, sizeof(pb), "%s.data-00000-of-00001", b);
	assert_same_file(pa, pb);
}

/* The host strategy's file of the model with values `base` (slot included). */
static void host_file(const char *prefix, float base)
{
	ckpt_strategy *s = host_strategy();
	model m;
	ckpt_variable *slot;
	build(&m, s, 0);
	create_slots(&m, s, &slot);
	set_values(&m, base);
	fill_f32(slot, base + 50);
	cr_assert_eq(ckpt_checkpoint_write(m.ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	free_model(&m);
	ckpt_strategy_free(s);
}

Test(device_mirrored, save_is_byte_identical_to_the_host_strategys)
{
	char *dir = ts_tmpdir(), *hp = ts_join(dir, "host"), *gp = ts_join(dir, "guarded");
	host_file(hp, 3);
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_strategy *s = guarded_strategy(g);
	model m;
	ckpt_variable *slot;
	build(&m, s, 1); /* with the divergence check: it reads every device replica too */
	create_slots(&m, s, &slot);
	set_values(&m, 3);
	fill_f32(slot, 53);
	ts_guarded_stats before = ts_guarded_get_stats(g);
	cr_assert_eq(ckpt_checkpoint_write(m.ck, gp), CKPT_OK, "%s", ckpt_error_last()->message);
	ts_guarded_stats after = ts_guarded_get_stats(g);
	assert_same_bundle(hp, gp);
	/* the values came off the devices through the provider, into its pinned memory */
	cr_assert_geq(after.d2h_pinned_bytes - before.d2h_pinned_bytes, (uint64_t)NW * sizeof(float));
	free_model(&m);
	ckpt_strategy_free(s);
	cr_assert_eq(ts_guarded_get_stats(g).device_live, 0, "device buffers leaked");
	ts_guarded_free(g);
	ts_rmtree(dir);
	free(hp);
	free(gp);
	free(dir);
}

Test(device_mirrored, save_streams_values_larger_than_the_ring_through_it)
{
	char *dir = ts_tmpdir(), *hp = ts_join(dir, "host"), *gp = ts_join(dir, "guarded");
	host_file(hp, 6);
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_strategy *s = guarded_strategy(g);
	model m;
	ckpt_variable *slot;
	build(&m, s, 1);
	create_slots(&m, s, &slot);
	set_values(&m, 6);
	fill_f32(slot, 56);
	/* the smallest ring: w and its slot (280 KB each) are over twice its size, each more than four halves */
	cr_assert_eq(ckpt_strategy_set_staging_bytes(s, CKPT_STAGING_MIN_BYTES), CKPT_OK);
	ts_guarded_reset_peak(g);
	ts_guarded_stats before = ts_guarded_get_stats(g);
	cr_assert_eq(ckpt_checkpoint_write(m.ck, gp), CKPT_OK, "%s", ckpt_error_last()->message);
	ts_guarded_stats after = ts_guarded_get_stats(g);
	cr_assert_leq(after.pinned_peak, CKPT_STAGING_MIN_BYTES, "pinned peak %llu over the ring of %zu",
		(unsigned long long)after.pinned_peak, (size_t)CKPT_STAGING_MIN_BYTES);
	cr_assert_geq(after.d2h_calls - before.d2h_calls,
		(uint64_t)(2 * NW * sizeof(float) / (CKPT_STAGING_MIN_BYTES / 2)), "w and its slot were not copied in pieces");
	cr_assert_geq(after.d2h_pinned_bytes - before.d2h_pinned_bytes, (uint64_t)2 * NW * sizeof(float));
	cr_assert_eq(after.pinned_live, 0, "the save kept its ring");
	/* the crc32c combined from the pieces': the same file as the host strategy's */
	assert_same_bundle(hp, gp);
	free_model(&m);
	ckpt_strategy_free(s);
	ts_guarded_free(g);
	ts_rmtree(dir);
	free(hp);
	free(gp);
	free(dir);
}

Test(device_mirrored, async_save_is_byte_identical)
{
	char *dir = ts_tmpdir(), *hp = ts_join(dir, "host"), *gp = ts_join(dir, "guarded");
	host_file(hp, 4);
	ts_guarded *g = ts_guarded_new(2, 1);
	ckpt_strategy *s = guarded_strategy(g);
	model m;
	ckpt_variable *slot;
	build(&m, s, 0);
	create_slots(&m, s, &slot);
	set_values(&m, 4);
	fill_f32(slot, 54);
	ckpt_async_options ao = CKPT_ASYNC_OPTIONS_INIT;
	ao.no_fsync = 1;
	ckpt_async_saver *sv;
	cr_assert_eq(ckpt_async_saver_new(&sv, &ao), CKPT_OK);
	ts_guarded_stats before = ts_guarded_get_stats(g);
	cr_assert_eq(ckpt_async_save(sv, m.ck, gp), CKPT_OK, "%s", ckpt_error_last()->message);
	ts_guarded_stats after = ts_guarded_get_stats(g);
	/* the snapshot went device -> the saver's pinned arena (kept: one pinned buffer live) */
	cr_assert_geq(after.d2h_pinned_bytes - before.d2h_pinned_bytes, (uint64_t)(NW + 2 * NB) * sizeof(float));
	cr_assert_eq(after.pinned_live, 1);
	/* the snapshot is taken: changing the replicas now does not change the file */
	fill_f32(m.w, -1);
	cr_assert_eq(ckpt_async_wait(sv), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_async_saver_free(sv);
	cr_assert_eq(ts_guarded_get_stats(g).pinned_live, 0, "the saver kept its pinned arena after it was freed");
	assert_same_bundle(hp, gp);
	free_model(&m);
	ckpt_strategy_free(s);
	ts_guarded_free(g);
	ts_rmtree(dir);
	free(hp);
	free(gp);
	free(dir);
}

Test(device_mirrored, restore_fills_every_device_replica)
{
	char *dir = ts_tmpdir(), *hp = ts_join(dir, "host");
	host_file(hp, 5);
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_strategy *s = guarded_strategy(g);
	model m;
	build(&m, s, 0);
	set_values(&m, 9);
	/* the smallest ring: w (280 KB) goes through its two 64 KiB halves in pieces */
	cr_assert_eq(ckpt_strategy_set_staging_bytes(s, CKPT_STAGING_MIN_BYTES), CKPT_OK);
	ts_guarded_reset_peak(g);
	ts_guarded_stats before = ts_guarded_get_stats(g);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, m.ck, hp), CKPT_OK, "%s", ckpt_error_last()->message);
	ts_guarded_stats after = ts_guarded_get_stats(g);
	cr_assert_leq(after.pinned_peak, CKPT_STAGING_MIN_BYTES, "pinned peak %llu over the ring",
		(unsigned long long)after.pinned_peak);
	cr_assert_geq(after.h2d_calls - before.h2d_calls, (uint64_t)(NW * sizeof(float) / (CKPT_STAGING_MIN_BYTES / 2)),
		"w was not streamed in pieces");
	cr_assert_geq(after.h2d_pinned_bytes - before.h2d_pinned_bytes, (uint64_t)(NW + NB) * sizeof(float),
		"the file's bytes did not go through pinned memory");
	expect_values(&m, 5);
	/* replica 0 from the host once, the other replicas device to device: not one host copy per replica */
	uint64_t h2d = after.h2d_bytes - before.h2d_bytes, d2d = after.d2d_bytes - before.d2d_bytes;
	cr_assert_geq(d2d, (uint64_t)(REPLICAS - 1) * NW * sizeof(float), "d2d %llu", (unsigned long long)d2d);
	cr_assert_lt(h2d, (uint64_t)2 * NW * sizeof(float), "h2d %llu: the host fed every replica", (unsigned long long)h2d);
	/* restore-on-create: the slot made after the restore gets the file's value on every replica */
	ckpt_variable *slot;
	create_slots(&m, s, &slot);
	expect_f32(slot, 55);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	free_model(&m);
	ckpt_strategy_free(s);
	ts_guarded_free(g);
	ts_rmtree(dir);
	free(hp);
	free(dir);
}

Test(device_mirrored, load_creates_device_replicas)
{
	char *dir = ts_tmpdir(), *hp = ts_join(dir, "host"), *gp = ts_join(dir, "again");
	host_file(hp, 6);
	ts_guarded *g = ts_guarded_new(2, 1);
	ckpt_strategy *s = guarded_strategy(g);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_load(&ck, NULL, hp, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	ckpt_variable *w, *slot;
	cr_assert_eq(ckpt_status_of(w = ckpt_checkpoint_find_variable(ck, "model/w")), CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(w), CKPT_VAR_MIRRORED);
	cr_assert_eq(ckpt_variable_strategy(w), s);
	expect_f32(w, 6);
	cr_assert_eq(ckpt_status_of(slot = ckpt_checkpoint_find_variable(ck, "Adam/w/m")), CKPT_OK);
	expect_f32(slot, 56);
	cr_assert_gt(ts_guarded_get_stats(g).broadcast_calls, 0, "the provider's broadcast was not used");
	/* and what was loaded onto the devices saves back to the same bytes */
	cr_assert_eq(ckpt_checkpoint_write(ck, gp), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	cr_assert_eq(ts_guarded_get_stats(g).device_live, 0);
	ts_guarded_free(g);
	ts_rmtree(dir);
	free(hp);
	free(gp);
	free(dir);
}

/* A corrupt value, a shape mismatch and a failing device change no live device variable. */
Test(device_mirrored, failed_restores_change_nothing)
{
	char *dir = ts_tmpdir(), *hp = ts_join(dir, "host"), *data = ts_join(dir, "host.data-00000-of-00001");
	host_file(hp, 7);
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_strategy *s = guarded_strategy(g);
	model m;
	build(&m, s, 0);
	set_values(&m, 2);

	/* a flipped byte in w's value (the largest one, in the middle of the data file) */
	cr_assert_eq(ts_flip_byte(data, NW * 2, 0x10), 0);
	cr_assert_eq(ckpt_checkpoint_restore(NULL, m.ck, hp), CKPT_ECHECKSUM, "%s", ckpt_error_last()->message);
	expect_values(&m, 2);
	cr_assert_eq(ts_flip_byte(data, NW * 2, 0x10), 0);

	/* a device copy failing before anything is assigned: named, nothing changed */
	ts_guarded_fail_copies(g, 0, 1000000);
	int rc = ckpt_checkpoint_restore(NULL, m.ck, hp);
	ts_guarded_fail_copies(g, 0, 0);
	if (rc == CKPT_OK)
		cr_assert_fail("a restore through a failing device succeeded");
	cr_assert(strstr(ckpt_error_last()->message, "guarded"), "%s", ckpt_error_last()->message);
	/* the provider's own message is kept after the library's */
	cr_assert(strstr(ckpt_error_last()->message, "injected copy failure"), "%s", ckpt_error_last()->message);
	expect_values(&m, 2);
	free_model(&m);

	/* a shape mismatch: EMISMATCH naming the variable, nothing assigned */
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_object *net;
	ckpt_variable *w, *b;
	ckpt_shape sw = shape1(NW + 1), sb = shape1(NB);
	cr_assert_eq(ckpt_status_of(net = ckpt_object_new_child(ckpt_checkpoint_root(ck), "model")), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_status_of(b = ckpt_object_add_variable(net, "b", "b", CKPT_DT_FLOAT, &sb, NULL)), CKPT_OK);
	cr_assert_eq(ckpt_status_of(w = ckpt_object_add_variable(net, "w", "w", CKPT_DT_FLOAT, &sw, NULL)), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	fill_f32(b, 11);
	cr_assert_eq(ckpt_checkpoint_restore(NULL, ck, hp), CKPT_EMISMATCH);
	cr_assert(strstr(ckpt_error_last()->message, "w"), "%s", ckpt_error_last()->message);
	expect_f32(b, 11);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	ts_guarded_free(g);
	ts_rmtree(dir);
	free(hp);
	free(data);
	free(dir);
}

/* A replica-dependent update of device memory is caught by the divergence check before anything is written. */
typedef struct skew_arg {
	ts_guarded *g;
	ckpt_variable *v;
} skew_arg;

static int skew_step(ckpt_replica_ctx *ctx, void *arg)
{
	skew_arg *a = arg;
	void *mine;
	int rc = ckpt_status_of(mine = ckpt_variable_local(a->v));
	if (rc < 0 || ckpt_replica_id(ctx) != 2)
		return rc;
	const ckpt_memory_provider *p = ts_guarded_provider(a->g);
	ckpt_memory_queue *q;
	float x = 42.0f;
	rc = p->queue_new(p->ctx, &q, ckpt_strategy_replica_device(ckpt_replica_strategy(ctx), 2));
	if (rc == CKPT_OK)
		rc = p->copy_h2d(p->ctx, q, (float *)mine + 5, &x, sizeof(x));
	if (rc == CKPT_OK)
		rc = p->synchronize(p->ctx, q);
	p->queue_free(p->ctx, q);
	return rc;
}

Test(device_mirrored, mistakes_are_caught_on_device_replicas)
{
	char *dir = ts_tmpdir(), *gp = ts_join(dir, "guarded"), *idx = ts_join(dir, "guarded.index");
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_strategy *s = guarded_strategy(g);
	model m;
	build(&m, s, 1);
	set_values(&m, 1);
	skew_arg a = { g, m.b };
	cr_assert_eq(ckpt_strategy_run(s, skew_step, &a), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_variable_replicas_identical(m.b), 0);
	cr_assert_eq(ckpt_checkpoint_write(m.ck, gp), CKPT_ESCOPE);
	const ckpt_error *e = ckpt_error_last();
	cr_assert(strstr(e->message, "'b'") && strstr(e->message, "replica 2") && strstr(e->message, "42"),
		"%s", e->message);
	size_t n;
	cr_assert_null(ts_read_file(idx, &n), "a diverged state was written");

	/* a plain variable updated in a run over device replicas: ESCOPE naming it */
	ckpt_variable *p = m.plain;
	skew_arg pa = { g, p };
	cr_assert_eq(ckpt_strategy_run(s, skew_step, &pa), CKPT_ESCOPE);
	cr_assert(strstr(ckpt_error_last()->message, "'plain'"), "%s", ckpt_error_last()->message);
	free_model(&m);
	ckpt_strategy_free(s);
	ts_guarded_free(g);
	ts_rmtree(dir);
	free(gp);
	free(idx);
	free(dir);
}

/* TensorFlow restores what device replicas saved (model/{w, b, plain}, step), as it does host ones. */
Test(device_mirrored, tensorflow_restores_a_checkpoint_saved_from_device_replicas, .timeout = 300)
{
	char *dir = ts_tmpdir(), *prefix = ts_join(dir, "ckpt");
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_strategy *s = guarded_strategy(g);
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
	ckpt_object *net;
	ckpt_variable *w, *b, *plain, *step;
	ckpt_shape sw = shape1(NW), sb = shape1(NB), sc = { 0 };
	cr_assert_eq(ckpt_status_of(net = ckpt_object_new_child(ckpt_checkpoint_root(ck), "model")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(plain = ckpt_object_add_variable(net, "plain", "plain", CKPT_DT_FLOAT, &sb, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_status_of(w = ckpt_object_add_variable(net, "w", "w", CKPT_DT_FLOAT, &sw, NULL)), CKPT_OK);
	cr_assert_eq(ckpt_status_of(b = ckpt_object_add_variable(net, "b", "b", CKPT_DT_FLOAT, &sb, NULL)), CKPT_OK);
	cr_assert_eq(ckpt_status_of(step = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "step", "step", CKPT_DT_INT64, &sc, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	fill_f32(w, 8);
	fill_f32(b, 1008);
	fill_f32(plain, 3);
	int64_t sv = 24;
	cr_assert_eq(ckpt_variable_assign(step, &sv, sizeof(sv)), CKPT_OK);
	const char *saved;
	cr_assert_eq(ckpt_status_of(saved = ckpt_checkpoint_save(ck, prefix)), CKPT_OK, "%s",
		     ckpt_error_last()->message);
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "%s %s/tests/oracles/tf_restore_device.py '%s' %d %d 8", ts_oracle_python(),
		CKPT_SOURCE_DIR, saved, NW, NB);
	ts_run_result r;
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "TensorFlow failed:\n%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "restored 4 values"), "%s", r.out);
	ts_run_free(&r);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	ts_guarded_free(g);
	ts_rmtree(dir);
	free(prefix);
	free(dir);
}

static const char *g_parted_prefix;

/* A partitioned variable whose parts are device replicas: saved like the host's, restored into the parts. */
static void write_parted(const char *prefix, ckpt_strategy *s, float base)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
	int64_t dims[2] = { 10, 3 };
	ckpt_shape sh;
	ckpt_shape_make(&sh, 2, dims);
	float init[30];
	for (int i = 0; i < 30; i++)
		init[i] = base + (float)i;
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.initial_value = init;
	ckpt_partitioned *p;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &sh, 3, &vo), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(ckpt_object_track_partitioned(ckpt_checkpoint_root(ck), "emb", p), CKPT_OK);
	if (prefix) {
		cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	} else {
		/* restore what base 100 wrote, then check every part's rows */
		cr_assert_eq(ckpt_checkpoint_restore(NULL, ck, g_parted_prefix), CKPT_OK, "%s", ckpt_error_last()->message);
		for (int i = 0; i < ckpt_partitioned_num_parts(p); i++) {
			int64_t first, rows;
			cr_assert_eq(ckpt_partitioned_part_rows(&first, &rows, p, i), CKPT_OK);
			ckpt_variable *part = ckpt_partitioned_part(p, i);
			float got[30];
			cr_assert_eq(ckpt_variable_read(part, got, (size_t)ckpt_variable_nbytes(part)), CKPT_OK);
			for (int64_t k = 0; k < rows * 3; k++)
				cr_assert_eq(got[k], 100.0f + (float)(first * 3 + k));
			cr_assert_eq(ckpt_variable_replicas_identical(part), 1);
		}
	}
	ckpt_checkpoint_free(ck);
	ckpt_partitioned_free(p);
}

Test(device_mirrored, partitioned_parts_in_device_memory)
{
	char *dir = ts_tmpdir(), *hp = ts_join(dir, "host"), *gp = ts_join(dir, "guarded");
	ckpt_strategy *hs = host_strategy();
	write_parted(hp, hs, 100);
	ckpt_strategy_free(hs);
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_strategy *s = guarded_strategy(g);
	write_parted(gp, s, 100);
	assert_same_bundle(hp, gp);
	g_parted_prefix = hp;
	write_parted(NULL, s, 7);
	ckpt_strategy_free(s);
	ts_guarded_free(g);
	ts_rmtree(dir);
	free(hp);
	free(gp);
	free(dir);
}

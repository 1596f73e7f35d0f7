/*
 * A failing memory provider during a restore onto device replicas and
 * during a manager save: every K-th call of each kind fails in turn (device
 * and pinned allocations, host-to-device, device-to-host and
 * device-to-device copies, broadcast, fill), at enqueue and at
 * synchronize, with and without the provider's broadcast. A restore either
 * succeeds with every replica of every variable new, or fails with every
 * replica of every variable as it was (read back replica by replica through
 * the provider, not through the library). A save fails whenever the
 * provider does.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "guarded_provider.h"
#include "test_support.h"

#define NK 70000   /* floats in kernel: several pieces of the smallest ring */
#define NB 33
#define REPLICAS 3
#define NVARS 7

typedef struct fmodel {
	ckpt_checkpoint *ck;
	ckpt_variable *v[NVARS];  /* kernel, bias, wrapped, total (SUM), acc (MEAN), step, plain (host) */
	void *wrapped[REPLICAS];  /* the trainer's own device buffers of `wrapped` */
	ts_guarded *g;
	ckpt_strategy *s;
} fmodel;

static ckpt_shape shape1(int64_t n)
{
	ckpt_shape s;
	ckpt_shape_make(&s, 1, &n);
	return s;
}

static void fbuild(fmodel *m, int with_broadcast)
{
	memset(m, 0, sizeof(*m));
	m->g = ts_guarded_new(2, with_broadcast);
	int devs[REPLICAS] = { 0, 0, 1 };
	cr_assert_eq(ckpt_strategy_mirrored_on(&m->s, ts_guarded_provider(m->g), devs, REPLICAS), CKPT_OK);
	cr_assert_eq(ckpt_strategy_set_staging_bytes(m->s, CKPT_STAGING_MIN_BYTES), CKPT_OK);
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	cr_assert_eq(ckpt_checkpoint_new(&m->ck, &o), CKPT_OK);
	ckpt_object *root = ckpt_checkpoint_root(m->ck), *net;
	ckpt_shape sk = shape1(NK), sb = shape1(NB), s4 = shape1(4), sc = { 0 };
	cr_assert_eq(ckpt_status_of(net = ckpt_object_new_child(root, "model")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(m->v[6] = ckpt_object_add_variable(net, "plain", "plain", CKPT_DT_FLOAT, &sb, NULL)),
		CKPT_OK);
	const ckpt_memory_provider *p = ts_guarded_provider(m->g);
	for (int r = 0; r < REPLICAS; r++)
		cr_assert_eq(p->device_alloc(p->ctx, &m->wrapped[r], devs[r], NB * sizeof(float)), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(m->s), CKPT_OK);
	cr_assert_eq(ckpt_status_of(m->v[0] = ckpt_object_add_variable(net, "kernel", "kernel", CKPT_DT_FLOAT, &sk, NULL)),
		CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_status_of(m->v[1] = ckpt_object_add_variable(net, "bias", "bias", CKPT_DT_FLOAT, &sb, NULL)),
		CKPT_OK);
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.replica_buffers = m->wrapped;
	cr_assert_eq(ckpt_status_of(m->v[2] = ckpt_object_add_variable(net, "wrapped", "wrapped", CKPT_DT_FLOAT, &sb, &vo)),
		CKPT_OK, "%s", ckpt_error_last()->message);
	vo = (ckpt_variable_options)CKPT_VARIABLE_OPTIONS_INIT;
	vo.sync = CKPT_SYNC_ON_READ;
	vo.aggregation = CKPT_AGG_SUM;
	cr_assert_eq(ckpt_status_of(m->v[3] = ckpt_object_add_variable(net, "total", "total", CKPT_DT_INT64, &s4, &vo)),
		CKPT_OK);
	vo.aggregation = CKPT_AGG_MEAN;
	cr_assert_eq(ckpt_status_of(m->v[4] = ckpt_object_add_variable(net, "acc", "acc", CKPT_DT_FLOAT, &s4, &vo)),
		CKPT_OK);
	cr_assert_eq(ckpt_status_of(m->v[5] = ckpt_object_add_variable(root, "step", "step", CKPT_DT_INT64, &sc, NULL)),
		CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(m->s), CKPT_OK);
}

static void ffree(fmodel *m)
{
	ckpt_checkpoint_free(m->ck);
	const ckpt_memory_provider *p = ts_guarded_provider(m->g);
	int devs[REPLICAS] = { 0, 0, 1 };
	for (int r = 0; r < REPLICAS; r++)
		p->device_free(p->ctx, devs[r], m->wrapped[r], NB * sizeof(float));
	ckpt_strategy_free(m->s);
	cr_assert_eq(ts_guarded_get_stats(m->g).device_live, 0, "device buffers leaked");
	cr_assert_eq(ts_guarded_get_stats(m->g).pinned_live, 0, "pinned buffers leaked");
	ts_guarded_free(m->g);
}

static void fset(fmodel *m, float base)
{
	for (int i = 0; i < NVARS; i++) {
		size_t n = (size_t)ckpt_variable_nbytes(m->v[i]);
		unsigned char *buf = malloc(n);
		if (ckpt_variable_dtype(m->v[i]) == CKPT_DT_FLOAT)
			for (size_t k = 0; k < n / 4; k++)
				((float *)buf)[k] = base + (float)i * 100 + (float)k * 0.25f;
		else
			for (size_t k = 0; k < n / 8; k++)
				((int64_t *)buf)[k] = (int64_t)base * 1000 + i * 10 + (int64_t)k;
		cr_assert_eq(ckpt_variable_assign(m->v[i], buf, n), CKPT_OK, "%s", ckpt_error_last()->message);
		free(buf);
	}
}

/* Every replica's bytes of every variable, read through the provider's own copies (not the library). */
typedef struct snap {
	unsigned char *b[NVARS][REPLICAS];
} snap;

static void take(snap *out, fmodel *m)
{
	const ckpt_memory_provider *p = ts_guarded_provider(m->g);
	for (int i = 0; i < NVARS; i++) {
		size_t n = (size_t)ckpt_variable_nbytes(m->v[i]);
		for (int r = 0; r < REPLICAS; r++) {
			out->b[i][r] = NULL;
			if (r >= ckpt_variable_num_replicas(m->v[i]))
				continue;
			out->b[i][r] = malloc(n);
			const void *src = ckpt_variable_replica_data(m->v[i], r);
			if (ckpt_variable_strategy(m->v[i]) != m->s) { /* plain: host memory */
				memcpy(out->b[i][r], src, n);
				continue;
			}
			ckpt_memory_queue *q;
			int dev = ckpt_strategy_replica_device(m->s, r);
			cr_assert_eq(p->queue_new(p->ctx, &q, dev), CKPT_OK);
			cr_assert_eq(p->copy_d2h(p->ctx, q, out->b[i][r], src, n), CKPT_OK);
			cr_assert_eq(p->synchronize(p->ctx, q), CKPT_OK);
			p->queue_free(p->ctx, q);
		}
	}
}

static void drop(snap *s)
{
	for (int i = 0; i < NVARS; i++)
		for (int r = 0; r < REPLICAS; r++)
			free(s->b[i][r]);
}

/* 1 when every replica of every variable of `m` holds what `want` does. */
static int same(fmodel *m, const snap *want, char *why, size_t whyn)
{
	snap now;
	take(&now, m);
	int ok = 1;
	for (int i = 0; i < NVARS && ok; i++)
		for (int r = 0; r < ckpt_variable_num_replicas(m->v[i]) && ok; r++)
			if (memcmp(now.b[i][r], want->b[i][r], (size_t)ckpt_variable_nbytes(m->v[i])) != 0) {
				snprintf(why, whyn, "'%s' replica %d", ckpt_variable_name(m->v[i]), r);
				ok = 0;
			}
	drop(&now);
	return ok;
}

static const struct { unsigned mask; const char *name; } kinds[] = {
	{ TS_G_DEVICE_ALLOC, "device allocation" }, { TS_G_HOST_ALLOC, "pinned allocation" },
	{ TS_G_H2D, "host-to-device copy" }, { TS_G_D2H, "device-to-host copy" }, { TS_G_D2D, "device-to-device copy" },
	{ TS_G_BROADCAST, "broadcast" }, { TS_G_FILL, "fill" },
};

/* Fail every K-th call of every kind in turn: all or nothing on every replica of every variable. */
static void restore_under_faults(int with_broadcast, int with_fill)
{
	char *dir = ts_tmpdir(), *prefix = ts_join(dir, "new");
	fmodel m;
	fbuild(&m, with_broadcast);
	ts_guarded_set_fill(m.g, with_fill);
	snap old, fresh;
	fset(&m, 5);
	cr_assert_eq(ckpt_checkpoint_write(m.ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	take(&fresh, &m);
	fset(&m, 2);
	take(&old, &m);
	uint64_t live = ts_guarded_get_stats(m.g).device_live;
	int failures = 0, tried = 0;
	char why[256];
	for (size_t kind = 0; kind < sizeof(kinds) / sizeof(kinds[0]); kind++) {
		for (int at_sync = 0; at_sync < 2; at_sync++) {
			for (uint64_t k = 0;; k++) {
				ts_guarded_fail_nth(m.g, kinds[kind].mask, k, at_sync);
				int rc = ckpt_checkpoint_restore(NULL, m.ck, prefix);
				int fired = ts_guarded_fired(m.g);
				tried++;
				cr_assert_eq(ts_guarded_get_stats(m.g).device_live, live, "%s %llu%s: device buffers left",
					kinds[kind].name, (unsigned long long)k, at_sync ? " at synchronize" : "");
				cr_assert_eq(ts_guarded_get_stats(m.g).pinned_live, 0);
				if (rc == CKPT_OK) {
					cr_assert(same(&m, &fresh, why, sizeof(why)), "%s %llu%s (broadcast %d): restore succeeded "
						"but %s is not new", kinds[kind].name, (unsigned long long)k,
						at_sync ? " at synchronize" : "", with_broadcast, why);
					fset(&m, 2);
					if (!fired)
						break; /* past the last call of this kind */
					continue;
				}
				failures++;
				cr_assert(fired, "restore failed without an injected failure: %s", ckpt_error_last()->message);
				cr_assert(strstr(ckpt_error_last()->message, "guarded"), "%s", ckpt_error_last()->message);
				cr_assert(same(&m, &old, why, sizeof(why)), "%s %llu%s (broadcast %d): the restore failed (%s) "
					"but changed %s", kinds[kind].name, (unsigned long long)k, at_sync ? " at synchronize" : "",
					with_broadcast, ckpt_error_last()->message, why);
				if (kinds[kind].mask & (TS_G_DEVICE_ALLOC | TS_G_HOST_ALLOC | TS_G_BROADCAST))
					at_sync = 1; /* not queued: one pass is enough */
			}
		}
	}
	cr_assert_gt(failures, 10, "only %d of %d restores failed", failures, tried);
	drop(&old);
	drop(&fresh);
	ffree(&m);
	ts_rmtree(dir);
	free(prefix);
	free(dir);
}

Test(device_faults, failed_restores_leave_every_replica_as_it_was)
{
	restore_under_faults(0, 0);
}

Test(device_faults, failed_restores_leave_every_replica_as_it_was_with_broadcast_and_fill)
{
	restore_under_faults(1, 1);
}

/*
 * A manager save in a fresh directory of a model whose save_counter (7)
 * lives on the device: every provider failure fails the save, which then
 * lists nothing and leaves the counter at 7; the save that meets no
 * failure writes ckpt-8.
 */
static void save_under_faults(int at_sync)
{
	char *dir = ts_tmpdir();
	fmodel m;
	fbuild(&m, 1);
	fset(&m, 3);
	ckpt_variable *counter;
	cr_assert_eq(ckpt_scope_enter(m.s), CKPT_OK);
	cr_assert_eq(ckpt_status_of(counter = ckpt_checkpoint_save_counter_variable(m.ck)), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(m.s), CKPT_OK);
	int64_t seven = 7, now = 0;
	cr_assert_eq(ckpt_variable_assign(counter, &seven, sizeof(seven)), CKPT_OK);
	int failures = 0;
	for (uint64_t k = 0;; k++) {
		ckpt_manager *mgr;
		cr_assert_eq(ckpt_manager_new(&mgr, m.ck, dir, 3), CKPT_OK, "%s", ckpt_error_last()->message);
		ts_guarded_fail_nth(m.g, TS_G_ALL, k, at_sync);
		const char *path = ckpt_manager_save(mgr);
		int fired = ts_guarded_fired(m.g);
		if (!fired) {
			cr_assert_not_null(path, "%s", ckpt_error_last()->message);
			cr_assert(strstr(path, "ckpt-8"), "the save wrote %s, not ckpt-8", path);
			ckpt_manager_free(mgr);
			break;
		}
		cr_assert_null(path, "provider call %llu%s failed, yet the save succeeded and wrote %s",
			(unsigned long long)k, at_sync ? " (at synchronize)" : "", path);
		cr_assert(strstr(ckpt_error_last()->message, "guarded"), "%s", ckpt_error_last()->message);
		cr_assert_eq(ckpt_manager_num_checkpoints(mgr), 0);
		cr_assert_eq(ckpt_variable_read(counter, &now, sizeof(now)), CKPT_OK);
		cr_assert_eq(now, 7, "save_counter is %lld after a failed save", (long long)now);
		failures++;
		ckpt_manager_free(mgr);
	}
	cr_assert_gt(failures, 10);
	ffree(&m);
	ts_rmtree(dir);
	free(dir);
}

Test(device_faults, every_provider_failure_fails_a_manager_save)
{
	save_under_faults(0);
}

Test(device_faults, every_provider_failure_at_synchronize_fails_a_manager_save)
{
	save_under_faults(1);
}

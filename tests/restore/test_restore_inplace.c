/*
 * Checkpoint restore reads verified values straight into the variables
 * (no staged copy of the state). These tests pin what that may and may not
 * change:
 *  - a corrupt value (bad crc32c) changes no variable: plain ones are
 *    verified before anything is written, mirrored ones are read first and
 *    put back from copy 1;
 *  - an I/O failure at every call of a restore leaves mirrored variables
 *    unchanged on every replica (copy 0 is put back from copy 1), and a
 *    plain variable changes only with a warning that names it;
 *  - sync-on-read (staged, split) and plain / mirrored (in place) values
 *    restored together are right on every replica.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "ckpt/sys/vfs_faulty.h"
#include "ckpt/sys/vfs_memory.h"
#include "test_support.h"

#define NM 5000  /* floats per mirrored variable */
#define NP 3000  /* floats in the plain variable */
#define REPLICAS 3

typedef struct live {
	ckpt_checkpoint *ck;
	ckpt_variable *m1, *m2, *p, *metric;
} live;

static int g_partial_warnings;
static char g_last_warning[1024];

static void on_warn(const char *msg, void *ctx)
{
	(void)ctx;
	if (strstr(msg, "may hold partial values"))
		g_partial_warnings++;
	snprintf(g_last_warning, sizeof(g_last_warning), "%s", msg);
}

static void build(live *l, ckpt_strategy *mirrored, ckpt_vfs *vfs)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	o.vfs = vfs;
	o.warn = on_warn;
	cr_assert_eq(ckpt_checkpoint_new(&l->ck, &o), CKPT_OK);
	ckpt_object *model;
	cr_assert_eq(ckpt_status_of(model = ckpt_object_new_child(ckpt_checkpoint_root(l->ck), "model")), CKPT_OK);
	int64_t dm = NM, dp = NP, ds = 4;
	ckpt_shape sm, sp, ss;
	ckpt_shape_make(&sm, 1, &dm);
	ckpt_shape_make(&sp, 1, &dp);
	ckpt_shape_make(&ss, 1, &ds);
	/* plain: created outside any scope */
	cr_assert_eq(ckpt_status_of(l->p = ckpt_object_add_variable(model, "plain", "plain", CKPT_DT_FLOAT, &sp, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(mirrored), CKPT_OK);
	cr_assert_eq(ckpt_status_of(l->m1 = ckpt_object_add_variable(model, "m1", "m1", CKPT_DT_FLOAT, &sm, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(l->m2 = ckpt_object_add_variable(model, "m2", "m2", CKPT_DT_FLOAT, &sm, NULL)),
		     CKPT_OK);
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.sync = CKPT_SYNC_ON_READ;
	vo.aggregation = CKPT_AGG_SUM;
	cr_assert_eq(ckpt_status_of(l->metric = ckpt_object_add_variable(model, "total", "total", CKPT_DT_FLOAT, &ss, &vo)),
		     CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(mirrored), CKPT_OK);
}

static void fill(live *l, float base)
{
	float *m = malloc(NM * sizeof(float)), p[NP], s[4];
	for (int i = 0; i < NM; i++)
		m[i] = base + (float)i;
	cr_assert_eq(ckpt_variable_assign(l->m1, m, NM * sizeof(float)), CKPT_OK);
	for (int i = 0; i < NM; i++)
		m[i] = base - (float)i;
	cr_assert_eq(ckpt_variable_assign(l->m2, m, NM * sizeof(float)), CKPT_OK);
	for (int i = 0; i < NP; i++)
		p[i] = base * 2 + (float)i;
	cr_assert_eq(ckpt_variable_assign(l->p, p, sizeof(p)), CKPT_OK);
	for (int i = 0; i < 4; i++)
		s[i] = base + 0.25f * (float)i; /* split over replicas: SUM reads it back */
	cr_assert_eq(ckpt_variable_assign(l->metric, s, sizeof(s)), CKPT_OK);
	free(m);
}

/* Every replica of v equals replica 0 of `ref` (same shape). */
static int same_everywhere(const ckpt_variable *v, const void *ref)
{
	size_t n = (size_t)ckpt_variable_nbytes(v);
	for (int r = 0; r < ckpt_variable_num_replicas(v); r++)
		if (memcmp(ckpt_variable_replica_data(v, r), ref, n) != 0)
			return 0;
	return 1;
}

static void *copy0(const ckpt_variable *v)
{
	size_t n = (size_t)ckpt_variable_nbytes(v);
	void *p = malloc(n);
	memcpy(p, ckpt_variable_replica_data(v, 0), n);
	return p;
}

static ckpt_vfs *saved_checkpoint(ckpt_strategy *mirrored, live *saved)
{
	ckpt_vfs *mem;
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	build(saved, mirrored, mem);
	fill(saved, 100.0f);
	cr_assert_eq(ckpt_checkpoint_write(saved->ck, "/ck/ckpt-1"), CKPT_OK, "%s", ckpt_error_last()->message);
	return mem;
}

Test(restore_inplace, restores_every_replica_of_every_kind)
{
	ckpt_strategy *ms;
	cr_assert_eq(ckpt_strategy_mirrored_new(&ms, REPLICAS), CKPT_OK);
	live saved, l;
	ckpt_vfs *mem = saved_checkpoint(ms, &saved);
	build(&l, ms, mem);
	fill(&l, -5.0f);
	ckpt_restore_status *st = NULL;
	cr_assert_eq(ckpt_checkpoint_restore(&st, l.ck, "/ck/ckpt-1"), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	cr_assert(same_everywhere(l.m1, ckpt_variable_replica_data(saved.m1, 0)), "m1 differs on some replica");
	cr_assert(same_everywhere(l.m2, ckpt_variable_replica_data(saved.m2, 0)), "m2 differs on some replica");
	cr_assert(same_everywhere(l.p, ckpt_variable_replica_data(saved.p, 0)), "plain variable differs");
	float want[4], got[4];
	cr_assert_eq(ckpt_variable_read(saved.metric, want, sizeof(want)), CKPT_OK);
	cr_assert_eq(ckpt_variable_read(l.metric, got, sizeof(got)), CKPT_OK);
	for (int i = 0; i < 4; i++)
		cr_assert_float_eq(got[i], want[i], 1e-4f, "metric[%d]: %g, want %g", i, got[i], want[i]);
	ckpt_checkpoint_free(l.ck);
	ckpt_checkpoint_free(saved.ck);
	ckpt_vfs_free(mem);
	ckpt_strategy_free(ms);
}

/* A flipped byte inside any one value: ECHECKSUM naming it, and no variable changed. */
Test(restore_inplace, corrupt_value_changes_nothing)
{
	ckpt_strategy *ms;
	cr_assert_eq(ckpt_strategy_mirrored_new(&ms, REPLICAS), CKPT_OK);
	live saved;
	ckpt_vfs *mem = saved_checkpoint(ms, &saved);
	const char *data = "/ck/ckpt-1.data-00000-of-00001";
	const void *buf;
	size_t n;
	cr_assert_eq(ckpt_status_of(buf = ckpt_vfs_memory_get(&n, mem, data)), CKPT_OK);
	unsigned char *good = malloc(n), *bad = malloc(n);
	memcpy(good, buf, n);
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	oo.vfs = mem;
	ckpt_reader *rd;
	cr_assert_eq(ckpt_reader_open(&rd, "/ck/ckpt-1", &oo), CKPT_OK);
	const char *values[] = { "model/m1/", "model/m2/", "model/plain/", "model/total/" };
	for (size_t k = 0; k < sizeof(values) / sizeof(values[0]); k++) {
		const ckpt_var_info *vi = NULL;
		for (size_t i = 0; i < ckpt_reader_num_entries(rd); i++)
			if (strncmp(ckpt_reader_var(rd, i)->name, values[k], strlen(values[k])) == 0)
				vi = ckpt_reader_var(rd, i);
		cr_assert_not_null(vi, "no entry for %s", values[k]);
		memcpy(bad, good, n);
		bad[vi->offset + (int64_t)vi->nbytes / 2] ^= 0x40;
		cr_assert_eq(ckpt_vfs_memory_put(mem, data, bad, n), CKPT_OK);
		live l;
		build(&l, ms, mem);
		fill(&l, -5.0f);
		void *m1 = copy0(l.m1), *m2 = copy0(l.m2), *p = copy0(l.p);
		/* sync-on-read copies differ (the value sits in replica 0): compare the aggregate */
		float t[4], t_after[4];
		cr_assert_eq(ckpt_variable_read(l.metric, t, sizeof(t)), CKPT_OK);
		ckpt_restore_status *st = NULL;
		cr_assert_eq(ckpt_checkpoint_restore(&st, l.ck, "/ck/ckpt-1"), CKPT_ECHECKSUM, "flip in %s", vi->name);
		const ckpt_error *e = ckpt_error_last();
		cr_assert(e->path && strstr(e->path, "ckpt-1"), "error names the file: %s", e->message);
		cr_assert(e->variable && strcmp(e->variable, vi->name) == 0 && e->offset == vi->offset,
			"error names %s at %lld: %s (%s, %lld)", vi->name, (long long)vi->offset, e->message,
			e->variable ? e->variable : "-", (long long)e->offset);
		cr_assert_eq(ckpt_variable_read(l.metric, t_after, sizeof(t_after)), CKPT_OK);
		cr_assert(same_everywhere(l.m1, m1) && same_everywhere(l.m2, m2) && same_everywhere(l.p, p) &&
			memcmp(t, t_after, sizeof(t)) == 0, "a flip in %s changed a live variable", vi->name);
		cr_assert_eq(g_partial_warnings, 0);
		free(m1);
		free(m2);
		free(p);
		ckpt_checkpoint_free(l.ck);
	}
	ckpt_reader_free(rd);
	free(good);
	free(bad);
	ckpt_checkpoint_free(saved.ck);
	ckpt_vfs_free(mem);
	ckpt_strategy_free(ms);
}

Test(restore_inplace, io_failure_at_every_call_keeps_mirrored_values, .timeout = 120)
{
	ckpt_strategy *ms;
	cr_assert_eq(ckpt_strategy_mirrored_new(&ms, REPLICAS), CKPT_OK);
	live saved;
	ckpt_vfs *mem = saved_checkpoint(ms, &saved);
	long failures = 0, warned_runs = 0;
	for (long i = 1;; i++) {
		ckpt_vfs *f;
		cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, i), CKPT_OK);
		live l;
		build(&l, ms, f);
		fill(&l, -5.0f);
		void *m1 = copy0(l.m1), *m2 = copy0(l.m2), *p = copy0(l.p);
		int before = g_partial_warnings;
		ckpt_restore_status *st = NULL;
		int rc = ckpt_checkpoint_restore(&st, l.ck, "/ck/ckpt-1");
		int fired = ckpt_vfs_faulty_fired(f);
		ckpt_restore_status_free(st);
		if (rc == CKPT_OK) {
			cr_assert(same_everywhere(l.m1, ckpt_variable_replica_data(saved.m1, 0)), "call %ld: m1 wrong", i);
			cr_assert(same_everywhere(l.p, ckpt_variable_replica_data(saved.p, 0)), "call %ld: plain wrong", i);
		} else {
			failures++;
			cr_assert(fired, "call %ld: restore failed (%s) without an injected fault", i, ckpt_error_last()->message);
			cr_assert(same_everywhere(l.m1, m1), "call %ld: a failed restore changed mirrored m1", i);
			cr_assert(same_everywhere(l.m2, m2), "call %ld: a failed restore changed mirrored m2", i);
			int warned = g_partial_warnings > before;
			warned_runs += warned;
			if (!same_everywhere(l.p, p))
				cr_assert(warned && strstr(g_last_warning, "'plain'"),
					"call %ld: the plain variable changed without a warning naming it", i);
		}
		free(m1);
		free(m2);
		free(p);
		ckpt_checkpoint_free(l.ck);
		ckpt_vfs_free(f);
		if (!fired)
			break;
		cr_assert_lt(i, 10000, "restore never stops making I/O calls");
	}
	cr_log_info("restore_inplace: %ld failed restores, %ld after verification", failures, warned_runs);
	cr_assert_gt(failures, 3);
	/* the in-place read phase was reached and failed at least once */
	cr_assert_gt(warned_runs, 0);
	ckpt_checkpoint_free(saved.ck);
	ckpt_vfs_free(mem);
	ckpt_strategy_free(ms);
}

/* Load reads straight into variables it creates unfilled: right values on every replica, and a bad value fails the load. */
Test(restore_inplace, load_reads_into_new_variables)
{
	ckpt_strategy *ms;
	cr_assert_eq(ckpt_strategy_mirrored_new(&ms, REPLICAS), CKPT_OK);
	live saved;
	ckpt_vfs *mem = saved_checkpoint(ms, &saved);
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.vfs = mem;
	o.warn = on_warn;
	ckpt_checkpoint *ck = NULL;
	cr_assert_eq(ckpt_scope_enter(ms), CKPT_OK);
	int rc = ckpt_checkpoint_load(&ck, NULL, "/ck/ckpt-1", &o);
	cr_assert_eq(ckpt_scope_exit(ms), CKPT_OK);
	cr_assert_eq(rc, CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_variable *v;
	cr_assert_eq(ckpt_status_of(v = ckpt_checkpoint_find_variable(ck, "model/m1/.ATTRIBUTES/VARIABLE_VALUE")),
		     CKPT_OK);
	cr_assert_eq(ckpt_variable_num_replicas(v), REPLICAS);
	cr_assert(same_everywhere(v, ckpt_variable_replica_data(saved.m1, 0)), "loaded m1 differs on some replica");
	cr_assert_eq(ckpt_status_of(v = ckpt_checkpoint_find_variable(ck, "model/plain/.ATTRIBUTES/VARIABLE_VALUE")),
		     CKPT_OK);
	cr_assert(same_everywhere(v, ckpt_variable_replica_data(saved.p, 0)), "loaded plain variable differs");
	ckpt_checkpoint_free(ck);

	/* a flipped byte in the last value read: ECHECKSUM naming it, nothing returned */
	const char *data = "/ck/ckpt-1.data-00000-of-00001";
	const void *buf;
	size_t n;
	cr_assert_eq(ckpt_status_of(buf = ckpt_vfs_memory_get(&n, mem, data)), CKPT_OK);
	unsigned char *bad = malloc(n);
	memcpy(bad, buf, n);
	bad[n - 100] ^= 1;
	cr_assert_eq(ckpt_vfs_memory_put(mem, data, bad, n), CKPT_OK);
	free(bad);
	ck = NULL;
	cr_assert_eq(ckpt_scope_enter(ms), CKPT_OK);
	rc = ckpt_checkpoint_load(&ck, NULL, "/ck/ckpt-1", &o);
	cr_assert_eq(ckpt_scope_exit(ms), CKPT_OK);
	cr_assert_eq(rc, CKPT_ECHECKSUM, "%s", ckpt_error_last()->message);
	cr_assert_null(ck);
	cr_assert(ckpt_error_last()->variable && ckpt_error_last()->offset >= 0, "%s", ckpt_error_last()->message);
	cr_assert_eq(g_partial_warnings, 0, "a failed load must not warn about live variables");
	ckpt_checkpoint_free(saved.ck);
	ckpt_vfs_free(mem);
	ckpt_strategy_free(ms);
}

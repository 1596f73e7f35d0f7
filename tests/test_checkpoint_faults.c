/*
 * Object-based checkpoints under failure: every allocation of a save /
 * restore (with restore-on-create) / load / manager cycle fails in turn
 * (curl's torture mode); every I/O call of a manager save fails in turn.
 * Each run must return an error or succeed, never crash or leak (run under
 * ASan), and a failed restore must leave live values unchanged.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

static long g_count, g_fail_at;
static int g_fired;

static void *t_malloc(size_t n, void *ctx)
{
	(void)ctx;
	if (g_fail_at && ++g_count == g_fail_at) {
		g_fired = 1;
		return NULL;
	}
	return malloc(n);
}
static void *t_realloc(void *p, size_t n, void *ctx)
{
	(void)ctx;
	if (g_fail_at && ++g_count == g_fail_at) {
		g_fired = 1;
		return NULL;
	}
	return realloc(p, n);
}
static void t_free(void *p, void *ctx) { (void)ctx; free(p); }

static void arm(long at)
{
	static const ckpt_allocator a = { t_malloc, t_realloc, t_free, NULL };
	g_count = 0;
	g_fired = 0;
	g_fail_at = at;
	ckpt_set_allocator(&a);
}

static void disarm(void)
{
	g_fail_at = 0;
	ckpt_set_allocator(NULL);
}

static void quiet(const char *msg, void *ctx) { (void)msg; (void)ctx; }

typedef struct live {
	ckpt_checkpoint *ck;
	ckpt_object *opt;
	ckpt_variable *k, *b;
} live;

/* Builds under the current allocator; returns <0 on the first failure (everything freed). */
static int build(live *m)
{
	memset(m, 0, sizeof(*m));
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	o.warn = quiet;
	int rc = ckpt_checkpoint_new(&m->ck, &o);
	ckpt_object *model = NULL;
	int64_t d[2] = { 3, 4 };
	ckpt_shape ks, bs;
	ckpt_shape_make(&ks, 2, d);
	ckpt_shape_make(&bs, 1, d + 1);
	if (rc == CKPT_OK)
		rc = ckpt_object_new_child(&model, ckpt_checkpoint_root(m->ck), "model");
	if (rc == CKPT_OK)
		rc = ckpt_object_add_variable(&m->k, model, "kernel", "kernel", CKPT_DT_FLOAT, &ks, NULL);
	if (rc == CKPT_OK)
		rc = ckpt_object_add_variable(&m->b, model, "bias", "bias", CKPT_DT_FLOAT, &bs, NULL);
	if (rc == CKPT_OK)
		rc = ckpt_optimizer_new(&m->opt, "Adam");
	if (rc == CKPT_OK)
		rc = ckpt_checkpoint_add(m->ck, "optimizer", m->opt);
	if (rc < 0) {
		ckpt_object_free(m->opt);
		ckpt_checkpoint_free(m->ck);
		memset(m, 0, sizeof(*m));
	}
	return rc;
}

static void free_live(live *m)
{
	ckpt_object_free(m->opt);
	ckpt_checkpoint_free(m->ck);
}

static int slots(live *m)
{
	ckpt_variable *v;
	int rc = ckpt_optimizer_create_slot(&v, m->opt, m->k, "m", NULL);
	if (rc == CKPT_OK)
		rc = ckpt_optimizer_create_slot(&v, m->opt, m->b, "m", NULL);
	return rc;
}

static void make_reference(const char *prefix)
{
	live m;
	cr_assert_eq(build(&m), CKPT_OK);
	cr_assert_eq(slots(&m), CKPT_OK);
	float kv[12], bv[4];
	for (int i = 0; i < 12; i++)
		kv[i] = (float)i + 0.5f;
	for (int i = 0; i < 4; i++)
		bv[i] = (float)i - 7.0f;
	cr_assert_eq(ckpt_variable_assign(m.k, kv, sizeof(kv)), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign(m.b, bv, sizeof(bv)), CKPT_OK);
	ckpt_variable *s;
	cr_assert_eq(ckpt_optimizer_get_slot(&s, m.opt, m.k, "m"), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign(s, kv, sizeof(kv)), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_write(m.ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	free_live(&m);
}

/* One cycle: build, restore (slots pending), create slots, save, load, status. */
static int cycle(const char *ref, const char *out, ckpt_strategy *s)
{
	live m;
	int rc = build(&m);
	if (rc < 0)
		return rc;
	float before[12];
	ckpt_variable_read(m.k, before, sizeof(before));
	ckpt_restore_status *st = NULL;
	rc = ckpt_checkpoint_restore(&st, m.ck, ref);
	if (rc < 0) {
		float after[12];
		ckpt_variable_read(m.k, after, sizeof(after));
		cr_assert_eq(memcmp(before, after, sizeof(after)), 0, "a failed restore changed a variable");
	}
	if (rc == CKPT_OK)
		rc = slots(&m);
	if (rc == CKPT_OK) {
		ckpt_restore_status_unmatched_count(st);
		ckpt_restore_status_unrestored_count(st);
		ckpt_restore_status_assert_consumed(st);
	}
	ckpt_restore_status_free(st);
	const char *p;
	if (rc == CKPT_OK)
		rc = ckpt_checkpoint_save(&p, m.ck, out);
	free_live(&m);
	if (rc < 0)
		return rc;
	ckpt_checkpoint *ck = NULL;
	ckpt_scope_enter(s);
	rc = ckpt_checkpoint_load(&ck, &st, ref, NULL);
	ckpt_scope_exit(s);
	if (rc == CKPT_OK) {
		ckpt_tracked_list *l = NULL;
		rc = ckpt_checkpoint_variables(&l, ck);
		ckpt_tracked_list_free(l);
		ckpt_restore_status_expect_partial(st);
		ckpt_restore_status_free(st);
	}
	ckpt_checkpoint_free(ck);
	return rc;
}

Test(checkpoint_faults, every_allocation_failure_is_reported, .timeout = 240)
{
	char *dir = ts_tmpdir(), *ref = ts_join(dir, "ref"), *out = ts_join(dir, "out");
	make_reference(ref);
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 2), CKPT_OK);
	long at;
	int failures = 0;
	for (at = 1; at < 20000; at++) {
		arm(at);
		int rc = cycle(ref, out, s);
		int fired = g_fired;
		disarm();
		if (!fired) {
			cr_assert_eq(rc, CKPT_OK, "no failure injected at %ld but rc %d: %s", at, rc, ckpt_error_last()->message);
			break;
		}
		if (rc < 0) {
			failures++;
			cr_assert(rc == CKPT_ENOMEM || rc == CKPT_ELIMIT || rc == CKPT_EIO,
				"allocation %ld: unexpected status %s: %s", at, ckpt_status_name(rc), ckpt_error_last()->message);
		}
	}
	cr_assert_lt(at, 20000);
	cr_assert_gt(failures, 50);
	ckpt_strategy_free(s);
	ts_rmtree(dir);
	free(dir);
	free(ref);
	free(out);
}

Test(checkpoint_faults, manager_save_survives_every_io_failure, .timeout = 120)
{
	char *dir = ts_tmpdir();
	long at, reported = 0, absorbed = 0;
	for (at = 1; at < 2000; at++) {
		ckpt_vfs *f;
		cr_assert_eq(ckpt_vfs_faulty_new(&f, ckpt_vfs_default(), at), CKPT_OK);
		live m;
		cr_assert_eq(build(&m), CKPT_OK);
		ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
		mo.vfs = f;
		mo.warn = quiet;
		mo.no_fsync = 1;
		ckpt_manager *mgr = NULL;
		/* the checkpoint writes through the same faulty VFS */
		ckpt_checkpoint_options co = CKPT_CHECKPOINT_OPTIONS_INIT;
		co.vfs = f;
		co.no_fsync = 1;
		co.warn = quiet;
		ckpt_checkpoint *ck;
		cr_assert_eq(ckpt_checkpoint_new(&ck, &co), CKPT_OK);
		ckpt_object *model;
		cr_assert_eq(ckpt_object_new_child(&model, ckpt_checkpoint_root(ck), "model"), CKPT_OK);
		cr_assert_eq(ckpt_object_track_variable(model, "kernel", m.k), CKPT_OK);
		int rc = ckpt_manager_new_ext(&mgr, ck, dir, 2, &mo);
		for (int i = 0; i < 3 && rc == CKPT_OK; i++)
			rc = ckpt_manager_save(NULL, mgr);
		int fired = ckpt_vfs_faulty_fired(f);
		ckpt_manager_free(mgr);
		ckpt_checkpoint_free(ck);
		free_live(&m);
		ckpt_vfs_free(f);
		if (!fired) {
			cr_assert_eq(rc, CKPT_OK, "%s", ckpt_error_last()->message);
			break;
		}
		/*
		 * Reported, or absorbed where absorbing is right: the manager's start-up
		 * reads (adopting an unlisted checkpoint) close read-only files, whose
		 * close failure loses nothing. Either way the directory is checked below.
		 */
		if (rc < 0)
			reported++;
		else
			absorbed++;
		/* whatever happened, a manager on the plain file system finds a complete checkpoint or none */
		ckpt_manager *check;
		ckpt_manager_options qo = CKPT_MANAGER_OPTIONS_INIT;
		qo.warn = quiet;
		cr_assert_eq(ckpt_manager_new_ext(&check, NULL, dir, 0, &qo), CKPT_OK, "%s", ckpt_error_last()->message);
		const char *p;
		rc = ckpt_manager_latest_valid(&p, check);
		cr_assert(rc == CKPT_OK || rc == CKPT_ENOTFOUND);
		if (rc == CKPT_OK) {
			ckpt_reader *r;
			cr_assert_eq(ckpt_reader_open(&r, p, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
			ckpt_reader_free(r);
		}
		ckpt_manager_free(check);
	}
	cr_assert_lt(at, 2000);
	cr_log_info("manager saves, failing each of %ld I/O calls: reported %ld, absorbed %ld", at - 1, reported,
		absorbed);
	cr_assert_gt(reported, 10 * absorbed, "most injected failures must be reported");
	ts_rmtree(dir);
	free(dir);
}

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
#include "ckpt/sys/vfs_faulty.h"
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

/* Counts the warnings of retention (best effort: a delete or the state file after it failed, the save still succeeds). */
static void count_retention(const char *msg, void *ctx)
{
	if (strstr(msg, "retention: "))
		++*(int *)ctx;
}

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
		rc = ckpt_status_of(model = ckpt_object_new_child(ckpt_checkpoint_root(m->ck), "model"));
	if (rc == CKPT_OK)
		rc = ckpt_status_of(m->k = ckpt_object_add_variable(model, "kernel", "kernel", CKPT_DT_FLOAT, &ks, NULL));
	if (rc == CKPT_OK)
		rc = ckpt_status_of(m->b = ckpt_object_add_variable(model, "bias", "bias", CKPT_DT_FLOAT, &bs, NULL));
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
	int rc = ckpt_status_of(v = ckpt_optimizer_create_slot(m->opt, m->k, "m", NULL));
	if (rc == CKPT_OK)
		rc = ckpt_status_of(v = ckpt_optimizer_create_slot(m->opt, m->b, "m", NULL));
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
	cr_assert_eq(ckpt_status_of(s = ckpt_optimizer_slot(m.opt, m.k, "m")), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign(s, kv, sizeof(kv)), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_write(m.ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	free_live(&m);
}

/* Where the last cycle's save wrote (valid when it returned CKPT_OK). */
static char saved_path[4096];

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
		/* the slots created after the restore took their pending values: everything matched */
		rc = ckpt_restore_status_assert_consumed(st);
		if (rc == CKPT_OK) {
			cr_assert_eq(ckpt_restore_status_num_unmatched(st), 0);
			cr_assert_eq(ckpt_restore_status_num_unrestored(st), 0);
		}
	}
	ckpt_restore_status_free(st);
	const char *p;
	if (rc == CKPT_OK)
		rc = ckpt_status_of(p = ckpt_checkpoint_save(m.ck, out));
	if (rc == CKPT_OK)
		snprintf(saved_path, sizeof(saved_path), "%s", p);
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

/* Every value entry of `ref` is in `path` with the same dtype, shape and bytes. */
static void same_values(const char *ref, const char *path, long at)
{
	ckpt_reader *a, *b;
	cr_assert_eq(ckpt_reader_open(&a, ref, NULL), CKPT_OK);
	cr_assert_eq(ckpt_reader_open(&b, path, NULL), CKPT_OK, "allocation %ld: %s: %s", at, path,
		ckpt_error_last()->message);
	size_t nvalues = 0;
	for (size_t i = 0; i < ckpt_reader_num_entries(a); i++) {
		const char *name = ckpt_reader_var(a, i)->name;
		if (!strstr(name, "VARIABLE_VALUE") || strstr(name, "save_counter"))
			continue;
		size_t j;
		ckpt_tensor *x = NULL, *y = NULL;
		cr_assert_eq(ckpt_reader_find(&j, b, name), CKPT_OK, "allocation %ld: %s missing", at, name);
		cr_assert_eq(ckpt_reader_read(&x, a, i), CKPT_OK);
		cr_assert_eq(ckpt_reader_read(&y, b, j), CKPT_OK);
		cr_assert(ckpt_tensor_equal(x, y), "allocation %ld: %s differs", at, name);
		ckpt_tensor_free(x);
		ckpt_tensor_free(y);
		nvalues++;
	}
	cr_assert_eq(nvalues, 4, "kernel, bias and their two slots");
	ckpt_reader_free(a);
	ckpt_reader_free(b);
}

Test(checkpoint_faults, every_allocation_failure_is_reported, .timeout = 240)
{
	char *dir = ts_tmpdir(), *ref = ts_join(dir, "ref"), *out = ts_join(dir, "out");
	make_reference(ref);
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 2), CKPT_OK);
	long at;
	int failures = 0, absorbed = 0;
	for (at = 1; at < 20000; at++) {
		saved_path[0] = '\0';
		arm(at);
		ckpt_error_clear();
		int rc = cycle(ref, out, s);
		int fired = g_fired;
		disarm();
		if (!fired) {
			cr_assert_eq(rc, CKPT_OK, "no failure injected at %ld but rc %d: %s", at, rc, ckpt_error_last()->message);
			same_values(ref, saved_path, at);
			break;
		}
		if (rc < 0) {
			failures++;
			cr_assert(rc == CKPT_ENOMEM || rc == CKPT_ELIMIT || rc == CKPT_EIO,
				"allocation %ld: unexpected status %s: %s", at, ckpt_status_name(rc), ckpt_error_last()->message);
			cr_assert_eq(ckpt_error_last()->code, rc, "allocation %ld: no error of its own", at);
			cr_assert(ckpt_error_last()->message[0]);
		} else {
			/* absorbed: then the saved checkpoint holds the reference's values */
			cr_assert(saved_path[0], "allocation %ld: success without a save", at);
			same_values(ref, saved_path, at);
			absorbed++;
		}
		/* a later cycle must not find this one's file */
		if (saved_path[0]) {
			char idx[4200];
			snprintf(idx, sizeof(idx), "%s.index", saved_path);
			cr_assert_eq(remove(idx), 0, "%s", idx);
		}
	}
	cr_log_info("every allocation of a cycle failed in turn: %ld allocations, %d failed, %d absorbed", at - 1,
		failures, absorbed);
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
	long at, reported = 0, absorbed = 0, retention = 0;
	for (at = 1; at < 2000; at++) {
		int refused = 0;
		ckpt_vfs *f;
		cr_assert_eq(ckpt_vfs_faulty_new(&f, ckpt_vfs_default(), at), CKPT_OK);
		live m;
		cr_assert_eq(build(&m), CKPT_OK);
		ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
		mo.vfs = f;
		mo.warn = count_retention;
		mo.warn_ctx = &refused;
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
		cr_assert_eq(ckpt_status_of(model = ckpt_object_new_child(ckpt_checkpoint_root(ck), "model")), CKPT_OK);
		cr_assert_eq(ckpt_object_track_variable(model, "kernel", m.k), CKPT_OK);
		int rc = ckpt_manager_new_ext(&mgr, ck, dir, 2, &mo);
		for (int i = 0; i < 3 && rc == CKPT_OK; i++)
			rc = ckpt_status_of(ckpt_manager_save(mgr));
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
		else if (refused)
			retention++; /* a delete that failed: warned, and the checkpoint kept */
		else
			absorbed++;
		/* whatever happened, a manager on the plain file system finds a complete checkpoint or none */
		ckpt_manager *check;
		ckpt_manager_options qo = CKPT_MANAGER_OPTIONS_INIT;
		qo.warn = quiet;
		cr_assert_eq(ckpt_manager_new_ext(&check, NULL, dir, 0, &qo), CKPT_OK, "%s", ckpt_error_last()->message);
		const char *p;
		rc = ckpt_status_of(p = ckpt_manager_latest_valid(check));
		cr_assert(rc == CKPT_OK || rc == CKPT_ENOTFOUND);
		if (rc == CKPT_OK) {
			/* complete: every entry reads (opening alone succeeds with a data shard missing) */
			ckpt_reader *r;
			cr_assert_eq(ckpt_reader_open(&r, p, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
			cr_assert_gt(ckpt_reader_num_entries(r), 0);
			for (size_t i = 0; i < ckpt_reader_num_entries(r); i++) {
				ckpt_tensor *t = NULL;
				cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK, "injected failure %ld: %s: %s", at,
					     ckpt_reader_var(r, i)->name, ckpt_error_last()->message);
				ckpt_tensor_free(t);
			}
			ckpt_reader_free(r);
		}
		ckpt_manager_free(check);
	}
	cr_assert_lt(at, 2000);
	cr_log_info("manager saves, failing each of %ld I/O calls: reported %ld, retention warned %ld, absorbed %ld",
		at - 1, reported, retention, absorbed);
	cr_assert_gt(reported, 10 * absorbed, "most injected failures must be reported");
	ts_rmtree(dir);
	free(dir);
}

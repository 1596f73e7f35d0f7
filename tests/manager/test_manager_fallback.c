/*
 * A corrupt newest checkpoint (issue 34, point 6): by default the restore
 * fails, as TensorFlow's does; with ckpt_manager_options.fallback (and
 * `ckpt restore --fallback`) the newest checkpoint that verifies is
 * restored, with a warning naming each one skipped and why.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

typedef struct warnings {
	int n;
	char all[8192];
} warnings;

static void on_warn(const char *msg, void *ctx)
{
	warnings *w = ctx;
	w->n++;
	size_t l = strlen(w->all);
	snprintf(w->all + l, sizeof(w->all) - l, "%s\n", msg);
}

typedef struct live {
	ckpt_checkpoint *ck;
	ckpt_variable *w;
} live;

static void build(live *s)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	cr_assert_eq(ckpt_checkpoint_new(&s->ck, &o), CKPT_OK);
	ckpt_shape v4 = { 1, { 4 } };
	ckpt_object *model = ckpt_object_new_child(ckpt_checkpoint_root(s->ck), "model");
	cr_assert_not_null(model);
	cr_assert_not_null(s->w = ckpt_object_add_variable(model, "w", "w", CKPT_DT_FLOAT, &v4, NULL));
}

static void set_w(live *s, float x)
{
	float v[4] = { x, x, x, x };
	cr_assert_eq(ckpt_variable_assign(s->w, v, sizeof(v)), CKPT_OK);
}

static float get_w(live *s)
{
	float v[4];
	cr_assert_eq(ckpt_variable_read(s->w, v, sizeof(v)), CKPT_OK);
	return v[0];
}

/* "dir/ckpt-1..3", w = 1, 2, 3. */
static char *three_checkpoints(void)
{
	char *dir = ts_tmpdir();
	live s;
	build(&s);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 5), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int i = 1; i <= 3; i++) {
		set_w(&s, (float)i);
		cr_assert_not_null(ckpt_manager_save(m), "%s", ckpt_error_last()->message);
	}
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	return dir;
}

/* Flip a byte inside w's stored value in dir/ckpt-N: its crc32c no longer matches. */
static void corrupt(const char *dir, int n)
{
	char prefix[4096], data[4200];
	snprintf(prefix, sizeof(prefix), "%s/ckpt-%d", dir, n);
	ckpt_reader *r;
	size_t i;
	cr_assert_eq(ckpt_reader_open(&r, prefix, NULL), CKPT_OK);
	cr_assert_eq(ckpt_reader_find(&i, r, "model/w/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	long off = (long)ckpt_reader_var(r, i)->offset + 1;
	ckpt_reader_free(r);
	snprintf(data, sizeof(data), "%s.data-00000-of-00001", prefix);
	cr_assert_eq(ts_flip_byte(data, off, 0x40), 0);
}

static ckpt_manager *manager(live *s, const char *dir, int fallback, warnings *w)
{
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.fallback = fallback;
	mo.warn = on_warn;
	mo.warn_ctx = w;
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new_ext(&m, s->ck, dir, 5, &mo), CKPT_OK, "%s", ckpt_error_last()->message);
	return m;
}

Test(manager_fallback, default_fails_on_a_corrupt_newest_checkpoint)
{
	char *dir = three_checkpoints();
	corrupt(dir, 3);
	live s;
	build(&s);
	set_w(&s, 42);
	warnings w = { 0 };
	ckpt_manager *m = manager(&s, dir, 0, &w);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_status_of(ckpt_manager_restore_latest(&st, m)), CKPT_ECHECKSUM, "%s",
		ckpt_error_last()->message);
	cr_assert(strstr(ckpt_error_last()->path, "ckpt-3"), "%s", ckpt_error_last()->path);
	cr_assert_null(st);
	cr_assert_float_eq(get_w(&s), 42.0f, 0, "a failed restore changed the live value");
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ts_rmtree(dir);
	free(dir);
}

Test(manager_fallback, opt_in_restores_the_newest_that_verifies_and_warns_for_each_skipped)
{
	char *dir = three_checkpoints();
	corrupt(dir, 3);
	corrupt(dir, 2);
	live s;
	build(&s);
	warnings w = { 0 };
	ckpt_manager *m = manager(&s, dir, 1, &w);
	ckpt_restore_status *st;
	const char *p = ckpt_manager_restore_latest(&st, m);
	cr_assert_not_null(p, "%s", ckpt_error_last()->message);
	cr_assert(strstr(p, "/ckpt-1"), "%s", p);
	cr_assert_eq(ckpt_error_last()->code, CKPT_OK);
	cr_assert_float_eq(get_w(&s), 1.0f, 0);
	cr_assert_str_eq(ckpt_restore_status_path(st), p);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	/* one warning per skipped checkpoint, each with its path and the reason */
	cr_assert_eq(w.n, 2, "%s", w.all);
	char *w3 = strstr(w.all, "/ckpt-3"), *w2 = strstr(w.all, "/ckpt-2");
	cr_assert(w3 && w2 && w3 < w2, "newest first: %s", w.all);
	cr_assert(strstr(w.all, "crc32c"), "the reason: %s", w.all);
	cr_assert(strstr(w.all, "falling back"), "%s", w.all);
	/* the next save continues the numbering */
	cr_assert(strstr(ckpt_manager_save(m), "/ckpt-4"));
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ts_rmtree(dir);
	free(dir);
}

Test(manager_fallback, opt_in_with_nothing_that_verifies_fails_with_the_newest_error)
{
	char *dir = three_checkpoints();
	for (int i = 1; i <= 3; i++)
		corrupt(dir, i);
	live s;
	build(&s);
	set_w(&s, 42);
	warnings w = { 0 };
	ckpt_manager *m = manager(&s, dir, 1, &w);
	ckpt_restore_status *st;
	cr_assert_null(ckpt_manager_restore_latest(&st, m));
	cr_assert_eq(ckpt_error_last()->code, CKPT_ECHECKSUM, "%s", ckpt_error_last()->message);
	cr_assert(strstr(ckpt_error_last()->path, "ckpt-3"), "%s", ckpt_error_last()->path);
	cr_assert(strstr(ckpt_error_last()->message, "no older checkpoint"), "%s", ckpt_error_last()->message);
	cr_assert_eq(w.n, 3, "%s", w.all);
	cr_assert_float_eq(get_w(&s), 42.0f, 0);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ts_rmtree(dir);
	free(dir);
}

/* A version-1 options struct (before `fallback`) is still accepted, without the fallback. */
Test(manager_fallback, options_version_1_still_accepted)
{
	char *dir = ts_tmpdir();
	struct { unsigned version; const char *name; ckpt_vfs *vfs; ckpt_warning_fn warn; void *ctx; int no_fsync; } v1 =
		{ 1, NULL, NULL, NULL, NULL, 1 };
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new_ext(&m, NULL, dir, 1, (const ckpt_manager_options *)(void *)&v1), CKPT_OK, "%s",
		ckpt_error_last()->message);
	ckpt_manager_free(m);
	ts_rmtree(dir);
	free(dir);
}

Test(manager_fallback, cli_restore_fallback)
{
	char *dir = three_checkpoints();
	corrupt(dir, 3);
	ts_run_result r = ts_cli("restore", dir, "--strategy", "default", "--expect-partial", NULL);
	ts_assert_exit(&r, 1, "without --fallback the corrupt newest checkpoint fails the restore");
	cr_assert(strstr(r.err, "ckpt-3") && strstr(r.err, "crc32c"), "%s", r.err);
	ts_run_free(&r);
	r = ts_cli("restore", dir, "--strategy", "default", "--fallback", "--json", NULL);
	ts_assert_exit(&r, 0, "--fallback");
	cr_assert(strstr(r.out, "/ckpt-2\""), "restores ckpt-2: %s", r.out);
	cr_assert(strstr(r.err, "warning: skipping checkpoint") && strstr(r.err, "/ckpt-3") &&
		strstr(r.err, "crc32c"), "%s", r.err);
	ts_run_free(&r);
	corrupt(dir, 2);
	corrupt(dir, 1);
	r = ts_cli("restore", dir, "--strategy", "default", "--fallback", NULL);
	ts_assert_exit(&r, 1, "nothing verifies");
	cr_assert(strstr(r.err, "ckpt-1") && strstr(r.err, "no checkpoint in this manager directory verifies"), "%s",
		r.err);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
}

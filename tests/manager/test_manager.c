/*
 * The checkpoint manager: TF's `checkpoint` state file, ckpt-N numbering,
 * max_to_keep, latest-valid lookup that skips incomplete checkpoints, and
 * cleanup of leftover temporaries.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "ckpt/sys/vfs_memory.h"
#include "test_support.h"

typedef struct warnings {
	int n;
	char last[2048];
} warnings;

static void on_warn(const char *msg, void *ctx)
{
	warnings *w = ctx;
	w->n++;
	snprintf(w->last, sizeof(w->last), "%s", msg);
}

typedef struct state {
	ckpt_checkpoint *ck;
	ckpt_variable *w, *step;
	warnings warn;
} state;

static void build(state *s)
{
	memset(s, 0, sizeof(*s));
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	o.warn = on_warn;
	o.warn_ctx = &s->warn;
	cr_assert_eq(ckpt_checkpoint_new(&s->ck, &o), CKPT_OK);
	ckpt_shape v4, sc;
	int64_t d = 4;
	cr_assert_eq(ckpt_shape_make(&v4, 1, &d), CKPT_OK);
	cr_assert_eq(ckpt_shape_make(&sc, 0, NULL), CKPT_OK);
	ckpt_object *model;
	cr_assert_eq(ckpt_status_of(model = ckpt_object_new_child(ckpt_checkpoint_root(s->ck), "model")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(s->w = ckpt_object_add_variable(model, "w", "w", CKPT_DT_FLOAT, &v4, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(s->step = ckpt_object_add_variable(ckpt_checkpoint_root(s->ck), "step", "step", CKPT_DT_INT64, &sc, NULL)),
		     CKPT_OK);
}

static void set_w(state *s, float x)
{
	float v[4] = { x, x + 1, x + 2, x + 3 };
	cr_assert_eq(ckpt_variable_assign(s->w, v, sizeof(v)), CKPT_OK);
}

static float get_w(state *s)
{
	float v[4];
	cr_assert_eq(ckpt_variable_read(s->w, v, sizeof(v)), CKPT_OK);
	return v[0];
}

static int exists(const char *dir, const char *name)
{
	char *p = ts_join(dir, name);
	struct stat st;
	int r = stat(p, &st) == 0;
	free(p);
	return r;
}

static char *state_file(const char *dir)
{
	char *p = ts_join(dir, "checkpoint");
	char *t = ts_read_file(p, NULL);
	free(p);
	cr_assert_not_null(t);
	return t;
}

Test(manager, numbering_retention_and_state_file)
{
	char *dir = ts_tmpdir();
	state s;
	build(&s);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 2), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_null(ckpt_manager_latest(m));
	const char *p;
	for (int i = 1; i <= 4; i++) {
		set_w(&s, (float)i);
		cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK, "%s", ckpt_error_last()->message);
		char want[4096];
		snprintf(want, sizeof(want), "%s/ckpt-%d", dir, i);
		cr_assert_str_eq(p, want);
		cr_assert_eq(ckpt_checkpoint_save_counter(s.ck), i);
	}
	cr_assert_eq(ckpt_manager_num_checkpoints(m), 2);
	cr_assert(!exists(dir, "ckpt-1.index"));
	cr_assert(!exists(dir, "ckpt-1.data-00000-of-00001"));
	cr_assert(!exists(dir, "ckpt-2.index"));
	cr_assert(exists(dir, "ckpt-3.index"));
	cr_assert(exists(dir, "ckpt-4.data-00000-of-00001"));
	char *t = state_file(dir);
	cr_assert(strncmp(t, "model_checkpoint_path: \"ckpt-4\"\n"
		"all_model_checkpoint_paths: \"ckpt-3\"\n"
		"all_model_checkpoint_paths: \"ckpt-4\"\n"
		"all_model_checkpoint_timestamps: ", strlen("model_checkpoint_path: \"ckpt-4\"\n"
		"all_model_checkpoint_paths: \"ckpt-3\"\n"
		"all_model_checkpoint_paths: \"ckpt-4\"\n"
		"all_model_checkpoint_timestamps: ")) == 0, "%s", t);
	cr_assert(strstr(t, "last_preserved_timestamp: "), "%s", t);
	/* two timestamp lines, as Python's repr would print them */
	const char *q = strstr(t, "all_model_checkpoint_timestamps: ");
	double ts = strtod(q + strlen("all_model_checkpoint_timestamps: "), NULL);
	cr_assert_gt(ts, 1.6e9);
	cr_assert(strstr(q + 1, "all_model_checkpoint_timestamps: "));
	free(t);
	/* the reader follows the state file */
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, dir, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(strstr(ckpt_reader_path(r), "ckpt-4"));
	ckpt_reader_free(r);
	ckpt_manager_free(m);

	/* a new process: a fresh checkpoint continues the numbering and restores the latest */
	state s2;
	build(&s2);
	cr_assert_eq(ckpt_manager_new(&m, s2.ck, dir, 2), CKPT_OK);
	cr_assert_eq(ckpt_manager_num_checkpoints(m), 2);
	cr_assert(strstr(ckpt_manager_latest(m), "ckpt-4"));
	cr_assert(strstr(ckpt_manager_checkpoint(m, 0), "ckpt-3"));
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_restore_latest(&st, m)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(strstr(p, "ckpt-4"));
	cr_assert_float_eq(get_w(&s2), 4.0f, 0);
	cr_assert_eq(ckpt_checkpoint_save_counter(s2.ck), 4);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK);
	ckpt_restore_status_free(st);
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK);
	cr_assert(strstr(p, "ckpt-5"));
	cr_assert(!exists(dir, "ckpt-3.index"));
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s2.ck);

	/* without restoring, the numbering still continues after the highest existing one */
	state s3;
	build(&s3);
	cr_assert_eq(ckpt_manager_new(&m, s3.ck, dir, 0), CKPT_OK);
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK);
	cr_assert(strstr(p, "ckpt-6"), "%s", p);
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save_number(m, 42)), CKPT_OK);
	cr_assert(strstr(p, "ckpt-42"));
	cr_assert_eq(ckpt_checkpoint_save_counter(s3.ck), 42);
	cr_assert_eq(ckpt_manager_num_checkpoints(m), 4);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s3.ck);
	ckpt_checkpoint_free(s.ck);
	ts_rmtree(dir);
	free(dir);
}

static void save_three(const char *dir, state *s)
{
	build(s);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s->ck, dir, 5), CKPT_OK);
	for (int i = 1; i <= 3; i++) {
		set_w(s, (float)(10 * i));
		cr_assert_eq(ckpt_status_of(ckpt_manager_save(m)), CKPT_OK);
	}
	ckpt_manager_free(m);
}

Test(manager, skips_an_incomplete_latest_checkpoint)
{
	char *dir = ts_tmpdir();
	state s;
	save_three(dir, &s);
	/* the latest lost its data file (e.g. a crash while copying the directory) */
	char *data = ts_join(dir, "ckpt-3.data-00000-of-00001");
	cr_assert_eq(unlink(data), 0);
	free(data);
	state s2;
	build(&s2);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s2.ck, dir, 5), CKPT_OK);
	cr_assert(strstr(ckpt_manager_latest(m), "ckpt-3"));
	const char *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_latest_valid(m)), CKPT_OK);
	cr_assert(strstr(p, "ckpt-2"), "%s", p);
	cr_assert_eq(s2.warn.n, 1);
	cr_assert(strstr(s2.warn.last, "ckpt-3"), "%s", s2.warn.last);
	cr_assert(strstr(s2.warn.last, "data file"), "%s", s2.warn.last);
	cr_assert(strstr(s2.warn.last, "missing"), "%s", s2.warn.last);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_restore_latest(&st, m)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(strstr(p, "ckpt-2"));
	cr_assert_float_eq(get_w(&s2), 20.0f, 0);
	ckpt_restore_status_free(st);
	/* the next save does not reuse number 3 */
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK);
	cr_assert(strstr(p, "ckpt-4"), "%s", p);
	ckpt_manager_free(m);

	/* a corrupt index (truncated) is skipped as well; with nothing valid left: ENOTFOUND */
	char *idx = ts_join(dir, "ckpt-4.index");
	cr_assert_eq(truncate(idx, 10), 0);
	free(idx);
	idx = ts_join(dir, "ckpt-2.index");
	cr_assert_eq(unlink(idx), 0);
	free(idx);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	warnings w = { 0 };
	mo.warn = on_warn;
	mo.warn_ctx = &w;
	cr_assert_eq(ckpt_manager_new_ext(&m, NULL, dir, 5, &mo), CKPT_OK);
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_latest_valid(m)), CKPT_OK);
	cr_assert(strstr(p, "ckpt-1"), "%s", p);
	cr_assert_eq(w.n, 3); /* 4 corrupt, 3 incomplete, 2 without index */
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_EINVAL); /* read-only manager */
	ckpt_manager_free(m);
	idx = ts_join(dir, "ckpt-1.index");
	cr_assert_eq(unlink(idx), 0);
	free(idx);
	cr_assert_eq(ckpt_manager_new_ext(&m, NULL, dir, 5, &mo), CKPT_OK);
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_latest_valid(m)), CKPT_ENOTFOUND);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ckpt_checkpoint_free(s2.ck);
	ts_rmtree(dir);
	free(dir);
}

Test(manager, restore_latest_in_an_empty_directory_is_a_fresh_start)
{
	char *dir = ts_tmpdir();
	char *sub = ts_join(dir, "run/ckpts");
	state s;
	build(&s);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, sub, 3), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status *st = (ckpt_restore_status *)1;
	const char *p = "x";
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_restore_latest(&st, m)), CKPT_OK);
	cr_assert_null(st);
	cr_assert_null(p);
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(strstr(p, "run/ckpts/ckpt-1"));
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ts_rmtree(dir);
	free(dir);
	free(sub);
}

Test(manager, cleans_up_leftover_temporaries_and_adopts_checkpoints_without_state)
{
	char *dir = ts_tmpdir();
	state s;
	save_three(dir, &s);
	char *st = ts_join(dir, "checkpoint");
	cr_assert_eq(unlink(st), 0);
	free(st);
	const char *junk[] = { "checkpoint.tempstate1234_5_6", "ckpt-4.index.tempstate99_1_1", "ckpt-4_temp" };
	for (int i = 0; i < 2; i++) {
		char *p = ts_join(dir, junk[i]);
		cr_assert_eq(ts_write_file(p, "x", 1), 0);
		free(p);
	}
	char *tdir = ts_join(dir, junk[2]);
	cr_assert_eq(mkdir(tdir, 0755), 0);
	char *tf = ts_join(tdir, "part-00000-of-00001.data-00000-of-00001");
	cr_assert_eq(ts_write_file(tf, "x", 1), 0);
	free(tf);
	free(tdir);
	char *keep = ts_join(dir, "notes.txt");
	cr_assert_eq(ts_write_file(keep, "x", 1), 0);
	free(keep);
	char *orphan = ts_join(dir, "ckpt-9.data-00000-of-00001");
	cr_assert_eq(ts_write_file(orphan, "x", 1), 0);
	free(orphan);
	/* a read-only manager touches nothing (a trainer may be writing) */
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, NULL, dir, 0), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int i = 0; i < 3; i++)
		cr_assert(exists(dir, junk[i]), "%s", junk[i]);
	ckpt_manager_free(m);
	state s2;
	build(&s2);
	cr_assert_eq(ckpt_manager_new(&m, s2.ck, dir, 0), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int i = 0; i < 3; i++)
		cr_assert(!exists(dir, junk[i]), "%s", junk[i]);
	cr_assert(!exists(dir, "ckpt-9.data-00000-of-00001"));
	cr_assert(exists(dir, "ckpt-3.data-00000-of-00001"));
	cr_assert(exists(dir, "notes.txt"));
	ckpt_checkpoint_free(s2.ck);
	cr_assert_eq(ckpt_manager_num_checkpoints(m), 3);
	cr_assert(strstr(ckpt_manager_checkpoint(m, 0), "ckpt-1"));
	cr_assert(strstr(ckpt_manager_latest(m), "ckpt-3"));
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ts_rmtree(dir);
	free(dir);
}

Test(manager, reads_a_tensorflow_state_file)
{
	char *dir = ts_tmpdir();
	cr_assert_eq(ts_copy(ts_fixture("tf/tfx__estimator_ckpts"), dir), 0);
	char *sub = ts_join(dir, "tfx__estimator_ckpts");
	struct stat sb;
	if (stat(sub, &sb) != 0) { /* cp into an existing dir copies the contents */
		free(sub);
		sub = strdup(dir);
	}
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.checkpoint_name = "model.ckpt";
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new_ext(&m, NULL, sub, 0, &mo), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_manager_num_checkpoints(m), 3);
	cr_assert(strstr(ckpt_manager_latest(m), "model.ckpt-1000"));
	cr_assert(strstr(ckpt_manager_checkpoint(m, 1), "model.ckpt-999"));
	const char *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_latest_valid(m)), CKPT_OK);
	cr_assert(strstr(p, "model.ckpt-1000"));
	ckpt_manager_free(m);
	ts_rmtree(dir);
	free(dir);
	free(sub);
}

Test(manager, works_on_the_memory_vfs)
{
	ckpt_vfs *mem;
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	state s;
	memset(&s, 0, sizeof(s));
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.vfs = mem;
	o.warn = on_warn;
	o.warn_ctx = &s.warn;
	cr_assert_eq(ckpt_checkpoint_new(&s.ck, &o), CKPT_OK);
	ckpt_shape v4;
	int64_t d = 4;
	cr_assert_eq(ckpt_shape_make(&v4, 1, &d), CKPT_OK);
	cr_assert_eq(ckpt_status_of(s.w = ckpt_object_add_variable(ckpt_checkpoint_root(s.ck), "w", "w", CKPT_DT_FLOAT, &v4, NULL)),
		     CKPT_OK);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, "/mem/run", 1), CKPT_OK, "%s", ckpt_error_last()->message);
	const char *p;
	set_w(&s, 1.0f);
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK, "%s", ckpt_error_last()->message);
	set_w(&s, 2.0f);
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_str_eq(p, "/mem/run/ckpt-2");
	const void *buf;
	size_t n;
	cr_assert_eq(ckpt_status_of(buf = ckpt_vfs_memory_get(&n, mem, "/mem/run/checkpoint")), CKPT_OK);
	cr_assert(n > 0 && memcmp(buf, "model_checkpoint_path: \"ckpt-2\"\n", 32) == 0);
	cr_assert_neq(ckpt_status_of(buf = ckpt_vfs_memory_get(&n, mem, "/mem/run/ckpt-1.index")), CKPT_OK);
	set_w(&s, 0.0f);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_restore_latest(&st, m)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_float_eq(get_w(&s), 2.0f, 0);
	ckpt_restore_status_free(st);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ckpt_vfs_free(mem);
}

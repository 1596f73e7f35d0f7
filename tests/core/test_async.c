/* Asynchronous saves: staging isolates the write from later training; failures surface on the next call. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "ckpt/ckpt.h"
#include "ckpt/sys/vfs_faulty.h"
#include "ckpt/sys/vfs_memory.h"
#include "test_support.h"

typedef struct {
	ckpt_strategy *s;
	ckpt_checkpoint *ck;
	ckpt_variable *kernel, *count;
} small_state;

static void build(small_state *st, int replicas)
{
	cr_assert_eq(ckpt_strategy_mirrored_new(&st->s, replicas), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(st->s), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_new(&st->ck, NULL), CKPT_OK);
	ckpt_object *model;
	cr_assert_eq(ckpt_status_of(model = ckpt_object_new_child(ckpt_checkpoint_root(st->ck), "model")), CKPT_OK);
	ckpt_shape sh;
	ckpt_shape_make(&sh, 2, (int64_t[]){ 64, 32 });
	cr_assert_eq(ckpt_status_of(st->kernel = ckpt_object_add_variable(model, "kernel", "dense/kernel", CKPT_DT_FLOAT, &sh, NULL)),
		     CKPT_OK);
	ckpt_shape scalar = { 0 };
	cr_assert_eq(ckpt_status_of(st->count = ckpt_object_add_variable(model, "count", "count", CKPT_DT_INT64, &scalar, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(st->s), CKPT_OK);
}

static void set_values(small_state *st, float base, int64_t count)
{
	float v[64 * 32];
	for (int i = 0; i < 64 * 32; i++)
		v[i] = base + (float)i * 0.25f;
	cr_assert_eq(ckpt_variable_assign(st->kernel, v, sizeof(v)), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign(st->count, &count, sizeof(count)), CKPT_OK);
}

static void check_file(const char *prefix, float base, int64_t count)
{
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, prefix, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	size_t i;
	cr_assert_eq(ckpt_reader_find(&i, r, "model/kernel/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	float v[64 * 32];
	cr_assert_eq(ckpt_reader_read_into(r, i, v, sizeof(v)), CKPT_OK);
	for (int k = 0; k < 64 * 32; k++)
		cr_assert_eq(v[k], base + (float)k * 0.25f, "element %d", k);
	cr_assert_eq(ckpt_reader_find(&i, r, "model/count/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	int64_t c;
	cr_assert_eq(ckpt_reader_read_into(r, i, &c, sizeof(c)), CKPT_OK);
	cr_assert_eq(c, count);
	cr_assert_not_null(ckpt_reader_object_graph(r));
	ckpt_reader_free(r);
}

/* A saver without fsync (scratch files; the commit is still atomic). */
static ckpt_async_saver *new_saver(void)
{
	ckpt_async_options o = CKPT_ASYNC_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_async_saver *as;
	cr_assert_eq(ckpt_async_saver_new(&as, &o), CKPT_OK);
	return as;
}

static void teardown_state(small_state *st)
{
	ckpt_checkpoint_free(st->ck);
	ckpt_strategy_free(st->s);
}

Test(async, writes_the_staged_state_while_training_continues)
{
	char *dir = ts_tmpdir();
	small_state st;
	build(&st, 2);
	ckpt_async_saver *as = new_saver();
	char *p1 = ts_join(dir, "a-1"), *p2 = ts_join(dir, "a-2");
	set_values(&st, 1.0f, 10);
	cr_assert_eq(ckpt_async_last_blocking_seconds(as), 0.0, "no save yet");
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(ckpt_async_save(as, st.ck, p1), CKPT_OK, "%s", ckpt_error_last()->message);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* "training" continues at once: the file must still get the staged values */
	set_values(&st, -7.0f, 11);
	/* the blocked span is measured inside the call, so it lies within the caller's measurement of it */
	double blocked = ckpt_async_last_blocking_seconds(as);
	double outer = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	cr_assert(blocked > 0.0 && blocked <= outer, "blocked %.9f s, the call took %.9f s", blocked, outer);
	cr_assert_eq(ckpt_async_save(as, st.ck, p2), CKPT_OK);  /* waits for the first write */
	set_values(&st, 99.0f, 12);
	cr_assert_eq(ckpt_async_wait(as), CKPT_OK);
	cr_assert_not(ckpt_async_busy(as));
	check_file(p1, 1.0f, 10);
	check_file(p2, -7.0f, 11);
	ckpt_async_saver_free(as);
	teardown_state(&st);
	ts_rmtree(dir);
	free(dir);
	free(p1);
	free(p2);
}

Test(async, failed_background_write_is_reported_on_next_call_and_leaves_no_checkpoint)
{
	small_state st;
	build(&st, 1);
	ckpt_vfs *mem, *faulty;
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	/* count the calls of one good save, then fail each of them in turn */
	ckpt_vfs_faulty_new(&faulty, mem, 0);
	ckpt_async_options o = CKPT_ASYNC_OPTIONS_INIT;
	o.vfs = faulty;
	ckpt_async_saver *as;
	cr_assert_eq(ckpt_async_saver_new(&as, &o), CKPT_OK);
	set_values(&st, 3.0f, 5);
	cr_assert_eq(ckpt_async_save(as, st.ck, "d/ok"), CKPT_OK);
	cr_assert_eq(ckpt_async_wait(as), CKPT_OK);
	long calls = ckpt_vfs_faulty_calls(faulty);
	ckpt_async_saver_free(as);
	ckpt_vfs_free(faulty);
	cr_assert_gt(calls, 3);
	for (long i = 1; i <= calls; i++) {
		ckpt_vfs_faulty_new(&faulty, mem, i);
		o.vfs = faulty;
		cr_assert_eq(ckpt_async_saver_new(&as, &o), CKPT_OK);
		cr_assert_eq(ckpt_async_save(as, st.ck, "d/bad"), CKPT_OK);
		int rc = ckpt_async_save(as, st.ck, "d/bad2");  /* reports the first write's failure */
		if (rc == CKPT_OK)
			rc = ckpt_async_wait(as);
		cr_assert_eq(rc, CKPT_EIO, "call %ld: rc %d", i, rc);
		cr_assert_not_null(strstr(ckpt_error_last()->message, "injected"));
		cr_assert_eq(ckpt_async_wait(as), CKPT_OK, "an error is reported once");
		ckpt_async_saver_free(as);
		ckpt_vfs_free(faulty);
		/* nothing readable under the failed name */
		ckpt_open_options ro = CKPT_OPEN_OPTIONS_INIT;
		ro.vfs = mem;
		ckpt_reader *r = NULL;
		int ok = ckpt_reader_open(&r, "d/bad", &ro);
		if (ok == CKPT_OK) {
			/* the rename of the index is the commit: if it happened, the whole checkpoint is there */
			for (size_t k = 0; k < ckpt_reader_num_entries(r); k++) {
				ckpt_tensor *t;
				cr_assert_eq(ckpt_reader_read(&t, r, k), CKPT_OK);
				ckpt_tensor_free(t);
			}
			ckpt_reader_free(r);
			ckpt_vfs_remove(mem, "d/bad.index");
		}
	}
	ckpt_vfs_free(mem);
	teardown_state(&st);
}

typedef struct {
	ckpt_async_saver *as;
	ckpt_checkpoint *ck;
	const char *path;
	int rc[2], code[2];
	char message[2][256];
} replica_try;

/* Each replica tries to save from inside ckpt_strategy_run. */
static int save_from_replica(ckpt_replica_ctx *ctx, void *arg)
{
	replica_try *t = arg;
	int id = ckpt_replica_id(ctx);
	ckpt_error_clear();
	t->rc[id] = ckpt_async_save(t->as, t->ck, t->path);
	t->code[id] = ckpt_error_last()->code;
	snprintf(t->message[id], sizeof(t->message[id]), "%s", ckpt_error_last()->message);
	return CKPT_OK;
}

Test(async, refuses_replica_context)
{
	char *dir = ts_tmpdir();
	small_state st;
	build(&st, 2);
	set_values(&st, 4.0f, 6);
	ckpt_async_saver *as = new_saver();
	cr_assert_eq(ckpt_async_save(as, NULL, "x"), CKPT_EINVAL);
	char *p = ts_join(dir, "r");
	replica_try t = { as, st.ck, p, { 1, 1 }, { 0, 0 }, { "", "" } };
	cr_assert_eq(ckpt_strategy_run(st.s, save_from_replica, &t), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int id = 0; id < 2; id++) {
		cr_assert_eq(t.rc[id], CKPT_ESCOPE, "replica %d: %s", id, ckpt_status_name(t.rc[id]));
		cr_assert_eq(t.code[id], CKPT_ESCOPE);
		cr_assert_not_null(strstr(t.message[id], "replica context"), "%s", t.message[id]);
	}
	/* nothing was started or written, and the same saver still saves from the training loop */
	cr_assert_not(ckpt_async_busy(as));
	cr_assert_eq(ckpt_reader_open(&(ckpt_reader *){ NULL }, p, NULL), CKPT_ENOTFOUND);
	cr_assert_eq(ckpt_async_save(as, st.ck, p), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_async_wait(as), CKPT_OK);
	check_file(p, 4.0f, 6);
	ckpt_async_saver_free(as);
	teardown_state(&st);
	free(p);
	ts_rmtree(dir);
	free(dir);
}

static void read_strings(const char *prefix, const char *want0, const char *want1)
{
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, prefix, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	size_t i;
	cr_assert_eq(ckpt_reader_find(&i, r, "model/vocab/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	ckpt_tensor *t;
	cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(t->dtype, CKPT_DT_STRING);
	const ckpt_bytes *e = t->data;
	cr_assert_eq(e[0].len, strlen(want0));
	cr_assert_eq(memcmp(e[0].data, want0, e[0].len), 0);
	cr_assert_eq(e[1].len, strlen(want1));
	cr_assert_eq(memcmp(e[1].data, want1, e[1].len), 0);
	ckpt_tensor_free(t);
	ckpt_reader_free(r);
}

static void assign_strings(ckpt_variable *v, const char *a, const char *b)
{
	ckpt_shape sh;
	ckpt_shape_make(&sh, 1, (int64_t[]){ 2 });
	ckpt_bytes e[2] = { { strlen(a), (char *)a }, { strlen(b), (char *)b } };
	ckpt_tensor *t;
	cr_assert_eq(ckpt_tensor_new_strings(&t, &sh, e), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign_tensor(v, t), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_tensor_free(t);
}

/* String variables are staged as deep copies: what sync save accepts, async save accepts. */
Test(async, stages_string_variables_as_deep_copies)
{
	char *dir = ts_tmpdir();
	small_state st;
	build(&st, 4);
	ckpt_object *model;
	cr_assert_eq(ckpt_status_of(model = ckpt_object_child(ckpt_checkpoint_root(st.ck), "model")), CKPT_OK);
	ckpt_shape sh;
	ckpt_shape_make(&sh, 1, (int64_t[]){ 2 });
	ckpt_variable *vocab;
	cr_assert_eq(ckpt_scope_enter(st.s), CKPT_OK);
	cr_assert_eq(ckpt_status_of(vocab = ckpt_object_add_variable(model, "vocab", "vocab", CKPT_DT_STRING, &sh, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(st.s), CKPT_OK);
	ckpt_async_saver *as = new_saver();
	char *p1 = ts_join(dir, "s-1"), *p2 = ts_join(dir, "s-2");
	set_values(&st, 2.0f, 3);
	assign_strings(vocab, "first", "");
	cr_assert_eq(ckpt_async_save(as, st.ck, p1), CKPT_OK, "%s", ckpt_error_last()->message);
	/* the live value changes (old copies freed) while the write may still run */
	assign_strings(vocab, "second value", "x");
	set_values(&st, 5.0f, 4);
	cr_assert_eq(ckpt_async_save(as, st.ck, p2), CKPT_OK, "%s", ckpt_error_last()->message);
	assign_strings(vocab, "third", "y");
	cr_assert_eq(ckpt_async_wait(as), CKPT_OK, "%s", ckpt_error_last()->message);
	check_file(p1, 2.0f, 3);
	check_file(p2, 5.0f, 4);
	read_strings(p1, "first", "");
	read_strings(p2, "second value", "x");
	ckpt_async_saver_free(as);
	teardown_state(&st);
	ts_rmtree(dir);
	free(dir);
	free(p1);
	free(p2);
}

Test(async, reserve_sizes_the_staging_area_before_the_first_save)
{
	char *dir = ts_tmpdir();
	small_state st;
	build(&st, 2);
	ckpt_async_saver *as = new_saver();
	cr_assert_eq(ckpt_async_saver_reserve(NULL, st.ck), CKPT_EINVAL);
	cr_assert_eq(ckpt_async_saver_reserve(as, st.ck), CKPT_OK, "%s", ckpt_error_last()->message);
	char *p1 = ts_join(dir, "r-1"), *p2 = ts_join(dir, "r-2");
	set_values(&st, 3.0f, 5);
	cr_assert_eq(ckpt_async_save(as, st.ck, p1), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_async_wait(as), CKPT_OK);
	check_file(p1, 3.0f, 5);
	/* a variable added later: reserve again grows the area; the save still holds every value */
	ckpt_object *extra;
	cr_assert_eq(ckpt_status_of(extra = ckpt_object_new_child(ckpt_checkpoint_root(st.ck), "extra")), CKPT_OK);
	ckpt_shape sh;
	ckpt_shape_make(&sh, 1, (int64_t[]){ 1 << 20 });
	ckpt_variable *big;
	cr_assert_eq(ckpt_status_of(big = ckpt_object_add_variable(extra, "w", "extra/w", CKPT_DT_FLOAT, &sh, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_async_saver_reserve(as, st.ck), CKPT_OK, "%s", ckpt_error_last()->message);
	set_values(&st, -2.0f, 6);
	cr_assert_eq(ckpt_async_save(as, st.ck, p2), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_async_wait(as), CKPT_OK);
	check_file(p2, -2.0f, 6);
	ckpt_async_saver_free(as);
	teardown_state(&st);
	ts_rmtree(dir);
	free(dir);
	free(p1);
	free(p2);
}

/*
 * Host state tracked by pointer (issue 13, point 2; ckpt/host.h): a scalar,
 * an array and a struct of fixed-size fields, read at save and written at
 * restore, one copy per process whatever the scope, with TensorFlow's keys;
 * through restore-on-create, the manager, async saves and the restore
 * status; refused where it would be wrong; and read / written by real
 * TensorFlow (tests/oracles/tf_host_state.py).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

typedef struct loop_state {
	int64_t rng[4];
	int64_t position;
	double lr;
	float hist[3];
	int32_t epoch;
} loop_state;

static const ckpt_host_field loop_fields[] = {
	CKPT_HOST_ARRAY(loop_state, rng, CKPT_DT_INT64),
	CKPT_HOST_SCALAR(loop_state, position, CKPT_DT_INT64),
	CKPT_HOST_SCALAR(loop_state, lr, CKPT_DT_DOUBLE),
	CKPT_HOST_ARRAY(loop_state, hist, CKPT_DT_FLOAT),
	CKPT_HOST_SCALAR(loop_state, epoch, CKPT_DT_INT32),
};
#define NFIELDS (sizeof(loop_fields) / sizeof(loop_fields[0]))

typedef struct trainer {
	ckpt_checkpoint *ck;
	ckpt_object *loop;
	ckpt_variable *kernel;
	int64_t step;
	loop_state st;
} trainer;

/* root: step (host), loop/{rng,position,lr,hist,epoch} (host struct), kernel (a variable of the scope) */
static void build(trainer *t, ckpt_strategy *s, int with_loop)
{
	ckpt_shape scalar = { 0 }, ks;
	int64_t two = 2;
	memset(t, 0, sizeof(*t));
	cr_assert_eq(ckpt_shape_make(&ks, 1, &two), CKPT_OK);
	if (s)
		cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_new(&t->ck, NULL), CKPT_OK);
	ckpt_object *root = ckpt_checkpoint_root(t->ck);
	cr_assert_eq(ckpt_object_track_host(root, "step", CKPT_DT_INT64, &scalar, &t->step), CKPT_OK, "%s",
		ckpt_error_last()->message);
	cr_assert_eq(ckpt_status_of(t->kernel = ckpt_object_add_variable(root, "kernel", "kernel", CKPT_DT_FLOAT, &ks, NULL)),
		     CKPT_OK);
	if (with_loop) {
		cr_assert_eq(ckpt_status_of(t->loop = ckpt_object_new_child(root, "loop")), CKPT_OK);
		cr_assert_eq(ckpt_object_track_host_struct(t->loop, &t->st, loop_fields, NFIELDS), CKPT_OK, "%s",
			ckpt_error_last()->message);
	}
	if (s)
		cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
}

static void set_values(trainer *t, int64_t base)
{
	t->step = base;
	for (int i = 0; i < 4; i++)
		t->st.rng[i] = base * 1000 + i;
	t->st.position = base * 64;
	t->st.lr = 1.0 / (double)(base + 3);
	for (int i = 0; i < 3; i++)
		t->st.hist[i] = (float)base / (float)(i + 7);
	t->st.epoch = (int32_t)base + 1;
	const float k[2] = { (float)base, -(float)base };
	cr_assert_eq(ckpt_variable_assign(t->kernel, k, sizeof(k)), CKPT_OK);
}

static void expect_values(const trainer *t, int64_t base)
{
	trainer want;
	want.kernel = NULL;
	want.step = base;
	for (int i = 0; i < 4; i++)
		want.st.rng[i] = base * 1000 + i;
	want.st.position = base * 64;
	want.st.lr = 1.0 / (double)(base + 3);
	for (int i = 0; i < 3; i++)
		want.st.hist[i] = (float)base / (float)(i + 7);
	want.st.epoch = (int32_t)base + 1;
	cr_assert_eq(t->step, want.step);
	cr_assert_eq(memcmp(t->st.rng, want.st.rng, sizeof(want.st.rng)), 0);
	cr_assert_eq(t->st.position, want.st.position);
	cr_assert_eq(memcmp(&t->st.lr, &want.st.lr, sizeof(double)), 0);
	cr_assert_eq(memcmp(t->st.hist, want.st.hist, sizeof(want.st.hist)), 0);
	cr_assert_eq(t->st.epoch, want.st.epoch);
}

static int64_t stored_i64(const char *path, const char *key)
{
	ckpt_reader *r;
	ckpt_tensor *x;
	size_t i;
	int64_t v;
	cr_assert_eq(ckpt_reader_open(&r, path, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_reader_find(&i, r, key), CKPT_OK, "%s has no %s", path, key);
	cr_assert_eq(ckpt_reader_read(&x, r, i), CKPT_OK);
	cr_assert_eq(x->dtype, CKPT_DT_INT64);
	memcpy(&v, x->data, sizeof(v));
	ckpt_tensor_free(x);
	ckpt_reader_free(r);
	return v;
}

Test(host_state, save_reads_the_memory_restore_writes_it_inside_a_mirrored_scope)
{
	char *dir = ts_tmpdir(), *path = ts_join(dir, "ckpt");
	ckpt_strategy *s;
	trainer a, b;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 3), CKPT_OK);
	build(&a, s, 1);
	/* one copy, no strategy's, though tracked inside a mirrored scope; the kernel is mirrored */
	ckpt_variable *v;
	cr_assert_eq(ckpt_status_of(v = ckpt_checkpoint_find_variable(a.ck, "loop/rng")), CKPT_OK);
	cr_assert_eq(ckpt_variable_is_host(v), 1);
	cr_assert_eq(ckpt_variable_num_replicas(v), 1);
	cr_assert_eq(ckpt_variable_kind(v), CKPT_VAR_PLAIN);
	cr_assert_eq(ckpt_variable_replica_data(v, 0), (const void *)a.st.rng, "wraps the trainer's memory");
	cr_assert_eq(ckpt_variable_is_host(a.kernel), 0);
	cr_assert_eq(ckpt_variable_num_replicas(a.kernel), 3);
	/* written after tracking: the save reads the memory as it is then */
	set_values(&a, 5);
	cr_assert_eq(ckpt_checkpoint_write(a.ck, path), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(stored_i64(path, "step/.ATTRIBUTES/VARIABLE_VALUE"), 5);
	cr_assert_eq(stored_i64(path, "loop/position/.ATTRIBUTES/VARIABLE_VALUE"), 5 * 64);

	build(&b, s, 1);
	set_values(&b, 99);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, b.ck, path), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_num_restored(st), 1 + NFIELDS + 1);
	ckpt_restore_status_free(st);
	expect_values(&b, 5);
	float k[2];
	cr_assert_eq(ckpt_variable_read(b.kernel, k, sizeof(k)), CKPT_OK);
	cr_assert_eq(k[0], 5.0f);
	cr_assert_eq(ckpt_variable_replicas_identical(b.kernel), 1);

	ckpt_checkpoint_free(a.ck);
	ckpt_checkpoint_free(b.ck);
	ckpt_strategy_free(s);
	ts_rmtree(dir);
	free(path), free(dir);
}

Test(host_state, restore_on_create_and_the_manager)
{
	char *dir = ts_tmpdir();
	trainer a, b;
	ckpt_manager *mgr;
	build(&a, NULL, 1);
	cr_assert_eq(ckpt_manager_new(&mgr, a.ck, dir, 2), CKPT_OK);
	set_values(&a, 1);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save(mgr)), CKPT_OK, "%s", ckpt_error_last()->message);
	set_values(&a, 2);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save(mgr)), CKPT_OK);
	ckpt_manager_free(mgr);

	/* the struct is tracked after the restore: its values are held, then written on create */
	build(&b, NULL, 0);
	memset(&b.st, 0x5a, sizeof(b.st));
	const char *from;
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_manager_new(&mgr, b.ck, dir, 2), CKPT_OK);
	cr_assert_eq(ckpt_status_of(from = ckpt_manager_restore_latest(&st, mgr)), CKPT_OK, "%s",
		     ckpt_error_last()->message);
	cr_assert_not_null(from);
	cr_assert_eq(b.step, 2, "restored at once");
	cr_assert_eq(b.st.position, 0x5a5a5a5a5a5a5a5all, "not tracked yet: untouched");
	cr_assert_neq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "the loop values are still held");
	cr_assert_eq(ckpt_status_of(b.loop = ckpt_object_new_child(ckpt_checkpoint_root(b.ck), "loop")), CKPT_OK);
	cr_assert_eq(ckpt_object_track_host_struct(b.loop, &b.st, loop_fields, NFIELDS), CKPT_OK, "%s",
		ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	expect_values(&b, 2);
	cr_assert_eq(ckpt_checkpoint_save_counter(b.ck), 2);
	/* and the next save continues the numbering with the host values as they are now */
	b.step = 3;
	const char *path;
	cr_assert_eq(ckpt_status_of(path = ckpt_manager_save(mgr)), CKPT_OK);
	cr_assert(strstr(path, "ckpt-3"), "%s", path);
	cr_assert_eq(stored_i64(path, "step/.ATTRIBUTES/VARIABLE_VALUE"), 3);
	ckpt_manager_free(mgr);
	ckpt_checkpoint_free(a.ck);
	ckpt_checkpoint_free(b.ck);
	ts_rmtree(dir);
	free(dir);
}

Test(host_state, async_save_reads_the_memory_while_staging)
{
	char *dir = ts_tmpdir(), *path = ts_join(dir, "async");
	trainer a;
	ckpt_async_saver *as;
	ckpt_async_options ao = CKPT_ASYNC_OPTIONS_INIT;
	build(&a, NULL, 0);
	a.step = 41;
	ao.no_fsync = 1;
	cr_assert_eq(ckpt_async_saver_new(&as, &ao), CKPT_OK);
	cr_assert_eq(ckpt_async_save(as, a.ck, path), CKPT_OK, "%s", ckpt_error_last()->message);
	a.step = 42; /* after staging: not in this checkpoint */
	cr_assert_eq(ckpt_async_wait(as), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(stored_i64(path, "step/.ATTRIBUTES/VARIABLE_VALUE"), 41);
	ckpt_async_saver_free(as);
	ckpt_checkpoint_free(a.ck);
	ts_rmtree(dir);
	free(path), free(dir);
}

Test(host_state, mismatch_leaves_the_memory_unchanged)
{
	char *dir = ts_tmpdir(), *path = ts_join(dir, "ckpt");
	trainer a;
	build(&a, NULL, 1);
	set_values(&a, 4);
	cr_assert_eq(ckpt_checkpoint_write(a.ck, path), CKPT_OK);
	ckpt_checkpoint_free(a.ck);

	/* "position" is int32 here: the restore fails, naming it, and writes nothing */
	ckpt_checkpoint *ck;
	int32_t position = 7;
	int64_t step = 8;
	ckpt_shape scalar = { 0 };
	ckpt_object *loop;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	cr_assert_eq(ckpt_object_track_host(ckpt_checkpoint_root(ck), "step", CKPT_DT_INT64, &scalar, &step), CKPT_OK);
	cr_assert_eq(ckpt_status_of(loop = ckpt_object_new_child(ckpt_checkpoint_root(ck), "loop")), CKPT_OK);
	cr_assert_eq(ckpt_object_track_host(loop, "position", CKPT_DT_INT32, &scalar, &position), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_restore(NULL, ck, path), CKPT_EMISMATCH);
	cr_assert(strstr(ckpt_error_last()->message, "position"), "%s", ckpt_error_last()->message);
	cr_assert_eq(position, 7);
	cr_assert_eq(step, 8, "all or nothing: the matching value was not written either");
	ckpt_checkpoint_free(ck);
	ts_rmtree(dir);
	free(path), free(dir);
}

static int touch_host(ckpt_replica_ctx *ctx, void *arg)
{
	void *p;
	(void)ctx;
	return ckpt_status_of(p = ckpt_variable_local(arg));
}

static int track_in_replica(ckpt_replica_ctx *ctx, void *arg)
{
	static int64_t x;
	ckpt_shape scalar = { 0 };
	(void)ctx;
	return ckpt_object_track_host(arg, "x", CKPT_DT_INT64, &scalar, &x);
}

Test(host_state, refused_where_it_would_be_wrong)
{
	ckpt_checkpoint *ck;
	ckpt_object *root;
	ckpt_shape scalar = { 0 };
	int64_t x = 0;
	loop_state st;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	root = ckpt_checkpoint_root(ck);
	cr_assert_eq(ckpt_object_track_host(root, "x", CKPT_DT_INT64, &scalar, NULL), CKPT_EINVAL);
	cr_assert_eq(ckpt_object_track_host(root, "x", CKPT_DT_STRING, &scalar, &x), CKPT_EINVAL);
	cr_assert_eq(ckpt_object_track_host(root, "x", CKPT_DT_INT64, &scalar, &x), CKPT_OK);
	cr_assert_eq(ckpt_object_track_host(root, "x", CKPT_DT_INT64, &scalar, &x), CKPT_EINVAL);
	cr_assert(strstr(ckpt_error_last()->message, "already has a child"), "%s", ckpt_error_last()->message);

	/* a bad table tracks nothing */
	ckpt_host_field bad[NFIELDS];
	memcpy(bad, loop_fields, sizeof(bad));
	bad[2].dtype = CKPT_DT_FLOAT; /* lr is a double */
	cr_assert_eq(ckpt_object_track_host_struct(root, &st, bad, NFIELDS), CKPT_EINVAL);
	cr_assert_str_eq(ckpt_error_last()->variable, "lr");
	cr_assert(strstr(ckpt_error_last()->message, "8 bytes: not one of float32 (4 bytes each)"), "%s",
		ckpt_error_last()->message);
	memcpy(bad, loop_fields, sizeof(bad));
	bad[4].name = "rng";
	cr_assert_eq(ckpt_object_track_host_struct(root, &st, bad, NFIELDS), CKPT_EINVAL);
	cr_assert(strstr(ckpt_error_last()->message, "listed twice"), "%s", ckpt_error_last()->message);
	memcpy(bad, loop_fields, sizeof(bad));
	bad[1].name = "x";
	cr_assert_eq(ckpt_object_track_host_struct(root, &st, bad, NFIELDS), CKPT_EINVAL);
	cr_assert_eq(ckpt_object_num_children(root), 1, "nothing of the bad tables was tracked");

	/* not a variable of the strategy being run, and not trackable from replica context */
	ckpt_strategy *s;
	ckpt_variable *v;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 2), CKPT_OK);
	cr_assert_eq(ckpt_status_of(v = ckpt_object_variable(root, "x")), CKPT_OK);
	cr_assert_eq(ckpt_strategy_run(s, touch_host, v), CKPT_ESCOPE);
	cr_assert(strstr(ckpt_error_last()->message, "host state tracked by pointer"), "%s", ckpt_error_last()->message);
	cr_assert(strstr(ckpt_error_last()->message, "the trainer's business"), "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_strategy_run(s, track_in_replica, root), CKPT_ESCOPE);
	ckpt_strategy_free(s);
	ckpt_checkpoint_free(ck);
}

/* Real TensorFlow restores what C wrote and writes what C restores. */
Test(host_state, tensorflow_reads_and_writes_it, .timeout = 120)
{
	char *dir = ts_tmpdir(), *ours = ts_join(dir, "ours"), *theirs = ts_join(dir, "theirs"), cmd[8192];
	trainer a, b;
	build(&a, NULL, 1);
	set_values(&a, 6);
	a.st.hist[1] = -0.0f;
	cr_assert_eq(ckpt_checkpoint_write(a.ck, ours), CKPT_OK, "%s", ckpt_error_last()->message);
	snprintf(cmd, sizeof(cmd), "%s %s/tests/oracles/tf_host_state.py %s %s", ts_oracle_python(), CKPT_SOURCE_DIR,
		ours, theirs);
	ts_run_result r;
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "TensorFlow failed:\n%s", r.err);
	/* {"epoch": 7, "hist": [...], "lr": "0x...", "position": 384, "rng": [...], "step": 6} */
	long long epoch, position, step, rng[4];
	char lr[64], h[3][64];
	int n = sscanf(r.out, "{\"epoch\": %lld, \"hist\": [\"%63[^\"]\", \"%63[^\"]\", \"%63[^\"]\"], \"lr\": \"%63[^\"]\", "
		"\"position\": %lld, \"rng\": [%lld, %lld, %lld, %lld], \"step\": %lld}", &epoch, h[0], h[1], h[2], lr,
		&position, &rng[0], &rng[1], &rng[2], &rng[3], &step);
	cr_assert_eq(n, 11, "unparsable oracle output: %s", r.out);
	cr_assert_eq(step, 6);
	cr_assert_eq(position, 6 * 64);
	cr_assert_eq(epoch, 7);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(rng[i], 6000 + i);
	cr_assert_eq(strtod(lr, NULL), a.st.lr, "lr %s", lr);
	for (int i = 0; i < 3; i++) {
		float got = (float)strtod(h[i], NULL);
		cr_assert_eq(memcmp(&got, &a.st.hist[i], sizeof(got)), 0, "hist[%d] %s", i, h[i]);
	}
	ts_run_free(&r);

	/* TF's checkpoint (step + 1, rng + 1, position + 64, lr / 2, hist * 2, epoch + 1) into host memory */
	build(&b, NULL, 1);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, b.ck, theirs), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	float k[2];
	cr_assert_eq(ckpt_variable_read(b.kernel, k, sizeof(k)), CKPT_OK);
	cr_assert_eq(k[0], 18.0f);
	cr_assert_eq(k[1], -18.0f);
	cr_assert_eq(b.step, 7);
	cr_assert_eq(b.st.position, 6 * 64 + 64);
	cr_assert_eq(b.st.epoch, 8);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(b.st.rng[i], 6000 + i + 1);
	cr_assert_eq(b.st.lr, a.st.lr / 2);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(b.st.hist[i], a.st.hist[i] * 2);
	ckpt_checkpoint_free(a.ck);
	ckpt_checkpoint_free(b.ck);
	ts_rmtree(dir);
	free(ours), free(theirs), free(dir);
}

/*
 * Trainer state is not model state (issue 34, point 5): host values under
 * ckpt_checkpoint_trainer_state() (a data loader's position, an RNG's
 * state) get the role "trainer", shown apart by `ckpt inspect` and its
 * --json, dropped with the optimizer by `convert --no-optimizer`, kept
 * through a safetensors round trip, and read by real TensorFlow as plain
 * object paths (tests/oracles/tf_trainer_state.py).
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

typedef struct loader {
	int64_t position;
	int64_t rng[4];
} loader;

static const ckpt_host_field loader_fields[] = {
	CKPT_HOST_SCALAR(loader, position, CKPT_DT_INT64),
	CKPT_HOST_ARRAY(loader, rng, CKPT_DT_INT64),
};

/* root: kernel [16] (model), step (host), optimizer with slot m; trainer_state/{position, rng} */
static char *write_checkpoint(const char *dir, loader *ld, int64_t *step)
{
	ckpt_checkpoint *ck;
	ckpt_shape k16 = { 1, { 16 } }, scalar = { 0 };
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_object *root = ckpt_checkpoint_root(ck), *opt;
	ckpt_variable *kernel = ckpt_object_add_variable(root, "kernel", "kernel", CKPT_DT_FLOAT, &k16, NULL);
	cr_assert_not_null(kernel);
	cr_assert_eq(ckpt_object_track_host(root, "step", CKPT_DT_INT64, &scalar, step), CKPT_OK);
	cr_assert_eq(ckpt_optimizer_new(&opt, "Adam"), CKPT_OK);
	cr_assert_eq(ckpt_object_add_child(root, "optimizer", opt), CKPT_OK);
	cr_assert_not_null(ckpt_optimizer_create_slot(opt, kernel, "m", NULL));
	ckpt_object *ts = ckpt_checkpoint_trainer_state(ck);
	cr_assert_not_null(ts, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_checkpoint_trainer_state(ck), ts, "one object, found again");
	cr_assert_eq(ckpt_object_track_host_struct(ts, ld, loader_fields, 2), CKPT_OK, "%s", ckpt_error_last()->message);
	char *prefix = ts_join(dir, "ckpt-1");
	cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_object_free(opt);
	ckpt_checkpoint_free(ck);
	return prefix;
}

static ckpt_role role_of(const char *path, const char *key)
{
	ckpt_reader *r;
	size_t i;
	cr_assert_eq(ckpt_reader_open(&r, path, NULL), CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
	cr_assert_eq(ckpt_reader_find(&i, r, key), CKPT_OK, "%s: %s", path, key);
	ckpt_role role = ckpt_reader_var(r, i)->role;
	ckpt_reader_free(r);
	return role;
}

static int has_key(const char *path, const char *key)
{
	ckpt_reader *r;
	size_t i;
	cr_assert_eq(ckpt_reader_open(&r, path, NULL), CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
	int found = ckpt_reader_find(&i, r, key) == CKPT_OK;
	ckpt_reader_free(r);
	return found;
}

#define POSITION "trainer_state/position/.ATTRIBUTES/VARIABLE_VALUE"
#define RNG "trainer_state/rng/.ATTRIBUTES/VARIABLE_VALUE"
#define STEP "step/.ATTRIBUTES/VARIABLE_VALUE"
#define KERNEL "kernel/.ATTRIBUTES/VARIABLE_VALUE"

Test(trainer_state, role_inspect_json_and_convert, .timeout = 120)
{
	char *dir = ts_tmpdir();
	loader ld = { 384, { 11, 12, 13, 14 } };
	int64_t step = 6;
	char *prefix = write_checkpoint(dir, &ld, &step);

	cr_assert_eq(role_of(prefix, POSITION), CKPT_ROLE_TRAINER);
	cr_assert_eq(role_of(prefix, RNG), CKPT_ROLE_TRAINER);
	cr_assert_eq(role_of(prefix, KERNEL), CKPT_ROLE_MODEL);
	cr_assert_eq(role_of(prefix, STEP), CKPT_ROLE_OTHER);
	cr_assert_str_eq(ckpt_role_name(CKPT_ROLE_TRAINER), "trainer");

	/* inspect counts it apart: model 1 (the kernel), not 3 */
	ts_run_result r = ts_cli("inspect", prefix, NULL);
	ts_assert_exit(&r, 0, "inspect");
	cr_assert(strstr(r.out, "; model 1 (64 B)"), "%s", r.out);
	cr_assert(strstr(r.out, "; trainer 2 (40 B)"), "%s", r.out);
	ts_run_free(&r);
	r = ts_cli("inspect", "--json", prefix, NULL);
	ts_assert_exit(&r, 0, "inspect --json");
	const char *p = strstr(r.out, "\"name\": \"" POSITION "\"");
	cr_assert_not_null(p, "%s", r.out);
	const char *role = strstr(p, "\"role\": ");
	cr_assert(role && strncmp(role, "\"role\": \"trainer\"", 17) == 0, "%.200s", p);
	ts_run_free(&r);

	/* --no-optimizer: weights and counters only */
	char *weights = ts_join(dir, "weights");
	r = ts_cli("convert", prefix, weights, "--to", "tf", "--no-optimizer", NULL);
	ts_assert_exit(&r, 0, "convert --no-optimizer");
	ts_run_free(&r);
	cr_assert(has_key(weights, KERNEL) && has_key(weights, STEP));
	cr_assert(!has_key(weights, POSITION) && !has_key(weights, RNG), "trainer state kept by --no-optimizer");
	cr_assert(!has_key(weights, "kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE"));

	/* the role lives in the key: through safetensors and back it is still trainer state */
	char *flat = ts_join(dir, "state.safetensors"), *back = ts_join(dir, "back");
	r = ts_cli("convert", prefix, flat, "--to", "safetensors", NULL);
	ts_assert_exit(&r, 0, "to safetensors");
	ts_run_free(&r);
	r = ts_cli("convert", flat, back, "--to", "tf", NULL);
	ts_assert_exit(&r, 0, "back to tf");
	ts_run_free(&r);
	cr_assert_eq(role_of(flat, "trainer_state.position"), CKPT_ROLE_TRAINER);
	cr_assert_eq(role_of(back, POSITION), CKPT_ROLE_TRAINER);

	/* TensorFlow reads the round-tripped bundle as any object path */
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "%s %s/tests/oracles/tf_trainer_state.py %s", ts_oracle_python(), CKPT_SOURCE_DIR,
		back);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "TensorFlow failed:\n%s", r.err);
	cr_assert(strstr(r.out, "{\"position\": 384, \"rng\": [11, 12, 13, 14], \"step\": 6}"), "%s", r.out);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir), free(prefix), free(weights), free(flat), free(back);
}

/* Restore writes the loader's memory back; a root variable named trainer_state is refused. */
Test(trainer_state, restores_and_refuses_a_variable_of_that_name)
{
	char *dir = ts_tmpdir();
	loader ld = { 384, { 11, 12, 13, 14 } }, ld2 = { 0, { 0 } };
	int64_t step = 6, step2 = 0;
	char *prefix = write_checkpoint(dir, &ld, &step);
	ckpt_checkpoint *ck;
	ckpt_shape scalar = { 0 };
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	cr_assert_eq(ckpt_object_track_host(ckpt_checkpoint_root(ck), "step", CKPT_DT_INT64, &scalar, &step2), CKPT_OK);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	/* restore-on-create: the trainer state object made after the restore receives its values */
	cr_assert_eq(ckpt_object_track_host_struct(ckpt_checkpoint_trainer_state(ck), &ld2, loader_fields, 2), CKPT_OK);
	cr_assert_eq(memcmp(&ld, &ld2, sizeof(ld)), 0);
	cr_assert_eq(step2, 6);
	ckpt_restore_status_expect_partial(st);
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(ck);

	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	cr_assert_eq(ckpt_object_track_host(ckpt_checkpoint_root(ck), CKPT_TRAINER_STATE, CKPT_DT_INT64, &scalar, &step2),
		CKPT_OK);
	cr_assert_null(ckpt_checkpoint_trainer_state(ck));
	cr_assert_eq(ckpt_error_last()->code, CKPT_EINVAL);
	cr_assert_null(ckpt_checkpoint_trainer_state(NULL));
	ckpt_checkpoint_free(ck);
	ts_rmtree(dir);
	free(dir), free(prefix);
}

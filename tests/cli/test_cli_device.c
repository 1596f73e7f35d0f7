/*
 * `ckpt restore --device cuda` end to end without a GPU: the tool loads
 * ckpt_cuda at run time, and ckpt_cuda's libcudart is the emulation
 * tests/cuda/fake_cudart.c (LD_LIBRARY_PATH), so the restore runs into
 * emulated device memory the host cannot touch and every replica is checked
 * through device-to-host copies. An emulation of our CUDA call sequence,
 * not a GPU test (bench/gpu_check.sh runs the tool on a GPU).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

#ifdef CKPT_TEST_CUDA

/* A small checkpoint of three float variables (one of 3 MiB), written by the library. */
static char *make_checkpoint(const char *dir)
{
	ckpt_checkpoint *ck = NULL;
	ckpt_shape shape;
	int64_t dims[3][2] = { { 1024, 768 }, { 768, 1 }, { 3, 5 } };
	const char *names[3] = { "dense/kernel", "dense/bias", "head/w" };
	char *prefix = ts_join(dir, "ckpt");
	int i;
	size_t k;

	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	for (i = 0; i < 3; i++) {
		ckpt_variable *v = NULL;
		size_t n = (size_t)(dims[i][0] * dims[i][1]);
		float *val = malloc(n * sizeof(float));
		cr_assert(val);
		for (k = 0; k < n; k++)
			val[k] = (float)(k % 1000) * 0.5f + (float)i;
		ckpt_shape_make(&shape, 2, dims[i]);
		cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), names[i], names[i], CKPT_DT_FLOAT, &shape, NULL)),
			     CKPT_OK);
		cr_assert_eq(ckpt_variable_assign(v, val, n * sizeof(float)), CKPT_OK);
		free(val);
	}
	cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_checkpoint_free(ck);
	return prefix;
}

static ts_run_result restore(const char *env, const char *prefix, const char *args)
{
	char cmd[8192];
	ts_run_result r;

	/* NCCL too is the emulation's: the real one would find no driver under it */
	snprintf(cmd, sizeof(cmd), "env LD_LIBRARY_PATH='%s' CKPT_NCCL_LIBRARY='%s' %s '%s' restore '%s' %s",
		CKPT_FAKE_CUDART_DIR, CKPT_FAKE_CUDART, env, CKPT_CLI_PATH, prefix, args);
	cr_assert_eq(ts_run_sh(&r, cmd), 0, "cannot run %s", cmd);
	return r;
}

Test(cli_device, restores_into_emulated_device_memory_and_checks_every_replica)
{
	char *dir = ts_tmpdir(), *prefix = make_checkpoint(dir), *stats = ts_join(dir, "stats"), env[4096], *text;
	ts_run_result r;

	snprintf(env, sizeof(env), "FAKE_CUDART_DEVICES=2 FAKE_CUDART_PEER=1 FAKE_CUDART_STATS='%s'", stats);
	r = restore(env, prefix, "--strategy mirrored --replicas 3 --device cuda");
	cr_assert_eq(r.status, 0, "status %d\n%s\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.out, "device: CUDA runtime"), "%s", r.out);
	cr_assert(strstr(r.out, "2 devices"), "%s", r.out);
	cr_assert(strstr(r.out, "dense.Skernel"), "%s", r.out);
	cr_assert(!strstr(r.out, "MISMATCH"), "%s", r.out);
	cr_assert(strstr(r.out, "all replicas = file"), "%s", r.out);
	text = ts_read_file(stats, NULL);
	cr_assert(text);
	/* the values went up to the device, and every replica came back down for the check */
	cr_assert_geq(ts_key_value(text, "d2h"), 3 * 3, "%s", text);
	cr_assert_gt(ts_key_value(text, "h2d"), 0, "%s", text);
	cr_assert_gt(ts_key_value(text, "peak_device_bytes"), 3 * 1024 * 768 * 4, "%s", text);
	free(text);
	ts_run_free(&r);

	/* the JSON form names the device; a device list places every replica on device 1 */
	r = restore("FAKE_CUDART_DEVICES=2", prefix, "--strategy mirrored --replicas 2 --device cuda:1 --json");
	cr_assert_eq(r.status, 0, "status %d\n%s\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.out, "\"device\": \"cuda\""), "%s", r.out);
	ts_run_free(&r);

	/* one replica per device: the other replica is filled by the (emulated) NCCL broadcast */
	snprintf(env, sizeof(env), "FAKE_CUDART_DEVICES=2 FAKE_CUDART_STATS='%s'", stats);
	remove(stats);
	r = restore(env, prefix, "--strategy mirrored --replicas 2 --device cuda:0,1");
	cr_assert_eq(r.status, 0, "status %d\n%s\n%s", r.status, r.out, r.err);
	text = ts_read_file(stats, NULL);
	cr_assert(text);
	cr_assert_gt(ts_key_value(text, "nccl_broadcast"), 0, "%s", text);
	free(text);
	ts_run_free(&r);
	free(stats);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

Test(cli_device, errors_name_why)
{
	char *dir = ts_tmpdir(), *prefix = make_checkpoint(dir);
	ts_run_result r;

	/* no GPU driver: the runtime's own reason */
	r = restore("FAKE_CUDART_FAIL=insufficient-driver", prefix, "--strategy mirrored --device cuda");
	cr_assert_eq(r.status, 1, "status %d\n%s\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.err, "CUDA driver version is insufficient for CUDA runtime version"), "%s", r.err);
	ts_run_free(&r);

	/* no GPU */
	r = restore("FAKE_CUDART_FAIL=no-device", prefix, "--strategy mirrored --device cuda");
	cr_assert_eq(r.status, 1, "status %d\n%s\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.err, "no CUDA-capable device"), "%s", r.err);
	ts_run_free(&r);

	/* the provider library cannot be loaded */
	r = restore("CKPT_CUDA_LIBRARY=/nonexistent/libckpt_cuda.so", prefix, "--strategy mirrored --device cuda");
	cr_assert_eq(r.status, 1, "status %d\n%s\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.err, "cannot load the CUDA provider library"), "%s", r.err);
	cr_assert(strstr(r.err, "/nonexistent/libckpt_cuda.so"), "%s", r.err);
	ts_run_free(&r);

	/* a device the runtime does not have */
	r = restore("FAKE_CUDART_DEVICES=2", prefix, "--strategy mirrored --device cuda:0,5");
	cr_assert_eq(r.status, 1, "status %d\n%s\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.err, "device 5"), "%s", r.err);
	ts_run_free(&r);

	/* usage */
	r = restore("", prefix, "--strategy default --device cuda");
	cr_assert_eq(r.status, 2, "status %d\n%s\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.err, "--device cuda needs --strategy mirrored"), "%s", r.err);
	ts_run_free(&r);
	r = restore("", prefix, "--strategy mirrored --device gpu");
	cr_assert_eq(r.status, 2, "status %d\n%s\n%s", r.status, r.out, r.err);
	ts_run_free(&r);
	r = restore("", prefix, "--strategy mirrored --device cuda:0,x");
	cr_assert_eq(r.status, 2, "status %d\n%s\n%s", r.status, r.out, r.err);
	ts_run_free(&r);

	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

#endif

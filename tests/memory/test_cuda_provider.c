/*
 * The CUDA provider (ckpt_cuda) on a machine without a GPU: its check
 * program (tests/cuda/cuda_provider_check.c) runs with the runtime
 * emulation tests/cuda/fake_cudart.c loaded in place of libcudart (and of
 * libnccl). This checks our sequence of CUDA calls against the emulation's
 * strict rules — device memory the host cannot touch, copies that land only
 * when synchronized, checked ranges and handles, leaks fail at exit — not
 * the behaviour of a GPU; bench/gpu_check.sh runs the same program on one.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_support.h"

#ifdef CKPT_TEST_CUDA

/* Run the check program under the emulation with extra environment `env` ("A=1 B=2") and arguments. */
static ts_run_result run_check(const char *env, const char *args, const char *stats)
{
	char cmd[4096];
	ts_run_result r;

	snprintf(cmd, sizeof(cmd), "env LD_LIBRARY_PATH='%s' CKPT_NCCL_LIBRARY='%s' FAKE_CUDART_STATS='%s' %s '%s' %s",
		CKPT_FAKE_CUDART_DIR, CKPT_FAKE_CUDART, stats ? stats : "/dev/null", env, CKPT_CUDA_CHECK, args);
	cr_assert_eq(ts_run_sh(&r, cmd), 0, "cannot run %s", cmd);
	return r;
}

Test(cuda_provider, two_devices_with_peers_and_nccl)
{
	char *dir = ts_tmpdir(), *stats = ts_join(dir, "stats");
	ts_run_result r = run_check("FAKE_CUDART_DEVICES=2 FAKE_CUDART_PEER=1", "", stats);
	char *text;

	cr_assert_eq(r.status, 0, "status %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.out, "peer access 0<->1"), "%s", r.out);
	cr_assert(strstr(r.out, "broadcast: NCCL"), "%s", r.out);
	cr_assert(strstr(r.out, "0 failure(s)"), "%s", r.out);
	cr_assert(strstr(r.out, "conformance suite: ") && !strstr(r.out, " failed"), "%s", r.out);
	text = ts_read_file(stats, NULL);
	cr_assert(text);
	/* the paths the program means to take were taken: peer copies, NCCL, device copies */
	cr_assert_gt(ts_key_value(text, "peer"), 0, "%s", text);
	cr_assert_gt(ts_key_value(text, "nccl_broadcast"), 0, "%s", text);
	cr_assert_gt(ts_key_value(text, "d2d"), 0, "%s", text);
	cr_assert_gt(ts_key_value(text, "h2d"), 0, "%s", text);
	free(text);
	ts_run_free(&r);
	free(stats);
	ts_rmtree(dir);
	free(dir);
}

/* NCCL that cannot make a communicator: broadcast falls back to peer copies (NCCL_AUTO) and still conforms */
Test(cuda_provider, nccl_without_communicator_falls_back_to_copies)
{
	char *dir = ts_tmpdir(), *stats = ts_join(dir, "stats");
	ts_run_result r = run_check("FAKE_CUDART_DEVICES=2 FAKE_CUDART_PEER=1 FAKE_NCCL_INIT_FAIL=1", "", stats);
	char *text;

	cr_assert_eq(r.status, 0, "status %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
	text = ts_read_file(stats, NULL);
	cr_assert(text);
	cr_assert_eq(ts_key_value(text, "nccl_broadcast"), 0, "%s", text);
	cr_assert_gt(ts_key_value(text, "peer"), 0, "%s", text);
	free(text);
	ts_run_free(&r);
	free(stats);
	ts_rmtree(dir);
	free(dir);
}

Test(cuda_provider, one_device_copies_only)
{
	ts_run_result r = run_check("FAKE_CUDART_DEVICES=1", "", NULL);

	cr_assert_eq(r.status, 0, "status %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.out, "1 device ("), "%s", r.out);
	cr_assert(strstr(r.out, "peer access none"), "%s", r.out);
	ts_run_free(&r);
}

Test(cuda_provider, three_devices_without_peer_access)
{
	ts_run_result r = run_check("FAKE_CUDART_DEVICES=3 FAKE_CUDART_PEER=0", "", NULL);

	cr_assert_eq(r.status, 0, "status %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.out, "peer access none"), "%s", r.out);
	ts_run_free(&r);
}

/* The emulation catches what it is meant to: a host dereference of device memory crashes. */
Test(cuda_provider, emulation_crashes_on_host_dereference)
{
	ts_run_result r = run_check("", "--mistake deref", NULL);

	/* killed by SIGSEGV, or (an ASan build) ASan's report of it */
	cr_assert(r.status == 128 + 11 || (r.status != 0 && strstr(r.err, "SEGV")), "status %d (want SIGSEGV)\n%s\n%s",
		r.status, r.out, r.err);
	cr_assert(!strstr(r.out, "reading device memory from the host: "), "the read returned: %s", r.out);
	ts_run_free(&r);
}

/* ... and a read of a copy's destination before synchronize sees stale bytes. */
Test(cuda_provider, emulation_shows_stale_bytes_before_synchronize)
{
	ts_run_result r = run_check("", "--mistake nosync", NULL);

	cr_assert_eq(r.status, 1, "status %d\n%s\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.out, "read before synchronize: stale bytes"), "%s", r.out);
	ts_run_free(&r);
}

/* Without a driver the provider is refused with the runtime's own reason. */
Test(cuda_provider, no_driver_is_a_clear_error)
{
	ts_run_result r = run_check("FAKE_CUDART_FAIL=insufficient-driver", "", NULL);

	cr_assert_eq(r.status, 2, "status %d\n%s\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.err, "CUDA driver version is insufficient for CUDA runtime version"), "%s", r.err);
	cr_assert(strstr(r.err, "cudaErrorInsufficientDriver"), "%s", r.err);
	ts_run_free(&r);
}

#endif

/*
 * Multi-worker strategy (ckpt_mpi) scenarios. Criterion forks every test,
 * which does not mix with MPI_Init, so each scenario is its own MPI program
 * (tests/mpi/) launched here through mpirun; each prints "CHECKS n FAILED f"
 * and the count is logged. Kept small for a 2-core machine: tiny tensors,
 * 1-4 workers (oversubscribed).
 */
#ifdef CKPT_TEST_MPI
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "test_support.h"
#include "mpi_run.h"
#include "mpi/mpi_model.h"

#define MPIRUN CKPT_MPIRUN " --allow-run-as-root --oversubscribe"
/* a script's start in directory %s; slow unwinding under ASan lets tests/lsan.supp attribute Open MPI's leaks */
#define IN_DIR_SH "set -e; cd %s; export ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0:malloc_context_size=30\"; "

Test(mpi, worker_split_1x4_2x2_4x1_bit_identical_to_mirrored_4, .timeout = 300)
{
	char *dir = ts_tmpdir();
	static const int split[4][2] = { { 1, 4 }, { 2, 2 }, { 4, 1 }, { 1, 4 } };
	char *bytes[4];
	size_t n[4];
	for (int i = 0; i < 4; i++) {
		char out[1024];
		snprintf(out, sizeof(out), "%s/w%d", dir, i);
		ts_mpi_run(120, split[i][0], "mpi_split %d %s%s", split[i][1], out, i == 3 ? " mirrored" : "");
		bytes[i] = ts_read_file(out, &n[i]);
		cr_assert(bytes[i] && n[i] == 1000 * 4 + 333 * 8);
	}
	for (int i = 1; i < 4; i++)
		cr_assert(memcmp(bytes[0], bytes[i], n[0]) == 0, "%dx%d%s differs from 1x4 in its bits",
			split[i][0], split[i][1], i == 3 ? " (mirrored, in-process)" : "");
	for (int i = 0; i < 4; i++)
		free(bytes[i]);
	ts_rmtree(dir);
	free(dir);
}

/* split files of 1x4, 2x2, 4x1 and in-process mirrored(4) of one program: byte for byte equal */
static void same_bytes_over_splits(const char *prog, const char *what)
{
	char *dir = ts_tmpdir();
	static const int split[4][2] = { { 1, 4 }, { 2, 2 }, { 4, 1 }, { 1, 4 } };
	char *bytes[4];
	size_t n[4];
	for (int i = 0; i < 4; i++) {
		char out[1024];
		snprintf(out, sizeof(out), "%s/w%d", dir, i);
		ts_mpi_run(120, split[i][0], "%s %d %s%s", prog, split[i][1], out, i == 3 ? " mirrored" : "");
		bytes[i] = ts_read_file(out, &n[i]);
		cr_assert(bytes[i] && n[i] > 0);
	}
	for (int i = 1; i < 4; i++)
		cr_assert(n[i] == n[0] && memcmp(bytes[0], bytes[i], n[0]) == 0, "%s: %dx%d%s differs from 1x4 in its bits", what,
			split[i][0], split[i][1], i == 3 ? " (mirrored, in-process)" : "");
	for (int i = 0; i < 4; i++)
		free(bytes[i]);
	ts_rmtree(dir);
	free(dir);
}

Test(mpi, sync_on_read_sum_mean_all_dtypes_and_int_overflow_1x4_2x2_4x1_equal_mirrored_4_strings_broadcast, .timeout = 300)
{
	same_bytes_over_splits("mpi_syncread", "sync-on-read reads and overflow errors");
}

/* a failure passed on through several agreements is reported as its origin's, once, and as its own there */
Test(mpi, a_failure_relayed_over_three_agreements_names_its_origin_once, .timeout = 180) { ts_mpi_run(120, 3, "mpi_relay"); }
Test(mpi, mismatched_shape_is_escope_on_every_worker, .timeout = 180) { ts_mpi_run(120, 2, "mpi_mismatch shape"); }
Test(mpi, mismatched_dtype_is_escope_on_every_worker, .timeout = 180) { ts_mpi_run(120, 2, "mpi_mismatch dtype"); }
Test(mpi, mismatched_order_on_3_workers_is_escope_on_every_worker, .timeout = 180) { ts_mpi_run(120, 3, "mpi_mismatch order"); }
Test(mpi, extra_variable_vs_all_reduce_is_escope_on_every_worker, .timeout = 180) { ts_mpi_run(120, 3, "mpi_mismatch extra"); }
Test(mpi, missing_variable_vs_save_is_escope_on_every_worker, .timeout = 180)
{
	char *dir = ts_tmpdir();
	ts_mpi_run(120, 2, "mpi_mismatch missing %s/never", dir);
	char *p = ts_join(dir, "never.index");
	cr_assert(access(p, F_OK) != 0, "a save whose workers disagree wrote %s", p);
	free(p);
	ts_rmtree(dir);
	free(dir);
}

Test(mpi, saved_by_4_workers_restores_onto_1_3_and_2x2_and_1x4, .timeout = 300)
{
	char *dir = ts_tmpdir();
	ts_mpi_run(120, 4, "mpi_save save 1 %s 3", dir);
	ts_mpi_run(120, 1, "mpi_save restore 1 %s 3 4", dir);
	ts_mpi_run(120, 3, "mpi_save restore 1 %s 3 4", dir);
	ts_mpi_run(120, 2, "mpi_save restore 2 %s 3 4", dir);
	ts_mpi_run(120, 1, "mpi_save restore 4 %s 3 4", dir);
	/* each worker reading a 1/W part, the parts broadcast */
	ts_mpi_run(120, 3, "mpi_save restore 1 %s 3 4 split", dir);
	ts_mpi_run(120, 2, "mpi_save restore 2 %s 3 4 split", dir);
	ts_rmtree(dir);
	free(dir);
}

Test(mpi, merged_checkpoint_read_by_bundle_check_ckpt_verify_restore_and_tensorflow, .timeout = 300)
{
	const char *py = ts_oracle_python();
	char *dir = ts_tmpdir();
	ts_mpi_run(120, 2, "mpi_save save 2 %s 2", dir);
	char cmd[4096];
	ts_run_result r;
	snprintf(cmd, sizeof(cmd), TS_PYTHON " " CKPT_SOURCE_DIR "/tests/scripts/bundle_check.py --no-graph %s/ckpt-2", dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "bundle_check.py rejects the merged bundle:\n%s\n%s", r.out, r.err);
	cr_assert(strstr(r.out, "num_shards=2") && strstr(r.out, "CHECKS: ALL OK"), "%s", r.out);
	ts_run_free(&r);
	snprintf(cmd, sizeof(cmd), TS_CLI " verify %s/ckpt-2", dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "ckpt verify: %s %s", r.out, r.err);
	ts_run_free(&r);
	/* single-process tool, onto another replica count */
	snprintf(cmd, sizeof(cmd), TS_CLI " restore %s --strategy mirrored --replicas 3", dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "ckpt restore: %s %s", r.out, r.err);
	ts_run_free(&r);
	snprintf(cmd, sizeof(cmd), "TF_CPP_MIN_LOG_LEVEL=3 %s " CKPT_SOURCE_DIR "/tests/oracles/tf_read_sharded.py %s/ckpt-2 2 4 2",
		py, dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "TensorFlow does not read the merged bundle:\n%s\n%s", r.out, r.err);
	cr_assert(strstr(r.out, "TF OK"), "%s", r.out);
	cr_log_info("TensorFlow: %s", r.out);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
}

Test(mpi, io_failure_on_worker_1_fails_every_worker_and_keeps_the_latest, .timeout = 300)
{
	char *dir = ts_tmpdir();
	ts_mpi_run(120, 2, "mpi_faults 1 %s 1", dir);
	ts_rmtree(dir);
	free(dir);
}

Test(mpi, io_failure_on_committing_worker_0_fails_every_worker_and_keeps_the_latest, .timeout = 300)
{
	char *dir = ts_tmpdir();
	ts_mpi_run(120, 2, "mpi_faults 2 %s 0", dir);
	ts_rmtree(dir);
	free(dir);
}

/* every I/O call of worker RANK's restore failing in turn: every worker fails naming RANK, nobody assigns */
Test(mpi, restore_read_failure_on_worker_1_of_2x2_fails_every_worker_and_changes_nothing, .timeout = 300)
{
	char *dir = ts_tmpdir();
	ts_mpi_run(120, 2, "mpi_restore_faults 2 %s 1 all", dir);
	ts_rmtree(dir);
	free(dir);
}

Test(mpi, restore_read_failure_split_reading_on_worker_0_and_on_worker_2_of_3_changes_nothing, .timeout = 300)
{
	char *dir = ts_tmpdir();
	ts_mpi_run(120, 2, "mpi_restore_faults 1 %s 0 split", dir);
	ts_rmtree(dir);
	free(dir);
	dir = ts_tmpdir();
	ts_mpi_run(120, 3, "mpi_restore_faults 1 %s 2 split", dir);
	ts_rmtree(dir);
	free(dir);
}

Test(mpi, sample_2x2_killed_resumed_1x4_then_4x1_equals_straight_run_and_mirrored_4, .timeout = 300)
{
	char *dir = ts_tmpdir();
	char cmd[4096];
	ts_run_result r;
	const char *mw = CKPT_BINARY_DIR "/samples/mlp_multiworker";
	snprintf(cmd, sizeof(cmd),
		IN_DIR_SH
		MPIRUN " -np 2 %s --local 2 --epochs 4 --dir straight; "
		"if " MPIRUN " -np 2 %s --local 2 --epochs 4 --dir resumed --die-after-epoch 2; then exit 9; fi; "
		"if " MPIRUN " -np 1 %s --local 4 --epochs 4 --dir resumed --die-after-epoch 3; then exit 9; fi; "
		MPIRUN " -np 4 %s --local 1 --epochs 4 --dir resumed; "
		CKPT_BINARY_DIR "/samples/mlp_mirrored --replicas 4 --epochs 4 --dir mirrored; "
		TS_CLI " diff straight/ckpt-4 resumed/ckpt-4; " TS_CLI " diff straight/ckpt-4 mirrored/ckpt-4",
		dir, mw, mw, mw, mw);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "exit %d\n%s\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.out, "resumed from resumed/ckpt-2 after epoch 2, onto 1 worker(s) x 4 local replica(s)"), "%s", r.out);
	cr_assert(strstr(r.out, "resumed from resumed/ckpt-3 after epoch 3, onto 4 worker(s) x 1 local replica(s)"), "%s", r.out);
	cr_assert(strstr(r.out, "equal: 23 compared, 0 differ"), "%s", r.out);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
}

/*
 * The sample with the memory tier (--memory-copies 1, async copies, only
 * epoch 4 persisted) on emulated nodes a,b: killed after epoch 3, whose
 * copies were in flight, it resumes on 4 x 1 from epoch 2 in memory (the
 * directory holds nothing yet) and ends bit for bit where a straight run
 * without the tier does; its clean finish leaves the tier directory empty.
 */
Test(mpi, sample_with_the_memory_tier_killed_after_epoch_3_resumes_epoch_2_from_memory_on_4x1_equal_to_straight,
	.timeout = 300)
{
	char *dir = ts_tmpdir();
	char cmd[4096];
	ts_run_result r;
	const char *mw = CKPT_BINARY_DIR "/samples/mlp_multiworker";
	snprintf(cmd, sizeof(cmd),
		IN_DIR_SH
		"export CKPT_TIER_DIR=%s/tier; "
		MPIRUN " -np 2 %s --local 2 --epochs 4 --dir straight; "
		"if CKPT_TIER_NODES=a,b " MPIRUN " -np 2 %s --local 2 --epochs 4 --dir mem --memory-copies 1 --persist-every 4 "
		"--die-after-epoch 3; then exit 9; fi; "
		"if ls mem | grep -q index; then exit 8; fi; "
		"CKPT_TIER_NODES=a,a,b,b " MPIRUN " -np 4 %s --local 1 --epochs 4 --dir mem --memory-copies 1 --persist-every 4; "
		"echo \"tier left: [$(ls -A tier)]\"; " TS_CLI " diff straight/ckpt-4 mem/ckpt-4",
		dir, dir, mw, mw, mw);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "exit %d\n%s\n%s", r.status, r.out, r.err);
	cr_assert(strstr(r.out, "/tier/a/mlp_multiworker/step-000000000002.of-2 after epoch 2, onto 4 worker(s) x 1 local "
		"replica(s)"), "%s", r.out);
	cr_assert(strstr(r.out, "latest checkpoint mem/ckpt-4"), "%s", r.out);
	cr_assert(strstr(r.out, "tier left: []"), "%s", r.out);
	cr_assert(strstr(r.out, "equal: 23 compared, 0 differ"), "%s", r.out);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
}

Test(mpi, tensorflow_partitioned_p3_restores_on_2_workers_and_inspect_shows_partitions, .timeout = 300)
{
	const char *py = ts_oracle_python();
	char *dir = ts_tmpdir();
	char cmd[4096];
	ts_run_result r;
	/* the reference: TF1 PartitionedVariable and TF2 ShardedVariable, written now by TensorFlow */
	snprintf(cmd, sizeof(cmd), "TF_CPP_MIN_LOG_LEVEL=3 %s " CKPT_SOURCE_DIR "/tests/oracles/tf_partitioned.py %s", py, dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "%s\n%s", r.out, r.err);
	cr_assert(strstr(r.out, "TF PARTITIONED OK"), "%s", r.out);
	ts_run_free(&r);
	ts_mpi_run(120, 2, "mpi_partitioned 2 %s", dir);
	ts_mpi_run(120, 1, "mpi_partitioned 1 %s", dir);
	for (int k = 0; k < 2; k++) {
		snprintf(cmd, sizeof(cmd), TS_CLI " inspect %s/%s", dir, k ? "tf1/model.ckpt" : "tf2/ckpt-1");
		cr_assert_eq(ts_run_sh(&r, cmd), 0);
		ts_assert_exit(&r, 0, "%s", r.err);
		cr_assert(strstr(r.out, "partitioned into 3 slices: [0:3, 0:4] [3:5, 0:4] [5:7, 0:4]"), "%s", r.out);
		ts_run_free(&r);
	}
	ts_rmtree(dir);
	free(dir);
}

Test(mpi, partitioned_p3_saved_by_3_workers_restores_as_p2_on_2_workers_and_tensorflow_reads_it, .timeout = 400)
{
	const char *py = ts_oracle_python();
	char *dir = ts_tmpdir();
	char cmd[4096];
	ts_run_result r;
	/* each part saved by its owner (part i: worker i % 3), the layout checked by worker 0 */
	ts_mpi_run(120, 3, "mpi_reshard save 3 %s", dir);
	/* onto another P and worker count: each part equals those rows, read alone */
	ts_mpi_run(120, 2, "mpi_reshard restore 2 %s", dir);
	ts_mpi_run(120, 1, "mpi_reshard restore 1 %s", dir);
	ts_mpi_run(120, 3, "mpi_reshard restore 4 %s", dir);
	ts_mpi_run(120, 1, "mpi_reshard full 0 %s", dir);
	/* it prints slice keys raw (NUL bytes): dropped, so that the output is one C string */
	snprintf(cmd, sizeof(cmd), "{ " TS_PYTHON " " CKPT_SOURCE_DIR "/tests/scripts/bundle_check.py --no-graph %s/ckpt; "
		"echo \"exit $?\"; } | tr -d '\\000'", dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	cr_assert(r.status == 0 && strstr(r.out, "exit 0"), "bundle_check.py rejects it:\n%s\n%s", r.out, r.err);
	cr_assert(strstr(r.out, "SLICED: [[(0, 4), (0, 6)], [(4, 3), (0, 6)], [(7, 3), (0, 6)]]") &&
		strstr(r.out, "CHECKS: ALL OK"), "%s", r.out);
	ts_run_free(&r);
	snprintf(cmd, sizeof(cmd), TS_CLI " verify %s/ckpt", dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "ckpt verify: %s %s", r.out, r.err);
	ts_run_free(&r);
	snprintf(cmd, sizeof(cmd), TS_CLI " inspect %s/ckpt", dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "%s", r.err);
	cr_assert(strstr(r.out, "partitioned into 3 slices: [0:4, 0:6] [4:7, 0:6] [7:10, 0:6]"), "%s", r.out);
	ts_run_free(&r);
	snprintf(cmd, sizeof(cmd), "TF_CPP_MIN_LOG_LEVEL=3 %s " CKPT_SOURCE_DIR "/tests/oracles/tf_read_partitioned.py "
		"%s/ckpt emb 10 6 tf1 3 2 1", py, dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "TensorFlow does not read it:\n%s\n%s", r.out, r.err);
	cr_assert(strstr(r.out, "TF PARTITIONED READ OK"), "%s", r.out);
	ts_run_free(&r);
	/* the object-tracked one: TF2's Checkpoint restores it into ShardedVariables of 3 and 2 shards */
	snprintf(cmd, sizeof(cmd), "TF_CPP_MIN_LOG_LEVEL=3 %s " CKPT_SOURCE_DIR "/tests/oracles/tf_read_partitioned.py "
		"%s/ckpt table/.ATTRIBUTES/VARIABLE_VALUE 9 4 tf2 3 2", py, dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "TensorFlow does not read it:\n%s\n%s", r.out, r.err);
	cr_assert(strstr(r.out, "TF PARTITIONED READ OK"), "%s", r.out);
	ts_run_free(&r);
	/* last (it damages the file): a slice read in pieces by two workers is still checked whole */
	ts_mpi_run(120, 2, "mpi_reshard badcrc 2 %s", dir);
	ts_rmtree(dir);
	free(dir);
}

/* ---- kill -9 of one worker in the middle of a save loop ---- */

static uint64_t rng_next(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	uint64_t x = *s;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static long read_pid(const char *dir, int rank)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/pid.%d", dir, rank);
	FILE *f = fopen(p, "r");
	long pid = 0;
	if (f) {
		if (fscanf(f, "%ld", &pid) != 1)
			pid = 0;
		fclose(f);
	}
	return pid;
}

/* What the killed job left: the latest loads in this one process, with a consistent step. */
static int64_t check_latest(const char *dir, int64_t prev)
{
	ckpt_manager *ro;
	cr_assert_eq(ckpt_manager_new(&ro, NULL, dir, 0), CKPT_OK, "%s", ckpt_error_last()->message);
	const char *p = NULL;
	int rc = ckpt_status_of(p = ckpt_manager_latest_valid(ro));
	if (prev == 0 && rc == CKPT_ENOTFOUND) {
		ckpt_manager_free(ro);
		return 0;
	}
	cr_assert_eq(rc, CKPT_OK, "after a kill, no checkpoint loads (had step %lld): %s", (long long)prev,
		ckpt_error_last()->message);
	tm_model m;
	cr_assert_eq(tm_build(&m, NULL, 1), CKPT_OK);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, m.ck, p), CKPT_OK, "%s: %s", p, ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	int64_t step = -1;
	ckpt_variable_read(m.step, &step, sizeof(step));
	long checks = 0;
	cr_assert_eq(tm_check(&m, step, 2, p, &checks), 0, "%s holds an inconsistent state", p);
	char want[64];
	snprintf(want, sizeof(want), "-%lld", (long long)step);
	cr_assert(strlen(p) > strlen(want) && strcmp(p + strlen(p) - strlen(want), want) == 0, "%s holds step %lld", p,
		(long long)step);
	cr_assert_geq(step, prev, "the latest went back from step %lld to %lld", (long long)prev, (long long)step);
	tm_free(&m);
	ckpt_manager_free(ro);
	return step;
}

/* The save loop's output (both workers and mpirun), for a failure message. */
static char *loop_output(const char *log)
{
	char *t = ts_read_file(log, NULL);
	return t ? t : strdup("(no output file)");
}

Test(mpi, kill9_of_a_worker_mid_save_50_times_latest_always_loads, .timeout = 900)
{
	char *dir = ts_tmpdir(), *logdir = ts_tmpdir(), *log = ts_join(logdir, "save_loop.log");
	uint64_t seed = 20261201;
	int kills = 0;
	int64_t step = 0;
	for (int it = 0; it < 50; it++) {
		char p[1024], cmd[2048];
		for (int k = 0; k < 2; k++) {
			snprintf(p, sizeof(p), "%s/pid.%d", dir, k);
			unlink(p);
		}
		snprintf(cmd, sizeof(cmd), "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0:malloc_context_size=30\" exec " MPIRUN
			" -np 2 " CKPT_MPI_BIN_DIR "/mpi_killloop 1 %s >%s 2>&1", dir, log);
		pid_t job = fork();
		cr_assert_geq(job, 0);
		if (job == 0) {
			execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
			_exit(127);
		}
		long pids[2] = { 0, 0 };
		int status = 0;
		for (int w = 0; w < 6000 && !(pids[0] && pids[1]); w++) {
			cr_assert_eq(waitpid(job, &status, WNOHANG), 0, "iteration %d: the save loop exited by itself (exit %d, "
				"signal %d); its output:\n%s", it, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
				WIFSIGNALED(status) ? WTERMSIG(status) : 0, loop_output(log));
			pids[0] = read_pid(dir, 0);
			pids[1] = read_pid(dir, 1);
			sleep_ms(10);
		}
		cr_assert(pids[0] && pids[1], "iteration %d: the save loop did not start; its output:\n%s", it, loop_output(log));
		sleep_ms((long)(rng_next(&seed) % 400));
		int victim = (int)(rng_next(&seed) % 2);
		cr_assert_eq(kill((pid_t)pids[victim], SIGKILL), 0);
		kills++;
		/* Open MPI aborts the job when a rank dies */
		int done = 0;
		for (int w = 0; w < 6000 && !done; w++) {
			done = waitpid(job, &status, WNOHANG) == job;
			if (!done)
				sleep_ms(10);
		}
		if (!done) {
			kill(job, SIGKILL);
			waitpid(job, &status, 0);
		}
		cr_assert(done, "iteration %d: mpirun did not end after worker %d was killed; its output:\n%s", it, victim,
			loop_output(log));
		step = check_latest(dir, step);
	}
	cr_assert_gt(step, 0, "no save ever completed");
	cr_log_info("%d kills of a worker mid-save loop; latest always loaded; last step %lld", kills, (long long)step);
	ts_rmtree(dir);
	ts_rmtree(logdir);
	free(dir);
	free(logdir);
	free(log);
}

static void assert_same_file(const char *a, const char *b)
{
	size_t na, nb;
	char *x = ts_read_file(a, &na), *y = ts_read_file(b, &nb);
	cr_assert(x && y, "cannot read %s or %s", a, b);
	cr_assert(na == nb && memcmp(x, y, na) == 0, "%s and %s differ", a, b);
	free(x);
	free(y);
}

/*
 * Replicas in device memory (the guarded provider: PROT_NONE device memory,
 * copies at synchronize) on 2 workers x 2 replicas: the sharded checkpoint is
 * byte-identical to the host strategy's, and restores onto 3 workers' device
 * replicas (every value, every replica, the sync-on-read aggregate).
 */
Test(mpi, device_replicas_2x2_save_like_host_and_restore_onto_3, .timeout = 300)
{
	char *dir = ts_tmpdir();
	ts_mpi_run(120, 2, "mpi_device save host 2 %s/host", dir);
	ts_mpi_run(120, 2, "mpi_device save guarded 2 %s/guarded", dir);
	static const char *const ext[] = { ".index", ".data-00000-of-00002", ".data-00001-of-00002" };
	for (int i = 0; i < 3; i++) {
		char a[4096], b[4096];
		snprintf(a, sizeof(a), "%s/host%s", dir, ext[i]);
		snprintf(b, sizeof(b), "%s/guarded%s", dir, ext[i]);
		assert_same_file(a, b);
	}
	ts_mpi_run(120, 3, "mpi_device restore 1 %s/guarded", dir);
	ts_mpi_run(120, 1, "mpi_device restore 3 %s/guarded", dir);
	ts_rmtree(dir);
	free(dir);
}
#endif

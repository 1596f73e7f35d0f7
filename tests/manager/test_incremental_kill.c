/*
 * kill -9 of a trainer saving incrementally on POSIX (issue 33 point 7):
 * 30 kills at random moments of a loop of saves that hard-link the frozen
 * base and copy the embedding's untouched blocks from the last checkpoint;
 * after each, the latest valid checkpoint verifies byte for byte, restores,
 * and holds its own save's state (tests/support/incr_kill.c).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "incr_kill.h"
#include "test_support.h"

#define KILLS 30
#define BASE_ROWS 256 /* 1 MiB */
#define EMB_ROWS 256  /* 1 MiB, one row per save */

Test(incremental_kill, kill_9_during_incremental_saves_latest_loads, .timeout = 600)
{
	char *dir = ts_tmpdir(), *logdir = ts_tmpdir();
	char *log = ts_join(logdir, "reused");
	unsigned seed = (unsigned)time(NULL);
	cr_log_info("seed %u", seed);
	int64_t prev = -1;
	for (int k = 0; k < KILLS; k++) {
		pid_t child = fork();
		cr_assert_geq(child, 0);
		if (child == 0)
			ik_save_forever(dir, NULL, BASE_ROWS, EMB_ROWS, log);
		ik_wait_started(log, child, k);
		/* 30 to 230 ms after start-up (restore): into the saves, at any point of one */
		struct timespec ts = { 0, (long)(30 + rand_r(&seed) % 200) * 1000000L };
		nanosleep(&ts, NULL);
		kill(child, SIGKILL);
		int st;
		waitpid(child, &st, 0);
		cr_assert(WIFSIGNALED(st), "kill %d: the trainer exited by itself (status %d)", k, WEXITSTATUS(st));
		int64_t num = ik_check_latest(dir, NULL, BASE_ROWS, EMB_ROWS, k);
		cr_assert_geq(num, prev, "kill %d: the latest went back from ckpt-%lld to ckpt-%lld", k, (long long)prev,
			(long long)num);
		prev = num;
	}
	cr_expect_gt(prev, 10, "30 kills saved only %lld checkpoints", (long long)prev);
	/* the saves were incremental: they reused the last one's bytes */
	cr_assert_gt(ik_reused(log), (uint64_t)prev * BASE_ROWS * 4096 / 2, "reused %llu bytes in %lld saves",
		(unsigned long long)ik_reused(log), (long long)prev);
	ts_rmtree(dir);
	ts_rmtree(logdir);
	free(dir);
	free(logdir);
	free(log);
}

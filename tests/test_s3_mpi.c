/*
 * Multi-worker saves to S3: 2 and 3 MPI workers (tests/mpi/mpi_save) save
 * one logical checkpoint to an s3:// prefix (each worker uploads its own
 * data shard, worker 0 writes the index and the state file) and it is
 * restored on another worker count, every copy checked.
 */
#ifdef CKPT_TEST_MPI
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "s3_common.h"

#define MPIRUN CKPT_MPIRUN " --allow-run-as-root --oversubscribe"

static void run_mpi(int np, const char *fmt, ...) CKPT_PRINTF(2, 3);
static void run_mpi(int np, const char *fmt, ...)
{
	char args[2048], cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0:malloc_context_size=30\" timeout 180 " MPIRUN
		" -np %d " CKPT_MPI_BIN_DIR "/%s", np, args);
	ts_run_result r;
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s\nexit %d\nstdout:\n%s\nstderr:\n%s", cmd, r.status, r.out, r.err);
	long checks = -1, failed = -1;
	const char *c = strstr(r.out, "CHECKS ");
	cr_assert(c && sscanf(c, "CHECKS %ld FAILED %ld", &checks, &failed) == 2, "%s: no CHECKS line:\n%s", cmd, r.out);
	cr_assert_eq(failed, 0, "%s: %ld of %ld checks failed\n%s", cmd, failed, checks, r.err);
	cr_assert_gt(checks, 0);
	cr_log_info("mpi -np %d %s: %ld checks", np, args, checks);
	ts_run_free(&r);
}

Test(s3_mpi, two_and_three_workers_save_to_s3_restore_on_other_counts, .timeout = 600)
{
	char *d2 = s3t_prefix("mpi2"), *d3 = s3t_prefix("mpi3");
	run_mpi(2, "mpi_save save 1 %s 2", d2);
	char *keys = s3t_oracle("keys", d2, NULL);
	cr_expect(strstr(keys, "ckpt-2.data-00000-of-00002") && strstr(keys, "ckpt-2.data-00001-of-00002") &&
		strstr(keys, "ckpt-2.index") && strstr(keys, "checkpoint\n"), "2 workers wrote:\n%s", keys);
	free(keys);
	run_mpi(3, "mpi_save restore 1 %s 2 2", d2);
	run_mpi(3, "mpi_save save 1 %s 2", d3);
	run_mpi(2, "mpi_save restore 1 %s 2 3", d3);
	free(d2);
	free(d3);
}
#endif

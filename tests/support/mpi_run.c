/* ts_mpi_run: see mpi_run.h. Built only where the suite has MPI (CKPT_TEST_MPI). */
#ifdef CKPT_TEST_MPI
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "mpi_run.h"
#include "test_support.h"

#define MPIRUN CKPT_MPIRUN " --allow-run-as-root --oversubscribe"

long ts_mpi_run(unsigned timeout_s, int np, const char *fmt, ...)
{
	char args[2048], cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	/*
	 * a hang is a failure, not a stuck suite; under ASan, slow unwinding lets
	 * tests/lsan.supp attribute Open MPI's own leaks to its libraries
	 */
	snprintf(cmd, sizeof(cmd), "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0:malloc_context_size=30\" timeout %u " MPIRUN
		" -np %d " CKPT_MPI_BIN_DIR "/%s", timeout_s, np, args);
	ts_run_result r;
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "%s", cmd);
	long checks = -1, failed = -1;
	const char *c = strstr(r.out, "CHECKS ");
	cr_assert(c && sscanf(c, "CHECKS %ld FAILED %ld", &checks, &failed) == 2, "%s: no CHECKS line:\n%s", cmd, r.out);
	cr_assert_eq(failed, 0, "%s: %ld of %ld checks failed\n%s", cmd, failed, checks, r.err);
	cr_assert_gt(checks, 0);
	cr_log_info("mpi -np %d %s: %ld checks", np, args, checks);
	ts_run_free(&r);
	return checks;
}
#endif

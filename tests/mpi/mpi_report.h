/*
 * How every MPI test program ends: its checks and failures summed over the
 * workers, printed by worker 0 as "CHECKS n FAILED m" (plus `fmt`, worker
 * 0's own extra figures) for tests/distribute/test_mpi.c to read and show in the log,
 * then MPI_Finalize. Every worker returns the exit status: 1 when any
 * worker failed a check.
 */
#ifndef CKPT_TEST_MPI_REPORT_H
#define CKPT_TEST_MPI_REPORT_H

#include <stdarg.h>
#include <stdio.h>
#include <mpi.h>

static inline int tm_report(long checks, long bad, const char *fmt, ...)
{
	long mine[2] = { checks, bad }, all[2] = { 0, 0 };
	int rank = 0;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Allreduce(mine, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("CHECKS %ld FAILED %ld", all[0], all[1]);
		if (fmt) {
			va_list ap;
			va_start(ap, fmt);
			vprintf(fmt, ap);
			va_end(ap);
		}
		printf("\n");
		fflush(stdout);
	}
	MPI_Finalize();
	return all[1] ? 1 : 0;
}

#endif

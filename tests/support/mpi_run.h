/*
 * Running one of the MPI scenario programs (tests/mpi/) through mpirun from a
 * Criterion suite (test_mpi.c, test_s3_mpi.c): Criterion forks every test,
 * which does not mix with MPI_Init, so each scenario is its own program.
 */
#ifndef CKPT_TEST_MPI_RUN_H
#define CKPT_TEST_MPI_RUN_H

#include "ckpt/common.h"

/*
 * Run `np` workers of tests/mpi/<args> (printf-style) under `timeout_s`
 * seconds; the program must exit 0 and print "CHECKS n FAILED 0" with n > 0.
 * @return the number of checks it made (logged too).
 */
long ts_mpi_run(unsigned timeout_s, int np, const char *fmt, ...) CKPT_PRINTF(3, 4);

#endif

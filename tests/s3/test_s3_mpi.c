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
#include "mpi_run.h"

Test(s3_mpi, two_and_three_workers_save_to_s3_restore_on_other_counts, .timeout = 600)
{
	char *d2 = s3t_prefix("mpi2"), *d3 = s3t_prefix("mpi3");
	ts_mpi_run(180, 2, "mpi_save save 1 %s 2", d2);
	char *keys = s3t_oracle("keys", d2, NULL);
	cr_expect(strstr(keys, "ckpt-2.data-00000-of-00002") && strstr(keys, "ckpt-2.data-00001-of-00002") &&
		strstr(keys, "ckpt-2.index") && strstr(keys, "checkpoint\n"), "2 workers wrote:\n%s", keys);
	free(keys);
	ts_mpi_run(180, 3, "mpi_save restore 1 %s 2 2", d2);
	ts_mpi_run(180, 3, "mpi_save save 1 %s 2", d3);
	ts_mpi_run(180, 2, "mpi_save restore 1 %s 2 3", d3);
	free(d2);
	free(d3);
}
#endif

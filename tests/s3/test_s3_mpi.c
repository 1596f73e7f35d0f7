/*
 * Multi-worker saves to S3: 2 and 3 MPI workers (tests/mpi/mpi_save) save
 * one logical checkpoint to an s3:// prefix (each worker uploads its own
 * data shard, worker 0 writes the index and the state file) and it is
 * restored on another worker count, every copy checked. Incremental
 * multi-worker saves to S3 (issue 33 point 5): each worker's unchanged
 * ranges come by UploadPartCopy from its own data object of the last save.
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
#include "oracle_common.h"
#include "test_support.h"

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

/*
 * tests/mpi/mpi_incr on an s3:// prefix, 2 workers, 8 saves, max_to_keep 3: from the second save on each
 * worker uploads at most the changed bytes plus S3's part minimum, the rest copied by the server; every
 * data object of the fourth replaced behind the library's back: the fifth copies nothing of them; every
 * kept checkpoint reads back bit-exactly; TF restores each (downloaded by boto3).
 */
Test(s3_mpi, incremental_two_workers_copy_unchanged_ranges_tf_restores, .timeout = 600)
{
	char *d = s3t_prefix("mpi-incr"), *tmp = ts_tmpdir(), *expect = ts_join(tmp, "expect"), *local = ts_join(tmp, "dl");
	ts_mpi_run(400, 2, "mpi_incr %s %s 1 8 3 grow tamper s3", d, expect);
	free(s3t_oracle("download", d, local, NULL));
	ts_run_result r = oracle_run("tf_incremental.py", local, expect, NULL);
	oracle_expect_ok(&r, "tf_incremental.py");
	ts_run_free(&r);
	ts_rmtree(tmp);
	free(tmp);
	free(expect);
	free(local);
	free(d);
}
#endif

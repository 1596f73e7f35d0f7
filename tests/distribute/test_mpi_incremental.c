/*
 * Incremental multi-worker saves (issue 33, point 5), through
 * tests/mpi/mpi_incr under mpirun: each worker reuses its own shard's
 * unchanged bytes of the last committed checkpoint (kernel copies), every
 * kept checkpoint stays a complete TensorBundle that reads back bit-exactly
 * after the older ones are deleted and that TensorFlow restores with
 * assert_consumed, and a job of another worker count (restored from it)
 * reuses only what its own saves wrote.
 */
#ifdef CKPT_TEST_MPI
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include "ckpt/ckpt.h"
#include "test_support.h"
#include "mpi_run.h"
#include "oracle_common.h"

static void tf_restores_kept(const char *ck, const char *expect)
{
	ts_run_result r = oracle_run("tf_incremental.py", ck, expect, NULL);
	oracle_expect_ok(&r, "tf_incremental.py");
	ts_run_free(&r);
}

/*
 * 2 workers, 8 saves, max_to_keep 3, a new variable before the third (the
 * owners move), every data file of the fourth flipped behind the library's
 * back: from the second save on each worker writes at most the changed bytes
 * (+ slack) and reuses the rest, but nothing of the tampered files; each kept
 * checkpoint reads back bit-exactly after every save; TF restores every kept one.
 */
Test(mpi_incremental, two_workers_write_changes_only_chain_keep_3_bit_exact_tf_restores, .timeout = 300)
{
	char *dir = ts_tmpdir();
	ts_mpi_run(240, 2, "mpi_incr %s/ck %s/expect 1 8 3 grow tamper", dir, dir);
	char *ck = ts_join(dir, "ck"), *ex = ts_join(dir, "expect");
	tf_restores_kept(ck, ex);
	free(ck);
	free(ex);
	ts_rmtree(dir);
	free(dir);
}

/*
 * 3 workers save steps 1-3 (one of them holds only frozen values: its shard
 * is the last checkpoint's file, hard-linked); 2 workers restore step 3 and
 * save 4-6, 4 workers restore 6 and save 7-8: the first save of each job
 * reuses nothing, the next ones their own; every kept checkpoint bit-exact;
 * TF restores them.
 */
Test(mpi_incremental, worker_count_change_3_2_4_restores_then_reuses_only_its_own, .timeout = 400)
{
	char *dir = ts_tmpdir();
	ts_mpi_run(240, 3, "mpi_incr %s/ck %s/expect 1 3 2 link", dir, dir);
	ts_mpi_run(240, 2, "mpi_incr %s/ck %s/expect 4 6 2", dir, dir);
	ts_mpi_run(240, 4, "mpi_incr %s/ck %s/expect 7 8 2", dir, dir);
	char *ck = ts_join(dir, "ck"), *ex = ts_join(dir, "expect");
	tf_restores_kept(ck, ex);
	free(ck);
	free(ex);
	ts_rmtree(dir);
	free(dir);
}
#endif

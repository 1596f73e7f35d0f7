/*
 * Sharded save and restore onto other worker counts.
 *
 *   mpi_save save LOCAL DIR STEPS     manager saves of steps 1..STEPS
 *                                     (max_to_keep 2); every worker gets the
 *                                     same path; W data shards + one index;
 *                                     worker 0 reloads it in-process.
 *   mpi_save restore LOCAL DIR STEP SAVED_R [all|split]
 *                                     restore_latest inside the scope, slots
 *                                     restored on create, every copy checked
 *                                     against STEP; identical status and
 *                                     path on every worker. all|split:
 *                                     CKPT_MPI_RESTORE (who reads what).
 * Prints "CHECKS n FAILED f" (summed over workers).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ckpt/mpi.h>
#include "mpi_model.h"
#include "mpi_report.h"

static int rank, size;
static long checks;
static int bad;

static void same_everywhere(const char *what, const char *s)
{
	char mine[512] = { 0 }, *all = calloc((size_t)size, sizeof(mine));
	snprintf(mine, sizeof(mine), "%s", s ? s : "(null)");
	MPI_Allgather(mine, sizeof(mine), MPI_CHAR, all, sizeof(mine), MPI_CHAR, MPI_COMM_WORLD);
	for (int w = 0; w < size; w++, checks++)
		if (strcmp(all + w * sizeof(mine), mine) != 0)
			bad++, fprintf(stderr, "worker %d: %s '%s' but worker %d has '%s'\n", rank, what, mine, w,
				all + w * sizeof(mine));
	free(all);
}

/* through the library's file system for the path: local or s3:// (tests/s3/test_s3_mpi.c) */
static int exists(const char *p)
{
	ckpt_vfs *v = NULL;
	return ckpt_status_of(v = ckpt_vfs_for_path(NULL, p)) == CKPT_OK && ckpt_vfs_exists(NULL, v, p) > 0;
}

static int do_save(ckpt_strategy *s, const char *dir, int steps)
{
	tm_model m;
	TM_TRY(ckpt_scope_enter(s));
	TM_TRY(tm_build(&m, NULL, 1));
	TM_TRY(ckpt_scope_exit(s));
	ckpt_manager *mgr;
	TM_TRY(ckpt_manager_new(&mgr, m.ck, dir, 2));
	const char *path = NULL;
	for (int st = 1; st <= steps; st++) {
		TM_TRY(tm_set(&m, s, st));
		TM_TRY(ckpt_status_of(path = ckpt_manager_save(mgr)));
		same_everywhere("saved path", path);
	}
	checks++;
	if (ckpt_manager_num_checkpoints(mgr) != 2)
		bad++, fprintf(stderr, "worker %d: manager keeps %zu checkpoints, want 2\n", rank,
			       ckpt_manager_num_checkpoints(mgr));
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		char p[1024];
		for (int k = 0; k < size; k++, checks++) {
			snprintf(p, sizeof(p), "%s.data-%05d-of-%05d", path, k, size);
			if (!exists(p))
				bad++, fprintf(stderr, "missing data shard %s\n", p);
		}
		/* the oldest beyond max_to_keep is gone, on the shared directory */
		snprintf(p, sizeof(p), "%s/ckpt-%d.index", dir, steps - 2);
		checks++;
		if (steps > 2 && exists(p))
			bad++, fprintf(stderr, "%s should have been deleted (max_to_keep 2)\n", p);
		/* a single-process reader, outside the scope (plain variables) */
		tm_model one;
		TM_TRY(tm_build(&one, NULL, 0));
		ckpt_restore_status *st;
		TM_TRY(ckpt_checkpoint_restore(&st, one.ck, path));
		TM_TRY(tm_create_slots(&one));
		TM_TRY(ckpt_restore_status_assert_consumed(st));
		ckpt_restore_status_free(st);
		bad += tm_check(&one, steps, size * (ckpt_strategy_num_replicas(s) / ckpt_multi_worker_size(s)), "in-process reload", &checks);
		tm_free(&one);
	}
	ckpt_manager_free(mgr);
	tm_free(&m);
	return CKPT_OK;
}

static int do_restore(ckpt_strategy *s, const char *dir, int step, int saved_R)
{
	tm_model m;
	TM_TRY(ckpt_scope_enter(s));
	TM_TRY(tm_build(&m, NULL, 0));
	ckpt_manager *mgr;
	TM_TRY(ckpt_manager_new(&mgr, m.ck, dir, 2));
	ckpt_restore_status *st = NULL;
	const char *from = NULL;
	int rc = ckpt_status_of(from = ckpt_manager_restore_latest(&st, mgr));
	char rcs[32];
	snprintf(rcs, sizeof(rcs), "%d", rc);
	same_everywhere("restore status", rcs);
	same_everywhere("restored from", from);
	TM_TRY(rc);
	TM_TRY(tm_create_slots(&m)); /* restored on create */
	TM_TRY(ckpt_scope_exit(s));
	TM_TRY(ckpt_restore_status_assert_consumed(st));
	ckpt_restore_status_free(st);
	char who[64];
	snprintf(who, sizeof(who), "worker %d after restore", rank);
	bad += tm_check(&m, step, saved_R, who, &checks);
	checks++;
	if (ckpt_variable_num_replicas(m.kernel) != (ckpt_strategy_num_replicas(s) / ckpt_multi_worker_size(s)))
		bad++, fprintf(stderr, "%s: %d copies\n", who, ckpt_variable_num_replicas(m.kernel));
	ckpt_manager_free(mgr);
	tm_free(&m);
	return CKPT_OK;
}

int main(int argc, char **argv)
{
	if (argc < 5)
		TM_FAIL("usage: mpi_save save LOCAL DIR STEPS | restore LOCAL DIR STEP SAVED_R");
	if (argc > 6)
		setenv("CKPT_MPI_RESTORE", argv[6], 1);
	int prov;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	ckpt_strategy *s;
	TM_TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, atoi(argv[2])));
	if (strcmp(argv[1], "save") == 0)
		do_save(s, argv[3], atoi(argv[4]));
	else if (argc > 5)
		do_restore(s, argv[3], atoi(argv[4]), atoi(argv[5]));
	else
		TM_FAIL("restore needs SAVED_R");
	ckpt_strategy_free(s);
	return tm_report(checks, bad, NULL);
}

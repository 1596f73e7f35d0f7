/*
 * All or nothing across workers under I/O errors: `mpi_faults LOCAL DIR RANK`.
 *
 * After a good save of step 1, the save of step 2 is retried with worker
 * RANK's file system failing its k-th call, for k = 1, 2, ... until a save
 * goes through. Every time the fault fires: every worker's save fails, the
 * surviving workers' errors name worker RANK, no ckpt-2 index is visible,
 * and the latest checkpoint (step 1) still loads in one process (worker 0,
 * outside the scope). Prints "CHECKS n FAILED f" and the number of faults.
 */
#include <string.h>
#include <unistd.h>
#include <ckpt/mpi.h>
#include <ckpt/sys/vfs_faulty.h>
#include "mpi_model.h"
#include "mpi_report.h"

int main(int argc, char **argv)
{
	if (argc < 4)
		TM_FAIL("usage: mpi_faults LOCAL DIR RANK");
	int prov, rank, size;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int local = atoi(argv[1]), frank = atoi(argv[3]);
	const char *dir = argv[2];
	ckpt_strategy *s;
	TM_TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, local));
	long checks = 0, faults = 0;
	int bad = 0;
	tm_model m;
	ckpt_manager *mgr;
	TM_TRY(ckpt_scope_enter(s));
	TM_TRY(tm_build(&m, NULL, 1));
	TM_TRY(ckpt_scope_exit(s));
	TM_TRY(ckpt_manager_new(&mgr, m.ck, dir, 5));
	TM_TRY(tm_set(&m, s, 1));
	TM_TRY(ckpt_status_of(ckpt_manager_save_number(mgr, 1)));
	ckpt_manager_free(mgr);
	tm_free(&m);

	for (long k = 1; k < 400; k++) {
		ckpt_vfs *fv = NULL;
		ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
		if (rank == frank) {
			TM_TRY(ckpt_vfs_faulty_new(&fv, ckpt_vfs_default(), k));
			o.vfs = fv;
		}
		TM_TRY(ckpt_scope_enter(s));
		TM_TRY(tm_build(&m, &o, 1));
		TM_TRY(ckpt_scope_exit(s));
		int rc = ckpt_manager_new(&mgr, m.ck, dir, 5);
		if (rc == CKPT_OK) {
			TM_TRY(tm_set(&m, s, 2));
			rc = ckpt_status_of(ckpt_manager_save_number(mgr, 2));
			ckpt_manager_free(mgr);
		}
		char msg[1024];
		ckpt_error_format(ckpt_error_last(), msg, sizeof(msg));
		int fired = fv ? ckpt_vfs_faulty_fired(fv) : 0, any = 0;
		MPI_Allreduce(&fired, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
		tm_free(&m);
		ckpt_vfs_free(fv);
		if (!any) {
			checks++;
			if (rc < 0)
				bad++, fprintf(stderr, "worker %d: save failed with no fault (k=%ld): %s\n", rank, k, msg);
			break;
		}
		faults++;
		char who[32];
		snprintf(who, sizeof(who), "worker %d", frank);
		checks += 2;
		if (rc >= 0)
			bad++, fprintf(stderr, "worker %d: save succeeded although worker %d failed (k=%ld)\n", rank, frank, k);
		else if (rank != frank && !strstr(msg, who))
			bad++, fprintf(stderr, "worker %d: error does not name %s (k=%ld): %s\n", rank, who, k, msg);
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 0) {
			char p[1024];
			snprintf(p, sizeof(p), "%s/ckpt-2.index", dir);
			checks++;
			if (access(p, F_OK) == 0)
				bad++, fprintf(stderr, "k=%ld: %s is visible after a failed save\n", k, p);
			/* the previous latest, in one process */
			ckpt_manager *ro;
			const char *latest = NULL;
			TM_TRY(ckpt_manager_new(&ro, NULL, dir, 0));
			TM_TRY(ckpt_status_of(latest = ckpt_manager_latest_valid(ro)));
			tm_model one;
			TM_TRY(tm_build(&one, NULL, 1));
			TM_TRY(ckpt_checkpoint_restore(NULL, one.ck, latest));
			bad += tm_check(&one, 1, size * local, "previous latest", &checks);
			tm_free(&one);
			ckpt_manager_free(ro);
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
	ckpt_strategy_free(s);
	return tm_report(checks, bad, " FAULTS %ld", faults);
}

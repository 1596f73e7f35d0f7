/*
 * The save loop the kill test shoots at: `mpi_killloop LOCAL DIR`.
 *
 * Writes DIR/pid.RANK, resumes from the latest checkpoint (restore_latest
 * inside the scope, slots on create), then saves step N as ckpt-N with
 * fsync, back to back, until killed. test_mpi.c kills one worker with
 * SIGKILL at a random moment and checks in one process that the latest
 * checkpoint loads and holds a consistent step.
 */
#include <string.h>
#include <unistd.h>
#include <ckpt/mpi.h>
#include "mpi_model.h"

int main(int argc, char **argv)
{
	if (argc < 3)
		TM_FAIL("usage: mpi_killloop LOCAL DIR");
	int prov, rank;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	ckpt_strategy *s;
	TM_TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, atoi(argv[1])));
	tm_model m;
	ckpt_manager *mgr;
	TM_TRY(ckpt_scope_enter(s));
	TM_TRY(tm_build(&m, NULL, 0));
	TM_TRY(ckpt_manager_new(&mgr, m.ck, argv[2], 3));
	ckpt_restore_status *st = NULL;
	const char *from = NULL;
	TM_TRY(ckpt_status_of(from = ckpt_manager_restore_latest(&st, mgr)));
	TM_TRY(tm_create_slots(&m));
	TM_TRY(ckpt_scope_exit(s));
	ckpt_restore_status_free(st);
	int64_t step = 0;
	if (from)
		TM_TRY(ckpt_variable_read(m.step, &step, sizeof(step)));
	char p[1024];
	snprintf(p, sizeof(p), "%s/pid.%d", argv[2], rank);
	FILE *f = fopen(p, "w");
	if (!f)
		TM_FAIL("cannot write %s", p);
	fprintf(f, "%ld\n", (long)getpid());
	fclose(f);
	for (int64_t k = step + 1; k < step + 100000; k++) {
		TM_TRY(tm_set(&m, s, k));
		TM_TRY(ckpt_status_of(ckpt_manager_save_number(mgr, k)));
	}
	ckpt_manager_free(mgr);
	tm_free(&m);
	ckpt_strategy_free(s);
	MPI_Finalize();
	return 0;
}

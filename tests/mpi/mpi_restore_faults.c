/*
 * Restore all or nothing across workers under I/O errors:
 * `mpi_restore_faults LOCAL DIR RANK all|split`.
 *
 * A checkpoint of step 1 is written; then, for k = 1, 2, ... until a
 * restore goes through, a fresh model set to step 5 restores it with worker
 * RANK's file system failing its k-th call (open, size, pread: during the
 * match or inside the commit's reads). Every time the fault fires, every
 * worker's restore fails, the other workers' errors name worker RANK, and
 * every worker's variables (every local copy, the metrics' aggregates)
 * still hold step 5 (a fault the reader works around, as when it probes
 * for files, restores step 1 on every worker). The first k past the
 * restore's calls restores step 1 everywhere. all|split: CKPT_MPI_RESTORE
 * (who reads what). Then the same restore both ways through
 * ckpt_multi_worker_set_restore: split makes fewer I/O calls over all
 * workers than read-all. Prints
 * "CHECKS n FAILED f FAULTS k PREADS p IO_CALLS_ALL a IO_CALLS_SPLIT b"
 * (p: faults that hit a read of a value, which must be > 0).
 */
#include <stdlib.h>
#include <string.h>
#include <ckpt/mpi.h>
#include <ckpt/sys/vfs_faulty.h>
#include "mpi_model.h"
#include "mpi_report.h"

int main(int argc, char **argv)
{
	if (argc < 5)
		TM_FAIL("usage: mpi_restore_faults LOCAL DIR RANK all|split");
	setenv("CKPT_MPI_RESTORE", argv[4], 1);
	int prov, rank, size;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int local = atoi(argv[1]), frank = atoi(argv[3]);
	char path[1024];
	snprintf(path, sizeof(path), "%s/ck", argv[2]);
	ckpt_strategy *s;
	TM_TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, local));
	long checks = 0, faults = 0, preads = 0;
	int bad = 0, R = size * local;
	tm_model m;
	TM_TRY(ckpt_scope_enter(s));
	TM_TRY(tm_build(&m, NULL, 1));
	TM_TRY(ckpt_scope_exit(s));
	TM_TRY(tm_set(&m, s, 1));
	TM_TRY(ckpt_checkpoint_write(m.ck, path));
	tm_free(&m);

	char who[32], self[64];
	snprintf(who, sizeof(who), "worker %d", frank);
	snprintf(self, sizeof(self), "worker %d", rank);
	long k;
	for (k = 1; k < 400; k++) {
		ckpt_vfs *fv = NULL;
		ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
		if (rank == frank) {
			TM_TRY(ckpt_vfs_faulty_new(&fv, ckpt_vfs_default(), k));
			o.vfs = fv;
		}
		TM_TRY(ckpt_scope_enter(s));
		TM_TRY(tm_build(&m, &o, 1));
		TM_TRY(ckpt_scope_exit(s));
		TM_TRY(tm_set(&m, s, 5));
		ckpt_restore_status *st = NULL;
		int rc = ckpt_checkpoint_restore(&st, m.ck, path);
		char msg[1024];
		ckpt_error_format(ckpt_error_last(), msg, sizeof(msg));
		int fired = fv ? ckpt_vfs_faulty_fired(fv) : 0, any = 0;
		MPI_Allreduce(&fired, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
		if (!any) {
			checks += 2;
			if (rc < 0)
				bad++, fprintf(stderr, "%s: restore failed with no fault (k=%ld): %s\n", self, k, msg);
			else if (ckpt_restore_status_assert_consumed(st) < 0)
				bad++, fprintf(stderr, "%s: %s\n", self, ckpt_error_last()->message);
			bad += tm_check(&m, 1, R, "restore without a fault", &checks);
			ckpt_restore_status_free(st);
			tm_free(&m);
			ckpt_vfs_free(fv);
			break;
		}
		/* the same outcome on every worker */
		int ok = rc == CKPT_OK, all_ok = 0, some_ok = 0;
		MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
		MPI_Allreduce(&ok, &some_ok, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
		checks++;
		if (all_ok != some_ok)
			bad++, fprintf(stderr, "%s: the restore %s here but not on every worker (k=%ld): %s\n", self,
				ok ? "succeeded" : "failed", k, msg);
		char what[160];
		if (ok) {
			/* a fault the reader works around (probing for files) */
			snprintf(what, sizeof(what), "%s after a restore despite a fault (k=%ld)", self, k);
			bad += tm_check(&m, 1, R, what, &checks);
			ckpt_restore_status_free(st);
			tm_free(&m);
			ckpt_vfs_free(fv);
			continue;
		}
		faults++;
		int read_fault = rank == frank && strstr(msg, "injected failure of pread") != NULL, anyread = 0;
		MPI_Allreduce(&read_fault, &anyread, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
		preads += anyread;
		checks += 2;
		if (st)
			bad++, fprintf(stderr, "%s: a failed restore returned a status (k=%ld)\n", self, k);
		if (rank != frank && !strstr(msg, who))
			bad++, fprintf(stderr, "%s: error does not name %s (k=%ld): %s\n", self, who, k, msg);
		/* nobody assigned anything: every copy still holds step 5 */
		snprintf(what, sizeof(what), "%s after a failed restore (k=%ld)", self, k);
		bad += tm_check(&m, 5, R, what, &checks);
		ckpt_restore_status_free(st);
		tm_free(&m);
		ckpt_vfs_free(fv);
	}
	/*
	 * Who reads: the same restore through ckpt_multi_worker_set_restore,
	 * both ways, counting every worker's I/O calls. Split, each value is
	 * read by one worker: fewer calls over all workers than when each
	 * reads everything (W >= 2); both restore step 1 everywhere.
	 */
	long calls[2] = { 0, 0 };
	for (int way = 0; way < 2; way++) {
		ckpt_vfs *cv;
		TM_TRY(ckpt_vfs_faulty_new(&cv, ckpt_vfs_default(), 0));
		ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
		o.vfs = cv;
		TM_TRY(ckpt_multi_worker_set_restore(s, way ? CKPT_MW_RESTORE_SPLIT : CKPT_MW_RESTORE_READ_ALL));
		TM_TRY(ckpt_scope_enter(s));
		TM_TRY(tm_build(&m, &o, 1));
		TM_TRY(ckpt_scope_exit(s));
		TM_TRY(tm_set(&m, s, 5));
		TM_TRY(ckpt_checkpoint_restore(NULL, m.ck, path));
		bad += tm_check(&m, 1, R, way ? "split restore" : "read-all restore", &checks);
		long mine = ckpt_vfs_faulty_calls(cv);
		MPI_Allreduce(&mine, &calls[way], 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
		tm_free(&m);
		ckpt_vfs_free(cv);
	}
	checks += 3;
	if (size > 1 && calls[1] >= calls[0])
		bad++, fprintf(stderr, "%s: split restore made %ld I/O calls over all workers, read-all %ld\n", self, calls[1],
			calls[0]);
	if (ckpt_multi_worker_set_restore(s, (ckpt_mw_restore)7) != CKPT_EINVAL)
		bad++, fprintf(stderr, "%s: ckpt_multi_worker_set_restore accepts mode 7\n", self);
	checks += 2;
	if (k == 400)
		bad++, fprintf(stderr, "%s: no restore went through\n", self);
	if (preads == 0)
		bad++, fprintf(stderr, "%s: no fault hit a read of a value\n", self);
	ckpt_strategy_free(s);
	return tm_report(checks, bad, " FAULTS %ld PREADS %ld IO_CALLS_ALL %ld IO_CALLS_SPLIT %ld", faults, preads, calls[0], calls[1]);
}

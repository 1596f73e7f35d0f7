/*
 * The memory tier across workers (issue 32): per-step blocking time of a
 * memory save with memory_copies F against a plain memcpy of each worker's
 * share and against a save to a local directory; a restore from the memory
 * tier against the same restore from that directory, each by a fresh
 * manager's ckpt_manager_restore_latest as a restarted job does it (its
 * start-up outside the timing). Every time is the slowest worker's (the
 * step ends when it does), the median of REPS, in one run.
 *
 *     mpirun -np W tier_mpi_bench MIB [REPS] [COPIES] [SCRATCH]
 *
 * MIB of mirrored float32 state in 8 variables; nodes from CKPT_TIER_NODES
 * under CKPT_TIER_DIR (the caller's: it removes it after); worker 0 prints
 * one markdown row.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <ckpt/mpi.h>
#include "tier_model.h"

static int rank, size;

/* the median over reps of the slowest worker's time */
static double slowest_median(double *v, int n)
{
	for (int i = 0; i < n; i++) {
		double mx = v[i];
		MPI_Allreduce(&v[i], &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		v[i] = mx;
	}
	qsort(v, (size_t)n, sizeof(*v), tm_cmp_d);
	return v[n / 2];
}

static void die(const char *what)
{
	char e[1024];
	fprintf(stderr, "tier_mpi_bench worker %d: %s: %s\n", rank, what, ckpt_error_format(NULL, e, sizeof(e)));
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static ckpt_checkpoint *state(ckpt_strategy *s, ckpt_variable **vars, int64_t per_var)
{
	ckpt_checkpoint *ck = NULL;
	if (ckpt_scope_enter(s) != CKPT_OK)
		die("checkpoint");
	const char *failed = tm_state(&ck, vars, per_var);
	if (failed)
		die(failed);
	return ck;
}

static ckpt_manager *manager(ckpt_checkpoint *ck, const char *dir, int memory, int copies)
{
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.no_fsync = 1;
	mo.warn = tm_quiet;
	if (memory) {
		mo.memory_every = 1;
		mo.persist_every = 1 << 30;
		mo.memory_job = "tier-mpi-bench";
		mo.memory_copies = copies;
	}
	ckpt_manager *m;
	if (ckpt_manager_new_ext(&m, ck, dir, 1, &mo) != CKPT_OK)
		die("manager");
	return m;
}

int main(int argc, char **argv)
{
	int prov;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 2) {
		fprintf(stderr, "usage: tier_mpi_bench MIB [REPS] [COPIES] [SCRATCH]\n");
		return 2;
	}
	size_t mib = (size_t)atol(argv[1]);
	int reps = argc > 2 ? atoi(argv[2]) : 5, copies = argc > 3 ? atoi(argv[3]) : 1;
	const char *scratch = argc > 4 ? argv[4] : "/tmp";
	size_t bytes = mib << 20;
	int64_t per_var = (int64_t)(bytes / NVARS / sizeof(float));
	char fdir[512];
	long tag = (long)getpid();
	MPI_Bcast(&tag, 1, MPI_LONG, 0, MPI_COMM_WORLD);
	snprintf(fdir, sizeof(fdir), "%s/tier-mpi-bench-files-%ld", scratch, tag);

	ckpt_strategy *s;
	if (ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, 1) != CKPT_OK)
		die("strategy");
	ckpt_variable *vars[NVARS];
	ckpt_checkpoint *ck = state(s, vars, per_var);
	float *src = malloc(bytes), *dst = malloc(bytes);
	for (size_t i = 0; i < bytes / sizeof(float); i++)
		src[i] = (float)i;
	for (int i = 0; i < NVARS; i++)
		if (ckpt_variable_assign(vars[i], src + (size_t)i * (size_t)per_var, (size_t)per_var * sizeof(float)) != CKPT_OK)
			die("assign");
	if (ckpt_scope_exit(s) != CKPT_OK)
		die("scope");
	double *t = calloc((size_t)reps, sizeof(double));

	/* memcpy floor: each worker's share (what it writes), destination touched once before */
	size_t share = bytes / (size_t)size;
	memcpy(dst, src, share);
	for (int r = 0; r < reps; r++) {
		double t0 = tm_now();
		memcpy(dst, src, share);
		t[r] = tm_now() - t0;
	}
	double t_memcpy = slowest_median(t, reps);

	/* the state to the local directory first (page cache; no fsync), then memory saves newer than it */
	ckpt_manager *mf = manager(ck, fdir, 0, 0);
	for (int r = 0; r < reps; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = tm_now();
		if (!ckpt_manager_save(mf))
			die("file save");
		t[r] = tm_now() - t0;
	}
	double t_fsave = slowest_median(t, reps);
	ckpt_manager_free(mf);
	ckpt_manager *m = manager(ck, fdir, 1, copies);
	if (!ckpt_manager_save(m))
		die("warm-up save");
	for (int r = 0; r < reps; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = tm_now();
		if (!ckpt_manager_save(m))
			die("memory save");
		t[r] = tm_now() - t0;
	}
	double t_save = slowest_median(t, reps);
	ckpt_manager_free(m); /* keeps the memory step: newer than the directory's */

	/* restores into a second state: memory (newer than the directory's) and files */
	ckpt_variable *rv[NVARS];
	ckpt_checkpoint *rk = state(s, rv, per_var);
	if (ckpt_scope_exit(s) != CKPT_OK)
		die("scope");
	double *tm = calloc((size_t)reps, sizeof(double)), *tf = calloc((size_t)reps, sizeof(double));
	for (int r = 0; r < reps; r++) {
		ckpt_manager *rm = manager(rk, fdir, 1, copies);
		MPI_Barrier(MPI_COMM_WORLD);
		const char *failed = tm_timed_restore(&tm[r], rm, CKPT_TIER_MEMORY);
		if (failed)
			die(failed);
		ckpt_manager_free(rm);
		rm = manager(rk, fdir, 0, 0);
		MPI_Barrier(MPI_COMM_WORLD);
		if ((failed = tm_timed_restore(&tf[r], rm, CKPT_TIER_STORAGE)))
			die(failed);
		ckpt_manager_free(rm);
	}
	double t_rmem = slowest_median(tm, reps), t_rfile = slowest_median(tf, reps);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		char cmd[1200];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fdir);
		if (system(cmd) != 0)
			fprintf(stderr, "tier_mpi_bench: could not remove %s\n", fdir);
		printf("| %zu MiB | %d | %d | %.4f s | %.4f s | %.2f× | %.4f s | %.4f s | %.4f s | %.2f× |\n", mib, size,
			copies, t_memcpy, t_save, t_save / t_memcpy, t_fsave, t_rmem, t_rfile, t_rmem / t_rfile);
	}
	ckpt_checkpoint_free(rk);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	free(src);
	free(dst);
	free(t);
	free(tm);
	free(tf);
	MPI_Finalize();
	return 0;
}

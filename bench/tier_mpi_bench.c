/*
 * The memory tier across workers (issue 32): per-step blocking time of a
 * memory save with memory_copies F against a plain memcpy of each worker's
 * share and against a save to a local directory; a restore from the memory
 * tier against the same restore from that directory, each by a fresh
 * manager's ckpt_manager_restore_latest as a restarted job does it (its
 * start-up outside the timing). Every time is the slowest worker's (the
 * step ends when it does), the median of REPS, in one run.
 *
 *     mpirun -np W tier_mpi_bench MIB [REPS] [COPIES] [SCRATCH] [STEP_MS]
 *
 * MIB of mirrored float32 state in 8 variables; nodes from CKPT_TIER_NODES
 * under CKPT_TIER_DIR (the caller's: it removes it after); worker 0 prints
 * one markdown row.
 *
 * A second line, memory_async (the copies to other nodes on the tier's
 * thread; MPI at MPI_THREAD_MULTIPLE for the whole run): the blocking time
 * of a save made after a training step, which includes waiting for the
 * previous step's copies when they are not done, and the training loop's
 * time per step: the step alone, with a synchronous memory save, with an
 * async one. A step is an update pass (every parameter written once: the
 * cheapest step, the least time to hide a copy in) plus STEP_MS (default
 * 0) of arithmetic on one core (spin, the default: a CPU trainer, whose
 * cores the copies share) or asleep (sleep: a step on an accelerator, the
 * host thread waiting for it).
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

static ckpt_manager *manager_ext(ckpt_checkpoint *ck, const char *dir, int memory, int copies, int async)
{
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.no_fsync = 1;
	mo.warn = tm_quiet;
	if (memory) {
		mo.memory_every = 1;
		mo.persist_every = 1 << 30;
		mo.memory_job = "tier-mpi-bench";
		mo.memory_copies = copies;
		mo.memory_async = async;
	}
	ckpt_manager *m;
	if (ckpt_manager_new_ext(&m, ck, dir, 1, &mo) != CKPT_OK)
		die("manager");
	return m;
}

static ckpt_manager *manager(ckpt_checkpoint *ck, const char *dir, int memory, int copies)
{
	return manager_ext(ck, dir, memory, copies, 0);
}

static volatile double sink;
static int step_sleeps; /* STEP_KIND sleep: the STEP_MS is waited, not computed */

/* A training step: every parameter written once (an update pass), then `ms` of arithmetic on one core or asleep. */
static void train_step(ckpt_variable **vars, const float *g, int64_t per_var, double ms)
{
	for (int i = 0; i < NVARS; i++)
		if (ckpt_variable_assign(vars[i], g, (size_t)per_var * sizeof(float)) != CKPT_OK)
			die("update");
	if (step_sleeps) { /* an accelerator's step: the host thread waits */
		struct timespec ts = { (time_t)(ms / 1000), (long)((ms - 1000 * (double)(time_t)(ms / 1000)) * 1e6) };
		nanosleep(&ts, NULL);
	} else {
		double until = tm_now() + ms / 1000.0, x = 1.0;
		while (tm_now() < until)
			for (int i = 0; i < 10000; i++)
				x = x * 1.0000001 + 1e-9;
		sink = x;
	}
	/* a data-parallel step ends in the gradients' all-reduce: the workers leave it together */
	MPI_Barrier(MPI_COMM_WORLD);
}

/* Per step over reps steps: the step and, when m, a save after it; *blocked = the saves' median. */
static double loop(double *blocked, ckpt_manager *m, ckpt_variable **vars, const float *g, int64_t per_var,
	double ms, int reps, double *t)
{
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = tm_now();
	for (int r = 0; r < reps; r++) {
		train_step(vars, g, per_var, ms);
		double s0 = tm_now();
		if (m && !ckpt_manager_save(m))
			die("memory save in the loop");
		t[r] = tm_now() - s0;
	}
	if (m && ckpt_manager_wait(m) != CKPT_OK) /* the last step's copies are part of the loop's cost */
		die("wait");
	double per = (tm_now() - t0) / reps, mx = per;
	MPI_Allreduce(&per, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (blocked)
		*blocked = slowest_median(t, reps);
	return mx;
}

int main(int argc, char **argv)
{
	int prov;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov); /* memory_async's rows */
	if (prov != MPI_THREAD_MULTIPLE) {
		fprintf(stderr, "tier_mpi_bench: MPI_THREAD_MULTIPLE is not provided (%d)\n", prov);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 2) {
		fprintf(stderr, "usage: tier_mpi_bench MIB [REPS] [COPIES] [SCRATCH] [STEP_MS] [spin|sleep]\n");
		return 2;
	}
	size_t mib = (size_t)atol(argv[1]);
	int reps = argc > 2 ? atoi(argv[2]) : 5, copies = argc > 3 ? atoi(argv[3]) : 1;
	const char *scratch = argc > 4 ? argv[4] : "/tmp";
	double step_ms = argc > 5 ? atof(argv[5]) : 0;
	step_sleeps = argc > 6 && !strcmp(argv[6], "sleep");
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

	/* the training loop: steps alone, with a synchronous memory save, with memory_async */
	float *g = calloc((size_t)per_var, sizeof(float));
	if (!g)
		die("gradient buffer");
	double b_sync = 0, b_async = 0;
	double l_step = loop(NULL, NULL, vars, g, per_var, step_ms, reps, t);
	double l_sync = loop(&b_sync, m, vars, g, per_var, step_ms, reps, t);
	ckpt_manager_free(m);
	ckpt_manager *ma = copies ? manager_ext(ck, fdir, 1, copies, 1) : NULL;
	/* warm-up, as the synchronous manager had: a step being written and a committed one, then spares */
	for (int w = 0; ma && w < 3; w++)
		if (!ckpt_manager_save(ma))
			die("warm-up save");
	double l_async = ma ? loop(&b_async, ma, vars, g, per_var, step_ms, reps, t) : 0;
	if (ma && ckpt_manager_wait(ma) != CKPT_OK)
		die("wait");
	ckpt_manager_free(ma); /* keeps the memory step: newer than the directory's */
	free(g);

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
		printf("# step (update pass + %.0f ms %s) %.4f s; step + memory save: synchronous %.4f s (%.2f× the step; the "
			"save blocks %.4f s, %.2f× memcpy), memory_async %.4f s (%.2f×; the save blocks %.4f s, %.2f× memcpy)\n",
			step_ms, step_sleeps ? "asleep" : "of arithmetic", l_step, l_sync, l_sync / l_step, b_sync, b_sync / t_memcpy, l_async, l_async / l_step, b_async,
			b_async / t_memcpy);
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

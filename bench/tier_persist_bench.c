/*
 * The memory tier, one process (issue 32 point 3): how long a save that goes
 * to both tiers (memory_every = persist_every = 1) blocks the trainer, and
 * how long its copy to the directory then takes (ckpt_manager_wait), beside
 * a memory-only save and a storage-only save of the same state. Since the
 * persisted checkpoint is copied from the memory segment in the background,
 * a save to both tiers should block about as long as a memory-only one.
 * Medians of REPS, in one run.
 *
 *     tier_persist_bench MIB [REPS] [SCRATCH]
 *
 * prints one markdown row. The tier directory is $CKPT_TIER_DIR (default
 * /dev/shm/ckpt-<uid>); the checkpoint directories go under SCRATCH (default /tmp).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "ckpt/async.h"

#define NVARS 8
#define MAX_REPS 64

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return v[n / 2];
}

static void quiet(const char *msg, void *ctx)
{
	(void)msg;
	(void)ctx;
}

static void die(const char *what)
{
	fprintf(stderr, "tier_persist_bench: %s: %s\n", what, ckpt_error_last()->message);
	exit(1);
}

/* Median blocking time of REPS saves; *copy the median wait for the background copy after each. */
static double saves(ckpt_checkpoint *ck, const char *dir, int memory, int persist, int reps, double *copy)
{
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.no_fsync = 1;
	if (memory) {
		mo.memory_every = 1;
		mo.persist_every = persist;
		mo.memory_job = "tier-persist-bench";
	}
	ckpt_manager *m;
	if (ckpt_manager_new_ext(&m, ck, dir, 2, &mo) != CKPT_OK)
		die("manager");
	if (!ckpt_manager_save(m) || ckpt_manager_wait(m) != CKPT_OK)
		die("warm-up save");
	double t[MAX_REPS], w[MAX_REPS];
	for (int r = 0; r < reps; r++) {
		double t0 = now();
		if (!ckpt_manager_save(m))
			die("save");
		double t1 = now();
		if (ckpt_manager_wait(m) != CKPT_OK)
			die("copy to storage");
		t[r] = t1 - t0;
		w[r] = now() - t1;
	}
	ckpt_manager_free(m);
	ckpt_tier_drop(NULL, "tier-persist-bench");
	*copy = median(w, reps);
	return median(t, reps);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: tier_persist_bench MIB [REPS] [SCRATCH]\n");
		return 2;
	}
	size_t mib = (size_t)atol(argv[1]);
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	const char *scratch = argc > 3 ? argv[3] : "/tmp";
	if (reps < 1 || reps > MAX_REPS)
		reps = 5;
	int64_t per_var = (int64_t)((mib << 20) / NVARS / sizeof(float));
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	o.warn = quiet;
	ckpt_checkpoint *ck;
	if (ckpt_checkpoint_new(&ck, &o) != CKPT_OK)
		die("checkpoint");
	ckpt_shape s;
	ckpt_shape_make(&s, 1, &per_var);
	float *src = malloc((size_t)per_var * sizeof(float));
	if (!src)
		return 1;
	for (int64_t i = 0; i < per_var; i++)
		src[i] = (float)i;
	for (int i = 0; i < NVARS; i++) {
		char name[32];
		snprintf(name, sizeof(name), "v%d", i);
		ckpt_variable *v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), name, name, CKPT_DT_FLOAT, &s, NULL);
		if (!v || ckpt_variable_assign(v, src, (size_t)per_var * sizeof(float)) != CKPT_OK)
			die("variable");
	}
	char both[512], mem[512], sto[512];
	snprintf(both, sizeof(both), "%s/tier-persist-both-%d", scratch, (int)getpid());
	snprintf(mem, sizeof(mem), "%s/tier-persist-mem-%d", scratch, (int)getpid());
	snprintf(sto, sizeof(sto), "%s/tier-persist-files-%d", scratch, (int)getpid());
	double c_both, c_mem, c_sto;
	double t_both = saves(ck, both, 1, 1, reps, &c_both);
	double t_mem = saves(ck, mem, 1, 1 << 30, reps, &c_mem);
	double t_sto = saves(ck, sto, 0, 0, reps, &c_sto);
	printf("| %zu MiB | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.2f× |\n", mib, t_both * 1e3, c_both * 1e3,
		t_mem * 1e3, t_sto * 1e3, t_both / t_mem);
	printf("(columns: both tiers: save blocks | then its copy to the directory | memory only | storage only | "
		"both / memory only; the directories under %s are left for the caller to remove)\n", scratch);
	ckpt_checkpoint_free(ck);
	free(src);
	return 0;
}

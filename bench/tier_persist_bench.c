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
#include "tier_model.h"

#define MAX_REPS 64

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
		double t0 = tm_now();
		if (!ckpt_manager_save(m))
			die("save");
		double t1 = tm_now();
		if (ckpt_manager_wait(m) != CKPT_OK)
			die("copy to storage");
		t[r] = t1 - t0;
		w[r] = tm_now() - t1;
	}
	ckpt_manager_free(m);
	ckpt_tier_drop(NULL, "tier-persist-bench");
	*copy = tm_median(w, reps);
	return tm_median(t, reps);
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
	ckpt_checkpoint *ck = NULL;
	ckpt_variable *vars[NVARS];
	const char *failed = tm_state(&ck, vars, per_var);
	if (failed)
		die(failed);
	float *src = malloc((size_t)per_var * sizeof(float));
	if (!src)
		return 1;
	for (int64_t i = 0; i < per_var; i++)
		src[i] = (float)i;
	for (int i = 0; i < NVARS; i++)
		if (ckpt_variable_assign(vars[i], src, (size_t)per_var * sizeof(float)) != CKPT_OK)
			die("variable");
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

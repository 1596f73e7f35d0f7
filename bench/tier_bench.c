/*
 * The memory tier, one process (issue 32): per-step blocking time of a memory
 * save against a plain memcpy of the same bytes, and a restore from the
 * memory tier against the same restore from a checkpoint in a local
 * directory (page cache warm: both read memory, so the difference is the
 * tier's own cost), each by a fresh manager's ckpt_manager_restore_latest
 * as a restarted job does it (the manager's start-up is outside the timing).
 * Medians of REPS, in one run.
 *
 *     tier_bench MIB [REPS] [SCRATCH] [SCRATCH2]
 *
 * prints one markdown row. The tier directory is $CKPT_TIER_DIR (default
 * /dev/shm/ckpt-<uid>); the checkpoint directory SCRATCH (default /tmp).
 * A second line: the training loop's slowdown when every step saves to
 * memory (a step here is the cheapest a trainer has: one update pass that
 * writes every parameter once, so this is an upper bound), the bytes the
 * tier holds on the node between saves, and with SCRATCH2 (for example an
 * s3:// prefix) the restore from a checkpoint there, in the same run.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "tier_model.h"

static void die(const char *what)
{
	char e[1024];
	fprintf(stderr, "tier_bench: %s: %s\n", what, ckpt_error_format(NULL, e, sizeof(e)));
	exit(1);
}

static ckpt_checkpoint *state(ckpt_variable **vars, int64_t per_var)
{
	ckpt_checkpoint *ck = NULL;
	const char *failed = tm_state(&ck, vars, per_var);
	if (failed)
		die(failed);
	return ck;
}

static ckpt_manager *manager(ckpt_checkpoint *ck, const char *dir, int memory)
{
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.no_fsync = 1;
	if (memory) {
		mo.memory_every = 1;
		mo.persist_every = 1 << 30;
		mo.memory_job = "tier-bench";
	}
	ckpt_manager *m;
	if (ckpt_manager_new_ext(&m, ck, dir, 1, &mo) != CKPT_OK)
		die("manager");
	return m;
}

/* Bytes of the regular files under `dir`, two levels (a job directory: segments and spares). */
static unsigned long long tier_bytes(const char *dir, int depth)
{
	unsigned long long sum = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		struct stat st;
		if (lstat(p, &st) != 0)
			continue;
		if (S_ISREG(st.st_mode))
			sum += (unsigned long long)st.st_size;
		else if (S_ISDIR(st.st_mode) && depth > 0)
			sum += tier_bytes(p, depth - 1);
	}
	if (d)
		closedir(d);
	return sum;
}

/* One training step of the cheapest kind: every parameter written once (an update pass). */
static void update_pass(ckpt_variable **vars, const float *g, int64_t per_var)
{
	for (int i = 0; i < NVARS; i++)
		if (ckpt_variable_assign(vars[i], g, (size_t)per_var * sizeof(float)) != CKPT_OK)
			die("update");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: tier_bench MIB [REPS] [SCRATCH]\n");
		return 2;
	}
	size_t mib = (size_t)atol(argv[1]);
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	const char *scratch = argc > 3 ? argv[3] : "/tmp", *scratch2 = argc > 4 ? argv[4] : NULL;
	size_t bytes = mib << 20;
	int64_t per_var = (int64_t)(bytes / NVARS / sizeof(float));
	char mdir[512], fdir[512];
	snprintf(mdir, sizeof(mdir), "%s/tier-bench-mem-%d", scratch, (int)getpid());
	snprintf(fdir, sizeof(fdir), "%s/tier-bench-files-%d", scratch, (int)getpid());

	ckpt_variable *vars[NVARS];
	ckpt_checkpoint *ck = state(vars, per_var);
	float *src = malloc(bytes), *dst = malloc(bytes);
	for (size_t i = 0; i < bytes / sizeof(float); i++)
		src[i] = (float)i;
	for (int i = 0; i < NVARS; i++)
		ckpt_variable_assign(vars[i], src + (size_t)i * (size_t)per_var, (size_t)per_var * sizeof(float));
	double *t = calloc((size_t)reps, sizeof(double));

	/* memcpy floor: the same bytes, destination touched once before */
	memcpy(dst, src, bytes);
	for (int r = 0; r < reps; r++) {
		double t0 = tm_now();
		memcpy(dst, src, bytes);
		t[r] = tm_now() - t0;
	}
	double t_memcpy = tm_median(t, reps);
	/* given back before the tiers fill memory: a 4 GiB state then fits a 24 GiB machine (state, committed
	 * step, spares, the restored state and its staging) */
	free(src);
	free(dst);
	src = dst = NULL;

	/* memory saves: the trainer blocks for this */
	ckpt_manager *m = manager(ck, mdir, 1);
	if (!ckpt_manager_save(m))
		die("warm-up save");
	for (int r = 0; r < reps; r++) {
		double t0 = tm_now();
		if (!ckpt_manager_save(m))
			die("memory save");
		t[r] = tm_now() - t0;
	}
	double t_save = tm_median(t, reps);

	/* the training loop: steps alone, then steps that each end with a memory save */
	float *g = calloc((size_t)per_var, sizeof(float));
	if (!g)
		die("gradient buffer");
	double t_step, t_step_save;
	for (int r = 0; r < reps; r++) {
		double t0 = tm_now();
		update_pass(vars, g, per_var);
		t[r] = tm_now() - t0;
	}
	t_step = tm_median(t, reps);
	for (int r = 0; r < reps; r++) {
		double t0 = tm_now();
		update_pass(vars, g, per_var);
		if (!ckpt_manager_save(m))
			die("memory save in the loop");
		t[r] = tm_now() - t0;
	}
	t_step_save = tm_median(t, reps);
	free(g);
	char jobdir[4096];
	const char *tdir = getenv(CKPT_TIER_DIR_ENV);
	if (tdir && *tdir)
		snprintf(jobdir, sizeof(jobdir), "%s/tier-bench", tdir);
	else
		snprintf(jobdir, sizeof(jobdir), "/dev/shm/ckpt-%u/tier-bench", (unsigned)getuid());
	unsigned long long held = tier_bytes(jobdir, 1);
	int64_t step = ckpt_checkpoint_save_counter(ck);
	ckpt_manager *mf = manager(ck, fdir, 0);
	if (!ckpt_manager_save(mf))
		die("file save");
	ckpt_manager_free(mf);
	char f2dir[1024] = "";
	if (scratch2) {
		snprintf(f2dir, sizeof(f2dir), "%s/tier-bench-files-%d", scratch2, (int)getpid());
		mf = manager(ck, f2dir, 0);
		if (!ckpt_manager_save(mf))
			die("file save to SCRATCH2");
		ckpt_manager_free(mf);
	}
	ckpt_manager_free(m); /* the directories' locks: the restores open managers of their own, as a restarted job */

	/* restores into a second state: from memory (a fresh manager each time, as a restarted job) and from files */
	ckpt_variable *rv[NVARS];
	ckpt_checkpoint *rk = state(rv, per_var);
	double tm[64], tf[64], tf2[64];
	int n = reps < 64 ? reps : 64;
	for (int r = 0; r < n; r++) {
		ckpt_manager *rm = manager(rk, mdir, 1);
		const char *failed = tm_timed_restore(&tm[r], rm, CKPT_TIER_MEMORY);
		if (failed)
			die(failed);
		if (ckpt_checkpoint_save_counter(rk) != step)
			die("restore did not come from memory");
		/* the segment is kept: this manager's free sees it newer than the directory */
		ckpt_manager_free(rm);
		rm = manager(rk, fdir, 0);
		if ((failed = tm_timed_restore(&tf[r], rm, CKPT_TIER_STORAGE)))
			die(failed);
		ckpt_manager_free(rm);
		if (scratch2) {
			rm = manager(rk, f2dir, 0);
			if ((failed = tm_timed_restore(&tf2[r], rm, CKPT_TIER_STORAGE)))
				die(failed);
			ckpt_manager_free(rm);
		}
	}
	double t_rmem = tm_median(tm, n), t_rfile = tm_median(tf, n);
	ckpt_tier_drop(NULL, "tier-bench");
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", mdir, fdir);
	if (system(cmd) != 0)
		fprintf(stderr, "tier_bench: could not remove %s and %s\n", mdir, fdir);
	printf("| %zu MiB | %.4f s | %.4f s | %.2f× | %.4f s | %.4f s | %.2f× | %.2f× |\n", mib, t_memcpy, t_save,
		t_save / t_memcpy, t_rmem, t_rfile, t_rfile / t_rmem, t_rmem / t_memcpy);
	printf("# %zu MiB: update step %.4f s, step + memory save %.4f s: loop %.2f× slower; the tier holds %.1f MiB "
	       "between saves (%.2f× the state)", mib, t_step, t_step_save, t_step_save / t_step, (double)held / 1048576.0,
		(double)held / (double)bytes);
	if (scratch2)
		printf("; restore from %s %.4f s (%.2f× the memory restore)", scratch2, tm_median(tf2, n),
			tm_median(tf2, n) / t_rmem);
	printf("\n");
	ckpt_checkpoint_free(rk);
	ckpt_checkpoint_free(ck);
	free(t);
	return 0;
}

/*
 * Incremental multi-worker saves against full ones (issue 33, point 5):
 *   mpirun -np W incr_bench_mpi DIR [MIB]
 * The state of incr_bench (about MIB MiB, default 128): a frozen base (75 %
 * of the bytes, 24 variables), a trainable part (1 %, 4 variables) and an
 * embedding of 1 KiB rows (24 %), mirrored on every worker (one replica
 * each). Per scenario two managers, on DIR/full-S and DIR/incr-S
 * (max_to_keep 3, fsync on), save the same steps, one save of each in turn
 * (the order alternates each step): two warm-up saves, then the median of
 * 9, and the median of each step's ratio (its two saves ran next to each
 * other). Scenarios: frozen+trainable (5 % of the rows changed, one contiguous
 * run) and all-changed. Reported: bytes each worker wrote through its
 * process (ckpt_checkpoint_last_save_bytes; full: its data file's size) and
 * the wall time of a save (from a barrier to the slowest worker's return).
 * In-process, warm page cache.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <mpi.h>
#include "ckpt/ckpt.h"
#include "ckpt/mpi.h"

#define NBASE 24
#define NTRAIN 4
#define ROW 256 /* floats: 1 KiB rows */
#define REPS 9

static int rank, size;

static void die(const char *what)
{
	fprintf(stderr, "worker %d: %s: %s\n", rank, what, ckpt_error_last()->message);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

typedef struct st {
	ckpt_checkpoint *ck;
	ckpt_manager *m;
	ckpt_variable *base[NBASE], *train[NTRAIN], *emb;
	int64_t emb_rows;
	float *scratch;
} st;

static void build(st *s, ckpt_strategy *strat, const char *dir, uint64_t mib, int incremental)
{
	memset(s, 0, sizeof(*s));
	if (ckpt_checkpoint_new(&s->ck, NULL) < 0)
		die("checkpoint");
	ckpt_object *root = ckpt_checkpoint_root(s->ck);
	uint64_t total = mib << 20;
	int64_t bd[2] = { (int64_t)(total * 75 / 100 / NBASE / 4096), 1024 };
	int64_t td[2] = { (int64_t)(total / 100 / NTRAIN / 4096), 1024 };
	s->emb_rows = (int64_t)(total * 24 / 100 / (ROW * 4));
	int64_t ed[2] = { s->emb_rows, ROW };
	ckpt_shape bs, ts, es;
	ckpt_shape_make(&bs, 2, bd);
	ckpt_shape_make(&ts, 2, td);
	ckpt_shape_make(&es, 2, ed);
	s->scratch = malloc((size_t)(s->emb_rows * ROW) * sizeof(float));
	if (ckpt_scope_enter(strat) < 0)
		die("scope");
	char name[32];
	for (int i = 0; i < NBASE; i++) {
		snprintf(name, sizeof(name), "base%d", i);
		for (int64_t k = 0; k < bd[0] * bd[1]; k++)
			s->scratch[k] = (float)(k + i);
		ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
		vo.initial_value = s->scratch;
		if (ckpt_status_of(s->base[i] = ckpt_object_add_variable(root, name, name, CKPT_DT_FLOAT, &bs, &vo)) < 0)
			die(name);
	}
	for (int i = 0; i < NTRAIN; i++) {
		snprintf(name, sizeof(name), "train%d", i);
		if (ckpt_status_of(s->train[i] = ckpt_object_add_variable(root, name, name, CKPT_DT_FLOAT, &ts, NULL)) < 0)
			die(name);
	}
	if (ckpt_status_of(s->emb = ckpt_object_add_variable(root, "emb", "emb", CKPT_DT_FLOAT, &es, NULL)) < 0)
		die("emb");
	if (ckpt_scope_exit(strat) < 0)
		die("scope");
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.incremental = incremental;
	if (ckpt_manager_new_ext(&s->m, s->ck, dir, 3, &mo) < 0)
		die("manager");
}

/* Add k to every element of v (a cross-replica assign: the same on every worker). */
static void touch(st *s, ckpt_variable *v, int k)
{
	size_t n = (size_t)ckpt_variable_nbytes(v) / 4;
	if (ckpt_variable_read(v, s->scratch, n * 4) < 0)
		die("read");
	for (size_t i = 0; i < n; i++)
		s->scratch[i] += (float)k;
	if (ckpt_variable_assign(v, s->scratch, n * 4) < 0)
		die("assign");
}

static void step(st *s, int k, int all)
{
	for (int i = 0; i < NTRAIN; i++)
		touch(s, s->train[i], k);
	if (all) {
		for (int i = 0; i < NBASE; i++)
			touch(s, s->base[i], k);
		touch(s, s->emb, k);
		return;
	}
	/* one run of 5 % of the rows, at a place that moves */
	size_t n = (size_t)ckpt_variable_nbytes(s->emb) / 4;
	if (ckpt_variable_read(s->emb, s->scratch, n * 4) < 0)
		die("read");
	int64_t nrows = s->emb_rows / 20, first = (int64_t)((uint64_t)k * 7919u % (uint64_t)(s->emb_rows - nrows));
	for (int64_t r = first; r < first + nrows; r++)
		for (int j = 0; j < ROW; j++)
			s->scratch[r * ROW + j] += 1.0f;
	if (ckpt_variable_assign(s->emb, s->scratch, n * 4) < 0)
		die("assign");
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static uint64_t shard_size(const char *prefix)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s.data-%05d-of-%05d", prefix, rank, size);
	struct stat sb;
	return stat(p, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static void run(ckpt_strategy *strat, const char *dir, uint64_t mib, int all, const char *label)
{
	st s[2];
	for (int incr = 0; incr < 2; incr++) {
		char d[4096];
		snprintf(d, sizeof(d), "%s/%s-%d", dir, incr ? "incr" : "full", all);
		build(&s[incr], strat, d, mib, incr);
	}
	double t[2][REPS];
	uint64_t bytes[2] = { 0, 0 }, total = 0;
	for (int k = 0; k < REPS + 2; k++) {
		for (int j = 0; j < 2; j++) {
			int incr = (k + j) % 2; /* alternate which goes first */
			step(&s[incr], k + 1, all);
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			const char *p = ckpt_manager_save(s[incr].m);
			if (!p)
				die("save");
			double dt = MPI_Wtime() - t0, slowest;
			MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
			if (k >= 2)
				t[incr][k - 2] = slowest;
			uint64_t wr = 0, ru = 0, mine = shard_size(p);
			ckpt_checkpoint_last_save_bytes(&wr, &ru, s[incr].ck);
			bytes[incr] = incr ? wr : mine;
			total = mine;
		}
	}
	/* each step's two saves ran next to each other: the median of their ratios */
	double ratio[REPS];
	for (int k = 0; k < REPS; k++)
		ratio[k] = t[1][k] / t[0][k];
	qsort(ratio, REPS, sizeof(double), cmp_d);
	qsort(t[0], REPS, sizeof(double), cmp_d);
	qsort(t[1], REPS, sizeof(double), cmp_d);
	/* per worker: its shard, written full / incremental */
	uint64_t mineall[3] = { total, bytes[0], bytes[1] };
	uint64_t *g = malloc(3 * (size_t)size * sizeof(uint64_t));
	MPI_Gather(mineall, 3, MPI_UINT64_T, g, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		uint64_t sum[3] = { 0, 0, 0 };
		for (int w = 0; w < size; w++)
			for (int i = 0; i < 3; i++)
				sum[i] += g[3 * w + i];
		printf("| %s | %d | %.1f |", label, size, (double)sum[0] / 1048576.0);
		for (int w = 0; w < size; w++)
			printf(" %.2f / %.2f%s", (double)g[3 * w + 1] / 1048576.0, (double)g[3 * w + 2] / 1048576.0,
				w + 1 < size ? ";" : "");
		printf(" | %.1fx | %.3f | %.3f | %.2fx | %.2fx |\n", (double)sum[1] / (double)(sum[2] ? sum[2] : 1),
			t[0][REPS / 2], t[1][REPS / 2], t[1][REPS / 2] / t[0][REPS / 2], ratio[REPS / 2]);
		fflush(stdout);
	}
	free(g);
	for (int incr = 0; incr < 2; incr++) {
		ckpt_manager_free(s[incr].m);
		ckpt_checkpoint_free(s[incr].ck);
		free(s[incr].scratch);
	}
}

int main(int argc, char **argv)
{
	int prov;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 2) {
		fprintf(stderr, "usage: mpirun -np W incr_bench_mpi DIR [MIB]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	uint64_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 128;
	ckpt_strategy *strat;
	if (ckpt_strategy_multi_worker_new(&strat, MPI_COMM_WORLD, 1) < 0)
		die("strategy");
	if (rank == 0) {
		printf("| scenario | workers | checkpoint MiB | MiB through each worker, full / incremental | fewer bytes | "
			"full save s | incremental save s | time ratio | median of step ratios |\n|---|---|---|---|---|---|---|---|---|\n");
		fflush(stdout);
	}
	run(strat, argv[1], mib, 0, "frozen base + trainable + 5 % rows (contiguous)");
	run(strat, argv[1], mib, 1, "everything changed");
	ckpt_strategy_free(strat);
	MPI_Finalize();
	return 0;
}

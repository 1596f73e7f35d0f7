/*
 * Incremental saves against full saves of the same state (issue 33):
 *   incr_bench DIR [MIB]
 * A fine-tune-like state of about MIB MiB (default 256): a frozen base (75 %
 * of the bytes, 24 variables), a trainable part (1 %, 4 variables) and an
 * embedding of 1 KiB rows (24 %). Per scenario, two managers on DIR/full and
 * DIR/incr (max_to_keep 3, fsync on) save the same sequence of steps, one save
 * of each in turn, the order alternating each step: two warm-up saves, then
 * INCR_BENCH_REPS timed ones (default 5; the median). INCR_BENCH_ONLY=S runs
 * scenario S alone (0, 1, 2 below). Scenarios:
 *   frozen+trainable  base frozen, trainable and 5 % of the rows changed (one contiguous run)
 *   rows-random       the same, 5 % of the rows at random
 *   all-changed       every value changed every step
 * Reported per save: the medians' ratio, and the median of each step's
 * ratio (its two saves ran next to each other); bytes through the process (ckpt_checkpoint_last_save_bytes;
 * full: the data files' size), bytes the file system received (not hard-linked:
 * written + kernel copies), wall time. In-process, warm page cache.
 * Then copy_file_range against read+write of 256 MiB in DIR and in /dev/shm.
 *
 * DIR may be s3://bucket/prefix (fsync has no meaning there): then the
 * columns are the bytes uploaded (full: the data objects' size) and the
 * bytes the server copied (CopyObject, UploadPartCopy), and no copy rates.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include "ckpt/ckpt.h"

#define NBASE 24
#define NTRAIN 4
#define ROW 256 /* floats: 1 KiB rows */

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng = 12345;
static uint64_t rnd(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return rng >> 33;
}

typedef struct st {
	ckpt_checkpoint *ck;
	ckpt_manager *m;
	ckpt_variable *base[NBASE], *train[NTRAIN], *emb;
	int64_t emb_rows;
} st;

static void die(const char *what)
{
	fprintf(stderr, "%s: %s\n", what, ckpt_error_last()->message);
	exit(1);
}

static void build(st *s, const char *dir, uint64_t mib, int incremental)
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
	char name[32];
	for (int i = 0; i < NBASE; i++) {
		snprintf(name, sizeof(name), "base%d", i);
		if (ckpt_status_of(s->base[i] = ckpt_object_add_variable(root, name, name, CKPT_DT_FLOAT, &bs, NULL)) < 0)
			die(name);
		float *p = ckpt_variable_local(s->base[i]);
		for (int64_t k = 0; k < bd[0] * bd[1]; k++)
			p[k] = (float)(k + i);
	}
	for (int i = 0; i < NTRAIN; i++) {
		snprintf(name, sizeof(name), "train%d", i);
		if (ckpt_status_of(s->train[i] = ckpt_object_add_variable(root, name, name, CKPT_DT_FLOAT, &ts, NULL)) < 0)
			die(name);
	}
	if (ckpt_status_of(s->emb = ckpt_object_add_variable(root, "emb", "emb", CKPT_DT_FLOAT, &es, NULL)) < 0)
		die("emb");
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.incremental = incremental;
	if (ckpt_manager_new_ext(&s->m, s->ck, dir, 3, &mo) < 0)
		die("manager");
}

static void touch(ckpt_variable *v, int k)
{
	float *p = ckpt_variable_local(v);
	uint64_t n = ckpt_variable_nbytes(v) / 4;
	for (uint64_t i = 0; i < n; i += 1)
		p[i] += (float)k;
}

static void step(st *s, int k, int scenario)
{
	for (int i = 0; i < NTRAIN; i++)
		touch(s->train[i], k);
	if (scenario == 2)
		for (int i = 0; i < NBASE; i++)
			touch(s->base[i], k);
	float *e = ckpt_variable_local(s->emb);
	int64_t nrows = s->emb_rows / 20, first = (int64_t)(rnd() % (uint64_t)(s->emb_rows - nrows));
	for (int64_t r = 0; r < (scenario == 2 ? s->emb_rows : nrows); r++) {
		int64_t row = scenario == 2 ? r : scenario == 1 ? (int64_t)(rnd() % (uint64_t)s->emb_rows) : first + r;
		for (int j = 0; j < ROW; j++)
			e[row * ROW + j] += 1.0f;
	}
}

/* Data bytes of checkpoint `prefix`, and those in files another checkpoint links too. */
static void data_bytes(const char *prefix, uint64_t *total, uint64_t *linked)
{
	*total = *linked = 0;
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", prefix);
	char *slash = strrchr(dir, '/');
	*slash = '\0';
	char pat[512];
	snprintf(pat, sizeof(pat), "%s.data-", slash + 1);
	DIR *d = opendir(dir);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, pat, strlen(pat)) != 0)
			continue;
		char p[8192];
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		struct stat sb;
		if (stat(p, &sb) != 0)
			continue;
		*total += (uint64_t)sb.st_size;
		if (sb.st_nlink > 1)
			*linked += (uint64_t)sb.st_size;
	}
	closedir(d);
}

/* s3://: the data objects' size, through the reader (no directory to scan). */
static uint64_t data_bytes_s3(const char *prefix)
{
	ckpt_reader *r;
	uint64_t total = 0;
	if (ckpt_reader_open(&r, prefix, NULL) < 0)
		die(prefix);
	for (int i = 0; i < ckpt_reader_num_shards(r); i++) {
		int ex = 0;
		const char *sp = ckpt_reader_shard_path(r, i, &ex);
		ckpt_io *io;
		uint64_t n = 0;
		if (ckpt_vfs_open(&io, ckpt_vfs_for_path(NULL, sp), sp, CKPT_IO_READ) < 0 || ckpt_io_size(&n, io) < 0)
			die(sp);
		ckpt_io_close(io);
		total += n;
	}
	ckpt_reader_free(r);
	return total;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void run(const char *dir, uint64_t mib, int scenario, const char *label)
{
	/* INCR_BENCH_REPS timed saves of each (default 5), after two warm-up saves */
	int reps = getenv("INCR_BENCH_REPS") ? atoi(getenv("INCR_BENCH_REPS")) : 5;
	if (reps < 1)
		reps = 1;
	double *t[2] = { calloc((size_t)reps, sizeof(double)), calloc((size_t)reps, sizeof(double)) };
	double t_med[2];
	uint64_t proc[2], fs[2], total = 0;
	st s[2];
	uint64_t seed[2];
	for (int incr = 0; incr < 2; incr++) {
		char d[4096];
		snprintf(d, sizeof(d), "%s/%s-%d", dir, incr ? "incr" : "full", scenario);
		build(&s[incr], d, mib, incr);
		seed[incr] = 12345;
	}
	/* the same steps for both; one save of each in turn, the order alternating each step */
	for (int k = 0; k < reps + 2; k++) {
		for (int j = 0; j < 2; j++) {
			int incr = (k + j) % 2;
			rng = seed[incr];
			step(&s[incr], k + 1, scenario);
			seed[incr] = rng;
			double t0 = now();
			const char *p = ckpt_manager_save(s[incr].m);
			double t1 = now();
			if (!p)
				die("save");
			if (k >= 2)
				t[incr][k - 2] = t1 - t0;
			uint64_t tot, lk, wr, ru;
			ckpt_checkpoint_last_save_bytes(&wr, &ru, s[incr].ck);
			if (ckpt_path_is_s3(p)) {
				tot = data_bytes_s3(p);
				lk = tot - ru; /* the column: what the server copied */
			} else {
				data_bytes(p, &tot, &lk);
			}
			total = tot;
			proc[incr] = incr ? wr : tot;
			fs[incr] = tot - lk;
		}
	}
	/* the ratio of each step's two saves, taken next to each other: the load of a shared machine mostly cancels */
	double *ratio = calloc((size_t)reps, sizeof(double));
	for (int k = 0; k < reps; k++)
		ratio[k] = t[1][k] / t[0][k];
	qsort(ratio, (size_t)reps, sizeof(double), cmp_d);
	double r_med = ratio[reps / 2];
	free(ratio);
	for (int incr = 0; incr < 2; incr++) {
		qsort(t[incr], (size_t)reps, sizeof(double), cmp_d);
		t_med[incr] = t[incr][reps / 2];
		ckpt_manager_free(s[incr].m);
		ckpt_checkpoint_free(s[incr].ck);
		free(t[incr]);
	}
	printf("| %s | %.1f | %.2f | %.2f | %.1fx | %.2f | %.3f | %.3f | %.2fx | %.2fx |\n", label,
		(double)total / 1048576.0, (double)proc[0] / 1048576.0, (double)proc[1] / 1048576.0,
		(double)proc[0] / (double)(proc[1] ? proc[1] : 1), (double)fs[1] / 1048576.0, t_med[0], t_med[1],
		t_med[1] / t_med[0], r_med);
	fflush(stdout);
}

/* copy_file_range against pread+pwrite of n bytes from one file to another in dir. */
static void copy_rate(const char *dir, uint64_t n)
{
	char a[4096], b[4096];
	snprintf(a, sizeof(a), "%s/copy-src", dir);
	snprintf(b, sizeof(b), "%s/copy-dst", dir);
	int fa = open(a, O_RDWR | O_CREAT | O_TRUNC, 0644);
	char *buf = malloc(1 << 20);
	memset(buf, 7, 1 << 20);
	for (uint64_t o = 0; o < n; o += 1 << 20)
		if (pwrite(fa, buf, 1 << 20, (off_t)o) != 1 << 20)
			exit(1);
	fsync(fa);
	double best[2] = { 1e9, 1e9 };
	for (int rep = 0; rep < 3; rep++)
		for (int how = 0; how < 2; how++) {
			int fb = open(b, O_RDWR | O_CREAT | O_TRUNC, 0644);
			double t0 = now();
			off_t so = 0, dof = 0;
			if (how == 0) {
				while ((uint64_t)so < n)
					if (copy_file_range(fa, &so, fb, &dof, (size_t)(n - (uint64_t)so), 0) <= 0)
						exit(1);
			} else {
				for (uint64_t o = 0; o < n; o += 1 << 20)
					if (pread(fa, buf, 1 << 20, (off_t)o) != 1 << 20 || pwrite(fb, buf, 1 << 20, (off_t)o) != 1 << 20)
						exit(1);
			}
			fsync(fb);
			double t = now() - t0;
			if (t < best[how])
				best[how] = t;
			close(fb);
		}
	printf("| %s | %llu | %.3f | %.3f |\n", dir, (unsigned long long)(n >> 20), best[0], best[1]);
	close(fa);
	unlink(a);
	unlink(b);
	free(buf);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: incr_bench DIR [MIB]\n");
		return 2;
	}
	uint64_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 256;
	if (ckpt_path_is_s3(argv[1])) {
		printf("| scenario | checkpoint MiB | full: MiB uploaded | incremental: MiB uploaded | fewer bytes "
			"| incremental: MiB the server copied | full save s | incremental save s | time ratio | median of step ratios |\n");
		printf("|---|---|---|---|---|---|---|---|---|---|\n");
		run(argv[1], mib, 0, "frozen base + trainable + 5 % rows (contiguous)");
		run(argv[1], mib, 1, "frozen base + trainable + 5 % rows (random)");
		run(argv[1], mib, 2, "everything changed");
		return 0;
	}
	printf("| scenario | checkpoint MiB | full: MiB through process | incremental: MiB through process | fewer bytes "
		"| incremental: MiB the file system received | full save s | incremental save s | time ratio "
		"| median of step ratios |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|\n");
	/* INCR_BENCH_ONLY=2: the "everything changed" row alone */
	int only = getenv("INCR_BENCH_ONLY") ? atoi(getenv("INCR_BENCH_ONLY")) : -1;
	static const char *const label[3] = { "frozen base + trainable + 5 % rows (contiguous)",
		"frozen base + trainable + 5 % rows (random)", "everything changed" };
	for (int sc = 0; sc < 3; sc++)
		if (only < 0 || only == sc)
			run(argv[1], mib, sc, label[sc]);
	if (only >= 0)
		return 0;
	printf("\n| directory | MiB | copy_file_range + fsync s | read + write + fsync s |\n|---|---|---|---|\n");
	copy_rate(argv[1], 256ull << 20);
	copy_rate("/dev/shm", 256ull << 20);
	return 0;
}

/*
 * llm.c's GPT-2 124M state (issue 34, points 3 and 9): the 16 parameter
 * tensors at offsets of one float buffer, AdamW's m and v in two more of the
 * same layout (ckpt/layout.h), 1.49 GB in all, as train_gpt2.c keeps them.
 *
 *     llmc_bench save DIR                 write DIR/gpt2-1 (tf-bundle)
 *     llmc_bench restore-first DIR        restore, then allocate m and v and
 *                                         create their slots (restored on
 *                                         create): the README's order
 *     llmc_bench slots-first DIR          every buffer and slot first, then restore
 *     llmc_bench speed DIR [REPS [aligned]]
 *                                         restore into the trainer's buffers
 *                                         (verified first, and in one pass:
 *                                         restore_single_pass) beside a plain
 *                                         fread of the same bytes, in turn,
 *                                         medians of REPS
 *
 * restore-first and slots-first print the seconds and the process's peak
 * RSS (getrusage), one process each; speed prints one markdown row: the
 * wall-clock medians and ratios, then the CPU seconds (all threads) of
 * fread / restore / single-pass restore. The page cache is warm in every
 * mode after the first read of the file. "aligned": every buffer, the
 * fread one included, page-aligned instead of malloc's.
 */
#define _POSIX_C_SOURCE 200809L
#define _ISOC11_SOURCE /* aligned_alloc */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include "ckpt/ckpt.h"

/* GPT-2 124M as llm.c lays it out: Vp = 50304 (padded), maxT = 1024, C = 768, L = 12 */
#define VP 50304
#define MAXT 1024
#define C 768
#define L 12
enum { NT = 16 };

static ckpt_buffer_field layout[NT];
static size_t nparams;

static void make_layout(void)
{
	static const char *const names[NT] = { "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
		"ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb" };
	const int64_t dims[NT][3] = {
		{ VP, C, 0 }, { MAXT, C, 0 }, { L, C, 0 }, { L, C, 0 }, { L, 3 * C, C }, { L, 3 * C, 0 },
		{ L, C, C }, { L, C, 0 }, { L, C, 0 }, { L, C, 0 }, { L, 4 * C, C }, { L, 4 * C, 0 },
		{ L, C, 4 * C }, { L, C, 0 }, { C, 0, 0 }, { C, 0, 0 },
	};
	size_t off = 0;
	for (int i = 0; i < NT; i++) {
		ckpt_shape sh = { 0 };
		size_t n = 1;
		for (int d = 0; d < 3 && dims[i][d]; d++) {
			sh.dims[sh.rank++] = dims[i][d];
			n *= (size_t)dims[i][d];
		}
		layout[i] = (ckpt_buffer_field){ names[i], CKPT_DT_FLOAT, sh, off * sizeof(float) };
		off += n;
	}
	nparams = off;
}

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

static void die(const char *what)
{
	char e[1024];
	fprintf(stderr, "llmc_bench: %s: %s\n", what, ckpt_error_format(NULL, e, sizeof(e)));
	exit(1);
}

/* CPU seconds of the process (every thread, user + system): less at the mercy of other jobs than wall time */
static double cpu(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec +
		(double)u.ru_stime.tv_usec / 1e6;
}

static double peak_rss_mb(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (double)u.ru_maxrss / 1024.0; /* KiB on Linux */
}

/*
 * The trainer's allocations: malloc as llm.c (16 bytes past a page: the
 * kernel copies from the page cache into it about 1.5x slower on this VM),
 * or page-aligned with "aligned" (the fread buffer follows the same rule).
 */
static int aligned;

static void *alloc(size_t n, int zero)
{
	void *p = aligned ? aligned_alloc(4096, (n + 4095) / 4096 * 4096) : zero ? calloc(n, 1) : malloc(n);
	if (p && zero && aligned)
		memset(p, 0, n);
	return p;
}

static float *touched(size_t n, float base)
{
	float *p = alloc(n * sizeof(float), 0);
	if (!p)
		die("malloc");
	for (size_t i = 0; i < n; i++)
		p[i] = base + (float)(i & 1023) * 1e-3f;
	return p;
}

typedef struct trainer {
	ckpt_checkpoint *ck;
	ckpt_object *model, *opt;
	float *params, *m, *v;
} trainer;

/* The model's parameters (the trainer initialized them) and an empty AdamW. */
static void build(trainer *t, int single_pass)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	o.restore_single_pass = single_pass;
	memset(t, 0, sizeof(*t));
	t->params = touched(nparams, 0.5f);
	if (ckpt_checkpoint_new(&t->ck, &o) != CKPT_OK ||
	    !(t->model = ckpt_object_new_child(ckpt_checkpoint_root(t->ck), "model")) ||
	    ckpt_object_add_buffer_variables(t->model, t->params, nparams * sizeof(float), layout, NT) != CKPT_OK ||
	    ckpt_optimizer_new(&t->opt, "AdamW") != CKPT_OK || ckpt_checkpoint_add(t->ck, "optimizer", t->opt) != CKPT_OK)
		die("build");
}

/* llm.c allocates m and v at its first update (calloc: untouched until written). */
static void create_slots(trainer *t)
{
	t->m = alloc(nparams * sizeof(float), 1);
	t->v = alloc(nparams * sizeof(float), 1);
	if (!t->m || !t->v)
		die("calloc");
	if (ckpt_optimizer_create_buffer_slots(t->opt, t->model, "m", t->m, nparams * sizeof(float), layout, NT) !=
		    CKPT_OK ||
	    ckpt_optimizer_create_buffer_slots(t->opt, t->model, "v", t->v, nparams * sizeof(float), layout, NT) != CKPT_OK)
		die("create slots");
}

static void trainer_free(trainer *t)
{
	ckpt_checkpoint_free(t->ck);
	free(t->params);
	free(t->m);
	free(t->v);
}

/* save writes DIR/gpt2-1 (ckpt_checkpoint_save numbers the prefix) */
static char *prefix_of(const char *dir, int saving)
{
	char *p = malloc(strlen(dir) + 16);
	sprintf(p, "%s/gpt2%s", dir, saving ? "" : "-1");
	return p;
}

/* The status is freed after the slots exist (it warns about values left unused). */
static double restore(trainer *t, const char *prefix, ckpt_restore_status **st)
{
	double t0 = now();
	if (ckpt_checkpoint_restore(st, t->ck, prefix) != CKPT_OK)
		die("restore");
	return now() - t0;
}

/* A plain fread of the data file into a buffer of its size the trainer already touched. */
static double plain_read(const char *data, unsigned char *buf, size_t n)
{
	double t0 = now();
	FILE *f = fopen(data, "rb");
	if (!f || fread(buf, 1, n, f) != n) {
		fprintf(stderr, "llmc_bench: fread of %s failed\n", data);
		exit(1);
	}
	fclose(f);
	return now() - t0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: llmc_bench save|restore-first|slots-first|speed DIR [REPS [aligned]]\n");
		return 2;
	}
	aligned = argc > 4 && strcmp(argv[4], "aligned") == 0;
	make_layout();
	const char *mode = argv[1];
	char *prefix = prefix_of(argv[2], strcmp(mode, "save") == 0);
	trainer t;
	build(&t, 0);
	if (strcmp(mode, "save") == 0) {
		create_slots(&t);
		for (size_t i = 0; i < nparams; i++) {
			t.m[i] = (float)(i & 4095) * 1e-4f;
			t.v[i] = (float)(i & 2047) * 1e-6f;
		}
		if (!ckpt_checkpoint_save(t.ck, prefix))
			die("save");
		printf("saved %s: %zu parameters, %.2f GB with m and v\n", prefix, nparams,
			3.0 * (double)nparams * sizeof(float) / 1e9);
	} else if (strcmp(mode, "restore-first") == 0 || strcmp(mode, "slots-first") == 0) {
		int first = strcmp(mode, "restore-first") == 0;
		double t0 = now();
		ckpt_restore_status *st = NULL;
		if (!first)
			create_slots(&t);
		restore(&t, prefix, &st);
		if (first)
			create_slots(&t);
		double dt = now() - t0;
		if (ckpt_restore_status_assert_consumed(st) != CKPT_OK)
			die("restore status");
		ckpt_restore_status_free(st);
		/* the slots hold the stored values */
		if (t.m[4097] != (float)(4097 & 4095) * 1e-4f || t.v[nparams - 1] != (float)((nparams - 1) & 2047) * 1e-6f)
			die("wrong values");
		printf("| %s | %.3f s | %.0f MB |\n", first ? "restore, then create the slots (restored on create)" :
			"create the slots, then restore", dt, peak_rss_mb());
	} else if (strcmp(mode, "speed") == 0) {
		int reps = argc > 3 ? atoi(argv[3]) : 5;
		trainer u; /* the same, restored in one pass (restore_single_pass) */
		build(&u, 1);
		create_slots(&t);
		create_slots(&u);
		/* the trainer has touched its buffers (llm.c's first update) */
		memset(t.m, 0, nparams * sizeof(float));
		memset(t.v, 0, nparams * sizeof(float));
		memset(u.m, 0, nparams * sizeof(float));
		memset(u.v, 0, nparams * sizeof(float));
		char *data = malloc(strlen(prefix) + 32);
		sprintf(data, "%s.data-00000-of-00001", prefix);
		FILE *f = fopen(data, "rb");
		if (!f || fseek(f, 0, SEEK_END) != 0)
			die("data file");
		size_t n = (size_t)ftell(f);
		fclose(f);
		unsigned char *buf = alloc(n, 0);
		memset(buf, 1, n);
		double *tr = calloc((size_t)reps, sizeof(double)), *tf = calloc((size_t)reps, sizeof(double));
		double *t1 = calloc((size_t)reps, sizeof(double));
		double *cr = calloc((size_t)reps, sizeof(double)), *cf = calloc((size_t)reps, sizeof(double));
		double *c1 = calloc((size_t)reps, sizeof(double));
		restore(&t, prefix, NULL); /* warm-up: the page cache holds the file */
		restore(&u, prefix, NULL);
		plain_read(data, buf, n);
		for (int k = 0; k < reps; k++) {
			double c0 = cpu();
			tf[k] = plain_read(data, buf, n);
			cf[k] = cpu() - c0;
			c0 = cpu();
			tr[k] = restore(&t, prefix, NULL);
			cr[k] = cpu() - c0;
			c0 = cpu();
			t1[k] = restore(&u, prefix, NULL);
			c1[k] = cpu() - c0;
		}
		qsort(tr, (size_t)reps, sizeof(double), cmp_d);
		qsort(tf, (size_t)reps, sizeof(double), cmp_d);
		qsort(t1, (size_t)reps, sizeof(double), cmp_d);
		qsort(cr, (size_t)reps, sizeof(double), cmp_d);
		qsort(cf, (size_t)reps, sizeof(double), cmp_d);
		qsort(c1, (size_t)reps, sizeof(double), cmp_d);
		double r = tr[reps / 2], p = tf[reps / 2], q = t1[reps / 2];
		printf("| %.2f GB | %.3f s | %.3f s | %.2fx | %.3f s | %.2fx | %.3f / %.3f / %.3f s |\n", (double)n / 1e9, p,
			r, r / p, q, q / p, cf[reps / 2], cr[reps / 2], c1[reps / 2]);
		free(cr);
		free(cf);
		free(c1);
		if (u.m[4097] != (float)(4097 & 4095) * 1e-4f || u.v[nparams - 1] != (float)((nparams - 1) & 2047) * 1e-6f)
			die("wrong values");
		trainer_free(&u);
		free(t1);
		free(buf);
		free(data);
		free(tr);
		free(tf);
	} else {
		fprintf(stderr, "llmc_bench: unknown mode %s\n", mode);
		return 2;
	}
	trainer_free(&t);
	free(prefix);
	return 0;
}

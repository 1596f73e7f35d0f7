/*
 * ckpt_bench — save / restore benchmarks of libckpt against the machine's
 * limits, measured in the same run (bench/run.sh adds the Python peers and
 * writes bench/RESULTS.md).
 *
 * Method (why it is built this way):
 *  - The parent builds each state once in a huge-page arena (pre-faulted, as a
 *    trainer's live parameters are) and never enters an OpenMP region: GNU
 *    libgomp is not fork-safe, and every operation runs in a forked child.
 *  - One child per repetition: the child does its untimed set-up, times the
 *    operation, and sends the figures back through a pipe; the parent reads
 *    the child's peak RSS with wait4(), so RSS is per operation. Restore
 *    children do not inherit the state (MADV_DONTFORK), save children do (a
 *    trainer saving holds its state).
 *  - Restore inputs are read through right before each repetition (the guest
 *    kernel drops file pages untouched for ~1 minute) and their residency is
 *    checked with mincore(): the figures are for cached files.
 *  - "Trainer buffers" (restore destinations, limit buffers) are huge-page
 *    arenas pre-faulted before timing; restore into fresh memory is separate.
 *
 * Output: a line per figure on stderr, and a JSON array (--json FILE) that
 * bench/report.py turns into tables.
 */
#define _GNU_SOURCE
#include <ckpt/ckpt.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#define CHUNK (8u << 20)          /* I/O chunk of the limit measurements */
#define HUGE_ALIGN (2u << 20)
#define MAX_VALS 6
/* what run.sh measures; "all" adds the variants kept for investigation */
#define DEFAULT_OPS "limits,fsync,save,async,keras,restore,fresh,load,mirrored"

/* ------------------------------------------------------------------ */
/* states */

typedef struct bvar {
	char name[192];
	ckpt_dtype dt;
	ckpt_shape shape;
	uint64_t nbytes;
	size_t off;                   /* offset in the arena */
} bvar;

typedef struct bstate {
	const char *name;
	bvar *v;
	size_t n, cap;
	uint64_t bytes;               /* sum of tensor bytes */
	size_t max_nbytes;
	unsigned char *arena;
	size_t arena_len;
	uint32_t crc;                 /* state_crc() of the arena */
	uint64_t *tcrc;               /* per tensor: nbytes << 32 | crc32c, sorted (order-free check) */
} bstate;

typedef struct opts {
	const char *dir;
	const char *json;
	char states[128];
	char ops[512];
	int reps, large_reps;
	int threads;                  /* 0 = all */
	int replicas[8], nreplicas;
	int large_replicas[8], nlarge_replicas;
	int verbose;
} opts;

static uint32_t state_crc(const bstate *s, const unsigned char *base);

static opts O;
static char RUN_DIR[4096];
static FILE *JSON;
static int JSON_FIRST = 1;

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "ckpt_bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

/*
 * Wall time; with CKPT_BENCH_CLOCK=cpu the CPU time of the whole process
 * (every thread) instead, for comparing two builds on a machine that others
 * load (set OMP_WAIT_POLICY=passive then, or spinning threads count).
 */
static double now(void)
{
	static int cpu = -1;
	if (cpu < 0) {
		const char *c = getenv("CKPT_BENCH_CLOCK");
		cpu = c && !strcmp(c, "cpu");
	}
	struct timespec ts;
	clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* An anonymous, 2 MiB-aligned mapping that asks for transparent huge pages. */
static void *huge_alloc(size_t n, int prefault)
{
	size_t len = (n + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
	if (len == 0)
		len = HUGE_ALIGN;
	unsigned char *p = mmap(NULL, len + HUGE_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	/* trim to a 2 MiB boundary so whole huge pages fit */
	uintptr_t a = ((uintptr_t)p + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1);
	size_t head = a - (uintptr_t)p;
	if (head)
		munmap(p, head);
	size_t tail = HUGE_ALIGN - head;
	if (tail)
		munmap((unsigned char *)a + len, tail);
	madvise((void *)a, len, MADV_HUGEPAGE);
	if (prefault)
		memset((void *)a, 0, len);
	return (void *)a;
}

static void huge_free(void *p, size_t n)
{
	size_t len = (n + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
	if (p)
		munmap(p, len ? len : HUGE_ALIGN);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void state_add(bstate *s, const char *name, ckpt_dtype dt, int rank, int64_t d0, int64_t d1)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->v = realloc(s->v, s->cap * sizeof *s->v);
		if (!s->v)
			die("out of memory");
	}
	bvar *v = &s->v[s->n++];
	memset(v, 0, sizeof *v);
	snprintf(v->name, sizeof v->name, "%s", name);
	v->dt = dt;
	int64_t dims[2] = { d0, d1 };
	ckpt_shape_make(&v->shape, rank, dims);
	uint64_t ne = 1;
	for (int i = 0; i < rank; i++)
		ne *= (uint64_t)dims[i];
	v->nbytes = ne * ckpt_dtype_size(dt);
	s->bytes += v->nbytes;
	if (v->nbytes > s->max_nbytes)
		s->max_nbytes = v->nbytes;
}

/* A weight plus its Adam m and v slots, under TensorFlow's key naming. */
static void add_adam_weight(bstate *s, const char *obj, int rank, int64_t d0, int64_t d1)
{
	char k[192];
	snprintf(k, sizeof k, "%s/.ATTRIBUTES/VARIABLE_VALUE", obj);
	state_add(s, k, CKPT_DT_FLOAT, rank, d0, d1);
	snprintf(k, sizeof k, "%s/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE", obj);
	state_add(s, k, CKPT_DT_FLOAT, rank, d0, d1);
	snprintf(k, sizeof k, "%s/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE", obj);
	state_add(s, k, CKPT_DT_FLOAT, rank, d0, d1);
}

static void add_bert_layer(bstate *s, int l)
{
	static const char *att[4] = { "query", "key", "value", "output" };
	char o[96];
	for (int i = 0; i < 4; i++) {
		snprintf(o, sizeof o, "model/layer-%d/attention/%s/kernel", l, att[i]);
		add_adam_weight(s, o, 2, 768, 768);
		snprintf(o, sizeof o, "model/layer-%d/attention/%s/bias", l, att[i]);
		add_adam_weight(s, o, 1, 768, 0);
	}
	snprintf(o, sizeof o, "model/layer-%d/intermediate/kernel", l);
	add_adam_weight(s, o, 2, 768, 3072);
	snprintf(o, sizeof o, "model/layer-%d/intermediate/bias", l);
	add_adam_weight(s, o, 1, 3072, 0);
	snprintf(o, sizeof o, "model/layer-%d/output/kernel", l);
	add_adam_weight(s, o, 2, 3072, 768);
	snprintf(o, sizeof o, "model/layer-%d/output/bias", l);
	add_adam_weight(s, o, 1, 768, 0);
	for (int i = 0; i < 2; i++) {
		snprintf(o, sizeof o, "model/layer-%d/layer_norm-%d/gamma", l, i);
		add_adam_weight(s, o, 1, 768, 0);
		snprintf(o, sizeof o, "model/layer-%d/layer_norm-%d/beta", l, i);
		add_adam_weight(s, o, 1, 768, 0);
	}
}

static void build_state(bstate *s, const char *name)
{
	memset(s, 0, sizeof *s);
	s->name = name;
	if (!strcmp(name, "small")) {
		/* the sample MLP 8 -> 16 -> 1 with Adam and a mean metric */
		add_adam_weight(s, "model/layer_with_weights-0/kernel", 2, 8, 16);
		add_adam_weight(s, "model/layer_with_weights-0/bias", 1, 16, 0);
		add_adam_weight(s, "model/layer_with_weights-1/kernel", 2, 16, 1);
		add_adam_weight(s, "model/layer_with_weights-1/bias", 1, 1, 0);
		state_add(s, "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_INT64, 0, 0, 0);
		state_add(s, "optimizer/learning_rate/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_FLOAT, 0, 0, 0);
		state_add(s, "metrics/0/total/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_FLOAT, 0, 0, 0);
		state_add(s, "metrics/0/count/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_FLOAT, 0, 0, 0);
	} else if (!strcmp(name, "medium")) {
		/* 4 BERT-base layers + Adam m, v: 192 tensors, 340 MB */
		for (int l = 0; l < 4; l++)
			add_bert_layer(s, l);
		state_add(s, "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_INT64, 0, 0, 0);
	} else if (!strcmp(name, "large")) {
		/* 133 weights cycling BERT shapes + m, v + iter: 400 tensors, 2.1 GB */
		static const int64_t shp[4][2] = { { 768, 3072 }, { 3072, 768 }, { 768, 768 }, { 768, 0 } };
		char o[96];
		for (int i = 0; i < 133; i++) {
			const int64_t *d = shp[i % 4];
			snprintf(o, sizeof o, "model/block-%d/w-%d", i / 4, i % 4);
			add_adam_weight(s, o, d[1] ? 2 : 1, d[0], d[1]);
		}
		state_add(s, "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_INT64, 0, 0, 0);
	} else if (!strcmp(name, "tiny")) {
		/* many-tiny: 10,000 tensors of 16 floats */
		char k[96];
		for (int i = 0; i < 10000; i++) {
			snprintf(k, sizeof k, "model/tiny-%05d/.ATTRIBUTES/VARIABLE_VALUE", i);
			state_add(s, k, CKPT_DT_FLOAT, 1, 16, 0);
		}
	} else {
		die("unknown state '%s' (small, medium, large, tiny)", name);
	}
	/* lay out: 64-byte aligned tensors in one huge-page arena */
	size_t off = 0;
	for (size_t i = 0; i < s->n; i++) {
		s->v[i].off = off;
		off += (s->v[i].nbytes + 63) & ~(size_t)63;
	}
	s->arena_len = off;
	s->arena = huge_alloc(off, 0);
	if (!s->arena)
		die("cannot map %zu bytes for state %s", off, name);
	/* deterministic, incompressible values in [-1, 1); iter = 1000 */
	for (size_t i = 0; i < s->n; i++) {
		bvar *v = &s->v[i];
		unsigned char *p = s->arena + v->off;
		if (v->dt == CKPT_DT_INT64) {
			int64_t it = 1000;
			memcpy(p, &it, sizeof it);
			continue;
		}
		uint64_t x = 0x9E3779B97F4A7C15ull * (i + 1);
		float *f = (float *)p;
		size_t ne = v->nbytes / 4;
		for (size_t j = 0; j < ne; j++) {
			x ^= x >> 12;
			x ^= x << 25;
			x ^= x >> 27;
			int32_t r = (int32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
			f[j] = (float)r * (1.0f / 2147483648.0f);
		}
	}
	s->crc = state_crc(s, s->arena);
	s->tcrc = malloc(s->n * sizeof *s->tcrc);
	for (size_t i = 0; i < s->n; i++)
		s->tcrc[i] = s->v[i].nbytes << 32 | ckpt_crc32c_extend(0, s->arena + s->v[i].off, s->v[i].nbytes);
	qsort(s->tcrc, s->n, sizeof *s->tcrc, cmp_u64);
}

static void state_free(bstate *s)
{
	huge_free(s->arena, s->arena_len);
	free(s->v);
	free(s->tcrc);
}

/* ------------------------------------------------------------------ */
/* files */

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb, (void)flag, (void)f;
	return remove(p);
}

static void rm_rf(const char *path)
{
	nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void mkdir_p(const char *path)
{
	char buf[4096];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p == '/') {
			*p = 0;
			mkdir(buf, 0755);
			*p = '/';
		}
	}
	if (mkdir(buf, 0755) && errno != EEXIST)
		die("cannot create %s: %s", buf, strerror(errno));
}

/* Read every file of `dir` through (re-caching it); return the fraction of pages resident before. */
static double warm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	static unsigned char *buf;
	if (!buf)
		buf = malloc(CHUNK);
	uint64_t pages = 0, resident = 0;
	long pg = sysconf(_SC_PAGESIZE);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p[4352];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		int fd = open(p, O_RDONLY);
		if (fd < 0)
			continue;
		struct stat st;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
			void *m = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
			if (m != MAP_FAILED) {
				size_t np = (st.st_size + pg - 1) / pg;
				unsigned char *vec = malloc(np);
				if (vec && mincore(m, st.st_size, vec) == 0)
					for (size_t i = 0; i < np; i++)
						resident += vec[i] & 1;
				pages += np;
				free(vec);
				munmap(m, st.st_size);
			}
			while (read(fd, buf, CHUNK) > 0) {
			}
		}
		close(fd);
	}
	closedir(d);
	return pages ? (double)resident / pages : 1.0;
}

/* ------------------------------------------------------------------ */
/* forked operations */

typedef struct op_result {
	int status;                   /* 0 ok, <0 failed (note says why), 1 skipped */
	int nvals;
	double vals[MAX_VALS];        /* seconds */
	long rss_start_kb;
	char note[480];
} op_result;

typedef struct op_ctx {
	const bstate *s;
	const char *input;            /* restore input prefix / file */
	const char *input_dir;
	const char *format;
	int replicas;
	int threads;
	int flag;                     /* op-specific */
	int rep;
} op_ctx;

typedef void (*op_fn)(const op_ctx *c, op_result *r);

static long rss_now_kb(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long size = 0, res = 0;
	if (f) {
		if (fscanf(f, "%ld %ld", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void fail(op_result *r, const char *what)
{
	const ckpt_error *e = ckpt_error_last();
	char buf[400];
	r->status = -1;
	snprintf(r->note, sizeof r->note, "%s: %s %s", what, ckpt_status_name(e->code),
		ckpt_error_format(e, buf, sizeof buf));
}

static void mark_dontfork(const bstate *s, int on)
{
	size_t len = (s->arena_len + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
	madvise(s->arena, len ? len : HUGE_ALIGN, on ? MADV_DONTFORK : MADV_DOFORK);
}

typedef struct figure {
	char name[64];
	double t[64];
	int n;
} figure;

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(const double *t, int n)
{
	double s[64];
	memcpy(s, t, n * sizeof *t);
	qsort(s, n, sizeof *s, cmp_d);
	return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/*
 * Run `fn` `reps` times, each in a fresh child; `names` names the values the
 * op reports (one JSON record each). `restore_dir` non-NULL: warm it and check
 * residency before each rep. `needs_state` 0: the child does not inherit it.
 */
static void run_op(const char *kind, const char *op, const char *variant, const op_ctx *c0, op_fn fn,
	int reps, const char *const *names, int needs_state, const char *restore_dir, uint64_t bytes)
{
	figure fig[MAX_VALS];
	int nnames = 0;
	while (names[nnames])
		nnames++;
	memset(fig, 0, sizeof fig);
	long peak_kb = 0, start_kb = 0;
	double min_res = 1.0;
	char note[480] = "";
	int status = 0;
	for (int rep = 0; rep < reps && status == 0; rep++) {
		if (restore_dir) {
			warm_dir(restore_dir);
			double res = warm_dir(restore_dir);
			if (res < min_res)
				min_res = res;
		}
		int pfd[2];
		if (pipe(pfd))
			die("pipe: %s", strerror(errno));
		if (!needs_state)
			mark_dontfork(c0->s, 1);
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0)
			die("fork: %s", strerror(errno));
		if (pid == 0) {
			close(pfd[0]);
			op_result r;
			memset(&r, 0, sizeof r);
			op_ctx c = *c0;
			c.rep = rep;
			if (c.threads > 0)
				omp_set_num_threads(c.threads);
			r.rss_start_kb = rss_now_kb();
			fn(&c, &r);
			ssize_t w = write(pfd[1], &r, sizeof r);
			_exit(w == (ssize_t)sizeof r ? 0 : 3);
		}
		close(pfd[1]);
		if (!needs_state)
			mark_dontfork(c0->s, 0);
		op_result r;
		memset(&r, 0, sizeof r);
		ssize_t got = read(pfd[0], &r, sizeof r);
		close(pfd[0]);
		int wst = 0;
		struct rusage ru;
		memset(&ru, 0, sizeof ru);
		wait4(pid, &wst, 0, &ru);
		if (got != (ssize_t)sizeof r) {
			status = -1;
			if (WIFSIGNALED(wst))
				snprintf(note, sizeof note, "child killed by signal %d", WTERMSIG(wst));
			else
				snprintf(note, sizeof note, "child exited %d without a result", WEXITSTATUS(wst));
			break;
		}
		if (r.status != 0) {
			status = r.status;
			snprintf(note, sizeof note, "%s", r.note);
			break;
		}
		if (r.note[0])
			snprintf(note, sizeof note, "%s", r.note);
		if (ru.ru_maxrss > peak_kb)
			peak_kb = ru.ru_maxrss;
		if (r.rss_start_kb > start_kb)
			start_kb = r.rss_start_kb;
		for (int k = 0; k < nnames && k < r.nvals; k++)
			fig[k].t[fig[k].n++] = r.vals[k];
	}
	for (int k = 0; k < nnames; k++) {
		figure *f = &fig[k];
		char full[160];
		if (names[k][0])
			snprintf(full, sizeof full, "%s%s%s", op, "/", names[k]);
		else
			snprintf(full, sizeof full, "%s", op);
		double med = 0, mn = 0, mx = 0;
		if (f->n) {
			med = median(f->t, f->n);
			mn = mx = f->t[0];
			for (int i = 1; i < f->n; i++) {
				if (f->t[i] < mn)
					mn = f->t[i];
				if (f->t[i] > mx)
					mx = f->t[i];
			}
		}
		if (status == 0 && f->n)
			fprintf(stderr, "%-7s %-8s %-28s %-14s %9.4f s [%0.4f-%0.4f] %7.2f GB/s  peak %6.0f MiB (start %6.0f)%s%s\n",
				kind, c0->s->name, full, variant, med, mn, mx, med > 0 ? bytes / med / 1e9 : 0,
				peak_kb / 1024.0, start_kb / 1024.0, note[0] ? "  note: " : "", note);
		else
			fprintf(stderr, "%-7s %-8s %-28s %-14s %s: %s\n", kind, c0->s->name, full, variant,
				status > 0 ? "skipped" : "FAILED", note);
		if (!JSON)
			continue;
		fprintf(JSON, "%s\n{\"tool\":\"ckpt\",\"kind\":", JSON_FIRST ? "" : ",");
		JSON_FIRST = 0;
		json_str(JSON, kind);
		fprintf(JSON, ",\"state\":");
		json_str(JSON, c0->s->name);
		fprintf(JSON, ",\"op\":");
		json_str(JSON, full);
		fprintf(JSON, ",\"variant\":");
		json_str(JSON, variant);
		fprintf(JSON, ",\"bytes\":%llu,\"ntensors\":%zu,\"threads\":%d,\"replicas\":%d,\"status\":%d,"
			"\"reps\":%d,\"median\":%.9g,\"min\":%.9g,\"max\":%.9g,\"times\":[",
			(unsigned long long)bytes, c0->s->n, c0->threads > 0 ? c0->threads : omp_get_num_procs(),
			c0->replicas, status, f->n, med, mn, mx);
		for (int i = 0; i < f->n; i++)
			fprintf(JSON, "%s%.9g", i ? "," : "", f->t[i]);
		fprintf(JSON, "],\"rss_peak_kb\":%ld,\"rss_start_kb\":%ld,\"cached\":%.4f,\"note\":", peak_kb, start_kb,
			restore_dir ? min_res : -1.0);
		json_str(JSON, note);
		fprintf(JSON, "}");
		fflush(JSON);
	}
}

/* ---- limits ---- */

static void op_memcpy(const op_ctx *c, op_result *r)
{
	const bstate *s = c->s;
	unsigned char *dst = huge_alloc(s->arena_len, 1);
	if (!dst) {
		r->status = -1;
		snprintf(r->note, sizeof r->note, "out of memory");
		return;
	}
	double t0 = now();
	if (c->flag == 1) {
		memcpy(dst, s->arena, s->arena_len);
	} else {
		/* all threads: contiguous slices, one per thread */
		size_t n = s->arena_len;
		#pragma omp parallel
		{
			int nt = omp_get_num_threads(), id = omp_get_thread_num();
			size_t a = n / nt * id, b = id == nt - 1 ? n : n / nt * (id + 1);
			memcpy(dst + a, s->arena + a, b - a);
		}
	}
	r->vals[r->nvals++] = now() - t0;
	huge_free(dst, s->arena_len);
}

static void op_write(const op_ctx *c, op_result *r)
{
	const bstate *s = c->s;
	char p[4352];
	snprintf(p, sizeof p, "%s/limit-write-%d", RUN_DIR, c->rep);
	unlink(p);
	double t0 = now();
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	for (size_t off = 0; fd >= 0 && off < s->bytes;) {
		size_t n = s->bytes - off < CHUNK ? s->bytes - off : CHUNK;
		ssize_t w = write(fd, s->arena + off, n);
		if (w <= 0) {
			r->status = -1;
			snprintf(r->note, sizeof r->note, "write: %s", strerror(errno));
			break;
		}
		off += (size_t)w;
	}
	if (c->flag)
		fsync(fd);
	close(fd);
	r->vals[r->nvals++] = now() - t0;
	unlink(p);
}

/* flag 0: into a pre-faulted buffer; 1: into fresh malloc'ed memory */
static void op_read(const op_ctx *c, op_result *r)
{
	const bstate *s = c->s;
	unsigned char *dst = c->flag ? NULL : huge_alloc(s->bytes, 1);
	double t0 = now();
	if (c->flag)
		dst = malloc(s->bytes);
	int fd = open(c->input, O_RDONLY);
	for (size_t off = 0; fd >= 0 && dst && off < s->bytes;) {
		size_t n = s->bytes - off < CHUNK ? s->bytes - off : CHUNK;
		ssize_t got = read(fd, dst + off, n);
		if (got <= 0)
			break;
		off += (size_t)got;
	}
	close(fd);
	r->vals[r->nvals++] = now() - t0;
	if (c->flag)
		free(dst);
	else
		huge_free(dst, s->bytes);
}

static void op_crc(const op_ctx *c, op_result *r)
{
	const bstate *s = c->s;
	const size_t piece = 64u << 20;
	volatile uint32_t sink = 0;
	double t0 = now();
	if (c->flag == 1) {
		uint32_t crc = 0;
		for (size_t off = 0; off < s->bytes; off += piece)
			crc = ckpt_crc32c_extend(crc, s->arena + off, s->bytes - off < piece ? s->bytes - off : piece);
		sink = crc;
	} else {
		size_t n = s->bytes;
		#pragma omp parallel
		{
			int nt = omp_get_num_threads(), id = omp_get_thread_num();
			size_t a = n / nt * id, b = id == nt - 1 ? n : n / nt * (id + 1);
			uint32_t crc = 0;
			for (size_t off = a; off < b; off += piece)
				crc = ckpt_crc32c_extend(crc, s->arena + off, b - off < piece ? b - off : piece);
			#pragma omp atomic
			sink ^= crc;
		}
	}
	r->vals[r->nvals++] = now() - t0;
	(void)sink;
}

/* ---- save ---- */

static int write_state(const bstate *s, const char *path, const char *format, int no_fsync, op_result *r)
{
	ckpt_writer *w = NULL;
	ckpt_write_options wo = CKPT_WRITE_OPTIONS_INIT;
	wo.no_fsync = no_fsync;
	int rc = ckpt_writer_open(&w, path, format, &wo);
	if (rc < 0) {
		fail(r, "ckpt_writer_open");
		if (rc == CKPT_EUNSUPPORTED || rc == CKPT_EINVAL)
			r->status = 1;
		return rc;
	}
	for (size_t i = 0; i < s->n; i++) {
		const bvar *v = &s->v[i];
		ckpt_tensor *t = NULL;
		if ((rc = ckpt_tensor_wrap(&t, v->dt, &v->shape, s->arena + v->off, v->nbytes)) < 0) {
			fail(r, "ckpt_tensor_wrap");
			ckpt_writer_free(w);
			return rc;
		}
		rc = ckpt_writer_add(w, v->name, t, 0);
		ckpt_tensor_free(t);
		if (rc < 0) {
			fail(r, "ckpt_writer_add");
			ckpt_writer_free(w);
			return rc;
		}
	}
	if ((rc = ckpt_writer_commit(w)) < 0)
		fail(r, "ckpt_writer_commit");
	ckpt_writer_free(w);
	return rc;
}

static void op_save(const op_ctx *c, op_result *r)
{
	char d[4352], p[4400];
	snprintf(d, sizeof d, "%s/save-%d", RUN_DIR, c->rep);
	mkdir_p(d);
	snprintf(p, sizeof p, "%s/ckpt%s", d, strcmp(c->format, "tf-bundle") ? ".weights.h5" : "");
	double t0 = now();
	int rc = write_state(c->s, p, c->format, !c->flag, r);
	double t = now() - t0;
	if (rc >= 0)
		r->vals[r->nvals++] = t;
	rm_rf(d);
}

/* ---- restore ---- */

static ckpt_reader *open_input(const op_ctx *c, int no_verify, op_result *r)
{
	ckpt_reader *rd = NULL;
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	oo.no_verify = no_verify;
	if (ckpt_reader_open(&rd, c->input, &oo) < 0) {
		fail(r, "ckpt_reader_open");
		return NULL;
	}
	return rd;
}

/* Look up every state variable by name and read it into its slot of `dst`. */
static int read_all_into(const op_ctx *c, ckpt_reader *rd, unsigned char *dst, op_result *r)
{
	const bstate *s = c->s;
	for (size_t i = 0; i < s->n; i++) {
		size_t idx;
		if (ckpt_reader_find(rd, s->v[i].name, &idx) < 0) {
			fail(r, "ckpt_reader_find");
			return -1;
		}
		if (ckpt_reader_read_into(rd, idx, dst + s->v[i].off, s->v[i].nbytes) < 0) {
			fail(r, "ckpt_reader_read_into");
			return -1;
		}
	}
	return 0;
}

/* CRC32C of every tensor of a state laid out like the arena (the restore check). */
static uint32_t state_crc(const bstate *s, const unsigned char *base)
{
	uint32_t crc = 0;
	for (size_t i = 0; i < s->n; i++)
		crc = ckpt_crc32c_extend(crc, base + s->v[i].off, s->v[i].nbytes);
	return crc;
}

/* Untimed: the restored bytes must equal the state (the child has no copy of it: compare CRCs). */
static void check_equal(const bstate *s, const unsigned char *got, op_result *r)
{
	if (r->status == 0 && state_crc(s, got) != s->crc) {
		r->status = -1;
		snprintf(r->note, sizeof r->note, "restored bytes differ from the saved state");
	}
}

/* flag: 0 verify, 1 no_verify */
static void op_restore_into(const op_ctx *c, op_result *r)
{
	const bstate *s = c->s;
	unsigned char *dst = huge_alloc(s->arena_len, 1);
	double t0 = now();
	ckpt_reader *rd = open_input(c, c->flag, r);
	if (rd && read_all_into(c, rd, dst, r) == 0)
		r->vals[r->nvals++] = now() - t0;
	ckpt_reader_free(rd);
	check_equal(s, dst, r);
	huge_free(dst, s->arena_len);
}

/*
 * Restore of a file whose keys are not the state's (Keras .weights.h5 maps
 * them to layers/<layer>/vars/<i>): every entry is read into the slot of an
 * unused state tensor of the same size; checked as a multiset of CRCs.
 */
static void op_restore_keyless(const op_ctx *c, op_result *r)
{
	const bstate *s = c->s;
	unsigned char *dst = huge_alloc(s->arena_len, 1);
	size_t *slot = calloc(s->n, sizeof *slot), lo = 0;
	unsigned char *used = calloc(s->n, 1);
	uint64_t *got = calloc(s->n, sizeof *got);
	double t0 = now();
	ckpt_reader *rd = open_input(c, 0, r);
	size_t n = rd ? ckpt_reader_count(rd) : 0;
	if (rd && n != s->n) {
		r->status = -1;
		snprintf(r->note, sizeof r->note, "file has %zu entries, state %zu", n, s->n);
	}
	for (size_t i = 0; rd && r->status == 0 && i < n; i++) {
		const ckpt_var_info *vi = ckpt_reader_var(rd, i);
		while (lo < s->n && used[lo])
			lo++;
		size_t k = lo;
		while (k < s->n && (used[k] || s->v[k].nbytes != vi->nbytes))
			k++;
		if (k == s->n) {
			r->status = -1;
			snprintf(r->note, sizeof r->note, "no state tensor of %llu bytes for %s",
				(unsigned long long)vi->nbytes, vi->name);
			break;
		}
		used[k] = 1;
		slot[i] = k;
		if (ckpt_reader_read_into(rd, i, dst + s->v[k].off, s->v[k].nbytes) < 0)
			fail(r, "ckpt_reader_read_into");
	}
	if (rd && r->status == 0)
		r->vals[r->nvals++] = now() - t0;
	ckpt_reader_free(rd);
	if (r->status == 0) {
		for (size_t i = 0; i < s->n; i++)
			got[i] = s->v[slot[i]].nbytes << 32 | ckpt_crc32c_extend(0, dst + s->v[slot[i]].off, s->v[slot[i]].nbytes);
		qsort(got, s->n, sizeof *got, cmp_u64);
		if (memcmp(got, s->tcrc, s->n * sizeof *got)) {
			r->status = -1;
			snprintf(r->note, sizeof r->note, "restored tensors differ from the saved state");
		}
	}
	free(slot);
	free(used);
	free(got);
	huge_free(dst, s->arena_len);
}

/* into fresh tensors allocated by the library (ckpt_reader_read) */
static void op_restore_fresh(const op_ctx *c, op_result *r)
{
	const bstate *s = c->s;
	ckpt_tensor **t = calloc(s->n, sizeof *t);
	double t0 = now();
	ckpt_reader *rd = open_input(c, 0, r);
	size_t i = 0;
	for (; rd && i < s->n; i++) {
		size_t idx;
		if (ckpt_reader_find(rd, s->v[i].name, &idx) < 0) {
			fail(r, "ckpt_reader_find");
			break;
		}
		if (ckpt_reader_read(rd, idx, &t[i]) < 0) {
			fail(r, "ckpt_reader_read");
			break;
		}
	}
	if (rd && i == s->n)
		r->vals[r->nvals++] = now() - t0;
	ckpt_reader_free(rd);
	if (r->status == 0) {
		uint32_t crc = 0;
		for (size_t j = 0; j < s->n; j++)
			crc = ckpt_crc32c_extend(crc, t[j]->data, t[j]->nbytes);
		if (crc != s->crc) {
			r->status = -1;
			snprintf(r->note, sizeof r->note, "restored bytes differ from the saved state");
		}
	}
	for (size_t j = 0; j < s->n; j++)
		ckpt_tensor_free(t[j]);
	free(t);
}

/*
 * Mirrored restore through the public variable API: variables created in a
 * mirrored scope (flag 0: the library allocates the replicas; flag 1: they
 * wrap trainer-owned pre-faulted buffers), then each tensor is read into a
 * reused staging buffer and assigned to every replica. Reported: create,
 * restore (first, into the replicas as created), restore again (warm).
 */
static void op_mirrored(const op_ctx *c, op_result *r)
{
	const bstate *s = c->s;
	int nr = c->replicas;
	ckpt_strategy *st = NULL;
	ckpt_variable **vars = calloc(s->n, sizeof *vars);
	unsigned char *bufs[64] = { 0 };
	if (ckpt_strategy_mirrored_new(&st, nr) < 0) {
		fail(r, "ckpt_strategy_mirrored_new");
		free(vars);
		return;
	}
	if (c->flag)
		for (int k = 0; k < nr; k++)
			bufs[k] = huge_alloc(s->arena_len, 1);
	double t0 = now();
	ckpt_scope_enter(st);
	size_t made = 0;
	for (; made < s->n; made++) {
		ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
		void *rb[64];
		if (c->flag) {
			for (int k = 0; k < nr; k++)
				rb[k] = bufs[k] + s->v[made].off;
			vo.replica_buffers = rb;
		}
		if (ckpt_variable_new(&vars[made], s->v[made].name, s->v[made].dt, &s->v[made].shape, &vo) < 0) {
			fail(r, "ckpt_variable_new");
			break;
		}
	}
	ckpt_scope_exit(st);
	double t1 = now();
	if (made == s->n) {
		r->vals[r->nvals++] = t1 - t0;
		for (int pass = 0; pass < 2 && r->status == 0; pass++) {
			double a = now();
			ckpt_reader *rd = open_input(c, 0, r);
			unsigned char *stage = rd ? huge_alloc(s->max_nbytes, 0) : NULL;
			for (size_t i = 0; rd && i < s->n; i++) {
				size_t idx;
				if (ckpt_reader_find(rd, s->v[i].name, &idx) < 0) {
					fail(r, "ckpt_reader_find");
					break;
				}
				if (ckpt_reader_read_into(rd, idx, stage, s->v[i].nbytes) < 0) {
					fail(r, "ckpt_reader_read_into");
					break;
				}
				if (ckpt_variable_assign(vars[i], stage, s->v[i].nbytes) < 0) {
					fail(r, "ckpt_variable_assign");
					break;
				}
			}
			ckpt_reader_free(rd);
			huge_free(stage, s->max_nbytes);
			if (r->status == 0)
				r->vals[r->nvals++] = now() - a;
		}
		/* sanity (untimed): the primary holds the state, every replica identical */
		uint32_t crc = 0;
		for (size_t i = 0; r->status == 0 && i < s->n; i++)
			crc = ckpt_crc32c_extend(crc, ckpt_variable_replica_data(vars[i], 0), s->v[i].nbytes);
		if (r->status == 0 && crc != s->crc) {
			r->status = -1;
			snprintf(r->note, sizeof r->note, "restored bytes differ from the saved state");
		}
		for (size_t i = 0; r->status == 0 && i < s->n; i += 1 + s->n / 16)
			if (!ckpt_variable_replicas_identical(vars[i])) {
				r->status = -1;
				snprintf(r->note, sizeof r->note, "replicas of %s differ after restore", s->v[i].name);
			}
	}
	for (size_t i = 0; i < made; i++)
		ckpt_variable_free(vars[i]);
	free(vars);
	ckpt_strategy_free(st);
	for (int k = 0; k < nr; k++)
		huge_free(bufs[k], s->arena_len);
}

/*
 * The blocking part of an async save, measured bench-locally: a copy of every
 * tensor into a staging buffer. flag 0: reused pre-faulted staging buffer,
 * 1 thread; 1: same, all threads; 2: fresh malloc'ed staging memory.
 */
static void op_stage(const op_ctx *c, op_result *r)
{
	const bstate *s = c->s;
	unsigned char *stage = c->flag == 2 ? NULL : huge_alloc(s->arena_len, 1);
	double t0 = now();
	if (c->flag == 2)
		stage = malloc(s->arena_len);
	if (c->flag == 1) {
		long n = (long)s->n;
		#pragma omp parallel for schedule(dynamic, 1)
		for (long i = 0; i < n; i++)
			memcpy(stage + s->v[i].off, s->arena + s->v[i].off, s->v[i].nbytes);
	} else {
		for (size_t i = 0; i < s->n; i++)
			memcpy(stage + s->v[i].off, s->arena + s->v[i].off, s->v[i].nbytes);
	}
	r->vals[r->nvals++] = now() - t0;
	if (c->flag == 2)
		free(stage);
	else
		huge_free(stage, s->arena_len);
}

/* ---- the checkpoint API (object tree, save / restore / load, async) ---- */

typedef struct tree {
	ckpt_checkpoint *ck;
	ckpt_variable **vars;         /* per state variable, borrowed from the tree */
} tree;

static void tree_free(tree *t)
{
	ckpt_checkpoint_free(t->ck);
	free(t->vars);
	memset(t, 0, sizeof *t);
}

/* Object at `path` ("model/layer-0/attention/query") under the root, created on the way. */
static int tree_object(ckpt_object **out, ckpt_object *root, const char *path)
{
	char buf[192];
	snprintf(buf, sizeof buf, "%s", path);
	ckpt_object *cur = root;
	char *save = NULL;
	for (char *seg = strtok_r(buf, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		ckpt_object *next = NULL;
		if (ckpt_object_get_child(&next, cur, seg) < 0 && ckpt_object_new_child(&next, cur, seg) < 0)
			return -1;
		cur = next;
	}
	*out = cur;
	return 0;
}

/*
 * A checkpoint whose keys are the state's names, its variables created
 * through the current strategy. bufs != NULL: the variables wrap
 * `bufs[k] + off` for replica k (trainer-owned, zero copy).
 */
static int tree_build(tree *t, const bstate *s, unsigned char *const *bufs, int nbufs, int no_fsync, op_result *r)
{
	static const char attr_sfx[] = "/.ATTRIBUTES/VARIABLE_VALUE";
	static const char slot_mid[] = "/.OPTIMIZER_SLOT/optimizer/";
	ckpt_checkpoint_options co = CKPT_CHECKPOINT_OPTIONS_INIT;
	co.no_fsync = no_fsync;
	memset(t, 0, sizeof *t);
	t->vars = calloc(s->n, sizeof *t->vars);
	ckpt_object *opt = NULL, *obj = NULL;
	char last_obj[192] = "\x01";
	if (ckpt_checkpoint_new(&t->ck, &co) < 0 || ckpt_optimizer_new(&opt, "Adam") < 0) {
		fail(r, "ckpt_checkpoint_new");
		return -1;
	}
	if (ckpt_checkpoint_add(t->ck, "optimizer", opt) < 0) {
		fail(r, "ckpt_checkpoint_add");
		ckpt_object_free(opt);
		return -1;
	}
	ckpt_object_free(opt); /* the root holds it */
	ckpt_variable *primary = NULL;
	for (size_t i = 0; i < s->n; i++) {
		const bvar *v = &s->v[i];
		ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
		void *rb[64];
		if (bufs) {
			for (int k = 0; k < nbufs; k++)
				rb[k] = bufs[k] + v->off;
			vo.replica_buffers = rb;
		}
		char key[192];
		snprintf(key, sizeof key, "%s", v->name);
		size_t kl = strlen(key), sl = sizeof attr_sfx - 1;
		if (kl <= sl || strcmp(key + kl - sl, attr_sfx))
			die("state key %s does not end in %s", key, attr_sfx);
		key[kl - sl] = 0;
		char *slot = strstr(key, slot_mid);
		int rc;
		if (slot) {
			rc = ckpt_optimizer_create_slot(&t->vars[i], opt, primary, slot + sizeof slot_mid - 1, &vo);
			if (rc < 0) {
				fail(r, "ckpt_optimizer_create_slot");
				return -1;
			}
			continue;
		}
		char *attr = strrchr(key, '/');
		*attr++ = 0;
		if (strcmp(key, last_obj)) {
			if (tree_object(&obj, ckpt_checkpoint_root(t->ck), key) < 0) {
				fail(r, "ckpt_object_new_child");
				return -1;
			}
			snprintf(last_obj, sizeof last_obj, "%s", key);
		}
		char full[sizeof last_obj + 64];
		snprintf(full, sizeof full, "%s/%s", key, attr);
		if (ckpt_object_add_variable(&t->vars[i], obj, attr, full, v->dt, &v->shape, &vo) < 0) {
			fail(r, "ckpt_object_add_variable");
			return -1;
		}
		primary = t->vars[i];
	}
	return 0;
}

/* Untimed: primary copies hold the state, and mirrored copies are identical. */
static void tree_check(const tree *t, const bstate *s, op_result *r)
{
	uint32_t crc = 0;
	for (size_t i = 0; r->status == 0 && i < s->n; i++) {
		crc = ckpt_crc32c_extend(crc, ckpt_variable_replica_data(t->vars[i], 0), s->v[i].nbytes);
		if (i % (1 + s->n / 16) == 0 && !ckpt_variable_replicas_identical(t->vars[i])) {
			r->status = -1;
			snprintf(r->note, sizeof r->note, "replicas of %s differ after restore", s->v[i].name);
		}
	}
	if (r->status == 0 && crc != s->crc) {
		r->status = -1;
		snprintf(r->note, sizeof r->note, "restored bytes differ from the saved state");
	}
}

/* Save through ckpt_checkpoint_write of variables wrapping the live state (flag 1: fsync). */
static void op_ck_save(const op_ctx *c, op_result *r)
{
	char d[4352], p[4400];
	unsigned char *bufs[1] = { c->s->arena };
	tree t;
	snprintf(d, sizeof d, "%s/cksave-%d", RUN_DIR, c->rep);
	mkdir_p(d);
	snprintf(p, sizeof p, "%s/ckpt", d);
	if (tree_build(&t, c->s, bufs, 1, !c->flag, r) == 0) {
		double t0 = now();
		if (ckpt_checkpoint_write(t.ck, p) < 0)
			fail(r, "ckpt_checkpoint_write");
		else
			r->vals[r->nvals++] = now() - t0;
	}
	tree_free(&t);
	rm_rf(d);
}

/*
 * Async save: blocking time of the first save (staging arena grown, or
 * reserved beforehand when c->flag), of a second save (arena reused), and the
 * second save's time until written.
 */
static void op_async(const op_ctx *c, op_result *r)
{
	char d[4352], p[4400];
	unsigned char *bufs[1] = { c->s->arena };
	tree t;
	ckpt_async_saver *as = NULL;
	ckpt_async_options ao = CKPT_ASYNC_OPTIONS_INIT;
	ao.no_fsync = 1;
	snprintf(d, sizeof d, "%s/async-%d", RUN_DIR, c->rep);
	mkdir_p(d);
	if (tree_build(&t, c->s, bufs, 1, 1, r) == 0 && ckpt_async_saver_new(&as, &ao) == 0) {
		double blk[2] = { 0, 0 }, done = 0;
		/* flag 1: the trainer sized the staging area at setup (not timed) */
		if (c->flag && ckpt_async_saver_reserve(as, t.ck) < 0)
			fail(r, "ckpt_async_saver_reserve");
		for (int k = 0; k < 2 && r->status == 0; k++) {
			snprintf(p, sizeof p, "%s/ckpt-%d", d, k + 1);
			double t0 = now();
			if (ckpt_async_save(as, t.ck, p) < 0) {
				fail(r, "ckpt_async_save");
				break;
			}
			blk[k] = now() - t0;
			if (ckpt_async_wait(as) < 0) {
				fail(r, "ckpt_async_wait");
				break;
			}
			done = now() - t0;
		}
		if (r->status == 0) {
			r->vals[r->nvals++] = blk[0];
			r->vals[r->nvals++] = blk[1];
			r->vals[r->nvals++] = done;
		}
	}
	ckpt_async_saver_free(as);
	tree_free(&t);
	rm_rf(d);
}

/*
 * Restore through ckpt_checkpoint_restore into objects created first in a
 * scope of `c->replicas` replicas (1: no scope, plain variables). flag 0:
 * the library allocates the variables; 1: they wrap trainer-owned
 * pre-faulted buffers. Reported: create, restore, restore again (warm).
 */
static void op_ck_restore(const op_ctx *c, op_result *r)
{
	const bstate *s = c->s;
	int nr = c->replicas > 1 ? c->replicas : 1;
	ckpt_strategy *st = NULL;
	unsigned char *bufs[64] = { 0 };
	tree t;
	memset(&t, 0, sizeof t);
	if (nr > 1 && ckpt_strategy_mirrored_new(&st, nr) < 0) {
		fail(r, "ckpt_strategy_mirrored_new");
		return;
	}
	if (c->flag)
		for (int k = 0; k < nr; k++)
			bufs[k] = huge_alloc(s->arena_len, 1);
	double t0 = now();
	if (st)
		ckpt_scope_enter(st);
	int rc = tree_build(&t, s, c->flag ? bufs : NULL, nr, 1, r);
	if (st)
		ckpt_scope_exit(st);
	if (rc == 0) {
		r->vals[r->nvals++] = now() - t0;
		for (int pass = 0; pass < 2 && r->status == 0; pass++) {
			ckpt_restore_status *rs = NULL;
			double a = now();
			if (ckpt_checkpoint_restore(&rs, t.ck, c->input) < 0) {
				fail(r, "ckpt_checkpoint_restore");
			} else {
				r->vals[r->nvals++] = now() - a;
				if (ckpt_restore_status_assert_existing_objects_matched(rs) < 0)
					fail(r, "assert_existing_objects_matched");
			}
			ckpt_restore_status_expect_partial(rs);
			ckpt_restore_status_free(rs);
		}
		tree_check(&t, s, r);
	}
	tree_free(&t);
	ckpt_strategy_free(st);
	for (int k = 0; k < nr; k++)
		huge_free(bufs[k], s->arena_len);
}

static int cmp_tracked(const void *a, const void *b)
{
	return strcmp((*(const ckpt_tracked_variable *const *)a)->key, (*(const ckpt_tracked_variable *const *)b)->key);
}

/* ckpt_checkpoint_load inside a scope of c->replicas replicas (1: no scope). */
static void op_ck_load(const op_ctx *c, op_result *r)
{
	const bstate *s = c->s;
	int nr = c->replicas > 1 ? c->replicas : 1;
	ckpt_strategy *st = NULL;
	ckpt_checkpoint *ck = NULL;
	if (nr > 1 && ckpt_strategy_mirrored_new(&st, nr) < 0) {
		fail(r, "ckpt_strategy_mirrored_new");
		return;
	}
	double t0 = now();
	if (st)
		ckpt_scope_enter(st);
	int rc = ckpt_checkpoint_load(&ck, NULL, c->input, NULL);
	if (st)
		ckpt_scope_exit(st);
	if (rc < 0) {
		fail(r, "ckpt_checkpoint_load");
	} else {
		r->vals[r->nvals++] = now() - t0;
		/* untimed: one snapshot of the tree (find_variable per key would be O(n^2)) */
		tree t = { ck, calloc(s->n, sizeof(ckpt_variable *)) };
		ckpt_tracked_list *l = NULL;
		if (ckpt_checkpoint_variables(&l, ck) < 0) {
			fail(r, "ckpt_checkpoint_variables");
		} else {
			size_t nl = ckpt_tracked_list_count(l);
			const ckpt_tracked_variable **idx = calloc(nl ? nl : 1, sizeof *idx);
			for (size_t i = 0; i < nl; i++)
				idx[i] = ckpt_tracked_list_get(l, i);
			qsort(idx, nl, sizeof *idx, cmp_tracked);
			for (size_t i = 0; r->status == 0 && i < s->n; i++) {
				ckpt_tracked_variable key;
				const ckpt_tracked_variable *kp = &key, **hit;
				key.key = s->v[i].name;
				hit = bsearch(&kp, idx, nl, sizeof *idx, cmp_tracked);
				if (!hit) {
					r->status = -1;
					snprintf(r->note, sizeof r->note, "load: no variable for key %s", s->v[i].name);
				} else if (ckpt_variable_num_replicas((t.vars[i] = (*hit)->variable)) != nr) {
					r->status = -1;
					snprintf(r->note, sizeof r->note, "%s loaded with %d replicas, want %d", s->v[i].name,
						ckpt_variable_num_replicas(t.vars[i]), nr);
				}
			}
			free(idx);
		}
		if (r->status == 0)
			tree_check(&t, s, r);
		ckpt_tracked_list_free(l);
		free(t.vars);
	}
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(st);
}

/* Prepare a restore input (in a child: the library may use OpenMP). */
static void op_prepare(const op_ctx *c, op_result *r)
{
	if (strcmp(c->format, "tf-bundle")) {
		if (write_state(c->s, c->input, c->format, 1, r) >= 0)
			r->vals[r->nvals++] = 0;
		return;
	}
	unsigned char *bufs[1] = { c->s->arena };
	tree t;
	if (tree_build(&t, c->s, bufs, 1, 1, r) == 0) {
		if (ckpt_checkpoint_write(t.ck, c->input) < 0)
			fail(r, "ckpt_checkpoint_write");
		else
			r->vals[r->nvals++] = 0;
	}
	tree_free(&t);
}

/* ------------------------------------------------------------------ */

static int want(const char *list, const char *item)
{
	size_t n = strlen(item);
	for (const char *p = list; (p = strstr(p, item)); p += n)
		if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0))
			return 1;
	return !strcmp(list, "all");
}

static void write_limit_file(const bstate *s, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("cannot create %s: %s", path, strerror(errno));
	for (size_t off = 0; off < s->bytes;) {
		size_t n = s->bytes - off < CHUNK ? s->bytes - off : CHUNK;
		ssize_t w = write(fd, s->arena + off, n);
		if (w <= 0)
			die("write %s: %s", path, strerror(errno));
		off += (size_t)w;
	}
	close(fd);
}

/* A record without figures: a skipped (status 1) or failed (-1) operation. */
static void json_note(const bstate *s, const char *op, const char *variant, int status, const char *why)
{
	fprintf(stderr, "ckpt    %-8s %-28s %-14s %s: %s\n", s->name, op, variant, status > 0 ? "skipped" : "FAILED", why);
	if (!JSON)
		return;
	fprintf(JSON, "%s\n{\"tool\":\"ckpt\",\"kind\":\"ckpt\",\"state\":", JSON_FIRST ? "" : ",");
	JSON_FIRST = 0;
	json_str(JSON, s->name);
	fprintf(JSON, ",\"op\":");
	json_str(JSON, op);
	fprintf(JSON, ",\"variant\":");
	json_str(JSON, variant);
	fprintf(JSON, ",\"bytes\":%llu,\"ntensors\":%zu,\"status\":%d,\"reps\":0,\"note\":", (unsigned long long)s->bytes,
		s->n, status);
	json_str(JSON, why);
	fprintf(JSON, "}");
	fflush(JSON);
}

/* Save a restore input with `fmt` in a child (the library may use OpenMP); 0 when it exists. */
static int prepare_input(op_ctx *c, const char *fmt)
{
	int pfd[2];
	if (pipe(pfd))
		die("pipe: %s", strerror(errno));
	c->format = fmt;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		op_result r;
		memset(&r, 0, sizeof r);
		close(pfd[0]);
		op_prepare(c, &r);
		ssize_t w = write(pfd[1], &r, sizeof r);
		_exit(w == (ssize_t)sizeof r ? 0 : 3);
	}
	close(pfd[1]);
	op_result r;
	memset(&r, 0, sizeof r);
	ssize_t got = read(pfd[0], &r, sizeof r);
	close(pfd[0]);
	waitpid(pid, NULL, 0);
	if (got == (ssize_t)sizeof r && r.status == 0)
		return 0;
	const char *why = got == (ssize_t)sizeof r ? r.note : "child died";
	int st = got == (ssize_t)sizeof r && r.status > 0 ? 1 : -1;
	json_note(c->s, "restore", fmt, st, why);
	return -1;
}

static void bench_state(const char *name)
{
	bstate s;
	double t0 = now();
	build_state(&s, name);
	fprintf(stderr, "# state %s: %zu tensors, %llu bytes (%.1f MB), built in %.2f s\n", name, s.n,
		(unsigned long long)s.bytes, s.bytes / 1e6, now() - t0);
	int large = !strcmp(name, "large");
	int reps = large ? O.large_reps : O.reps;
	const int *rl = large ? O.large_replicas : O.replicas;
	int nrl = large ? O.nlarge_replicas : O.nreplicas;
	op_ctx c;
	memset(&c, 0, sizeof c);
	c.s = &s;
	c.threads = O.threads;
	c.format = "tf-bundle";
	static const char *const one[] = { "", NULL };
	static const char *const crw[] = { "create", "restore", "restore-warm", NULL };
	char dir[4352], path[4400], var[64];
	uint64_t B = s.bytes;

	if (want(O.ops, "limits")) {
		c.flag = 1;
		run_op("limit", "memcpy", "1-thread", &c, op_memcpy, reps, one, 1, NULL, B);
		c.flag = 0;
		run_op("limit", "memcpy", "all-threads", &c, op_memcpy, reps, one, 1, NULL, B);
		c.flag = 0;
		run_op("limit", "write", "page-cache", &c, op_write, reps, one, 1, NULL, B);
		if (want(O.ops, "fsync")) {
			c.flag = 1;
			run_op("limit", "write", "fsync", &c, op_write, reps, one, 1, NULL, B);
		}
		snprintf(dir, sizeof dir, "%s/limit-read", RUN_DIR);
		mkdir_p(dir);
		snprintf(path, sizeof path, "%s/data", dir);
		write_limit_file(&s, path);
		c.input = path;
		c.flag = 0;
		run_op("limit", "read", "cached", &c, op_read, reps, one, 0, dir, B);
		if (want(O.ops, "fresh")) {
			c.flag = 1;
			run_op("limit", "read", "cached-fresh-mem", &c, op_read, reps, one, 0, dir, B);
		}
		rm_rf(dir);
		c.flag = 1;
		run_op("limit", "crc32c", "1-thread", &c, op_crc, reps, one, 1, NULL, B);
		c.flag = 0;
		run_op("limit", "crc32c", "all-threads", &c, op_crc, reps, one, 1, NULL, B);
	}

	/* saves */
	c.format = "tf-bundle";
	c.flag = 0;
	if (want(O.ops, "save")) {
		run_op("ckpt", "save", "writer", &c, op_save, reps, one, 1, NULL, B);
		run_op("ckpt", "save", "checkpoint", &c, op_ck_save, reps, one, 1, NULL, B);
	}
	if (want(O.ops, "fsync")) {
		c.flag = 1;
		run_op("ckpt", "save", "checkpoint-fsync", &c, op_ck_save, reps, one, 1, NULL, B);
	}
	if (want(O.ops, "async")) {
		static const char *const an[] = { "blocking-first", "blocking", "written", NULL };
		c.flag = 0;
		run_op("ckpt", "async-save", "checkpoint", &c, op_async, reps, an, 1, NULL, B);
		c.flag = 1;
		run_op("ckpt", "async-save", "checkpoint-reserved", &c, op_async, reps, an, 1, NULL, B);
	}
	if (want(O.ops, "stage")) {
		c.flag = 0;
		run_op("ckpt", "stage-copy", "reused-1-thread", &c, op_stage, reps, one, 1, NULL, B);
		c.flag = 1;
		run_op("ckpt", "stage-copy", "reused-all-threads", &c, op_stage, reps, one, 1, NULL, B);
	}
	/*
	 * The Keras writer builds the whole file in memory (~4x the state in RSS,
	 * ~0.02 GB/s measured on medium): on the large state that is ~2 min and
	 * ~8 GiB per repetition, so it is measured on the other states only.
	 */
	int keras = want(O.ops, "keras") && !large;
	if (want(O.ops, "keras") && large)
		json_note(&s, "save", "keras-weights", 1, "not run on the large state: the Keras writer holds ~4x the "
			"state in memory and runs at ~0.02 GB/s (see medium)");
	if (keras) {
		c.format = "keras-weights";
		c.flag = 0;
		run_op("ckpt", "save", "keras-weights", &c, op_save, reps, one, 1, NULL, B);
	}

	/* restores of a TensorBundle written by ckpt_checkpoint_write */
	snprintf(dir, sizeof dir, "%s/input", RUN_DIR);
	mkdir_p(dir);
	snprintf(path, sizeof path, "%s/ckpt", dir);
	c.input = path;
	c.input_dir = dir;
	int need = want(O.ops, "restore") || want(O.ops, "fresh") || want(O.ops, "mirrored") || want(O.ops, "load") ||
		want(O.ops, "varapi");
	if (need && prepare_input(&c, "tf-bundle") == 0) {
		if (want(O.ops, "restore")) {
			c.flag = 0;
			run_op("ckpt", "restore", "reader-into", &c, op_restore_into, reps, one, 0, dir, B);
			c.flag = 1;
			run_op("ckpt", "restore", "reader-into-noverify", &c, op_restore_into, reps, one, 0, dir, B);
			c.replicas = 1;
			c.flag = 1;
			run_op("ckpt", "ckrestore", "N=1-wrapped", &c, op_ck_restore, reps, crw, 0, dir, B);
			c.flag = 0;
			run_op("ckpt", "ckrestore", "N=1", &c, op_ck_restore, reps, crw, 0, dir, B);
		}
		if (want(O.ops, "fresh")) {
			c.flag = 0;
			run_op("ckpt", "restore", "reader-fresh", &c, op_restore_fresh, reps, one, 0, dir, B);
		}
		if (want(O.ops, "load")) {
			c.replicas = 1;
			run_op("ckpt", "load", "N=1", &c, op_ck_load, reps, one, 0, dir, B);
		}
		for (int k = 0; k < nrl; k++) {
			c.replicas = rl[k];
			if (want(O.ops, "mirrored")) {
				c.flag = 0;
				snprintf(var, sizeof var, "N=%d", rl[k]);
				run_op("ckpt", "ckrestore", var, &c, op_ck_restore, reps, crw, 0, dir, B);
			}
			if (want(O.ops, "wrap")) {
				c.flag = 1;
				snprintf(var, sizeof var, "N=%d-wrapped", rl[k]);
				run_op("ckpt", "ckrestore", var, &c, op_ck_restore, reps, crw, 0, dir, B);
			}
			if (want(O.ops, "load")) {
				snprintf(var, sizeof var, "N=%d", rl[k]);
				run_op("ckpt", "load", var, &c, op_ck_load, reps, one, 0, dir, B);
			}
			if (want(O.ops, "varapi")) {
				c.flag = 0;
				snprintf(var, sizeof var, "N=%d", rl[k]);
				run_op("ckpt", "varrestore", var, &c, op_mirrored, reps, crw, 0, dir, B);
			}
		}
		c.replicas = 0;
	}
	rm_rf(dir);

	/* Keras weights: restore through the reader */
	if (keras) {
		snprintf(dir, sizeof dir, "%s/input-keras", RUN_DIR);
		mkdir_p(dir);
		snprintf(path, sizeof path, "%s/ckpt.weights.h5", dir);
		c.input = path;
		if (prepare_input(&c, "keras-weights") == 0) {
			c.flag = 0;
			run_op("ckpt", "restore", "keras-reader-into", &c, op_restore_keyless, reps, one, 0, dir, B);
		}
		rm_rf(dir);
		c.format = "tf-bundle";
	}
	state_free(&s);
}

/*
 * --export STATE PATH: write STATE as a TensorFlow checkpoint (object graph,
 * Adam slots) at bundle prefix PATH and exit; the whole-process benchmark
 * (bench/whole_process.py) times the ckpt tool and the limit probe on it.
 */
static int export_state(const char *name, const char *path)
{
	bstate s;
	tree t;
	op_result r;
	unsigned char *bufs[1];

	memset(&r, 0, sizeof r);
	build_state(&s, name);
	bufs[0] = s.arena;
	if (tree_build(&t, &s, bufs, 1, 0, &r) < 0 || ckpt_checkpoint_write(t.ck, path) < 0) {
		fprintf(stderr, "ckpt_bench: export %s to %s failed: %s\n", name, path, ckpt_error_last()->message);
		return 1;
	}
	printf("%zu %llu\n", s.n, (unsigned long long)s.bytes);
	tree_free(&t);
	state_free(&s);
	return 0;
}

/* The state's tensors as a name-based bundle (what TF1's Saver writes: no object graph). */
static int export_name_based(const char *name, const char *path)
{
	bstate s;
	ckpt_writer *w = NULL;
	int rc;

	build_state(&s, name);
	rc = ckpt_writer_open(&w, path, NULL, NULL);
	for (size_t i = 0; rc == CKPT_OK && i < s.n; i++) {
		ckpt_tensor t = { s.v[i].dt, s.v[i].shape, s.v[i].nbytes, s.arena + s.v[i].off, 0 };
		rc = ckpt_writer_add(w, s.v[i].name, &t, 0);
	}
	if (rc == CKPT_OK)
		rc = ckpt_writer_commit(w);
	ckpt_writer_free(w);
	if (rc < 0) {
		fprintf(stderr, "ckpt_bench: export %s to %s failed: %s\n", name, path, ckpt_error_last()->message);
		state_free(&s);
		return 1;
	}
	printf("%zu %llu\n", s.n, (unsigned long long)s.bytes);
	state_free(&s);
	return 0;
}

static int parse_ints(const char *arg, int *out, int max)
{
	int n = 0;
	char buf[128];
	snprintf(buf, sizeof buf, "%s", arg);
	for (char *tok = strtok(buf, ","); tok && n < max; tok = strtok(NULL, ","))
		out[n++] = atoi(tok);
	return n;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: ckpt_bench --export STATE PREFIX\n"
		"       ckpt_bench --export-name-based STATE PREFIX   (no object graph, as TF1's Saver)\n"
		"       ckpt_bench [--dir DIR] [--json FILE] [--states small,medium,large,tiny]\n"
		"                  [--ops " DEFAULT_OPS " | all (adds stage,wrap,varapi)]\n"
		"                  [--reps N] [--large-reps N] [--threads T] [--replicas 2,4,8]\n"
		"                  [--large-replicas 2]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	O.dir = "/tmp/ckpt-bench";
	snprintf(O.states, sizeof O.states, "small,medium,large,tiny");
	snprintf(O.ops, sizeof O.ops, "%s", DEFAULT_OPS);
	O.reps = 5;
	O.large_reps = 5;
	O.nreplicas = parse_ints("2,4,8", O.replicas, 8);
	O.nlarge_replicas = parse_ints("2", O.large_replicas, 8);
	if (argc == 4 && !strcmp(argv[1], "--export"))
		return export_state(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "--export-name-based"))
		return export_name_based(argv[2], argv[3]);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			usage();
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--dir"))
			O.dir = v;
		else if (!strcmp(a, "--json"))
			O.json = v;
		else if (!strcmp(a, "--states"))
			snprintf(O.states, sizeof O.states, "%s", v);
		else if (!strcmp(a, "--ops"))
			snprintf(O.ops, sizeof O.ops, "%s", v);
		else if (!strcmp(a, "--reps"))
			O.reps = atoi(v);
		else if (!strcmp(a, "--large-reps"))
			O.large_reps = atoi(v);
		else if (!strcmp(a, "--threads"))
			O.threads = atoi(v);
		else if (!strcmp(a, "--replicas"))
			O.nreplicas = parse_ints(v, O.replicas, 8);
		else if (!strcmp(a, "--large-replicas"))
			O.nlarge_replicas = parse_ints(v, O.large_replicas, 8);
		else
			usage();
	}
	if (O.reps < 1 || O.reps > 64 || O.large_reps < 1 || O.large_reps > 64)
		die("--reps must be 1..64");
	mkdir_p(O.dir);
	snprintf(RUN_DIR, sizeof RUN_DIR, "%s/run-%d", O.dir, (int)getpid());
	mkdir_p(RUN_DIR);
	if (O.json) {
		JSON = fopen(O.json, "w");
		if (!JSON)
			die("cannot write %s: %s", O.json, strerror(errno));
		fprintf(JSON, "[");
	}
	fprintf(stderr, "# ckpt_bench: libckpt %s, %d CPUs, threads %d, reps %d (large %d), dir %s\n",
		CKPT_VERSION_STRING, omp_get_num_procs(), O.threads ? O.threads : omp_get_num_procs(), O.reps,
		O.large_reps, RUN_DIR);
	char st[128];
	snprintf(st, sizeof st, "%s", O.states);
	char *save = NULL;
	for (char *tok = strtok_r(st, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		bench_state(tok);
	if (JSON) {
		fprintf(JSON, "\n]\n");
		fclose(JSON);
	}
	rm_rf(RUN_DIR);
	rmdir(O.dir); /* only when empty */
	return 0;
}

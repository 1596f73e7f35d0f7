/*
 * The best cold read this machine allows (issue 15), next to what the
 * library does on the same cold files: every row drops the page cache
 * first (`sync; echo 3 > /proc/sys/vm/drop_caches`, root only), then reads
 * every byte of FILES into one fresh huge-page buffer.
 *
 *   stream         one thread, pread of CHUNK at a time (what a plain reader does)
 *   fadvise        the same after posix_fadvise(SEQUENTIAL) + WILLNEED
 *   threads-K      K threads claiming CHUNKs: K reads in flight
 *   direct-K       O_DIRECT (aligned buffer), K threads
 *   uring-QD       io_uring (liburing), QD reads of CHUNK in flight, buffered
 *   uring-direct-QD  the same with O_DIRECT
 *   ckpt-load-R    ckpt_checkpoint_load of PREFIX into mirrored(R) variables,
 *                  in process (what a trainer restarting on a cold cache
 *                  does); also with CKPT_DIRECT_READ=never (entry by entry
 *                  through the page cache, the reader before its cold-read
 *                  pipeline)
 *   fan-limit-R    direct-8, then R - 1 copies into fresh huge-page buffers
 *                  on two threads: the limit of a cold load into R replicas
 *
 *   cold_read [--reps N] [--chunk MiB] [--replicas R] [--rows NAME,...] PREFIX
 *
 * PREFIX is a TensorBundle prefix; FILES are its index and data shards.
 * Medians of --reps (default 3); every row is in process (no exec cost), and
 * each is preceded by an untimed touch of as much fresh memory (prime()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#ifdef CKPT_BENCH_URING
#include <liburing.h>
#endif

#define MAX_FILES 64
#define MAX_REPS 15

typedef struct files {
	int n;
	char *path[MAX_FILES];
	size_t size[MAX_FILES], total;
	size_t base[MAX_FILES], span; /* each file's place in the buffer, 4096-aligned for O_DIRECT; buffer size */
} files;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void drop_caches(void)
{
	sync();
	FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
	if (!f || fputs("3\n", f) < 0 || fclose(f) != 0) {
		fprintf(stderr, "cold_read: cannot drop the page cache (%s): run as root\n", strerror(errno));
		exit(1);
	}
}

static unsigned char *fresh(size_t n)
{
	void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	madvise(p, n ? n : 1, MADV_HUGEPAGE);
	return p;
}

/* ---- pread with K threads (K = 1: one stream) ---- */

typedef struct job {
	const files *fs;
	unsigned char *buf;
	size_t chunk;
	int direct;
	int fd[MAX_FILES];
	atomic_size_t next;  /* global chunk index over all files */
	size_t nchunks[MAX_FILES];
	int failed;
} job;

static void *worker(void *arg)
{
	job *j = arg;
	for (;;) {
		size_t k = atomic_fetch_add(&j->next, 1), base = 0, off;
		int f = 0;
		for (; f < j->fs->n && k >= j->nchunks[f]; f++)
			k -= j->nchunks[f];
		if (f == j->fs->n)
			return NULL;
		off = j->fs->base[f];
		base = k * j->chunk;
		size_t len = j->fs->size[f] - base < j->chunk ? j->fs->size[f] - base : j->chunk;
		if (j->direct)
			len = (len + 4095) & ~(size_t)4095; /* the tail: O_DIRECT reads whole blocks, short at EOF */
		size_t done = 0;
		while (done < len) {
			ssize_t got = pread(j->fd[f], j->buf + off + base + done, len - done, (off_t)(base + done));
			if (got < 0) {
				perror("pread");
				j->failed = 1;
				return NULL;
			}
			if (got == 0)
				break;
			done += (size_t)got;
		}
	}
}

/* Half of a copy into a fresh replica buffer (the fan-out limit's second thread). */
typedef struct half_copy {
	unsigned char *dst;
	const unsigned char *src;
	size_t n;
} half_copy;

static void *copy_half(void *arg)
{
	half_copy *h = arg;
	memcpy(h->dst, h->src, h->n);
	return NULL;
}

/*
 * Read FILES into a fresh buffer (threads readers, O_DIRECT or not), then,
 * when fan > 1, copy it into fan - 1 more fresh huge-page buffers on two
 * threads: the limit of a cold load into fan mirrored replicas.
 */
static double run_pread_fan(const files *fs, int threads, int direct, int fadv, size_t chunk, int fan);

static double run_pread(const files *fs, int threads, int direct, int fadv, size_t chunk)
{
	return run_pread_fan(fs, threads, direct, fadv, chunk, 1);
}

static double run_pread_fan(const files *fs, int threads, int direct, int fadv, size_t chunk, int fan)
{
	job *j = calloc(1, sizeof(*j));
	j->fs = fs;
	j->chunk = chunk;
	j->direct = direct;
	/* room for O_DIRECT's whole-block tail of every file */
	j->buf = fresh(fs->span);
	drop_caches();
	double t0 = now();
	for (int f = 0; f < fs->n; f++) {
		j->fd[f] = open(fs->path[f], O_RDONLY | (direct ? O_DIRECT : 0));
		if (j->fd[f] < 0) {
			perror(fs->path[f]);
			exit(1);
		}
		if (fadv) {
			posix_fadvise(j->fd[f], 0, 0, POSIX_FADV_SEQUENTIAL);
			posix_fadvise(j->fd[f], 0, 0, POSIX_FADV_WILLNEED);
		}
		j->nchunks[f] = (fs->size[f] + chunk - 1) / chunk;
	}
	pthread_t th[64];
	for (int t = 1; t < threads; t++)
		pthread_create(&th[t], NULL, worker, j);
	worker(j);
	for (int t = 1; t < threads; t++)
		pthread_join(th[t], NULL);
	unsigned char *rep[64];
	for (int r = 1; r < fan && r < 64; r++) {
		rep[r] = fresh(fs->span);
		half_copy h = { rep[r] + fs->span / 2, j->buf + fs->span / 2, fs->span - fs->span / 2 };
		pthread_t other;
		pthread_create(&other, NULL, copy_half, &h);
		memcpy(rep[r], j->buf, fs->span / 2);
		pthread_join(other, NULL);
	}
	double dt = now() - t0;
	for (int r = 1; r < fan && r < 64; r++)
		munmap(rep[r], fs->span);
	for (int f = 0; f < fs->n; f++)
		close(j->fd[f]);
	if (j->failed)
		exit(1);
	munmap(j->buf, fs->span);
	free(j);
	return dt;
}

/* ---- io_uring ---- */

#ifdef CKPT_BENCH_URING
static double run_uring(const files *fs, unsigned qd, int direct, size_t chunk)
{
	struct io_uring ring;
	unsigned char *buf = fresh(fs->span);
	if (io_uring_queue_init(qd, &ring, 0) < 0) {
		fprintf(stderr, "cold_read: io_uring_queue_init failed\n");
		exit(1);
	}
	drop_caches();
	double t0 = now();
	int fd[MAX_FILES];
	for (int f = 0; f < fs->n; f++)
		if ((fd[f] = open(fs->path[f], O_RDONLY | (direct ? O_DIRECT : 0))) < 0) {
			perror(fs->path[f]);
			exit(1);
		}
	int f = 0;
	size_t pos = 0;
	unsigned inflight = 0;
	for (;;) {
		while (inflight < qd && f < fs->n) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			size_t len = fs->size[f] - pos < chunk ? fs->size[f] - pos : chunk;
			if (direct)
				len = (len + 4095) & ~(size_t)4095;
			io_uring_prep_read(sqe, fd[f], buf + fs->base[f] + pos, (unsigned)len, pos);
			inflight++;
			pos += chunk;
			if (pos >= fs->size[f]) {
				pos = 0;
				f++;
			}
		}
		if (!inflight)
			break;
		io_uring_submit(&ring);
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&ring, &cqe) < 0 || cqe->res < 0) {
			fprintf(stderr, "cold_read: io_uring read failed: %s\n", strerror(cqe ? -cqe->res : EIO));
			exit(1);
		}
		/* a short buffered read is possible in principle; chunks here end at EOF or are whole */
		io_uring_cqe_seen(&ring, cqe);
		inflight--;
	}
	double dt = now() - t0;
	for (int i = 0; i < fs->n; i++)
		close(fd[i]);
	io_uring_queue_exit(&ring);
	munmap(buf, fs->span);
	return dt;
}
#endif

/* ---- the library ---- */

static double run_load(const char *prefix, int replicas)
{
	ckpt_strategy *s;
	if (ckpt_strategy_mirrored_new(&s, replicas) != CKPT_OK) {
		fprintf(stderr, "cold_read: %s\n", ckpt_error_last()->message);
		exit(1);
	}
	drop_caches();
	double t0 = now();
	ckpt_checkpoint *ck;
	ckpt_restore_status *st = NULL;
	ckpt_scope_enter(s);
	int rc = ckpt_checkpoint_load(&ck, &st, prefix, NULL);
	ckpt_scope_exit(s);
	double dt = now() - t0;
	if (rc != CKPT_OK) {
		fprintf(stderr, "cold_read: load: %s\n", ckpt_error_last()->message);
		exit(1);
	}
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	return dt;
}

/*
 * Touch and free n bytes of fresh memory, untimed, before a row: on this VM
 * fresh memory is 5-10x dearer right after a pause than right after another
 * allocation of the same size was freed (bench/whole_process.py), so every
 * row starts from the same state whatever ran before it.
 */
static void prime(size_t n)
{
	unsigned char *p = fresh(n);
	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	munmap(p, n);
}

/* Whether `name` is one of the comma-separated names in `list`. */
static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t k = e ? (size_t)(e - p) : strlen(p);
		if (k == n && strncmp(p, name, n) == 0)
			return 1;
		p += k + (e ? 1 : 0);
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

typedef double (*row_fn)(const files *fs, const char *prefix, int arg, size_t chunk);

static double row_stream(const files *fs, const char *p, int a, size_t c) { (void)p; (void)a; return run_pread(fs, 1, 0, 0, c); }
static double row_fadvise(const files *fs, const char *p, int a, size_t c) { (void)p; (void)a; return run_pread(fs, 1, 0, 1, c); }
static double row_threads(const files *fs, const char *p, int a, size_t c) { (void)p; return run_pread(fs, a, 0, 0, c); }
static double row_direct(const files *fs, const char *p, int a, size_t c) { (void)p; return run_pread(fs, a, 1, 0, c); }
#ifdef CKPT_BENCH_URING
static double row_uring(const files *fs, const char *p, int a, size_t c) { (void)p; return run_uring(fs, (unsigned)a, 0, c); }
static double row_uring_direct(const files *fs, const char *p, int a, size_t c) { (void)p; return run_uring(fs, (unsigned)a, 1, c); }
#endif
static double row_load(const files *fs, const char *p, int a, size_t c) { (void)fs; (void)c; return run_load(p, a); }
/* the library before the cold-read pipeline: entry by entry through the page cache */
static double row_load_buffered(const files *fs, const char *p, int a, size_t c)
{
	(void)fs; (void)c;
	setenv("CKPT_DIRECT_READ", "never", 1);
	double t = run_load(p, a);
	unsetenv("CKPT_DIRECT_READ");
	return t;
}
/* the limit of a cold load into R replicas: the best read (direct-8) + R - 1 copies into fresh memory */
static double row_fan_limit(const files *fs, const char *p, int a, size_t c) { (void)p; return run_pread_fan(fs, 8, 1, 0, c, a); }

int main(int argc, char **argv)
{
	int reps = 3, replicas = 4;
	const char *only = NULL; /* --rows a,b,c: run only these rows (names as in the first column) */
	size_t chunk = (size_t)8 << 20;
	int i = 1;
	for (; i < argc - 1 && argv[i][0] == '-'; i += 2) {
		if (strcmp(argv[i], "--reps") == 0)
			reps = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--chunk") == 0)
			chunk = (size_t)atoi(argv[i + 1]) << 20;
		else if (strcmp(argv[i], "--replicas") == 0)
			replicas = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--rows") == 0)
			only = argv[i + 1];
		else
			break;
	}
	if (i != argc - 1 || reps < 1 || reps > MAX_REPS || chunk == 0 || replicas < 1) {
		fprintf(stderr, "usage: cold_read [--reps N] [--chunk MiB] [--replicas R] [--rows NAME,...] PREFIX\n");
		return 2;
	}
	const char *prefix = argv[i];
	files fs = { 0 };
	char pat[4096];
	glob_t g;
	snprintf(pat, sizeof(pat), "%s.data-*", prefix);
	if (glob(pat, 0, NULL, &g) != 0) {
		fprintf(stderr, "cold_read: no data shards at %s\n", pat);
		return 1;
	}
	for (size_t k = 0; k <= g.gl_pathc && fs.n < MAX_FILES; k++) {
		char idx[4096];
		snprintf(idx, sizeof(idx), "%s.index", prefix);
		const char *p = k < g.gl_pathc ? g.gl_pathv[k] : idx;
		struct stat st;
		if (stat(p, &st) != 0) {
			perror(p);
			return 1;
		}
		fs.path[fs.n] = strdup(p);
		fs.size[fs.n] = (size_t)st.st_size;
		fs.base[fs.n] = fs.span;
		fs.span += ((size_t)st.st_size + 4095) & ~(size_t)4095;
		fs.total += (size_t)st.st_size;
		fs.n++;
	}
	globfree(&g);

	struct { const char *name; row_fn fn; int arg; } rows[] = {
		{ "stream", row_stream, 1 },
		{ "fadvise", row_fadvise, 1 },
		{ "threads-2", row_threads, 2 },
		{ "threads-4", row_threads, 4 },
		{ "threads-8", row_threads, 8 },
		{ "direct-1", row_direct, 1 },
		{ "direct-4", row_direct, 4 },
		{ "direct-8", row_direct, 8 },
#ifdef CKPT_BENCH_URING
		{ "uring-4", row_uring, 4 },
		{ "uring-16", row_uring, 16 },
		{ "uring-direct-4", row_uring_direct, 4 },
		{ "uring-direct-16", row_uring_direct, 16 },
#endif
		{ "ckpt-load", row_load, 1 },
		{ "ckpt-load-buffered", row_load_buffered, 1 },
		{ "fan-limit", row_fan_limit, replicas },
		{ "ckpt-load", row_load, replicas },
		{ "ckpt-load-buffered", row_load_buffered, replicas },
	};
	enum { NROWS = sizeof(rows) / sizeof(rows[0]) };
	double t[NROWS][MAX_REPS], med[NROWS];
	/* interleaved: every rep runs every row, so drift hits all alike */
	int run[NROWS];
	for (int k = 0; k < NROWS; k++) {
		char name[64];
		snprintf(name, sizeof(name), "%s%s", rows[k].name,
			rows[k].fn == row_load || rows[k].fn == row_load_buffered ? (rows[k].arg == 1 ? "-1" : "-R") : "");
		run[k] = !only || in_list(only, name);
	}
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < NROWS; k++) {
			if (!run[k])
				continue;
			/* as much as the row will hold: R replicas for the loads and the fan-out limit, else one copy */
			int copies = rows[k].fn == row_load || rows[k].fn == row_load_buffered || rows[k].fn == row_fan_limit
				? rows[k].arg : 1;
			prime(fs.span * (size_t)copies);
			t[k][r] = rows[k].fn(&fs, prefix, rows[k].arg, chunk);
		}
	double best = 1e30;
	for (int k = 0; k < NROWS; k++) {
		qsort(t[k], (size_t)reps, sizeof(double), cmp_double);
		med[k] = t[k][reps / 2];
		if (run[k] && rows[k].fn != row_load && rows[k].fn != row_load_buffered && rows[k].fn != row_fan_limit &&
		    med[k] < best)
			best = med[k];
	}
	printf("cold read of %s (%d files, %.1f MiB), chunk %zu MiB, medians of %d, in process, page cache dropped "
		"before every row\n", prefix, fs.n, (double)fs.total / 1048576.0, chunk >> 20, reps);
	printf("| strategy | seconds | GB/s | vs best read |\n|---|---|---|---|\n");
	for (int k = 0; k < NROWS; k++) {
		char name[64];
		if (!run[k])
			continue;
		if (rows[k].fn == row_load)
			snprintf(name, sizeof(name), "ckpt_checkpoint_load, mirrored(%d)", rows[k].arg);
		else if (rows[k].fn == row_load_buffered)
			snprintf(name, sizeof(name), "the same, CKPT_DIRECT_READ=never, mirrored(%d)", rows[k].arg);
		else if (rows[k].fn == row_fan_limit)
			snprintf(name, sizeof(name), "limit: direct-8 + %d copies into fresh memory", rows[k].arg - 1);
		else
			snprintf(name, sizeof(name), "%s", rows[k].name);
		printf("| %s | %.3f | %.2f | %.2fx |\n", name, med[k], (double)fs.total / med[k] / 1e9, med[k] / best);
	}
	/* the targets of issue 15: a cold load <= 1.25x the best read (R replicas: the best read + the fan-out) */
	double load1 = 0, loadr = 0, fan = 0;
	for (int k = 0; k < NROWS && !only; k++) {
		if (rows[k].fn == row_load && rows[k].arg == 1)
			load1 = med[k];
		else if (rows[k].fn == row_load)
			loadr = med[k];
		else if (rows[k].fn == row_fan_limit)
			fan = med[k];
	}
	if (only)
		return 0;
	printf("\ntarget: cold load into mirrored(1) <= 1.25x the best read: %s (%.2fx)\n",
		load1 <= 1.25 * best ? "met" : "not met", load1 / best);
	if (replicas > 1 && fan > 0)
		printf("target: cold load into mirrored(%d) <= 1.25x (best read + %d copies): %s (%.2fx; %.2fx the read alone)\n",
			replicas, replicas - 1, loadr <= 1.25 * fan ? "met" : "not met", loadr / fan, loadr / best);
	return 0;
}

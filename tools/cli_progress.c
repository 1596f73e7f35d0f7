/*
 * Progress on stderr for long commands, as `rsync --progress` shows it: one
 * line, redrawn in place, with bytes done, rate and time left. The library
 * needs no progress hooks: the bytes are the process's own I/O counters
 * (rchar + wchar of /proc/self/io, every read and write system call of every
 * thread, O_DIRECT ones included), read by the drawing thread four times a
 * second, so the command itself does nothing extra and keeps the default
 * file system with its fast paths (the TensorBundle reader's cold-read
 * pipeline reads through its own descriptors). Where /proc/self/io cannot be
 * read, a VFS that wraps the default one counts every pread and pwrite made
 * through it instead. Bytes moved to and from S3 travel over sockets, which
 * those counters do not see: the S3 client's own count
 * (ckpt_s3_transfer_bytes) is added, so s3:// paths keep the library's S3
 * file system, unwrapped (its uploads are aborted, not published, when a
 * write is abandoned; a wrapper would hide that from it). The line is drawn only once the command has run for
 * CKPT_PROGRESS_AFTER_MS (default 1000 ms), and only when stderr is a
 * terminal and the output is not --json.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "ckpt/sys/vfs.h"

struct cli_progress {
	ckpt_vfs vfs;              /* first: the wrapper is passed as a ckpt_vfs */
	ckpt_vfs_methods methods;  /* counted_vfs_methods with the wrapped file system's capabilities */
	ckpt_vfs *base;
	const char *verb;
	uint64_t total;
	_Atomic uint64_t done;     /* counted by the wrapping VFS (no /proc/self/io) */
	int proc_io;               /* 1: done = this process's rchar + wchar - io0 */
	uint64_t io0;
	uint64_t s3_0;             /* S3 bytes sent + received at the start */
	int enabled;
	long after_ms;
	pthread_t thread;
	int have_thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	int drawn;
	struct timespec t0;
};

typedef struct counted_io {
	ckpt_io base;
	ckpt_io *inner;
	cli_progress *p;
} counted_io;

/* the one progress line of this process, for cli_progress_clear_line */
static cli_progress *active;
static pthread_mutex_t active_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- the counting VFS ---- */

static int cio_pread(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got)
{
	counted_io *c = (counted_io *)io;
	int rc = c->inner->methods->pread(c->inner, buf, n, off, got);
	if (rc == CKPT_OK)
		atomic_fetch_add_explicit(&c->p->done, *got, memory_order_relaxed);
	return rc;
}

static int cio_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off)
{
	counted_io *c = (counted_io *)io;
	int rc = c->inner->methods->pwrite(c->inner, buf, n, off);
	if (rc == CKPT_OK)
		atomic_fetch_add_explicit(&c->p->done, n, memory_order_relaxed);
	return rc;
}

static int cio_size(ckpt_io *io, uint64_t *out)
{
	counted_io *c = (counted_io *)io;
	return c->inner->methods->size(c->inner, out);
}

static int cio_sync(ckpt_io *io)
{
	counted_io *c = (counted_io *)io;
	return c->inner->methods->sync(c->inner);
}

static int cio_close(ckpt_io *io)
{
	counted_io *c = (counted_io *)io;
	int rc = c->inner->methods->close(c->inner);
	free(c);
	return rc;
}

static const void *cio_map(ckpt_io *io, uint64_t *size)
{
	counted_io *c = (counted_io *)io;
	return c->inner->methods->map ? c->inner->methods->map(c->inner, size) : NULL;
}

/* no fd: every byte a command moves goes through the count */
static const ckpt_io_methods counted_io_methods = { .version = CKPT_IO_METHODS_V2, .pread = cio_pread,
	.pwrite = cio_pwrite, .size = cio_size, .sync = cio_sync, .close = cio_close, .map = cio_map };

static int cvfs_open(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out)
{
	cli_progress *p = (cli_progress *)vfs;
	counted_io *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return ckpt_vfs_open(out, p->base, path, flags); /* uncounted rather than failed */
	rc = ckpt_vfs_open(&c->inner, p->base, path, flags);
	if (rc != CKPT_OK) {
		free(c);
		return rc;
	}
	c->base.methods = &counted_io_methods;
	c->base.path = c->inner->path; /* borrowed: ckpt_io_path reads it, the inner io frees it */
	c->p = p;
	*out = &c->base;
	return CKPT_OK;
}

static int cvfs_rename(ckpt_vfs *vfs, const char *from, const char *to)
{
	return ckpt_vfs_rename(((cli_progress *)vfs)->base, from, to);
}

static int cvfs_remove(ckpt_vfs *vfs, const char *path)
{
	return ckpt_vfs_remove(((cli_progress *)vfs)->base, path);
}

static int cvfs_exists(ckpt_vfs *vfs, const char *path, int *is_dir)
{
	return ckpt_vfs_exists(is_dir, ((cli_progress *)vfs)->base, path);
}

static int cvfs_sync_dir(ckpt_vfs *vfs, const char *dir)
{
	return ckpt_vfs_sync_dir(((cli_progress *)vfs)->base, dir);
}

static int cvfs_list(ckpt_vfs *vfs, const char *dir, char ***names, size_t *count)
{
	return ckpt_vfs_list(names, count, ((cli_progress *)vfs)->base, dir);
}

static int cvfs_mkdir(ckpt_vfs *vfs, const char *dir)
{
	return ckpt_vfs_mkdir(((cli_progress *)vfs)->base, dir);
}

static int cvfs_rmdir(ckpt_vfs *vfs, const char *dir)
{
	return ckpt_vfs_rmdir(((cli_progress *)vfs)->base, dir);
}

static int cvfs_lock(void **token, ckpt_vfs *vfs, const char *dir)
{
	return ckpt_vfs_lock(token, ((cli_progress *)vfs)->base, dir);
}

static void cvfs_unlock(ckpt_vfs *vfs, void *token)
{
	ckpt_vfs_unlock(((cli_progress *)vfs)->base, token);
}

static void cvfs_destroy(ckpt_vfs *vfs)
{
	(void)vfs; /* owned by cli_progress_finish */
}

/* caps: the wrapped file system's, set in cli_progress_start */
static const ckpt_vfs_methods counted_vfs_methods = { CKPT_VFS_METHODS_V2, cvfs_open, cvfs_rename, cvfs_remove,
	cvfs_exists, cvfs_sync_dir, cvfs_list, cvfs_mkdir, cvfs_destroy, 0, cvfs_rmdir, cvfs_lock, cvfs_unlock };

/* ---- drawing ---- */

static double since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void human(char *buf, size_t n, double bytes)
{
	static const char *const unit[] = { "B", "kB", "MB", "GB", "TB" };
	int u = 0;
	while (bytes >= 1000.0 && u < 4) {
		bytes /= 1000.0;
		u++;
	}
	snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", bytes, unit[u]);
}

/* rchar + wchar of this process (all its threads) from /proc/self/io; 0 when it cannot be read. */
static int proc_io_bytes(uint64_t *out)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	uint64_t sum = 0;
	int seen = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;
		if (sscanf(line, "rchar: %llu", &v) == 1 || sscanf(line, "wchar: %llu", &v) == 1) {
			sum += v;
			seen++;
		}
	}
	fclose(f);
	*out = sum;
	return seen == 2;
}

/* S3 body bytes sent + received by this process so far. */
static uint64_t s3_bytes(void)
{
	uint64_t sent = 0, received = 0;

	ckpt_s3_transfer_bytes(&sent, &received);
	return sent + received;
}

static void draw(cli_progress *p, double t)
{
	uint64_t done = atomic_load_explicit(&p->done, memory_order_relaxed), now;

	if (p->proc_io && proc_io_bytes(&now))
		done = now > p->io0 ? now - p->io0 : 0;
	done += s3_bytes() - p->s3_0;
	double rate = t > 0 ? (double)done / t : 0.0;
	char d[32], tot[32], r[32], left[32] = "";

	human(d, sizeof(d), (double)done);
	human(r, sizeof(r), rate);
	if (p->total > done) {
		tot[0] = ' ';
		tot[1] = '/';
		tot[2] = ' ';
		human(tot + 3, sizeof(tot) - 3, (double)p->total);
		if (rate > 0)
			snprintf(left, sizeof(left), "  %.0f s left", (double)(p->total - done) / rate + 0.5);
	} else {
		tot[0] = 0; /* total unknown yet, or passed: bytes so far only */
	}
	/* \r + erase to end of line: one line, redrawn */
	fprintf(stderr, "\r\033[K%s: %s%s  %s/s%s", p->verb, d, tot, r, left);
	fflush(stderr);
	p->drawn = 1;
}

static void *progress_thread(void *arg)
{
	cli_progress *p = arg;
	struct timespec wake;

	pthread_mutex_lock(&p->mu);
	if (p->after_ms <= 0)
		draw(p, since(&p->t0)); /* CKPT_PROGRESS_AFTER_MS=0: at once (tests) */
	while (!p->stop) {
		double t;
		clock_gettime(CLOCK_REALTIME, &wake);
		wake.tv_nsec += 250 * 1000000L;
		if (wake.tv_nsec >= 1000000000L) {
			wake.tv_sec++;
			wake.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&p->cv, &p->mu, &wake);
		if (p->stop)
			break;
		t = since(&p->t0);
		if (t * 1000.0 >= (double)p->after_ms)
			draw(p, t);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int cli_progress_start(cli_progress **out, const char *verb, uint64_t total, int json)
{
	cli_progress *p = calloc(1, sizeof(*p));
	const char *after = getenv("CKPT_PROGRESS_AFTER_MS");

	*out = p;
	if (!p)
		return CLI_EXIT_OK; /* no progress line; everything else works without it */
	p->base = cli_vfs();
	p->methods = counted_vfs_methods;
	p->methods.caps = ckpt_vfs_caps(p->base);
	p->vfs.methods = &p->methods;
	p->verb = verb;
	p->total = total;
	p->after_ms = after && *after ? strtol(after, NULL, 10) : 1000;
	p->enabled = !json && isatty(STDERR_FILENO);
	atomic_init(&p->done, 0);
	clock_gettime(CLOCK_MONOTONIC, &p->t0);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->proc_io = p->enabled && proc_io_bytes(&p->io0);
	p->s3_0 = s3_bytes();
	if (p->enabled && pthread_create(&p->thread, NULL, progress_thread, p) == 0) {
		p->have_thread = 1;
		pthread_mutex_lock(&active_mu);
		active = p;
		pthread_mutex_unlock(&active_mu);
	}
	return CLI_EXIT_OK;
}

ckpt_vfs *cli_progress_vfs(cli_progress *p, const char *a, const char *b)
{
	if (ckpt_path_is_s3(a) || ckpt_path_is_s3(b))
		return cli_vfs_for(a, b);
	/* off (not a terminal, --json) or counted by the kernel: the commands' own VFS, which costs nothing */
	return p && p->have_thread && !p->proc_io ? &p->vfs : cli_vfs();
}

void cli_progress_set_total(cli_progress *p, uint64_t total)
{
	if (p)
		p->total = total;
}

void cli_progress_clear_line(void)
{
	pthread_mutex_lock(&active_mu);
	if (active) {
		pthread_mutex_lock(&active->mu);
		if (active->drawn) {
			fputs("\r\033[K", stderr);
			fflush(stderr);
			active->drawn = 0;
		}
		pthread_mutex_unlock(&active->mu);
	}
	pthread_mutex_unlock(&active_mu);
}

void cli_progress_done(cli_progress *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&active_mu);
	if (active == p)
		active = NULL;
	pthread_mutex_unlock(&active_mu);
	if (p->have_thread) {
		pthread_mutex_lock(&p->mu);
		if (p->drawn)
			draw(p, since(&p->t0)); /* the final figures, then the line is erased (a recording keeps them) */
		p->stop = 1;
		pthread_cond_signal(&p->cv);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->thread, NULL);
		p->have_thread = 0;
	}
	if (p->drawn) {
		fputs("\r\033[K", stderr); /* the result lines follow on a clean line */
		fflush(stderr);
		p->drawn = 0;
	}
}

void cli_progress_free(cli_progress *p)
{
	if (!p)
		return;
	cli_progress_done(p);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

uint64_t cli_reader_bytes(const ckpt_reader *r)
{
	uint64_t sum = 0;
	size_t i, n = ckpt_reader_num_entries(r);

	for (i = 0; i < n; i++)
		sum += ckpt_reader_var(r, i)->nbytes;
	return sum;
}

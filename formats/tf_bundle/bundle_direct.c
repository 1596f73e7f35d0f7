/*
 * The TensorBundle reader's cold-read pipeline (issue 15).
 *
 * Measured on the 2-vCPU VM's virtio disk (bench/cold_read, page cache
 * dropped): one buffered stream reads a cold file at 1.1-1.35 GB/s, and more
 * buffered reads in flight do not help; O_DIRECT with several requests in
 * flight reaches 2.0-2.2 GB/s. One synchronous O_DIRECT read at a time loses
 * to readahead (the disk idles while we crc), so direct reads only pay with
 * several of them outstanding.
 *
 * So, for a batch of whole entries most of whose bytes are not in the page
 * cache (cachestat(2), on the descriptor the data file's open io lends):
 * each data file is read around the page cache through its io's
 * pread_direct (the POSIX VFS: an O_DIRECT twin of its descriptor), the bytes
 * the batch needs are cut into CHUNK-sized, block-aligned chunks, and THREADS
 * threads each claim a chunk, read it into their own aligned bounce buffer,
 * then crc its pieces and copy them out to their destinations while the other
 * threads' reads are in flight. A chunk the page cache holds in full is read
 * through the ordinary descriptor instead. The per-piece crcs are combined in
 * entry order afterwards. Extra memory: THREADS x CHUNK (16 MiB), within the
 * restore budget of N x state + 64 MiB. 8 x 2 MiB measured a little ahead of
 * 4 x 4, 6 x 4, 3 x 8 and 2 x 8 MiB (cold `ckpt verify` of 340 MB, 6 rounds:
 * all within 0.11-0.14 s, the disk's rate); 16 x 1 MiB lost.
 *
 * CKPT_DIRECT_READ=never turns the pipeline off, =always reads every chunk
 * with O_DIRECT whatever the cache holds (tests, and benchmarks that compare).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "tfb.h"

#define CHUNK ((uint64_t)2 << 20)
#define ALIGN ((uint64_t)4096)
#define THREADS 8
/* Below this many bytes a batch is not worth the threads and the reopen. */
#define MIN_BYTES ((uint64_t)32 << 20)

/* cachestat(2), Linux 6.5; Debian 12's headers predate it (same number on every architecture). */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
struct tfb_cachestat_range { uint64_t off, len; };
struct tfb_cachestat { uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted; };

static atomic_ulong stat_direct, stat_buffered;

void tfb_direct_stats(uint64_t *direct_chunks, uint64_t *buffered_chunks)
{
	*direct_chunks = atomic_load(&stat_direct);
	*buffered_chunks = atomic_load(&stat_buffered);
}

int tfb_direct_policy(void)
{
	const char *e = getenv("CKPT_DIRECT_READ");
	if (e && strcmp(e, "never") == 0)
		return TFB_DIRECT_NEVER;
	if (e && strcmp(e, "always") == 0)
		return TFB_DIRECT_ALWAYS;
	return TFB_DIRECT_AUTO;
}

uint64_t tfb_direct_min_bytes(void)
{
	return MIN_BYTES;
}

/* Pages of [off, off+len) in the page cache: -1 when the kernel cannot say. */
static int64_t cached_pages(int fd, uint64_t off, uint64_t len)
{
	struct tfb_cachestat_range range = { off, len };
	struct tfb_cachestat cs;
	memset(&cs, 0, sizeof(cs));
	if (syscall(__NR_cachestat, fd, &range, &cs, 0) != 0)
		return -1;
	return (int64_t)cs.nr_cache;
}

typedef struct dchunk {
	int shard;
	int cached;        /* in the page cache in full: read through the ordinary descriptor */
	uint64_t off;      /* ALIGN-aligned */
	uint64_t len;      /* bytes to request (ALIGN multiple, <= CHUNK) */
	uint64_t need;     /* bytes the pieces need from off */
	size_t p0, p1;     /* its pieces */
} dchunk;

typedef struct dpiece {
	size_t span;
	uint64_t span_off; /* where in the entry */
	uint64_t chunk_off;/* where in the chunk */
	uint64_t len;
	uint32_t crc;
} dpiece;

typedef struct dplan {
	tfb_span *spans;
	size_t nspans;
	ckpt_io *const *ios; /* the data files, by shard */
	int *fds;            /* their descriptors (cachestat, buffered reads), -1 = none */
	int *direct;         /* 1: the io reads around the page cache */
	const char *const *paths;
	dchunk *chunks;
	size_t nchunks;
	dpiece *pieces;
	size_t npieces;
	int verify;
	atomic_size_t next;
	tfb_first_error err; /* the lowest failing span's */
} dplan;

/* The first piece of chunk c that needs bytes at or past `got` (the one a short read fails). */
static const dpiece *first_short(const dplan *p, const dchunk *c, uint64_t got)
{
	for (size_t k = c->p0; k < c->p1; k++)
		if (p->pieces[k].chunk_off + p->pieces[k].len > got)
			return &p->pieces[k];
	return &p->pieces[c->p0];
}

/* Read chunk c into buf: around the page cache unless cached or refused; ordinary reads for the rest. */
static int read_chunk(dplan *p, const dchunk *c, unsigned char *buf)
{
	int direct = p->direct[c->shard] && !c->cached, fd = p->fds[c->shard];
	uint64_t got = 0;
	while (got < c->need) {
		ssize_t k;
		int err = 0;
		if (direct) {
			size_t n = 0;
			int rc = ckpt__io_pread_direct_only(p->ios[c->shard], buf + got, (size_t)(c->len - got), c->off + got, &n);
			if (rc == CKPT_EUNSUPPORTED) {
				/* this file system or offset refuses direct reads: the rest through the page cache */
				ckpt_error_clear();
				direct = 0;
				continue;
			}
			k = rc < 0 ? -1 : (ssize_t)n;
			err = rc < 0 ? (ckpt_error_last()->sys_errno ? ckpt_error_last()->sys_errno : EIO) : 0;
		} else {
			k = pread(fd, buf + got, (size_t)(c->len - got), (off_t)(c->off + got));
			if (k < 0 && errno == EINTR)
				continue;
			err = k < 0 ? errno : 0;
		}
		const dpiece *d = first_short(p, c, got);
		const tfb_span *s = &p->spans[d->span];
		if (k < 0)
			return ckpt__fail(CKPT_EIO, p->paths[c->shard], s->name, (int64_t)(c->off + got),
				"read failed at byte %llu: %s", (unsigned long long)(c->off + got), strerror(err));
		if (k == 0)
			return ckpt__fail(CKPT_EFORMAT, p->paths[c->shard], s->name, (int64_t)(c->off + got),
				"data file ended at byte %llu, inside the tensor (%llu bytes at offset %llu)",
				(unsigned long long)(c->off + got), (unsigned long long)s->n, (unsigned long long)s->off);
		got += (uint64_t)k;
	}
	atomic_fetch_add(direct ? &stat_direct : &stat_buffered, 1);
	return CKPT_OK;
}

/* Claim chunks until none is left: read each, then crc and copy out its pieces. */
static void run_chunks(dplan *p, unsigned char *buf)
{
	for (;;) {
		size_t k = atomic_fetch_add(&p->next, 1);
		if (k >= p->nchunks || atomic_load_explicit(&p->err.failed, memory_order_relaxed))
			return;
		const dchunk *c = &p->chunks[k];
		if (read_chunk(p, c, buf) < 0) {
			tfb_first_error_note(&p->err, p->pieces[c->p0].span);
			return;
		}
		for (size_t j = c->p0; j < c->p1; j++) {
			dpiece *d = &p->pieces[j];
			const unsigned char *src = buf + d->chunk_off;
			if (p->verify)
				d->crc = ckpt_crc32c_extend(0, src, (size_t)d->len);
			if (p->spans[d->span].dst)
				memcpy(p->spans[d->span].dst + d->span_off, src, (size_t)d->len);
		}
	}
}

static void *helper(void *arg)
{
	unsigned char *buf = ckpt__buffer_alloc(CHUNK, 0);
	if (buf)
		run_chunks(arg, buf);
	ckpt__buffer_free(buf);
	ckpt_error_clear(); /* a helper thread keeps no error strings */
	return NULL; /* without a buffer: the others (the caller at least) take the chunks */
}

static int by_place(const void *a, const void *b)
{
	const tfb_span *x = *(const tfb_span *const *)a, *y = *(const tfb_span *const *)b;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Chunks and pieces of the spans, in file order; the caller frees both arrays. */
static int build_plan(dplan *p)
{
	uint64_t total = 0;
	for (size_t i = 0; i < p->nspans; i++)
		total += p->spans[i].n;
	size_t cap_c = p->nspans + (size_t)(total / CHUNK) + 1;
	tfb_span **order = ckpt__malloc(p->nspans * sizeof(*order));
	p->chunks = ckpt__malloc(cap_c * sizeof(*p->chunks));
	p->pieces = ckpt__malloc((p->nspans + cap_c) * sizeof(*p->pieces));
	if (!order || !p->chunks || !p->pieces) {
		ckpt__free(order);
		return CKPT_ENOMEM;
	}
	for (size_t i = 0; i < p->nspans; i++)
		order[i] = &p->spans[i];
	qsort(order, p->nspans, sizeof(*order), by_place);
	dchunk *cur = NULL;
	for (size_t i = 0; i < p->nspans; i++) {
		const tfb_span *s = order[i];
		uint64_t a = s->off, e = s->off + s->n;
		while (a < e) {
			if (!cur || cur->shard != s->shard || a >= cur->off + CHUNK) {
				cur = &p->chunks[p->nchunks++];
				cur->shard = s->shard;
				cur->cached = 0;
				cur->off = a & ~(ALIGN - 1);
				cur->need = cur->len = 0;
				cur->p0 = cur->p1 = p->npieces;
			}
			uint64_t end = e < cur->off + CHUNK ? e : cur->off + CHUNK;
			dpiece *d = &p->pieces[p->npieces++];
			d->span = (size_t)(s - p->spans);
			d->span_off = a - s->off;
			d->chunk_off = a - cur->off;
			d->len = end - a;
			d->crc = 0;
			cur->p1 = p->npieces;
			if (end - cur->off > cur->need)
				cur->need = end - cur->off;
			cur->len = (cur->need + ALIGN - 1) & ~(ALIGN - 1);
			a = end;
		}
	}
	ckpt__free(order);
	return CKPT_OK;
}

/*
 * Mark the chunks the page cache holds in full. Returns the share of the
 * batch's pages that are cached, in 1/1000, or -1 when the kernel cannot say.
 */
static int mark_cached(dplan *p)
{
	uint64_t pages = 0, cached = 0;
	for (size_t k = 0; k < p->nchunks; k++) {
		dchunk *c = &p->chunks[k];
		uint64_t first = c->off / ALIGN, last = (c->off + c->need + ALIGN - 1) / ALIGN;
		int64_t got = cached_pages(p->fds[c->shard], c->off, c->need);
		if (got < 0)
			return -1;
		pages += last - first;
		cached += (uint64_t)got;
		c->cached = (uint64_t)got >= last - first;
	}
	return pages ? (int)(cached * 1000 / pages) : 1000;
}

int tfb_direct_read(tfb_span *spans, size_t n, ckpt_io *const *ios, const char *const *paths, int nshards,
	int verify, int policy)
{
	if (policy == TFB_DIRECT_NEVER || n == 0)
		return CKPT__DECLINED;
	dplan *p = ckpt__calloc(1, sizeof(*p));
	if (!p)
		return CKPT_ENOMEM;
	p->spans = spans;
	p->nspans = n;
	p->ios = ios;
	p->paths = paths;
	p->verify = verify;
	atomic_init(&p->next, 0);
	tfb_first_error_init(&p->err);
	int rc = CKPT_OK, finished = 0;
	p->fds = ckpt__malloc((size_t)nshards * sizeof(*p->fds));
	p->direct = ckpt__malloc((size_t)nshards * sizeof(*p->direct));
	if (!p->fds || !p->direct)
		rc = CKPT_ENOMEM;
	for (int i = 0; rc == CKPT_OK && i < nshards; i++) {
		p->fds[i] = ios[i] ? ckpt_io_fd(ios[i]) : -1;
		/* a read of nothing asks the io whether it can read around the cache at all */
		size_t none = 0;
		p->direct[i] = p->fds[i] >= 0 && ckpt__io_pread_direct_only(ios[i], NULL, 0, 0, &none) == CKPT_OK;
		if (!p->direct[i]) {
			ckpt_error_clear();
			if (p->fds[i] >= 0 && policy == TFB_DIRECT_AUTO)
				rc = CKPT__DECLINED;
		}
	}
	if (rc == CKPT_OK)
		rc = build_plan(p);
	if (rc == CKPT_OK && policy == TFB_DIRECT_AUTO) {
		/* three quarters cached or more: entry by entry through the page cache wins (one copy, not two) */
		int share = mark_cached(p);
		if (share < 0 || share >= 750)
			rc = CKPT__DECLINED;
	}
	if (rc == CKPT_OK) {
		pthread_t t[THREADS - 1];
		int started = 0;
		unsigned char *buf = ckpt__buffer_alloc(CHUNK, 0);
		for (int i = 0; i < THREADS - 1 && (size_t)(i + 1) < p->nchunks; i++) {
			if (pthread_create(&t[i], NULL, helper, p) != 0)
				break;
			started++;
		}
		if (buf)
			run_chunks(p, buf);
		for (int i = 0; i < started; i++)
			pthread_join(t[i], NULL);
		ckpt__buffer_free(buf);
		rc = tfb_first_error_finish(&p->err);
		finished = 1;
		if (rc == CKPT_OK && atomic_load(&p->next) < p->nchunks)
			rc = ckpt__fail(CKPT_ENOMEM, paths[p->chunks[0].shard], NULL, -1,
				"no memory for the buffers of the cold-read pipeline");
	}
	if (rc == CKPT_OK) {
		/* pieces of one span are in entry order: combine their crcs */
		for (size_t j = 0; j < p->npieces; j++) {
			const dpiece *d = &p->pieces[j];
			tfb_span *s = &spans[d->span];
			s->crc = d->span_off == 0 ? d->crc : ckpt__crc32c_combine(s->crc, d->crc, d->len);
		}
	}
	ckpt__free(p->fds);
	ckpt__free(p->direct);
	ckpt__free(p->chunks);
	ckpt__free(p->pieces);
	if (!finished)
		(void)tfb_first_error_finish(&p->err); /* the workers never ran: nothing failed, only the lock to free */
	ckpt__free(p);
	return rc;
}

/*
 * The S3 file system: `s3://bucket/key` paths over s3_client.c.
 *
 * Files written are held in part-sized buffers: an object that ends within
 * one part is sent by one PUT (with Content-MD5 and its crc32c as metadata)
 * when it is closed; a larger one becomes a multipart upload whose full
 * parts are sent while the writer goes on (s3_multipart.c), and which is
 * completed at close, so the object appears whole or not at all. A writer
 * that is abandoned (closed after a failure) aborts its upload.
 *
 * Files read are sized by a HEAD (its ETag pins every later range with
 * If-Match, so an object replaced mid-read fails the read instead of mixing
 * two versions); a read larger than a part is split into ranged GETs on
 * the object's part boundaries (each GET reads one stored part, as the
 * object was uploaded), sent in parallel; small reads are served from a
 * readahead window.
 *
 * Directories are key prefixes: list is ListObjectsV2 with delimiter '/',
 * mkdir and sync_dir do nothing, rename is a server-side copy then a delete
 * (never used by a commit: the VFS says it has no rename).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "s3_internal.h"
#include "ckpt/sys/vfs.h"

#define SMALL_OBJECT (1u << 20)   /* read whole at the first read */
#define WINDOW (1u << 20)         /* readahead window for small reads of big objects */
#define SMALL_READ (64u << 10)

typedef struct {
	ckpt_vfs base;
	s3_client *client;
} s3_vfs;

typedef struct {
	char *buf;
	size_t filled;
	int sent;
} wpart;

typedef struct {
	ckpt_io base;
	s3_vfs *vfs;
	char *bucket, *key;
	int writable;
	int failed;            /* a write failed: close aborts instead of completing */
	int abandoned;         /* the writer gave up: close uploads nothing */
	int exclusive;         /* CKPT_IO_EXCL: created only if absent (If-None-Match: *) */
	/* writing */
	wpart *parts;
	size_t nparts;
	uint64_t end;
	/* parts from index part0 on hold the bytes from off0 on, part_size each; those before were sent,
	 * some of them copied by the server (s3_copy.c), which is why they need not be part_size */
	size_t part0;
	uint64_t off0;
	s3_upload *upload;
	/* reading */
	s3_head h;             /* what the HEAD said: size, ETag (pins every range), checksums */
	/* h came from the client's cache: a first read refused (412) asks again, once (get_range) */
	pthread_mutex_t pin_mu;
	int from_cache, confirmed;
	unsigned epoch;        /* h replaced by that second HEAD: ranges read under the old ETag are read again */
	unsigned long gen;     /* the client cache's change count at open: a whole read is kept for the operation */
	pthread_mutex_t mu;
	char *window;          /* [win_off, win_off + win_len) of the object */
	uint64_t win_off;
	size_t win_len;
} s3_io;

static s3_client *client_of(ckpt_vfs *vfs) { return ((s3_vfs *)vfs)->client; }

/* ---- writing ---- */

static size_t part_size(const s3_io *f) { return s3_client_config(f->vfs->client)->part_size; }

static int send_part(s3_io *f, size_t i)
{
	if (!f->upload)
		CKPT_TRY(s3_upload_begin(&f->upload, f->vfs->client, f->bucket, f->key));
	wpart *p = &f->parts[i];
	uint64_t len64 = f->end - f->off0 - (uint64_t)(i - f->part0) * part_size(f);
	size_t len = len64 < part_size(f) ? (size_t)len64 : part_size(f);
	if (!p->buf && !(p->buf = ckpt__calloc(1, part_size(f))))
		return CKPT_ENOMEM;
	char *buf = p->buf;
	p->buf = NULL;
	p->sent = 1;
	return s3_upload_part(f->upload, (int)i + 1, buf, len);
}

static int s3_pwrite(ckpt_io *io, const void *data, size_t n, uint64_t off)
{
	s3_io *f = (s3_io *)io;
	size_t ps = part_size(f);
	if (f->failed)
		return ckpt__fail(CKPT_EIO, io->path, NULL, (int64_t)off, "an earlier write to this object failed");
	if (n && off < f->off0) {
		f->failed = 1;
		return ckpt__fail(CKPT_EUNSUPPORTED, io->path, NULL, (int64_t)off,
			"rewrite of bytes already uploaded (before a server-side copy into this S3 object)");
	}
	uint64_t last = n ? f->part0 + (off + n - 1 - f->off0) / ps : 0;
	if (n && last >= f->nparts) {
		wpart *np = ckpt__realloc(f->parts, (size_t)(last + 1) * sizeof(*np));
		if (!np)
			return CKPT_ENOMEM;
		memset(np + f->nparts, 0, (size_t)(last + 1 - f->nparts) * sizeof(*np));
		f->parts = np;
		f->nparts = (size_t)last + 1;
	}
	const char *src = data;
	while (n) {
		size_t i = f->part0 + (size_t)((off - f->off0) / ps), in = (size_t)((off - f->off0) % ps);
		size_t k = ps - in < n ? ps - in : n;
		wpart *p = &f->parts[i];
		if (p->sent) {
			f->failed = 1;
			return ckpt__fail(CKPT_EUNSUPPORTED, io->path, NULL, (int64_t)off,
				"rewrite of bytes already uploaded (part %zu of an S3 object)", i + 1);
		}
		if (!p->buf && !(p->buf = ckpt__calloc(1, ps)))
			return CKPT_ENOMEM;
		memcpy(p->buf + in, src, k);
		p->filled += k; /* writers never write a byte twice; a rewrite only sends a part early */
		if (off + k > f->end)
			f->end = off + k;
		if (p->filled >= ps) {
			int rc = send_part(f, i);
			if (rc < 0) {
				f->failed = 1;
				return rc;
			}
		}
		src += k;
		off += k;
		n -= k;
	}
	return CKPT_OK;
}

static int put_whole(s3_io *f)
{
	const void *body = f->nparts ? f->parts[0].buf : NULL;
	size_t len = (size_t)f->end;
	uint32_t crc = ckpt_crc32c_extend(0, body ? body : "", len);
	char meta[64];
	snprintf(meta, sizeof(meta), "x-amz-meta-ckpt-crc32c: %08x", crc);
	/* a conditional create is not retried: a retry after a lost answer would find our own object */
	const char *hdrs[] = { meta, f->exclusive ? "If-None-Match: *" : NULL, NULL };
	s3_request rq = { "PUT", f->bucket, f->key, NULL, body ? body : "", len, hdrs, !f->exclusive, 0, 0, 0, NULL, 1 };
	s3_response rs;
	static const long quiet_412[] = { 412, 0 };
	int rc = s3_perform_quiet(f->vfs->client, &rq, &rs, f->exclusive ? quiet_412 : NULL);
	if (rc == CKPT_EBUSY && f->exclusive && rs.status == 412)
		rc = ckpt__fail(CKPT_EEXIST, f->base.path, NULL, -1,
			"exclusive create refused: the object exists (HTTP status 412, %s)",
			rs.code[0] ? rs.code : "PreconditionFailed");
	s3_response_clear(&rs);
	return rc;
}

/* Parts the object has so far (the last one maybe partly filled). */
static size_t part_count(const s3_io *f)
{
	return f->part0 + (f->end > f->off0 ? (size_t)((f->end - f->off0 - 1) / part_size(f)) + 1 : 0);
}

static int finish_write(s3_io *f)
{
	if (f->abandoned) {
		s3_upload_abort(f->upload);
		f->upload = NULL;
		return CKPT_OK;
	}
	if (f->exclusive && (f->upload || f->end > part_size(f)))
		return ckpt__fail(CKPT_EUNSUPPORTED, f->base.path, NULL, -1,
			"an exclusive create is limited to one part (%zu bytes)", part_size(f));
	if (f->failed) {
		s3_upload_abort(f->upload);
		f->upload = NULL;
		return ckpt__fail(CKPT_EIO, f->base.path, NULL, -1, "not uploaded: an earlier write failed");
	}
	if (!f->upload && f->end <= part_size(f))
		return put_whole(f);
	size_t count = part_count(f);
	int rc = CKPT_OK;
	for (size_t i = 0; i < count && rc == CKPT_OK; i++)
		if (!f->parts[i].sent)
			rc = send_part(f, i);
	if (rc < 0) {
		s3_upload_abort(f->upload);
		f->upload = NULL;
		return rc;
	}
	rc = s3_upload_finish(f->upload, 0);
	f->upload = NULL;
	return rc;
}

/* ---- reading ---- */

/* Ranged GETs sent and the bytes they asked for, in this process (tests count a restore's requests). */
static atomic_ullong stat_gets, stat_get_bytes;

void ckpt__s3_read_stats(uint64_t *gets, uint64_t *bytes)
{
	*gets = atomic_load(&stat_gets);
	*bytes = atomic_load(&stat_get_bytes);
}

static int head(s3_client *c, const char *bucket, const char *key, s3_response *rs, int quiet);

/*
 * The HEAD of a file opened on what the cache said was refused by a read
 * (412: replaced since): ask again. Nothing was read under the old ETag, so
 * when the size is the same (reads were cut to it) the file is taken as
 * opened now; else the read fails as a replaced object's does. Under pin_mu.
 */
static int revalidate(s3_io *f)
{
	f->from_cache = 0;
	ckpt__error_slot keep = { 0 };
	ckpt__error_capture(&keep);
	s3_response rs;
	int rc = head(f->vfs->client, f->bucket, f->key, &rs, 1);
	s3_head h;
	s3_head_of(&h, &rs);
	s3_response_clear(&rs);
	if (rc == CKPT_OK && h.size == f->h.size) {
		f->h = h;
		f->epoch++;
	} else {
		rc = CKPT_EBUSY;
	}
	ckpt__error_raise(&keep);
	ckpt__error_slot_clear(&keep);
	return rc;
}

static int get_range(s3_io *f, void *dst, size_t n, uint64_t off)
{
	for (int tries = 0;; tries++) {
		atomic_fetch_add(&stat_gets, 1);
		atomic_fetch_add(&stat_get_bytes, n);
		char ifmatch[160];
		pthread_mutex_lock(&f->pin_mu);
		unsigned epoch = f->epoch;
		snprintf(ifmatch, sizeof(ifmatch), "If-Match: %s", f->h.etag);
		pthread_mutex_unlock(&f->pin_mu);
		const char *hdrs[] = { ifmatch, NULL };
		s3_request rq = { "GET", f->bucket, f->key, NULL, NULL, 0, ifmatch[10] ? hdrs : NULL, 1, 1, off, n, dst, 0 };
		s3_response rs;
		int rc = s3_perform(f->vfs->client, &rq, &rs);
		s3_response_clear(&rs);
		int again = 0;
		pthread_mutex_lock(&f->pin_mu);
		if (rc == CKPT_OK && epoch == f->epoch)
			f->confirmed = 1; /* from now on a 412 is a replacement mid-read */
		else if (rc == CKPT_OK)
			again = 1; /* bytes of the version the cache named: read under the new ETag */
		else if (rc == CKPT_EBUSY && !f->confirmed && tries < 2)
			again = epoch != f->epoch || (f->from_cache && revalidate(f) == CKPT_OK);
		pthread_mutex_unlock(&f->pin_mu);
		if (!again)
			return rc;
		ckpt_error_clear();
	}
}

typedef struct {
	s3_io *f;
	char *dst;
	uint64_t off;
	size_t n, chunk;
	size_t next, count;
	pthread_mutex_t mu;
	int failed;
	ckpt__error_slot err;
} par_read;

static void *range_worker(void *arg)
{
	par_read *pr = arg;
	for (;;) {
		pthread_mutex_lock(&pr->mu);
		size_t i = pr->failed ? pr->count : pr->next++;
		pthread_mutex_unlock(&pr->mu);
		if (i >= pr->count) {
			ckpt_error_clear(); /* a failure was copied into pr->err; the thread's own copy dies with it */
			return NULL;
		}
		/* range i: the i-th part-aligned block of the object that [off, off + n) touches, clipped to it */
		uint64_t first = pr->off / pr->chunk * pr->chunk;
		uint64_t lo = first + (uint64_t)i * pr->chunk, hi = lo + pr->chunk;
		if (lo < pr->off)
			lo = pr->off;
		if (hi > pr->off + pr->n)
			hi = pr->off + pr->n;
		size_t from = (size_t)(lo - pr->off), len = (size_t)(hi - lo);
		if (get_range(pr->f, pr->dst + from, len, pr->off + from) < 0) {
			pthread_mutex_lock(&pr->mu);
			if (!pr->failed) {
				pr->failed = 1;
				ckpt__error_capture(&pr->err);
			}
			pthread_mutex_unlock(&pr->mu);
		}
	}
}

/* n bytes at off, all inside the object: part-sized ranges, `parallel` at a time. */
static int get_parallel(s3_io *f, char *dst, size_t n, uint64_t off)
{
	const ckpt_s3_config *cfg = s3_client_config(f->vfs->client);
	if (n <= cfg->part_size)
		return get_range(f, dst, n, off);
	/* ranges on the object's part boundaries, as it was uploaded: each GET then reads one stored part */
	uint64_t ps = cfg->part_size, count = (off + n - 1) / ps - off / ps + 1;
	par_read pr = { f, dst, off, n, cfg->part_size, 0, (size_t)count, PTHREAD_MUTEX_INITIALIZER, 0, { 0 } };
	unsigned nt = cfg->parallel < pr.count ? cfg->parallel : (unsigned)pr.count;
	pthread_t th[64];
	unsigned started = 0;
	for (unsigned t = 1; t < nt; t++)
		if (pthread_create(&th[started], NULL, range_worker, &pr) == 0)
			started++;
	range_worker(&pr);
	for (unsigned t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	int rc = pr.failed ? ckpt__error_raise(&pr.err) : CKPT_OK;
	ckpt__error_slot_clear(&pr.err);
	pthread_mutex_destroy(&pr.mu);
	return rc;
}

static int load_whole(s3_io *f)
{
	if (f->window && f->win_off == 0 && f->win_len == f->h.size)
		return CKPT_OK;
	char *b = ckpt__malloc(f->h.size ? (size_t)f->h.size : 1);
	if (!b)
		return CKPT_ENOMEM;
	int rc = f->h.size ? get_parallel(f, b, (size_t)f->h.size, 0) : CKPT_OK;
	if (rc == CKPT_OK && f->h.meta_crc32c[0]) {
		uint32_t want = (uint32_t)strtoul(f->h.meta_crc32c, NULL, 16);
		uint32_t got = ckpt_crc32c_extend(0, b, (size_t)f->h.size);
		if (want != got)
			rc = ckpt__fail(CKPT_ECHECKSUM, f->base.path, NULL, -1,
				"crc32c mismatch: the object's metadata says 0x%08x, its bytes give 0x%08x", want, got);
	}
	if (rc < 0) {
		ckpt__free(b);
		return rc;
	}
	ckpt__free(f->window);
	f->window = b;
	f->win_off = 0;
	f->win_len = (size_t)f->h.size;
	pthread_mutex_lock(&f->pin_mu);
	s3_head h = f->h;
	unsigned epoch = f->epoch;
	pthread_mutex_unlock(&f->pin_mu);
	if (!epoch) /* read under the HEAD it was opened on */
		s3_op_cache_put(f->vfs->client, f->gen, f->bucket, f->key, &h, b, (size_t)h.size);
	return CKPT_OK;
}

static int s3_pread(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got)
{
	s3_io *f = (s3_io *)io;
	*got = 0;
	if (off >= f->h.size || n == 0)
		return CKPT_OK;
	if (n > f->h.size - off)
		n = (size_t)(f->h.size - off);
	int rc = CKPT_OK;
	if (f->h.size <= SMALL_OBJECT || n < SMALL_READ) {
		pthread_mutex_lock(&f->mu);
		if (f->h.size <= SMALL_OBJECT) {
			rc = load_whole(f);
		} else if (!f->window || off < f->win_off || off + n > f->win_off + f->win_len) {
			size_t len = f->h.size - off < WINDOW ? (size_t)(f->h.size - off) : WINDOW;
			char *w = f->window && f->win_len >= len ? f->window : ckpt__malloc(WINDOW);
			if (!w) {
				rc = CKPT_ENOMEM;
			} else {
				if (w != f->window)
					ckpt__free(f->window);
				f->window = w;
				f->win_len = 0;
				rc = get_range(f, w, len, off);
				if (rc == CKPT_OK) {
					f->win_off = off;
					f->win_len = len;
				}
			}
		}
		if (rc == CKPT_OK)
			memcpy(buf, f->window + (off - f->win_off), n);
		pthread_mutex_unlock(&f->mu);
	} else {
		rc = get_parallel(f, buf, n, off);
	}
	if (rc == CKPT_OK)
		*got = n;
	return rc;
}

static const void *s3_map(ckpt_io *io, uint64_t *size)
{
	s3_io *f = (s3_io *)io;
	if (f->writable || f->h.size > SMALL_OBJECT)
		return NULL;
	pthread_mutex_lock(&f->mu);
	int rc = load_whole(f);
	pthread_mutex_unlock(&f->mu);
	if (rc < 0)
		return NULL;
	*size = f->h.size;
	return f->window ? f->window : "";
}

void s3_head_of(s3_head *h, const s3_response *rs)
{
	memset(h, 0, sizeof(*h));
	h->size = rs->content_length;
	snprintf(h->etag, sizeof(h->etag), "%s", rs->etag);
	snprintf(h->meta_crc32c, sizeof(h->meta_crc32c), "%s", rs->meta_crc32c);
	snprintf(h->sum_crc32c, sizeof(h->sum_crc32c), "%s", rs->sum_crc32c);
	snprintf(h->sum_crc32, sizeof(h->sum_crc32), "%s", rs->sum_crc32);
	snprintf(h->sum_type, sizeof(h->sum_type), "%s", rs->sum_type);
	snprintf(h->sse, sizeof(h->sse), "%s", rs->sse);
}

static int s3_size(ckpt_io *io, uint64_t *out)
{
	s3_io *f = (s3_io *)io;
	*out = f->writable ? f->end : f->h.size;
	return CKPT_OK;
}

static int s3_sync(ckpt_io *io)
{
	(void)io; /* the object is made durable by close: it does not exist before */
	return CKPT_OK;
}

static void io_free(s3_io *f)
{
	for (size_t i = 0; i < f->nparts; i++)
		ckpt__free(f->parts[i].buf);
	ckpt__free(f->parts);
	ckpt__free(f->window);
	pthread_mutex_destroy(&f->mu);
	pthread_mutex_destroy(&f->pin_mu);
	ckpt__free(f->bucket);
	ckpt__free(f->key);
	ckpt__free(f->base.path);
	ckpt__free(f);
}

static int s3_close(ckpt_io *io)
{
	s3_io *f = (s3_io *)io;
	int rc = f->writable ? finish_write(f) : CKPT_OK;
	io_free(f);
	return rc;
}

static const ckpt_io_methods s3_io_methods = {
	CKPT_IO_METHODS_V2, s3_pread, s3_pwrite, s3_size, s3_sync, s3_close, s3_map, NULL, NULL, NULL
};

/*
 * Upload every byte written so far as parts of a multipart upload (one part
 * of any size is a valid upload) and wait until they are stored: only the
 * completion is left for close, and the object is not visible yet. A commit
 * stages every data object before it retires an older checkpoint's index.
 */
int ckpt__io_stage(ckpt_io *io)
{
	if (!io || io->methods != &s3_io_methods)
		return CKPT_OK;
	s3_io *f = (s3_io *)io;
	if (!f->writable || f->exclusive || f->abandoned || f->end == 0)
		return CKPT_OK;
	if (f->failed)
		return ckpt__fail(CKPT_EIO, io->path, NULL, -1, "not uploaded: an earlier write failed");
	size_t count = part_count(f);
	int rc = CKPT_OK;
	for (size_t i = 0; i < count && rc == CKPT_OK; i++)
		if (!f->parts[i].sent)
			rc = send_part(f, i);
	if (rc == CKPT_OK)
		rc = s3_upload_wait(f->upload);
	if (rc < 0)
		f->failed = 1;
	return rc;
}

/* ---- server-side copies appended to a writer (s3_copy.c) ---- */

uint64_t ckpt__io_open_part(const ckpt_io *io, uint64_t *part)
{
	if (!io || io->methods != &s3_io_methods || !((const s3_io *)io)->writable)
		return UINT64_MAX;
	const s3_io *f = (const s3_io *)io;
	*part = part_size(f);
	return (f->end - f->off0) % part_size(f);
}

int s3_io_copy_begin(ckpt_io *io, s3_upload **u, size_t *next)
{
	s3_io *f = (s3_io *)io;
	if (io->methods != &s3_io_methods || !f->writable || f->exclusive || f->failed || f->abandoned)
		return CKPT__DECLINED;
	/* the part being filled goes now: the copied parts follow it */
	size_t count = part_count(f);
	int rc = count > f->part0 && !f->parts[count - 1].sent ? send_part(f, count - 1) : CKPT_OK;
	if (rc == CKPT_OK && !f->upload)
		rc = s3_upload_begin(&f->upload, f->vfs->client, f->bucket, f->key);
	if (rc < 0) {
		f->failed = 1;
		return rc;
	}
	*u = f->upload;
	*next = count;
	return CKPT_OK;
}

int s3_io_copy_end(ckpt_io *io, size_t next, uint64_t n)
{
	s3_io *f = (s3_io *)io;
	if (next > f->nparts) {
		wpart *np = ckpt__realloc(f->parts, next * sizeof(*np));
		if (!np) {
			f->failed = 1;
			return CKPT_ENOMEM;
		}
		memset(np + f->nparts, 0, (next - f->nparts) * sizeof(*np));
		f->parts = np;
		f->nparts = next;
	}
	for (size_t i = f->part0; i < next; i++)
		f->parts[i].sent = 1;
	f->part0 = next;
	f->end += n;
	f->off0 = f->end;
	return CKPT_OK;
}

const s3_head *ckpt__s3_io_head(const ckpt_io *io)
{
	return io && io->methods == &s3_io_methods && !((const s3_io *)io)->writable ? &((const s3_io *)io)->h : NULL;
}

void ckpt__io_abandon(ckpt_io *io)
{
	if (io && io->methods == &s3_io_methods && ((s3_io *)io)->writable)
		((s3_io *)io)->abandoned = 1;
}

/* ---- the file system ---- */

static int split(const char *path, char **bucket, char **key)
{
	return ckpt_s3_path_split(bucket, key, path);
}

static const long quiet_404[] = { 404, 0 };

static int head(s3_client *c, const char *bucket, const char *key, s3_response *rs, int quiet)
{
	/* the object's stored checksums too (x-amz-checksum-*, a composite one for a multipart upload) */
	static const char *const mode[] = { "x-amz-checksum-mode: ENABLED", NULL };
	s3_request rq = { "HEAD", bucket, key, NULL, NULL, 0, mode, 1, 0, 0, 0, NULL, 0 };
	return s3_perform_quiet(c, &rq, rs, quiet ? quiet_404 : NULL);
}

/*
 * What a HEAD of bucket/key says (CKPT_OK with *h, CKPT_ENOTFOUND quietly,
 * or the failure), asked of the client's cache first and stored there.
 */
static int head_cached(s3_client *c, const char *bucket, const char *key, s3_head *h, int *from_cache)
{
	s3_cache *cache = s3_client_cache(c);
	int st = s3_cache_object(cache, bucket, key, h);
	if (from_cache)
		*from_cache = st != S3_CACHE_UNKNOWN;
	if (st != S3_CACHE_UNKNOWN)
		return st == S3_CACHE_PRESENT ? CKPT_OK : CKPT_ENOTFOUND;
	unsigned long gen = s3_cache_gen(cache);
	s3_response rs;
	int rc = head(c, bucket, key, &rs, 1);
	if (rc == CKPT_OK)
		s3_head_of(h, &rs);
	s3_response_clear(&rs);
	if (rc == CKPT_OK || rc == CKPT_ENOTFOUND)
		s3_cache_put_object(cache, gen, bucket, key, rc == CKPT_OK ? S3_CACHE_PRESENT : S3_CACHE_ABSENT, h);
	return rc;
}

static int vs3_open(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out)
{
	s3_io *f = ckpt__calloc(1, sizeof(*f));
	if (!f)
		return CKPT_ENOMEM;
	pthread_mutex_init(&f->mu, NULL);
	pthread_mutex_init(&f->pin_mu, NULL);
	f->base.methods = &s3_io_methods;
	f->vfs = (s3_vfs *)vfs;
	f->writable = (flags & CKPT_IO_WRITE) != 0;
	f->exclusive = f->writable && (flags & CKPT_IO_EXCL);
	int rc = (f->base.path = ckpt__strdup(path)) ? split(path, &f->bucket, &f->key) : CKPT_ENOMEM;
	if (rc == CKPT_OK && !f->key[0])
		rc = ckpt__fail(CKPT_EINVAL, path, NULL, -1, "names a bucket, expected an object");
	char *whole = NULL;
	if (rc == CKPT_OK && !f->writable) {
		f->gen = s3_cache_gen(s3_client_cache(client_of(vfs)));
		if (s3_op_cache_get(client_of(vfs), f->bucket, f->key, &f->h, &whole)) {
			f->window = whole; /* this operation read it whole already */
			f->win_len = (size_t)f->h.size;
			f->confirmed = 1;
		} else {
			rc = head_cached(client_of(vfs), f->bucket, f->key, &f->h, &f->from_cache);
		}
		if (rc == CKPT_ENOTFOUND)
			rc = ckpt__fail(CKPT_ENOTFOUND, path, NULL, -1, "cannot open: no such object (HTTP status 404)");
	}
	if (rc < 0) {
		io_free(f);
		return rc;
	}
	*out = &f->base;
	return CKPT_OK;
}

/*
 * One DELETE: S3 answers a DELETE of a missing key with success, so asking
 * first (a HEAD per object: a retention of two objects took 6 requests,
 * now 4) would only turn that into CKPT_ENOTFOUND, which every caller takes
 * as done. An absence this client's cache already knows is still reported.
 */
static int vs3_remove(ckpt_vfs *vfs, const char *path)
{
	char *bucket, *key;
	CKPT_TRY(split(path, &bucket, &key));
	s3_response rs;
	int rc = CKPT_OK;
	if (!key[0])
		rc = ckpt__fail(CKPT_EINVAL, path, NULL, -1, "names a bucket, expected an object");
	else if (s3_cache_object(s3_client_cache(client_of(vfs)), bucket, key, NULL) == S3_CACHE_ABSENT)
		rc = ckpt__fail(CKPT_ENOTFOUND, path, NULL, -1, "remove failed: no such object");
	if (rc == CKPT_OK) {
		s3_request rq = { "DELETE", bucket, key, NULL, NULL, 0, NULL, 1, 0, 0, 0, NULL, 0 };
		rc = s3_perform(client_of(vfs), &rq, &rs);
		s3_response_clear(&rs);
	}
	ckpt__free(bucket);
	ckpt__free(key);
	return rc;
}

static int vs3_rename(ckpt_vfs *vfs, const char *from, const char *to)
{
	char *fb, *fk, *tb, *tk;
	CKPT_TRY(split(from, &fb, &fk));
	int rc = split(to, &tb, &tk);
	if (rc < 0) {
		ckpt__free(fb);
		ckpt__free(fk);
		return rc;
	}
	rc = s3_name_check(fb, fk);
	char *src = rc == CKPT_OK ? s3_uri_encode(fk, 1) : NULL;
	char *hdr = src ? ckpt__asprintf("x-amz-copy-source: /%s/%s", fb, src) : NULL;
	if (!hdr) {
		rc = rc < 0 ? rc : CKPT_ENOMEM;
	} else {
		const char *hdrs[] = { hdr, NULL };
		s3_request rq = { "PUT", tb, tk, NULL, NULL, 0, hdrs, 1, 0, 0, 0, NULL, 0 };
		s3_response rs;
		rc = s3_perform(client_of(vfs), &rq, &rs);
		if (rc == CKPT_OK && rs.body && strstr(rs.body, "<Error>"))
			rc = ckpt__fail(CKPT_EIO, to, NULL, -1, "copy from '%s' failed (HTTP status 200 with an error body)",
				from);
		s3_response_clear(&rs);
	}
	if (rc == CKPT_OK)
		rc = vs3_remove(vfs, from);
	ckpt__free(src);
	ckpt__free(hdr);
	ckpt__free(fb);
	ckpt__free(fk);
	ckpt__free(tb);
	ckpt__free(tk);
	return rc;
}

typedef struct {
	char **v;
	size_t n, cap;
} name_list;

static int push_name(name_list *l, const char *s, size_t len)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 32;
		char **nv = ckpt__realloc(l->v, cap * sizeof(*nv));
		if (!nv)
			return CKPT_ENOMEM;
		l->v = nv;
		l->cap = cap;
	}
	if (!(l->v[l->n] = ckpt__strndup(s, len)))
		return CKPT_ENOMEM;
	l->n++;
	return CKPT_OK;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * One name of a listing of `pfx` (a Key, or a CommonPrefix with its '/'):
 * what follows the prefix. A server's answer is not trusted to stay under
 * it: a key outside the prefix, or a name that is a path of its own
 * ("..", ".", "a/b"), would make a caller that joins it to the directory
 * act on another key (delete it, in retention): refused.
 */
static int push_listed(name_list *out, const char *path, const char *pfx, const char *s, int common)
{
	size_t plen = strlen(pfx), l = strlen(s);
	if (strncmp(s, pfx, plen) != 0)
		return ckpt__fail(CKPT_EFORMAT, path, NULL, -1,
			"the listing names key '%s', outside the prefix '%s' that was asked for", s, pfx);
	const char *name = s + plen;
	size_t n = l - plen - (common && l > plen && s[l - 1] == '/');
	if (n == 0)
		return CKPT_OK; /* the prefix's own "directory" marker */
	if (memchr(name, '/', n) || (n == 1 && name[0] == '.') || (n == 2 && name[0] == '.' && name[1] == '.'))
		return ckpt__fail(CKPT_EFORMAT, path, NULL, -1,
			"the listing names key '%s', which is not one name under the prefix '%s'", s, pfx);
	return push_name(out, name, n);
}

/*
 * Names under bucket/prefix/ (objects and sub-prefixes), `max` at most
 * (0: all). Objects whose name holds a '/' after the prefix show as one
 * directory name, as ListObjectsV2 with delimiter '/' reports them.
 * A continuation token repeated, or more than CKPT_MAX_S3_LIST_PAGES pages,
 * is an error: a server that never ends a listing must not hang us.
 */
static int list_prefix(s3_client *c, const char *path, const char *bucket, const char *prefix, size_t max,
	name_list *out)
{
	char *pfx = prefix[0] ? ckpt__asprintf("%s/", prefix) : ckpt__strdup("");
	char *epfx = pfx ? s3_uri_encode(pfx, 0) : NULL;
	char *token = NULL;
	unsigned pages = 0;
	int rc = epfx ? CKPT_OK : CKPT_ENOMEM;
	while (rc == CKPT_OK) {
		if (++pages > CKPT_MAX_S3_LIST_PAGES) {
			rc = ckpt__fail(CKPT_ELIMIT, path, NULL, -1,
				"cannot list: the server is still answering 'more' after %u pages (CKPT_MAX_S3_LIST_PAGES)",
				CKPT_MAX_S3_LIST_PAGES);
			break;
		}
		char *etok = token ? s3_uri_encode(token, 0) : NULL;
		char *query = ckpt__asprintf("%s%s%sdelimiter=%%2F&list-type=2&max-keys=%zu&prefix=%s",
			etok ? "continuation-token=" : "", etok ? etok : "", etok ? "&" : "", max ? max : 1000, epfx);
		ckpt__free(etok);
		s3_response rs;
		rc = s3_get_listing(c, bucket, query, &rs);
		if (rc == CKPT_ENOTFOUND)
			rc = ckpt__fail(CKPT_ENOTFOUND, path, NULL, -1, "cannot list: no such bucket (HTTP status 404, %s)",
				rs.code[0] ? rs.code : "no S3 error code");
		if (rc == CKPT_OK && (!rs.body || !strstr(rs.body, "<ListBucketResult")))
			rc = ckpt__fail(CKPT_EFORMAT, path, NULL, -1,
				"cannot list: HTTP status %ld but the body is not a ListBucketResult", rs.status);
		const char *pos = NULL;
		char *s;
		/* <Key> inside <Contents>, <Prefix> inside <CommonPrefixes> (the top-level <Prefix> is ours) */
		while (rc == CKPT_OK && (s = s3_xml_next(rs.body, "Key", &pos))) {
			rc = push_listed(out, path, pfx, s, 0);
			ckpt__free(s);
		}
		const char *cp = rc == CKPT_OK ? strstr(rs.body, "<CommonPrefixes>") : NULL;
		pos = cp;
		while (rc == CKPT_OK && cp && (s = s3_xml_next(rs.body, "Prefix", &pos))) {
			rc = push_listed(out, path, pfx, s, 1);
			ckpt__free(s);
		}
		char *trunc = rc == CKPT_OK ? s3_xml_next(rs.body, "IsTruncated", NULL) : NULL;
		int more = trunc && strcmp(trunc, "true") == 0;
		ckpt__free(trunc);
		char *next = more ? s3_xml_next(rs.body, "NextContinuationToken", NULL) : NULL;
		s3_response_clear(&rs);
		if (rc == CKPT_OK && more && (!next || !next[0] || (token && strcmp(next, token) == 0)))
			rc = ckpt__fail(CKPT_EFORMAT, path, NULL, -1,
				"cannot list: the server says the listing goes on but gives %s continuation token",
				next && next[0] ? "the same" : "no");
		ckpt__free(token);
		token = next;
		if (rc < 0 || !token || (max && out->n >= max))
			break;
	}
	ckpt__free(token);
	ckpt__free(epfx);
	ckpt__free(pfx);
	return rc;
}

static int vs3_list(ckpt_vfs *vfs, const char *dir, char ***names, size_t *count)
{
	char *bucket, *key;
	CKPT_TRY(split(dir, &bucket, &key));
	name_list l = { NULL, 0, 0 };
	int rc = list_prefix(client_of(vfs), dir, bucket, key, 0, &l);
	ckpt__free(bucket);
	ckpt__free(key);
	if (rc < 0) {
		ckpt_vfs_free_list(l.v, l.n);
		return rc;
	}
	if (l.n)
		qsort(l.v, l.n, sizeof(*l.v), cmp_names);
	*names = l.v;
	*count = l.n;
	return CKPT_OK;
}

/*
 * 1 (an object, or a prefix with something under it), 0 (HEAD answered 404
 * and a listing answered nothing), or the failure: a HEAD that failed any
 * other way (403, 5xx after the retries, a refused connection, a redirect)
 * is not "absent", or a short outage would make a trainer start afresh.
 */
static int vs3_exists(ckpt_vfs *vfs, const char *path, int *is_dir)
{
	char *bucket, *key;
	int dummy;
	if (!is_dir)
		is_dir = &dummy;
	*is_dir = 0;
	CKPT_TRY(split(path, &bucket, &key));
	int rc = CKPT_OK, found = 0;
	if (!key[0]) {
		*is_dir = 1;
		found = 1;
	} else {
		s3_head h;
		s3_cache *cache = s3_client_cache(client_of(vfs));
		rc = head_cached(client_of(vfs), bucket, key, &h, NULL);
		if (rc == CKPT_OK) {
			found = 1;
		} else if (rc == CKPT_ENOTFOUND) {
			int st = s3_cache_dir(cache, bucket, key);
			rc = CKPT_OK;
			if (st == S3_CACHE_UNKNOWN) {
				unsigned long gen = s3_cache_gen(cache);
				name_list l = { NULL, 0, 0 };
				rc = list_prefix(client_of(vfs), path, bucket, key, 1, &l);
				st = l.n ? S3_CACHE_PRESENT : S3_CACHE_ABSENT;
				if (rc == CKPT_OK)
					s3_cache_put_dir(cache, gen, bucket, key, st);
				ckpt_vfs_free_list(l.v, l.n);
			}
			if (rc == CKPT_OK && st == S3_CACHE_PRESENT)
				found = *is_dir = 1;
		}
	}
	ckpt__free(bucket);
	ckpt__free(key);
	return rc < 0 ? rc : found;
}

int ckpt__s3_object_exists(ckpt_vfs *vfs, const char *path)
{
	char *bucket, *key;
	CKPT_TRY(split(path, &bucket, &key));
	s3_head h;
	int rc = key[0] ? head_cached(client_of(vfs), bucket, key, &h, NULL) : CKPT_ENOTFOUND;
	ckpt__free(bucket);
	ckpt__free(key);
	return rc == CKPT_OK ? 1 : rc == CKPT_ENOTFOUND ? 0 : rc;
}

static int vs3_nothing(ckpt_vfs *vfs, const char *dir)
{
	(void)vfs;
	(void)dir;
	return CKPT_OK;
}

static void vs3_destroy(ckpt_vfs *vfs)
{
	s3_vfs *v = (s3_vfs *)vfs;
	s3_client_free(v->client);
	ckpt__free(v);
}

static const ckpt_vfs_methods s3_vfs_methods = {
	CKPT_VFS_METHODS_V2, vs3_open, vs3_rename, vs3_remove, vs3_exists, vs3_nothing, vs3_list, vs3_nothing,
	vs3_destroy, CKPT_VFS_CAP_NO_RENAME | CKPT_VFS_CAP_EXCL, NULL, ckpt__s3_lock, ckpt__s3_unlock
};

int ckpt__vfs_is_s3(const ckpt_vfs *vfs)
{
	return vfs && vfs->methods == &s3_vfs_methods;
}

s3_client *ckpt__vfs_s3_client(ckpt_vfs *vfs)
{
	return ckpt__vfs_is_s3(vfs) ? client_of(vfs) : NULL;
}

int ckpt_vfs_s3_new(ckpt_vfs **out, const ckpt_s3_config *cfg)
{
	s3_vfs *v = ckpt__calloc(1, sizeof(*v));
	if (!v)
		return CKPT_ENOMEM;
	int rc = s3_client_new(&v->client, cfg);
	if (rc < 0) {
		ckpt__free(v);
		return rc;
	}
	v->base.methods = &s3_vfs_methods;
	*out = &v->base;
	return CKPT_OK;
}

static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static ckpt_vfs *shared;

static int vfs_s3_shared_rc(ckpt_vfs **out)
{
	pthread_mutex_lock(&shared_mu);
	int rc = CKPT_OK;
	if (!shared) {
		ckpt_s3_config *cfg;
		rc = ckpt_s3_config_load(&cfg);
		if (rc == CKPT_OK) {
			rc = ckpt_vfs_s3_new(&shared, cfg);
			ckpt_s3_config_free(cfg);
		}
	}
	pthread_mutex_unlock(&shared_mu);
	if (rc == CKPT_OK)
		*out = shared;
	return rc;
}

ckpt_vfs *ckpt_vfs_s3_shared(void)
{
	ckpt_vfs *out = NULL;
	int rc = vfs_s3_shared_rc(&out);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}

int ckpt__vfs_is_shared_s3(const ckpt_vfs *vfs)
{
	pthread_mutex_lock(&shared_mu);
	int is = vfs && vfs == shared;
	pthread_mutex_unlock(&shared_mu);
	return is;
}

ckpt_vfs *ckpt_vfs_for_path(ckpt_vfs *given, const char *path)
{
	if (given)
		return given;
	return ckpt_path_is_s3(path) ? ckpt_vfs_s3_shared() : ckpt_vfs_default();
}

/* The S3 client (s3_client.c), multipart uploads (s3_multipart.c) and the VFS (io_s3.c). */
#ifndef CKPT_S3_INTERNAL_H
#define CKPT_S3_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt/s3.h"

typedef struct s3_client s3_client;

/* s3_request.idempotent: how a request may be repeated. */
enum {
	S3_ONCE = 0,     /* a repeat could redo an effect (conditional create, initiate, complete) */
	S3_RETRIED = 1,  /* tried up to cfg->max_attempts times */
	S3_CLEANUP = 2   /* undoes work (an upload's abort, the lock's release): tried at least S3_CLEANUP_ATTEMPTS
			    times even when max_attempts is lower, since a refusal would leave it behind */
};
#define S3_CLEANUP_ATTEMPTS 5u

/** One request. Strings are borrowed. */
typedef struct s3_request {
	const char *method;      /* GET HEAD PUT POST DELETE */
	const char *bucket;
	const char *key;         /* "" for the bucket itself */
	const char *query;       /* sorted, encoded, without '?'; NULL when none */
	const void *body;        /* PUT / POST payload */
	size_t body_len;
	const char *const *headers; /* extra "Name: value" headers, NULL-terminated; may be NULL */
	int idempotent;          /* S3_RETRIED or S3_CLEANUP: retried on 5xx, SlowDown, timeouts and resets; 0: tried once */
	int has_range;
	uint64_t range_off;
	size_t range_len;
	void *dst;               /* GET: the body goes here (exactly range_len bytes expected) */
	int want_md5;            /* send Content-MD5 of the body */
} s3_request;

typedef struct s3_response {
	long status;
	char *body;              /* the body when no dst was given (NUL-terminated, owned) */
	size_t body_len;
	uint64_t content_length; /* from the headers (HEAD) */
	char etag[128];
	char meta_crc32c[16];    /* x-amz-meta-ckpt-crc32c when present */
	char sum_crc32c[48];     /* x-amz-checksum-crc32c ("b64" or, composite, "b64-N"), when the server gives it */
	char sum_crc32[48];      /* x-amz-checksum-crc32, likewise */
	char sum_type[24];       /* x-amz-checksum-type: FULL_OBJECT or COMPOSITE ("" when absent) */
	char sse[48];            /* x-amz-server-side-encryption ("aws:kms"), or "SSE-C": then the ETag may be no MD5 */
	long parts_count;        /* x-amz-mp-parts-count of a HEAD with partNumber (0: none) */
	char code[64];           /* the S3 error code of a failed request ("NoSuchKey") */
	char location[256];      /* a redirect's Location (never followed) */
	unsigned attempts;       /* tries this answer took (a retried effect may have happened before it) */
	long long date;          /* the server's Date header, seconds since the epoch (0: none) */
	long long last_modified; /* Last-Modified (0: none) */
} s3_response;

/** What a HEAD said of an object: an open reader keeps it, and the client's cache (s3_cache.c). */
typedef struct s3_head {
	uint64_t size;
	char etag[128];
	char meta_crc32c[16];
	char sum_crc32c[48], sum_crc32[48], sum_type[24], sse[48];
} s3_head;
/** The header fields of a HEAD's answer. */
void s3_head_of(s3_head *h, const s3_response *rs);
/** What the HEAD of the S3 reader `io` said; NULL for any other file (io_s3.c). */
const s3_head *ckpt__s3_io_head(const ckpt_io *io);

/* ---- what this client's HEADs and probing listings said, for a few seconds (s3_cache.c) ---- */
typedef struct s3_cache s3_cache;
enum { S3_CACHE_UNKNOWN = 0, S3_CACHE_ABSENT = 1, S3_CACHE_PRESENT = 2 };
/** A cache whose answers live `ttl_seconds`; *out NULL (every lookup misses) for 0. */
int s3_cache_new(s3_cache **out, unsigned ttl_seconds);
void s3_cache_free(s3_cache *c);
/** Changes counted so far: pass it to a put, read before the request whose answer is stored. */
unsigned long s3_cache_gen(s3_cache *c);
/** Whether an object is at bucket/key (S3_CACHE_*); *h filled when PRESENT (h may be NULL). */
int s3_cache_object(s3_cache *c, const char *bucket, const char *key, s3_head *h);
/** Whether anything is under bucket/key/ (S3_CACHE_*). */
int s3_cache_dir(s3_cache *c, const char *bucket, const char *key);
void s3_cache_put_object(s3_cache *c, unsigned long gen, const char *bucket, const char *key, int state,
	const s3_head *h);
void s3_cache_put_dir(s3_cache *c, unsigned long gen, const char *bucket, const char *key, int state);
/** Forget the object at bucket/key and the directory answers of its parents (a write, a delete, a failed read). */
void s3_cache_forget(s3_cache *c, const char *bucket, const char *key);

/* ---- the small objects one operation read whole, for that operation (s3_op_cache.c) ---- */
/** 1 with *h and a fresh copy of the bytes (*bytes, h->size of them) when this thread's operation read bucket/key. */
int s3_op_cache_get(s3_client *client, const char *bucket, const char *key, s3_head *h, char **bytes);
/** Keep `bytes` (the whole object under `h`), read with no change counted since `gen`, for the operation. */
void s3_op_cache_put(s3_client *client, unsigned long gen, const char *bucket, const char *key, const s3_head *h,
	const char *bytes, size_t n);

int s3_client_new(s3_client **out, const ckpt_s3_config *cfg);
void s3_client_free(s3_client *c);
const ckpt_s3_config *s3_client_config(const s3_client *c);
/** The client's cache (NULL when CKPT_S3_CACHE_SECONDS=0). */
s3_cache *s3_client_cache(s3_client *c);

/**
 * Send `rq`, retrying idempotent requests with backoff and jitter. A 2xx
 * returns CKPT_OK; a 404 CKPT_ENOTFOUND; 412 CKPT_EBUSY; anything else
 * CKPT_EIO. Every failure's message names the bucket, key, HTTP status and
 * S3 error code. `rs` is filled either way; free it with s3_response_clear.
 */
int s3_perform(s3_client *c, const s3_request *rq, s3_response *rs);
/** Same, with no error recorded for the statuses listed in `quiet` (0-terminated). */
int s3_perform_quiet(s3_client *c, const s3_request *rq, s3_response *rs, const long *quiet);
void s3_response_clear(s3_response *rs);
/** One page of a bucket listing: GET of the bucket with `query` (owned, freed; NULL: CKPT_ENOMEM), retried. */
int s3_get_listing(s3_client *c, const char *bucket, char *query, s3_response *rs);

/** The text of the first <tag>…</tag> in xml from *pos on (advances *pos), NULL when none. Caller frees. */
char *s3_xml_next(const char *xml, const char *tag, const char **pos);
/**
 * CKPT_OK when a request may name bucket/key: the bucket is a bucket name and
 * no segment of the key is "." or ".." (sent as is, such a key could be
 * resolved by a server or proxy into another key, or another bucket).
 * s3_perform refuses every request that fails it, before sending anything.
 */
int s3_name_check(const char *bucket, const char *key);
/** The length of the first "." or ".." segment of `key` (set *seg to it), 0 when none (s3_config.c). */
size_t s3_dot_segment(const char *key, const char **seg);
/** Percent-encode `s` for a URI path (keep_slash) or a query value. Caller frees. */
char *s3_uri_encode(const char *s, int keep_slash);

/** An unsigned knob from the environment in [min, max] (dflt when unset); CKPT_EINVAL naming it otherwise (s3_config.c). */
int s3_env_unsigned(const char *name, unsigned long min, unsigned long max, unsigned long dflt, unsigned long *out);
/** The client of an S3 VFS (io_s3.c), NULL for any other VFS. */
s3_client *ckpt__vfs_s3_client(ckpt_vfs *vfs);

/* ---- the one-writer lock of a prefix (s3_lock.c), ckpt_vfs_methods.lock of the S3 VFS ---- */
/**
 * CKPT_OK when the server honours If-None-Match and If-Match on PUT (probed
 * once per endpoint and bucket under `prefix`, cached); 1 when it does not
 * and CKPT_S3_SINGLE_WRITER=1 (the caller takes no lock object); else
 * CKPT_EUNSUPPORTED naming `dir` and what the server lacks (s3_conditional.c).
 */
int s3_conditional_writes_check(s3_client *c, const char *bucket, const char *prefix, const char *dir);
int ckpt__s3_lock(void **token, ckpt_vfs *vfs, const char *dir);
void ckpt__s3_unlock(ckpt_vfs *vfs, void *token);

/* ---- unfinished uploads (s3_upload_list.c) ---- */
/** The uploads whose key starts with `dir` (a raw string prefix; "" for the bucket); errors name `prefix` (s3_upload_list.c). */
int s3_uploads_list_raw(ckpt_s3_upload **uploads, size_t *count, s3_client *c, const char *prefix,
	const char *bucket, const char *dir);

/* ---- multipart uploads (s3_multipart.c) ---- */
typedef struct s3_upload s3_upload;
/** Begin an upload of bucket/key. Parts are sent by up to cfg->parallel threads. */
int s3_upload_begin(s3_upload **out, s3_client *c, const char *bucket, const char *key);
/** Queue part `number` (1-based); takes ownership of `buf` (ckpt__malloc'ed). Blocks while parallel parts are in flight. */
int s3_upload_part(s3_upload *u, int number, void *buf, size_t n);
/** Wait until every part queued so far is stored (CKPT_OK) or one failed (its error); the upload stays open. */
int s3_upload_wait(s3_upload *u);
/** Wait for every part and complete the upload; on any failure abort it. Frees `u`. */
int s3_upload_finish(s3_upload *u, uint32_t crc32c);
/** Abort (best effort) and free. */
void s3_upload_abort(s3_upload *u);
/** The client, bucket, key and UploadId of `u` (borrowed): s3_copy.c sends its copied parts. */
void s3_upload_target(const s3_upload *u, s3_client **c, const char **bucket, const char **key, const char **id);
/** Record part `number`, stored by another request (UploadPartCopy), for the completion. */
int s3_upload_add_part(s3_upload *u, int number, const char *etag, const char *crc32c_b64);

/* ---- server-side copies appended to an S3 writer (io_s3.c keeps the parts, s3_copy.c sends the requests) ---- */
/**
 * Send the part being filled and begin the upload if needed: the next part
 * (0-based index *next) may be a copy. CKPT__DECLINED for a writer that
 * cannot take one (an exclusive create, a failed or abandoned writer).
 */
int s3_io_copy_begin(ckpt_io *io, s3_upload **u, size_t *next);
/** Parts up to index `next` (exclusive) are stored, the copied ones holding n bytes: writes go on after them. */
int s3_io_copy_end(ckpt_io *io, size_t next, uint64_t n);

#endif

/*
 * Multipart uploads: parts sent by up to cfg->parallel threads, each with
 * its x-amz-checksum-crc32c (the upload is created with that algorithm and
 * completed with every part's) so the server refuses damaged bytes: SeaweedFS
 * answers a part whose bytes do not match with 400 BadDigest, as S3 does.
 * crc32c rather than Content-MD5: the CPU computes it at memory speed. Memory: at most
 * parallel parts are queued or in flight (parallel × part_size bytes); a
 * writer that fills one more blocks until a part is sent. A failed part fails
 * the whole upload, which is then aborted so no orphan parts stay billed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "libckpt/storage/s3/s3_lib.h"
#include "internal.h"
#include "s3_internal.h"

static const long quiet_404[] = { 404, 0 };

typedef struct part {
	int number;
	void *buf;
	size_t n;
	struct part *next;
} part;

typedef struct {
	int number;
	char etag[128];
	char crc32c[16];         /* base64 of the part's big-endian crc32c */
} done_part;

/* x-amz-checksum-crc32c's value: base64 of the 4 big-endian bytes (8 characters and a NUL). */
static void crc32c_b64(char out[16], const void *buf, size_t n)
{
	uint32_t c = ckpt_crc32c_extend(0, buf, n);
	unsigned char be[4] = { (unsigned char)(c >> 24), (unsigned char)(c >> 16), (unsigned char)(c >> 8),
		(unsigned char)c };
	EVP_EncodeBlock((unsigned char *)out, be, 4);
}

struct s3_upload {
	s3_client *c;
	char *bucket, *key, *upload_id;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	part *queue, *queue_tail;
	unsigned pending;        /* queued + in flight */
	unsigned limit;
	pthread_t *threads;
	unsigned nthreads;
	int stopping;
	done_part *done;
	size_t ndone, done_cap;
	int failed;
	ckpt__error_slot err;
};

static void *worker(void *arg)
{
	s3_upload *u = arg;
	for (;;) {
		pthread_mutex_lock(&u->mu);
		while (!u->queue && !u->stopping)
			pthread_cond_wait(&u->cv, &u->mu);
		part *p = u->queue;
		if (!p) {
			pthread_mutex_unlock(&u->mu);
			ckpt_error_clear(); /* a failure was copied into u->err; the thread's own copy dies with it */
			return NULL;
		}
		u->queue = p->next;
		if (!u->queue)
			u->queue_tail = NULL;
		int skip = u->failed;
		pthread_mutex_unlock(&u->mu);

		int rc = CKPT_OK;
		s3_response rs;
		memset(&rs, 0, sizeof(rs));
		char crc[16] = "";
		if (!skip) {
			char query[1024], hdr[64];
			char *id = s3_uri_encode(u->upload_id, 0);
			snprintf(query, sizeof(query), "partNumber=%d&uploadId=%s", p->number, id ? id : "");
			ckpt__free(id);
			crc32c_b64(crc, p->buf, p->n);
			snprintf(hdr, sizeof(hdr), "x-amz-checksum-crc32c: %s", crc);
			const char *hdrs[] = { hdr, NULL };
			s3_request rq = { "PUT", u->bucket, u->key, query, p->buf, p->n, hdrs, 1, 0, 0, 0, NULL, 0 };
			rc = s3_perform(u->c, &rq, &rs);
		}
		pthread_mutex_lock(&u->mu);
		if (!skip && rc < 0 && !u->failed) {
			u->failed = 1;
			ckpt__error_capture(&u->err);
		} else if (!skip && rc == CKPT_OK) {
			if (u->ndone == u->done_cap) {
				size_t cap = u->done_cap ? 2 * u->done_cap : 64;
				done_part *nd = ckpt__realloc(u->done, cap * sizeof(*nd));
				if (nd) {
					u->done = nd;
					u->done_cap = cap;
				}
			}
			if (u->ndone < u->done_cap) {
				u->done[u->ndone].number = p->number;
				snprintf(u->done[u->ndone].etag, sizeof(u->done[0].etag), "%s", rs.etag);
				memcpy(u->done[u->ndone].crc32c, crc, sizeof(crc));
				u->ndone++;
			} else if (!u->failed) {
				u->failed = 1;
				ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory recording part %d", p->number);
				ckpt__error_capture(&u->err);
			}
		}
		u->pending--;
		pthread_cond_broadcast(&u->cv);
		pthread_mutex_unlock(&u->mu);
		s3_response_clear(&rs);
		ckpt__free(p->buf);
		ckpt__free(p);
	}
}

static void abort_one(s3_client *c, const char *bucket, const char *key, const char *upload_id)
{
	char *id = s3_uri_encode(upload_id, 0);
	char *query = id ? ckpt__asprintf("uploadId=%s", id) : NULL;
	if (query) {
		s3_request rq = { "DELETE", bucket, key, query, NULL, 0, NULL, S3_CLEANUP, 0, 0, 0, NULL, 0 };
		s3_response rs;
		s3_perform(c, &rq, &rs);
		s3_response_clear(&rs);
	}
	ckpt__free(query);
	ckpt__free(id);
}

/*
 * A CreateMultipartUpload that took several tries may have created uploads
 * whose answers were lost: abort every other upload of this very key (the
 * prefix's lock makes us its only writer). Best effort: what is left is
 * what `ckpt s3 uploads abort` lists.
 */
static void abort_orphans(s3_upload *u)
{
	ckpt__error_slot keep = { 0 };
	ckpt__error_capture(&keep);
	ckpt_s3_upload *list = NULL;
	size_t n = 0;
	if (s3_uploads_list_raw(&list, &n, u->c, u->key, u->bucket, u->key) == CKPT_OK)
		for (size_t i = 0; i < n; i++)
			if (strcmp(list[i].key, u->key) == 0 && strcmp(list[i].upload_id, u->upload_id) != 0)
				abort_one(u->c, u->bucket, u->key, list[i].upload_id);
	ckpt_s3_uploads_free(list, n);
	ckpt__error_raise(&keep);
	ckpt__error_slot_clear(&keep);
}

int s3_upload_begin(s3_upload **out, s3_client *c, const char *bucket, const char *key)
{
	s3_upload *u = ckpt__calloc(1, sizeof(*u));
	if (!u)
		return CKPT_ENOMEM;
	u->c = c;
	u->bucket = ckpt__strdup(bucket);
	u->key = ckpt__strdup(key);
	u->limit = s3_client_config(c)->parallel;
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	if (!u->bucket || !u->key) {
		s3_upload_abort(u);
		return CKPT_ENOMEM;
	}
	/* retried: an upload a lost answer created is aborted below, once we hold one of our own */
	static const char *const algo[] = { "x-amz-checksum-algorithm: CRC32C", NULL };
	s3_request rq = { "POST", bucket, key, "uploads=", NULL, 0, algo, S3_RETRIED, 0, 0, 0, NULL, 0 };
	s3_response rs;
	int rc = s3_perform(c, &rq, &rs);
	if (rc == CKPT_OK) {
		u->upload_id = rs.body ? s3_xml_next(rs.body, "UploadId", NULL) : NULL;
		if (!u->upload_id)
			rc = ckpt__fail(CKPT_EIO, NULL, NULL, -1,
				"s3://%s/%s: CreateMultipartUpload answered without an UploadId", bucket, key);
	}
	if (rc == CKPT_OK && rs.attempts > 1)
		abort_orphans(u);
	s3_response_clear(&rs);
	if (rc < 0) {
		s3_upload_abort(u);
		return rc;
	}
	*out = u;
	return CKPT_OK;
}

int s3_upload_part(s3_upload *u, int number, void *buf, size_t n)
{
	part *p = ckpt__calloc(1, sizeof(*p));
	if (!p) {
		ckpt__free(buf);
		return CKPT_ENOMEM;
	}
	p->number = number;
	p->buf = buf;
	p->n = n;
	pthread_mutex_lock(&u->mu);
	/* threads are started as parts arrive, up to the limit */
	if (u->nthreads < u->limit && u->nthreads <= u->pending) {
		if (!u->threads)
			u->threads = ckpt__calloc(u->limit, sizeof(pthread_t));
		if (u->threads && pthread_create(&u->threads[u->nthreads], NULL, worker, u) == 0)
			u->nthreads++;
	}
	while (u->pending >= u->limit && !u->failed)
		pthread_cond_wait(&u->cv, &u->mu);
	int rc = CKPT_OK;
	if (u->failed || u->nthreads == 0) {
		if (!u->failed)
			rc = ckpt__fail(CKPT_ERROR, NULL, NULL, -1, "s3://%s/%s: cannot start an upload thread", u->bucket,
				u->key);
		else
			rc = ckpt__error_raise(&u->err);
		pthread_mutex_unlock(&u->mu);
		ckpt__free(p->buf);
		ckpt__free(p);
		return rc;
	}
	if (u->queue_tail)
		u->queue_tail->next = p;
	else
		u->queue = p;
	u->queue_tail = p;
	u->pending++;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	return CKPT_OK;
}

int s3_upload_wait(s3_upload *u)
{
	pthread_mutex_lock(&u->mu);
	while (u->pending > 0 && !u->failed)
		pthread_cond_wait(&u->cv, &u->mu);
	int rc = u->failed ? ckpt__error_raise(&u->err) : CKPT_OK;
	pthread_mutex_unlock(&u->mu);
	return rc;
}

void s3_upload_target(const s3_upload *u, s3_client **c, const char **bucket, const char **key, const char **id)
{
	*c = u->c;
	*bucket = u->bucket;
	*key = u->key;
	*id = u->upload_id;
}

int s3_upload_add_part(s3_upload *u, int number, const char *etag, const char *crc32c_b64)
{
	pthread_mutex_lock(&u->mu);
	int rc = CKPT_OK;
	if (u->ndone == u->done_cap) {
		size_t cap = u->done_cap ? 2 * u->done_cap : 64;
		done_part *nd = ckpt__realloc(u->done, cap * sizeof(*nd));
		if (nd) {
			u->done = nd;
			u->done_cap = cap;
		} else {
			rc = CKPT_ENOMEM;
		}
	}
	if (rc == CKPT_OK) {
		u->done[u->ndone].number = number;
		snprintf(u->done[u->ndone].etag, sizeof(u->done[0].etag), "%s", etag);
		snprintf(u->done[u->ndone].crc32c, sizeof(u->done[0].crc32c), "%s", crc32c_b64);
		u->ndone++;
	}
	pthread_mutex_unlock(&u->mu);
	return rc;
}

static void stop_threads(s3_upload *u)
{
	pthread_mutex_lock(&u->mu);
	u->stopping = 1;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	for (unsigned i = 0; i < u->nthreads; i++)
		pthread_join(u->threads[i], NULL);
	u->nthreads = 0;
}

static void upload_free(s3_upload *u)
{
	for (part *p = u->queue, *next; p; p = next) {
		next = p->next;
		ckpt__free(p->buf);
		ckpt__free(p);
	}
	ckpt__error_slot_clear(&u->err);
	pthread_mutex_destroy(&u->mu);
	pthread_cond_destroy(&u->cv);
	ckpt__free(u->threads);
	ckpt__free(u->done);
	ckpt__free(u->bucket);
	ckpt__free(u->key);
	ckpt__free(u->upload_id);
	ckpt__free(u);
}

void s3_upload_abort(s3_upload *u)
{
	if (!u)
		return;
	pthread_mutex_lock(&u->mu);
	u->failed = 1; /* queued parts are dropped, not sent */
	pthread_mutex_unlock(&u->mu);
	stop_threads(u);
	if (u->upload_id) {
		ckpt__error_slot keep = { 0 };
		ckpt__error_capture(&keep);
		abort_one(u->c, u->bucket, u->key, u->upload_id);
		ckpt__error_raise(&keep);
		ckpt__error_slot_clear(&keep);
	}
	upload_free(u);
}

static int cmp_part(const void *a, const void *b)
{
	return ((const done_part *)a)->number - ((const done_part *)b)->number;
}

/* Does a 200 answer to CompleteMultipartUpload say it completed `key`? (S3 can answer 200 and fail later in the body.) */
static int completed_result_names(const char *body, const char *key)
{
	const char *r = body ? strstr(body, "<CompleteMultipartUploadResult") : NULL;
	if (!r || !strstr(r, "</CompleteMultipartUploadResult>"))
		return 0;
	const char *pos = r;
	char *k = s3_xml_next(r, "Key", &pos);
	/* some servers answer the key with a leading '/' */
	int ok = k && strcmp(k[0] == '/' ? k + 1 : k, key) == 0;
	ckpt__free(k);
	return ok;
}

/*
 * The ETag S3 gives the object this upload completes: the MD5 of its parts'
 * MD5s, "-", the part count. 0 when a part's ETag is not a plain MD5 (then
 * nothing can be verified).
 */
static int multipart_etag(const s3_upload *u, char *out, size_t cap)
{
	unsigned char *md5s = ckpt__malloc(u->ndone * 16 + 1);
	if (!md5s)
		return 0;
	int ok = 1;
	for (size_t i = 0; i < u->ndone && ok; i++) {
		const char *e = u->done[i].etag + (u->done[i].etag[0] == '"');
		for (int k = 0; k < 16 && ok; k++) {
			unsigned v;
			ok = sscanf(e + 2 * k, "%2x", &v) == 1;
			md5s[16 * i + (size_t)k] = (unsigned char)v;
		}
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdn = 0;
	if (ok && EVP_Digest(md5s, u->ndone * 16, md, &mdn, EVP_md5(), NULL) == 1 && mdn == 16) {
		size_t o = 0;
		for (unsigned k = 0; k < 16; k++)
			o += (size_t)snprintf(out + o, cap - o, "%02x", md[k]);
		snprintf(out + o, cap - o, "-%zu", u->ndone);
	} else {
		ok = 0;
	}
	ckpt__free(md5s);
	return ok;
}

/* After a completion whose answer was lost or unreadable: is the object at the key the one this upload made? */
static int completed_object(const s3_upload *u)
{
	char want[64];
	if (!multipart_etag(u, want, sizeof(want)))
		return 0;
	ckpt__error_slot keep = { 0 };
	ckpt__error_capture(&keep);
	s3_request rq = { "HEAD", u->bucket, u->key, NULL, NULL, 0, NULL, S3_RETRIED, 0, 0, 0, NULL, 0 };
	s3_response rs;
	int rc = s3_perform_quiet(u->c, &rq, &rs, quiet_404);
	const char *got = rs.etag + (rs.etag[0] == '"');
	int same = rc == CKPT_OK && strncmp(got, want, strlen(want)) == 0 &&
		(got[strlen(want)] == '\0' || got[strlen(want)] == '"');
	s3_response_clear(&rs);
	ckpt__error_raise(&keep);
	ckpt__error_slot_clear(&keep);
	return same;
}

int s3_upload_finish(s3_upload *u, uint32_t crc32c)
{
	(void)crc32c;
	stop_threads(u); /* workers drain the queue before they exit */
	if (u->failed) {
		int rc = ckpt__error_raise(&u->err);
		s3_upload_abort(u); /* keeps this thread's error */
		return rc;
	}
	qsort(u->done, u->ndone, sizeof(*u->done), cmp_part);
	size_t cap = 64 + u->ndone * 320, len = 0;
	char *xml = ckpt__malloc(cap);
	if (!xml) {
		s3_upload_abort(u);
		return CKPT_ENOMEM;
	}
	len += (size_t)snprintf(xml + len, cap - len, "<CompleteMultipartUpload>");
	for (size_t i = 0; i < u->ndone; i++)
		len += (size_t)snprintf(xml + len, cap - len,
			"<Part><PartNumber>%d</PartNumber><ETag>%s</ETag><ChecksumCRC32C>%s</ChecksumCRC32C></Part>",
			u->done[i].number, u->done[i].etag, u->done[i].crc32c);
	len += (size_t)snprintf(xml + len, cap - len, "</CompleteMultipartUpload>");
	char *id = s3_uri_encode(u->upload_id, 0);
	char *query = id ? ckpt__asprintf("uploadId=%s", id) : NULL;
	int rc = CKPT_ENOMEM;
	if (query) {
		/* retried, as S3 documents: a retry of an upload already completed answers 404 NoSuchUpload */
		s3_request rq = { "POST", u->bucket, u->key, query, xml, len, NULL, S3_RETRIED, 0, 0, 0, NULL, 0 };
		s3_response rs;
		rc = s3_perform_quiet(u->c, &rq, &rs, quiet_404);
		if (rc == CKPT_ENOTFOUND && rs.attempts > 1 && strcmp(rs.code, "NoSuchUpload") == 0)
			rc = completed_object(u) ? CKPT_OK :
				ckpt__fail(CKPT_EIO, NULL, NULL, -1, "s3://%s/%s: CompleteMultipartUpload failed: the upload "
					"is gone (NoSuchUpload on a retry) and the object is not the one uploaded",
					u->bucket, u->key);
		else if (rc == CKPT_ENOTFOUND)
			rc = ckpt__fail(CKPT_EIO, NULL, NULL, -1, "s3://%s/%s: CompleteMultipartUpload failed: HTTP status "
				"404, S3 error code %s", u->bucket, u->key, rs.code[0] ? rs.code : "(none)");
		/* S3 can answer 200 and put the failure in the body */
		if (rc == CKPT_OK && rs.body && strstr(rs.body, "<Error>")) {
			char *code = s3_xml_next(rs.body, "Code", NULL);
			rc = ckpt__fail(CKPT_EIO, NULL, NULL, -1,
				"s3://%s/%s: CompleteMultipartUpload failed: HTTP status 200, S3 error code %s", u->bucket,
				u->key, code ? code : "(none)");
			ckpt__free(code);
		} else if (rc == CKPT_OK && !completed_result_names(rs.body, u->key) && !completed_object(u)) {
			/* not a success either: the upload may still be open, and the key must not look committed */
			rc = ckpt__fail(CKPT_EIO, NULL, NULL, -1,
				"s3://%s/%s: CompleteMultipartUpload failed: HTTP status 200 but the body is not a "
				"CompleteMultipartUploadResult naming the key", u->bucket, u->key);
		}
		s3_response_clear(&rs);
	}
	ckpt__free(query);
	ckpt__free(id);
	ckpt__free(xml);
	if (rc < 0) {
		s3_upload_abort(u);
		return rc;
	}
	upload_free(u);
	return CKPT_OK;
}

/*
 * Server-side copies for incremental saves (issue 33): bytes of the last
 * checkpoint that a new one holds again are copied by the server instead of
 * passing through this process.
 *
 *   ckpt__io_copy_ranges   UploadPartCopy (x-amz-copy-source-range) of ranges
 *                          as the next parts of an S3 writer's upload, sent
 *                          as many at a time as the client sends parts
 *   ckpt__vfs_copy_object  CopyObject of a whole object
 *
 * Both are conditional on the source's ETag (x-amz-copy-source-if-match):
 * a source replaced or deleted since its ETag was recorded answers 412 or
 * 404 and the caller uploads the bytes from memory instead (CKPT__DECLINED),
 * so a copy never brings another version's bytes. A copied part carries the
 * crc32c the caller knows for its bytes into the completion, and a
 * ChecksumCRC32C the server reports for it must equal that one.
 *
 * S3 wants every part but the last to hold at least 5 MiB (CKPT__S3_MIN_PART);
 * the caller groups ranges so (formats/tf_bundle/bundle_incr_s3.c).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "libckpt/storage/s3/s3_lib.h"
#include "internal.h"
#include "s3_internal.h"

/* Statuses that decline a copy (the caller uploads instead) without an error: the source is gone or replaced,
 * or the server refuses the request (no copy support, a range it does not take). */
static const long quiet_copy[] = { 400, 403, 404, 409, 412, 416, 501, 0 };

/* "x-amz-copy-source: /bucket/key" for s3://bucket/key, the key percent-encoded; NULL on failure (error set). */
static char *copy_source(const char *path, char **bucket, char **key)
{
	if (ckpt_s3_path_split(bucket, key, path) < 0)
		return NULL;
	char *src = s3_name_check(*bucket, *key) == CKPT_OK ? s3_uri_encode(*key, 1) : NULL;
	char *hdr = src ? ckpt__asprintf("x-amz-copy-source: /%s/%s", *bucket, src) : NULL;
	ckpt__free(src);
	return hdr;
}

/* The text of <tag> in body with &quot; turned back into '"' (ETags are quoted); NULL when absent. */
static char *xml_text(const char *body, const char *tag)
{
	char *t = body ? s3_xml_next(body, tag, NULL) : NULL;
	if (!t)
		return NULL;
	char *o = t;
	for (const char *i = t; *i;) {
		if (strncmp(i, "&quot;", 6) == 0) {
			*o++ = '"';
			i += 6;
		} else {
			*o++ = *i++;
		}
	}
	*o = '\0';
	return t;
}

/*
 * SigV4 of a copy request, signed here rather than by libcurl: libcurl
 * before 8.10 sorts the canonical headers as whole "name:value" lines, which
 * puts x-amz-copy-source-range and -if-match before x-amz-copy-source ('-'
 * sorts before ':'), and the server refuses the signature
 * (SignatureDoesNotMatch). libcurl signs nothing when the request carries
 * an Authorization header. Signed: host, x-amz-* (the token too).
 */
static void sha256_hex(char out[65], const void *p, size_t n)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdn = 0;
	EVP_Digest(p, n, md, &mdn, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void hmac256(unsigned char out[32], const void *key, size_t klen, const void *msg, size_t mlen)
{
	unsigned n = 0;
	HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &n);
}

/* The host the request goes to, as libcurl sends it (a scheme's default port left out). */
static char *host_of(const ckpt_s3_config *cfg, const char *bucket)
{
	const char *h = strstr(cfg->endpoint, "://");
	h = h ? h + 3 : cfg->endpoint;
	size_t n = strcspn(h, "/");
	int https = strncmp(cfg->endpoint, "https://", 8) == 0;
	const char *dflt = https ? ":443" : ":80";
	if (n > strlen(dflt) && strncmp(h + n - strlen(dflt), dflt, strlen(dflt)) == 0)
		n -= strlen(dflt);
	return cfg->path_style ? ckpt__asprintf("%.*s", (int)n, h) : ckpt__asprintf("%s.%.*s", bucket, (int)n, h);
}

/*
 * hdrs: the request's x-amz-* headers ("name: value", lower-case names,
 * sorted by name). On success hdr_auth and hdr_date hold the Authorization
 * and x-amz-date headers to send with them (caller frees); CKPT_OK without
 * them for anonymous requests.
 */
static int sign(s3_client *c, const char *bucket, const char *key, const char *query, const char *const *hdrs,
	char **hdr_auth, char **hdr_date)
{
	const ckpt_s3_config *cfg = s3_client_config(c);
	*hdr_auth = *hdr_date = NULL;
	if (!cfg->access_key)
		return CKPT_OK;
	char date[32], day[16];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%Y%m%dT%H%M%SZ", &tm);
	strftime(day, sizeof(day), "%Y%m%d", &tm);
	char empty[65];
	sha256_hex(empty, "", 0); /* the client sends x-amz-content-sha256 of the (empty) body */
	char *ekey = s3_uri_encode(key, 1), *host = host_of(cfg, bucket);
	char *uri = ekey ? (cfg->path_style ? ckpt__asprintf("/%s/%s", bucket, ekey) : ckpt__asprintf("/%s", ekey)) : NULL;
	/* canonical headers: host, x-amz-content-sha256, the caller's (x-amz-copy-*), x-amz-date, the token */
	size_t cap = 4096;
	char *canon = ckpt__malloc(cap), *names = ckpt__malloc(512);
	int rc = uri && host && canon && names ? CKPT_OK : CKPT_ENOMEM;
	if (rc == CKPT_OK) {
		size_t len = (size_t)snprintf(canon, cap, "PUT\n%s\n%s\nhost:%s\nx-amz-content-sha256:%s\n", uri,
			query ? query : "", host, empty);
		size_t nl = (size_t)snprintf(names, 512, "host;x-amz-content-sha256");
		for (const char *const *h = hdrs; *h && len < cap; h++) {
			const char *colon = strchr(*h, ':'), *v = colon + 1;
			while (*v == ' ')
				v++;
			len += (size_t)snprintf(canon + len, cap - len, "%.*s:%s\n", (int)(colon - *h), *h, v);
			nl += (size_t)snprintf(names + nl, 512 - nl, ";%.*s", (int)(colon - *h), *h);
		}
		if (len < cap)
			len += (size_t)snprintf(canon + len, cap - len, "x-amz-date:%s\n", date);
		if (cfg->session_token && len < cap)
			len += (size_t)snprintf(canon + len, cap - len, "x-amz-security-token:%s\n", cfg->session_token);
		nl += (size_t)snprintf(names + nl, 512 - nl, ";x-amz-date%s", cfg->session_token ? ";x-amz-security-token" : "");
		if (len < cap)
			len += (size_t)snprintf(canon + len, cap - len, "\n%s\n%s", names, empty);
		if (len >= cap || nl >= 512)
			rc = ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "s3://%s/%s: copy request too long to sign", bucket, key);
	}
	if (rc == CKPT_OK) {
		char creq[65], sts[256], scope[128];
		sha256_hex(creq, canon, strlen(canon));
		snprintf(scope, sizeof(scope), "%s/%s/s3/aws4_request", day, cfg->region);
		snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", date, scope, creq);
		char *k0 = ckpt__asprintf("AWS4%s", cfg->secret_key ? cfg->secret_key : "");
		unsigned char k[32], sig[32];
		if (k0) {
			hmac256(k, k0, strlen(k0), day, strlen(day));
			hmac256(k, k, 32, cfg->region, strlen(cfg->region));
			hmac256(k, k, 32, "s3", 2);
			hmac256(k, k, 32, "aws4_request", 12);
			hmac256(sig, k, 32, sts, strlen(sts));
			char hex[65];
			for (int i = 0; i < 32; i++)
				snprintf(hex + 2 * i, 3, "%02x", sig[i]);
			*hdr_auth = ckpt__asprintf("Authorization: AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, "
				"Signature=%s", cfg->access_key, scope, names, hex);
			*hdr_date = ckpt__asprintf("x-amz-date: %s", date);
			memset(k0, 0, strlen(k0));
		}
		ckpt__free(k0);
		if (!*hdr_auth || !*hdr_date) {
			ckpt__free(*hdr_auth);
			ckpt__free(*hdr_date);
			*hdr_auth = *hdr_date = NULL;
			rc = CKPT_ENOMEM;
		}
	}
	ckpt__free(canon);
	ckpt__free(names);
	ckpt__free(uri);
	ckpt__free(ekey);
	ckpt__free(host);
	return rc;
}

static void crc_b64(char out[16], uint32_t c)
{
	unsigned char be[4] = { (unsigned char)(c >> 24), (unsigned char)(c >> 16), (unsigned char)(c >> 8),
		(unsigned char)c };
	EVP_EncodeBlock((unsigned char *)out, be, 4);
}

/* One UploadPartCopy: part `number` of the upload, n bytes at off of the source. */
typedef struct copy_part {
	int number;
	uint64_t off, n;
	char want[16];             /* base64 of the bytes' crc32c */
	char etag[128];            /* the part's, when copied */
	int copied;
} copy_part;

typedef struct copy_job {
	s3_client *c;
	const char *bucket, *key, *eid, *src, *ifm;
	copy_part *parts;
	size_t n, next;
	pthread_mutex_t mu;
} copy_job;

static void copy_one(copy_job *j, copy_part *p)
{
	char *query = ckpt__asprintf("partNumber=%d&uploadId=%s", p->number, j->eid);
	char range[96];
	snprintf(range, sizeof(range), "x-amz-copy-source-range: bytes=%llu-%llu", (unsigned long long)p->off,
		(unsigned long long)(p->off + p->n - 1));
	const char *amz[] = { j->src, j->ifm, range, NULL }; /* sorted by name */
	char *auth = NULL, *date = NULL;
	int rc = query ? sign(j->c, j->bucket, j->key, query, amz, &auth, &date) : CKPT_ENOMEM;
	const char *hdrs[] = { j->src, j->ifm, range, auth, date, NULL };
	s3_request rq = { "PUT", j->bucket, j->key, query, NULL, 0, hdrs, S3_RETRIED, 0, 0, 0, NULL, 0 };
	s3_response rs;
	memset(&rs, 0, sizeof(rs));
	if (rc == CKPT_OK)
		rc = s3_perform_quiet(j->c, &rq, &rs, quiet_copy);
	char *tag = rc == CKPT_OK ? xml_text(rs.body, "ETag") : NULL;
	char *sum = rc == CKPT_OK ? xml_text(rs.body, "ChecksumCRC32C") : NULL;
	/* a 200 with an <Error> body, no ETag, or a checksum of other bytes: not copied */
	p->copied = tag && tag[0] && strlen(tag) < sizeof(p->etag) && !(rs.body && strstr(rs.body, "<Error>")) &&
		(!sum || strcmp(sum, p->want) == 0);
	if (p->copied)
		snprintf(p->etag, sizeof(p->etag), "%s", tag);
	s3_response_clear(&rs);
	ckpt__free(tag);
	ckpt__free(sum);
	ckpt__free(auth);
	ckpt__free(date);
	ckpt__free(query);
}

static void *copy_worker(void *arg)
{
	copy_job *j = arg;
	for (;;) {
		pthread_mutex_lock(&j->mu);
		size_t i = j->next++;
		pthread_mutex_unlock(&j->mu);
		if (i >= j->n)
			break;
		copy_one(j, &j->parts[i]);
	}
	ckpt_error_clear(); /* a refused copy is no error: the caller uploads those bytes */
	return NULL;
}

int ckpt__io_copy_ranges(ckpt_io *dst, const char *src_path, const char *etag, uint64_t src_off, const uint64_t *len,
	const uint32_t *crc, size_t k, size_t *done)
{
	*done = 0;
	if (!etag || !etag[0] || k == 0)
		return CKPT__DECLINED;
	for (size_t i = 0; i < k; i++)
		if (len[i] < CKPT__S3_MIN_PART || len[i] > CKPT__S3_MAX_PART)
			return CKPT__DECLINED;
	uint64_t ps;
	uint64_t open = ckpt__io_open_part(dst, &ps);
	if (open == UINT64_MAX || (open && open < CKPT__S3_MIN_PART))
		return CKPT__DECLINED; /* the part being filled would be a part under S3's minimum */
	s3_upload *u;
	size_t next;
	int rc = s3_io_copy_begin(dst, &u, &next);
	if (rc != CKPT_OK)
		return rc;
	copy_job j = { 0 };
	const char *id;
	s3_upload_target(u, &j.c, &j.bucket, &j.key, &id);
	char *sb = NULL, *sk = NULL;
	char *src = copy_source(src_path, &sb, &sk);
	char *eid = s3_uri_encode(id, 0);
	char ifm[160];
	snprintf(ifm, sizeof(ifm), "x-amz-copy-source-if-match: %s", etag);
	copy_part *parts = ckpt__calloc(k, sizeof(*parts));
	if (!src)
		rc = CKPT__DECLINED;
	else if (!eid || !parts)
		rc = CKPT_ENOMEM;
	uint64_t copied = 0;
	if (rc == CKPT_OK) {
		for (size_t i = 0, at = 0; i < k; at += len[i], i++) {
			parts[i].number = (int)(next + i + 1);
			parts[i].off = src_off + at;
			parts[i].n = len[i];
			crc_b64(parts[i].want, crc[i]);
		}
		j.eid = eid;
		j.src = src;
		j.ifm = ifm;
		j.parts = parts;
		j.n = k;
		pthread_mutex_init(&j.mu, NULL);
		/* as many at a time as the client sends parts */
		ckpt__error_slot keep = { 0 };
		ckpt__error_capture(&keep);
		unsigned nt = s3_client_config(j.c)->parallel, started = 0;
		pthread_t th[64];
		for (unsigned t = 1; t < nt && t < k && t < 64; t++)
			if (pthread_create(&th[started], NULL, copy_worker, &j) == 0)
				started++;
		copy_worker(&j);
		for (unsigned t = 0; t < started; t++)
			pthread_join(th[t], NULL);
		pthread_mutex_destroy(&j.mu);
		ckpt__error_raise(&keep);
		ckpt__error_slot_clear(&keep);
		/* the copied prefix only: a part after a refused one would leave a hole (it stays out of the completion) */
		while (*done < k && parts[*done].copied && rc == CKPT_OK) {
			rc = s3_upload_add_part(u, parts[*done].number, parts[*done].etag, parts[*done].want);
			if (rc == CKPT_OK)
				copied += parts[(*done)++].n;
		}
	}
	ckpt__free(parts);
	ckpt__free(eid);
	ckpt__free(src);
	ckpt__free(sb);
	ckpt__free(sk);
	int erc = s3_io_copy_end(dst, next + *done, copied);
	if (rc < 0)
		return rc;
	if (erc < 0)
		return erc;
	return *done ? CKPT_OK : CKPT__DECLINED;
}

int ckpt__io_copy_append(ckpt_io *dst, const char *src_path, const char *etag, uint64_t src_off, uint64_t n,
	uint32_t crc32c)
{
	size_t done;
	return ckpt__io_copy_ranges(dst, src_path, etag, src_off, &n, &crc32c, 1, &done);
}

int ckpt__vfs_copy_object(ckpt_vfs *vfs, const char *src_path, const char *etag, const char *dst_path)
{
	s3_client *c = ckpt__vfs_s3_client(vfs);
	if (!c || !etag || !etag[0])
		return CKPT__DECLINED;
	char *sb = NULL, *sk = NULL, *db = NULL, *dk = NULL;
	char *src = copy_source(src_path, &sb, &sk);
	int rc = src ? ckpt_s3_path_split(&db, &dk, dst_path) : (sb ? CKPT_ENOMEM : CKPT__DECLINED);
	if (rc == CKPT_OK) {
		char ifm[160];
		snprintf(ifm, sizeof(ifm), "x-amz-copy-source-if-match: %s", etag);
		ckpt__error_slot keep = { 0 };
		ckpt__error_capture(&keep);
		const char *amz[] = { src, ifm, NULL };
		char *auth, *date;
		int prc = sign(c, db, dk, NULL, amz, &auth, &date);
		const char *hdrs[] = { src, ifm, auth, date, NULL };
		s3_request rq = { "PUT", db, dk, NULL, NULL, 0, hdrs, S3_RETRIED, 0, 0, 0, NULL, 0 };
		s3_response rs;
		if (prc == CKPT_OK)
			prc = s3_perform_quiet(c, &rq, &rs, quiet_copy);
		else
			memset(&rs, 0, sizeof(rs));
		ckpt__free(auth);
		ckpt__free(date);
		int ok = prc == CKPT_OK && rs.body && strstr(rs.body, "CopyObjectResult") && !strstr(rs.body, "<Error>");
		s3_response_clear(&rs);
		ckpt__error_raise(&keep);
		ckpt__error_slot_clear(&keep);
		rc = ok ? CKPT_OK : CKPT__DECLINED;
	} else if (rc > 0 || (rc < 0 && rc != CKPT_ENOMEM)) {
		rc = CKPT__DECLINED;
	}
	ckpt__free(src);
	ckpt__free(sb);
	ckpt__free(sk);
	ckpt__free(db);
	ckpt__free(dk);
	return rc;
}

int ckpt__vfs_etag(ckpt_vfs *vfs, const char *path, char *etag, size_t cap, uint64_t *size)
{
	s3_client *c = ckpt__vfs_s3_client(vfs);
	etag[0] = '\0';
	if (!c)
		return CKPT__DECLINED;
	char *b = NULL, *k = NULL;
	CKPT_TRY(ckpt_s3_path_split(&b, &k, path));
	/* asked of the server, never of the client's cache: the ETag pins every later copy */
	s3_request rq = { "HEAD", b, k, NULL, NULL, 0, NULL, S3_RETRIED, 0, 0, 0, NULL, 0 };
	s3_response rs;
	int rc = s3_perform(c, &rq, &rs);
	if (rc == CKPT_OK) {
		snprintf(etag, cap, "%s", rs.etag);
		*size = rs.content_length;
	}
	s3_response_clear(&rs);
	ckpt__free(b);
	ckpt__free(k);
	return rc;
}

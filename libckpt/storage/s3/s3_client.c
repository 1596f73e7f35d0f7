/*
 * The S3 transport: libcurl, which signs SigV4 itself (CURLOPT_AWS_SIGV4), with
 * the payload's SHA-256 sent in x-amz-content-sha256 so the signature covers
 * the bytes. Connections, DNS answers and TLS sessions are shared by every
 * request of a client (a curl share handle), and easy handles are pooled, so
 * a save's many requests reuse a few warm connections.
 *
 * Idempotent requests are retried on 5xx, 429/SlowDown, timeouts, resets and
 * short bodies, with exponential backoff and full jitter (50 ms × 2^attempt,
 * capped at 5 s). Others (conditional PUT, multipart initiate/complete) are
 * tried once: a retry could repeat an effect that already happened. Cleanup
 * requests (an upload's abort, the lock's release) are tried at least
 * S3_CLEANUP_ATTEMPTS times even when max_attempts asks for fewer: an abort
 * refused once would leave the upload's parts stored (and billed).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "libckpt/storage/s3/s3_lib.h"
#include "internal.h"
#include "s3_internal.h"

#define POOL_MAX 64
#define BODY_MAX (64u << 20) /* a response body collected in memory (listings, errors) */

struct s3_client {
	ckpt_s3_config cfg;     /* strings owned */
	char *sigv4;            /* "aws:amz:REGION:s3" */
	char *userpwd;
	CURLSH *share;
	pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
	pthread_mutex_t pool_mu;
	CURL *pool[POOL_MAX];
	int npool;
	unsigned deadline_seconds; /* CKPT_S3_DEADLINE_SECONDS: no retry of a request begins after this */
	s3_cache *cache;        /* CKPT_S3_CACHE_SECONDS: what HEADs said, for that long (s3_cache.c) */
};


static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *u)
{
	(void)h;
	(void)a;
	pthread_mutex_lock(&((s3_client *)u)->share_mu[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *u)
{
	(void)h;
	pthread_mutex_unlock(&((s3_client *)u)->share_mu[d]);
}

static char *dup_or_null(const char *s) { return s ? ckpt__strdup(s) : NULL; }

const ckpt_s3_config *s3_client_config(const s3_client *c) { return &c->cfg; }

s3_cache *s3_client_cache(s3_client *c) { return c->cache; }

int s3_client_new(s3_client **out, const ckpt_s3_config *cfg)
{
	CKPT_TRY(ckpt__s3_lib()); /* libcurl and libcrypto, loaded at the first s3:// use */
	unsigned long deadline;
	CKPT_TRY(s3_env_unsigned("CKPT_S3_DEADLINE_SECONDS", 1, 86400, 120, &deadline));
	unsigned long cache_s;
	CKPT_TRY(s3_env_unsigned("CKPT_S3_CACHE_SECONDS", 0, 3600, 5, &cache_s));
	s3_client *c = ckpt__calloc(1, sizeof(*c));
	if (!c)
		return CKPT_ENOMEM;
	if (s3_cache_new(&c->cache, (unsigned)cache_s) < 0) {
		ckpt__free(c);
		return CKPT_ENOMEM;
	}
	c->deadline_seconds = (unsigned)deadline;
	c->cfg = *cfg;
	c->cfg.access_key = dup_or_null(cfg->access_key);
	c->cfg.secret_key = dup_or_null(cfg->secret_key);
	c->cfg.session_token = dup_or_null(cfg->session_token);
	c->cfg.region = dup_or_null(cfg->region);
	c->cfg.endpoint = dup_or_null(cfg->endpoint);
	c->cfg.ca_bundle = dup_or_null(cfg->ca_bundle);
	c->cfg.profile = dup_or_null(cfg->profile);
	if (!c->cfg.part_size)
		c->cfg.part_size = 8u << 20;
	if (!c->cfg.parallel)
		c->cfg.parallel = 8;
	if (!c->cfg.max_attempts)
		c->cfg.max_attempts = 5;
	if (!c->cfg.stall_seconds)
		c->cfg.stall_seconds = 30;
	if (!c->cfg.lock_lease_seconds)
		c->cfg.lock_lease_seconds = 60;
	c->sigv4 = ckpt__asprintf("aws:amz:%s:s3", cfg->region ? cfg->region : "us-east-1");
	if (cfg->access_key)
		c->userpwd = ckpt__asprintf("%s:%s", cfg->access_key, cfg->secret_key ? cfg->secret_key : "");
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&c->share_mu[i], NULL);
	pthread_mutex_init(&c->pool_mu, NULL);
	c->share = curl_share_init();
	if (!c->sigv4 || !c->cfg.endpoint || !c->share || (cfg->access_key && !c->userpwd)) {
		s3_client_free(c);
		return ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "cannot create the S3 client");
	}
	curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	*out = c;
	return CKPT_OK;
}

void s3_client_free(s3_client *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->npool; i++)
		curl_easy_cleanup(c->pool[i]);
	if (c->share)
		curl_share_cleanup(c->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&c->share_mu[i]);
	pthread_mutex_destroy(&c->pool_mu);
	ckpt__free(c->sigv4);
	if (c->userpwd) {
		memset(c->userpwd, 0, strlen(c->userpwd));
		ckpt__free(c->userpwd);
	}
	ckpt__free(c->cfg.access_key);
	if (c->cfg.secret_key) {
		memset(c->cfg.secret_key, 0, strlen(c->cfg.secret_key));
		ckpt__free(c->cfg.secret_key);
	}
	ckpt__free(c->cfg.session_token);
	ckpt__free(c->cfg.region);
	ckpt__free(c->cfg.endpoint);
	ckpt__free(c->cfg.ca_bundle);
	ckpt__free(c->cfg.profile);
	s3_cache_free(c->cache);
	ckpt__free(c);
}

static CURL *handle_get(s3_client *c)
{
	CURL *h = NULL;
	pthread_mutex_lock(&c->pool_mu);
	if (c->npool)
		h = c->pool[--c->npool];
	pthread_mutex_unlock(&c->pool_mu);
	if (h)
		curl_easy_reset(h);
	else
		h = curl_easy_init();
	return h;
}

static void handle_put(s3_client *c, CURL *h)
{
	pthread_mutex_lock(&c->pool_mu);
	if (c->npool < POOL_MAX) {
		c->pool[c->npool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->pool_mu);
	if (h)
		curl_easy_cleanup(h);
}

char *s3_uri_encode(const char *s, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *o = ckpt__malloc(3 * n + 1), *p = o;
	if (!o)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
			ch == '_' || ch == '.' || ch == '~' || (keep_slash && ch == '/')) {
			*p++ = (char)ch;
		} else {
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	*p = '\0';
	return o;
}

char *s3_xml_next(const char *xml, const char *tag, const char **pos)
{
	char open[80], close[80];
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	const char *from = pos && *pos ? *pos : xml;
	const char *a = from ? strstr(from, open) : NULL;
	if (!a)
		return NULL;
	a += strlen(open);
	const char *b = strstr(a, close);
	if (!b)
		return NULL;
	if (pos)
		*pos = b + strlen(close);
	/* the few entities S3 escapes in keys */
	char *o = ckpt__malloc((size_t)(b - a) + 1), *p = o;
	if (!o)
		return NULL;
	while (a < b) {
		static const struct { const char *ent; char ch; } ents[] = {
			{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' }
		};
		int done = 0;
		for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]) && *a == '&'; i++) {
			size_t l = strlen(ents[i].ent);
			if ((size_t)(b - a) >= l && memcmp(a, ents[i].ent, l) == 0) {
				*p++ = ents[i].ch;
				a += l;
				done = 1;
				break;
			}
		}
		if (!done)
			*p++ = *a++;
	}
	*p = '\0';
	return o;
}

/* ---- one attempt ---- */

typedef struct {
	CURL *h;
	const s3_request *rq;
	s3_response *rs;
	size_t got;          /* bytes written to rq->dst */
	int overflow;
} xfer;

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
	xfer *x = ud;
	size_t n = size * nmemb;
	long status = 0;
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
	if (x->rq->dst && status >= 200 && status < 300) {
		if (x->got + n > x->rq->range_len) {
			x->overflow = 1;
			return 0;
		}
		memcpy((char *)x->rq->dst + x->got, data, n);
		x->got += n;
		return n;
	}
	s3_response *rs = x->rs;
	if (rs->body_len + n > BODY_MAX) {
		x->overflow = 1;
		return 0;
	}
	char *nb = ckpt__realloc(rs->body, rs->body_len + n + 1);
	if (!nb)
		return 0;
	memcpy(nb + rs->body_len, data, n);
	rs->body = nb;
	rs->body_len += n;
	nb[rs->body_len] = '\0';
	return n;
}

static void header_value(const char *line, size_t n, char *dst, size_t cap)
{
	const char *v = memchr(line, ':', n);
	if (!v) {
		dst[0] = '\0';
		return;
	}
	v++;
	const char *end = line + n;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	size_t l = (size_t)(end - v) < cap - 1 ? (size_t)(end - v) : cap - 1;
	memcpy(dst, v, l);
	dst[l] = '\0';
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
	xfer *x = ud;
	size_t n = size * nmemb;
	char tmp[64];
	if (n > 15 && strncasecmp(data, "content-length:", 15) == 0) {
		header_value(data, n, tmp, sizeof(tmp));
		x->rs->content_length = strtoull(tmp, NULL, 10);
	} else if (n > 5 && strncasecmp(data, "etag:", 5) == 0) {
		header_value(data, n, x->rs->etag, sizeof(x->rs->etag));
	} else if (n > 5 && strncasecmp(data, "date:", 5) == 0) {
		header_value(data, n, tmp, sizeof(tmp));
		x->rs->date = (long long)curl_getdate(tmp, NULL);
	} else if (n > 14 && strncasecmp(data, "last-modified:", 14) == 0) {
		header_value(data, n, tmp, sizeof(tmp));
		x->rs->last_modified = (long long)curl_getdate(tmp, NULL);
	} else if (n > 9 && strncasecmp(data, "location:", 9) == 0) {
		header_value(data, n, x->rs->location, sizeof(x->rs->location));
	} else if (n > 23 && strncasecmp(data, "x-amz-meta-ckpt-crc32c:", 23) == 0) {
		header_value(data, n, x->rs->meta_crc32c, sizeof(x->rs->meta_crc32c));
	} else if (n > 22 && strncasecmp(data, "x-amz-checksum-crc32c:", 22) == 0) {
		header_value(data, n, x->rs->sum_crc32c, sizeof(x->rs->sum_crc32c));
	} else if (n > 21 && strncasecmp(data, "x-amz-checksum-crc32:", 21) == 0) {
		header_value(data, n, x->rs->sum_crc32, sizeof(x->rs->sum_crc32));
	} else if (n > 20 && strncasecmp(data, "x-amz-checksum-type:", 20) == 0) {
		header_value(data, n, x->rs->sum_type, sizeof(x->rs->sum_type));
	} else if (n > 29 && strncasecmp(data, "x-amz-server-side-encryption:", 29) == 0) {
		header_value(data, n, x->rs->sse, sizeof(x->rs->sse));
	} else if (n > 48 && strncasecmp(data, "x-amz-server-side-encryption-customer-algorithm:", 48) == 0) {
		snprintf(x->rs->sse, sizeof(x->rs->sse), "SSE-C"); /* a customer key: the ETag is no MD5 */
	} else if (n > 21 && strncasecmp(data, "x-amz-mp-parts-count:", 21) == 0) {
		header_value(data, n, tmp, sizeof(tmp));
		x->rs->parts_count = strtol(tmp, NULL, 10);
	}
	return n;
}

static void hex_of(char *dst, const unsigned char *d, unsigned n)
{
	static const char hex[] = "0123456789abcdef";
	for (unsigned i = 0; i < n; i++) {
		dst[2 * i] = hex[d[i] >> 4];
		dst[2 * i + 1] = hex[d[i] & 15];
	}
	dst[2 * n] = '\0';
}

static void base64_of(char *dst, const unsigned char *d, unsigned n)
{
	EVP_EncodeBlock((unsigned char *)dst, d, (int)n);
}

/* Body bytes sent and received by every request of this process (ckpt_s3_transfer_bytes: progress meters). */
static atomic_ullong bytes_sent, bytes_received;

int ckpt_s3_transfer_bytes(uint64_t *sent, uint64_t *received)
{
	*sent = atomic_load_explicit(&bytes_sent, memory_order_relaxed);
	*received = atomic_load_explicit(&bytes_received, memory_order_relaxed);
	return CKPT_OK;
}

static void count_transfer(CURL *h)
{
	curl_off_t up = 0, down = 0;
	if (curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up) == CURLE_OK && up > 0)
		atomic_fetch_add_explicit(&bytes_sent, (unsigned long long)up, memory_order_relaxed);
	if (curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &down) == CURLE_OK && down > 0)
		atomic_fetch_add_explicit(&bytes_received, (unsigned long long)down, memory_order_relaxed);
}

typedef struct {
	CURLcode curl;
	char curl_msg[CURL_ERROR_SIZE];
	int short_body;
} attempt_result;

static int attempt(s3_client *c, const s3_request *rq, s3_response *rs, const char *url,
	struct curl_slist *hdrs, attempt_result *ar)
{
	CURL *h = handle_get(c);
	if (!h)
		return ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "curl_easy_init failed");
	xfer x = { h, rq, rs, 0, 0 };
	ar->curl_msg[0] = '\0';
	curl_easy_setopt(h, CURLOPT_SHARE, c->share);
	curl_easy_setopt(h, CURLOPT_URL, url);
	/* the key exactly as named: libcurl would otherwise resolve "../" segments into another key or bucket */
	curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ar->curl_msg);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)c->cfg.stall_seconds);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (c->cfg.ca_bundle)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->cfg.ca_bundle);
	if (c->userpwd) {
		curl_easy_setopt(h, CURLOPT_AWS_SIGV4, c->sigv4);
		curl_easy_setopt(h, CURLOPT_USERPWD, c->userpwd);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
	if (strcmp(rq->method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (strcmp(rq->method, "GET") != 0) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
		if (rq->body || strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "POST") == 0) {
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body ? (const char *)rq->body : "");
		}
	}
	ar->curl = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rs->status);
	count_transfer(h);
	ar->short_body = ar->curl == CURLE_OK && rq->dst && rs->status >= 200 && rs->status < 300 &&
		x.got != rq->range_len;
	if (x.overflow && ar->curl != CURLE_OK) {
		ar->curl = CURLE_OK;
		ar->short_body = 1; /* more bytes than asked: treat as a damaged response */
	}
	if (ar->curl == CURLE_OK)
		handle_put(c, h);
	else
		curl_easy_cleanup(h); /* a broken connection's handle is not reused */
	return CKPT_OK;
}

static int retryable(const attempt_result *ar, const s3_response *rs)
{
	switch (ar->curl) {
	case CURLE_OK:
		break;
	case CURLE_COULDNT_CONNECT: case CURLE_OPERATION_TIMEDOUT: case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR: case CURLE_GOT_NOTHING: case CURLE_PARTIAL_FILE: case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM: case CURLE_COULDNT_RESOLVE_HOST: case CURLE_SSL_CONNECT_ERROR:
	case CURLE_WEIRD_SERVER_REPLY:
		return 1;
	default:
		return 0;
	}
	if (ar->short_body)
		return 1;
	if (rs->status >= 500 || rs->status == 429 || rs->status == 0)
		return 1;
	return strcmp(rs->code, "SlowDown") == 0 || strcmp(rs->code, "RequestTimeout") == 0 ||
		strcmp(rs->code, "InternalError") == 0;
}

static unsigned jitter_seed(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned)ts.tv_nsec ^ (unsigned)getpid() ^ (unsigned)(uintptr_t)&ts;
}

static void backoff(unsigned attempt_no, unsigned *seed)
{
	double cap = 50e-3 * (double)(1u << (attempt_no < 7 ? attempt_no : 7));
	if (cap > 5.0)
		cap = 5.0;
	double s = cap * ((double)rand_r(seed) / ((double)RAND_MAX + 1.0)); /* full jitter */
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) != 0)
		;
}

void s3_response_clear(s3_response *rs)
{
	ckpt__free(rs->body);
	memset(rs, 0, sizeof(*rs));
}

int s3_name_check(const char *bucket, const char *key)
{
	int bad = !bucket[0];
	for (const char *b = bucket; *b && !bad; b++)
		bad = !((*b >= 'a' && *b <= 'z') || (*b >= 'A' && *b <= 'Z') || (*b >= '0' && *b <= '9') || *b == '.' ||
			*b == '-' || *b == '_');
	if (bad || strcmp(bucket, ".") == 0 || strcmp(bucket, "..") == 0)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"refused S3 bucket name '%s': not a bucket name (letters, digits, '.', '-', '_')", bucket);
	const char *seg;
	size_t n = s3_dot_segment(key, &seg);
	if (n)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"refused key s3://%s/%s: it holds a '%.*s' segment, which a server or proxy may resolve "
			"to another key or bucket", bucket, key, (int)n, seg);
	return CKPT_OK;
}

static char *build_url(s3_client *c, const s3_request *rq)
{
	char *key = s3_uri_encode(rq->key, 1);
	if (!key)
		return NULL;
	const char *q = rq->query ? "?" : "", *qs = rq->query ? rq->query : "";
	char *url;
	if (c->cfg.path_style) {
		url = ckpt__asprintf("%s/%s/%s%s%s", c->cfg.endpoint, rq->bucket, key, q, qs);
	} else {
		const char *sep = strstr(c->cfg.endpoint, "://");
		url = ckpt__asprintf("%.*s%s.%s/%s%s%s", (int)(sep + 3 - c->cfg.endpoint), c->cfg.endpoint, rq->bucket,
			sep + 3, key, q, qs);
	}
	ckpt__free(key);
	return url;
}

int s3_perform_quiet(s3_client *c, const s3_request *rq, s3_response *rs, const long *quiet)
{
	memset(rs, 0, sizeof(*rs));
	CKPT_TRY(s3_name_check(rq->bucket, rq->key));
	char *url = build_url(c, rq);
	if (!url)
		return CKPT_ENOMEM;
	/* headers: payload hash (signed), token, checksum, range, the caller's */
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdn = 0;
	char line[256];
	struct curl_slist *hdrs = NULL, *t;
	int ok = 1;
#define ADD(s) do { if (!(t = curl_slist_append(hdrs, (s)))) ok = 0; else hdrs = t; } while (0)
	EVP_Digest(rq->body ? rq->body : "", rq->body_len, md, &mdn, EVP_sha256(), NULL);
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	hex_of(hex, md, mdn);
	snprintf(line, sizeof(line), "x-amz-content-sha256: %s", hex);
	ADD(line);
	if (rq->want_md5) {
		char b64[64];
		EVP_Digest(rq->body ? rq->body : "", rq->body_len, md, &mdn, EVP_md5(), NULL);
		base64_of(b64, md, mdn);
		snprintf(line, sizeof(line), "Content-MD5: %s", b64);
		ADD(line);
	}
	if (rq->body || strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "POST") == 0) {
		/* no "Expect:" override: libcurl 7.88 signs it as an empty header the server does not see */
		ADD("Content-Type: application/octet-stream");
	}
	if (c->cfg.session_token) {
		char *tok = ckpt__asprintf("x-amz-security-token: %s", c->cfg.session_token);
		if (tok)
			ADD(tok);
		else
			ok = 0;
		ckpt__free(tok);
	}
	if (rq->has_range) {
		snprintf(line, sizeof(line), "Range: bytes=%llu-%llu", (unsigned long long)rq->range_off,
			(unsigned long long)(rq->range_off + rq->range_len - 1));
		ADD(line);
	}
	for (const char *const *hp = rq->headers; hp && *hp; hp++)
		ADD(*hp);
#undef ADD
	if (!ok) {
		curl_slist_free_all(hdrs);
		ckpt__free(url);
		return CKPT_ENOMEM;
	}
	/* a change to the key: what the cache said of it is void from now on, and once it is done */
	int changes = rq->key[0] && strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0;
	if (changes)
		s3_cache_forget(c->cache, rq->bucket, rq->key);
	unsigned seed = jitter_seed();
	attempt_result ar;
	unsigned tries = 0, max = rq->idempotent ? c->cfg.max_attempts : 1;
	if (rq->idempotent == S3_CLEANUP && max < S3_CLEANUP_ATTEMPTS)
		max = S3_CLEANUP_ATTEMPTS;
	int rc, late = 0;
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		s3_response_clear(rs);
		tries++;
		if ((rc = attempt(c, rq, rs, url, hdrs, &ar)) < 0)
			break;
		if (rs->body && rs->status >= 300) {
			char *code = s3_xml_next(rs->body, "Code", NULL);
			if (code) {
				snprintf(rs->code, sizeof(rs->code), "%s", code);
				ckpt__free(code);
			}
		}
		if (tries >= max || !retryable(&ar, rs))
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((late = now.tv_sec - t0.tv_sec >= (time_t)c->deadline_seconds) != 0)
			break;
		backoff(tries, &seed);
	}
	rs->attempts = tries;
	int good = rc == CKPT_OK && ar.curl == CURLE_OK && !ar.short_body && rs->status >= 200 && rs->status < 300;
	if (changes || (!good && rq->key[0] && strcmp(rq->method, "GET") == 0))
		s3_cache_forget(c->cache, rq->bucket, rq->key); /* never trusted across a failed read */
	char *where = rc == CKPT_OK ? ckpt__asprintf("s3://%s/%s", rq->bucket, rq->key) : NULL;
	if (rc == CKPT_OK) {
		if (!good) {
			int code = rs->status == 404 ? CKPT_ENOTFOUND : rs->status == 412 ? CKPT_EBUSY : CKPT_EIO;
			int silent = 0;
			for (const long *q = quiet; q && *q; q++)
				silent |= ar.curl == CURLE_OK && *q == rs->status;
			if (silent) {
				rc = code;
			} else if (ar.curl == CURLE_OPERATION_TIMEDOUT) {
				rc = ckpt__fail(code, where, NULL, -1,
					"%s failed: the server stalled (no byte moved for %u s, CKPT_S3_STALL_SECONDS) after %u "
					"attempt%s%s", rq->method, c->cfg.stall_seconds, tries, tries == 1 ? "" : "s",
					late ? "; gave up at CKPT_S3_DEADLINE_SECONDS" : "");
			} else if (ar.curl != CURLE_OK) {
				rc = ckpt__fail(code, where, NULL, -1,
					"%s failed: %s (curl: %s; HTTP status %ld, no S3 error code) after %u attempt%s",
					rq->method, curl_easy_strerror(ar.curl), ar.curl_msg, rs->status,
					tries, tries == 1 ? "" : "s");
			} else if (rs->status >= 300 && rs->status < 400) {
				/* never followed: a signed request must not go where a server points (another host, bucket) */
				rc = ckpt__fail(code, where, NULL, -1,
					"%s failed: HTTP status %ld, redirected to %s (not followed: check the endpoint and "
					"region, AWS_ENDPOINT_URL / AWS_REGION)", rq->method, rs->status,
					rs->location[0] ? rs->location : "(no Location)");
			} else if (ar.short_body) {
				rc = ckpt__fail(code, where, NULL, -1,
					"%s failed: HTTP status %ld but the body is not the %zu bytes asked (no S3 error code) after %u attempt%s",
					rq->method, rs->status, rq->range_len, tries, tries == 1 ? "" : "s");
			} else {
				char *msg = rs->body ? s3_xml_next(rs->body, "Message", NULL) : NULL;
				rc = ckpt__fail(code, where, NULL, -1,
					"%s failed: HTTP status %ld, S3 error code %s%s%s after %u attempt%s",
					rq->method, rs->status, rs->code[0] ? rs->code : "(none)",
					msg ? ": " : "", msg ? msg : "", tries, tries == 1 ? "" : "s");
				ckpt__free(msg);
			}
		}
	}
	ckpt__free(where);
	curl_slist_free_all(hdrs);
	ckpt__free(url);
	return rc;
}

int s3_get_listing(s3_client *c, const char *bucket, char *query, s3_response *rs)
{
	memset(rs, 0, sizeof(*rs));
	if (!query)
		return CKPT_ENOMEM;
	s3_request rq = { "GET", bucket, "", query, NULL, 0, NULL, S3_RETRIED, 0, 0, 0, NULL, 0 };
	int rc = s3_perform(c, &rq, rs);
	ckpt__free(query);
	return rc;
}

int s3_perform(s3_client *c, const s3_request *rq, s3_response *rs)
{
	return s3_perform_quiet(c, rq, rs, NULL);
}

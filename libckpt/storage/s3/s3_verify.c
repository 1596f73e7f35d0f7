/*
 * The whole-object check of `ckpt verify` (ckpt_s3_object_verify): an
 * object is read whole and its bytes are checked against every checksum of
 * the whole object it carries. Formats with no checksum per tensor
 * (safetensors, GGUF, Keras) have nothing else that catches a ranged GET
 * answered with other bytes under a matching Content-Range.
 *
 * Checksums, all of them computed in one pass over the bytes:
 *  - x-amz-meta-ckpt-crc32c: crc32c (hex) that io_s3.c stores with every
 *    single-part object it writes;
 *  - x-amz-checksum-crc32c / x-amz-checksum-crc32 (base64 of the big-endian
 *    value): of the whole object, or, for a multipart upload ("...-N", type
 *    COMPOSITE), of the concatenated checksums of its N parts, whose size a
 *    HEAD of part 1 gives (every part but the last has that size);
 *  - an ETag of 32 hex digits: the MD5 of a single-part upload, unless the
 *    object is encrypted with SSE-KMS or SSE-C (then the ETag is no digest).
 * A multipart object's ETag (MD5 of the parts' MD5s) is not used: servers
 * differ in what they put there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "libckpt/storage/s3/s3_lib.h"
#include "internal.h"
#include "s3_internal.h"

/* One stored checksum and the running computation that checks it. */
typedef struct {
	const char *name;     /* "crc32c", "crc32", "md5" */
	const char *source;   /* the header it comes from */
	char want[64];        /* as the server wrote it, without "-N" */
	int is_crc32c;        /* else crc32 (for md5: unused) */
	int composite;        /* 1: of the parts' checksums */
	int hex;              /* want is hex (ours, MD5) rather than base64 */
	uint32_t crc;         /* whole object (full) or current part (composite) */
	unsigned char *parts; /* composite: 4 big-endian bytes per part done */
	long nparts, done;
} check;

#define MAX_CHECKS 4

static uint32_t crc_extend(const check *c, uint32_t crc, const void *b, size_t n)
{
	if (c->is_crc32c)
		return ckpt_crc32c_extend(crc, b, n);
	while (n) { /* zlib's length is a uInt */
		uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
		crc = (uint32_t)crc32(crc, b, k);
		b = (const char *)b + k;
		n -= k;
	}
	return crc;
}

static void be4(unsigned char *o, uint32_t v)
{
	o[0] = (unsigned char)(v >> 24);
	o[1] = (unsigned char)(v >> 16);
	o[2] = (unsigned char)(v >> 8);
	o[3] = (unsigned char)v;
}

static void b64_of(char out[16], uint32_t v)
{
	unsigned char b[4];
	be4(b, v);
	EVP_EncodeBlock((unsigned char *)out, b, 4);
}

/* A server's x-amz-checksum-* value: full ("b64") or composite ("b64-N", or type COMPOSITE). */
static int add_sum(check *c, const char *name, const char *source, const char *value, const char *type,
	int is_crc32c, long *want_parts)
{
	memset(c, 0, sizeof(*c));
	c->name = name;
	c->source = source;
	c->is_crc32c = is_crc32c;
	const char *dash = strchr(value, '-');
	size_t n = dash ? (size_t)(dash - value) : strlen(value);
	if (n == 0 || n >= sizeof(c->want))
		return 0;
	memcpy(c->want, value, n);
	c->want[n] = '\0';
	if (dash || strcasecmp(type, "COMPOSITE") == 0) {
		long parts = dash ? strtol(dash + 1, NULL, 10) : 0;
		if (parts <= 0)
			return 0; /* composite of an unknown number of parts: nothing to compare with */
		c->composite = 1;
		c->nparts = parts;
		*want_parts = parts;
	}
	c->crc = is_crc32c ? 0 : (uint32_t)crc32(0L, Z_NULL, 0);
	return 1;
}

/* The size of every part but the last, from a HEAD of part 1 (0 when the server does not say). */
static uint64_t part_one_size(s3_client *c, const char *bucket, const char *key, const char *etag, long parts)
{
	char ifmatch[160];
	snprintf(ifmatch, sizeof(ifmatch), "If-Match: %s", etag);
	const char *hdrs[] = { ifmatch, NULL };
	s3_request rq = { "HEAD", bucket, key, "partNumber=1", NULL, 0, etag[0] ? hdrs : NULL, S3_RETRIED, 0, 0, 0,
		NULL, 0 };
	s3_response rs;
	int rc = s3_perform(c, &rq, &rs);
	uint64_t p = rc == CKPT_OK && rs.parts_count == parts ? rs.content_length : 0;
	s3_response_clear(&rs);
	return rc < 0 ? 0 : p;
}

/* Feed bytes [off, off + len) of an object of `size` bytes to one check (md5 is fed apart). */
static void feed(check *k, const char *buf, size_t len, uint64_t off, uint64_t part_size, uint64_t size)
{
	if (strcmp(k->name, "md5") == 0)
		return;
	if (!k->composite) {
		k->crc = crc_extend(k, k->crc, buf, len);
		return;
	}
	/* a part boundary inside this read closes that part's checksum */
	for (size_t at = 0; at < len;) {
		uint64_t pos = off + at, end = (pos / part_size + 1) * part_size;
		size_t take = end - pos < len - at ? (size_t)(end - pos) : len - at;
		k->crc = crc_extend(k, k->crc, buf + at, take);
		at += take;
		if ((off + at) % part_size == 0 || off + at == size) {
			if (k->done < k->nparts)
				be4(k->parts + 4 * k->done, k->crc);
			k->done++;
			k->crc = k->is_crc32c ? 0 : (uint32_t)crc32(0L, Z_NULL, 0);
		}
	}
}

int ckpt_s3_object_verify(ckpt_s3_object_check *out, ckpt_vfs *vfs, const char *path)
{
	if (!out || !path)
		return ckpt__fail(CKPT_EINVAL, path, NULL, -1, "ckpt_s3_object_verify: NULL argument");
	memset(out, 0, sizeof(*out));
	ckpt_vfs *v = ckpt_vfs_for_path(vfs, path);
	if (!v)
		return ckpt_error_last()->code;
	if (!ckpt__vfs_is_s3(v))
		return ckpt__fail(CKPT_EINVAL, path, NULL, -1, "not an object on S3: no whole-object checksum to check");
	s3_client *c = ckpt__vfs_s3_client(v);
	ckpt_io *io = NULL;
	CKPT_TRY(ckpt_vfs_open(&io, v, path, CKPT_IO_READ));
	const s3_head *h = ckpt__s3_io_head(io);
	char *bucket = NULL, *key = NULL;
	int rc = ckpt_s3_path_split(&bucket, &key, path);
	check ck[MAX_CHECKS];
	unsigned n = 0;
	long parts = 0;
	uint64_t part_size = 0;
	EVP_MD_CTX *md5 = NULL;
	if (rc == CKPT_OK && h->meta_crc32c[0]) {
		check *k = &ck[n++];
		memset(k, 0, sizeof(*k));
		k->name = "crc32c";
		k->source = "x-amz-meta-ckpt-crc32c";
		k->is_crc32c = k->hex = 1;
		snprintf(k->want, sizeof(k->want), "%s", h->meta_crc32c);
	}
	if (rc == CKPT_OK && h->sum_crc32c[0])
		n += (unsigned)add_sum(&ck[n], "crc32c", "x-amz-checksum-crc32c", h->sum_crc32c, h->sum_type, 1, &parts);
	if (rc == CKPT_OK && h->sum_crc32[0])
		n += (unsigned)add_sum(&ck[n], "crc32", "x-amz-checksum-crc32", h->sum_crc32, h->sum_type, 0, &parts);
	const char *e = h->etag + (h->etag[0] == '"');
	size_t el = strcspn(e, "\"");
	int plain_md5 = el == 32 && strspn(e, "0123456789abcdefABCDEF") >= 32 && strcasecmp(h->sse, "aws:kms") != 0 &&
		strcasecmp(h->sse, "aws:kms:dsse") != 0 && strcmp(h->sse, "SSE-C") != 0;
	if (rc == CKPT_OK && plain_md5) {
		check *k = &ck[n++];
		memset(k, 0, sizeof(*k));
		k->name = "md5";
		k->source = "ETag";
		k->hex = 1;
		snprintf(k->want, sizeof(k->want), "%.32s", e);
		if (!(md5 = EVP_MD_CTX_new()) || EVP_DigestInit_ex(md5, EVP_md5(), NULL) != 1)
			rc = ckpt__fail(CKPT_ENOMEM, path, NULL, -1, "cannot start an MD5 digest");
	}
	if (rc == CKPT_OK && parts > 0) {
		part_size = parts == 1 ? h->size : part_one_size(c, bucket, key, h->etag, parts);
		int fits = part_size > 0 && (uint64_t)(parts - 1) * part_size < h->size + (h->size == 0) &&
			h->size <= (uint64_t)parts * part_size;
		for (unsigned i = 0; i < n && rc == CKPT_OK; i++) {
			if (!ck[i].composite)
				continue;
			if (fits) {
				if (!(ck[i].parts = ckpt__calloc((size_t)parts, 4)))
					rc = CKPT_ENOMEM;
				continue;
			}
			/* parts of unknown or unequal sizes: say so, check the others */
			size_t l = strlen(out->what);
			snprintf(out->what + l, sizeof(out->what) - l, "%s%s (%s, a composite of parts of unknown sizes) not checked",
				l ? "; " : "", ck[i].name, ck[i].source);
			ck[i--] = ck[--n];
		}
	}
	out->size = h->size;
	if (rc == CKPT_OK && n == 0 && !out->what[0])
		snprintf(out->what, sizeof(out->what), "%s", strchr(e, '-') ?
			"no whole-object checksum: a multipart upload, and the server gives no composite checksum" :
			"no whole-object checksum: no crc32c metadata, no x-amz-checksum, no MD5 ETag");
	/* one pass: reads of parallel x part_size bytes (ranged GETs in flight), every checksum fed */
	const ckpt_s3_config *cfg = s3_client_config(c);
	size_t chunk = cfg->part_size * (cfg->parallel ? cfg->parallel : 1);
	char *buf = rc == CKPT_OK && n ? ckpt__malloc(chunk) : NULL;
	if (rc == CKPT_OK && n && !buf)
		rc = CKPT_ENOMEM;
	for (uint64_t off = 0; rc == CKPT_OK && n && off < h->size;) {
		size_t len = h->size - off < chunk ? (size_t)(h->size - off) : chunk;
		rc = ckpt_io_read_exact(io, buf, len, off);
		for (unsigned i = 0; rc == CKPT_OK && i < n; i++)
			feed(&ck[i], buf, len, off, part_size, h->size);
		if (rc == CKPT_OK && md5 && EVP_DigestUpdate(md5, buf, len) != 1)
			rc = ckpt__fail(CKPT_ERROR, path, NULL, (int64_t)off, "MD5 digest failed");
		off += len;
	}
	ckpt__free(buf);
	for (unsigned i = 0; rc == CKPT_OK && i < n; i++) {
		check *k = &ck[i];
		char got[128];
		if (strcmp(k->name, "md5") == 0) {
			unsigned char d[EVP_MAX_MD_SIZE];
			unsigned dn = 0;
			if (EVP_DigestFinal_ex(md5, d, &dn) != 1 || dn != 16) {
				rc = ckpt__fail(CKPT_ERROR, path, NULL, -1, "MD5 digest failed");
				break;
			}
			for (unsigned j = 0; j < 16; j++)
				snprintf(got + 2 * j, 3, "%02x", d[j]);
		} else if (k->hex) {
			snprintf(got, sizeof(got), "%08x", k->crc);
		} else if (k->composite) {
			/* an empty object is one empty part */
			if (h->size == 0 && k->done == 0) {
				be4(k->parts, k->crc);
				k->done = 1;
			}
			check whole = *k;
			whole.crc = whole.is_crc32c ? 0 : (uint32_t)crc32(0L, Z_NULL, 0);
			whole.crc = crc_extend(&whole, whole.crc, k->parts, 4 * (size_t)(k->done < k->nparts ? k->done : k->nparts));
			b64_of(got, whole.crc);
			if (k->done != k->nparts)
				snprintf(got, sizeof(got), "(%ld parts of %llu bytes, the server says %ld)", k->done,
					(unsigned long long)part_size, k->nparts);
		} else {
			b64_of(got, k->crc);
		}
		if (k->hex ? strcasecmp(got, k->want) != 0 : strcmp(got, k->want) != 0) {
			rc = ckpt__fail(CKPT_ECHECKSUM, path, NULL, -1,
				"whole-object %s%s mismatch: %s says %s, the %llu bytes read give %s", k->name,
				k->composite ? " (composite of the parts' checksums)" : "", k->source, k->want,
				(unsigned long long)h->size, got);
			break;
		}
		size_t l = strlen(out->what);
		snprintf(out->what + l, sizeof(out->what) - l, "%s%s%s (%s)", l ? ", " : "", k->name,
			k->composite ? " composite" : "", k->source);
		out->num_checked++;
	}
	for (unsigned i = 0; i < n; i++)
		ckpt__free(ck[i].parts);
	if (md5)
		EVP_MD_CTX_free(md5);
	ckpt__free(bucket);
	ckpt__free(key);
	ckpt_io_close(io);
	return rc;
}

/*
 * ListMultipartUploads over a raw key prefix, with every answer checked: an
 * <Upload> must hold its <Key> and <UploadId> (never borrowed from the next
 * one), its key must be under the prefix asked for, and a listing that goes
 * on must give a new marker, for at most CKPT_MAX_S3_LIST_PAGES pages. Used
 * by `ckpt s3 uploads` (s3_uploads.c) and by a retried multipart create
 * (s3_multipart.c) that cleans up the uploads lost answers left.
 */
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "s3_internal.h"

void ckpt_s3_uploads_free(ckpt_s3_upload *u, size_t n)
{
	for (size_t i = 0; u && i < n; i++) {
		ckpt__free(u[i].key);
		ckpt__free(u[i].upload_id);
		ckpt__free(u[i].initiated);
	}
	ckpt__free(u);
}

/* The text of <tag> inside [from, to) of one <Upload>, NULL when it has none (or no memory). */
static char *field_within(const char *from, const char *to, const char *tag)
{
	char open[32];
	snprintf(open, sizeof(open), "<%s>", tag);
	const char *a = strstr(from, open);
	if (!a || a >= to)
		return NULL;
	const char *pos = a;
	char *v = s3_xml_next(a, tag, &pos);
	if (v && pos > to) {
		ckpt__free(v);
		return NULL;
	}
	return v;
}

/* One <Upload>…</Upload> of a listing of `dir` into *u; a field missing or a key outside dir is an error. */
static int parse_upload(ckpt_s3_upload *u, const char *prefix, const char *dir, const char *from, const char *to)
{
	u->key = field_within(from, to, "Key");
	u->upload_id = field_within(from, to, "UploadId");
	u->initiated = field_within(from, to, "Initiated");
	if (!u->key || !u->upload_id)
		return ckpt__fail(CKPT_EFORMAT, prefix, NULL, -1,
			"ListMultipartUploads: an <Upload> without %s", u->key ? "<UploadId>" : "<Key>");
	if (strncmp(u->key, dir, strlen(dir)) != 0)
		return ckpt__fail(CKPT_EFORMAT, prefix, NULL, -1,
			"ListMultipartUploads names key '%s', outside the prefix '%s' that was asked for", u->key, dir);
	return CKPT_OK;
}

int s3_uploads_list_raw(ckpt_s3_upload **uploads, size_t *count, s3_client *c, const char *prefix,
	const char *bucket, const char *dir)
{
	*uploads = NULL;
	*count = 0;
	char *ekey = s3_uri_encode(dir, 0);
	char *key_marker = NULL, *id_marker = NULL;
	ckpt_s3_upload *v = NULL;
	size_t n = 0, cap = 0;
	unsigned pages = 0;
	int rc = ekey ? CKPT_OK : CKPT_ENOMEM;
	while (rc == CKPT_OK) {
		if (++pages > CKPT_MAX_S3_LIST_PAGES) {
			rc = ckpt__fail(CKPT_ELIMIT, prefix, NULL, -1,
				"ListMultipartUploads: the server is still answering 'more' after %u pages "
				"(CKPT_MAX_S3_LIST_PAGES)", CKPT_MAX_S3_LIST_PAGES);
			break;
		}
		char *ekm = key_marker ? s3_uri_encode(key_marker, 0) : NULL;
		char *eim = id_marker ? s3_uri_encode(id_marker, 0) : NULL;
		/* parameters in sorted order: libcurl signs the query as written */
		char *query = ckpt__asprintf("%s%s%sprefix=%s%s%s%s", ekm ? "key-marker=" : "", ekm ? ekm : "",
			ekm ? "&" : "", ekey, eim ? "&upload-id-marker=" : "", eim ? eim : "", "&uploads=");
		ckpt__free(ekm);
		ckpt__free(eim);
		s3_response rs;
		rc = s3_get_listing(c, bucket, query, &rs);
		if (rc == CKPT_OK && (!rs.body || !strstr(rs.body, "<ListMultipartUploadsResult")))
			rc = ckpt__fail(CKPT_EFORMAT, prefix, NULL, -1,
				"ListMultipartUploads: HTTP status %ld but the body is not a ListMultipartUploadsResult",
				rs.status);
		const char *pos = rc == CKPT_OK ? strstr(rs.body, "<Upload>") : NULL;
		while (rc == CKPT_OK && pos) {
			const char *end = strstr(pos, "</Upload>");
			if (!end) {
				rc = ckpt__fail(CKPT_EFORMAT, prefix, NULL, -1, "ListMultipartUploads: an <Upload> is not closed");
				break;
			}
			if (n == cap) {
				size_t ncap = cap ? 2 * cap : 16;
				ckpt_s3_upload *nv = ckpt__realloc(v, ncap * sizeof(*nv));
				if (!nv) {
					rc = CKPT_ENOMEM;
					break;
				}
				v = nv;
				cap = ncap;
			}
			rc = parse_upload(&v[n++], prefix, dir, pos, end);
			pos = strstr(end, "<Upload>");
		}
		char *trunc = rc == CKPT_OK ? s3_xml_next(rs.body, "IsTruncated", NULL) : NULL;
		int more = trunc && strcmp(trunc, "true") == 0;
		ckpt__free(trunc);
		char *km = more ? s3_xml_next(rs.body, "NextKeyMarker", NULL) : NULL;
		char *im = more ? s3_xml_next(rs.body, "NextUploadIdMarker", NULL) : NULL;
		s3_response_clear(&rs);
		if (rc == CKPT_OK && more &&
			(!km || !km[0] || (key_marker && strcmp(km, key_marker) == 0 &&
				strcmp(im ? im : "", id_marker ? id_marker : "") == 0)))
			rc = ckpt__fail(CKPT_EFORMAT, prefix, NULL, -1,
				"ListMultipartUploads: the server says the listing goes on but gives %s marker",
				km && km[0] ? "the same" : "no");
		ckpt__free(key_marker);
		ckpt__free(id_marker);
		key_marker = km;
		id_marker = im;
		if (rc < 0 || !key_marker)
			break;
	}
	ckpt__free(key_marker);
	ckpt__free(id_marker);
	ckpt__free(ekey);
	if (rc < 0) {
		ckpt_s3_uploads_free(v, n);
		return rc;
	}
	*uploads = v;
	*count = n;
	return CKPT_OK;
}


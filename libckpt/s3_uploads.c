/*
 * Multipart uploads a killed process left behind (ListMultipartUploads,
 * AbortMultipartUpload): they are invisible as objects but their parts
 * stay stored, and billed, until aborted. `ckpt s3 uploads` lists and
 * aborts them.
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

static int client_for(s3_client **c, ckpt_vfs *vfs, const char *prefix)
{
	CKPT_TRY(ckpt_vfs_for_path(&vfs, vfs, prefix));
	if (!(*c = ckpt__vfs_s3_client(vfs)))
		return ckpt__fail(CKPT_EINVAL, prefix, NULL, -1, "not an S3 path or not an S3 file system");
	return CKPT_OK;
}

int ckpt_s3_uploads_list(ckpt_s3_upload **uploads, size_t *count, ckpt_vfs *vfs, const char *prefix)
{
	*uploads = NULL;
	*count = 0;
	s3_client *c;
	char *bucket, *key;
	CKPT_TRY(client_for(&c, vfs, prefix));
	CKPT_TRY(ckpt_s3_path_split(&bucket, &key, prefix));
	char *ekey = s3_uri_encode(key, 0);
	char *key_marker = NULL, *id_marker = NULL;
	ckpt_s3_upload *v = NULL;
	size_t n = 0, cap = 0;
	int rc = ekey ? CKPT_OK : CKPT_ENOMEM;
	while (rc == CKPT_OK) {
		char *ekm = key_marker ? s3_uri_encode(key_marker, 0) : NULL;
		char *eim = id_marker ? s3_uri_encode(id_marker, 0) : NULL;
		/* parameters in sorted order: libcurl signs the query as written */
		char *query = ckpt__asprintf("%s%s%sprefix=%s%s%s%s", ekm ? "key-marker=" : "", ekm ? ekm : "",
			ekm ? "&" : "", ekey, eim ? "&upload-id-marker=" : "", eim ? eim : "", "&uploads=");
		ckpt__free(ekm);
		ckpt__free(eim);
		if (!query) {
			rc = CKPT_ENOMEM;
			break;
		}
		s3_request rq = { "GET", bucket, "", query, NULL, 0, NULL, 1, 0, 0, 0, NULL, 0 };
		s3_response rs;
		rc = s3_perform(c, &rq, &rs);
		ckpt__free(query);
		const char *pos = rs.body ? strstr(rs.body, "<Upload>") : NULL;
		while (rc == CKPT_OK && pos) {
			const char *end = strstr(pos, "</Upload>");
			if (!end)
				break;
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
			const char *p = pos;
			v[n].key = s3_xml_next(rs.body, "Key", &p);
			p = pos;
			v[n].upload_id = s3_xml_next(rs.body, "UploadId", &p);
			p = pos;
			v[n].initiated = s3_xml_next(rs.body, "Initiated", &p);
			n++;
			if (!v[n - 1].key || !v[n - 1].upload_id)
				rc = ckpt__fail(CKPT_EFORMAT, prefix, NULL, -1, "ListMultipartUploads: an <Upload> without Key or UploadId");
			pos = strstr(end, "<Upload>");
		}
		char *trunc = rs.body ? s3_xml_next(rs.body, "IsTruncated", NULL) : NULL;
		int more = trunc && strcmp(trunc, "true") == 0;
		ckpt__free(trunc);
		ckpt__free(key_marker);
		ckpt__free(id_marker);
		key_marker = more ? s3_xml_next(rs.body, "NextKeyMarker", NULL) : NULL;
		id_marker = more ? s3_xml_next(rs.body, "NextUploadIdMarker", NULL) : NULL;
		s3_response_clear(&rs);
		if (!key_marker)
			break;
	}
	ckpt__free(key_marker);
	ckpt__free(id_marker);
	ckpt__free(ekey);
	ckpt__free(bucket);
	ckpt__free(key);
	if (rc < 0) {
		ckpt_s3_uploads_free(v, n);
		return rc;
	}
	*uploads = v;
	*count = n;
	return CKPT_OK;
}

int ckpt_s3_upload_abort(ckpt_vfs *vfs, const char *prefix, const ckpt_s3_upload *u)
{
	s3_client *c;
	char *bucket, *key;
	CKPT_TRY(client_for(&c, vfs, prefix));
	CKPT_TRY(ckpt_s3_path_split(&bucket, &key, prefix));
	char *id = s3_uri_encode(u->upload_id, 0);
	char *query = id ? ckpt__asprintf("uploadId=%s", id) : NULL;
	int rc = CKPT_ENOMEM;
	if (query) {
		s3_request rq = { "DELETE", bucket, u->key, query, NULL, 0, NULL, S3_CLEANUP, 0, 0, 0, NULL, 0 };
		s3_response rs;
		rc = s3_perform(c, &rq, &rs);
		s3_response_clear(&rs);
	}
	ckpt__free(query);
	ckpt__free(id);
	ckpt__free(bucket);
	ckpt__free(key);
	return rc;
}

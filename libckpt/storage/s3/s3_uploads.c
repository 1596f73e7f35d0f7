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

static int client_for(s3_client **c, ckpt_vfs *vfs, const char *prefix)
{
	CKPT_TRY(ckpt_status_of(vfs = ckpt_vfs_for_path(vfs, prefix)));
	if (!(*c = ckpt__vfs_s3_client(vfs)))
		return ckpt__fail(CKPT_EINVAL, prefix, NULL, -1, "not an S3 path or not an S3 file system");
	return CKPT_OK;
}

/* "key/" for a prefix "s3://b/key": a prefix is a directory, so run1 never matches run10/… ("" for the bucket) */
static char *dir_prefix(const char *key)
{
	return key[0] ? ckpt__asprintf("%s/", key) : ckpt__strdup("");
}

int ckpt_s3_uploads_list(ckpt_s3_upload **uploads, size_t *count, ckpt_vfs *vfs, const char *prefix)
{
	*uploads = NULL;
	*count = 0;
	s3_client *c;
	char *bucket, *key;
	CKPT_TRY(client_for(&c, vfs, prefix));
	CKPT_TRY(ckpt_s3_path_split(&bucket, &key, prefix));
	char *dir = dir_prefix(key);
	int rc = dir ? s3_uploads_list_raw(uploads, count, c, prefix, bucket, dir) : CKPT_ENOMEM;
	ckpt__free(dir);
	ckpt__free(bucket);
	ckpt__free(key);
	return rc;
}

int ckpt_s3_upload_abort(ckpt_vfs *vfs, const char *prefix, const ckpt_s3_upload *u)
{
	s3_client *c;
	char *bucket, *key;
	CKPT_TRY(client_for(&c, vfs, prefix));
	CKPT_TRY(ckpt_s3_path_split(&bucket, &key, prefix));
	char *dir = dir_prefix(key);
	int rc = dir ? CKPT_OK : CKPT_ENOMEM;
	if (rc == CKPT_OK && strncmp(u->key, dir, strlen(dir)) != 0)
		rc = ckpt__fail(CKPT_EINVAL, prefix, NULL, -1,
			"refused to abort the upload of '%s': it is outside the prefix '%s'", u->key, dir);
	char *id = rc == CKPT_OK ? s3_uri_encode(u->upload_id, 0) : NULL;
	char *query = id ? ckpt__asprintf("uploadId=%s", id) : NULL;
	if (rc == CKPT_OK && !query)
		rc = CKPT_ENOMEM;
	if (rc == CKPT_OK) {
		s3_request rq = { "DELETE", bucket, u->key, query, NULL, 0, NULL, S3_CLEANUP, 0, 0, 0, NULL, 0 };
		s3_response rs;
		rc = s3_perform(c, &rq, &rs);
		s3_response_clear(&rs);
	}
	ckpt__free(query);
	ckpt__free(id);
	ckpt__free(dir);
	ckpt__free(bucket);
	ckpt__free(key);
	return rc;
}

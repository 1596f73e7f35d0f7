/*
 * Retries where the S3 API allows them (issue 36, point 4): one 503 or a
 * lost answer on CreateMultipartUpload or CompleteMultipartUpload does not
 * fail a save. A Create whose answer was lost leaves no orphan upload; a
 * Complete whose answer was lost is confirmed by the object's ETag (the MD5
 * of the parts' MD5s) when its retry answers 404 NoSuchUpload.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "manager_common.h"
#include "s3_common.h"
#include "s3_proxy.h"

/* A 12 MiB object through the proxy in 5 MiB parts (three parts), read back by boto3. */
static void upload_through(const char *mode, const char *kind, const char *what)
{
	char *dir = s3t_prefix("retry");
	char *path = ts_join(dir, "big.bin");
	size_t n = 12u << 20;
	unsigned char *buf = malloc(n);
	cr_assert_not_null(buf);
	for (size_t i = 0; i < n; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 13);
	proxy p;
	const char *const rules[] = { kind, NULL };
	proxy_start_rules(&p, "1", mode, rules);
	ckpt_vfs *v = proxy_vfs(&p, 5u << 20, 3);
	cr_expect_eq(ckpt_vfs_write_atomic(v, path, buf, n, 0), CKPT_OK, "%s: %s", what, ckpt_error_last()->message);
	ckpt_vfs_free(v);
	proxy_stop(&p);
	char *file = NULL;
	char *tmp = ts_tmpdir();
	file = ts_join(tmp, "want.bin");
	cr_assert_eq(ts_write_file(file, buf, n), 0);
	free(s3t_oracle("same", path, file, NULL)); /* boto3 reads the very bytes */
	char *left = s3t_oracle("uploads", dir, NULL);
	cr_expect_eq(atoi(left), 0, "%s: %s uploads left under the prefix", what, left);
	free(left);
	ts_rmtree(tmp);
	free(tmp);
	free(file);
	free(buf);
	free(path);
	free(dir);
}

Test(s3_retries, create_refused_once_is_retried, .timeout = 120)
{
	upload_through("503", "POST?uploads", "CreateMultipartUpload answered 503 once");
}

Test(s3_retries, create_answer_lost_leaves_no_orphan_upload, .timeout = 120)
{
	upload_through("truncate", "POST?uploads", "CreateMultipartUpload's answer cut");
}

Test(s3_retries, complete_refused_once_is_retried, .timeout = 120)
{
	upload_through("503", "POST?uploadId=", "CompleteMultipartUpload answered 503 once");
}

Test(s3_retries, complete_answer_lost_is_confirmed_by_the_etag, .timeout = 120)
{
	upload_through("truncate", "POST?uploadId=", "CompleteMultipartUpload's answer cut");
}

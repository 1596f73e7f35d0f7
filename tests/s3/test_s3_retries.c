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

/* A checkpoint of one 12 MiB float variable whose every element is `v`, written with ckpt_checkpoint_write to `path` through `vfs`. */
static int write_filled(ckpt_vfs *vfs, const char *path, float v)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.vfs = vfs;
	o.no_fsync = 1;
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
	int64_t n = 3 << 20;
	ckpt_shape shape;
	cr_assert_eq(ckpt_shape_make(&shape, 1, &n), CKPT_OK);
	ckpt_variable *var;
	cr_assert_eq(ckpt_status_of(var = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "big", "big", CKPT_DT_FLOAT,
		&shape, NULL)), CKPT_OK);
	float *buf = malloc((size_t)n * sizeof(float));
	cr_assert_not_null(buf);
	for (int64_t i = 0; i < n; i++)
		buf[i] = v;
	cr_assert_eq(ckpt_variable_assign(var, buf, (size_t)n * sizeof(float)), CKPT_OK);
	free(buf);
	int rc = ckpt_checkpoint_write(ck, path);
	ckpt_checkpoint_free(ck);
	return rc;
}

/*
 * A failed save over an existing checkpoint leaves it loadable (issue 36,
 * point 3): every request that sends the new data is refused (its parts,
 * the upload's creation, or its completion: by then the old index was
 * retired, and is put back), the save fails, and the old checkpoint still
 * opens and holds its own values.
 */
Test(s3_retries, a_failed_save_over_a_checkpoint_leaves_it_loadable, .timeout = 180)
{
	static const char *const kinds[] = { "PUT?partNumber=", "POST?uploads", "POST?uploadId=", NULL };
	for (int k = 0; kinds[k]; k++) {
		char *dir = s3t_prefix("over");
		char *path = ts_join(dir, "ckpt");
		ckpt_vfs *direct = s3t_vfs(NULL, 5u << 20, 0);
		cr_assert_eq(write_filled(direct, path, 1.5f), CKPT_OK, "%s", ckpt_error_last()->message);
		proxy p;
		const char *const rules[] = { kinds[k], NULL };
		proxy_start_rules(&p, "1:1000000", "503", rules);
		ckpt_vfs *v = proxy_vfs(&p, 5u << 20, 2);
		cr_expect_lt(write_filled(v, path, 2.5f), 0, "%s refused: the save succeeded", kinds[k]);
		ckpt_vfs_free(v);
		proxy_stop(&p);
		ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
		oo.vfs = direct;
		ckpt_reader *r = NULL;
		cr_assert_eq(ckpt_reader_open(&r, path, &oo), CKPT_OK, "%s refused: the old checkpoint is gone: %s", kinds[k],
			ckpt_error_last()->message);
		ckpt_tensor *t = NULL;
		size_t at = 0;
		cr_assert_eq(ckpt_reader_find(&at, r, "big/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK, "%s", ckpt_error_last()->message);
		cr_assert_eq(ckpt_reader_read(&t, r, at), CKPT_OK, "%s", ckpt_error_last()->message);
		const float *f = t->data;
		cr_expect(f[0] == 1.5f && f[(3 << 20) - 1] == 1.5f, "%s refused: the old checkpoint holds %g", kinds[k],
			(double)f[0]);
		ckpt_tensor_free(t);
		ckpt_reader_free(r);
		ckpt_vfs_free(direct);
		free(path);
		free(dir);
	}
}

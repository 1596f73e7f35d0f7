/*
 * `ckpt verify` of a flat format on S3 checks each object whole (issue 36,
 * point 9, last item). safetensors stores no checksum per tensor, so a
 * ranged GET answered with other bytes under a matching Content-Range (the
 * fault proxy's corruptget mode: the server's answer with one body byte
 * flipped, headers kept) used to verify "OK"; now the object's stored
 * checksum — libckpt's crc32c metadata of a single-part object, the
 * server's composite crc32c of a multipart upload, an MD5 ETag — is checked
 * over the bytes read, or the output says the object has none.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ckpt/sys/alloc.h" /* ckpt_free */
#include "s3_common.h"
#include "s3_proxy.h"

/* A safetensors file of one float32 tensor of `nbytes` bytes in `tmp`; returns its path (caller frees). */
static char *local_safetensors(const char *tmp, size_t nbytes)
{
	char *path = ts_join(tmp, "x.safetensors");
	int64_t d = (int64_t)(nbytes / 4);
	ckpt_shape sh;
	cr_assert_eq(ckpt_shape_make(&sh, 1, &d), CKPT_OK);
	ckpt_tensor *t;
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &sh), CKPT_OK);
	unsigned char *p = t->data;
	for (size_t i = 0; i < (size_t)d * 4; i++)
		p[i] = (unsigned char)((i * 2654435761u) >> 13);
	ckpt_writer *w;
	cr_assert_eq(ckpt_writer_open(&w, path, "safetensors", NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_writer_add(w, "w", t, 0), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_writer_free(w);
	ckpt_tensor_free(t);
	return path;
}

/* Copy `local` to the object `s3` through a VFS with parts of `part` bytes (0: the default 8 MiB). */
static void upload(const char *local, const char *s3, size_t part)
{
	void *buf = NULL;
	size_t n = 0;
	cr_assert_eq(ckpt_vfs_read_all(&buf, &n, ckpt_vfs_default(), local, 1u << 30), CKPT_OK);
	ckpt_vfs *v = s3t_vfs(NULL, part, 2);
	ckpt_io *io;
	cr_assert_eq(ckpt_vfs_open(&io, v, s3, CKPT_IO_WRITE), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_io_pwrite(io, buf, n, 0), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_vfs_free(v);
	ckpt_free(buf);
}

/* `ckpt verify path`, through a proxy that corrupts every ranged GET's answer when `corrupt`. */
static ts_run_result verify_cli(const char *path, int corrupt)
{
	proxy p;
	char *saved = strdup(getenv("AWS_ENDPOINT_URL")), ep[64];
	if (corrupt) {
		proxy_start_rules(&p, "1:1000000", "corruptget", (const char *const[]){ "GET?", NULL });
		proxy_endpoint(&p, ep, sizeof(ep));
		setenv("AWS_ENDPOINT_URL", ep, 1);
	}
	ts_run_result r = ts_cli("verify", path, NULL);
	if (corrupt) {
		setenv("AWS_ENDPOINT_URL", saved, 1);
		proxy_stop(&p);
	}
	free(saved);
	return r;
}

static void check_both_ways(const char *obj, const char *matches, const char *mismatch)
{
	ts_run_result r = verify_cli(obj, 0);
	cr_assert_eq(r.status, 0, "verify: exit %d\n%s%s", r.status, r.out, r.err);
	cr_expect(strstr(r.out, matches) != NULL, "verify does not say '%s':\n%s", matches, r.out);
	ts_run_free(&r);
	r = verify_cli(obj, 1);
	cr_expect_neq(r.status, 0, "verify of other bytes under a matching Content-Range passed:\n%s%s", r.out, r.err);
	cr_expect(strstr(r.err, obj) && strstr(r.err, mismatch) && strstr(r.err, "the ") && strstr(r.err, "bytes read give"),
		"the error names the object, the checksum, expected and got:\n%s", r.err);
	ts_run_free(&r);
}

/* One PUT (3 MiB, over the 1 MiB a reader checks at open): libckpt's crc32c metadata and the MD5 ETag. */
Test(s3_whole_object, single_part_safetensors_other_bytes_are_caught, .timeout = 180)
{
	char *tmp = ts_tmpdir(), *local = local_safetensors(tmp, 3u << 20);
	char *dir = s3t_prefix("whole1"), *obj = ts_join(dir, "x.safetensors");
	upload(local, obj, 0);
	check_both_ways(obj, "whole object matches crc32c (x-amz-meta-ckpt-crc32c), md5 (ETag)",
		"whole-object crc32c mismatch: x-amz-meta-ckpt-crc32c says");
	ts_rmtree(tmp);
	free(tmp);
	free(local);
	free(obj);
	free(dir);
}

/* A 3-part upload of libckpt's: the server's composite crc32c (the parts' checksums, 5 MiB parts read as 8 MiB ranges). */
Test(s3_whole_object, multipart_safetensors_checked_by_the_composite_checksum, .timeout = 180)
{
	char *tmp = ts_tmpdir(), *local = local_safetensors(tmp, (11u << 20) + 4000);
	char *dir = s3t_prefix("whole2"), *obj = ts_join(dir, "x.safetensors");
	upload(local, obj, 5u << 20);
	check_both_ways(obj, "whole object matches crc32c composite (x-amz-checksum-crc32c)",
		"whole-object crc32c (composite of the parts' checksums) mismatch: x-amz-checksum-crc32c says");
	ts_rmtree(tmp);
	free(tmp);
	free(local);
	free(obj);
	free(dir);
}

/* A multipart upload without checksums (boto3, checksums off): nothing to check, and verify says so. */
Test(s3_whole_object, an_object_without_a_whole_object_checksum_is_said_to_have_none, .timeout = 180)
{
	char *tmp = ts_tmpdir(), *local = local_safetensors(tmp, (11u << 20) + 4000);
	char *dir = s3t_prefix("whole3"), *obj = ts_join(dir, "x.safetensors");
	free(s3t_oracle("put_plain_multipart", obj, local, NULL));
	ckpt_s3_object_check chk;
	cr_assert_eq(ckpt_s3_object_verify(&chk, NULL, obj), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_expect_eq(chk.num_checked, 0, "checked: %s", chk.what);
	cr_expect_gt(chk.size, (11u << 20) + 4000, "%llu bytes", (unsigned long long)chk.size);
	cr_expect(strstr(chk.what, "no whole-object checksum") != NULL, "%s", chk.what);
	ts_run_result r = verify_cli(obj, 0);
	cr_assert_eq(r.status, 0, "verify: exit %d\n%s%s", r.status, r.out, r.err);
	cr_expect(strstr(r.out, "no whole-object checksum: a multipart upload") != NULL, "%s", r.out);
	ts_run_free(&r);
	/* a local file is no object */
	cr_expect_eq(ckpt_s3_object_verify(&chk, NULL, local), CKPT_EINVAL);
	ts_rmtree(tmp);
	free(tmp);
	free(local);
	free(obj);
	free(dir);
}

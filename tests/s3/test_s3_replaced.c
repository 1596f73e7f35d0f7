/*
 * An object replaced while it is read (a manager rewriting `checkpoint`
 * while another process reads it): the S3 VFS pins an open file's reads to
 * the version its HEAD saw, so a read never mixes two versions; a whole-file
 * read (ckpt_vfs_read_all: state files, indexes, JSON) starts over and
 * returns the newer version whole. The fault proxy holds the first GET until
 * the test has replaced the object, so the order is fixed, not timed.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ckpt/sys/alloc.h" /* ckpt_free */
#include "s3_common.h"
#include "s3_proxy.h"

static const char first[] = "model_checkpoint_path: \"ckpt-1\"\nall_model_checkpoint_paths: \"ckpt-1\"\n";
static const char second[] = "model_checkpoint_path: \"ckpt-2\"\nall_model_checkpoint_paths: \"ckpt-1\"\n"
			     "all_model_checkpoint_paths: \"ckpt-2\"\n";

static void put(ckpt_vfs *v, const char *path, const char *text)
{
	ckpt_io *io;
	cr_assert_eq(ckpt_vfs_open(v, path, CKPT_IO_WRITE, &io), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_io_pwrite(io, text, strlen(text), 0), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK, "%s", ckpt_error_last()->message);
}

typedef struct {
	ckpt_vfs *vfs;
	const char *path;
	int rc;
	char message[512];
	void *buf;
	size_t n;
} reader_job;

static void *read_whole(void *arg)
{
	reader_job *j = arg;
	j->rc = ckpt_vfs_read_all(j->vfs, j->path, 1 << 20, &j->buf, &j->n);
	if (j->rc < 0)
		snprintf(j->message, sizeof(j->message), "%s", ckpt_error_last()->message);
	return NULL;
}

static void wait_seen(const proxy *p, long n)
{
	for (int waited = 0; proxy_seen(p) < n && waited < 6000; waited++)
		usleep(10000);
	cr_assert_geq(proxy_seen(p), n, "the proxy saw %ld requests, want %ld", proxy_seen(p), n);
}

Test(s3_replaced, a_whole_file_read_across_a_replacement_returns_the_new_version, .timeout = 300)
{
	char *dir = s3t_prefix("replaced");
	char *path = ts_join(dir, "checkpoint");
	ckpt_vfs *direct = s3t_vfs(NULL, 0, 0);
	put(direct, path, first);

	/* the reader goes through the proxy, which holds its first GET (after the HEAD) */
	proxy p;
	proxy_start_rules(&p, "1", "hold", (const char *const[]){ "GET?", NULL });
	char ep[64];
	proxy_endpoint(&p, ep, sizeof(ep));
	ckpt_vfs *through = s3t_vfs(ep, 0, 0);
	reader_job j = { .vfs = through, .path = path };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, read_whole, &j), 0);
	wait_seen(&p, 2); /* HEAD relayed, GET held */
	put(direct, path, second);
	proxy_release(&p);
	pthread_join(t, NULL);
	long seen = proxy_stop(&p);

	cr_assert_eq(j.rc, CKPT_OK, "read_all failed across the replacement: %s", j.message);
	cr_expect_eq(j.n, strlen(second));
	cr_expect(j.n == strlen(second) && memcmp(j.buf, second, j.n) == 0, "read %zu bytes: %.*s", j.n, (int)j.n,
		(const char *)j.buf);
	/* HEAD, the GET refused for the old version, then HEAD and GET of the new one */
	cr_expect_eq(seen, 4, "requests through the proxy: %ld", seen);
	ckpt_free(j.buf);

	/* a file opened before the replacement is not read across it: its reads fail, never mixing versions */
	ckpt_io *io;
	cr_assert_eq(ckpt_vfs_open(direct, path, CKPT_IO_READ, &io), CKPT_OK);
	put(direct, path, first);
	char buf[256];
	size_t got = 0;
	int rc = ckpt_io_pread(io, buf, sizeof(buf), 0, &got);
	cr_expect_eq(rc, CKPT_EBUSY, "a read of the replaced version: %d %s", rc, ckpt_error_last()->message);
	ckpt_io_close(io);

	ckpt_vfs_free(through);
	ckpt_vfs_free(direct);
	free(path);
	free(dir);
}

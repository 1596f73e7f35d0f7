/*
 * Requests per operation (issue 36, point 8), counted by the fault proxy's
 * request log: a manager save, the retention that deletes one checkpoint,
 * `ckpt restore DIR` of a 43 MiB checkpoint of two objects, and `ckpt
 * verify` of it. Before the client kept what its HEADs and listings said
 * (s3_cache.c) a save took 12 requests, the restore 50 (26 HEADs, the
 * prefix probed 6 times) and verify 26; the bounds below are under those.
 * A save still HEADs the index it is about to write, to know whether an
 * older bundle must be kept loadable, but no longer lists "INDEX/" after
 * its 404 (11); an answer "absent" is not kept, since other ranks write into
 * the prefix. A retention no longer HEADs each object before its DELETE
 * (6 -> 4). What the cache says is never trusted across a failed read: an
 * object another client replaced is read anew.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ckpt/sys/alloc.h" /* ckpt_free */
#include "manager_common.h"
#include "s3_common.h"
#include "s3_proxy.h"

/* Lines of `log` from line `from` on, and how many of them hold `what` (NULL: all). */
static size_t count(const char *log, size_t from, const char *what)
{
	size_t n = 0, line = 0;
	for (const char *p = log; *p; line++) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		if (line >= from && (!what || memmem(p, len, what, strlen(what))))
			n++;
		p += len + (eol != NULL);
	}
	return n;
}

static size_t logged(const proxy *p, size_t from, const char *what)
{
	char *log = proxy_log(p);
	size_t n = count(log, from, what);
	free(log);
	return n;
}

/* The manager's state plus a 43 MiB float32 variable "big", on `v`. */
static ckpt_variable *big_state(mc_state *s, ckpt_vfs *v)
{
	cr_assert_eq(mc_build(s, v), CKPT_OK);
	int64_t d = 43 << 18;
	ckpt_shape sh;
	cr_assert_eq(ckpt_shape_make(&sh, 1, &d), CKPT_OK);
	ckpt_variable *big = ckpt_object_add_variable(ckpt_checkpoint_root(s->ck), "big", "big", CKPT_DT_FLOAT, &sh, NULL);
	cr_assert_not_null(big, "%s", ckpt_error_last()->message);
	return big;
}

/* `ckpt ARGS...` with the library pointed at the proxy; returns the requests it sent. */
static size_t cli_requests(const proxy *p, const char *cmd, const char *a1, const char *a2, const char *a3)
{
	char *saved = strdup(getenv("AWS_ENDPOINT_URL")), ep[64];
	proxy_endpoint(p, ep, sizeof(ep));
	setenv("AWS_ENDPOINT_URL", ep, 1);
	size_t before = logged(p, 0, NULL);
	ts_run_result r = ts_cli(cmd, a1, a2, a3, NULL);
	setenv("AWS_ENDPOINT_URL", saved, 1);
	free(saved);
	cr_assert_eq(r.status, 0, "ckpt %s %s: exit %d\n%s%s", cmd, a1, r.status, r.out, r.err);
	ts_run_free(&r);
	return logged(p, 0, NULL) - before;
}

Test(s3_requests, save_restore_and_verify_take_fewer_round_trips, .timeout = 300)
{
	char *dir = s3t_prefix("req");
	proxy p;
	proxy_start(&p, 0, "none");
	ckpt_vfs *v = proxy_vfs(&p, 0, 5);
	mc_state s;
	big_state(&s, v);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = v;
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 2, &mo), CKPT_OK, "%s", ckpt_error_last()->message);
	size_t at = logged(&p, 0, NULL);
	cr_assert_eq(mc_save(&s, m, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	size_t save1 = logged(&p, at, NULL);
	at += save1;
	cr_assert_eq(mc_save(&s, m, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	size_t save2 = logged(&p, at, NULL);
	at += save2;
	cr_assert_eq(mc_save(&s, m, NULL), CKPT_OK, "%s", ckpt_error_last()->message); /* ckpt-1 goes */
	size_t retention = logged(&p, at, NULL) - save2;
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ckpt_vfs_free(v);

	char *ck = ts_join(dir, "ckpt-3");
	at = logged(&p, 0, NULL);
	size_t restore = cli_requests(&p, "restore", dir, "--strategy", "default");
	size_t index_heads = logged(&p, at, "HEAD "), probes = logged(&p, at, "max-keys=1&");
	at = logged(&p, 0, NULL);
	size_t verify = cli_requests(&p, "verify", ck, NULL, NULL);
	proxy_stop(&p);
	cr_log_info("requests: save %zu then %zu, retention %zu, restore of the directory %zu (%zu HEADs, "
		"%zu prefix probes), verify %zu", save1, save2, retention, restore, index_heads, probes, verify);
	fprintf(stderr, "requests: save %zu then %zu, retention %zu, restore of the directory %zu (%zu HEADs, "
		"%zu prefix probes), verify %zu\n", save1, save2, retention, restore, index_heads, probes, verify);
	/* 1 create, 6 parts, the index HEAD-ed (is an older bundle there?), 1 complete, the index, the state file;
	 * no listing: a "directory" of the index's name is no older bundle (was 12) */
	cr_expect_leq(save2, 11, "a save took %zu requests", save2);
	/* ckpt-1's index deleted, the directory listed, its data deleted, the state file rewritten; no HEAD before
	 * each DELETE (was 6) */
	cr_expect_leq(retention, 4, "retention took %zu requests", retention);
	/* HEAD, listing, the state file, the index and the data each HEAD-ed once; the GETs the readers make */
	cr_expect_leq(restore, 25, "the restore took %zu requests", restore);
	cr_expect_leq(index_heads, 4, "the restore sent %zu HEADs (prefix, state file, index, data)", index_heads);
	cr_expect_leq(probes, 1, "the restore probed the prefix %zu times", probes);
	cr_expect_leq(verify, 19, "verify took %zu requests", verify);
	free(ck);
	free(dir);
}

static void put(ckpt_vfs *v, const char *path, const char *text)
{
	ckpt_io *io;
	cr_assert_eq(ckpt_vfs_open(&io, v, path, CKPT_IO_WRITE), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_io_pwrite(io, text, strlen(text), 0), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK, "%s", ckpt_error_last()->message);
}

/*
 * What one client's cache says is never trusted across a change or a failed
 * read: after another client replaced an object, a file opened on the
 * cached HEAD reads the new version (same size: its first read, refused by
 * If-Match, asks again) or fails with CKPT_EBUSY (another size), never the
 * old bytes, and the next whole read is the new version; this client's own
 * write or delete is seen at once.
 */
Test(s3_requests, the_cache_is_never_trusted_across_a_change, .timeout = 120)
{
	static const char v1[] = "first version", v2[] = "newer version", v3[] = "the third, longer version";
	char *dir = s3t_prefix("cache"), *path = ts_join(dir, "obj"), *fresh = ts_join(dir, "fresh");
	ckpt_vfs *a = s3t_vfs(NULL, 0, 0), *b = s3t_vfs(NULL, 0, 0);
	put(a, path, v1);
	cr_assert_eq(ckpt_vfs_exists(NULL, a, path), 1); /* a's cache: the first version's HEAD */
	cr_assert_eq(ckpt_vfs_exists(NULL, a, fresh), 0); /* and: nothing at "fresh" */
	put(b, path, v2);
	ckpt_io *io;
	char buf[64];
	size_t got = 0;
	cr_assert_eq(ckpt_vfs_open(&io, a, path, CKPT_IO_READ), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_io_pread(&got, io, buf, sizeof(buf), 0), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_expect(got == strlen(v2) && memcmp(buf, v2, got) == 0, "read %.*s", (int)got, buf);
	ckpt_io_close(io);
	cr_assert_eq(ckpt_vfs_exists(NULL, a, path), 1);
	put(b, path, v3);
	cr_assert_eq(ckpt_vfs_open(&io, a, path, CKPT_IO_READ), CKPT_OK, "%s", ckpt_error_last()->message);
	int rc = ckpt_io_pread(&got, io, buf, sizeof(buf), 0);
	cr_expect(rc == CKPT_EBUSY || (rc == CKPT_OK && got == strlen(v3) && memcmp(buf, v3, got) == 0),
		"a read after the replacement: %d %s (%.*s)", rc, ckpt_error_last()->message, (int)got, buf);
	ckpt_io_close(io);
	void *all = NULL;
	size_t n = 0;
	cr_assert_eq(ckpt_vfs_read_all(&all, &n, a, path, 1 << 20), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_expect(n == strlen(v3) && memcmp(all, v3, n) == 0, "read %zu bytes: %.*s", n, (int)n, (const char *)all);
	ckpt_free(all);
	/* a's own write and delete are seen at once */
	put(a, fresh, "new");
	cr_expect_eq(ckpt_vfs_exists(NULL, a, fresh), 1, "a's own write is not seen through its cache");
	cr_expect_eq(ckpt_vfs_remove(a, fresh), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_expect_eq(ckpt_vfs_exists(NULL, a, fresh), 0, "a's own delete is not seen through its cache");
	ckpt_vfs_free(a);
	ckpt_vfs_free(b);
	free(fresh);
	free(path);
	free(dir);
}

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
 * object another client replaced is read anew. One operation
 * (ckpt_vfs_op_begin) reads a small object once: a restore read the index
 * and the `checkpoint` state file 4 times each (22 requests, a manager's
 * 23), now once (16, 20); nothing it kept outlives it.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
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

/* GETs from line `from` on of an object whose key ends with `suffix` (ranged or whole: one line each). */
static size_t gets_of(const proxy *p, size_t from, const char *suffix)
{
	char *log = proxy_log(p);
	size_t n = 0, line = 0, sl = strlen(suffix);
	for (const char *q = log; *q; line++) {
		const char *eol = strchr(q, '\n');
		size_t len = eol ? (size_t)(eol - q) : strlen(q);
		if (line >= from && len > 4 + sl && strncmp(q, "GET ", 4) == 0 && memcmp(q + len - sl, suffix, sl) == 0)
			n++;
		q += len + (eol != NULL);
	}
	free(log);
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

	/* a manager's restore of the latest (a new client: nothing cached from the saves) */
	ckpt_vfs *v2 = proxy_vfs(&p, 0, 5);
	mc_state s2;
	big_state(&s2, v2);
	mo.vfs = v2;
	cr_assert_eq(ckpt_manager_new_ext(&m, s2.ck, dir, 2, &mo), CKPT_OK, "%s", ckpt_error_last()->message);
	at = logged(&p, 0, NULL);
	cr_assert_not_null(ckpt_manager_restore_latest(NULL, m), "%s", ckpt_error_last()->message);
	size_t mrestore = logged(&p, at, NULL), mindex = gets_of(&p, at, "/ckpt-3.index");
	size_t mdata = gets_of(&p, at, "/ckpt-3.data-00000-of-00001");
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s2.ck);
	ckpt_vfs_free(v2);

	char *ck = ts_join(dir, "ckpt-3");
	at = logged(&p, 0, NULL);
	size_t restore = cli_requests(&p, "restore", dir, "--strategy", "default");
	size_t index_heads = logged(&p, at, "HEAD "), probes = logged(&p, at, "max-keys=1&");
	size_t index_gets = gets_of(&p, at, "/ckpt-3.index"), state_gets = gets_of(&p, at, "/checkpoint");
	size_t data_gets = gets_of(&p, at, "/ckpt-3.data-00000-of-00001");
	at = logged(&p, 0, NULL);
	size_t verify = cli_requests(&p, "verify", ck, NULL, NULL);
	size_t verify_index = gets_of(&p, at, "/ckpt-3.index");
	size_t verify_data = gets_of(&p, at, "/ckpt-3.data-00000-of-00001");
	proxy_stop(&p);
	fprintf(stderr, "requests: save %zu then %zu, retention %zu, manager restore %zu (index read %zu times, "
		"%zu data GETs), restore of the directory %zu (%zu HEADs, %zu prefix probes, index read %zu times, "
		"state file %zu, %zu data GETs), verify %zu (index read %zu times, %zu data GETs)\n", save1, save2,
		retention, mrestore, mindex, mdata, restore, index_heads, probes, index_gets, state_gets, data_gets,
		verify, verify_index, verify_data);
	/* 1 create, 6 parts, the index HEAD-ed (is an older bundle there?), 1 complete, the index, the state file;
	 * no listing: a "directory" of the index's name is no older bundle (was 12) */
	cr_expect_leq(save2, 11, "a save took %zu requests", save2);
	/* ckpt-1's index deleted, the directory listed, its data deleted, the state file rewritten; no HEAD before
	 * each DELETE (was 6) */
	cr_expect_leq(retention, 4, "retention took %zu requests", retention);
	/*
	 * One operation reads the state file and the index once (ckpt_vfs_op_begin), though the format's bid,
	 * its open and the load each open them. Besides the data's GETs (their number follows the part size
	 * and the read runs): `ckpt restore DIR` sends the directory's HEAD and listing, the state file's HEAD
	 * and GET, the index's, the data's HEAD: 7 (was 13, the state file and the index read 4 times each:
	 * 22 requests in all with 8 MiB parts, now 16). A manager's restore: the index's HEAD and GET, the
	 * prefix's HEAD and listing, the data's HEAD: 5 (was 8: the index read 4 times; 23 in all, now 20).
	 * Verify: the same 5 (was 6).
	 */
	cr_expect_eq(index_gets, 1, "the restore read the index %zu times", index_gets);
	cr_expect_eq(state_gets, 1, "the restore read the state file %zu times", state_gets);
	cr_expect_leq(restore - data_gets, 7, "the restore took %zu requests besides the data's %zu GETs",
		restore - data_gets, data_gets);
	cr_expect_eq(mindex, 1, "the manager's restore read the index %zu times", mindex);
	cr_expect_leq(mrestore - mdata, 5, "the manager's restore took %zu requests besides the data's %zu GETs",
		mrestore - mdata, mdata);
	cr_expect_leq(verify - verify_data, 5, "verify took %zu requests besides the data's %zu GETs",
		verify - verify_data, verify_data);
	cr_expect_eq(verify_index, 1, "verify read the index %zu times", verify_index);
	cr_expect_leq(index_heads, 4, "the restore sent %zu HEADs (prefix, state file, index, data)", index_heads);
	cr_expect_leq(probes, 1, "the restore probed the prefix %zu times", probes);
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

typedef struct {
	ckpt_vfs *v;
	const char *path;
	char *got;
	size_t n;
} other_read;

static void *read_elsewhere(void *arg)
{
	other_read *o = arg;
	void *all = NULL;
	if (ckpt_vfs_read_all(&all, &o->n, o->v, o->path, 1 << 20) == CKPT_OK)
		o->got = all;
	return NULL;
}

/*
 * One operation (ckpt_vfs_op_begin .. end) reads a small object once: opened
 * again by the same thread it is served from memory, no request, and as it
 * was first read even if another process replaced it meanwhile (the
 * operation's snapshot). Nothing outlives the operation: after its end the
 * replacement is read; this client's own write is seen within it; another
 * thread is not in this thread's operation.
 */
Test(s3_requests, an_operation_keeps_what_it_read_until_it_ends, .timeout = 120)
{
	static const char v1[] = "first version", v2[] = "newer version", v3[] = "our own write", v4[] = "fourth one";
	char *dir = s3t_prefix("op"), *path = ts_join(dir, "checkpoint");
	proxy p;
	proxy_start(&p, 0, "none");
	ckpt_vfs *a = proxy_vfs(&p, 0, 5), *b = s3t_vfs(NULL, 0, 0);
	put(b, path, v1);
	void *all = NULL;
	size_t n = 0;

	ckpt_vfs_op_begin();
	size_t at = logged(&p, 0, NULL);
	cr_assert_eq(ckpt_vfs_read_all(&all, &n, a, path, 1 << 20), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_expect(n == strlen(v1) && memcmp(all, v1, n) == 0, "read %.*s", (int)n, (const char *)all);
	ckpt_free(all);
	size_t first = logged(&p, at, NULL);
	cr_expect_eq(first, 2, "the first read took %zu requests (a HEAD and a GET)", first);
	put(b, path, v2); /* another process replaces it within the operation */
	at = logged(&p, 0, NULL);
	cr_assert_eq(ckpt_vfs_read_all(&all, &n, a, path, 1 << 20), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_expect_eq(logged(&p, at, NULL), 0, "read again in the same operation: %zu requests", logged(&p, at, NULL));
	cr_expect(n == strlen(v1) && memcmp(all, v1, n) == 0, "the operation's second read: %.*s", (int)n,
		(const char *)all);
	ckpt_free(all);
	ckpt_vfs_op_end();

	/* the operation is over: the replacement is read (the client's cached HEAD is refused by If-Match) */
	cr_assert_eq(ckpt_vfs_read_all(&all, &n, a, path, 1 << 20), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_expect(n == strlen(v2) && memcmp(all, v2, n) == 0, "after the operation: %.*s", (int)n, (const char *)all);
	ckpt_free(all);

	ckpt_vfs_op_begin();
	ckpt_vfs_op_begin(); /* nested: the outer end ends it */
	cr_assert_eq(ckpt_vfs_read_all(&all, &n, a, path, 1 << 20), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_free(all);
	ckpt_vfs_op_end();
	put(a, path, v3); /* this client's own write is seen at once */
	cr_assert_eq(ckpt_vfs_read_all(&all, &n, a, path, 1 << 20), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_expect(n == strlen(v3) && memcmp(all, v3, n) == 0, "after our own write: %.*s", (int)n, (const char *)all);
	ckpt_free(all);
	put(b, path, v4);
	other_read o = { a, path, NULL, 0 };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, read_elsewhere, &o), 0);
	pthread_join(t, NULL);
	cr_expect(o.got && o.n == strlen(v4) && memcmp(o.got, v4, o.n) == 0, "another thread read %.*s", (int)o.n,
		o.got ? o.got : "");
	ckpt_free(o.got);
	ckpt_vfs_op_end();
	ckpt_vfs_op_end(); /* unmatched: nothing */

	proxy_stop(&p);
	ckpt_vfs_free(a);
	ckpt_vfs_free(b);
	free(path);
	free(dir);
}

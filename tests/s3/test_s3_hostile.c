/*
 * What a hostile or broken S3 server gets (issue 36, point 9). Keys go out
 * exactly as named, and nothing the server says makes the library act
 * outside the prefix the user named: not a key a listing returns, not a
 * name in a `checkpoint` state file, not an upload of a neighbouring
 * prefix. The broken answers come from the fault proxy's reply mode (a
 * canned body for one kind of request) in front of the real server, whose
 * every other answer is real; the proxy's request log shows what was sent.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "manager_common.h"
#include "s3_common.h"
#include "s3_proxy.h"

/* s3://BUCKET/KEY-PREFIX of a prefix URL: the key part (points into url). */
static const char *key_of(const char *url)
{
	return strchr(url + 5, '/') + 1;
}

/* A file holding `body`, for the proxy's reply mode (caller frees the name and unlinks it). */
static char *reply_file(const char *body)
{
	static unsigned seq;
	char *name = NULL;
	cr_assert_gt(asprintf(&name, "/tmp/ckpt-hostile-%ld-%u.xml", (long)getpid(), ++seq), 0);
	cr_assert_eq(ts_write_file(name, body, strlen(body)), 0);
	return name;
}

/* A proxy whose answer to every request of `kind` is 200 with `body`; the rest reach the server. */
static void start_replying(proxy *p, const char *kind, const char *body, char **file)
{
	*file = reply_file(body);
	char mode[600];
	snprintf(mode, sizeof(mode), "reply:%s", *file);
	const char *const rules[] = { kind, NULL };
	proxy_start_rules(p, "1:1000000", mode, rules);
}

/* Fail when a logged request line is not under /BUCKET/KEY (or a listing of the bucket restricted to it). */
static void assert_log_within(const char *log, const char *bucket, const char *key, const char *what)
{
	char under[1024];
	snprintf(under, sizeof(under), "/%s/%s", bucket, key);
	for (const char *line = log; *line;) {
		const char *eol = strchr(line, '\n');
		size_t n = eol ? (size_t)(eol - line) : strlen(line);
		const char *target = memchr(line, ' ', n);
		cr_assert_not_null(target, "%s: a log line without a target: %.*s", what, (int)n, line);
		target++;
		int listing = strncmp(target, "/", 1) == 0 && strchr(target + 1, '/') != NULL &&
			strncmp(strchr(target + 1, '/'), "/?", 2) == 0;
		cr_assert(strncmp(target, under, strlen(under)) == 0 || listing,
			"%s: a request left %s: %.*s", what, under, (int)n, line);
		cr_assert(strstr(target, "/../") == NULL && strstr(target, "/./") == NULL,
			"%s: a request with a dot segment: %.*s", what, (int)n, line);
		line = eol ? eol + 1 : line + n;
	}
}

/*
 * Keys holding %2F, ?, #, spaces, unicode, a newline and // are written,
 * read and removed by exactly those names: boto3 reads each by its exact key
 * and sees no other key appear.
 */
Test(s3_hostile, keys_are_sent_exactly_as_named, .timeout = 120)
{
	static const char *const names[] = { "pct%2Fname", "q?x=1&y", "hash#frag", "with space", "unicod\xc3\xa9-\xd0\xba",
		"new\nline", "dbl//slash", "plus+semi;colon:", NULL };
	char *dir = s3t_prefix("exact");
	ckpt_vfs *v = s3t_vfs(NULL, 0, 0);
	size_t count = 0;
	for (const char *const *n = names; *n; n++, count++) {
		char *path = ts_join(dir, *n);
		cr_assert_eq(ckpt_vfs_write_atomic(v, path, *n, strlen(*n), 0), CKPT_OK, "%s: %s", *n,
			ckpt_error_last()->message);
		char *got = s3t_oracle("get", path, NULL); /* boto3, by the exact key */
		cr_expect_str_eq(got, *n, "boto3 reads another body at the key %s", *n);
		free(got);
		void *buf = NULL;
		size_t len = 0;
		cr_assert_eq(ckpt_vfs_read_all(&buf, &len, v, path, 1024), CKPT_OK, "%s", ckpt_error_last()->message);
		cr_expect(len == strlen(*n) && memcmp(buf, *n, len) == 0, "read back another body at %s", *n);
		ckpt_free(buf);
		free(path);
	}
	char *nk = s3t_oracle("nkeys", dir, NULL);
	cr_expect_eq(strtoul(nk, NULL, 10), count, "boto3 lists %s keys for %zu names", nk, count);
	free(nk);
	for (const char *const *n = names; *n; n++) {
		char *path = ts_join(dir, *n);
		cr_assert_eq(ckpt_vfs_remove(v, path), CKPT_OK, "%s: %s", *n, ckpt_error_last()->message);
		free(path);
	}
	nk = s3t_oracle("nkeys", dir, NULL);
	cr_expect_eq(strtoul(nk, NULL, 10), 0, "%s keys left after removing every name", nk);
	free(nk);
	ckpt_vfs_free(v);
	free(dir);
}

/* A key with a "." or ".." segment is refused before any request: no server or proxy can resolve it elsewhere. */
Test(s3_hostile, dot_segments_are_refused_before_any_request)
{
	char *dir = s3t_prefix("dots");
	proxy p;
	proxy_start(&p, 0, "none");
	ckpt_vfs *v = proxy_vfs(&p, 0, 3);
	static const char *const tails[] = { "j1/../../escape/x", "./x", "a/./b", "..", "a/..", NULL };
	for (const char *const *t = tails; *t; t++) {
		char *path = ts_join(dir, *t);
		ckpt_io *io = NULL;
		cr_expect_eq(ckpt_vfs_remove(v, path), CKPT_EINVAL, "remove %s", path);
		cr_expect(strstr(ckpt_error_last()->message, "segment") != NULL, "%s", ckpt_error_last()->message);
		cr_expect_eq(ckpt_vfs_open(&io, v, path, CKPT_IO_READ), CKPT_EINVAL, "open %s", path);
		cr_expect_lt(ckpt_vfs_write_atomic(v, path, "x", 1, 0), 0, "write %s", path);
		free(path);
	}
	cr_expect_eq(proxy_seen(&p), 0, "%ld requests went out", proxy_seen(&p));
	ckpt_vfs_free(v);
	proxy_stop(&p);
	free(dir);
}

/*
 * A listing whose keys leave the directory ("../victim"), or name another
 * prefix, is an error naming the key: a manager opening the directory
 * deletes nothing (the victim object is still there) and sends no request
 * outside its prefix.
 */
Test(s3_hostile, listed_keys_outside_the_prefix_are_refused_and_nothing_is_deleted, .timeout = 120)
{
	char *dir = s3t_prefix("list");
	const char *bucket = s3t_bucket(), *key = key_of(dir);
	char *victim = NULL;
	cr_assert_gt(asprintf(&victim, "%s-victim_temp", dir), 0);
	free(s3t_oracle("put", victim, "keep me", NULL));
	static const char *const evil[] = { "%s/../%s-victim_temp", "%s-victim_temp", "%s/a/b_temp", "%s/..", NULL };
	for (const char *const *e = evil; *e; e++) {
		char listed[1024], body[4096];
		snprintf(listed, sizeof(listed), *e, key, key);
		snprintf(body, sizeof(body),
			"<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><Name>%s</Name><Prefix>%s/</Prefix>"
			"<KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>"
			"<Contents><Key>%s/ckpt-1.index_temp</Key></Contents><Contents><Key>%s</Key></Contents>"
			"</ListBucketResult>", bucket, key, key, listed);
		proxy p;
		char *file;
		start_replying(&p, "GET?list-type=2", body, &file);
		ckpt_vfs *v = proxy_vfs(&p, 0, 3);
		char **names = NULL;
		size_t n = 0;
		cr_expect_eq(ckpt_vfs_list(&names, &n, v, dir), CKPT_EFORMAT, "listing %s", listed);
		cr_expect(strstr(ckpt_error_last()->message, listed) != NULL, "the error names no key: %s",
			ckpt_error_last()->message);
		/* a manager opening the directory (it sweeps temporaries) */
		mc_state s;
		cr_assert_eq(mc_build(&s, v), CKPT_OK);
		ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
		mo.vfs = v;
		ckpt_manager *m = NULL;
		cr_expect_eq(ckpt_manager_new_ext(&m, s.ck, dir, 2, &mo), CKPT_EFORMAT, "a manager opened over the listing %s",
			listed);
		ckpt_manager_free(m);
		ckpt_checkpoint_free(s.ck);
		char *log = proxy_log(&p);
		/* the only deletes: the manager's release of its own lock (and of its conditional-write probe) */
		for (const char *d = log; (d = strstr(d, "DELETE ")) != NULL; d++)
			cr_expect(strncmp(strchr(d, ' ') + 1 + strlen(bucket) + 2 + strlen(key), "/checkpoint.lock", 16) == 0,
				"listing %s: a delete was sent:\n%s", listed, log);
		assert_log_within(log, bucket, key, listed);
		free(log);
		ckpt_vfs_free(v);
		proxy_stop(&p);
		unlink(file);
		free(file);
	}
	char *kept = s3t_oracle("get", victim, NULL);
	cr_expect_str_eq(kept, "keep me");
	free(kept);
	free(victim);
	free(dir);
}

/* A `checkpoint` state file naming a key outside its prefix, or another bucket, is refused by restores and managers. */
Test(s3_hostile, state_file_naming_another_prefix_or_bucket_is_refused, .timeout = 120)
{
	static const char *const names[] = { "../../../otherbucket/x", "../sibling/ckpt-1", "s3://otherbucket/ckpt-1",
		"/etc/ckpt-1", "./ckpt-1", NULL };
	for (const char *const *nm = names; *nm; nm++) {
		char *dir = s3t_prefix("state");
		const char *bucket = s3t_bucket(), *key = key_of(dir);
		char *state = ts_join(dir, "checkpoint"), text[512];
		snprintf(text, sizeof(text), "model_checkpoint_path: \"%s\"\nall_model_checkpoint_paths: \"%s\"\n", *nm, *nm);
		free(s3t_oracle("put", state, text, NULL));
		proxy p;
		proxy_start(&p, 0, "none");
		ckpt_vfs *v = proxy_vfs(&p, 0, 3);
		ckpt_open_options ro = CKPT_OPEN_OPTIONS_INIT;
		ro.vfs = v;
		ckpt_reader *r = NULL;
		cr_expect_eq(ckpt_reader_open(&r, dir, &ro), CKPT_EFORMAT, "reader over a state file naming %s", *nm);
		cr_expect(strstr(ckpt_error_last()->message, "not inside") != NULL, "%s: %s", *nm, ckpt_error_last()->message);
		ckpt_reader_free(r);
		mc_state s;
		cr_assert_eq(mc_build(&s, v), CKPT_OK);
		ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
		mo.vfs = v;
		ckpt_manager *m = NULL;
		cr_expect_eq(ckpt_manager_new_ext(&m, s.ck, dir, 2, &mo), CKPT_EFORMAT, "manager over a state file naming %s",
			*nm);
		ckpt_manager_free(m);
		ckpt_checkpoint_free(s.ck);
		char *log = proxy_log(&p);
		assert_log_within(log, bucket, key, *nm);
		free(log);
		ckpt_vfs_free(v);
		proxy_stop(&p);
		free(state);
		free(dir);
	}
}

/* `ckpt s3 uploads abort s3://b/P/run1` takes run1 as a directory: run10/'s upload stays. */
Test(s3_hostile, uploads_abort_takes_the_prefix_as_a_directory, .timeout = 120)
{
	char *dir = s3t_prefix("uploads");
	char *run1 = ts_join(dir, "run1"), *run10 = ts_join(dir, "run10");
	char *k1 = ts_join(run1, "ckpt-1.data"), *k10 = ts_join(run10, "ckpt-1.data");
	free(s3t_oracle("upload_left", k1, NULL));
	free(s3t_oracle("upload_left", k10, NULL));
	ts_run_result r = ts_cli("s3", "uploads", "abort", run1, NULL);
	ts_assert_exit(&r, 0, "abort under run1");
	cr_expect(strstr(r.out, "run10") == NULL, "run10's upload was aborted:\n%s", r.out);
	ts_run_free(&r);
	char *n1 = s3t_oracle("uploads", run1, NULL); /* boto3 takes the prefix as a string: run1 counts run10 too */
	char *n10 = s3t_oracle("uploads", run10, NULL);
	cr_expect_eq(atoi(n10), 1, "uploads under run10/ left: %s", n10);
	cr_expect_eq(atoi(n1), 1, "uploads under run1* left (run10's only): %s", n1);
	free(n1);
	free(n10);
	r = ts_cli("s3", "uploads", "abort", run10, NULL);
	ts_assert_exit(&r, 0, "abort under run10");
	ts_run_free(&r);
	free(k1);
	free(k10);
	free(run1);
	free(run10);
	free(dir);
}

/* A server's key with control characters is printed escaped: no escape sequence reaches the terminal, no line is split. */
Test(s3_hostile, uploads_list_escapes_control_characters, .timeout = 60)
{
	char *dir = s3t_prefix("esc");
	const char *key = key_of(dir);
	char body[2048];
	snprintf(body, sizeof(body),
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListMultipartUploadsResult><Bucket>%s</Bucket>"
		"<IsTruncated>false</IsTruncated><Upload><Key>%s/x\x1b[2Jy\nz</Key><UploadId>id\x1b]0;t\x07</UploadId>"
		"<Initiated>2026-01-01T00:00:00Z</Initiated></Upload></ListMultipartUploadsResult>", s3t_bucket(), key);
	proxy p;
	char *file, ep[64];
	start_replying(&p, "GET?uploads", body, &file);
	proxy_endpoint(&p, ep, sizeof(ep));
	char *cmd = NULL;
	cr_assert_gt(asprintf(&cmd, "AWS_ENDPOINT_URL='%s' '%s' s3 uploads list '%s'", ep, TS_CLI, dir), 0);
	ts_run_result r;
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "uploads list");
	cr_expect(strchr(r.out, '\x1b') == NULL && strchr(r.out, '\x07') == NULL, "raw control characters:\n%s", r.out);
	cr_expect(strstr(r.out, "x\\x1b[2Jy\\x0az") != NULL, "the key is not shown escaped:\n%s", r.out);
	int lines = 0;
	for (const char *c = r.out; *c; c++)
		lines += *c == '\n';
	cr_expect_eq(lines, 2, "one line per upload and the summary:\n%s", r.out);
	ts_run_free(&r);
	free(cmd);
	proxy_stop(&p);
	unlink(file);
	free(file);
	free(dir);
}

/* An <Upload> without <Key> (or a key outside the prefix) is an error, not skipped and not borrowed from the next one. */
Test(s3_hostile, malformed_upload_listing_is_an_error)
{
	char *dir = s3t_prefix("mal");
	const char *key = key_of(dir);
	static const char *const uploads[] = {
		"<Upload><UploadId>a</UploadId></Upload><Upload><Key>%s/k</Key><UploadId>b</UploadId></Upload>",
		"<Upload><Key>%s0/k</Key><UploadId>a</UploadId></Upload>",
		"<Upload><Key>%s/k</Key><UploadId>a</UploadId>", NULL };
	for (const char *const *u = uploads; *u; u++) {
		char one[512], body[2048];
		snprintf(one, sizeof(one), *u, key);
		snprintf(body, sizeof(body), "<?xml version=\"1.0\"?><ListMultipartUploadsResult><IsTruncated>false"
			"</IsTruncated>%s</ListMultipartUploadsResult>", one);
		proxy p;
		char *file;
		start_replying(&p, "GET?uploads", body, &file);
		ckpt_vfs *v = proxy_vfs(&p, 0, 3);
		ckpt_s3_upload *list = NULL;
		size_t n = 0;
		cr_expect_eq(ckpt_s3_uploads_list(&list, &n, v, dir), CKPT_EFORMAT, "answer %s", one);
		ckpt_s3_uploads_free(list, n);
		ckpt_vfs_free(v);
		proxy_stop(&p);
		unlink(file);
		free(file);
	}
	free(dir);
}

/* IsTruncated with the same continuation token again and again: an error, soon, for both listings. */
Test(s3_hostile, endless_pagination_is_an_error, .timeout = 60)
{
	char *dir = s3t_prefix("endless");
	const char *key = key_of(dir);
	char body[1024];
	snprintf(body, sizeof(body), "<?xml version=\"1.0\"?><ListBucketResult><IsTruncated>true</IsTruncated>"
		"<Contents><Key>%s/a</Key></Contents><NextContinuationToken>same</NextContinuationToken></ListBucketResult>",
		key);
	proxy p;
	char *file;
	start_replying(&p, "GET?list-type=2", body, &file);
	ckpt_vfs *v = proxy_vfs(&p, 0, 3);
	char **names = NULL;
	size_t n = 0;
	cr_expect_eq(ckpt_vfs_list(&names, &n, v, dir), CKPT_EFORMAT);
	cr_expect(strstr(ckpt_error_last()->message, "continuation token") != NULL, "%s", ckpt_error_last()->message);
	cr_expect_leq(proxy_seen(&p), 3, "%ld pages asked for", proxy_seen(&p));
	ckpt_vfs_free(v);
	proxy_stop(&p);
	unlink(file);
	free(file);

	snprintf(body, sizeof(body), "<?xml version=\"1.0\"?><ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
		"<NextKeyMarker>%s/k</NextKeyMarker><NextUploadIdMarker>u</NextUploadIdMarker>"
		"<Upload><Key>%s/k</Key><UploadId>u</UploadId></Upload></ListMultipartUploadsResult>", key, key);
	start_replying(&p, "GET?uploads", body, &file);
	v = proxy_vfs(&p, 0, 3);
	ckpt_s3_upload *list = NULL;
	cr_expect_eq(ckpt_s3_uploads_list(&list, &n, v, dir), CKPT_EFORMAT);
	cr_expect(strstr(ckpt_error_last()->message, "marker") != NULL, "%s", ckpt_error_last()->message);
	ckpt_s3_uploads_free(list, n);
	ckpt_vfs_free(v);
	proxy_stop(&p);
	unlink(file);
	free(file);
	free(dir);
}

/*
 * CompleteMultipartUpload answered 200 with a body that is not a
 * CompleteMultipartUploadResult naming the key fails the save, and the
 * manager's latest stays the checkpoint before.
 */
Test(s3_hostile, complete_answered_200_with_malformed_xml_fails_the_save, .timeout = 120)
{
	static const char *const bodies[] = { "<?xml version=\"1.0\"?><CompleteMultipartUploadResult><Key>",
		"<html>ok</html>", "<CompleteMultipartUploadResult><Key>other</Key></CompleteMultipartUploadResult>", NULL };
	for (const char *const *b = bodies; *b; b++) {
		char *dir = s3t_prefix("complete");
		mc_state s;
		cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
		ckpt_manager *m;
		cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 2), CKPT_OK, "%s", ckpt_error_last()->message);
		cr_assert_eq(mc_save(&s, m, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
		ckpt_manager_free(m);
		ckpt_checkpoint_free(s.ck);

		proxy p;
		char *file;
		start_replying(&p, "POST?uploadId=", *b, &file);
		ckpt_vfs *v = proxy_vfs(&p, 5u << 20, 3);
		cr_assert_eq(mc_build(&s, v), CKPT_OK);
		ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
		mo.vfs = v;
		mo.no_fsync = 1;
		cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 2, &mo), CKPT_OK, "%s", ckpt_error_last()->message);
		/* 12 MiB: a data object of three parts, so the save completes a multipart upload */
		int64_t len = 3 << 20;
		ckpt_shape shape;
		cr_assert_eq(ckpt_shape_make(&shape, 1, &len), CKPT_OK);
		cr_assert_eq(ckpt_status_of(ckpt_object_add_variable(ckpt_checkpoint_root(s.ck), "big", "big", CKPT_DT_FLOAT,
			&shape, NULL)), CKPT_OK, "%s", ckpt_error_last()->message);
		cr_expect_lt(mc_save(&s, m, NULL), 0, "a save succeeded when CompleteMultipartUpload answered %s", *b);
		ckpt_manager_free(m);
		ckpt_checkpoint_free(s.ck);
		ckpt_vfs_free(v);
		proxy_stop(&p);
		unlink(file);
		free(file);
		mc_dir d;
		ckpt_vfs *direct = s3t_vfs(NULL, 0, 0);
		mc_scan(&d, direct, dir);
		cr_expect_eq(d.state_latest, 1, "answer %s: the state file names ckpt-%lld", *b, (long long)d.state_latest);
		cr_expect_eq(d.newest_complete, 1, "answer %s: ckpt-%lld is the newest complete", *b,
			(long long)d.newest_complete);
		ckpt_vfs_free(direct);
		free(dir);
	}
}

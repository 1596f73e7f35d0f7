/*
 * Incremental saves on s3:// (issue 33 point 2): unchanged shards come by
 * CopyObject, unchanged ranges by UploadPartCopy, both conditional on the
 * source's ETag; a source replaced or deleted between saves makes the save
 * upload those bytes instead, and every checkpoint reads back bit-exactly
 * (libckpt verifying every crc, TensorFlow restoring with assert_consumed).
 * The copy requests themselves are checked against boto3's
 * upload_part_copy / copy_object on the same server (s3_copy_check.py).
 * A copy answered 200 with an <Error> body (what S3 does when a copy fails
 * after it began) is not a copy: those bytes are uploaded.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "libckpt/internal.h"
#include "incr_common.h"
#include "incr_kill.h"
#include "oracle_common.h"
#include "s3_common.h"
#include "s3_proxy.h"

#define MIB (1ull << 20)
#define W 1024                  /* 4 KiB rows */
#define BASE_ROWS 3072          /* frozen: 12 MiB */
#define HEAD_N 256              /* trainable: 1 KiB, every step */
#define EMB_ROWS 6144           /* 24 MiB, 5 % of its rows (1.2 MiB, contiguous) per step */

typedef ic_state state;

static void build(state *s, const char *name)
{
	ic_build(s, NULL, BASE_ROWS, W, 0.25f, HEAD_N, EMB_ROWS, W, 0);
	s->dir = s3t_prefix(name);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.incremental = 1;
	cr_assert_eq(ckpt_manager_new_ext(&s->m, s->ck, s->dir, 0, &mo), CKPT_OK, "%s", ckpt_error_last()->message);
}

/* Save; record what the checkpoint must hold in expect/<ckpt-N>/; the bytes uploaded and copied by the server. */
static char *save(state *s, uint64_t *wr, uint64_t *ru)
{
	const char *p = ckpt_manager_save(s->m);
	cr_assert_not_null(p, "save: %s", ckpt_error_last()->message);
	ic_record(s, p);
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(wr, ru, s->ck), CKPT_OK);
	return strdup(p);
}

/* boto3 downloads the directory; TensorFlow lists and restores every checkpoint in it with assert_consumed. */
static void tf_restores_all(state *s)
{
	char *local = ts_tmpdir();
	free(s3t_oracle("download", s->dir, local, NULL));
	ts_run_result r = oracle_run("tf_incremental.py", local, s->expect, NULL);
	oracle_expect_ok(&r, "tf_incremental.py");
	ts_run_free(&r);
	ts_rmtree(local);
	free(local);
}

static ckpt_vfs *vfs(void)
{
	ckpt_vfs *v = NULL;
	cr_assert_eq(ckpt_status_of(v = ckpt_vfs_s3_shared()), CKPT_OK, "%s", ckpt_error_last()->message);
	return v;
}

/* Another writer replaces the object at `path` with its bytes, one flipped (a new ETag, the same size). */
static void replace_flipped(const char *path, uint64_t at)
{
	void *buf;
	size_t n;
	cr_assert_eq(ckpt_vfs_read_all(&buf, &n, vfs(), path, 1ull << 32), CKPT_OK, "%s: %s", path,
		ckpt_error_last()->message);
	cr_assert_gt(n, at);
	((unsigned char *)buf)[at] ^= 0x40;
	ckpt_io *io;
	cr_assert_eq(ckpt_vfs_open(&io, vfs(), path, CKPT_IO_WRITE), CKPT_OK);
	cr_assert_eq(ckpt_io_pwrite(io, buf, n, 0), CKPT_OK);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_free(buf);
}

#define CHANGED ((uint64_t)HEAD_N * 4 + (uint64_t)(EMB_ROWS / 20) * W * 4)
/* uploaded at most: the changed bytes; S3's 5 MiB minimum part (formats/tf_bundle/bundle_incr_s3.c) at the
 * shard's start (the head comes first) and at each end of the changed run; the small values (graph, counter) */
#define WRITTEN_MAX (CHANGED + 3 * 5 * MIB + 64 * 1024)

Test(s3_incremental, copies_shards_and_ranges_uploads_only_changes_tf_restores, .timeout = 600)
{
	state s;
	build(&s, "incr");
	uint64_t wr, ru;
	char *p1 = save(&s, &wr, &ru);
	cr_assert_eq(ru, 0, "the first save has nothing to reuse");
	ic_step(&s, 1, 0);
	char *p2 = save(&s, &wr, &ru);
	/* the frozen base by UploadPartCopy into its own shard, the embedding's untouched runs likewise */
	cr_assert_leq(wr, WRITTEN_MAX, "uploaded %llu bytes for %llu changed", (unsigned long long)wr,
		(unsigned long long)CHANGED);
	cr_assert_geq(ru, (uint64_t)BASE_ROWS * W * 4 + (uint64_t)EMB_ROWS * W * 4 - 3 * 5 * MIB, "copied %llu",
		(unsigned long long)ru);
	ic_step(&s, 2, 0);
	char *p3 = save(&s, &wr, &ru);
	cr_assert_leq(wr, WRITTEN_MAX, "uploaded %llu bytes for %llu changed", (unsigned long long)wr,
		(unsigned long long)CHANGED);
	cr_assert_geq(ru, (uint64_t)BASE_ROWS * W * 4 + (uint64_t)EMB_ROWS * W * 4 - 3 * 5 * MIB, "copied %llu",
		(unsigned long long)ru);
	/* the base's shard of ckpt-3 is ckpt-2's, copied whole (CopyObject): the same bytes, seen by boto3 */
	char *f2 = ic_data_file(p2, 1, 2), *f3 = ic_data_file(p3, 1, 3);
	char *h2 = s3t_oracle("sha256", f2, NULL), *h3 = s3t_oracle("sha256", f3, NULL);
	cr_assert_eq(strncmp(h2, h3, 64), 0, "%s: %s\n%s: %s", f2, h2, f3, h3);
	cr_assert_eq(strtoull(strchr(h3, ' ') + 1, NULL, 10), (uint64_t)BASE_ROWS * W * 4);
	const char *all[] = { p1, p2, p3 };
	for (int i = 0; i < 3; i++)
		ic_check_ours(&s, all[i]);
	tf_restores_all(&s);
	free(h2);
	free(h3);
	free(f2);
	free(f3);
	free(p1);
	free(p2);
	free(p3);
	ic_done(&s, 0);
}

/* Sources replaced or deleted between saves: the copies are refused (ETag), the bytes uploaded, nothing wrong. */
Test(s3_incremental, replaced_or_deleted_source_falls_back_to_upload_bit_exact, .timeout = 600)
{
	state s;
	build(&s, "incr-replaced");
	uint64_t wr, ru;
	free(save(&s, &wr, &ru));
	ic_step(&s, 1, 0);
	char *p2 = save(&s, &wr, &ru);
	cr_assert_gt(ru, 0, "nothing was copied by the server");
	/* both data objects of ckpt-2 replaced by other bytes of the same size */
	char *hot = ic_data_file(p2, 0, 2), *frozen = ic_data_file(p2, 1, 2);
	replace_flipped(frozen, 100);
	replace_flipped(hot, 6 * MIB + 7);
	ic_step(&s, 2, 0);
	char *p3 = save(&s, &wr, &ru);
	cr_assert_eq(ru, 0, "copied %llu bytes of replaced objects", (unsigned long long)ru);
	cr_assert_geq(wr, (uint64_t)(BASE_ROWS + EMB_ROWS) * W * 4, "uploaded %llu", (unsigned long long)wr);
	ic_check_ours(&s, p3);
	/* deleted: ckpt-4 copies from ckpt-3, whose frozen shard is then removed before ckpt-5 */
	ic_step(&s, 3, 0);
	char *p4 = save(&s, &wr, &ru);
	cr_assert_gt(ru, (uint64_t)BASE_ROWS * W * 4, "copied %llu", (unsigned long long)ru);
	char *f4 = ic_data_file(p4, 1, 3);
	cr_assert_eq(ckpt_vfs_remove(vfs(), f4), CKPT_OK, "%s", ckpt_error_last()->message);
	ic_step(&s, 4, 0);
	char *p5 = save(&s, &wr, &ru);
	/* the embedding's untouched runs still come from ckpt-4's shard 0; the base is uploaded */
	cr_assert_lt(ru, (uint64_t)EMB_ROWS * W * 4, "the deleted base shard was copied: %llu", (unsigned long long)ru);
	cr_assert_gt(ru, 0);
	cr_assert_geq(wr, (uint64_t)BASE_ROWS * W * 4);
	ic_check_ours(&s, p5);
	/* the manager's checkpoints but ckpt-4 (its shard deleted) restore in TensorFlow */
	char *e4 = ts_join(s.expect, strrchr(p4, '/') + 1);
	ts_rmtree(e4);
	free(e4);
	char *local = ts_tmpdir();
	free(s3t_oracle("download", s.dir, local, NULL));
	const char *keep[] = { "ckpt-3", "ckpt-5" };
	for (int i = 0; i < 2; i++) {
		ts_run_result r = oracle_run("tf_incremental.py", local, s.expect, keep[i], NULL);
		oracle_expect_ok(&r, "tf_incremental.py");
		ts_run_free(&r);
	}
	ts_rmtree(local);
	free(local);
	free(f4);
	free(hot);
	free(frozen);
	free(p2);
	free(p3);
	free(p4);
	free(p5);
	ic_done(&s, 0);
}

/*
 * Every CopyObject and UploadPartCopy answered "200 OK" with an <Error><Code>InternalError</Code> body
 * (through tests/s3/fault_proxy.c, without reaching the server): each save still succeeds, uploading those
 * bytes, and every checkpoint holds exactly its values (libckpt and TensorFlow).
 */
Test(s3_incremental, copy_answered_200_with_error_body_is_uploaded_instead_bit_exact, .timeout = 600)
{
	char *tmp = ts_tmpdir(), *body = ts_join(tmp, "error.xml");
	static const char xml[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\n<Error><Code>InternalError</Code>"
		"<Message>We encountered an internal error. Please try again.</Message><RequestId>0</RequestId></Error>";
	FILE *f = fopen(body, "wb");
	cr_assert(f && fwrite(xml, 1, sizeof(xml) - 1, f) == sizeof(xml) - 1 && fclose(f) == 0);
	char mode[700];
	snprintf(mode, sizeof(mode), "reply:%s", body);
	proxy px;
	const char *kind[] = { "PUT^x-amz-copy-source", NULL };
	proxy_start_rules(&px, "1:1000000", mode, kind);
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.vfs = proxy_vfs(&px, 0, 3);
	state s;
	ic_build(&s, &o, BASE_ROWS, W, 0.25f, HEAD_N, EMB_ROWS, W, 0);
	s.dir = s3t_prefix("incr-copy-error");
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.incremental = 1;
	cr_assert_eq(ckpt_manager_new_ext(&s.m, s.ck, s.dir, 0, &mo), CKPT_OK, "%s", ckpt_error_last()->message);
	uint64_t wr, ru;
	char *p[3];
	p[0] = save(&s, &wr, &ru);
	/* the second save tries UploadPartCopy (the base into its own shard, the embedding's runs), the third
	 * CopyObject too (a shard of only frozen values): every one refused, every byte uploaded */
	for (int k = 1; k < 3; k++) {
		ic_step(&s, k, 0);
		p[k] = save(&s, &wr, &ru);
		cr_assert_eq(ru, 0, "save %d: %llu bytes counted as copied", k + 1, (unsigned long long)ru);
		cr_assert_geq(wr, (uint64_t)(BASE_ROWS + EMB_ROWS) * W * 4, "save %d uploaded %llu", k + 1,
			(unsigned long long)wr);
	}
	char *harmed = proxy_harmed(&px);
	cr_assert(strstr(harmed, "partNumber="), "no UploadPartCopy was answered with the error:\n%s", harmed);
	char *line = harmed, *copy_object = NULL;
	for (char *nl; !copy_object && (nl = strchr(line, '\n')); line = nl + 1)
		if (!memchr(line, '?', (size_t)(nl - line)))
			copy_object = line;
	cr_assert_not_null(copy_object, "no CopyObject was answered with the error:\n%s", harmed);
	free(harmed);
	for (int k = 0; k < 3; k++)
		ic_check_ours(&s, p[k]);
	tf_restores_all(&s);
	for (int k = 0; k < 3; k++)
		free(p[k]);
	ic_done(&s, 0);
	ckpt_vfs_free(o.vfs);
	proxy_stop(&px);
	ts_rmtree(tmp);
	free(tmp);
	free(body);
}

static void put_object(const char *path, const void *buf, size_t n)
{
	ckpt_io *io;
	cr_assert_eq(ckpt_vfs_open(&io, vfs(), path, CKPT_IO_WRITE), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_io_pwrite(io, buf, n, 0), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK, "%s", ckpt_error_last()->message);
}

/*
 * libckpt's UploadPartCopy and CopyObject (s3_copy.c) and boto3's
 * upload_part_copy / copy_object, on the same server and source, give the
 * same objects, which hold the expected bytes; a condition on another ETag
 * is refused by both (libckpt: CKPT__DECLINED, the writer unchanged).
 */
Test(s3_incremental, copy_requests_agree_with_boto3, .timeout = 300)
{
	char *dir = s3t_prefix("incr-copy");
	char *src = ts_join(dir, "src"), *ours = ts_join(dir, "ours"), *ocopy = ts_join(dir, "ours-copy");
	char *theirs = ts_join(dir, "boto3"), *tcopy = ts_join(dir, "boto3-copy");
	size_t n = 12 * MIB, hn = 5 * MIB + 3, tn = 1000;
	uint64_t off = MIB + 5, len = 6 * MIB + 11;
	unsigned char *s = malloc(n), *head = malloc(hn), *tail = malloc(tn);
	uint64_t x = 7;
	for (size_t i = 0; i < n; i++)
		s[i] = (unsigned char)((x = x * 6364136223846793005ull + 1) >> 56);
	for (size_t i = 0; i < hn; i++)
		head[i] = (unsigned char)(i * 31 + 1);
	for (size_t i = 0; i < tn; i++)
		tail[i] = (unsigned char)(i * 7 + 3);
	put_object(src, s, n); /* a two-part upload at the default 8 MiB parts */
	char etag[128];
	uint64_t size;
	cr_assert_eq(ckpt__vfs_etag(vfs(), src, etag, sizeof(etag), &size), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(size, n);
	/* ours: head uploaded, the range copied (another ETag refused first), the tail uploaded */
	ckpt_io *io;
	cr_assert_eq(ckpt_vfs_open(&io, vfs(), ours, CKPT_IO_WRITE), CKPT_OK);
	cr_assert_eq(ckpt_io_pwrite(io, head, hn, 0), CKPT_OK);
	uint32_t crc = ckpt_crc32c_extend(0, s + off, (size_t)len);
	cr_assert_eq(ckpt__io_copy_append(io, src, "\"0123456789abcdef0123456789abcdef\"", off, len, crc), CKPT__DECLINED);
	uint64_t got;
	cr_assert_eq(ckpt_io_size(&got, io), CKPT_OK);
	cr_assert_eq(got, hn, "a refused copy changed the writer's size to %llu", (unsigned long long)got);
	cr_assert_eq(ckpt__io_copy_append(io, src, etag, off, len, crc), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_io_pwrite(io, tail, tn, hn + len), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt__vfs_copy_object(vfs(), src, "\"0123456789abcdef0123456789abcdef\"", ocopy), CKPT__DECLINED);
	cr_assert_eq(ckpt__vfs_copy_object(vfs(), src, etag, ocopy), CKPT_OK, "%s", ckpt_error_last()->message);
	/* the expected bytes, locally */
	char *local = ts_tmpdir();
	char *hf = ts_join(local, "head"), *tf = ts_join(local, "tail"), *ef = ts_join(local, "expect"),
	     *sf = ts_join(local, "src");
	cr_assert_eq(ts_write_file(hf, head, hn), 0);
	cr_assert_eq(ts_write_file(tf, tail, tn), 0);
	cr_assert_eq(ts_write_file(sf, s, n), 0);
	unsigned char *e = malloc(hn + len + tn);
	memcpy(e, head, hn);
	memcpy(e + hn, s + off, (size_t)len);
	memcpy(e + hn + len, tail, tn);
	cr_assert_eq(ts_write_file(ef, e, hn + len + tn), 0);
	free(s3t_oracle("same", ours, ef, NULL));
	free(s3t_oracle("same", ocopy, sf, NULL));
	/* boto3, the same requests */
	char offs[32], lens[32];
	snprintf(offs, sizeof(offs), "%llu", (unsigned long long)off);
	snprintf(lens, sizeof(lens), "%llu", (unsigned long long)len);
	const char *argv[] = { ts_oracle_python(), CKPT_SOURCE_DIR "/tests/oracles/s3_copy_check.py", src, theirs, tcopy,
		hf, tf, offs, lens, NULL };
	ts_run_result r;
	cr_assert_eq(ts_run(&r, (char **)argv), 0);
	ts_assert_exit(&r, 0, "s3_copy_check.py");
	/* ours hold the expected bytes (above): boto3's must hash the same */
	char *want_e = s3t_oracle("sha256", ours, NULL), *want_s = s3t_oracle("sha256", ocopy, NULL);
	cr_assert(strlen(r.out) >= 129 && strncmp(r.out, want_e, 64) == 0 && strncmp(r.out + 65, want_s, 64) == 0,
		"boto3's objects differ from ours:\n%s\nwant %.64s\n     %.64s", r.out, want_e, want_s);
	free(want_e);
	free(want_s);
	ts_run_free(&r);
	ts_rmtree(local);
	free(local);
	free(hf);
	free(tf);
	free(ef);
	free(sf);
	free(e);
	free(s);
	free(head);
	free(tail);
	free(src);
	free(ours);
	free(ocopy);
	free(theirs);
	free(tcopy);
	free(dir);
}

/*
 * kill -9 of a trainer saving incrementally to S3 (issue 33 point 7): 15
 * kills at random moments of a loop of saves that copy the frozen base
 * (CopyObject) and the embedding's untouched ranges (UploadPartCopy) from
 * the last checkpoint; after each, the checkpoint the state file names
 * (read by boto3) passes `ckpt verify` (every byte against its crc32c) and
 * never goes back. The checks run in other processes: a fork of a test
 * process whose S3 reads left threads and locks behind can hang.
 */
#define KILL_BASE_ROWS 2048 /* 8 MiB */
#define KILL_EMB_ROWS 3072  /* 12 MiB, one row per save */

static void kill_child(const char *dir, const char *log)
{
	/* its own S3 file system: the parent's connections are not shared across fork */
	ckpt_s3_config *c = NULL;
	ckpt_vfs *v = NULL;
	if (ckpt_s3_config_load(&c) < 0 || ckpt_vfs_s3_new(&v, c) < 0)
		_exit(10);
	ik_save_forever(dir, v, KILL_BASE_ROWS, KILL_EMB_ROWS, log);
}

/* ckpt-N the state file names (boto3), -1 when there is none yet */
static int64_t latest_listed(const char *dir, char **path)
{
	char *sf = ts_join(dir, "checkpoint");
	char *keys = s3t_oracle("keys", dir, NULL);
	int64_t n = -1;
	*path = NULL;
	if (strstr(keys, "checkpoint\n") == keys || strstr(keys, "\ncheckpoint\n")) {
		char *text = s3t_oracle("get", sf, NULL);
		const char *q = strstr(text, "model_checkpoint_path: \"");
		cr_assert_not_null(q, "state file: %s", text);
		q += strlen("model_checkpoint_path: \"");
		const char *e = strchr(q, '"');
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)(e - q), q);
		n = strtoll(name + 5, NULL, 10);
		*path = ts_join(dir, name);
		free(text);
	}
	free(keys);
	free(sf);
	return n;
}

Test(s3_incremental, kill_9_during_incremental_saves_latest_loads, .timeout = 900)
{
	char *dir = s3t_prefix("incr-kill"), *logdir = ts_tmpdir();
	char *log = ts_join(logdir, "reused");
	unsigned seed = (unsigned)time(NULL);
	cr_log_info("seed %u", seed);
	int64_t prev = -1;
	for (int k = 0; k < 15; k++) {
		pid_t child = fork();
		cr_assert_geq(child, 0);
		if (child == 0)
			kill_child(dir, log);
		/* 2 to 6 s: past start-up (lock, restore, the process's first save, which is full) into the incremental saves */
		long ms = 2000 + rand_r(&seed) % 4000;
		struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		kill(child, SIGKILL);
		int st;
		waitpid(child, &st, 0);
		cr_assert(WIFSIGNALED(st), "kill %d: the trainer exited by itself (status %d)", k, WEXITSTATUS(st));
		char *p;
		int64_t num = latest_listed(dir, &p);
		cr_assert_geq(num, prev, "kill %d: the latest went back from ckpt-%lld to ckpt-%lld", k, (long long)prev,
			(long long)num);
		prev = num;
		if (!p)
			continue;
		ts_run_result r = ts_cli("verify", p, NULL);
		ts_assert_exit(&r, 0, "kill %d: ckpt verify %s", k, p);
		ts_run_free(&r);
		free(p);
	}
	cr_expect_gt(prev, 5, "15 kills saved only %lld checkpoints", (long long)prev);
	cr_assert_gt(ik_reused(log), (uint64_t)KILL_BASE_ROWS * 4096, "the saves copied %llu bytes",
		(unsigned long long)ik_reused(log));
	ts_rmtree(logdir);
	free(logdir);
	free(log);
	free(dir);
}

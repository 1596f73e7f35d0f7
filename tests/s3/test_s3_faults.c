/*
 * Faults between the library and a real S3 server: tests/s3/fault_proxy.c
 * relays every request and harms the Nth one (503 SlowDown, a reset, an
 * answer cut in its middle, a 3 s stall against a 1 s stall limit). N is
 * swept over every request of
 *  - a manager save with retention (ckpt-3 into a prefix holding ckpt-1 and
 *    ckpt-2, max_to_keep 2): the save completes, or the newest complete
 *    checkpoint is ckpt-2 or ckpt-3 and it loads with its own values;
 *  - the same with every request from the Nth on failing: the same rule;
 *  - a restore: bit-exact, or a clear error and no live variable changed;
 *  - a multipart upload whose part fails: the upload is aborted, no object,
 *    even when the abort itself is refused once.
 * Rules that harm requests of one kind (the proxy's KIND, "PUT?partNumber="
 * for every part) do not depend on how parallel requests interleave.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "manager_common.h"
#include "s3_common.h"
#include "s3_proxy.h"

static const char *const modes[] = { "503", "reset", "truncate", "delay" };

static ckpt_vfs *through(const proxy *p, size_t part_size)
{
	return proxy_vfs(p, part_size, 3);
}

static ckpt_vfs *direct(void)
{
	ckpt_vfs *v = NULL;
	cr_assert_eq(ckpt_status_of(v = ckpt_vfs_s3_shared()), CKPT_OK, "%s", ckpt_error_last()->message);
	return v;
}

static void saves(const char *dir, int count)
{
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 2), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int i = 0; i < count; i++)
		cr_assert_eq(mc_save(&s, m, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
}

/* A trainer restarts through the proxy: restores the latest, saves ckpt-3, retention drops ckpt-1. Returns the save's status. */
static int faulted_save(const char *dir, ckpt_vfs *v, char *why, size_t nwhy)
{
	mc_state s;
	cr_assert_eq(mc_build(&s, v), CKPT_OK);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = v;
	mo.no_fsync = 1;
	ckpt_manager *m = NULL;
	int rc = ckpt_manager_new_ext(&m, s.ck, dir, 2, &mo);
	if (rc == CKPT_OK) {
		ckpt_restore_status *st = NULL;
		rc = ckpt_status_of(ckpt_manager_restore_latest(&st, m));
		ckpt_restore_status_free(st);
	}
	if (rc == CKPT_OK) {
		rc = mc_set(&s, 3);
		if (rc == CKPT_OK)
			rc = ckpt_status_of(ckpt_manager_save(m));
	}
	why[0] = '\0';
	if (rc < 0)
		ckpt_error_format(NULL, why, nwhy); /* path and message: the object is in the path */
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	return rc;
}

/* After a faulted save: the newest complete checkpoint is 2 or 3 (3 when the save said OK) and loads. */
static void check_latest_loads(const char *dir, int save_rc, const char *what, const char *why)
{
	mc_dir d;
	mc_scan(&d, direct(), dir);
	if (save_rc == CKPT_OK)
		cr_assert_eq(d.newest_complete, 3, "%s: the save reported success but ckpt-%lld is the newest complete", what,
			(long long)d.newest_complete);
	else
		cr_assert(d.newest_complete == 2 || d.newest_complete == 3, "%s: newest complete ckpt-%lld after \"%s\"",
			what, (long long)d.newest_complete, why);
	cr_assert_leq(d.ncomplete, 3u, "%s", what);
	/* what a restarted trainer would load: the manager's latest valid, read and restored */
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, NULL, dir, 2), CKPT_OK, "%s: %s", what, ckpt_error_last()->message);
	const char *p = NULL;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_latest_valid(m)), CKPT_OK, "%s: %s", what,
		     ckpt_error_last()->message);
	cr_assert_not_null(p, "%s: no loadable checkpoint", what);
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_restore_status *st = NULL;
	cr_assert_eq(ckpt_checkpoint_restore(&st, s.ck, p), CKPT_OK, "%s: %s: %s", what, p, ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	int64_t num = mc_number(strrchr(p, '/') + 1);
	cr_assert_eq(mc_get(&s), num, "%s: %s holds the value of save %lld", what, p, (long long)mc_get(&s));
	ckpt_checkpoint_free(s.ck);
	ckpt_manager_free(m);
}

static void sweep_save(int sticky)
{
	/* how many requests one save makes */
	char *dir0 = s3t_prefix("count");
	saves(dir0, 2);
	proxy p;
	proxy_start(&p, 0, "none");
	ckpt_vfs *v = through(&p, 0);
	char why[1024];
	cr_assert_eq(faulted_save(dir0, v, why, sizeof(why)), CKPT_OK, "no fault: %s", why);
	ckpt_vfs_free(v);
	long total = proxy_stop(&p);
	cr_assert_gt(total, 5, "a save made %ld requests", total);
	check_latest_loads(dir0, CKPT_OK, "no fault", "");
	free(dir0);
	int failed = 0;
	for (long n = 1; n <= total; n++) {
		const char *mode = sticky ? "503+" : modes[n % 4];
		char *dir = s3t_prefix("save");
		saves(dir, 2);
		proxy_start(&p, n, mode);
		v = through(&p, 0);
		int rc = faulted_save(dir, v, why, sizeof(why));
		ckpt_vfs_free(v);
		proxy_stop(&p);
		char what[128];
		snprintf(what, sizeof(what), "request %ld of %ld: %s", n, total, mode);
		check_latest_loads(dir, rc, what, why);
		failed += rc < 0;
		if (rc < 0)
			cr_assert(strstr(why, "s3://") != NULL, "%s: the error names no object: %s", what, why);
		free(dir);
	}
	if (sticky) /* the last requests are the lock's release, after the save: those saves succeed */
		cr_expect_gt(failed, total / 2, "every request from N on fails: only %d of %ld saves failed", failed, total);
	else
		cr_expect_lt(failed, total, "one harmed request: retries make most saves succeed");
}

Test(s3_faults, save_with_retention_one_fault_each_request, .timeout = 900)
{
	sweep_save(0);
}

Test(s3_faults, save_with_retention_every_request_from_n_fails, .timeout = 900)
{
	sweep_save(1);
}

Test(s3_faults, restore_bit_exact_or_clear_error_and_nothing_changed, .timeout = 900)
{
	char *dir = s3t_prefix("restore");
	saves(dir, 1);
	char *ck = ts_join(dir, "ckpt-1");
	long total = 0;
	for (long n = 0; n <= total; n++) {
		for (int sticky = 0; sticky < (n ? 2 : 1); sticky++) {
			const char *mode = sticky ? "reset+" : n ? modes[n % 4] : "none";
			proxy p;
			proxy_start(&p, n, mode);
			ckpt_vfs *v = through(&p, 0);
			mc_state s;
			cr_assert_eq(mc_build(&s, v), CKPT_OK);
			cr_assert_eq(mc_set(&s, 777), CKPT_OK);
			ckpt_restore_status *st = NULL;
			int rc = ckpt_checkpoint_restore(&st, s.ck, ck);
			char why[1024];
			why[0] = '\0';
			if (rc < 0)
				ckpt_error_format(NULL, why, sizeof(why));
			ckpt_restore_status_free(st);
			int64_t vec[64];
			cr_assert_eq(ckpt_variable_read(s.vec, vec, sizeof(vec)), CKPT_OK);
			int64_t want = rc == CKPT_OK ? 1 : 777;
			cr_assert_eq(mc_get(&s), want, "request %ld (%s): restore rc %d (%s) left value %lld", n, mode, rc, why,
				(long long)mc_get(&s));
			for (int i = 0; i < 64; i++)
				cr_assert_eq(vec[i], want, "request %ld (%s): vec[%d] = %lld after rc %d", n, mode, i,
					(long long)vec[i], rc);
			if (rc < 0)
				cr_assert(strstr(why, "s3://") != NULL || strstr(why, "ckpt-1") != NULL,
					"request %ld (%s): unclear error: %s", n, mode, why);
			ckpt_checkpoint_free(s.ck);
			ckpt_vfs_free(v);
			long seen = proxy_stop(&p);
			if (n == 0) {
				cr_assert_eq(rc, CKPT_OK, "no fault: %s", why);
				total = seen;
				cr_assert_gt(total, 1);
			}
		}
	}
	free(ck);
	free(dir);
}

/*
 * A multipart upload of three 5 MiB parts, one try per request, through a
 * proxy that answers `more`'s rules: the write fails naming the object and
 * the 503, the upload is aborted (boto3 sees no upload and no object).
 * Returns the number of requests the proxy saw.
 */
static long failed_upload(const char *what, const char *const *more)
{
	size_t part = 5u << 20, n = 3 * part;
	char *dir = s3t_prefix("abort"), *path = ts_join(dir, "blob");
	char *buf = calloc(1, n);
	proxy p;
	proxy_start_rules(&p, "0", "none", more);
	ckpt_vfs *v = proxy_vfs(&p, part, 1);
	ckpt_io *io;
	cr_assert_eq(ckpt_vfs_open(&io, v, path, CKPT_IO_WRITE), CKPT_OK);
	int rc = ckpt_io_pwrite(io, buf, n, 0);
	char line[2048] = "";
	if (rc < 0)
		ckpt_error_format(NULL, line, sizeof(line));
	int crc = ckpt_io_close(io);
	if (rc == CKPT_OK && crc < 0)
		ckpt_error_format(NULL, line, sizeof(line));
	cr_assert(rc < 0 || crc < 0, "%s: an upload whose parts failed succeeded", what);
	cr_expect(strstr(line, "blob") && strstr(line, "503") && strstr(line, "SlowDown"), "%s: %s", what, line);
	ckpt_vfs_free(v);
	long seen = proxy_stop(&p);
	/* boto3: no upload left behind, no object */
	char *left = s3t_oracle("uploads", dir, NULL);
	cr_expect_str_eq(left, "0\n", "%s: the failed upload was not aborted", what);
	free(left);
	char *keys = s3t_oracle("keys", dir, NULL);
	cr_expect_str_eq(keys, "", "%s", what);
	free(keys);
	free(buf);
	free(path);
	free(dir);
	return seen;
}

/* Every part refused (by kind, whatever the order the parallel parts arrive in): the upload is aborted. */
Test(s3_faults, failed_part_aborts_the_upload)
{
	static const char *const parts_refused[] = { "*", "1+", "503", "PUT?partNumber=", NULL };
	long seen = failed_upload("parts refused", parts_refused);
	cr_expect_geq(seen, 3, "initiate, a part, the abort: %ld requests", seen);
}

/* The abort is a cleanup: refused once, it is tried again even when requests get one try; no upload stays. */
Test(s3_faults, abort_refused_once_is_retried)
{
	static const char *const abort_refused_once[] = { "*", "1+", "503", "PUT?partNumber=", "1", "503",
		"DELETE?uploadId=", NULL };
	long seen = failed_upload("parts and the first abort refused", abort_refused_once);
	cr_expect_geq(seen, 4, "initiate, a part, two aborts: %ld requests", seen);
}

/*
 * Every part carries its crc32c (x-amz-checksum-crc32c): a part whose bytes
 * the proxy damages on the way is refused by the server (400 BadDigest), the
 * save fails naming it, its upload is aborted, and ckpt-2 stays the latest.
 */
Test(s3_faults, corrupted_part_is_refused_and_the_previous_latest_loads, .timeout = 300)
{
	char *dir = s3t_prefix("crc");
	saves(dir, 2);
	proxy p;
	proxy_start_range(&p, "1:1000000", "corrupt");
	ckpt_vfs *v = proxy_vfs(&p, 5u << 20, 1);
	mc_state s;
	cr_assert_eq(mc_build(&s, v), CKPT_OK);
	/* 12 MiB: a data object of three parts */
	ckpt_variable *big = NULL;
	int64_t d = 3 << 20;
	ckpt_shape sh;
	cr_assert_eq(ckpt_shape_make(&sh, 1, &d), CKPT_OK);
	cr_assert_eq(ckpt_status_of(big = ckpt_object_add_variable(ckpt_checkpoint_root(s.ck), "big", "big", CKPT_DT_FLOAT, &sh, NULL)),
		     CKPT_OK);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = v;
	mo.no_fsync = 1;
	ckpt_manager *m = NULL;
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 2, &mo), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(mc_set(&s, 3), CKPT_OK);
	int rc = ckpt_status_of(ckpt_manager_save(m));
	char why[2048] = "";
	if (rc < 0)
		ckpt_error_format(NULL, why, sizeof(why));
	cr_assert(rc < 0, "a save whose parts were damaged succeeded");
	cr_expect(strstr(why, "400") && strstr(why, "BadDigest") && strstr(why, "data-00000-of-00001"), "%s", why);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ckpt_vfs_free(v);
	long seen = proxy_stop(&p);
	cr_expect_geq(seen, 3, "%ld requests", seen);
	char *left = s3t_oracle("uploads", dir, NULL);
	cr_expect_str_eq(left, "0\n", "the refused upload was not aborted");
	free(left);
	check_latest_loads(dir, rc, "damaged part", why);
	mc_dir md;
	mc_scan(&md, direct(), dir);
	cr_expect_eq(md.newest_complete, 2);
	free(dir);
}

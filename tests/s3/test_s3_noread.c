/*
 * A credential that may list and write a bucket but not read it (issue 36,
 * point 1): the server answers 403 to every HEAD and GET, while listings
 * succeed and show the checkpoints. Every read is an error that names the
 * bucket, the key and the status: never "no such file", an empty prefix or
 * a fresh start, and a manager writes nothing over what it cannot read.
 * The identity is SeaweedFS's (tests/s3/with_s3_server.sh: actions Write
 * and List on the test bucket only).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "manager_common.h"
#include "s3_common.h"

/* A VFS signing with the no-read identity. */
static ckpt_vfs *noread_vfs(void)
{
	const char *key = getenv("CKPT_S3_TEST_NOREAD_KEY"), *secret = getenv("CKPT_S3_TEST_NOREAD_SECRET");
	cr_assert(key && secret, "run under tests/s3/with_s3_server.sh (CKPT_S3_TEST_NOREAD_KEY)");
	ckpt_s3_config *c = NULL;
	cr_assert_eq(ckpt_s3_config_load(&c), CKPT_OK, "%s", ckpt_error_last()->message);
	free(c->access_key);
	free(c->secret_key);
	c->access_key = strdup(key);
	c->secret_key = strdup(secret);
	c->max_attempts = 2;
	ckpt_vfs *v = NULL;
	cr_assert_eq(ckpt_vfs_s3_new(&v, c), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_s3_config_free(c);
	return v;
}

/* ckpt-1 and ckpt-2 in a fresh prefix, written with the full identity. */
static char *two_saves(void)
{
	char *dir = s3t_prefix("noread");
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 5), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int i = 1; i <= 2; i++)
		cr_assert_eq(mc_save(&s, m, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	return dir;
}

/* The error says 403 and names the bucket and a key under the prefix, not absence. */
static void expect_named(int rc, const char *what, const char *dir, const char *why)
{
	const char *under = strstr(dir, "://") + 3; /* "bucket/t<pid>-..." */
	cr_expect_lt(rc, 0, "%s: succeeded", what);
	cr_expect_neq(rc, CKPT_ENOTFOUND, "%s: reported as absent: %s", what, why);
	cr_expect(strstr(why, "403") != NULL, "%s: the error does not say 403: %s", what, why);
	cr_expect(strstr(why, under) != NULL, "%s: the error does not name %s: %s", what, under, why);
	cr_expect(strcasestr(why, "no such") == NULL && strcasestr(why, "fresh") == NULL &&
		strcasestr(why, "incomplete") == NULL, "%s: reported as absent: %s", what, why);
}

Test(s3_noread, a_credential_that_cannot_read_is_refused_naming_bucket_and_key, .timeout = 120)
{
	char *dir = two_saves(), *ck2 = ts_join(dir, "ckpt-2"), *state = ts_join(dir, "checkpoint");
	ckpt_vfs *v = noread_vfs();
	char why[2048];

	/* the listing works: the library sees the checkpoints it cannot read */
	char **names = NULL;
	size_t n = 0;
	cr_assert_eq(ckpt_vfs_list(&names, &n, v, dir), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_expect_geq(n, 3, "the listing shows %zu names", n);
	ckpt_vfs_free_list(names, n);

	/* existence is unknown, not "absent" */
	int rc = ckpt_vfs_exists(NULL, v, state);
	ckpt_error_format(NULL, why, sizeof(why));
	cr_expect_lt(rc, 0, "exists(%s) answered %d", state, rc);
	if (rc < 0)
		expect_named(rc, "exists", dir, why);

	/* a reader */
	ckpt_reader *r = NULL;
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	oo.vfs = v;
	rc = ckpt_reader_open(&r, ck2, &oo);
	ckpt_error_format(NULL, why, sizeof(why));
	expect_named(rc, "reader_open", dir, why);
	ckpt_reader_free(r);

	/* a trainer's start: restore the latest, then save */
	mc_state s;
	cr_assert_eq(mc_build(&s, v), CKPT_OK);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = v;
	mo.no_fsync = 1;
	ckpt_manager *m = NULL;
	rc = ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo);
	if (rc == CKPT_OK) {
		ckpt_restore_status *st = NULL;
		rc = ckpt_status_of(ckpt_manager_restore_latest(&st, m));
		cr_expect(rc < 0 || st, "the manager found nothing to restore: a fresh start");
		ckpt_restore_status_free(st);
		if (rc == CKPT_OK)
			rc = ckpt_status_of(ckpt_manager_save(m));
	}
	ckpt_error_format(NULL, why, sizeof(why));
	expect_named(rc, "the trainer's start", dir, why);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ckpt_vfs_free(v);

	/* nothing was written: the full identity still sees ckpt-1, ckpt-2 and the state file naming ckpt-2 */
	ckpt_vfs *full = s3t_vfs(NULL, 0, 0);
	mc_dir d;
	mc_scan(&d, full, dir);
	cr_expect_eq(d.n, 2, "%zu checkpoints in the prefix", d.n);
	cr_expect_eq(d.state_latest, 2, "the state file names ckpt-%lld", (long long)d.state_latest);
	ckpt_vfs_free(full);

	/* the read commands */
	static const char *const cmds[] = { "verify", "inspect", "restore", NULL };
	for (int c = 0; cmds[c]; c++) {
		for (int target = 0; target < 2; target++) {
			char *cmd = NULL;
			cr_assert_gt(asprintf(&cmd, "AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s CKPT_S3_MAX_ATTEMPTS=2 '%s' %s '%s'%s",
				getenv("CKPT_S3_TEST_NOREAD_KEY"), getenv("CKPT_S3_TEST_NOREAD_SECRET"), TS_CLI, cmds[c],
				target ? ck2 : dir, c == 2 ? " --strategy default" : ""), 0);
			ts_run_result res;
			cr_assert_eq(ts_run_sh(&res, cmd), 0);
			cr_expect_eq(res.status, 1, "%s: exit %d\n%s%s", cmd, res.status, res.out, res.err);
			expect_named(-1, cmd, dir, res.err);
			ts_run_free(&res);
			free(cmd);
		}
	}
	free(state);
	free(ck2);
	free(dir);
}

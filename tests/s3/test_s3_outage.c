/*
 * An outage is never an empty bucket (issue 36, point 1). Only a 404, or a
 * listing that succeeds and is empty, means "absent": a HEAD, GET or
 * listing that fails any other way (503 after the retries, 403, a refused
 * connection, a redirect) stops a restore with the real cause, and a
 * manager never decides "fresh start" on it — it writes nothing.
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

/* ckpt-1 and ckpt-2 in a fresh prefix, written directly. */
static char *two_saves(const char *name)
{
	char *dir = s3t_prefix(name);
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 5), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(mc_save(&s, m, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	return dir;
}

/* A trainer's start through `v`: open the manager, restore the latest, save. Returns the first failure. */
static int trainer_start(const char *dir, ckpt_vfs *v, int64_t *restored, char *why, size_t nwhy)
{
	mc_state s;
	cr_assert_eq(mc_build(&s, v), CKPT_OK);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = v;
	mo.no_fsync = 1;
	ckpt_manager *m = NULL;
	*restored = -1;
	int rc = ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo);
	if (rc == CKPT_OK) {
		ckpt_restore_status *st = NULL;
		rc = ckpt_status_of(ckpt_manager_restore_latest(&st, m));
		if (rc == CKPT_OK && st)
			*restored = mc_get(&s);
		ckpt_restore_status_free(st);
	}
	if (rc == CKPT_OK)
		rc = ckpt_status_of(ckpt_manager_save(m));
	why[0] = '\0';
	if (rc < 0)
		ckpt_error_format(NULL, why, nwhy);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	return rc;
}

/* The prefix still holds ckpt-1 and ckpt-2 only, the state file names ckpt-2, and ckpt-2 restores. */
static void assert_untouched(const char *dir, const char *what)
{
	mc_dir d;
	ckpt_vfs *v = s3t_vfs(NULL, 0, 0);
	mc_scan(&d, v, dir);
	cr_expect_eq(d.n, 2, "%s: %zu checkpoints in the prefix", what, d.n);
	cr_expect_eq(d.state_latest, 2, "%s: the state file names ckpt-%lld", what, (long long)d.state_latest);
	char why[1024];
	int64_t got;
	cr_expect_eq(trainer_start(dir, v, &got, why, sizeof(why)), CKPT_OK, "%s: healthy restart: %s", what, why);
	cr_expect_eq(got, 2, "%s: the healthy restart restored value %lld", what, (long long)got);
	ckpt_vfs_free(v);
}

/* Every request of one kind fails for good: the trainer fails naming the status, writes nothing, and a healthy restart resumes. */
static void persistent(const char *kind, const char *mode, const char *expect)
{
	char *dir = two_saves("outage");
	proxy p;
	const char *const rules[] = { kind, NULL };
	proxy_start_rules(&p, "1:1000000", mode, rules);
	ckpt_vfs *v = proxy_vfs(&p, 0, 2);
	char why[1024], what[128];
	int64_t got;
	snprintf(what, sizeof(what), "%s of %s", mode, kind);
	int rc = trainer_start(dir, v, &got, why, sizeof(why));
	cr_expect_lt(rc, 0, "%s: the trainer went on (restored %lld)", what, (long long)got);
	cr_expect_neq(rc, CKPT_ENOTFOUND, "%s: reported as absent: %s", what, why);
	cr_expect(strstr(why, expect) != NULL, "%s: the error does not say %s: %s", what, expect, why);
	char *log = proxy_log(&p);
	cr_expect(strstr(log, "/ckpt-3") == NULL, "%s: a checkpoint was written:\n%s", what, log);
	free(log);
	ckpt_vfs_free(v);
	proxy_stop(&p);
	assert_untouched(dir, what);
	free(dir);
}

Test(s3_outage, heads_failing_are_an_error_not_a_fresh_start, .timeout = 120)
{
	persistent("HEAD?", "503", "HTTP status 503");
}

Test(s3_outage, listings_failing_are_an_error_not_a_fresh_start, .timeout = 120)
{
	persistent("GET?list-type=2", "503", "SlowDown");
}

Test(s3_outage, reads_reset_are_an_error_not_a_fresh_start, .timeout = 120)
{
	persistent("GET?", "reset", "GET failed");
}

Test(s3_outage, redirects_are_reported_as_redirects, .timeout = 120)
{
	persistent("*", "307", "redirected to http://127.0.0.1:9/elsewhere");
}

/* The first HEADs of a start fail (an outage shorter than the start): a clear error or the real latest, never step 1. */
Test(s3_outage, short_outage_of_heads_never_restarts_from_scratch, .timeout = 300)
{
	for (int upto = 1; upto <= 12; upto += 3) {
		char *dir = two_saves("short");
		proxy p;
		char nn[16];
		snprintf(nn, sizeof(nn), "1:%d", upto);
		const char *const rules[] = { "HEAD?", NULL };
		proxy_start_rules(&p, nn, "503", rules);
		ckpt_vfs *v = proxy_vfs(&p, 0, 3);
		char why[1024];
		int64_t got;
		int rc = trainer_start(dir, v, &got, why, sizeof(why));
		if (rc == CKPT_OK)
			cr_expect_eq(got, 2, "HEADs 1..%d refused: the trainer restored value %lld", upto, (long long)got);
		else
			cr_expect(strstr(why, "503") != NULL, "HEADs 1..%d refused: %s", upto, why);
		ckpt_vfs_free(v);
		proxy_stop(&p);
		free(dir);
	}
}

/* Read commands with a wrong secret, or a refused endpoint, say so: never "no such file". */
Test(s3_outage, read_commands_name_the_real_cause, .timeout = 120)
{
	char *dir = two_saves("cli");
	static const char *const envs[] = { "AWS_SECRET_ACCESS_KEY=wrong-secret", "AWS_ENDPOINT_URL=http://127.0.0.1:9", NULL };
	static const char *const expect[] = { "403", "connect", NULL };
	static const char *const cmds[] = { "verify", "inspect", NULL };
	for (int e = 0; envs[e]; e++) {
		for (int c = 0; cmds[c]; c++) {
			char *cmd = NULL;
			cr_assert_gt(asprintf(&cmd, "%s CKPT_S3_MAX_ATTEMPTS=2 '%s' %s '%s'", envs[e], TS_CLI, cmds[c], dir), 0);
			ts_run_result r;
			cr_assert_eq(ts_run_sh(&r, cmd), 0);
			cr_expect_neq(r.status, 0, "%s: exit 0", cmd);
			cr_expect(strstr(r.err, "no such") == NULL, "%s: reported as absent:\n%s", cmd, r.err);
			cr_expect(strcasestr(r.err, expect[e]) != NULL, "%s: does not say %s:\n%s", cmd, expect[e], r.err);
			ts_run_free(&r);
			free(cmd);
		}
	}
	free(dir);
}

/* Every checkpoint the state file lists is there, complete. */
static void assert_listed_exist(const mc_dir *d)
{
	for (size_t i = 0; i < d->nlisted; i++) {
		int found = 0;
		for (size_t j = 0; j < d->n; j++)
			found |= d->c[j].number == d->state_listed[i] && d->c[j].complete;
		cr_expect(found, "the state file lists ckpt-%lld, which is gone", (long long)d->state_listed[i]);
	}
}

/* A manager over `v` that collects its warnings; saves ckpt-N+1 and returns its status. */
static int save_once(ckpt_manager **m, mc_state *s, const char *dir, ckpt_vfs *v, int64_t value)
{
	if (!*m) {
		cr_assert_eq(mc_build(s, v), CKPT_OK);
		ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
		mo.vfs = v;
		mo.no_fsync = 1;
		cr_assert_eq(ckpt_manager_new_ext(m, s->ck, dir, 2, &mo), CKPT_OK, "%s", ckpt_error_last()->message);
	}
	cr_assert_eq(mc_set(s, value), CKPT_OK);
	return ckpt_status_of(ckpt_manager_save(*m));
}

/*
 * Retention comes after the state file and never fails a save (issue 36,
 * point 5): with every delete of ckpt-1's index refused, ckpt-3 is saved and
 * listed, a warning names ckpt-1, ckpt-1 stays complete, and the next save
 * deletes it.
 */
Test(s3_outage, retention_refused_warns_and_the_save_succeeds, .timeout = 120)
{
	char *dir = two_saves("retain");
	proxy p;
	const char *const rules[] = { "DELETE?/ckpt-1.index", NULL };
	proxy_start_rules(&p, "1:2", "503", rules);
	ckpt_vfs *v = proxy_vfs(&p, 0, 2);
	ckpt_manager *m = NULL;
	mc_state s;
	cr_expect_eq(save_once(&m, &s, dir, v, 3), CKPT_OK, "the save failed: %s", ckpt_error_last()->message);
	cr_expect(strstr(s.warn.all, "could not delete") != NULL && strstr(s.warn.all, "ckpt-1") != NULL,
		"no warning names ckpt-1: %s", s.warn.all);
	mc_dir d;
	ckpt_vfs *direct = s3t_vfs(NULL, 0, 0);
	mc_scan(&d, direct, dir);
	cr_expect_eq(d.state_latest, 3, "the state file names ckpt-%lld", (long long)d.state_latest);
	cr_expect(d.n == 3 && d.c[0].number == 1 && d.c[0].complete, "ckpt-1 is not kept complete (%zu checkpoints)", d.n);
	assert_listed_exist(&d);
	/* the next save (deletes allowed again) removes ckpt-1 and ckpt-2 */
	cr_expect_eq(save_once(&m, &s, dir, v, 4), CKPT_OK, "%s", ckpt_error_last()->message);
	mc_scan(&d, direct, dir);
	cr_expect_eq(d.n, 2, "%zu checkpoints after the next save", d.n);
	cr_expect_eq(d.state_latest, 4);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ckpt_vfs_free(v);
	proxy_stop(&p);
	ckpt_vfs_free(direct);
	free(dir);
}

/* The state file's PUT failing for good fails the save and deletes nothing: the state file never names a gone checkpoint. */
Test(s3_outage, state_file_refused_fails_the_save_and_deletes_nothing, .timeout = 120)
{
	char *dir = two_saves("statefail");
	proxy p;
	const char *const rules[] = { "PUT?/checkpoint", NULL };
	proxy_start_rules(&p, "1:1000000", "503", rules);
	ckpt_vfs *v = proxy_vfs(&p, 0, 2);
	ckpt_manager *m = NULL;
	mc_state s;
	cr_expect_lt(save_once(&m, &s, dir, v, 3), 0, "the save succeeded without its state file");
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	char *log = proxy_log(&p);
	cr_expect(strstr(log, "DELETE /") == NULL || strstr(log, "/ckpt-1") == NULL, "ckpt-1 was deleted:\n%s", log);
	free(log);
	ckpt_vfs_free(v);
	proxy_stop(&p);
	mc_dir d;
	ckpt_vfs *direct = s3t_vfs(NULL, 0, 0);
	mc_scan(&d, direct, dir);
	cr_expect(d.c[0].number == 1 && d.c[0].complete, "ckpt-1 is gone");
	assert_listed_exist(&d);
	ckpt_vfs_free(direct);
	free(dir);
}

/*
 * Stalls and timeouts (issue 36, point 6): against a server that accepts
 * connections and never answers (the proxy holds every request), each read
 * command and a trainer's start fail within CKPT_S3_DEADLINE_SECONDS +
 * CKPT_S3_STALL_SECONDS (+ slack for the process), saying the server stalled.
 */
Test(s3_outage, a_silent_server_fails_every_command_within_the_bound, .timeout = 180)
{
	char *dir = two_saves("silent");
	proxy p;
	proxy_start_range(&p, "1:1000000", "hold"); /* never released */
	char ep[64];
	proxy_endpoint(&p, ep, sizeof(ep));
	static const char *const cmds[] = { "verify", "inspect", "restore", NULL };
	static const char *const tails[] = { "", "", "--strategy mirrored", NULL };
	for (int i = 0; cmds[i]; i++) {
		char *cmd = NULL;
		cr_assert_gt(asprintf(&cmd, "AWS_ENDPOINT_URL=%s CKPT_S3_STALL_SECONDS=2 CKPT_S3_DEADLINE_SECONDS=4 '%s' %s '%s' %s",
			ep, TS_CLI, cmds[i], dir, tails[i]), 0);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ts_run_result r;
		cr_assert_eq(ts_run_sh(&r, cmd), 0);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		long took = (long)(t1.tv_sec - t0.tv_sec);
		cr_expect_neq(r.status, 0, "%s: exit 0 against a silent server", cmds[i]);
		cr_expect_leq(took, 4 + 2 + 10, "%s: took %ld s", cmds[i], took);
		cr_expect(strstr(r.err, "stalled") != NULL, "%s: does not say it stalled:\n%s", cmds[i], r.err);
		ts_run_free(&r);
		free(cmd);
	}
	setenv("CKPT_S3_DEADLINE_SECONDS", "3", 1);
	ckpt_vfs *v = proxy_vfs(&p, 0, 5); /* stall 1 s */
	unsetenv("CKPT_S3_DEADLINE_SECONDS");
	char why[1024];
	int64_t got;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_expect_lt(trainer_start(dir, v, &got, why, sizeof(why)), 0, "a trainer started against a silent server");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_expect_leq((long)(t1.tv_sec - t0.tv_sec), 3 + 1 + 10, "the trainer took %ld s to fail",
		(long)(t1.tv_sec - t0.tv_sec));
	cr_expect(strstr(why, "stalled") != NULL, "%s", why);
	ckpt_vfs_free(v);
	proxy_stop(&p);
	free(dir);
}

/*
 * kill -9 of a trainer saving in a loop to S3 (a manager, max_to_keep 2),
 * 50 times at random moments: after each kill the newest complete
 * checkpoint is the one a restarted trainer loads, with its own values, and
 * the next trainer takes the dead one's lock without waiting for its lease
 * (same host, its pid gone).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "manager_common.h"
#include "s3_common.h"

#define KILLS 50

/* The child: its own S3 file system (the parent's connections are not shared across fork). */
static void save_forever(const char *dir)
{
	ckpt_s3_config *c = NULL;
	ckpt_vfs *v = NULL;
	if (ckpt_s3_config_load(&c) < 0 || ckpt_vfs_s3_new(&v, c) < 0)
		_exit(10);
	mc_state s;
	if (mc_build(&s, v) < 0)
		_exit(11);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = v;
	mo.no_fsync = 1;
	ckpt_manager *m;
	if (ckpt_manager_new_ext(&m, s.ck, dir, 2, &mo) < 0) {
		fprintf(stderr, "child: %s\n", ckpt_error_last()->message);
		_exit(12);
	}
	ckpt_restore_status *st = NULL;
	if (ckpt_status_of(ckpt_manager_restore_latest(&st, m)) < 0)
		_exit(13);
	ckpt_restore_status_free(st);
	for (;;)
		if (mc_save(&s, m, NULL) < 0) {
			fprintf(stderr, "child: %s\n", ckpt_error_last()->message);
			_exit(14);
		}
}

Test(s3_kill, fifty_kills_of_a_save_loop_latest_always_loads, .timeout = 900)
{
	char *dir = s3t_prefix("kill");
	ckpt_vfs *v = NULL;
	cr_assert_eq(ckpt_status_of(v = ckpt_vfs_s3_shared()), CKPT_OK);
	unsigned seed = (unsigned)time(NULL);
	cr_log_info("seed %u", seed);
	int64_t prev = -1;
	for (int k = 0; k < KILLS; k++) {
		pid_t child = fork();
		cr_assert_geq(child, 0);
		if (child == 0)
			save_forever(dir);
		/* 100 to 700 ms: past start-up (lock, restore) into the saves, at any point of one */
		struct timespec ts = { 0, (long)(100 + rand_r(&seed) % 600) * 1000000L };
		nanosleep(&ts, NULL);
		kill(child, SIGKILL);
		int st;
		waitpid(child, &st, 0);
		cr_assert(WIFSIGNALED(st), "kill %d: the trainer exited by itself (status %d)", k, WEXITSTATUS(st));
		mc_dir d;
		mc_scan(&d, v, dir);
		cr_assert_leq(d.ncomplete, 3u, "kill %d: %zu complete checkpoints with max_to_keep 2", k, d.ncomplete);
		cr_assert_geq(d.newest_complete, prev, "kill %d: the newest complete went back from %lld to %lld", k,
			(long long)prev, (long long)d.newest_complete);
		prev = d.newest_complete;
		if (d.newest_complete < 0)
			continue; /* killed before its first save completed */
		ckpt_manager *m;
		cr_assert_eq(ckpt_manager_new(&m, NULL, dir, 2), CKPT_OK, "kill %d: %s", k, ckpt_error_last()->message);
		const char *p = NULL;
		cr_assert_eq(ckpt_status_of(p = ckpt_manager_latest_valid(m)), CKPT_OK, "kill %d: %s", k,
			     ckpt_error_last()->message);
		cr_assert_not_null(p, "kill %d: nothing loadable", k);
		mc_state s;
		cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
		ckpt_restore_status *rs = NULL;
		cr_assert_eq(ckpt_checkpoint_restore(&rs, s.ck, p), CKPT_OK, "kill %d: %s: %s", k, p,
			ckpt_error_last()->message);
		ckpt_restore_status_free(rs);
		int64_t num = mc_number(strrchr(p, '/') + 1);
		/*
		 * A request the killed trainer had fully sent may still complete on
		 * the server after its death (an index PUT whose answer never came
		 * back), so the store can move on between the scan above and the
		 * lookup: the lookup must name the newest complete checkpoint as of
		 * some moment in between — never an older one, never one still
		 * incomplete after it.
		 */
		mc_dir after;
		mc_scan(&after, v, dir);
		cr_assert(num >= d.newest_complete && num <= after.newest_complete,
			"kill %d: latest is %s, newest complete ckpt-%lld before the lookup and ckpt-%lld after it", k, p,
			(long long)d.newest_complete, (long long)after.newest_complete);
		prev = after.newest_complete;
		cr_assert_eq(mc_get(&s), num, "kill %d: %s holds save %lld's value", k, p, (long long)mc_get(&s));
		ckpt_checkpoint_free(s.ck);
		ckpt_manager_free(m);
	}
	cr_expect_gt(prev, 5, "50 kills saved only %lld checkpoints", (long long)prev);
	free(dir);
}

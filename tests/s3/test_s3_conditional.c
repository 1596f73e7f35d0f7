/*
 * One writer on every server, or a clear refusal (issue 36, points 2 and 7).
 * A server that ignores If-None-Match / If-Match on PUT (the fault proxy's
 * nocond mode answers them 200, as `rclone serve s3` does) or answers
 * them 501 is refused the lock with a message saying what it lacks, unless
 * CKPT_S3_SINGLE_WRITER=1; and a holder that died on this host (a zombie
 * its parent has not reaped yet, as after `kill -9` of mpirun) does not
 * keep a restarted job out.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "s3_common.h"
#include "s3_proxy.h"

/* The lock of a fresh prefix through a proxy in `mode` from request `from` on (requests of `kind`): its status. */
static int lock_through(const char *from, const char *mode, const char *kind, char *msg, size_t nmsg)
{
	char *dir = s3t_prefix("cond");
	proxy p;
	const char *const rules[] = { kind, NULL };
	proxy_start_rules(&p, from, mode, rules);
	ckpt_vfs *v = proxy_vfs(&p, 0, 2);
	void *token = NULL;
	int rc = ckpt_vfs_lock(&token, v, dir);
	snprintf(msg, nmsg, "%s", rc < 0 ? ckpt_error_last()->message : "");
	if (rc == CKPT_OK)
		ckpt_vfs_unlock(v, token);
	/* with the opt-out the same server's lock is taken (its verdict is cached: no new probe) */
	setenv("CKPT_S3_SINGLE_WRITER", "1", 1);
	token = NULL;
	cr_expect_eq(ckpt_vfs_lock(&token, v, dir), CKPT_OK, "CKPT_S3_SINGLE_WRITER=1: %s", ckpt_error_last()->message);
	ckpt_vfs_unlock(v, token);
	unsetenv("CKPT_S3_SINGLE_WRITER");
	ckpt_vfs_free(v);
	proxy_stop(&p);
	char *left = s3t_oracle("nkeys", dir, NULL);
	cr_expect_eq(atoi(left), 0, "%s objects left in the prefix (a probe or a lock)", left);
	free(left);
	free(dir);
	return rc;
}

Test(s3_conditional, a_server_ignoring_conditional_writes_is_refused_the_lock, .timeout = 60)
{
	char msg[2048];
	int rc = lock_through("1:1000000", "nocond", "*", msg, sizeof(msg));
	cr_expect_eq(rc, CKPT_EUNSUPPORTED, "the lock was taken from a server that ignores conditions: %d %s", rc, msg);
	cr_expect(strstr(msg, "If-None-Match") != NULL && strstr(msg, "ignores") != NULL, "%s", msg);
	cr_expect(strstr(msg, "CKPT_S3_SINGLE_WRITER") != NULL, "the message names no way out: %s", msg);
}

Test(s3_conditional, a_server_answering_501_is_refused_the_lock, .timeout = 60)
{
	char msg[2048];
	/* the probe's first PUT is plain; the conditional ones that follow get 501 */
	int rc = lock_through("2:1000000", "501", "PUT?", msg, sizeof(msg));
	cr_expect_eq(rc, CKPT_EUNSUPPORTED, "%d %s", rc, msg);
	cr_expect(strstr(msg, "501 NotImplemented") != NULL, "%s", msg);
}

Test(s3_conditional, a_server_honouring_conditional_writes_gives_the_lock, .timeout = 60)
{
	char msg[2048];
	int rc = lock_through("0", "none", "*", msg, sizeof(msg));
	cr_expect_eq(rc, CKPT_OK, "%s", msg);
}

/* A holder killed on this host and not yet reaped (a zombie) does not keep the next writer out. */
Test(s3_conditional, a_zombie_holder_does_not_keep_a_restart_out, .timeout = 60)
{
	char *dir = s3t_prefix("zombie");
	int ready[2];
	cr_assert_eq(pipe(ready), 0);
	pid_t kid = fork();
	cr_assert_geq(kid, 0);
	if (kid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(ready[0]);
		ckpt_s3_config *c = NULL;
		ckpt_vfs *v = NULL;
		void *token = NULL;
		if (ckpt_s3_config_load(&c) != CKPT_OK || ckpt_vfs_s3_new(&v, c) != CKPT_OK ||
			ckpt_vfs_lock(&token, v, dir) != CKPT_OK)
			_exit(3);
		if (write(ready[1], "x", 1) != 1)
			_exit(3);
		raise(SIGKILL); /* dies holding the lock; a zombie until the test reaps it */
		_exit(4);
	}
	close(ready[1]);
	char byte;
	cr_assert_eq(read(ready[0], &byte, 1), 1, "the holder did not take the lock");
	close(ready[0]);
	char stat_path[64], state = 0;
	snprintf(stat_path, sizeof(stat_path), "/proc/%ld/stat", (long)kid);
	for (int i = 0; i < 200 && state != 'Z'; i++) {
		FILE *f = fopen(stat_path, "r");
		if (f) {
			if (fscanf(f, "%*d %*s %c", &state) != 1)
				state = 0;
			fclose(f);
		}
		if (state != 'Z')
			usleep(10000);
	}
	cr_assert_eq(state, 'Z', "the holder is not a zombie (state %c)", state);
	ckpt_vfs *v = s3t_vfs(NULL, 0, 0);
	void *token = NULL;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = ckpt_vfs_lock(&token, v, dir);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_expect_eq(rc, CKPT_OK, "refused while the dead holder is a zombie: %s", ckpt_error_last()->message);
	cr_expect_lt(t1.tv_sec - t0.tv_sec, 15, "took %ld s", (long)(t1.tv_sec - t0.tv_sec));
	if (rc == CKPT_OK)
		ckpt_vfs_unlock(v, token);
	waitpid(kid, NULL, 0);
	ckpt_vfs_free(v);
	free(dir);
}

/*
 * The one-writer lock of an S3 prefix under contention: several processes
 * find the same stale lock at once and take it over; the server grants the
 * takeover (a PUT with If-Match: the stale version's ETag) to exactly one,
 * and every other process gets CKPT_EBUSY naming the winner. In half of the
 * rounds one taker is slow: the fault proxy holds its takeover request (the
 * one after it read the stale lock) until the others are done, the case
 * where an unconditional delete of the stale lock would remove the winner's.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "s3_common.h"
#include "s3_proxy.h"

#define TAKERS 4
#define ROUNDS 8

typedef struct taker_report {
	long pid;
	int rc;
	char message[1024];
} taker_report;

static int read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t k = read(fd, p, n);
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* A child: its own S3 client (through `endpoint` when not NULL), then waits for `go`, takes the lock, reports, holds it until `hold` closes. */
static void taker(const char *dir, const char *endpoint, int go, int report, int hold)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	taker_report r;
	memset(&r, 0, sizeof(r));
	r.pid = (long)getpid();
	ckpt_s3_config *c = NULL;
	ckpt_vfs *v = NULL;
	void *token = NULL;
	r.rc = ckpt_s3_config_load(&c);
	if (r.rc == CKPT_OK && endpoint) {
		free(c->endpoint);
		c->endpoint = strdup(endpoint);
		c->path_style = 1;
	}
	if (r.rc == CKPT_OK)
		r.rc = ckpt_vfs_s3_new(&v, c);
	char byte;
	if (read(go, &byte, 1) < 0)
		_exit(3);
	if (r.rc == CKPT_OK)
		r.rc = ckpt_vfs_lock(&token, v, dir);
	if (r.rc < 0)
		snprintf(r.message, sizeof(r.message), "%s", ckpt_error_last()->message);
	if (write(report, &r, sizeof(r)) != (ssize_t)sizeof(r)) /* under PIPE_BUF: one piece */
		_exit(3);
	if (read(hold, &byte, 1) < 0)
		_exit(3);
	if (token)
		ckpt_vfs_unlock(v, token);
	ckpt_vfs_free(v);
	ckpt_s3_config_free(c);
	_exit(0);
}

/* Requests for the lock object itself so far (the conditional-write probe before them is another object). */
static long lock_requests(const proxy *p)
{
	char *log = proxy_log(p);
	long n = 0;
	for (const char *l = log; (l = strstr(l, "/checkpoint.lock\n")) != NULL; l++)
		n++;
	free(log);
	return n;
}

/*
 * TAKERS processes race for the lock of `dir` (stale now): returns the
 * winner's pid after checking the losers. With `slow`, taker 0 goes first
 * through the proxy, which holds its third request of the lock (the takeover, after
 * its create was refused and it read the stale lock) for 8 s; the others
 * start once that request is held.
 */
static long race(const char *dir, int round, int slow)
{
	proxy p;
	char ep[64] = "";
	if (slow) { /* before the pipes: the proxy must not hold their ends open */
		/* its second PUT of the lock object: the takeover (the first is the create that finds it there) */
		const char *const takeover[] = { "PUT?/checkpoint.lock", NULL };
		proxy_start_rules(&p, "2", "delay8", takeover);
		proxy_endpoint(&p, ep, sizeof(ep));
	}
	int go[2], go_slow[2], report[2], hold[2];
	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(pipe(go_slow), 0);
	cr_assert_eq(pipe(report), 0);
	cr_assert_eq(pipe(hold), 0);
	pid_t kids[TAKERS];
	for (int i = 0; i < TAKERS; i++) {
		kids[i] = fork();
		cr_assert_geq(kids[i], 0);
		if (kids[i] == 0) {
			int mine = slow && i == 0 ? go_slow[0] : go[0];
			close(go[1]);
			close(go_slow[1]);
			close(report[0]);
			close(hold[1]);
			taker(dir, slow && i == 0 ? ep : NULL, mine, report[1], hold[0]);
		}
	}
	close(go[0]);
	close(go_slow[0]);
	close(report[1]);
	close(hold[0]);
	close(go_slow[1]);
	if (slow) {
		/* the slow taker has read the stale lock and its takeover is held */
		for (int waited = 0; lock_requests(&p) < 3 && waited < 600; waited++)
			usleep(100000);
		cr_assert_geq(lock_requests(&p), 3, "round %d: the slow taker made %ld requests of the lock", round,
			lock_requests(&p));
	}
	close(go[1]); /* the other takers start at once */
	taker_report r[TAKERS];
	for (int i = 0; i < TAKERS; i++)
		cr_assert_eq(read_all(report[0], &r[i], sizeof(r[i])), 0, "round %d: a taker died", round);
	close(report[0]);
	long winner = 0;
	int winners = 0;
	for (int i = 0; i < TAKERS; i++)
		if (r[i].rc == CKPT_OK) {
			winners++;
			winner = r[i].pid;
		}
	char want[64];
	snprintf(want, sizeof(want), " pid %ld ", winner);
	for (int i = 0; i < TAKERS && winners == 1; i++)
		if (r[i].rc != CKPT_OK) {
			cr_expect_eq(r[i].rc, CKPT_EBUSY, "round %d: taker %ld: %d %s", round, r[i].pid, r[i].rc,
				r[i].message);
			cr_expect(strstr(r[i].message, want) && strstr(r[i].message, "in use by another trainer"),
				"round %d: the refusal does not name the winner (pid %ld): %s", round, winner, r[i].message);
		}
	close(hold[1]); /* the holders release */
	for (int i = 0; i < TAKERS; i++) {
		int st = 0;
		waitpid(kids[i], &st, 0);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "round %d: taker exit status %d", round, st);
	}
	if (slow)
		proxy_stop(&p);
	cr_assert_eq(winners, 1, "round %d%s: %d of %d takers hold the lock at once", round, slow ? " (one slow)" : "",
		winners, TAKERS);
	return winner;
}

Test(s3_lock, stale_lock_is_taken_over_by_exactly_one_of_several, .timeout = 600)
{
	char *dir = s3t_prefix("race"), *lock = ts_join(dir, "checkpoint.lock");
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	for (int round = 0; round < ROUNDS; round++) {
		char body[512];
		if (round == 0) {
			/* stale by the server's clock: another host's lock not renewed for its 1 s lease */
			snprintf(body, sizeof(body), "host some-other-host pid 4242 lease 1 nonce %d renewal 0\n", round);
			free(s3t_oracle("put", lock, body, NULL));
			sleep(3);
		} else {
			/* stale at once: its holder ran on this host and has exited */
			pid_t dead = fork();
			cr_assert_geq(dead, 0);
			if (dead == 0)
				_exit(0);
			waitpid(dead, NULL, 0);
			snprintf(body, sizeof(body), "host %s pid %ld lease 60 nonce %d renewal 0\n", host, (long)dead,
				round);
			free(s3t_oracle("put", lock, body, NULL));
		}
		long winner = race(dir, round, round % 2);
		/* the winner released its lock on exit: gone, and nothing else is left */
		char *keys = s3t_oracle("keys", dir, NULL);
		cr_expect_str_eq(keys, "", "round %d: left after the winner %ld released", round, winner);
		free(keys);
	}
	free(lock);
	free(dir);
}

/* A holder whose lock was taken over (it was stale) never writes it again: its renewals are conditional. */
Test(s3_lock, renewal_does_not_overwrite_a_lock_taken_over, .timeout = 120)
{
	char *dir = s3t_prefix("renew"), *lock = ts_join(dir, "checkpoint.lock");
	ckpt_s3_config *c = NULL;
	cr_assert_eq(ckpt_s3_config_load(&c), CKPT_OK);
	c->lock_lease_seconds = 3; /* renewed every second */
	ckpt_vfs *v = NULL;
	cr_assert_eq(ckpt_vfs_s3_new(&v, c), CKPT_OK);
	ckpt_s3_config_free(c);
	void *token = NULL;
	cr_assert_eq(ckpt_vfs_lock(&token, v, dir), CKPT_OK, "%s", ckpt_error_last()->message);
	sleep(2); /* a renewal or two */
	char *body = s3t_oracle("get", lock, NULL);
	char want[64];
	snprintf(want, sizeof(want), " pid %ld ", (long)getpid());
	cr_assert(strstr(body, want) != NULL, "%s", body);
	free(body);
	/* another writer replaces it (as a takeover would) */
	const char *theirs = "host some-other-host pid 4242 lease 60 nonce 1 renewal 0\n";
	free(s3t_oracle("put", lock, theirs, NULL));
	sleep(3); /* renewal periods pass */
	body = s3t_oracle("get", lock, NULL);
	cr_expect_str_eq(body, theirs, "the old holder overwrote the new one");
	free(body);
	ckpt_vfs_unlock(v, token);
	/* the release did not delete the other writer's lock either */
	body = s3t_oracle("get", lock, NULL);
	cr_expect_str_eq(body, theirs, "the old holder's release deleted the new holder's lock");
	free(body);
	ckpt_vfs_free(v);
	free(lock);
	free(dir);
}

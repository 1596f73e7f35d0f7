/* s3_proxy: the bodies of the helpers declared in s3_proxy.h. */
#include "s3_proxy.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "s3_common.h"

void proxy_start_rules(proxy *p, const char *nn, const char *mode, const char *const *more)
{
	const char *ep = getenv("AWS_ENDPOINT_URL");
	s3t_bucket();
	const char *colon = strrchr(ep, ':');
	cr_assert_not_null(colon, "AWS_ENDPOINT_URL=%s has no port", ep);
	char up[16];
	static unsigned seq;
	snprintf(up, sizeof(up), "%d", atoi(colon + 1));
	snprintf(p->count_file, sizeof(p->count_file), "/tmp/ckpt-fault-proxy-%ld-%u.count", (long)getpid(), ++seq);
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	p->pid = fork();
	cr_assert_geq(p->pid, 0);
	if (p->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test that fails mid-way leaves no proxy behind */
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		const char *argv[16] = { "fault_proxy", up, nn, mode, p->count_file };
		int argc = 5;
		for (const char *const *m = more; m && *m && argc < 15; m++)
			argv[argc++] = *m;
		argv[argc] = NULL;
		execv(CKPT_FAULT_PROXY, (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	char buf[32] = "";
	ssize_t k = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	cr_assert_gt(k, 0, "fault_proxy did not start");
	buf[k] = '\0';
	p->port = atoi(buf);
}

void proxy_start_range(proxy *p, const char *nn, const char *mode)
{
	proxy_start_rules(p, nn, mode, NULL);
}

void proxy_start(proxy *p, long n, const char *mode)
{
	char nn[32];
	snprintf(nn, sizeof(nn), "%ld", n);
	proxy_start_range(p, nn, mode);
}

long proxy_seen(const proxy *p)
{
	long n = -1;
	FILE *f = fopen(p->count_file, "r");
	if (f) {
		if (fscanf(f, "%ld", &n) != 1)
			n = -1;
		fclose(f);
	}
	return n;
}

static void release_name(const proxy *p, char *buf, size_t n)
{
	snprintf(buf, n, "%s.release", p->count_file);
}

void proxy_release(const proxy *p)
{
	char name[600];
	release_name(p, name, sizeof(name));
	FILE *f = fopen(name, "w");
	cr_assert_not_null(f, "%s", name);
	fclose(f);
}

long proxy_stop(proxy *p)
{
	kill(p->pid, SIGTERM);
	waitpid(p->pid, NULL, 0);
	long n = proxy_seen(p);
	char name[600];
	release_name(p, name, sizeof(name));
	unlink(name);
	snprintf(name, sizeof(name), "%s.log", p->count_file);
	unlink(name);
	unlink(p->count_file);
	return n;
}

static char *proxy_file(const proxy *p, const char *suffix)
{
	char name[600];
	snprintf(name, sizeof(name), "%s%s", p->count_file, suffix);
	FILE *f = fopen(name, "rb");
	char *text = calloc(1, 1);
	size_t n = 0;
	cr_assert_not_null(text);
	if (f) {
		char buf[4096];
		size_t k;
		while ((k = fread(buf, 1, sizeof(buf), f)) > 0) {
			char *t = realloc(text, n + k + 1);
			cr_assert_not_null(t);
			text = t;
			memcpy(text + n, buf, k);
			n += k;
			text[n] = '\0';
		}
		fclose(f);
	}
	return text;
}

char *proxy_log(const proxy *p)
{
	return proxy_file(p, ".log");
}

char *proxy_harmed(const proxy *p)
{
	return proxy_file(p, ".harmed");
}

void proxy_endpoint(const proxy *p, char *buf, size_t n)
{
	snprintf(buf, n, "http://127.0.0.1:%d", p->port);
}

ckpt_vfs *proxy_vfs(const proxy *p, size_t part_size, unsigned tries)
{
	ckpt_s3_config *c = NULL;
	cr_assert_eq(ckpt_s3_config_load(&c), CKPT_OK, "%s", ckpt_error_last()->message);
	free(c->endpoint);
	char ep[64];
	proxy_endpoint(p, ep, sizeof(ep));
	c->endpoint = strdup(ep);
	c->path_style = 1;
	c->stall_seconds = 1;
	c->max_attempts = tries;
	c->parallel = 2;
	if (part_size)
		c->part_size = part_size;
	ckpt_vfs *v = NULL;
	cr_assert_eq(ckpt_vfs_s3_new(&v, c), CKPT_OK);
	ckpt_s3_config_free(c);
	return v;
}


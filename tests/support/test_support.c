#include "test_support.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const char *ts_fixture(const char *rel)
{
	static char slots[8][4096];
	static int next;
	char *b = slots[next++ & 7];
	snprintf(b, 4096, "%s/%s", CKPT_FIXTURES_DIR, rel);
	return b;
}

char *ts_join(const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;
	char *s = malloc(n);
	snprintf(s, n, "%s/%s", a, b);
	return s;
}

char *ts_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char tmpl[4096];
	snprintf(tmpl, sizeof(tmpl), "%s/ckpt-test-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmpl))
		return NULL;
	return strdup(tmpl);
}

void ts_rmtree(const char *dir)
{
	if (!dir || !*dir || strcmp(dir, "/") == 0)
		return;
	char *const argv[] = { "/bin/rm", "-rf", (char *)dir, NULL };
	ts_run_result r;
	if (ts_run(&r, argv) == 0)
		ts_run_free(&r);
}

int ts_copy(const char *from, const char *to)
{
	char *const argv[] = { "/bin/cp", "-r", (char *)from, (char *)to, NULL };
	ts_run_result r;
	if (ts_run(&r, argv) != 0)
		return -1;
	int st = r.status;
	ts_run_free(&r);
	return st;
}

char *ts_read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap + 1);
	size_t k;
	while ((k = fread(buf + len, 1, cap - len, f)) > 0) {
		len += k;
		if (len == cap) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
		}
	}
	fclose(f);
	buf[len] = '\0';
	if (n)
		*n = len;
	return buf;
}

int ts_write_file(const char *path, const void *buf, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	size_t k = n ? fwrite(buf, 1, n, f) : 0;
	return (fclose(f) == 0 && k == n) ? 0 : -1;
}

static char *slurp_fd(int fd)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap + 1);
	for (;;) {
		if (len == cap) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
		}
		ssize_t k = read(fd, buf + len, cap - len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	buf[len] = '\0';
	return buf;
}

int ts_run(ts_run_result *res, char *const argv[])
{
	memset(res, 0, sizeof(*res));
	char outp[] = "/tmp/ckpt-run-out-XXXXXX", errp[] = "/tmp/ckpt-run-err-XXXXXX";
	int ofd = mkstemp(outp), efd = mkstemp(errp);
	if (ofd < 0 || efd < 0)
		return -1;
	unlink(outp);
	unlink(errp);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, ofd, 1);
	posix_spawn_file_actions_adddup2(&fa, efd, 2);
	pid_t pid;
	int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		close(ofd);
		close(efd);
		return -1;
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	lseek(ofd, 0, SEEK_SET);
	lseek(efd, 0, SEEK_SET);
	res->out = slurp_fd(ofd);
	res->err = slurp_fd(efd);
	close(ofd);
	close(efd);
	return 0;
}

int ts_run_sh(ts_run_result *res, const char *cmd)
{
	char *const argv[] = { "/bin/sh", "-c", (char *)cmd, NULL };
	return ts_run(res, argv);
}

void ts_run_free(ts_run_result *res)
{
	free(res->out);
	free(res->err);
	res->out = res->err = NULL;
}

/* The last `max` bytes of `s`, marked when cut. */
static const char *tail(const char *s, size_t max, int *cut)
{
	size_t n = s ? strlen(s) : 0;
	*cut = n > max;
	return s ? s + (n > max ? n - max : 0) : "(not captured)";
}

char *ts_run_text(const ts_run_result *res)
{
	int cut_out, cut_err;
	const char *o = tail(res->out, 65536, &cut_out), *e = tail(res->err, 65536, &cut_err);
	size_t n = strlen(o) + strlen(e) + 128;
	char *t = malloc(n);
	if (t)
		snprintf(t, n, "exit %d\nstdout%s:\n%s\nstderr%s:\n%s", res->status, cut_out ? " (last 64 KiB)" : "", o,
			cut_err ? " (last 64 KiB)" : "", e);
	return t;
}

void ts_assert_exit_at(const char *file, int line, const ts_run_result *res, int want, const char *fmt, ...)
{
	if (res->status == want)
		return;
	char what[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	char *text = ts_run_text(res);
	cr_assert_fail("%s:%d: %s: expected exit %d\n%s", file, line, what, want, text ? text : "(out of memory)");
}

const char *ts_oracle_python(void)
{
	const char *py = getenv("CKPT_ORACLE_PYTHON");

	cr_assert(py && *py, "CKPT_ORACLE_PYTHON is not set: run the suite through scripts/test.sh "
			     "(it installs the pinned oracles of tests/oracles/requirements.txt)");
	cr_assert(access(py, X_OK) == 0, "CKPT_ORACLE_PYTHON=%s is not executable", py);
	return py;
}

ts_run_result ts_cli(const char *arg, ...)
{
	char *argv[32];
	int n = 0;
	va_list ap;
	ts_run_result r;

	argv[n++] = (char *)TS_CLI;
	va_start(ap, arg);
	for (; arg && n < 31; arg = va_arg(ap, const char *))
		argv[n++] = (char *)arg;
	va_end(ap);
	argv[n] = NULL;
	cr_assert_eq(ts_run(&r, argv), 0, "could not start %s", TS_CLI);
	return r;
}

int ts_flip_byte(const char *path, long off, unsigned mask)
{
	FILE *f = fopen(path, "r+b");
	int c = EOF, rc;

	if (!f)
		return -1;
	if (fseek(f, off, SEEK_SET) == 0)
		c = fgetc(f);
	rc = c == EOF ? -1 : 0;
	if (rc == 0 && (fseek(f, off, SEEK_SET) != 0 || fputc(c ^ (int)mask, f) == EOF))
		rc = -1;
	if (fclose(f) != 0)
		rc = -1;
	return rc;
}

unsigned long long ts_key_value(const char *text, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "%s ", key);
	for (p = text; (p = strstr(p, pat)) != NULL; p++)
		if (p == text || p[-1] == '\n')
			return strtoull(p + strlen(pat), NULL, 10);
	cr_assert_fail("no '%s' line in:\n%s", key, text);
	return 0;
}

/* s3_common: the bodies of the helpers declared in s3_common.h. */
#include "s3_common.h"

const char *s3t_bucket(void)
{
	const char *b = getenv("CKPT_S3_TEST_BUCKET");
	cr_assert(b && *b && getenv("AWS_ENDPOINT_URL"),
		"no S3 test server: run the suite through tests/s3/with_s3_server.sh (scripts/test.sh does)");
	return b;
}

char *s3t_prefix(const char *name)
{
	static unsigned seq;
	char buf[512];
	snprintf(buf, sizeof(buf), "s3://%s/t%ld-%ld-%u-%s", s3t_bucket(), (long)getpid(), (long)time(NULL), ++seq,
		name);
	return strdup(buf);
}

char *s3t_oracle(const char *action, ...)
{
	char *argv[24];
	int n = 0;
	argv[n++] = (char *)ts_oracle_python();
	argv[n++] = (char *)S3T_ORACLE;
	argv[n++] = (char *)action;
	va_list ap;
	va_start(ap, action);
	for (const char *a = va_arg(ap, const char *); a && n < 23; a = va_arg(ap, const char *))
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	ts_run_result r;
	cr_assert_eq(ts_run(&r, argv), 0, "cannot start %s", argv[0]);
	cr_assert_eq(r.status, 0, "s3_check.py %s failed (exit %d):\n%s\n%s", action, r.status, r.out, r.err);
	char *out = r.out;
	r.out = NULL;
	ts_run_free(&r);
	return out;
}

ckpt_vfs *s3t_vfs(const char *endpoint, size_t part_size, unsigned parallel)
{
	s3t_bucket();
	ckpt_s3_config *c = NULL;
	cr_assert_eq(ckpt_s3_config_load(&c), CKPT_OK, "%s", ckpt_error_last()->message);
	if (endpoint) {
		free(c->endpoint);
		c->endpoint = strdup(endpoint);
	}
	if (part_size)
		c->part_size = part_size;
	if (parallel)
		c->parallel = parallel;
	ckpt_vfs *v = NULL;
	cr_assert_eq(ckpt_vfs_s3_new(&v, c), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_s3_config_free(c);
	return v;
}

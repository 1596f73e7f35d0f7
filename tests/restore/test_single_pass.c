/*
 * ckpt_checkpoint_options.restore_single_pass (issue 34, point 9): a
 * restore into plain host variables reads each stored byte once (measured
 * by the process's read(2) byte count, /proc/self/io rchar) instead of
 * verifying the file first and reading it again; a bad checksum then
 * fails the restore with the variables read so far written, and the
 * warning names them. Without the option nothing changes on that failure.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

#define N ((size_t)1 << 20) /* floats per variable: 4 MiB */

static char warned[4096];
static void on_warning(const char *msg, void *ctx)
{
	(void)ctx;
	snprintf(warned, sizeof(warned), "%s", msg);
}

static unsigned long long rchar(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	cr_assert_not_null(f);
	char line[256];
	unsigned long long v = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "rchar: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

static ckpt_checkpoint *tree(int single_pass, ckpt_variable **a, ckpt_variable **b)
{
	ckpt_checkpoint *ck;
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	o.restore_single_pass = single_pass;
	o.warn = on_warning;
	ckpt_shape sh = { 1, { (int64_t)N } };
	cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
	cr_assert_not_null(*a = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "a", "a", CKPT_DT_FLOAT, &sh, NULL));
	cr_assert_not_null(*b = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "b", "b", CKPT_DT_FLOAT, &sh, NULL));
	return ck;
}

static void set(ckpt_variable *v, float x)
{
	float *p = malloc(N * sizeof(float));
	for (size_t i = 0; i < N; i++)
		p[i] = x;
	cr_assert_eq(ckpt_variable_assign(v, p, N * sizeof(float)), CKPT_OK);
	free(p);
}

static float first(const ckpt_variable *v)
{
	float *p = malloc(N * sizeof(float));
	cr_assert_eq(ckpt_variable_read(v, p, N * sizeof(float)), CKPT_OK);
	float x = p[0];
	free(p);
	return x;
}

/* a = 1, b = 2, saved; the prefix */
static char *saved(void)
{
	ckpt_variable *a, *b;
	ckpt_checkpoint *ck = tree(0, &a, &b);
	set(a, 1);
	set(b, 2);
	char *dir = ts_tmpdir(), *want = ts_join(dir, "ckpt");
	const char *p = ckpt_checkpoint_save(ck, want);
	cr_assert_not_null(p, "%s", ckpt_error_last()->message);
	char *prefix = strdup(p);
	free(want);
	free(dir);
	ckpt_checkpoint_free(ck);
	return prefix;
}

/* The bytes the process read during a restore into fresh trees (a = b = 0 before). */
static unsigned long long bytes_read(const char *prefix, int single_pass)
{
	ckpt_variable *a, *b;
	ckpt_checkpoint *ck = tree(single_pass, &a, &b);
	set(a, 0);
	set(b, 0);
	unsigned long long r0 = rchar();
	cr_assert_eq(ckpt_checkpoint_restore(NULL, ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	unsigned long long r = rchar() - r0;
	cr_assert_eq(first(a), 1.0f);
	cr_assert_eq(first(b), 2.0f);
	ckpt_checkpoint_free(ck);
	return r;
}

Test(single_pass, each_stored_byte_is_read_once)
{
	char *prefix = saved();
	const unsigned long long data = 2 * N * sizeof(float);
	unsigned long long twice = bytes_read(prefix, 0), once = bytes_read(prefix, 1);
	cr_assert_geq(twice, 2 * data, "verify first: %llu bytes read for %llu", twice, data);
	cr_assert_geq(once, data, "%llu bytes read for %llu", once, data);
	cr_assert_lt(once, data + data / 4, "single pass: %llu bytes read for %llu", once, data);
	free(prefix);
}

Test(single_pass, a_bad_checksum_fails_naming_what_was_written)
{
	char *prefix = saved();
	/* b's bytes are the second half of the data file (keys in order) */
	char path[4096];
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, prefix, NULL), CKPT_OK);
	size_t ib;
	cr_assert_eq(ckpt_reader_find(&ib, r, "b/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	long off = (long)ckpt_reader_var(r, ib)->offset;
	snprintf(path, sizeof(path), "%s", ckpt_reader_shard_path(r, ckpt_reader_var(r, ib)->shard, NULL));
	ckpt_reader_free(r);
	cr_assert_eq(ts_flip_byte(path, off + 4096, 0x01), 0);

	/* verify first (the default): nothing changes */
	ckpt_variable *a, *b;
	ckpt_checkpoint *ck = tree(0, &a, &b);
	set(a, 7);
	set(b, 8);
	cr_assert_eq(ckpt_checkpoint_restore(NULL, ck, prefix), CKPT_ECHECKSUM);
	cr_assert_eq(first(a), 7.0f);
	cr_assert_eq(first(b), 8.0f);
	ckpt_checkpoint_free(ck);

	/* single pass: the error, and a warning naming the variables it wrote */
	warned[0] = 0;
	ck = tree(1, &a, &b);
	set(a, 7);
	set(b, 8);
	cr_assert_eq(ckpt_checkpoint_restore(NULL, ck, prefix), CKPT_ECHECKSUM);
	const ckpt_error *e = ckpt_error_last();
	cr_assert(e->variable && strstr(e->variable, "b/"), "%s", e->variable ? e->variable : "(null)");
	cr_assert(strstr(warned, "partial") && strstr(warned, "'a'"), "warning: %s", warned);
	cr_assert_eq(first(a), 1.0f, "a was read before b failed");
	ckpt_checkpoint_free(ck);
	free(prefix);
}

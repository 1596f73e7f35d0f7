/*
 * The CLI's progress line counts the bytes moved to and from S3: a restore
 * from s3:// and a convert to s3:// report at least the checkpoint's data
 * (the process's own I/O counters see no socket traffic, so before, an S3
 * restore showed a few kB). The line runs under a pseudo-terminal (util-linux
 * `script`); CKPT_PROGRESS_AFTER_MS=0 draws it at once, and its last figures
 * are drawn before it is erased.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "s3_common.h"

#define ELEMS (1u << 20) /* 4 MiB of float: a multipart data object */
#define ERASE "\r\033[K"

/* A checkpoint of one 4 MiB variable at dir/ckpt (dir: s3:// or local). Returns its path. */
static char *save_big(const char *dir)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
	float *init = malloc(sizeof(float) * ELEMS);
	for (unsigned i = 0; i < ELEMS; i++)
		init[i] = (float)i;
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.initial_value = init;
	int64_t d = ELEMS;
	ckpt_shape sh;
	cr_assert_eq(ckpt_shape_make(&sh, 1, &d), CKPT_OK);
	ckpt_variable *v;
	cr_assert_eq(ckpt_object_add_variable(&v, ckpt_checkpoint_root(ck), "big", "big", CKPT_DT_FLOAT, &sh, &vo),
		CKPT_OK, "%s", ckpt_error_last()->message);
	char *prefix = ts_join(dir, "ckpt");
	const char *path;
	cr_assert_eq(ckpt_checkpoint_save(&path, ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	char *out = strdup(path);
	free(prefix);
	free(init);
	ckpt_checkpoint_free(ck);
	return out;
}

/* The bytes the last `verb:` progress line of `out` shows ("12.3 MB" → 12300000). */
static double last_figure(const char *out, const char *verb)
{
	char head[64];
	snprintf(head, sizeof(head), ERASE "%s: ", verb);
	const char *last = NULL;
	for (const char *p = strstr(out, head); p; p = strstr(p + 1, head))
		last = p;
	cr_assert_not_null(last, "no progress line '%s' in:\n%s", verb, out);
	double v = 0;
	char unit[8] = "";
	cr_assert_eq(sscanf(last + strlen(head), "%lf %7s", &v, unit), 2, "%s", last);
	static const char *const units[] = { "B", "kB", "MB", "GB", "TB" };
	double scale = 1;
	for (int i = 0; i < 5; i++, scale *= 1000)
		if (strcmp(unit, units[i]) == 0)
			return v * scale;
	cr_assert_fail("unit %s in %s", unit, last);
	return 0;
}

static void run_on_tty(ts_run_result *r, const char *args)
{
	char line[8192];
	snprintf(line, sizeof(line), "CKPT_PROGRESS_AFTER_MS=0 script -qec '%s %s' /dev/null", TS_CLI, args);
	cr_assert_eq(ts_run_sh(r, line), 0, "could not start: %s", line);
	ts_assert_exit(r, 0, "%s", r->out);
}

Test(s3_progress, restore_and_convert_count_the_bytes_moved_to_and_from_s3, .timeout = 300)
{
	char *dir = s3t_prefix("progress"), *tmp = ts_tmpdir();
	char *ck = save_big(dir), *local = save_big(tmp);
	double data = 4.0 * ELEMS, got;
	char args[4096];
	ts_run_result r;

	/* restore from S3: the data object is received once */
	snprintf(args, sizeof(args), "restore %s --strategy default", ck);
	run_on_tty(&r, args);
	got = last_figure(r.out, "restore");
	cr_expect_geq(got, 0.99 * data, "an S3 restore of %.0f bytes showed %.0f:\n%s", data, got, r.out);
	ts_run_free(&r);

	/* convert a local checkpoint to S3: read from disk once, sent once */
	char *to = ts_join(dir, "converted");
	snprintf(args, sizeof(args), "convert %s %s --to tf", local, to);
	run_on_tty(&r, args);
	got = last_figure(r.out, "convert");
	cr_expect_geq(got, 2 * 0.99 * data, "a convert to S3 of %.0f bytes showed %.0f:\n%s", data, got, r.out);
	ts_run_free(&r);
	free(to);
	ts_rmtree(tmp);
	free(tmp);
	free(local);
	free(ck);
	free(dir);
}

/*
 * CLI paths test_cli.c does not reach: the ways to ask for help (-h, bare
 * `help`, `help help`, `help x y`), unknown short options, `--` ending the
 * options, `restore` with its default replica count and with
 * --expect-partial, and output that cannot be written (stdout on /dev/full).
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

static void expect_usage_error(ts_run_result *r, const char *needle, const char *what)
{
	cr_assert_eq(r->status, 2, "%s: exit %d, stderr %s", what, r->status, r->err);
	cr_assert_not_null(strstr(r->err, needle), "%s: stderr lacks \"%s\": %s", what, needle, r->err);
	cr_assert_not_null(strstr(r->err, "usage: ckpt"), "%s: %s", what, r->err);
	cr_assert_eq(r->out[0], '\0', "%s: usage error printed to stdout", what);
	ts_run_free(r);
}

Test(cli_paths, every_way_to_ask_for_help_prints_the_same_overview)
{
	ts_run_result ref = ts_cli("--help", NULL);
	ts_assert_exit(&ref, 0, "exit status");
	cr_assert_not_null(strstr(ref.out, "usage: ckpt"), "%s", ref.out);
	static const char *const ways[][2] = { { "-h", NULL }, { "help", NULL }, { "help", "help" } };
	for (size_t i = 0; i < sizeof(ways) / sizeof(ways[0]); i++) {
		ts_run_result r = ts_cli(ways[i][0], ways[i][1], NULL);
		ts_assert_exit(&r, 0, "ckpt %s %s: exit %d", ways[i][0], ways[i][1] ? ways[i][1] : "", r.status);
		cr_assert_str_eq(r.out, ref.out, "ckpt %s %s differs from ckpt --help", ways[i][0],
			ways[i][1] ? ways[i][1] : "");
		cr_assert_eq(r.err[0], '\0');
		ts_run_free(&r);
	}
	ts_run_free(&ref);
	ts_run_result r = ts_cli("help", "inspect", "verify", NULL);
	expect_usage_error(&r, "help: unexpected argument 'verify'", "help x y");
}

Test(cli_paths, unknown_short_options_are_usage_errors)
{
	ts_run_result r = ts_cli("-x", NULL);
	expect_usage_error(&r, "unknown option '-x'", "ckpt -x");
	r = ts_cli("inspect", "-x", ts_fixture("tf/tensorflow__lso_ckpt_tf2.2/ckpt"), NULL);
	expect_usage_error(&r, "unknown option '-x'", "ckpt inspect -x PATH");
	r = ts_cli("restore", ts_fixture("tf/tensorflow__lso_ckpt_tf2.2/ckpt"), "--strategy", "mirrored", "-r", "2", NULL);
	expect_usage_error(&r, "unknown option '-r'", "ckpt restore ... -r 2");
}

Test(cli_paths, double_dash_ends_the_options)
{
	char *dir = ts_tmpdir(), *odd = ts_join(dir, "-odd");
	cr_assert_eq(ts_copy(ts_fixture("keras/hls4ml__tfkeras2.11.0_conv1d_weightsonly.h5"), odd), 0);
	/* without `--` the name is an option; after it, a path (absolute, so no leading '-': use a relative one) */
	char cmd[4096];
	ts_run_result r;
	snprintf(cmd, sizeof cmd, "cd '%s' && '%s' verify -odd", dir, TS_CLI);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 2, "%s", r.err);
	cr_assert_not_null(strstr(r.err, "unknown option '-odd'"), "%s", r.err);
	ts_run_free(&r);
	snprintf(cmd, sizeof cmd, "cd '%s' && '%s' verify -- -odd", dir, TS_CLI);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "verify -- -odd: exit %d: %s", r.status, r.err);
	ts_run_free(&r);
	/* and an option after `--` is an argument too: one PATH too many */
	snprintf(cmd, sizeof cmd, "cd '%s' && '%s' verify -- -odd --json", dir, TS_CLI);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 2, "verify -- -odd --json: exit %d: %s", r.status, r.err);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir), free(odd);
}

Test(cli_paths, restore_mirrored_defaults_to_2_replicas)
{
	ts_run_result r = ts_cli("restore", ts_fixture("tf/tensorflow__lso_ckpt_tf2.2"), "--strategy", "mirrored", "--json",
		NULL);
	ts_assert_exit(&r, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "\"replicas\": 2, \"variables\""), "%.400s", r.out);
	ts_run_free(&r);
}

/*
 * A TF2 checkpoint (every entry of a TensorFlow-written fixture, its object
 * graph included) plus one entry the graph does not reference, named like
 * the root's child "optimizer": the load cannot place it (one root edge per
 * name), so it stays unmatched.
 */
static char *bundle_with_a_stray_entry(char *dir)
{
	char *prefix = ts_join(dir, "partial");
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, ts_fixture("tf/tensorflow__lso_ckpt_tf2.2/ckpt"), NULL), CKPT_OK, "%s",
		ckpt_error_last()->message);
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_writer *w;
	cr_assert_eq(ckpt_writer_open(&w, prefix, NULL, &o), CKPT_OK);
	for (size_t i = 0; i < ckpt_reader_num_entries(r); i++) {
		ckpt_tensor *t;
		cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK, "%s", ckpt_error_last()->message);
		cr_assert_eq(ckpt_writer_add(w, ckpt_reader_var(r, i)->name, t, 0), CKPT_OK, "%s",
			ckpt_error_last()->message);
		ckpt_tensor_free(t);
	}
	ckpt_reader_free(r);
	ckpt_shape s = { 0 };
	ckpt_tensor *t;
	float v = 1.5f;
	cr_assert_eq(ckpt_tensor_wrap(&t, CKPT_DT_FLOAT, &s, &v, sizeof(v)), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "optimizer", t, 0), CKPT_OK);
	ckpt_tensor_free(t);
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_writer_free(w);
	return prefix;
}

Test(cli_paths, restore_expect_partial_accepts_unmatched_entries)
{
	char *dir = ts_tmpdir(), *prefix = bundle_with_a_stray_entry(dir);
	ts_run_result r = ts_cli("restore", prefix, "--strategy", "mirrored", NULL);
	ts_assert_exit(&r, 1, "an unmatched entry without --expect-partial: exit %d\n%s%s", r.status, r.out, r.err);
	cr_assert_not_null(strstr(r.out, "unmatched: optimizer"), "%s", r.out);
	cr_assert_not_null(strstr(r.err, "1 stored entry could not be placed (use --expect-partial to accept)"), "%s",
		r.err);
	ts_run_free(&r);
	r = ts_cli("restore", prefix, "--strategy", "mirrored", "--expect-partial", NULL);
	ts_assert_exit(&r, 0, "--expect-partial: exit %d\n%s%s", r.status, r.out, r.err);
	cr_assert_not_null(strstr(r.out, "unmatched: optimizer"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "1 unmatched (expected: --expect-partial)"), "%s", r.out);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir), free(prefix);
}

Test(cli_paths, output_that_cannot_be_written_is_an_error)
{
	static const char *const cmds[] = { "--help", "--version", "help inspect", "inspect '%s'", "verify '%s'" };
	const char *fx = ts_fixture("tf/tensorflow__lso_ckpt_tf2.2/ckpt");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char args[2048], cmd[4096];
		snprintf(args, sizeof args, cmds[i], fx);
		snprintf(cmd, sizeof cmd, "'%s' %s >/dev/full", TS_CLI, args);
		ts_run_result r;
		cr_assert_eq(ts_run_sh(&r, cmd), 0);
		ts_assert_exit(&r, 1, "ckpt %s >/dev/full: exit %d", args, r.status);
		cr_assert_not_null(strstr(r.err, "ckpt: error writing to standard output"), "ckpt %s: %s", args, r.err);
		ts_run_free(&r);
	}
}

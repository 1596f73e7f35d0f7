/*
 * The progress line of verify / restore / convert / diff: drawn on stderr
 * when it is a terminal (here: a pseudo-terminal from util-linux `script`),
 * erased before the results, never drawn into a pipe or with --json.
 * CKPT_PROGRESS_AFTER_MS=0 makes the line appear at once instead of after a
 * second, so the small fixture needs no slow run.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_support.h"

#define LSO "tf/tensorflow__lso_ckpt_tf2.2/ckpt"
#define ERASE "\r\033[K"

/* `cmd` under a pseudo-terminal: stdout and stderr both land in r->out. */
static void run_on_tty(ts_run_result *r, const char *cmd)
{
	char line[8192];

	snprintf(line, sizeof(line), "CKPT_PROGRESS_AFTER_MS=0 script -qec '%s' /dev/null", cmd);
	cr_assert_eq(ts_run_sh(r, line), 0, "could not start: %s", line);
}

/* The line `verb: ...` was drawn, then erased right before the result text `result`. */
static void assert_drawn_then_erased(const char *out, const char *verb, const char *result)
{
	char head[64];
	const char *first, *res;

	snprintf(head, sizeof(head), ERASE "%s: ", verb);
	first = strstr(out, head);
	cr_assert_not_null(first, "no progress line '%s' in:\n%s", verb, out);
	res = strstr(out, result);
	cr_assert_not_null(res, "no result '%s' in:\n%s", result, out);
	cr_assert(first < res, "progress drawn after the result:\n%s", out);
	cr_assert(res - out >= 4 && strncmp(res - 4, ERASE, 4) == 0,
		"the progress line was not erased before the result:\n%s", out);
}

Test(cli_progress, verify_draws_a_line_on_a_terminal_and_erases_it)
{
	ts_run_result r;
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), "%s verify %s", TS_CLI, ts_fixture(LSO));
	run_on_tty(&r, cmd);
	ts_assert_exit(&r, 0, "%s", r.out);
	assert_drawn_then_erased(r.out, "verify", "OK: ");
	ts_run_free(&r);
}

Test(cli_progress, restore_convert_and_diff_draw_a_line)
{
	char *dir = ts_tmpdir(), cmd[8192];
	char *out = ts_join(dir, "conv");
	ts_run_result r;

	snprintf(cmd, sizeof(cmd), "%s restore %s --strategy mirrored --replicas 2", TS_CLI, ts_fixture(LSO));
	run_on_tty(&r, cmd);
	ts_assert_exit(&r, 0, "%s", r.out);
	assert_drawn_then_erased(r.out, "restore", "restored ");
	ts_run_free(&r);

	snprintf(cmd, sizeof(cmd), "%s convert %s %s --to tf", TS_CLI, ts_fixture(LSO), out);
	run_on_tty(&r, cmd);
	ts_assert_exit(&r, 0, "%s", r.out);
	assert_drawn_then_erased(r.out, "convert", "wrote ");
	ts_run_free(&r);

	snprintf(cmd, sizeof(cmd), "%s diff %s %s", TS_CLI, ts_fixture(LSO), out);
	run_on_tty(&r, cmd);
	ts_assert_exit(&r, 0, "%s", r.out);
	cr_assert_not_null(strstr(r.out, ERASE "diff: "), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "equal: "), "%s", r.out);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(out);
	free(dir);
}

Test(cli_progress, nothing_with_json_on_a_terminal)
{
	ts_run_result r;
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), "%s restore %s --strategy default --json", TS_CLI, ts_fixture(LSO));
	run_on_tty(&r, cmd);
	ts_assert_exit(&r, 0, "%s", r.out);
	cr_assert_null(strstr(r.out, "\033[K"), "a progress line with --json:\n%s", r.out);
	cr_assert_not_null(strstr(r.out, "\"variables\""), "%s", r.out);
	ts_run_free(&r);
}

Test(cli_progress, nothing_when_stderr_is_not_a_terminal)
{
	ts_run_result r;
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), "CKPT_PROGRESS_AFTER_MS=0 %s verify %s", TS_CLI, ts_fixture(LSO));
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "%s", r.err);
	cr_assert_null(strstr(r.err, "\033[K"), "a progress line into a pipe:\n%s", r.err);
	cr_assert_null(strchr(r.err, '\r'), "a carriage return into a pipe:\n%s", r.err);
	ts_run_free(&r);
}

/* An error line starts on a line of its own, never after the progress text. */
Test(cli_progress, errors_are_not_appended_to_the_line)
{
	char *dir = ts_tmpdir(), cmd[8192];
	ts_run_result r;
	const char *e;

	/* a prefix whose data file is missing: verify reports it and fails */
	snprintf(cmd, sizeof(cmd), "cp %s.index %s/x.index && %s verify %s/x", ts_fixture(LSO), dir, TS_CLI, dir);
	run_on_tty(&r, cmd);
	ts_assert_exit(&r, 1, "%s", r.out);
	e = strstr(r.out, "ckpt: ");
	cr_assert_not_null(e, "%s", r.out);
	cr_assert(e == r.out || e[-1] == '\n' || (e - r.out >= 4 && strncmp(e - 4, ERASE, 4) == 0),
		"error line glued to other text:\n%s", r.out);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
}

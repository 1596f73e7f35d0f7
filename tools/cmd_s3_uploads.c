/*
 * `ckpt s3 uploads list|abort s3://bucket/prefix`: the multipart uploads
 * begun under a prefix and never completed or aborted (a killed process's);
 * `abort` removes every one of them and their stored parts.
 */
#include <stdio.h>
#include <string.h>
#include "cli.h"

static const cli_opt s3_opts[] = {
	{ CLI_OPT_ARG, "WHAT", NULL, 1, "uploads" },
	{ CLI_OPT_ARG, "ACTION", NULL, 1, "list or abort" },
	{ CLI_OPT_ARG, "PREFIX", NULL, 1, "s3://bucket/prefix" },
	{ CLI_OPT_END, NULL, NULL, 0, NULL }
};

static int cmd_s3(const cli_cmd *cmd, int argc, char **argv)
{
	cli_args args;
	int rc = cli_parse(cmd, argc, argv, &args);
	if (rc == CLI_PARSE_HELP)
		return CLI_EXIT_OK;
	if (rc != CLI_EXIT_OK)
		return rc;
	const char *what = cli_get(cmd, &args, "WHAT"), *action = cli_get(cmd, &args, "ACTION");
	const char *prefix = cli_get(cmd, &args, "PREFIX");
	if (strcmp(what, "uploads") != 0)
		return cli_usage_error(cmd, "unknown subcommand '%s' (expected uploads)", what);
	int abort_all = strcmp(action, "abort") == 0;
	if (!abort_all && strcmp(action, "list") != 0)
		return cli_usage_error(cmd, "unknown action '%s' (expected list or abort)", action);
	if (!ckpt_path_is_s3(prefix))
		return cli_usage_error(cmd, "'%s' is not an s3:// path", prefix);
	ckpt_s3_upload *u = NULL;
	size_t n = 0, failed = 0;
	if (ckpt_s3_uploads_list(&u, &n, NULL, prefix) != CKPT_OK)
		return cli_report_last(prefix, NULL);
	for (size_t i = 0; i < n; i++) {
		if (!abort_all) {
			printf("%s\t%s\t%s\n", u[i].initiated ? u[i].initiated : "-", u[i].key, u[i].upload_id);
		} else if (ckpt_s3_upload_abort(NULL, prefix, &u[i]) != CKPT_OK) {
			cli_report_last(prefix, u[i].key);
			failed++;
		} else {
			printf("aborted %s (upload %s)\n", u[i].key, u[i].upload_id);
		}
	}
	if (!abort_all)
		printf("%zu unfinished upload%s under %s\n", n, n == 1 ? "" : "s", prefix);
	ckpt_s3_uploads_free(u, n);
	return failed ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}

const cli_cmd cli_cmd_s3 = {
	"s3", cmd_s3, "List or abort the multipart uploads a killed process left under an S3 prefix",
	s3_opts,
	"`ckpt s3 uploads list s3://bucket/prefix` prints one line per multipart\n"
	"upload begun under the prefix and never completed or aborted (initiated,\n"
	"key, upload id); `ckpt s3 uploads abort s3://bucket/prefix` aborts every\n"
	"one, freeing their stored parts. A running save's own upload is listed\n"
	"too: abort only when no writer is running there."
};

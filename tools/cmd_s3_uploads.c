/*
 * `ckpt s3 uploads list|abort s3://bucket/prefix`: the multipart uploads
 * begun under a prefix and never completed or aborted (a killed process's);
 * `abort` removes every one of them and their stored parts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

/* The options of `ckpt s3`, filled by cli_parse through s3_opts[].field. */
typedef struct s3_args {
	const char *what;
	const char *action;
	const char *prefix;
} s3_args;

static const cli_opt s3_opts[] = {
	{ CLI_OPT_ARG, "WHAT", NULL, 1, "uploads", CLI_FIELD(s3_args, what) },
	{ CLI_OPT_ARG, "ACTION", NULL, 1, "list or abort", CLI_FIELD(s3_args, action) },
	{ CLI_OPT_ARG, "PREFIX", NULL, 1, "s3://bucket/prefix", CLI_FIELD(s3_args, prefix) },
	{ CLI_OPT_END, NULL, NULL, 0, NULL, 0 }
};

/* The unfinished uploads under the prefix and, with abort, which of them were aborted. */
typedef struct s3_result {
	const char *prefix;
	int abort_all;
	ckpt_s3_upload *u;
	size_t n, failed;
	unsigned char *aborted;  /* abort: aborted[i] when upload i is gone */
} s3_result;

static int s3_parse(const cli_cmd *cmd, int argc, char **argv, s3_result *res)
{
	s3_args args;
	int rc;

	memset(&args, 0, sizeof(args));
	rc = cli_parse(cmd, argc, argv, &args);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (strcmp(args.what, "uploads") != 0)
		return cli_usage_error(cmd, "unknown subcommand '%s' (expected uploads)", args.what);
	res->abort_all = strcmp(args.action, "abort") == 0;
	if (!res->abort_all && strcmp(args.action, "list") != 0)
		return cli_usage_error(cmd, "unknown action '%s' (expected list or abort)", args.action);
	if (!ckpt_path_is_s3(args.prefix))
		return cli_usage_error(cmd, "'%s' is not an s3:// path", args.prefix);
	res->prefix = args.prefix;
	return CLI_EXIT_OK;
}

/* List, and with abort, abort each upload (a failure is reported and counted, the others still go). */
static int s3_run(s3_result *res)
{
	size_t i;

	if (ckpt_s3_uploads_list(&res->u, &res->n, NULL, res->prefix) != CKPT_OK)
		return cli_report_last(res->prefix, NULL);
	if (!res->abort_all)
		return CLI_EXIT_OK;
	if (!(res->aborted = calloc(res->n ? res->n : 1, 1)))
		return cli_report(res->prefix, NULL, -1, "out of memory");
	for (i = 0; i < res->n; i++) {
		if (ckpt_s3_upload_abort(NULL, res->prefix, &res->u[i]) != CKPT_OK) {
			cli_report_last(res->prefix, res->u[i].key);
			res->failed++;
		} else {
			res->aborted[i] = 1;
		}
	}
	return CLI_EXIT_OK;
}

static void s3_print(const s3_result *res)
{
	size_t i;

	for (i = 0; i < res->n; i++) {
		const ckpt_s3_upload *u = &res->u[i];
		if (!res->abort_all)
			printf("%s\t%s\t%s\n", u->initiated ? cli_vis(u->initiated) : "-", cli_vis(u->key),
				cli_vis(u->upload_id));
		else if (res->aborted[i])
			printf("aborted %s (upload %s)\n", cli_vis(u->key), cli_vis(u->upload_id));
	}
	if (!res->abort_all)
		printf("%zu unfinished upload%s under %s\n", res->n, res->n == 1 ? "" : "s", cli_vis(res->prefix));
}

static int cmd_s3(const cli_cmd *cmd, int argc, char **argv)
{
	s3_result res;
	int rc;

	memset(&res, 0, sizeof(res));
	rc = s3_parse(cmd, argc, argv, &res);
	if (rc != CLI_EXIT_OK)
		return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
	rc = s3_run(&res);
	if (rc == CLI_EXIT_OK) {
		s3_print(&res);
		rc = res.failed ? CLI_EXIT_ERROR : CLI_EXIT_OK;
	}
	ckpt_s3_uploads_free(res.u, res.n);
	free(res.aborted);
	return rc;
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

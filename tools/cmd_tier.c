/*
 * `ckpt tier list [--json]` and `ckpt tier drop JOB`: what this node's memory
 * tier directory holds (ckpt/tier.h; $CKPT_TIER_DIR, else /dev/shm/ckpt-<uid>,
 * or --dir), and removing one job's segments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "ckpt/sys/alloc.h"

typedef struct tier_args {
	const char *action;
	const char *job;
	const char *dir;
	int json;
} tier_args;

static const cli_opt tier_opts[] = {
	{ CLI_OPT_ARG, "ACTION", NULL, 1, "list or drop", CLI_FIELD(tier_args, action) },
	{ CLI_OPT_ARG, "JOB", NULL, 0, "drop: the job whose segments go", CLI_FIELD(tier_args, job) },
	{ CLI_OPT_VALUE, "dir", "DIR", 0, "the tier directory (default $CKPT_TIER_DIR, else /dev/shm/ckpt-<uid>)",
		CLI_FIELD(tier_args, dir) },
	{ CLI_OPT_SWITCH, "json", NULL, 0, "list: one JSON document", CLI_FIELD(tier_args, json) },
	{ CLI_OPT_END, NULL, NULL, 0, NULL, 0 }
};

static void print_list(const ckpt_tier_list *l, const char *dir, int json)
{
	size_t n = ckpt_tier_list_num_entries(l);
	if (json) {
		jw w;
		jw_init(&w, stdout);
		jw_object_begin(&w);
		jw_key(&w, "dir");
		jw_string(&w, dir);
		jw_key(&w, "steps");
		jw_array_begin(&w);
		for (size_t i = 0; i < n; i++) {
			const ckpt_tier_entry *e = ckpt_tier_list_entry(l, i);
			jw_object_begin(&w);
			jw_key(&w, "job");
			jw_string(&w, e->job);
			jw_key(&w, "step");
			jw_int(&w, e->step);
			jw_key(&w, "workers");
			jw_int(&w, e->num_workers);
			jw_key(&w, "present");
			jw_int(&w, e->num_present);
			jw_key(&w, "bytes");
			jw_uint(&w, e->bytes);
			jw_key(&w, "complete");
			jw_bool(&w, e->complete);
			jw_object_end(&w);
		}
		jw_array_end(&w);
		jw_object_end(&w);
		jw_end_line(&w);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const ckpt_tier_entry *e = ckpt_tier_list_entry(l, i);
		printf("%s\tstep %lld\t%d/%d workers\t%llu bytes\t%s\n", cli_vis(e->job), (long long)e->step,
			e->num_present, e->num_workers, (unsigned long long)e->bytes, e->complete ? "complete" : "incomplete");
	}
	printf("%zu step%s in %s\n", n, n == 1 ? "" : "s", cli_vis(dir));
}

static int cmd_tier(const cli_cmd *cmd, int argc, char **argv)
{
	tier_args args;
	memset(&args, 0, sizeof(args));
	int rc = cli_parse(cmd, argc, argv, &args);
	if (rc != CLI_EXIT_OK)
		return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
	int drop = strcmp(args.action, "drop") == 0;
	if (!drop && strcmp(args.action, "list") != 0)
		return cli_usage_error(cmd, "unknown action '%s' (expected list or drop)", args.action);
	if (drop && !args.job)
		return cli_usage_error(cmd, "drop needs the JOB whose segments go");
	if (!drop && args.job)
		return cli_usage_error(cmd, "list takes no JOB");
	char *dir = NULL;
	if (args.dir)
		dir = strdup(args.dir);
	else if (ckpt_tier_dir(&dir) == CKPT_OK) {
		char *d = strdup(dir);
		ckpt_free(dir);
		dir = d;
	}
	if (!dir)
		return cli_report(NULL, NULL, -1, "out of memory");
	if (drop) {
		rc = ckpt_tier_drop(dir, args.job) == CKPT_OK ? CLI_EXIT_OK : cli_report_last(dir, args.job);
		if (rc == CLI_EXIT_OK)
			printf("dropped job %s from %s\n", cli_vis(args.job), cli_vis(dir));
	} else {
		ckpt_tier_list *l = NULL;
		rc = ckpt_tier_scan(&l, dir) == CKPT_OK ? CLI_EXIT_OK : cli_report_last(dir, NULL);
		if (rc == CLI_EXIT_OK)
			print_list(l, dir, args.json);
		ckpt_tier_list_free(l);
	}
	free(dir);
	return rc;
}

const cli_cmd cli_cmd_tier = {
	"tier", cmd_tier, "List what this node's memory tier holds, or drop a job's segments",
	tier_opts,
	"`ckpt tier list` prints one line per step a job holds in the memory tier\n"
	"directory: job, step, segments present of the workers that saved it, bytes,\n"
	"complete or not (--json: one document). `ckpt tier drop JOB` removes the\n"
	"job's segments, those of a save in progress included: run it only when the\n"
	"job is not running."
};

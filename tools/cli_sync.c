/*
 * `--sync-on-read PATTERN=AGG[,PATTERN=AGG...]` (inspect, restore): the
 * caller's word on which stored variables are sync-on-read (metrics), where
 * the file does not record it. AGG is sum, mean or first
 * (ONLY_FIRST_REPLICA); PATTERN is an fnmatch(3) glob on the stored key or
 * its object path (ckpt_sync_rule in reader.h). The split is at the last
 * '=' of each comma-separated item, so patterns may hold '='.
 */
#include <stdlib.h>
#include <string.h>
#include "cli.h"

static int parse_agg(const char *s, size_t n, ckpt_aggregation *out)
{
	if (n == 3 && memcmp(s, "sum", 3) == 0)
		*out = CKPT_AGG_SUM;
	else if (n == 4 && memcmp(s, "mean", 4) == 0)
		*out = CKPT_AGG_MEAN;
	else if (n == 5 && memcmp(s, "first", 5) == 0)
		*out = CKPT_AGG_ONLY_FIRST_REPLICA;
	else
		return 0;
	return 1;
}

int cli_parse_sync_rules(const cli_cmd *cmd, const char *spec, cli_sync_rules *out)
{
	size_t cap = 1;
	const char *p;

	memset(out, 0, sizeof(*out));
	if (!spec)
		return CLI_EXIT_OK;
	for (p = spec; *p; p++)
		cap += *p == ',';
	out->text = malloc(strlen(spec) + 1);
	out->rules = calloc(cap, sizeof(*out->rules));
	if (!out->text || !out->rules) {
		cli_sync_rules_free(out);
		return cli_usage_error(cmd, "out of memory");
	}
	strcpy(out->text, spec);
	for (char *item = out->text, *next; item; item = next) {
		char *eq;
		ckpt_aggregation agg;

		next = strchr(item, ',');
		if (next)
			*next++ = '\0';
		eq = strrchr(item, '=');
		if (!eq || eq == item || !parse_agg(eq + 1, strlen(eq + 1), &agg)) {
			cli_usage_error(cmd, "--sync-on-read wants PATTERN=sum|mean|first[,...], got '%s'", item);
			cli_sync_rules_free(out);
			return CLI_EXIT_USAGE;
		}
		*eq = '\0';
		out->rules[out->n].pattern = item;
		out->rules[out->n].sync = CKPT_SYNC_ON_READ;
		out->rules[out->n].aggregation = agg;
		out->n++;
	}
	return CLI_EXIT_OK;
}

void cli_sync_rules_free(cli_sync_rules *r)
{
	free(r->rules);
	free(r->text);
	memset(r, 0, sizeof(*r));
}

const char *cli_sync_name(ckpt_synchronization s)
{
	switch (s) {
	case CKPT_SYNC_ON_READ: return "on_read";
	case CKPT_SYNC_ON_WRITE: return "on_write";
	default: return "auto";
	}
}

const char *cli_aggregation_name(ckpt_aggregation a)
{
	switch (a) {
	case CKPT_AGG_SUM: return "sum";
	case CKPT_AGG_MEAN: return "mean";
	case CKPT_AGG_ONLY_FIRST_REPLICA: return "only_first_replica";
	default: return "none";
	}
}

const char *cli_sync_source_name(int source)
{
	return source == CKPT_SYNC_SOURCE_SAVED_MODEL ? "saved_model" : source == CKPT_SYNC_SOURCE_RULE ? "rule"
		: "none";
}

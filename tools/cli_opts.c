/*
 * Option parsing for `ckpt` subcommands, driven by each command's opts[]
 * table (libgit2 src/cli/opt.c in miniature): long options with and
 * without values (`--atol X`, `--atol=X`), positionals in table order,
 * `--` to end options, `-h`/`--help` everywhere. The same table produces
 * the usage line and the --help text.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

#define CLI_MAX_OPTS 32

static int opt_count(const cli_cmd *cmd)
{
	int n = 0;
	while (cmd->opts && cmd->opts[n].type != CLI_OPT_END)
		n++;
	return n;
}

void cli_print_usage(FILE *f, const cli_cmd *cmd)
{
	const cli_opt *o;

	fprintf(f, "usage: ckpt %s", cmd->name);
	for (o = cmd->opts; o && o->type != CLI_OPT_END; o++) {
		if (o->type != CLI_OPT_ARG)
			continue;
		fprintf(f, o->required ? " %s" : " [%s]", o->name);
	}
	for (o = cmd->opts; o && o->type != CLI_OPT_END; o++) {
		const char *l = o->required ? "" : "[", *r = o->required ? "" : "]";
		if (o->type == CLI_OPT_SWITCH)
			fprintf(f, " %s--%s%s", l, o->name, r);
		else if (o->type == CLI_OPT_VALUE)
			fprintf(f, " %s--%s %s%s", l, o->name, o->value_name ? o->value_name : "VALUE", r);
	}
	fputc('\n', f);
}

void cli_print_help(FILE *f, const cli_cmd *cmd)
{
	const cli_opt *o;
	char left[96];

	cli_print_usage(f, cmd);
	fprintf(f, "\n%s\n", cmd->summary);
	if (cmd->description)
		fprintf(f, "\n%s\n", cmd->description);
	fprintf(f, "\n");
	for (o = cmd->opts; o && o->type != CLI_OPT_END; o++) {
		if (o->type == CLI_OPT_ARG)
			snprintf(left, sizeof(left), "%s", o->name);
		else if (o->type == CLI_OPT_SWITCH)
			snprintf(left, sizeof(left), "--%s", o->name);
		else
			snprintf(left, sizeof(left), "--%s %s", o->name, o->value_name ? o->value_name : "VALUE");
		if (strlen(left) > 22)
			fprintf(f, "  %s\n  %-22s %s\n", left, "", o->help ? o->help : "");
		else
			fprintf(f, "  %-22s %s\n", left, o->help ? o->help : "");
	}
	fprintf(f, "  %-22s %s\n", "-h, --help", "show this help");
	fprintf(f, "\nExit status: 0 OK, 1 error, 2 usage error.\n");
}

int cli_usage_error(const cli_cmd *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ckpt %s: ", cmd->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	cli_print_usage(stderr, cmd);
	fprintf(stderr, "Try 'ckpt %s --help' for more information.\n", cmd->name);
	return CLI_EXIT_USAGE;
}

static int find_long(const cli_cmd *cmd, const char *name, size_t len)
{
	int i;

	for (i = 0; cmd->opts && cmd->opts[i].type != CLI_OPT_END; i++) {
		const cli_opt *o = &cmd->opts[i];
		if (o->type == CLI_OPT_ARG)
			continue;
		if (strlen(o->name) == len && memcmp(o->name, name, len) == 0)
			return i;
	}
	return -1;
}

/* Store a given option into its field of the command's args struct. */
static void bind_value(const cli_opt *o, void *args, const char *value)
{
	char *field = (char *)args + o->field;

	if (o->type == CLI_OPT_SWITCH)
		*(int *)(void *)field = 1;
	else
		*(const char **)(void *)field = value;
}

int cli_parse(const cli_cmd *cmd, int argc, char **argv, void *args)
{
	int nopts = opt_count(cmd), i, next_pos = 0, only_args = 0;
	unsigned char given[CLI_MAX_OPTS];

	memset(given, 0, sizeof(given));
	if (nopts > CLI_MAX_OPTS)
		return cli_usage_error(cmd, "internal: too many options in table");
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!only_args && strcmp(a, "--") == 0) {
			only_args = 1;
			continue;
		}
		if (!only_args && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
			cli_print_help(stdout, cmd);
			return CLI_PARSE_HELP;
		}
		if (!only_args && a[0] == '-' && a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			int k = find_long(cmd, name, len);

			if (k < 0)
				return cli_usage_error(cmd, "unknown option '--%.*s'", (int)len, name);
			if (cmd->opts[k].type == CLI_OPT_SWITCH) {
				if (eq)
					return cli_usage_error(cmd, "option '--%s' takes no value", cmd->opts[k].name);
				bind_value(&cmd->opts[k], args, NULL);
			} else if (eq) {
				bind_value(&cmd->opts[k], args, eq + 1);
			} else {
				if (i + 1 >= argc)
					return cli_usage_error(cmd, "option '--%s' needs a value (%s)",
						cmd->opts[k].name, cmd->opts[k].value_name ? cmd->opts[k].value_name : "VALUE");
				bind_value(&cmd->opts[k], args, argv[++i]);
			}
			given[k] = 1;
			continue;
		}
		if (!only_args && a[0] == '-' && a[1] != '\0')
			return cli_usage_error(cmd, "unknown option '%s'", a);
		/* a positional: the next CLI_OPT_ARG slot in table order */
		{
			int k, seen = 0, placed = 0;
			for (k = 0; k < nopts; k++) {
				if (cmd->opts[k].type != CLI_OPT_ARG)
					continue;
				if (seen++ == next_pos) {
					bind_value(&cmd->opts[k], args, a);
					given[k] = placed = 1;
					break;
				}
			}
			if (!placed)
				return cli_usage_error(cmd, "unexpected argument '%s'", a);
			next_pos++;
		}
	}
	for (i = 0; i < nopts; i++) {
		const cli_opt *o = &cmd->opts[i];
		if (!o->required || given[i])
			continue;
		if (o->type == CLI_OPT_ARG)
			return cli_usage_error(cmd, "missing argument %s", o->name);
		return cli_usage_error(cmd, "missing option --%s", o->name);
	}
	return CLI_EXIT_OK;
}

int cli_parse_double(const cli_cmd *cmd, const char *opt, const char *s, double *out)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v) || v < 0)
		return cli_usage_error(cmd, "--%s wants a non-negative number, got '%s'", opt, s);
	*out = v;
	return CLI_EXIT_OK;
}

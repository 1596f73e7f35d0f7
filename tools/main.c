/*
 * `ckpt`: inspect, verify, compare and convert checkpoints.
 *
 * The command table follows libgit2's src/cli/main.c: {name, fn, summary}
 * entries; each command parses its own arguments from its opts[] table.
 */
#include <string.h>
#include "cli.h"

static const cli_cmd *const commands[] = {
	&cli_cmd_inspect,
	&cli_cmd_verify,
	&cli_cmd_diff,
	&cli_cmd_restore,
	&cli_cmd_convert,
	&cli_cmd_s3,
	&cli_cmd_tier,
	NULL
};

static const cli_cmd *find_command(const char *name)
{
	size_t i;

	for (i = 0; commands[i]; i++)
		if (strcmp(commands[i]->name, name) == 0)
			return commands[i];
	return NULL;
}

static void print_main_usage(FILE *f)
{
	fprintf(f, "usage: ckpt [--version] [--help] <command> [<args>]\n");
}

static void print_main_help(void)
{
	size_t i;

	print_main_usage(stdout);
	printf("\nInspect, verify, compare and convert TensorFlow and Keras checkpoints.\n\n"
		"Commands:\n");
	for (i = 0; commands[i]; i++)
		printf("  %-10s %s\n", commands[i]->name, commands[i]->summary);
	printf("  %-10s %s\n", "help", "Show help for a command");
	printf("\nSee 'ckpt help <command>' or 'ckpt <command> --help' for details.\n"
		"Exit status: 0 OK, 1 error, 2 usage error.\n");
}

static int main_usage_error(const char *fmt, const char *arg)
{
	fputs("ckpt: ", stderr);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	print_main_usage(stderr);
	fprintf(stderr, "Try 'ckpt --help' for more information.\n");
	return CLI_EXIT_USAGE;
}

/* Run the command line; what it printed is checked by main. */
static int run(int argc, char **argv)
{
	const cli_cmd *cmd;
	const char *name;

	if (argc < 2)
		return main_usage_error("%s", "no command given");
	name = argv[1];
	if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
		print_main_help();
		return CLI_EXIT_OK;
	}
	if (strcmp(name, "--version") == 0) {
		int v = ckpt_version_number();
		printf("ckpt %s (libckpt %d.%d.%d)\n", CKPT_VERSION_STRING,
			v / 1000000, v / 1000 % 1000, v % 1000);
		return CLI_EXIT_OK;
	}
	if (strcmp(name, "help") == 0) {
		if (argc < 3) {
			print_main_help();
			return CLI_EXIT_OK;
		}
		if (argc > 3)
			return main_usage_error("help: unexpected argument '%s'", argv[3]);
		if (strcmp(argv[2], "help") == 0) {
			print_main_help();
			return CLI_EXIT_OK;
		}
		cmd = find_command(argv[2]);
		if (!cmd)
			return main_usage_error("help: '%s' is not a ckpt command", argv[2]);
		cli_print_help(stdout, cmd);
		return CLI_EXIT_OK;
	}
	if (name[0] == '-')
		return main_usage_error("unknown option '%s'", name);
	cmd = find_command(name);
	if (!cmd)
		return main_usage_error("'%s' is not a ckpt command", name);
	return cmd->fn(cmd, argc - 1, argv + 1);
}

int main(int argc, char **argv)
{
	int rc = run(argc, argv);
	/* output that did not reach its reader is an error (full disk, closed pipe), help and --version too */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "ckpt: error writing to standard output\n");
		return CLI_EXIT_ERROR;
	}
	return rc;
}

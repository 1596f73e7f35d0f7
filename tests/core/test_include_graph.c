/*
 * The core depends one way: scripts/include_graph.py finds the cycles among
 * libckpt/'s files (what includes what, which .c calls which file's
 * functions) and fails on any not in scripts/include_graph.known, a list
 * that only shrinks. The script itself is checked on a made-up tree that
 * has exactly one cycle of each kind.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "test_support.h"

#define SCRIPT CKPT_SOURCE_DIR "/scripts/include_graph.py"

/* Runs `cmd`, its output into out (NUL-terminated); returns its exit status. */
static int run(const char *cmd, char *out, size_t cap)
{
	FILE *p = popen(cmd, "r");
	cr_assert(p != NULL, "popen %s", cmd);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	cr_assert(WIFEXITED(st), "%s did not exit", cmd);
	return WEXITSTATUS(st);
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	cr_assert(f != NULL, "open %s", p);
	cr_assert(fputs(text, f) >= 0);
	cr_assert(fclose(f) == 0);
}

Test(include_graph, libckpt_has_no_new_cycle)
{
	static char out[1 << 16];
	int rc = run(TS_PYTHON " " SCRIPT " --check --known " CKPT_SOURCE_DIR "/scripts/include_graph.known "
		CKPT_SOURCE_DIR "/libckpt 2>&1", out, sizeof(out));
	cr_assert(strstr(out, "include cycles: ") != NULL && strstr(out, "call cycles: ") != NULL, "%s", out);
	cr_assert_eq(rc, 0, "a dependency cycle not in scripts/include_graph.known:\n%s", out);
}

Test(include_graph, finds_a_call_and_an_include_cycle)
{
	char dir[] = "/tmp/ckpt_graph_XXXXXX";
	cr_assert(mkdtemp(dir) != NULL);
	write_file(dir, "a.h", "#include \"b.h\"\nint a_fn(void);\n");
	write_file(dir, "b.h", "#include \"a.h\"\nint b_fn(void);\n");
	write_file(dir, "a.c", "#include \"a.h\"\n/* b_fn() in a comment is no call */\nint a_fn(void)\n{\n\treturn b_fn();\n}\n");
	write_file(dir, "b.c", "#include \"b.h\"\nstatic int own(void) { return 1; }\nint b_fn(void)\n{\n\treturn own() + a_fn();\n}\n");
	write_file(dir, "c.c", "#include \"a.h\"\nint c_fn(void)\n{\n\treturn a_fn();\n}\n");
	char cmd[1024];
	static char out[1 << 14];
	snprintf(cmd, sizeof(cmd), TS_PYTHON " " SCRIPT " --check %s 2>&1", dir);
	int rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "cycle include: a.h -> b.h -> a.h") != NULL, "%s", out);
	cr_expect(strstr(out, "cycle call: a.c -> b.c -> a.c") != NULL, "%s", out);
	cr_expect(strstr(out, "include cycles: 1") != NULL, "%s", out);
	cr_expect(strstr(out, "call cycles: 1") != NULL, "%s", out);

	/* with the one-way edge only (c.c -> a.c), nothing is found */
	write_file(dir, "b.c", "int b_fn(void)\n{\n\treturn 2;\n}\n");
	write_file(dir, "b.h", "int b_fn(void);\n");
	rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "cycles: 0, not in the known list: 0") != NULL, "%s", out);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

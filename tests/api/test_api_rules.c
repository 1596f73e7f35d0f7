/*
 * The public API keeps the rules ckpt/common.h states: scripts/api_rules.py
 * parses every CKPT_API declaration of the public headers with its doc
 * comment and fails on a violation not in scripts/api_rules.known (the
 * signature and naming changes pending for 1.0, each with its reason). The
 * script itself is checked on a made-up header breaking each rule once.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "test_support.h"

#define SCRIPT CKPT_SOURCE_DIR "/scripts/api_rules.py"

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

Test(api_rules, public_headers_have_no_new_violation)
{
	static char out[1 << 18];
	int rc = run("cd " CKPT_SOURCE_DIR " && " TS_PYTHON " " SCRIPT " --check --known scripts/api_rules.known "
		"libckpt/include libckpt_mpi/include libckpt_cuda/include 2>&1", out, sizeof(out));
	/* the parser found the API (a broken parser would pass on nothing) */
	cr_assert(strstr(out, "functions: 2") != NULL, "%s", out);
	cr_assert(strstr(out, "rule doc: ") != NULL && strstr(out, "rule naming: ") != NULL, "%s", out);
	cr_assert_eq(rc, 0, "a violation of the API rules not in scripts/api_rules.known (or a known one "
		"now fixed, to remove from it):\n%s", out);
}

Test(api_rules, finds_each_rule_once)
{
	char dir[] = "/tmp/ckpt_api_rules_XXXXXX";
	cr_assert(mkdtemp(dir) != NULL);
	char path[512];
	snprintf(path, sizeof(path), "%s/x.h", dir);
	FILE *f = fopen(path, "w");
	cr_assert(f != NULL);
	cr_assert(fputs(
		"#define CKPT_API\n"
		"CKPT_API void ckpt_x_undocumented(void);\n"
		"/** Counts. */\n"
		"CKPT_API size_t ckpt_x_count(const ckpt_x *x);\n"
		"/** Counts. @return the number */\n"
		"CKPT_API size_t ckpt_x_num_parts(const ckpt_x *x);\n"
		"/** Counts. @return the number */\n"
		"CKPT_API size_t ckpt_y_num_parts(const ckpt_y *y);\n"
		"/**\n * Make one.\n * @param[out] out the new x\n * @return CKPT_OK or a negative ckpt_status\n */\n"
		"CKPT_API int ckpt_x_new(ckpt_x **out, const char *name);\n"
		"/**\n * Read one.\n * @return CKPT_OK or a negative ckpt_status\n */\n"
		"CKPT_API int ckpt_x_read(const ckpt_x *x, ckpt_tensor **out);\n"
		"/**\n * Shared one.\n * @param[out] out borrowed: not to be freed\n * @return CKPT_OK\n */\n"
		"CKPT_API int ckpt_x_shared(ckpt_x **out);\n"
		"/** Frees the list. */\n"
		"CKPT_API void ckpt_x_free_list(char **names);\n", f) >= 0);
	cr_assert(fclose(f) == 0);
	char cmd[1024];
	static char out[1 << 14];
	snprintf(cmd, sizeof(cmd), TS_PYTHON " " SCRIPT " --check %s 2>&1", dir);
	int rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "functions: 8") != NULL, "%s", out);
	cr_expect(strstr(out, "rule doc: 1 violations") != NULL, "%s", out);
	cr_expect(strstr(out, "ckpt_x_undocumented has no doc comment") != NULL, "%s", out);
	cr_expect(strstr(out, "rule return: 1 violations") != NULL, "%s", out);
	cr_expect(strstr(out, "ckpt_x_count returns size_t without @return") != NULL, "%s", out);
	cr_expect(strstr(out, "rule out-doc: 1 violations") != NULL, "%s", out);
	cr_expect(strstr(out, "ckpt_x_read: output 'ckpt_tensor **out' lacks @param[out] out") != NULL, "%s", out);
	cr_expect(strstr(out, "rule out-first: 1 violations") != NULL, "%s", out);
	cr_expect(strstr(out, "ckpt_x_read: output out after input") != NULL, "%s", out);
	cr_expect(strstr(out, "rule out-owned: 1 violations") != NULL, "%s", out);
	cr_expect(strstr(out, "ckpt_x_shared: output out is borrowed, not caller-owned") != NULL, "%s", out);
	cr_expect(strstr(out, "rule naming: 1 violations") != NULL, "%s", out);
	cr_expect(strstr(out, "ckpt_x_count: count named '_count', most use 'num_'") != NULL, "%s", out);

	/* a known list naming every one of them passes; one naming a fixed one does not */
	char known[600];
	snprintf(known, sizeof(known), "%s/known", dir);
	f = fopen(known, "w");
	cr_assert(f != NULL);
	cr_assert(fputs("# test\ndoc ckpt_x_undocumented  # a\nreturn ckpt_x_count  # b\nout-doc ckpt_x_read  # c\n"
		"out-first ckpt_x_read  # d\nnaming ckpt_x_count  # e\nout-owned ckpt_x_shared  # f\n", f) >= 0);
	cr_assert(fclose(f) == 0);
	snprintf(cmd, sizeof(cmd), TS_PYTHON " " SCRIPT " --check --known %s %s 2>&1", known, dir);
	rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "violations: 6, not in the known list: 0") != NULL, "%s", out);
	f = fopen(known, "a");
	cr_assert(f != NULL);
	cr_assert(fputs("doc ckpt_x_new  # fixed already\n", f) >= 0);
	cr_assert(fclose(f) == 0);
	rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "known but fixed (remove from the list): doc ckpt_x_new") != NULL, "%s", out);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

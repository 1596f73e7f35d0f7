/*
 * The example code in the public headers compiles against today's API
 * (issue 34, point 7): users copy it, so it cannot be left to drift, as the
 * README's blocks cannot (tests/api/test_readme.c).
 *
 * Convention (also in ckpt/common.h): in a comment of a header under
 * libckpt/include/ckpt/, a block of lines indented four spaces after " * "
 * that follows a blank comment line (" *", or the opening "/" "*") is an
 * example (blank comment lines inside it included), and an example holding
 * a '(' is C. Each C example is compiled by itself, at file scope — so it
 * is written as whole functions (or declarations) whose parameters are what
 * it takes as given — after <stdint.h>, <stdio.h>, <stdlib.h>, <string.h>,
 * "ckpt/ckpt.h" and its own header, with the build's C compiler, -std=c99
 * -pedantic -Wall -Wextra -Werror -Wno-unused-function. It is compiled, not
 * linked: it has no main, and declares the trainer's functions it calls. A
 * block with no '(' (the checkpoint keys of ckpt/checkpoint.h) is prose.
 * New headers and blocks are picked up with no change here.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_support.h"

#ifndef CKPT_EXAMPLE_CFLAGS
#define CKPT_EXAMPLE_CFLAGS ""
#endif

typedef struct header_example {
	char header[64]; /* "ckpt/async.h", "ckpt/sys/vfs.h" */
	int line;        /* of its first code line */
	char *src;       /* the code, comment prefix removed */
} header_example;

#define MAX_EXAMPLES 64

static int is_code_line(const char *l, size_t n)
{
	return n >= 7 && strncmp(l, " *     ", 7) == 0;
}

static int is_blank_comment(const char *l, size_t n)
{
	while (n && (l[n - 1] == ' ' || l[n - 1] == '\r'))
		n--;
	return (n == 2 && strncmp(l, " *", 2) == 0) || (n == 2 && strncmp(l, "/*", 2) == 0) ||
		(n == 3 && strncmp(l, "/**", 3) == 0);
}

/* Every example of `rel` (relative to libckpt/include) appended to ex[*n]. */
static void extract_header(header_example *ex, int *n, const char *rel)
{
	char path[1024];
	size_t len;
	snprintf(path, sizeof(path), "%s/libckpt/include/%s", CKPT_SOURCE_DIR, rel);
	char *text = ts_read_file(path, &len);
	cr_assert_not_null(text, "cannot read %s", path);
	int lineno = 0, prev_blank = 0;
	header_example *cur = NULL;
	size_t cur_len = 0;
	int gap = 0; /* blank comment lines inside the block so far */
	for (char *l = text; l < text + len;) {
		char *nl = memchr(l, '\n', (size_t)(text + len - l));
		size_t ll = nl ? (size_t)(nl - l) : (size_t)(text + len - l);
		lineno++;
		if (is_code_line(l, ll) && (cur || prev_blank)) {
			if (!cur) {
				cr_assert_lt(*n, MAX_EXAMPLES, "more than %d header examples", MAX_EXAMPLES);
				cur = &ex[(*n)++];
				snprintf(cur->header, sizeof(cur->header), "%s", rel);
				cur->line = lineno;
				cur->src = calloc(1, len + 1);
				cur_len = 0;
			}
			for (; gap > 0; gap--)
				cur->src[cur_len++] = '\n';
			/* " * " and the four spaces of indentation */
			memcpy(cur->src + cur_len, l + 7, ll - 7);
			cur_len += ll - 7;
			cur->src[cur_len++] = '\n';
		} else if (cur && is_blank_comment(l, ll)) {
			gap++; /* the block goes on if code follows */
		} else {
			gap = 0;
			if (cur && !strchr(cur->src, '(')) { /* prose: checkpoint keys, say */
				free(cur->src);
				(*n)--;
			}
			cur = NULL;
		}
		prev_blank = is_blank_comment(l, ll);
		l += ll + 1;
	}
	if (cur && !strchr(cur->src, '(')) {
		free(cur->src);
		(*n)--;
	}
	free(text);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every public header, "ckpt/x.h" and "ckpt/sys/x.h", sorted. */
static int extract_all(header_example *ex)
{
	const char *dirs[] = { "ckpt", "ckpt/sys" };
	int n = 0;
	for (size_t d = 0; d < 2; d++) {
		char path[1024];
		snprintf(path, sizeof(path), "%s/libckpt/include/%s", CKPT_SOURCE_DIR, dirs[d]);
		DIR *dir = opendir(path);
		cr_assert_not_null(dir, "cannot list %s", path);
		char *names[128];
		size_t nn = 0;
		for (struct dirent *e; (e = readdir(dir));) {
			size_t l = strlen(e->d_name);
			if (l > 2 && strcmp(e->d_name + l - 2, ".h") == 0) {
				cr_assert_lt(nn, 128);
				names[nn] = malloc(strlen(dirs[d]) + l + 2);
				sprintf(names[nn++], "%s/%s", dirs[d], e->d_name);
			}
		}
		closedir(dir);
		qsort(names, nn, sizeof(names[0]), by_name);
		for (size_t i = 0; i < nn; i++) {
			extract_header(ex, &n, names[i]);
			free(names[i]);
		}
	}
	return n;
}

/* Compile and link example `e` in `dir`; on failure, the compiler's words in *why (malloc'ed). */
static int compile_example(const char *dir, int i, const header_example *e, char **why)
{
	char src[1024], exe[1024];
	snprintf(src, sizeof(src), "%s/example_%d.c", dir, i);
	snprintf(exe, sizeof(exe), "%s/example_%d.o", dir, i);
	size_t cap = strlen(e->src) + 1024;
	char *text = malloc(cap);
	/* #line: compiler messages point at the header's own lines */
	snprintf(text, cap, "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
		"#include \"ckpt/ckpt.h\"\n#include \"%s\"\n#line %d \"libckpt/include/%s\"\n%s", e->header, e->line,
		e->header, e->src);
	cr_assert_eq(ts_write_file(src, text, strlen(text)), 0);
	free(text);
	char cmd[8192];
	/* compiled, not linked: the examples have no main and call the trainer's own functions, which they
	 * declare; every library call has its prototype (an implicit declaration is an error) */
	snprintf(cmd, sizeof(cmd), "%s -std=c99 -pedantic -Wall -Wextra -Werror -Wno-unused-function %s -c "
		"-I%s/libckpt/include -o %s %s", CKPT_C_COMPILER, CKPT_EXAMPLE_CFLAGS, CKPT_SOURCE_DIR, exe, src);
	ts_run_result r;
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	int ok = r.status == 0;
	if (!ok) {
		*why = malloc(strlen(r.out) + strlen(r.err) + 2);
		sprintf(*why, "%s\n%s", r.out, r.err);
	}
	ts_run_free(&r);
	return ok;
}

Test(header_examples, every_c_example_in_a_public_header_compiles, .timeout = 240)
{
	static header_example ex[MAX_EXAMPLES];
	int n = extract_all(ex);
	/* the convention finds the examples that exist (async, checkpoint, host, memory, partitioned, ...) */
	cr_assert_geq(n, 10, "only %d examples found in the public headers", n);
	char *tmp = ts_tmpdir();
	int bad = 0;
	for (int i = 0; i < n; i++) {
		char *why = NULL;
		if (!compile_example(tmp, i, &ex[i], &why)) {
			/* report every stale example, not only the first */
			fprintf(stderr, "libckpt/include/%s:%d: example does not compile:\n%s\n", ex[i].header, ex[i].line, why);
			bad++;
		}
		free(why);
	}
	for (int i = 0; i < n; i++)
		free(ex[i].src);
	ts_rmtree(tmp);
	free(tmp);
	cr_assert_eq(bad, 0, "%d of %d header examples do not compile (messages above)", bad, n);
}

/* The convention keeps checkpoint keys as prose and takes indented @return continuations for none. */
Test(header_examples, extraction_finds_code_and_skips_prose)
{
	static header_example ex[MAX_EXAMPLES];
	int n = 0;
	extract_header(ex, &n, "ckpt/checkpoint.h");
	cr_assert_geq(n, 3, "ckpt/checkpoint.h: %d examples", n);
	for (int i = 0; i < n; i++) {
		cr_assert_null(strstr(ex[i].src, ".ATTRIBUTES/VARIABLE_VALUE\n"), "keys taken for code at line %d",
			ex[i].line);
		cr_assert_null(strstr(ex[i].src, "negative ckpt_status"), "an @return continuation taken for code at line %d",
			ex[i].line);
		free(ex[i].src);
	}
}

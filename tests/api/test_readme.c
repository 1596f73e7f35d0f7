/*
 * The README's C examples compile and run (issue 13, point 1), so they
 * cannot drift from the library.
 *
 * Convention (also at the top of README.md): every block fenced with
 * ```c is extracted. A block whose fence follows a line holding the HTML
 * comment `<!-- example: NAME -->` (blank lines between are allowed) is
 * appended to program NAME, blocks of one name concatenated in file order;
 * a block without one is a program by itself (named after its line). A
 * marker not followed by a ```c block is an error, so a typo cannot drop an
 * example silently. Each program is compiled with the C compiler of the
 * build, -std=c99 -pedantic -Wall -Wextra -Werror, against the public headers and
 * libckpt.so (plus the sanitizers in a sanitized build), then run twice in a
 * fresh empty directory — a first start, then a resume — and both runs must
 * exit 0. New blocks are picked up with no change here. `<!-- example: NAME
 * mpi -->` marks a multi-worker program: it is compiled through Open MPI's
 * mpicc (with the same compiler and flags) against libckpt_mpi too, and each
 * run is `mpirun -np 2`.
 *
 * The `trainer` program (README "Using libckpt in a trainer") is checked
 * further: the first run starts fresh, the second resumes from its latest
 * checkpoint, and 2 + 2 epochs end in the same checkpoint, entry for entry,
 * as one run of 4.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"
#include "checkpoint_compare.h"

#ifndef CKPT_EXAMPLE_CFLAGS
#define CKPT_EXAMPLE_CFLAGS ""
#endif

typedef struct program {
	char name[128];
	int mpi;          /* "<!-- example: NAME mpi -->": built with mpicc, run under mpirun -np 2 */
	char *src;
	size_t len, cap;
	int first_line;
} program;

typedef struct examples {
	program p[64];
	int n;
} examples;

static program *get_program(examples *ex, const char *name, int line)
{
	for (int i = 0; i < ex->n; i++)
		if (strcmp(ex->p[i].name, name) == 0)
			return &ex->p[i];
	cr_assert_lt(ex->n, 64, "README.md: more than 64 example programs");
	program *p = &ex->p[ex->n++];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->first_line = line;
	return p;
}

static void append(program *p, const char *s, size_t n)
{
	if (p->len + n + 1 > p->cap) {
		p->cap = (p->len + n + 1) * 2;
		p->src = realloc(p->src, p->cap);
		cr_assert_not_null(p->src);
	}
	memcpy(p->src + p->len, s, n);
	p->len += n;
	p->src[p->len] = '\0';
}

/* "<!-- example: NAME [mpi] -->" → NAME (letters, digits, '_') and *mpi, else 0. */
static int marker(const char *line, size_t n, char *name, size_t cap, int *mpi)
{
	const char *pre = "<!-- example:";
	while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
		n--;
	if (n < strlen(pre) + 4 || strncmp(line, pre, strlen(pre)) != 0 || strncmp(line + n - 3, "-->", 3) != 0)
		return 0;
	const char *b = line + strlen(pre), *e = line + n - 3;
	while (b < e && *b == ' ')
		b++;
	while (e > b && e[-1] == ' ')
		e--;
	*mpi = 0;
	if (e - b > 4 && strncmp(e - 4, " mpi", 4) == 0) {
		*mpi = 1;
		e -= 4;
	}
	cr_assert(e > b && (size_t)(e - b) < cap, "README.md: empty or long example name in %.*s", (int)n, line);
	for (const char *c = b; c < e; c++)
		cr_assert((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_',
			"README.md: example name '%.*s' may hold only letters, digits and '_'", (int)(e - b), b);
	memcpy(name, b, (size_t)(e - b));
	name[e - b] = '\0';
	return 1;
}

static void extract(examples *ex)
{
	size_t n;
	char *md = ts_read_file(CKPT_SOURCE_DIR "/README.md", &n);
	cr_assert_not_null(md, "cannot read README.md");
	memset(ex, 0, sizeof(*ex));
	char pending[128] = "";
	int pending_line = 0, lineno = 0, pending_mpi = 0;
	program *cur = NULL;
	for (char *line = md; line < md + n; ) {
		char *nl = memchr(line, '\n', (size_t)(md + n - line));
		size_t len = nl ? (size_t)(nl - line) : (size_t)(md + n - line);
		lineno++;
		if (cur) {
			if (len >= 3 && strncmp(line, "```", 3) == 0) {
				cur = NULL;
			} else {
				append(cur, line, len);
				append(cur, "\n", 1);
			}
		} else if (len >= 4 && strncmp(line, "```c", 4) == 0 &&
			   (len == 4 || line[4] == ' ' || line[4] == '\r')) {
			char name[128];
			if (pending[0]) {
				snprintf(name, sizeof(name), "%s", pending);
			} else {
				snprintf(name, sizeof(name), "readme_line_%d", lineno);
			}
			cur = get_program(ex, name, lineno);
			cur->mpi |= pending_mpi;
			pending_mpi = 0;
			char where[64];
			/* compiler messages point at README.md lines */
			snprintf(where, sizeof(where), "#line %d \"README.md\"\n", lineno + 1);
			append(cur, where, strlen(where));
			pending[0] = '\0';
		} else if (marker(line, len, pending, sizeof(pending), &pending_mpi)) {
			pending_line = lineno;
		} else if (len > 0 && pending[0]) {
			cr_assert_fail("README.md:%d: the example marker '%s' is not followed by a ```c block (line %d)",
				pending_line, pending, lineno);
		}
		line += len + 1;
	}
	cr_assert_null(cur, "README.md: a ```c block is not closed");
	cr_assert_eq(pending[0], '\0', "README.md:%d: marker '%s' at the end of the file", pending_line, pending);
	free(md);
}

/* Write, compile; returns the executable's path (malloc'ed). */
static char *build(const char *dir, const program *p)
{
	char *src = malloc(strlen(dir) + strlen(p->name) + 8), *exe = malloc(strlen(dir) + strlen(p->name) + 8);
	sprintf(src, "%s/%s.c", dir, p->name);
	sprintf(exe, "%s/%s", dir, p->name);
	cr_assert_eq(ts_write_file(src, p->src, p->len), 0);
	char *cmd = malloc(16384);
	/* the directory holding libckpt.so, for the rpath */
	char libdir[2048];
	snprintf(libdir, sizeof(libdir), "%s", CKPT_LIBRARY);
	char *slash = strrchr(libdir, '/');
	cr_assert_not_null(slash);
	*slash = '\0';
	if (p->mpi) {
#ifdef CKPT_MPICC
		char mpi_libdir[2048];
		snprintf(mpi_libdir, sizeof(mpi_libdir), "%s", CKPT_MPI_LIBRARY);
		*strrchr(mpi_libdir, '/') = '\0';
		/* Open MPI's wrapper around the build's compiler: its MPI flags, ours, and libckpt_mpi */
		snprintf(cmd, 16384, "OMPI_CC='%s' %s -std=c99 -pedantic -Wall -Wextra -Werror %s -I%s/libckpt/include "
			"-I%s/libckpt_mpi/include -o %s %s %s %s -Wl,-rpath,%s -Wl,-rpath,%s -lm", CKPT_C_COMPILER, CKPT_MPICC,
			CKPT_EXAMPLE_CFLAGS, CKPT_SOURCE_DIR, CKPT_SOURCE_DIR, exe, src, CKPT_MPI_LIBRARY, CKPT_LIBRARY, libdir,
			mpi_libdir);
#else
		cr_assert_fail("README.md example '%s' is a multi-worker program, but this build has no ckpt_mpi "
			"(install libopenmpi-dev)", p->name);
#endif
	} else {
		snprintf(cmd, 16384, "%s -std=c99 -pedantic -Wall -Wextra -Werror %s -I%s/libckpt/include -o %s %s %s "
			"-Wl,-rpath,%s -lm", CKPT_C_COMPILER, CKPT_EXAMPLE_CFLAGS, CKPT_SOURCE_DIR, exe, src, CKPT_LIBRARY,
			libdir);
	}
	ts_run_result r;
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "README.md example '%s' (from line %d) does not compile:\n%s\n%s\n(see the convention "
		"at the top of README.md)", p->name, p->first_line, r.out, r.err);
	ts_run_free(&r);
	free(cmd);
	free(src);
	return exe;
}

/* Run the shell command `exe args` (exe quoted by the caller) with `dir` as the working directory. */
static ts_run_result run_in(const char *dir, const char *exe, const char *args)
{
	char cmd[8192];
	ts_run_result r;
	snprintf(cmd, sizeof(cmd), "cd '%s' && %s %s", dir, exe, args);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	return r;
}

static void expect_ok(const ts_run_result *r, const char *name, const char *what)
{
	cr_assert_eq(r->status, 0, "README.md example '%s', %s: exit %d\nstdout:\n%s\nstderr:\n%s", name, what, r->status,
		r->out, r->err);
}

Test(readme, every_c_example_compiles_and_runs_twice, .timeout = 240)
{
	examples ex;
	extract(&ex);
	cr_assert_gt(ex.n, 0, "README.md has no C examples");
	char *tmp = ts_tmpdir();
	for (int i = 0; i < ex.n; i++) {
		char *exe = build(tmp, &ex.p[i]);
		char *wd = malloc(strlen(tmp) + strlen(ex.p[i].name) + 8);
		sprintf(wd, "%s/run-%s", tmp, ex.p[i].name);
		char mk[8192];
		ts_run_result r;
		snprintf(mk, sizeof(mk), "mkdir -p '%s'", wd);
		cr_assert_eq(ts_run_sh(&r, mk), 0);
		ts_run_free(&r);
		char launch[8192];
#ifdef CKPT_MPICC
		if (ex.p[i].mpi)
			/* Open MPI's own leaks are suppressed by library, which needs whole stacks (tests/lsan.supp) */
			snprintf(launch, sizeof(launch), "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0:"
				"malloc_context_size=30\" %s --allow-run-as-root --oversubscribe -np 2 '%s'", CKPT_MPIRUN, exe);
		else
#endif
			snprintf(launch, sizeof(launch), "'%s'", exe);
		r = run_in(wd, launch, "");
		expect_ok(&r, ex.p[i].name, "first start");
		ts_run_free(&r);
		r = run_in(wd, launch, "");
		expect_ok(&r, ex.p[i].name, "second run (resume)");
		ts_run_free(&r);
		free(wd);
		free(exe);
		free(ex.p[i].src);
	}
	ts_rmtree(tmp);
	free(tmp);
}

static program *find(examples *ex, const char *name)
{
	for (int i = 0; i < ex->n; i++)
		if (strcmp(ex->p[i].name, name) == 0)
			return &ex->p[i];
	cr_assert_fail("README.md has no example '%s'", name);
	return NULL;
}

static int64_t stored_step(const char *path)
{
	ckpt_reader *r;
	ckpt_tensor *t;
	size_t i;
	int64_t v;
	cr_assert_eq(ckpt_reader_open(&r, path, NULL), CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
	cr_assert_eq(ckpt_reader_find(&i, r, "step/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK);
	memcpy(&v, t->data, sizeof(v));
	ckpt_tensor_free(t);
	ckpt_reader_free(r);
	return v;
}

Test(readme, trainer_starts_fresh_then_resumes_bit_for_bit, .timeout = 240)
{
	examples ex;
	extract(&ex);
	char *tmp = ts_tmpdir(), *resumed = ts_join(tmp, "resumed"), *straight = ts_join(tmp, "straight"), mk[8192];
	char *built = build(tmp, find(&ex, "trainer")), *exe = malloc(strlen(built) + 3);
	ts_run_result r;
	sprintf(exe, "'%s'", built);
	free(built);
	snprintf(mk, sizeof(mk), "mkdir -p '%s' '%s'", resumed, straight);
	cr_assert_eq(ts_run_sh(&r, mk), 0);
	ts_run_free(&r);

	r = run_in(resumed, exe, "");
	expect_ok(&r, "trainer", "first start");
	cr_assert(strstr(r.out, "fresh start\n"), "%s", r.out);
	cr_assert(strstr(r.out, "step 16: mae"), "%s", r.out);
	ts_run_free(&r);
	r = run_in(resumed, exe, "");
	expect_ok(&r, "trainer", "resume");
	cr_assert(strstr(r.out, "resumed from run/ckpts/ckpt-2 at step 16\n"), "%s", r.out);
	cr_assert(strstr(r.out, "step 32: mae"), "%s", r.out);
	ts_run_free(&r);
	r = run_in(straight, exe, "4");
	expect_ok(&r, "trainer", "4 epochs straight");
	cr_assert(strstr(r.out, "fresh start\n"), "%s", r.out);
	ts_run_free(&r);

	char *a = ts_join(resumed, "run/ckpts/ckpt-4"), *b = ts_join(straight, "run/ckpts/ckpt-4");
	cr_assert_eq(stored_step(a), 32);
	ts_assert_same_checkpoint(a, b);
	/* the comparison has teeth: epoch 3 differs from epoch 4 */
	char *a3 = ts_join(resumed, "run/ckpts/ckpt-3");
	ckpt_reader *r3;
	cr_assert_eq(ckpt_reader_open(&r3, a3, NULL), CKPT_OK);
	ckpt_reader_free(r3);
	cr_assert_eq(stored_step(a3), 24);
	for (int i = 0; i < ex.n; i++)
		free(ex.p[i].src);
	ts_rmtree(tmp);
	free(a), free(b), free(a3), free(exe), free(resumed), free(straight), free(tmp);
}

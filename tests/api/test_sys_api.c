/*
 * The line between the public API and the library's internals: libckpt.so
 * exports no internal (`ckpt__`) symbol and nothing that no installed header
 * declares, ckpt_mpi needs none, and the extender API of ckpt/sys/ refuses
 * what an extender can get wrong (tests/scripts/sys_consumer.c, run by the
 * install suite, uses it as an extender would).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "ckpt/sys/alloc.h"
#include "ckpt/sys/bundle_part.h"
#include "ckpt/sys/error.h"
#include "ckpt/sys/strategy.h"
#include "test_support.h"

#define INCLUDE_DIR CKPT_SOURCE_DIR "/libckpt/include/ckpt"

/* The names of `nm -D` on `lib` with `flags` (one per line, "T name" or "U name"). */
static char *nm_symbols(const char *flags, const char *lib)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "nm -D %s '%s' | awk '{ print $(NF - 1), $NF }'", flags, lib);
	ts_run_result r;
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "%s failed: %s", cmd, r.err);
	free(r.err);
	return r.out;
}

/* Every `ckpt__` name in nm's output, one per line; empty when none. */
static char *internal_names(const char *symbols)
{
	size_t n = strlen(symbols);
	char *found = calloc(1, n + 1);
	cr_assert_not_null(found);
	for (const char *p = symbols; (p = strstr(p, "ckpt__")) != NULL;) {
		size_t len = strcspn(p, "\n");
		if (p == symbols || p[-1] == ' ') {
			strncat(found, p, len);
			strcat(found, "\n");
		}
		p += len;
	}
	return found;
}

Test(sys_api, libckpt_exports_no_internal_symbol)
{
	char *syms = nm_symbols("--defined-only", CKPT_LIBRARY);
	char *internal = internal_names(syms);
	cr_expect_str_empty(internal, "libckpt.so exports internal symbols (declare them without CKPT_API, or "
		"make them public in ckpt/ or ckpt/sys/):\n%s", internal);
	/* the extender API is exported: the check above looked at a real symbol table */
	cr_expect_not_null(strstr(syms, " ckpt_strategy_custom_new\n"), "%s", syms);
	cr_expect_not_null(strstr(syms, " ckpt_bundle_part_open\n"), "%s", syms);
	cr_expect_not_null(strstr(syms, " ckpt_error_set\n"), "%s", syms);
	cr_expect_not_null(strstr(syms, " ckpt_malloc\n"), "%s", syms);
	free(internal);
	free(syms);
}

/* Concatenation of every installed header (ckpt/ and ckpt/sys/). */
static char *installed_headers(void)
{
	static const char *const dirs[] = { INCLUDE_DIR, INCLUDE_DIR "/sys" };
	size_t len = 0;
	char *all = calloc(1, 1);
	cr_assert_not_null(all);
	for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
		DIR *dir = opendir(dirs[d]);
		cr_assert_not_null(dir, "%s", dirs[d]);
		struct dirent *e;
		while ((e = readdir(dir)) != NULL) {
			size_t nl = strlen(e->d_name);
			if (nl < 3 || strcmp(e->d_name + nl - 2, ".h") != 0)
				continue;
			char *path = ts_join(dirs[d], e->d_name);
			char *text = ts_read_file(path, NULL);
			cr_assert_not_null(text, "%s", path);
			size_t tl = strlen(text);
			all = realloc(all, len + tl + 1);
			cr_assert_not_null(all);
			memcpy(all + len, text, tl + 1);
			len += tl;
			free(text);
			free(path);
		}
		closedir(dir);
	}
	return all;
}

Test(sys_api, every_exported_function_is_declared_in_an_installed_header)
{
	char *syms = nm_symbols("--defined-only", CKPT_LIBRARY);
	char *headers = installed_headers();
	int functions = 0;
	for (char *line = strtok(syms, "\n"); line; line = strtok(NULL, "\n")) {
		if (strncmp(line, "T ", 2) != 0)
			continue; /* data: OpenMP's critical-section locks */
		char decl[512];
		snprintf(decl, sizeof(decl), " %s(", line + 2);
		char decl_ptr[512];
		snprintf(decl_ptr, sizeof(decl_ptr), "*%s(", line + 2);
		cr_expect(strstr(headers, decl) || strstr(headers, decl_ptr),
			"libckpt.so exports %s, which no header of libckpt/include/ckpt declares", line + 2);
		functions++;
	}
	cr_expect_gt(functions, 200, "only %d exported functions", functions);
	free(headers);
	free(syms);
}

#ifdef CKPT_TEST_MPI
Test(sys_api, ckpt_mpi_needs_no_internal_symbol)
{
	char *syms = nm_symbols("--undefined-only", CKPT_MPI_LIBRARY);
	char *internal = internal_names(syms);
	cr_expect_str_empty(internal, "libckpt_mpi.so uses internal symbols of libckpt:\n%s", internal);
	cr_expect_not_null(strstr(syms, " ckpt_strategy_custom_new\n"), "%s", syms);
	free(internal);
	free(syms);
}
#endif

static const ckpt_strategy_methods in_process = {
	.version = CKPT_STRATEGY_METHODS_VERSION, .name = "in_process", .kind = CKPT_STRATEGY_MIRRORED,
};

static int agree(ckpt_strategy *s, int rc)
{
	(void)s;
	return rc;
}

static int on_create(ckpt_strategy *s, ckpt_variable *v, int filled)
{
	(void)s, (void)v, (void)filled;
	return CKPT_OK;
}

Test(sys_api, custom_strategy_refuses_what_an_extender_gets_wrong)
{
	ckpt_strategy *s = (ckpt_strategy *)&s;
	cr_expect_eq(ckpt_strategy_custom_new(NULL, &in_process, 1, 1, 0, NULL, "x"), CKPT_EINVAL);
	cr_expect_eq(ckpt_strategy_custom_new(&s, NULL, 1, 1, 0, NULL, "x"), CKPT_EINVAL);
	cr_expect_null(s, "*out is NULL on failure");
	cr_expect_eq(ckpt_strategy_custom_new(&s, &in_process, 1, 1, 0, NULL, NULL), CKPT_EINVAL);

	ckpt_strategy_methods old = in_process;
	old.version = 0;
	cr_expect_eq(ckpt_strategy_custom_new(&s, &old, 1, 1, 0, NULL, "x"), CKPT_EINVAL);
	cr_expect_not_null(strstr(ckpt_error_last()->message, "version 0"), "%s", ckpt_error_last()->message);
	ckpt_strategy_methods future = in_process;
	future.version = CKPT_STRATEGY_METHODS_VERSION + 1;
	cr_expect_eq(ckpt_strategy_custom_new(&s, &future, 1, 1, 0, NULL, "x"), CKPT_EINVAL);

	/* a cross-process table is complete, an in-process one has no cross-process method */
	ckpt_strategy_methods half = in_process;
	half.on_create = on_create;
	half.agree = agree;
	cr_expect_eq(ckpt_strategy_custom_new(&s, &half, 2, 1, 0, NULL, "x"), CKPT_EINVAL);
	cr_expect_not_null(strstr(ckpt_error_last()->message, "all_reduce"), "%s", ckpt_error_last()->message);
	ckpt_strategy_methods stray = in_process;
	stray.agree = agree;
	cr_expect_eq(ckpt_strategy_custom_new(&s, &stray, 1, 1, 0, NULL, "x"), CKPT_EINVAL);
	cr_expect_not_null(strstr(ckpt_error_last()->message, "on_create"), "%s", ckpt_error_last()->message);

	/* replica counts that do not fit */
	cr_expect_eq(ckpt_strategy_custom_new(&s, &in_process, 0, 0, 0, NULL, "x"), CKPT_EINVAL);
	cr_expect_eq(ckpt_strategy_custom_new(&s, &in_process, 4, 2, 3, NULL, "x"), CKPT_EINVAL);
	cr_expect_eq(ckpt_strategy_custom_new(&s, &in_process, 2, 3, 0, NULL, "x"), CKPT_EINVAL);
	cr_expect_eq(ckpt_strategy_custom_new(&s, &in_process, 1 << 20, 1, 0, NULL, "x"), CKPT_ELIMIT);
	/* in-process: every replica is local */
	cr_expect_eq(ckpt_strategy_custom_new(&s, &in_process, 4, 2, 2, NULL, "x"), CKPT_EINVAL);
	cr_expect_null(s);

	cr_assert_eq(ckpt_strategy_custom_new(&s, &in_process, 2, 2, 0, &old, "Custom"), CKPT_OK,
		"%s", ckpt_error_last()->message);
	cr_expect_eq(ckpt_strategy_method_table(s), &in_process);
	cr_expect_eq(ckpt_strategy_impl(s), &old);
	cr_expect_not_null(strstr(ckpt_strategy_describe(s), "Custom#"), "%s", ckpt_strategy_describe(s));
	ckpt_strategy_free(s);
	/* the library's own strategies */
	cr_expect_str_eq(ckpt_strategy_method_table(NULL)->name, "default");
	cr_expect_null(ckpt_strategy_impl(NULL));
	cr_expect_null(ckpt_variable_local_copy(NULL, 0));
	ckpt_variable_fill_from_primary(NULL);
}

Test(sys_api, bundle_part_refuses_null_arguments)
{
	ckpt_bundle_part *p = (ckpt_bundle_part *)&p;
	ckpt_vfs *vfs = ckpt_vfs_default();
	cr_expect_eq(ckpt_bundle_part_open(NULL, vfs, "/tmp/x", 0, 1, 1), CKPT_EINVAL);
	cr_expect_eq(ckpt_bundle_part_open(&p, NULL, "/tmp/x", 0, 1, 1), CKPT_EINVAL);
	cr_expect_null(p);
	cr_expect_eq(ckpt_bundle_part_open(&p, vfs, "/tmp/x", 1, 1, 1), CKPT_EINVAL);
	cr_expect_eq(ckpt_bundle_part_add(NULL, "k", NULL), CKPT_EINVAL);
	void *entries = &entries;
	size_t n = 1;
	cr_expect_eq(ckpt_bundle_part_finish(&entries, &n, NULL, 0), CKPT_EINVAL);
	cr_expect_eq(ckpt_bundle_merge_commit(vfs, "/tmp/x", 0, 1, NULL, NULL, 0), CKPT_EINVAL);
	ckpt_bundle_part_free(NULL);
	ckpt_bundle_part_discard(NULL, NULL, 0, 1, 1);
}

Test(sys_api, errors_and_memory_through_the_hooks)
{
	cr_expect_eq(ckpt_error_set(CKPT_EMISMATCH, "a.index", "dense/kernel", 99, "shape %d", 3), CKPT_EMISMATCH);
	const ckpt_error *e = ckpt_error_last();
	cr_expect_eq(e->code, CKPT_EMISMATCH);
	cr_expect_str_eq(e->message, "shape 3");
	cr_expect_str_eq(e->path, "a.index");
	cr_expect_str_eq(e->variable, "dense/kernel");
	cr_expect_eq(e->offset, 99);
	ckpt_error_clear();
	cr_expect_null(ckpt_calloc(SIZE_MAX / 2, 4));
	cr_expect_eq(ckpt_error_last()->code, CKPT_ELIMIT);
	unsigned char *z = ckpt_calloc(8, 8);
	cr_assert_not_null(z);
	for (int i = 0; i < 64; i++)
		cr_expect_eq(z[i], 0);
	ckpt_free(z);
	ckpt_free(NULL);
}

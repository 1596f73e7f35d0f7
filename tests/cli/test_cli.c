/*
 * The `ckpt` tool, run as a separate process (CKPT_CLI_PATH): help and
 * usage errors, `inspect --json` on every fixture against an independent
 * Python oracle (tests/scripts/expected_inspect.py: bundle_check.py / h5py
 * + zlib.crc32, itself checked against each CONTENTS.txt), corruption and
 * missing data files, verify, diff, convert.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

#define ORACLE CKPT_SOURCE_DIR "/tests/scripts/expected_inspect.py"

static json_t *parse_json(const char *text, const char *what)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	cr_assert_not_null(j, "%s: not JSON (%s at line %d): %s", what, e.text, e.line, text);
	return j;
}

/* Fixture paths under `rel` (one checkpoint per CONTENTS.txt section / Keras dump). */
static json_t *fixture_paths(const char *rel)
{
	char *const argv[] = { TS_PYTHON, ORACLE, "--list", (char *)ts_fixture(rel), NULL };
	ts_run_result r;
	json_t *list = json_array();
	char *line, *save = NULL;

	cr_assert_eq(ts_run(&r, argv), 0);
	ts_assert_exit(&r, 0, "oracle --list failed: %s", r.err);
	for (line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		json_array_append_new(list, json_string(line));
	ts_run_free(&r);
	cr_assert_gt(json_array_size(list), 0, "no fixtures under %s", rel);
	return list;
}

static json_t *oracle(const char *path)
{
	char *const argv[] = { TS_PYTHON, ORACLE, (char *)path, NULL };
	ts_run_result r;
	json_t *j;

	cr_assert_eq(ts_run(&r, argv), 0);
	ts_assert_exit(&r, 0, "oracle failed on %s: %s", path, r.err);
	j = parse_json(r.out, "oracle");
	ts_run_free(&r);
	return j;
}

static json_t *find_var(json_t *vars, const char *name)
{
	size_t i;
	json_t *v;

	json_array_foreach(vars, i, v)
		if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0)
			return v;
	return NULL;
}

/*
 * The exact --json text: keys in order, json.dumps separators, one line.
 * Every file has "files" and "object_graph" after "variables"; GGUF,
 * safetensors and Keras files their metadata section between them
 * (test_inspect_meta.c checks it); SavedModels add "saved_model" at the end, and variables whose
 * synchronization saved_model.pb gives add "sync", "aggregation",
 * "sync_source" (tests/formats/test_saved_model.c checks their values).
 */
static void assert_json_layout(const char *out, json_t *doc)
{
	/* in this order; gguf, safetensors, keras and saved_model only where the format has them */
	static const char *const top[] = { "path", "format", "variables", "files", "gguf", "safetensors", "keras",
		"object_graph", "saved_model" };
	static const int optional[] = { 0, 0, 0, 0, 1, 1, 1, 0, 1 };
	static const char *const var[] = { "name", "dtype", "shape", "bytes", "crc32", "crc32c", "role", "slices", "sync",
		"aggregation", "sync_source" };
	const char *key;
	json_t *val, *v;
	size_t i = 0, k;
	char *again;

	json_object_foreach(doc, key, val) {
		while (i < 9 && optional[i] && strcmp(key, top[i]) != 0)
			i++;
		cr_assert_lt(i, 9, "unexpected top-level key %s", key);
		cr_assert_str_eq(key, top[i++]);
	}
	cr_assert(i >= 8, "%zu top-level keys", i);
	json_array_foreach(json_object_get(doc, "variables"), k, v) {
		i = 0;
		json_object_foreach(v, key, val) {
			if (i == 7 && strcmp(key, "slices") != 0)
				i++; /* "slices" only for a partitioned entry */
			cr_assert_lt(i, 11);
			cr_assert_str_eq(key, var[i++], "variable key order");
		}
		cr_assert(i == 7 || i == 8 || i == 10 || i == 11, "%zu variable keys", i);
		const char *role = json_string_value(json_object_get(v, "role"));
		cr_assert(role && (!strcmp(role, "model") || !strcmp(role, "optimizer") ||
			!strcmp(role, "metric") || !strcmp(role, "other")), "role %s", role ? role : "(null)");
	}
	/* jansson's default separators are json.dumps' (", " and ": ") */
	again = json_dumps(doc, JSON_ENSURE_ASCII);
	cr_assert_not_null(again);
	cr_assert_eq(strlen(out), strlen(again) + 1);
	cr_assert(strncmp(out, again, strlen(again)) == 0 && out[strlen(again)] == '\n',
		"output is not exactly one json.dumps-style line:\n%s\n%s", out, again);
	free(again);
}

/* ckpt inspect --json PATH lists exactly what the oracle lists, with equal crc32. */
static void check_inspect_against_oracle(const char *path, const char *format_prefix)
{
	ts_run_result r = ts_cli("inspect", "--json", path, NULL);
	json_t *want = oracle(path), *got, *gvars, *wvars, *w;
	size_t i;

	ts_assert_exit(&r, 0, "%s: exit %d: %s", path, r.status, r.err);
	got = parse_json(r.out, path);
	assert_json_layout(r.out, got);
	cr_assert(strncmp(json_string_value(json_object_get(got, "format")), format_prefix,
		strlen(format_prefix)) == 0, "%s: format %s", path, json_string_value(json_object_get(got, "format")));
	gvars = json_object_get(got, "variables");
	wvars = json_object_get(want, "variables");
	cr_assert_eq(json_array_size(gvars), json_array_size(wvars), "%s: %zu variables, oracle %zu", path,
		json_array_size(gvars), json_array_size(wvars));
	json_array_foreach(wvars, i, w) {
		const char *name = json_string_value(json_object_get(w, "name"));
		json_t *g = find_var(gvars, name);

		cr_assert_not_null(g, "%s: '%s' not listed", path, name);
		cr_assert_str_eq(json_string_value(json_object_get(g, "dtype")),
			json_string_value(json_object_get(w, "dtype")), "%s: dtype of %s", path, name);
		cr_assert(json_equal(json_object_get(g, "shape"), json_object_get(w, "shape")),
			"%s: shape of %s", path, name);
		cr_assert_eq(json_integer_value(json_object_get(g, "bytes")),
			json_integer_value(json_object_get(w, "bytes")), "%s: bytes of %s", path, name);
		cr_assert(json_is_string(json_object_get(g, "crc32")), "%s: crc32 of %s is null", path, name);
		cr_assert_str_eq(json_string_value(json_object_get(g, "crc32")),
			json_string_value(json_object_get(w, "crc32")), "%s: crc32 of %s", path, name);
		cr_assert(json_is_string(json_object_get(g, "crc32c")), "%s: crc32c of %s is null", path, name);
		cr_assert_str_eq(json_string_value(json_object_get(g, "crc32c")),
			json_string_value(json_object_get(w, "crc32c")), "%s: crc32c of %s", path, name);
	}
	json_decref(got);
	json_decref(want);
	ts_run_free(&r);
}

/* ---- help and usage ---- */

static const char *const commands[] = { "inspect", "verify", "diff", "restore", "convert" };

Test(cli, help_on_every_command)
{
	ts_run_result r = ts_cli("--help", NULL);
	size_t i;
	char usage[64];

	ts_assert_exit(&r, 0, "exit status");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		cr_assert(strstr(r.out, commands[i]), "ckpt --help lists %s", commands[i]);
	ts_run_free(&r);
	r = ts_cli("--version", NULL);
	ts_assert_exit(&r, 0, "exit status");
	cr_assert(strstr(r.out, CKPT_VERSION_STRING));
	ts_run_free(&r);
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		snprintf(usage, sizeof(usage), "usage: ckpt %s", commands[i]);
		r = ts_cli(commands[i], "--help", NULL);
		ts_assert_exit(&r, 0, "ckpt %s --help: %d", commands[i], r.status);
		cr_assert(strncmp(r.out, usage, strlen(usage)) == 0, "%s", r.out);
		ts_run_free(&r);
		r = ts_cli("help", commands[i], NULL);
		ts_assert_exit(&r, 0, "exit status");
		cr_assert(strncmp(r.out, usage, strlen(usage)) == 0, "%s", r.out);
		ts_run_free(&r);
	}
}

Test(cli, usage_errors_exit_2)
{
	static const char *const cases[][7] = {
		{ NULL },
		{ "bogus", NULL },
		{ "--bogus", NULL },
		{ "help", "bogus", NULL },
		{ "inspect", NULL },
		{ "inspect", "a", "b", NULL },
		{ "inspect", "--bogus", "a", NULL },
		{ "inspect", "--json=1", "a", NULL },
		{ "verify", NULL },
		{ "diff", "a", NULL },
		{ "diff", "a", "b", "--atol", NULL },
		{ "diff", "a", "b", "--atol", "abc", NULL },
		{ "diff", "a", "b", "--rtol=-1", NULL },
		{ "convert", "a", "b", NULL },
		{ "convert", "a", "b", "--to", "zip", NULL },
		{ "restore", "a", NULL },
		{ "restore", "a", "--strategy", "bogus", NULL },
		{ "restore", "a", "--strategy", "mirrored", "--replicas", "0" },
		{ "restore", "a", "--strategy", "default", "--replicas", "3" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *const *c = cases[i];
		ts_run_result r = ts_cli(c[0], c[0] ? c[1] : NULL, c[0] && c[1] ? c[2] : NULL,
			c[0] && c[1] && c[2] ? c[3] : NULL, c[0] && c[1] && c[2] && c[3] ? c[4] : NULL,
			c[0] && c[1] && c[2] && c[3] && c[4] ? c[5] : NULL, NULL);
		ts_assert_exit(&r, 2, "case %zu (%s %s): exit %d, stderr %s", i, c[0] ? c[0] : "",
			c[0] && c[1] ? c[1] : "", r.status, r.err);
		cr_assert(strstr(r.err, "usage: ckpt"), "case %zu: no usage line: %s", i, r.err);
		cr_assert_eq(r.out[0], '\0', "case %zu: usage error printed to stdout", i);
		ts_run_free(&r);
	}
}

/* ---- inspect --json on every fixture ---- */

Test(cli, inspect_json_every_tf_fixture, .timeout = 300)
{
	json_t *paths = fixture_paths("tf");
	size_t i;
	json_t *p;

	json_array_foreach(paths, i, p)
		check_inspect_against_oracle(json_string_value(p), "tf-bundle");
	json_decref(paths);
}

Test(cli, inspect_json_every_keras_fixture, .timeout = 300)
{
	json_t *paths = fixture_paths("keras");
	size_t i;
	json_t *p;

	json_array_foreach(paths, i, p)
		check_inspect_against_oracle(json_string_value(p), "keras");
	json_decref(paths);
}

Test(cli, inspect_human_shows_tree_and_totals)
{
	ts_run_result r = ts_cli("inspect", ts_fixture("tf/tensorflow__lso_ckpt_tf2.2/ckpt"), NULL);

	ts_assert_exit(&r, 0, "%s", r.err);
	cr_assert(strstr(r.out, "format: tf-bundle"), "%s", r.out);
	cr_assert(strstr(r.out, "object graph:"), "%s", r.out);
	cr_assert(strstr(r.out, "slot 'momentum'"), "%s", r.out);
	cr_assert(strstr(r.out, "layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE"), "%s", r.out);
	cr_assert(strstr(r.out, "total: 11 tensors"), "%s", r.out);
	cr_assert(strstr(r.out, "crc32c verified"), "%s", r.out);
	ts_run_free(&r);
}

/* ---- corruption and missing data files ---- */

static char *copy_fixture(const char *rel, char **dir_out)
{
	char *dir = ts_tmpdir();
	char *dst = ts_join(dir, "ckpt");

	cr_assert_eq(ts_copy(ts_fixture(rel), dst), 0);
	*dir_out = dir;
	return dst;
}

static void flip_byte(const char *path, long off)
{
	cr_assert_eq(ts_flip_byte(path, off, 0x40), 0, "%s at %ld", path, off);
}

Test(cli, corrupt_tensor_data_is_named)
{
	char *dir, *copy = copy_fixture("tf/tensorflow__half_plus_two_v1/00000123/variables", &dir);
	char *data = ts_join(copy, "variables.data-00000-of-00001");
	char *prefix = ts_join(copy, "variables");
	ts_run_result r;
	json_t *doc, *v;

	flip_byte(data, 5); /* inside "b" (offset 4, 4 bytes) */
	r = ts_cli("inspect", "--json", prefix, NULL);
	ts_assert_exit(&r, 1, "%s", r.err);
	cr_assert(strstr(r.err, "ckpt: "), "%s", r.err);
	cr_assert(strstr(r.err, dir), "error names the path: %s", r.err);
	cr_assert(strstr(r.err, "variable 'b'"), "error names the variable: %s", r.err);
	doc = parse_json(r.out, "inspect --json");
	v = find_var(json_object_get(doc, "variables"), "b");
	cr_assert(v && json_is_null(json_object_get(v, "crc32")), "crc32 of b is null");
	cr_assert(json_is_string(json_object_get(find_var(json_object_get(doc, "variables"), "a"), "crc32")));
	json_decref(doc);
	ts_run_free(&r);

	r = ts_cli("verify", prefix, NULL);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.err, "variable 'b'"), "%s", r.err);
	cr_assert(strstr(r.err, dir), "%s", r.err);
	cr_assert_eq(strstr(r.out, "OK:"), NULL);
	ts_run_free(&r);

	r = ts_cli("inspect", prefix, NULL);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.out, "BAD"), "%s", r.out);
	ts_run_free(&r);

	/*
	 * restore leaves copy 0 of a checksummed value to the load's own
	 * verification (it does not checksum it again): the load must fail
	 * on the damaged value, with one replica and with several
	 */
	r = ts_cli("restore", prefix, "--strategy", "default", NULL);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.err, "variable 'b'") && strstr(r.err, "crc32c"), "%s", r.err);
	cr_assert_eq(strstr(r.out, "all replicas = file"), NULL, "%s", r.out);
	ts_run_free(&r);
	r = ts_cli("restore", prefix, "--strategy", "mirrored", "--replicas", "3", NULL);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.err, "variable 'b'") && strstr(r.err, "crc32c"), "%s", r.err);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
	free(copy);
	free(data);
	free(prefix);
}

Test(cli, corrupt_index_is_one_clear_error)
{
	char *dir, *copy = copy_fixture("tf/tensorflow__half_plus_two_v1/00000123/variables", &dir);
	char *index = ts_join(copy, "variables.index");
	char *prefix = ts_join(copy, "variables");
	ts_run_result r;

	flip_byte(index, 20); /* inside the data block: its crc32c no longer matches */
	r = ts_cli("inspect", "--json", prefix, NULL);
	ts_assert_exit(&r, 1, "%s", r.err);
	cr_assert(strncmp(r.err, "ckpt: ", 6) == 0, "%s", r.err);
	cr_assert(strstr(r.err, "variables.index"), "names the file: %s", r.err);
	cr_assert_eq(r.out[0], '\0');
	ts_run_free(&r);
	r = ts_cli("verify", prefix, NULL);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.err, "variables.index"), "%s", r.err);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
	free(copy);
	free(index);
	free(prefix);
}

Test(cli, missing_shard_is_named)
{
	char *dir, *copy = copy_fixture("tf/tensorflow__lso_ckpt_tf2.2", &dir);
	char *shard = ts_join(copy, "ckpt.data-00001-of-00002");
	char *prefix = ts_join(copy, "ckpt");
	ts_run_result r;
	json_t *doc;

	cr_assert_eq(unlink(shard), 0);
	r = ts_cli("inspect", "--json", prefix, NULL);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.err, "ckpt.data-00001-of-00002"), "names the missing file: %s", r.err);
	doc = parse_json(r.out, "inspect --json");
	cr_assert_eq(json_array_size(json_object_get(doc, "variables")), 11, "lists what the index says");
	cr_assert(json_is_null(json_object_get(find_var(json_object_get(doc, "variables"),
		"layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE"), "crc32")));
	json_decref(doc);
	ts_run_free(&r);
	r = ts_cli("verify", prefix, NULL);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.err, "ckpt.data-00001-of-00002"), "%s", r.err);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
	free(copy);
	free(shard);
	free(prefix);
}

Test(cli, nonexistent_path_exits_1)
{
	ts_run_result r = ts_cli("inspect", "/nonexistent/ckpt-1", NULL);

	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.err, "/nonexistent/ckpt-1"), "%s", r.err);
	ts_run_free(&r);
}

/* ---- verify ---- */

Test(cli, verify_ok_on_every_fixture, .timeout = 300)
{
	json_t *paths = fixture_paths("");
	size_t i;
	json_t *p;

	json_array_foreach(paths, i, p) {
		ts_run_result r = ts_cli("verify", json_string_value(p), NULL);
		ts_assert_exit(&r, 0, "%s: %s", json_string_value(p), r.err);
		cr_assert(strncmp(r.out, "OK: ", 4) == 0, "%s", r.out);
		ts_run_free(&r);
	}
	json_decref(paths);
}

/* ---- diff ---- */

enum { EDIT_NONE, EDIT_NUDGE_A, EDIT_DROP_C, EDIT_B_AS_F64 };

/* Rewrite half_plus_two_v1 (a=0.5, b=2, c=3) through the library, with one edit. */
static char *write_variant(const char *dir, const char *name, int edit)
{
	char *out = ts_join(dir, name);
	ckpt_reader *r;
	ckpt_writer *w;
	ckpt_write_options wo = CKPT_WRITE_OPTIONS_INIT;
	size_t i;

	wo.no_fsync = 1;
	cr_assert_eq(ckpt_reader_open(&r, ts_fixture("tf/tensorflow__half_plus_two_v1/00000123/variables/variables"),
		NULL), CKPT_OK);
	cr_assert_eq(ckpt_writer_open(&w, out, "tf-bundle", &wo), CKPT_OK);
	for (i = 0; i < ckpt_reader_count(r); i++) {
		const char *vn = ckpt_reader_var(r, i)->name;
		ckpt_tensor *t;

		cr_assert_eq(ckpt_reader_read(r, i, &t), CKPT_OK);
		if (edit == EDIT_NUDGE_A && !strcmp(vn, "a"))
			*(float *)t->data += 0.001f;
		if (edit == EDIT_DROP_C && !strcmp(vn, "c")) {
			ckpt_tensor_free(t);
			continue;
		}
		if (edit == EDIT_B_AS_F64 && !strcmp(vn, "b")) {
			double d = *(float *)t->data;
			ckpt_tensor *t64;
			cr_assert_eq(ckpt_tensor_new(&t64, CKPT_DT_DOUBLE, &t->shape), CKPT_OK);
			memcpy(t64->data, &d, 8);
			ckpt_tensor_free(t);
			t = t64;
		}
		cr_assert_eq(ckpt_writer_add(w, vn, t, 0), CKPT_OK);
		ckpt_tensor_free(t);
	}
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	ckpt_reader_free(r);
	return out;
}

Test(cli, diff_equal_changed_tolerance)
{
	const char *orig = ts_fixture("tf/tensorflow__half_plus_two_v1/00000123/variables/variables");
	char *dir = ts_tmpdir();
	char *same = write_variant(dir, "same", EDIT_NONE);
	char *nudged = write_variant(dir, "nudged", EDIT_NUDGE_A);
	ts_run_result r;
	json_t *doc, *d;

	r = ts_cli("diff", orig, orig, NULL);
	ts_assert_exit(&r, 0, "%s%s", r.out, r.err);
	ts_run_free(&r);
	r = ts_cli("diff", orig, same, NULL);
	ts_assert_exit(&r, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "equal: 3 compared"), "%s", r.out);
	ts_run_free(&r);

	r = ts_cli("diff", orig, nudged, NULL);
	ts_assert_exit(&r, 1, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "values differ: a:"), "names the variable: %s", r.out);
	cr_assert_eq(strstr(r.out, "values differ: b"), NULL);
	ts_run_free(&r);
	r = ts_cli("diff", orig, nudged, "--atol", "0.01", NULL);
	ts_assert_exit(&r, 0, "%s", r.out);
	ts_run_free(&r);
	r = ts_cli("diff", orig, nudged, "--atol=1e-6", NULL);
	ts_assert_exit(&r, 1, "%s", r.out);
	ts_run_free(&r);
	r = ts_cli("diff", orig, nudged, "--rtol", "0.01", NULL);
	ts_assert_exit(&r, 0, "%s", r.out);
	ts_run_free(&r);

	r = ts_cli("diff", orig, nudged, "--json", NULL);
	ts_assert_exit(&r, 1, "exit status");
	doc = parse_json(r.out, "diff --json");
	cr_assert(json_is_false(json_object_get(doc, "equal")));
	cr_assert_eq(json_array_size(json_object_get(doc, "differences")), 1);
	d = json_array_get(json_object_get(doc, "differences"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(d, "name")), "a");
	cr_assert_str_eq(json_string_value(json_object_get(d, "kind")), "values");
	cr_assert_float_eq(json_real_value(json_object_get(d, "max_abs")), 0.001, 1e-6);
	json_decref(doc);
	ts_run_free(&r);

	ts_rmtree(dir);
	free(dir);
	free(same);
	free(nudged);
}

Test(cli, diff_missing_extra_and_dtype)
{
	const char *orig = ts_fixture("tf/tensorflow__half_plus_two_v1/00000123/variables/variables");
	char *dir = ts_tmpdir();
	char *dropped = write_variant(dir, "dropped", EDIT_DROP_C);
	char *f64 = write_variant(dir, "f64", EDIT_B_AS_F64);
	ts_run_result r;

	r = ts_cli("diff", orig, dropped, NULL);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.out, "only in A: c"), "%s", r.out);
	ts_run_free(&r);
	r = ts_cli("diff", dropped, orig, "--atol", "1", NULL);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.out, "only in B: c"), "%s", r.out);
	ts_run_free(&r);
	r = ts_cli("diff", orig, f64, "--atol", "1", NULL);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.out, "dtype differs: b: float32 vs float64"), "%s", r.out);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
	free(dropped);
	free(f64);
}

/* ---- convert ---- */

/* The oracle's listing of any checkpoint (bundle_check.py / h5py, never libckpt): {"variables": [...]}. */
static ts_run_result oracle_inspect(const char *path)
{
	char *const argv[] = { TS_PYTHON, ORACLE, (char *)path, NULL };
	ts_run_result r;

	cr_assert_eq(ts_run(&r, argv), 0);
	ts_assert_exit(&r, 0, "expected_inspect.py %s: %s", path, r.err);
	return r;
}

/*
 * `field` ("crc32" or "crc32c") by name, without the object-graph entry: from
 * `ckpt inspect --json`, or with `oracle` from the oracle.
 */
static json_t *checksums_by(const char *path, int oracle, const char *field)
{
	ts_run_result r = oracle ? oracle_inspect(path) : ts_cli("inspect", "--json", path, NULL);
	json_t *doc, *v, *out = json_object();
	size_t i;

	ts_assert_exit(&r, 0, "%s: %s", path, r.err);
	doc = parse_json(r.out, path);
	json_array_foreach(json_object_get(doc, "variables"), i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		if (strcmp(name, CKPT_OBJECT_GRAPH_KEY) != 0)
			json_object_set(out, name, json_object_get(v, field));
	}
	json_decref(doc);
	ts_run_free(&r);
	return out;
}

static json_t *crcs_by_name(const char *path)
{
	return checksums_by(path, 0, "crc32");
}

static json_t *crcs_by(const char *path, int oracle)
{
	return checksums_by(path, oracle, "crc32");
}

Test(cli, convert_tf_to_tf_preserves_every_value)
{
	const char *src = ts_fixture("tf/tensorflow__lso_ckpt_tf2.2/ckpt");
	char *dir = ts_tmpdir();
	char *out = ts_join(dir, "converted");
	ts_run_result r;
	json_t *a, *b;

	r = ts_cli("convert", src, out, "--to", "tf", NULL);
	ts_assert_exit(&r, 0, "%s%s", r.out, r.err);
	ts_run_free(&r);
	/* judged by the independent reader (bundle_check.py), which also checks the written file's checksums */
	a = crcs_by(src, 1);
	b = crcs_by(out, 1);
	cr_assert_gt(json_object_size(a), 0);
	cr_assert(json_equal(a, b), "crc32 per name preserved (as bundle_check.py reads both)");
	json_decref(a);
	json_decref(b);
	r = ts_cli("diff", src, out, NULL);
	ts_assert_exit(&r, 0, "%s", r.out);
	ts_run_free(&r);
	r = ts_cli("verify", out, NULL);
	ts_assert_exit(&r, 0, "%s", r.err);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
	free(out);
}

/* ---- restore ---- */

/*
 * `ckpt restore PATH --strategy mirrored --replicas 4 --json`: every variable
 * mirrored (or sync-on-read) with 4 copies, crc32c as `ckpt inspect` prints it.
 * Variables hold every dtype (TF1 string tensors included), so nothing may
 * be left unmatched. `every_entry`: each entry `ckpt inspect` lists (but the
 * object graph) must be reported as a variable (TF files, whose variable
 * names are the stored keys).
 */
static void check_restore_mirrored(const char *path, int every_entry)
{
	ts_run_result r = ts_cli("restore", path, "--strategy", "mirrored", "--replicas", "4", "--json", NULL);
	json_t *doc, *crcs, *u, *v, *seen = json_object();
	size_t nu, k;
	const char *key;

	doc = parse_json(r.out, path);
	crcs = checksums_by(path, 1, "crc32c"); /* the oracle's, not ckpt inspect's */
	cr_assert_str_eq(json_string_value(json_object_get(doc, "strategy")), "mirrored");
	cr_assert_eq(json_integer_value(json_object_get(doc, "replicas")), 4);
	nu = json_array_size(json_object_get(doc, "unmatched"));
	json_array_foreach(json_object_get(doc, "unmatched"), k, u)
		cr_assert_fail("%s: unmatched %s", path, json_string_value(u));
	cr_assert_eq(nu, 0, "%s: %zu unmatched", path, nu);
	ts_assert_exit(&r, 0, "%s: exit %d: %s", path, r.status, r.err);
	cr_assert_gt(json_array_size(json_object_get(doc, "variables")), 0);
	json_array_foreach(json_object_get(doc, "variables"), k, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		const char *kind = json_string_value(json_object_get(v, "kind"));
		json_t *want = json_object_get(crcs, name);

		cr_assert_eq(json_integer_value(json_object_get(v, "replicas")), 4, "%s: %s", path, name);
		cr_assert(!strcmp(kind, "mirrored") || !strcmp(kind, "sync-on-read"), "%s: %s is %s", path, name, kind);
		if (want) {
			cr_assert(json_equal(json_object_get(v, "crc32c"), want), "%s: crc32c of %s", path, name);
			json_object_set_new(seen, name, json_true());
		}
	}
	if (every_entry)
		json_object_foreach(crcs, key, u)
			cr_assert(json_object_get(seen, key), "%s: entry %s not reported as a variable", path, key);
	json_decref(seen);
	json_decref(crcs);
	json_decref(doc);
	ts_run_free(&r);
}

Test(cli, restore_mirrored_4_on_every_tf_fixture, .timeout = 300)
{
	json_t *paths = fixture_paths("tf");
	size_t i;
	json_t *p;

	json_array_foreach(paths, i, p)
		check_restore_mirrored(json_string_value(p), 1);
	json_decref(paths);
}

Test(cli, restore_mirrored_4_on_every_keras_fixture, .timeout = 300)
{
	json_t *paths = fixture_paths("keras");
	size_t i;
	json_t *p;

	json_array_foreach(paths, i, p)
		check_restore_mirrored(json_string_value(p), 0);
	json_decref(paths);
}

Test(cli, restore_save_round_trips_through_replicas)
{
	const char *src = ts_fixture("tf/tensorflow__lso_ckpt_tf2.2");
	char *dir = ts_tmpdir();
	char *out = ts_join(dir, "restored");
	ts_run_result r;

	r = ts_cli("restore", src, "--strategy", "mirrored", "--replicas", "3", "--save", out, NULL);
	ts_assert_exit(&r, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "mirrored"), "%s", r.out);
	ts_run_free(&r);
	r = ts_cli("diff", src, out, NULL);
	ts_assert_exit(&r, 0, "%s", r.out);
	ts_run_free(&r);
	r = ts_cli("restore", src, "--strategy", "default", NULL);
	ts_assert_exit(&r, 0, "%s", r.err);
	cr_assert(strstr(r.out, "plain"), "%s", r.out);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
	free(out);
}

/* ---- Keras ---- */

Test(cli, inspect_keras_shows_layers_from_config)
{
	ts_run_result r = ts_cli("inspect", ts_fixture("keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras"), NULL);

	ts_assert_exit(&r, 0, "%s", r.err);
	cr_assert(strstr(r.out, "format: keras-v3"), "%s", r.out);
	cr_assert(strstr(r.out, "model: Sequential sequential"), "%s", r.out);
	cr_assert(strstr(r.out, "Dense dense_1: 2 weights, 33024 bytes"), "%s", r.out);
	cr_assert(strstr(r.out, "Dropout dropout: 0 weights"), "%s", r.out);
	cr_assert(strstr(r.out, "kernel  float32 [2, 128]  <- layers/dense/vars/0"), "object tree: %s", r.out);
	cr_assert(strstr(r.out, "total: 26 tensors"), "%s", r.out);
	ts_run_free(&r);
	/* a Lambda config (bytecode with NUL bytes) is shown as data */
	r = ts_cli("inspect", ts_fixture("keras/dl4j-test-resources__keras2.0.9_sequential_lambda.h5"), NULL);
	ts_assert_exit(&r, 0, "%s", r.err);
	cr_assert(strstr(r.out, "Lambda lambda_1"), "%s", r.out);
	ts_run_free(&r);
}

static int strcmp_ptr(const char **a, const char **b)
{
	return strcmp(*a, *b);
}

/* Sorted "crc32 dtype shape" lines of `ckpt inspect --json`, without the object-graph entry. */
/* The sorted "crc32 dtype shape" lines of a checkpoint, as the oracle (bundle_check.py / h5py) reads it. */
static char *value_multiset(const char *path)
{
	ts_run_result r = oracle_inspect(path);
	json_t *doc, *v;
	size_t i, n;
	char **lines, *out;
	size_t cap = 1;

	ts_assert_exit(&r, 0, "%s: %s", path, r.err);
	doc = parse_json(r.out, path);
	n = json_array_size(json_object_get(doc, "variables"));
	lines = calloc(n + 1, sizeof(char *));
	i = 0;
	{
		size_t k;
		json_array_foreach(json_object_get(doc, "variables"), k, v) {
			char *shape = json_dumps(json_object_get(v, "shape"), 0);
			if (!strcmp(json_string_value(json_object_get(v, "name")), CKPT_OBJECT_GRAPH_KEY)) {
				free(shape);
				continue;
			}
			lines[i] = malloc(strlen(shape) + 64);
			sprintf(lines[i], "%s %s %s\n", json_string_value(json_object_get(v, "crc32")),
				json_string_value(json_object_get(v, "dtype")), shape);
			cap += strlen(lines[i]);
			free(shape);
			i++;
		}
	}
	n = i;
	qsort(lines, n, sizeof(char *), (int (*)(const void *, const void *))strcmp_ptr);
	out = calloc(cap, 1);
	for (i = 0; i < n; i++) {
		strcat(out, lines[i]);
		free(lines[i]);
	}
	free(lines);
	json_decref(doc);
	ts_run_free(&r);
	return out;
}

/* Keras -> TF -> Keras (same layout family): every value preserved bit-exactly. */
Test(cli, convert_keras_round_trip_every_fixture, .timeout = 600)
{
	json_t *paths = fixture_paths("keras");
	char *dir = ts_tmpdir();
	size_t i;
	json_t *p;

	json_array_foreach(paths, i, p) {
		const char *src = json_string_value(p);
		ts_run_result r = ts_cli("inspect", "--json", src, NULL);
		json_t *doc = parse_json(r.out, src);
		const char *fmt = json_string_value(json_object_get(doc, "format"));
		const char *to = !strcmp(fmt, "keras-v3") ? "keras" : !strcmp(fmt, "keras-weights-h5") ? "keras-weights" : "keras-h5";
		char name[64], *tf, *back, *want, *got;

		snprintf(name, sizeof(name), "tf%zu", i);
		tf = ts_join(dir, name);
		snprintf(name, sizeof(name), "back%zu.%s", i, !strcmp(to, "keras") ? "keras" : "h5");
		back = ts_join(dir, name);
		ts_run_free(&r);
		r = ts_cli("convert", src, tf, "--to", "tf", NULL);
		ts_assert_exit(&r, 0, "%s -> tf: %s%s", src, r.out, r.err);
		ts_run_free(&r);
		r = ts_cli("diff", src, tf, NULL);
		ts_assert_exit(&r, 0, "%s vs its TF conversion: %s", src, r.out);
		ts_run_free(&r);
		r = ts_cli("convert", tf, back, "--to", to, NULL);
		ts_assert_exit(&r, 0, "%s -> tf -> %s: %s%s", src, to, r.out, r.err);
		ts_run_free(&r);
		r = ts_cli("verify", back, NULL);
		ts_assert_exit(&r, 0, "%s", r.err);
		ts_run_free(&r);
		/* values as the independent readers see them: h5py for Keras files, bundle_check.py for the bundle */
		want = value_multiset(src);
		got = value_multiset(tf);
		cr_assert_str_eq(got, want, "%s: crc32s after Keras -> TF", src);
		free(got);
		got = value_multiset(back);
		cr_assert_str_eq(got, want, "%s: crc32s after Keras -> TF -> Keras", src);
		/*
		 * Entry by entry too, except from legacy weights-only files: --to
		 * keras-h5 writes the full-model layout, whose dataset names differ.
		 */
		if (strcmp(fmt, "keras-h5-legacy-weights") != 0) {
			r = ts_cli("diff", src, back, NULL);
			ts_assert_exit(&r, 0, "%s vs Keras -> TF -> Keras: %s", src, r.out);
			ts_run_free(&r);
		}
		free(want);
		free(got);
		free(tf);
		free(back);
		json_decref(doc);
	}
	json_decref(paths);
	ts_rmtree(dir);
	free(dir);
}

Test(cli, convert_lists_unmappable_entries)
{
	const char *src = ts_fixture("tf/tensorflow__old_string_tensors/foo");
	char *dir = ts_tmpdir();
	char *out = ts_join(dir, "strings.weights.h5");
	ts_run_result r;
	json_t *a, *b;

	r = ts_cli("convert", src, out, "--to", "keras-weights", NULL);
	ts_assert_exit(&r, 1, "%s", r.err);
	cr_assert(strstr(r.err, "variable 'strs'"), "lists the entry: %s", r.err);
	cr_assert(strstr(r.err, "--allow-partial"), "%s", r.err);
	cr_assert_neq(access(out, F_OK), 0, "nothing written without --allow-partial");
	ts_run_free(&r);
	r = ts_cli("convert", src, out, "--to", "keras-weights", "--allow-partial", NULL);
	ts_assert_exit(&r, 0, "%s", r.err);
	cr_assert(strstr(r.err, "variable 'strs'"), "still listed: %s", r.err);
	ts_run_free(&r);
	a = crcs_by_name(src);
	b = crcs_by_name(out);
	cr_assert_eq(json_object_size(b), 1, "only 'floats' is written");
	{
		const char *key;
		json_t *val;
		json_object_foreach(b, key, val)
			cr_assert(json_equal(val, json_object_get(a, "floats")), "value of floats preserved");
	}
	json_decref(a);
	json_decref(b);
	ts_rmtree(dir);
	free(dir);
	free(out);
}

/* ---- JSON escaping: one function, json.dumps' spelling, any bytes ---- */

Test(cli, names_escaped_in_json_and_on_terminals)
{
	static const char *const names[] = {
		"quote\"back\\slash", "new\nline\ttab", "caf\xc3\xa9", "emoji \xf0\x9f\x98\x80",
		"del\x7f", "bad\xff" "byte", "ctl\x01", "slash/ok"
	};
	static const char *const spelled[] = {
		"\"quote\\\"back\\\\slash\"", "\"new\\nline\\ttab\"", "\"caf\\u00e9\"", "\"emoji \\ud83d\\ude00\"",
		"\"del\\u007f\"", "\"bad\\udcffbyte\"", "\"ctl\\u0001\"", "\"slash/ok\""
	};
	char *dir = ts_tmpdir();
	char *prefix = ts_join(dir, "odd");
	ckpt_writer *w;
	ckpt_write_options wo = CKPT_WRITE_OPTIONS_INIT;
	ckpt_shape s;
	ckpt_tensor *t;
	ts_run_result r;
	size_t i;

	wo.no_fsync = 1;
	cr_assert_eq(ckpt_shape_make(&s, 0, NULL), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s), CKPT_OK);
	cr_assert_eq(ckpt_writer_open(&w, prefix, "tf-bundle", &wo), CKPT_OK);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		cr_assert_eq(ckpt_writer_add(w, names[i], t, 0), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	ckpt_tensor_free(t);

	r = ts_cli("inspect", "--json", prefix, NULL);
	ts_assert_exit(&r, 0, "%s", r.err);
	for (i = 0; i < sizeof(spelled) / sizeof(spelled[0]); i++)
		cr_assert(strstr(r.out, spelled[i]), "%s not in %s", spelled[i], r.out);
	for (i = 0; r.out[i]; i++)
		cr_assert((unsigned char)r.out[i] < 0x80 && ((unsigned char)r.out[i] >= 0x20 || r.out[i] == '\n'),
			"output is printable ASCII");
	ts_run_free(&r);
	/* human output: no control bytes reach the terminal */
	r = ts_cli("inspect", prefix, NULL);
	ts_assert_exit(&r, 0, "%s", r.err);
	for (i = 0; r.out[i]; i++)
		cr_assert(((unsigned char)r.out[i] >= 0x20 && r.out[i] != 0x7f) || r.out[i] == '\n',
			"control byte 0x%02x in human output", (unsigned char)r.out[i]);
	cr_assert(strstr(r.out, "ctl\\x01"), "%s", r.out);
	cr_assert(strstr(r.out, "bad\\xffbyte"), "%s", r.out);
	cr_assert(strstr(r.out, "new\\x0aline\\x09tab"), "%s", r.out);
	cr_assert(strstr(r.out, "caf\xc3\xa9"), "valid UTF-8 is shown as is: %s", r.out);
	ts_run_free(&r);
	/* the oracle (Python json.dumps over surrogateescape) spells the names the same way */
	{
		char *const argv[] = { TS_PYTHON, ORACLE, prefix, NULL };
		cr_assert_eq(ts_run(&r, argv), 0);
		ts_assert_exit(&r, 0, "%s", r.err);
		for (i = 0; i < sizeof(spelled) / sizeof(spelled[0]); i++)
			cr_assert(strstr(r.out, spelled[i]), "oracle: %s not in %s", spelled[i], r.out);
		ts_run_free(&r);
	}
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

/*
 * `ckpt inspect --json` holds the metadata its text shows (issue 26): every
 * GGUF key-value pair with its type and value (arrays: element type,
 * count, a bounded prefix and whether it is one), safetensors' __metadata__
 * and a Keras archive's config and metadata, each checked by
 * tests/oracles/inspect_meta_check.py against the reference readers
 * (gguf.GGUFReader, safetensors.safe_open, zipfile) on files their own
 * writers made (tests/oracles/flat_write.py).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "flat_test.h"

/* inspect --json [--max-array max] of `file` into `json_path`, then the oracle's verdict. */
static void check_file(const char *file, const char *json_path, const char *max)
{
	ts_run_result r = max ? ts_cli("inspect", "--json", "--max-array", max, file, NULL) :
		ts_cli("inspect", "--json", file, NULL);
	FILE *f;
	char args[8192];
	char *verdict;

	ts_assert_exit(&r, 0, "inspect --json %s: exit %d\n%s", file, r.status, r.err);
	f = fopen(json_path, "w");
	cr_assert_not_null(f);
	fputs(r.out, f);
	fclose(f);
	ts_run_free(&r);
	snprintf(args, sizeof(args), "'%s' '%s' %s", file, json_path, max ? max : "1024");
	verdict = ft_oracle("inspect_meta_check.py", args);
	cr_log_info("%s", verdict);
	free(verdict);
}

Test(inspect_meta, gguf_and_safetensors_metadata_as_the_reference_readers_read_it, .timeout = 300)
{
	json_t *m;
	char *dir = ft_reference_files(&m), *jp = ts_join(dir, "inspect.json");
	const char *files[] = { "ref.gguf", "vocab.gguf", "ref_meta.safetensors", "ref.safetensors" };
	const char *maxes[] = { NULL, "0", "3" };

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		for (size_t k = 0; k < sizeof(maxes) / sizeof(maxes[0]); k++) {
			char *p = ts_join(dir, files[i]);
			check_file(p, jp, maxes[k]);
			free(p);
		}
	free(jp);
	json_decref(m);
	ts_rmtree(dir);
	free(dir);
}

Test(inspect_meta, keras_archive_config_and_metadata_as_stored, .timeout = 120)
{
	char *dir = ts_tmpdir(), *jp = ts_join(dir, "inspect.json");

	check_file(ts_fixture("keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras"), jp, NULL);
	free(jp);
	ts_rmtree(dir);
	free(dir);
}

/* The text shows every pair; the JSON of a long array says it is a prefix. */
Test(inspect_meta, long_arrays_are_a_prefix_that_says_so, .timeout = 120)
{
	json_t *m, *j, *kv, *e;
	char *dir = ft_reference_files(&m), *p = ts_join(dir, "vocab.gguf");
	ts_run_result r = ts_cli("inspect", "--json", p, NULL);
	json_error_t err;
	size_t i, arrays = 0;

	ts_assert_exit(&r, 0, "%s", r.err);
	j = json_loads(r.out, 0, &err);
	cr_assert_not_null(j, "inspect --json is not JSON: %s", err.text);
	kv = json_object_get(json_object_get(j, "gguf"), "kv");
	cr_assert(json_is_array(kv), "no gguf.kv in %.200s", r.out);
	json_array_foreach(kv, i, e) {
		if (strcmp(json_string_value(json_object_get(e, "type")), "array") != 0)
			continue;
		arrays++;
		cr_assert_eq(json_integer_value(json_object_get(e, "count")), 20000);
		cr_assert_eq(json_array_size(json_object_get(e, "values")), 1024);
		cr_assert(json_is_true(json_object_get(e, "truncated")));
	}
	cr_assert_eq(arrays, 2);
	json_decref(j);
	ts_run_free(&r);
	r = ts_cli("inspect", p, NULL);
	cr_assert(strstr(r.out, "tokenizer.ggml.tokens (array) = array[string] of 20000 (first: "), "%s", r.out);
	ts_run_free(&r);
	free(p);
	json_decref(m);
	ts_rmtree(dir);
	free(dir);
}

/* The text lists a partitioned entry's slices; so does the JSON. */
Test(inspect_meta, partitioned_entries_list_their_slices, .timeout = 120)
{
	const ckpt_shape full = { 2, { 10, 6 } };
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	ckpt_checkpoint *ck;
	ckpt_partitioned *p;
	float init[60] = { 0 };
	char *dir = ts_tmpdir(), *prefix = ts_join(dir, "ckpt");
	const char *path;
	json_t *doc, *v, *sl;
	size_t i;
	int found = 0;

	o.no_fsync = 1;
	vo.initial_value = init;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
	cr_assert_eq(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &full, 3, &vo), CKPT_OK);
	cr_assert_eq(ckpt_object_track_partitioned(ckpt_checkpoint_root(ck), "table", p), CKPT_OK);
	cr_assert_eq(ckpt_status_of(path = ckpt_checkpoint_save(ck, prefix)), CKPT_OK);
	ts_run_result r = ts_cli("inspect", "--json", path, NULL);
	ts_assert_exit(&r, 0, "%s", r.err);
	doc = json_loads(r.out, 0, NULL);
	cr_assert_not_null(doc);
	json_array_foreach(json_object_get(doc, "variables"), i, v) {
		if (!(sl = json_object_get(v, "slices")))
			continue;
		found++;
		cr_assert_eq(json_array_size(sl), 3, "%s", r.out);
		/* rows [0, 4) [4, 7) [7, 10), every column */
		cr_assert_eq(json_integer_value(json_array_get(json_array_get(json_array_get(sl, 1), 0), 0)), 4);
		cr_assert_eq(json_integer_value(json_array_get(json_array_get(json_array_get(sl, 2), 0), 1)), 10);
		cr_assert_eq(json_integer_value(json_array_get(json_array_get(json_array_get(sl, 0), 1), 1)), 6);
	}
	cr_assert_eq(found, 1, "%s", r.out);
	json_decref(doc);
	ts_run_free(&r);
	ckpt_checkpoint_free(ck);
	ckpt_partitioned_free(p);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

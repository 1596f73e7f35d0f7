/*
 * The Keras 3 tier: real Keras 3.15 (TensorFlow backend, the pinned oracle
 * venv) is the reference for .keras and .weights.h5, both ways.
 *
 * tests/oracles/keras_roundtrip.py trains a model (Dense, BatchNormalization,
 * Dense; Adam) and saves m.keras, m.weights.h5 and the sharded
 * sh.weights.json + sh_0000N.weights.h5 (save_weights(max_shard_size=...)),
 * with a manifest of every dataset as h5py reads it. libckpt must list
 * exactly those datasets with equal dtypes, shapes and bytes (the shards
 * together, as one store). What `ckpt convert` writes from them (.keras,
 * .weights.h5, and .weights.h5 from the sharded store) Keras loads with
 * keras.saving.load_model / model.load_weights, weights and optimizer
 * variables equal to the trained model's. Damaged sharded stores fail with
 * the file and the reason.
 */
#include "oracle_common.h"

static void write_text(const char *path, const char *text)
{
	cr_assert_eq(ts_write_file(path, text, strlen(text)), 0, "cannot write %s", path);
}

/* Opening `json` fails with `code` and a message containing `want`. */
static void expect_bad_store(const char *json, int code, const char *want)
{
	ckpt_reader *r = NULL;
	int rc = ckpt_reader_open(&r, json, NULL);

	cr_assert_eq(rc, code, "%s: got %d (%s), want %d", json, rc, ckpt_error_last()->message, code);
	cr_assert_not_null(strstr(ckpt_error_last()->message, want), "%s: message '%s' lacks '%s'", json,
		ckpt_error_last()->message, want);
	ckpt_reader_free(r);
}

Test(keras3_interop, keras_reads_ours_and_we_read_keras, .timeout = 600)
{
	char *tmp = ts_tmpdir(), *mpath = ts_join(tmp, "manifest.json");
	json_t *manifest, *files, *entries;
	const char *name;
	ts_run_result r;
	char *in[4], *out[4];
	static const char *const ins[4] = { "m.keras", "m.weights.h5", "sh.weights.json", "m.keras" };
	static const char *const outs[4] = { "ours.keras", "ours.weights.h5", "from_shards.weights.h5",
		"from_keras.weights.h5" };
	static const char *const tos[4] = { "keras", "keras-weights", "keras-weights", "keras-weights" };

	r = oracle_run("keras_roundtrip.py", "write", tmp, NULL);
	oracle_expect_ok(&r, "keras_roundtrip.py write");
	ts_run_free(&r);
	manifest = oracle_load_json(mpath);
	files = json_object_get(manifest, "files");
	cr_assert_eq(json_object_size(files), 3);

	/* what Keras wrote, as h5py reads it: every dataset, the shards' together */
	json_object_foreach(files, name, entries) {
		char *p = ts_join(tmp, name);
		ckpt_reader *rd;
		cr_assert_eq(ckpt_reader_open(&rd, p, NULL), CKPT_OK, "%s: %s", name, ckpt_error_last()->message);
		oracle_compare_entries(rd, name, entries);
		if (strcmp(name, "sh.weights.json") == 0) {
			cr_assert_str_eq(ckpt_reader_format(rd), "keras-weights-sharded");
			cr_assert_eq((size_t)ckpt_reader_num_shards(rd), json_array_size(json_object_get(manifest, "shards")));
			cr_assert_geq(ckpt_reader_num_shards(rd), 2);
		}
		ckpt_reader_free(rd);
		{ /* and loads as a tree: every dataset a variable, nothing left over */
			ckpt_checkpoint *ck;
			ckpt_restore_status *st;
			cr_assert_eq(ckpt_checkpoint_load(&ck, &st, p, NULL), CKPT_OK, "%s: %s", name, ckpt_error_last()->message);
			cr_assert_eq(ckpt_restore_status_num_restored(st), json_object_size(entries), "%s", name);
			cr_assert_eq(ckpt_restore_status_num_unmatched(st), 0, "%s", name);
			ckpt_restore_status_free(st);
			ckpt_checkpoint_free(ck);
		}
		free(p);
	}

	/* what we write from them, loaded by Keras */
	for (int i = 0; i < 4; i++) {
		in[i] = ts_join(tmp, ins[i]);
		out[i] = ts_join(tmp, outs[i]);
		oracle_cli_ok("convert", in[i], out[i], "--to", tos[i], NULL);
	}
	r = oracle_run("keras_roundtrip.py", "check", tmp, out[0], out[1], out[2], out[3], NULL);
	oracle_expect_ok(&r, "keras_roundtrip.py check");
	for (int i = 0; i < 4; i++) {
		char line[4200];
		snprintf(line, sizeof(line), "ok %s\n", out[i]);
		cr_assert_not_null(strstr(r.out, line), "Keras did not load %s:\n%s", out[i], r.out);
		free(in[i]);
		free(out[i]);
	}
	ts_run_free(&r);

	/* damaged sharded stores (Keras' shards, rewritten index) */
	{
		json_t *shards = json_object_get(manifest, "shards");
		const char *s0 = json_string_value(json_array_get(shards, 0));
		const char *sl = json_string_value(json_array_get(shards, json_array_size(shards) - 1));
		char *bad = ts_join(tmp, "bad.weights.json"), text[8192];

		/* only the last shard: the optimizer's vars group, split over the shards, starts past 0 */
		snprintf(text, sizeof(text), "{\"weight_map\": {\"/optimizer/vars\": [\"%s\"]}}", sl);
		write_text(bad, text);
		expect_bad_store(bad, CKPT_EFORMAT, "has no variable 0");
		/* a shard holding a group the map does not give it */
		snprintf(text, sizeof(text), "{\"weight_map\": {\"/layers/dense/vars\": [\"%s\"], \"/optimizer/vars\": [\"%s\"]}}",
			s0, sl);
		write_text(bad, text);
		expect_bad_store(bad, CKPT_EFORMAT, "does not list that shard");
		snprintf(text, sizeof(text), "{\"weight_map\": {\"/optimizer/vars\": [\"../%s\"]}}", s0);
		write_text(bad, text);
		expect_bad_store(bad, CKPT_EFORMAT, "plain file name");
		write_text(bad, "{\"metadata\": {\"total_size\": 1}}");
		expect_bad_store(bad, CKPT_EFORMAT, "weight_map");
		write_text(bad, "{\"weight_map\": {\"/optimizer/vars\": [\"missing.weights.h5\"]}}");
		cr_assert_neq(ckpt_reader_open(&(ckpt_reader *){ NULL }, bad, NULL), CKPT_OK, "a missing shard was accepted");
		cr_assert_not_null(strstr(ckpt_error_last()->path ? ckpt_error_last()->path : "", "missing.weights.h5"),
			"error does not name the missing shard: %s", ckpt_error_last()->message);
		write_text(bad, "{\"weight_map\": {\"/optimizer/vars\": [\"x\"], \"/optimizer/vars\": [\"y\"]}}");
		expect_bad_store(bad, CKPT_EFORMAT, "JSON error");
		free(bad);
	}

	json_decref(manifest);
	free(mpath);
	ts_rmtree(tmp);
	free(tmp);
}

/*
 * Keras HDF5 backend: every fixture read through the public API and checked
 * against its CONTENTS.txt (names, dtypes, shapes, sha1 of the bytes),
 * detection from bytes (misnamed copies), metadata, the synthesized object
 * graph, round trips of both written layouts, every dtype, and the files we
 * write re-read by h5py and compared with a real Keras file of the same
 * layout (tests/scripts/check_keras_written.py).
 */
#include <unistd.h>
#include "keras_test.h"
#include "ckpt/sys/vfs_memory.h"

static const char *contents_of(const char *rel)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf), "%s.CONTENTS.txt", ts_fixture(rel));
	return buf;
}

Test(keras_h5, every_fixture_matches_its_dump)
{
	size_t i;
	for (i = 0; i < KT_NFIX; i++) {
		ckpt_reader *r = kt_open(ts_fixture(kt_fixtures[i].rel));
		cr_assert_str_eq(ckpt_reader_format(r), kt_fixtures[i].format, "%s", kt_fixtures[i].rel);
		cr_assert_eq(ckpt_reader_num_shards(r), 1);
		kt_check_against_contents(r, contents_of(kt_fixtures[i].rel));
		ckpt_reader_free(r);
	}
}

Test(keras_h5, detection_ignores_the_extension)
{
	char *dir = ts_tmpdir();
	char *a = ts_join(dir, "legacy_named.keras"), *b = ts_join(dir, "archive_named.weights.h5"), *c = ts_join(dir, "noext");
	ckpt_reader *r;
	cr_assert_eq(ts_copy(ts_fixture("keras/dl4j-test-resources__keras2.1.3_cnn_batchnorm.h5"), a), 0);
	cr_assert_eq(ts_copy(ts_fixture("keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras"), b), 0);
	cr_assert_eq(ts_copy(ts_fixture("keras/synthetic/SYNTHETIC_keras3_float16.weights.h5"), c), 0);
	r = kt_open(a);
	cr_assert_str_eq(ckpt_reader_format(r), "keras-h5-legacy");
	ckpt_reader_free(r);
	r = kt_open(b);
	cr_assert_str_eq(ckpt_reader_format(r), "keras-v3");
	ckpt_reader_free(r);
	r = kt_open(c);
	cr_assert_str_eq(ckpt_reader_format(r), "keras-weights-h5");
	ckpt_reader_free(r);
	ts_rmtree(dir);
	free(a); free(b); free(c); free(dir);
}

Test(keras_h5, reads_through_the_memory_vfs)
{
	ckpt_vfs *vfs;
	char *buf;
	size_t n;
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	ckpt_reader *r;
	buf = ts_read_file(ts_fixture("keras/tiny__tfkeras2.4.0_resnet_batchnorm_adam.h5"), &n);
	cr_assert(buf);
	cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
	cr_assert_eq(ckpt_vfs_memory_put(vfs, "mem/model.h5", buf, n), CKPT_OK);
	o.vfs = vfs;
	if (ckpt_reader_open(&r, "mem/model.h5", &o) != CKPT_OK)
		kt_fail_last("memory vfs");
	cr_assert_str_eq(ckpt_reader_format(r), "keras-h5-legacy");
	kt_check_against_contents(r, contents_of("keras/tiny__tfkeras2.4.0_resnet_batchnorm_adam.h5"));
	ckpt_reader_free(r);
	ckpt_vfs_free(vfs);
	free(buf);
}

Test(keras_h5, metadata_and_roles)
{
	ckpt_reader *r = kt_open(ts_fixture("keras/dl4j-test-resources__tfkeras2.4.0_embedding_conv1d_adam.hdf5"));
	size_t i, nopt = 0, nmodel = 0;
	cr_assert_str_eq(ckpt_reader_meta(r, "keras_version"), "2.4.0");
	cr_assert_str_eq(ckpt_reader_meta(r, "backend"), "tensorflow");
	cr_assert(strstr(ckpt_reader_meta(r, "model_config"), "\"Functional\""));
	cr_assert(strstr(ckpt_reader_meta(r, "training_config"), "Adam"));
	cr_assert(strstr(ckpt_reader_meta(r, "layer_names"), "\"max_pooling1d\""), "weightless layers kept");
	for (i = 0; i < ckpt_reader_num_entries(r); i++) {
		const ckpt_var_info *v = ckpt_reader_var(r, i);
		if (strncmp(v->name, "optimizer_weights/", 18) == 0) {
			cr_assert_eq(v->role, CKPT_ROLE_OPTIMIZER, "%s", v->name);
			nopt++;
		} else {
			cr_assert_eq(v->role, CKPT_ROLE_MODEL, "%s", v->name);
			nmodel++;
		}
	}
	cr_assert_eq(nopt, 11);
	cr_assert_eq(nmodel, 5);
	/* first entry: iterations counter is int64 scalar */
	cr_assert_eq(ckpt_reader_find(&i, r, "optimizer_weights/Adam/iter:0"), CKPT_OK);
	cr_assert_eq(ckpt_reader_var(r, i)->dtype, CKPT_DT_INT64);
	cr_assert_eq(ckpt_reader_var(r, i)->shape.rank, 0);
	ckpt_reader_free(r);

	/* Keras 1 weights-only: no keras_version, no backend */
	r = kt_open(ts_fixture("keras/dl4j-test-resources__keras1.2.2_lstm_tf_weightsonly.h5"));
	cr_assert_null(ckpt_reader_meta(r, "keras_version"));
	cr_assert_null(ckpt_reader_meta(r, "backend"));
	ckpt_reader_free(r);
}

Test(keras_h5, order_comes_from_attributes_and_integers)
{
	/* BatchNormalization: gamma, beta, moving_mean, moving_variance (not name order). */
	ckpt_reader *r = kt_open(ts_fixture("keras/dl4j-test-resources__keras2.1.3_cnn_batchnorm.h5"));
	static const char *const bn[] = { "gamma:0", "beta:0", "moving_mean:0", "moving_variance:0" };
	size_t i, j = 0;
	for (i = 0; i < ckpt_reader_num_entries(r) && j < 4; i++)
		if (strstr(ckpt_reader_var(r, i)->name, "batch_normalization_1/batch_normalization_1/")) {
			const char *leaf = strrchr(ckpt_reader_var(r, i)->name, '/') + 1;
			cr_assert_str_eq(leaf, bn[j], "position %zu", j);
			j++;
		}
	cr_assert_eq(j, 4);
	ckpt_reader_free(r);
	/* Keras 3 optimizer/vars/N in integer order 0..17 (HDF5 iterates 0,1,10,11,...). */
	r = kt_open(ts_fixture("keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras"));
	j = 0;
	for (i = 0; i < ckpt_reader_num_entries(r); i++)
		if (strncmp(ckpt_reader_var(r, i)->name, "optimizer/vars/", 15) == 0) {
			cr_assert_eq(atoi(ckpt_reader_var(r, i)->name + 15), (int)j, "%s", ckpt_reader_var(r, i)->name);
			j++;
		}
	cr_assert_eq(j, 18);
	ckpt_reader_free(r);
	/* chunked layer_names0/1: 360 layers in attribute order */
	r = kt_open(ts_fixture("keras/synthetic/SYNTHETIC_legacy_chunked_layer_names.h5"));
	cr_assert(strstr(ckpt_reader_var(r, 0)->name, "dense_0000_"), "%s", ckpt_reader_var(r, 0)->name);
	cr_assert(strstr(ckpt_reader_var(r, 718)->name, "dense_0359_"), "%s", ckpt_reader_var(r, 718)->name);
	ckpt_reader_free(r);
}

static const char *graph_key_for(const ckpt_object_graph *g, const char *dataset)
{
	size_t i, j;
	for (i = 0; g && i < g->nnodes; i++)
		for (j = 0; j < g->nodes[i].nattrs; j++)
			if (strcmp(g->nodes[i].attrs[j].full_name, dataset) == 0)
				return g->nodes[i].attrs[j].checkpoint_key;
	return NULL;
}

static size_t graph_nkeys(const ckpt_object_graph *g)
{
	size_t i, n = 0;
	for (i = 0; g && i < g->nnodes; i++)
		n += g->nodes[i].nattrs;
	return n;
}

/*
 * Where these keys come from: for the Keras 2 / tf.keras files (2.0.6, 2.4.0)
 * they are what tf.keras itself writes, checked against tf_keras in
 * test_keras_tf_keys.c. For Keras 3 files no TensorFlow writer gives Keras-2
 * style keys (Keras 3's own tf.train.Checkpoint names them
 * optimizer/_trainable_variables/N/...): there they are libckpt's rule,
 * the position tf.keras would give the same layer, pinned here.
 */
Test(keras_h5, object_graph_by_era)
{
	static const struct { const char *fixture, *dataset, *key; } cases[] = {
		/* tf.keras 2.4 OptimizerV2: names say which variable */
		{ "keras/dl4j-test-resources__tfkeras2.4.0_embedding_conv1d_adam.hdf5", "model_weights/conv1d/conv1d/kernel:0",
		  "layer_with_weights-1/kernel/.ATTRIBUTES/VARIABLE_VALUE" },
		{ "keras/dl4j-test-resources__tfkeras2.4.0_embedding_conv1d_adam.hdf5", "optimizer_weights/Adam/iter:0",
		  "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE" },
		{ "keras/dl4j-test-resources__tfkeras2.4.0_embedding_conv1d_adam.hdf5", "optimizer_weights/Adam/embedding/embeddings/v:0",
		  "layer_with_weights-0/embeddings/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE" },
		/* Keras 2.0.6: RMSprop accumulators by position; LSTM weights under cell */
		{ "keras/dl4j-test-resources__keras2.0.6_lstm_fullmodel_rmsprop.h5", "optimizer_weights/Variable_4:0",
		  "layer_with_weights-1/bias/.OPTIMIZER_SLOT/optimizer/rms/.ATTRIBUTES/VARIABLE_VALUE" },
		{ "keras/dl4j-test-resources__keras2.0.6_lstm_fullmodel_rmsprop.h5", "model_weights/lstm_1/lstm_1/recurrent_kernel:0",
		  "layer_with_weights-0/cell/recurrent_kernel/.ATTRIBUTES/VARIABLE_VALUE" },
		/* Keras 3 legacy h5: adam/<path>_momentum interleaved */
		{ "keras/tiny__keras3.7.0_legacy_h5_resnet_adam.h5", "optimizer_weights/adam/batch_normalization_1_beta_velocity",
		  "layer_with_weights-3/beta/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE" },
		{ "keras/tiny__keras3.7.0_legacy_h5_resnet_adam.h5", "optimizer_weights/adam/learning_rate",
		  "optimizer/learning_rate/.ATTRIBUTES/VARIABLE_VALUE" },
		/* Keras 3 .keras: config.json order, optimizer/vars positional (iteration, lr, m/v pairs) */
		{ "keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras", "layers/dense_3/vars/1",
		  "layer_with_weights-3/bias/.ATTRIBUTES/VARIABLE_VALUE" },
		{ "keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras", "optimizer/vars/5",
		  "layer_with_weights-0/bias/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE" },
		{ "keras/keras__keras3.8.0_masking_lstm_mlx.keras", "layers/lstm/cell/vars/1",
		  "layer_with_weights-0/cell/recurrent_kernel/.ATTRIBUTES/VARIABLE_VALUE" },
		/* subclassed model: keys dense..dense_3 in numeric order */
		{ "keras/keras__keras3.15.0_nested_container.keras", "layers/dense_3/vars/0",
		  "layer_with_weights-3/kernel/.ATTRIBUTES/VARIABLE_VALUE" },
		/* .weights.h5 without config: the optimizer's `name` attribute says adam */
		{ "keras/synthetic/SYNTHETIC_keras3_float16.weights.h5", "optimizer/vars/4",
		  "layer_with_weights-0/bias/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE" },
	};
	size_t i;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ckpt_reader *r = kt_open(ts_fixture(cases[i].fixture));
		const char *k = graph_key_for(ckpt_reader_object_graph(r), cases[i].dataset);
		cr_assert(k, "%s: %s not in the graph", cases[i].fixture, cases[i].dataset);
		cr_assert_str_eq(k, cases[i].key, "%s: %s", cases[i].fixture, cases[i].dataset);
		ckpt_reader_free(r);
	}
}

Test(keras_h5, ambiguous_mappings_are_noted_not_guessed)
{
	ckpt_reader *r;
	const char *notes;
	/* Keras 1: per-gate names, RMSprop accumulators in name order: nothing is placed. */
	r = kt_open(ts_fixture("keras/dl4j-test-resources__keras1.2.2_lstm_tf_fullmodel.h5"));
	cr_assert_eq(graph_nkeys(ckpt_reader_object_graph(r)), 0);
	notes = ckpt_reader_meta(r, "mapping_notes");
	cr_assert(notes && strstr(notes, "model_weights/lstm_1/lstm_1_W_i:0: unmapped"), "%s", notes ? notes : "(none)");
	cr_assert(strstr(notes, "optimizer_weights/Variable_4:0: unmapped"));
	ckpt_reader_free(r);
	/* Keras 2.1.3 model without optimizer: complete graph, no notes */
	r = kt_open(ts_fixture("keras/dl4j-test-resources__keras2.1.3_cnn_batchnorm.h5"));
	cr_assert_eq(graph_nkeys(ckpt_reader_object_graph(r)), ckpt_reader_num_entries(r));
	cr_assert_null(ckpt_reader_meta(r, "mapping_notes"));
	ckpt_reader_free(r);
	/* every other real fixture maps completely */
	{
		static const char *const full[] = { "keras/tiny__tfkeras2.4.0_resnet_batchnorm_adam.h5",
			"keras/tiny__keras3.7.0_legacy_h5_resnet_adam.h5", "keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras",
			"keras/hls4ml__tfkeras2.11.0_conv1d_weightsonly.h5" };
		size_t i;
		for (i = 0; i < 4; i++) {
			r = kt_open(ts_fixture(full[i]));
			cr_assert_eq(graph_nkeys(ckpt_reader_object_graph(r)), ckpt_reader_num_entries(r), "%s: %s",
				     full[i],
				     ckpt_reader_meta(r, "mapping_notes") ? ckpt_reader_meta(r, "mapping_notes") : "");
			ckpt_reader_free(r);
		}
	}
}

Test(keras_h5, snake_case_and_natural_order)
{
	static const char *const in[] = { "Dense", "Conv2D", "BatchNormalization", "LeakyReLU", "LSTM", "SimpleRNN", "InputLayer" };
	static const char *const want[] = { "dense", "conv2d", "batch_normalization", "leaky_re_lu", "lstm", "simple_rnn", "input_layer" };
	size_t i;
	for (i = 0; i < 7; i++) {
		char *s = ckpt__keras_snake_case(in[i]);
		cr_assert_str_eq(s, want[i]);
		ckpt__free(s);
	}
	cr_assert_lt(ckpt__keras_natcmp("dense_2", "dense_10"), 0);
	cr_assert_lt(ckpt__keras_natcmp("dense", "dense_1"), 0);
	cr_assert_gt(ckpt__keras_natcmp("vars/11", "vars/2"), 0);
}

/* ---- writing ---- */

static void copy_all(ckpt_reader *r, ckpt_writer *w, int use_tf_keys)
{
	size_t i;
	const ckpt_object_graph *g = ckpt_reader_object_graph(r);
	for (i = 0; i < ckpt_reader_num_entries(r); i++) {
		ckpt_tensor *t;
		const char *name = ckpt_reader_var(r, i)->name;
		if (use_tf_keys) {
			name = graph_key_for(g, name);
			if (!name)
				continue;
		}
		if (ckpt_reader_read(&t, r, i) != CKPT_OK)
			kt_fail_last("read");
		if (ckpt_writer_add(w, name, t, 0) != CKPT_OK)
			kt_fail_last(name);
		ckpt_tensor_free(t);
	}
}

static void copy_meta(ckpt_reader *r, ckpt_writer *w)
{
	static const char *const keys[] = { "keras_version", "backend", "model_config", "training_config", "layer_names",
		"config.json", "metadata.json" };
	size_t i;
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (ckpt_reader_meta(r, keys[i]))
			cr_assert_eq(ckpt_writer_set_meta(w, keys[i], ckpt_reader_meta(r, keys[i])), CKPT_OK);
}

/* Same entries (by name), dtypes, shapes and bytes. */
static void assert_same_content(ckpt_reader *a, ckpt_reader *b)
{
	size_t i;
	cr_assert_eq(ckpt_reader_num_entries(a), ckpt_reader_num_entries(b));
	for (i = 0; i < ckpt_reader_num_entries(a); i++) {
		size_t j;
		ckpt_tensor *ta, *tb;
		const char *n = ckpt_reader_var(a, i)->name;
		if (ckpt_reader_find(&j, b, n) != CKPT_OK)
			cr_assert_fail("'%s' missing after the round trip", n);
		cr_assert_eq(ckpt_reader_read(&ta, a, i), CKPT_OK);
		cr_assert_eq(ckpt_reader_read(&tb, b, j), CKPT_OK);
		cr_assert(ckpt_tensor_equal(ta, tb), "'%s' differs after the round trip", n);
		ckpt_tensor_free(ta);
		ckpt_tensor_free(tb);
	}
}

static void run_checker(const char *layout, const char *written, const char *reference)
{
	ts_run_result res;
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "%s %s/tests/scripts/check_keras_written.py %s '%s' '%s'", TS_PYTHON, CKPT_SOURCE_DIR, layout,
		written, reference);
	cr_assert_eq(ts_run_sh(&res, cmd), 0);
	ts_assert_exit(&res, 0, "h5py check of %s failed:\n%s%s", written, res.out, res.err);
	cr_assert(strncmp(res.out, "OK", 2) == 0, "%s", res.out);
	ts_run_free(&res);
}

static char *write_copy(const char *fixture, const char *format, const char *name, int use_tf_keys, int with_graph)
{
	char *dir = ts_tmpdir(), *out = ts_join(dir, name);
	ckpt_reader *r = kt_open(ts_fixture(fixture));
	ckpt_writer *w;
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.no_fsync = 1;
	if (ckpt_writer_open(&w, out, format, &o) != CKPT_OK)
		kt_fail_last(out);
	copy_meta(r, w);
	if (with_graph)
		cr_assert_eq(ckpt_writer_set_object_graph(w, ckpt_reader_object_graph(r)), CKPT_OK);
	copy_all(r, w, use_tf_keys);
	if (ckpt_writer_commit(w) != CKPT_OK)
		kt_fail_last("commit");
	ckpt_writer_free(w);
	ckpt_reader_free(r);
	free(dir);
	return out;
}

Test(keras_h5, legacy_round_trip_every_legacy_fixture)
{
	size_t i;
	for (i = 0; i < KT_NFIX; i++) {
		char *out;
		ckpt_reader *a, *b;
		if (strcmp(kt_fixtures[i].format, "keras-h5-legacy") != 0)
			continue;
		out = write_copy(kt_fixtures[i].rel, "keras-h5", "copy.h5", 0, 0);
		a = kt_open(ts_fixture(kt_fixtures[i].rel));
		b = kt_open(out);
		cr_assert_str_eq(ckpt_reader_format(b), "keras-h5-legacy");
		assert_same_content(a, b);
		cr_assert_str_eq(ckpt_reader_meta(b, "keras_version"), ckpt_reader_meta(a, "keras_version"));
		if (ckpt_reader_meta(a, "model_config"))
			cr_assert_str_eq(ckpt_reader_meta(b, "model_config"), ckpt_reader_meta(a, "model_config"));
		cr_assert_str_eq(ckpt_reader_meta(b, "layer_names"), ckpt_reader_meta(a, "layer_names"));
		cr_assert_eq(graph_nkeys(ckpt_reader_object_graph(b)), graph_nkeys(ckpt_reader_object_graph(a)));
		ckpt_reader_free(a);
		ckpt_reader_free(b);
		run_checker("legacy", out, ts_fixture("keras/tiny__keras3.7.0_legacy_h5_resnet_adam.h5"));
		{
			char *dir = ckpt__path_dir(out);
			ts_rmtree(dir);
			ckpt__free(dir);
		}
		free(out);
	}
}

Test(keras_h5, keras1_weights_keep_keras1_semantics)
{
	/* No keras_version in the source: Keras would read "1"; the copy must not claim Keras 2. */
	char *out = write_copy("keras/dl4j-test-resources__keras1.2.2_lstm_tf_weightsonly.h5", "keras-h5", "k1.h5", 0, 0);
	ckpt_reader *a = kt_open(ts_fixture("keras/dl4j-test-resources__keras1.2.2_lstm_tf_weightsonly.h5"));
	ckpt_reader *b = kt_open(out);
	size_t i;
	/* weights-only paths land in the same layer groups under model_weights */
	cr_assert_eq(ckpt_reader_num_entries(a), ckpt_reader_num_entries(b));
	for (i = 0; i < ckpt_reader_num_entries(a); i++) {
		char want[1024];
		ckpt_tensor *ta, *tb;
		size_t j;
		snprintf(want, sizeof(want), "model_weights/%s", ckpt_reader_var(a, i)->name);
		cr_assert_eq(ckpt_reader_find(&j, b, want), CKPT_OK, "%s", want);
		cr_assert_eq(ckpt_reader_read(&ta, a, i), CKPT_OK);
		cr_assert_eq(ckpt_reader_read(&tb, b, j), CKPT_OK);
		cr_assert(ckpt_tensor_equal(ta, tb), "%s", want);
		ckpt_tensor_free(ta);
		ckpt_tensor_free(tb);
	}
	cr_assert_null(ckpt_reader_meta(b, "keras_version"));
	cr_assert_null(ckpt_reader_meta(b, "backend"));
	ckpt_reader_free(a);
	ckpt_reader_free(b);
	free(out);
}

Test(keras_h5, legacy_from_tf_keys_through_the_graph)
{
	/* Keys as a TensorBundle would have them; the graph's full_name gives the Keras path back. */
	char *out = write_copy("keras/dl4j-test-resources__tfkeras2.4.0_embedding_conv1d_adam.hdf5", "keras-h5", "tf.h5", 1, 1);
	ckpt_reader *a = kt_open(ts_fixture("keras/dl4j-test-resources__tfkeras2.4.0_embedding_conv1d_adam.hdf5"));
	ckpt_reader *b = kt_open(out);
	assert_same_content(a, b);
	ckpt_reader_free(a);
	ckpt_reader_free(b);
	free(out);
}

Test(keras_h5, legacy_from_tf_keys_without_graph)
{
	char *dir = ts_tmpdir(), *out = ts_join(dir, "nograph.h5");
	ckpt_writer *w;
	ckpt_reader *r;
	ckpt_tensor *t;
	ckpt_shape s;
	int64_t dims[2] = { 3, 2 };
	size_t i;
	cr_assert_eq(ckpt_shape_make(&s, 2, dims), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s), CKPT_OK);
	cr_assert_eq(ckpt_writer_open(&w, out, "keras-h5", NULL), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE", t, 0), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE", t, 0), CKPT_OK);
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	ckpt_tensor_free(t);
	r = kt_open(out);
	cr_assert_eq(ckpt_reader_find(&i, r, "model_weights/layer_with_weights-0/layer_with_weights-0/kernel:0"),
		     CKPT_OK);
	cr_assert_eq(ckpt_reader_find(&i, r, "optimizer_weights/layer_with_weights-0/kernel/optimizer/m:0"), CKPT_OK);
	ckpt_reader_free(r);
	ts_rmtree(dir);
	free(out);
	free(dir);
}

Test(keras_h5, keras3_weights_round_trip_and_h5py_check)
{
	char *out = write_copy("keras/synthetic/SYNTHETIC_keras3_float16.weights.h5", "keras-weights", "w.weights.h5", 0, 0);
	ckpt_reader *a = kt_open(ts_fixture("keras/synthetic/SYNTHETIC_keras3_float16.weights.h5"));
	ckpt_reader *b = kt_open(out);
	cr_assert_str_eq(ckpt_reader_format(b), "keras-weights-h5");
	assert_same_content(a, b);
	ckpt_reader_free(a);
	ckpt_reader_free(b);
	run_checker("v3", out, ts_fixture("keras/synthetic/SYNTHETIC_keras3_float16.weights.h5"));
	free(out);
	/* from a .keras: same datasets, TF keys mapped back through the graph */
	out = write_copy("keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras", "keras-weights", "f.weights.h5", 1, 1);
	a = kt_open(ts_fixture("keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras"));
	b = kt_open(out);
	assert_same_content(a, b);
	ckpt_reader_free(a);
	ckpt_reader_free(b);
	free(out);
}

/*
 * How h5py (tests/scripts/h5_datasets.py, an independent reader) must see
 * each dtype written: HDF5 class, size, signedness, byte order, dtype
 * attribute. The two odd ones are as Keras writes them: bool is h5py's
 * numpy-bool ENUM over int8; bfloat16 is a 2-byte OPAQUE with attribute
 * dtype="bfloat16" (checked against Keras 3.15's save_weights, issue 16).
 */
static const struct { ckpt_dtype dt; const char *h5; } h5_kinds[] = {
	{ CKPT_DT_FLOAT, "FLOAT\t4\t-\tLE\t-" }, { CKPT_DT_DOUBLE, "FLOAT\t8\t-\tLE\t-" },
	{ CKPT_DT_HALF, "FLOAT\t2\t-\tLE\t-" }, { CKPT_DT_BFLOAT16, "OPAQUE\t2\t-\t-\tbfloat16" },
	{ CKPT_DT_INT8, "INTEGER\t1\t1\tLE\t-" }, { CKPT_DT_INT16, "INTEGER\t2\t1\tLE\t-" },
	{ CKPT_DT_INT32, "INTEGER\t4\t1\tLE\t-" }, { CKPT_DT_INT64, "INTEGER\t8\t1\tLE\t-" },
	{ CKPT_DT_UINT8, "INTEGER\t1\t0\tLE\t-" }, { CKPT_DT_UINT16, "INTEGER\t2\t0\tLE\t-" },
	{ CKPT_DT_UINT32, "INTEGER\t4\t0\tLE\t-" }, { CKPT_DT_UINT64, "INTEGER\t8\t0\tLE\t-" },
	{ CKPT_DT_BOOL, "ENUM\t1\t1\tLE\t-" },
};

/* The line h5_datasets.py prints for `path`, from `listing` (NULL when absent). */
static char *h5_line(const char *listing, const char *path)
{
	size_t n = strlen(path);
	for (const char *p = listing; p && *p;) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		if (len > n && strncmp(p, path, n) == 0 && p[n] == '\t')
			return strndup(p + n + 1, len - n - 1);
		p = eol ? eol + 1 : NULL;
	}
	return NULL;
}

Test(keras_h5, every_dtype_round_trips)
{
	static const ckpt_dtype dts[] = { CKPT_DT_FLOAT, CKPT_DT_DOUBLE, CKPT_DT_HALF, CKPT_DT_BFLOAT16, CKPT_DT_INT8,
		CKPT_DT_INT16, CKPT_DT_INT32, CKPT_DT_INT64, CKPT_DT_UINT8, CKPT_DT_UINT16, CKPT_DT_UINT32, CKPT_DT_UINT64,
		CKPT_DT_BOOL };
	const char *formats[] = { "keras-weights", "keras-h5" };
	size_t f, i, k;
	for (f = 0; f < 2; f++) {
		char *dir = ts_tmpdir(), *out = ts_join(dir, "dt.h5");
		ckpt_writer *w;
		ckpt_reader *r;
		ckpt_tensor *ts[13];
		cr_assert_eq(ckpt_writer_open(&w, out, formats[f], NULL), CKPT_OK);
		for (i = 0; i < 13; i++) {
			ckpt_shape s;
			int64_t dims[2] = { 2, (int64_t)i % 3 + 1 };
			char name[128];
			cr_assert_eq(ckpt_shape_make(&s, i == 4 ? 0 : 2, dims), CKPT_OK);
			cr_assert_eq(ckpt_tensor_new(&ts[i], dts[i], &s), CKPT_OK);
			for (k = 0; k < ts[i]->nbytes; k++)
				((unsigned char *)ts[i]->data)[k] = dts[i] == CKPT_DT_BOOL ? (unsigned char)(k & 1) : (unsigned char)(k * 7 + i);
			if (f == 0)
				snprintf(name, sizeof(name), "layers/l%zu/vars/0", i);
			else
				snprintf(name, sizeof(name), "model_weights/l%zu/l%zu/w:0", i, i);
			cr_assert_eq(ckpt_writer_add(w, name, ts[i], 0), CKPT_OK, "%s", ckpt_dtype_name(dts[i]));
		}
		cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
		ckpt_writer_free(w);
		/* h5py reads every dataset with the expected type and the very bytes written */
		char cmd[2048];
		ts_run_result res;
		snprintf(cmd, sizeof(cmd), "%s %s/tests/scripts/h5_datasets.py '%s'", TS_PYTHON, CKPT_SOURCE_DIR, out);
		cr_assert_eq(ts_run_sh(&res, cmd), 0);
		ts_assert_exit(&res, 0, "h5_datasets.py: %s", res.err);
		for (i = 0; i < 13; i++) {
			char name[128], sha[41], want[256], shape[32];
			if (f == 0)
				snprintf(name, sizeof(name), "layers/l%zu/vars/0", i);
			else
				snprintf(name, sizeof(name), "model_weights/l%zu/l%zu/w:0", i, i);
			char *line = h5_line(res.out, name);
			cr_assert_not_null(line, "h5py does not see %s:\n%s", name, res.out);
			kt_sha1_hex(ts[i]->data, (size_t)ts[i]->nbytes, sha);
			if (ts[i]->shape.rank == 0)
				shape[0] = '\0';
			else
				snprintf(shape, sizeof(shape), "%lld,%lld", (long long)ts[i]->shape.dims[0],
					(long long)ts[i]->shape.dims[1]);
			cr_assert_eq(h5_kinds[i].dt, dts[i]);
			snprintf(want, sizeof(want), "%s\t%s\t%s", h5_kinds[i].h5, shape, sha);
			cr_assert_str_eq(line, want, "%s (%s) as h5py reads it: %s, want %s", name, ckpt_dtype_name(dts[i]), line, want);
			free(line);
		}
		ts_run_free(&res);
		r = kt_open(out);
		cr_assert_eq(ckpt_reader_num_entries(r), 13);
		for (i = 0; i < 13; i++) {
			char name[128];
			size_t idx;
			ckpt_tensor *t;
			if (f == 0)
				snprintf(name, sizeof(name), "layers/l%zu/vars/0", i);
			else
				snprintf(name, sizeof(name), "model_weights/l%zu/l%zu/w:0", i, i);
			cr_assert_eq(ckpt_reader_find(&idx, r, name), CKPT_OK);
			cr_assert_eq(ckpt_reader_read(&t, r, idx), CKPT_OK);
			cr_assert(ckpt_tensor_equal(t, ts[i]), "%s differs", ckpt_dtype_name(dts[i]));
			ckpt_tensor_free(t);
			ckpt_tensor_free(ts[i]);
		}
		ckpt_reader_free(r);
		ts_rmtree(dir);
		free(out);
		free(dir);
	}
}

Test(keras_h5, long_lists_are_chunked_like_keras)
{
	/* 400 layers with 200-byte names: 80 KB > 64512, so layer_names0/1 FIXED chunks, as Keras writes. */
	char *dir = ts_tmpdir(), *out = ts_join(dir, "chunked.h5");
	ckpt_writer *w;
	ckpt_reader *r;
	ckpt_tensor *t;
	ckpt_shape s;
	int64_t d = 1;
	size_t i;
	cr_assert_eq(ckpt_shape_make(&s, 1, &d), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s), CKPT_OK);
	cr_assert_eq(ckpt_writer_open(&w, out, "keras-h5", NULL), CKPT_OK);
	for (i = 0; i < 400; i++) {
		char name[512], layer[256];
		snprintf(layer, sizeof(layer), "dense_%04zu_%0190d", i, 0);
		int k = snprintf(name, sizeof(name), "model_weights/%s/%s/bias:0", layer, layer);
		cr_assert(k > 0 && (size_t)k < sizeof(name));
		cr_assert_eq(ckpt_writer_add(w, name, t, 0), CKPT_OK);
	}
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	ckpt_tensor_free(t);
	r = kt_open(out);
	cr_assert_eq(ckpt_reader_num_entries(r), 400);
	cr_assert(strstr(ckpt_reader_var(r, 399)->name, "dense_0399_"));
	ckpt_reader_free(r);
	{
		ts_run_result res;
		char cmd[2048];
		snprintf(cmd, sizeof(cmd), "%s -c \"import h5py; a=h5py.File('%s')['model_weights'].attrs; "
			"print(sorted(k for k in a.keys() if k.startswith('layer_names')), a.get_id('layer_names0').get_type().is_variable_str())\"",
			TS_PYTHON, out);
		cr_assert_eq(ts_run_sh(&res, cmd), 0);
		cr_assert_str_eq(res.out, "['layer_names0', 'layer_names1'] False\n", "%s%s", res.out, res.err);
		ts_run_free(&res);
	}
	run_checker("legacy", out, ts_fixture("keras/tiny__keras3.7.0_legacy_h5_resnet_adam.h5"));
	ts_rmtree(dir);
	free(out);
	free(dir);
}

Test(keras_h5, writer_is_atomic_and_validates_names)
{
	char *dir = ts_tmpdir(), *out = ts_join(dir, "a.h5");
	ckpt_writer *w;
	ckpt_tensor *t;
	ckpt_shape s;
	int64_t d = 2;
	size_t n;
	cr_assert_eq(ckpt_shape_make(&s, 1, &d), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s), CKPT_OK);
	/* abandoned writer: nothing appears */
	cr_assert_eq(ckpt_writer_open(&w, out, "keras-h5", NULL), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "model_weights/d/d/kernel:0", t, 0), CKPT_OK);
	ckpt_writer_free(w);
	cr_assert_eq(access(out, F_OK), -1);
	/* existing file stays intact when a commit fails */
	cr_assert_eq(ts_write_file(out, "old", 3), 0);
	cr_assert_eq(ckpt_writer_open(&w, out, "keras-weights", NULL), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "layers/d/vars/1", t, 0), CKPT_OK); /* gap: no vars/0 */
	kt_assert_error(ckpt_writer_commit(w), CKPT_EINVAL, "indices must be 0..0", "vars gap");
	ckpt_writer_free(w);
	{
		char *c = ts_read_file(out, &n);
		cr_assert(c && n == 3 && memcmp(c, "old", 3) == 0);
		free(c);
	}
	/* bad names */
	cr_assert_eq(ckpt_writer_open(&w, out, "keras-h5", NULL), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "model_weights/d/../x:0", t, 0), CKPT_OK);
	kt_assert_error(ckpt_writer_commit(w), CKPT_EFORMAT, "'..'", "dotdot name");
	ckpt_writer_free(w);
	cr_assert_eq(ckpt_writer_open(&w, out, "keras-h5", NULL), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "model_weights/d/d/k:0", t, 0), CKPT_OK);
	kt_assert_error(ckpt_writer_add(w, "model_weights/d/d/k:0", t, 0), CKPT_EINVAL, "added twice", "duplicate");
	ckpt_writer_free(w);
	ckpt_tensor_free(t);
	ts_rmtree(dir);
	free(out);
	free(dir);
}

#include <pthread.h>

static void *read_all_thread(void *arg)
{
	ckpt_reader *r = arg;
	size_t i, bad = 0;
	for (i = 0; i < ckpt_reader_num_entries(r); i++) {
		const ckpt_var_info *v = ckpt_reader_var(r, i);
		void *buf = malloc(v->nbytes ? (size_t)v->nbytes : 1);
		if (ckpt_reader_read_into(r, i, buf, (size_t)v->nbytes) != CKPT_OK)
			bad++;
		free(buf);
	}
	return (void *)bad;
}

Test(keras_h5, concurrent_reads_are_serialized_safely)
{
	/* libhdf5 is not thread-safe; the backend serializes, so parallel restores work. */
	ckpt_reader *r = kt_open(ts_fixture("keras/tiny__tfkeras2.4.0_resnet_batchnorm_adam.h5"));
	pthread_t th[4];
	size_t i;
	for (i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, read_all_thread, r), 0);
	for (i = 0; i < 4; i++) {
		void *bad;
		pthread_join(th[i], &bad);
		cr_assert_eq((size_t)bad, 0);
	}
	ckpt_reader_free(r);
}

Test(keras_h5, string_and_complex_tensors_are_refused)
{
	ckpt_writer *w;
	ckpt_tensor *t;
	ckpt_shape s;
	int64_t d = 2;
	char *dir = ts_tmpdir(), *out = ts_join(dir, "s.h5");
	cr_assert_eq(ckpt_shape_make(&s, 1, &d), CKPT_OK);
	cr_assert_eq(ckpt_writer_open(&w, out, "keras-h5", NULL), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_STRING, &s), CKPT_OK);
	kt_assert_error(ckpt_writer_add(w, "model_weights/a/a/s:0", t, 0), CKPT_EUNSUPPORTED, "string", "string tensor");
	ckpt_tensor_free(t);
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_COMPLEX64, &s), CKPT_OK);
	kt_assert_error(ckpt_writer_add(w, "model_weights/a/a/c:0", t, 0), CKPT_EUNSUPPORTED, "complex64", "complex tensor");
	ckpt_tensor_free(t);
	ckpt_writer_free(w);
	kt_assert_error(ckpt_writer_open(&w, out, "keras-nonsense", NULL), CKPT_EUNSUPPORTED, "keras-nonsense", "format");
	ts_rmtree(dir);
	free(out);
	free(dir);
}

/* ---- mapping rules for eras no real fixture shows (files built with our writer) ---- */

typedef struct synth_entry {
	const char *name;
	int rank;
	int64_t d0, d1;
	ckpt_dtype dt;
} synth_entry;

static ckpt_reader *synth(const char *dir, const char *file, const synth_entry *e, size_t n, const char *training_config)
{
	char *out = ts_join(dir, file);
	ckpt_writer *w;
	ckpt_reader *r;
	size_t i;
	cr_assert_eq(ckpt_writer_open(&w, out, strstr(file, ".weights.h5") ? "keras-weights" : "keras-h5", NULL), CKPT_OK);
	if (training_config)
		cr_assert_eq(ckpt_writer_set_meta(w, "training_config", training_config), CKPT_OK);
	for (i = 0; i < n; i++) {
		ckpt_shape s;
		int64_t dims[2] = { e[i].d0, e[i].d1 };
		ckpt_tensor *t;
		cr_assert_eq(ckpt_shape_make(&s, e[i].rank, dims), CKPT_OK);
		cr_assert_eq(ckpt_tensor_new(&t, e[i].dt, &s), CKPT_OK);
		cr_assert_eq(ckpt_writer_add(w, e[i].name, t, 0), CKPT_OK, "%s", e[i].name);
		ckpt_tensor_free(t);
	}
	if (ckpt_writer_commit(w) != CKPT_OK)
		kt_fail_last(file);
	ckpt_writer_free(w);
	r = kt_open(out);
	free(out);
	return r;
}

#define F32 CKPT_DT_FLOAT
#define I64 CKPT_DT_INT64

static void expect_key(ckpt_reader *r, const char *dataset, const char *key)
{
	const char *k = graph_key_for(ckpt_reader_object_graph(r), dataset);
	if (!key) {
		cr_assert_null(k, "%s should be unmapped, got %s", dataset, k);
		cr_assert(ckpt_reader_meta(r, "mapping_notes") && strstr(ckpt_reader_meta(r, "mapping_notes"), dataset),
			"%s unmapped without a note", dataset);
		return;
	}
	cr_assert(k, "%s unmapped: %s", dataset, ckpt_reader_meta(r, "mapping_notes") ? ckpt_reader_meta(r, "mapping_notes") : "");
	cr_assert_str_eq(k, key, "%s", dataset);
}

Test(keras_h5, mapping_rules_for_other_eras)
{
	char *dir = ts_tmpdir();
	ckpt_reader *r;
	/* tf.keras 2.11-2.15 new optimizer: iteration:0, Adam/m/<var>:0, Adam/v/<var>:0 interleaved */
	static const synth_entry newopt[] = {
		{ "model_weights/dense/dense/kernel:0", 2, 2, 3, F32 }, { "model_weights/dense/dense/bias:0", 1, 3, 0, F32 },
		{ "optimizer_weights/iteration:0", 0, 0, 0, I64 },
		{ "optimizer_weights/Adam/m/dense/kernel:0", 2, 2, 3, F32 }, { "optimizer_weights/Adam/v/dense/kernel:0", 2, 2, 3, F32 },
		{ "optimizer_weights/Adam/m/dense/bias:0", 1, 3, 0, F32 }, { "optimizer_weights/Adam/v/dense/bias:0", 1, 3, 0, F32 },
	};
	/* Keras 2.1: Adam/iterations:0 then training/Adam/Variable_N = all m, all v, all vhat placeholders (1,) */
	static const synth_entry k21[] = {
		{ "model_weights/dense_1/dense_1/kernel:0", 2, 2, 3, F32 }, { "model_weights/dense_1/dense_1/bias:0", 1, 3, 0, F32 },
		{ "optimizer_weights/Adam/iterations:0", 0, 0, 0, I64 },
		{ "optimizer_weights/training/Adam/Variable:0", 2, 2, 3, F32 }, { "optimizer_weights/training/Adam/Variable_1:0", 1, 3, 0, F32 },
		{ "optimizer_weights/training/Adam/Variable_2:0", 2, 2, 3, F32 }, { "optimizer_weights/training/Adam/Variable_3:0", 1, 3, 0, F32 },
		{ "optimizer_weights/training/Adam/Variable_4:0", 1, 1, 0, F32 }, { "optimizer_weights/training/Adam/Variable_5:0", 1, 1, 0, F32 },
	};
	/* SGD with momentum, OptimizerV2 and new optimizer names */
	static const synth_entry sgd[] = {
		{ "model_weights/dense/dense/kernel:0", 2, 2, 3, F32 },
		{ "optimizer_weights/SGD/iter:0", 0, 0, 0, I64 }, { "optimizer_weights/SGD/dense/kernel/momentum:0", 2, 2, 3, F32 },
	};
	static const synth_entry sgd_new[] = {
		{ "model_weights/dense/dense/kernel:0", 2, 2, 3, F32 },
		{ "optimizer_weights/iteration:0", 0, 0, 0, I64 }, { "optimizer_weights/SGD/m/dense/kernel:0", 2, 2, 3, F32 },
	};
	/* Keras 3 store with no config and no optimizer name: the slots cannot be told apart */
	static const synth_entry k3[] = {
		{ "layers/dense/vars/0", 2, 2, 3, F32 }, { "layers/dense/vars/1", 1, 3, 0, F32 },
		{ "optimizer/vars/0", 0, 0, 0, I64 }, { "optimizer/vars/1", 0, 0, 0, F32 },
		{ "optimizer/vars/2", 2, 2, 3, F32 }, { "optimizer/vars/3", 1, 3, 0, F32 },
	};
	r = synth(dir, "newopt.h5", newopt, 7, "{\"optimizer_config\": {\"class_name\": \"Custom>Adam\", \"config\": {}}}");
	expect_key(r, "optimizer_weights/iteration:0", "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE");
	expect_key(r, "optimizer_weights/Adam/v/dense/bias:0", "layer_with_weights-0/bias/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE");
	ckpt_reader_free(r);
	r = synth(dir, "k21.h5", k21, 9, "{\"optimizer_config\": {\"class_name\": \"Adam\", \"config\": {}}}");
	expect_key(r, "optimizer_weights/Adam/iterations:0", "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE");
	expect_key(r, "optimizer_weights/training/Adam/Variable_1:0", "layer_with_weights-0/bias/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE");
	expect_key(r, "optimizer_weights/training/Adam/Variable_2:0", "layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE");
	expect_key(r, "optimizer_weights/training/Adam/Variable_4:0", NULL); /* amsgrad placeholder */
	ckpt_reader_free(r);
	r = synth(dir, "sgd.h5", sgd, 3, "{\"optimizer_config\": {\"class_name\": \"SGD\", \"config\": {}}}");
	expect_key(r, "optimizer_weights/SGD/dense/kernel/momentum:0", "layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/momentum/.ATTRIBUTES/VARIABLE_VALUE");
	ckpt_reader_free(r);
	r = synth(dir, "sgd_new.h5", sgd_new, 3, "{\"optimizer_config\": {\"class_name\": \"Custom>SGD\", \"config\": {}}}");
	expect_key(r, "optimizer_weights/SGD/m/dense/kernel:0", "layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/momentum/.ATTRIBUTES/VARIABLE_VALUE");
	ckpt_reader_free(r);
	r = synth(dir, "k3.weights.h5", k3, 6, NULL);
	expect_key(r, "layers/dense/vars/1", "layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE");
	expect_key(r, "optimizer/vars/0", "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE");
	expect_key(r, "optimizer/vars/2", NULL);
	expect_key(r, "optimizer/vars/3", NULL);
	ckpt_reader_free(r);
	ts_rmtree(dir);
	free(dir);
}

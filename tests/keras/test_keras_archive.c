/*
 * .keras archive backend: fixtures against their dumps, members exposed as
 * metadata, config.json read as data (Lambda is reported, not run), round
 * trips through the "keras" writer checked with Python's zipfile + h5py
 * (member names, order, STORED) against a real Keras archive.
 */
#include "keras_test.h"
#include "ckpt/sys/vfs_memory.h"

static const char *contents_of(const char *rel)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf), "%s.CONTENTS.txt", ts_fixture(rel));
	return buf;
}

static const char *const archives[] = {
	"keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras",
	"keras/keras__keras3.15.0_nested_container.keras",
	"keras/keras__keras3.8.0_masking_lstm_mlx.keras",
};

Test(keras_archive, fixtures_match_their_dumps)
{
	size_t i;
	for (i = 0; i < 3; i++) {
		ckpt_reader *r = kt_open(ts_fixture(archives[i]));
		cr_assert_str_eq(ckpt_reader_format(r), "keras-v3");
		kt_check_against_contents(r, contents_of(archives[i]));
		ckpt_reader_free(r);
	}
}

Test(keras_archive, members_are_metadata)
{
	ckpt_reader *r = kt_open(ts_fixture("keras/keras__keras3.15.0_nested_container.keras"));
	cr_assert_str_eq(ckpt_reader_meta(r, "metadata.json"), "{\"keras_version\": \"3.15.0\", \"date_saved\": \"2026-05-13@21:23:40\"}");
	cr_assert(strstr(ckpt_reader_meta(r, "config.json"), "\"NestedDenseModel\""));
	cr_assert_str_eq(ckpt_reader_meta(r, "keras_version"), "3.15.0");
	/* group keys are snake_case(class) + counter; the real names come from vars@name */
	cr_assert_str_eq(ckpt_reader_meta(r, "keras_layer_names"),
		"{\"layers/dense\":\"d_0\",\"layers/dense_1\":\"d_1\",\"layers/dense_2\":\"d_2\",\"layers/dense_3\":\"dense\"}");
	/* custom classes are named, never resolved */
	cr_assert(strstr(ckpt_reader_meta(r, "config_warnings"), "legacy_nested_container>NestedDenseModel"));
	ckpt_reader_free(r);
	r = kt_open(ts_fixture("keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras"));
	cr_assert(strstr(ckpt_reader_meta(r, "keras_layer_names"), "\"layers/dense_3\":\""), "%s", ckpt_reader_meta(r, "keras_layer_names"));
	ckpt_reader_free(r);
	r = kt_open(ts_fixture("keras/keras__keras3.8.0_masking_lstm_mlx.keras"));
	cr_assert_eq(ckpt_reader_num_entries(r), 3);
	cr_assert_null(ckpt_reader_meta(r, "config_warnings"));
	ckpt_reader_free(r);
}

Test(keras_archive, lambda_in_legacy_model_config_is_data)
{
	/* Keras 2.0.9 Lambda with raw marshalled bytecode: weights read, nothing executed. */
	ckpt_reader *r = kt_open(ts_fixture("keras/dl4j-test-resources__keras2.0.9_sequential_lambda.h5"));
	cr_assert_eq(ckpt_reader_num_entries(r), 4);
	cr_assert(strstr(ckpt_reader_meta(r, "model_config"), "\"Lambda\""));
	cr_assert(strstr(ckpt_reader_meta(r, "config_warnings"), "Lambda"), "%s",
		ckpt_reader_meta(r, "config_warnings") ? ckpt_reader_meta(r, "config_warnings") : "(none)");
	ckpt_reader_free(r);
}

static char *rewrite(const char *fixture, const char *dir, int keep_members)
{
	char *out = ts_join(dir, "copy.keras");
	ckpt_reader *r = kt_open(ts_fixture(fixture));
	ckpt_writer *w;
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	size_t i;
	o.no_fsync = 1;
	if (ckpt_writer_open(&w, out, "keras", &o) != CKPT_OK)
		kt_fail_last(out);
	if (keep_members) {
		cr_assert_eq(ckpt_writer_set_meta(w, "config.json", ckpt_reader_meta(r, "config.json")), CKPT_OK);
		cr_assert_eq(ckpt_writer_set_meta(w, "metadata.json", ckpt_reader_meta(r, "metadata.json")), CKPT_OK);
	}
	for (i = 0; i < ckpt_reader_num_entries(r); i++) {
		ckpt_tensor *t;
		cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK);
		cr_assert_eq(ckpt_writer_add(w, ckpt_reader_var(r, i)->name, t, 0), CKPT_OK);
		ckpt_tensor_free(t);
	}
	if (ckpt_writer_commit(w) != CKPT_OK)
		kt_fail_last("commit");
	ckpt_writer_free(w);
	ckpt_reader_free(r);
	return out;
}

Test(keras_archive, round_trip_and_zipfile_check)
{
	size_t i;
	for (i = 0; i < 3; i++) {
		char *dir = ts_tmpdir(), *out = rewrite(archives[i], dir, 1), cmd[4096];
		ckpt_reader *a = kt_open(ts_fixture(archives[i])), *b = kt_open(out);
		ts_run_result res;
		size_t k;
		cr_assert_str_eq(ckpt_reader_format(b), "keras-v3");
		cr_assert_eq(ckpt_reader_num_entries(a), ckpt_reader_num_entries(b));
		for (k = 0; k < ckpt_reader_num_entries(a); k++) {
			ckpt_tensor *ta, *tb;
			size_t j;
			cr_assert_eq(ckpt_reader_find(&j, b, ckpt_reader_var(a, k)->name), CKPT_OK);
			cr_assert_eq(ckpt_reader_read(&ta, a, k), CKPT_OK);
			cr_assert_eq(ckpt_reader_read(&tb, b, j), CKPT_OK);
			cr_assert(ckpt_tensor_equal(ta, tb), "%s", ckpt_reader_var(a, k)->name);
			ckpt_tensor_free(ta);
			ckpt_tensor_free(tb);
		}
		cr_assert_str_eq(ckpt_reader_meta(b, "config.json"), ckpt_reader_meta(a, "config.json"));
		cr_assert_str_eq(ckpt_reader_meta(b, "metadata.json"), ckpt_reader_meta(a, "metadata.json"));
		ckpt_reader_free(a);
		ckpt_reader_free(b);
		snprintf(cmd, sizeof(cmd), "%s %s/tests/scripts/check_keras_written.py keras '%s' '%s'", TS_PYTHON, CKPT_SOURCE_DIR, out,
			ts_fixture(archives[i]));
		cr_assert_eq(ts_run_sh(&res, cmd), 0);
		ts_assert_exit(&res, 0, "%s%s", res.out, res.err);
		ts_run_free(&res);
		ts_rmtree(dir);
		free(out);
		free(dir);
	}
}

Test(keras_archive, default_members_when_none_given)
{
	char *dir = ts_tmpdir(), *out = rewrite("keras/keras__keras3.8.0_masking_lstm_mlx.keras", dir, 0);
	ckpt_reader *b = kt_open(out);
	cr_assert(strstr(ckpt_reader_meta(b, "metadata.json"), "\"date_saved\""));
	cr_assert_str_eq(ckpt_reader_meta(b, "config.json"), "{}");
	cr_assert_eq(ckpt_reader_num_entries(b), 3);
	ckpt_reader_free(b);
	ts_rmtree(dir);
	free(out);
	free(dir);
}

Test(keras_archive, reads_through_the_memory_vfs)
{
	ckpt_vfs *vfs;
	size_t n;
	char *buf = ts_read_file(ts_fixture(archives[0]), &n);
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	ckpt_reader *r;
	cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
	cr_assert_eq(ckpt_vfs_memory_put(vfs, "m.bin", buf, n), CKPT_OK);
	o.vfs = vfs;
	if (ckpt_reader_open(&r, "m.bin", &o) != CKPT_OK)
		kt_fail_last("memory");
	kt_check_against_contents(r, contents_of(archives[0]));
	ckpt_reader_free(r);
	ckpt_vfs_free(vfs);
	free(buf);
}

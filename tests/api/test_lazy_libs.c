/*
 * libhdf5 and libarchive are loaded at first use (libckpt/base/dynlib.h): a
 * process that reads and writes TensorBundle, safetensors and GGUF files
 * never maps them (nor the 40 shared objects they pull in); the first Keras
 * file loads them; and a library that cannot be loaded is a clean
 * CKPT_EUNSUPPORTED naming the file and the library, never a crash.
 * Each Criterion test runs in a fresh process, so the maps start clean.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

#define KERAS_H5 "keras/dl4j-test-resources__keras2.0.9_sequential_lambda.h5"
#define KERAS_ARCHIVE "keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras"
#define TF_PREFIX "tf/tensor2tensor__transformer_test_ckpt_2shards/model.ckpt-1"
#define TF_SHORT_NAMES "tf/tensorflow__half_plus_two_v1/00000123/variables/variables" /* fit GGUF's 63 bytes */

/* 1 when a file whose name contains `lib` is mapped into this process. */
static int mapped(const char *lib)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	int found = 0;
	cr_assert_not_null(f);
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, lib) != NULL;
	fclose(f);
	return found;
}

/* Open `path`, read every entry; returns the open status. */
static int read_all(const char *path)
{
	ckpt_reader *r;
	int rc = ckpt_reader_open(&r, path, NULL);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < ckpt_reader_num_entries(r); i++) {
		ckpt_tensor *t;
		cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK, "%s: entry %zu: %s", path, i,
			     ckpt_error_last()->message);
		ckpt_tensor_free(t);
	}
	ckpt_reader_free(r);
	return CKPT_OK;
}

/* Convert `in` to `format` at `out` through the public reader and writer. */
static int convert(const char *in, const char *out, const char *format)
{
	ckpt_reader *r;
	ckpt_writer *w;
	cr_assert_eq(ckpt_reader_open(&r, in, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	int rc = ckpt_writer_open(&w, out, format, NULL);
	for (size_t i = 0; rc == CKPT_OK && i < ckpt_reader_num_entries(r); i++) {
		ckpt_tensor *t;
		cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK);
		rc = ckpt_writer_add(w, ckpt_reader_var(r, i)->name, t, 0);
		ckpt_tensor_free(t);
	}
	if (rc == CKPT_OK)
		rc = ckpt_writer_commit(w);
	if (w)
		ckpt_writer_free(w);
	ckpt_reader_free(r);
	return rc;
}

Test(lazy_libs, tensorbundle_safetensors_and_gguf_never_map_libhdf5_or_libarchive)
{
	char *dir = ts_tmpdir();
	char *st = ts_join(dir, "m.safetensors"), *gg = ts_join(dir, "m.gguf"), *tf = ts_join(dir, "ckpt-1");
	cr_assert(!mapped("libhdf5") && !mapped("libarchive"), "mapped before any call");
	cr_assert_eq(read_all(ts_fixture(TF_PREFIX)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(convert(ts_fixture(TF_SHORT_NAMES), st, "safetensors"), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(convert(st, gg, "gguf"), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(convert(gg, tf, "tf-bundle"), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(read_all(tf), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(!mapped("libhdf5"), "a TensorBundle/safetensors/GGUF process mapped libhdf5");
	cr_assert(!mapped("libarchive"), "a TensorBundle/safetensors/GGUF process mapped libarchive");
	cr_assert(!mapped("libcurl"), "libcurl is mapped (libhdf5's dependency, and ours for s3:// paths only)");
	ts_rmtree(dir);
	free(dir);
	free(st);
	free(gg);
	free(tf);
}

Test(lazy_libs, the_first_keras_file_loads_each_library_it_needs)
{
	cr_assert(!mapped("libhdf5") && !mapped("libarchive"));
	cr_assert_eq(read_all(ts_fixture(KERAS_H5)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(mapped("libhdf5"), "reading an .h5 file did not load libhdf5");
	cr_assert(!mapped("libarchive"), "an .h5 file needs no libarchive");
	cr_assert_eq(read_all(ts_fixture(KERAS_ARCHIVE)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(mapped("libarchive"), "reading a .keras archive did not load libarchive");
}

Test(lazy_libs, a_writer_to_keras_loads_libhdf5_and_its_file_reads_back)
{
	char *dir = ts_tmpdir();
	char *out = ts_join(dir, "m.weights.h5");
	cr_assert_eq(convert(ts_fixture(TF_PREFIX), out, "keras-weights"), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(mapped("libhdf5"));
	cr_assert_eq(read_all(out), CKPT_OK, "%s", ckpt_error_last()->message);
	ts_rmtree(dir);
	free(dir);
	free(out);
}

/* An unloadable library: the open fails cleanly, naming the file and the library; other formats still work. */
static void check_unloadable(const char *env, const char *fixture, const char *lib)
{
	cr_assert_eq(setenv(env, "/nonexistent/libnothere.so", 1), 0);
	const char *path = ts_fixture(fixture);
	ckpt_reader *r = (ckpt_reader *)1;
	int rc = ckpt_reader_open(&r, path, NULL);
	const ckpt_error *e = ckpt_error_last();
	cr_assert_eq(rc, CKPT_EUNSUPPORTED, "rc %d: %s", rc, e->message);
	cr_assert_null(r);
	cr_assert_eq(e->code, CKPT_EUNSUPPORTED);
	cr_assert_str_eq(e->path, path);
	cr_assert(strstr(e->message, lib) && strstr(e->message, "libnothere.so") && strstr(e->message, env),
		"message: %s", e->message);
	/* a second try says the same (the failed load is remembered, not retried into a crash) */
	cr_assert_eq(ckpt_reader_open(&r, path, NULL), CKPT_EUNSUPPORTED);
	cr_assert(strstr(ckpt_error_last()->message, lib));
	cr_assert_eq(read_all(ts_fixture(TF_PREFIX)), CKPT_OK);
}

Test(lazy_libs, an_unloadable_libhdf5_is_a_clean_error_for_h5_files_and_writers)
{
	check_unloadable("CKPT_HDF5_LIBRARY", KERAS_H5, "libhdf5");
	char *dir = ts_tmpdir();
	char *out = ts_join(dir, "m.weights.h5");
	ckpt_writer *w = (ckpt_writer *)1;
	cr_assert_eq(ckpt_writer_open(&w, out, "keras-weights", NULL), CKPT_EUNSUPPORTED);
	cr_assert(strstr(ckpt_error_last()->message, "libhdf5"), "%s", ckpt_error_last()->message);
	cr_assert_null(w);
	ts_rmtree(dir);
	free(dir);
	free(out);
}

Test(lazy_libs, an_unloadable_libarchive_is_a_clean_error_for_keras_archives)
{
	check_unloadable("CKPT_LIBARCHIVE_LIBRARY", KERAS_ARCHIVE, "libarchive");
	/* .h5 files need only libhdf5 */
	cr_assert_eq(read_all(ts_fixture(KERAS_H5)), CKPT_OK, "%s", ckpt_error_last()->message);
}

/*
 * Hostile Keras inputs (docs/formats/hostile-inputs.md items 1-12,
 * 20-28): files crafted with h5py / zipfile by
 * tests/scripts/make_keras_hostile.py, each opened through the public API
 * and expected to fail with a given code and a message that names the
 * problem; plus a truncation sweep and byte flips that must never crash.
 */
#include "keras_test.h"
#include "rel_common.h"
#include "ckpt/sys/vfs_memory.h"

typedef struct hcase {
	const char *file;
	int code;          /* CKPT_OK: must open and read */
	const char *needle;
} hcase;

static const hcase cases[] = {
	{ "ok_legacy.h5", CKPT_OK, NULL },
	{ "k3_ok.weights.h5", CKPT_OK, NULL },
	{ "ok.keras", CKPT_OK, NULL },
	/* 20 */
	{ "external_link.h5", CKPT_EUNSUPPORTED, "external link" },
	{ "soft_link.h5", CKPT_EUNSUPPORTED, "soft link" },
	{ "soft_link_dataset.h5", CKPT_EUNSUPPORTED, "soft link" },
	{ "k3_soft_link.weights.h5", CKPT_EUNSUPPORTED, "soft link" },
	{ "k3_external_link.weights.h5", CKPT_EUNSUPPORTED, "external link" },
	{ "external_storage.h5", CKPT_EUNSUPPORTED, "external storage" },
	{ "virtual.h5", CKPT_EUNSUPPORTED, "virtual dataset" },
	{ "gzip_filter.h5", CKPT_EUNSUPPORTED, "filter" },
	/* 21, 22 */
	{ "shape_bomb.h5", CKPT_EFORMAT, "shape bomb" },
	/* h5py can only store it densely (a fractal heap), which the reader refuses:
	 * libhdf5 1.10.8 decodes heap attribute messages without bounds (h5_safe.c) */
	{ "huge_attr.h5", CKPT_EUNSUPPORTED, "dense attribute storage" },
	{ "huge_vlen_attr.h5", CKPT_ELIMIT, "model_config" },
	/* 9, 10, 12 */
	{ "dotdot_weight_name.h5", CKPT_EFORMAT, "'..'" },
	{ "absolute_layer_name.h5", CKPT_EFORMAT, "absolute" },
	{ "duplicate_weight.h5", CKPT_EFORMAT, "listed twice" },
	{ "k3_vars_leading_zero.weights.h5", CKPT_EFORMAT, "vars/01" },
	{ "k3_vars_sign.weights.h5", CKPT_EFORMAT, "vars/+0" },
	{ "k3_vars_gap.weights.h5", CKPT_EFORMAT, "vars/2" },
	{ "k3_vars_text.weights.h5", CKPT_EFORMAT, "vars/kernel" },
	{ "k3_deep.weights.h5", CKPT_ELIMIT, "deeper than" },
	/* 8 */
	{ "truncated.weights.h5", CKPT_EFORMAT, "HDF5" },
	{ "target.h5", CKPT_EFORMAT, "not a Keras layout" },
	/* 24-27 */
	{ "dotdot.keras", CKPT_EFORMAT, "'..'" },
	{ "absolute.keras", CKPT_EFORMAT, "absolute path" },
	{ "backslash.keras", CKPT_EFORMAT, "backslash" },
	{ "symlink.keras", CKPT_EUNSUPPORTED, "symbolic link" },
	{ "duplicate.keras", CKPT_EFORMAT, "duplicate zip member 'config.json'" },
	{ "missing_weights.keras", CKPT_EFORMAT, "missing zip member 'model.weights.h5'" },
	{ "encrypted.keras", CKPT_EUNSUPPORTED, "encrypted" },
	{ "huge_declared.keras", CKPT_EFORMAT, "model.weights.h5" },
	{ "bad_json.keras", CKPT_EFORMAT, "config.json" },
	{ "npz.keras", CKPT_EUNSUPPORTED, "npz" },
	{ "legacy_member.keras", CKPT_EFORMAT, "not a Keras 3 weights store" },
	{ "truncated.keras", CKPT_EFORMAT, "zip" },
};

static char *make_files(void)
{
	char *dir = ts_tmpdir(), cmd[2048];
	ts_run_result res;
	snprintf(cmd, sizeof(cmd), "%s %s/tests/scripts/make_keras_hostile.py '%s'", TS_PYTHON, CKPT_SOURCE_DIR, dir);
	cr_assert_eq(ts_run_sh(&res, cmd), 0);
	ts_assert_exit(&res, 0, "make_keras_hostile.py failed:\n%s%s", res.out, res.err);
	ts_run_free(&res);
	return dir;
}

/*
 * Open and read every entry; returns the first failing status. The error
 * slot is cleared before each call, so the error seen afterwards is the
 * failing call's own.
 */
static int open_and_read(const char *path, ckpt_vfs *vfs)
{
	ckpt_reader *r;
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	size_t i;
	int rc;
	o.vfs = vfs;
	ckpt_error_clear();
	rc = ckpt_reader_open(&r, path, &o);
	if (rc != CKPT_OK)
		return rc;
	for (i = 0; i < ckpt_reader_num_entries(r) && rc == CKPT_OK; i++) {
		ckpt_tensor *t;
		ckpt_error_clear();
		rc = ckpt_reader_read(&t, r, i);
		if (rc == CKPT_OK)
			ckpt_tensor_free(t);
	}
	ckpt_reader_free(r);
	return rc;
}

Test(keras_hostile, every_crafted_file_is_rejected_clearly, .timeout = 120)
{
	char *dir = make_files();
	size_t i;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *p = ts_join(dir, cases[i].file);
		int rc;
		ckpt_error_clear();
		rc = open_and_read(p, NULL);
		if (cases[i].code == CKPT_OK) {
			if (rc != CKPT_OK)
				kt_fail_last(p);
		} else {
			kt_assert_error(rc, cases[i].code, cases[i].needle, cases[i].file);
			cr_assert(ckpt_error_last()->path && strstr(ckpt_error_last()->path, cases[i].file),
				"%s: error path '%s'", cases[i].file, ckpt_error_last()->path ? ckpt_error_last()->path : "(null)");
		}
		free(p);
	}
	{
		/* Lambda in config.json: opened as data, reported, never run */
		char *p = ts_join(dir, "lambda.keras");
		ckpt_reader *r = kt_open(p);
		cr_assert(strstr(ckpt_reader_meta(r, "config_warnings"), "Lambda 'evil_lambda' (code not executed)"), "%s",
			ckpt_reader_meta(r, "config_warnings") ? ckpt_reader_meta(r, "config_warnings") : "(none)");
		cr_assert_eq(ckpt_reader_num_entries(r), 1);
		ckpt_reader_free(r);
		free(p);
	}
	ts_rmtree(dir);
	free(dir);
}

/* Every prefix of a small file (memory VFS): an error or a clean open, never a crash. */
static void truncation_sweep(const char *rel, size_t step)
{
	size_t n, k, ncut = 0;
	char *buf = ts_read_file(ts_fixture(rel), &n);
	ckpt_vfs *vfs;
	cr_assert(buf);
	cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
	for (k = 0; k < n; k += step) {
		int rc;
		const ckpt_error *e;
		cr_assert_eq(ckpt_vfs_memory_put(vfs, "t", buf, k), CKPT_OK);
		rc = open_and_read("t", vfs);
		e = ckpt_error_last();
		cr_assert_lt(rc, 0, "%s cut to %zu bytes opened fine", rel, k);
		cr_assert_eq(e->code, rc, "%s cut to %zu: %s recorded no error of its own", rel, k, ckpt_status_name(rc));
		cr_assert(e->message && *e->message, "%s cut to %zu: empty message", rel, k);
		cr_assert(e->path && strcmp(e->path, "t") == 0, "%s cut to %zu: error names '%s', not the file", rel, k,
			e->path ? e->path : "(null)");
		ncut++;
	}
	cr_assert_eq(ncut, (n + step - 1) / step);
	cr_assert_geq(ncut, 600, "%s: only %zu cuts", rel, ncut);
	ckpt_vfs_free(vfs);
	free(buf);
}

Test(keras_hostile, truncated_prefixes_fail_cleanly, .timeout = 120)
{
	truncation_sweep("keras/hls4ml__tfkeras2.11.0_conv1d_weightsonly.h5", 13);
	truncation_sweep("keras/keras__keras3.15.0_nested_container.keras", 17);
}

/*
 * Four random bit flips per case: never a crash; a failure records its own
 * error; libckpt's own blocks all come back (the counting allocator sees
 * every one). LeakSanitizer stays on: tests/lsan.supp names the few libhdf5
 * internals that leak on corrupt files, nothing of ours.
 */
Test(keras_hostile, flipped_bytes_never_crash, .timeout = 120)
{
	static const char *const rels[] = { "keras/hls4ml__tfkeras2.11.0_conv1d_weightsonly.h5",
		"keras/synthetic/SYNTHETIC_keras3_float16.weights.h5", "keras/keras__keras3.15.0_nested_container.keras" };
	size_t f, failed = 0;
	unsigned seed = 12345;
	if (rel_rerun_where_malloc_may_fail())
		return;
	rel_alloc_install(0, 0);
	for (f = 0; f < 3; f++) {
		size_t n, it;
		char *orig = ts_read_file(ts_fixture(rels[f]), &n), *buf = malloc(n);
		ckpt_vfs *vfs;
		cr_assert(orig && buf);
		cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
		for (it = 0; it < 300; it++) {
			int k;
			memcpy(buf, orig, n);
			for (k = 0; k < 4; k++) {
				seed = seed * 1103515245u + 12345u;
				buf[(seed >> 8) % n] ^= (char)(1u << ((seed >> 4) & 7));
			}
			cr_assert_eq(ckpt_vfs_memory_put(vfs, "f", buf, n), CKPT_OK);
			long live = rel_live_blocks;
			int rc = open_and_read("f", vfs); /* a flip may be harmless: either status, judged below */
			cr_assert_eq(rel_live_blocks, live, "%s case %zu: %ld libckpt blocks leaked", rels[f], it,
				rel_live_blocks - live);
			if (rc < 0) {
				cr_assert_eq(ckpt_error_last()->code, rc, "%s case %zu: no error of its own", rels[f], it);
				cr_assert(ckpt_error_last()->message[0], "%s case %zu: empty message", rels[f], it);
				failed++;
			}
		}
		ckpt_vfs_free(vfs);
		free(buf);
		free(orig);
	}
	rel_alloc_restore();
	cr_assert_gt(failed, 0, "no flip was detected");
}

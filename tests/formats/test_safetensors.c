/*
 * safetensors backend: files the reference writer (PyPI safetensors) wrote are
 * read exactly and rewritten byte for byte; what we write is read back by
 * safetensors.numpy / safe_open and tests/scripts/st_check.py; every
 * validation rule has a handcrafted case that fails with its code, the file,
 * the tensor and the byte offset; and truncation / mutation sweeps over a
 * reference-written file never crash.
 */
#include "flat_test.h"

/* ---- reading what the reference wrote ---- */

Test(safetensors, reads_reference_files_exactly, .timeout = 120)
{
	json_t *m;
	char *dir = ft_reference_files(&m);
	const char *files[] = { "ref.safetensors", "ref_meta.safetensors" };
	for (size_t f = 0; f < 2; f++) {
		char *p = ts_join(dir, files[f]);
		ckpt_reader *r;
		json_t *item = json_object_get(m, files[f]), *meta = json_object_get(item, "metadata");
		if (ckpt_reader_open(&r, p, NULL) != CKPT_OK)
			ft_fail_last(p);
		cr_assert_str_eq(ckpt_reader_format(r), "safetensors");
		ft_check_reader(r, json_object_get(item, "tensors"), files[f]);
		if (json_is_object(meta)) {
			json_t *got = json_loads(ckpt_reader_meta(r, "safetensors.metadata"), 0, NULL);
			cr_assert(json_equal(got, meta), "__metadata__ differs: %s", ckpt_reader_meta(r, "safetensors.metadata"));
			json_decref(got);
		} else {
			cr_assert_null(ckpt_reader_meta(r, "safetensors.metadata"));
		}
		/* file order: the reference sorts by dtype, largest first: the u64 comes first */
		if (f == 0)
			cr_assert_str_eq(ckpt_reader_var(r, 0)->name, "ids.u64");
		ckpt_reader_free(r);
		free(p);
	}
	json_decref(m);
	ts_rmtree(dir);
	free(dir);
}

/* Read a reference file, write it again with our writer: the bytes are the reference's. */
Test(safetensors, rewrites_reference_files_byte_for_byte, .timeout = 120)
{
	json_t *m;
	char *dir = ft_reference_files(&m);
	const char *files[] = { "ref.safetensors", "ref_meta.safetensors" };
	const char *meta_keys[] = { "safetensors.metadata" };
	for (size_t f = 0; f < 2; f++) {
		char *p = ts_join(dir, files[f]), *q = ts_join(dir, "ours.safetensors");
		/* added last to first: the writer sorts as the reference does */
		ft_rewrite_matches(p, q, "safetensors", meta_keys, 1, 1, "the reference writer's");
		free(p);
		free(q);
	}
	json_decref(m);
	ts_rmtree(dir);
	free(dir);
}

/* ---- the reference reads what we write ---- */

static void add_tensor(ckpt_writer *w, json_t *list, const char *name, ckpt_dtype dt, const char *stname, int rank,
	const int64_t *dims)
{
	ckpt_shape s;
	ckpt_tensor *t;
	json_t *shape = json_array();
	cr_assert_eq(ckpt_shape_make(&s, rank, dims), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&t, dt, &s), CKPT_OK);
	for (uint64_t i = 0; i < t->nbytes; i++)
		((unsigned char *)t->data)[i] = (unsigned char)(i * 37 + strlen(name));
	if (dt == CKPT_DT_BOOL)
		for (uint64_t i = 0; i < t->nbytes; i++)
			((unsigned char *)t->data)[i] &= 1;
	for (int d = 0; d < rank; d++)
		json_array_append_new(shape, json_integer(dims[d]));
	json_array_append_new(list, json_pack("{s:s,s:s,s:o,s:I,s:I}", "name", name, "dtype", stname, "shape", shape,
		"bytes", (json_int_t)t->nbytes, "crc32", (json_int_t)ckpt_tensor_crc32(t)));
	if (ckpt_writer_add(w, name, t, 0) != CKPT_OK)
		ft_fail_last(name);
	ckpt_tensor_free(t);
}

Test(safetensors, reference_reads_what_we_write, .timeout = 120)
{
	char *dir = ts_tmpdir(), *p = ts_join(dir, "ours.safetensors"), *mp = ts_join(dir, "check.json"), *out;
	char cmd[4096];
	ckpt_writer *w;
	json_t *list = json_array(), *item;
	int64_t d23[] = { 2, 3 }, d4[] = { 4 }, d0[] = { 0, 5 }, d222[] = { 2, 2, 2 };
	ts_run_result rr;
	cr_assert_eq(ckpt_writer_open(&w, p, "safetensors", NULL), CKPT_OK);
	cr_assert_eq(ckpt_writer_set_meta(w, "safetensors.metadata", "{\"format\": \"pt\", \"written_by\": \"libckpt\"}"),
		CKPT_OK);
	add_tensor(w, list, "layer.0.weight", CKPT_DT_FLOAT, "float32", 2, d23);
	add_tensor(w, list, "layer.0.bias", CKPT_DT_FLOAT, "float32", 1, d4);
	add_tensor(w, list, "w64", CKPT_DT_DOUBLE, "float64", 3, d222);
	add_tensor(w, list, "h", CKPT_DT_HALF, "float16", 2, d23);
	add_tensor(w, list, "step", CKPT_DT_INT64, "int64", 0, NULL);
	add_tensor(w, list, "i32", CKPT_DT_INT32, "int32", 1, d4);
	add_tensor(w, list, "i16", CKPT_DT_INT16, "int16", 1, d4);
	add_tensor(w, list, "i8", CKPT_DT_INT8, "int8", 1, d4);
	add_tensor(w, list, "u8", CKPT_DT_UINT8, "uint8", 1, d4);
	add_tensor(w, list, "u16", CKPT_DT_UINT16, "uint16", 1, d4);
	add_tensor(w, list, "u32", CKPT_DT_UINT32, "uint32", 1, d4);
	add_tensor(w, list, "u64", CKPT_DT_UINT64, "uint64", 1, d4);
	add_tensor(w, list, "flag", CKPT_DT_BOOL, "bool", 1, d4);
	add_tensor(w, list, "z", CKPT_DT_COMPLEX64, "complex64", 1, d4);
	add_tensor(w, list, "empty", CKPT_DT_FLOAT, "float32", 2, d0);
	/* a TF key goes in under its flat name */
	add_tensor(w, list, "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_FLOAT, "float32", 2, d23);
	json_string_set(json_object_get(json_array_get(list, json_array_size(list) - 1), "name"), "model.dense.kernel");
	if (ckpt_writer_commit(w) != CKPT_OK)
		ft_fail_last("commit");
	ckpt_writer_free(w);

	/* safetensors.numpy names dtypes as numpy does; the checker wants the safetensors names */
	{
		static const char *const np2st[][2] = { { "float32", "F32" }, { "float64", "F64" }, { "float16", "F16" },
			{ "int64", "I64" }, { "int32", "I32" }, { "int16", "I16" }, { "int8", "I8" }, { "uint8", "U8" },
			{ "uint16", "U16" }, { "uint32", "U32" }, { "uint64", "U64" }, { "bool", "BOOL" },
			{ "complex64", "C64" } };
		size_t i;
		json_t *t;
		json_array_foreach(list, i, t) {
			for (size_t k = 0; k < sizeof(np2st) / sizeof(np2st[0]); k++)
				if (strcmp(json_string_value(json_object_get(t, "dtype")), np2st[k][0]) == 0) {
					json_object_set_new(t, "dtype", json_string(np2st[k][1]));
					break;
				}
		}
	}
	item = json_pack("[{s:s,s:s,s:O,s:{s:s,s:s}}]", "file", p, "format", "safetensors", "tensors", list, "metadata",
		"format", "pt", "written_by", "libckpt");
	cr_assert_eq(json_dump_file(item, mp, 0), 0);
	out = ft_oracle("flat_check.py", mp);
	cr_assert(strstr(out, "OK "), "%s", out);
	free(out);

	/* the project's standard-library checker (tests/scripts/st_check.py) applies the same rules and prints a crc32 per tensor */
	snprintf(cmd, sizeof(cmd), "%s %s/tests/scripts/st_check.py '%s'", TS_PYTHON, CKPT_SOURCE_DIR, p);
	cr_assert_eq(ts_run_sh(&rr, cmd), 0);
	ts_assert_exit(&rr, 0, "st_check.py: %s %s", rr.out, rr.err);
	{
		json_t *d = json_loads(rr.out, 0, NULL), *vars = json_object_get(d, "variables"), *v, *t;
		size_t i, k;
		cr_assert(json_is_array(vars), "%s", rr.out);
		cr_assert_eq(json_array_size(vars), json_array_size(list));
		json_array_foreach(list, i, t) {
			int found = 0;
			json_array_foreach(vars, k, v) {
				if (strcmp(json_string_value(json_object_get(v, "name")), json_string_value(json_object_get(t, "name"))))
					continue;
				found = 1;
				cr_assert_eq(json_integer_value(json_object_get(v, "bytes")), json_integer_value(json_object_get(t, "bytes")));
				cr_assert(json_equal(json_object_get(v, "shape"), json_object_get(t, "shape")));
				{
					char want[16];
					const char *got = json_string_value(json_object_get(v, "crc32"));
					snprintf(want, sizeof(want), "%08llx", (unsigned long long)json_integer_value(json_object_get(t, "crc32")));
					cr_assert(got && strstr(got, want), "%s: crc %s, want %s", json_string_value(json_object_get(t, "name")),
						got ? got : "null", want);
				}
			}
			cr_assert(found, "st_check.py lacks %s", json_string_value(json_object_get(t, "name")));
		}
		json_decref(d);
	}
	ts_run_free(&rr);
	/* and it can fail: one byte past the last tensor makes the same file invalid */
	{
		size_t n;
		char *bytes = ts_read_file(p, &n), *longer = ts_join(dir, "longer.safetensors");
		cr_assert_not_null(bytes);
		bytes[n] = 'x';
		cr_assert_eq(ts_write_file(longer, bytes, n + 1), 0);
		snprintf(cmd, sizeof(cmd), "%s %s/tests/scripts/st_check.py '%s'", TS_PYTHON, CKPT_SOURCE_DIR, longer);
		cr_assert_eq(ts_run_sh(&rr, cmd), 0);
		cr_assert(rr.status == 1 && strstr(rr.out, "INVALID"), "st_check.py accepts a trailing byte: %s", rr.out);
		ts_run_free(&rr);
		free(bytes);
		free(longer);
	}
	json_decref(item);
	json_decref(list);
	ts_rmtree(dir);
	free(dir);
	free(p);
	free(mp);
}

Test(safetensors, writer_refuses_what_it_cannot_store)
{
	char *dir = ts_tmpdir(), *p = ts_join(dir, "x.safetensors");
	ckpt_writer *w;
	ckpt_tensor *t;
	ckpt_shape s = { 0 };
	ckpt_bytes e = { 1, "a" };
	int exists = 1;
	cr_assert_eq(ckpt_writer_open(&w, p, "safetensors", NULL), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new_strings(&t, &s, &e), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "s", t, 0), CKPT_EUNSUPPORTED);
	ckpt_tensor_free(t);
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_COMPLEX128, &s), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "c", t, 0), CKPT_EUNSUPPORTED);
	cr_assert(strstr(ckpt_error_last()->message, "complex128"));
	ckpt_tensor_free(t);
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "__metadata__", t, 0), CKPT_EINVAL);
	cr_assert_eq(ckpt_writer_add(w, "x", t, 0), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "x", t, 0), CKPT_EINVAL);
	cr_assert_eq(ckpt_writer_add(w, "bad\xff", t, 0), CKPT_EINVAL);
	ckpt_tensor_free(t);
	ckpt_writer_free(w); /* never committed: nothing appears */
	cr_assert_not(ckpt_vfs_exists(&exists, ckpt_vfs_default(), p));
	ts_rmtree(dir);
	free(dir);
	free(p);
}

/* ---- hostile inputs: one handcrafted case per rule ---- */

/* 8-byte size + header + `data` zero bytes; the size field says `declared` (or the header length when -1). */
static unsigned char *st_file(const char *header, size_t data, long long declared, size_t *n)
{
	size_t hl = strlen(header);
	unsigned long long d = declared < 0 ? hl : (unsigned long long)declared;
	unsigned char *b = calloc(1, 8 + hl + data + 1);
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(d >> (8 * i));
	memcpy(b + 8, header, hl);
	*n = 8 + hl + data;
	return b;
}

static void st_case(const char *header, size_t data, int code, const char *var, int64_t offset, const char *msg)
{
	size_t n;
	unsigned char *b = st_file(header, data, -1, &n);
	ft_expect_error(b, n, code, var, offset, msg, header);
	free(b);
}

/* offset of `"name"` in the header, as the reader reports it */
static int64_t at_key(const char *header, const char *name)
{
	char q[256];
	snprintf(q, sizeof(q), "\"%s\"", name);
	return 8 + (int64_t)(strstr(header, q) - header);
}

Test(safetensors_hostile, header_size_rules)
{
	size_t n;
	unsigned char *b;
	ft_expect_error("\x10\0\0\0", 4, CKPT_EUNSUPPORTED, NULL, -2, "not a recognized", "4-byte file (no bid)");
	b = st_file("{}", 0, 100000001, &n);
	ft_expect_error(b, n, CKPT_ELIMIT, NULL, 0, "100000000", "header above 100 MB");
	free(b);
	b = st_file("{\"a\":1}", 0, 4096, &n);
	ft_expect_error(b, n, CKPT_EFORMAT, NULL, 0, "runs past the end of the file", "header beyond the file");
	free(b);
}

Test(safetensors_hostile, header_json_rules)
{
	const char *h;
	h = "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}";
	st_case(h, 4, CKPT_EFORMAT, NULL, 8 + (int64_t)strlen(h), "not valid UTF-8 JSON"); /* unterminated */
	st_case("{\"a\xff\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, CKPT_EFORMAT, NULL, 8 + 3,
		"not valid UTF-8 JSON");
	st_case("{\"a\\u0000b\": {}}", 0, CKPT_EFORMAT, NULL, 8 + 11, "NUL byte");
	st_case("{} trailing", 0, CKPT_EFORMAT, NULL, 8 + 11, "end of file expected");
	h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
	    "\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}";
	st_case(h, 8, CKPT_EFORMAT, "w", 8 + (int64_t)(strrchr(h, 'w') - 1 - h), "duplicate key 'w'");
	h = "{\"__metadata__\": {\"k\": 1}}";
	st_case(h, 0, CKPT_EFORMAT, "__metadata__", 8 + 1, "not a string");
	h = "{\"__metadata__\": [\"k\"]}";
	st_case(h, 0, CKPT_EFORMAT, "__metadata__", 8 + 1, "not an object");
	h = "{\"w\": [1]}";
	st_case(h, 0, CKPT_EFORMAT, "w", 9, "not an object");
	h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4], \"crc\": 1}}";
	st_case(h, 4, CKPT_EFORMAT, "w", 9, "unexpected field 'crc'");
	h = "{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, \"\": {\"dtype\": \"F32\", \"shape\": [1], "
	    "\"data_offsets\": [4, 8]}}";
	st_case(h, 8, CKPT_EFORMAT, NULL, at_key(h, ""), "tensor name of 0 bytes");
}

Test(safetensors_hostile, tensor_entry_rules)
{
	const char *h;
	h = "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, \"w\": {\"dtype\": \"F7\", \"shape\": [1], "
	    "\"data_offsets\": [4, 8]}}";
	st_case(h, 8, CKPT_EFORMAT, "w", at_key(h, "w"), "unknown dtype 'F7'");
	h = "{\"w\": {\"dtype\": \"F8_E8M0\", \"shape\": [1], \"data_offsets\": [0, 1]}}";
	st_case(h, 1, CKPT_EUNSUPPORTED, "w", 9, "F8_E8M0");
	h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]}}";
	st_case(h, 20, CKPT_EFORMAT, "w", 9, "hold 20 bytes, shape [2, 3] of F32 needs 24");
	h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [4611686018427387904, 8], \"data_offsets\": [0, 4]}}";
	st_case(h, 4, CKPT_EFORMAT, "w", 9, "overflows 64 bits");
	h = "{\"w\": {\"dtype\": \"F64\", \"shape\": [4611686018427387904], \"data_offsets\": [0, 4]}}";
	st_case(h, 4, CKPT_EFORMAT, "w", 9, "overflows 64 bits");
	h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}";
	st_case(h, 4, CKPT_EFORMAT, "w", 9, "not an integer >= 0");
	h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}";
	st_case(h, 4, CKPT_EFORMAT, "w", 9, "not an integer >= 0");
	h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], "
	    "\"data_offsets\": [0, 4]}}";
	st_case(h, 4, CKPT_EFORMAT, "w", 9, "rank 33");
	h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 0]}}";
	st_case(h, 4, CKPT_EFORMAT, "w", 9, "end before they begin");
	h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}";
	st_case(h, 4, CKPT_EFORMAT, "w", 9, "not [BEGIN, END]");
	h = "{\"w\": {\"dtype\": \"F32\", \"shape\": 1, \"data_offsets\": [0, 4]}}";
	st_case(h, 4, CKPT_EFORMAT, "w", 9, "shape array");
	h = "{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}";
	st_case(h, 4, CKPT_EFORMAT, "w", 9, "string dtype");
}

Test(safetensors_hostile, buffer_layout_rules)
{
	const char *h;
	size_t hl;
	/* data offsets in messages are absolute: 8 + header size + BEGIN */
	h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}";
	hl = strlen(h);
	st_case(h, 8, CKPT_EFORMAT, "w", (int64_t)(8 + hl), "hole of 4 bytes");
	h = "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"b\": {\"dtype\": \"F32\", \"shape\": [2], "
	    "\"data_offsets\": [4, 12]}}";
	hl = strlen(h);
	st_case(h, 12, CKPT_EFORMAT, "b", (int64_t)(8 + hl + 4), "overlaps tensor 'a'");
	h = "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"b\": {\"dtype\": \"F32\", \"shape\": [2], "
	    "\"data_offsets\": [0, 8]}}";
	st_case(h, 8, CKPT_EFORMAT, "b", -2, "overlaps tensor 'a'");
	h = "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
	hl = strlen(h);
	st_case(h, 9, CKPT_EFORMAT, "a", (int64_t)(8 + hl + 8), "1 trailing bytes");
	st_case(h, 5, CKPT_EFORMAT, "a", (int64_t)(8 + hl), "runs past the end of the file");
	st_case("{}", 3, CKPT_EFORMAT, NULL, 10, "3 trailing bytes");
}

Test(safetensors_hostile, metadata_and_empty_files_are_fine)
{
	size_t n;
	const char *h = "{\"__metadata__\": {\"a\": \"b\"}, \"e\": {\"dtype\": \"F32\", \"shape\": [0, 3], \"data_offsets\": [0, 0]}, "
			"\"s\": {\"dtype\": \"I64\", \"shape\": [], \"data_offsets\": [0, 8]}}   ";
	unsigned char *b = st_file(h, 8, -1, &n);
	cr_assert_eq(ft_open_any(b, n), CKPT_OK, "%s", ckpt_error_last()->message);
	free(b);
	b = st_file("{}", 0, -1, &n);
	cr_assert_eq(ft_open_any(b, n), CKPT_OK, "%s", ckpt_error_last()->message);
	free(b);
}

/* ---- sweeps over a file the reference wrote ---- */

Test(safetensors_hostile, truncation_and_mutation_sweep, .timeout = 300)
{
	json_t *m;
	char *dir = ft_reference_files(&m), *p = ts_join(dir, "ref.safetensors");
	size_t n, step, hl, fails = 0, tried = 0;
	unsigned char *f = (unsigned char *)ts_read_file(p, &n);
	static const unsigned char vals[] = { 0x00, 0xff, '"', '9', ' ', '{', ',', 0x80 };
	cr_assert(f && n > 64);
	hl = f[0] | (size_t)f[1] << 8;
	/* every proper prefix is refused with a clear error */
	step = ft_sweep_step(n);
	for (size_t k = 0; k < n; k += step) {
		int rc = ft_open_any(f, k);
		cr_assert(rc < 0, "prefix of %zu / %zu bytes accepted", k, n);
		cr_assert(rc == CKPT_EFORMAT || rc == CKPT_EUNSUPPORTED || rc == CKPT_ELIMIT, "prefix %zu: %s", k,
			ckpt_status_name(rc));
	}
	/* every header byte and the size field, each set to a few values */
	fails = ft_mutate_header(&tried, f, n, 8 + hl, vals, sizeof(vals));
	cr_assert(fails > tried / 2, "only %zu of %zu header mutations refused", fails, tried);
	free(f);
	free(p);
	json_decref(m);
	ts_rmtree(dir);
	free(dir);
}

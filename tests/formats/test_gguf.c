/*
 * GGUF backend: files gguf-py's GGUFWriter wrote (every value type, float,
 * integer, BF16 and Q8_0 / Q4_0 tensors, a vocabulary-only file) are read
 * exactly and rewritten byte for byte; gguf.GGUFReader reads what we write
 * (names, ggml types, ne order, bytes, typed key-value pairs); every
 * validation rule has a handcrafted case naming the file, the key or tensor
 * and the offset; truncation / mutation sweeps never crash.
 */
#include "flat_test.h"

/* ---- a tiny GGUF byte builder ---- */

typedef struct gbuf {
	unsigned char *p;
	size_t n, cap;
} gbuf;

static void gb_bytes(gbuf *b, const void *s, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void gb_le(gbuf *b, uint64_t v, int n)
{
	unsigned char x[8];
	for (int i = 0; i < n; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	gb_bytes(b, x, (size_t)n);
}

static void gb_str(gbuf *b, const char *s)
{
	gb_le(b, strlen(s), 8);
	gb_bytes(b, s, strlen(s));
}

static void gb_head(gbuf *b, uint32_t version, uint64_t nt, uint64_t nkv)
{
	gb_bytes(b, "GGUF", 4);
	gb_le(b, version, 4);
	gb_le(b, nt, 8);
	gb_le(b, nkv, 8);
}

static void gb_kv_u32(gbuf *b, const char *key, uint32_t v)
{
	gb_str(b, key);
	gb_le(b, 4, 4);
	gb_le(b, v, 4);
}

static void gb_ti(gbuf *b, const char *name, uint32_t ndims, const uint64_t *ne, uint32_t type, uint64_t off)
{
	gb_str(b, name);
	gb_le(b, ndims, 4);
	for (uint32_t d = 0; d < ndims; d++)
		gb_le(b, ne[d], 8);
	gb_le(b, type, 4);
	gb_le(b, off, 8);
}

static void gb_pad(gbuf *b, size_t align, size_t data)
{
	static const unsigned char z[64];
	while (b->n % align)
		gb_bytes(b, z, 1);
	for (size_t i = 0; i < data; i++)
		gb_bytes(b, z, 1);
}

static void expect(gbuf *b, int code, const char *var, int64_t off, const char *msg, const char *what)
{
	ft_expect_error(b->p, b->n, code, var, off, msg, what);
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- reading what gguf-py wrote ---- */

static void check_kv(ckpt_reader *r, json_t *want, const char *file)
{
	json_t *got = json_loads(ckpt_reader_meta(r, "gguf.kv"), 0, NULL), *w;
	size_t i;
	cr_assert(json_is_array(got), "%s: no gguf.kv", file);
	json_array_foreach(want, i, w) {
		const char *key = json_string_value(json_array_get(w, 0));
		const char *type = json_string_value(json_array_get(w, 1));
		json_t *val = json_array_get(w, 2), *o = NULL, *x;
		size_t k;
		json_array_foreach(got, k, x)
			if (strcmp(json_string_value(json_object_get(x, "key")), key) == 0)
				o = x;
		cr_assert(o, "%s: key %s missing", file, key);
		cr_assert_str_eq(json_string_value(json_object_get(o, "type")), type, "%s: %s", file, key);
		if (strcmp(type, "array") == 0) {
			json_t *arr = json_object_get(o, "value");
			size_t cmp = json_array_size(val);
			if (cmp && strcmp(json_string_value(json_array_get(val, cmp - 1)), "...") == 0)
				cmp--; /* a prefix of a long array */
			for (size_t e = 0; e < cmp; e++)
				cr_assert(json_equal(json_array_get(arr, e), json_array_get(val, e)), "%s: %s[%zu]", file, key, e);
		} else if (json_is_real(val)) {
			cr_assert(json_number_value(json_object_get(o, "value")) == json_real_value(val), "%s: %s", file, key);
		} else {
			cr_assert(json_equal(json_object_get(o, "value"), val), "%s: %s differs", file, key);
		}
	}
	json_decref(got);
}

Test(gguf, reads_reference_files_exactly, .timeout = 120)
{
	json_t *m, *qt;
	char *dir = ft_reference_files(&m);
	const char *files[] = { "ref.gguf", "vocab.gguf" };
	for (size_t f = 0; f < 2; f++) {
		char *p = ts_join(dir, files[f]);
		ckpt_reader *r;
		json_t *item = json_object_get(m, files[f]);
		if (ckpt_reader_open(&r, p, NULL) != CKPT_OK)
			ft_fail_last(p);
		cr_assert_str_eq(ckpt_reader_format(r), "gguf");
		cr_assert_str_eq(ckpt_reader_meta(r, "gguf.version"), "3");
		cr_assert_str_eq(ckpt_reader_meta(r, "gguf.alignment"), "32");
		ft_check_reader(r, json_object_get(item, "tensors"), files[f]);
		check_kv(r, json_object_get(item, "kv"), files[f]);
		if (f == 0) {
			/* in file order, and the quantized ones named with their ggml type and logical shape */
			json_t *t;
			size_t i;
			json_array_foreach(json_object_get(item, "tensors"), i, t)
				cr_assert_str_eq(ckpt_reader_var(r, i)->name, json_string_value(json_object_get(t, "name")));
			qt = json_loads(ckpt_reader_meta(r, "gguf.tensor_types"), 0, NULL);
			cr_assert_str_eq(json_string_value(json_object_get(json_object_get(qt, "blk.0.ffn_q8.weight"), "type")),
				"Q8_0");
			{
				char *sh = json_dumps(json_object_get(json_object_get(qt, "blk.0.ffn_q8.weight"), "shape"), 0);
				cr_assert_str_eq(sh, "[3, 64]");
				free(sh);
			}
			cr_assert_str_eq(json_string_value(json_object_get(json_object_get(qt, "blk.0.ffn_q4.weight"), "type")),
				"Q4_0");
			cr_assert_eq(json_object_size(qt), 2);
			json_decref(qt);
		} else {
			json_t *kv = json_loads(ckpt_reader_meta(r, "gguf.kv"), 0, NULL);
			cr_assert_eq(json_array_size(json_object_get(json_array_get(kv, 1), "value")), 20000);
			cr_assert_eq(json_integer_value(json_object_get(json_array_get(kv, 2), "count")), 20000);
			json_decref(kv);
		}
		ckpt_reader_free(r);
		free(p);
	}
	json_decref(m);
	ts_rmtree(dir);
	free(dir);
}

/* GGUF -> GGUF through the library: key-value pairs, quantized blocks and layout are gguf-py's, byte for byte. */
Test(gguf, rewrites_reference_files_byte_for_byte, .timeout = 120)
{
	json_t *m;
	char *dir = ft_reference_files(&m);
	const char *files[] = { "ref.gguf", "vocab.gguf" };
	const char *keys[] = { "gguf.kv", "gguf.tensor_types" };
	for (size_t f = 0; f < 2; f++) {
		char *p = ts_join(dir, files[f]), *q = ts_join(dir, "ours.gguf");
		ft_rewrite_matches(p, q, "gguf", keys, 2, 0, "GGUFWriter's");
		free(p);
		free(q);
	}
	json_decref(m);
	ts_rmtree(dir);
	free(dir);
}

/* ---- gguf.GGUFReader reads what we write ---- */

static void add(ckpt_writer *w, json_t *list, const char *name, ckpt_dtype dt, const char *gtype, int rank,
	const int64_t *dims, const int64_t *ne, int nne)
{
	ckpt_shape s;
	ckpt_tensor *t;
	json_t *jne = json_array();
	cr_assert_eq(ckpt_shape_make(&s, rank, dims), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&t, dt, &s), CKPT_OK);
	for (uint64_t i = 0; i < t->nbytes; i++)
		((unsigned char *)t->data)[i] = (unsigned char)(i * 41 + strlen(name));
	for (int d = 0; d < nne; d++)
		json_array_append_new(jne, json_integer(ne[d]));
	json_array_append_new(list, json_pack("{s:s,s:s,s:o,s:I,s:I}", "name", name, "dtype", gtype, "shape", jne,
		"bytes", (json_int_t)t->nbytes, "crc32", (json_int_t)ckpt_tensor_crc32(t)));
	if (ckpt_writer_add(w, name, t, 0) != CKPT_OK)
		ft_fail_last(name);
	ckpt_tensor_free(t);
}

Test(gguf, reference_reads_what_we_write, .timeout = 120)
{
	char *dir = ts_tmpdir(), *p = ts_join(dir, "ours.gguf"), *mp = ts_join(dir, "check.json"), *out;
	ckpt_writer *w;
	json_t *list = json_array(), *item, *kv;
	int64_t d23[] = { 2, 3 }, ne23[] = { 3, 2 }, d4[] = { 4 }, d234[] = { 2, 3, 4 }, ne234[] = { 4, 3, 2 };
	int64_t dq[] = { 2, 68 }, neq[] = { 64, 2 }, one[] = { 1 };
	cr_assert_eq(ckpt_writer_open(&w, p, "gguf", NULL), CKPT_OK);
	/* every value type, as a GGUF reader exposes them */
	cr_assert_eq(ckpt_writer_set_meta(w, "gguf.kv",
		"[{\"key\": \"general.architecture\", \"type\": \"string\", \"value\": \"mlp\"},"
		" {\"key\": \"general.alignment\", \"type\": \"u32\", \"value\": 64},"
		" {\"key\": \"a.u8\", \"type\": \"u8\", \"value\": 250}, {\"key\": \"a.i8\", \"type\": \"i8\", \"value\": -7},"
		" {\"key\": \"a.u16\", \"type\": \"u16\", \"value\": 65000}, {\"key\": \"a.i16\", \"type\": \"i16\", \"value\": -7},"
		" {\"key\": \"a.i32\", \"type\": \"i32\", \"value\": -70000}, {\"key\": \"a.f32\", \"type\": \"f32\", \"value\": 0.25},"
		" {\"key\": \"a.bool\", \"type\": \"bool\", \"value\": false}, {\"key\": \"a.u64\", \"type\": \"u64\", \"value\": 1099511627776},"
		" {\"key\": \"a.i64\", \"type\": \"i64\", \"value\": -5}, {\"key\": \"a.f64\", \"type\": \"f64\", \"value\": 2.5},"
		" {\"key\": \"a.strs\", \"type\": \"array\", \"elem\": \"string\", \"value\": [\"x\", \"yz\"]},"
		" {\"key\": \"a.ints\", \"type\": \"array\", \"elem\": \"i32\", \"count\": 2, \"hex\": \"01000000ffffffff\"}]"),
		CKPT_OK);
	cr_assert_eq(ckpt_writer_set_meta(w, "gguf.tensor_types", "{\"q\": {\"type\": \"Q8_0\", \"shape\": [2, 64]}}"),
		CKPT_OK);
	add(w, list, "tok_embd.weight", CKPT_DT_FLOAT, "F32", 2, d23, ne23, 2);
	add(w, list, "h", CKPT_DT_HALF, "F16", 3, d234, ne234, 3);
	add(w, list, "bf", CKPT_DT_BFLOAT16, "BF16", 1, d4, d4, 1);
	add(w, list, "f64", CKPT_DT_DOUBLE, "F64", 1, d4, d4, 1);
	add(w, list, "i8", CKPT_DT_INT8, "I8", 1, d4, d4, 1);
	add(w, list, "i16", CKPT_DT_INT16, "I16", 1, d4, d4, 1);
	add(w, list, "i32", CKPT_DT_INT32, "I32", 2, d23, ne23, 2);
	add(w, list, "step", CKPT_DT_INT64, "I64", 1, one, one, 1);
	add(w, list, "q", CKPT_DT_UINT8, "Q8_0", 2, dq, neq, 2);
	/* a TF key goes in under its flat name */
	add(w, list, "model/dense/bias/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_FLOAT, "F32", 1, d4, d4, 1);
	json_string_set(json_object_get(json_array_get(list, json_array_size(list) - 1), "name"), "model.dense.bias");
	if (ckpt_writer_commit(w) != CKPT_OK)
		ft_fail_last("commit");
	ckpt_writer_free(w);
	kv = json_pack("[[s,s,s],[s,s,i],[s,s,i],[s,s,i],[s,s,i],[s,s,i],[s,s,i],[s,s,f],[s,s,b],[s,s,I],[s,s,i],[s,s,f],"
		"[s,s,[s,s]],[s,s,[i,i]]]",
		"general.architecture", "string", "mlp", "general.alignment", "u32", 64, "a.u8", "u8", 250, "a.i8", "i8", -7,
		"a.u16", "u16", 65000, "a.i16", "i16", -7, "a.i32", "i32", -70000, "a.f32", "f32", 0.25, "a.bool", "bool", 0,
		"a.u64", "u64", (json_int_t)1099511627776LL, "a.i64", "i64", -5, "a.f64", "f64", 2.5, "a.strs", "array", "x",
		"yz", "a.ints", "array", 1, -1);
	cr_assert(kv);
	item = json_pack("[{s:s,s:s,s:O,s:o}]", "file", p, "format", "gguf", "tensors", list, "kv", kv);
	cr_assert_eq(json_dump_file(item, mp, 0), 0);
	out = ft_oracle("flat_check.py", mp);
	cr_assert(strstr(out, "OK "), "%s", out);
	free(out);
	json_decref(item);
	json_decref(list);
	ts_rmtree(dir);
	free(dir);
	free(p);
	free(mp);
}

Test(gguf, writer_refuses_what_gguf_cannot_hold)
{
	char *dir = ts_tmpdir(), *p = ts_join(dir, "x.gguf");
	ckpt_writer *w;
	ckpt_tensor *t;
	ckpt_shape s;
	int64_t d5[] = { 1, 1, 1, 1, 1 }, d0[] = { 0, 2 }, d3[] = { 3 };
	char longname[80];
	cr_assert_eq(ckpt_writer_open(&w, p, "gguf", NULL), CKPT_OK);
	ckpt_shape_make(&s, 1, d3);
	ckpt_tensor_new(&t, CKPT_DT_UINT8, &s);
	cr_assert_eq(ckpt_writer_add(w, "u8", t, 0), CKPT_EUNSUPPORTED);
	cr_assert(strstr(ckpt_error_last()->message, "no tensor type for uint8"), "%s", ckpt_error_last()->message);
	ckpt_tensor_free(t);
	ckpt_tensor_new(&t, CKPT_DT_BOOL, &s);
	cr_assert_eq(ckpt_writer_add(w, "b", t, 0), CKPT_EUNSUPPORTED);
	ckpt_tensor_free(t);
	ckpt_shape_make(&s, 5, d5);
	ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s);
	cr_assert_eq(ckpt_writer_add(w, "r5", t, 0), CKPT_EUNSUPPORTED);
	cr_assert(strstr(ckpt_error_last()->message, "rank 5"));
	ckpt_tensor_free(t);
	ckpt_shape_make(&s, 2, d0);
	ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s);
	cr_assert_eq(ckpt_writer_add(w, "e", t, 0), CKPT_EUNSUPPORTED);
	ckpt_tensor_free(t);
	ckpt_shape_make(&s, 1, d3);
	ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s);
	memset(longname, 'n', 64);
	longname[64] = '\0';
	cr_assert_eq(ckpt_writer_add(w, longname, t, 0), CKPT_EUNSUPPORTED);
	cr_assert(strstr(ckpt_error_last()->message, "at most 63"));
	longname[63] = '\0';
	cr_assert_eq(ckpt_writer_add(w, longname, t, 0), CKPT_OK);
	ckpt_tensor_free(t);
	ckpt_writer_free(w);
	ts_rmtree(dir);
	free(dir);
	free(p);
}

/* ---- hostile inputs: one handcrafted case per rule ---- */

Test(gguf_hostile, header_rules)
{
	gbuf b = { 0 };
	gb_head(&b, 1, 0, 0);
	expect(&b, CKPT_EUNSUPPORTED, NULL, 4, "version 1", "v1");
	gb_head(&b, 0x03000000u, 0, 0);
	expect(&b, CKPT_EUNSUPPORTED, NULL, 4, "big-endian", "big-endian");
	gb_head(&b, 3, 0, 1ull << 40);
	expect(&b, CKPT_EFORMAT, NULL, 16, "kv_count 1099511627776 cannot fit", "kv_count");
	gb_head(&b, 3, 1ull << 60, 0);
	expect(&b, CKPT_EFORMAT, NULL, 8, "tensor_count", "tensor_count");
	gb_head(&b, 3, 1, 0);
	expect(&b, CKPT_EFORMAT, NULL, 8, "tensor_count 1 cannot fit", "tensor_count vs size");
	gb_bytes(&b, "GGUF\3\0", 6);
	expect(&b, CKPT_EFORMAT, NULL, 4, "truncated", "truncated header");
}

Test(gguf_hostile, key_value_rules)
{
	gbuf b = { 0 };
	size_t at;
	gb_head(&b, 3, 0, 1);
	gb_le(&b, 1ull << 40, 8);
	gb_bytes(&b, "abcdefgh", 8);
	expect(&b, CKPT_EFORMAT, NULL, 24, "string length 1099511627776 runs past the end", "key length");
	gb_head(&b, 3, 0, 2);
	gb_kv_u32(&b, "k", 1);
	at = b.n;
	gb_kv_u32(&b, "k", 2);
	expect(&b, CKPT_EFORMAT, "k", (int64_t)at, "duplicate key 'k'", "duplicate key");
	gb_head(&b, 3, 0, 1);
	gb_str(&b, "k");
	gb_le(&b, 13, 4);
	gb_le(&b, 0, 8);
	expect(&b, CKPT_EFORMAT, "k", 24 + 9, "unknown value type 13", "value type");
	gb_head(&b, 3, 0, 1);
	gb_str(&b, "arr");
	gb_le(&b, 9, 4);
	gb_le(&b, 9, 4);
	gb_le(&b, 1, 8);
	gb_le(&b, 0, 8);
	expect(&b, CKPT_EFORMAT, "arr", 24 + 11 + 4, "array of array elements", "nested array");
	gb_head(&b, 3, 0, 1);
	gb_str(&b, "arr");
	gb_le(&b, 9, 4);
	gb_le(&b, 8, 4);
	gb_le(&b, 1ull << 50, 8);
	gb_le(&b, 0, 8);
	expect(&b, CKPT_EFORMAT, "arr", 24 + 11 + 4, "cannot fit", "array count");
	gb_head(&b, 3, 0, 1);
	gb_str(&b, "s");
	gb_le(&b, 8, 4);
	gb_le(&b, 100, 8);
	gb_bytes(&b, "short", 5);
	expect(&b, CKPT_EFORMAT, "s", 24 + 9 + 4, "runs past the end", "string value length");
	gb_head(&b, 3, 0, 1);
	gb_kv_u32(&b, "general.alignment", 48);
	expect(&b, CKPT_EFORMAT, "general.alignment", 24, "not a power of two", "alignment 48");
	gb_head(&b, 3, 0, 1);
	gb_kv_u32(&b, "general.alignment", 4);
	expect(&b, CKPT_EFORMAT, "general.alignment", 24, "not a power of two in [8, 1048576]", "alignment 4");
	gb_head(&b, 3, 0, 1);
	gb_str(&b, "general.alignment");
	gb_le(&b, 10, 4);
	gb_le(&b, 32, 8);
	expect(&b, CKPT_EFORMAT, "general.alignment", 24, "must be u32", "alignment type");
	gb_head(&b, 3, 0, 1);
	gb_kv_u32(&b, "k\xff", 1);
	expect(&b, CKPT_EFORMAT, NULL, 24, "not UTF-8", "key not UTF-8");
	gb_head(&b, 3, 0, 1);
	gb_str(&b, "k");
	gb_le(&b, 4, 4);
	gb_le(&b, 1, 2);
	expect(&b, CKPT_EFORMAT, "k", 24 + 9 + 4, "truncated", "value cut short");
}

/* One tensor info after a header with no kv pairs (tensor info at offset 24). */
static void one_tensor(gbuf *b, const char *name, uint32_t ndims, const uint64_t *ne, uint32_t type, uint64_t off,
	size_t data)
{
	gb_head(b, 3, 1, 0);
	gb_ti(b, name, ndims, ne, type, off);
	gb_pad(b, 32, data);
}

Test(gguf_hostile, tensor_info_rules)
{
	gbuf b = { 0 };
	uint64_t ne5[] = { 1, 1, 1, 1, 1 }, ne0[] = { 0 }, big[] = { 1ull << 62, 1ull << 62 }, q33[] = { 33 };
	uint64_t ne4[] = { 4 }, neg[] = { 1ull << 63 };
	char name65[70];
	size_t at;
	one_tensor(&b, "t", 5, ne5, 0, 0, 4);
	expect(&b, CKPT_EFORMAT, "t", 24, "n_dims 5 above ggml's maximum of 4", "n_dims");
	one_tensor(&b, "t", 1, ne0, 0, 0, 0);
	expect(&b, CKPT_EFORMAT, "t", 24, "ne[0] = 0", "zero dim");
	one_tensor(&b, "t", 1, neg, 0, 0, 0);
	expect(&b, CKPT_EFORMAT, "t", 24, "must be 1..INT64_MAX", "negative dim");
	one_tensor(&b, "t", 2, big, 0, 0, 0);
	expect(&b, CKPT_EFORMAT, "t", 24, "overflows", "ne product");
	one_tensor(&b, "t", 1, big, 0, 0, 0);
	expect(&b, CKPT_EFORMAT, "t", 24, "row size overflows", "ne[0] x 4 bytes wraps to 0");
	one_tensor(&b, "t", 1, ne4, 99, 0, 16);
	expect(&b, CKPT_EFORMAT, "t", 24, "unknown ggml type 99", "ggml type");
	one_tensor(&b, "t", 1, ne4, 17 + 100, 0, 16);
	expect(&b, CKPT_EFORMAT, "t", 24, "unknown ggml type", "ggml type 117");
	one_tensor(&b, "t", 1, q33, 8, 0, 64);
	expect(&b, CKPT_EFORMAT, "t", 24, "not a multiple of Q8_0's block of 32", "block multiple");
	one_tensor(&b, "t", 1, ne4, 0, 4, 32);
	expect(&b, CKPT_EFORMAT, "t", 24, "not a multiple of the alignment 32", "unaligned offset");
	one_tensor(&b, "t", 1, ne4, 0, 32, 64);
	expect(&b, CKPT_EFORMAT, "t", 24, "a hole", "hole before the first tensor");
	one_tensor(&b, "t", 1, ne4, 0, 0, 8);
	expect(&b, CKPT_EFORMAT, "t", 64, "run past the end of the file", "data past EOF");
	memset(name65, 'n', 65);
	name65[65] = '\0';
	one_tensor(&b, name65, 1, ne4, 0, 0, 16);
	expect(&b, CKPT_EFORMAT, NULL, 24, "at most 64", "name length");
	one_tensor(&b, "bad\xff", 1, ne4, 0, 0, 16);
	expect(&b, CKPT_EFORMAT, NULL, 24, "not UTF-8", "name not UTF-8");
	/* two tensors: duplicate names, overlap, a hole between them */
	gb_head(&b, 3, 2, 0);
	gb_ti(&b, "a", 1, ne4, 0, 0);
	at = b.n;
	gb_ti(&b, "a", 1, ne4, 0, 32);
	gb_pad(&b, 32, 64);
	expect(&b, CKPT_EFORMAT, "a", (int64_t)at, "duplicate tensor name 'a'", "duplicate name");
	gb_head(&b, 3, 2, 0);
	gb_ti(&b, "a", 1, ne4, 0, 0);
	at = b.n;
	gb_ti(&b, "b", 1, ne4, 0, 0);
	gb_pad(&b, 32, 64);
	expect(&b, CKPT_EFORMAT, "b", (int64_t)at, "overlapping data", "overlap");
	gb_head(&b, 3, 2, 0);
	gb_ti(&b, "a", 1, ne4, 0, 0);
	at = b.n;
	gb_ti(&b, "b", 1, ne4, 0, 64);
	gb_pad(&b, 32, 96);
	expect(&b, CKPT_EFORMAT, "b", (int64_t)at, "offset 64, expected 32", "hole between tensors");
}

Test(gguf_hostile, valid_corner_cases)
{
	gbuf b = { 0 };
	uint64_t ne4[] = { 4 };
	ckpt_reader *r;
	ckpt_vfs *vfs;
	/* 123 tensors put '{' at byte 8, where a safetensors header starts: still GGUF */
	gb_head(&b, 3, 123, 0);
	for (int i = 0; i < 123; i++) {
		char name[16];
		snprintf(name, sizeof(name), "t%d", i);
		gb_ti(&b, name, 1, ne4, 0, (uint64_t)i * 32);
	}
	gb_pad(&b, 32, 123 * 32);
	cr_assert_eq(b.p[8], '{');
	cr_assert_eq(ft_open_mem(b.p, b.n, "g", &r, &vfs), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_str_eq(ckpt_reader_format(r), "gguf");
	cr_assert_eq(ckpt_reader_num_entries(r), 123);
	ckpt_reader_free(r);
	ckpt_vfs_free(vfs);
	free(b.p);
	memset(&b, 0, sizeof(b));
	/* no tensors, no keys; a scalar (n_dims 0); a custom alignment */
	gb_head(&b, 3, 0, 0);
	cr_assert_eq(ft_open_any(b.p, b.n), CKPT_OK, "%s", ckpt_error_last()->message);
	free(b.p);
	memset(&b, 0, sizeof(b));
	gb_head(&b, 3, 2, 1);
	gb_kv_u32(&b, "general.alignment", 8);
	gb_ti(&b, "s", 0, NULL, 27, 0);
	gb_ti(&b, "v", 1, ne4, 0, 8);
	gb_pad(&b, 8, 24);
	cr_assert_eq(ft_open_any(b.p, b.n), CKPT_OK, "%s", ckpt_error_last()->message);
	free(b.p);
}

Test(gguf_hostile, truncation_and_mutation_sweep, .timeout = 300)
{
	json_t *m;
	char *dir = ft_reference_files(&m), *p = ts_join(dir, "ref.gguf");
	size_t n, step, tried = 0, fails = 0, hdr, dend;
	unsigned char *f = (unsigned char *)ts_read_file(p, &n);
	static const unsigned char vals[] = { 0x00, 0xff, 0x01, 0x7f, 0x20, 0x80 };
	ckpt_reader *r;
	cr_assert(f && n > 256);
	cr_assert_eq(ckpt_reader_open(&r, p, NULL), CKPT_OK);
	hdr = (size_t)ckpt_reader_var(r, 0)->offset; /* everything before the data */
	{
		const ckpt_var_info *last = ckpt_reader_var(r, ckpt_reader_num_entries(r) - 1);
		dend = (size_t)last->offset + (size_t)last->nbytes;
	}
	ckpt_reader_free(r);
	step = ft_sweep_step(n);
	for (size_t k = 0; k < n; k += step) {
		int rc = ft_open_any(f, k);
		/* the last tensor's padding is not data: a file cut inside it still holds every tensor */
		if (k < dend)
			cr_assert(rc == CKPT_EFORMAT || rc == CKPT_EUNSUPPORTED, "prefix of %zu / %zu: %s", k, n,
				ckpt_status_name(rc));
	}
	fails = ft_mutate_header(&tried, f, n, hdr, vals, sizeof(vals));
	cr_assert(fails > tried / 4, "only %zu of %zu header mutations refused", fails, tried);
	free(f);
	free(p);
	json_decref(m);
	ts_rmtree(dir);
	free(dir);
}

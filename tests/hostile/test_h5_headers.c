/*
 * Object header pre-check of the Keras HDF5 reader (formats/keras_h5/h5_safe.c):
 * libhdf5 1.10.8 over-reads its heap decoding attribute messages whose
 * name / datatype / dataspace sizes do not fit the message. The fuzz inputs
 * that found it, and crafted variants of a valid file, must be rejected with
 * CKPT_EFORMAT naming the file and the byte offset of the bad message, and
 * (under ASan, scripts/test.sh) without any report from inside libhdf5.
 */
#include "keras_test.h"
#include "rel_common.h"
#include "ckpt/sys/vfs_memory.h"

#define REG_DIR CKPT_SOURCE_DIR "/tests/fuzz/regressions/keras_h5/"

static void expect_header_error(const char *path, int64_t want_off)
{
	ckpt_reader *r = NULL;
	int rc = ckpt_reader_open(&r, path, NULL);
	const ckpt_error *e = ckpt_error_last();
	char line[1024];
	cr_assert_eq(rc, CKPT_EFORMAT, "%s: got %s: %s", path, ckpt_status_name(rc), ckpt_error_format(e, line, sizeof(line)));
	cr_assert_null(r);
	cr_assert_not_null(e->path);
	cr_assert_str_eq(e->path, path);
	cr_assert(strstr(e->message, "corrupt object header"), "%s", e->message);
	if (want_off >= 0)
		cr_assert_eq(e->offset, want_off, "offset %lld, want %lld: %s", (long long)e->offset, (long long)want_off, e->message);
	else
		cr_assert_geq(e->offset, 0, "%s", e->message);
}

/* Root group attribute 'model_config' (v1 message at 0x388): dataspace size 136 in a 72-byte message. */
Test(h5_headers, fuzz_root_attr_dataspace_size)
{
	expect_header_error(REG_DIR "libhdf5_H5Aexists_heap_overflow_2.h5", 0x390);
	cr_assert(strstr(ckpt_error_last()->message, "dataspace 136"), "%s", ckpt_error_last()->message);
}

Test(h5_headers, fuzz_vars_group_attr)
{
	expect_header_error(REG_DIR "libhdf5_H5Aexists_heap_overflow_1.h5", -1);
}

#define BIDI "keras/dl4j-test-resources__keras1.2.2_bidirectional_lstm.h5"

static int open_mem(const unsigned char *buf, size_t n)
{
	ckpt_vfs *vfs = NULL;
	ckpt_reader *r = NULL;
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	int rc;
	cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
	cr_assert_eq(ckpt_vfs_write_atomic(vfs, "/m.h5", buf, n, 0), CKPT_OK);
	o.vfs = vfs;
	ckpt_error_clear(); /* the error seen afterwards is this open's own */
	rc = ckpt_reader_open(&r, "/m.h5", &o);
	ckpt_reader_free(r);
	ckpt_vfs_free(vfs);
	return rc;
}

/*
 * The fixture the fuzzer started from: its root group header is a v1 header at
 * 0x60 continued at 0x320 (208 bytes: 'keras_version' attribute at 0x338,
 * 'model_config' at 0x388) and at 0x2ba0 (104 bytes: 'training_config').
 */
static unsigned char *bidi(size_t *n)
{
	unsigned char *b = (unsigned char *)ts_read_file(ts_fixture(BIDI), n);
	cr_assert_not_null(b);
	cr_assert_eq(*n, 25208);
	cr_assert_eq(b[0x388], 0x0c, "fixture layout changed");
	cr_assert_eq(b[0x396], 8);
	return b;
}

static void expect_mem_error(const unsigned char *b, size_t n, int64_t off, const char *needle)
{
	int rc = open_mem(b, n);
	const ckpt_error *e = ckpt_error_last();
	cr_assert_eq(rc, CKPT_EFORMAT, "got %s: %s", ckpt_status_name(rc), e->message);
	cr_assert_str_eq(e->path, "/m.h5");
	cr_assert_eq(e->offset, off, "offset %lld, want %lld: %s", (long long)e->offset, (long long)off, e->message);
	cr_assert(strstr(e->message, needle), "'%s' not in: %s", needle, e->message);
}

Test(h5_headers, fixture_still_opens)
{
	size_t n;
	unsigned char *b = bidi(&n);
	cr_assert_eq(open_mem(b, n), CKPT_OK, "%s", ckpt_error_last()->message);
	free(b);
}

/* Each size field of 'model_config' (data at 0x390) made too large for its 72-byte message. */
Test(h5_headers, attribute_part_sizes_must_fit_the_message)
{
	size_t n;
	unsigned char *b = bidi(&n);
	static const struct { size_t at; unsigned v; const char *needle; } cases[] = {
		{ 0x392, 200, "not a terminated string" }, /* name length */
		{ 0x394, 136, "datatype 136" },            /* datatype length */
		{ 0x396, 136, "dataspace 136" },           /* dataspace length (the fuzz input) */
		{ 0x396, 44, "exceed the 72-byte message" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned char old = b[cases[i].at];
		b[cases[i].at] = (unsigned char)cases[i].v;
		expect_mem_error(b, n, 0x390, cases[i].needle);
		b[cases[i].at] = old;
	}
	free(b);
}

Test(h5_headers, attribute_data_must_fit_the_message)
{
	size_t n;
	unsigned char *b = bidi(&n);
	/* 'model_config': name at 0x398, datatype at 0x3a8, dataspace at 0x3c0, 16 bytes of data at 0x3c8 */
	b[0x396] = 16; /* a 16-byte dataspace leaves 8 bytes for the 16-byte heap id */
	expect_mem_error(b, n, 0x390, "attribute data of 1 elements x 16 bytes exceeds the 8 bytes left");
	b[0x396] = 8;
	/* vlen datatype claiming 4-byte elements (libhdf5 later reads 16 per element) */
	cr_assert_eq(b[0x3ac], 16);
	b[0x3ac] = 4;
	expect_mem_error(b, n, 0x3a8, "variable-length datatype of 4 bytes");
	free(b);
}

/* A message larger than its chunk: libhdf5 itself refuses the header when it loads it. */
Test(h5_headers, message_must_fit_its_chunk)
{
	size_t n;
	unsigned char *b = bidi(&n);
	b[0x38a] = 0x50;
	b[0x38b] = 0x01; /* 'model_config' claims 336 bytes in a 208-byte chunk */
	cr_assert_eq(open_mem(b, n), CKPT_EFORMAT);
	cr_assert_str_eq(ckpt_error_last()->path, "/m.h5");
	free(b);
}

/*
 * Every byte of the root group's header chunks set to 0x00, 0xff, flipped
 * high bit, and +8: a clear error or a file that still opens, never a crash
 * (under ASan: never a read outside libhdf5's buffers).
 */
Test(h5_headers, root_header_byte_sweep, .timeout = 300)
{
	size_t n, k, bad = 0, ok = 0, cases = 0, c = 0, stride = 1;
	if (rel_rerun_where_malloc_may_fail())
		return;
	unsigned char *b = bidi(&n);
	const char *scale = getenv("CKPT_TEST_SWEEP_SCALE"); /* 1/8 of the cases under ASan (scripts/test.sh) */
	if (scale && atof(scale) > 0 && atof(scale) < 1)
		stride = (size_t)(1 / atof(scale) + 0.5);
	static const size_t ranges[][2] = { { 0x60, 0x88 }, { 0x320, 0x3f0 }, { 0x2ba0, 0x2c08 } };
	for (size_t r = 0; r < 3; r++)
		for (k = ranges[r][0]; k < ranges[r][1]; k++) {
			unsigned char old = b[k];
			const unsigned vals[4] = { 0x00, 0xff, old ^ 0x80u, (old + 8u) & 0xffu };
			for (int v = 0; v < 4; v++) {
				if (vals[v] == old || c++ % stride)
					continue;
				b[k] = (unsigned char)vals[v];
				int rc = open_mem(b, n);
				const ckpt_error *e = ckpt_error_last();
				cases++;
				if (rc == CKPT_OK)
					ok++;
				else if (rc > 0 || e->code != rc || !e->message[0] || !e->path || strcmp(e->path, "/m.h5")) {
					cr_log_error("byte 0x%zx = 0x%02x: status %d without its own error (code %d, \"%s\", path %s)",
						k, vals[v], rc, e->code, e->message, e->path ? e->path : "(null)");
					bad++;
				}
			}
			b[k] = old;
		}
	cr_log_info("root header sweep: %zu cases, %zu still open", cases, ok);
	cr_assert_eq(cases, (c + stride - 1) / stride, "%zu of %zu planned cases ran", cases, (c + stride - 1) / stride);
	cr_assert_geq(cases, 128, "only %zu cases", cases);
	cr_assert_lt(ok, cases, "no case was rejected");
	cr_assert_eq(bad, 0);
	free(b);
}

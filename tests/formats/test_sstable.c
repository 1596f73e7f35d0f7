/* SSTable (P.index) layer of the TensorBundle backend: TableBuilder rules and the reader. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "formats/tf_bundle/tfb.h"
#include "test_support.h"

static void sep(const char *start, const char *limit, const char *want)
{
	tfb_buf b = { 0 };
	cr_assert_eq(tfb_buf_append(&b, start, strlen(start)), CKPT_OK);
	tfb_shortest_separator(&b, (const unsigned char *)limit, strlen(limit));
	cr_assert_eq(b.len, strlen(want), "sep(%s, %s)", start, limit);
	cr_assert_eq(memcmp(b.p, want, b.len), 0, "sep(%s, %s)", start, limit);
	tfb_buf_free(&b);
}

Test(sstable, shortest_separator_and_successor)
{
	sep("abcdef", "abzzz", "abd");
	sep("abc", "abcdef", "abc");      /* prefix: keep start */
	sep("abc", "abd", "abc");         /* c+1 == d: keep */
	sep("a\xff", "b", "a\xff");
	sep("helloworld", "hellp", "helloworld");
	sep("training/Ftrl/x", "zzz", "u");
	tfb_buf b = { 0 };
	tfb_buf_append(&b, "training/Ftrl/x", 15);
	tfb_short_successor(&b);
	cr_assert_eq(b.len, 1);
	cr_assert_eq(b.p[0], 'u');
	b.len = 0;
	tfb_buf_append(&b, "\xff\xff" "a", 3);
	tfb_short_successor(&b);
	cr_assert_eq(b.len, 3);
	cr_assert_eq(b.p[2], 'b');
	b.len = 0;
	tfb_buf_append(&b, "\xff\xff", 2);
	tfb_short_successor(&b);
	cr_assert_eq(b.len, 2);
	tfb_buf_free(&b);
}

Test(sstable, varints)
{
	unsigned char p[10];
	uint64_t v;
	const uint64_t vals[] = { 0, 1, 127, 128, 300, 0xffffffffu, 1ull << 63, ~0ull };
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		size_t n = tfb_varint_put(p, vals[i]);
		cr_assert_eq(tfb_varint_get(p, p + n, &v), n);
		cr_assert_eq(v, vals[i]);
		cr_assert_eq(tfb_varint_get(p, p + n - 1, &v), 0); /* truncated */
	}
	memset(p, 0xff, 10);
	cr_assert_eq(tfb_varint_get(p, p + 10, &v), 0); /* never ends */
	p[9] = 0x02;
	cr_assert_eq(tfb_varint_get(p, p + 10, &v), 0); /* over 64 bits */
}

/* The worked example of tf-bundle.md section 2.3, rebuilt from its entries. */
Test(sstable, rebuilds_half_plus_two_index)
{
	static const unsigned char hdr[] = { 0x08, 0x01, 0x1a, 0x02, 0x08, 0x01 };
	static const unsigned char ea[] = { 0x08, 0x01, 0x12, 0x00, 0x28, 0x04, 0x35, 0x06, 0x38, 0x27, 0x1f };
	static const unsigned char eb[] = { 0x08, 0x01, 0x12, 0x00, 0x20, 0x04, 0x28, 0x04, 0x35, 0x10, 0xfd, 0x78, 0x4f };
	static const unsigned char ec[] = { 0x08, 0x01, 0x12, 0x00, 0x20, 0x08, 0x28, 0x04, 0x35, 0xef, 0xd6, 0x82, 0xc3 };
	tfb_kv kv[] = {
		{ (const unsigned char *)"", 0, hdr, sizeof(hdr) },
		{ (const unsigned char *)"a", 1, ea, sizeof(ea) },
		{ (const unsigned char *)"b", 1, eb, sizeof(eb) },
		{ (const unsigned char *)"c", 1, ec, sizeof(ec) },
	};
	tfb_buf out = { 0 };
	cr_assert_eq(tfb_table_build(&out, kv, 4, TFB_BLOCK_SIZE), CKPT_OK);
	size_t n;
	char *file = ts_read_file(ts_fixture("tf/tensorflow__half_plus_two_v1/00000123/variables/variables.index"), &n);
	cr_assert_eq(out.len, 151);
	cr_assert_eq(n, 151);
	cr_assert_eq(memcmp(out.p, file, n), 0);
	free(file);
	tfb_buf_free(&out);
}

typedef struct collected {
	size_t n;
	char keys[3000][64];
	size_t vlens[3000];
} collected;

static int collect(void *ctx, const unsigned char *key, size_t klen, const unsigned char *val, size_t vlen, uint64_t off)
{
	collected *c = ctx;
	cr_assert_lt(klen, 64);
	memcpy(c->keys[c->n], key, klen);
	c->keys[c->n][klen] = '\0';
	c->vlens[c->n] = vlen;
	for (size_t i = 0; i < vlen; i++)
		cr_assert_eq(val[i], (unsigned char)(c->n + i));
	c->n++;
	return CKPT_OK;
}

Test(sstable, many_blocks_round_trip)
{
	/* a small block size forces many data blocks, separators and restarts */
	static collected c;
	char keys[3000][32];
	unsigned char vals[3000][40];
	tfb_kv *kv = calloc(3000, sizeof(*kv));
	for (int i = 0; i < 3000; i++) {
		snprintf(keys[i], 32, "key/%06d/x", i);
		for (int k = 0; k < 40; k++)
			vals[i][k] = (unsigned char)(i + k);
		kv[i].key = (const unsigned char *)keys[i];
		kv[i].klen = strlen(keys[i]);
		kv[i].val = vals[i];
		kv[i].vlen = (size_t)(i % 40);
	}
	tfb_buf out = { 0 };
	cr_assert_eq(tfb_table_build(&out, kv, 3000, 4096), CKPT_OK);
	memset(&c, 0, sizeof(c));
	cr_assert_eq(tfb_table_walk(out.p, out.len, "mem.index", collect, &c), CKPT_OK);
	cr_assert_eq(c.n, 3000);
	for (int i = 0; i < 3000; i++) {
		cr_assert_str_eq(c.keys[i], keys[i]);
		cr_assert_eq(c.vlens[i], (size_t)(i % 40));
	}
	/* out-of-order keys are rejected with the offending key */
	kv[1].key = (const unsigned char *)"a";
	kv[1].klen = 1;
	tfb_buf bad = { 0 };
	cr_assert_eq(tfb_table_build(&bad, kv, 5, 4096), CKPT_OK);
	memset(&c, 0, sizeof(c));
	cr_assert_eq(tfb_table_walk(bad.p, bad.len, "bad.index", collect, &c), CKPT_EFORMAT);
	cr_assert(strstr(ckpt_error_last()->message, "out of order"));
	cr_assert_str_eq(ckpt_error_last()->path, "bad.index");
	/* duplicates too */
	kv[1] = kv[0];
	bad.len = 0;
	cr_assert_eq(tfb_table_build(&bad, kv, 5, 4096), CKPT_OK);
	cr_assert_eq(tfb_table_walk(bad.p, bad.len, "bad.index", collect, &c), CKPT_EFORMAT);
	cr_assert(strstr(ckpt_error_last()->message, "duplicate key"));
	tfb_buf_free(&bad);
	tfb_buf_free(&out);
	free(kv);
}

static int nop(void *ctx, const unsigned char *key, size_t klen, const unsigned char *val, size_t vlen, uint64_t off)
{
	return CKPT_OK;
}

Test(sstable, corrupt_tables_never_crash)
{
	/* every single-byte change and every truncation of a real index fails cleanly or succeeds */
	size_t n;
	char *file = ts_read_file(ts_fixture("tf/tensorflow__lso_ckpt_tf2.2/ckpt.index"), &n);
	for (size_t len = 0; len < n; len++) {
		int rc = tfb_table_walk((const unsigned char *)file, len, "t.index", nop, NULL);
		cr_assert_lt(rc, 0);
	}
	unsigned char *m = malloc(n);
	for (size_t i = 0; i < n; i++) {
		memcpy(m, file, n);
		m[i] ^= 0x41;
		int rc = tfb_table_walk(m, n, "t.index", nop, NULL);
		/* success is possible only where no checksum reaches (footer padding) */
		if (rc == CKPT_OK)
			cr_assert(i >= n - TFB_FOOTER_LEN && i < n - 8, "flip at %zu went unnoticed", i);
		else {
			cr_assert_str_eq(ckpt_error_last()->path, "t.index");
			cr_assert_geq(ckpt_error_last()->offset, 0);
		}
	}
	free(m);
	free(file);
}

Test(sstable, snappy_blocks)
{
	/* the Snappy fixtures walk cleanly */
	const char *files[] = {
		"tf/tensorflow__tftrt_mnist_ckpt_snappy/model.ckpt-46900.index",
		"tf/serving__half_plus_two_tf2_cpu_snappy/00000123/variables/variables.index",
		"tf/tensorflow__OptimizerSlotVariableModule_snappy/variables/variables.index",
	};
	for (size_t i = 0; i < 3; i++) {
		size_t n;
		char *f = ts_read_file(ts_fixture(files[i]), &n);
		cr_assert_not_null(f);
		cr_assert_eq(tfb_table_walk((const unsigned char *)f, n, files[i], nop, NULL), CKPT_OK, "%s", files[i]);
		free(f);
	}
}

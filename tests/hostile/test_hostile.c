/*
 * docs/formats/hostile-inputs.md, items 1-19 (all formats and
 * TensorBundle) plus the generic parts of 10 and 12 for the state file, the
 * object graph and Keras configs: each item is a crafted file, built here
 * byte by byte (SSTable, protos, data shard), opened from the memory file
 * system and read completely. Expected: the listed status, a message that
 * names the problem, the file (and the variable where there is one), no
 * allocation out of proportion to the input, and no file touched outside
 * the target. Keras items 20-28 live in test_keras_hostile.c.
 */
#include "rel_common.h"
#include "tests/fuzz/fuzz_entries.h"
#include "ckpt/sys/vfs_memory.h"

/* ------------------------------------------------------------------ */
/* byte builders                                                        */
/* ------------------------------------------------------------------ */

typedef struct hb {
	unsigned char *p;
	size_t n, cap;
} hb;

static void hb_put(hb *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		cr_assert_not_null(b->p);
	}
	if (n)
		memcpy(b->p + b->n, d, n);
	b->n += n;
}
static void hb_u8(hb *b, unsigned v) { unsigned char c = (unsigned char)v; hb_put(b, &c, 1); }
static void hb_varint(hb *b, uint64_t v)
{
	do {
		hb_u8(b, (unsigned)(v & 0x7f) | (v > 0x7f ? 0x80u : 0));
		v >>= 7;
	} while (v);
}
static void hb_fixed32(hb *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		hb_u8(b, (v >> (8 * i)) & 0xff);
}
static void pb_int(hb *b, int field, int64_t v) { hb_varint(b, (uint64_t)field << 3); hb_varint(b, (uint64_t)v); }
static void pb_bytes(hb *b, int field, const void *d, size_t n)
{
	hb_varint(b, (uint64_t)field << 3 | 2);
	hb_varint(b, n);
	hb_put(b, d, n);
}
static void pb_msg(hb *b, int field, const hb *m) { pb_bytes(b, field, m->p, m->n); }
static void pb_fixed32(hb *b, int field, uint32_t v) { hb_varint(b, (uint64_t)field << 3 | 5); hb_fixed32(b, v); }
static void hb_free(hb *b) { free(b->p); memset(b, 0, sizeof(*b)); }

static uint32_t masked_crc(const void *d, size_t n)
{
	return ckpt_crc32c_mask(ckpt_crc32c_extend(0, d, n));
}

/* BundleHeaderProto */
static void header(hb *v, int64_t num_shards, int64_t endianness, int64_t min_consumer)
{
	pb_int(v, 1, num_shards);
	if (endianness)
		pb_int(v, 2, endianness);
	hb ver = { 0 };
	pb_int(&ver, 1, 1);
	if (min_consumer)
		pb_int(&ver, 2, min_consumer);
	pb_msg(v, 3, &ver);
	hb_free(&ver);
}

/* BundleEntryProto; rank < 0 = no shape message */
static void entry(hb *v, int64_t dtype, int rank, const int64_t *dims, int64_t shard, int64_t off, int64_t size,
	uint32_t crc)
{
	if (dtype)
		pb_int(v, 1, dtype);
	hb sh = { 0 };
	for (int i = 0; i < rank; i++) {
		hb d = { 0 };
		if (dims[i])
			pb_int(&d, 1, dims[i]);
		pb_msg(&sh, 2, &d);
		hb_free(&d);
	}
	if (rank >= 0)
		pb_msg(v, 2, &sh);
	hb_free(&sh);
	if (shard)
		pb_int(v, 3, shard);
	if (off)
		pb_int(v, 4, off);
	if (size)
		pb_int(v, 5, size);
	pb_fixed32(v, 6, crc);
}

typedef struct kv {
	const char *key;
	size_t klen;
	hb val;
} kv;

enum { IX_BAD_TRAILER_CRC = 1, IX_COMPRESSION_7 = 2, IX_GARBAGE_AFTER = 4, IX_HANDLE_PAST_EOF = 8,
	IX_LONG_VARINT_IN_BLOCK = 16 };

static void block_trailer(hb *out, size_t start, unsigned type, int bad_crc)
{
	unsigned char t = (unsigned char)type;
	uint32_t c = ckpt_crc32c_extend(0, out->p + start, out->n - start);
	c = ckpt_crc32c_extend(c, &t, 1);
	hb_u8(out, type);
	hb_fixed32(out, ckpt_crc32c_mask(c) ^ (bad_crc ? 1u : 0u));
}

/* An SSTable with the entries in the order given (one data block, restarts [0]). */
static void table(hb *out, const kv *e, size_t n, int flags)
{
	size_t d0 = out->n;
	for (size_t i = 0; i < n; i++) {
		if (i == 1 && (flags & IX_LONG_VARINT_IN_BLOCK)) {
			for (int k = 0; k < 11; k++)
				hb_u8(out, 0x80);
			hb_u8(out, 0);
		} else {
			hb_varint(out, 0);
		}
		hb_varint(out, e[i].klen);
		hb_varint(out, e[i].val.n);
		hb_put(out, e[i].key, e[i].klen);
		hb_put(out, e[i].val.p, e[i].val.n);
	}
	hb_fixed32(out, 0);
	hb_fixed32(out, 1);
	size_t dsize = out->n - d0;
	block_trailer(out, d0, (flags & IX_COMPRESSION_7) ? 7 : 0, flags & IX_BAD_TRAILER_CRC);
	size_t m0 = out->n;
	hb_fixed32(out, 0);
	hb_fixed32(out, 1);
	block_trailer(out, m0, 0, 0);
	size_t i0 = out->n;
	hb hv = { 0 };
	hb_varint(&hv, d0);
	hb_varint(&hv, dsize);
	hb_varint(out, 0);
	hb_varint(out, 8);
	hb_varint(out, hv.n);
	hb_put(out, "\xff\xff\xff\xff\xff\xff\xff\xff", 8); /* a separator above every key used here */
	hb_put(out, hv.p, hv.n);
	hb_free(&hv);
	hb_fixed32(out, 0);
	hb_fixed32(out, 1);
	size_t isize = out->n - i0 - 0;
	block_trailer(out, i0, 0, 0);
	size_t f0 = out->n;
	hb_varint(out, m0);
	hb_varint(out, 8);
	hb_varint(out, (flags & IX_HANDLE_PAST_EOF) ? i0 + 100000 : i0);
	hb_varint(out, isize);
	while (out->n < f0 + 40)
		hb_u8(out, 0);
	hb_fixed32(out, 0x8b80fb57u);
	hb_fixed32(out, 0xdb477524u);
	if (flags & IX_GARBAGE_AFTER)
		hb_put(out, "polyglot trailing bytes", 23);
}

/* ------------------------------------------------------------------ */
/* one crafted bundle                                                   */
/* ------------------------------------------------------------------ */

typedef struct bundle {
	kv e[16];
	size_t n;
	hb data;
	int flags;
} bundle;

static hb *add(bundle *b, const char *key, size_t klen)
{
	cr_assert_lt(b->n, 16);
	kv *e = &b->e[b->n++];
	e->key = key;
	e->klen = klen;
	memset(&e->val, 0, sizeof(e->val));
	return &e->val;
}

/* A standard header plus float32 entries for the data already in b->data. */
static void std_header(bundle *b)
{
	header(add(b, "", 0), 1, 0, 0);
}

static void put_f32(bundle *b, const char *key, int n)
{
	int64_t off = (int64_t)b->data.n;
	for (int i = 0; i < n; i++) {
		float f = 0.5f + (float)i;
		hb_put(&b->data, &f, 4);
	}
	int64_t dims[1] = { n };
	entry(add(b, key, strlen(key)), CKPT_DT_FLOAT, 1, dims, 0, off, 4 * n, masked_crc(b->data.p + off, 4 * (size_t)n));
}

typedef struct expect {
	int codes[4];          /* acceptable statuses (0-terminated; CKPT_OK allowed only if listed first as 1) */
	const char *words[3];  /* the message contains one of these (case-sensitive) */
	const char *variable;  /* expected variable name, or NULL */
} expect;

#define OK_ALLOWED 1

static int code_ok(const expect *x, int rc)
{
	for (int i = 0; i < 4 && x->codes[i]; i++)
		if (x->codes[i] == rc || (x->codes[i] == OK_ALLOWED && rc == CKPT_OK))
			return 1;
	return 0;
}

static rel_outcome run_bundle(bundle *b, const expect *x, const char *item)
{
	hb ix = { 0 };
	table(&ix, b->e, b->n, b->flags);
	/* every library block of this case, the file system's included, goes through the counter */
	rel_alloc_install(0, 64u << 20);
	ckpt_vfs *vfs;
	cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
	cr_assert_eq(ckpt_vfs_memory_put(vfs, "h/b.index", ix.p, ix.n), CKPT_OK);
	cr_assert_eq(ckpt_vfs_memory_put(vfs, "h/b.data-00000-of-00001", b->data.p, b->data.n), CKPT_OK);
	rel_largest = 0;
	ckpt_error_clear();
	rel_outcome o = rel_walk(vfs, "h/b", 0);
	const ckpt_error *e = ckpt_error_last();
	char var[256] = "";
	if (o.rc < 0 && e->variable)
		snprintf(var, sizeof(var), "%s", e->variable);
	size_t largest = rel_largest;
	ckpt_vfs_free(vfs);
	long live = rel_live_blocks;
	rel_alloc_restore();
	cr_assert_eq(live, 0, "%s: %ld library blocks leaked", item, live);
	cr_assert(code_ok(x, o.rc), "%s: got %s (%s)", item, ckpt_status_name(o.rc), o.message);
	cr_assert_leq(largest, (size_t)(64u << 20), "%s: allocation of %zu bytes requested", item, largest);
	if (o.rc < 0) {
		cr_assert(o.message[0], "%s: no message", item);
		cr_assert(o.has_path, "%s: the error does not name the file (%s)", item, o.message);
		int hit = !x->words[0];
		for (int i = 0; i < 3 && x->words[i]; i++)
			hit |= strstr(o.message, x->words[i]) != NULL;
		cr_assert(hit, "%s: message does not say why: \"%s\"", item, o.message);
		if (x->variable)
			cr_assert_str_eq(var, x->variable, "%s: error names variable '%s'", item, var);
	}
	for (size_t i = 0; i < b->n; i++)
		hb_free(&b->e[i].val);
	hb_free(&b->data);
	hb_free(&ix);
	return o;
}

/* ------------------------------------------------------------------ */
/* All formats                                                          */
/* ------------------------------------------------------------------ */

Test(hostile, item01_size_arithmetic_overflows)
{
	bundle b = { 0 };
	std_header(&b);
	int64_t dims[2] = { INT64_C(1) << 62, 8 };
	entry(add(&b, "big", 3), CKPT_DT_DOUBLE, 2, dims, 0, 0, 64, 0);
	run_bundle(&b, &(expect){ { CKPT_ELIMIT, CKPT_EFORMAT }, { "overflow" }, "big" }, "1: dims product overflows");

	bundle c = { 0 };
	std_header(&c);
	put_f32(&c, "a", 2);
	int64_t d1[1] = { 2 };
	entry(add(&c, "b", 1), CKPT_DT_FLOAT, 1, d1, 0, INT64_MAX - 2, 8, 0);
	run_bundle(&c, &(expect){ { CKPT_EFORMAT, CKPT_ELIMIT }, { "overflow", "past the end", "beyond" }, "b" },
		"1: offset + size wraps");
}

Test(hostile, item02_offset_past_eof_or_negative)
{
	bundle b = { 0 };
	std_header(&b);
	put_f32(&b, "a", 3);
	int64_t d[1] = { 2 };
	entry(add(&b, "b", 1), CKPT_DT_FLOAT, 1, d, 0, 8, 8, 0);
	run_bundle(&b, &(expect){ { CKPT_EFORMAT }, { "past the end", "truncated", "beyond" }, "b" }, "2: past EOF");

	bundle c = { 0 };
	std_header(&c);
	put_f32(&c, "a", 3);
	entry(add(&c, "b", 1), CKPT_DT_FLOAT, 1, d, 0, -8, 8, 0);
	run_bundle(&c, &(expect){ { CKPT_EFORMAT }, { "negative" }, "b" }, "2: negative offset");
}

Test(hostile, item03_overlapping_tensors)
{
	bundle b = { 0 };
	std_header(&b);
	put_f32(&b, "a", 4);
	int64_t d[1] = { 2 };
	/* "b" re-uses bytes 4..12 of "a" with a valid crc: only an overlap check can see it */
	entry(add(&b, "b", 1), CKPT_DT_FLOAT, 1, d, 0, 4, 8, masked_crc(b.data.p + 4, 8));
	run_bundle(&b, &(expect){ { CKPT_EFORMAT }, { "overlap" }, NULL }, "3: overlapping byte ranges");
}

Test(hostile, item04_bad_shapes)
{
	bundle b = { 0 };
	std_header(&b);
	int64_t neg[1] = { -1 };
	entry(add(&b, "n", 1), CKPT_DT_FLOAT, 1, neg, 0, 0, 4, 0);
	run_bundle(&b, &(expect){ { CKPT_EFORMAT }, { "dimension", "negative" }, "n" }, "4: negative dim");

	bundle c = { 0 };
	std_header(&c);
	int64_t dims[CKPT_MAX_RANK + 1];
	for (int i = 0; i <= CKPT_MAX_RANK; i++)
		dims[i] = 1;
	entry(add(&c, "r", 1), CKPT_DT_FLOAT, CKPT_MAX_RANK + 1, dims, 0, 0, 4, 0);
	run_bundle(&c, &(expect){ { CKPT_ELIMIT, CKPT_EFORMAT }, { "rank" }, "r" }, "4: rank above the cap");

	bundle d = { 0 };
	std_header(&d);
	int64_t absurd[2] = { INT64_C(1) << 40, INT64_C(1) << 20 };
	entry(add(&d, "x", 1), CKPT_DT_FLOAT, 2, absurd, 0, 0, 4, 0);
	run_bundle(&d, &(expect){ { CKPT_EFORMAT, CKPT_ELIMIT }, { "size", "overflow" }, "x" }, "4: absurd dims");

	/* zero is legal: an empty tensor reads back */
	bundle e = { 0 };
	std_header(&e);
	int64_t zero[2] = { 0, 3 };
	entry(add(&e, "z", 1), CKPT_DT_FLOAT, 2, zero, 0, 0, 0, ckpt_crc32c_mask(0));
	rel_outcome o = run_bundle(&e, &(expect){ { OK_ALLOWED }, { NULL }, NULL }, "4: zero dim");
	cr_assert_eq(o.rc, CKPT_OK);
	cr_assert_eq(o.nread, 1);
}

Test(hostile, item05_size_mismatch)
{
	bundle b = { 0 };
	std_header(&b);
	hb_put(&b.data, "0123456789ab", 12);
	int64_t d[1] = { 2 };
	entry(add(&b, "m", 1), CKPT_DT_FLOAT, 1, d, 0, 0, 12, masked_crc(b.data.p, 12));
	run_bundle(&b, &(expect){ { CKPT_EFORMAT }, { "size" }, "m" }, "5: product x dtype size != size");
}

Test(hostile, item06_unknown_dtype)
{
	int64_t bad[] = { 20, 99, 1000, -1 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bundle b = { 0 };
		std_header(&b);
		hb_put(&b.data, "abcd", 4);
		int64_t d[1] = { 1 };
		entry(add(&b, "u", 1), bad[i], 1, d, 0, 0, 4, masked_crc("abcd", 4));
		char item[64];
		snprintf(item, sizeof(item), "6: dtype %lld", (long long)bad[i]);
		run_bundle(&b, &(expect){ { CKPT_EUNSUPPORTED, CKPT_EFORMAT }, { "dtype", "type" }, "u" }, item);
	}
}

Test(hostile, item07_declared_size_far_above_stored)
{
	bundle b = { 0 };
	std_header(&b);
	put_f32(&b, "a", 1);
	int64_t d[1] = { INT64_C(1) << 30 };
	entry(add(&b, "huge", 4), CKPT_DT_FLOAT, 1, d, 0, 0, INT64_C(4) << 30, 0);
	run_bundle(&b, &(expect){ { CKPT_EFORMAT, CKPT_ELIMIT }, { "past the end", "exceeds", "budget" }, "huge" },
		"7: 4 GiB declared, 4 bytes stored");

	/* a string tensor claiming 2^40 elements in 4 bytes */
	bundle c = { 0 };
	std_header(&c);
	hb_put(&c.data, "\0\0\0\0", 4);
	int64_t s[1] = { INT64_C(1) << 40 };
	entry(add(&c, "strs", 4), CKPT_DT_STRING, 1, s, 0, 0, 4, 0);
	run_bundle(&c, &(expect){ { CKPT_EFORMAT, CKPT_ELIMIT }, { "string", "element", "bytes" }, "strs" },
		"7: string bomb");
}

Test(hostile, item08_truncated_index_and_data)
{
	bundle b = { 0 };
	std_header(&b);
	put_f32(&b, "a", 4);
	hb ix = { 0 };
	table(&ix, b.e, b.n, 0);
	ckpt_vfs *vfs;
	ckpt_vfs_memory_new(&vfs);
	/* shorter than the 48-byte footer */
	ckpt_vfs_memory_put(vfs, "h/b.index", ix.p + ix.n - 40, 40);
	ckpt_vfs_memory_put(vfs, "h/b.data-00000-of-00001", b.data.p, b.data.n);
	rel_outcome o = rel_walk(vfs, "h/b", 0);
	cr_assert_eq(o.rc, CKPT_EFORMAT, "%s", o.message);
	cr_assert(o.has_path);
	/* data one byte short */
	ckpt_vfs_memory_put(vfs, "h/b.index", ix.p, ix.n);
	ckpt_vfs_memory_put(vfs, "h/b.data-00000-of-00001", b.data.p, b.data.n - 1);
	o = rel_walk(vfs, "h/b", 0);
	cr_assert_eq(o.rc, CKPT_EFORMAT, "%s", o.message);
	cr_assert(o.has_path);
	ckpt_vfs_free(vfs);
	hb_free(&ix);
	hb_free(&b.data);
	for (size_t i = 0; i < b.n; i++)
		hb_free(&b.e[i].val);
}

Test(hostile, item09_duplicate_keys)
{
	bundle b = { 0 };
	std_header(&b);
	put_f32(&b, "dup", 1);
	put_f32(&b, "dup", 1);
	run_bundle(&b, &(expect){ { CKPT_EFORMAT }, { "order", "duplicate", "increasing" }, NULL }, "9: duplicate key");
}

/* A memory file system listing, to prove nothing was created. */
static size_t count_files(ckpt_vfs *vfs, const char *dir)
{
	char **names;
	size_t n = 0;
	if (ckpt_vfs_list(&names, &n, vfs, dir) == CKPT_OK)
		ckpt_vfs_free_list(names, n);
	return n;
}

Test(hostile, item10_names_with_nul_non_utf8_and_paths)
{
	/* embedded NUL: the key cannot be a C string without losing bytes */
	bundle b = { 0 };
	std_header(&b);
	put_f32(&b, "a\0b", 1);
	b.e[b.n - 1].klen = 3; /* put_f32 measured the key with strlen */
	put_f32(&b, "c", 1);
	b.e[b.n - 1].klen = 1;
	/* put_f32 used strlen: redo the key lengths by hand */
	run_bundle(&b, &(expect){ { CKPT_EFORMAT }, { "NUL", "nul", "embedded" }, NULL }, "10: NUL in a key");

	/* non-UTF-8 and path-like keys are only keys: listed, never used as paths */
	bundle c = { 0 };
	std_header(&c);
	put_f32(&c, "../../etc/passwd", 1);
	put_f32(&c, "/abs/path", 1);
	put_f32(&c, "\xff\xfe\x80name", 1);
	/* sorted order of the three keys: "../", "/abs", "\xff" */
	hb ix = { 0 };
	table(&ix, c.e, c.n, 0);
	ckpt_vfs *vfs;
	ckpt_vfs_memory_new(&vfs);
	ckpt_vfs_memory_put(vfs, "h/b.index", ix.p, ix.n);
	ckpt_vfs_memory_put(vfs, "h/b.data-00000-of-00001", c.data.p, c.data.n);
	/* TensorFlow keys are bytes: all three are entries, read as such, and name no file */
	rel_outcome o = rel_walk(vfs, "h/b", 0);
	cr_assert_eq(o.rc, CKPT_OK, "%s", o.message);
	{
		cr_assert_eq(o.nread, 3);
		ckpt_reader *r;
		ckpt_open_options op = CKPT_OPEN_OPTIONS_INIT;
		op.vfs = vfs;
		cr_assert_eq(ckpt_reader_open(&r, "h/b", &op), CKPT_OK);
		size_t idx;
		cr_assert_eq(ckpt_reader_find(&idx, r, "../../etc/passwd"), CKPT_OK);
		cr_assert_eq(ckpt_reader_find(&idx, r, "\xff\xfe\x80name"), CKPT_OK, "non-UTF-8 key kept byte for byte");
		ckpt_reader_free(r);
	}
	cr_assert_eq(count_files(vfs, "h"), 2, "reading created files");
	cr_assert_not(ckpt_vfs_exists(NULL, vfs, "etc/passwd"));
	cr_assert_not(ckpt_vfs_exists(NULL, vfs, "/abs/path"));
	ckpt_vfs_free(vfs);
	hb_free(&ix);
	hb_free(&c.data);
	for (size_t i = 0; i < c.n; i++)
		hb_free(&c.e[i].val);
}

Test(hostile, item10_state_file_names_outside_the_directory)
{
	/* a bundle outside the directory the state file lives in */
	bundle b = { 0 };
	std_header(&b);
	put_f32(&b, "a", 1);
	hb ix = { 0 };
	table(&ix, b.e, b.n, 0);
	ckpt_vfs *vfs;
	ckpt_vfs_memory_new(&vfs);
	ckpt_vfs_memory_put(vfs, "victim/ckpt-1.index", ix.p, ix.n);
	ckpt_vfs_memory_put(vfs, "victim/ckpt-1.data-00000-of-00001", b.data.p, b.data.n);
	ckpt_vfs_memory_put(vfs, "run/ckpt-1.index", ix.p, ix.n);
	ckpt_vfs_memory_put(vfs, "run/ckpt-1.data-00000-of-00001", b.data.p, b.data.n);
	const char *state = "model_checkpoint_path: \"../victim/ckpt-1\"\n"
		"all_model_checkpoint_paths: \"../victim/ckpt-1\"\n"
		"all_model_checkpoint_paths: \"/victim/ckpt-1\"\n"
		"all_model_checkpoint_paths: \"ckpt-1\"\n";
	ckpt_vfs_memory_put(vfs, "run/checkpoint", state, strlen(state));
	/* opening by directory refuses a state file whose latest checkpoint lies outside it */
	rel_outcome o = rel_walk(vfs, "run", 0);
	cr_assert_eq(o.rc, CKPT_ENOTFOUND, "%s: %s", ckpt_status_name(o.rc), o.message);
	cr_assert(o.message[0] && o.has_path, "%s", o.message);

	/* the manager must never delete what lies outside its directory */
	ckpt_checkpoint *ck;
	ckpt_checkpoint_options co = CKPT_CHECKPOINT_OPTIONS_INIT;
	co.vfs = vfs;
	co.no_fsync = 1;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &co), CKPT_OK);
	ckpt_variable *v;
	ckpt_shape s = { 0 };
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "x", "x", CKPT_DT_FLOAT, &s, NULL)),
		     CKPT_OK);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = vfs;
	mo.no_fsync = 1;
	ckpt_manager *m;
	int rc = ckpt_manager_new_ext(&m, ck, "run", 1, &mo);
	cr_assert_eq(rc, CKPT_OK, "%s", ckpt_error_last()->message);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ckpt_status_of(ckpt_manager_save(m)), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(ck);
	cr_assert(ckpt_vfs_exists(NULL, vfs, "victim/ckpt-1.index"), "the manager deleted a file outside its directory");
	cr_assert(ckpt_vfs_exists(NULL, vfs, "victim/ckpt-1.data-00000-of-00001"),
		  "the manager deleted a file outside its directory");
	ckpt_vfs_free(vfs);
	hb_free(&ix);
	hb_free(&b.data);
	for (size_t i = 0; i < b.n; i++)
		hb_free(&b.e[i].val);
}

Test(hostile, item11_trailing_garbage_after_the_footer)
{
	bundle b = { 0 };
	std_header(&b);
	put_f32(&b, "a", 1);
	b.flags = IX_GARBAGE_AFTER;
	run_bundle(&b, &(expect){ { CKPT_EFORMAT }, { "magic", "footer" }, NULL }, "11: bytes after the footer");
}

/* TrackableObjectGraph: node i has one child, node i+1 (a chain), and a back edge to the root. */
static void chain_graph(hb *g, int nodes, int cycle)
{
	for (int i = 0; i < nodes; i++) {
		hb node = { 0 };
		if (i + 1 < nodes || cycle) {
			hb ref = { 0 };
			pb_int(&ref, 1, i + 1 < nodes ? i + 1 : 0);
			pb_bytes(&ref, 2, "c", 1);
			pb_msg(&node, 1, &ref);
			hb_free(&ref);
		}
		pb_msg(g, 1, &node);
		hb_free(&node);
	}
}

Test(hostile, item12_deep_and_cyclic_object_graphs)
{
	for (int cycle = 0; cycle < 2; cycle++) {
		hb g = { 0 };
		chain_graph(&g, 20000, cycle);
		ckpt_object_graph *og = NULL;
		/* TF object graphs may be cyclic: both parse; a path 19999 levels deep is refused by the depth cap */
		ckpt_error_clear();
		int rc = ckpt_object_graph_parse(&og, g.p, g.n);
		cr_assert_eq(rc, CKPT_OK, "cycle %d: %s: %s", cycle, ckpt_status_name(rc), ckpt_error_last()->message);
		char *p = NULL;
		rc = ckpt_object_graph_path(&p, og, 19999);
		cr_assert_eq(rc, CKPT_ELIMIT, "cycle %d: %s", cycle, ckpt_status_name(rc));
		cr_assert_eq(ckpt_error_last()->code, CKPT_ELIMIT);
		cr_assert_not_null(strstr(ckpt_error_last()->message, "deeper than 512"), "%s", ckpt_error_last()->message);
		cr_assert_null(p);
		ckpt_object_graph_free(og);
		hb_free(&g);
	}
	/* a Keras config nested 100000 deep */
	size_t depth = 100000;
	char *json = malloc(2 * depth + 1);
	memset(json, '[', depth);
	memset(json + depth, ']', depth);
	json[2 * depth] = 0;
	ckpt_fuzz_keras_config((const uint8_t *)json, 2 * depth); /* aborts on a broken error contract */
	free(json);
}

/* ------------------------------------------------------------------ */
/* TensorBundle                                                         */
/* ------------------------------------------------------------------ */

Test(hostile, item13_block_handles_and_trailers)
{
	int flags[] = { IX_HANDLE_PAST_EOF, IX_BAD_TRAILER_CRC, IX_COMPRESSION_7 };
	const char *words[][2] = { { "past", "out of range" }, { "crc", "checksum" }, { "compression", "type" } };
	int codes[][2] = { { CKPT_EFORMAT, 0 }, { CKPT_ECHECKSUM, 0 }, { CKPT_EUNSUPPORTED, CKPT_EFORMAT } };
	for (int i = 0; i < 3; i++) {
		bundle b = { 0 };
		std_header(&b);
		put_f32(&b, "a", 2);
		b.flags = flags[i];
		expect x = { { codes[i][0], codes[i][1] }, { words[i][0], words[i][1] }, NULL };
		run_bundle(&b, &x, i == 0 ? "13: handle past EOF" : i == 1 ? "13: bad trailer crc" : "13: compression 7");
	}
}

Test(hostile, item14_num_shards)
{
	int64_t bad[] = { 0, -1, CKPT_MAX_SHARDS + 1, INT64_C(1) << 40 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bundle b = { 0 };
		header(add(&b, "", 0), bad[i], 0, 0);
		put_f32(&b, "a", 1);
		char item[64];
		snprintf(item, sizeof(item), "14: num_shards %lld", (long long)bad[i]);
		run_bundle(&b, &(expect){ { CKPT_EFORMAT, CKPT_ELIMIT }, { "num_shards", "shards" }, NULL }, item);
	}
}

Test(hostile, item15_shard_id_out_of_range)
{
	int64_t bad[] = { 1, 7, -1 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bundle b = { 0 };
		std_header(&b);
		hb_put(&b.data, "abcd", 4);
		int64_t d[1] = { 1 };
		entry(add(&b, "s", 1), CKPT_DT_FLOAT, 1, d, bad[i], 0, 4, masked_crc("abcd", 4));
		run_bundle(&b, &(expect){ { CKPT_EFORMAT }, { "shard" }, "s" }, "15: shard id out of range");
	}
}

Test(hostile, item16_crc_mismatch_and_opt_out)
{
	bundle b = { 0 };
	std_header(&b);
	hb_put(&b.data, "abcd", 4);
	int64_t d[1] = { 1 };
	entry(add(&b, "c", 1), CKPT_DT_FLOAT, 1, d, 0, 0, 4, masked_crc("abce", 4));
	hb ix = { 0 };
	table(&ix, b.e, b.n, 0);
	ckpt_vfs *vfs;
	ckpt_vfs_memory_new(&vfs);
	ckpt_vfs_memory_put(vfs, "h/b.index", ix.p, ix.n);
	ckpt_vfs_memory_put(vfs, "h/b.data-00000-of-00001", b.data.p, b.data.n);
	rel_outcome o = rel_walk(vfs, "h/b", 0);
	cr_assert_eq(o.rc, CKPT_ECHECKSUM, "%s", o.message);
	cr_assert_not_null(strstr(o.message, "crc32c"), "%s", o.message);
	o = rel_walk(vfs, "h/b", 1);
	cr_assert_eq(o.rc, CKPT_OK, "no_verify: %s", o.message);
	ckpt_vfs_free(vfs);
	hb_free(&ix);
	hb_free(&b.data);
	for (size_t i = 0; i < b.n; i++)
		hb_free(&b.e[i].val);
}

/* TensorSliceProto with one extent per (start, length) pair. */
static void entry_sliced(hb *v, int rank, const int64_t *dims, int nslices, const int64_t (*ext)[2])
{
	pb_int(v, 1, CKPT_DT_FLOAT);
	hb sh = { 0 };
	for (int i = 0; i < rank; i++) {
		hb d = { 0 };
		pb_int(&d, 1, dims[i]);
		pb_msg(&sh, 2, &d);
		hb_free(&d);
	}
	pb_msg(v, 2, &sh);
	hb_free(&sh);
	for (int s = 0; s < nslices; s++) {
		hb sl = { 0 };
		for (int i = 0; i < rank; i++) {
			hb e = { 0 };
			pb_int(&e, 1, ext[s * rank + i][0]);
			if (ext[s * rank + i][1] >= 0)
				pb_int(&e, 2, ext[s * rank + i][1]);
			pb_msg(&sl, 1, &e);
			hb_free(&e);
		}
		pb_msg(v, 7, &sl);
		hb_free(&sl);
	}
}

Test(hostile, item17_slices_that_do_not_tile)
{
	int64_t dims[1] = { 4 };
	/* one slice [0, 8) of a tensor of 4: larger than the tensor */
	bundle b = { 0 };
	std_header(&b);
	const int64_t big[1][2] = { { 0, 8 } };
	entry_sliced(add(&b, "p", 1), 1, dims, 1, big);
	run_bundle(&b, &(expect){ { CKPT_EFORMAT }, { "slice" }, "p" }, "17: slice larger than the tensor");
	/* slices [0, 2) and [1, 2) overlap and leave [3, 4) uncovered */
	bundle c = { 0 };
	std_header(&c);
	const int64_t gap[2][2] = { { 0, 2 }, { 1, 2 } };
	entry_sliced(add(&c, "p", 1), 1, dims, 2, gap);
	run_bundle(&c, &(expect){ { CKPT_EFORMAT }, { "slice", "tile" }, "p" }, "17: slices do not tile");
	/* negative start */
	bundle d = { 0 };
	std_header(&d);
	const int64_t neg[1][2] = { { -2, 2 } };
	entry_sliced(add(&d, "p", 1), 1, dims, 1, neg);
	run_bundle(&d, &(expect){ { CKPT_EFORMAT }, { "slice" }, "p" }, "17: negative slice start");
}

Test(hostile, item18_endianness)
{
	int64_t e[] = { 1, 5 };
	for (int i = 0; i < 2; i++) {
		bundle b = { 0 };
		header(add(&b, "", 0), 1, e[i], 0);
		put_f32(&b, "a", 1);
		run_bundle(&b, &(expect){ { CKPT_EUNSUPPORTED, CKPT_EFORMAT }, { "endian" }, NULL }, "18: endianness");
	}
	/* and a version this reader may not consume */
	bundle c = { 0 };
	header(add(&c, "", 0), 1, 0, 7);
	put_f32(&c, "a", 1);
	run_bundle(&c, &(expect){ { CKPT_EUNSUPPORTED }, { "version", "consumer" }, NULL }, "18: min_consumer 7");
}

Test(hostile, item19_varints_and_field_lengths)
{
	/* an 11-byte varint in the entry proto */
	bundle b = { 0 };
	std_header(&b);
	hb *v = add(&b, "v", 1);
	hb_u8(v, 1 << 3);
	for (int i = 0; i < 10; i++)
		hb_u8(v, 0xff);
	hb_u8(v, 0x01);
	run_bundle(&b, &(expect){ { CKPT_EFORMAT }, { "BundleEntryProto", "varint" }, NULL }, "19: 11-byte varint");
	/* a length-delimited field longer than the message */
	bundle c = { 0 };
	std_header(&c);
	v = add(&c, "v", 1);
	hb_u8(v, 2 << 3 | 2);
	hb_varint(v, 1000);
	hb_put(v, "\x12\x00", 2);
	run_bundle(&c, &(expect){ { CKPT_EFORMAT }, { "BundleEntryProto", "length" }, NULL }, "19: field past message");
	/* an 11-byte varint inside the SSTable block */
	bundle d = { 0 };
	std_header(&d);
	put_f32(&d, "a", 1);
	d.flags = IX_LONG_VARINT_IN_BLOCK;
	run_bundle(&d, &(expect){ { CKPT_EFORMAT }, { "varint", "block", "entry" }, NULL }, "19: varint in block");
}

/* ------------------------------------------------------------------ */
/* Keras gaps not covered by test_keras_hostile.c (23, 24, 26, 28)      */
/* ------------------------------------------------------------------ */

#define FUZZ_DATA CKPT_SOURCE_DIR "/tests/fuzz/data/"
#define MASKING_CONFIG CKPT_SOURCE_DIR "/tests/fuzz/corpora/keras_config/keras__keras__keras3.8.0_masking_lstm_mlx.keras.config.json"

typedef struct zipm {
	const char *name;
	char *data;
	size_t n;
} zipm;

static void load(zipm *m, const char *name, const char *path)
{
	m->name = name;
	m->data = ts_read_file(path, &m->n);
	cr_assert_not_null(m->data, "%s", path);
}

/* Open a .keras built from `m` (after `patch` edits the zip bytes, may be NULL). */
static rel_outcome open_zip(const zipm *m, size_t n, void (*patch)(uint8_t *z, size_t len))
{
	const char *names[8];
	const uint8_t *bufs[8];
	size_t lens[8];
	for (size_t i = 0; i < n; i++) {
		names[i] = m[i].name;
		bufs[i] = (const uint8_t *)m[i].data;
		lens[i] = m[i].n;
	}
	size_t zlen;
	uint8_t *z = ckpt_fuzz_make_zip(names, bufs, lens, n, &zlen);
	cr_assert_not_null(z);
	if (patch)
		patch(z, zlen);
	ckpt_vfs *vfs;
	ckpt_vfs_memory_new(&vfs);
	ckpt_vfs_memory_put(vfs, "k/model.keras", z, zlen);
	rel_outcome o = rel_walk(vfs, "k/model.keras", 0);
	cr_assert_eq(count_files(vfs, "k"), 1, "reading an archive created files");
	ckpt_vfs_free(vfs);
	free(z);
	return o;
}

static void three(zipm *m)
{
	load(&m[0], "metadata.json", FUZZ_DATA "keras_config_base.metadata.json");
	load(&m[1], "config.json", MASKING_CONFIG);
	load(&m[2], "model.weights.h5", FUZZ_DATA "keras_config_base.weights.h5");
}

static void free3(zipm *m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(m[i].data);
}

Test(hostile, item23_lambda_in_model_config_is_never_code)
{
	/* a legacy full model whose config holds a marshalled Lambda: weights read, nothing else happens */
	ckpt_vfs *vfs;
	ckpt_vfs_memory_new(&vfs);
	size_t n;
	char *h5 = ts_read_file(CKPT_FIXTURES_DIR "/keras/dl4j-test-resources__keras2.0.9_sequential_lambda.h5", &n);
	cr_assert_not_null(h5);
	ckpt_vfs_memory_put(vfs, "k/lambda.h5", h5, n);
	rel_outcome o = rel_walk(vfs, "k/lambda.h5", 0);
	cr_assert_eq(o.rc, CKPT_OK, "%s", o.message);
	cr_assert_gt(o.nread, 0);
	cr_assert_eq(count_files(vfs, "k"), 1);
	ckpt_vfs_free(vfs);
	free(h5);
}

Test(hostile, item24_missing_or_duplicate_members)
{
	zipm m[4];
	three(m);
	/* no config.json */
	zipm no_cfg[2] = { m[0], m[2] };
	rel_outcome o = open_zip(no_cfg, 2, NULL);
	cr_assert_eq(o.rc, CKPT_EFORMAT, "%s", o.message);
	cr_assert_not_null(strstr(o.message, "config.json"), "%s", o.message);
	/* no metadata.json */
	zipm no_meta[2] = { m[1], m[2] };
	o = open_zip(no_meta, 2, NULL);
	cr_assert_eq(o.rc, CKPT_EFORMAT, "%s", o.message);
	cr_assert_not_null(strstr(o.message, "metadata.json"), "%s", o.message);
	/* metadata.json twice */
	zipm dup[4] = { m[0], m[0], m[1], m[2] };
	o = open_zip(dup, 4, NULL);
	cr_assert_eq(o.rc, CKPT_EFORMAT, "%s", o.message);
	cr_assert_not_null(strstr(o.message, "metadata.json"), "%s", o.message);
	/* model.weights.h5 twice */
	zipm dupw[4] = { m[0], m[1], m[2], m[2] };
	o = open_zip(dupw, 4, NULL);
	cr_assert_eq(o.rc, CKPT_EFORMAT, "%s", o.message);
	cr_assert_not_null(strstr(o.message, "model.weights.h5"), "%s", o.message);
	/* the intact archive reads */
	o = open_zip(m, 3, NULL);
	cr_assert_eq(o.rc, CKPT_OK, "%s", o.message);
	free3(m, 3);
}

/* Local header of the first member (metadata.json) claims a different size than the central directory. */
static void local_size_lies(uint8_t *z, size_t len)
{
	(void)len;
	z[18] ^= 0x10; /* compressed size */
	z[22] ^= 0x10; /* uncompressed size */
}

/* Central directory offset beyond the archive. */
static void cd_offset_past_end(uint8_t *z, size_t len)
{
	z[len - 22 + 16] = 0xff;
	z[len - 22 + 17] = 0xff;
	z[len - 22 + 18] = 0xff;
	z[len - 22 + 19] = 0x7f;
}

/* Entry count of the end record disagrees with the central directory. */
static void entry_count_lies(uint8_t *z, size_t len)
{
	z[len - 22 + 8] = 200;
	z[len - 22 + 10] = 200;
}

Test(hostile, item26_zip_headers_that_disagree)
{
	zipm m[3];
	three(m);
	void (*patches[])(uint8_t *, size_t) = { local_size_lies, cd_offset_past_end, entry_count_lies };
	const char *what[] = { "local header size != central directory", "central directory past the end",
		"entry count lies" };
	for (int i = 0; i < 3; i++) {
		rel_outcome o = open_zip(m, 3, patches[i]);
		cr_assert_lt(o.rc, 0, "%s: accepted", what[i]);
		cr_assert(o.rc == CKPT_EFORMAT || o.rc == CKPT_EUNSUPPORTED, "%s: %s", what[i], ckpt_status_name(o.rc));
		cr_assert(o.message[0] && o.has_path, "%s: %s", what[i], o.message);
	}
	free3(m, 3);
}

Test(hostile, item28_config_fields_that_would_run_code)
{
	zipm m[3];
	three(m);
	free(m[1].data);
	const char *evil = "{\"module\": \"os\", \"class_name\": \"system\", \"registered_name\": \"builtins>exec\", "
		"\"config\": {\"name\": \"x\", \"layers\": [{\"module\": \"subprocess\", \"class_name\": \"Popen\", "
		"\"registered_name\": \"evil>Popen\", \"config\": {\"function\": {\"class_name\": \"__lambda__\", "
		"\"config\": {\"code\": \"4wEAAAAAAAAAAAAAAAEAAAACAAAAQwAAAHMEAAAAfABTAKkBTqkAKQHaAXhyAgAAAHICAAAA+gc8c3RkaW4+2gg8bGFtYmRhPgEAAABzAAAAAA==\"}}}}]}}";
	m[1].data = strdup(evil);
	m[1].n = strlen(evil);
	/* the config is data: the archive opens and its three weights read; nothing is imported or run */
	rel_outcome o = open_zip(m, 3, NULL);
	cr_assert_eq(o.rc, CKPT_OK, "%s: %s", ckpt_status_name(o.rc), o.message);
	cr_assert_eq(o.nread, 3);
	const char *names[3] = { m[0].name, m[1].name, m[2].name };
	const uint8_t *bufs[3] = { (const uint8_t *)m[0].data, (const uint8_t *)m[1].data, (const uint8_t *)m[2].data };
	size_t lens[3] = { m[0].n, m[1].n, m[2].n }, zlen;
	uint8_t *z = ckpt_fuzz_make_zip(names, bufs, lens, 3, &zlen);
	ckpt_vfs *vfs;
	cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
	cr_assert_eq(ckpt_vfs_memory_put(vfs, "k/model.keras", z, zlen), CKPT_OK);
	ckpt_open_options op = CKPT_OPEN_OPTIONS_INIT;
	op.vfs = vfs;
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, "k/model.keras", &op), CKPT_OK);
	const char *w = ckpt_reader_meta(r, "config_warnings");
	cr_assert_not_null(w);
	cr_assert_not_null(strstr(w, "custom class 'builtins>exec' (not resolved)"), "%s", w);
	cr_assert_not_null(strstr(w, "custom class 'evil>Popen' (not resolved)"), "%s", w);
	cr_assert_not_null(strstr(w, "__lambda__ '?' (code not executed)"), "%s", w);
	ckpt_reader_free(r);
	ckpt_vfs_free(vfs);
	free(z);
	free3(m, 3);
}

/*
 * The hand-rolled BundleEntryProto decoder (formats/tf_bundle/entry_decode.c)
 * against protobuf-c: it must take the entries TensorFlow writes for ordinary
 * tensors, decline the rest, and whatever it accepts — canonical entries and
 * every mutation and truncation of them — protobuf-c must accept with the
 * same values. The hand encoder (entry_encode.c) must write the very bytes
 * protobuf-c packs.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <protobuf-c/protobuf-c.h>
#include "tensor_bundle.pb-c.h"
#include "formats/tf_bundle/tfb.h"

typedef struct spec {
	int32_t dtype;
	int rank;
	int64_t dims[5];
	int32_t shard;
	int64_t offset, size;
	uint32_t crc;
} spec;

static const spec SPECS[] = {
	{ 1, 1, { 16 }, 0, 0, 64, 0x8d3f2a11u },
	{ 1, 0, { 0 }, 0, 128, 4, 0xffffffffu },
	{ 9, 2, { 3, 7 }, 2, 1234567, 168, 0x00000001u },
	{ 19, 4, { 1, 0, 5, 2 }, 0, 0, 0, 0 },
	{ 0, 0, { 0 }, 0, 0, 0, 0 },                                  /* every field at its default */
	{ 7, 1, { 1 }, 0, (int64_t)1 << 40, 1 << 20, 0x12345678u },
	{ 2, 5, { 2, 2, 2, 2, 2 }, 31, INT64_MAX - 300, 256, 0xdeadbeefu },
};

/* Pack spec s as protobuf-c does (the encoding TensorFlow's C++ writes too). */
static size_t pack(const spec *s, unsigned char *out, size_t cap)
{
	CkptTf__BundleEntryProto e = CKPT_TF__BUNDLE_ENTRY_PROTO__INIT;
	CkptTf__TensorShapeProto sh = CKPT_TF__TENSOR_SHAPE_PROTO__INIT;
	CkptTf__TensorShapeProto__Dim dim[5], *dp[5];
	for (int i = 0; i < s->rank; i++) {
		ckpt_tf__tensor_shape_proto__dim__init(&dim[i]);
		dim[i].size = s->dims[i];
		dp[i] = &dim[i];
	}
	sh.n_dim = (size_t)s->rank;
	sh.dim = dp;
	e.dtype = s->dtype;
	e.shape = &sh;
	e.shard_id = s->shard;
	e.offset = s->offset;
	e.size = s->size;
	e.crc32c = s->crc;
	size_t n = ckpt_tf__bundle_entry_proto__get_packed_size(&e);
	cr_assert_leq(n, cap);
	return ckpt_tf__bundle_entry_proto__pack(&e, out);
}

/* If the fast decoder takes p[0:n], protobuf-c must too, with the same values. Returns whether it took it. */
static int agree(const unsigned char *p, size_t n)
{
	tfb_entry f;
	if (!tfb_entry_decode_fast(p, n, &f))
		return 0;
	CkptTf__BundleEntryProto *e = ckpt_tf__bundle_entry_proto__unpack(NULL, n, p);
	cr_assert_not_null(e, "fast decoder took %zu bytes protobuf-c refuses", n);
	cr_assert_eq(f.dtype, e->dtype);
	cr_assert_eq(f.shard_id, e->shard_id);
	cr_assert_eq(f.offset, e->offset);
	cr_assert_eq(f.size, e->size);
	cr_assert_eq(f.crc32c, e->crc32c);
	cr_assert_eq(e->n_slices, 0u);
	size_t rank = e->shape ? e->shape->n_dim : 0;
	cr_assert_eq((size_t)f.rank, rank);
	if (e->shape)
		cr_assert(!e->shape->unknown_rank);
	for (size_t i = 0; i < rank; i++) {
		cr_assert_eq(f.dims[i], e->shape->dim[i]->size, "dim %zu", i);
		cr_assert(!e->shape->dim[i]->name || !*e->shape->dim[i]->name);
	}
	ckpt_tf__bundle_entry_proto__free_unpacked(e, NULL);
	return 1;
}

Test(tfb_entry, takes_what_tensorflow_writes_for_ordinary_tensors)
{
	for (size_t k = 0; k < sizeof(SPECS) / sizeof(SPECS[0]); k++) {
		unsigned char buf[256];
		size_t n = pack(&SPECS[k], buf, sizeof buf);
		cr_assert(agree(buf, n), "spec %zu declined", k);
		tfb_entry f;
		cr_assert(tfb_entry_decode_fast(buf, n, &f));
		cr_assert_eq(f.rank, SPECS[k].rank);
		cr_assert_eq(f.size, SPECS[k].size);
	}
}

Test(tfb_entry, every_mutation_and_truncation_it_takes_protobuf_c_reads_the_same)
{
	static const unsigned char vals[] = { 0x00, 0x01, 0x07, 0x08, 0x12, 0x35, 0x3a, 0x7f, 0x80, 0xff };
	size_t taken = 0, tried = 0;
	for (size_t k = 0; k < sizeof(SPECS) / sizeof(SPECS[0]); k++) {
		unsigned char buf[256], m[256];
		size_t n = pack(&SPECS[k], buf, sizeof buf);
		for (size_t len = 0; len < n; len++) {
			taken += (size_t)agree(buf, len);
			tried++;
		}
		for (size_t i = 0; i < n; i++) {
			for (size_t v = 0; v < sizeof vals + 8; v++) {
				memcpy(m, buf, n);
				m[i] = v < sizeof vals ? vals[v] : (unsigned char)(buf[i] ^ (1u << (v - sizeof vals)));
				taken += (size_t)agree(m, n);
				tried++;
			}
		}
	}
	/* the mutants include valid entries (changed values) as well as refused ones */
	cr_assert_gt(taken, 0u);
	cr_assert_lt(taken, tried);
}

Test(tfb_entry, declines_slices_names_unknown_fields_and_out_of_range_values)
{
	/* dtype 1, shape {dim {size 4}}, then one extra field each */
	static const unsigned char base[] = { 0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x04 };
	static const struct { const char *what; unsigned char tail[16]; size_t n; } cases[] = {
		{ "slices (7)", { 0x3a, 0x00 }, 2 },
		{ "unknown field 9", { 0x48, 0x01 }, 2 },
		{ "dtype twice", { 0x08, 0x02 }, 2 },
		{ "negative offset", { 0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 }, 11 },
		{ "shard id over int32", { 0x18, 0x80, 0x80, 0x80, 0x80, 0x08 }, 6 },
		{ "crc32c as a varint", { 0x30, 0x01 }, 2 },
		{ "two-byte tag", { 0xa8, 0x00, 0x01 }, 3 },
	};
	tfb_entry f;
	cr_assert(tfb_entry_decode_fast(base, sizeof base, &f));
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		unsigned char m[64];
		memcpy(m, base, sizeof base);
		memcpy(m + sizeof base, cases[k].tail, cases[k].n);
		cr_assert(!tfb_entry_decode_fast(m, sizeof base + cases[k].n, &f), "took %s", cases[k].what);
	}
	/* shape {dim {size 4, name "x"}}, and shape {unknown_rank: true} */
	static const unsigned char named[] = { 0x12, 0x07, 0x12, 0x05, 0x08, 0x04, 0x12, 0x01, 'x' };
	static const unsigned char unknown[] = { 0x12, 0x02, 0x18, 0x01 };
	cr_assert(!tfb_entry_decode_fast(named, sizeof named, &f));
	cr_assert(!tfb_entry_decode_fast(unknown, sizeof unknown, &f));
	/* rank over CKPT_MAX_RANK: protobuf-c's path reports the cap */
	for (int rank = CKPT_MAX_RANK; rank <= CKPT_MAX_RANK + 1; rank++) {
		unsigned char big[16 + 4 * (CKPT_MAX_RANK + 1)];
		size_t o = 0;
		big[o++] = 0x12;
		o += tfb_varint_put(big + o, (uint64_t)(4 * rank));
		for (int i = 0; i < rank; i++) {
			big[o++] = 0x12; big[o++] = 0x02; big[o++] = 0x08; big[o++] = 0x01;
		}
		cr_assert_eq(tfb_entry_decode_fast(big, o, &f), rank <= CKPT_MAX_RANK, "rank %d", rank);
		if (rank <= CKPT_MAX_RANK)
			cr_assert(agree(big, o));
	}
	cr_assert(tfb_entry_decode_fast(base, sizeof base, &f));
	cr_assert_eq(f.rank, 1);
	cr_assert_eq(f.dims[0], 4);
}

/* The hand encoder (entry_encode.c) writes exactly the bytes protobuf-c packs, and the decoders read them back. */
static void encode_matches(const spec *s)
{
	unsigned char want[512];
	size_t n = pack(s, want, sizeof(want));
	tfb_buf got = { 0 };
	/* appended after other bytes, as the index builder does */
	cr_assert_eq(tfb_buf_append(&got, "xyz", 3), CKPT_OK);
	tfb_entry_fields f = { s->dtype, s->rank, s->dims, s->shard, s->offset, s->size, s->crc };
	cr_assert_eq(tfb_entry_encode(&got, &f), CKPT_OK);
	cr_assert_eq(got.len, n + 3, "dtype %d rank %d shard %d offset %lld size %lld crc %08x: %zu bytes, protobuf-c %zu",
		s->dtype, s->rank, s->shard, (long long)s->offset, (long long)s->size, s->crc, got.len - 3, n);
	cr_assert_eq(memcmp(got.p + 3, want, n), 0, "bytes differ from protobuf-c's");
	CkptTf__BundleEntryProto *e = ckpt_tf__bundle_entry_proto__unpack(NULL, n, got.p + 3);
	cr_assert_not_null(e);
	cr_assert_eq(e->shape ? e->shape->n_dim : 0u, (size_t)s->rank);
	for (int i = 0; i < s->rank; i++)
		cr_assert_eq(e->shape->dim[i]->size, s->dims[i]);
	ckpt_tf__bundle_entry_proto__free_unpacked(e, NULL);
	tfb_buf_free(&got);
}

Test(tfb_entry, encoder_writes_the_bytes_protobuf_c_packs)
{
	for (size_t i = 0; i < sizeof(SPECS) / sizeof(SPECS[0]); i++)
		encode_matches(&SPECS[i]);
	/* random fields over every varint length, defaults (left out), negative int32s (10-byte varints) */
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (int t = 0; t < 20000; t++) {
		spec s;
		memset(&s, 0, sizeof(s));
		uint64_t r[10];
		for (int k = 0; k < 10; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			r[k] = x;
		}
#define PICK(v) ((v) % 4 == 0 ? 0 : (int64_t)((v) >> ((v) % 64)))
		s.dtype = (int32_t)(r[0] % 5 == 0 ? 0 : r[0] % 7 == 0 ? -(int32_t)(r[0] % 100) : (int32_t)(r[0] % 30));
		s.rank = (int)(r[1] % 6);
		for (int i = 0; i < s.rank; i++)
			s.dims[i] = r[2 + i] % 9 == 0 ? -1 : PICK(r[2 + i]) & INT64_MAX;
		s.shard = (int32_t)(r[7] % 3 == 0 ? 0 : r[7] % 11 == 0 ? -5 : (int32_t)(r[7] % 1000));
		s.offset = PICK(r[8]) & INT64_MAX;
		s.size = PICK(r[9]) & INT64_MAX;
		s.crc = r[9] % 5 == 0 ? 0 : (uint32_t)(r[8] >> 7);
#undef PICK
		encode_matches(&s);
	}
}

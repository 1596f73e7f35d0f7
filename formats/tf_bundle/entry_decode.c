/*
 * BundleEntryProto without protobuf-c, for the entries TensorFlow writes for
 * ordinary tensors: dtype = 1, shape = 2 {dim = 2 {size = 1}}, shard_id = 3,
 * offset = 4, size = 5, crc32c = 6, each at most once, one-byte tags, values
 * in range. Opening a checkpoint of 10,000 tiny tensors spent a fifth of its
 * time in protobuf-c unpacking them.
 *
 * Anything else — slices, dimension names, unknown_rank, unknown fields,
 * repeated scalars, negative or oversized values, any malformed or truncated
 * byte — is declined, and the caller decodes that entry with protobuf-c as
 * before, which accepts it or fails with its usual message. So this path
 * never accepts what protobuf-c would refuse, and never reads a value
 * differently.
 */
#include <stdint.h>
#include "tfb.h"

static int get_varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
	size_t k = tfb_varint_get(*p, end, v);
	*p += k;
	return k != 0;
}

/* TensorShapeProto holding only dims with a size: 1, else 0. */
static int decode_shape(const unsigned char *p, const unsigned char *end, tfb_entry *e)
{
	while (p < end) {
		if (*p++ != 0x12)          /* dim = 2, length-delimited */
			return 0;
		uint64_t len, size = 0;
		if (!get_varint(&p, end, &len) || len > (uint64_t)(end - p) || e->rank >= CKPT_MAX_RANK)
			return 0;
		const unsigned char *q = p, *dend = p + len;
		int seen = 0;
		while (q < dend) {
			if (*q++ != 0x08 || seen++) /* size = 1, varint, once */
				return 0;
			if (!get_varint(&q, dend, &size) || size > (uint64_t)INT64_MAX)
				return 0;
		}
		e->dims[e->rank++] = (int64_t)size;
		p = dend;
	}
	return 1;
}

int tfb_entry_decode_fast(const unsigned char *p, size_t n, tfb_entry *e)
{
	const unsigned char *end = p + n;
	unsigned seen = 0;
	*e = (tfb_entry){ 0 };
	while (p < end) {
		unsigned tag = *p++;
		unsigned field = tag >> 3;
		if (tag & 0x80 || field < 1 || field > 6 || seen & (1u << field))
			return 0;
		seen |= 1u << field;
		uint64_t v;
		switch (tag) {
		case 0x08: /* dtype */
		case 0x18: /* shard_id */
			if (!get_varint(&p, end, &v) || v > (uint64_t)INT32_MAX)
				return 0;
			if (tag == 0x08)
				e->dtype = (int32_t)v;
			else
				e->shard_id = (int32_t)v;
			break;
		case 0x20: /* offset */
		case 0x28: /* size */
			if (!get_varint(&p, end, &v) || v > (uint64_t)INT64_MAX)
				return 0;
			if (tag == 0x20)
				e->offset = (int64_t)v;
			else
				e->size = (int64_t)v;
			break;
		case 0x35: /* crc32c, fixed32 */
			if (end - p < 4)
				return 0;
			e->crc32c = tfb_get32(p);
			p += 4;
			break;
		case 0x12: /* shape */
			if (!get_varint(&p, end, &v) || v > (uint64_t)(end - p) || !decode_shape(p, p + v, e))
				return 0;
			p += v;
			break;
		default:   /* a known field with another wire type: protobuf-c's to refuse */
			return 0;
		}
	}
	return 1;
}

/*
 * BundleEntryProto without protobuf-c, for the entries the writer makes for
 * ordinary tensors (no slices): the bytes protobuf-c packs for the same
 * message, field by field (proto3: a scalar at its default is left out; the
 * shape and each dim are written even when empty). Saving 10,000 tiny
 * tensors spent a fifth of its commit in protobuf-c sizing and packing each
 * entry through its descriptors. tests/formats/test_tfb_entry.c checks the bytes
 * against protobuf-c's.
 */
#include <stdint.h>
#include "tfb.h"

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* int32 fields are varints of the value sign-extended to 64 bits, as protobuf-c packs them */
static uint64_t i32(int32_t v)
{
	return (uint64_t)(int64_t)v;
}

int tfb_entry_encode(tfb_buf *out, const tfb_entry_fields *e)
{
	size_t shape_len = 0;
	for (int i = 0; i < e->rank; i++) {
		size_t dim_len = e->dims[i] ? 1 + varint_len((uint64_t)e->dims[i]) : 0;
		shape_len += 1 + varint_len(dim_len) + dim_len;
	}
	/* tags are one byte; varints at most 10, the length of the shape at most 10, crc32c 4 */
	CKPT_TRY(tfb_buf_reserve(out, 11 + 11 + shape_len + 11 + 11 + 11 + 5));
	unsigned char *p = out->p + out->len;
	if (e->dtype) {
		*p++ = 0x08;
		p += tfb_varint_put(p, i32(e->dtype));
	}
	*p++ = 0x12;
	p += tfb_varint_put(p, shape_len);
	for (int i = 0; i < e->rank; i++) {
		*p++ = 0x12;
		if (!e->dims[i]) {
			*p++ = 0;
			continue;
		}
		*p++ = (unsigned char)(1 + varint_len((uint64_t)e->dims[i]));
		*p++ = 0x08;
		p += tfb_varint_put(p, (uint64_t)e->dims[i]);
	}
	if (e->shard_id) {
		*p++ = 0x18;
		p += tfb_varint_put(p, i32(e->shard_id));
	}
	if (e->offset) {
		*p++ = 0x20;
		p += tfb_varint_put(p, (uint64_t)e->offset);
	}
	if (e->size) {
		*p++ = 0x28;
		p += tfb_varint_put(p, (uint64_t)e->size);
	}
	if (e->crc32c) {
		*p++ = 0x35;
		tfb_put32(p, e->crc32c);
		p += 4;
	}
	out->len = (size_t)(p - out->p);
	return CKPT_OK;
}

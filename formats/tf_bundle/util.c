/*
 * Small helpers of the TensorBundle backend: protobuf-style varints
 * (base-128, low group first, at most 10 bytes for 64 bits), a growable
 * byte buffer, and a protobuf-c allocator that goes through the ckpt__ hook.
 */
#include <string.h>
#include <protobuf-c/protobuf-c.h>
#include "tfb.h"

size_t tfb_varint_get(const unsigned char *p, const unsigned char *end, uint64_t *v)
{
	uint64_t r = 0;
	for (size_t i = 0; i < 10 && p + i < end; i++) {
		uint64_t b = p[i];
		if (i == 9 && b > 1)
			return 0; /* more than 64 bits */
		r |= (b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*v = r;
			return i + 1;
		}
	}
	return 0;
}

size_t tfb_varint_put(unsigned char *p, uint64_t v)
{
	size_t i = 0;
	while (v >= 0x80) {
		p[i++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	p[i++] = (unsigned char)v;
	return i;
}

int tfb_buf_reserve(tfb_buf *b, size_t extra)
{
	if (b->cap - b->len >= extra)
		return CKPT_OK;
	size_t need = b->len + extra;
	if (need < b->len)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "buffer size overflow");
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need) {
		if (cap > SIZE_MAX / 2) {
			cap = need;
			break;
		}
		cap *= 2;
	}
	unsigned char *p = ckpt__realloc(b->p, cap);
	if (!p)
		return CKPT_ENOMEM;
	b->p = p;
	b->cap = cap;
	return CKPT_OK;
}

int tfb_buf_append(tfb_buf *b, const void *data, size_t n)
{
	CKPT_TRY(tfb_buf_reserve(b, n));
	if (n)
		memcpy(b->p + b->len, data, n);
	b->len += n;
	return CKPT_OK;
}

int tfb_buf_varint(tfb_buf *b, uint64_t v)
{
	CKPT_TRY(tfb_buf_reserve(b, 10));
	b->len += tfb_varint_put(b->p + b->len, v);
	return CKPT_OK;
}

int tfb_buf_fixed32(tfb_buf *b, uint32_t v)
{
	CKPT_TRY(tfb_buf_reserve(b, 4));
	tfb_put32(b->p + b->len, v);
	b->len += 4;
	return CKPT_OK;
}

void tfb_buf_free(tfb_buf *b)
{
	ckpt__free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

static void *pb_alloc(void *ctx, size_t n)
{
	(void)ctx;
	return ckpt__malloc(n ? n : 1);
}

static void pb_free(void *ctx, void *p)
{
	(void)ctx;
	ckpt__free(p);
}

ProtobufCAllocator tfb_pb_allocator = { pb_alloc, pb_free, NULL };

#define SCRATCH_ALIGN ((size_t)16)

static void *scratch_alloc(void *ctx, size_t n)
{
	tfb_pb_scratch *s = ctx;
	n = n ? (n + SCRATCH_ALIGN - 1) & ~(SCRATCH_ALIGN - 1) : SCRATCH_ALIGN;
	if (n <= sizeof(s->buf.b) - s->used) {
		void *p = s->buf.b + s->used;
		s->used += n;
		return p;
	}
	return ckpt__malloc(n);
}

static void scratch_free(void *ctx, void *p)
{
	tfb_pb_scratch *s = ctx;
	const unsigned char *q = p;
	if (q >= s->buf.b && q < s->buf.b + sizeof(s->buf.b))
		return; /* reused with the scratch */
	ckpt__free(p);
}

void tfb_pb_scratch_init(tfb_pb_scratch *s, ProtobufCAllocator *a)
{
	s->used = 0;
	a->alloc = scratch_alloc;
	a->free = scratch_free;
	a->allocator_data = s;
}

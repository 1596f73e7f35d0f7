/*
 * The public face of the block codecs (ckpt/gguf.h): a ggml type name to
 * its table entry (gguf.c), argument checks, and float16 / bfloat16 output
 * through a float32 chunk on the stack.
 */
#include "gguf.h"
#include "ckpt/gguf.h"

#define CHUNK 4096 /* floats: a multiple of every block size */

static int lookup(const gguf_type **out, const char *type, int64_t n, const char *fn)
{
	*out = type ? ckpt__gguf_type_by_name(type) : NULL;
	if (!*out)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "%s: '%s' is not a ggml type", fn, type ? type : "(null)");
	if (n < 0 || n % (*out)->blck)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "%s: %lld elements are not whole %s blocks of %u", fn,
			(long long)n, (*out)->name, (*out)->blck);
	return CKPT_OK;
}

int ckpt_gguf_type_block(int64_t *block_elems, int64_t *block_bytes, const char *type)
{
	const gguf_type *t;
	CKPT_TRY(lookup(&t, type, 0, "ckpt_gguf_type_block"));
	if (block_elems)
		*block_elems = t->blck;
	if (block_bytes)
		*block_bytes = t->size;
	return CKPT_OK;
}

int ckpt_gguf_dequantize(void *out, ckpt_dtype out_dtype, const char *type, const void *blocks, int64_t n)
{
	const gguf_type *t;
	const uint8_t *x = blocks;
	CKPT_TRY(lookup(&t, type, n, "ckpt_gguf_dequantize"));
	if (!t->to_float)
		return ckpt__fail(CKPT_EUNSUPPORTED, NULL, NULL, -1, "ckpt_gguf_dequantize: no decoder for %s", t->name);
	if ((n && (!out || !blocks)) ||
	    (out_dtype != CKPT_DT_FLOAT && out_dtype != CKPT_DT_HALF && out_dtype != CKPT_DT_BFLOAT16))
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_gguf_dequantize: NULL buffer, or output dtype %s "
			"(float32, float16 or bfloat16 wanted)", ckpt_dtype_name(out_dtype));
	if (out_dtype == CKPT_DT_FLOAT) {
		t->to_float(out, x, n / t->blck);
		return CKPT_OK;
	}
	uint8_t *y = out;
	float f[CHUNK];
	for (int64_t done = 0; done < n; done += CHUNK) {
		int64_t k = n - done < CHUNK ? n - done : CHUNK;
		t->to_float(f, x + done / t->blck * t->size, k / t->blck);
		for (int64_t i = 0; i < k; i++) {
			uint16_t h = out_dtype == CKPT_DT_HALF ? ckpt__f2h(f[i]) : ckpt__f2bf(f[i]);
			y[2 * (done + i)] = (uint8_t)h;
			y[2 * (done + i) + 1] = (uint8_t)(h >> 8);
		}
	}
	return CKPT_OK;
}

int ckpt_gguf_quantize(void *out, const char *type, const float *x, int64_t n)
{
	const gguf_type *t;
	CKPT_TRY(lookup(&t, type, n, "ckpt_gguf_quantize"));
	if (!t->from_float)
		return ckpt__fail(CKPT_EUNSUPPORTED, NULL, NULL, -1, "ckpt_gguf_quantize: no encoder for %s", t->name);
	if (n && (!out || !x))
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_gguf_quantize: NULL buffer");
	t->from_float(out, x, n / t->blck);
	return CKPT_OK;
}

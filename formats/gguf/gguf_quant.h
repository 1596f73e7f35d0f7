/*
 * ggml block types to and from float32: one function per type, reached
 * through the type table (gguf.c). Decoders follow gguf-py's
 * gguf.quants.dequantize operation for operation (float32 products and
 * sums in the same order, so results are bit-identical); encoders follow
 * gguf-py's quantize where it has one (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and
 * ggml's reference quantize_row_*_ref otherwise (Q4_K, Q6_K).
 * Both work on whole blocks: nb blocks of the type's block size.
 */
#ifndef CKPT_GGUF_QUANT_H
#define CKPT_GGUF_QUANT_H

#include <stdint.h>
#include <string.h>

typedef void (*gguf_to_float_fn)(float *y, const uint8_t *x, int64_t nb);
typedef void (*gguf_from_float_fn)(uint8_t *y, const float *x, int64_t nb);

/* IEEE half <-> float. f2h rounds to nearest even, as numpy's astype(float16) and ggml's GGML_FP32_TO_FP16. */
static inline float ckpt__h2f(uint16_t h)
{
	uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
	float f;
	if (e == 0x1f) {
		u = s | 0x7f800000u | m << 13;
	} else if (e) {
		u = s | (e + 112) << 23 | m << 13;
	} else if (m) { /* subnormal: m * 2^-24, exact in float */
		f = (float)m * 0x1p-24f;
		return s ? -f : f;
	} else {
		u = s;
	}
	memcpy(&f, &u, 4);
	return f;
}

static inline uint16_t ckpt__f2h(float f)
{
	uint32_t x, fe, fs;
	uint16_t sign;
	memcpy(&x, &f, 4);
	sign = (uint16_t)((x >> 16) & 0x8000);
	fe = x & 0x7f800000u;
	fs = x & 0x007fffffu;
	if (fe >= 0x47800000u) { /* overflow to inf; NaN stays NaN */
		if (fe == 0x7f800000u && fs) {
			uint16_t r = (uint16_t)(0x7c00u + (fs >> 13));
			return (uint16_t)(sign | (r == 0x7c00u ? 0x7e00u : r));
		}
		return (uint16_t)(sign | 0x7c00u);
	}
	if (fe <= 0x38000000u) { /* a half subnormal or zero */
		if (fe < 0x33000000u)
			return sign;
		fe >>= 23;
		fs = (0x00800000u + fs) >> (113 - fe);
		if ((fs & 0x3fffu) != 0x1000u || (x & 0x7ffu))
			fs += 0x1000u;
		return (uint16_t)(sign + (fs >> 13));
	}
	if ((fs & 0x3fffu) != 0x1000u)
		fs += 0x1000u;
	return (uint16_t)(sign + ((fe - 0x38000000u) >> 13) + (fs >> 13)); /* a carry into the exponent is right */
}

/* float -> bfloat16 as gguf-py's BF16 and ggml_compute_fp32_to_bf16: NaN quieted, round to nearest even. */
static inline uint16_t ckpt__f2bf(float f)
{
	uint32_t n;
	memcpy(&n, &f, 4);
	if ((n & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((n >> 16) | 64);
	return (uint16_t)(((uint64_t)n + 0x7fff + ((n >> 16) & 1)) >> 16);
}

static inline float ckpt__bf2f(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* gguf_dequant.c */
void ckpt__deq_f32(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_f16(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_bf16(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_q4_0(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_q4_1(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_q5_0(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_q5_1(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_q8_0(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_q2_k(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_q3_k(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_q4_k(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_q5_k(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_q6_k(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_tq1_0(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_tq2_0(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_mxfp4(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_nvfp4(float *y, const uint8_t *x, int64_t nb);

/* gguf_iq.c */
void ckpt__deq_iq2_xxs(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_iq2_xs(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_iq2_s(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_iq3_xxs(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_iq3_s(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_iq1_s(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_iq1_m(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_iq4_nl(float *y, const uint8_t *x, int64_t nb);
void ckpt__deq_iq4_xs(float *y, const uint8_t *x, int64_t nb);

/* gguf_quantize.c */
void ckpt__q_f32(uint8_t *y, const float *x, int64_t nb);
void ckpt__q_f16(uint8_t *y, const float *x, int64_t nb);
void ckpt__q_bf16(uint8_t *y, const float *x, int64_t nb);
void ckpt__q_q4_0(uint8_t *y, const float *x, int64_t nb);
void ckpt__q_q4_1(uint8_t *y, const float *x, int64_t nb);
void ckpt__q_q5_0(uint8_t *y, const float *x, int64_t nb);
void ckpt__q_q5_1(uint8_t *y, const float *x, int64_t nb);
void ckpt__q_q8_0(uint8_t *y, const float *x, int64_t nb);

/* gguf_kquant.c */
void ckpt__q_q4_k(uint8_t *y, const float *x, int64_t nb);
void ckpt__q_q6_k(uint8_t *y, const float *x, int64_t nb);

#endif

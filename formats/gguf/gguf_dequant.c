/*
 * ggml blocks -> float32, one function per type (gguf_quant.h). Each one
 * is gguf-py's numpy dequantize_blocks written as loops: the same float32
 * operations in the same order (d * q, then - m or + m as a second
 * rounding: this file is built with -ffp-contract=off so no fused
 * multiply-add merges them), so the results match gguf-py bit for bit.
 * Block layouts are ggml-common.h's.
 */
#include "gguf_quant.h"

#define QK_K 256

static inline uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline float fp16_at(const uint8_t *p)
{
	return ckpt__h2f(le16(p));
}

void ckpt__deq_f32(float *y, const uint8_t *x, int64_t nb)
{
	memcpy(y, x, (size_t)nb * 4);
}

void ckpt__deq_f16(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++)
		y[i] = fp16_at(x + 2 * i);
}

void ckpt__deq_bf16(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++)
		y[i] = ckpt__bf2f(le16(x + 2 * i));
}

/* Q4_0: fp16 d, 16 bytes of nibbles (low nibbles are elements 0..15, high 16..31); y = d * (q - 8). */
void ckpt__deq_q4_0(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 18, y += 32) {
		const float d = fp16_at(x);
		for (int j = 0; j < 16; j++) {
			y[j] = d * (float)((x[2 + j] & 0xf) - 8);
			y[j + 16] = d * (float)((x[2 + j] >> 4) - 8);
		}
	}
}

/* Q4_1: fp16 d, fp16 m, nibbles; y = d * q + m. */
void ckpt__deq_q4_1(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 20, y += 32) {
		const float d = fp16_at(x), m = fp16_at(x + 2);
		for (int j = 0; j < 16; j++) {
			y[j] = d * (float)(x[4 + j] & 0xf) + m;
			y[j + 16] = d * (float)(x[4 + j] >> 4) + m;
		}
	}
}

/* Q5_0: fp16 d, u32 qh (bit j: the fifth bit of element j), nibbles; y = d * (q - 16). */
void ckpt__deq_q5_0(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 22, y += 32) {
		const float d = fp16_at(x);
		const uint32_t qh = (uint32_t)x[2] | (uint32_t)x[3] << 8 | (uint32_t)x[4] << 16 | (uint32_t)x[5] << 24;
		for (int j = 0; j < 16; j++) {
			int lo = (x[6 + j] & 0xf) | ((qh >> j) & 1) << 4, hi = (x[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
			y[j] = d * (float)(lo - 16);
			y[j + 16] = d * (float)(hi - 16);
		}
	}
}

/* Q5_1: fp16 d, fp16 m, u32 qh, nibbles; y = d * q + m. */
void ckpt__deq_q5_1(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 24, y += 32) {
		const float d = fp16_at(x), m = fp16_at(x + 2);
		const uint32_t qh = (uint32_t)x[4] | (uint32_t)x[5] << 8 | (uint32_t)x[6] << 16 | (uint32_t)x[7] << 24;
		for (int j = 0; j < 16; j++) {
			int lo = (x[8 + j] & 0xf) | ((qh >> j) & 1) << 4, hi = (x[8 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
			y[j] = d * (float)lo + m;
			y[j + 16] = d * (float)hi + m;
		}
	}
}

/* Q8_0: fp16 d, 32 int8; y = q * d. */
void ckpt__deq_q8_0(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 34, y += 32) {
		const float d = fp16_at(x);
		for (int j = 0; j < 32; j++)
			y[j] = (float)(int8_t)x[2 + j] * d;
	}
}

/* Q2_K: 16 scale bytes (low nibble scale, high nibble min), 64 bytes of 2-bit q, fp16 d, fp16 dmin. */
void ckpt__deq_q2_k(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 84, y += QK_K) {
		const uint8_t *sc = x, *qs = x + 16;
		const float d = fp16_at(x + 80), dmin = fp16_at(x + 82);
		for (int e = 0; e < QK_K; e++) {
			int h = e >> 7, s = (e >> 5) & 3, l = e & 31, g = e >> 4;
			float dl = d * (float)(sc[g] & 0xf), ml = dmin * (float)(sc[g] >> 4);
			y[e] = dl * (float)((qs[32 * h + l] >> (2 * s)) & 3) - ml;
		}
	}
}

/* Q3_K: 32 bytes hmask, 64 bytes 2-bit q, 12 bytes of 6-bit scales, fp16 d. */
void ckpt__deq_q3_k(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 110, y += QK_K) {
		const uint8_t *hm = x, *qs = x + 32, *sc = x + 96;
		const float d = fp16_at(x + 108);
		float dl[16];
		for (int k = 0; k < 16; k++) {
			int lo = k < 8 ? sc[k] & 0xf : sc[k - 8] >> 4, hi = (sc[8 + (k & 3)] >> (2 * (k >> 2))) & 3;
			dl[k] = d * (float)((int8_t)(lo | hi << 4) - 32);
		}
		for (int e = 0; e < QK_K; e++) {
			int h = e >> 7, s = (e >> 5) & 3, l = e & 31;
			int ql = (qs[32 * h + l] >> (2 * s)) & 3, qh = ((hm[l] >> (e >> 5)) & 1) ^ 1;
			y[e] = dl[e >> 4] * (float)(ql - (qh << 2));
		}
	}
}

/* The 6-bit scales and mins of Q4_K / Q5_K (gguf-py's Q4_K.get_scale_min, ggml's get_scale_min_k4). */
static void scale_min_k4(const uint8_t *s, uint8_t sc[8], uint8_t mn[8])
{
	for (int j = 0; j < 4; j++) {
		sc[j] = s[j] & 0x3f;
		mn[j] = s[4 + j] & 0x3f;
		sc[4 + j] = (uint8_t)((s[8 + j] & 0xf) | ((s[j] >> 2) & 0x30));
		mn[4 + j] = (uint8_t)((s[8 + j] >> 4) | ((s[4 + j] >> 2) & 0x30));
	}
}

/* Q4_K: fp16 d, fp16 dmin, 12 bytes scales, 128 bytes nibbles (32-element sub-blocks). */
void ckpt__deq_q4_k(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 144, y += QK_K) {
		const float d = fp16_at(x), dmin = fp16_at(x + 2);
		const uint8_t *qs = x + 16;
		uint8_t sc[8], mn[8];
		scale_min_k4(x + 4, sc, mn);
		for (int j = 0; j < 8; j++) {
			const float ds = d * (float)sc[j], dm = dmin * (float)mn[j];
			const uint8_t *q = qs + 32 * (j >> 1);
			const int sh = 4 * (j & 1);
			for (int l = 0; l < 32; l++)
				y[32 * j + l] = ds * (float)((q[l] >> sh) & 0xf) - dm;
		}
	}
}

/* Q5_K: as Q4_K plus 32 bytes qh (bit j of byte l: the fifth bit of element 32 j + l). */
void ckpt__deq_q5_k(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 176, y += QK_K) {
		const float d = fp16_at(x), dmin = fp16_at(x + 2);
		const uint8_t *qh = x + 16, *qs = x + 48;
		uint8_t sc[8], mn[8];
		scale_min_k4(x + 4, sc, mn);
		for (int j = 0; j < 8; j++) {
			const float ds = d * (float)sc[j], dm = dmin * (float)mn[j];
			const uint8_t *q = qs + 32 * (j >> 1);
			const int sh = 4 * (j & 1);
			for (int l = 0; l < 32; l++)
				y[32 * j + l] = ds * (float)(((q[l] >> sh) & 0xf) | ((qh[l] >> j) & 1) << 4) - dm;
		}
	}
}

/* Q6_K: 128 bytes low nibbles, 64 bytes high 2 bits, 16 int8 scales, fp16 d; y = (d * scale) * (q - 32). */
void ckpt__deq_q6_k(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 210, y += QK_K) {
		const uint8_t *ql = x, *qh = x + 128;
		const int8_t *sc = (const int8_t *)(x + 192);
		const float d = fp16_at(x + 208);
		for (int e = 0; e < QK_K; e++) {
			int h = e >> 7, lo = (ql[64 * h + (e & 63)] >> (4 * ((e >> 6) & 1))) & 0xf;
			int hi = (qh[32 * h + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
			y[e] = d * (float)sc[e >> 4] * (float)((lo | hi << 4) - 32);
		}
	}
}

/* TQ1_0: 48 + 4 bytes of base-3 digits (5 resp. 4 per byte, scaled by 256/243), fp16 d. */
void ckpt__deq_tq1_0(float *y, const uint8_t *x, int64_t nb)
{
	static const uint8_t pow3[5] = { 1, 3, 9, 27, 81 };
	for (int64_t i = 0; i < nb; i++, x += 54, y += QK_K) {
		const float d = fp16_at(x + 52);
		int e = 0;
		for (int p = 0; p < 5; p++)
			for (int l = 0; l < 32; l++, e++)
				y[e] = d * (float)((((uint8_t)(x[l] * pow3[p])) * 3 >> 8) - 1);
		for (int p = 0; p < 5; p++)
			for (int l = 0; l < 16; l++, e++)
				y[e] = d * (float)((((uint8_t)(x[32 + l] * pow3[p])) * 3 >> 8) - 1);
		for (int p = 0; p < 4; p++)
			for (int l = 0; l < 4; l++, e++)
				y[e] = d * (float)((((uint8_t)(x[48 + l] * pow3[p])) * 3 >> 8) - 1);
	}
}

/* TQ2_0: 64 bytes of 2-bit q, fp16 d; y = d * (q - 1). */
void ckpt__deq_tq2_0(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 66, y += QK_K) {
		const float d = fp16_at(x + 64);
		for (int e = 0; e < QK_K; e++)
			y[e] = d * (float)(((x[32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3) - 1);
	}
}

/* MXFP4: an e8m0 exponent (as ggml_e8m0_to_fp32_half: half the scale), 16 bytes of e2m1 codes (doubled). */
void ckpt__deq_mxfp4(float *y, const uint8_t *x, int64_t nb)
{
	static const int8_t kv[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
	for (int64_t i = 0; i < nb; i++, x += 17, y += 32) {
		uint32_t bits = x[0] < 2 ? 0x00200000u << x[0] : (uint32_t)(x[0] - 1) << 23;
		float d;
		memcpy(&d, &bits, 4);
		for (int j = 0; j < 16; j++) {
			y[j] = d * (float)kv[x[1 + j] & 0xf];
			y[j + 16] = d * (float)kv[x[1 + j] >> 4];
		}
	}
}

/* NVFP4: 4 UE4M3 scales (gguf-py's ue4m3_to_fp32, halved; 0x00 and 0x7F are 0), 4 x 8 bytes of e2m1 codes
 * (doubled, as MXFP4's): sub-block s is the low nibbles of bytes 8 s .. 8 s + 7, then their high nibbles. */
void ckpt__deq_nvfp4(float *y, const uint8_t *x, int64_t nb)
{
	static const int8_t kv[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
	for (int64_t i = 0; i < nb; i++, x += 36) {
		for (int s = 0; s < 4; s++, y += 16) {
			const unsigned b = x[s], e = (b >> 3) & 0xf, m = b & 7;
			const uint8_t *q = x + 4 + 8 * s;
			float d = 0.0f;
			if (b != 0 && b != 0x7f && e == 0) {
				d = (float)m * 0x1p-10f;
			} else if (b != 0 && b != 0x7f) { /* (1 + m / 8) * 2^(e - 7) * 0.5, built exactly */
				uint32_t bits = (e + 119) << 23 | m << 20;
				memcpy(&d, &bits, 4);
			}
			for (int j = 0; j < 8; j++) {
				y[j] = d * (float)kv[q[j] & 0xf];
				y[j + 8] = d * (float)kv[q[j] >> 4];
			}
		}
	}
}

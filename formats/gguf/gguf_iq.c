/*
 * ggml's IQ block types -> float32 (gguf_quant.h), one function per type.
 * Each is gguf-py's numpy dequantize_blocks as loops: the same float32
 * products in the same order (the block scale first, then grid value, then
 * sign), built with -ffp-contract=off, so results match gguf-py bit for bit.
 * Block layouts are ggml-common.h's; grids come from gguf_iq_grids.c.
 */
#include "gguf_quant.h"
#include "gguf_iq_grids.h"

#define QK_K 256

static inline float fp16_at(const uint8_t *p)
{
	return ckpt__h2f((uint16_t)(p[0] | p[1] << 8));
}

static inline uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* 8 elements: scale * grid value, negated where the sign byte's bit j is set (kmask_iq2xs[j] is 1 << j). */
static inline void put8(float *y, float db, const uint8_t *g, unsigned signs)
{
	for (int j = 0; j < 8; j++)
		y[j] = db * (float)g[j] * (signs >> j & 1 ? -1.0f : 1.0f);
}

/* IQ2_XXS: fp16 d, then per 32 elements two u32: 4 grid indices, and 4 x 7-bit sign indices + a 4-bit scale. */
void ckpt__deq_iq2_xxs(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 66) {
		const float d = fp16_at(x);
		for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
			const uint8_t *q = x + 2 + 8 * ib;
			const uint32_t aux = le32(q + 4);
			const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
			for (int l = 0; l < 4; l++)
				put8(y + 8 * l, db, ckpt__iq2xxs_grid[q[l]], ckpt__ksigns_iq2xs[(aux >> 7 * l) & 127]);
		}
	}
}

/* IQ2_XS: fp16 d, 32 u16 (9-bit grid index, 7-bit sign index), 8 bytes of two 4-bit scales (one per 16). */
void ckpt__deq_iq2_xs(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 74) {
		const float d = fp16_at(x);
		const uint8_t *sc = x + 66;
		for (int k = 0; k < QK_K / 8; k++, y += 8) {
			const unsigned q = (unsigned)(x[2 + 2 * k] | x[3 + 2 * k] << 8);
			const float db = d * (0.5f + (float)((sc[k / 4] >> 4 * (k / 2 % 2)) & 0xf)) * 0.25f;
			put8(y, db, ckpt__iq2xs_grid[q & 511], ckpt__ksigns_iq2xs[q >> 9]);
		}
	}
}

/* IQ2_S: fp16 d, 32 low index bytes, 32 sign bytes, 8 bytes of 2-bit high index parts, 8 bytes of scales. */
void ckpt__deq_iq2_s(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 82) {
		const float d = fp16_at(x);
		const uint8_t *qs = x + 2, *signs = x + 34, *qh = x + 66, *sc = x + 74;
		for (int k = 0; k < QK_K / 8; k++, y += 8) {
			const unsigned idx = qs[k] | ((qh[k / 4] >> 2 * (k % 4)) & 3) << 8;
			const float db = d * (0.5f + (float)((sc[k / 4] >> 4 * (k / 2 % 2)) & 0xf)) * 0.25f;
			put8(y, db, ckpt__iq2s_grid[idx], signs[k]);
		}
	}
}

/* IQ3_XXS: fp16 d, 64 grid index bytes (4 elements each), 8 u32 of 4 x 7-bit sign indices + a 4-bit scale. */
void ckpt__deq_iq3_xxs(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 98) {
		const float d = fp16_at(x);
		const uint8_t *qs = x + 2;
		for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
			const uint32_t aux = le32(x + 66 + 4 * ib);
			const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
			for (int l = 0; l < 4; l++) {
				const unsigned s = ckpt__ksigns_iq2xs[(aux >> 7 * l) & 127];
				const uint8_t *g1 = ckpt__iq3xxs_grid[qs[8 * ib + 2 * l]], *g2 = ckpt__iq3xxs_grid[qs[8 * ib + 2 * l + 1]];
				for (int j = 0; j < 4; j++) {
					y[8 * l + j] = db * (float)g1[j] * (s >> j & 1 ? -1.0f : 1.0f);
					y[8 * l + 4 + j] = db * (float)g2[j] * (s >> (j + 4) & 1 ? -1.0f : 1.0f);
				}
			}
		}
	}
}

/* IQ3_S: fp16 d, 64 low index bytes, 8 bytes of ninth index bits, 32 sign bytes, 4 bytes of 4-bit scales. */
void ckpt__deq_iq3_s(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 110) {
		const float d = fp16_at(x);
		const uint8_t *qs = x + 2, *qh = x + 66, *signs = x + 74, *sc = x + 106;
		for (int ib = 0; ib < QK_K / 32; ib++) {
			const float db = d * (float)(1 + 2 * ((sc[ib / 2] >> 4 * (ib % 2)) & 0xf));
			for (int l = 0; l < 4; l++, y += 8) {
				const int k = 8 * ib + 2 * l; /* two 4-element grid rows per sign byte */
				const unsigned s = signs[4 * ib + l];
				const uint8_t *g1 = ckpt__iq3s_grid[qs[k] | ((qh[ib] >> (k % 8)) & 1) << 8];
				const uint8_t *g2 = ckpt__iq3s_grid[qs[k + 1] | ((qh[ib] >> (k % 8 + 1)) & 1) << 8];
				for (int j = 0; j < 4; j++) {
					y[j] = db * (float)g1[j] * (s >> j & 1 ? -1.0f : 1.0f);
					y[4 + j] = db * (float)g2[j] * (s >> (j + 4) & 1 ? -1.0f : 1.0f);
				}
			}
		}
	}
}

/* IQ1_S: fp16 d, 32 low index bytes, 8 u16 (4 x 3-bit high index parts, a 3-bit scale, the delta's sign). */
void ckpt__deq_iq1_s(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 50) {
		const float d = fp16_at(x);
		const uint8_t *qs = x + 2;
		for (int ib = 0; ib < QK_K / 32; ib++) {
			const unsigned qh = (unsigned)(x[34 + 2 * ib] | x[35 + 2 * ib] << 8);
			const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
			const float delta = qh & 0x8000 ? -0.125f : 0.125f;
			for (int l = 0; l < 4; l++, y += 8) {
				const int8_t *g = ckpt__iq1s_grid[qs[4 * ib + l] | ((qh >> 3 * l) & 7) << 8];
				for (int j = 0; j < 8; j++)
					y[j] = dl * ((float)g[j] + delta);
			}
		}
	}
}

/* IQ1_M: 32 low index bytes, 16 bytes of two (3-bit high index, delta sign) nibbles, 4 u16 of 3-bit scales
 * whose top nibbles are the fp16 d. */
void ckpt__deq_iq1_m(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 56) {
		const uint8_t *qs = x, *qh = x + 32;
		unsigned sc[4];
		for (int k = 0; k < 4; k++)
			sc[k] = (unsigned)(x[48 + 2 * k] | x[49 + 2 * k] << 8);
		const float d = ckpt__h2f((uint16_t)((sc[0] >> 12) | (sc[1] >> 8 & 0xf0) | (sc[2] >> 4 & 0xf00) |
			(sc[3] & 0xf000)));
		for (int k = 0; k < QK_K / 8; k++, y += 8) {
			const float dl = d * (float)(2 * ((sc[k / 8] >> 3 * (k / 2 % 4)) & 7) + 1);
			const unsigned h = qh[k / 2] >> 4 * (k % 2);
			const float delta = h & 8 ? -0.125f : 0.125f;
			const int8_t *g = ckpt__iq1s_grid[qs[k] | (h & 7) << 8];
			for (int j = 0; j < 8; j++)
				y[j] = dl * ((float)g[j] + delta);
		}
	}
}

/* IQ4_NL: fp16 d, 16 bytes of 4-bit indices into kvalues_iq4nl (low nibbles 0..15, high 16..31). */
void ckpt__deq_iq4_nl(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 18, y += 32) {
		const float d = fp16_at(x);
		for (int j = 0; j < 16; j++) {
			y[j] = d * (float)ckpt__kvalues_iq4nl[x[2 + j] & 0xf];
			y[j + 16] = d * (float)ckpt__kvalues_iq4nl[x[2 + j] >> 4];
		}
	}
}

/* IQ4_XS: fp16 d, u16 of 2-bit high scale parts, 4 bytes of 4-bit low parts (6-bit scales, less 32),
 * 128 bytes as IQ4_NL's. */
void ckpt__deq_iq4_xs(float *y, const uint8_t *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 136) {
		const float d = fp16_at(x);
		const unsigned sh = (unsigned)(x[2] | x[3] << 8);
		for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
			const int ls = (int)(((x[4 + ib / 2] >> 4 * (ib % 2)) & 0xf) | ((sh >> 2 * ib) & 3) << 4);
			const float dl = d * (float)(ls - 32);
			const uint8_t *q = x + 8 + 16 * ib;
			for (int j = 0; j < 16; j++) {
				y[j] = dl * (float)ckpt__kvalues_iq4nl[q[j] & 0xf];
				y[j + 16] = dl * (float)ckpt__kvalues_iq4nl[q[j] >> 4];
			}
		}
	}
}

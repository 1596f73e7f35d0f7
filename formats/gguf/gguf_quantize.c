/*
 * float32 -> ggml blocks for the types gguf-py's quantize implements
 * (gguf_quant.h): the same float32 steps as its numpy code, which are
 * ggml's quantize_row_*_ref (ggml-quants.c), so the bytes match both.
 * Loops over a block's 32 elements have no branches (rounding and
 * clamping are written as selects) so the compiler vectorises them.
 */
#include <math.h>
#include "gguf_quant.h"

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/*
 * roundf (half away from zero) for |v| <= 127.5, without a branch (a
 * branch per element mispredicts on real data and costs 10x): truncate the
 * magnitude, add one when the dropped part (exact) is >= 0.5, put the sign back.
 */
static inline int32_t round_away(float v)
{
	float a = fabsf(v);
	int32_t t = (int32_t)a;
	t += a - (float)t >= 0.5f;
	return v < 0 ? -t : t;
}

void ckpt__q_f32(uint8_t *y, const float *x, int64_t nb)
{
	memcpy(y, x, (size_t)nb * 4);
}

void ckpt__q_f16(uint8_t *y, const float *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++)
		put16(y + 2 * i, ckpt__f2h(x[i]));
}

void ckpt__q_bf16(uint8_t *y, const float *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++)
		put16(y + 2 * i, ckpt__f2bf(x[i]));
}

/*
 * The element of largest magnitude, the first one on ties (ggml's loop,
 * numpy's argmax): the largest magnitude first (no branch), then its first
 * position (one predictable branch).
 */
static inline float signed_absmax(const float *x)
{
	float amax = 0.0f;
	int j = 0;
	for (int k = 0; k < 32; k++) {
		float a = fabsf(x[k]);
		amax = a > amax ? a : amax;
	}
	if (amax == 0.0f)
		return 0.0f;
	while (fabsf(x[j]) != amax)
		j++;
	return x[j];
}

static inline void minmax(const float *x, float *mn, float *mx)
{
	float lo = x[0], hi = x[0];
	for (int j = 1; j < 32; j++) {
		lo = x[j] < lo ? x[j] : lo;
		hi = x[j] > hi ? x[j] : hi;
	}
	*mn = lo;
	*mx = hi;
}

/* Q8_0: d = amax / 127, q = roundf(x / d). */
void ckpt__q_q8_0(uint8_t *y, const float *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 32, y += 34) {
		float amax = 0.0f;
		for (int j = 0; j < 32; j++) {
			float a = fabsf(x[j]);
			amax = a > amax ? a : amax;
		}
		const float d = amax / 127, id = d != 0.0f ? 1.0f / d : 0.0f;
		put16(y, ckpt__f2h(d));
		int32_t q[32];
		for (int j = 0; j < 32; j++)
			q[j] = round_away(x[j] * id);
		for (int j = 0; j < 32; j++)
			y[2 + j] = (uint8_t)q[j];
	}
}

/* Q4_0: d = max / -8 (max: the signed element of largest magnitude), q = min(15, trunc(x / d + 8.5)). */
void ckpt__q_q4_0(uint8_t *y, const float *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 32, y += 18) {
		const float d = signed_absmax(x) / -8, id = d != 0.0f ? 1.0f / d : 0.0f;
		uint8_t q[32];
		put16(y, ckpt__f2h(d));
		for (int j = 0; j < 32; j++) {
			int32_t v = (int32_t)(x[j] * id + 8.5f);
			q[j] = (uint8_t)(v > 15 ? 15 : v);
		}
		for (int j = 0; j < 16; j++)
			y[2 + j] = (uint8_t)(q[j] | q[j + 16] << 4);
	}
}

/* Q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5)). */
void ckpt__q_q4_1(uint8_t *y, const float *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 32, y += 20) {
		float mn, mx;
		minmax(x, &mn, &mx);
		const float d = (mx - mn) / 15, id = d != 0.0f ? 1.0f / d : 0.0f;
		uint8_t q[32];
		put16(y, ckpt__f2h(d));
		put16(y + 2, ckpt__f2h(mn));
		for (int j = 0; j < 32; j++) {
			int32_t v = (int32_t)((x[j] - mn) * id + 0.5f);
			q[j] = (uint8_t)(v > 15 ? 15 : v);
		}
		for (int j = 0; j < 16; j++)
			y[4 + j] = (uint8_t)(q[j] | q[j + 16] << 4);
	}
}

static void put_q5(uint8_t *qh, uint8_t *qs, const uint8_t q[32])
{
	uint32_t h = 0;
	for (int j = 0; j < 32; j++)
		h |= (uint32_t)(q[j] >> 4) << j;
	for (int k = 0; k < 4; k++)
		qh[k] = (uint8_t)(h >> (8 * k));
	for (int j = 0; j < 16; j++)
		qs[j] = (uint8_t)((q[j] & 0xf) | q[j + 16] << 4);
}

/* Q5_0: d = max / -16, q = min(31, trunc(x / d + 16.5)). */
void ckpt__q_q5_0(uint8_t *y, const float *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 32, y += 22) {
		const float d = signed_absmax(x) / -16, id = d != 0.0f ? 1.0f / d : 0.0f;
		uint8_t q[32];
		put16(y, ckpt__f2h(d));
		for (int j = 0; j < 32; j++) {
			int32_t v = (int32_t)(x[j] * id + 16.5f);
			q[j] = (uint8_t)(v > 31 ? 31 : v);
		}
		put_q5(y + 2, y + 6, q);
	}
}

/* Q5_1: d = (max - min) / 31, m = min, q = min(31, trunc((x - min) / d + 0.5)). */
void ckpt__q_q5_1(uint8_t *y, const float *x, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, x += 32, y += 24) {
		float mn, mx;
		minmax(x, &mn, &mx);
		const float d = (mx - mn) / 31, id = d != 0.0f ? 1.0f / d : 0.0f;
		uint8_t q[32];
		put16(y, ckpt__f2h(d));
		put16(y + 2, ckpt__f2h(mn));
		for (int j = 0; j < 32; j++) {
			int32_t v = (int32_t)((x[j] - mn) * id + 0.5f);
			q[j] = (uint8_t)(v > 31 ? 31 : v);
		}
		put_q5(y + 4, y + 8, q);
	}
}

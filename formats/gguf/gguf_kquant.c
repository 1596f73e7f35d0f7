/*
 * float32 -> Q4_K and Q6_K: ggml's reference quantizers
 * (quantize_row_q4_K_ref, quantize_row_q6_K_ref and their helpers
 * make_qkx2_quants, make_qx_quants and nearest_int in ggml-quants.c),
 * transcribed statement for statement so that the float32 rounding is the
 * same (built with -ffp-contract=off, as ggml's reference is without FMA).
 * gguf-py has no quantizer for K-quants; tests/formats/test_gguf_quant.c
 * checks the bytes against vectors ggml's own code produced.
 */
#include <math.h>
#include "gguf_quant.h"

#define QK_K 256
#define GROUP_MAX_EPS 1e-15f
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* Round to nearest, ties to even, for |fval| <= 4194303 (the mantissa of fval + 1.5 * 2^23). */
static inline int nearest_int(float fval)
{
	float val = fval + 12582912.f;
	int i;
	memcpy(&i, &val, sizeof(int));
	return (i & 0x007fffff) - 0x00400000;
}

static float make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type)
{
	float max = 0, amax = 0;
	for (int i = 0; i < n; ++i) {
		float ax = fabsf(x[i]);
		if (ax > amax) {
			amax = ax;
			max = x[i];
		}
	}
	if (amax < GROUP_MAX_EPS) {
		for (int i = 0; i < n; ++i)
			L[i] = 0;
		return 0.f;
	}
	float iscale = -nmax / max;
	float sumlx = 0, suml2 = 0;
	for (int i = 0; i < n; ++i) {
		int l = nearest_int(iscale * x[i]);
		l = MAX(-nmax, MIN(nmax - 1, l));
		L[i] = (int8_t)(l + nmax);
		float w = rmse_type == 1 ? x[i] * x[i] : 1; /* ggml: qw NULL, rmse_type 1 for Q6_K */
		sumlx += w * x[i] * l;
		suml2 += w * l * l;
	}
	float scale = suml2 ? sumlx / suml2 : 0.0f;
	float best = scale * sumlx;
	for (int is = -9; is <= 9; ++is) {
		if (is == 0)
			continue;
		iscale = -(nmax + 0.1f * is) / max;
		sumlx = suml2 = 0;
		for (int i = 0; i < n; ++i) {
			int l = nearest_int(iscale * x[i]);
			l = MAX(-nmax, MIN(nmax - 1, l));
			float w = rmse_type == 1 ? x[i] * x[i] : 1;
			sumlx += w * x[i] * l;
			suml2 += w * l * l;
		}
		if (suml2 > 0 && sumlx * sumlx > best * suml2) {
			for (int i = 0; i < n; ++i) {
				int l = nearest_int(iscale * x[i]);
				L[i] = (int8_t)(nmax + MAX(-nmax, MIN(nmax - 1, l)));
			}
			scale = sumlx / suml2;
			best = scale * sumlx;
		}
	}
	return scale;
}

static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
	uint8_t *Laux, float rmin, float rdelta, int nstep)
{
	float min = x[0], max = x[0];
	float sum_w = weights[0];
	float sum_x = sum_w * x[0];
	for (int i = 1; i < n; ++i) {
		if (x[i] < min)
			min = x[i];
		if (x[i] > max)
			max = x[i];
		float w = weights[i];
		sum_w += w;
		sum_x += w * x[i];
	}
	if (min > 0)
		min = 0;
	if (max == min) {
		for (int i = 0; i < n; ++i)
			L[i] = 0;
		*the_min = -min;
		return 0.f;
	}
	float iscale = nmax / (max - min);
	float scale = 1 / iscale;
	float best_error = 0;
	for (int i = 0; i < n; ++i) {
		int l = nearest_int(iscale * (x[i] - min));
		L[i] = (uint8_t)MAX(0, MIN(nmax, l));
		float diff = scale * L[i] + min - x[i];
		diff = diff * diff;
		best_error += weights[i] * diff;
	}
	for (int is = 0; is <= nstep; ++is) {
		iscale = (rmin + rdelta * is + nmax) / (max - min);
		float sum_l = 0, sum_l2 = 0, sum_xl = 0;
		for (int i = 0; i < n; ++i) {
			int l = nearest_int(iscale * (x[i] - min));
			l = MAX(0, MIN(nmax, l));
			Laux[i] = (uint8_t)l;
			float w = weights[i];
			sum_l += w * l;
			sum_l2 += w * l * l;
			sum_xl += w * l * x[i];
		}
		float D = sum_w * sum_l2 - sum_l * sum_l;
		if (D > 0) {
			float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
			float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
			if (this_min > 0) {
				this_min = 0;
				this_scale = sum_xl / sum_l2;
			}
			float cur_error = 0;
			for (int i = 0; i < n; ++i) {
				float diff = this_scale * Laux[i] + this_min - x[i];
				diff = diff * diff;
				cur_error += weights[i] * diff;
			}
			if (cur_error < best_error) {
				for (int i = 0; i < n; ++i)
					L[i] = Laux[i];
				best_error = cur_error;
				scale = this_scale;
				min = this_min;
			}
		}
	}
	*the_min = -min;
	return scale;
}

static inline void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
		*m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
	}
}

/* block_q4_K: fp16 d, fp16 dmin, scales[12], qs[128] */
void ckpt__q_q4_k(uint8_t *y, const float *x, int64_t nb)
{
	uint8_t L[QK_K], Laux[32];
	float weights[32], mins[QK_K / 32], scales[QK_K / 32];
	for (int64_t i = 0; i < nb; i++, y += 144, x += QK_K) {
		uint8_t *sc = y + 4, *q = y + 16;
		float max_scale = 0, max_min = 0;
		memset(y, 0, 144);
		for (int j = 0; j < QK_K / 32; ++j) {
			float sum_x2 = 0;
			for (int l = 0; l < 32; ++l)
				sum_x2 += x[32 * j + l] * x[32 * j + l];
			float av_x = sqrtf(sum_x2 / 32);
			for (int l = 0; l < 32; ++l)
				weights[l] = av_x + fabsf(x[32 * j + l]);
			scales[j] = make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20);
			if (scales[j] > max_scale)
				max_scale = scales[j];
			if (mins[j] > max_min)
				max_min = mins[j];
		}
		float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
		float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
		for (int j = 0; j < QK_K / 32; ++j) {
			uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
			uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
			ls = MIN(63, ls);
			lm = MIN(63, lm);
			if (j < 4) {
				sc[j] = ls;
				sc[j + 4] = lm;
			} else {
				sc[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
				sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
				sc[j - 0] |= (uint8_t)((lm >> 4) << 6);
			}
		}
		uint16_t hd = ckpt__f2h(max_scale / 63.f), hm = ckpt__f2h(max_min / 63.f);
		y[0] = (uint8_t)hd;
		y[1] = (uint8_t)(hd >> 8);
		y[2] = (uint8_t)hm;
		y[3] = (uint8_t)(hm >> 8);
		for (int j = 0; j < QK_K / 32; ++j) {
			uint8_t s, m;
			get_scale_min_k4(j, sc, &s, &m);
			const float d = ckpt__h2f(hd) * s;
			if (!d)
				continue;
			const float dm = ckpt__h2f(hm) * m;
			for (int ii = 0; ii < 32; ++ii) {
				int l = nearest_int((x[32 * j + ii] + dm) / d);
				L[32 * j + ii] = (uint8_t)MAX(0, MIN(15, l));
			}
		}
		for (int j = 0; j < QK_K; j += 64) {
			for (int l = 0; l < 32; ++l)
				q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
			q += 32;
		}
	}
}

/* block_q6_K: ql[128], qh[64], int8 scales[16], fp16 d */
void ckpt__q_q6_k(uint8_t *y, const float *x, int64_t nb)
{
	int8_t L[QK_K];
	float scales[QK_K / 16];
	for (int64_t i = 0; i < nb; i++, y += 210, x += QK_K) {
		float max_scale = 0, max_abs_scale = 0;
		for (int ib = 0; ib < QK_K / 16; ++ib) {
			const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1);
			scales[ib] = scale;
			const float abs_scale = fabsf(scale);
			if (abs_scale > max_abs_scale) {
				max_abs_scale = abs_scale;
				max_scale = scale;
			}
		}
		memset(y, 0, 210);
		if (max_abs_scale < GROUP_MAX_EPS)
			continue; /* all zero, d = +0 */
		int8_t *sc = (int8_t *)(y + 192);
		float iscale = -128.f / max_scale;
		uint16_t hd = ckpt__f2h(1 / iscale);
		y[208] = (uint8_t)hd;
		y[209] = (uint8_t)(hd >> 8);
		for (int ib = 0; ib < QK_K / 16; ++ib)
			sc[ib] = (int8_t)MIN(127, nearest_int(iscale * scales[ib]));
		for (int j = 0; j < QK_K / 16; ++j) {
			float d = ckpt__h2f(hd) * sc[j];
			if (!d)
				continue;
			for (int ii = 0; ii < 16; ++ii) {
				int l = nearest_int(x[16 * j + ii] / d);
				l = MAX(-32, MIN(31, l));
				L[16 * j + ii] = (int8_t)(l + 32);
			}
		}
		uint8_t *ql = y, *qh = y + 128;
		for (int j = 0; j < QK_K; j += 128) {
			for (int l = 0; l < 32; ++l) {
				const uint8_t q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
				const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
				ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
				ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
				qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
					((L[j + l + 96] >> 4) << 6));
			}
			ql += 64;
			qh += 32;
		}
	}
}

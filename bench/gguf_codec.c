/*
 * GGUF block codecs, one core, warm, in-process (issue 37, point 5):
 * ckpt_gguf_quantize / ckpt_gguf_dequantize of a float32 array, in GB/s of
 * float32 (4 bytes per element), median of --reps runs after one untimed
 * run. One JSON line per (type, op) on stdout; bench/gguf_codec.py puts
 * gguf-py's numpy codecs beside it in the same run.
 * Usage: gguf_codec [--elems N] [--reps R] [TYPE...]   (default Q8_0 Q4_0)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ckpt/ckpt.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int64_t n = 1 << 24, blck, bytes;
	int reps = 9, a = 1;
	const char *def[] = { "Q8_0", "Q4_0" };
	for (; a < argc && strncmp(argv[a], "--", 2) == 0; a += 2) {
		if (a + 1 >= argc)
			return 2;
		if (strcmp(argv[a], "--elems") == 0)
			n = atoll(argv[a + 1]);
		else if (strcmp(argv[a], "--reps") == 0)
			reps = atoi(argv[a + 1]);
		else
			return 2;
	}
	int ntypes = a < argc ? argc - a : 2;
	float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
	unsigned char *q = malloc((size_t)n * 2);
	double *t = malloc((size_t)reps * sizeof(double));
	uint32_t s = 12345;
	if (!x || !y || !q || !t)
		return 1;
	for (int64_t i = 0; i < n; i++) {
		s = s * 1664525u + 1013904223u;
		x[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * (float)(1 + (i >> 10) % 7);
	}
	for (int k = 0; k < ntypes; k++) {
		const char *type = a < argc ? argv[a + k] : def[k];
		if (ckpt_gguf_type_block(&blck, &bytes, type) != CKPT_OK || n % blck)
			return 2;
		for (int op = 0; op < 2; op++) {
			for (int r = -1; r < reps; r++) {
				double t0 = now();
				int rc = op == 0 ? ckpt_gguf_quantize(q, type, x, n) : ckpt_gguf_dequantize(y, CKPT_DT_FLOAT, type, q, n);
				double dt = now() - t0;
				if (rc != CKPT_OK)
					return 1;
				if (r >= 0)
					t[r] = dt;
			}
			qsort(t, (size_t)reps, sizeof(double), cmp);
			printf("{\"type\": \"%s\", \"op\": \"%s\", \"elems\": %lld, \"reps\": %d, \"median_s\": %.6f, "
				"\"min_s\": %.6f, \"gbps_f32\": %.3f}\n", type, op ? "dequantize" : "quantize", (long long)n, reps,
				t[reps / 2], t[0], (double)n * 4 / t[reps / 2] / 1e9);
		}
	}
	free(x);
	free(y);
	free(q);
	free(t);
	return 0;
}

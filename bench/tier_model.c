/* The memory-tier benches' clock, median and state (tier_model.h). */
#define _POSIX_C_SOURCE 200809L
#include "tier_model.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double tm_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int tm_cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double tm_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), tm_cmp_d);
	return v[n / 2];
}

void tm_quiet(const char *msg, void *ctx)
{
	(void)msg;
	(void)ctx;
}

const char *tm_state(ckpt_checkpoint **ck, ckpt_variable **vars, int64_t per_var)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	o.warn = tm_quiet;
	if (ckpt_checkpoint_new(ck, &o) != CKPT_OK)
		return "checkpoint";
	ckpt_shape s;
	ckpt_shape_make(&s, 1, &per_var);
	for (int i = 0; i < NVARS; i++) {
		char name[32];
		snprintf(name, sizeof(name), "v%d", i);
		if (!(vars[i] = ckpt_object_add_variable(ckpt_checkpoint_root(*ck), name, name, CKPT_DT_FLOAT, &s, NULL)))
			return "variable";
	}
	return NULL;
}

const char *tm_timed_restore(double *secs, ckpt_manager *m, int tier)
{
	int memory = tier == CKPT_TIER_MEMORY;
	ckpt_restore_status *st = NULL;
	double t0 = tm_now();
	if (!ckpt_manager_restore_latest(&st, m))
		return memory ? "memory restore" : "file restore";
	*secs = tm_now() - t0;
	int got = ckpt_restore_status_tier(st);
	ckpt_restore_status_free(st);
	if (got != tier)
		return memory ? "restore did not come from memory" : "restore did not come from files";
	return NULL;
}

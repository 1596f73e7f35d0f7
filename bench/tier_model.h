/*
 * Shared by the memory-tier benches (tier_bench.c, tier_persist_bench.c,
 * tier_mpi_bench.c): the clock, the median, and the state they save, NVARS
 * float32 variables v0..v7 of per_var elements each under the root.
 */
#ifndef CKPT_BENCH_TIER_MODEL_H
#define CKPT_BENCH_TIER_MODEL_H

#include <stdint.h>
#include "ckpt/ckpt.h"

#define NVARS 8

/* Seconds on the monotonic clock. */
double tm_now(void);

/* qsort's comparison of doubles. */
int tm_cmp_d(const void *a, const void *b);

/* The median of v[0..n) (sorts v). */
double tm_median(double *v, int n);

/* A warning callback that says nothing ("keeping step N ... newer than storage" is expected here). */
void tm_quiet(const char *msg, void *ctx);

/*
 * *ck: a new checkpoint (no_fsync, quiet) holding vars[0..NVARS). NULL on
 * success, else what failed ("checkpoint", "variable") for the bench's die.
 */
const char *tm_state(ckpt_checkpoint **ck, ckpt_variable **vars, int64_t per_var);

/*
 * *secs: the time of m's ckpt_manager_restore_latest, which `tier`
 * (CKPT_TIER_MEMORY, CKPT_TIER_STORAGE) must have served. NULL on success,
 * else what failed for the bench's die.
 */
const char *tm_timed_restore(double *secs, ckpt_manager *m, int tier);

#endif

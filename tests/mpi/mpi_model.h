/*
 * The small model every MPI test program saves and restores: mirrored
 * weights, an optimizer slot, an int64 step and sync-on-read metrics, with
 * values that are a function of a step number, so any process can check a
 * checkpoint of step s without having trained it.
 */
#ifndef CKPT_TEST_MPI_MODEL_H
#define CKPT_TEST_MPI_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <ckpt/ckpt.h>

typedef struct tm_model {
	ckpt_checkpoint *ck;
	ckpt_object *opt;
	ckpt_variable *kernel, *bias, *emb, *step, *total, *count, *slot_m;
} tm_model;

/** Build inside the current scope (slots too when with_slots). */
int tm_build(tm_model *m, const ckpt_checkpoint_options *o, int with_slots);
int tm_create_slots(tm_model *m);
void tm_free(tm_model *m);
/**
 * Set every value to step s's: cross-replica assigns for the mirrored ones,
 * a replica run for the metrics (each replica r of R adds (r + 1) * s / 8).
 */
int tm_set(tm_model *m, ckpt_strategy *s, int64_t step);
/**
 * Check values against step s saved from saved_R replicas: exact for
 * mirrored ones (every local copy), the metrics' aggregates to 1e-5 relative
 * (restored onto another replica count they are split and summed again). Returns the number of failed checks; adds the checks made to
 * *checks. Prints the first failures with `who`.
 */
int tm_check(tm_model *m, int64_t step, int saved_R, const char *who, long *checks);
/** Expected metric aggregate for step s over R replicas (the ordered f32 sum). */
float tm_total(int64_t step, int R);

#define TM_RET(expr) do { int tm_r_ = (expr); if (tm_r_ < 0) return tm_r_; } while (0)
#define TM_FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define TM_TRY(expr) do { int tm_rc_ = (expr); if (tm_rc_ < 0) { char tm_b_[1024]; \
	TM_FAIL("%s:%d: %s = %s: %s", __FILE__, __LINE__, #expr, ckpt_status_name(tm_rc_), \
		ckpt_error_format(ckpt_error_last(), tm_b_, sizeof(tm_b_))); } } while (0)

#endif

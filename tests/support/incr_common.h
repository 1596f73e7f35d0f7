/*
 * The trainer model of the incremental-save tests (issue 33), shared by
 * tests/manager/test_incremental.c (POSIX) and tests/s3/test_s3_incremental.c
 * (s3://): a frozen `base`, a `head` changed whole by every step, an
 * embedding `emb` of which each step changes 5 % of the rows; every save's
 * values are recorded in expect/<ckpt-N>/ (name.f32, name.shape) for
 * check_ours and tf_incremental.py. Declarations only (incr_common.c).
 */
#ifndef CKPT_INCR_COMMON_H
#define CKPT_INCR_COMMON_H

#include <stdint.h>
#include "ckpt/ckpt.h"

typedef struct ic_state {
	ckpt_checkpoint *ck;
	ckpt_manager *m;
	ckpt_variable *base, *head, *emb;
	float *wrapped;        /* emb's memory when it wraps a trainer buffer */
	char *dir, *expect;
	uint64_t rng;
	int head_n, emb_rows, emb_w;
} ic_state;

/*
 * Zero *s and build the checkpoint: base (base_rows x base_w, element i =
 * i * init_step), head (head_n), emb (emb_rows x emb_w; wrapping s->wrapped
 * when wrap_emb). s->dir is the caller's (stays NULL), s->expect a new
 * temporary directory, s->m the caller's to create.
 */
void ic_build(ic_state *s, const ckpt_checkpoint_options *o, int base_rows, int base_w, float init_step,
	int head_n, int emb_rows, int emb_w, int wrap_emb);

/* Free what ic_build made, s->dir (removed first when rm_dir: a local directory) and s->m. */
void ic_done(ic_state *s, int rm_dir);

/* The next number of the state's generator. */
uint64_t ic_next(ic_state *s);

/* A training step: the head changes, 5 % of the embedding's rows (contiguous, or spread at random). */
void ic_step(ic_state *s, int k, int spread);

/* Record the values checkpoint `path` must hold in expect/<basename of path>/. */
void ic_record(ic_state *s, const char *path);

/* Every value of checkpoint `path` read back by libckpt (every entry's crc checked) equals the record. */
void ic_check_ours(ic_state *s, const char *path);

/* "<prefix>.data-0000k-of-0000n" (malloc'd). */
char *ic_data_file(const char *prefix, int k, int n);

#endif

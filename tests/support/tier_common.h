/*
 * Shared by the memory-tier tests (tests/manager/test_tier.c,
 * test_tier_persist.c, tests/cli/test_cli_tier.c): the tracked temporary
 * directories a suite's fini removes, and the one-process model whose
 * step v is value = v, big[i] = v * 1000 + i. Declarations only
 * (tier_common.c).
 */
#ifndef CKPT_TIER_COMMON_H
#define CKPT_TIER_COMMON_H

#include <stdint.h>
#include "ckpt/ckpt.h"

#define TT_BIG (1 << 16) /* floats in "big": 256 KiB, so a save takes a moment */

/* A new temporary directory, removed (with what it holds) by tt_tmpdirs_remove; at most 8 per test. */
char *tt_tmpdir(void);

/* Remove and free every directory tt_tmpdir made since the last call (a suite's fini). */
void tt_tmpdirs_remove(void);

/* Add model/value (int64 scalar) and model/big (TT_BIG floats) under ck's root. */
void tt_model_add(ckpt_checkpoint *ck, ckpt_variable **value, ckpt_variable **big);

/* Assign step v's state. */
void tt_set_step(ckpt_variable *value, ckpt_variable *big, int64_t v);

/* The step the state holds; fails when value and big disagree (a torn restore). */
int64_t tt_get_step(ckpt_variable *value, ckpt_variable *big);

#endif

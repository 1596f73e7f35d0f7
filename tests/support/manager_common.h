/*
 * Helpers for the manager suites (lock, crash, async): a trainer state whose
 * checkpoints say which save wrote them (one int64 "value" = the number the
 * save will get), and an oracle for what a directory holds that does not
 * use the manager: which "ckpt-N" are complete (index opens, every shard
 * has the size the index implies), their values and save_counters, and
 * what the state file lists.
 *
 * Declarations only: the bodies are compiled once, in tests/support/manager_common.c.
 */
#ifndef CKPT_MANAGER_COMMON_H
#define CKPT_MANAGER_COMMON_H

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

#include "ckpt/sys/alloc.h" /* ckpt_free, for buffers the library returned */
#define MC_MAX 256

typedef struct mc_warnings {
	int n;
	char last[2048];
	char all[8192];
} mc_warnings;

void mc_on_warn(const char *msg, void *ctx);

typedef struct mc_state {
	ckpt_checkpoint *ck;
	ckpt_variable *value;
	ckpt_variable *vec;   /* 64 copies of value: a torn write would mix states */
	mc_warnings warn;
} mc_state;

/* A trainer's state on `vfs` (NULL = POSIX). `s` must not move while ck lives (warnings point at it). */
int mc_build(mc_state *s, ckpt_vfs *vfs);

int mc_set(mc_state *s, int64_t v);

int64_t mc_get(mc_state *s);

/* Save with value = the number this save will get (so a checkpoint's value must equal its number). */
int mc_save(mc_state *s, ckpt_manager *m, const char **path);

/* ---- the oracle ---- */

typedef struct mc_ckpt {
	int64_t number;
	int complete;
	int64_t value, counter;   /* -1 when not complete */
} mc_ckpt;

typedef struct mc_dir {
	size_t n;
	mc_ckpt c[MC_MAX];        /* every "ckpt-N.index", ascending */
	size_t ncomplete;
	int64_t newest_complete;  /* -1 none */
	int has_state;
	int64_t state_latest;     /* model_checkpoint_path's N, -1 none */
	int64_t state_listed[MC_MAX];
	size_t nlisted;
	size_t ntemp;             /* names with "tempstate" */
} mc_dir;

/* N of a name "ckpt-N" (no suffix); -1 for any other name. */
int64_t mc_number(const char *base);

int mc_listed(const mc_dir *d, int64_t n);

/* What `dir` on `vfs` holds, read without a manager. */
void mc_scan(mc_dir *d, ckpt_vfs *vfs, const char *dir);

#endif

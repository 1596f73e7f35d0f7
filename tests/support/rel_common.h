/*
 * Shared helpers for the reliability suites (truncation, corruption,
 * hostile inputs, fault injection): every fixture of tests/fixtures as a
 * "unit" (the files one open needs) loaded into an in-memory file system, a
 * walk that opens a path and reads every entry, and a counting allocator
 * that sees every library allocation (leaks, largest request).
 *
 * Declarations only: the bodies are compiled once, in tests/support/rel_common.c.
 */
#ifndef CKPT_REL_COMMON_H
#define CKPT_REL_COMMON_H

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

/*
 * Sample sizes are fixed numbers of positions, never derived from measured
 * run time, so a run sweeps the same cases on any machine. The one knob is
 * CKPT_TEST_SWEEP_SCALE in (0, 1): scripts/test.sh sets 0.125 for the slower
 * sanitizer pass, which then sweeps 1/8 of each sample (at least 64).
 */
#define REL_MIN_SAMPLE 64
size_t rel_scaled(size_t dense);

/*
 * On some corrupt files libhdf5 asks malloc for more than 1 TiB: libc
 * returns NULL and HDF5 reports an error, ASan aborts unless
 * allocator_may_return_null=1. ASan reads its options once per process, so
 * a test that feeds such files to libhdf5 calls this first: under ASan it
 * re-runs itself (this one test, `--filter suite/name`) in a child with the
 * option added, and returns 1 once the child passed; elsewhere, and in the
 * child, it returns 0 and the test runs here. Every other test keeps ASan's
 * default, which aborts on such a request.
 */
int rel_rerun_where_malloc_may_fail(void);

/* ------------------------------------------------------------------ */
/* Counting allocator                                                   */
/* ------------------------------------------------------------------ */

/* Header in front of every block so free knows the size. */
#define REL_HDR 16
/* what the counting allocator saw (tests read and reset them) */
extern long rel_live_blocks, rel_calls, rel_fail_at;
extern size_t rel_largest, rel_refuse_above;

/** Install the counting allocator: fail call `fail_at` (1-based; 0 = never), refuse blocks above `refuse_above` (0 = no cap). */
void rel_alloc_install(long fail_at, size_t refuse_above);

void rel_alloc_arm(long fail_at);

/** Stop failing allocations; the call count is kept. */
void rel_alloc_disarm(void);

void rel_alloc_restore(void);

/* ------------------------------------------------------------------ */
/* Fixture units                                                        */
/* ------------------------------------------------------------------ */

enum { REL_TF = 0, REL_KERAS_H5 = 1, REL_KERAS_ZIP = 2, REL_TF_STATE = 3 };
#define REL_MAX_FILES 16

typedef struct rel_file {
	char vpath[1100];     /* path in the memory file system */
	unsigned char *data;  /* pristine content (malloc'ed) */
	size_t n;
} rel_file;

typedef struct rel_unit {
	char name[1100];      /* fixture-relative, for messages */
	char open_path[1100]; /* what ckpt_reader_open gets */
	int kind;
	int nfiles;
	rel_file files[REL_MAX_FILES];
} rel_unit;

typedef struct rel_units {
	rel_unit *u;
	size_t n, cap;
} rel_units;

/** Every fixture unit (TensorBundles by prefix, state-file directories, Keras files). */
rel_units rel_fixture_units(void);

void rel_units_free(rel_units *us);

/** A memory file system holding the pristine files of `u`. */
ckpt_vfs *rel_unit_vfs(const rel_unit *u);

/* ------------------------------------------------------------------ */
/* Walking a reader                                                     */
/* ------------------------------------------------------------------ */

/** Outcome of one open + read-everything. */
typedef struct rel_outcome {
	int rc;             /* first failure, or CKPT_OK */
	int err_code;       /* ckpt_error_last()->code right after it (the slot is cleared before each call) */
	char message[512];  /* its message ("" when none) */
	int has_path;       /* the error named a file */
	int has_context;    /* path, variable or offset known */
	size_t nread;       /* entries read successfully */
	size_t largest;     /* largest library allocation requested during the walk */
	int signal;         /* rel_run_cases (isolated): the signal that killed the walk, else 0 */
} rel_outcome;

/**
 * Open `path` on `vfs` and read every entry; the first failure is kept. The
 * error slot is cleared before every call, so a failure that records no
 * error of its own shows as err_code CKPT_OK and an empty message instead of
 * inheriting an earlier case's.
 */
rel_outcome rel_walk(ckpt_vfs *vfs, const char *path, int no_verify);

/** One case of a sweep: prepare the input, walk it, undo. */
typedef rel_outcome (*rel_case_fn)(void *ctx, size_t k);

/**
 * Run cases [0, n) into out[]. With `isolate`, the cases run in a child
 * process that streams its outcomes back; when a case crashes (a
 * third-party parser such as libhdf5 is not hardened against hostile
 * files), it is recorded with its signal and a new child resumes after it.
 * One fork per crash, not per case.
 */
void rel_run_cases(size_t n, rel_case_fn fn, void *ctx, int isolate, rel_outcome *out);

double rel_now(void);

/**
 * Positions to sweep in a file of `n` bytes: all of them when the file is
 * at most `dense` bytes, else the first and last min(1 KiB, dense / 4)
 * bytes densely and the rest of the `dense` positions evenly spread between. Returns the count;
 * `*pos` is malloc'ed.
 */
size_t rel_positions(size_t n, size_t dense, size_t **pos);

/* ------------------------------------------------------------------ */
/* Truncation and corruption sweeps                                     */
/* ------------------------------------------------------------------ */

enum { REL_TRUNCATE = 0, REL_FLIP = 1 };

/* Library allocations above this are refused and reported: no fixture needs more. */
#define REL_ALLOC_CAP (96u << 20)
#define REL_MAX_REPORTED 20

/* One bit per byte, a different bit at each position. */
unsigned char rel_flip_mask(size_t pos);

typedef struct rel_sweep_ctx {
	const rel_unit *u;
	const rel_file *f;
	ckpt_vfs *vfs;
	int mode;
	const size_t *pos;
	unsigned char *scratch;
} rel_sweep_ctx;

/**
 * Sweep every fixture unit whose kind is in `kind_mask`: every file of it cut
 * at (REL_TRUNCATE) or bit-flipped in (REL_FLIP) every position when it has
 * at most `dense` bytes (rel_scaled), else a fixed sample of `dense`
 * positions (rel_positions). With `byte_budget`, a unit whose files hold B
 * bytes in all gets at most byte_budget / B positions per file (at least
 * REL_MIN_SAMPLE): a walk costs about its input's size, so large files get
 * a sparser sample, fixed by the sizes alone. Keras files run isolated (libhdf5 crashes are
 * counted, not fatal). Asserts: every kind in the mask has a unit and every
 * planned case ran; no crash; a failure records its own error (the status
 * it returned, a message) with context (the file for truncations); no
 * library allocation above REL_ALLOC_CAP; every truncation of a bundle or a
 * Keras file fails.
 */
/* (Was rel_sweep(mask, mode, budget_s, dense): renamed so an old call cannot compile into a 2-position sample.) */
void rel_sweep_positions(int kind_mask, int mode, size_t dense, size_t byte_budget);

#endif

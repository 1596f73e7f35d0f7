/*
 * Shared by the TensorFlow / Keras 3 oracle suites (test_tf_interop.c,
 * test_keras3_interop.c): run an oracle script of tests/oracles/ with the
 * pinned venv's python, compare what libckpt reads against a manifest of
 * what TensorFlow / Keras report (tf_manifest.py's records: dtype name,
 * shape, raw bytes as hex, string elements as hex), and write the same kind
 * of manifest from libckpt's side for the oracles to check.
 *
 * Declarations only: the bodies are compiled once, in tests/support/oracle_common.c.
 */
#ifndef CKPT_ORACLE_COMMON_H
#define CKPT_ORACLE_COMMON_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

#define ORACLE_DIR CKPT_SOURCE_DIR "/tests/oracles/"

/* Run `python tests/oracles/<script> args... NULL`; returns its result (the caller frees). */
ts_run_result oracle_run(const char *script, ...);

/* The oracle must exit 0; its stderr is the diagnosis otherwise. */
void oracle_expect_ok(ts_run_result *r, const char *what);

json_t *oracle_load_json(const char *path);

char *hex_of(const void *p, size_t n);

/* One stored entry of `r` against TensorFlow's record of it: dtype, shape, every byte. */
void oracle_compare_entry(ckpt_reader *r, const char *ctx, const char *name, json_t *rec);

/*
 * Every entry TF lists is read by libckpt exactly, and libckpt lists no
 * other but the slices of partitioned entries (TF lists the assembled value).
 */
void oracle_compare_entries(ckpt_reader *r, const char *ctx, json_t *entries);

/* ---- libckpt's side, for the oracles: {"entries": {name: record}} as tf_manifest.py writes them ---- */

void json_put_tensor(json_t *entries, const char *name, const ckpt_tensor *t);

/* Every entry of `path` as libckpt reads it. */
json_t *oracle_entries_of(const char *path);

void oracle_dump(const char *path, json_t *j);

/* Run the CLI with a NULL-terminated argument list; it must exit 0. */
void oracle_cli_ok(const char *arg, ...);

#endif

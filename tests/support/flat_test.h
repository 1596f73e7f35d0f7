/*
 * Helpers shared by the safetensors / GGUF suites (test_safetensors.c,
 * test_gguf.c, test_flat_convert.c): running the PyPI oracles, checking a
 * reader against the manifest the reference writers produced, opening bytes
 * from the memory file system and asserting an error's code and context.
 * Declarations only: the bodies are compiled once, in tests/support/flat_test.c.
 */
#ifndef CKPT_FLAT_TEST_H
#define CKPT_FLAT_TEST_H

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

/* Run tests/oracles/<script> ARGS with the oracle venv's python; assert exit 0; returns stdout (free it). */
char *ft_oracle(const char *script, const char *args);

/* The reference writers' files in a fresh directory; returns the dir (free, ts_rmtree). */
char *ft_reference_files(json_t **manifest);

void ft_fail_last(const char *what);

/*
 * Read `src`, write it again to `dst` in `format` with our writer (the
 * metadata under `meta_keys` copied; tensors added last to first when
 * `reverse`), and assert the bytes are the reference writer's (`who`).
 */
void ft_rewrite_matches(const char *src, const char *dst, const char *format,
	const char *const *meta_keys, size_t nmeta, int reverse, const char *who);

/* The reader holds exactly the manifest's tensors: names, dtypes, row-major shapes, bytes, crc32. */
void ft_check_reader(ckpt_reader *r, json_t *tensors, const char *file);

/* Open `n` bytes as memory file `name`; returns the status (reader in *out on success). */
int ft_open_mem(const void *buf, size_t n, const char *name, ckpt_reader **out, ckpt_vfs **vfs);

/*
 * Opening `buf` fails with `code`; the last error names the file, the
 * variable (NULL: none expected) and the offset (-2: any), and its message
 * contains `msg`.
 */
void ft_expect_error(const void *buf, size_t n, int code, const char *var, int64_t offset,
	const char *msg, const char *what);

/* Sweep scale: CKPT_TEST_SWEEP_SCALE (0..1] thins sanitizer runs (scripts/test.sh). */
size_t ft_sweep_step(size_t n);

/* Any outcome but a crash: success reads every tensor; failure is negative with a message and the path. */
int ft_open_any(const void *buf, size_t n);

/*
 * Every byte of f[0..hdr) set in turn to each of vals[0..nvals) (thinned by
 * ft_sweep_step), the mutated copy opened with ft_open_any.
 * @param[out] tried how many mutations changed a byte
 * @return how many of those the reader refused
 */
size_t ft_mutate_header(size_t *tried, const unsigned char *f, size_t n, size_t hdr, const unsigned char *vals,
	size_t nvals);

#endif

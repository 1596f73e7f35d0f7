/*
 * Helpers shared by the Keras suites (test_keras_h5.c, test_keras_archive.c,
 * test_keras_hostile.c): the fixture list, a CONTENTS.txt parser that checks
 * a reader against the h5py dump (names, dtypes, shapes, sha1 of the raw
 * bytes or the scalar value), SHA-1, and small assertion helpers.
 * Declarations only: the bodies are compiled once, in tests/support/keras_test.c.
 */
#ifndef CKPT_KERAS_TEST_H
#define CKPT_KERAS_TEST_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
/* The test target does not inherit the library's CKPT_HAVE_* definitions; these suites need both backends. */
#ifndef CKPT_HAVE_HDF5
#define CKPT_HAVE_HDF5 1
#endif
#ifndef CKPT_HAVE_LIBARCHIVE
#define CKPT_HAVE_LIBARCHIVE 1
#endif
#include "formats/format.h"
#include "formats/keras_h5/keras_h5.h"
#include "test_support.h"

/* Both Keras backends, so the static link pulls them in (reader.c references them weakly). */
extern const ckpt_format *const kt_backends[2];

/* Every Keras fixture: file, expected format name. */
typedef struct kt_fixture {
	const char *rel;
	const char *format;
} kt_fixture;

#define KT_NFIX 16
extern const kt_fixture kt_fixtures[KT_NFIX];

void kt_fail_last(const char *what);

ckpt_reader *kt_open(const char *path);

/* ---- SHA-1 (FIPS 180-1), enough to compare with the dumps' sha1 prefixes ---- */

typedef struct kt_sha1 {
	uint32_t h[5];
	uint64_t len;
	unsigned char buf[64];
	size_t n;
} kt_sha1;

#define KT_ROL(x, k) (((x) << (k)) | ((x) >> (32 - (k))))

void kt_sha1_block(kt_sha1 *s, const unsigned char *p);

void kt_sha1_hex(const void *data, size_t len, char out[41]);

/* ---- CONTENTS.txt ---- */

typedef struct kt_want {
	char name[1024];
	char dtype[32];
	char shape[128];   /* "(50, 1)" as in the dump */
	char sha1[41];     /* prefix, or "" for scalars */
	char value[64];    /* scalars */
} kt_want;

/* Parse every DATASET of a dump (HDF5 or the model.weights.h5 section of a .keras). */
size_t kt_parse_contents(const char *path, kt_want **out);

/* The dump's shape text for a ckpt shape: "()", "(3,)", "(4, 3)". */
void kt_shape_text(const ckpt_shape *s, char *buf, size_t n);

/* Every dataset of the dump is an entry of `r` with the same dtype, shape and bytes; nothing else is. */
void kt_check_against_contents(ckpt_reader *r, const char *contents);

/* The last error has `code` and its message, path or variable contains `needle`. */
void kt_assert_error(int rc, int code, const char *needle, const char *what);

#endif

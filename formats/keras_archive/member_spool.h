/*
 * A .keras member streamed into an unnamed temporary file, so that reading an
 * archive costs bounded memory whatever the member's inflated size (issue
 * 12.2): the keras-h5 backend then maps the file and reads data with pread,
 * as for a plain .weights.h5.
 */
#ifndef CKPT_MEMBER_SPOOL_H
#define CKPT_MEMBER_SPOOL_H

#include <stdint.h>
#include "formats/keras_archive/archive_lib.h"

/** Above this many inflated bytes a member must also keep CKPT_MAX_ZIP_RATIO to the archive size. */
#define CKPT_ZIP_RATIO_FLOOR (256ull << 20)

/**
 * Inflate the current entry of `a` (named `name` in archive `path` of
 * `archive_size` bytes, `declared` bytes in the directory or -1) into a fresh
 * unnamed file: O_TMPFILE in $TMPDIR (else /tmp), else a memfd. Refused while
 * inflating, before the bytes are written: data that does not start with
 * `magic` (EFORMAT), more than `cap` bytes (ELIMIT), more than
 * CKPT_MAX_ZIP_RATIO times the archive once past CKPT_ZIP_RATIO_FLOOR
 * (ELIMIT), more or fewer bytes than declared (EFORMAT). On success `*fd`
 * (close it) holds `*n` bytes.
 */
int ckpt__zip_spool_member(struct archive *a, const char *path, const char *name, int64_t declared, uint64_t cap,
	uint64_t archive_size, const void *magic, size_t magic_len, int *fd, uint64_t *n);

#endif

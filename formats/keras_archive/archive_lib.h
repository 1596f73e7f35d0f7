/*
 * libarchive, loaded at first use (libckpt/base/dynlib.h says why). Include this
 * instead of <archive.h> / <archive_entry.h>; works as h5_lib.h does: a
 * symbol used but not listed fails the link, one listed but not declared
 * fails to compile.
 */
#ifndef CKPT_ARCHIVE_LIB_H
#define CKPT_ARCHIVE_LIB_H

#include <archive.h>
#include <archive_entry.h>
#include "libckpt/base/dynlib.h"

#define CKPT_ARCHIVE_FUNCS(X) \
	X(archive_entry_filetype) \
	X(archive_entry_free) \
	X(archive_entry_is_encrypted) \
	X(archive_entry_new) \
	X(archive_entry_pathname) \
	X(archive_entry_set_filetype) \
	X(archive_entry_set_mtime) \
	X(archive_entry_set_pathname) \
	X(archive_entry_set_perm) \
	X(archive_entry_set_size) \
	X(archive_entry_size) \
	X(archive_entry_size_is_set) \
	X(archive_error_string) \
	X(archive_read_data) \
	X(archive_read_free) \
	X(archive_read_new) \
	X(archive_read_next_header) \
	X(archive_read_open_fd) \
	X(archive_read_open_memory) \
	X(archive_read_support_format_zip) \
	X(archive_read_support_format_zip_seekable) \
	X(archive_write_close) \
	X(archive_write_data) \
	X(archive_write_free) \
	X(archive_write_header) \
	X(archive_write_new) \
	X(archive_write_open) \
	X(archive_write_set_bytes_in_last_block) \
	X(archive_write_set_format_zip) \
	X(archive_write_zip_set_compression_store)

#define CKPT__AR_SLOT(f) __typeof__(&f) p_##f; /* p_: a member name the renames below do not touch */
typedef struct ckpt__archive_fns { CKPT_ARCHIVE_FUNCS(CKPT__AR_SLOT) } ckpt__archive_fns;
#undef CKPT__AR_SLOT

extern ckpt__archive_fns ckpt__archive_fn;
extern ckpt__dynlib ckpt__archive_dynlib;

/** Load libarchive (once); CKPT_OK, or CKPT_EUNSUPPORTED naming `path` (may be NULL) and why. */
int ckpt__archive_lib(const char *path);

static inline const ckpt__archive_fns *ckpt__archive_f(void)
{
	if (!ckpt__dynlib_loaded(&ckpt__archive_dynlib))
		ckpt__dynlib_need(&ckpt__archive_dynlib);
	return &ckpt__archive_fn;
}

#define archive_entry_filetype (ckpt__archive_f()->p_archive_entry_filetype)
#define archive_entry_free (ckpt__archive_f()->p_archive_entry_free)
#define archive_entry_is_encrypted (ckpt__archive_f()->p_archive_entry_is_encrypted)
#define archive_entry_new (ckpt__archive_f()->p_archive_entry_new)
#define archive_entry_pathname (ckpt__archive_f()->p_archive_entry_pathname)
#define archive_entry_set_filetype (ckpt__archive_f()->p_archive_entry_set_filetype)
#define archive_entry_set_mtime (ckpt__archive_f()->p_archive_entry_set_mtime)
#define archive_entry_set_pathname (ckpt__archive_f()->p_archive_entry_set_pathname)
#define archive_entry_set_perm (ckpt__archive_f()->p_archive_entry_set_perm)
#define archive_entry_set_size (ckpt__archive_f()->p_archive_entry_set_size)
#define archive_entry_size (ckpt__archive_f()->p_archive_entry_size)
#define archive_entry_size_is_set (ckpt__archive_f()->p_archive_entry_size_is_set)
#define archive_error_string (ckpt__archive_f()->p_archive_error_string)
#define archive_read_data (ckpt__archive_f()->p_archive_read_data)
#define archive_read_free (ckpt__archive_f()->p_archive_read_free)
#define archive_read_new (ckpt__archive_f()->p_archive_read_new)
#define archive_read_next_header (ckpt__archive_f()->p_archive_read_next_header)
#define archive_read_open_fd (ckpt__archive_f()->p_archive_read_open_fd)
#define archive_read_open_memory (ckpt__archive_f()->p_archive_read_open_memory)
#define archive_read_support_format_zip (ckpt__archive_f()->p_archive_read_support_format_zip)
#define archive_read_support_format_zip_seekable (ckpt__archive_f()->p_archive_read_support_format_zip_seekable)
#define archive_write_close (ckpt__archive_f()->p_archive_write_close)
#define archive_write_data (ckpt__archive_f()->p_archive_write_data)
#define archive_write_free (ckpt__archive_f()->p_archive_write_free)
#define archive_write_header (ckpt__archive_f()->p_archive_write_header)
#define archive_write_new (ckpt__archive_f()->p_archive_write_new)
#define archive_write_open (ckpt__archive_f()->p_archive_write_open)
#define archive_write_set_bytes_in_last_block (ckpt__archive_f()->p_archive_write_set_bytes_in_last_block)
#define archive_write_set_format_zip (ckpt__archive_f()->p_archive_write_set_format_zip)
#define archive_write_zip_set_compression_store (ckpt__archive_f()->p_archive_write_zip_set_compression_store)

#endif

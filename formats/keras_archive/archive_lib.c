/* libarchive loaded at first use: the table archive_lib.h renames every call to. */
#include "formats/keras_archive/archive_lib.h"

/* set by CMake from the library found at configure time (its SONAME, then its file) */
#ifndef CKPT_LIBARCHIVE_SONAME
#define CKPT_LIBARCHIVE_SONAME "libarchive.so.13"
#endif
#ifndef CKPT_LIBARCHIVE_FILE
#define CKPT_LIBARCHIVE_FILE CKPT_LIBARCHIVE_SONAME
#endif

ckpt__archive_fns ckpt__archive_fn;

static const char *const archive_names[] = { CKPT_LIBARCHIVE_SONAME, CKPT_LIBARCHIVE_FILE, NULL };

/* #f and p_##f: neither expands the renames */
#define CKPT__AR_BIND(f) if (ckpt__dynlib_sym(d, h, #f, &ckpt__archive_fn.p_##f) < 0) return -1;
static int archive_bind(ckpt__dynlib *d, void *h)
{
	CKPT_ARCHIVE_FUNCS(CKPT__AR_BIND)
	return 0;
}

ckpt__dynlib ckpt__archive_dynlib = {
	"libarchive (" CKPT_LIBARCHIVE_SONAME ", for .keras archives)", "CKPT_LIBARCHIVE_LIBRARY", archive_names,
	archive_bind, NULL, PTHREAD_ONCE_INIT, 0, ""
};

int ckpt__archive_lib(const char *path) { return ckpt__dynlib_load(&ckpt__archive_dynlib, path); }

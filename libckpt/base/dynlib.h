/*
 * Optional libraries loaded at first use (dlopen): libhdf5 and libarchive
 * serve only the Keras formats (libcurl and libcrypto only s3:// paths), and with their dependencies (curl, TLS,
 * Kerberos, ICU, XML, ...) they are 40 of the 53 shared objects a process
 * linking them maps at start — about 12 ms warm and 60-80 ms on a cold page
 * cache, paid by every `ckpt` command and every trainer that never reads a
 * Keras file. A backend lists the symbols it calls (h5_lib.h,
 * archive_lib.h); this resolves them on the first call.
 */
#ifndef CKPT_DYNLIB_H
#define CKPT_DYNLIB_H

#include <pthread.h>
#include <stddef.h>

typedef struct ckpt__dynlib {
	const char *what;            /* for messages: "libhdf5" */
	const char *env;             /* environment variable naming the library file instead, or NULL */
	const char *const *names;    /* sonames / paths tried in order, NULL-terminated */
	/* fill the backend's tables from handle `h` (ckpt__dynlib_sym per symbol); 0 or -1 */
	int (*bind)(struct ckpt__dynlib *d, void *h);
	void (*after)(void);         /* optional: runs once after a successful bind */
	pthread_once_t once;
	int loaded;                  /* read with acquire: 1 once every symbol is bound */
	char why[512];               /* what went wrong, when not loaded */
} ckpt__dynlib;

/** Load `d` once (thread-safe); CKPT_OK, or CKPT_EUNSUPPORTED naming `path` and why. */
int ckpt__dynlib_load(ckpt__dynlib *d, const char *path);

/** Resolve `name` into the function or data pointer at `slot` (sizeof(void *) bytes); 0 or -1 (d->why set). */
int ckpt__dynlib_sym(ckpt__dynlib *d, void *h, const char *name, void *slot);

/** For the accessors of a table used without a prior successful load: load, or abort naming the library. */
void ckpt__dynlib_need(ckpt__dynlib *d);

static inline int ckpt__dynlib_loaded(ckpt__dynlib *d) { return __atomic_load_n(&d->loaded, __ATOMIC_ACQUIRE); }

#endif

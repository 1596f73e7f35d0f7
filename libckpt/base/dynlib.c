/* Optional libraries loaded at first use; see dynlib.h for why. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "dynlib.h"

/* pthread_once takes no argument: the library being loaded, per thread */
static __thread ckpt__dynlib *loading;

int ckpt__dynlib_sym(ckpt__dynlib *d, void *h, const char *name, void *slot)
{
	dlerror();
	void *p = dlsym(h, name);
	if (!p) {
		const char *e = dlerror();
		snprintf(d->why, sizeof d->why, "%s was loaded but has no symbol %s (%s)", d->what, name,
			e ? e : "NULL");
		return -1;
	}
	memcpy(slot, &p, sizeof p); /* a function pointer is stored as dlsym's void * (POSIX) */
	return 0;
}

static void load_once(void)
{
	ckpt__dynlib *d = loading;
	const char *override = d->env ? getenv(d->env) : NULL;
	const char *only[2] = { override, NULL };
	const char *const *names = override && *override ? only : d->names;
	char tried[256] = "";
	void *h = NULL;
	for (size_t i = 0; names[i] && !h; i++) {
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			const char *e = dlerror();
			snprintf(tried, sizeof tried, "%s", e ? e : names[i]);
		}
	}
	if (!h) {
		if (names == only)
			snprintf(d->why, sizeof d->why, "%s could not be loaded from %s=%s: %s", d->what, d->env, override, tried);
		else
			snprintf(d->why, sizeof d->why, "%s could not be loaded: %s%s%s%s", d->what, tried,
				d->env ? " (set " : "", d->env ? d->env : "", d->env ? " to the library file to use)" : "");
		return;
	}
	/* never dlclose'd: libraries that register exit handlers must stay mapped */
	if (d->bind(d, h) < 0)
		return;
	if (d->after)
		d->after();
	__atomic_store_n(&d->loaded, 1, __ATOMIC_RELEASE);
}

int ckpt__dynlib_load(ckpt__dynlib *d, const char *path)
{
	if (!ckpt__dynlib_loaded(d)) {
		loading = d;
		pthread_once(&d->once, load_once);
		if (!ckpt__dynlib_loaded(d))
			return ckpt__fail(CKPT_EUNSUPPORTED, path, NULL, -1, "%s", d->why);
	}
	return CKPT_OK;
}

void ckpt__dynlib_need(ckpt__dynlib *d)
{
	if (ckpt__dynlib_load(d, NULL) < 0) {
		/* a backend entry point skipped its ckpt__dynlib_load: a bug, not bad input */
		fprintf(stderr, "libckpt: %s\n", d->why);
		abort();
	}
}

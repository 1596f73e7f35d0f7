/*
 * The host memory that live variables wrap (replica_buffers, host state):
 * two variables over the same bytes would overwrite each other at every
 * restore, so a wrap that overlaps another is refused, naming both. A
 * process-wide interval set sorted by start, under one mutex; variables
 * are created and freed far less often than they are read.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "wrap_registry.h"

typedef struct wrap_range {
	uintptr_t start, end; /* [start, end) */
	const void *owner;    /* the variable */
	char *name;           /* its name, for the other side's message */
} wrap_range;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static wrap_range *ranges;
static size_t n, cap;

/* First index whose start is >= s. */
static size_t lower_bound(uintptr_t s)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ranges[mid].start < s)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* A live range overlapping [s, e), or NULL. Ranges are disjoint, so only the neighbours can. */
static const wrap_range *overlapping(uintptr_t s, uintptr_t e)
{
	size_t i = lower_bound(s);
	if (i < n && ranges[i].start < e)
		return &ranges[i];
	if (i > 0 && ranges[i - 1].end > s)
		return &ranges[i - 1];
	return NULL;
}

static int refuse(const wrap_range *other, const char *name, const char *what, uintptr_t s, uintptr_t e)
{
	return ckpt__fail(CKPT_EINVAL, NULL, name, -1,
		"variable '%s': %s [%p, +%llu) overlaps the memory of variable '%s' [%p, +%llu): variables cannot "
		"share memory (each restore would overwrite the other); give each its own bytes", name, what,
		(void *)s, (unsigned long long)(e - s), other->name, (void *)other->start,
		(unsigned long long)(other->end - other->start));
}

int ckpt__wrap_check(const void *p, uint64_t nbytes, const char *name, const char *what)
{
	if (!p || nbytes == 0)
		return CKPT_OK;
	uintptr_t s = (uintptr_t)p, e = s + (uintptr_t)nbytes;
	pthread_mutex_lock(&lock);
	const wrap_range *o = overlapping(s, e);
	int rc = o ? refuse(o, name, what, s, e) : CKPT_OK;
	pthread_mutex_unlock(&lock);
	return rc;
}

int ckpt__wrap_register(const void *owner, void *const *bufs, int nbufs, uint64_t nbytes, const char *name)
{
	if (nbytes == 0)
		return CKPT_OK;
	pthread_mutex_lock(&lock);
	int rc = CKPT_OK, added = 0;
	for (int i = 0; i < nbufs && rc == CKPT_OK; i++) {
		uintptr_t s = (uintptr_t)bufs[i], e = s + (uintptr_t)nbytes;
		const wrap_range *o = overlapping(s, e);
		if (o) {
			char what[64];
			snprintf(what, sizeof(what), "replica_buffers[%d]", i);
			rc = refuse(o, name, what, s, e);
			break;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			wrap_range *r = ckpt__realloc(ranges, nc * sizeof(*r));
			if (!r) {
				rc = CKPT_ENOMEM;
				break;
			}
			ranges = r;
			cap = nc;
		}
		char *nm = ckpt__strdup(name);
		if (!nm) {
			rc = CKPT_ENOMEM;
			break;
		}
		size_t at = lower_bound(s);
		memmove(&ranges[at + 1], &ranges[at], (n - at) * sizeof(*ranges));
		ranges[at] = (wrap_range){ s, e, owner, nm };
		n++;
		added++;
	}
	pthread_mutex_unlock(&lock);
	if (rc < 0 && added)
		ckpt__wrap_unregister(owner, bufs, added, nbytes);
	return rc;
}

void ckpt__wrap_unregister(const void *owner, void *const *bufs, int nbufs, uint64_t nbytes)
{
	if (nbytes == 0)
		return;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nbufs; i++) {
		size_t at = lower_bound((uintptr_t)bufs[i]);
		if (at < n && ranges[at].start == (uintptr_t)bufs[i] && ranges[at].owner == owner) {
			ckpt__free(ranges[at].name);
			memmove(&ranges[at], &ranges[at + 1], (n - at - 1) * sizeof(*ranges));
			n--;
		}
	}
	if (n == 0) { /* nothing left for a leak checker to report */
		ckpt__free(ranges);
		ranges = NULL;
		cap = 0;
	}
	pthread_mutex_unlock(&lock);
}

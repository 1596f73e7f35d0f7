/*
 * The library's side of a memory provider (ckpt/memory.h): a strategy's
 * copy of the provider table, its devices and one queue per local replica,
 * and the helpers every path that touches a replica's bytes goes through.
 * Each helper turns a provider failure into an error naming the provider,
 * the operation and the variable. Not installed.
 */
#ifndef CKPT_MEMORY_INTERNAL_H
#define CKPT_MEMORY_INTERNAL_H

#include "internal.h"
#include "ckpt/memory.h"

typedef struct ckpt__pool ckpt__pool;

typedef struct ckpt__mem {
	ckpt_memory_provider p;     /* copied from the caller */
	ckpt_memory_caps caps;
	int n;                      /* local replicas */
	int *devices;               /* replica -> device */
	ckpt_memory_queue **queues; /* replica -> its queue */
	size_t staging_bytes;       /* the pinned ring, both halves */
	ckpt__pool *pool;           /* small values' shared device buffers (device_pool.c); NULL: none */
} ckpt__mem;

/** Copy and check `p`, make one queue per replica. */
int ckpt__mem_new(ckpt__mem **out, const ckpt_memory_provider *p, const int *devices, int n);
void ckpt__mem_free(ckpt__mem *m);

/** The memory of `s` (NULL: plain host memory, the library's own buffers). */
ckpt__mem *ckpt__strategy_mem(const ckpt_strategy *s);
/** 1 when replicas of `s` must not be dereferenced: every access goes through the provider's copies. */
int ckpt__mem_is_device(const ckpt__mem *m);

/** A device buffer of n bytes on replica r's device (device_alloc), error naming `var`. */
int ckpt__mem_device_alloc(ckpt__mem *m, int r, void **out, size_t n, const char *var);
void ckpt__mem_device_free(ckpt__mem *m, int r, void *p, size_t n);

/**
 * Device memory for one replica's value of n (> 0) bytes: a slot of a shared
 * device buffer when the value is small and the provider is not
 * host-addressable (device_pool.c), else its own device_alloc. Returns the
 * provider's status without a message (the caller names the variable).
 */
int ckpt__mem_value_alloc(ckpt__mem *m, int r, void **out, size_t n);
/** Free what ckpt__mem_value_alloc gave (NULL: no-op). */
void ckpt__mem_value_free(ckpt__mem *m, int r, void *p, size_t n);

/* device_pool.c: NULL *out (and CKPT_OK) when the provider gets no pool */
int ckpt__pool_new(ckpt__pool **out, const ckpt_memory_caps *caps);
void ckpt__pool_free(ckpt__pool *p, ckpt__mem *m);
/** Whether a value of n bytes comes from the pool `p` (NULL: never). */
int ckpt__pool_takes(const ckpt__pool *p, size_t n);
int ckpt__pool_alloc(ckpt__pool *p, ckpt__mem *m, int r, void **out, size_t n);
void ckpt__pool_release(ckpt__pool *p, ckpt__mem *m, int r, void *ptr);

/* Enqueue on replica r's queue; `var` names the variable for messages. */
int ckpt__mem_h2d(ckpt__mem *m, int r, void *dst, const void *src, size_t n, const char *var);
int ckpt__mem_d2h(ckpt__mem *m, int r, void *dst, const void *src, size_t n, const char *var);
/** Replica dst_r's buffer `dst` from replica src_r's `src`, on dst_r's queue. */
int ckpt__mem_d2d(ckpt__mem *m, int dst_r, void *dst, int src_r, const void *src, size_t n, const char *var);
int ckpt__mem_sync(ckpt__mem *m, int r, const char *var);
/** Synchronize every replica's queue (all of them, even after a failure; returns the first failure). */
int ckpt__mem_sync_all(ckpt__mem *m, const char *var);

/**
 * bufs[0] (complete: synchronized) into bufs[1..n-1] at byte offset `off`:
 * the provider's broadcast when it has one, else one D2D copy per replica;
 * returns when every copy has landed.
 */
int ckpt__mem_fanout(ckpt__mem *m, void *const *bufs, size_t off, size_t n, const char *var);
/**
 * Fill replica r's `dst` (n bytes) with a repeated `unit` (usize bytes, 1..8,
 * dividing n): the provider's fill when it has one and the unit's bytes are
 * all equal, else copies from host memory; synchronized on return.
 */
int ckpt__mem_fill(ckpt__mem *m, int r, void *dst, size_t n, const void *unit, size_t usize, const char *var);

/** Pinned host memory of the provider (host_alloc), error naming `what`. */
/**
 * ": <message>" of the error the provider set for status `rc` in the call
 * just made (one recorded since ckpt__error_seq() returned `seq`), else "".
 */
void ckpt__mem_provider_why(char *buf, size_t n, int rc, uint64_t seq);
int ckpt__mem_pinned_alloc(ckpt__mem *m, void **out, size_t n, const char *what);
void ckpt__mem_pinned_free(ckpt__mem *m, void *p, size_t n);

/** Pinned memory reused across the values of one save (grown on demand, freed at the end). */
typedef struct ckpt__pinned_cache {
	ckpt__mem *m;
	void *p;
	size_t cap;
} ckpt__pinned_cache;
/** At least n bytes of pinned memory of `m` (the cache's, regrown or reallocated for another provider). */
int ckpt__pinned_cache_get(ckpt__pinned_cache *c, ckpt__mem *m, size_t n, void **out, const char *what);
void ckpt__pinned_cache_free(ckpt__pinned_cache *c);

#endif

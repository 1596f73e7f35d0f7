/*
 * A process boundary around libhdf5 for files we read. libhdf5 1.10 follows
 * B-tree, heap and object-header addresses from the file without checking
 * them against the file, so a corrupt file can crash it or make it ask for
 * 2^58 bytes. Every libhdf5 call on a file being read runs in a forked child
 * under RLIMIT_AS / RLIMIT_CPU and a wall-clock timeout; the child sends back
 * its result (the layout, or a dataset's bytes) over a pipe. A child that
 * dies, hangs or runs out of its limits becomes CKPT_EFORMAT naming the file
 * and the cause; the caller's process never runs libhdf5 on the file.
 */
#ifndef CKPT_H5_SANDBOX_H
#define CKPT_H5_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

/**
 * The child's work: return a status; on success `*payload` (ckpt__malloc'ed,
 * may be NULL when `*len` is 0) is what the parent receives. On failure the
 * child's last error travels back and is raised in the parent.
 */
typedef int (*ckpt__h5_child_fn)(void *arg, void **payload, size_t *len);

/** Limits for one sandboxed call. */
typedef struct ckpt__h5_limits {
	uint64_t mem_bytes;   /* address space the child may add to what it inherits */
	unsigned timeout_ms;  /* wall clock; CPU time is capped at the same number of seconds (rounded up) */
} ckpt__h5_limits;

/**
 * Run `fn(arg)` in a child. With `dst`, the payload must be exactly `dst_len`
 * bytes and lands there; otherwise it is returned in `*out` / `*n`
 * (ckpt__malloc'ed) and may be at most `max` bytes. `path` and `what` name
 * the file and the step in messages. Callers hold ckpt__h5_lock (so no other
 * thread is inside libhdf5 when the child is forked).
 */
int ckpt__h5_sandbox(const char *path, const char *what, const ckpt__h5_limits *lim, ckpt__h5_child_fn fn,
	void *arg, void *dst, size_t dst_len, size_t max, void **out, size_t *n);

/** Default limits for reading the layout of a file (metadata only). */
void ckpt__h5_limits_layout(ckpt__h5_limits *lim);

/** Number of children started by this process (for tests and benchmarks). */
uint64_t ckpt__h5_sandbox_count(void);

#endif

/*
 * A process boundary around libhdf5 for files we read. libhdf5 1.10 follows
 * B-tree, heap and object-header addresses from the file without checking
 * them against the file, so a corrupt file can crash it or make it ask for
 * 2^58 bytes. Every libhdf5 call on a file being read runs in a child
 * process under RLIMIT_AS / RLIMIT_CPU and a wall-clock timeout, forked by
 * the long-lived reader process (h5_helper.c; "Jobs" below) or, without it,
 * by the caller; the child sends back its result (the layout, or a
 * dataset's bytes) over a pipe. A child that
 * dies, hangs or runs out of its limits becomes CKPT_EFORMAT naming the file
 * and the cause; the caller's process never runs libhdf5 on the file.
 */
#ifndef CKPT_H5_SANDBOX_H
#define CKPT_H5_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include "formats/keras_h5/h5_safe.h"

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

/*
 * Jobs: the two things libhdf5 does on a file being read (its layout, one
 * dataset's bytes), described by value so that a long-lived reader process
 * (h5_helper.c) can run them on a file it gets as a descriptor. The job
 * runs, in the helper's fresh child per request, under the same limits as a
 * forked child; without a helper (not installed, CKPT_H5_HELPER=fork, no
 * descriptor) the job runs in a forked child as above.
 */
enum {
	CKPT_H5_JOB_SCAN = 1,   /* the layout: encoded entries and metadata */
	CKPT_H5_JOB_READ = 2,   /* `var`'s bytes, as `info` says */
	/* for tests of the boundary itself: the child crashes, hangs, spins, hogs memory, fails, or echoes `var` */
	CKPT_H5_JOB_PROBE_SEGV = 100,
	CKPT_H5_JOB_PROBE_HANG,
	CKPT_H5_JOB_PROBE_SPIN,
	CKPT_H5_JOB_PROBE_HOG,
	CKPT_H5_JOB_PROBE_FAIL,
	CKPT_H5_JOB_PROBE_ECHO
};

typedef struct ckpt__h5_job {
	int op;
	int fd;                 /* the image as a file (the mapped file, or a memfd), or -1 */
	const void *image;      /* the image in this process (fd's mapping, or a buffer) */
	size_t image_len;
	const char *path;       /* for messages */
	const char *var;        /* READ: the dataset's path */
	uint64_t budget;
	int from_archive, shard;
	ckpt__h5_dsinfo info;   /* READ */
} ckpt__h5_job;

/** What runs a SCAN or READ job on `j->image` (keras_h5_read.c: ckpt__keras_h5_serve). */
typedef int (*ckpt__h5_job_fn)(const ckpt__h5_job *j, void **payload, size_t *len);

/**
 * Run job `j` behind the boundary, in the reader process when one can be
 * used (j->fd >= 0), else in a forked child; arguments as ckpt__h5_sandbox.
 * Callers hold ckpt__h5_lock.
 */
int ckpt__h5_sandbox_job(const char *what, const ckpt__h5_limits *lim, const ckpt__h5_job *j, ckpt__h5_job_fn serve,
	void *dst, size_t dst_len, size_t max, void **out, size_t *n);

/** 1 when jobs with a descriptor go to the reader process (starting it if needed); callers hold ckpt__h5_lock. */
int ckpt__h5_helper_usable(void);

/**
 * Job `j` (j->fd >= 0) through the reader process: 1 when it ran there (the
 * result in *rc), 0 when the process could not take it (the caller forks).
 */
int ckpt__h5_helper_job(const char *what, const ckpt__h5_limits *lim, const ckpt__h5_job *j, void *dst, size_t dst_len,
	size_t max, void **out, size_t *n, int *rc);

/** Reader processes started by this process (for tests: 1 for many jobs, one more after each crash). */
uint64_t ckpt__h5_helper_starts(void);

/** The reader process's pid, or -1 when none runs for this process (for tests). */
int ckpt__h5_helper_pid(void);

/** The reader process's main loop on socket `fd` (helpers/ckpt_h5_reader.c); returns its exit status. */
int ckpt__h5_helper_main(int fd, ckpt__h5_job_fn serve);

/* ---- shared by the forked child and the reader process (h5_sandbox.c) ---- */

/** In a child: apply `lim`, run fn(arg), write the answer to `wfd`, _exit. */
void ckpt__h5_sb_child(int wfd, const ckpt__h5_limits *lim, ckpt__h5_child_fn fn, void *arg) __attribute__((noreturn));

/**
 * Read a child's answer from `rfd` before `deadline` (CLOCK_MONOTONIC ms),
 * into dst / *out as ckpt__h5_sandbox says. Sets *got (0 a whole answer, 1
 * the child closed first, 2 timeout, -1 malformed) and *status (the child's
 * status); returns < 0 on an error about the answer (raised).
 */
int ckpt__h5_sb_collect(int rfd, int64_t deadline, const char *path, const char *what, void *dst, size_t dst_len,
	size_t max, void **out, size_t *n, int *got, int32_t *status);

/**
 * The caller's result once the child is done: `rc` / `got` / `status` from
 * ckpt__h5_sb_collect, `wstatus` the child's wait status (`have_wstatus` 0
 * when unknown). Frees *out on failure.
 */
int ckpt__h5_sb_result(int rc, int got, int32_t status, int have_wstatus, int wstatus, const ckpt__h5_limits *lim,
	const char *path, const char *what, void **out);

/** CLOCK_MONOTONIC in ms. */
int64_t ckpt__h5_sb_now_ms(void);
/** Read exactly n bytes from `fd` before `deadline` (ckpt__h5_sb_now_ms): 0 ok, 1 EOF, 2 timeout, -1 error. */
int ckpt__h5_sb_read_full(int fd, void *buf, size_t n, int64_t deadline);

/** Default limits for reading the layout of a file (metadata only). */
void ckpt__h5_limits_layout(ckpt__h5_limits *lim);

/** Sandboxed calls made by this process, forked or through the reader process (for tests and benchmarks). */
uint64_t ckpt__h5_sandbox_count(void);
/** Of those, the children forked from this process itself. */
uint64_t ckpt__h5_sandbox_forks(void);

#endif

/*
 * The libhdf5 sandbox: the one entry point to libhdf5 for files being read.
 * libhdf5 1.10 follows B-tree, heap and object-header addresses from the
 * file without checking them against the file, so a corrupt file can
 * crash it or make it ask for 2^58 bytes. So libhdf5 never runs on a file
 * being read in the caller's process: every such call is a job run in a
 * sandboxed child, which sends back its result (the layout, or a dataset's
 * bytes) as an answer; a child that dies, hangs or runs out of its limits
 * becomes CKPT_EFORMAT naming the file and the cause.
 *
 * The sandboxed child is forked by the sandbox server (ckpt-h5-reader, a
 * small binary the library starts once per process; a fresh child per
 * job) or, without it (not installed, CKPT_H5_HELPER=fork, no descriptor
 * for the file), by the caller itself. The files:
 *   h5_sandbox.h          this entry point;
 *   h5_sandbox.c          the child's side, judging answers, the forked child;
 *   h5_sandbox_wire.h/.c  every message between the processes, and its codec;
 *   h5_sandbox_wire_server.c  the server's half of that codec, in ckpt-h5-reader only;
 *   h5_sandbox_client.c   the library's side of the sandbox server;
 *   h5_sandbox_server.c   the sandbox server, in ckpt-h5-reader only;
 *   helpers/ckpt_h5_reader.c  that binary's main().
 * (Names kept from before, as users may rely on them: the binary, the
 * environment variable, and error messages saying "libhdf5 reader process"
 * for any sandboxed child.)
 *
 * Defences, outermost first, and what each guards against:
 *  - process isolation: libhdf5 runs on the file only in a child, never in
 *    the caller, and each job in a fresh child (a crash or a damaged heap
 *    dies with it); the server's child dies with the server
 *    (PR_SET_PDEATHSIG), the server starts with none of the caller's
 *    descriptors and default SIGCHLD/SIGPIPE (h5_sandbox_client.c);
 *  - resource limits: RLIMIT_AS (mem_bytes above what the child inherits:
 *    a file that asks for 2^58 bytes), RLIMIT_CPU (a metadata loop),
 *    no core dumps, crash signals at their defaults (ckpt__h5_sandbox_child);
 *  - timeouts: a wall-clock deadline on every read of an answer or a reply;
 *    a late child is killed, a late server is ended with its child;
 *  - size caps: an answer's length against the caller's cap (`max`) or
 *    exact size (`dst_len`), error bodies <= CKPT_H5_WIRE_MAX_ERROR, request
 *    strings <= CKPT_H5_WIRE_MAX_STR, inside the child the HDF5 walk's
 *    caps on attributes, lists, depth and dataset sizes (h5_safe.h);
 *  - checks on every reply: the answer's magic and length, the hello's
 *    protocol and request size, each reply's magic and kind; a malformed
 *    one ends the server and fails the job; the layout is decoded and
 *    checked again in the caller (keras_h5_read.c: decode_layout);
 *  - checks inside the child: hard links only, names validated, external
 *    storage, virtual datasets and shape bombs refused (h5_safe.h);
 *  - libhdf5 is loaded only at first use (h5_lib.h); the writers run it in
 *    the caller only on files they build, and only through the VFS
 *    (h5_vfd.h).
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
typedef int (*ckpt__h5_sandbox_fn)(void *arg, void **payload, size_t *len);

/** Limits for one sandboxed child. */
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
int ckpt__h5_sandbox(const char *path, const char *what, const ckpt__h5_limits *lim, ckpt__h5_sandbox_fn fn,
	void *arg, void *dst, size_t dst_len, size_t max, void **out, size_t *n);

/*
 * Jobs: the two things libhdf5 does on a file being read (its layout, one
 * dataset's bytes), described by value so that the sandbox server can run
 * them on a file it gets as a descriptor, under the same limits as a
 * forked child.
 */
enum {
	CKPT_H5_JOB_SCAN = 1,   /* the layout: encoded entries and metadata */
	CKPT_H5_JOB_READ = 2,   /* `var`'s bytes, as `info` says */
	/* for tests of the sandbox itself: the child crashes, hangs, spins, hogs memory, fails, or echoes `var` */
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

/** What runs a SCAN or READ job on `j->image` in the child (keras_h5_read.c: ckpt__keras_h5_serve). */
typedef int (*ckpt__h5_job_fn)(const ckpt__h5_job *j, void **payload, size_t *len);

/**
 * Run job `j` in the sandbox: through the sandbox server when one can be
 * used (j->fd >= 0), else in a forked child; arguments as
 * ckpt__h5_sandbox. Callers hold ckpt__h5_lock.
 */
int ckpt__h5_sandbox_job(const char *what, const ckpt__h5_limits *lim, const ckpt__h5_job *j, ckpt__h5_job_fn serve,
	void *dst, size_t dst_len, size_t max, void **out, size_t *n);

/** Default limits for reading the layout of a file (metadata only). */
void ckpt__h5_limits_layout(ckpt__h5_limits *lim);

/** Sandboxed calls made by this process, forked or through the sandbox server (for tests and benchmarks). */
uint64_t ckpt__h5_sandbox_count(void);
/** Of those, the children forked from this process itself. */
uint64_t ckpt__h5_sandbox_forks(void);

/* ---- the sandbox server (client: h5_sandbox_client.c; server: h5_sandbox_server.c) ---- */

/** 1 when jobs with a descriptor go to the sandbox server (starting it if needed); callers hold ckpt__h5_lock. */
int ckpt__h5_sandbox_server_usable(void);

/**
 * Job `j` (j->fd >= 0) through the sandbox server: 1 when it ran there (the
 * result in *rc), 0 when the server could not take it (the caller forks).
 */
int ckpt__h5_sandbox_server_job(const char *what, const ckpt__h5_limits *lim, const ckpt__h5_job *j, void *dst,
	size_t dst_len, size_t max, void **out, size_t *n, int *rc);

/** Sandbox servers started by this process (for tests: 1 for many jobs, one more after each crash). */
uint64_t ckpt__h5_sandbox_server_starts(void);

/** The sandbox server's pid, or -1 when none runs for this process (for tests). */
int ckpt__h5_sandbox_server_pid(void);

/**
 * The sandbox server's main loop on socket `fd`, running SCAN and READ jobs
 * with `serve`; returns its exit status. Defined in ckpt-h5-reader only.
 */
int ckpt__h5_sandbox_server_main(int fd, ckpt__h5_job_fn serve);

/* ---- between the sandbox's own files ---- */

/** In a sandboxed child: apply `lim`, run fn(arg), write the answer to `wfd`, _exit. */
void ckpt__h5_sandbox_child(int wfd, const ckpt__h5_limits *lim, ckpt__h5_sandbox_fn fn, void *arg)
	__attribute__((noreturn));

/**
 * Read a child's answer from `rfd` before `deadline` (CLOCK_MONOTONIC ms),
 * into dst / *out as ckpt__h5_sandbox says. Sets *got (0 a whole answer, 1
 * the child closed first, 2 timeout, -1 malformed) and *status (the child's
 * status); returns < 0 on an error about the answer (raised).
 */
int ckpt__h5_sandbox_collect(int rfd, int64_t deadline, const char *path, const char *what, void *dst, size_t dst_len,
	size_t max, void **out, size_t *n, int *got, int32_t *status);

/**
 * The caller's result once the child is done: `rc` / `got` / `status` from
 * ckpt__h5_sandbox_collect, `wstatus` the child's wait status
 * (`have_wstatus` 0 when unknown). Frees *out on failure.
 */
int ckpt__h5_sandbox_result(int rc, int got, int32_t status, int have_wstatus, int wstatus, const ckpt__h5_limits *lim,
	const char *path, const char *what, void **out);

#endif

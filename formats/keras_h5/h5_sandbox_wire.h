/*
 * The libhdf5 sandbox's wire format (h5_sandbox.h): every message that
 * crosses a process boundary of the sandbox, with its codec, and nothing
 * else. Both ends of each message are declared in this one file, so both
 * always agree; the sandbox server's hello still checks it, because the
 * server binary and the library can come from different builds. The codec
 * is two files: h5_sandbox_wire.c (the library: the client, the forked
 * child's answer, the byte transport) and h5_sandbox_wire_server.c (the
 * server's half, marked "server side" below: compiled into ckpt-h5-reader
 * only).
 *
 * 1. The answer: sandboxed child -> caller, one message on a pipe (the
 *    child of a fork of the caller, or the sandbox server's per-job child):
 *      u32 magic "KHH5", i32 status, u64 length, then `length` bytes:
 *      status >= 0: the payload; status < 0: i32 errno, i64 offset,
 *      u32 variable length, variable, message (the child's last error).
 *
 * 2. The sandbox server's protocol (stream socket between the library, the
 *    client, and ckpt-h5-reader, the server):
 *      server -> client at start: hello {magic, protocol, sizeof(request)}.
 *      client -> server: request + path + var, with SCM_RIGHTS
 *        [image fd, answer pipe write end].
 *      server -> client: reply STARTED (the job child's pid, or -errno),
 *        then ENDED (the job child's wait status) once it is reaped.
 *    The answer itself travels in the pipe, as in 1.
 */
#ifndef CKPT_H5_SANDBOX_WIRE_H
#define CKPT_H5_SANDBOX_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "formats/keras_h5/h5_sandbox.h"

/* ---- 1. the answer ---- */

/** Bytes of an answer's head (magic, status, length). */
#define CKPT_H5_WIRE_ANSWER_HEAD 16
/** Longest error body an answer may carry. */
#define CKPT_H5_WIRE_MAX_ERROR 65536

/** Write an answer (`status`, then `len` bytes of `payload`) to `fd`: 0, or -1 when the write failed. */
int ckpt__h5_wire_answer_write(int fd, int32_t status, const void *payload, size_t len);

/**
 * Encode this thread's last error as an answer body (malloc'ed: the child
 * only _exits after sending it) into *out / *len, and set *status to the
 * error's code when that is negative. 0, or -1 when out of memory.
 */
int ckpt__h5_wire_error_encode(int32_t *status, void **out, size_t *len);

/** Decode an answer's head: 0, or -1 when the magic is wrong. */
int ckpt__h5_wire_answer_head(const unsigned char head[CKPT_H5_WIRE_ANSWER_HEAD], int32_t *status, uint64_t *len);

/** Decode an error body and raise it here, with our `path`; returns the raised code. */
int ckpt__h5_wire_error_raise(int32_t status, const unsigned char *body, size_t n, const char *path);

/* ---- 2. the sandbox server's protocol ---- */

#define CKPT_H5_WIRE_HELLO_MAGIC 0x6c483548u /* "H5Hl" */
#define CKPT_H5_WIRE_REQ_MAGIC 0x71483548u   /* "H5Hq" */
#define CKPT_H5_WIRE_REP_MAGIC 0x72483548u   /* "H5Hr" */
#define CKPT_H5_WIRE_PROTOCOL 1
#define CKPT_H5_WIRE_REP_STARTED 1
#define CKPT_H5_WIRE_REP_ENDED 2
/** Longest path or dataset name a request may carry. */
#define CKPT_H5_WIRE_MAX_STR 65536

typedef struct ckpt__h5_wire_hello {
	uint32_t magic, protocol, req_size, pad;
} ckpt__h5_wire_hello;

typedef struct ckpt__h5_wire_req {
	uint32_t magic;
	int32_t op;
	uint64_t image_len, budget, mem_bytes;
	uint32_t timeout_ms, from_archive, shard, path_len, var_len, pad;
	ckpt__h5_dsinfo info;
} ckpt__h5_wire_req;

typedef struct ckpt__h5_wire_rep {
	uint32_t magic;
	int32_t kind;
	int64_t value;
} ckpt__h5_wire_rep;

/** Server side: send the server's hello on `sock`: 0, or -1. */
int ckpt__h5_wire_hello_send(int sock);
/** Read the hello before `deadline` (ckpt__h5_wire_now_ms) and check it: 0, or -1 (gone, late or another protocol). */
int ckpt__h5_wire_hello_read(int sock, int64_t deadline);

/**
 * Encode job `j` under `lim` as a request; -1 when its path or dataset name
 * is longer than CKPT_H5_WIRE_MAX_STR (the job cannot go to the server).
 */
int ckpt__h5_wire_req_encode(ckpt__h5_wire_req *q, const ckpt__h5_job *j, const ckpt__h5_limits *lim);
/**
 * Server side: decode request `q` into a job and its limits; `path` and
 * `var` are the strings that followed it. j->fd and j->image are the
 * caller's to set.
 */
void ckpt__h5_wire_req_decode(ckpt__h5_job *j, ckpt__h5_limits *lim, const ckpt__h5_wire_req *q, const char *path,
	const char *var);

/** Send request `q`, its `path` and `var`, and the descriptors fds[0..1] on `sock`: 0, or -1. */
int ckpt__h5_wire_req_send(int sock, const ckpt__h5_wire_req *q, const char *path, const char *var, const int fds[2]);
/**
 * Server side: receive a request and its two descriptors (close-on-exec)
 * from `sock`, blocking; checks the magic, the descriptors and the string
 * lengths: 0, or -1 (the client is gone or spoke nonsense). The strings
 * follow: read them with ckpt__h5_wire_read_all.
 */
int ckpt__h5_wire_req_recv(int sock, ckpt__h5_wire_req *q, int fds[2]);

/** Server side: send a reply of `kind` (CKPT_H5_WIRE_REP_*) carrying `value`: 0, or -1. */
int ckpt__h5_wire_rep_send(int sock, int kind, int64_t value);
/** Read a reply before `deadline`; 0 when it is whole, well formed and of `kind`, else -1. */
int ckpt__h5_wire_rep_read(int sock, int kind, int64_t deadline, int64_t *value);

/* ---- byte transport shared by both ---- */

/** CLOCK_MONOTONIC in ms (the deadlines above). */
int64_t ckpt__h5_wire_now_ms(void);
/** Read exactly n bytes from `fd` before `deadline`: 0 ok, 1 EOF, 2 timeout, -1 error. */
int ckpt__h5_wire_read_full(int fd, void *buf, size_t n, int64_t deadline);
/** Exact write to a pipe (write) or, with `socket`, a socket (send, no SIGPIPE): 0, or -1. */
int ckpt__h5_wire_write_all(int fd, const void *buf, size_t n, int socket);
/** Server side: blocking exact read: 0 ok, -1 EOF or error. */
int ckpt__h5_wire_read_all(int fd, void *buf, size_t n);

#endif

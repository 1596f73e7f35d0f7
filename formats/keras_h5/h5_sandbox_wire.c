/*
 * The libhdf5 sandbox's wire format and its codec (h5_sandbox_wire.h): the
 * library's side, the answer's both ends (the forked child is the library)
 * and the byte transport. The server's side of the protocol is
 * h5_sandbox_wire_server.c, compiled into ckpt-h5-reader only.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include "formats/keras_h5/h5_sandbox_wire.h"
#include "formats/format.h"

#define ANSWER_MAGIC 0x3548484bu /* "KHH5" little-endian */

/* ---- byte transport ---- */

int ckpt__h5_wire_write_all(int fd, const void *buf, size_t n, int socket)
{
	const char *p = buf;
	while (n) {
		ssize_t k = socket ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int64_t ckpt__h5_wire_now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int ckpt__h5_wire_read_full(int fd, void *buf, size_t n, int64_t deadline)
{
	char *p = buf;
	while (n) {
		struct pollfd pf;
		ssize_t k;
		int64_t left = deadline - ckpt__h5_wire_now_ms();
		int e;
		if (left <= 0)
			return 2;
		pf.fd = fd;
		pf.events = POLLIN;
		pf.revents = 0;
		e = poll(&pf, 1, left > 1000000 ? 1000000 : (int)left);
		if (e < 0 && errno == EINTR)
			continue;
		if (e < 0)
			return -1;
		if (e == 0)
			continue;
		k = read(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		if (k == 0)
			return 1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* ---- 1. the answer ---- */

int ckpt__h5_wire_answer_write(int fd, int32_t status, const void *payload, size_t len)
{
	unsigned char hdr[CKPT_H5_WIRE_ANSWER_HEAD];
	uint32_t magic = ANSWER_MAGIC;
	uint64_t n = len;
	memcpy(hdr, &magic, 4);
	memcpy(hdr + 4, &status, 4);
	memcpy(hdr + 8, &n, 8);
	if (ckpt__h5_wire_write_all(fd, hdr, sizeof(hdr), 0) < 0 ||
		(len && ckpt__h5_wire_write_all(fd, payload, len, 0) < 0))
		return -1;
	return 0;
}

int ckpt__h5_wire_error_encode(int32_t *status, void **out, size_t *len)
{
	const ckpt_error *e = ckpt_error_last();
	const char *msg = e->message ? e->message : "", *var = e->variable ? e->variable : "";
	size_t ml = strnlen(msg, CKPT_H5_WIRE_MAX_ERROR / 2), vl = strnlen(var, CKPT_H5_WIRE_MAX_ERROR / 4);
	int32_t err = e->sys_errno;
	int64_t off = e->offset;
	uint32_t vl32 = (uint32_t)vl;
	unsigned char *b = malloc(16 + vl + ml);
	if (!b)
		return -1;
	memcpy(b, &err, 4);
	memcpy(b + 4, &off, 8);
	memcpy(b + 12, &vl32, 4);
	memcpy(b + 16, var, vl);
	memcpy(b + 16 + vl, msg, ml);
	*out = b;
	*len = 16 + vl + ml;
	if (e->code < 0)
		*status = e->code;
	return 0;
}

int ckpt__h5_wire_answer_head(const unsigned char head[CKPT_H5_WIRE_ANSWER_HEAD], int32_t *status, uint64_t *len)
{
	uint32_t magic;
	memcpy(&magic, head, 4);
	memcpy(status, head + 4, 4);
	memcpy(len, head + 8, 8);
	return magic == ANSWER_MAGIC ? 0 : -1;
}

int ckpt__h5_wire_error_raise(int32_t status, const unsigned char *b, size_t n, const char *path)
{
	int32_t err;
	int64_t off;
	uint32_t vl;
	char *var, *msg;
	int rc;
	if (n < 16)
		return ckpt__fail(CKPT_EFORMAT, path, NULL, -1, "libhdf5 reader process sent a malformed error");
	memcpy(&err, b, 4);
	memcpy(&off, b + 4, 8);
	memcpy(&vl, b + 12, 4);
	if (vl > n - 16)
		return ckpt__fail(CKPT_EFORMAT, path, NULL, -1, "libhdf5 reader process sent a malformed error");
	var = ckpt__strndup((const char *)b + 16, vl);
	msg = ckpt__strndup((const char *)b + 16 + vl, n - 16 - vl);
	if (!var || !msg) {
		ckpt__free(var);
		ckpt__free(msg);
		return CKPT_ENOMEM;
	}
	rc = ckpt__fail(status, path, *var ? var : NULL, off, "%s", msg);
	if (err) {
		ckpt__error_slot slot;
		memset(&slot, 0, sizeof(slot));
		ckpt__error_capture(&slot);
		slot.sys_errno = err;
		rc = ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	ckpt__free(var);
	ckpt__free(msg);
	return rc;
}

/* ---- 2. the sandbox server's protocol ---- */

int ckpt__h5_wire_hello_read(int sock, int64_t deadline)
{
	ckpt__h5_wire_hello h;
	if (ckpt__h5_wire_read_full(sock, &h, sizeof(h), deadline) != 0 || h.magic != CKPT_H5_WIRE_HELLO_MAGIC ||
		h.protocol != CKPT_H5_WIRE_PROTOCOL || h.req_size != sizeof(ckpt__h5_wire_req))
		return -1;
	return 0;
}

int ckpt__h5_wire_req_encode(ckpt__h5_wire_req *q, const ckpt__h5_job *j, const ckpt__h5_limits *lim)
{
	size_t pl = j->path ? strlen(j->path) : 0, vl = j->var ? strlen(j->var) : 0;
	if (pl > CKPT_H5_WIRE_MAX_STR || vl > CKPT_H5_WIRE_MAX_STR)
		return -1;
	memset(q, 0, sizeof(*q));
	q->magic = CKPT_H5_WIRE_REQ_MAGIC;
	q->op = j->op;
	q->image_len = j->image_len;
	q->budget = j->budget;
	q->mem_bytes = lim->mem_bytes;
	q->timeout_ms = lim->timeout_ms;
	q->from_archive = (uint32_t)j->from_archive;
	q->shard = (uint32_t)j->shard;
	q->path_len = (uint32_t)pl;
	q->var_len = (uint32_t)vl;
	q->info = j->info;
	return 0;
}

int ckpt__h5_wire_req_send(int sock, const ckpt__h5_wire_req *q, const char *path, const char *var, const int fds[2])
{
	struct msghdr m;
	struct iovec iov[3];
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} c;
	struct cmsghdr *cm;
	size_t total = sizeof(*q) + q->path_len + q->var_len, done;
	ssize_t k;
	memset(&m, 0, sizeof(m));
	iov[0].iov_base = (void *)q;
	iov[0].iov_len = sizeof(*q);
	iov[1].iov_base = (void *)path;
	iov[1].iov_len = q->path_len;
	iov[2].iov_base = (void *)var;
	iov[2].iov_len = q->var_len;
	m.msg_iov = iov;
	m.msg_iovlen = 3;
	m.msg_control = c.buf;
	m.msg_controllen = sizeof(c.buf);
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, 2 * sizeof(int));
	do
		k = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return -1;
	done = (size_t)k;
	if (done < total) { /* the rest without descriptors (a short send of a stream socket) */
		char *tail = malloc(total - done), *at;
		size_t off = 0, i;
		if (!tail)
			return -1;
		for (i = 0, at = tail; i < 3; i++) {
			size_t l = iov[i].iov_len;
			if (off + l > done) {
				size_t skip = done > off ? done - off : 0;
				memcpy(at, (char *)iov[i].iov_base + skip, l - skip);
				at += l - skip;
			}
			off += l;
		}
		k = ckpt__h5_wire_write_all(sock, tail, total - done, 1);
		free(tail);
		if (k < 0)
			return -1;
	}
	return 0;
}

int ckpt__h5_wire_rep_read(int sock, int kind, int64_t deadline, int64_t *value)
{
	ckpt__h5_wire_rep r;
	if (ckpt__h5_wire_read_full(sock, &r, sizeof(r), deadline) != 0 || r.magic != CKPT_H5_WIRE_REP_MAGIC ||
		r.kind != kind)
		return -1;
	*value = r.value;
	return 0;
}

/*
 * The sandbox server's side of the wire (h5_sandbox_wire.h, part 2): its
 * hello, receiving and decoding a request, its replies. Compiled into
 * ckpt-h5-reader only, beside h5_sandbox_server.c: the library never
 * serves, so it does not carry this half of the codec.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include "formats/keras_h5/h5_sandbox_wire.h"

int ckpt__h5_wire_read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t k = read(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int ckpt__h5_wire_hello_send(int sock)
{
	ckpt__h5_wire_hello h;
	memset(&h, 0, sizeof(h));
	h.magic = CKPT_H5_WIRE_HELLO_MAGIC;
	h.protocol = CKPT_H5_WIRE_PROTOCOL;
	h.req_size = sizeof(ckpt__h5_wire_req);
	return ckpt__h5_wire_write_all(sock, &h, sizeof(h), 1);
}

void ckpt__h5_wire_req_decode(ckpt__h5_job *j, ckpt__h5_limits *lim, const ckpt__h5_wire_req *q, const char *path,
	const char *var)
{
	memset(j, 0, sizeof(*j));
	j->op = q->op;
	j->fd = -1;
	j->image_len = (size_t)q->image_len;
	j->path = path;
	j->var = var;
	j->budget = q->budget;
	j->from_archive = (int)q->from_archive;
	j->shard = (int)q->shard;
	j->info = q->info;
	lim->mem_bytes = q->mem_bytes;
	lim->timeout_ms = q->timeout_ms;
}

int ckpt__h5_wire_req_recv(int sock, ckpt__h5_wire_req *q, int fds[2])
{
	struct msghdr m;
	struct iovec iov;
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} c;
	struct cmsghdr *cm;
	ssize_t k;
	memset(&m, 0, sizeof(m));
	iov.iov_base = q;
	iov.iov_len = sizeof(*q);
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = c.buf;
	m.msg_controllen = sizeof(c.buf);
	fds[0] = fds[1] = -1;
	do
		k = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	while (k < 0 && errno == EINTR);
	if (k <= 0)
		return -1;
	for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(2 * sizeof(int)))
			memcpy(fds, CMSG_DATA(cm), 2 * sizeof(int));
	if ((size_t)k < sizeof(*q) && ckpt__h5_wire_read_all(sock, (char *)q + k, sizeof(*q) - (size_t)k) < 0)
		return -1;
	if (q->magic != CKPT_H5_WIRE_REQ_MAGIC || fds[0] < 0 || fds[1] < 0 || q->path_len > CKPT_H5_WIRE_MAX_STR ||
		q->var_len > CKPT_H5_WIRE_MAX_STR)
		return -1;
	return 0;
}

int ckpt__h5_wire_rep_send(int sock, int kind, int64_t value)
{
	ckpt__h5_wire_rep r;
	r.magic = CKPT_H5_WIRE_REP_MAGIC;
	r.kind = kind;
	r.value = value;
	return ckpt__h5_wire_write_all(sock, &r, sizeof(r), 1);
}

/*
 * The long-lived libhdf5 reader process (h5_sandbox.h, "Jobs").
 *
 * Why: a fork() of the caller copies its page tables, so the per-open cost
 * of the forked sandbox grows with the caller's memory (about 1.8 ms per
 * open of a small file at 10 MB RSS, 69 ms at 1 GB, 197 ms at 4 GB: see
 * tests/fuzz/README.md), and a trainer or a fuzzer with a big heap pays it
 * on every open and every libhdf5 dataset read. Here a small helper binary
 * (helpers/ckpt_h5_reader.c), started once with posix_spawn (no page-table
 * copy), serves the jobs over a socketpair; for each job it forks a fresh
 * child of its own small image, which applies the limits, maps the file it
 * got as a descriptor, runs the job and writes the answer into a pipe the
 * caller passed along. So every job still runs in a process of its own
 * (one corrupt file cannot leave a damaged heap to the next job) and the
 * cost no longer depends on the caller.
 *
 * Protocol (stream socket; both ends are this source, checked by the hello):
 *   helper -> caller at start: hello {magic, protocol, sizeof(job wire)}.
 *   caller -> helper: struct wire_req + path + var, with SCM_RIGHTS
 *     [image fd, answer pipe write end].
 *   helper -> caller: wire_rep STARTED (child pid, or -errno), then ENDED
 *     (the child's wait status) once it is reaped.
 * The answer itself travels in the pipe, in the forked child's format.
 *
 * Failure: a helper that cannot be found, started or spoken to makes the
 * job fall back to the forked child. A job that times out, or whose answer
 * is malformed, ends the helper (SIGKILL; its child dies with it through
 * PR_SET_PDEATHSIG); the next job starts a new one. A caller that forks
 * gets its own helper in the child (the inherited socket is the parent's).
 * Everything here runs under ckpt__h5_lock.
 */
#define _GNU_SOURCE /* pipe2, posix_spawn_file_actions_addclosefrom_np */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include "formats/keras_h5/h5_sandbox.h"

extern char **environ;

#define HELLO_MAGIC 0x6c483548u /* "H5Hl" */
#define REQ_MAGIC 0x71483548u   /* "H5Hq" */
#define REP_MAGIC 0x72483548u   /* "H5Hr" */
#define PROTOCOL 1
#define REP_STARTED 1
#define REP_ENDED 2
#define MAX_STR 65536
#define HELLO_TIMEOUT_MS 30000

typedef struct wire_hello {
	uint32_t magic, protocol, req_size, pad;
} wire_hello;

typedef struct wire_req {
	uint32_t magic;
	int32_t op;
	uint64_t image_len, budget, mem_bytes;
	uint32_t timeout_ms, from_archive, shard, path_len, var_len, pad;
	ckpt__h5_dsinfo info;
} wire_req;

typedef struct wire_rep {
	uint32_t magic;
	int32_t kind;
	int64_t value;
} wire_rep;

static struct {
	pid_t pid, owner;  /* owner: the process that started it (a forked caller has none of its own yet) */
	int sock, pidfd;
	int disabled;      /* no helper binary: fork from now on */
} hp = { -1, -1, -1, -1, 0 };
static uint64_t helper_starts;

uint64_t ckpt__h5_helper_starts(void) { return __atomic_load_n(&helper_starts, __ATOMIC_RELAXED); }
int ckpt__h5_helper_pid(void) { return hp.sock >= 0 && hp.owner == getpid() ? (int)hp.pid : -1; }

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Blocking exact read (the helper's side): 0 ok, -1 EOF or error. */
static int read_all(int fd, void *buf, size_t n)
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

/* Exact read before `deadline` (the caller's side): 0 ok, -1 EOF, error or timeout. */
static int read_until(int fd, void *buf, size_t n, int64_t deadline)
{
	return ckpt__h5_sb_read_full(fd, buf, n, deadline) == 0 ? 0 : -1;
}

/* ---- the caller's side ---- */

static void helper_stop(void)
{
	if (hp.sock >= 0)
		close(hp.sock);
	if (hp.owner == getpid() && hp.pidfd >= 0) {
		siginfo_t si;
		/* a pidfd never signals or waits for somebody else's process, even if the caller reaped ours */
		pidfd_send_signal(hp.pidfd, SIGKILL, NULL, 0);
		memset(&si, 0, sizeof(si));
		while (waitid(P_PIDFD, (id_t)hp.pidfd, &si, WEXITED) < 0 && errno == EINTR)
			;
	}
	if (hp.pidfd >= 0 && hp.owner == getpid())
		close(hp.pidfd);
	hp.sock = hp.pidfd = -1;
	hp.pid = -1;
	hp.owner = -1;
}

/*
 * Where the helper is: $CKPT_H5_HELPER ("fork": none); beside the object
 * this code is in (the build tree's libckpt.so) or in ../libexec/ckpt from
 * it (an installed libckpt.so, wherever the prefix went); then the build
 * tree and the configured install prefix (a static link).
 */
static const char *helper_path(void)
{
	static const char *const built_in[] = {
#ifdef CKPT_H5_HELPER_BUILD
		CKPT_H5_HELPER_BUILD,
#endif
#ifdef CKPT_H5_HELPER_INSTALL
		CKPT_H5_HELPER_INSTALL,
#endif
		NULL
	};
	static char near[4096];
	const char *e = getenv("CKPT_H5_HELPER");
	Dl_info di;
	size_t i;
	if (e && *e)
		return strcmp(e, "fork") == 0 ? NULL : e;
	if (dladdr((void *)helper_path, &di) && di.dli_fname && strchr(di.dli_fname, '/')) {
		static const char *const rel[] = { "ckpt-h5-reader", "../libexec/ckpt/ckpt-h5-reader" };
		size_t dir = (size_t)(strrchr(di.dli_fname, '/') - di.dli_fname);
		for (i = 0; i < 2; i++)
			if ((size_t)snprintf(near, sizeof(near), "%.*s/%s", (int)dir, di.dli_fname, rel[i]) < sizeof(near) &&
				access(near, X_OK) == 0)
				return near;
	}
	for (i = 0; built_in[i]; i++)
		if (access(built_in[i], X_OK) == 0)
			return built_in[i];
	return NULL;
}

static int helper_start(void)
{
	const char *path = helper_path();
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dfl;
	char *argv[3];
	int sv[2], err;
	pid_t pid;
	wire_hello h;
	if (!path)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	/* fd 3 is the socket (dup2 clears its close-on-exec); nothing else of the caller's goes along */
	posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
	posix_spawn_file_actions_addclosefrom_np(&fa, 4);
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGCHLD); /* the helper reaps its children: a caller's SIG_IGN must not follow it */
	sigaddset(&dfl, SIGPIPE);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	argv[0] = (char *)path;
	argv[1] = (char *)"--serve-fd-3";
	argv[2] = NULL;
	err = posix_spawn(&pid, path, &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(sv[1]);
	if (err) {
		close(sv[0]);
		return -1;
	}
	hp.pid = pid;
	hp.owner = getpid();
	hp.sock = sv[0];
	hp.pidfd = pidfd_open(pid, 0);
	if (hp.pidfd < 0 || read_until(hp.sock, &h, sizeof(h), ckpt__h5_sb_now_ms() + HELLO_TIMEOUT_MS) < 0 ||
		h.magic != HELLO_MAGIC || h.protocol != PROTOCOL || h.req_size != sizeof(wire_req)) {
		if (hp.pidfd < 0) /* no pidfd (old kernel): the plain pid, just started, is ours */
			kill(pid, SIGKILL), waitpid(pid, NULL, 0);
		helper_stop();
		return -1;
	}
	__atomic_add_fetch(&helper_starts, 1, __ATOMIC_RELAXED);
	return 0;
}

int ckpt__h5_helper_usable(void)
{
	if (hp.sock >= 0 && hp.owner != getpid()) {
		/* forked since: that helper serves the parent; ours starts afresh */
		close(hp.sock);
		if (hp.pidfd >= 0)
			close(hp.pidfd);
		hp.sock = hp.pidfd = -1;
		hp.pid = hp.owner = -1;
		hp.disabled = 0;
	}
	if (hp.sock >= 0)
		return 1;
	if (hp.disabled)
		return 0;
	if (helper_start() < 0) {
		hp.disabled = 1; /* not found or not startable: the forked child from now on */
		return 0;
	}
	return 1;
}

static int send_req(const wire_req *q, const char *path, const char *var, int fds[2])
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
		k = sendmsg(hp.sock, &m, MSG_NOSIGNAL);
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
		k = write_all(hp.sock, tail, total - done);
		free(tail);
		if (k < 0)
			return -1;
	}
	return 0;
}

static int read_rep(int kind, int64_t deadline, int64_t *value)
{
	wire_rep r;
	if (read_until(hp.sock, &r, sizeof(r), deadline) < 0 || r.magic != REP_MAGIC || r.kind != kind)
		return -1;
	*value = r.value;
	return 0;
}

int ckpt__h5_helper_job(const char *what, const ckpt__h5_limits *lim, const ckpt__h5_job *j, void *dst, size_t dst_len,
	size_t max, void **out, size_t *n, int *rc_out)
{
	wire_req q;
	int p[2], fds[2], got = -1, rc = CKPT_OK, attempt;
	int32_t status = 0;
	int64_t deadline, v = 0;
	size_t pl = j->path ? strlen(j->path) : 0, vl = j->var ? strlen(j->var) : 0;
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (pl > MAX_STR || vl > MAX_STR)
		return 0;
	memset(&q, 0, sizeof(q));
	q.magic = REQ_MAGIC;
	q.op = j->op;
	q.image_len = j->image_len;
	q.budget = j->budget;
	q.mem_bytes = lim->mem_bytes;
	q.timeout_ms = lim->timeout_ms;
	q.from_archive = (uint32_t)j->from_archive;
	q.shard = (uint32_t)j->shard;
	q.path_len = (uint32_t)pl;
	q.var_len = (uint32_t)vl;
	q.info = j->info;
	for (attempt = 0;; attempt++) {
		if (pipe2(p, O_CLOEXEC) < 0)
			return 0;
		fds[0] = j->fd;
		fds[1] = p[1];
		if (send_req(&q, j->path ? j->path : "", j->var ? j->var : "", fds) == 0)
			break;
		close(p[0]);
		close(p[1]);
		/* the helper died since its last job (a crash of its own, a kill): once more with a new one */
		helper_stop();
		if (attempt || !ckpt__h5_helper_usable())
			return 0;
	}
	close(p[1]);
	deadline = ckpt__h5_sb_now_ms() + lim->timeout_ms;
	if (read_rep(REP_STARTED, deadline, &v) < 0 || v <= 0) {
		close(p[0]);
		helper_stop();
		if (v < 0) {
			*rc_out = ckpt__fail_errno((int)-v, j->path, "fork of the libhdf5 reader process failed");
			return 1;
		}
		return 0; /* the helper is gone: the caller forks this one */
	}
	rc = ckpt__h5_sb_collect(p[0], deadline, j->path, what, dst, dst_len, max, out, n, &got, &status);
	close(p[0]);
	if (got == 0) {
		/*
		 * A whole answer (a result or the child's error), or one we refused
		 * unread (the pipe is closed: the child dies of SIGPIPE): the child
		 * has only _exit left; its status keeps the stream in step.
		 */
		if (read_rep(REP_ENDED, ckpt__h5_sb_now_ms() + HELLO_TIMEOUT_MS, &v) < 0)
			helper_stop();
		*rc_out = ckpt__h5_sb_result(rc, got, status, 0, 0, lim, j->path, what, out);
		return 1;
	}
	if (got == 1) {
		/* the child is gone without a (whole) answer: the helper says how */
		if (read_rep(REP_ENDED, deadline, &v) == 0) {
			*rc_out = ckpt__h5_sb_result(rc, got, status, 1, (int)v, lim, j->path, what, out);
			return 1;
		}
	}
	/* timeout, malformed answer, or an error about it: stop listening, end the helper and its child */
	helper_stop();
	*rc_out = ckpt__h5_sb_result(rc, got, status, 0, 0, lim, j->path, what, out);
	return 1;
}

/* ---- the helper's side ---- */

static ckpt__h5_job_fn helper_serve;

/* The boundary's own tests: a child that misbehaves on purpose. */
static int probe(const ckpt__h5_job *j, void **payload, size_t *len)
{
	switch (j->op) {
	case CKPT_H5_JOB_PROBE_SEGV:
		raise(SIGSEGV);
		break;
	case CKPT_H5_JOB_PROBE_HANG:
		for (;;)
			pause();
	case CKPT_H5_JOB_PROBE_SPIN: {
		volatile uint64_t x = 0;
		for (;;)
			x++;
	}
	case CKPT_H5_JOB_PROBE_HOG: {
		size_t i;
		for (i = 0; i < 128; i++) {
			char *b = malloc(64u << 20);
			if (!b)
				return ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "allocation %zu of 64 MiB failed", i);
			memset(b, 1, 64u << 20);
		}
		break;
	}
	case CKPT_H5_JOB_PROBE_FAIL:
		return ckpt__fail(CKPT_ELIMIT, "ignored", "layers/dense/vars/0", 1234, "a clean refusal from the child");
	case CKPT_H5_JOB_PROBE_ECHO:
		if (!(*payload = ckpt__strdup(j->var)))
			return CKPT_ENOMEM;
		*len = strlen(j->var);
		return CKPT_OK;
	default:
		break;
	}
	return ckpt__fail(CKPT_EINVAL, j->path, NULL, -1, "unknown job %d for the libhdf5 reader process", j->op);
}

static int run_job(void *arg, void **payload, size_t *len)
{
	const ckpt__h5_job *j = arg;
	if (j->op == CKPT_H5_JOB_SCAN || j->op == CKPT_H5_JOB_READ)
		return helper_serve(j, payload, len);
	return probe(j, payload, len);
}

/* In the per-job child: map the file, then the job under the limits. */
static void job_child(int sock, int wfd, int ifd, const wire_req *q, char *path, char *var, pid_t helper)
{
	ckpt__h5_limits lim;
	ckpt__h5_job j;
	close(sock);
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* a helper killed for a timeout takes its child along */
	if (getppid() != helper)
		_exit(6);
	memset(&j, 0, sizeof(j));
	j.op = q->op;
	j.fd = ifd;
	j.image_len = (size_t)q->image_len;
	j.image = "";
	if (j.image_len) {
		void *m = mmap(NULL, j.image_len, PROT_READ, MAP_PRIVATE, ifd, 0);
		if (m == MAP_FAILED)
			_exit(7);
		j.image = m;
	}
	j.path = path;
	j.var = var;
	j.budget = q->budget;
	j.from_archive = (int)q->from_archive;
	j.shard = (int)q->shard;
	j.info = q->info;
	lim.mem_bytes = q->mem_bytes;
	lim.timeout_ms = q->timeout_ms;
	ckpt__h5_sb_child(wfd, &lim, run_job, &j);
}

static int send_rep(int sock, int kind, int64_t value)
{
	wire_rep r;
	r.magic = REP_MAGIC;
	r.kind = kind;
	r.value = value;
	return write_all(sock, &r, sizeof(r));
}

static int recv_req(int sock, wire_req *q, int fds[2])
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
	if ((size_t)k < sizeof(*q) && read_all(sock, (char *)q + k, sizeof(*q) - (size_t)k) < 0)
		return -1;
	if (q->magic != REQ_MAGIC || fds[0] < 0 || fds[1] < 0 || q->path_len > MAX_STR || q->var_len > MAX_STR)
		return -1;
	return 0;
}

int ckpt__h5_helper_main(int sock, ckpt__h5_job_fn serve)
{
	wire_hello h;
	pid_t self = getpid();
	helper_serve = serve;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	if (ckpt__h5_lib(NULL) < 0) {
		fprintf(stderr, "ckpt-h5-reader: %s\n", ckpt_error_last()->message);
		return 1;
	}
	ckpt__h5_prepare(); /* libhdf5 set up once; every job's child inherits it */
	memset(&h, 0, sizeof(h));
	h.magic = HELLO_MAGIC;
	h.protocol = PROTOCOL;
	h.req_size = sizeof(wire_req);
	if (write_all(sock, &h, sizeof(h)) < 0)
		return 1;
	for (;;) {
		wire_req q;
		int fds[2], st = 0;
		char *path, *var;
		pid_t pid;
		if (recv_req(sock, &q, fds) < 0)
			return 0; /* the caller is gone (or spoke nonsense): so are we */
		path = calloc(1, (size_t)q.path_len + 1);
		var = calloc(1, (size_t)q.var_len + 1);
		if (!path || !var || read_all(sock, path, q.path_len) < 0 || read_all(sock, var, q.var_len) < 0)
			return 1;
		pid = fork();
		if (pid == 0)
			job_child(sock, fds[1], fds[0], &q, path, var, self);
		close(fds[0]);
		close(fds[1]);
		free(path);
		free(var);
		if (send_rep(sock, REP_STARTED, pid < 0 ? -(int64_t)errno : (int64_t)pid) < 0)
			return 0;
		if (pid < 0)
			continue;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (send_rep(sock, REP_ENDED, st) < 0)
			return 0;
	}
}

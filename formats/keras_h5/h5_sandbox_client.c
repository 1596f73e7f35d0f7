/*
 * The sandbox server's client (h5_sandbox.h, "The sandbox server"): starts
 * ckpt-h5-reader once per process with posix_spawn, hands it one job at a
 * time over the socket (h5_sandbox_wire.h) and collects the answer from
 * the pipe it passed along. The server itself (h5_sandbox_server.c) is
 * compiled into ckpt-h5-reader only.
 *
 * Why a server: a fork() of the caller copies its page tables, so the
 * per-open cost of the forked sandbox grows with the caller's memory
 * (about 1.8 ms per open of a small file at 10 MB RSS, 69 ms at 1 GB,
 * 197 ms at 4 GB: see tests/fuzz/README.md), and a trainer or a fuzzer
 * with a big heap pays it on every open and every libhdf5 dataset read.
 * The server, started without a page-table copy, forks a fresh child of
 * its own small image per job, so every job still runs in a process of
 * its own (one corrupt file cannot leave a damaged heap to the next job)
 * and the cost no longer depends on the caller.
 *
 * Failure: a server that cannot be found, started or spoken to makes the
 * job fall back to the forked child. A job that times out, or whose answer
 * is malformed, ends the server (SIGKILL; its job child dies with it
 * through PR_SET_PDEATHSIG); the next job starts a new one. A caller that
 * forks gets its own server in the child (the inherited socket is the
 * parent's). Everything here runs under ckpt__h5_lock.
 */
#define _GNU_SOURCE /* pipe2, posix_spawn_file_actions_addclosefrom_np */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include "formats/keras_h5/h5_sandbox.h"
#include "formats/keras_h5/h5_sandbox_wire.h"

extern char **environ;

/* how long a server may take to say hello, and to report a job child that answered as ended */
#define HELLO_TIMEOUT_MS 30000

static struct {
	pid_t pid, owner;  /* owner: the process that started it (a forked caller has none of its own yet) */
	int sock, pidfd;
	int disabled;      /* no server binary: fork from now on */
} srv = { -1, -1, -1, -1, 0 };
static uint64_t server_starts;

uint64_t ckpt__h5_sandbox_server_starts(void) { return __atomic_load_n(&server_starts, __ATOMIC_RELAXED); }
int ckpt__h5_sandbox_server_pid(void) { return srv.sock >= 0 && srv.owner == getpid() ? (int)srv.pid : -1; }

static void server_stop(void)
{
	if (srv.sock >= 0)
		close(srv.sock);
	if (srv.owner == getpid() && srv.pidfd >= 0) {
		siginfo_t si;
		/* a pidfd never signals or waits for somebody else's process, even if the caller reaped ours */
		pidfd_send_signal(srv.pidfd, SIGKILL, NULL, 0);
		memset(&si, 0, sizeof(si));
		while (waitid(P_PIDFD, (id_t)srv.pidfd, &si, WEXITED) < 0 && errno == EINTR)
			;
	}
	if (srv.pidfd >= 0 && srv.owner == getpid())
		close(srv.pidfd);
	srv.sock = srv.pidfd = -1;
	srv.pid = -1;
	srv.owner = -1;
}

/*
 * Where the server is: $CKPT_H5_HELPER ("fork": none); beside the object
 * this code is in (the build tree's libckpt.so) or in ../libexec/ckpt from
 * it (an installed libckpt.so, wherever the prefix went); then the build
 * tree and the configured install prefix (a static link).
 */
static const char *server_path(void)
{
	static const char *const built_in[] = {
#ifdef CKPT_H5_SANDBOX_SERVER_BUILD
		CKPT_H5_SANDBOX_SERVER_BUILD,
#endif
#ifdef CKPT_H5_SANDBOX_SERVER_INSTALL
		CKPT_H5_SANDBOX_SERVER_INSTALL,
#endif
		NULL
	};
	static char near[4096];
	const char *e = getenv("CKPT_H5_HELPER");
	Dl_info di;
	size_t i;
	if (e && *e)
		return strcmp(e, "fork") == 0 ? NULL : e;
	if (dladdr((void *)server_path, &di) && di.dli_fname && strchr(di.dli_fname, '/')) {
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

static int server_start(void)
{
	const char *path = server_path();
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dfl;
	char *argv[3];
	int sv[2], err;
	pid_t pid;
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
	sigaddset(&dfl, SIGCHLD); /* the server reaps its children: a caller's SIG_IGN must not follow it */
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
	srv.pid = pid;
	srv.owner = getpid();
	srv.sock = sv[0];
	srv.pidfd = pidfd_open(pid, 0);
	if (srv.pidfd < 0 || ckpt__h5_wire_hello_read(srv.sock, ckpt__h5_wire_now_ms() + HELLO_TIMEOUT_MS) < 0) {
		if (srv.pidfd < 0) /* no pidfd (old kernel): the plain pid, just started, is ours */
			kill(pid, SIGKILL), waitpid(pid, NULL, 0);
		server_stop();
		return -1;
	}
	__atomic_add_fetch(&server_starts, 1, __ATOMIC_RELAXED);
	return 0;
}

int ckpt__h5_sandbox_server_usable(void)
{
	if (srv.sock >= 0 && srv.owner != getpid()) {
		/* forked since: that server serves the parent; ours starts afresh */
		close(srv.sock);
		if (srv.pidfd >= 0)
			close(srv.pidfd);
		srv.sock = srv.pidfd = -1;
		srv.pid = srv.owner = -1;
		srv.disabled = 0;
	}
	if (srv.sock >= 0)
		return 1;
	if (srv.disabled)
		return 0;
	if (server_start() < 0) {
		srv.disabled = 1; /* not found or not startable: the forked child from now on */
		return 0;
	}
	return 1;
}

int ckpt__h5_sandbox_server_job(const char *what, const ckpt__h5_limits *lim, const ckpt__h5_job *j, void *dst,
	size_t dst_len, size_t max, void **out, size_t *n, int *rc_out)
{
	ckpt__h5_wire_req q;
	int p[2], fds[2], got = -1, rc = CKPT_OK, attempt;
	int32_t status = 0;
	int64_t deadline, v = 0;
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	if (ckpt__h5_wire_req_encode(&q, j, lim) < 0)
		return 0;
	for (attempt = 0;; attempt++) {
		if (pipe2(p, O_CLOEXEC) < 0)
			return 0;
		fds[0] = j->fd;
		fds[1] = p[1];
		if (ckpt__h5_wire_req_send(srv.sock, &q, j->path ? j->path : "", j->var ? j->var : "", fds) == 0)
			break;
		close(p[0]);
		close(p[1]);
		/* the server died since its last job (a crash of its own, a kill): once more with a new one */
		server_stop();
		if (attempt || !ckpt__h5_sandbox_server_usable())
			return 0;
	}
	close(p[1]);
	deadline = ckpt__h5_wire_now_ms() + lim->timeout_ms;
	if (ckpt__h5_wire_rep_read(srv.sock, CKPT_H5_WIRE_REP_STARTED, deadline, &v) < 0 || v <= 0) {
		close(p[0]);
		server_stop();
		if (v < 0) {
			*rc_out = ckpt__fail_errno((int)-v, j->path, "fork of the libhdf5 reader process failed");
			return 1;
		}
		return 0; /* the server is gone: the caller forks this one */
	}
	rc = ckpt__h5_sandbox_collect(p[0], deadline, j->path, what, dst, dst_len, max, out, n, &got, &status);
	close(p[0]);
	if (got == 0) {
		/*
		 * A whole answer (a result or the child's error), or one we refused
		 * unread (the pipe is closed: the child dies of SIGPIPE): the child
		 * has only _exit left; its status keeps the stream in step.
		 */
		if (ckpt__h5_wire_rep_read(srv.sock, CKPT_H5_WIRE_REP_ENDED, ckpt__h5_wire_now_ms() + HELLO_TIMEOUT_MS, &v) < 0)
			server_stop();
		*rc_out = ckpt__h5_sandbox_result(rc, got, status, 0, 0, lim, j->path, what, out);
		return 1;
	}
	if (got == 1) {
		/* the child is gone without a (whole) answer: the server says how */
		if (ckpt__h5_wire_rep_read(srv.sock, CKPT_H5_WIRE_REP_ENDED, deadline, &v) == 0) {
			*rc_out = ckpt__h5_sandbox_result(rc, got, status, 1, (int)v, lim, j->path, what, out);
			return 1;
		}
	}
	/* timeout, malformed answer, or an error about it: stop listening, end the server and its child */
	server_stop();
	*rc_out = ckpt__h5_sandbox_result(rc, got, status, 0, 0, lim, j->path, what, out);
	return 1;
}


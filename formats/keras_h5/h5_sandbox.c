/*
 * The libhdf5 sandbox (h5_sandbox.h): the child's side (limits, the
 * answer), reading and judging an answer, and the fork of the caller,
 * which is the fallback when the sandbox server (h5_sandbox_client.c)
 * cannot be used. A fork's cost is the page-table copy, proportional to
 * the caller's resident memory (1.8 ms per small open at 10 MB, 69 ms at
 * 1 GB, 197 ms at 4 GB: tests/fuzz/README.md). The answer's bytes are
 * h5_sandbox_wire.h's.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include "formats/keras_h5/h5_safe.h"
#include "formats/keras_h5/h5_sandbox.h"
#include "formats/keras_h5/h5_sandbox_wire.h"
#include "formats/format.h"

static uint64_t sb_count, sb_forks;

/*
 * Children that answered but were still exiting: tearing down a copy of a
 * big caller's page tables takes as long as making it, and the answer is
 * already here, so they are reaped later (at the next call, or when the
 * list is full), through a pidfd: if the caller's own SIGCHLD handling
 * reaped one first, its pid may be reused, and a pidfd never waits for
 * somebody else's child. Guarded by ckpt__h5_lock, which callers hold.
 */
#define SB_PENDING 64
static int pending[SB_PENDING];
static int npending;

static void reap_pending(int block_oldest)
{
	int i, j;
	for (i = j = 0; i < npending; i++) {
		siginfo_t si;
		memset(&si, 0, sizeof(si));
		if (waitid(P_PIDFD, (id_t)pending[i], &si, WEXITED | ((block_oldest && i == 0) ? 0 : WNOHANG)) == 0 &&
			si.si_pid == 0) {
			pending[j++] = pending[i]; /* still exiting */
			continue;
		}
		close(pending[i]); /* reaped, or gone (ECHILD) */
	}
	npending = j;
}

uint64_t ckpt__h5_sandbox_count(void) { return __atomic_load_n(&sb_count, __ATOMIC_RELAXED); }
uint64_t ckpt__h5_sandbox_forks(void) { return __atomic_load_n(&sb_forks, __ATOMIC_RELAXED); }

void ckpt__h5_limits_layout(ckpt__h5_limits *lim)
{
	/* Keras metadata is attributes of <= CKPT_MAX_ATTR_BYTES each plus HDF5's caches. */
	lim->mem_bytes = 2ull << 30;
	lim->timeout_ms = 60000;
}

/* Address space already mapped (from /proc; ASan's shadow makes it huge), in bytes; 0 if unknown. */
static uint64_t vm_size(void)
{
	unsigned long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &pages) != 1)
		pages = 0;
	fclose(f);
	return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void child_limits(const ckpt__h5_limits *lim)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGXCPU, SIGPIPE };
	struct rlimit rl;
	uint64_t vm = vm_size(), as;
	size_t i;
	int null;
	/* A crash is a signal for the parent to name, not a report (the sanitizers' handlers included). */
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
	if (!getenv("CKPT_H5_SANDBOX_STDERR") && (null = open("/dev/null", O_WRONLY)) >= 0) {
		dup2(null, 1);
		dup2(null, 2);
		close(null);
	}
	rl.rlim_cur = rl.rlim_max = 0;
	setrlimit(RLIMIT_CORE, &rl);
	rl.rlim_cur = rl.rlim_max = (lim->timeout_ms + 999) / 1000;
	setrlimit(RLIMIT_CPU, &rl);
	if (vm && !ckpt__add_u64(vm, lim->mem_bytes, &as)) {
		rl.rlim_cur = rl.rlim_max = (rlim_t)as;
		setrlimit(RLIMIT_AS, &rl);
	}
}

void ckpt__h5_sandbox_child(int wfd, const ckpt__h5_limits *lim, ckpt__h5_sandbox_fn fn, void *arg)
{
	void *payload = NULL;
	size_t len = 0;
	int32_t status;
	child_limits(lim);
	status = fn(arg, &payload, &len);
	if (status < 0 && ckpt__h5_wire_error_encode(&status, &payload, &len) < 0)
		_exit(3);
	if (ckpt__h5_wire_answer_write(wfd, status, payload, len) < 0)
		_exit(4);
	/* No atexit handlers: libhdf5's and the sanitizers' belong to the parent. */
	_exit(0);
}

static const char *sig_name(int s)
{
	switch (s) {
	case SIGSEGV: return "SIGSEGV";
	case SIGBUS: return "SIGBUS";
	case SIGABRT: return "SIGABRT";
	case SIGFPE: return "SIGFPE";
	case SIGILL: return "SIGILL";
	case SIGKILL: return "SIGKILL";
	case SIGXCPU: return "SIGXCPU";
	default: return "signal";
	}
}

int ckpt__h5_sandbox_collect(int rfd, int64_t deadline, const char *path, const char *what, void *dst, size_t dst_len,
	size_t max, void **out, size_t *n, int *got_out, int32_t *status_out)
{
	unsigned char hdr[CKPT_H5_WIRE_ANSWER_HEAD];
	int32_t status = 0;
	uint64_t len;
	void *buf = NULL;
	int got, rc = CKPT_OK;
	got = ckpt__h5_wire_read_full(rfd, hdr, sizeof(hdr), deadline);
	if (got == 0) {
		if (ckpt__h5_wire_answer_head(hdr, &status, &len) < 0)
			got = -1;
		else if (status < 0) {
			if (len > CKPT_H5_WIRE_MAX_ERROR)
				got = -1;
			else if (!(buf = ckpt__malloc(len ? (size_t)len : 1)))
				rc = CKPT_ENOMEM;
			else if ((got = ckpt__h5_wire_read_full(rfd, buf, (size_t)len, deadline)) == 0)
				rc = ckpt__h5_wire_error_raise(status, buf, (size_t)len, path);
		} else if (dst) {
			if (len != dst_len)
				rc = ckpt__fail(CKPT_EFORMAT, path, NULL, -1, "libhdf5 reader process sent %llu bytes for %s, wanted %zu",
					(unsigned long long)len, what, dst_len);
			else
				got = ckpt__h5_wire_read_full(rfd, dst, dst_len, deadline);
		} else if (len > max) {
			rc = ckpt__fail(CKPT_ELIMIT, path, NULL, -1, "%s: %llu bytes, cap is %zu", what, (unsigned long long)len, max);
		} else if (!(buf = ckpt__malloc(len ? (size_t)len : 1))) {
			rc = CKPT_ENOMEM;
		} else if ((got = ckpt__h5_wire_read_full(rfd, buf, (size_t)len, deadline)) == 0) {
			*out = buf;
			*n = (size_t)len;
			buf = NULL;
		}
	}
	ckpt__free(buf);
	*got_out = got;
	*status_out = status;
	return rc;
}

int ckpt__h5_sandbox_result(int rc, int got, int32_t status, int have_wstatus, int st, const ckpt__h5_limits *lim,
	const char *path, const char *what, void **out)
{
	if (rc < 0 && got == 0)
		return rc; /* the child's own error, or ours about its answer */
	if (got == 0) {
		if (status < 0)
			return status;
		return CKPT_OK;
	}
	if (out && *out) {
		ckpt__free(*out);
		*out = NULL;
	}
	if (got == 2)
		return ckpt__fail(CKPT_EFORMAT, path, NULL, -1,
			"libhdf5 took longer than %u ms %s (killed): corrupt metadata loops?", lim->timeout_ms, what);
	if (have_wstatus && WIFSIGNALED(st)) {
		int s = WTERMSIG(st);
		if (s == SIGXCPU)
			return ckpt__fail(CKPT_EFORMAT, path, NULL, -1,
				"libhdf5 used more than %u s of CPU %s (killed): corrupt metadata loops?", (lim->timeout_ms + 999) / 1000, what);
		return ckpt__fail(CKPT_EFORMAT, path, NULL, -1,
			"libhdf5 crashed %s (signal %d, %s): the file's HDF5 metadata is corrupt", what, s, sig_name(s));
	}
	if (have_wstatus && WIFEXITED(st))
		return ckpt__fail(CKPT_EFORMAT, path, NULL, -1,
			"libhdf5 reader process exited with status %d %s without an answer (past its %llu MiB memory limit?)",
			WEXITSTATUS(st), what, (unsigned long long)(lim->mem_bytes >> 20));
	return ckpt__fail(CKPT_EFORMAT, path, NULL, -1, "libhdf5 reader process gave no answer %s", what);
}

int ckpt__h5_sandbox(const char *path, const char *what, const ckpt__h5_limits *lim, ckpt__h5_sandbox_fn fn,
	void *arg, void *dst, size_t dst_len, size_t max, void **out, size_t *n)
{
	int p[2], st = 0, got, rc = CKPT_OK, reaped, pidfd;
	int32_t status = 0;
	int64_t deadline;
	pid_t pid;
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	ckpt__h5_prepare();
#ifdef CKPT_FUZZ_H5_IN_PROCESS
	/* Fuzzing build only (tests/fuzz/CMakeLists.txt): libhdf5 in this process, so coverage of the walk is seen. */
	{
		void *pl = NULL;
		size_t len = 0;
		(void)lim;
		(void)what;
		__atomic_add_fetch(&sb_count, 1, __ATOMIC_RELAXED);
		rc = fn(arg, &pl, &len);
		if (rc >= 0 && dst) {
			if (len == dst_len)
				memcpy(dst, pl, len);
			else
				rc = ckpt__fail(CKPT_EFORMAT, path, NULL, -1, "%zu bytes for %s, wanted %zu", len, what, dst_len);
		} else if (rc >= 0 && len > max) {
			rc = ckpt__fail(CKPT_ELIMIT, path, NULL, -1, "%s: %zu bytes, cap is %zu", what, len, max);
		} else if (rc >= 0) {
			*out = pl;
			*n = len;
			pl = NULL;
		}
		ckpt__free(pl);
		return rc;
	}
#endif
	if (pipe(p) < 0)
		return ckpt__fail_errno(errno, path, "pipe for the libhdf5 reader process failed");
	/* other threads' children must not hold our pipe open */
	fcntl(p[0], F_SETFD, FD_CLOEXEC);
	fcntl(p[1], F_SETFD, FD_CLOEXEC);
	pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		return ckpt__fail_errno(e, path, "fork of the libhdf5 reader process failed");
	}
	if (pid == 0) {
		close(p[0]);
		ckpt__h5_sandbox_child(p[1], lim, fn, arg);
	}
	__atomic_add_fetch(&sb_count, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&sb_forks, 1, __ATOMIC_RELAXED);
	pidfd = pidfd_open(pid, 0); /* -1 (old kernel): reaped below, at once */
	close(p[1]);
	deadline = ckpt__h5_wire_now_ms() + lim->timeout_ms;
	rc = ckpt__h5_sandbox_collect(p[0], deadline, path, what, dst, dst_len, max, out, n, &got, &status);
	if (got != 0 || rc < 0)
		kill(pid, SIGKILL); /* gone already, or stuck, or no longer listened to */
	close(p[0]);
	if (npending)
		reap_pending(npending == SB_PENDING);
	if (got == 0 && rc >= 0 && status >= 0 && pidfd >= 0 && npending < SB_PENDING) {
		/* a whole answer: the child only has _exit left */
		pending[npending++] = pidfd;
		pidfd = -1;
		reaped = -1;
	} else {
		do
			reaped = waitpid(pid, &st, 0);
		while (reaped < 0 && errno == EINTR);
	}
	if (pidfd >= 0)
		close(pidfd);
	return ckpt__h5_sandbox_result(rc, got, status, reaped == pid, st, lim, path, what, out);
}

/* A job in a forked child (no sandbox server): the child inherits the image. */
typedef struct fork_job {
	const ckpt__h5_job *j;
	ckpt__h5_job_fn serve;
} fork_job;

static int fork_job_fn(void *arg, void **payload, size_t *len)
{
	const fork_job *f = arg;
	return f->serve(f->j, payload, len);
}

int ckpt__h5_sandbox_job(const char *what, const ckpt__h5_limits *lim, const ckpt__h5_job *j, ckpt__h5_job_fn serve,
	void *dst, size_t dst_len, size_t max, void **out, size_t *n)
{
	fork_job f;
#ifndef CKPT_FUZZ_H5_IN_PROCESS
	int rc;
	if (j->fd >= 0 && ckpt__h5_sandbox_server_usable() &&
		ckpt__h5_sandbox_server_job(what, lim, j, dst, dst_len, max, out, n, &rc)) {
		__atomic_add_fetch(&sb_count, 1, __ATOMIC_RELAXED);
		return rc;
	}
#endif
	f.j = j;
	f.serve = serve;
	return ckpt__h5_sandbox(j->path, what, lim, fork_job_fn, &f, dst, dst_len, max, out, n);
}

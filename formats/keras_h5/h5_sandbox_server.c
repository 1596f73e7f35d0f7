/*
 * The sandbox server (h5_sandbox.h, "The sandbox server"): the main loop of
 * ckpt-h5-reader, compiled into that binary only, never into libckpt (see
 * CMakeLists.txt). It serves one client on a socket: for each request
 * (h5_sandbox_wire.h) it forks a fresh job child of its own small image,
 * which maps the file it got as a descriptor, applies the limits
 * (ckpt__h5_sandbox_child) and writes the answer into the pipe the client
 * passed along; the server reports the child's pid and then its wait
 * status.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include "formats/keras_h5/h5_sandbox.h"
#include "formats/keras_h5/h5_sandbox_wire.h"

static ckpt__h5_job_fn server_serve;

/* The sandbox's own tests: a job child that misbehaves on purpose. */
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
		return server_serve(j, payload, len);
	return probe(j, payload, len);
}

/* In the per-job child: map the file, then the job under the limits. */
static void job_child(int sock, int wfd, int ifd, const ckpt__h5_wire_req *q, char *path, char *var, pid_t server)
{
	ckpt__h5_limits lim;
	ckpt__h5_job j;
	close(sock);
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* a server killed for a timeout takes its child along */
	if (getppid() != server)
		_exit(6);
	ckpt__h5_wire_req_decode(&j, &lim, q, path, var);
	j.fd = ifd;
	j.image = "";
	if (j.image_len) {
		void *m = mmap(NULL, j.image_len, PROT_READ, MAP_PRIVATE, ifd, 0);
		if (m == MAP_FAILED)
			_exit(7);
		j.image = m;
	}
	ckpt__h5_sandbox_child(wfd, &lim, run_job, &j);
}

int ckpt__h5_sandbox_server_main(int sock, ckpt__h5_job_fn serve)
{
	pid_t self = getpid();
	server_serve = serve;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	if (ckpt__h5_lib(NULL) < 0) {
		fprintf(stderr, "ckpt-h5-reader: %s\n", ckpt_error_last()->message);
		return 1;
	}
	ckpt__h5_prepare(); /* libhdf5 set up once; every job's child inherits it */
	if (ckpt__h5_wire_hello_send(sock) < 0)
		return 1;
	for (;;) {
		ckpt__h5_wire_req q;
		int fds[2], st = 0;
		char *path, *var;
		pid_t pid;
		if (ckpt__h5_wire_req_recv(sock, &q, fds) < 0)
			return 0; /* the caller is gone (or spoke nonsense): so are we */
		path = calloc(1, (size_t)q.path_len + 1);
		var = calloc(1, (size_t)q.var_len + 1);
		if (!path || !var || ckpt__h5_wire_read_all(sock, path, q.path_len) < 0 ||
			ckpt__h5_wire_read_all(sock, var, q.var_len) < 0)
			return 1;
		pid = fork();
		if (pid == 0)
			job_child(sock, fds[1], fds[0], &q, path, var, self);
		close(fds[0]);
		close(fds[1]);
		free(path);
		free(var);
		if (ckpt__h5_wire_rep_send(sock, CKPT_H5_WIRE_REP_STARTED, pid < 0 ? -(int64_t)errno : (int64_t)pid) < 0)
			return 0;
		if (pid < 0)
			continue;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (ckpt__h5_wire_rep_send(sock, CKPT_H5_WIRE_REP_ENDED, st) < 0)
			return 0;
	}
}

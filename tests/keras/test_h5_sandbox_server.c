/*
 * Issue 12 (sandbox speed): libhdf5 jobs run through one long-lived
 * sandbox server (formats/keras_h5/h5_sandbox_server.c, build/ckpt-h5-reader)
 * instead of a fork of the caller per job. Checked here:
 *  - opens and reads go through it: no fork of the test process, one server
 *    for many jobs, the same entries and bytes as the forked fallback;
 *  - its per-job child keeps the sandbox: a crash, a hang, a CPU spin, a
 *    memory hog and a clean failure each become the caller's error; a
 *    crash does not cost the server, a timeout ends it and the next job
 *    starts a new one; a server killed from outside is replaced;
 *  - a forked caller gets a server of its own; CKPT_H5_HELPER=fork and a
 *    server that is not there fall back to forking.
 */
#define _GNU_SOURCE /* memfd_create */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "keras_test.h"
#include "error_assert.h"
#include "formats/keras_h5/h5_safe.h"
#include "formats/keras_h5/h5_sandbox.h"

#define FIX "keras/tiny__tfkeras2.4.0_resnet_batchnorm_adam.h5"

/* Open FIX (mapped) or its bytes from a memory file system, read every entry: the bytes' checksum. */
static uint64_t open_and_read(int from_memory)
{
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	ckpt_vfs *mem = NULL;
	ckpt_reader *r = NULL;
	uint64_t sum = 1469598103934665603ull;
	size_t i, k;
	if (from_memory) {
		FILE *f = fopen(ts_fixture(FIX), "rb");
		char *buf = malloc(4 << 20);
		size_t n;
		cr_assert(f && buf);
		n = fread(buf, 1, 4 << 20, f);
		fclose(f);
		cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
		cr_assert_eq(ckpt_vfs_memory_put(mem, "m.h5", buf, n), CKPT_OK);
		free(buf);
		o.vfs = mem;
	}
	cr_assert_eq(ckpt_reader_open(&r, from_memory ? "m.h5" : ts_fixture(FIX), &o), CKPT_OK, "%s",
		ckpt_error_last()->message);
	cr_assert_gt(ckpt_reader_count(r), 10);
	for (i = 0; i < ckpt_reader_count(r); i++) {
		ckpt_tensor *t = NULL;
		cr_assert_eq(ckpt_reader_read(r, i, &t), CKPT_OK, "%s", ckpt_error_last()->message);
		for (k = 0; k < t->nbytes; k++)
			sum = (sum ^ ((const unsigned char *)t->data)[k]) * 1099511628211ull;
		ckpt_tensor_free(t);
	}
	ckpt_reader_free(r);
	ckpt_vfs_free(mem);
	return sum;
}

Test(h5_sandbox_server, opens_and_reads_go_through_one_server, .timeout = 120)
{
	uint64_t forks = ckpt__h5_sandbox_forks(), calls = ckpt__h5_sandbox_count(), a, b;
	int i;
	cr_assert_eq(ckpt__h5_sandbox_server_starts(), 0);
	a = open_and_read(0);
	b = open_and_read(1);
	cr_assert_eq(a, b, "the mapped file and its in-memory copy read differently");
	for (i = 0; i < 10; i++)
		cr_assert_eq(open_and_read(i & 1), a);
	cr_assert_eq(ckpt__h5_sandbox_server_starts(), 1, "%llu sandbox servers for 12 opens",
		(unsigned long long)ckpt__h5_sandbox_server_starts());
	cr_assert_eq(ckpt__h5_sandbox_forks(), forks, "the test process forked for libhdf5");
	cr_assert_geq(ckpt__h5_sandbox_count() - calls, 12);
	cr_assert_gt(ckpt__h5_sandbox_server_pid(), 0);
}

/* The same entries and bytes when forking (the fallback), in a child with CKPT_H5_HELPER=fork. */
Test(h5_sandbox_server, the_forked_fallback_reads_the_same, .timeout = 120)
{
	uint64_t want = open_and_read(0);
	int st = 0;
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* the child: the parent's server is not ours; with the server off, every job forks */
		uint64_t forks, got;
		setenv("CKPT_H5_HELPER", "fork", 1);
		forks = ckpt__h5_sandbox_forks();
		got = open_and_read(1);
		_exit(got != want ? 1 : ckpt__h5_sandbox_forks() == forks ? 2 : ckpt__h5_sandbox_server_pid() != -1 ? 3 : 0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fallback child: status %d", st);
}

Test(h5_sandbox_server, a_missing_server_falls_back_to_forking, .timeout = 120)
{
	uint64_t forks;
	setenv("CKPT_H5_HELPER", "/nonexistent/ckpt-h5-reader", 1);
	forks = ckpt__h5_sandbox_forks();
	(void)open_and_read(0);
	cr_assert_gt(ckpt__h5_sandbox_forks(), forks);
	cr_assert_eq(ckpt__h5_sandbox_server_starts(), 0);
}

Test(h5_sandbox_server, a_forked_caller_gets_its_own, .timeout = 120)
{
	uint64_t want = open_and_read(0);
	int parent_server = ckpt__h5_sandbox_server_pid(), st = 0;
	pid_t pid;
	cr_assert_gt(parent_server, 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		uint64_t starts = ckpt__h5_sandbox_server_starts(), forks = ckpt__h5_sandbox_forks();
		int ok = open_and_read(0) == want && ckpt__h5_sandbox_server_starts() == starts + 1 &&
			ckpt__h5_sandbox_server_pid() > 0 && ckpt__h5_sandbox_server_pid() != parent_server &&
			ckpt__h5_sandbox_forks() == forks;
		_exit(ok ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "forked caller: status %d", st);
	/* the parent's server still serves the parent */
	cr_assert_eq(open_and_read(1), want);
	cr_assert_eq(ckpt__h5_sandbox_server_pid(), parent_server);
}

/* A probe job through the server (an image descriptor is all it needs). */
static int probe(int op, unsigned timeout_ms, uint64_t mem, char **out)
{
	ckpt__h5_limits lim = { mem, timeout_ms };
	ckpt__h5_job j;
	size_t n = 0;
	int fd = memfd_create("probe", 0), rc = 0, taken;
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "image", 5), 5);
	memset(&j, 0, sizeof(j));
	j.op = op;
	j.fd = fd;
	j.image_len = 5;
	j.path = "/x/file.h5";
	j.var = "echoed back";
	ckpt__h5_lock();
	cr_assert(ckpt__h5_sandbox_server_usable());
	taken = ckpt__h5_sandbox_server_job("in a test", &lim, &j, NULL, 0, 1 << 20, (void **)out, &n, &rc);
	ckpt__h5_unlock();
	close(fd);
	cr_assert(taken, "the server did not take the job");
	return rc;
}

/* every boxed call here names the same made-up file */
#define assert_msg(rc, code, needle) ts_assert_error_at(rc, code, needle, "/x/file.h5")

Test(h5_sandbox_server, its_children_keep_the_sandbox, .timeout = 120)
{
	char *out = NULL;
	uint64_t forks = ckpt__h5_sandbox_forks(), starts;
	int pid;
	cr_assert_eq(probe(CKPT_H5_JOB_PROBE_ECHO, 10000, 64u << 20, &out), CKPT_OK);
	cr_assert(out && memcmp(out, "echoed back", 11) == 0); /* bytes, not a string */
	ckpt__free(out);
	out = NULL;
	pid = ckpt__h5_sandbox_server_pid();
	/* a crash costs the job, not the server */
	assert_msg(probe(CKPT_H5_JOB_PROBE_SEGV, 10000, 64u << 20, &out), CKPT_EFORMAT, "signal 11, SIGSEGV");
	cr_assert_eq(ckpt__h5_sandbox_server_pid(), pid);
	assert_msg(probe(CKPT_H5_JOB_PROBE_FAIL, 10000, 64u << 20, &out), CKPT_ELIMIT, "a clean refusal from the child");
	cr_assert_str_eq(ckpt_error_last()->variable, "layers/dense/vars/0");
	cr_assert_eq(ckpt_error_last()->offset, 1234);
	{
		int rc = probe(CKPT_H5_JOB_PROBE_HOG, 60000, 256u << 20, &out);
		cr_assert_lt(rc, 0, "the child allocated 8 GiB under a 256 MiB limit");
		cr_assert(strstr(ckpt_error_last()->message, "64 MiB failed") || strstr(ckpt_error_last()->message, "libhdf5 "),
			"%s", ckpt_error_last()->message);
	}
	cr_assert_eq(ckpt__h5_sandbox_server_starts(), 1);
	/* SIGXCPU, or (a loaded box) the wall-clock deadline first */
	assert_msg(probe(CKPT_H5_JOB_PROBE_SPIN, 1000, 64u << 20, &out), CKPT_EFORMAT, "libhdf5 ");
	/* a hang: the caller gives up at its deadline and ends the server (and its child); the next job starts one */
	cr_assert_eq(probe(CKPT_H5_JOB_PROBE_ECHO, 10000, 64u << 20, &out), CKPT_OK);
	ckpt__free(out);
	out = NULL;
	starts = ckpt__h5_sandbox_server_starts();
	assert_msg(probe(CKPT_H5_JOB_PROBE_HANG, 300, 64u << 20, &out), CKPT_EFORMAT, "longer than 300 ms");
	cr_assert_eq(ckpt__h5_sandbox_server_pid(), -1);
	cr_assert_eq(probe(CKPT_H5_JOB_PROBE_ECHO, 10000, 64u << 20, &out), CKPT_OK);
	ckpt__free(out);
	out = NULL;
	cr_assert_eq(ckpt__h5_sandbox_server_starts(), starts + 1);
	/* killed from outside between jobs: replaced at the next one */
	pid = ckpt__h5_sandbox_server_pid();
	cr_assert_gt(pid, 0);
	cr_assert_eq(kill(pid, SIGKILL), 0);
	usleep(100000);
	cr_assert_eq(probe(CKPT_H5_JOB_PROBE_ECHO, 10000, 64u << 20, &out), CKPT_OK);
	ckpt__free(out);
	cr_assert_eq(ckpt__h5_sandbox_server_starts(), starts + 2);
	cr_assert_eq(ckpt__h5_sandbox_forks(), forks);
}

/* 1 when the file at `path` holds `name` (a symbol's or a source file's name, in its symbol table or debug info). */
static int file_mentions(const char *path, const char *name)
{
	size_t n = 0;
	char *b = ts_read_file(path, &n);
	int found;
	cr_assert(b, "cannot read %s", path);
	found = memmem(b, n, name, strlen(name)) != NULL;
	free(b);
	return found;
}

/* The server is compiled into ckpt-h5-reader only: neither libckpt.so nor libckpt.a carries it. */
Test(h5_sandbox_server, is_in_the_server_binary_only)
{
	static const char *const names[] = { "ckpt__h5_sandbox_server_main", "h5_sandbox_server.c" };
	const char *libs[] = { CKPT_LIBRARY, CKPT_BINARY_DIR "/libckpt.a" };
	size_t i, k;
	for (i = 0; i < 2; i++) {
		cr_assert(file_mentions(CKPT_BINARY_DIR "/ckpt-h5-reader", names[i]), "ckpt-h5-reader lacks %s", names[i]);
		for (k = 0; k < 2; k++)
			cr_assert_not(file_mentions(libs[k], names[i]), "%s carries %s", libs[k], names[i]);
	}
	/* the client is in the library */
	cr_assert(file_mentions(CKPT_LIBRARY, "ckpt__h5_sandbox_server_job"));
}

/* The server's half of the wire codec too: the library sends requests and reads replies, never the reverse. */
Test(h5_sandbox_server, its_wire_codec_is_in_the_server_binary_only)
{
	static const char *const server_only[] = { "ckpt__h5_wire_hello_send", "ckpt__h5_wire_req_recv",
		"ckpt__h5_wire_req_decode", "ckpt__h5_wire_rep_send", "ckpt__h5_wire_read_all", "h5_sandbox_wire_server.c" };
	static const char *const client[] = { "ckpt__h5_wire_hello_read", "ckpt__h5_wire_req_send",
		"ckpt__h5_wire_req_encode", "ckpt__h5_wire_rep_read" };
	const char *libs[] = { CKPT_LIBRARY, CKPT_BINARY_DIR "/libckpt.a" };
	size_t i, k;
	for (i = 0; i < sizeof(server_only) / sizeof(server_only[0]); i++) {
		cr_assert(file_mentions(CKPT_BINARY_DIR "/ckpt-h5-reader", server_only[i]), "ckpt-h5-reader lacks %s",
			server_only[i]);
		for (k = 0; k < 2; k++)
			cr_expect_not(file_mentions(libs[k], server_only[i]), "%s carries %s", libs[k], server_only[i]);
	}
	/* the client's half is in the library (so the symbol names above would be seen there) */
	for (i = 0; i < sizeof(client) / sizeof(client[0]); i++)
		for (k = 0; k < 2; k++)
			cr_expect(file_mentions(libs[k], client[i]), "%s lacks %s", libs[k], client[i]);
}

/* Helpers shared by the Criterion suites. */
#ifndef CKPT_TEST_SUPPORT_H
#define CKPT_TEST_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

/** Absolute path of a fixture: ts_fixture("tf/tensorflow__half_plus_two_v1"). Static buffer per call slot (8 slots). */
const char *ts_fixture(const char *rel);
/** A fresh temporary directory (removed by ts_rmtree). Returned string is malloc'ed. */
char *ts_tmpdir(void);
/** rm -rf. */
void ts_rmtree(const char *dir);
/** Join into a malloc'ed string. */
char *ts_join(const char *a, const char *b);
/** Read a whole file (malloc'ed, NUL-terminated); NULL on failure. */
char *ts_read_file(const char *path, size_t *n);
/** Write a whole file; 0 on success. */
int ts_write_file(const char *path, const void *buf, size_t n);
/** Copy a file or directory tree (cp -r); 0 on success. */
int ts_copy(const char *from, const char *to);
/** XOR the byte at `off` of `path` with `mask`, in place; 0 on success (-1: no such byte, or I/O failed). */
int ts_flip_byte(const char *path, long off, unsigned mask);

/** Result of running a command. */
typedef struct ts_run_result {
	int status;      /**< exit status, or 128+signal */
	char *out, *err; /**< captured stdout / stderr (malloc'ed, NUL-terminated) */
} ts_run_result;
/**
 * Run argv (argv[0] a path) with stdin from /dev/null, capturing stdout and
 * stderr. Returns 0 when the command could be started.
 */
int ts_run(ts_run_result *res, char *const argv[]);
/** Run the ckpt CLI (TS_CLI) with a NULL-terminated argument list; fails the test when it cannot start. */
ts_run_result ts_cli(const char *arg, ...);
/** Run `sh -c cmd` the same way. */
int ts_run_sh(ts_run_result *res, const char *cmd);
void ts_run_free(ts_run_result *res);
/**
 * Everything a run said, for a failure message: "exit N\nstdout:\n...\nstderr:\n..."
 * (each output cut to its last 64 KiB). Malloc'ed.
 */
char *ts_run_text(const ts_run_result *res);
/**
 * Fail the test unless `res` exited with `want`; the failure names the
 * caller's file and line, its message (printf `fmt`), the exit status and
 * both outputs in full, so that a child's failure says why it failed.
 */
#define ts_assert_exit(res, want, ...) ts_assert_exit_at(__FILE__, __LINE__, (res), (want), __VA_ARGS__)
void ts_assert_exit_at(const char *file, int line, const ts_run_result *res, int want, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/** The system Python used as an independent oracle. */
#define TS_PYTHON "/usr/bin/python3"
/**
 * The venv python holding TensorFlow, Keras 3, safetensors and gguf
 * ($CKPT_ORACLE_PYTHON, set by scripts/test.sh). Fails the calling test when
 * it is not set or not runnable: the oracle tier never skips.
 */
const char *ts_oracle_python(void);
/** The ckpt CLI built with the tests. */
#define TS_CLI CKPT_CLI_PATH

/* The number after "key " at the start of a line of `text` (a statistics file); fails the test when there is none. */
unsigned long long ts_key_value(const char *text, const char *key);

#endif

/*
 * Shared by the S3 suites (test_s3.c, test_s3_faults.c, test_s3_kill.c):
 * the server that tests/s3/with_s3_server.sh started (its variables name
 * the endpoint, the bucket and the credentials), a fresh prefix per test,
 * and boto3 (the pinned oracle venv's) as the independent client.
 *
 * Declarations only: the bodies are compiled once, in tests/support/s3_common.c.
 */
#ifndef CKPT_S3_COMMON_H
#define CKPT_S3_COMMON_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

#define S3T_ORACLE CKPT_SOURCE_DIR "/tests/oracles/s3_check.py"

/* The test bucket; fails the test when the suite does not run under with_s3_server.sh. */
const char *s3t_bucket(void);

/* "s3://BUCKET/t<pid>-<n>-<name>": unique to this process and call (caller frees). */
char *s3t_prefix(const char *name);

/* Run tests/oracles/s3_check.py ACTION args... NULL; it must exit 0. Returns its stdout (caller frees). */
char *s3t_oracle(const char *action, ...);

/* A VFS over the test server with the environment's settings, part size and parallelism overridden (0: keep). */
ckpt_vfs *s3t_vfs(const char *endpoint, size_t part_size, unsigned parallel);

#endif

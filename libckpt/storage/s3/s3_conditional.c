/*
 * Does the server honour conditional writes? The one-writer lock of a prefix
 * (s3_lock.c) is a create-if-absent PUT (If-None-Match: *) and renewals and
 * takeovers are PUTs conditional on an ETag (If-Match); a server that
 * ignores those headers (`rclone serve s3` does) would let two trainers
 * both "hold" the lock and write over each other. So before the first lock
 * of a bucket on an endpoint, a process checks, on a probe object of its own
 * under the prefix being locked:
 *   1. PUT probe                      (unconditional: it now exists)
 *   2. PUT probe, If-None-Match: *    must be refused: 412 (or 409)
 *   3. PUT probe, If-Match: "<other>" must be refused: 412
 *   4. DELETE probe
 * A 2xx to 2 or 3 (the server ignored the header) or a 501 NotImplemented
 * means the lock cannot be trusted: the lock is refused with an error saying
 * what the server lacks, unless CKPT_S3_SINGLE_WRITER=1 says the user
 * guarantees a single writer (then no lock object is written at all: on
 * such a server it could not exclude anyone). Any other failure is returned as it is (it
 * says nothing about the server). The answer is cached per endpoint and
 * bucket for the life of the process.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"
#include "s3_internal.h"

#define MAX_CACHED 64

typedef struct verdict {
	char where[512];    /* endpoint " " bucket */
	int honours;        /* 1 honours both headers; 0 does not */
	char lacks[160];    /* what it lacks, for the message */
} verdict;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static verdict cache[MAX_CACHED];
static size_t ncached;

/* One probe PUT with an optional condition header: its status (2xx/412/...), or a negative error it did not explain. */
static int probe_put(s3_client *c, const char *bucket, const char *key, const char *cond, long *status, char *code,
	size_t ncode)
{
	static const long quiet[] = { 409, 412, 501, 0 };
	const char *hdrs[] = { cond, NULL };
	s3_request rq = { "PUT", bucket, key, NULL, "probe\n", 6, cond ? hdrs : NULL, S3_RETRIED, 0, 0, 0, NULL, 1 };
	s3_response rs;
	int rc = s3_perform_quiet(c, &rq, &rs, quiet);
	*status = rs.status;
	snprintf(code, ncode, "%s", rs.code);
	s3_response_clear(&rs);
	if (rc == CKPT_OK || *status == 409 || *status == 412 || *status == 501)
		return CKPT_OK;
	return rc;
}

/* Probe the server under `prefix` (a key prefix, "" for the bucket's root); fills v. */
static int probe(s3_client *c, const char *bucket, const char *prefix, verdict *v)
{
	char key[1024];
	snprintf(key, sizeof(key), "%s%scheckpoint.lock.probe-%ld-%08x", prefix, prefix[0] ? "/" : "", (long)getpid(),
		(unsigned)time(NULL) ^ (unsigned)(uintptr_t)v);
	long st;
	char code[64];
	CKPT_TRY(probe_put(c, bucket, key, NULL, &st, code, sizeof(code)));
	int rc = CKPT_OK;
	static const char *const conds[] = { "If-None-Match: *", "If-Match: \"0123456789abcdef0123456789abcdef\"" };
	static const char *const names[] = { "If-None-Match on PUT (create only if absent)",
		"If-Match on PUT (replace only the version read)" };
	v->honours = 1;
	for (int i = 0; i < 2 && rc == CKPT_OK && v->honours; i++) {
		rc = probe_put(c, bucket, key, conds[i], &st, code, sizeof(code));
		if (rc == CKPT_OK && (st < 300 || st == 501)) {
			v->honours = 0;
			snprintf(v->lacks, sizeof(v->lacks), "%s: %s", names[i],
				st == 501 ? "it answers 501 NotImplemented" : "it ignores it");
		}
	}
	/* the probe is ours alone (pid and time in its name): an unconditional delete, tried as a cleanup */
	s3_request del = { "DELETE", bucket, key, NULL, NULL, 0, NULL, S3_CLEANUP, 0, 0, 0, NULL, 0 };
	s3_response rs;
	ckpt__error_slot keep = { 0 };
	ckpt__error_capture(&keep);
	s3_perform(c, &del, &rs);
	s3_response_clear(&rs);
	ckpt__error_raise(&keep);
	ckpt__error_slot_clear(&keep);
	return rc;
}

int s3_conditional_writes_check(s3_client *c, const char *bucket, const char *prefix, const char *dir)
{
	const char *single = getenv("CKPT_S3_SINGLE_WRITER");
	int opted_out = single && strcmp(single, "1") == 0;
	char where[512];
	snprintf(where, sizeof(where), "%s %s", s3_client_config(c)->endpoint, bucket);
	verdict v;
	memset(&v, 0, sizeof(v));
	int found = 0;
	pthread_mutex_lock(&cache_mu);
	for (size_t i = 0; i < ncached && !found; i++)
		if (strcmp(cache[i].where, where) == 0) {
			v = cache[i];
			found = 1;
		}
	pthread_mutex_unlock(&cache_mu);
	if (!found) {
		snprintf(v.where, sizeof(v.where), "%s", where);
		CKPT_TRY(probe(c, bucket, prefix, &v));
		pthread_mutex_lock(&cache_mu);
		if (ncached < MAX_CACHED)
			cache[ncached++] = v;
		pthread_mutex_unlock(&cache_mu);
	}
	if (v.honours)
		return CKPT_OK;
	if (opted_out)
		return 1;
	return ckpt__fail(CKPT_EUNSUPPORTED, dir, NULL, -1,
		"cannot lock this checkpoint prefix: the S3 server at %s lacks conditional writes (%s), so two "
		"trainers could both take the lock and overwrite each other's checkpoints; use a server that "
		"honours them, or set CKPT_S3_SINGLE_WRITER=1 if you guarantee that one process writes here",
		s3_client_config(c)->endpoint, v.lacks);
}

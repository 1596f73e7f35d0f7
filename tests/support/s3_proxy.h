/*
 * The fault proxy (tests/s3/fault_proxy.c) from a test: started between the
 * library and the test server with its rules, stopped with the number of
 * requests it saw. Used by the S3 fault and lock suites.
 *
 * Declarations only: the bodies are compiled once, in tests/support/s3_proxy.c.
 */
#ifndef CKPT_S3_PROXY_H
#define CKPT_S3_PROXY_H

#include <stddef.h>
#include <sys/types.h>
#include "ckpt/ckpt.h"

typedef struct proxy {
	pid_t pid;
	int port;
	char count_file[512];
} proxy;

/* Start the proxy with the rule N MODE (any request) and, after it, `more` (NULL-terminated: KIND [N MODE KIND]...). */
void proxy_start_rules(proxy *p, const char *nn, const char *mode, const char *const *more);
/* The rule N MODE on any request; N may be "N:M". */
void proxy_start_range(proxy *p, const char *nn, const char *mode);
void proxy_start(proxy *p, long n, const char *mode);
/* Requests seen so far. */
long proxy_seen(const proxy *p);
/* End every request the "hold" mode holds (now and later). */
void proxy_release(const proxy *p);
/* "METHOD TARGET" of every request so far, one a line (caller frees). */
char *proxy_log(const proxy *p);
/* The same, of the requests a rule harmed. */
char *proxy_harmed(const proxy *p);
/* Stop it; returns the number of requests it saw (-1 unknown). */
long proxy_stop(proxy *p);
/* "http://127.0.0.1:PORT" of the proxy. */
void proxy_endpoint(const proxy *p, char *buf, size_t n);

/* The library through the proxy: a 1 s stall limit, `tries` attempts, 2 parts in flight, part size (0: default). */
ckpt_vfs *proxy_vfs(const proxy *p, size_t part_size, unsigned tries);

#endif

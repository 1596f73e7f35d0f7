/*
 * What a client's HEADs and probing listings said, kept for a few seconds
 * (CKPT_S3_CACHE_SECONDS, default 5; 0: off) so that one operation does not
 * ask again: a restore opens the state file, the index and the data after
 * asking whether each exists, and the layers above ask whether the prefix
 * is a directory several times. Per key: whether an object is there (with
 * its size, ETag and checksums), and whether the key is a non-empty
 * "directory" (a listing of KEY/).
 *
 * Never trusted across a change this client makes or a read that failed:
 * s3_client.c forgets a key before and after every PUT, POST or DELETE on
 * it (and the directory answers of its parent prefixes), and after any
 * failed GET of it. A HEAD whose answer arrives after such a forget is not
 * stored (generation count). Reads stay pinned to the ETag with If-Match,
 * so an object another process replaced within the window fails the read
 * (CKPT_EBUSY, and the key is forgotten) instead of mixing versions; an
 * object another process created or deleted within it may be reported as
 * it was, for at most the window. (What a listing says is not kept: the
 * other ranks of a multi-worker save write shards into the prefix a rank
 * listed, so a name absent from a listing may appear at any moment.)
 */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include "internal.h"
#include "s3_internal.h"

#define CACHE_MAX 1024

typedef struct {
	char *name;           /* "bucket/key" */
	int obj;              /* S3_CACHE_UNKNOWN, _ABSENT, _PRESENT */
	s3_head head;
	double obj_at;
	int dir;              /* S3_CACHE_UNKNOWN, _ABSENT (nothing under KEY/), _PRESENT */
	double dir_at;
} entry;

struct s3_cache {
	pthread_mutex_t mu;
	double ttl;
	unsigned long gen;
	entry *e;
	size_t n;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int s3_cache_new(s3_cache **out, unsigned ttl_seconds)
{
	*out = NULL;
	if (!ttl_seconds)
		return CKPT_OK; /* off: every lookup misses */
	s3_cache *c = ckpt__calloc(1, sizeof(*c));
	if (!c || !(c->e = ckpt__calloc(CACHE_MAX, sizeof(entry)))) {
		ckpt__free(c);
		return CKPT_ENOMEM;
	}
	pthread_mutex_init(&c->mu, NULL);
	c->ttl = ttl_seconds;
	*out = c;
	return CKPT_OK;
}

static void clear_all(s3_cache *c)
{
	for (size_t i = 0; i < c->n; i++)
		ckpt__free(c->e[i].name);
	c->n = 0;
}

void s3_cache_free(s3_cache *c)
{
	if (!c)
		return;
	clear_all(c);
	ckpt__free(c->e);
	pthread_mutex_destroy(&c->mu);
	ckpt__free(c);
}

static entry *find(s3_cache *c, const char *bucket, const char *key)
{
	size_t bl = strlen(bucket);
	for (size_t i = 0; i < c->n; i++) {
		const char *nm = c->e[i].name;
		if (strncmp(nm, bucket, bl) == 0 && nm[bl] == '/' && strcmp(nm + bl + 1, key) == 0)
			return &c->e[i];
	}
	return NULL;
}

static entry *find_or_add(s3_cache *c, const char *bucket, const char *key)
{
	entry *e = find(c, bucket, key);
	if (e)
		return e;
	if (c->n == CACHE_MAX)
		clear_all(c); /* bounded: a long scan starts over rather than growing */
	char *name = ckpt__asprintf("%s/%s", bucket, key);
	if (!name)
		return NULL;
	e = &c->e[c->n++];
	memset(e, 0, sizeof(*e));
	e->name = name;
	return e;
}

unsigned long s3_cache_gen(s3_cache *c)
{
	if (!c)
		return 0;
	pthread_mutex_lock(&c->mu);
	unsigned long g = c->gen;
	pthread_mutex_unlock(&c->mu);
	return g;
}

int s3_cache_object(s3_cache *c, const char *bucket, const char *key, s3_head *h)
{
	if (!c)
		return S3_CACHE_UNKNOWN;
	pthread_mutex_lock(&c->mu);
	entry *e = find(c, bucket, key);
	int st = e && e->obj != S3_CACHE_UNKNOWN && now_s() - e->obj_at < c->ttl ? e->obj : S3_CACHE_UNKNOWN;

	if (st == S3_CACHE_PRESENT && h)
		*h = e->head;
	pthread_mutex_unlock(&c->mu);
	return st;
}

int s3_cache_dir(s3_cache *c, const char *bucket, const char *key)
{
	if (!c)
		return S3_CACHE_UNKNOWN;
	pthread_mutex_lock(&c->mu);
	entry *e = find(c, bucket, key);
	int st = e && e->dir != S3_CACHE_UNKNOWN && now_s() - e->dir_at < c->ttl ? e->dir : S3_CACHE_UNKNOWN;
	pthread_mutex_unlock(&c->mu);
	return st;
}


void s3_cache_put_object(s3_cache *c, unsigned long gen, const char *bucket, const char *key, int state,
	const s3_head *h)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	entry *e = gen == c->gen ? find_or_add(c, bucket, key) : NULL; /* else: changed since the HEAD was sent */
	if (e) {
		e->obj = state;
		if (h)
			e->head = *h;
		e->obj_at = now_s();
	}
	pthread_mutex_unlock(&c->mu);
}

void s3_cache_put_dir(s3_cache *c, unsigned long gen, const char *bucket, const char *key, int state)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	entry *e = gen == c->gen ? find_or_add(c, bucket, key) : NULL;
	if (e) {
		e->dir = state;
		e->dir_at = now_s();
	}
	pthread_mutex_unlock(&c->mu);
}

void s3_cache_forget(s3_cache *c, const char *bucket, const char *key)
{
	if (!c)
		return;
	size_t bl = strlen(bucket), kl = strlen(key);
	pthread_mutex_lock(&c->mu);
	c->gen++;
	for (size_t i = 0; i < c->n; i++) {
		entry *e = &c->e[i];
		if (strncmp(e->name, bucket, bl) != 0 || e->name[bl] != '/')
			continue;
		const char *k = e->name + bl + 1;
		size_t l = strlen(k);
		if (strcmp(k, key) == 0)
			e->obj = S3_CACHE_UNKNOWN;
		/* a parent "directory" (or the bucket, "") may have become empty or non-empty */
		if (l < kl && strncmp(k, key, l) == 0 && (l == 0 || key[l] == '/'))
			e->dir = S3_CACHE_UNKNOWN;
	}
	pthread_mutex_unlock(&c->mu);
}

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
 * it was, for at most the window.
 *
 * A full listing of a directory (ckpt_vfs_list) also says which names are
 * absent from it: a name not listed is no object and no directory, with no
 * HEAD (a manager lists its directory, then asks whether ckpt-N.index
 * exists before it writes it). This client's own writes under the
 * directory add their names (present or unknown: asked again). While this
 * client holds the directory's one-writer lock (s3_lock.c) nobody else
 * writes there, so that knowledge does not expire until the lock is released.
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
	char **names;         /* listed: the names under KEY/ (any other name is absent) */
	size_t nnames;
	int listed, pinned;   /* pinned: this client holds KEY's lock, the listing does not expire */
	double list_at;
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

static void drop_names(entry *e)
{
	ckpt_vfs_free_list(e->names, e->nnames);
	e->names = NULL;
	e->nnames = 0;
	e->listed = 0;
}

static void clear_all(s3_cache *c)
{
	for (size_t i = 0; i < c->n; i++) {
		drop_names(&c->e[i]);
		ckpt__free(c->e[i].name);
	}
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

/* ABSENT when a listing of key's parent, still good, does not hold its last name; else UNKNOWN. Under c->mu. */
static int absent_from_listing(s3_cache *c, const char *bucket, const char *key)
{
	const char *slash = strrchr(key, '/');
	size_t pl = slash ? (size_t)(slash - key) : 0;
	const char *name = slash ? slash + 1 : key;
	char *parent = ckpt__strndup(key, pl);
	entry *p = parent ? find(c, bucket, parent) : NULL;
	ckpt__free(parent);
	if (!p || !p->listed || (!p->pinned && now_s() - p->list_at >= c->ttl))
		return S3_CACHE_UNKNOWN;
	for (size_t i = 0; i < p->nnames; i++)
		if (strcmp(p->names[i], name) == 0)
			return S3_CACHE_UNKNOWN;
	return S3_CACHE_ABSENT;
}

int s3_cache_object(s3_cache *c, const char *bucket, const char *key, s3_head *h)
{
	if (!c)
		return S3_CACHE_UNKNOWN;
	pthread_mutex_lock(&c->mu);
	entry *e = find(c, bucket, key);
	int st = e && e->obj != S3_CACHE_UNKNOWN && now_s() - e->obj_at < c->ttl ? e->obj : S3_CACHE_UNKNOWN;
	if (st == S3_CACHE_UNKNOWN)
		st = absent_from_listing(c, bucket, key);
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
	if (st == S3_CACHE_UNKNOWN)
		st = absent_from_listing(c, bucket, key); /* a listing names sub-directories too */
	pthread_mutex_unlock(&c->mu);
	return st;
}

void s3_cache_put_listing(s3_cache *c, unsigned long gen, const char *bucket, const char *key, char *const *names,
	size_t n)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	entry *e = gen == c->gen ? find_or_add(c, bucket, key) : NULL;
	char **copy = e ? ckpt__calloc(n ? n : 1, sizeof(*copy)) : NULL;
	size_t k = 0;
	while (copy && k < n && (copy[k] = ckpt__strdup(names[k])) != NULL)
		k++;
	if (e) {
		drop_names(e);
		if (copy && k == n) {
			e->names = copy;
			e->nnames = n;
			e->listed = 1;
			e->list_at = now_s();
		} else {
			ckpt_vfs_free_list(copy, k); /* out of memory: nothing learned */
		}
	}
	pthread_mutex_unlock(&c->mu);
}

void s3_cache_pin(s3_cache *c, const char *bucket, const char *key, int on)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	entry *e = on ? find_or_add(c, bucket, key) : find(c, bucket, key);
	if (e)
		e->pinned = on;
	pthread_mutex_unlock(&c->mu);
}

/* A change to key: a listing of one of its parents holds its next name from now on (present, or to be asked). */
static void listing_add(entry *e, const char *rest)
{
	const char *slash = strchr(rest, '/');
	size_t nl = slash ? (size_t)(slash - rest) : strlen(rest);
	for (size_t i = 0; i < e->nnames; i++)
		if (strlen(e->names[i]) == nl && strncmp(e->names[i], rest, nl) == 0)
			return;
	char **nv = ckpt__realloc(e->names, (e->nnames + 1) * sizeof(*nv));
	char *nm = nv ? ckpt__strndup(rest, nl) : NULL;
	if (nv)
		e->names = nv;
	if (!nm) {
		drop_names(e); /* cannot record it: forget the listing */
		return;
	}
	e->names[e->nnames++] = nm;
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
		if (l < kl && strncmp(k, key, l) == 0 && (l == 0 || key[l] == '/')) {
			e->dir = S3_CACHE_UNKNOWN;
			if (e->listed)
				listing_add(e, key + l + (l > 0));
		}
	}
	pthread_mutex_unlock(&c->mu);
}

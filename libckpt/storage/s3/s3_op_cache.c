/*
 * What one operation has read of small objects, for that operation only
 * (issue 36, point 8): between ckpt_vfs_op_begin() and the matching
 * ckpt_vfs_op_end() on a thread, every small object this thread's S3 files
 * read whole (a `checkpoint` state file, an index) is kept with the HEAD it
 * was read under, and a later open of the same key by the same thread in
 * the same operation is served from it: no HEAD, no GET. The format
 * bidding, the backend's open and the restore engine each open the index
 * and the state file anew; without this a restore read them 4 times.
 *
 * Scoped so that no older version outlives the operation: the outermost
 * end drops everything, and an entry is not used once the client's cache
 * has counted a change since it was stored (this client wrote or deleted
 * any key, or a read failed: s3_cache_forget). Within one operation every
 * reader sees the version its first read saw, which is the snapshot a
 * restore wants anyway. Off with the client's cache (CKPT_S3_CACHE_SECONDS=0).
 */
#include <string.h>
#include "internal.h"
#include "s3_internal.h"

#define OP_MAX 16                  /* small objects one operation reads: state file, index, a config */
#define OP_BYTES (8u << 20)        /* and their bytes together */

typedef struct {
	const void *client;
	char *name;                    /* "bucket/key" */
	unsigned long gen;             /* the client's cache generation when stored */
	s3_head head;
	char *bytes;
	size_t n;
} op_entry;

typedef struct {
	op_entry e[OP_MAX];
	size_t count, held;
} op_scope;

/* the calling thread's operation: a pointer only, allocated by its first kept object (NULL: none kept yet) */
static _Thread_local unsigned depth;
static _Thread_local op_scope *scope;

void ckpt_vfs_op_begin(void)
{
	depth++;
}

void ckpt_vfs_op_end(void)
{
	if (!depth || --depth)
		return;
	for (size_t i = 0; scope && i < scope->count; i++) {
		ckpt__free(scope->e[i].name);
		ckpt__free(scope->e[i].bytes);
	}
	ckpt__free(scope);
	scope = NULL;
}

static op_entry *find(const void *client, const char *bucket, const char *key)
{
	size_t bl = strlen(bucket);
	for (size_t i = 0; i < scope->count; i++) {
		const char *nm = scope->e[i].name;
		if (scope->e[i].client == client && strncmp(nm, bucket, bl) == 0 && nm[bl] == '/' &&
		    strcmp(nm + bl + 1, key) == 0)
			return &scope->e[i];
	}
	return NULL;
}

int s3_op_cache_get(s3_client *client, const char *bucket, const char *key, s3_head *h, char **bytes)
{
	s3_cache *c = s3_client_cache(client);
	op_entry *e = scope && c ? find(client, bucket, key) : NULL;
	if (!e || e->gen != s3_cache_gen(c))
		return 0;
	char *b = ckpt__malloc(e->n ? e->n : 1);
	if (!b)
		return 0; /* read it again */
	memcpy(b, e->bytes, e->n);
	*h = e->head;
	*bytes = b;
	return 1;
}

void s3_op_cache_put(s3_client *client, unsigned long gen, const char *bucket, const char *key, const s3_head *h,
	const char *bytes, size_t n)
{
	s3_cache *c = s3_client_cache(client);
	if (!depth || !c || gen != s3_cache_gen(c) || n != h->size)
		return;
	if (!scope && !(scope = ckpt__calloc(1, sizeof(*scope))))
		return; /* the operation reads it again */
	op_entry *e = find(client, bucket, key);
	if (e) { /* a newer read of the key (the old entry's generation had passed): replace it */
		scope->held -= e->n;
		ckpt__free(e->bytes);
		e->bytes = NULL;
	} else {
		if (scope->count == OP_MAX)
			return;
		e = &scope->e[scope->count];
		if (!(e->name = ckpt__asprintf("%s/%s", bucket, key)))
			return;
		e->client = client;
		scope->count++;
	}
	e->n = 0;
	if (scope->held + n > OP_BYTES || !(e->bytes = ckpt__malloc(n ? n : 1))) {
		e->gen = (unsigned long)-1; /* never matches: read again */
		return;
	}
	memcpy(e->bytes, bytes, n);
	e->n = n;
	scope->held += n;
	e->head = *h;
	e->gen = gen;
}

/*
 * Incremental multi-process saves (ckpt/sys/bundle_part.h): each process
 * keeps the record of its own data shard of the last committed checkpoint
 * and reuses that shard's unchanged bytes without passing them through the
 * process, as a single-process save does (crc32c per 4 KiB block; on POSIX
 * copy_file_range, bundle_incr.c; on S3 UploadPartCopy conditional on the
 * ETag the object had right after its upload, bundle_incr_s3.c, with S3's
 * 5 MiB part minimum). One shard per process: on POSIX a shard all of whose values
 * are unchanged since that save, and are the values that save's shard holds,
 * is that save's file hard-linked (ckpt_bundle_part_reuse_all); otherwise a
 * value unchanged since that save is copied whole, a changed one block by
 * block.
 *
 * The record of a save becomes the base only once the whole checkpoint
 * committed (the core settles it after the strategy's write), and is used
 * only by a save with the same shard and shard count, to another prefix; its
 * data file only while it is the file that process wrote (device, inode,
 * size, modification time taken after its last byte: the commit's rename
 * keeps them; on S3 its ETag).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "bundle_incr.h"
#include "ckpt/sys/bundle_part.h"

struct ckpt_bundle_part_record {
	ibase *base;               /* the last committed save's shard of this process, or NULL */
	int shard, nshards;
	ibase *pending;            /* the save in flight, from ckpt_bundle_part_finish */
	int pshard, pnshards;
	uint64_t pwritten, preused;
	uint64_t written, reused;  /* of the save last settled as committed */
};

int ckpt_bundle_part_record_new(ckpt_bundle_part_record **out)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_bundle_part_record_new: out is NULL");
	*out = ckpt__calloc(1, sizeof(**out));
	return *out ? CKPT_OK : CKPT_ENOMEM;
}

void ckpt_bundle_part_record_free(ckpt_bundle_part_record *rec)
{
	if (!rec)
		return;
	tfb_ibase_free(rec->base);
	tfb_ibase_free(rec->pending);
	ckpt__free(rec);
}

int ckpt_bundle_part_record_settle(ckpt_bundle_part_record *rec, int committed)
{
	if (!rec)
		return 0;
	if (!committed) {
		tfb_ibase_free(rec->pending);
		rec->pending = NULL;
		return 0;
	}
	/* committed without a record of its own: the last base may be gone or overwritten, drop it */
	tfb_ibase_free(rec->base);
	rec->base = rec->pending;
	rec->shard = rec->pshard;
	rec->nshards = rec->pnshards;
	rec->written = rec->pending ? rec->pwritten : 0;
	rec->reused = rec->pending ? rec->preused : 0;
	rec->pending = NULL;
	return rec->base != NULL;
}

void ckpt_bundle_part_record_bytes(uint64_t *written, uint64_t *reused, const ckpt_bundle_part_record *rec)
{
	if (written)
		*written = rec ? rec->written : 0;
	if (reused)
		*reused = rec ? rec->reused : 0;
}

tfb_incr *tfb_part_incr_new(const ckpt_bundle_part_record *rec, ckpt_vfs *vfs, const char *prefix, int shard,
	int nshards)
{
	/* another layout, or the same prefix (the new file replaces the source by rename): nothing to reuse */
	const ibase *b = rec->base;
	if (b && (rec->shard != shard || rec->nshards != nshards || strcmp(b->prefix, prefix) == 0))
		b = NULL;
	return tfb_incr_new(b, ckpt__vfs_is_s3(vfs));
}

int tfb_part_log_add(tfb_part_log *l, const char *key, size_t klen, const ckpt_tensor *t, uint64_t off,
	uint64_t size, uint32_t masked, uint32_t *blocks)
{
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 32;
		tfb_ientry *ne = ckpt__realloc(l->e, nc * sizeof(*ne));
		if (!ne) {
			ckpt__free(blocks);
			return CKPT_ENOMEM;
		}
		l->e = ne;
		l->cap = nc;
	}
	tfb_ientry *d = &l->e[l->n];
	memset(d, 0, sizeof(*d));
	if (!(d->key = ckpt__malloc(klen + 1))) {
		ckpt__free(blocks);
		return CKPT_ENOMEM;
	}
	memcpy(d->key, key, klen);
	d->key[klen] = '\0';
	d->klen = klen;
	d->dtype = (int32_t)t->dtype;
	d->rank = t->shape.rank;
	memcpy(d->dims, t->shape.dims, (size_t)t->shape.rank * sizeof(int64_t));
	d->shard = 0; /* the record's only file */
	d->offset = off;
	d->size = size;
	d->masked_crc = masked;
	d->blocks = blocks;
	l->n++;
	return CKPT_OK;
}

void tfb_part_log_free(tfb_part_log *l)
{
	for (size_t i = 0; i < l->n; i++) {
		ckpt__free(l->e[i].key);
		ckpt__free(l->e[i].blocks);
	}
	ckpt__free(l->e);
	memset(l, 0, sizeof(*l));
}

static int cmp_ientry(const void *a, const void *b)
{
	const tfb_ientry *x = a, *y = b;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, n);
	return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

void tfb_part_identify(ifile *id, ckpt_vfs *vfs, int fd, const char *path)
{
	memset(id, 0, sizeof(*id));
	if (ckpt__vfs_is_s3(vfs)) {
		/* S3: the ETag it has now, right after its upload; a HEAD that fails leaves "" (never copied from) */
		ckpt__error_slot keep = { 0 };
		ckpt__error_capture(&keep);
		if (ckpt__vfs_etag(vfs, path, id->etag, sizeof(id->etag), &id->size) != CKPT_OK)
			id->etag[0] = '\0';
		ckpt__error_raise(&keep);
		ckpt__error_slot_clear(&keep);
		return;
	}
	/* ino 0 matches nothing: a file that cannot be described is never reused */
	struct stat st;
	if ((fd >= 0 ? fstat(fd, &st) : stat(path, &st)) == 0) {
		id->dev = (uint64_t)st.st_dev;
		id->ino = (uint64_t)st.st_ino;
		id->size = (uint64_t)st.st_size;
		id->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	}
}

void tfb_part_record_pending(ckpt_bundle_part_record *rec, tfb_part_log *l, const char *prefix, int shard,
	int nshards, const ifile *id, uint64_t total, uint64_t reused)
{
	tfb_ibase_free(rec->pending);
	rec->pending = NULL;
	ibase *b = ckpt__calloc(1, sizeof(*b));
	int ok = b != NULL;
	if (ok) {
		b->prefix = ckpt__strdup(prefix);
		b->f = ckpt__calloc(1, sizeof(*b->f));
		if (b->f) {
			b->f[0] = *id;
			b->nf = 1;
		}
		ok = b->prefix && b->f && (b->f[0].path = tfb_data_path(prefix, shard, nshards)) != NULL;
	}
	if (!ok) {
		/* no record: the next save writes every byte */
		tfb_ibase_free(b);
		tfb_part_log_free(l);
		return;
	}
	/* tfb_incr_find searches by key */
	qsort(l->e, l->n, sizeof(*l->e), cmp_ientry);
	b->e = l->e;
	b->ne = l->n;
	b->f[0].nentries = l->n;
	memset(l, 0, sizeof(*l)); /* moved */
	rec->pending = b;
	rec->pshard = shard;
	rec->pnshards = nshards;
	rec->pwritten = total - reused;
	rec->preused = reused;
}

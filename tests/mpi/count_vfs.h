/*
 * A file system for tests that records every pread (path, offset, length)
 * and forwards everything to the POSIX one: how many bytes of which ranges
 * a restore read. No map method, so readers cannot bypass pread.
 */
#ifndef CKPT_TEST_COUNT_VFS_H
#define CKPT_TEST_COUNT_VFS_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ckpt/ckpt.h>
#include <ckpt/sys/vfs.h>

typedef struct cv_read {
	char *path;
	uint64_t off, len;
} cv_read;

typedef struct count_vfs {
	ckpt_vfs base;
	ckpt_vfs *inner;
	pthread_mutex_t lock;
	cv_read *reads;
	size_t n, cap;
} count_vfs;

typedef struct cv_io {
	ckpt_io base;
	count_vfs *vfs;
	ckpt_io *inner;
} cv_io;

static int cv_pread(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got)
{
	cv_io *c = (cv_io *)io;
	int rc = c->inner->methods->pread(c->inner, buf, n, off, got);
	count_vfs *v = c->vfs;
	pthread_mutex_lock(&v->lock);
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 64;
		v->reads = realloc(v->reads, v->cap * sizeof(*v->reads));
	}
	v->reads[v->n++] = (cv_read){ strdup(io->path), off, rc == CKPT_OK ? *got : 0 };
	pthread_mutex_unlock(&v->lock);
	return rc;
}
static int cv_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off)
{
	cv_io *c = (cv_io *)io;
	return c->inner->methods->pwrite(c->inner, buf, n, off);
}
static int cv_size(ckpt_io *io, uint64_t *out)
{
	cv_io *c = (cv_io *)io;
	return c->inner->methods->size(c->inner, out);
}
static int cv_sync(ckpt_io *io)
{
	cv_io *c = (cv_io *)io;
	return c->inner->methods->sync(c->inner);
}
static int cv_close(ckpt_io *io)
{
	cv_io *c = (cv_io *)io;
	int rc = c->inner->methods->close(c->inner);
	free(io->path);
	free(c);
	return rc;
}
/* a version-1 table (designated, so the members version 2 appended stay zero): no fd, every read is counted */
static const ckpt_io_methods cv_io_methods = { .version = CKPT_IO_METHODS_V1, .pread = cv_pread, .pwrite = cv_pwrite,
	.size = cv_size, .sync = cv_sync, .close = cv_close };

static int cv_open(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out)
{
	count_vfs *v = (count_vfs *)vfs;
	ckpt_io *inner;
	int rc = v->inner->methods->open(v->inner, path, flags, &inner);
	if (rc < 0)
		return rc;
	cv_io *c = calloc(1, sizeof(*c));
	c->base.methods = &cv_io_methods;
	c->base.path = strdup(path);
	c->vfs = v;
	c->inner = inner;
	*out = &c->base;
	return CKPT_OK;
}
static int cv_rename(ckpt_vfs *vfs, const char *a, const char *b)
{
	count_vfs *v = (count_vfs *)vfs;
	return v->inner->methods->rename(v->inner, a, b);
}
static int cv_remove(ckpt_vfs *vfs, const char *p)
{
	count_vfs *v = (count_vfs *)vfs;
	return v->inner->methods->remove(v->inner, p);
}
static int cv_exists(ckpt_vfs *vfs, const char *p, int *is_dir)
{
	count_vfs *v = (count_vfs *)vfs;
	return v->inner->methods->exists(v->inner, p, is_dir);
}
static int cv_sync_dir(ckpt_vfs *vfs, const char *d)
{
	count_vfs *v = (count_vfs *)vfs;
	return v->inner->methods->sync_dir(v->inner, d);
}
static int cv_list(ckpt_vfs *vfs, const char *d, char ***names, size_t *count)
{
	count_vfs *v = (count_vfs *)vfs;
	return v->inner->methods->list(v->inner, d, names, count);
}
static int cv_mkdir(ckpt_vfs *vfs, const char *d)
{
	count_vfs *v = (count_vfs *)vfs;
	return v->inner->methods->mkdir(v->inner, d);
}
static void cv_destroy(ckpt_vfs *vfs)
{
	count_vfs *v = (count_vfs *)vfs;
	for (size_t i = 0; i < v->n; i++)
		free(v->reads[i].path);
	free(v->reads);
	pthread_mutex_destroy(&v->lock);
	free(v);
}
static const ckpt_vfs_methods cv_vfs_methods = { .version = CKPT_VFS_METHODS_V1, .open = cv_open, .rename = cv_rename,
	.remove = cv_remove, .exists = cv_exists, .sync_dir = cv_sync_dir, .list = cv_list, .mkdir = cv_mkdir,
	.destroy = cv_destroy };

static inline count_vfs *count_vfs_new(void)
{
	count_vfs *v = calloc(1, sizeof(*v));
	v->base.methods = &cv_vfs_methods;
	v->inner = ckpt_vfs_default();
	pthread_mutex_init(&v->lock, NULL);
	return v;
}

/* Bytes of [off, off + len) of `path` that the recorded reads touched (each read counted). */
static inline uint64_t count_vfs_bytes_in(const count_vfs *v, const char *path, uint64_t off, uint64_t len)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < v->n; i++) {
		const cv_read *r = &v->reads[i];
		if (strcmp(r->path, path) != 0)
			continue;
		uint64_t lo = r->off > off ? r->off : off;
		uint64_t hi = r->off + r->len < off + len ? r->off + r->len : off + len;
		if (hi > lo)
			sum += hi - lo;
	}
	return sum;
}

/*
 * Bytes the recorded reads took from the stored slice entries of the checkpoint
 * `path` (its slice_part entries).
 * @param[out] got bytes read inside those entries
 * @param[out] stored the entries' size (NULL: not wanted)
 * @return CKPT_OK, or the reader's error opening `path`
 */
static inline int count_vfs_slice_bytes(uint64_t *got, uint64_t *stored, const count_vfs *cv, const char *path)
{
	ckpt_reader *r;
	int rc = ckpt_reader_open(&r, path, NULL);
	if (rc < 0)
		return rc;
	*got = 0;
	if (stored)
		*stored = 0;
	for (size_t e = 0; e < ckpt_reader_num_entries(r); e++) {
		const ckpt_var_info *v = ckpt_reader_var(r, e);
		if (!v->slice_part)
			continue;
		int ex;
		*got += count_vfs_bytes_in(cv, ckpt_reader_shard_path(r, v->shard, &ex), (uint64_t)v->offset, v->nbytes);
		if (stored)
			*stored += v->nbytes;
	}
	ckpt_reader_free(r);
	return CKPT_OK;
}

#endif

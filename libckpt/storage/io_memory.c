/*
 * An in-memory file system for tests and fuzzers. Files are refcounted nodes
 * so that open handles survive rename/remove, as on POSIX. Directories are
 * implicit (a path is a directory when some file lies below it). One mutex
 * guards the table; I/O on a node takes it too (tests, not throughput).
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/types.h>
#include <string.h>
#include "internal.h"
#include "ckpt/sys/vfs.h"
#include "ckpt/sys/vfs_memory.h"

typedef struct mem_node {
	unsigned char *data;
	size_t len, cap;
	int refs;
} mem_node;

typedef struct {
	char *path;
	mem_node *node;
} mem_entry;

typedef struct {
	ckpt_vfs base;
	pthread_mutex_t lock;
	mem_entry *entries;
	size_t n, cap;
} mem_vfs;

typedef struct {
	ckpt_io base;
	mem_vfs *vfs;
	mem_node *node;
} mem_io;

static char *normalize(const char *path)
{
	char *out = ckpt__malloc(strlen(path) + 1);
	if (!out)
		return NULL;
	const char *p = path;
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	size_t k = 0;
	for (; *p; p++) {
		if (*p == '/' && k > 0 && out[k - 1] == '/')
			continue;
		if (*p == '.' && (k == 0 || out[k - 1] == '/') && (p[1] == '/' || p[1] == '\0'))
			{ if (p[1] == '/') p++; continue; }
		out[k++] = *p;
	}
	while (k > 1 && out[k - 1] == '/')
		k--;
	out[k] = '\0';
	return out;
}

static void node_unref(mem_node *nd)
{
	if (nd && --nd->refs == 0) {
		ckpt__free(nd->data);
		ckpt__free(nd);
	}
}

static ssize_t find_entry(mem_vfs *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->entries[i].path, path) == 0)
			return (ssize_t)i;
	return -1;
}

static void drop_entry(mem_vfs *m, size_t i)
{
	ckpt__free(m->entries[i].path);
	node_unref(m->entries[i].node);
	m->entries[i] = m->entries[--m->n];
}

/* Insert (or replace) `path` -> node; takes ownership of `path` and one ref of node. */
static int put_entry(mem_vfs *m, char *path, mem_node *nd)
{
	ssize_t i = find_entry(m, path);
	if (i >= 0) {
		node_unref(m->entries[i].node);
		m->entries[i].node = nd;
		ckpt__free(path);
		return CKPT_OK;
	}
	if (m->n == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 16;
		mem_entry *ne = ckpt__realloc(m->entries, ncap * sizeof(*ne));
		if (!ne)
			return CKPT_ENOMEM;
		m->entries = ne;
		m->cap = ncap;
	}
	m->entries[m->n].path = path;
	m->entries[m->n].node = nd;
	m->n++;
	return CKPT_OK;
}

static int mio_pread(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got)
{
	mem_io *f = (mem_io *)io;
	pthread_mutex_lock(&f->vfs->lock);
	size_t len = f->node->len, k = 0;
	if (off < len) {
		k = len - (size_t)off < n ? len - (size_t)off : n;
		memcpy(buf, f->node->data + off, k);
	}
	pthread_mutex_unlock(&f->vfs->lock);
	*got = k;
	return CKPT_OK;
}

static int mio_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off)
{
	mem_io *f = (mem_io *)io;
	uint64_t end;
	if (ckpt__add_u64(off, n, &end) || end > SIZE_MAX / 2)
		return ckpt__fail(CKPT_ELIMIT, io->path, NULL, (int64_t)off, "write beyond memory file limits");
	int rc = CKPT_OK;
	pthread_mutex_lock(&f->vfs->lock);
	mem_node *nd = f->node;
	if (end > nd->cap) {
		size_t ncap = nd->cap ? nd->cap : 4096;
		while (ncap < end)
			ncap *= 2;
		unsigned char *nb = ckpt__realloc(nd->data, ncap);
		if (!nb)
			rc = CKPT_ENOMEM;
		else {
			nd->data = nb;
			nd->cap = ncap;
		}
	}
	if (rc == CKPT_OK) {
		if (off > nd->len)
			memset(nd->data + nd->len, 0, (size_t)off - nd->len);
		memcpy(nd->data + off, buf, n);
		if (end > nd->len)
			nd->len = (size_t)end;
	}
	pthread_mutex_unlock(&f->vfs->lock);
	return rc;
}

static int mio_size(ckpt_io *io, uint64_t *out)
{
	mem_io *f = (mem_io *)io;
	pthread_mutex_lock(&f->vfs->lock);
	*out = f->node->len;
	pthread_mutex_unlock(&f->vfs->lock);
	return CKPT_OK;
}

static int mio_sync(ckpt_io *io) { (void)io; return CKPT_OK; }

static int mio_close(ckpt_io *io)
{
	mem_io *f = (mem_io *)io;
	pthread_mutex_lock(&f->vfs->lock);
	node_unref(f->node);
	pthread_mutex_unlock(&f->vfs->lock);
	ckpt__free(io->path);
	ckpt__free(f);
	return CKPT_OK;
}

/* no descriptor: the bytes are in this process already, and every read of them goes through pread */
static const ckpt_io_methods mem_io_methods = {
	CKPT_IO_METHODS_V2, mio_pread, mio_pwrite, mio_size, mio_sync, mio_close, NULL, NULL, NULL, NULL
};

static int mv_open(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out)
{
	mem_vfs *m = (mem_vfs *)vfs;
	char *np = normalize(path);
	mem_io *f = ckpt__calloc(1, sizeof(*f));
	char *pcopy = ckpt__strdup(path);
	if (!np || !f || !pcopy) {
		ckpt__free(np);
		ckpt__free(f);
		ckpt__free(pcopy);
		return CKPT_ENOMEM;
	}
	int rc = CKPT_OK;
	pthread_mutex_lock(&m->lock);
	ssize_t i = find_entry(m, np);
	if ((flags & CKPT_IO_WRITE) && (flags & CKPT_IO_EXCL) && i >= 0) {
		rc = ckpt__fail(CKPT_EEXIST, path, NULL, -1, "exists already (exclusive create)");
	} else if (flags & CKPT_IO_WRITE) {
		mem_node *nd = ckpt__calloc(1, sizeof(*nd));
		if (!nd)
			rc = CKPT_ENOMEM;
		else {
			nd->refs = 2; /* the table and the handle */
			rc = put_entry(m, np, nd);
			if (rc < 0) {
				ckpt__free(nd);
			} else {
				np = NULL; /* owned by the table now */
				f->node = nd;
			}
		}
	} else if (i < 0) {
		rc = ckpt__fail(CKPT_ENOTFOUND, path, NULL, -1, "cannot open: No such file or directory");
	} else {
		f->node = m->entries[i].node;
		f->node->refs++;
	}
	pthread_mutex_unlock(&m->lock);
	ckpt__free(np);
	if (rc < 0) {
		ckpt__free(f);
		ckpt__free(pcopy);
		return rc;
	}
	f->base.methods = &mem_io_methods;
	f->base.path = pcopy;
	f->vfs = m;
	*out = &f->base;
	return CKPT_OK;
}

static int mv_rename(ckpt_vfs *vfs, const char *from, const char *to)
{
	mem_vfs *m = (mem_vfs *)vfs;
	char *nf = normalize(from), *nt = normalize(to);
	if (!nf || !nt) {
		ckpt__free(nf);
		ckpt__free(nt);
		return CKPT_ENOMEM;
	}
	int rc;
	pthread_mutex_lock(&m->lock);
	ssize_t i = find_entry(m, nf);
	if (i < 0) {
		rc = ckpt__fail(CKPT_ENOTFOUND, from, NULL, -1, "rename: No such file or directory");
		ckpt__free(nt);
	} else {
		mem_node *nd = m->entries[i].node;
		nd->refs++;
		drop_entry(m, (size_t)i);
		rc = put_entry(m, nt, nd);
		if (rc < 0) {
			node_unref(nd);
			ckpt__free(nt);
		}
	}
	pthread_mutex_unlock(&m->lock);
	ckpt__free(nf);
	return rc;
}

static int mv_remove(ckpt_vfs *vfs, const char *path)
{
	mem_vfs *m = (mem_vfs *)vfs;
	char *np = normalize(path);
	if (!np)
		return CKPT_ENOMEM;
	int rc = CKPT_OK;
	pthread_mutex_lock(&m->lock);
	ssize_t i = find_entry(m, np);
	if (i < 0)
		rc = ckpt__fail(CKPT_ENOTFOUND, path, NULL, -1, "remove: No such file or directory");
	else
		drop_entry(m, (size_t)i);
	pthread_mutex_unlock(&m->lock);
	ckpt__free(np);
	return rc;
}

static int is_below(const char *path, const char *dir)
{
	size_t l = strlen(dir);
	if (l == 0 || strcmp(dir, ".") == 0)
		return 1;
	return strncmp(path, dir, l) == 0 && path[l] == '/';
}

static int mv_exists(ckpt_vfs *vfs, const char *path, int *is_dir)
{
	mem_vfs *m = (mem_vfs *)vfs;
	char *np = normalize(path);
	if (!np)
		return 0;
	int found = 0, dir = 0;
	pthread_mutex_lock(&m->lock);
	if (find_entry(m, np) >= 0)
		found = 1;
	else
		for (size_t i = 0; i < m->n; i++)
			if (is_below(m->entries[i].path, np)) {
				found = dir = 1;
				break;
			}
	pthread_mutex_unlock(&m->lock);
	ckpt__free(np);
	if (is_dir)
		*is_dir = dir;
	return found;
}

static int mv_sync_dir(ckpt_vfs *vfs, const char *dir) { (void)vfs; (void)dir; return CKPT_OK; }
static int mv_mkdir(ckpt_vfs *vfs, const char *dir) { (void)vfs; (void)dir; return CKPT_OK; }

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int mv_list(ckpt_vfs *vfs, const char *dir, char ***names, size_t *count)
{
	mem_vfs *m = (mem_vfs *)vfs;
	char *nd = normalize(dir);
	if (!nd)
		return CKPT_ENOMEM;
	int rc = CKPT_OK;
	size_t n = 0;
	char **v = NULL;
	pthread_mutex_lock(&m->lock);
	v = ckpt__calloc(m->n + 1, sizeof(*v));
	if (!v)
		rc = CKPT_ENOMEM;
	for (size_t i = 0; rc == CKPT_OK && i < m->n; i++) {
		const char *p = m->entries[i].path;
		if (!is_below(p, nd))
			continue;
		size_t skip = (nd[0] == '\0' || strcmp(nd, ".") == 0) ? 0 : strlen(nd) + 1;
		const char *rest = p + skip;
		const char *slash = strchr(rest, '/');
		size_t len = slash ? (size_t)(slash - rest) : strlen(rest);
		int dup = 0;
		for (size_t j = 0; j < n; j++)
			if (strlen(v[j]) == len && strncmp(v[j], rest, len) == 0)
				dup = 1;
		if (dup)
			continue;
		if (!(v[n] = ckpt__strndup(rest, len)))
			rc = CKPT_ENOMEM;
		else
			n++;
	}
	pthread_mutex_unlock(&m->lock);
	ckpt__free(nd);
	if (rc < 0) {
		ckpt_vfs_free_list(v, n);
		return rc;
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_names);
	*names = v;
	*count = n;
	return CKPT_OK;
}

static void mv_destroy(ckpt_vfs *vfs)
{
	mem_vfs *m = (mem_vfs *)vfs;
	while (m->n)
		drop_entry(m, m->n - 1);
	ckpt__free(m->entries);
	pthread_mutex_destroy(&m->lock);
	ckpt__free(m);
}

/* v2: no rmdir (directories exist through their files) and no lock (the in-process registry is all it needs). */
static const ckpt_vfs_methods mem_vfs_methods = {
	CKPT_VFS_METHODS_V2, mv_open, mv_rename, mv_remove, mv_exists, mv_sync_dir, mv_list, mv_mkdir, mv_destroy,
	CKPT_VFS_CAP_EXCL | CKPT_VFS_CAP_IN_MEMORY, NULL, NULL, NULL
};

int ckpt_vfs_memory_new(ckpt_vfs **out)
{
	mem_vfs *m = ckpt__calloc(1, sizeof(*m));
	if (!m)
		return CKPT_ENOMEM;
	m->base.methods = &mem_vfs_methods;
	pthread_mutex_init(&m->lock, NULL);
	*out = &m->base;
	return CKPT_OK;
}

int ckpt_vfs_memory_put(ckpt_vfs *vfs, const char *path, const void *buf, size_t n)
{
	ckpt_io *io;
	CKPT_TRY(mv_open(vfs, path, CKPT_IO_WRITE, &io));
	int rc = n ? mio_pwrite(io, buf, n, 0) : CKPT_OK;
	mio_close(io);
	return rc;
}

static int vfs_memory_get_rc(ckpt_vfs *vfs, const char *path, const void **buf, size_t *n)
{
	mem_vfs *m = (mem_vfs *)vfs;
	char *np = normalize(path);
	if (!np)
		return CKPT_ENOMEM;
	int rc = CKPT_OK;
	pthread_mutex_lock(&m->lock);
	ssize_t i = find_entry(m, np);
	if (i < 0)
		rc = ckpt__fail(CKPT_ENOTFOUND, path, NULL, -1, "no such memory file");
	else {
		*buf = m->entries[i].node->data;
		*n = m->entries[i].node->len;
	}
	pthread_mutex_unlock(&m->lock);
	ckpt__free(np);
	return rc;
}

const void *ckpt_vfs_memory_get(size_t *n, ckpt_vfs *vfs, const char *path)
{
	const void *buf = NULL;
	int rc = vfs_memory_get_rc(vfs, path, &buf, n);
	if (rc == CKPT_OK && !buf)
		buf = "";   /* an empty file: NULL would read as its absence */
	ckpt__borrowed_status(rc, buf != NULL);
	return rc == CKPT_OK ? buf : NULL;
}

/* ---- a read-only io over caller memory ---- */
typedef struct {
	ckpt_io base;
	const unsigned char *buf;
	size_t n;
} borrowed_io;

static int bio_pread(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got)
{
	borrowed_io *b = (borrowed_io *)io;
	size_t k = 0;
	if (off < b->n) {
		k = b->n - (size_t)off < n ? b->n - (size_t)off : n;
		memcpy(buf, b->buf + off, k);
	}
	*got = k;
	return CKPT_OK;
}
static int bio_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off)
{
	(void)buf; (void)n;
	return ckpt__fail(CKPT_EINVAL, io->path, NULL, (int64_t)off, "memory buffer is read-only");
}
static int bio_size(ckpt_io *io, uint64_t *out) { *out = ((borrowed_io *)io)->n; return CKPT_OK; }
static int bio_close(ckpt_io *io) { ckpt__free(io->path); ckpt__free(io); return CKPT_OK; }
static const void *bio_map(ckpt_io *io, uint64_t *size)
{
	*size = ((borrowed_io *)io)->n;
	return ((borrowed_io *)io)->buf;
}
static const ckpt_io_methods borrowed_methods = {
	CKPT_IO_METHODS_V2, bio_pread, bio_pwrite, bio_size, mio_sync, bio_close, bio_map, NULL, NULL, NULL
};

int ckpt_io_open_memory(ckpt_io **out, const void *buf, size_t n, const char *name)
{
	if (!out || (!buf && n))
		return ckpt__fail(CKPT_EINVAL, name, NULL, -1, "ckpt_io_open_memory: NULL argument");
	borrowed_io *b = ckpt__calloc(1, sizeof(*b));
	char *copy = ckpt__strdup(name ? name : "<memory>");
	if (!b || !copy) {
		ckpt__free(b);
		ckpt__free(copy);
		return ckpt__fail(CKPT_ENOMEM, name, NULL, -1, "out of memory opening a memory buffer");
	}
	b->base.methods = &borrowed_methods;
	b->base.path = copy;
	b->buf = buf;
	b->n = n;
	*out = &b->base;
	return CKPT_OK;
}

/*
 * Fault injection (SQLite test_vfs.c style): every fallible call through this
 * wrapper is counted, and call number `fail_at` fails with CKPT_EIO without
 * doing anything. Tests first count the calls of a full save or restore,
 * then fail each one in turn and check that nothing is lost.
 */
#include <stdatomic.h>
#include "internal.h"
#include "ckpt/sys/vfs.h"
#include "ckpt/sys/vfs_faulty.h"

typedef struct {
	ckpt_vfs base;
	ckpt_vfs_methods methods;  /* the template with the inner file system's caps */
	ckpt_vfs *inner;
	long fail_at;
	atomic_long calls;
	atomic_int fired;
} faulty_vfs;

typedef struct {
	ckpt_io base;
	faulty_vfs *vfs;
	ckpt_io *inner;
} faulty_io;

static int tick(faulty_vfs *f, const char *what, const char *path)
{
	long n = atomic_fetch_add(&f->calls, 1) + 1;
	if (f->fail_at > 0 && n == f->fail_at) {
		atomic_store(&f->fired, 1);
		return ckpt__fail(CKPT_EIO, path, NULL, -1, "injected failure of %s (call %ld)", what, n);
	}
	return CKPT_OK;
}

static int fio_pread(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got)
{
	faulty_io *f = (faulty_io *)io;
	*got = 0;
	CKPT_TRY(tick(f->vfs, "pread", io->path));
	return f->inner->methods->pread(f->inner, buf, n, off, got);
}

static int fio_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off)
{
	faulty_io *f = (faulty_io *)io;
	CKPT_TRY(tick(f->vfs, "pwrite", io->path));
	return f->inner->methods->pwrite(f->inner, buf, n, off);
}

static int fio_size(ckpt_io *io, uint64_t *out)
{
	faulty_io *f = (faulty_io *)io;
	CKPT_TRY(tick(f->vfs, "size", io->path));
	return f->inner->methods->size(f->inner, out);
}

static int fio_sync(ckpt_io *io)
{
	faulty_io *f = (faulty_io *)io;
	CKPT_TRY(tick(f->vfs, "sync", io->path));
	return f->inner->methods->sync(f->inner);
}

static int fio_close(ckpt_io *io)
{
	faulty_io *f = (faulty_io *)io;
	/* The descriptor is always released; the injected failure is reported like a failed flush. */
	int rc = tick(f->vfs, "close", io->path);
	int rc2 = f->inner->methods->close(f->inner);
	ckpt__free(io->path);
	ckpt__free(f);
	return rc < 0 ? rc : rc2;
}

static int fio_pread_direct(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got)
{
	faulty_io *f = (faulty_io *)io;
	*got = 0;
	CKPT_TRY(tick(f->vfs, "pread_direct", io->path));
	return ckpt_io_pread_direct(got, f->inner, buf, n, off);
}

/* No fd: a read through a descriptor would bypass the count, so the fast paths stay off here. */
static const ckpt_io_methods faulty_io_methods = {
	CKPT_IO_METHODS_V2, fio_pread, fio_pwrite, fio_size, fio_sync, fio_close, NULL, NULL, fio_pread_direct, NULL
};

static int fv_open(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out)
{
	faulty_vfs *f = (faulty_vfs *)vfs;
	CKPT_TRY(tick(f, "open", path));
	faulty_io *io = ckpt__calloc(1, sizeof(*io));
	char *copy = ckpt__strdup(path);
	if (!io || !copy) {
		ckpt__free(io);
		ckpt__free(copy);
		return CKPT_ENOMEM;
	}
	int rc = f->inner->methods->open(f->inner, path, flags, &io->inner);
	if (rc < 0) {
		ckpt__free(io);
		ckpt__free(copy);
		return rc;
	}
	io->base.methods = &faulty_io_methods;
	io->base.path = copy;
	io->vfs = f;
	*out = &io->base;
	return CKPT_OK;
}

static int fv_rename(ckpt_vfs *vfs, const char *from, const char *to)
{
	faulty_vfs *f = (faulty_vfs *)vfs;
	CKPT_TRY(tick(f, "rename", from));
	return f->inner->methods->rename(f->inner, from, to);
}

static int fv_remove(ckpt_vfs *vfs, const char *path)
{
	faulty_vfs *f = (faulty_vfs *)vfs;
	CKPT_TRY(tick(f, "remove", path));
	return f->inner->methods->remove(f->inner, path);
}

static int fv_exists(ckpt_vfs *vfs, const char *path, int *is_dir)
{
	faulty_vfs *f = (faulty_vfs *)vfs;
	return f->inner->methods->exists(f->inner, path, is_dir);
}

static int fv_sync_dir(ckpt_vfs *vfs, const char *dir)
{
	faulty_vfs *f = (faulty_vfs *)vfs;
	CKPT_TRY(tick(f, "sync_dir", dir));
	return f->inner->methods->sync_dir(f->inner, dir);
}

static int fv_list(ckpt_vfs *vfs, const char *dir, char ***names, size_t *count)
{
	faulty_vfs *f = (faulty_vfs *)vfs;
	CKPT_TRY(tick(f, "list", dir));
	return f->inner->methods->list(f->inner, dir, names, count);
}

static int fv_mkdir(ckpt_vfs *vfs, const char *dir)
{
	faulty_vfs *f = (faulty_vfs *)vfs;
	CKPT_TRY(tick(f, "mkdir", dir));
	return f->inner->methods->mkdir(f->inner, dir);
}

static int fv_rmdir(ckpt_vfs *vfs, const char *dir)
{
	faulty_vfs *f = (faulty_vfs *)vfs;
	CKPT_TRY(tick(f, "rmdir", dir));
	return ckpt_vfs_rmdir(f->inner, dir);
}

static int fv_lock(void **token, ckpt_vfs *vfs, const char *dir)
{
	faulty_vfs *f = (faulty_vfs *)vfs;
	*token = NULL;
	CKPT_TRY(tick(f, "lock", dir));
	return ckpt_vfs_lock(token, f->inner, dir);
}

static void fv_unlock(ckpt_vfs *vfs, void *token)
{
	ckpt_vfs_unlock(((faulty_vfs *)vfs)->inner, token);
}

static void fv_destroy(ckpt_vfs *vfs)
{
	ckpt__free(vfs);
}

/* caps are the inner file system's: filled in by ckpt_vfs_faulty_new. */
static const ckpt_vfs_methods faulty_vfs_template = {
	CKPT_VFS_METHODS_V2, fv_open, fv_rename, fv_remove, fv_exists, fv_sync_dir, fv_list, fv_mkdir, fv_destroy,
	0, fv_rmdir, fv_lock, fv_unlock
};

int ckpt_vfs_faulty_new(ckpt_vfs **out, ckpt_vfs *inner, long fail_at)
{
	if (!out || !inner)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_vfs_faulty_new: NULL argument");
	faulty_vfs *f = ckpt__calloc(1, sizeof(*f));
	if (!f)
		return CKPT_ENOMEM;
	f->methods = faulty_vfs_template;
	f->methods.caps = ckpt_vfs_caps(inner);
	f->base.methods = &f->methods;
	f->inner = inner;
	f->fail_at = fail_at;
	atomic_init(&f->calls, 0);
	atomic_init(&f->fired, 0);
	*out = &f->base;
	return CKPT_OK;
}

long ckpt_vfs_faulty_calls(const ckpt_vfs *vfs)
{
	return atomic_load(&((faulty_vfs *)vfs)->calls);
}

int ckpt_vfs_faulty_fired(const ckpt_vfs *vfs)
{
	return atomic_load(&((faulty_vfs *)vfs)->fired);
}

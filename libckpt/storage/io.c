/* Wrappers over the ckpt_io / ckpt_vfs vtables, and helpers built on them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"
#include "ckpt/sys/vfs.h"

int ckpt_io_pread(size_t *got, ckpt_io *io, void *buf, size_t n, uint64_t off)
{
	size_t dummy;
	return io->methods->pread(io, buf, n, off, got ? got : &dummy);
}

int ckpt_io_read_exact(ckpt_io *io, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	CKPT_TRY(io->methods->pread(io, buf, n, off, &got));
	if (got != n) {
		uint64_t size = 0;
		io->methods->size(io, &size);
		return ckpt__fail(CKPT_EFORMAT, io->path, NULL, (int64_t)off,
			"truncated: wanted %zu bytes at offset %llu, file has %llu bytes", n,
			(unsigned long long)off, (unsigned long long)size);
	}
	return CKPT_OK;
}

int ckpt_io_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off)
{
	return io->methods->pwrite(io, buf, n, off);
}

int ckpt_io_size(uint64_t *out, ckpt_io *io) { return io->methods->size(io, out); }
int ckpt_io_sync(ckpt_io *io) { return io->methods->sync(io); }
const char *ckpt_io_path(const ckpt_io *io) { return io ? io->path : NULL; }

int ckpt_io_close(ckpt_io *io)
{
	return io ? io->methods->close(io) : CKPT_OK;
}

/* A v2 member of a method table, NULL when the table is older than v2 or leaves it out. */
#define IO_V2(io, m) ((io)->methods->version >= CKPT_IO_METHODS_V2 ? (io)->methods->m : NULL)
#define VFS_V2(vfs, m) ((vfs)->methods->version >= CKPT_VFS_METHODS_V2 ? (vfs)->methods->m : NULL)

int ckpt_io_fd(const ckpt_io *io)
{
	if (!io || !IO_V2(io, fd))
		return -1;
	return io->methods->fd((ckpt_io *)io);
}

int ckpt__io_pwrite_crc(ckpt_io *io, const void *buf, size_t n, uint64_t off, uint32_t *crc)
{
	if (io->methods->version < CKPT_IO_METHODS_V3 || !io->methods->pwrite_crc)
		return ckpt__fail(CKPT_EUNSUPPORTED, io->path, NULL, -1, "this file takes no pwrite_crc");
	return io->methods->pwrite_crc(io, buf, n, off, crc);
}

int ckpt__io_fuses_crc(const ckpt_io *io)
{
	return io->methods->version >= CKPT_IO_METHODS_V3 && io->methods->pwrite_crc;
}

int ckpt__io_pread_direct_only(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got)
{
	*got = 0;
	if (!IO_V2(io, pread_direct))
		return ckpt__fail(CKPT_EUNSUPPORTED, io->path, NULL, -1, "this file cannot be read around the page cache");
	return io->methods->pread_direct(io, buf, n, off, got);
}

int ckpt_io_pread_direct(size_t *got, ckpt_io *io, void *buf, size_t n, uint64_t off)
{
	size_t dummy;
	if (!got)
		got = &dummy;
	int rc = ckpt__io_pread_direct_only(io, buf, n, off, got);
	if (rc != CKPT_EUNSUPPORTED)
		return rc;
	ckpt_error_clear(); /* no direct I/O here: the ordinary read */
	return io->methods->pread(io, buf, n, off, got);
}

int ckpt_vfs_open(ckpt_io **out, ckpt_vfs *vfs, const char *path, int flags)
{
	if ((flags & CKPT_IO_EXCL) && !(ckpt_vfs_caps(vfs) & CKPT_VFS_CAP_EXCL))
		return ckpt__fail(CKPT_EUNSUPPORTED, path, NULL, -1,
			"this file system cannot create a file exclusively (no CKPT_VFS_CAP_EXCL)");
	return vfs->methods->open(vfs, path, flags, out);
}

int ckpt__vfs_open_fd(ckpt_vfs *vfs, const char *path, uint64_t *size)
{
	/* a probe: whatever it meets, the caller's last error is left as it was */
	ckpt__error_slot before = { 0 };
	ckpt__error_capture(&before);
	ckpt_io *io = NULL;
	int fd = -1;
	if (ckpt_vfs_open(&io, vfs, path, CKPT_IO_READ) == CKPT_OK) {
		fd = ckpt_io_fd(io) >= 0 ? fcntl(ckpt_io_fd(io), F_DUPFD_CLOEXEC, 0) : -1;
		struct stat st;
		if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
			close(fd);
			fd = -1;
		}
		if (fd >= 0)
			*size = (uint64_t)st.st_size;
		ckpt_io_close(io);
	}
	ckpt__error_raise(&before);
	ckpt__error_slot_clear(&before);
	return fd;
}

unsigned ckpt_vfs_caps(const ckpt_vfs *vfs)
{
	return vfs && vfs->methods->version >= CKPT_VFS_METHODS_V2 ? vfs->methods->caps : 0;
}

int ckpt_vfs_rmdir(ckpt_vfs *vfs, const char *dir)
{
	return VFS_V2(vfs, rmdir) ? vfs->methods->rmdir(vfs, dir) : CKPT_OK;
}

int ckpt_vfs_lock(void **token, ckpt_vfs *vfs, const char *dir)
{
	*token = NULL;
	if (VFS_V2(vfs, lock))
		return vfs->methods->lock(token, vfs, dir);
	return ckpt__lock_registry_take(token, vfs, dir);
}

void ckpt_vfs_unlock(ckpt_vfs *vfs, void *token)
{
	if (!token)
		return;
	if (VFS_V2(vfs, lock))
		vfs->methods->unlock(vfs, token);
	else
		ckpt__lock_registry_drop(token);
}
int ckpt_vfs_rename(ckpt_vfs *vfs, const char *from, const char *to) { return vfs->methods->rename(vfs, from, to); }
int ckpt_vfs_remove(ckpt_vfs *vfs, const char *path) { return vfs->methods->remove(vfs, path); }
int ckpt_vfs_exists(int *is_dir, ckpt_vfs *vfs, const char *path) { return vfs->methods->exists(vfs, path, is_dir); }
int ckpt_vfs_sync_dir(ckpt_vfs *vfs, const char *dir) { return vfs->methods->sync_dir(vfs, dir); }
int ckpt_vfs_list(char ***names, size_t *count, ckpt_vfs *vfs, const char *dir)
{
	return vfs->methods->list(vfs, dir, names, count);
}
int ckpt_vfs_mkdir(ckpt_vfs *vfs, const char *dir) { return vfs->methods->mkdir(vfs, dir); }

void ckpt_vfs_free(ckpt_vfs *vfs)
{
	if (vfs && vfs != ckpt_vfs_default() && !ckpt__vfs_is_shared_s3(vfs))
		vfs->methods->destroy(vfs);
}

/* One open-size-read of the whole file; CKPT_EBUSY when it was replaced after the open. */
static int read_all_once(void **buf, size_t *n, ckpt_vfs *vfs, const char *path, uint64_t max)
{
	ckpt_io *io;
	uint64_t size;
	CKPT_TRY(ckpt_vfs_open(&io, vfs, path, CKPT_IO_READ));
	int rc = ckpt_io_size(&size, io);
	if (rc == CKPT_OK && size > max)
		rc = ckpt__fail(CKPT_ELIMIT, path, NULL, -1, "file is %llu bytes, limit is %llu",
			(unsigned long long)size, (unsigned long long)max);
	char *b = NULL;
	if (rc == CKPT_OK) {
		b = ckpt__malloc((size_t)size + 1);
		rc = b ? ckpt_io_read_exact(io, b, (size_t)size, 0) : CKPT_ENOMEM;
	}
	int crc = ckpt_io_close(io);
	if (rc == CKPT_OK && crc < 0)
		rc = crc;
	if (rc < 0) {
		ckpt__free(b);
		return rc;
	}
	b[size] = '\0';
	*buf = b;
	*n = (size_t)size;
	return CKPT_OK;
}

/*
 * A whole-file read is a snapshot: an object store pins an open file's reads
 * to the version it opened and answers CKPT_EBUSY once that version was
 * replaced (a manager rewriting `checkpoint` while an evaluator reads it).
 * The newer version is as good, so the read starts over, a few times.
 */
#define READ_ALL_ATTEMPTS 4

int ckpt_vfs_read_all(void **buf, size_t *n, ckpt_vfs *vfs, const char *path, uint64_t max)
{
	int rc = CKPT_EBUSY;
	for (int attempt = 0; attempt < READ_ALL_ATTEMPTS && rc == CKPT_EBUSY; attempt++)
		rc = read_all_once(buf, n, vfs, path, max);
	return rc;
}

char *ckpt__vfs_temp_name(ckpt_vfs *vfs, const char *final, const char *suffix)
{
	if (ckpt_vfs_caps(vfs) & CKPT_VFS_CAP_NO_RENAME)
		return ckpt__strdup(final);
	return ckpt__asprintf("%s.%s", final, suffix);
}

int ckpt__vfs_file_exists(ckpt_vfs *vfs, const char *path)
{
	if (ckpt__vfs_is_s3(vfs))
		return ckpt__s3_object_exists(vfs, path);
	int is_dir = 0, e = ckpt_vfs_exists(&is_dir, vfs, path);
	return e > 0 && is_dir ? 0 : e;
}

int ckpt__vfs_publish(ckpt_vfs *vfs, const char *tmp, const char *final)
{
	return strcmp(tmp, final) == 0 ? CKPT_OK : ckpt_vfs_rename(vfs, tmp, final);
}

/* Without rename (an object store): the final name in one write; the store publishes it whole at close. */
static int write_in_place(ckpt_vfs *vfs, const char *path, const void *buf, size_t n, int fsync_data)
{
	ckpt_io *io;
	CKPT_TRY(ckpt_vfs_open(&io, vfs, path, CKPT_IO_WRITE));
	int rc = ckpt_io_pwrite(io, buf, n, 0);
	if (rc == CKPT_OK && fsync_data)
		rc = ckpt_io_sync(io);
	int crc = rc == CKPT_OK ? ckpt_io_close(io) : CKPT_OK;
	if (rc < 0) {
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		ckpt__io_abandon(io); /* nothing published: the old file stays */
		ckpt_io_close(io);
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	return rc < 0 ? rc : crc;
}

int ckpt_vfs_write_atomic(ckpt_vfs *vfs, const char *path, const void *buf, size_t n, int fsync_data)
{
	if (ckpt_vfs_caps(vfs) & CKPT_VFS_CAP_NO_RENAME)
		return write_in_place(vfs, path, buf, n, fsync_data);
	static _Thread_local unsigned seq;
	char suffix[80];
	snprintf(suffix, sizeof(suffix), "tempstate%ld_%u_%u", (long)getpid(), (unsigned)time(NULL), ++seq);
	/* without rename, one whole-object write is the atomic replacement */
	char *tmp = ckpt__vfs_temp_name(vfs, path, suffix);
	if (!tmp)
		return CKPT_ENOMEM;
	ckpt_io *io;
	int rc = ckpt_vfs_open(&io, vfs, tmp, CKPT_IO_WRITE);
	if (rc < 0) {
		ckpt__free(tmp);
		return rc;
	}
	rc = ckpt_io_pwrite(io, buf, n, 0);
	if (rc == CKPT_OK && fsync_data)
		rc = ckpt_io_sync(io);
	int crc = ckpt_io_close(io);
	if (rc == CKPT_OK)
		rc = crc;
	if (rc == CKPT_OK)
		rc = ckpt__vfs_publish(vfs, tmp, path);
	if (rc == CKPT_OK && fsync_data) {
		char *dir = ckpt__path_dir(path);
		rc = dir ? ckpt_vfs_sync_dir(vfs, dir) : CKPT_ENOMEM;
		ckpt__free(dir);
	}
	if (rc < 0 && strcmp(tmp, path) != 0) { /* without rename, the failed write left the old file as it was */
		int keep = rc;
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		vfs->methods->remove(vfs, tmp);
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
		rc = keep;
	}
	ckpt__free(tmp);
	return rc;
}

int ckpt__vfs_mkdirs(ckpt_vfs *vfs, const char *dir)
{
	if (ckpt__vfs_is_s3(vfs))
		return CKPT_OK; /* an object store has no directories to make (and "s3:" is no path to test) */
	char *p = ckpt__strdup(dir);
	if (!p)
		return CKPT_ENOMEM;
	int rc = CKPT_OK;
	for (char *q = p + 1; rc == CKPT_OK; q++) {
		if (*q != '/' && *q != '\0')
			continue;
		char c = *q;
		*q = '\0';
		int is_dir = 0, e = ckpt_vfs_exists(&is_dir, vfs, p);
		if (e < 0)
			rc = e;
		else if (!(e > 0 && is_dir))
			rc = ckpt_vfs_mkdir(vfs, p);
		*q = c;
		if (!c)
			break;
	}
	ckpt__free(p);
	return rc;
}

/* The POSIX file system: pread/pwrite on file descriptors, EINTR-safe. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"

typedef struct {
	ckpt_io base;
	int fd;
	int writable;
} posix_io;

static int px_pread(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got)
{
	posix_io *p = (posix_io *)io;
	size_t done = 0;
	while (done < n) {
		size_t want = n - done;
		if (want > (1u << 30))
			want = 1u << 30;
		ssize_t k = pread(p->fd, (char *)buf + done, want, (off_t)(off + done));
		if (k < 0) {
			if (errno == EINTR)
				continue;
			*got = done;
			return ckpt__fail_errno(errno, io->path, "read of %zu bytes at offset %llu failed", n,
				(unsigned long long)off);
		}
		if (k == 0)
			break;
		done += (size_t)k;
	}
	*got = done;
	return CKPT_OK;
}

static int px_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off)
{
	posix_io *p = (posix_io *)io;
	size_t done = 0;
	while (done < n) {
		size_t want = n - done;
		if (want > (1u << 30))
			want = 1u << 30;
		ssize_t k = pwrite(p->fd, (const char *)buf + done, want, (off_t)(off + done));
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return ckpt__fail_errno(errno, io->path, "write of %zu bytes at offset %llu failed", n,
				(unsigned long long)off);
		}
		done += (size_t)k;
	}
	return CKPT_OK;
}

static int px_size(ckpt_io *io, uint64_t *out)
{
	struct stat st;
	if (fstat(((posix_io *)io)->fd, &st) < 0)
		return ckpt__fail_errno(errno, io->path, "stat failed");
	*out = (uint64_t)st.st_size;
	return CKPT_OK;
}

static int px_sync(ckpt_io *io)
{
	if (fsync(((posix_io *)io)->fd) < 0)
		return ckpt__fail_errno(errno, io->path, "fsync failed");
	return CKPT_OK;
}

static int px_close(ckpt_io *io)
{
	posix_io *p = (posix_io *)io;
	int rc = CKPT_OK;
	if (close(p->fd) < 0 && p->writable)
		rc = ckpt__fail_errno(errno, io->path, "close failed");
	ckpt__free(io->path);
	ckpt__free(p);
	return rc;
}

static const ckpt_io_methods posix_io_methods = {
	1, px_pread, px_pwrite, px_size, px_sync, px_close, NULL
};

int ckpt__io_fd(const ckpt_io *io)
{
	return io && io->methods == &posix_io_methods ? ((const posix_io *)io)->fd : -1;
}

static int px_open(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out)
{
	(void)vfs;
	int oflags = (flags & CKPT_IO_WRITE) ? (O_WRONLY | O_CREAT | O_TRUNC) : O_RDONLY;
	int fd;
	do
		fd = open(path, oflags | O_CLOEXEC, 0644);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return ckpt__fail_errno(errno, path, "cannot open");
	if (!(flags & CKPT_IO_WRITE)) {
		struct stat st;
		if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
			close(fd);
			return ckpt__fail(CKPT_EINVAL, path, NULL, -1, "is a directory, expected a file");
		}
	}
	posix_io *p = ckpt__calloc(1, sizeof(*p));
	char *copy = ckpt__strdup(path);
	if (!p || !copy) {
		close(fd);
		ckpt__free(p);
		ckpt__free(copy);
		return CKPT_ENOMEM;
	}
	p->base.methods = &posix_io_methods;
	p->base.path = copy;
	p->fd = fd;
	p->writable = (flags & CKPT_IO_WRITE) != 0;
	*out = &p->base;
	return CKPT_OK;
}

static int px_rename(ckpt_vfs *vfs, const char *from, const char *to)
{
	(void)vfs;
	if (rename(from, to) < 0)
		return ckpt__fail_errno(errno, from, "rename to '%s' failed", to);
	return CKPT_OK;
}

static int px_remove(ckpt_vfs *vfs, const char *path)
{
	(void)vfs;
	if (unlink(path) < 0)
		return ckpt__fail_errno(errno, path, "remove failed");
	return CKPT_OK;
}

static int px_exists(ckpt_vfs *vfs, const char *path, int *is_dir)
{
	(void)vfs;
	struct stat st;
	if (stat(path, &st) < 0) {
		if (is_dir)
			*is_dir = 0;
		return 0;
	}
	if (is_dir)
		*is_dir = S_ISDIR(st.st_mode);
	return 1;
}

static int px_sync_dir(ckpt_vfs *vfs, const char *dir)
{
	(void)vfs;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return ckpt__fail_errno(errno, dir, "cannot open directory to sync it");
	int rc = CKPT_OK;
	if (fsync(fd) < 0 && errno != EINVAL)
		rc = ckpt__fail_errno(errno, dir, "fsync of directory failed");
	close(fd);
	return rc;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int px_list(ckpt_vfs *vfs, const char *dir, char ***names, size_t *count)
{
	(void)vfs;
	DIR *d = opendir(dir);
	if (!d)
		return ckpt__fail_errno(errno, dir, "cannot list directory");
	char **v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	int rc = CKPT_OK;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			char **nv = ckpt__realloc(v, ncap * sizeof(*v));
			if (!nv) {
				rc = CKPT_ENOMEM;
				break;
			}
			v = nv;
			cap = ncap;
		}
		if (!(v[n] = ckpt__strdup(e->d_name))) {
			rc = CKPT_ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
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

static int px_mkdir(ckpt_vfs *vfs, const char *dir)
{
	(void)vfs;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return ckpt__fail_errno(errno, dir, "cannot create directory");
	return CKPT_OK;
}

static void px_destroy(ckpt_vfs *vfs) { (void)vfs; }

static const ckpt_vfs_methods posix_vfs_methods = {
	1, px_open, px_rename, px_remove, px_exists, px_sync_dir, px_list, px_mkdir, px_destroy
};
static ckpt_vfs posix_vfs = { &posix_vfs_methods };

ckpt_vfs *ckpt_vfs_default(void)
{
	return &posix_vfs;
}

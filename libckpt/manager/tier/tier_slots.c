/*
 * The memory tier's reusable data files. Writing a step into new tmpfs files
 * costs the kernel a page allocation, a zeroing and an LRU insertion per
 * 4 KiB on top of the copy: 3 to 5 times a memcpy of the same bytes
 * (bench/RESULTS.md). So a superseded step's data files are not unlinked:
 * they become this worker's spares, kept open and mapped, and the next save
 * writes over them with memcpy into memory that is already mapped.
 *
 * The VFS here is the POSIX one except for a data file ("*.data-*") opened
 * for writing: that takes a spare (renamed to the name asked for) or creates
 * a file, and its pwrite copies into the mapping, growing file and mapping
 * when a write goes past their end; close cuts the file to what was written.
 * Everything else (index, header, renames, listings) goes to POSIX.
 *
 * Made with `crc_files`, the crc32c of each such file is taken while it is
 * copied in (in pieces that are still in cache), so that committing a
 * segment or sending it to another node need not read it back.
 *
 * A spare is "<job_dir>/.spare.w<R>-of-<W>.<K>": dot names are no segments,
 * so listings, scans and restores never see one. Between saves a worker thus
 * holds its committed step and one step's worth of spares, which is what a
 * save needs at its peak anyway. A clean close removes them, and a worker
 * that starts removes the ones a killed run of the same rank left.
 *
 * Single-threaded: only the save on the trainer's thread writes through it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tier_internal.h"
#include "ckpt/sys/vfs.h"

#define MAX_SLOTS 16
#define GROW_ROUND (1u << 20)
#define CRC_PIECE (256u << 10) /* copied, then crc'd while in cache */

typedef struct slot {
	int fd;
	unsigned char *map; /* NULL until the first write */
	size_t maplen;
	uint64_t fsize;     /* the file's size */
	dev_t dev;
	ino_t ino;
	char *path;         /* a spare's name; NULL for a file in a segment */
	uint32_t crc;       /* of [0, crc_at), taken while written in order */
	uint64_t crc_at;
	int crc_ok;         /* 0 once a write was out of order */
} slot;

struct ckpt__tier_slots {
	ckpt_vfs base;
	ckpt_vfs_methods methods;
	ckpt_vfs *inner;
	char *dir;
	char *tag;                 /* ".spare.w<R>-of-<W>." */
	int crc_files;
	unsigned next;             /* the next spare's number */
	slot live[MAX_SLOTS];      /* written through this VFS, still in a segment */
	size_t nlive;
	slot spare[MAX_SLOTS];
	size_t nspare;
};

typedef struct {
	ckpt_io base;
	ckpt__tier_slots *owner;
	slot s;
	uint64_t hwm; /* bytes written: the size at close */
} slot_io;

static void slot_release(slot *s, int unlink_it)
{
	if (s->map)
		munmap(s->map, s->maplen);
	if (s->fd >= 0)
		close(s->fd);
	if (unlink_it && s->path)
		unlink(s->path);
	ckpt__free(s->path);
	memset(s, 0, sizeof(*s));
	s->fd = -1;
}

/* Files of segments removed since (a failed step, a dropped copy) are let go: their pages go back to tmpfs. */
static void prune_live(ckpt__tier_slots *t)
{
	for (size_t i = 0; i < t->nlive;) {
		struct stat st;
		if (fstat(t->live[i].fd, &st) == 0 && st.st_nlink > 0) {
			i++;
			continue;
		}
		slot_release(&t->live[i], 0);
		t->live[i] = t->live[--t->nlive];
	}
}

static int is_data_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return strstr(b ? b + 1 : path, ".data-") != NULL;
}

/*
 * File and mapping to cover [0, end). The file first: bytes stored through a
 * mapping past the file's end are lost (the kernel zeroes a page's tail
 * beyond the old end when the file is extended).
 */
static int grow(slot_io *f, uint64_t end)
{
	slot *s = &f->s;
	if (end > SIZE_MAX - GROW_ROUND)
		return ckpt__fail(CKPT_ELIMIT, f->base.path, NULL, -1, "write past %llu bytes", (unsigned long long)end);
	size_t len = (size_t)end;
	if (s->fsize > len)
		len = (size_t)s->fsize; /* a spare: its old size is the likely size of the new file */
	len = (len + GROW_ROUND - 1) / GROW_ROUND * GROW_ROUND;
	if (len > s->fsize) {
		/*
		 * Allocated here, not by the first store through the mapping: a full tmpfs (a memory_limit above
		 * what the tier's file system has, another process filling it) is then an error, never a SIGBUS.
		 */
		int e = posix_fallocate(s->fd, (off_t)s->fsize, (off_t)(len - s->fsize));
		if (e == ENOSPC && end < len) { /* the rounding's slack may be what does not fit */
			len = (size_t)end;
			e = posix_fallocate(s->fd, (off_t)s->fsize, (off_t)(len - s->fsize));
		}
		if (e)
			return ckpt__fail_errno(e, f->base.path, "cannot extend the memory tier file from %llu to %zu bytes",
				(unsigned long long)s->fsize, len);
		s->fsize = len;
	}
	if (len <= s->maplen)
		return CKPT_OK;
	void *m = s->map ? mremap(s->map, s->maplen, len, MREMAP_MAYMOVE)
			 : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, s->fd, 0);
	if (m == MAP_FAILED)
		return ckpt__fail_errno(errno, f->base.path, "cannot map the memory tier file (%zu bytes)", len);
	s->map = m;
	s->maplen = len;
	return CKPT_OK;
}

/* The copy in, and the crc32c of [off, off + n) taken piece by piece while each piece is in cache. */
static int sl_pwrite_crc(ckpt_io *io, const void *buf, size_t n, uint64_t off, uint32_t *crc)
{
	slot_io *f = (slot_io *)io;
	slot *s = &f->s;
	*crc = 0;
	if (n == 0)
		return CKPT_OK;
	if (off + n > s->maplen || off + n > s->fsize)
		CKPT_TRY(grow(f, off + n));
	uint32_t c = 0;
	for (size_t at = 0; at < n; at += CRC_PIECE) {
		size_t k = n - at < CRC_PIECE ? n - at : CRC_PIECE;
		memcpy(s->map + off + at, (const unsigned char *)buf + at, k);
		c = ckpt_crc32c_extend(c, s->map + off + at, k);
	}
	/* the file's crc: this write's appended when the writes come in order */
	if (s->crc_ok && off == s->crc_at) {
		s->crc = ckpt__crc32c_combine(s->crc, c, n);
		s->crc_at += n;
	} else
		s->crc_ok = 0;
	if (off + n > f->hwm)
		f->hwm = off + n;
	*crc = c;
	return CKPT_OK;
}

static int sl_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off)
{
	slot_io *f = (slot_io *)io;
	if (f->owner->crc_files) {
		uint32_t c;
		return sl_pwrite_crc(io, buf, n, off, &c);
	}
	if (n == 0)
		return CKPT_OK;
	if (off + n > f->s.maplen || off + n > f->s.fsize)
		CKPT_TRY(grow(f, off + n));
	memcpy(f->s.map + off, buf, n);
	f->s.crc_ok = 0;
	if (off + n > f->hwm)
		f->hwm = off + n;
	return CKPT_OK;
}

static int sl_pread(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got)
{
	slot_io *f = (slot_io *)io;
	*got = off >= f->hwm ? 0 : (size_t)(f->hwm - off < n ? f->hwm - off : n);
	if (*got)
		memcpy(buf, f->s.map + off, *got);
	return CKPT_OK;
}

static int sl_size(ckpt_io *io, uint64_t *out)
{
	*out = ((slot_io *)io)->hwm;
	return CKPT_OK;
}

static int sl_sync(ckpt_io *io)
{
	(void)io; /* tmpfs: the mapping's pages are the file's pages */
	return CKPT_OK;
}

/* The file cut to what was written, the mapping to the pages it still has; kept as a live slot. */
static int sl_close(ckpt_io *io)
{
	slot_io *f = (slot_io *)io;
	slot *s = &f->s;
	int rc = CKPT_OK;
	if (s->fsize != f->hwm && ftruncate(s->fd, (off_t)f->hwm) < 0)
		rc = ckpt__fail_errno(errno, io->path, "cannot set the memory tier file's size");
	s->fsize = f->hwm;
	s->crc_ok = s->crc_ok && s->crc_at == f->hwm;
	size_t keep = (size_t)((f->hwm + 4095) / 4096 * 4096);
	if (rc == CKPT_OK && s->map && keep < s->maplen) {
		void *m = keep ? mremap(s->map, s->maplen, keep, 0) : NULL;
		if (!keep)
			munmap(s->map, s->maplen);
		if (m == MAP_FAILED)
			rc = ckpt__fail_errno(errno, io->path, "cannot shrink the memory tier file's mapping");
		else {
			s->map = m;
			s->maplen = keep;
		}
	}
	struct stat st;
	ckpt__tier_slots *t = f->owner;
	if (rc == CKPT_OK && fstat(s->fd, &st) == 0 && t->nlive < MAX_SLOTS) {
		s->dev = st.st_dev;
		s->ino = st.st_ino;
		t->live[t->nlive++] = *s;
	} else
		slot_release(s, 0);
	ckpt__free(io->path);
	ckpt__free(f);
	return rc;
}

static int sl_fd(ckpt_io *io)
{
	(void)io; /* every byte goes through pwrite: the mapping is the file */
	return -1;
}

static const ckpt_io_methods slot_io_methods = {
	.version = CKPT_IO_METHODS_V3,
	.pread = sl_pread,
	.pwrite = sl_pwrite,
	.size = sl_size,
	.sync = sl_sync,
	.close = sl_close,
	.fd = sl_fd,
	.pwrite_crc = sl_pwrite_crc,
};

static int open_data(ckpt__tier_slots *t, const char *path, ckpt_io **out)
{
	prune_live(t);
	slot_io *f = ckpt__calloc(1, sizeof(*f));
	char *p = ckpt__strdup(path);
	if (!f || !p) {
		ckpt__free(f);
		ckpt__free(p);
		return CKPT_ENOMEM;
	}
	f->s.fd = -1;
	f->s.crc_ok = 1;
	if (t->nspare) {
		slot *s = &t->spare[--t->nspare];
		if (rename(s->path, path) < 0) {
			int e = errno;
			slot_release(s, 1);
			ckpt__free(f);
			ckpt__free(p);
			return ckpt__fail_errno(e, path, "cannot reuse a memory tier spare file");
		}
		ckpt__free(s->path);
		s->path = NULL;
		f->s = *s;
		f->s.crc = 0;
		f->s.crc_at = 0;
		f->s.crc_ok = 1;
		memset(s, 0, sizeof(*s));
	} else if ((f->s.fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		int e = errno;
		ckpt__free(f);
		ckpt__free(p);
		return ckpt__fail_errno(e, path, "cannot create");
	}
	f->base.methods = &slot_io_methods;
	f->base.path = p;
	f->owner = t;
	*out = &f->base;
	return CKPT_OK;
}

static int sv_open(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out)
{
	ckpt__tier_slots *t = (ckpt__tier_slots *)vfs;
	if ((flags & CKPT_IO_WRITE) && !(flags & CKPT_IO_EXCL) && is_data_name(path))
		return open_data(t, path, out);
	return t->inner->methods->open(t->inner, path, flags, out);
}

#define PASS(name, params, args)                                                            \
	static int sv_##name params                                                         \
	{                                                                                   \
		ckpt__tier_slots *t = (ckpt__tier_slots *)vfs;                                \
		return t->inner->methods->name args;                                        \
	}
PASS(rename, (ckpt_vfs *vfs, const char *from, const char *to), (t->inner, from, to))
PASS(remove, (ckpt_vfs *vfs, const char *path), (t->inner, path))
PASS(exists, (ckpt_vfs *vfs, const char *path, int *is_dir), (t->inner, path, is_dir))
PASS(sync_dir, (ckpt_vfs *vfs, const char *dir), (t->inner, dir))
PASS(list, (ckpt_vfs *vfs, const char *dir, char ***names, size_t *count), (t->inner, dir, names, count))
PASS(mkdir, (ckpt_vfs *vfs, const char *dir), (t->inner, dir))
PASS(rmdir, (ckpt_vfs *vfs, const char *dir), (t->inner, dir))
#undef PASS

static void sv_destroy(ckpt_vfs *vfs)
{
	(void)vfs; /* owned by the tier: ckpt__tier_slots_free */
}

/* Own spares a killed run of this rank left in `dir`. */
static void remove_leftovers(const char *dir, const char *tag)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, tag, strlen(tag)) != 0)
			continue;
		char *p = ckpt__asprintf("%s/%s", dir, e->d_name);
		if (p)
			unlink(p);
		ckpt__free(p);
	}
	if (d)
		closedir(d);
}

int ckpt__tier_slots_new(ckpt__tier_slots **out, const char *job_dir, int worker, int num_workers, int crc_files)
{
	*out = NULL;
	ckpt__tier_slots *t = ckpt__calloc(1, sizeof(*t));
	if (!t)
		return CKPT_ENOMEM;
	t->inner = ckpt_vfs_default();
	t->crc_files = crc_files;
	t->methods = *t->inner->methods;
	t->methods.open = sv_open;
	t->methods.rename = sv_rename;
	t->methods.remove = sv_remove;
	t->methods.exists = sv_exists;
	t->methods.sync_dir = sv_sync_dir;
	t->methods.list = sv_list;
	t->methods.mkdir = sv_mkdir;
	t->methods.rmdir = t->inner->methods->rmdir ? sv_rmdir : NULL;
	t->methods.destroy = sv_destroy;
	t->methods.lock = NULL; /* the tier writes into its own directory, never a locked checkpoint directory */
	t->methods.unlock = NULL;
	t->base.methods = &t->methods;
	t->dir = ckpt__strdup(job_dir);
	t->tag = ckpt__asprintf(".spare.w%d-of-%d.", worker, num_workers);
	if (!t->dir || !t->tag) {
		ckpt__tier_slots_free(t);
		return CKPT_ENOMEM;
	}
	remove_leftovers(t->dir, t->tag);
	*out = t;
	return CKPT_OK;
}

ckpt_vfs *ckpt__tier_slots_vfs(ckpt__tier_slots *t)
{
	return &t->base;
}

/* One data file of a superseded segment as a spare: renamed out of the segment, kept open and mapped. */
static int retire_file(ckpt__tier_slots *t, const char *path, int only_live)
{
	struct stat st;
	if (stat(path, &st) < 0)
		/* gone: another worker of the node moved its own file out of a segment both list */
		return errno == ENOENT ? CKPT_OK : ckpt__fail_errno(errno, path, "cannot stat");
	slot s = { .fd = -1 };
	for (size_t i = 0; i < t->nlive; i++)
		if (t->live[i].dev == st.st_dev && t->live[i].ino == st.st_ino) {
			s = t->live[i];
			t->live[i] = t->live[--t->nlive];
			break;
		}
	if (s.fd < 0 && only_live)
		return CKPT_OK; /* another worker's file */
	/* linked elsewhere too (a restore's staging directory): its bytes must stay as they are */
	if (t->nspare == MAX_SLOTS || st.st_nlink > 1) {
		slot_release(&s, 0);
		return CKPT_OK; /* the caller unlinks it with its segment */
	}
	if (s.fd < 0) {
		/* written by another run, or received as a copy: mapped on its first reuse */
		if ((s.fd = open(path, O_RDWR | O_CLOEXEC)) < 0)
			return ckpt__fail_errno(errno, path, "cannot open");
		s.fsize = (uint64_t)st.st_size;
	}
	s.path = ckpt__asprintf("%s/%s%u", t->dir, t->tag, t->next++);
	if (!s.path || rename(path, s.path) < 0) {
		int e = s.path ? errno : ENOMEM;
		slot_release(&s, 0);
		return e == ENOMEM ? CKPT_ENOMEM : ckpt__fail_errno(e, path, "cannot keep a memory tier spare file");
	}
	t->spare[t->nspare++] = s;
	return CKPT_OK;
}

int ckpt__tier_slots_retire(ckpt__tier_slots *t, const char *seg, int only_live)
{
	if (!t)
		return CKPT_OK;
	prune_live(t);
	DIR *d = opendir(seg);
	if (!d)
		return errno == ENOENT ? CKPT_OK : ckpt__fail_errno(errno, seg, "cannot list the memory tier segment");
	int rc = CKPT_OK;
	struct dirent *e;
	while (rc == CKPT_OK && (e = readdir(d))) {
		if (!is_data_name(e->d_name) || e->d_name[0] == '.')
			continue;
		char *p = ckpt__asprintf("%s/%s", seg, e->d_name);
		rc = p ? retire_file(t, p, only_live) : CKPT_ENOMEM;
		ckpt__free(p);
	}
	closedir(d);
	return rc;
}

const void *ckpt__tier_slots_known(const ckpt__tier_slots *t, const char *path, uint64_t *size, uint32_t *crc,
	int *crc_known)
{
	*size = 0;
	*crc_known = 0;
	struct stat st;
	if (!t || stat(path, &st) < 0)
		return NULL;
	for (size_t i = 0; i < t->nlive; i++) {
		const slot *s = &t->live[i];
		if (s->dev != st.st_dev || s->ino != st.st_ino || s->fsize != (uint64_t)st.st_size)
			continue;
		*size = s->fsize;
		*crc = s->crc;
		*crc_known = t->crc_files && s->crc_ok;
		return s->map ? (const void *)s->map : (const void *)"";
	}
	return NULL;
}

uint64_t ckpt__tier_slots_spare_bytes(const ckpt__tier_slots *t)
{
	uint64_t n = 0;
	for (size_t i = 0; t && i < t->nspare; i++)
		n += t->spare[i].fsize;
	return n;
}

void ckpt__tier_slots_free(ckpt__tier_slots *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nlive; i++)
		slot_release(&t->live[i], 0);
	for (size_t i = 0; i < t->nspare; i++)
		slot_release(&t->spare[i], 1);
	ckpt__free(t->dir);
	ckpt__free(t->tag);
	ckpt__free(t);
}

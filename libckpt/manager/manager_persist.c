/*
 * The persistent tier from the memory tier: a save that goes to both tiers
 * serializes the state once, into this process's memory segment (the
 * trainer blocks for that only), and the checkpoint in the directory is
 * then copied from the segment's files on a background thread: data files
 * first, the index last (the commit point: data files without their index
 * are no checkpoint), then the manager's commit (retention, state file),
 * as a save does. The segment's files are opened before the trainer goes
 * on, so a later memory save may remove the segment (it is superseded)
 * while the copy still reads it: the kernel keeps an open file's pages.
 *
 * Nothing here reads the live variables: the copy is the step the memory
 * tier committed, whatever the trainer does to its buffers meanwhile.
 *
 * A multi-process checkpoint's piece (ckpt__persist_start_piece) is copied
 * the same way but only as far as its data shard's temporary: the merged
 * index and the manager's commit are collective, so they are left to the
 * trainer's thread (manager.c), which may call MPI where this thread may not.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "manager_internal.h"
#include "manager/tier/tier_internal.h"

#define COPY_CHUNK (8u << 20)

struct ckpt__persist {
	pthread_t thread;
	ckpt_manager *m;
	ckpt__manager_save save;
	ckpt__persist_commit_fn commit;
	ckpt_vfs *vfs;
	int fsync;
	size_t nfiles;
	ckpt_io **src;   /* the segment's files, open (the index last) */
	char **suffix;   /* ".index", ".data-00000-of-00001", ... */
	char **path;     /* their paths in the segment, */
	uint64_t *size;  /* sizes */
	uint64_t *ino;   /* and inodes, when opened: a file gone from its segment still holds its bytes */
	atomic_int done; /* the thread has finished */
	/* a piece (ckpt__persist_start_piece): data shards only, as "<name>.tempstate<token>"; no commit */
	int piece;
	uint64_t token;
	void *entries;   /* the piece's index entries ("<segment prefix>.entries") */
	size_t elen;
};

static void persist_free(ckpt__persist *p)
{
	for (size_t i = 0; i < p->nfiles; i++) {
		ckpt_io_close(p->src[i]);
		ckpt__free(p->suffix[i]);
		ckpt__free(p->path[i]);
	}
	ckpt__free(p->src);
	ckpt__free(p->suffix);
	ckpt__free(p->path);
	ckpt__free(p->size);
	ckpt__free(p->ino);
	ckpt__free(p->entries);
	ckpt__free(p);
}

/* One data file to `dst`, under a temporary name renamed when whole where the file system renames. */
static int copy_file(ckpt__persist *p, ckpt_io *src, const char *dst, void *buf)
{
	int renames = !(ckpt_vfs_caps(p->vfs) & CKPT_VFS_CAP_NO_RENAME);
	char *tmp = NULL;
	if (p->piece) {
		/* the name ckpt_bundle_merge_commit renames (or, without rename, the final one) */
		char sfx[40];
		snprintf(sfx, sizeof(sfx), "tempstate%" PRIu64, p->token);
		tmp = ckpt__vfs_temp_name(p->vfs, dst, sfx);
	} else {
		tmp = renames ? ckpt__asprintf("%s.tempstate-persist", dst) : ckpt__strdup(dst);
	}
	if (!tmp)
		return CKPT_ENOMEM;
	uint64_t size = 0;
	ckpt_io *out = NULL;
	int rc = ckpt_io_size(&size, src);
	if (rc == CKPT_OK)
		rc = ckpt_vfs_open(&out, p->vfs, tmp, CKPT_IO_WRITE);
	for (uint64_t off = 0; rc == CKPT_OK && off < size;) {
		size_t n = size - off < COPY_CHUNK ? (size_t)(size - off) : COPY_CHUNK;
		rc = ckpt_io_read_exact(src, buf, n, off);
		if (rc == CKPT_OK)
			rc = ckpt_io_pwrite(out, buf, n, off);
		off += n;
	}
	if (rc == CKPT_OK && p->fsync)
		rc = ckpt_io_sync(out);
	int crc = out ? ckpt_io_close(out) : CKPT_OK;
	if (rc == CKPT_OK)
		rc = crc;
	if (rc == CKPT_OK && renames && !p->piece)
		rc = ckpt_vfs_rename(p->vfs, tmp, dst);
	if (rc < 0 && out && renames) {
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		ckpt_vfs_remove(p->vfs, tmp);
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	ckpt__free(tmp);
	return rc;
}

/* The index: small, written whole and atomically after every data file. */
static int copy_index(ckpt__persist *p, ckpt_io *src, const char *dst)
{
	uint64_t size = 0;
	CKPT_TRY(ckpt_io_size(&size, src));
	void *buf = ckpt__malloc(size ? (size_t)size : 1);
	if (!buf)
		return CKPT_ENOMEM;
	int rc = ckpt_io_read_exact(src, buf, (size_t)size, 0);
	if (rc == CKPT_OK)
		rc = ckpt_vfs_write_atomic(p->vfs, dst, buf, (size_t)size, p->fsync);
	ckpt__free(buf);
	return rc;
}

static void *persist_thread(void *arg)
{
	ckpt__persist *p = arg;
	void *buf = ckpt__malloc(COPY_CHUNK);
	int rc = buf ? CKPT_OK : CKPT_ENOMEM;
	for (size_t i = 0; rc == CKPT_OK && i < p->nfiles; i++) {
		char *dst = ckpt__asprintf("%s%s", p->save.path, p->suffix[i]);
		if (!dst)
			rc = CKPT_ENOMEM;
		else if (p->piece || i + 1 < p->nfiles)
			rc = copy_file(p, p->src[i], dst, buf);
		else
			rc = copy_index(p, p->src[i], dst);
		ckpt__free(dst);
	}
	ckpt__free(buf);
	if (rc == CKPT_OK && !p->piece) {
		p->save.written = 1;
		rc = p->commit(p->m, &p->save);
	}
	p->save.rc = rc;
	if (rc < 0)
		ckpt__error_capture(&p->save.error);
	atomic_store(&p->done, 1);
	return NULL;
}

static void swap_files(ckpt__persist *p, size_t a, size_t b)
{
	ckpt_io *io = p->src[a];
	char *sf = p->suffix[a], *pa = p->path[a];
	uint64_t sz = p->size[a], in = p->ino[a];
	p->src[a] = p->src[b];
	p->suffix[a] = p->suffix[b];
	p->path[a] = p->path[b];
	p->size[a] = p->size[b];
	p->ino[a] = p->ino[b];
	p->src[b] = io;
	p->suffix[b] = sf;
	p->path[b] = pa;
	p->size[b] = sz;
	p->ino[b] = in;
}

/* The segment's "ckpt.*" files, opened; the index last (a piece: its data shards only). */
static int open_segment(ckpt__persist *p, const char *segment_prefix)
{
	const char *slash = strrchr(segment_prefix, '/');
	if (!slash)
		return ckpt__fail(CKPT_EINVAL, segment_prefix, NULL, -1, "not a memory tier segment's prefix");
	size_t dl = (size_t)(slash - segment_prefix);
	const char *base = slash + 1;
	size_t bl = strlen(base);
	char *dir = ckpt__malloc(dl + 1);
	if (!dir)
		return CKPT_ENOMEM;
	memcpy(dir, segment_prefix, dl);
	dir[dl] = '\0';
	DIR *d = opendir(dir);
	int rc = d ? CKPT_OK : ckpt__fail_errno(errno, dir, "cannot list the memory tier segment");
	struct dirent *e;
	int have_index = 0;
	while (rc == CKPT_OK && (e = readdir(d))) {
		if (strncmp(e->d_name, base, bl) != 0 || e->d_name[bl] != '.')
			continue;
		const char *suffix = e->d_name + bl;
		int is_index = strcmp(suffix, ".index") == 0;
		if (!is_index && strncmp(suffix, ".data-", 6) != 0)
			continue;
		if (is_index && p->piece)
			continue;
		ckpt_io **ns = ckpt__realloc(p->src, (p->nfiles + 1) * sizeof(*ns));
		char **nx = ns ? ckpt__realloc(p->suffix, (p->nfiles + 1) * sizeof(*nx)) : NULL;
		char **np = nx ? ckpt__realloc(p->path, (p->nfiles + 1) * sizeof(*np)) : NULL;
		uint64_t *nz = np ? ckpt__realloc(p->size, (p->nfiles + 1) * sizeof(*nz)) : NULL;
		uint64_t *ni = nz ? ckpt__realloc(p->ino, (p->nfiles + 1) * sizeof(*ni)) : NULL;
		if (ns)
			p->src = ns;
		if (nx)
			p->suffix = nx;
		if (np)
			p->path = np;
		if (nz)
			p->size = nz;
		if (ni)
			p->ino = ni;
		char *path = ckpt__asprintf("%s/%s", dir, e->d_name);
		char *sfx = ckpt__strdup(suffix);
		if (!ni || !path || !sfx) {
			ckpt__free(path);
			ckpt__free(sfx);
			rc = CKPT_ENOMEM;
			break;
		}
		ckpt_io *io = NULL;
		rc = ckpt_vfs_open(&io, ckpt_vfs_default(), path, CKPT_IO_READ);
		struct stat st;
		if (rc == CKPT_OK && stat(path, &st) < 0)
			rc = ckpt__fail_errno(errno, path, "cannot stat the memory tier segment's file");
		if (rc < 0) {
			if (io)
				ckpt_io_close(io);
			ckpt__free(path);
			ckpt__free(sfx);
			break;
		}
		p->src[p->nfiles] = io;
		p->suffix[p->nfiles] = sfx;
		p->path[p->nfiles] = path;
		p->size[p->nfiles] = (uint64_t)st.st_size;
		p->ino[p->nfiles] = (uint64_t)st.st_ino;
		p->nfiles++;
		if (is_index) {
			/* held at the front while listing, moved to the end below */
			have_index = 1;
			size_t last = p->nfiles - 1;
			if (last)
				swap_files(p, 0, last);
		}
	}
	if (d)
		closedir(d);
	if (rc == CKPT_OK && !have_index && !p->piece)
		rc = ckpt__fail(CKPT_ENOTFOUND, dir, NULL, -1, "the memory tier segment has no index");
	if (rc == CKPT_OK && p->piece && !p->nfiles)
		rc = ckpt__fail(CKPT_ENOTFOUND, dir, NULL, -1, "the memory tier piece has no data shard");
	/* keep the index last: it was swapped to the front */
	for (size_t i = 0; rc == CKPT_OK && have_index && i + 1 < p->nfiles; i++)
		swap_files(p, i, i + 1);
	ckpt__free(dir);
	return rc;
}

static int persist_start(ckpt__persist **out, ckpt_manager *m, ckpt__manager_save *s, const char *segment_prefix,
	ckpt_vfs *vfs, int fsync, ckpt__persist_commit_fn commit, int piece, uint64_t token)
{
	*out = NULL;
	ckpt__persist *p = ckpt__calloc(1, sizeof(*p));
	if (!p)
		return CKPT_ENOMEM;
	p->m = m;
	p->vfs = vfs;
	p->fsync = fsync;
	p->commit = commit;
	p->piece = piece;
	p->token = token;
	atomic_init(&p->done, 0);
	int rc = open_segment(p, segment_prefix);
	if (rc == CKPT_OK && piece) {
		char *ep = ckpt__asprintf("%s.entries", segment_prefix);
		uint64_t elen = 0;
		rc = ep ? ckpt__tier_read_whole(&p->entries, &elen, ep) : CKPT_ENOMEM;
		p->elen = (size_t)elen;
		ckpt__free(ep);
	}
	if (rc == CKPT_OK) {
		p->save = *s;
		rc = pthread_create(&p->thread, NULL, persist_thread, p);
		if (rc) {
			rc = ckpt__fail_errno(rc, s->path, "cannot start the background copy to storage");
			memset(&p->save, 0, sizeof(p->save));
		}
	}
	if (rc < 0) {
		persist_free(p);
		return rc;
	}
	/* the plan is the thread's now */
	memset(s, 0, sizeof(*s));
	*out = p;
	return CKPT_OK;
}

int ckpt__persist_start(ckpt__persist **out, ckpt_manager *m, ckpt__manager_save *s, const char *segment_prefix,
	ckpt_vfs *vfs, int fsync, ckpt__persist_commit_fn commit)
{
	return persist_start(out, m, s, segment_prefix, vfs, fsync, commit, 0, 0);
}

int ckpt__persist_start_piece(ckpt__persist **out, ckpt__manager_save *s, const char *segment_prefix, ckpt_vfs *vfs,
	int fsync, uint64_t token)
{
	return persist_start(out, NULL, s, segment_prefix, vfs, fsync, NULL, 1, token);
}

int ckpt__persist_done(const ckpt__persist *p)
{
	return atomic_load(&((ckpt__persist *)p)->done);
}

const void *ckpt__persist_entries(const ckpt__persist *p, size_t *len)
{
	*len = p->elen;
	return p->entries;
}

uint64_t ckpt__persist_unlinked_bytes(const ckpt__persist *p)
{
	if (!p || ckpt__persist_done(p))
		return 0;
	uint64_t sum = 0;
	for (size_t i = 0; i < p->nfiles; i++) {
		struct stat st;
		if (stat(p->path[i], &st) < 0 || (uint64_t)st.st_ino != p->ino[i])
			sum += p->size[i];
	}
	return sum;
}

int ckpt__persist_join(ckpt__persist *p, ckpt__manager_save *s)
{
	pthread_join(p->thread, NULL);
	*s = p->save;
	int rc = s->rc;
	if (rc < 0)
		ckpt__error_raise(&s->error);
	ckpt__error_slot_clear(&s->error);
	persist_free(p);
	return rc;
}

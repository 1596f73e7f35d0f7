/*
 * Backend "keras-h5": Keras HDF5 files, detected from bytes.
 *
 *   offset 0: 89 48 44 46 0D 0A 1A 0A  ("\x89HDF\r\n\x1a\n", superblock; Keras
 *             always writes userblock 0, so the signature is at offset 0)
 *
 * Reads the three layouts (keras_h5_read.c, format names "keras-h5-legacy",
 * "keras-h5-legacy-weights", "keras-weights-h5") and writes two:
 *   "keras-h5"      legacy full-model layout (model_weights + optimizer_weights)
 *   "keras-weights" Keras 3 .weights.h5 layout (layers/<key>/vars/N)
 * Reading: when the open file lends a descriptor (ckpt_io_fd: the POSIX VFS)
 * the file is mapped read-only and HDF5 parses its metadata from the mapping
 * (keras_h5_read.c), data is read with pread straight into the caller's
 * buffer; on other VFS the whole file is read into memory through the VFS
 * first.
 * Writing: each tensor goes into a temporary sibling
 * ("<path>.tempstate<pid>_<time>_<n>") when it is added, written through the
 * writer's VFS by an HDF5 file driver over the open ckpt_io (h5_vfd.c);
 * commit lays out names and attributes, closes it, fsyncs it (unless
 * no_fsync) and renames it into place. A file system without rename
 * (CKPT_VFS_CAP_NO_RENAME): built in memory (core driver) and committed with
 * ckpt_vfs_write_atomic. A failed or abandoned save leaves the previous file
 * as it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "formats/keras_h5/h5_safe.h"
#include "formats/keras_h5/keras_h5.h"
#include "ckpt/sys/vfs.h"

static int kh5_bid(ckpt_vfs *vfs, const char *path, const unsigned char *head, size_t n)
{
	(void)vfs;
	(void)path;
	if (n >= 8 && memcmp(head, "\x89HDF\r\n\x1a\n", 8) == 0)
		return 80;
	return ckpt__keras_sharded_bid(head, n);
}

/*
 * A regular file whose open file lends a descriptor (ckpt_io_fd), mapped
 * read-only: 1 = attached (or failed with the error set: *rc), 0 = no
 * descriptor or not such a file, use the in-memory path.
 */
static int open_mapped(ckpt_reader *r, int *rc)
{
	uint64_t size = 0;
	void *map;
	int fd = ckpt__vfs_open_fd(r->vfs, r->user_path, &size);
	if (fd < 0)
		return 0; /* the VFS path reports the error */
	/* Empty or tiny files: the in-memory path (and its messages). */
	if (size < 64 || size > SIZE_MAX) {
		close(fd);
		return 0;
	}
	map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		close(fd);
		return 0;
	}
	/* HDF5 touches metadata here and there: no readahead of the data around it. */
	madvise(map, (size_t)size, MADV_RANDOM);
	*rc = ckpt__keras_h5_attach_file(r, fd, map, (size_t)size);
	return 1;
}

/* The first bytes of the file (the bid saw them; open looks again to choose the path), length in *n. */
static const unsigned char *head_of(ckpt_reader *r, int *n)
{
	static _Thread_local unsigned char head[16];
	ckpt_io *io;
	size_t got = 0;
	*n = 0;
	if (ckpt_vfs_open(&io, r->vfs, r->user_path, CKPT_IO_READ) < 0) {
		ckpt_error_clear();
		return head;
	}
	if (ckpt_io_pread(&got, io, head, sizeof(head), 0) < 0) {
		ckpt_error_clear();
		got = 0;
	}
	ckpt_io_close(io);
	*n = (int)got;
	return head;
}

static int kh5_open(ckpt_reader *r)
{
	void *buf = NULL;
	size_t n = 0;
	int rc;
	uint64_t max = r->opts.memory_budget ? r->opts.memory_budget : CKPT_DEFAULT_MEMORY_BUDGET;
	if (!r->path && !(r->path = ckpt__strdup(r->user_path)))
		return CKPT_ENOMEM;
	CKPT_TRY(ckpt__h5_lib(r->path));
	const unsigned char *head = head_of(r, &rc);
	if (ckpt__keras_sharded_bid(head, (size_t)rc) > 0)
		return ckpt__keras_sharded_open(r);
	if (open_mapped(r, &rc))
		return rc;
	/* Whole file into memory, then an HDF5 file image: every byte goes through the VFS. */
	CKPT_TRY(ckpt_vfs_read_all(&buf, &n, r->vfs, r->user_path, max));
	return ckpt__keras_h5_attach(r, buf, n, NULL, 0);
}

/* ---- writer ---- */

typedef struct kw_state {
	ckpt__keras_h5w *b;
	int layout;
	ckpt_io *io;        /* the temporary, written through the writer's VFS (h5_vfd.h); NULL: in memory */
	char *tmp;          /* its name, a sibling removed unless renamed into place */
	int renamed;        /* tmp no longer exists under its name */
} kw_state;

/* Remove the temporary file, keeping the error a failed save reported. */
static void kw_remove_tmp(ckpt_writer *w, kw_state *s)
{
	ckpt__error_slot slot = { 0 };
	if (!s->tmp || s->renamed)
		return;
	ckpt__error_capture(&slot);
	w->vfs->methods->remove(w->vfs, s->tmp);
	ckpt__error_raise(&slot);
	ckpt__error_slot_clear(&slot);
	s->renamed = 1; /* gone either way: nothing left to remove */
}

/* Close the temporary's io (after libhdf5 let go of it); its status, unless keep_error. */
static int kw_close_io(kw_state *s, int keep_error)
{
	ckpt__error_slot slot = { 0 };
	int rc;
	if (!s->io)
		return CKPT_OK;
	if (keep_error)
		ckpt__error_capture(&slot);
	rc = ckpt_io_close(s->io);
	s->io = NULL;
	if (keep_error) {
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	return rc;
}

static void kw_free(ckpt_writer *w, kw_state *s)
{
	if (!s)
		return;
	ckpt__keras_h5w_free(s->b);
	kw_close_io(s, 1);
	kw_remove_tmp(w, s);
	ckpt__free(s->tmp);
	ckpt__free(s);
}

static int kw_open(ckpt_writer *w)
{
	static _Thread_local unsigned seq;
	kw_state *s;
	int layout, rc;
	if (strcmp(w->format_name, "keras-h5") == 0)
		layout = CKPT_KERAS_LEGACY;
	else if (strcmp(w->format_name, "keras-weights") == 0)
		layout = CKPT_KERAS_V3;
	else
		return ckpt__fail(CKPT_EUNSUPPORTED, w->path, NULL, -1, "keras-h5 backend does not write '%s'", w->format_name);
	CKPT_TRY(ckpt__h5_lib(w->path));
	s = ckpt__calloc(1, sizeof(*s));
	if (!s)
		return CKPT_ENOMEM;
	s->layout = layout;
	/* without rename (an object store) the file is built in memory and put whole at commit */
	if (!(ckpt_vfs_caps(w->vfs) & CKPT_VFS_CAP_NO_RENAME)) {
		if (!(s->tmp = ckpt__asprintf("%s.tempstate%ld_%u_%u", w->path, (long)getpid(), (unsigned)time(NULL), ++seq))) {
			kw_free(w, s);
			return CKPT_ENOMEM;
		}
		rc = ckpt_vfs_open(&s->io, w->vfs, s->tmp, CKPT_IO_READ | CKPT_IO_WRITE);
		if (rc < 0) {
			s->renamed = 1; /* nothing was created */
			kw_free(w, s);
			return rc;
		}
	}
	rc = ckpt__keras_h5w_open(&s->b, w, layout, s->io);
	if (rc < 0) {
		kw_free(w, s);
		return rc;
	}
	w->state = s;
	return CKPT_OK;
}

/* The checks of every added tensor (shared with the archive writer). */
int ckpt__keras_check_tensor(const char *name, const ckpt_tensor *t)
{
	uint64_t need;
	if (t->dtype == CKPT_DT_STRING || t->dtype == CKPT_DT_COMPLEX64 || t->dtype == CKPT_DT_COMPLEX128 ||
		!ckpt_dtype_valid((int)t->dtype))
		return ckpt__fail(CKPT_EUNSUPPORTED, NULL, name, -1, "Keras HDF5 files cannot hold %s tensors", ckpt_dtype_name(t->dtype));
	if (ckpt_shape_nbytes(&need, &t->shape, t->dtype) < 0)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "shape overflows a 64-bit byte count");
	if (need != t->nbytes)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "tensor holds %llu bytes, its shape needs %llu",
			(unsigned long long)t->nbytes, (unsigned long long)need);
	if (need && !t->data)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "tensor of %llu bytes has no data", (unsigned long long)need);
	return CKPT_OK;
}

void ckpt__keras_wlist_free(ckpt__keras_wtensor *v, size_t n)
{
	size_t i;
	for (i = 0; v && i < n; i++) {
		ckpt__free(v[i].name);
		ckpt_tensor_free(v[i].t);
	}
	ckpt__free(v);
}

/* The archive writer's list: a private copy of every tensor added. */
int ckpt__keras_wlist_add(ckpt__keras_wtensor **v, size_t *n, size_t *cap, const char *name, const ckpt_tensor *t)
{
	ckpt_tensor *c;
	size_t i;
	CKPT_TRY(ckpt__keras_check_tensor(name, t));
	for (i = 0; i < *n; i++)
		if (strcmp((*v)[i].name, name) == 0)
			return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "tensor '%s' added twice", name);
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 32;
		ckpt__keras_wtensor *nv = ckpt__realloc(*v, nc * sizeof(*nv));
		if (!nv)
			return CKPT_ENOMEM;
		*v = nv;
		*cap = nc;
	}
	CKPT_TRY(ckpt_tensor_new(&c, t->dtype, &t->shape));
	if (c->nbytes)
		memcpy(c->data, t->data, (size_t)c->nbytes);
	(*v)[*n].name = ckpt__strdup(name);
	if (!(*v)[*n].name) {
		ckpt_tensor_free(c);
		return CKPT_ENOMEM;
	}
	(*v)[*n].t = c;
	(*n)++;
	return CKPT_OK;
}

static int kw_add(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard)
{
	kw_state *s = w->state;
	(void)shard;
	return ckpt__keras_h5w_add(s->b, name, t);
}

static int kw_commit(ckpt_writer *w)
{
	kw_state *s = w->state;
	void *img = NULL;
	size_t len = 0;
	int rc;
	if (!s->io) {
		CKPT_TRY(ckpt__keras_h5w_finish(s->b, &img, &len));
		rc = ckpt_vfs_write_atomic(w->vfs, w->path, img, len, !w->opts.no_fsync);
		ckpt__free(img);
		return rc;
	}
	rc = ckpt__keras_h5w_finish(s->b, NULL, NULL);
	if (rc >= 0 && !w->opts.no_fsync)
		rc = ckpt_io_sync(s->io);
	if (rc >= 0)
		rc = kw_close_io(s, 0);
	if (rc >= 0)
		rc = ckpt_vfs_rename(w->vfs, s->tmp, w->path);
	if (rc >= 0)
		s->renamed = 1;
	if (rc >= 0 && !w->opts.no_fsync) {
		char *dir = ckpt__path_dir(w->path);
		rc = dir ? ckpt_vfs_sync_dir(w->vfs, dir) : CKPT_ENOMEM;
		ckpt__free(dir);
	}
	if (rc < 0) {
		kw_close_io(s, 1);
		kw_remove_tmp(w, s);
	}
	return rc;
}

static void kw_close(ckpt_writer *w)
{
	kw_free(w, w->state);
	w->state = NULL;
}

static const char *const kh5_write_formats[] = { "keras-h5", "keras-weights", NULL };

static int kh5_read(ckpt_reader *r, size_t i, ckpt_tensor **out)
{
	return ckpt__keras_sharded_is(r) ? ckpt__keras_sharded_read(r, i, out) : ckpt__keras_h5_read(r, i, out);
}

static int kh5_read_into(ckpt_reader *r, size_t i, void *dst, size_t n)
{
	return ckpt__keras_sharded_is(r) ? ckpt__keras_sharded_read_into(r, i, dst, n) : ckpt__keras_h5_read_into(r, i, dst, n);
}

static void kh5_close(ckpt_reader *r)
{
	if (ckpt__keras_sharded_is(r))
		ckpt__keras_sharded_close(r);
	else
		ckpt__keras_h5_close(r);
}

const ckpt_format ckpt_format_keras_h5 = {
	1,
	"keras-h5",
	kh5_bid,
	kh5_open,
	kh5_read,
	kh5_read_into,
	kh5_close,
	kh5_write_formats,
	kw_open,
	kw_add,
	kw_commit,
	kw_close,
	NULL, /* verify: core fallback */
	NULL, /* writer_announce: nothing staged, announcements ignored */
	NULL, /* read_rows: the core reads whole tensors */
	NULL, /* no partitioned variables */
	NULL, /* read_many: entry by entry */
	NULL, /* writer_add_pieces: values whole (a device value larger than the ring goes through pinned memory of its size) */
	NULL, /* trim: no scratch kept between reads */
};

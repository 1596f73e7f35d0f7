/*
 * The flat writers' staging, announcements and commit (flat.h). Either way
 * the file is written to a temporary sibling of the target, synced and
 * renamed over it: a failed or abandoned writer leaves the old file intact.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "flat.h"
#include "ckpt/sys/vfs.h"

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* The slot of `name`: where it is, or the empty slot where it would go. */
static size_t *find_slot(const flat_writer *fw, const char *name)
{
	size_t mask = fw->nslot - 1;
	for (size_t i = (size_t)name_hash(name) & mask;; i = (i + 1) & mask)
		if (!fw->slot[i] || strcmp(fw->e[fw->slot[i] - 1].name, name) == 0)
			return &fw->slot[i];
}

static flat_entry *find_entry(const flat_writer *fw, const char *name)
{
	size_t *sl = fw->nslot ? find_slot(fw, name) : NULL;
	return sl && *sl ? &fw->e[*sl - 1] : NULL;
}

/* Rebuild the name table for fw->n entries (after growth, or after a layout reordered them). */
static int reindex(flat_writer *fw, size_t want)
{
	size_t ns = fw->nslot ? fw->nslot : 64;
	while (ns < 2 * want)
		ns *= 2;
	if (ns != fw->nslot) {
		size_t *nsl = ckpt__calloc(ns, sizeof(*nsl));
		if (!nsl)
			return CKPT_ENOMEM;
		ckpt__free(fw->slot);
		fw->slot = nsl;
		fw->nslot = ns;
	} else {
		memset(fw->slot, 0, ns * sizeof(*fw->slot));
	}
	for (size_t i = 0; i < fw->n; i++)
		*find_slot(fw, fw->e[i].name) = i + 1;
	return CKPT_OK;
}

/* A new entry named `name` (not yet counted in fw->n), or EINVAL for a duplicate. */
static int new_entry(flat_writer *fw, const char *path, const char *name, flat_entry **out)
{
	if (find_entry(fw, name))
		return ckpt__fail(CKPT_EINVAL, path, name, -1, "tensor '%s' added twice", name);
	if (fw->n == fw->cap) {
		size_t nc = fw->cap ? fw->cap * 2 : 16;
		flat_entry *ne = ckpt__realloc(fw->e, nc * sizeof(*ne));
		if (!ne)
			return CKPT_ENOMEM;
		fw->e = ne;
		fw->cap = nc;
	}
	if (2 * (fw->n + 1) > fw->nslot)
		CKPT_TRY(reindex(fw, fw->n + 1));
	flat_entry *e = &fw->e[fw->n];
	memset(e, 0, sizeof(*e));
	if (!(e->name = ckpt__strdup(name)))
		return CKPT_ENOMEM;
	*out = e;
	return CKPT_OK;
}

static void commit_entry(flat_writer *fw, flat_entry *e)
{
	*find_slot(fw, e->name) = (size_t)(e - fw->e) + 1;
	fw->n++;
}

int ckpt__flat_stage(flat_writer *fw, const char *path, const char *name, const ckpt_tensor *t, int ftype)
{
	flat_entry *e;
	if (fw->planned)
		return ckpt__fail(CKPT_EINVAL, path, name, -1, "internal: staged add in an announced writer");
	if (t->dtype == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EUNSUPPORTED, path, name, -1, "string tensors have no flat-format dtype");
	CKPT_TRY(new_entry(fw, path, name, &e));
	if (!(e->data = ckpt__malloc(t->nbytes ? t->nbytes : 1))) {
		ckpt__free(e->name);
		return CKPT_ENOMEM;
	}
	if (t->nbytes)
		memcpy(e->data, t->data, t->nbytes);
	e->dtype = t->dtype;
	e->shape = t->shape;
	e->nbytes = t->nbytes;
	e->ftype = ftype;
	commit_entry(fw, e);
	return CKPT_OK;
}

int ckpt__flat_announce(flat_writer *fw, const char *path, const char *name, ckpt_dtype dtype,
	const ckpt_shape *shape, int ftype)
{
	flat_entry *e;
	uint64_t n;
	if (fw->started || (fw->n && !fw->planned))
		return ckpt__fail(CKPT_EINVAL, path, name, -1, "tensors must be announced before the first is added");
	if (dtype == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EUNSUPPORTED, path, name, -1, "string tensors have no flat-format dtype");
	if (ckpt_shape_num_elements(&n, shape) < 0 || (ckpt_dtype_size(dtype) && n > UINT64_MAX / ckpt_dtype_size(dtype)))
		return ckpt__fail(CKPT_EINVAL, path, name, -1, "tensor size overflows");
	CKPT_TRY(new_entry(fw, path, name, &e));
	e->dtype = dtype;
	e->shape = *shape;
	e->nbytes = n * ckpt_dtype_size(dtype);
	e->ftype = ftype;
	commit_entry(fw, e);
	fw->planned = 1;
	return CKPT_OK;
}

void ckpt__flat_writer_free(ckpt_writer *w, flat_writer *fw)
{
	if (fw->io) { /* announced and started, never committed: the caller's last error stays */
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		ckpt__io_abandon(fw->io);
		ckpt_io_close(fw->io);
		if (strcmp(fw->tmp, w->path) != 0) /* without rename nothing was published: the old file stays */
			w->vfs->methods->remove(w->vfs, fw->tmp);
		if (slot.code)
			ckpt__error_raise(&slot);
		else
			ckpt_error_clear();
		ckpt__error_slot_clear(&slot);
	}
	ckpt__free(fw->tmp);
	for (size_t i = 0; i < fw->n; i++) {
		ckpt__free(fw->e[i].name);
		ckpt__free(fw->e[i].data);
	}
	ckpt__free(fw->e);
	ckpt__free(fw->slot);
	memset(fw, 0, sizeof(*fw));
}

/* Zeros in [from, to) of the temporary. */
static int zero_fill(ckpt_io *io, uint64_t from, uint64_t to)
{
	static const unsigned char zeros[64];
	while (from < to) {
		size_t k = to - from < sizeof(zeros) ? (size_t)(to - from) : sizeof(zeros);
		CKPT_TRY(ckpt_io_pwrite(io, zeros, k, from));
		from += k;
	}
	return CKPT_OK;
}

int ckpt__flat_begin(ckpt_writer *w, flat_writer *fw, const void *head, size_t hlen, uint64_t data_start,
	uint64_t total)
{
	static _Thread_local unsigned seq;
	if (fw->started)
		return ckpt__fail(CKPT_EINVAL, w->path, NULL, -1, "internal: flat writer started twice");
	char suffix[80];
	snprintf(suffix, sizeof(suffix), "tmp%ld_%u_%u", (long)getpid(), (unsigned)time(NULL), ++seq);
	fw->tmp = ckpt__vfs_temp_name(w->vfs, w->path, suffix);
	if (!fw->tmp)
		return CKPT_ENOMEM;
	CKPT_TRY(reindex(fw, fw->n)); /* the layout may have reordered the entries */
	CKPT_TRY(ckpt_vfs_open(&fw->io, w->vfs, fw->tmp, CKPT_IO_WRITE));
	fw->started = 1;
	fw->hlen = hlen;
	fw->data_start = data_start;
	fw->total = total;
	return ckpt_io_pwrite(fw->io, head, hlen, 0);
}

int ckpt__flat_put(ckpt_writer *w, flat_writer *fw, const char *name, const ckpt_tensor *t)
{
	flat_entry *e = find_entry(fw, name);
	if (!e)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "tensor '%s' was not announced", name);
	if (e->written)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "tensor '%s' added twice", name);
	if (t->dtype != e->dtype || !ckpt_shape_equal(&t->shape, &e->shape) || t->nbytes != e->nbytes)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "tensor '%s' is %s with %" PRIu64 " bytes, announced as "
			"%s with %" PRIu64 " bytes", name, ckpt_dtype_name(t->dtype), t->nbytes, ckpt_dtype_name(e->dtype),
			e->nbytes);
	if (e->nbytes)
		CKPT_TRY(ckpt_io_pwrite(fw->io, t->data, e->nbytes, fw->data_start + e->offset));
	e->written = 1;
	return CKPT_OK;
}

int ckpt__flat_add(ckpt_writer *w, flat_writer *fw, const char *name, const ckpt_tensor *t, int ftype,
	int (*begin)(ckpt_writer *w))
{
	if (!fw->planned)
		return ckpt__flat_stage(fw, w->path, name, t, ftype);
	if (!fw->started)
		CKPT_TRY(begin(w));
	return ckpt__flat_put(w, fw, name, t);
}

/* Sync, close and rename the temporary into place; removes it on failure. */
static int finish(ckpt_writer *w, flat_writer *fw, int rc)
{
	if (rc == CKPT_OK && !w->opts.no_fsync)
		rc = ckpt_io_sync(fw->io);
	int crc = ckpt_io_close(fw->io);
	fw->io = NULL;
	if (rc == CKPT_OK)
		rc = crc;
	if (rc == CKPT_OK)
		rc = ckpt__vfs_publish(w->vfs, fw->tmp, w->path);
	if (rc == CKPT_OK && !w->opts.no_fsync) {
		char *dir = ckpt__path_dir(w->path);
		rc = dir ? ckpt_vfs_sync_dir(w->vfs, dir) : CKPT_ENOMEM;
		ckpt__free(dir);
	}
	if (rc < 0 && strcmp(fw->tmp, w->path) != 0) {
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		w->vfs->methods->remove(w->vfs, fw->tmp);
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	return rc;
}

/* The zeros between the header and the data, between entries (alignment) and at the end. */
static int zero_gaps(const flat_writer *fw, uint64_t hlen)
{
	uint64_t end = hlen;
	for (size_t i = 0; i < fw->n; i++) {
		uint64_t at = fw->data_start + fw->e[i].offset;
		CKPT_TRY(zero_fill(fw->io, end, at));
		end = at + fw->e[i].nbytes;
	}
	return zero_fill(fw->io, end, fw->total);
}

int ckpt__flat_finish(ckpt_writer *w, flat_writer *fw)
{
	int rc = CKPT_OK;
	if (!fw->started)
		return ckpt__fail(CKPT_EINVAL, w->path, NULL, -1, "internal: flat writer not started");
	for (size_t i = 0; i < fw->n && rc == CKPT_OK; i++)
		if (!fw->e[i].written)
			rc = ckpt__fail(CKPT_EINVAL, w->path, fw->e[i].name, -1, "tensor '%s' was announced but never added",
				fw->e[i].name);
	if (rc == CKPT_OK)
		rc = zero_gaps(fw, fw->hlen);
	return finish(w, fw, rc);
}

int ckpt__flat_commit(ckpt_writer *w, flat_writer *fw, const void *head, size_t hlen, uint64_t data_start,
	uint64_t total)
{
	int rc = ckpt__flat_begin(w, fw, head, hlen, data_start, total);
	if (rc < 0 && !fw->io)
		return rc;
	for (size_t i = 0; i < fw->n && rc == CKPT_OK; i++)
		if (fw->e[i].nbytes)
			rc = ckpt_io_pwrite(fw->io, fw->e[i].data, fw->e[i].nbytes, data_start + fw->e[i].offset);
	if (rc == CKPT_OK)
		rc = zero_gaps(fw, hlen);
	return finish(w, fw, rc);
}

/*
 * The flat writers' staging and commit. Tensors are copied when added (the
 * header, which comes first in the file, is known only once all are in),
 * then written in one pass to a temporary sibling of the target, synced and
 * renamed over it: a failed or abandoned writer leaves the old file intact.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "flat.h"

int ckpt__flat_stage(flat_writer *fw, const char *path, const char *name, const ckpt_tensor *t, int ftype)
{
	flat_entry *e;
	if (t->dtype == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EUNSUPPORTED, path, name, -1, "string tensors have no flat-format dtype");
	for (size_t i = 0; i < fw->n; i++)
		if (strcmp(fw->e[i].name, name) == 0)
			return ckpt__fail(CKPT_EINVAL, path, name, -1, "tensor '%s' added twice", name);
	if (fw->n == fw->cap) {
		size_t nc = fw->cap ? fw->cap * 2 : 16;
		flat_entry *ne = ckpt__realloc(fw->e, nc * sizeof(*ne));
		if (!ne)
			return CKPT_ENOMEM;
		fw->e = ne;
		fw->cap = nc;
	}
	e = &fw->e[fw->n];
	memset(e, 0, sizeof(*e));
	e->name = ckpt__strdup(name);
	e->data = ckpt__malloc(t->nbytes ? t->nbytes : 1);
	if (!e->name || !e->data) {
		ckpt__free(e->name);
		ckpt__free(e->data);
		return CKPT_ENOMEM;
	}
	if (t->nbytes)
		memcpy(e->data, t->data, t->nbytes);
	e->dtype = t->dtype;
	e->shape = t->shape;
	e->nbytes = t->nbytes;
	e->ftype = ftype;
	fw->n++;
	return CKPT_OK;
}

void ckpt__flat_writer_free(flat_writer *fw)
{
	for (size_t i = 0; i < fw->n; i++) {
		ckpt__free(fw->e[i].name);
		ckpt__free(fw->e[i].data);
	}
	ckpt__free(fw->e);
	memset(fw, 0, sizeof(*fw));
}

static int write_all(ckpt_io *io, const flat_writer *fw, const void *head, size_t hlen, uint64_t data_start,
	uint64_t total)
{
	static const unsigned char zeros[64];
	uint64_t end = hlen;
	CKPT_TRY(ckpt_io_pwrite(io, head, hlen, 0));
	/* entries come in offset order from the layouts; pad the gaps (GGUF alignment) */
	for (size_t i = 0; i < fw->n; i++) {
		uint64_t at = data_start + fw->e[i].offset;
		while (end < at) {
			size_t k = at - end < sizeof(zeros) ? (size_t)(at - end) : sizeof(zeros);
			CKPT_TRY(ckpt_io_pwrite(io, zeros, k, end));
			end += k;
		}
		if (fw->e[i].nbytes)
			CKPT_TRY(ckpt_io_pwrite(io, fw->e[i].data, fw->e[i].nbytes, at));
		end = at + fw->e[i].nbytes;
	}
	while (end < total) {
		size_t k = total - end < sizeof(zeros) ? (size_t)(total - end) : sizeof(zeros);
		CKPT_TRY(ckpt_io_pwrite(io, zeros, k, end));
		end += k;
	}
	return CKPT_OK;
}

int ckpt__flat_commit(ckpt_writer *w, const flat_writer *fw, const void *head, size_t hlen, uint64_t data_start,
	uint64_t total)
{
	static _Thread_local unsigned seq;
	char *tmp = ckpt__asprintf("%s.tmp%ld_%u_%u", w->path, (long)getpid(), (unsigned)time(NULL), ++seq);
	ckpt_io *io = NULL;
	int rc;
	if (!tmp)
		return CKPT_ENOMEM;
	rc = ckpt_vfs_open(w->vfs, tmp, CKPT_IO_WRITE, &io);
	if (rc == CKPT_OK) {
		rc = write_all(io, fw, head, hlen, data_start, total);
		if (rc == CKPT_OK && !w->opts.no_fsync)
			rc = ckpt_io_sync(io);
		int crc = ckpt_io_close(io);
		if (rc == CKPT_OK)
			rc = crc;
		if (rc == CKPT_OK)
			rc = ckpt_vfs_rename(w->vfs, tmp, w->path);
		if (rc == CKPT_OK && !w->opts.no_fsync) {
			char *dir = ckpt__path_dir(w->path);
			rc = dir ? ckpt_vfs_sync_dir(w->vfs, dir) : CKPT_ENOMEM;
			ckpt__free(dir);
		}
		if (rc < 0) {
			ckpt__error_slot slot = { 0 };
			ckpt__error_capture(&slot);
			w->vfs->methods->remove(w->vfs, tmp);
			ckpt__error_raise(&slot);
			ckpt__error_slot_clear(&slot);
		}
	}
	ckpt__free(tmp);
	return rc;
}

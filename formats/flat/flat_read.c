/*
 * What the two flat readers share once a file is open: tensors are
 * contiguous byte ranges of one file (read_into is one pread) and the state
 * starts with a flat_reader (flat.h).
 */
#include "flat.h"

int ckpt__flat_read_into(ckpt_reader *r, size_t i, void *dst, size_t n)
{
	flat_reader *fr = r->state;
	return n ? ckpt_io_read_exact(fr->io, dst, n, (uint64_t)r->vars[i].offset) : CKPT_OK;
}

void ckpt__flat_close(ckpt_reader *r)
{
	flat_reader *fr = r->state;
	if (!fr)
		return;
	ckpt_io_close(fr->io);
	for (size_t i = 0; i < fr->n; i++)
		ckpt__free(fr->names[i]);
	ckpt__free(fr->names);
	ckpt__free(r->vars);
	r->vars = NULL;
	ckpt__free(fr); /* the format's state, whose first member it is */
	r->state = NULL;
}

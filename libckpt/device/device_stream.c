/*
 * The pinned staging ring of device restores (device_stream.h).
 *
 * Row ranges of an entry are read with ckpt__reader_read_rows (the backend
 * reads only those bytes and records each range's crc32c), so a value of any
 * size passes through the two halves: read range k into half k % 2, enqueue
 * its host-to-device copy, read range k + 1 into the other half while it
 * runs, then synchronize before that half's copy is enqueued (which also
 * frees the half for range k + 2). An entry of rank 0 is read whole through
 * a half; one whose single row exceeds a half, through pinned memory of its
 * size.
 */
#include <string.h>
#include "device_stream.h"
#include "reader/format_registry.h"

void ckpt__ring_free(ckpt__ring *ring)
{
	if (ring->m && ring->base)
		ckpt__mem_pinned_free(ring->m, ring->base, 2 * ring->half);
	ring->m = NULL;
	ring->base = NULL;
	ring->half = 0;
}

static int ring_for(ckpt__ring *ring, ckpt__mem *m, const char *name)
{
	if (ring->m == m && ring->base)
		return CKPT_OK;
	size_t want = ring->want;
	ckpt__ring_free(ring);
	ring->want = want;
	/* an 810-byte checkpoint needs no 64 MiB of pinned memory: halves no larger than its largest value */
	size_t half = m->staging_bytes / 2;
	if (want && want < half)
		half = (want + 63) / 64 * 64;
	void *p;
	CKPT_TRY(ckpt__mem_pinned_alloc(m, &p, 2 * half, name));
	ring->m = m;
	ring->base = p;
	ring->half = half;
	return CKPT_OK;
}

/* A value that cannot go by rows: whole, through a half (or pinned memory of its size), checked by the reader. */
static int stream_whole(ckpt__ring *ring, ckpt__mem *m, ckpt_reader *rd, size_t entry, void *dst, size_t n,
	const char *name)
{
	void *tmp = ring->base;
	if (n > ring->half)
		CKPT_TRY(ckpt__mem_pinned_alloc(m, &tmp, n, name));
	int rc = ckpt_reader_read_into(rd, entry, tmp, n);
	if (rc == CKPT_OK)
		rc = ckpt__mem_h2d(m, 0, dst, tmp, n, name);
	int src = ckpt__mem_sync(m, 0, name);
	if (tmp != ring->base)
		ckpt__mem_pinned_free(m, tmp, n);
	return rc < 0 ? rc : src;
}

int ckpt__ring_stream(ckpt__ring *ring, ckpt__mem *m, ckpt_reader *rd, size_t entry, void *dst, size_t n,
	const char *name)
{
	if (n == 0)
		return CKPT_OK;
	const ckpt_var_info *vi = ckpt_reader_var(rd, entry);
	int64_t rows = vi->shape.rank >= 1 ? vi->shape.dims[0] : 0;
	size_t rowbytes = rows > 0 ? n / (size_t)rows : n;
	CKPT_TRY(ring_for(ring, m, name));
	/* without range reads each piece would read the whole entry: read it once */
	if (rows <= 0 || rowbytes > ring->half || rowbytes * (size_t)rows != n || !rd->fmt->read_rows)
		return stream_whole(ring, m, rd, entry, dst, n, name);
	int64_t per = (int64_t)(ring->half / rowbytes);
	ckpt__row_pieces pieces = { 0 };
	int rc = CKPT_OK, pending = 0;
	unsigned k = 0;
	for (int64_t row = 0; row < rows && rc == CKPT_OK; row += per, k++) {
		int64_t nr = rows - row < per ? rows - row : per;
		size_t len = (size_t)nr * rowbytes;
		unsigned char *half = ring->base + (size_t)(k % 2) * ring->half;
		/* this read overlaps the other half's copy in flight */
		rc = ckpt__reader_read_rows(rd, entry, row, nr, half, len, &pieces);
		if (rc == CKPT_OK && pending)
			rc = ckpt__mem_sync(m, 0, name);
		if (rc == CKPT_OK)
			rc = ckpt__mem_h2d(m, 0, (unsigned char *)dst + (size_t)row * rowbytes, half, len, name);
		pending = rc == CKPT_OK;
	}
	/* nothing stays in flight on return, success or not */
	int src = ckpt__mem_sync(m, 0, name);
	if (rc == CKPT_OK)
		rc = src;
	if (rc == CKPT_OK && pieces.n)
		rc = ckpt__row_pieces_verify(rd, pieces.p, pieces.n);
	ckpt__free(pieces.p);
	return rc;
}

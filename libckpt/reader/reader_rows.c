/*
 * Row-range reads and partitioned writes through the backend table
 * (formats/format.h: read_rows, writer_add_partitioned), and the check of
 * the checksums of entries read in pieces: crc32c(A || B) follows from
 * crc32c(A), crc32c(B) and |B|, so pieces read by different parts (or
 * processes) verify the whole entry without anyone reading all of it.
 */
#include <stdlib.h>
#include <string.h>
#include "reader/format_registry.h"

int ckpt__row_pieces_push(ckpt__row_pieces *ps, uint64_t entry, uint64_t off, uint64_t len, uint32_t crc)
{
	if (ps->n == ps->cap) {
		size_t nc = ps->cap ? ps->cap * 2 : 8;
		ckpt__row_piece *np = ckpt__realloc(ps->p, nc * sizeof(*np));
		if (!np)
			return CKPT_ENOMEM;
		ps->p = np;
		ps->cap = nc;
	}
	ps->p[ps->n++] = (ckpt__row_piece){ entry, off, len, crc, 0 };
	return CKPT_OK;
}

static int cmp_piece(const void *a, const void *b)
{
	const ckpt__row_piece *x = a, *y = b;
	if (x->entry != y->entry)
		return x->entry < y->entry ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return (x->len > y->len) - (x->len < y->len);
}

int ckpt__row_pieces_verify(ckpt_reader *r, ckpt__row_piece *p, size_t n)
{
	if (n == 0)
		return CKPT_OK; /* no pieces (p may be NULL: qsort must not see it) */
	qsort(p, n, sizeof(*p), cmp_piece);
	for (size_t i = 0; i < n;) {
		uint64_t e = p[i].entry;
		if (e >= ckpt_reader_num_entries(r))
			return ckpt__fail(CKPT_EINVAL, ckpt_reader_path(r), NULL, -1, "row piece of entry %llu out of range",
				(unsigned long long)e);
		const ckpt_var_info *v = ckpt_reader_var(r, (size_t)e);
		uint64_t end = 0;
		uint32_t crc = 0;
		for (; i < n && p[i].entry == e; i++) {
			if (i > 0 && p[i - 1].entry == e && p[i].off == p[i - 1].off && p[i].len == p[i - 1].len) {
				if (p[i].crc != p[i - 1].crc)
					return ckpt__fail(CKPT_ECHECKSUM, ckpt_reader_path(r), v->name, v->offset,
						"bytes [%llu, %llu) of the entry read twice with different crc32c 0x%08x / 0x%08x",
						(unsigned long long)p[i].off, (unsigned long long)(p[i].off + p[i].len), p[i - 1].crc,
						p[i].crc);
				continue;
			}
			if (p[i].off != end)
				return ckpt__fail(CKPT_EINVAL, ckpt_reader_path(r), v->name, v->offset,
					"the parts restored cover bytes up to %llu of the entry, then from %llu: every process "
					"must restore the same partitioned variables", (unsigned long long)end,
					(unsigned long long)p[i].off);
			crc = ckpt__crc32c_combine(crc, p[i].crc, p[i].len);
			end += p[i].len;
		}
		if (end != v->nbytes)
			return ckpt__fail(CKPT_EINVAL, ckpt_reader_path(r), v->name, v->offset,
				"the parts restored cover %llu of the entry's %llu bytes: every process must restore the "
				"same partitioned variables", (unsigned long long)end, (unsigned long long)v->nbytes);
		if (v->has_crc32c && crc != v->crc32c)
			return ckpt__fail(CKPT_ECHECKSUM, ckpt_reader_path(r), v->name, v->offset,
				"crc32c mismatch: want 0x%08x, got 0x%08x (%llu bytes read in row ranges)", v->crc32c, crc,
				(unsigned long long)v->nbytes);
	}
	return CKPT_OK;
}

int ckpt__reader_read_rows(ckpt_reader *r, size_t i, int64_t row0, int64_t nrows, void *dst, size_t n,
	ckpt__row_pieces *pieces)
{
	if (i >= ckpt_reader_num_entries(r))
		return ckpt__fail(CKPT_EINVAL, ckpt_reader_path(r), NULL, -1, "entry %zu out of range", i);
	const ckpt_var_info *v = ckpt_reader_var(r, i);
	uint64_t rowbytes = 0;
	if (v->shape.rank < 1 || v->dtype == CKPT_DT_STRING || !ckpt_dtype_valid(v->dtype))
		return ckpt__fail(CKPT_EUNSUPPORTED, ckpt_reader_path(r), v->name, -1,
			"rows of a %s tensor of rank %d cannot be read", ckpt_dtype_name(v->dtype), v->shape.rank);
	ckpt_shape row = v->shape;
	row.dims[0] = 1;
	CKPT_TRY(ckpt_shape_nbytes(&rowbytes, &row, v->dtype));
	if (row0 < 0 || nrows < 0 || row0 > v->shape.dims[0] || nrows > v->shape.dims[0] - row0 ||
		(uint64_t)nrows * rowbytes != n)
		return ckpt__fail(CKPT_EINVAL, ckpt_reader_path(r), v->name, -1,
			"rows [%lld, %lld) of a tensor of %lld rows into %zu bytes (%llu per row)", (long long)row0,
			(long long)(row0 + nrows), (long long)v->shape.dims[0], n, (unsigned long long)rowbytes);
	if (r->fmt->read_rows)
		return r->fmt->read_rows(r, i, row0, nrows, dst, n, pieces);
	/* no range reads in this format: the whole tensor, verified, then the rows */
	ckpt_tensor *t = NULL;
	CKPT_TRY(ckpt_reader_read(&t, r, i));
	if (n)
		memcpy(dst, (const unsigned char *)t->data + (uint64_t)row0 * rowbytes, n);
	ckpt_tensor_free(t);
	return CKPT_OK;
}

int ckpt__writer_add_partitioned(ckpt_writer *w, const char *name, ckpt_dtype dt, const ckpt_shape *full,
	int nparts, const int64_t *row0, const int64_t *rows, const void *const *data)
{
	if (!w->fmt->writer_add_partitioned)
		return ckpt__fail(CKPT_EUNSUPPORTED, w->path, name, -1,
			"the %s format has no partitioned variables: save them as a TensorBundle (tf-bundle)",
			w->fmt->name);
	return w->fmt->writer_add_partitioned(w, name, dt, full, nparts, row0, rows, data);
}

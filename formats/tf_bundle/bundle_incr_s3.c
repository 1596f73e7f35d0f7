/*
 * Incremental saves on S3: the new checkpoint's data objects are complete,
 * and the bytes it shares with the last committed save are copied by the
 * server (storage/s3/s3_copy.c), conditional on the ETag each of that
 * save's data objects had after its commit: a source replaced or deleted
 * since answers 412/404 and those bytes are uploaded from memory instead.
 *
 *   shard 0        what changed; a changed value of TFB_INCR_MIN bytes or
 *                  more block by block, runs of blocks equal to the last
 *                  save's copied by UploadPartCopy
 *   shards 1..F    one per non-empty frozen shard of the last save: a
 *                  CopyObject of it when every value in it is still clean,
 *                  else its clean values by UploadPartCopy
 *   shard F+1      the other clean values (they were in the last save's
 *                  shard 0), by UploadPartCopy; maybe empty
 *
 * Without rename every data object is written under its final name, which
 * holds the shard count: the count is fixed when the save opens, from the
 * last save's layout, so a shard that ends up with nothing is an empty
 * object (TensorFlow and our reader open a data file only for its entries).
 *
 * S3's minimum part (5 MiB, all parts but the last) decides the grouping:
 * a reusable range is copied only where every part stays >= 5 MiB. When the
 * part being filled holds f bytes, 0 < f < 5 MiB, the range's first
 * 5 MiB - f bytes are uploaded from memory to complete it; what is left is
 * copied in parts of part_size bytes, the last taking the rest (between
 * 5 MiB and part_size + 5 MiB), if it is 5 MiB or more, else uploaded.
 * Contiguous clean values are one range. So a changed run costs its bytes
 * rounded up to at most 5 MiB, and an unchanged run under 5 MiB is
 * uploaded: 5 % of an embedding changed in one contiguous range is cheap,
 * the same 5 % spread over every 5 MiB is a full upload.
 */
#include <stdlib.h>
#include <string.h>
#include "bundle_incr.h"

typedef struct seg {           /* bytes in memory, one of the pieces of a range */
	const unsigned char *p;
	uint64_t n;
} seg;

/* Visit [from, from + len) of the concatenation of sg in pieces. */
#define FOR_PIECES(sg, ns, from, len, PTR, N, BODY) \
	do { \
		uint64_t at_ = 0, lo_ = (from), hi_ = (from) + (len); \
		for (size_t i_ = 0; i_ < (ns) && at_ < hi_; at_ += (sg)[i_].n, i_++) { \
			uint64_t a_ = lo_ > at_ ? lo_ : at_, b_ = hi_ < at_ + (sg)[i_].n ? hi_ : at_ + (sg)[i_].n; \
			if (a_ >= b_) \
				continue; \
			const unsigned char *PTR = (sg)[i_].p + (a_ - at_); \
			uint64_t N = b_ - a_; \
			BODY \
		} \
	} while (0)

static int append_mem(wshard *s, const seg *sg, size_t ns, uint64_t from, uint64_t len)
{
	int rc = CKPT_OK;
	FOR_PIECES(sg, ns, from, len, p, n, {
		for (uint64_t d = 0; d < n && rc == CKPT_OK;) {
			size_t k = n - d > (1u << 30) ? (1u << 30) : (size_t)(n - d);
			rc = tfb_shard_append(s, p + d, k);
			d += k;
		}
		if (rc < 0)
			return rc;
	});
	return rc;
}

static uint32_t crc_mem(const seg *sg, size_t ns, uint64_t from, uint64_t len)
{
	uint32_t c = 0;
	FOR_PIECES(sg, ns, from, len, p, n, { c = ckpt_crc32c_extend(c, p, (size_t)n); });
	return c;
}

/*
 * n bytes in memory (sg), equal to [src_off, src_off + n) of the last
 * save's data object f, appended to s: copied by the server where S3's part
 * sizes allow (see the top of the file), uploaded from memory elsewhere and
 * after a refused copy (the object is then not asked again in this save).
 */
static int reuse(tfb_incr *x, wshard *s, int f, uint64_t src_off, const seg *sg, size_t ns, uint64_t n)
{
	const ibase *b = x->base;
	if (!b || f < 0 || f >= b->nf || x->bad[f] || !b->f[f].etag[0] || src_off + n > b->f[f].size ||
		n < CKPT__S3_MIN_PART)
		return append_mem(s, sg, ns, 0, n);
	CKPT_TRY(tfb_shard_flush(s));
	uint64_t ps, open = ckpt__io_open_part(s->io, &ps);
	if (open == UINT64_MAX)
		return append_mem(s, sg, ns, 0, n);
	uint64_t head = open && open < CKPT__S3_MIN_PART ? CKPT__S3_MIN_PART - open : 0;
	if (n - head < CKPT__S3_MIN_PART)
		return append_mem(s, sg, ns, 0, n);
	if (head) {
		CKPT_TRY(append_mem(s, sg, ns, 0, head));
		CKPT_TRY(tfb_shard_flush(s));
	}
	/* parts of part_size, the last one taking the rest; sent a batch at a time */
	uint64_t done = head;
	enum { BATCH = 64 };
	uint64_t len[BATCH];
	uint32_t crc[BATCH];
	while (done < n) {
		size_t k = 0;
		for (uint64_t at = done; at < n && k < BATCH; k++) {
			uint64_t rem = n - at;
			len[k] = rem >= ps + CKPT__S3_MIN_PART ? ps : rem;
			crc[k] = crc_mem(sg, ns, at, len[k]);
			at += len[k];
		}
		size_t got = 0;
		int rc = ckpt__io_copy_ranges(s->io, b->f[f].path, b->f[f].etag, src_off + done, len, crc, k, &got);
		if (rc < 0)
			return rc;
		for (size_t i = 0; i < got; i++) {
			s->flushed += len[i];
			s->pos += len[i];
			x->reused += len[i];
			done += len[i];
		}
		if (got < k) {
			x->bad[f] = 1; /* refused: the source is gone or replaced, the rest is uploaded */
			break;
		}
	}
	return done < n ? append_mem(s, sg, ns, done, n - done) : CKPT_OK;
}

int tfb_incr_s3_reuse(tfb_incr *x, wshard *s, const tfb_ientry *b, const void *data)
{
	seg sg = { data, b->size };
	return reuse(x, s, b->shard, b->offset, &sg, 1, b->size);
}

int tfb_incr_s3_open(ckpt_writer *w, tfb_writer *s, tfb_incr *x)
{
	const ibase *b = x->base;
	if (!b)
		return 1; /* the first save: one shard, its ETag recorded at the commit */
	/* a bundle already at this prefix would see our copied objects before its index is retired */
	int older = ckpt_vfs_exists(NULL, w->vfs, s->index_final);
	if (older != 0)
		return older < 0 ? older : 0;
	int nf = 0;
	for (int k = 1; k < b->nf; k++)
		nf += b->f[k].nentries > 0;
	int n = nf + 2;
	if (n > CKPT_MAX_SHARDS)
		return 0;
	wshard *nsh = ckpt__realloc(s->sh, (size_t)n * sizeof(*nsh));
	if (!nsh)
		return CKPT_ENOMEM;
	s->sh = nsh;
	if (!(x->slot = ckpt__malloc((size_t)n * sizeof(int))))
		return CKPT_ENOMEM;
	x->slot[0] = -2;
	for (int k = 1, j = 1; k < b->nf; k++)
		if (b->f[k].nentries > 0)
			x->slot[j++] = k;
	x->slot[n - 1] = -1;
	/* shard 0 was opened as one of one, nothing written yet: named again */
	wshard *z = &s->sh[0];
	ckpt__io_abandon(z->io);
	int rc = ckpt_io_close(z->io);
	z->io = NULL;
	char *fin = tfb_data_path(w->path, 0, n), *tmp = fin ? ckpt__vfs_temp_name(w->vfs, fin, "incr") : NULL;
	if (!tmp) {
		ckpt__free(fin);
		return CKPT_ENOMEM;
	}
	ckpt__free(z->final);
	ckpt__free(z->tmp);
	z->final = fin;
	z->tmp = tmp;
	if (rc == CKPT_OK)
		rc = ckpt_vfs_open(&z->io, w->vfs, z->tmp, CKPT_IO_WRITE);
	for (int j = 1; j < n && rc == CKPT_OK; j++) {
		wshard *sh = &s->sh[j];
		memset(sh, 0, sizeof(*sh));
		sh->final = tfb_data_path(w->path, j, n);
		sh->tmp = sh->final ? ckpt__vfs_temp_name(w->vfs, sh->final, "incr") : NULL;
		s->nshards = j + 1; /* freed with the writer from here on */
		if (!sh->tmp)
			rc = CKPT_ENOMEM;
	}
	return rc < 0 ? rc : 1;
}

int tfb_incr_s3_put(tfb_incr *x, wshard *s, const tfb_ientry *b, const ckpt_tensor *t, uint32_t *bc, uint32_t *crc)
{
	const unsigned char *p = t->data;
	uint64_t n = t->nbytes;
	size_t nb = (size_t)((n + TFB_INCR_BLOCK - 1) / TFB_INCR_BLOCK);
	uint32_t c = 0;
	for (size_t i = 0; i < nb; i++) {
		uint64_t a = (uint64_t)i * TFB_INCR_BLOCK;
		size_t len = n - a < TFB_INCR_BLOCK ? (size_t)(n - a) : TFB_INCR_BLOCK;
		bc[i] = ckpt_crc32c_extend(0, p + a, len);
		c = i ? ckpt__crc32c_combine(c, bc[i], len) : bc[i];
	}
	const uint32_t *old = b && b->blocks ? b->blocks : NULL;
	for (size_t i = 0; i < nb;) {
		/* a run of blocks that all changed, or all did not */
		int same = old && old[i] == bc[i];
		size_t j = i + 1;
		while (j < nb && (old && old[j] == bc[j]) == same)
			j++;
		uint64_t a = (uint64_t)i * TFB_INCR_BLOCK, e = (uint64_t)j * TFB_INCR_BLOCK < n ? (uint64_t)j * TFB_INCR_BLOCK : n;
		seg sg = { p + a, e - a };
		CKPT_TRY(same ? reuse(x, s, b->shard, b->offset + a, &sg, 1, e - a) : append_mem(s, &sg, 1, 0, e - a));
		i = j;
	}
	*crc = c;
	return CKPT_OK;
}

typedef struct src_ref {       /* a clean value by where it was in the last save */
	int shard;
	uint64_t offset;
	size_t i;                  /* in tfb_incr.p */
} src_ref;

/* by the last save's file, then offset: contiguous values there become one range */
static int cmp_src(const void *a, const void *b)
{
	const src_ref *x = a, *y = b;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return (x->offset > y->offset) - (x->offset < y->offset);
}

int tfb_incr_s3_place(ckpt_writer *w, tfb_writer *s)
{
	tfb_incr *x = s->incr;
	const ibase *b = x->base;
	int n = s->nshards, g = n - 1;
	if (!b || n < 2)
		return CKPT_OK; /* a first save defers nothing */
	int *to = ckpt__malloc((size_t)b->nf * sizeof(int));     /* base file -> new shard */
	size_t *count = ckpt__calloc((size_t)b->nf, sizeof(size_t));
	unsigned char *copied = ckpt__calloc((size_t)n, 1);      /* new shard: a CopyObject of its base file */
	src_ref *order = ckpt__malloc((x->np ? x->np : 1) * sizeof(src_ref));
	seg *sg = ckpt__malloc((x->np ? x->np : 1) * sizeof(seg));
	int rc = to && count && copied && order && sg ? CKPT_OK : CKPT_ENOMEM;
	for (int f = 0; rc == CKPT_OK && f < b->nf; f++)
		to[f] = g;
	for (int j = 1; rc == CKPT_OK && j < g; j++)
		to[x->slot[j]] = j;
	for (size_t i = 0; rc == CKPT_OK && i < x->np; i++)
		count[x->p[i].b->shard]++;
	/* a frozen shard every value of which is still clean: the same object, copied by the server */
	for (int j = 1; rc == CKPT_OK && j < g; j++) {
		int f = x->slot[j];
		if (count[f] == b->f[f].nentries && !x->bad[f] && b->f[f].size <= CKPT__S3_MAX_PART) {
			rc = ckpt__vfs_copy_object(w->vfs, b->f[f].path, b->f[f].etag, s->sh[j].final);
			if (rc == CKPT_OK) {
				copied[j] = 1;
				s->sh[j].pos = s->sh[j].flushed = b->f[f].size;
				x->reused += b->f[f].size;
			} else if (rc == CKPT__DECLINED) {
				x->bad[f] = 1;
				rc = CKPT_OK;
			}
		}
		if (rc == CKPT_OK && !copied[j])
			rc = ckpt_vfs_open(&s->sh[j].io, w->vfs, s->sh[j].tmp, CKPT_IO_WRITE);
	}
	if (rc == CKPT_OK)
		rc = ckpt_vfs_open(&s->sh[g].io, w->vfs, s->sh[g].tmp, CKPT_IO_WRITE);
	for (size_t i = 0; rc == CKPT_OK && i < x->np; i++)
		order[i] = (src_ref){ x->p[i].b->shard, x->p[i].b->offset, i };
	if (rc == CKPT_OK && x->np)
		qsort(order, x->np, sizeof(*order), cmp_src);
	for (size_t i = 0; rc == CKPT_OK && i < x->np;) {
		const tfb_ientry *first = x->p[order[i].i].b;
		int t = to[first->shard];
		/* a run of values contiguous in the same base file */
		size_t j = i, ns = 0;
		uint64_t end = first->offset;
		while (j < x->np && x->p[order[j].i].b->shard == first->shard && x->p[order[j].i].b->offset == end) {
			const pending *p = &x->p[order[j].i];
			sg[ns++] = (seg){ p->data, p->b->size };
			end += p->b->size;
			j++;
		}
		uint64_t at = copied[t] ? first->offset : s->sh[t].pos;
		for (size_t k = i; k < j && rc == CKPT_OK; k++) {
			const pending *p = &x->p[order[k].i];
			wentry *e = &s->e[p->ei];
			e->shard = t;
			e->offset = at + (p->b->offset - first->offset);
			if (p->b->blocks && !(e->blocks = tfb_blocks_dup(p->b)))
				rc = CKPT_ENOMEM;
		}
		if (rc == CKPT_OK && !copied[t])
			rc = reuse(x, &s->sh[t], first->shard, first->offset, sg, ns, end - first->offset);
		i = j;
	}
	ckpt__free(to);
	ckpt__free(count);
	ckpt__free(copied);
	ckpt__free(order);
	ckpt__free(sg);
	return rc;
}

void tfb_incr_s3_record(ckpt_writer *w, ibase *b)
{
	/* committed already: a HEAD that fails leaves "" (that object is never copied from), not an error */
	ckpt__error_slot keep = { 0 };
	ckpt__error_capture(&keep);
	for (int k = 0; k < b->nf; k++) {
		uint64_t size = 0;
		if (ckpt__vfs_etag(w->vfs, b->f[k].path, b->f[k].etag, sizeof(b->f[k].etag), &size) == CKPT_OK)
			b->f[k].size = size;
		else
			b->f[k].etag[0] = '\0';
	}
	ckpt__error_raise(&keep);
	ckpt__error_slot_clear(&keep);
}

/*
 * Reading the SSTable in P.index (leveldb table format, TF flavour).
 *
 *   [data block][trailer] ... [metaindex block][trailer] [index block][trailer] [footer]
 *   trailer (5 bytes): u8 type (0 raw, 1 snappy), fixed32 Mask(crc32c(stored block ++ type))
 *   block:   entry* { varint32 shared, varint32 non_shared, varint32 value_len,
 *                     key_delta[non_shared], value[value_len] }
 *            fixed32 restarts[num_restarts], fixed32 num_restarts (>= 1)
 *   footer (48 bytes): varint64 metaindex.{offset,size}, varint64 index.{offset,size},
 *            zero padding to 40, fixed64 magic 0xdb4775248b80fb57 (LE)
 *   index block entries: separator key -> BlockHandle (varint64 offset, varint64 size)
 *
 * Every length and offset is checked against the file before use; every
 * error names the index file and the byte offset.
 */
#include <string.h>
#include <snappy-c.h>
#include "tfb.h"

typedef struct walk {
	const unsigned char *file;
	size_t fsize;
	const char *path;
	tfb_buf key;       /* current key (prefix-decompressed) */
	tfb_buf prev;      /* previous key across all data blocks */
	int have_prev;
	tfb_buf scratch;   /* decompressed block */
} walk;

/* A block's contents, verified and (if needed) decompressed. */
typedef struct block {
	const unsigned char *p;
	size_t n;
	uint64_t off;      /* file offset of the stored block */
	int compressed;
} block;

static int read_handle(const unsigned char **p, const unsigned char *end, uint64_t *off, uint64_t *size)
{
	size_t k = tfb_varint_get(*p, end, off);
	if (!k)
		return -1;
	*p += k;
	k = tfb_varint_get(*p, end, size);
	if (!k)
		return -1;
	*p += k;
	return 0;
}

static int load_block(walk *w, uint64_t off, uint64_t size, const char *what, block *out)
{
	uint64_t end;
	if (ckpt__add_u64(off, size, &end) || ckpt__add_u64(end, TFB_TRAILER_LEN, &end) ||
	    end > w->fsize - TFB_FOOTER_LEN)
		return ckpt__fail(CKPT_EFORMAT, w->path, NULL, (int64_t)off,
			"%s block handle out of range: offset %llu + size %llu + 5-byte trailer > %llu bytes before the footer",
			what, (unsigned long long)off, (unsigned long long)size,
			(unsigned long long)(w->fsize - TFB_FOOTER_LEN));
	if (size > CKPT_MAX_BLOCK_BYTES)
		return ckpt__fail(CKPT_ELIMIT, w->path, NULL, (int64_t)off,
			"%s block of %llu bytes exceeds the %llu-byte cap", what,
			(unsigned long long)size, (unsigned long long)CKPT_MAX_BLOCK_BYTES);
	const unsigned char *b = w->file + off;
	unsigned type = b[size];
	uint32_t want = ckpt_crc32c_unmask(tfb_get32(b + size + 1));
	uint32_t got = ckpt_crc32c_extend(ckpt_crc32c_extend(0, b, (size_t)size), b + size, 1);
	if (want != got)
		return ckpt__fail(CKPT_ECHECKSUM, w->path, NULL, (int64_t)(off + size),
			"%s block crc32c mismatch: want 0x%08x, got 0x%08x (block at offset %llu, %llu bytes)",
			what, want, got, (unsigned long long)off, (unsigned long long)size);
	out->off = off;
	if (type == 0) {
		out->p = b;
		out->n = (size_t)size;
		out->compressed = 0;
		return CKPT_OK;
	}
	if (type != 1)
		return ckpt__fail(CKPT_EUNSUPPORTED, w->path, NULL, (int64_t)(off + size),
			"%s block compression type %u: want 0 (none) or 1 (snappy)", what, type);
	size_t raw = 0;
	if (snappy_uncompressed_length((const char *)b, (size_t)size, &raw) != SNAPPY_OK)
		return ckpt__fail(CKPT_EFORMAT, w->path, NULL, (int64_t)off,
			"%s block: bad snappy header", what);
	if (raw > CKPT_MAX_BLOCK_BYTES)
		return ckpt__fail(CKPT_ELIMIT, w->path, NULL, (int64_t)off,
			"%s block decompresses to %zu bytes, over the %llu-byte cap", what, raw,
			(unsigned long long)CKPT_MAX_BLOCK_BYTES);
	w->scratch.len = 0;
	CKPT_TRY(tfb_buf_reserve(&w->scratch, raw ? raw : 1));
	size_t got_len = raw;
	if (snappy_uncompress((const char *)b, (size_t)size, (char *)w->scratch.p, &got_len) != SNAPPY_OK ||
	    got_len != raw)
		return ckpt__fail(CKPT_EFORMAT, w->path, NULL, (int64_t)off,
			"%s block: corrupt snappy data (%llu stored bytes, %zu expected raw bytes)",
			what, (unsigned long long)size, raw);
	w->scratch.len = raw;
	out->p = w->scratch.p;
	out->n = raw;
	out->compressed = 1;
	return CKPT_OK;
}

/* File offset to report for position `pos` inside block `b`. */
static int64_t blk_off(const block *b, size_t pos)
{
	return (int64_t)(b->compressed ? b->off : b->off + pos);
}

/*
 * Iterate the entries of one block. `fn` gets each entry; `check_order`
 * enforces strictly increasing keys against w->prev.
 */
static int walk_block(walk *w, const block *b, const char *what, int check_order, tfb_table_fn fn, void *ctx)
{
	if (b->n < 4)
		return ckpt__fail(CKPT_EFORMAT, w->path, NULL, blk_off(b, 0),
			"%s block too short: %zu bytes, need at least 4", what, b->n);
	uint32_t nrest = tfb_get32(b->p + b->n - 4);
	if (nrest == 0 || (uint64_t)nrest > (b->n - 4) / 4)
		return ckpt__fail(CKPT_EFORMAT, w->path, NULL, blk_off(b, b->n - 4),
			"%s block: bad restart count %u for a %zu-byte block", what, nrest, b->n);
	size_t limit = b->n - 4 - 4 * (size_t)nrest;
	const unsigned char *base = b->p, *p = b->p, *end = b->p + limit;
	w->key.len = 0;
	while (p < end) {
		size_t pos = (size_t)(p - base);
		uint64_t shared, non_shared, vlen;
		size_t k1 = tfb_varint_get(p, end, &shared);
		size_t k2 = k1 ? tfb_varint_get(p + k1, end, &non_shared) : 0;
		size_t k3 = k2 ? tfb_varint_get(p + k1 + k2, end, &vlen) : 0;
		if (!k3)
			return ckpt__fail(CKPT_EFORMAT, w->path, NULL, blk_off(b, pos),
				"%s block: bad varint in entry header", what);
		p += k1 + k2 + k3;
		if (shared > w->key.len)
			return ckpt__fail(CKPT_EFORMAT, w->path, NULL, blk_off(b, pos),
				"%s block: entry shares %llu key bytes, previous key has %zu", what,
				(unsigned long long)shared, w->key.len);
		if (non_shared > (uint64_t)(end - p) || vlen > (uint64_t)(end - p) - non_shared)
			return ckpt__fail(CKPT_EFORMAT, w->path, NULL, blk_off(b, pos),
				"%s block: entry of %llu key + %llu value bytes overruns the block (%zu bytes left)",
				what, (unsigned long long)non_shared, (unsigned long long)vlen, (size_t)(end - p));
		if (shared + non_shared > CKPT_MAX_NAME_LEN)
			return ckpt__fail(CKPT_ELIMIT, w->path, NULL, blk_off(b, pos),
				"%s block: key of %llu bytes exceeds the %d-byte cap", what,
				(unsigned long long)(shared + non_shared), CKPT_MAX_NAME_LEN);
		w->key.len = (size_t)shared;
		CKPT_TRY(tfb_buf_append(&w->key, p, (size_t)non_shared));
		p += non_shared;
		if (check_order) {
			if (w->have_prev) {
				size_t m = w->prev.len < w->key.len ? w->prev.len : w->key.len;
				int c = m ? memcmp(w->prev.p, w->key.p, m) : 0;
				if (c == 0 && w->prev.len == w->key.len)
					return ckpt__fail(CKPT_EFORMAT, w->path, NULL, blk_off(b, pos),
						"duplicate key '%.*s'", (int)(w->key.len > 200 ? 200 : w->key.len),
						(const char *)w->key.p);
				if (c > 0 || (c == 0 && w->prev.len > w->key.len))
					return ckpt__fail(CKPT_EFORMAT, w->path, NULL, blk_off(b, pos),
						"keys out of order: '%.*s' after '%.*s'",
						(int)(w->key.len > 200 ? 200 : w->key.len), (const char *)w->key.p,
						(int)(w->prev.len > 200 ? 200 : w->prev.len), (const char *)w->prev.p);
			}
			w->prev.len = 0;
			CKPT_TRY(tfb_buf_append(&w->prev, w->key.p, w->key.len));
			w->have_prev = 1;
		}
		CKPT_TRY(fn(ctx, w->key.p, w->key.len, p, (size_t)vlen, (uint64_t)blk_off(b, (size_t)(p - base))));
		p += vlen;
	}
	return CKPT_OK;
}

typedef struct index_ctx {
	walk *w;
	tfb_table_fn fn;
	void *ctx;
	uint64_t nblocks;
	tfb_buf handles; /* copied (offset,size) pairs: the index block lives in scratch-free memory */
} index_ctx;

static int on_index_entry(void *vctx, const unsigned char *key, size_t klen,
	const unsigned char *val, size_t vlen, uint64_t off)
{
	index_ctx *ic = vctx;
	(void)key; (void)klen;
	const unsigned char *p = val;
	uint64_t h[2];
	if (read_handle(&p, val + vlen, &h[0], &h[1]) < 0)
		return ckpt__fail(CKPT_EFORMAT, ic->w->path, NULL, (int64_t)off,
			"index block: bad block handle varint");
	ic->nblocks++;
	return tfb_buf_append(&ic->handles, h, sizeof(h));
}

int tfb_table_walk(const unsigned char *buf, size_t n, const char *path, tfb_table_fn fn, void *ctx)
{
	if (n < TFB_FOOTER_LEN)
		return ckpt__fail(CKPT_EFORMAT, path, NULL, 0,
			"index file too short: %zu bytes, a table footer needs %d", n, TFB_FOOTER_LEN);
	const unsigned char *foot = buf + n - TFB_FOOTER_LEN;
	uint64_t magic = (uint64_t)tfb_get32(foot + 40) | (uint64_t)tfb_get32(foot + 44) << 32;
	if (magic != TFB_TABLE_MAGIC)
		return ckpt__fail(CKPT_EFORMAT, path, NULL, (int64_t)(n - 8),
			"bad table magic: want 0x%016llx, got 0x%016llx (not a TensorBundle index, or truncated)",
			(unsigned long long)TFB_TABLE_MAGIC, (unsigned long long)magic);
	const unsigned char *p = foot;
	uint64_t meta_off, meta_size, idx_off, idx_size;
	if (read_handle(&p, foot + 40, &meta_off, &meta_size) < 0 ||
	    read_handle(&p, foot + 40, &idx_off, &idx_size) < 0)
		return ckpt__fail(CKPT_EFORMAT, path, NULL, (int64_t)(n - TFB_FOOTER_LEN),
			"bad block handle varint in the table footer");
	walk w;
	memset(&w, 0, sizeof(w));
	w.file = buf;
	w.fsize = n;
	w.path = path;
	block b;
	index_ctx ic;
	memset(&ic, 0, sizeof(ic));
	ic.w = &w;
	int rc = load_block(&w, meta_off, meta_size, "metaindex", &b);
	if (rc == CKPT_OK)
		rc = load_block(&w, idx_off, idx_size, "index", &b);
	if (rc == CKPT_OK)
		rc = walk_block(&w, &b, "index", 0, on_index_entry, &ic);
	const uint64_t *h = (const uint64_t *)(void *)ic.handles.p;
	for (uint64_t i = 0; rc == CKPT_OK && i < ic.nblocks; i++) {
		rc = load_block(&w, h[2 * i], h[2 * i + 1], "data", &b);
		if (rc == CKPT_OK)
			rc = walk_block(&w, &b, "data", 1, fn, ctx);
	}
	tfb_buf_free(&ic.handles);
	tfb_buf_free(&w.key);
	tfb_buf_free(&w.prev);
	tfb_buf_free(&w.scratch);
	return rc;
}

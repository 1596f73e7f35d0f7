/*
 * Writing the SSTable of P.index exactly as TensorFlow's table::TableBuilder
 * does (table_builder.cc, block_builder.cc, format.cc) with the options
 * BundleWriter uses: block_size 262144, restart interval 16 (1 in the index
 * block), no compression, empty metaindex. Layout: see sstable_read.c.
 *
 * Flush rules, in TableBuilder order:
 *   before Add (not the first): len(key)+len(value) >= 2*block_size -> flush;
 *   a pending index entry is emitted (key FindShortestSeparator(last, key))
 *   when the next data block receives its first entry;
 *   after Add: len(buf) + 4*len(restarts) + 4 >= block_size -> flush;
 *   Finish: flush, metaindex, pending index entry with FindShortSuccessor(last),
 *   index block, footer.
 */
#include <string.h>
#include "tfb.h"

typedef struct blockb {
	tfb_buf buf;
	tfb_buf restarts;   /* fixed32 each */
	size_t nrestarts;
	int counter;
	int interval;
	tfb_buf last;
	size_t nentries;
} blockb;

static int bb_reset(blockb *b)
{
	b->buf.len = 0;
	b->restarts.len = 0;
	b->nrestarts = 1;
	b->counter = 0;
	b->last.len = 0;
	b->nentries = 0;
	return tfb_buf_fixed32(&b->restarts, 0);
}

static void bb_free(blockb *b)
{
	tfb_buf_free(&b->buf);
	tfb_buf_free(&b->restarts);
	tfb_buf_free(&b->last);
}

static int bb_add(blockb *b, const unsigned char *key, size_t klen, const unsigned char *val, size_t vlen)
{
	size_t shared = 0;
	if (b->counter < b->interval) {
		size_t m = b->last.len < klen ? b->last.len : klen;
		while (shared < m && b->last.p[shared] == key[shared])
			shared++;
	} else {
		CKPT_TRY(tfb_buf_fixed32(&b->restarts, (uint32_t)b->buf.len));
		b->nrestarts++;
		b->counter = 0;
	}
	CKPT_TRY(tfb_buf_varint(&b->buf, shared));
	CKPT_TRY(tfb_buf_varint(&b->buf, klen - shared));
	CKPT_TRY(tfb_buf_varint(&b->buf, vlen));
	CKPT_TRY(tfb_buf_append(&b->buf, key + shared, klen - shared));
	CKPT_TRY(tfb_buf_append(&b->buf, val, vlen));
	b->last.len = 0;
	CKPT_TRY(tfb_buf_append(&b->last, key, klen));
	b->counter++;
	b->nentries++;
	return CKPT_OK;
}

static size_t bb_estimate(const blockb *b)
{
	return b->buf.len + b->restarts.len + 4;
}

/* Append the block (+ restarts) and its trailer to `out`; returns its handle. */
static int write_block(tfb_buf *out, blockb *b, uint64_t *off, uint64_t *size)
{
	CKPT_TRY(tfb_buf_append(&b->buf, b->restarts.p, b->restarts.len));
	CKPT_TRY(tfb_buf_fixed32(&b->buf, (uint32_t)b->nrestarts));
	*off = out->len;
	*size = b->buf.len;
	CKPT_TRY(tfb_buf_append(out, b->buf.p, b->buf.len));
	unsigned char trailer[5] = { 0 };
	uint32_t crc = ckpt_crc32c_extend(ckpt_crc32c_extend(0, b->buf.p, b->buf.len), trailer, 1);
	tfb_put32(trailer + 1, ckpt_crc32c_mask(crc));
	CKPT_TRY(tfb_buf_append(out, trailer, 5));
	return bb_reset(b);
}

void tfb_shortest_separator(tfb_buf *start, const unsigned char *limit, size_t llen)
{
	size_t m = start->len < llen ? start->len : llen, i = 0;
	while (i < m && start->p[i] == limit[i])
		i++;
	if (i >= m)
		return; /* one is a prefix of the other */
	unsigned char d = start->p[i];
	if (d < 0xff && d + 1 < limit[i]) {
		start->p[i]++;
		start->len = i + 1;
	}
}

void tfb_short_successor(tfb_buf *key)
{
	for (size_t i = 0; i < key->len; i++) {
		if (key->p[i] != 0xff) {
			key->p[i]++;
			key->len = i + 1;
			return;
		}
	}
}

static int add_index(blockb *index, tfb_buf *sep, uint64_t off, uint64_t size)
{
	unsigned char h[20];
	size_t k = tfb_varint_put(h, off);
	k += tfb_varint_put(h + k, size);
	return bb_add(index, sep->p ? sep->p : (const unsigned char *)"", sep->len, h, k);
}

int tfb_table_build(tfb_buf *out, const tfb_kv *kv, size_t n, size_t block_size)
{
	blockb data, index, meta;
	memset(&data, 0, sizeof(data));
	memset(&index, 0, sizeof(index));
	memset(&meta, 0, sizeof(meta));
	data.interval = TFB_RESTART_INTERVAL;
	meta.interval = TFB_RESTART_INTERVAL;
	index.interval = 1;
	tfb_buf last = { 0 };
	int pending = 0, rc;
	uint64_t poff = 0, psize = 0, moff, msize, ioff, isize;
	if ((rc = bb_reset(&data)) || (rc = bb_reset(&index)) || (rc = bb_reset(&meta)))
		goto done;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && kv[i].klen + kv[i].vlen >= 2 * block_size && data.nentries) {
			if ((rc = write_block(out, &data, &poff, &psize)))
				goto done;
			pending = 1;
		}
		if (pending && data.nentries == 0) {
			tfb_shortest_separator(&last, kv[i].key, kv[i].klen);
			if ((rc = add_index(&index, &last, poff, psize)))
				goto done;
			pending = 0;
		}
		last.len = 0;
		if ((rc = tfb_buf_append(&last, kv[i].key, kv[i].klen)) ||
		    (rc = bb_add(&data, kv[i].key, kv[i].klen, kv[i].val, kv[i].vlen)))
			goto done;
		if (bb_estimate(&data) >= block_size) {
			if ((rc = write_block(out, &data, &poff, &psize)))
				goto done;
			pending = 1;
		}
	}
	if (data.nentries) {
		if ((rc = write_block(out, &data, &poff, &psize)))
			goto done;
		pending = 1;
	}
	if ((rc = write_block(out, &meta, &moff, &msize)))
		goto done;
	if (pending) {
		tfb_short_successor(&last);
		if ((rc = add_index(&index, &last, poff, psize)))
			goto done;
	}
	if ((rc = write_block(out, &index, &ioff, &isize)))
		goto done;
	unsigned char foot[TFB_FOOTER_LEN] = { 0 };
	size_t k = tfb_varint_put(foot, moff);
	k += tfb_varint_put(foot + k, msize);
	k += tfb_varint_put(foot + k, ioff);
	tfb_varint_put(foot + k, isize);
	tfb_put32(foot + 40, (uint32_t)TFB_TABLE_MAGIC);
	tfb_put32(foot + 44, (uint32_t)(TFB_TABLE_MAGIC >> 32));
	rc = tfb_buf_append(out, foot, sizeof(foot));
done:
	bb_free(&data);
	bb_free(&index);
	bb_free(&meta);
	tfb_buf_free(&last);
	return rc;
}

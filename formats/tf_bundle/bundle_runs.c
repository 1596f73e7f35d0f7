/*
 * Batched reads of data files that lend no descriptor (object storage,
 * issue 24): one read per run of neighbouring entries instead of one per
 * entry.
 *
 * A remote file pays per request (a ranged GET's round trip), and its
 * pread of a large range is already split into part-sized requests sent in
 * parallel (io_s3.c). So the batch's entries are ordered by place, cut into
 * runs of entries that follow each other in a data file (gaps of up to
 * GAP bytes are read and dropped), each run at most RUN bytes, and each
 * run is read by one pread into a bounce buffer, then every entry in it is
 * crc-checked and copied out. A run of a single entry with a destination
 * is read straight into it. Each byte of the batch is read once, in about
 * total / RUN + entries larger than RUN reads. Extra memory: one RUN-sized
 * buffer (64 MiB, the reads in flight of the S3 defaults: 8 parts of 8 MiB).
 */
#include <stdlib.h>
#include <string.h>
#include "tfb.h"

#define RUN ((uint64_t)64 << 20)
#define GAP ((uint64_t)64 << 10)

static int by_place(const void *a, const void *b)
{
	const tfb_span *x = *(const tfb_span *const *)a, *y = *(const tfb_span *const *)b;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* One span too big for the buffer and with no destination: crc it RUN bytes at a time. */
static int crc_big(tfb_span *s, ckpt_io *io, const char *path, unsigned char *buf)
{
	uint32_t c = 0;
	for (uint64_t done = 0; done < s->n;) {
		size_t k = (size_t)(s->n - done < RUN ? s->n - done : RUN);
		int rc = ckpt_io_read_exact(io, buf, k, s->off + done);
		if (rc < 0) {
			ckpt__error_annotate(path, s->name);
			return rc;
		}
		c = ckpt_crc32c_extend(c, buf, k);
		done += k;
	}
	s->crc = c;
	return CKPT_OK;
}

/* Spans order[a..b) of one data file, contiguous up to gaps: one read, then crc and copy each. */
static int read_run(tfb_span **order, size_t a, size_t b, ckpt_io *io, const char *path, int verify,
	unsigned char **buf)
{
	tfb_span *first = order[a];
	if (b - a == 1 && (first->dst || first->n > RUN)) {
		if (!first->dst)
			return *buf || (*buf = ckpt__malloc(RUN)) ? crc_big(first, io, path, *buf) : CKPT_ENOMEM;
		int rc = ckpt_io_read_exact(io, first->dst, (size_t)first->n, first->off);
		if (rc < 0) {
			ckpt__error_annotate(path, first->name);
			return rc;
		}
		if (verify)
			first->crc = ckpt_crc32c_extend(0, first->dst, (size_t)first->n);
		return CKPT_OK;
	}
	uint64_t base = first->off, end = order[b - 1]->off + order[b - 1]->n;
	if (!*buf && !(*buf = ckpt__malloc(RUN)))
		return CKPT_ENOMEM;
	int rc = ckpt_io_read_exact(io, *buf, (size_t)(end - base), base);
	if (rc < 0) {
		ckpt__error_annotate(path, first->name);
		return rc;
	}
	for (size_t k = a; k < b; k++) {
		tfb_span *s = order[k];
		const unsigned char *src = *buf + (s->off - base);
		if (verify)
			s->crc = ckpt_crc32c_extend(0, src, (size_t)s->n);
		if (s->dst)
			memcpy(s->dst, src, (size_t)s->n);
	}
	return CKPT_OK;
}

int tfb_run_read(tfb_span *spans, size_t n, ckpt_io *const *ios, const char *const *paths, int verify)
{
	if (n == 0)
		return CKPT_OK;
	tfb_span **order = ckpt__malloc(n * sizeof(*order));
	if (!order)
		return CKPT_ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = &spans[i];
	qsort(order, n, sizeof(*order), by_place);
	unsigned char *buf = NULL;
	int rc = CKPT_OK;
	for (size_t a = 0; a < n && rc == CKPT_OK;) {
		size_t b = a + 1;
		uint64_t base = order[a]->off, end = base + order[a]->n;
		while (b < n && order[b]->shard == order[a]->shard && order[b]->off >= end && order[b]->off - end <= GAP &&
			order[b]->off + order[b]->n - base <= RUN) {
			end = order[b]->off + order[b]->n;
			b++;
		}
		rc = read_run(order, a, b, ios[order[a]->shard], paths[order[a]->shard], verify, &buf);
		a = b;
	}
	ckpt__free(buf);
	ckpt__free(order);
	return rc;
}

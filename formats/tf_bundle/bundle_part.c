/*
 * One shard of a bundle written by several processes, and process 0's merge
 * of their index entries (ckpt/sys/bundle_part.h). The data path is bundle_write.c's
 * (tfb_shard_*); the index is TensorFlow's TableBuilder (sstable_write.c)
 * over the union of every shard's entries, as MergeBundles writes it.
 */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <protobuf-c/protobuf-c.h>
#include "tensor_bundle.pb-c.h"
#include "tfb.h"
#include "bundle_incr.h"
#include "ckpt/sys/bundle_part.h"

struct ckpt_bundle_part {
	ckpt_vfs *vfs;
	wshard sh;
	int shard, nshards;
	char *prefix;
	tfb_buf entries;
	int failed;
	/* incremental (ckpt_bundle_part_incremental, bundle_part_incr.c): else NULL */
	tfb_incr *incr;
	ckpt_bundle_part_record *rec;
	tfb_part_log log;          /* what this shard holds, for rec */
	int linked;                /* ckpt_bundle_part_reuse_all: the temporary is the last save's file, complete */
};

static char *temp_path(ckpt_vfs *vfs, const char *prefix, int shard, int nshards, uint64_t token)
{
	char *final = tfb_data_path(prefix, shard, nshards);
	char suffix[40];
	snprintf(suffix, sizeof(suffix), "tempstate%llu", (unsigned long long)token);
	char *tmp = final ? ckpt__vfs_temp_name(vfs, final, suffix) : NULL;
	ckpt__free(final);
	return tmp;
}

int ckpt_bundle_part_open(ckpt_bundle_part **out, ckpt_vfs *vfs, const char *prefix, int shard,
	int nshards, uint64_t token)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, prefix, NULL, -1, "ckpt_bundle_part_open: out is NULL");
	*out = NULL;
	if (!vfs || !prefix)
		return ckpt__fail(CKPT_EINVAL, prefix, NULL, -1, "ckpt_bundle_part_open: vfs or prefix is NULL");
	if (shard < 0 || shard >= nshards || nshards > CKPT_MAX_SHARDS)
		return ckpt__fail(CKPT_EINVAL, prefix, NULL, -1, "shard %d of %d", shard, nshards);
	ckpt_bundle_part *p = ckpt__calloc(1, sizeof(*p));
	if (!p)
		return CKPT_ENOMEM;
	p->vfs = vfs;
	p->shard = shard;
	p->nshards = nshards;
	p->prefix = ckpt__strdup(prefix);
	p->sh.tmp = temp_path(vfs, prefix, shard, nshards, token);
	int rc = p->sh.tmp && p->prefix ? tfb_make_parent_dirs(vfs, prefix) : CKPT_ENOMEM;
	if (rc == CKPT_OK)
		rc = ckpt_vfs_open(&p->sh.io, vfs, p->sh.tmp, CKPT_IO_WRITE);
	if (rc < 0) {
		ckpt_bundle_part_free(p);
		return rc;
	}
	*out = p;
	return CKPT_OK;
}

static int encode_entry(tfb_buf *out, const char *key, size_t klen, const ckpt_tensor *t, int shard,
	uint64_t off, uint64_t size, uint32_t masked)
{
	CkptTf__TensorShapeProto__Dim dims[CKPT_MAX_RANK];
	CkptTf__TensorShapeProto__Dim *dp[CKPT_MAX_RANK];
	CkptTf__TensorShapeProto shape = CKPT_TF__TENSOR_SHAPE_PROTO__INIT;
	CkptTf__BundleEntryProto pe = CKPT_TF__BUNDLE_ENTRY_PROTO__INIT;
	for (int i = 0; i < t->shape.rank; i++) {
		ckpt_tf__tensor_shape_proto__dim__init(&dims[i]);
		dims[i].size = t->shape.dims[i];
		dp[i] = &dims[i];
	}
	shape.n_dim = (size_t)t->shape.rank;
	shape.dim = dp;
	pe.dtype = (int32_t)t->dtype;
	pe.shape = &shape;
	pe.shard_id = shard;
	pe.offset = (int64_t)off;
	pe.size = (int64_t)size;
	pe.crc32c = masked;
	size_t n = ckpt_tf__bundle_entry_proto__get_packed_size(&pe);
	CKPT_TRY(tfb_buf_varint(out, klen));
	CKPT_TRY(tfb_buf_append(out, key, klen));
	CKPT_TRY(tfb_buf_varint(out, n));
	CKPT_TRY(tfb_buf_reserve(out, n));
	out->len += ckpt_tf__bundle_entry_proto__pack(&pe, out->p + out->len);
	return CKPT_OK;
}

/* `key` of klen bytes (slice keys hold NULs); messages name `name` */
static int part_add(ckpt_bundle_part *p, const char *name, const char *key, size_t klen, const ckpt_tensor *t)
{
	if (p->failed)
		return ckpt__fail(p->failed, p->sh.tmp, name, -1, "shard writer failed earlier");
	if (p->linked) /* the linked file is the last save's: never written to */
		return ckpt__fail(CKPT_EINVAL, p->sh.tmp, name, -1, "the shard was complete (ckpt_bundle_part_reuse_all)");
	uint64_t nelem;
	CKPT_TRY(ckpt_shape_num_elements(&nelem, &t->shape));
	uint64_t off = p->sh.pos;
	uint32_t crc = 0, *blocks = NULL;
	int rc = t->dtype == CKPT_DT_STRING ? tfb_shard_put_strings(&p->sh, t->data, nelem, &crc)
		: p->incr && t->nbytes >= TFB_INCR_MIN ? tfb_incr_put(p->incr, &p->sh, key, klen, t, &crc, &blocks)
		: tfb_shard_put_fixed(&p->sh, t->data, t->nbytes, &crc);
	if (rc == CKPT_OK)
		rc = encode_entry(&p->entries, key, klen, t, p->shard, off, p->sh.pos - off, ckpt_crc32c_mask(crc));
	if (rc == CKPT_OK && p->incr && t->dtype != CKPT_DT_STRING)
		rc = tfb_part_log_add(&p->log, key, klen, t, off, p->sh.pos - off, ckpt_crc32c_mask(crc), blocks);
	else
		ckpt__free(blocks);
	if (rc < 0) {
		ckpt__error_annotate(p->sh.tmp, name);
		p->failed = rc;
	}
	return rc;
}

int ckpt_bundle_part_add(ckpt_bundle_part *p, const char *key, const ckpt_tensor *t)
{
	if (!p || !t)
		return ckpt__fail(CKPT_EINVAL, NULL, key, -1, "ckpt_bundle_part_add: writer or tensor is NULL");
	if (!key || !*key || strlen(key) > CKPT_MAX_NAME_LEN)
		return ckpt__fail(CKPT_EINVAL, p->sh.tmp, key, -1, "bad tensor name");
	return part_add(p, key, key, strlen(key), t);
}

int ckpt_bundle_part_incremental(ckpt_bundle_part *p, ckpt_bundle_part_record *rec)
{
	if (!p || !rec)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_bundle_part_incremental: writer or record is NULL");
	if (p->failed || p->incr || p->sh.pos)
		return ckpt__fail(CKPT_EINVAL, p->sh.tmp, NULL, -1, "ckpt_bundle_part_incremental: not a writer just opened");
	/* copy_file_range on the POSIX file system, server-side copies on S3 */
	if (!ckpt__vfs_is_s3(p->vfs) && (p->vfs != ckpt_vfs_default() || ckpt_io_fd(p->sh.io) < 0))
		return 0;
	if (!(p->incr = tfb_part_incr_new(rec, p->vfs, p->prefix, p->shard, p->nshards)))
		return CKPT_ENOMEM;
	p->rec = rec;
	return 1;
}

int ckpt_bundle_part_add_clean(ckpt_bundle_part *p, const char *key, const ckpt_tensor *t)
{
	if (!p || !t)
		return ckpt__fail(CKPT_EINVAL, NULL, key, -1, "ckpt_bundle_part_add_clean: writer or tensor is NULL");
	if (!key || !*key || strlen(key) > CKPT_MAX_NAME_LEN)
		return ckpt__fail(CKPT_EINVAL, p->sh.tmp, key, -1, "bad tensor name");
	size_t klen = strlen(key);
	if (p->linked)
		return part_add(p, key, key, klen, t); /* refused: the linked file is never written to */
	const tfb_ientry *b = p->incr && !p->failed && t->dtype != CKPT_DT_STRING
		? tfb_incr_find(p->incr, key, klen, t->dtype, &t->shape, t->nbytes) : NULL;
	if (!b)
		return part_add(p, key, key, klen, t);
	uint64_t off = p->sh.pos;
	/* S3: copied by the server, else uploaded (the value is unchanged: its bytes are that save's either way) */
	int rc = ckpt__vfs_is_s3(p->vfs) ? tfb_incr_s3_reuse(p->incr, &p->sh, b, t->data)
		: tfb_incr_copy(p->incr, &p->sh, b->shard, b->offset, b->size);
	if (rc == CKPT__DECLINED) /* the source changed or cannot be copied from: from memory */
		return part_add(p, key, key, klen, t);
	uint32_t *blocks = NULL;
	if (rc == CKPT_OK && b->blocks && !(blocks = tfb_blocks_dup(b)))
		rc = CKPT_ENOMEM;
	/* the bytes are that save's: so is their crc32c */
	if (rc == CKPT_OK)
		rc = encode_entry(&p->entries, key, klen, t, p->shard, off, b->size, tfb_ientry_crc(b));
	if (rc == CKPT_OK)
		rc = tfb_part_log_add(&p->log, key, klen, t, off, b->size, tfb_ientry_crc(b), blocks);
	else
		ckpt__free(blocks);
	if (rc < 0) {
		ckpt__error_annotate(p->sh.tmp, key);
		p->failed = rc;
	}
	return rc;
}

int ckpt_bundle_part_reuse_all(ckpt_bundle_part *p, size_t n, const char *const *keys, const ckpt_tensor *const *values)
{
	if (!p || (n && (!keys || !values)))
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_bundle_part_reuse_all: NULL argument");
	/* a hard link: the POSIX file system */
	const ibase *b = p->incr && !ckpt__vfs_is_s3(p->vfs) ? tfb_incr_base(p->incr) : NULL;
	if (!b || p->failed || p->sh.pos || p->entries.len || b->nf != 1 || b->ne != n || !n)
		return 0;
	/* exactly the values of that save's shard (the keys are distinct: each matches a distinct entry) */
	const tfb_ientry **be = ckpt__calloc(n, sizeof(*be));
	if (!be)
		return CKPT_ENOMEM;
	int same = 1;
	for (size_t i = 0; i < n && same; i++) {
		const ckpt_tensor *t = values[i];
		same = keys[i] && t && t->dtype != CKPT_DT_STRING &&
			(be[i] = tfb_incr_find(p->incr, keys[i], strlen(keys[i]), t->dtype, &t->shape, t->nbytes)) != NULL;
	}
	/* the empty temporary makes way for a link of that file (still the one committed, else no link) */
	ckpt_io *io = p->sh.io;
	if (same) {
		p->sh.io = NULL;
		ckpt__io_abandon(io);
		ckpt_io_close(io);
		same = unlink(p->sh.tmp) == 0 && tfb_incr_link(p->incr, 0, p->sh.tmp);
		if (!same) {
			/* back to an empty temporary: the values are written as usual */
			int rc = ckpt_vfs_open(&p->sh.io, p->vfs, p->sh.tmp, CKPT_IO_WRITE);
			if (rc < 0) {
				ckpt__free(be);
				p->failed = rc;
				return rc;
			}
		}
	}
	int rc = CKPT_OK;
	for (size_t i = 0; same && i < n && rc == CKPT_OK; i++) {
		uint32_t *blocks = NULL;
		if (be[i]->blocks && !(blocks = tfb_blocks_dup(be[i])))
			rc = CKPT_ENOMEM;
		if (rc == CKPT_OK)
			rc = encode_entry(&p->entries, keys[i], strlen(keys[i]), values[i], p->shard, be[i]->offset, be[i]->size,
				tfb_ientry_crc(be[i]));
		if (rc == CKPT_OK)
			rc = tfb_part_log_add(&p->log, keys[i], strlen(keys[i]), values[i], be[i]->offset, be[i]->size,
				tfb_ientry_crc(be[i]), blocks);
		else
			ckpt__free(blocks);
	}
	ckpt__free(be);
	if (rc < 0) {
		p->failed = rc;
		return rc;
	}
	if (!same)
		return 0;
	p->linked = 1;
	p->sh.pos = p->sh.flushed = b->f[0].size;
	return 1;
}

int ckpt_bundle_part_add_slice(ckpt_bundle_part *p, const char *name, const ckpt_shape *full, int64_t row0,
	const ckpt_tensor *t)
{
	if (!p || !full || !t)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "ckpt_bundle_part_add_slice: writer, shape or tensor is NULL");
	if (!name || !*name || strlen(name) > CKPT_MAX_NAME_LEN || full->rank < 1 || t->shape.rank != full->rank)
		return ckpt__fail(CKPT_EINVAL, p->sh.tmp, name, -1, "bad partitioned variable name or shape");
	tfb_buf key = { 0 };
	int rc = tfb_row_slice_key(&key, name, full, row0, t->shape.dims[0]);
	if (rc == CKPT_OK)
		rc = part_add(p, name, (const char *)key.p, key.len, t);
	tfb_buf_free(&key);
	return rc;
}

int ckpt_bundle_part_add_partitioned_entry(ckpt_bundle_part *p, const char *name, ckpt_dtype dt, const ckpt_shape *full,
	int nparts, const int64_t *row0, const int64_t *rows)
{
	if (!p || !full || !row0 || !rows)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1,
			"ckpt_bundle_part_add_partitioned_entry: writer, shape or part bounds are NULL");
	if (p->failed)
		return ckpt__fail(p->failed, p->sh.tmp, name, -1, "shard writer failed earlier");
	if (!name || !*name || strlen(name) > CKPT_MAX_NAME_LEN || full->rank < 1 || nparts < 1)
		return ckpt__fail(CKPT_EINVAL, p->sh.tmp, name, -1, "bad partitioned variable name or shape");
	tfb_buf pk = { 0 };
	size_t klen = strlen(name);
	int rc = tfb_pack_partitioned_entry(&pk, dt, full, nparts, row0, rows);
	if (rc == CKPT_OK)
		rc = tfb_buf_varint(&p->entries, klen);
	if (rc == CKPT_OK)
		rc = tfb_buf_append(&p->entries, name, klen);
	if (rc == CKPT_OK)
		rc = tfb_buf_varint(&p->entries, pk.len);
	if (rc == CKPT_OK)
		rc = tfb_buf_append(&p->entries, pk.p, pk.len);
	tfb_buf_free(&pk);
	if (rc < 0)
		p->failed = rc;
	return rc;
}

int ckpt_bundle_part_finish(void **entries, size_t *n, ckpt_bundle_part *p, int no_fsync)
{
	if (!entries || !n || !p)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_bundle_part_finish: an argument is NULL");
	*entries = NULL;
	*n = 0;
	if (p->failed)
		return ckpt__fail(p->failed, p->sh.tmp, NULL, -1, "shard writer failed earlier");
	if (p->linked) {
		/* the last save's file, durable since its own save: nothing to write or sync */
		ifile id;
		tfb_part_identify(&id, p->vfs, -1, p->sh.tmp);
		tfb_part_record_pending(p->rec, &p->log, p->prefix, p->shard, p->nshards, &id, p->sh.pos, p->sh.pos);
		*entries = p->entries.p;
		*n = p->entries.len;
		p->entries.p = NULL;
		p->entries.len = p->entries.cap = 0;
		return CKPT_OK;
	}
	int rc = tfb_shard_flush(&p->sh);
	if (rc == CKPT_OK && !no_fsync)
		rc = ckpt_io_sync(p->sh.io);
	/* POSIX: after its last byte, the file as the next save will find it (the commit only renames it) */
	ifile id;
	int s3 = ckpt__vfs_is_s3(p->vfs);
	if (rc == CKPT_OK && p->incr && !s3)
		tfb_part_identify(&id, p->vfs, ckpt_io_fd(p->sh.io), p->sh.tmp);
	ckpt_io *io = p->sh.io;
	p->sh.io = NULL;
	int rc2 = ckpt_io_close(io);
	if (rc == CKPT_OK)
		rc = rc2;
	/* S3: the object is complete at close, under its final name (no rename): its ETag now */
	if (rc == CKPT_OK && p->incr && s3)
		tfb_part_identify(&id, p->vfs, -1, p->sh.tmp);
	if (rc == CKPT_OK && p->incr)
		tfb_part_record_pending(p->rec, &p->log, p->prefix, p->shard, p->nshards, &id, p->sh.pos,
			tfb_incr_reused(p->incr));
	if (rc < 0) {
		p->failed = rc;
		return rc;
	}
	*entries = p->entries.p;
	*n = p->entries.len;
	p->entries.p = NULL;
	p->entries.len = p->entries.cap = 0;
	return CKPT_OK;
}

void ckpt_bundle_part_free(ckpt_bundle_part *p)
{
	if (!p)
		return;
	if (p->sh.io) {
		ckpt__io_abandon(p->sh.io);
		ckpt_io_close(p->sh.io);
	}
	ckpt__free(p->sh.tmp);
	ckpt__free(p->prefix);
	tfb_buf_free(&p->sh.buf);
	tfb_buf_free(&p->entries);
	tfb_incr_free(p->incr);
	tfb_part_log_free(&p->log);
	ckpt__free(p);
}

void ckpt_bundle_part_discard(ckpt_vfs *vfs, const char *prefix, int shard, int nshards, uint64_t token)
{
	if (!vfs || !prefix)
		return;
	char *tmp = temp_path(vfs, prefix, shard, nshards, token);
	/* cleanup must not replace the error the caller reports */
	ckpt__error_slot saved = { 0 };
	ckpt__error_capture(&saved);
	if (tmp && ckpt_vfs_exists(NULL, vfs, tmp) > 0)
		ckpt_vfs_remove(vfs, tmp);
	ckpt__error_raise(&saved);
	ckpt__error_slot_clear(&saved);
	ckpt__free(tmp);
}

/* ---- merge (process 0) ---- */

static int cmp_kv(const void *a, const void *b)
{
	const tfb_kv *x = a, *y = b;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, n);
	return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

/* Every shard's entries as key/value pairs (pointing into the blobs), sorted. */
static int collect(const void *const *entries, const size_t *lens, int nshards, const char *prefix,
	tfb_kv **out, size_t *count)
{
	size_t cap = 64, n = 1;
	tfb_kv *kv = ckpt__calloc(cap, sizeof(*kv));
	if (!kv)
		return CKPT_ENOMEM;
	for (int s = 0; s < nshards; s++) {
		const unsigned char *p = entries[s], *end = p + lens[s];
		while (p < end) {
			uint64_t kl, vl;
			size_t u = tfb_varint_get(p, end, &kl);
			if (!u || kl > (uint64_t)(end - p - (ptrdiff_t)u))
				goto bad;
			const unsigned char *key = p + u;
			p = key + kl;
			u = tfb_varint_get(p, end, &vl);
			if (!u || vl > (uint64_t)(end - p - (ptrdiff_t)u))
				goto bad;
			if (n == cap) {
				tfb_kv *nk = ckpt__realloc(kv, cap * 2 * sizeof(*kv));
				if (!nk) {
					ckpt__free(kv);
					return CKPT_ENOMEM;
				}
				kv = nk;
				cap *= 2;
			}
			kv[n].key = key;
			kv[n].klen = (size_t)kl;
			kv[n].val = p + u;
			kv[n].vlen = (size_t)vl;
			n++;
			p += u + vl;
		}
	}
	qsort(kv + 1, n - 1, sizeof(*kv), cmp_kv);
	for (size_t i = 2; i < n; i++)
		if (cmp_kv(&kv[i - 1], &kv[i]) == 0) {
			int rc = ckpt__fail(CKPT_EINVAL, prefix, NULL, -1, "tensor '%.*s' written by two shards",
				(int)kv[i].klen, (const char *)kv[i].key);
			ckpt__free(kv);
			return rc;
		}
	*out = kv;
	*count = n;
	return CKPT_OK;
bad:
	ckpt__free(kv);
	return ckpt__fail(CKPT_EFORMAT, prefix, NULL, -1, "malformed shard entry list");
}

static int merge_commit(ckpt_vfs *vfs, const char *prefix, int nshards, uint64_t token,
	const void *const *entries, const size_t *lens, int no_fsync, char *index_tmp)
{
	tfb_kv *kv = NULL;
	size_t n = 0;
	CKPT_TRY(collect(entries, lens, nshards, prefix, &kv, &n));
	CkptTf__VersionDef ver = CKPT_TF__VERSION_DEF__INIT;
	CkptTf__BundleHeaderProto hdr = CKPT_TF__BUNDLE_HEADER_PROTO__INIT;
	ver.producer = 1;
	hdr.num_shards = nshards;
	hdr.version = &ver;
	unsigned char hbuf[64];
	size_t hl = ckpt_tf__bundle_header_proto__pack(&hdr, hbuf);
	kv[0].key = (const unsigned char *)"";
	kv[0].klen = 0;
	kv[0].val = hbuf;
	kv[0].vlen = hl;
	tfb_buf table = { 0 };
	int rc = tfb_table_build(&table, kv, n, TFB_BLOCK_SIZE);
	ckpt__free(kv);
	ckpt_io *ix = NULL;
	if (rc == CKPT_OK)
		rc = ckpt_vfs_open(&ix, vfs, index_tmp, CKPT_IO_WRITE);
	if (rc == CKPT_OK)
		rc = ckpt_io_pwrite(ix, table.p, table.len, 0);
	if (rc == CKPT_OK && !no_fsync)
		rc = ckpt_io_sync(ix);
	if (ix) {
		int rc2 = ckpt_io_close(ix);
		if (rc == CKPT_OK)
			rc = rc2;
	}
	tfb_buf_free(&table);
	CKPT_TRY(rc);
	char *dir = ckpt__path_dir(prefix), *final = tfb_index_path(prefix);
	rc = dir && final ? CKPT_OK : CKPT_ENOMEM;
	/* an older bundle of this prefix goes first, so its index never covers new data
	 * (without rename the index just written is the final one: data was published at close) */
	int old = rc == CKPT_OK && strcmp(index_tmp, final) != 0 ? ckpt_vfs_exists(NULL, vfs, final) : 0;
	if (old < 0)
		rc = old;
	if (old > 0) {
		rc = ckpt_vfs_remove(vfs, final);
		if (rc == CKPT_OK && !no_fsync)
			rc = ckpt_vfs_sync_dir(vfs, dir);
	}
	for (int s = 0; s < nshards && rc == CKPT_OK; s++) {
		char *tmp = temp_path(vfs, prefix, s, nshards, token), *dfinal = tfb_data_path(prefix, s, nshards);
		rc = tmp && dfinal ? ckpt__vfs_publish(vfs, tmp, dfinal) : CKPT_ENOMEM;
		ckpt__free(tmp);
		ckpt__free(dfinal);
	}
	if (rc == CKPT_OK)
		rc = ckpt__vfs_publish(vfs, index_tmp, final);
	if (rc == CKPT_OK && !no_fsync) {
		rc = ckpt_vfs_sync_dir(vfs, dir);
		if (rc < 0) {
			/* not durable: take it back rather than report failure over a visible checkpoint */
			ckpt__error_slot slot = { 0 };
			ckpt__error_capture(&slot);
			ckpt_vfs_remove(vfs, final);
			ckpt__error_raise(&slot);
			ckpt__error_slot_clear(&slot);
		}
	}
	ckpt__free(dir);
	ckpt__free(final);
	return rc;
}

int ckpt_bundle_merge_commit(ckpt_vfs *vfs, const char *prefix, int nshards, uint64_t token,
	const void *const *entries, const size_t *lens, int no_fsync)
{
	if (!vfs || !prefix || !entries || !lens || nshards < 1 || nshards > CKPT_MAX_SHARDS)
		return ckpt__fail(CKPT_EINVAL, prefix, NULL, -1,
			"ckpt_bundle_merge_commit: NULL argument or %d shards", nshards);
	char *final = tfb_index_path(prefix);
	char suffix[40];
	snprintf(suffix, sizeof(suffix), "tempstate%llu", (unsigned long long)token);
	char *index_tmp = final ? ckpt__vfs_temp_name(vfs, final, suffix) : NULL;
	ckpt__free(final);
	if (!index_tmp)
		return CKPT_ENOMEM;
	int rc = merge_commit(vfs, prefix, nshards, token, entries, lens, no_fsync, index_tmp);
	if (rc < 0) {
		ckpt__error_slot saved = { 0 };
		ckpt__error_capture(&saved);
		/* without rename the temporary is the final name, maybe an older bundle's index: kept */
		if (!(ckpt_vfs_caps(vfs) & CKPT_VFS_CAP_NO_RENAME) && ckpt_vfs_exists(NULL, vfs, index_tmp) > 0)
			ckpt_vfs_remove(vfs, index_tmp);
		ckpt__error_raise(&saved);
		ckpt__error_slot_clear(&saved);
		for (int s = 0; s < nshards; s++)
			ckpt_bundle_part_discard(vfs, prefix, s, nshards, token);
	}
	ckpt__free(index_tmp);
	return rc;
}

/*
 * Writing a TensorBundle (tensor_bundle.cc BundleWriter + MergeBundles
 * naming), byte-compatible with TensorFlow.
 *
 *   P.data-SSSSS-of-NNNNN.tempstate<random>   tensor bytes, in add order per shard
 *   P.index.tempstate<random>                 SSTable (sstable_write.c), keys sorted:
 *     ""  -> BundleHeaderProto 08 NN 1a 02 08 01 (num_shards, version{producer=1})
 *     key -> BundleEntryProto {dtype, shape (always), shard_id, offset, size, crc32c}
 *   The object graph (if set) is the scalar DT_STRING `_CHECKPOINTABLE_OBJECT_GRAPH`,
 *   written last in shard 0.
 *
 * Commit: flush, fsync data files, write + fsync the index, remove an older
 * P.index of the same prefix, rename the data files, rename the index LAST
 * (a bundle exists once P.index exists), fsync the directory.
 * A writer freed without commit removes its temporaries.
 */
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <protobuf-c/protobuf-c.h>
#include "tensor_bundle.pb-c.h"
#include "tfb.h"

#define WBUF_SIZE (1u << 20)      /* small tensors are gathered into 1 MiB writes */
#define CRC_CHUNK (4u << 20)      /* serial: crc a chunk, then write it while it is in cache */
#define PAR_MIN_BYTES (2u << 20)  /* from here the crc runs on helper threads beside the write */
#define PAR_CHUNK (1u << 20)
#define PAR_MAX_CHUNKS 512

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t temp_suffix(const void *w)
{
	static uint64_t counter;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	x ^= (uint64_t)getpid() << 32;
	x ^= (uint64_t)(uintptr_t)w;
	x ^= __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 0x2545f4914f6cdd1dull;
	return splitmix(x);
}

int tfb_shard_flush(wshard *s)
{
	if (!s->buf.len)
		return CKPT_OK;
	CKPT_TRY(ckpt_io_pwrite(s->io, s->buf.p, s->buf.len, s->flushed));
	s->flushed += s->buf.len;
	s->buf.len = 0;
	return CKPT_OK;
}

int tfb_shard_append(wshard *s, const void *p, size_t n)
{
	if (s->buf.len + n > WBUF_SIZE)
		CKPT_TRY(tfb_shard_flush(s));
	if (n >= WBUF_SIZE) {
		CKPT_TRY(ckpt_io_pwrite(s->io, p, n, s->flushed));
		s->flushed += n;
	} else {
		CKPT_TRY(tfb_buf_append(&s->buf, p, n));
	}
	s->pos += n;
	return CKPT_OK;
}

/* The crc of a big tensor, in chunks that helper threads take while the caller writes. */
typedef struct crc_pass {
	const unsigned char *p;
	size_t n, chunk;
	uint32_t crc[PAR_MAX_CHUNKS];
} crc_pass;

static void crc_chunk(void *arg, size_t k)
{
	crc_pass *c = arg;
	size_t a = k * c->chunk, len = c->n - a < c->chunk ? c->n - a : c->chunk;
	c->crc[k] = ckpt_crc32c_extend(0, c->p + a, len);
}

/*
 * Fixed-size tensor. The write does not depend on the crc: for a big tensor
 * the helpers crc while this thread writes (whatever they have not taken when
 * the write returns, this thread crcs after it). Otherwise crc and write one
 * chunk after the other, in one pass over the caller's bytes.
 */
int tfb_shard_put_fixed(wshard *s, const unsigned char *p, uint64_t n, uint32_t *crc)
{
	/* a file that crcs what it copies in (the memory tier): one pass, the crc from cache */
	if (n >= WBUF_SIZE && n <= SIZE_MAX && ckpt__io_fuses_crc(s->io)) {
		CKPT_TRY(tfb_shard_flush(s));
		CKPT_TRY(ckpt__io_pwrite_crc(s->io, p, (size_t)n, s->flushed, crc));
		s->flushed += n;
		s->pos += n;
		return CKPT_OK;
	}
	crc_pass *cp = NULL;
	if (n >= PAR_MIN_BYTES && n <= SIZE_MAX && tfb_par_threads() > 1 && !(cp = ckpt__malloc(sizeof(*cp))))
		return CKPT_ENOMEM;
	tfb_par_job job;
	size_t nchunks = 0;
	if (cp) {
		cp->p = p;
		cp->n = (size_t)n;
		cp->chunk = cp->n / PAR_MAX_CHUNKS + 1 > PAR_CHUNK ? cp->n / PAR_MAX_CHUNKS + 1 : PAR_CHUNK;
		nchunks = (cp->n + cp->chunk - 1) / cp->chunk;
		if (!tfb_par_start(&job, nchunks, crc_chunk, cp)) {
			ckpt__free(cp); /* no idle helper: crc each chunk while it is hot, below */
			cp = NULL;
		}
	}
	if (cp) {
		int rc = tfb_shard_append(s, p, cp->n);
		tfb_par_finish(&job);
		uint32_t v = cp->crc[0];
		for (size_t k = 1; k < nchunks; k++)
			v = ckpt__crc32c_combine(v, cp->crc[k], cp->n - k * cp->chunk < cp->chunk ? cp->n - k * cp->chunk : cp->chunk);
		ckpt__free(cp);
		*crc = v;
		return rc;
	}
	uint32_t c = 0;
	for (uint64_t done = 0; done < n;) {
		size_t k = n - done < CRC_CHUNK ? (size_t)(n - done) : CRC_CHUNK;
		c = ckpt_crc32c_extend(c, p + done, k);
		CKPT_TRY(tfb_shard_append(s, p + done, k));
		done += k;
	}
	*crc = c;
	return CKPT_OK;
}

/*
 * DT_STRING: varint64 lengths, Mask(crc of lengths as u32/u64 LE), bytes.
 * An empty tensor is written as 0 bytes (crc Mask(0)): TF's writer emits the
 * 4-byte Mask(0) there, but its reader returns early for size 0, so both
 * read back in TF, and tests/scripts/bundle_check.py accepts only the empty form.
 */
int tfb_shard_put_strings(wshard *s, const ckpt_bytes *el, uint64_t n, uint32_t *crc)
{
	if (n == 0) {
		*crc = 0;
		return CKPT_OK;
	}
	tfb_buf head = { 0 };
	uint32_t c = 0;
	int rc = CKPT_OK;
	for (uint64_t i = 0; i < n && rc == CKPT_OK; i++) {
		unsigned char b[8];
		uint64_t len = el[i].len;
		tfb_put32(b, (uint32_t)len);
		tfb_put32(b + 4, (uint32_t)(len >> 32));
		c = ckpt_crc32c_extend(c, b, len <= 0xffffffffu ? 4 : 8);
		rc = tfb_buf_varint(&head, len);
	}
	unsigned char m[4];
	tfb_put32(m, ckpt_crc32c_mask(c));
	c = ckpt_crc32c_extend(c, m, 4);
	if (rc == CKPT_OK)
		rc = tfb_buf_append(&head, m, 4);
	if (rc == CKPT_OK)
		rc = tfb_shard_append(s, head.p, head.len);
	tfb_buf_free(&head);
	for (uint64_t i = 0; i < n && rc == CKPT_OK; i++) {
		if (!el[i].len)
			continue;
		c = ckpt_crc32c_extend(c, el[i].data, (size_t)el[i].len);
		rc = tfb_shard_append(s, el[i].data, (size_t)el[i].len);
	}
	*crc = c;
	return rc;
}

static int grow_entries(tfb_writer *s)
{
	if (s->ne < s->cap)
		return CKPT_OK;
	size_t nc = s->cap ? s->cap * 2 : 64;
	wentry *ne = ckpt__realloc(s->e, nc * sizeof(*ne));
	if (!ne)
		return CKPT_ENOMEM;
	s->e = ne;
	s->cap = nc;
	return CKPT_OK;
}

/* A value whose bytes come in pieces (ckpt_format.writer_add_pieces). */
typedef struct piece_src {
	ckpt__piece_fn next;
	void *ctx;
} piece_src;

/* Each piece as a whole value is put (crc'd beside its write), the crcs combined: the same bytes, the same crc. */
static int put_pieces(wshard *s, const piece_src *src, uint64_t n, const char *name, uint32_t *crc)
{
	uint32_t c = 0;
	for (uint64_t done = 0; done < n;) {
		const void *p = NULL;
		size_t k = 0;
		CKPT_TRY(src->next(src->ctx, &p, &k));
		if (!p || k == 0 || k > n - done)
			return ckpt__fail(CKPT_EINVAL, s->tmp, name, (int64_t)done,
				"a piece of %zu bytes at offset %llu of a %llu-byte value", k, (unsigned long long)done,
				(unsigned long long)n);
		uint32_t pc;
		CKPT_TRY(tfb_shard_put_fixed(s, p, k, &pc));
		c = done ? ckpt__crc32c_combine(c, pc, k) : pc;
		done += k;
	}
	*crc = c;
	return CKPT_OK;
}

/* `key` of klen bytes (a slice key holds NULs); `name` is what messages call it; src: the bytes in pieces (NULL:
 * t->data) */
static int add_entry_key(ckpt_writer *w, const char *name, const char *key, size_t klen, const ckpt_tensor *t,
	int shard, const piece_src *src, const tfb_ientry *clean)
{
	tfb_writer *s = w->state;
	if (s->failed)
		return ckpt__fail(s->failed, w->path, name, -1, "writer failed earlier; start a new one");
	if (!name || !*name || !klen)
		return ckpt__fail(CKPT_EINVAL, w->path, NULL, -1, "empty tensor name (the key \"\" is the bundle header)");
	if (strlen(name) > CKPT_MAX_NAME_LEN)
		return ckpt__fail(CKPT_ELIMIT, w->path, NULL, -1, "name longer than %d bytes", CKPT_MAX_NAME_LEN);
	if (!t)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "NULL tensor");
	if (shard < 0 || shard >= s->nshards)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "shard %d out of range: the writer has %d shard(s)",
			shard, s->nshards);
	if (!ckpt_dtype_valid(t->dtype))
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "invalid dtype %d", (int)t->dtype);
	uint64_t nelem;
	CKPT_TRY(ckpt_shape_num_elements(&nelem, &t->shape));
	if (t->dtype != CKPT_DT_STRING) {
		uint64_t want;
		CKPT_TRY(ckpt_shape_nbytes(&want, &t->shape, t->dtype));
		if (want != t->nbytes || (want && !t->data && !src))
			return ckpt__fail(CKPT_EINVAL, w->path, name, -1,
				"tensor holds %llu bytes, its %s shape needs %llu", (unsigned long long)t->nbytes,
				ckpt_dtype_name(t->dtype), (unsigned long long)want);
	} else if (nelem && !t->data) {
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "string tensor without elements");
	}
	CKPT_TRY(grow_entries(s));
	wentry *e = &s->e[s->ne];
	memset(e, 0, sizeof(*e));
	e->dims_at = s->dims.len / sizeof(int64_t);
	CKPT_TRY(tfb_buf_append(&s->dims, t->shape.dims, (size_t)t->shape.rank * sizeof(int64_t)));
	e->key = ckpt__malloc(klen + 1);
	if (e->key) {
		memcpy(e->key, key, klen);
		e->key[klen] = '\0';
		e->klen = klen;
	} else {
		s->dims.len = e->dims_at * sizeof(int64_t);
		return CKPT_ENOMEM;
	}
	wshard *sh = &s->sh[shard];
	e->dtype = t->dtype;
	e->rank = t->shape.rank;
	e->shard = shard;
	e->offset = sh->pos;
	uint32_t crc = 0;
	if (clean) {
		/* unchanged since the last save: placed at commit (bundle_incr.c), its crc that save's */
		int rc = tfb_incr_defer(s->incr, s->ne, clean, t->data);
		if (rc < 0) {
			ckpt__free(e->key);
			s->dims.len = e->dims_at * sizeof(int64_t);
			return rc;
		}
		e->shard = -1;
		e->size = t->nbytes;
		e->masked_crc = tfb_ientry_crc(clean);
		s->ne++;
		return CKPT_OK;
	}
	int rc = t->dtype == CKPT_DT_STRING ? tfb_shard_put_strings(sh, t->data, nelem, &crc)
		: src ? put_pieces(sh, src, t->nbytes, name, &crc)
		: s->incr && t->nbytes >= TFB_INCR_MIN ? tfb_incr_put(s->incr, sh, key, klen, t, &crc, &e->blocks)
		: tfb_shard_put_fixed(sh, t->data, t->nbytes, &crc);
	if (rc < 0) {
		ckpt__error_annotate(sh->tmp, name);
		s->failed = rc;
		ckpt__free(e->key);
		s->dims.len = e->dims_at * sizeof(int64_t);
		return rc;
	}
	e->size = sh->pos - e->offset;
	e->masked_crc = ckpt_crc32c_mask(crc);
	s->ne++;
	return CKPT_OK;
}

static int add_entry(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard)
{
	return add_entry_key(w, name, name, name ? strlen(name) : 0, t, shard, NULL, NULL);
}

int tfb_writer_add_clean(ckpt_writer *w, const char *name, const ckpt_tensor *t)
{
	tfb_writer *s = w->state;
	size_t klen = name ? strlen(name) : 0;
	const tfb_ientry *b = s->incr && t->dtype != CKPT_DT_STRING && t->data && !s->failed
		? tfb_incr_find(s->incr, name, klen, t->dtype, &t->shape, t->nbytes) : NULL;
	return add_entry_key(w, name, name, klen, t, 0, NULL, b);
}

int tfb_writer_add(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard)
{
	return add_entry(w, name, t, shard);
}

int tfb_writer_add_pieces(ckpt_writer *w, const char *name, ckpt_dtype dt, const ckpt_shape *shape, uint64_t nbytes,
	ckpt__piece_fn next, void *ctx)
{
	if (!shape || dt == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "a value in pieces needs a fixed-size dtype and a shape");
	ckpt_tensor t = { 0 };
	t.dtype = dt;
	t.shape = *shape;
	t.nbytes = nbytes;
	piece_src src = { next, ctx };
	return add_entry_key(w, name, name, name ? strlen(name) : 0, &t, 0, &src, NULL);
}

int tfb_writer_add_partitioned(ckpt_writer *w, const char *name, ckpt_dtype dt, const ckpt_shape *full,
	int nparts, const int64_t *row0, const int64_t *rows, const void *const *data)
{
	tfb_writer *s = w->state;
	if (!name || !*name || strlen(name) > CKPT_MAX_NAME_LEN || !full || full->rank < 1 || nparts < 1)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "partitioned variable: bad name, shape or part count");
	for (int k = 0; k < nparts; k++) {
		ckpt_tensor t;
		memset(&t, 0, sizeof(t));
		t.dtype = dt;
		t.shape = *full;
		t.shape.dims[0] = rows[k];
		CKPT_TRY(ckpt_shape_nbytes(&t.nbytes, &t.shape, dt));
		t.data = (void *)data[k];
		tfb_buf key = { 0 };
		int rc = tfb_row_slice_key(&key, name, full, row0[k], rows[k]);
		if (rc == CKPT_OK)
			rc = add_entry_key(w, name, (const char *)key.p, key.len, &t, 0, NULL, NULL);
		tfb_buf_free(&key);
		CKPT_TRY(rc);
	}
	/* the full entry: dtype, shape and the slices; no data of its own */
	CKPT_TRY(grow_entries(s));
	tfb_buf pk = { 0 };
	int rc = tfb_pack_partitioned_entry(&pk, dt, full, nparts, row0, rows);
	wentry *e = &s->e[s->ne];
	memset(e, 0, sizeof(*e));
	e->key = rc == CKPT_OK ? ckpt__strdup(name) : NULL;
	if (!e->key) {
		tfb_buf_free(&pk);
		return rc < 0 ? rc : CKPT_ENOMEM;
	}
	e->klen = strlen(name);
	e->packed = pk.p;
	e->npacked = pk.len;
	e->dims_at = s->dims.len / sizeof(int64_t);
	s->ne++;
	return CKPT_OK;
}

static int writer_open(ckpt_writer *w)
{
	tfb_writer *s = ckpt__calloc(1, sizeof(*s));
	if (!s)
		return CKPT_ENOMEM;
	w->state = s;
	int n = w->opts.num_shards ? w->opts.num_shards : 1;
	if (n < 1 || n > CKPT_MAX_SHARDS)
		return ckpt__fail(CKPT_EINVAL, w->path, NULL, -1, "num_shards %d: want 1..%d", n, CKPT_MAX_SHARDS);
	if (!w->path || !*w->path)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "empty bundle prefix");
	CKPT_TRY(tfb_make_parent_dirs(w->vfs, w->path));
	s->sh = ckpt__calloc((size_t)n, sizeof(*s->sh));
	if (!s->sh)
		return CKPT_ENOMEM;
	s->nshards = n;
	char suffix[40];
	snprintf(suffix, sizeof(suffix), "tempstate%llu", (unsigned long long)temp_suffix(w));
	s->index_final = tfb_index_path(w->path);
	s->index_tmp = s->index_final ? ckpt__vfs_temp_name(w->vfs, s->index_final, suffix) : NULL;
	if (!s->index_tmp)
		return CKPT_ENOMEM;
	for (int i = 0; i < n; i++) {
		wshard *sh = &s->sh[i];
		sh->final = tfb_data_path(w->path, i, n);
		sh->tmp = sh->final ? ckpt__vfs_temp_name(w->vfs, sh->final, suffix) : NULL;
		if (!sh->tmp)
			return CKPT_ENOMEM;
		CKPT_TRY(ckpt_vfs_open(&sh->io, w->vfs, sh->tmp, CKPT_IO_WRITE));
	}
	return CKPT_OK;
}

int tfb_writer_add_shard(ckpt_writer *w, int *k, int open)
{
	tfb_writer *s = w->state;
	if (s->nshards >= CKPT_MAX_SHARDS)
		return ckpt__fail(CKPT_ELIMIT, w->path, NULL, -1, "more than %d data shards", CKPT_MAX_SHARDS);
	wshard *nsh = ckpt__realloc(s->sh, (size_t)(s->nshards + 1) * sizeof(*nsh));
	if (!nsh)
		return CKPT_ENOMEM;
	s->sh = nsh;
	wshard *sh = &s->sh[s->nshards];
	memset(sh, 0, sizeof(*sh));
	/* the same suffix as shard 0's temporary: a failed save's leftovers go with it */
	const char *dot = strrchr(s->sh[0].tmp, '.');
	sh->final = tfb_data_path(w->path, s->nshards, CKPT_MAX_SHARDS);
	sh->tmp = sh->final && dot ? ckpt__vfs_temp_name(w->vfs, sh->final, dot + 1) : NULL;
	if (!sh->tmp) {
		ckpt__free(sh->final);
		return CKPT_ENOMEM;
	}
	*k = s->nshards++;
	if (open)
		return ckpt_vfs_open(&sh->io, w->vfs, sh->tmp, CKPT_IO_WRITE);
	return CKPT_OK;
}

int tfb_writer_open(ckpt_writer *w)
{
	int rc = writer_open(w);
	if (rc < 0)
		tfb_writer_close(w); /* the core does not call close after a failed open */
	return rc;
}

/* bytewise, as the SSTable orders keys (slice keys start with 0x00) */
static int cmp_entry(const void *a, const void *b)
{
	const wentry *x = a, *y = b;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, n);
	return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static int encode_entry(tfb_buf *out, const wentry *e, const int64_t *all_dims)
{
	if (e->packed)
		return tfb_buf_append(out, e->packed, e->npacked);
	tfb_entry_fields f = { (int32_t)e->dtype, e->rank, all_dims + e->dims_at, e->shard, (int64_t)e->offset,
		(int64_t)e->size, e->masked_crc };
	return tfb_entry_encode(out, &f);
}

/* Header + sorted entries -> SSTable bytes. */
static int build_index(ckpt_writer *w, tfb_writer *s, tfb_buf *table)
{
	/* entries usually come in a few sorted runs (the order variables were added): a linear merge */
	CKPT_TRY(ckpt__sort(s->e, s->ne, sizeof(*s->e), cmp_entry));
	for (size_t i = 1; i < s->ne; i++)
		if (cmp_entry(&s->e[i - 1], &s->e[i]) == 0)
			return ckpt__fail(CKPT_EINVAL, w->path, s->e[i].key, -1, "tensor name added twice");
	CkptTf__VersionDef ver = CKPT_TF__VERSION_DEF__INIT;
	CkptTf__BundleHeaderProto hdr = CKPT_TF__BUNDLE_HEADER_PROTO__INIT;
	ver.producer = 1;
	hdr.num_shards = s->nshards;
	hdr.version = &ver;
	tfb_buf vals = { 0 };
	size_t *ends = ckpt__calloc(s->ne + 1, sizeof(size_t));
	tfb_kv *kv = ckpt__calloc(s->ne + 1, sizeof(tfb_kv));
	int rc = (!ends || !kv) ? CKPT_ENOMEM : CKPT_OK;
	if (rc == CKPT_OK)
		rc = tfb_buf_reserve(&vals, ckpt_tf__bundle_header_proto__get_packed_size(&hdr));
	if (rc == CKPT_OK) {
		vals.len += ckpt_tf__bundle_header_proto__pack(&hdr, vals.p);
		ends[0] = vals.len;
	}
	for (size_t i = 0; i < s->ne && rc == CKPT_OK; i++) {
		rc = encode_entry(&vals, &s->e[i], (const int64_t *)s->dims.p);
		ends[i + 1] = vals.len;
	}
	if (rc == CKPT_OK) {
		kv[0].key = (const unsigned char *)"";
		kv[0].val = vals.p;
		kv[0].vlen = ends[0];
		for (size_t i = 0; i < s->ne; i++) {
			kv[i + 1].key = (const unsigned char *)s->e[i].key;
			kv[i + 1].klen = s->e[i].klen;
			kv[i + 1].val = vals.p + ends[i];
			kv[i + 1].vlen = ends[i + 1] - ends[i];
		}
		rc = tfb_table_build(table, kv, s->ne + 1, TFB_BLOCK_SIZE);
	}
	tfb_buf_free(&vals);
	ckpt__free(ends);
	ckpt__free(kv);
	return rc;
}

static int add_graph(ckpt_writer *w)
{
	void *buf = NULL;
	size_t n = 0;
	CKPT_TRY(ckpt_object_graph_serialize(&buf, &n, ckpt__writer_graph(w)));
	ckpt_bytes b = { n, buf };
	ckpt_tensor t;
	memset(&t, 0, sizeof(t));
	t.dtype = CKPT_DT_STRING;
	t.shape.rank = 0;
	t.nbytes = n;
	t.data = &b;
	int rc = add_entry(w, CKPT_OBJECT_GRAPH_KEY, &t, 0);
	free(buf);
	return rc;
}

static int commit(ckpt_writer *w, tfb_writer *s)
{
	if (s->failed)
		return ckpt__fail(s->failed, w->path, NULL, -1, "writer failed earlier; nothing committed");
	if (s->incr)
		CKPT_TRY(tfb_incr_place(w, s));
	if (ckpt__writer_graph(w))
		CKPT_TRY(add_graph(w));
	/*
	 * Without rename the data files are written under their final names, and
	 * appear (replacing an older bundle's) when they are closed. An older
	 * bundle of this prefix loses its index just before, so it never covers
	 * new data, and not earlier: every data byte is staged first (uploaded,
	 * not yet visible), so a save that fails while it sends its data leaves
	 * the older bundle loadable; only the completions and the index are left.
	 * (Staging turns a small object's PUT into a one-part upload, so it is
	 * done only when there is an older bundle to keep.)
	 */
	int older = 0; /* an index object: a "directory" of that name is no bundle (and costs a listing to find) */
	if (ckpt_vfs_caps(w->vfs) & CKPT_VFS_CAP_NO_RENAME)
		CKPT_TRY(older = ckpt__vfs_file_exists(w->vfs, s->index_final));
	for (int i = 0; i < s->nshards; i++) {
		wshard *sh = &s->sh[i];
		if (!sh->io)
			continue; /* a committed shard of the last save, hard-linked: immutable and durable */
		CKPT_TRY(tfb_shard_flush(sh));
		if (!w->opts.no_fsync)
			CKPT_TRY(ckpt_io_sync(sh->io));
		if (older)
			CKPT_TRY(ckpt__io_stage(sh->io));
	}
	/*
	 * The older index's bytes are kept: while no new data object is
	 * completed, the older bundle's data are untouched, so a completion
	 * refused for good (after its retries) puts that index back and the
	 * older checkpoint stays loadable. Once one is completed (several
	 * shards), the older data are partly replaced and nothing can be put back.
	 */
	void *old_index = NULL;
	size_t old_len = 0;
	if (older) {
		CKPT_TRY(ckpt_vfs_read_all(&old_index, &old_len, w->vfs, s->index_final, CKPT_MAX_INDEX_BYTES));
		int rrc = ckpt_vfs_remove(w->vfs, s->index_final);
		if (rrc < 0) {
			ckpt__free(old_index);
			return rrc;
		}
	}
	int crc = CKPT_OK, completed = 0;
	for (int i = 0; i < s->nshards && crc == CKPT_OK; i++) {
		wshard *sh = &s->sh[i];
		ckpt_io *io = sh->io;
		if (!io)
			continue;
		sh->io = NULL;
		crc = ckpt_io_close(io);
		completed += crc == CKPT_OK;
	}
	if (crc < 0 && old_index && !completed) {
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		ckpt_vfs_write_atomic(w->vfs, s->index_final, old_index, old_len, 0);
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	ckpt__free(old_index);
	if (crc < 0)
		return crc;
	tfb_buf table = { 0 };
	int rc = build_index(w, s, &table);
	ckpt_io *ix = NULL;
	if (rc == CKPT_OK)
		rc = ckpt_vfs_open(&ix, w->vfs, s->index_tmp, CKPT_IO_WRITE);
	if (rc == CKPT_OK)
		rc = ckpt_io_pwrite(ix, table.p, table.len, 0);
	if (rc == CKPT_OK && !w->opts.no_fsync)
		rc = ckpt_io_sync(ix);
	if (ix) {
		int rc2 = ckpt_io_close(ix);
		if (rc == CKPT_OK)
			rc = rc2;
	}
	tfb_buf_free(&table);
	if (rc < 0)
		return rc;
	/* allocate before publishing: after the index rename nothing may fail but the fsync */
	char *dir = ckpt__path_dir(w->path);
	if (!dir)
		return CKPT_ENOMEM;
	/*
	 * Overwriting a prefix: retire the old index first (durably), so that a
	 * failure while the data files are replaced leaves no checkpoint at all
	 * rather than an old index over new data. (Without rename that was done
	 * at open, and the index written above is already the final one.)
	 */
	int old = strcmp(s->index_tmp, s->index_final) != 0 ? ckpt_vfs_exists(NULL, w->vfs, s->index_final) : 0;
	if (old < 0)
		rc = old;
	if (old > 0) {
		rc = ckpt_vfs_remove(w->vfs, s->index_final);
		if (rc == CKPT_OK && !w->opts.no_fsync)
			rc = ckpt_vfs_sync_dir(w->vfs, dir);
	}
	for (int i = 0; i < s->nshards && rc == CKPT_OK; i++)
		rc = ckpt__vfs_publish(w->vfs, s->sh[i].tmp, s->sh[i].final);
	if (rc == CKPT_OK)
		rc = ckpt__vfs_publish(w->vfs, s->index_tmp, s->index_final);
	if (rc == CKPT_OK && !w->opts.no_fsync) {
		rc = ckpt_vfs_sync_dir(w->vfs, dir);
		/* not durable: take it back rather than report failure over a visible checkpoint */
		if (rc < 0) {
			ckpt__error_slot slot = { 0 };
			ckpt__error_capture(&slot);
			ckpt_vfs_remove(w->vfs, s->index_final);
			ckpt__error_raise(&slot);
			ckpt__error_slot_clear(&slot);
		}
	}
	ckpt__free(dir);
	return rc;
}

int tfb_writer_commit(ckpt_writer *w)
{
	tfb_writer *s = w->state;
	int rc = commit(w, s);
	if (rc < 0) {
		s->failed = rc;
	} else {
		s->committed = 1;
		if (s->incr)
			tfb_incr_record(w, s);
	}
	return rc;
}

void tfb_writer_close(ckpt_writer *w)
{
	tfb_writer *s = w->state;
	if (!s)
		return;
	/* cleanup must not replace the error the caller is looking at */
	ckpt__error_slot saved = { 0 };
	ckpt__error_capture(&saved);
	int keep = w->committed || s->committed;
	for (int i = 0; s->sh && i < s->nshards; i++) {
		wshard *sh = &s->sh[i];
		if (sh->io) {
			ckpt__io_abandon(sh->io);
			ckpt_io_close(sh->io);
		}
		/* without rename the "temporary" is the final name, maybe an older bundle's file: never removed */
		if (!keep && sh->tmp && sh->final && strcmp(sh->tmp, sh->final) != 0)
			ckpt_vfs_remove(w->vfs, sh->tmp);
		ckpt__free(sh->tmp);
		ckpt__free(sh->final);
		tfb_buf_free(&sh->buf);
	}
	if (!keep && s->index_tmp && s->index_final && strcmp(s->index_tmp, s->index_final) != 0) {
		int d = 0;
		if (ckpt_vfs_exists(&d, w->vfs, s->index_tmp) > 0)
			ckpt_vfs_remove(w->vfs, s->index_tmp);
	}
	ckpt__error_raise(&saved);
	ckpt__error_slot_clear(&saved);
	for (size_t i = 0; i < s->ne; i++) {
		ckpt__free(s->e[i].key);
		ckpt__free(s->e[i].packed);
		ckpt__free(s->e[i].blocks);
	}
	tfb_incr_free(s->incr);
	ckpt__free(s->e);
	tfb_buf_free(&s->dims);
	ckpt__free(s->sh);
	ckpt__free(s->index_tmp);
	ckpt__free(s->index_final);
	ckpt__free(s);
	w->state = NULL;
}

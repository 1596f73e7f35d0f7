/*
 * Reading a TensorBundle (tensor_bundle.cc BundleReader).
 *
 * P.index: SSTable; key "" -> BundleHeaderProto {num_shards=1, endianness=2,
 *   version=3}; every other key -> BundleEntryProto {dtype=1, shape=2,
 *   shard_id=3, offset=4, size=5, crc32c=6 (fixed32, masked), slices=7}.
 * P.data-SSSSS-of-NNNNN: tensor bytes at [offset, offset+size).
 *   fixed-size dtypes: row-major little-endian elements, crc = Mask(crc32c(bytes));
 *   DT_STRING: varint64 len[n] | fixed32 Mask(C_len) | bytes, where C_len is
 *   the crc32c of the lengths as uint32 LE (uint64 when > 0xffffffff) and the
 *   entry crc continues over the 4 stored checksum bytes and the strings.
 * Slice keys (partitioned variables) start with 0x00 and are listed as
 * ordinary entries, their names escaped (\xNN) so that they are C strings;
 * any other key holding a NUL is refused. The "full" entry of a partitioned
 * variable is read by assembling its slice entries (slice.c).
 * Keys are only ever keys: no key becomes a file path.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <protobuf-c/protobuf-c.h>
#include "tensor_bundle.pb-c.h"
#include "tfb.h"

/*
 * The data path. An entry is read (or, for verify, streamed through a small
 * bounce buffer) in pieces of READ_PIECE bytes, each crc-ed right after it is
 * read, while it is still in cache. Entries of PAR_MIN_BYTES and more are cut
 * into chunks that an OpenMP team reads and crc-s at once (pread is
 * thread-safe); the per-chunk crcs are combined in order.
 */
#define READ_PIECE (1u << 20)
#define BOUNCE_SIZE (1u << 20)
#define PAR_MIN_BYTES (8u << 20)
#define PAR_CHUNK_MIN (2u << 20)
#define PAR_CHUNKS_PER_THREAD 2
#define PAR_MAX_CHUNKS 256
#define BOUNCE_POOL 16
/*
 * Many tiny entries: one pread system call per entry costs more than its
 * bytes. Entries of at most SMALL_MAX bytes that lie next to each other in a
 * data file form runs of at most WINDOW bytes (found at open); the first read
 * in a run reads the whole run into a per-reader window, the next ones copy
 * from it. Only on the POSIX file system, where a read is a system call and
 * committed data files are never rewritten in place (commits rename new files
 * over old ones, and an open descriptor keeps the old file): other file
 * systems (memory, fault injection, caller-provided) read every entry anew.
 */
#define SMALL_MAX (64u << 10)
#define WINDOW (1u << 20)

typedef struct tfb_reader {
	char *index_path;
	int32_t num_shards;
	int seen_header;
	size_t cap;
	ckpt_io **io;          /* per shard, opened on first use */
	uint64_t *size;        /* per shard, valid when io[i] */
	pthread_mutex_t lock;  /* guards io, size and the bounce pool */
	ckpt_reader *r;
	struct tfb_extra *x;   /* parallel to r->vars, same capacity */
	void *bounce[BOUNCE_POOL]; /* free verify buffers (BOUNCE_SIZE each) */
	int nbounce;
	pthread_mutex_t wlock; /* guards the window */
	unsigned char *wbuf;   /* WINDOW bytes, allocated on first use */
	int wshard;            /* the window holds [woff, woff+wlen) of shard wshard */
	uint64_t woff, wlen;
	uint64_t wpos;         /* end of the last entry served from it: hits only move forward */
	ckpt__strpool names;   /* every r->vars[i].name */
} tfb_reader;

/* What the public ckpt_var_info has no room for. */
typedef struct tfb_extra {
	tfb_slice_key *key;    /* slice entries: the decoded key, else NULL */
	uint64_t off;          /* offset of the entry in the index */
	size_t *parts;         /* full entries: slice entry index per listed slice, SIZE_MAX = none */
	uint64_t run_off;      /* small entries next to others: their run's data range */
	uint32_t run_len;      /* 0 = not in a run (read on its own) */
} tfb_extra;

static int header_entry(tfb_reader *s, const unsigned char *val, size_t vlen, uint64_t off)
{
	ckpt_error_clear(); /* so that a NULL from unpack can be told apart: ENOMEM vs bad bytes */
	CkptTf__BundleHeaderProto *h = ckpt_tf__bundle_header_proto__unpack(&tfb_pb_allocator, vlen, val);
	if (!h && ckpt_error_last()->code == CKPT_ENOMEM)
		return CKPT_ENOMEM;
	if (!h)
		return ckpt__fail(CKPT_EFORMAT, s->index_path, "", (int64_t)off,
			"cannot decode the BundleHeaderProto (%zu bytes)", vlen);
	int rc = CKPT_OK;
	if (h->num_shards <= 0 || h->num_shards > CKPT_MAX_SHARDS)
		rc = ckpt__fail(h->num_shards <= 0 ? CKPT_EFORMAT : CKPT_ELIMIT, s->index_path, "", (int64_t)off,
			"header num_shards %d: want 1..%d", (int)h->num_shards, CKPT_MAX_SHARDS);
	else if (h->endianness != 0)
		rc = ckpt__fail(CKPT_EUNSUPPORTED, s->index_path, "", (int64_t)off,
			"header endianness %d: only little-endian (0) bundles are supported", (int)h->endianness);
	else if (h->version) {
		const CkptTf__VersionDef *v = h->version;
		if (v->producer < 0)
			rc = ckpt__fail(CKPT_EUNSUPPORTED, s->index_path, "", (int64_t)off,
				"bundle producer version %d is below the minimum 0", (int)v->producer);
		else if (v->min_consumer > 1)
			rc = ckpt__fail(CKPT_EUNSUPPORTED, s->index_path, "", (int64_t)off,
				"bundle needs consumer version >= %d; this reader is version 1", (int)v->min_consumer);
		for (size_t i = 0; rc == CKPT_OK && i < v->n_bad_consumers; i++)
			if (v->bad_consumers[i] == 1)
				rc = ckpt__fail(CKPT_EUNSUPPORTED, s->index_path, "", (int64_t)off,
					"bundle lists consumer version 1 (this reader) as bad");
	}
	if (rc == CKPT_OK) {
		s->num_shards = h->num_shards;
		s->seen_header = 1;
	}
	ckpt_tf__bundle_header_proto__free_unpacked(h, &tfb_pb_allocator);
	return rc;
}

/* Key as a C string in the reader's pool: raw for ordinary keys, \xNN-escaped for slice keys (leading 0x00). */
static char *key_name(tfb_reader *s, const unsigned char *key, size_t klen)
{
	if (klen == 0 || key[0] != 0) {
		if (memchr(key, 0, klen) == NULL)
			return ckpt__strpool_dup(&s->names, (const char *)key, klen);
	}
	char *out = ckpt__malloc(klen * 4 + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < klen; i++) {
		unsigned c = key[i];
		if (c < 0x20 || c >= 0x7f || c == '\\') {
			out[o++] = '\\'; out[o++] = 'x';
			out[o++] = hex[c >> 4]; out[o++] = hex[c & 15];
		} else {
			out[o++] = (char)c;
		}
	}
	out[o] = '\0';
	char *name = ckpt__strpool_dup(&s->names, out, o);
	ckpt__free(out);
	return name;
}

static int fill_slices(ckpt_var_info *v, const CkptTf__BundleEntryProto *e, const char *path, uint64_t off)
{
	ckpt_slice *sl = ckpt__calloc(e->n_slices, sizeof(*sl));
	if (!sl)
		return CKPT_ENOMEM;
	v->slices = sl;
	v->nslices = e->n_slices;
	for (size_t i = 0; i < e->n_slices; i++) {
		const CkptTf__TensorSliceProto *s = e->slices[i];
		if (s->n_extent > CKPT_MAX_RANK)
			return ckpt__fail(CKPT_ELIMIT, path, v->name, (int64_t)off,
				"slice %zu has %zu extents, over the rank cap %d", i, s->n_extent, CKPT_MAX_RANK);
		sl[i].rank = (int)s->n_extent;
		sl[i].extents = ckpt__calloc(s->n_extent ? s->n_extent : 1, sizeof(ckpt_extent));
		if (!sl[i].extents)
			return CKPT_ENOMEM;
		for (size_t k = 0; k < s->n_extent; k++) {
			sl[i].extents[k].start = s->extent[k]->start;
			sl[i].extents[k].length = s->extent[k]->has_length_case ==
				CKPT_TF__TENSOR_SLICE_PROTO__EXTENT__HAS_LENGTH_LENGTH ? s->extent[k]->length : -1;
		}
	}
	return CKPT_OK;
}

/* The protobuf-c form of an entry as a tfb_entry, refusing shapes that are not fully known. */
static int entry_from_pb(tfb_entry *out, const CkptTf__BundleEntryProto *e, const char *path, const char *name,
	uint64_t off)
{
	const CkptTf__TensorShapeProto *sh = e->shape;
	*out = (tfb_entry){ 0 };
	out->dtype = e->dtype;
	out->shard_id = e->shard_id;
	out->offset = e->offset;
	out->size = e->size;
	out->crc32c = e->crc32c;
	if (!sh)
		return CKPT_OK;
	if (sh->unknown_rank)
		return ckpt__fail(CKPT_EFORMAT, path, name, (int64_t)off, "shape has unknown rank");
	if (sh->n_dim > CKPT_MAX_RANK)
		return ckpt__fail(CKPT_ELIMIT, path, name, (int64_t)off,
			"rank %zu exceeds the cap %d", sh->n_dim, CKPT_MAX_RANK);
	out->rank = (int)sh->n_dim;
	for (size_t i = 0; i < sh->n_dim; i++) {
		if (sh->dim[i]->size < 0)
			return ckpt__fail(CKPT_EFORMAT, path, name, (int64_t)off,
				"dimension %zu is %lld: shapes must be fully known", i,
				(long long)sh->dim[i]->size);
		out->dims[i] = sh->dim[i]->size;
	}
	return CKPT_OK;
}

/* Entry `e` into v; `pb` (the protobuf-c form, NULL when decoded without it) carries the slices. */
static int check_entry(tfb_reader *s, ckpt_var_info *v, const tfb_entry *e, const CkptTf__BundleEntryProto *pb,
	uint64_t off)
{
	const char *path = s->index_path;
	v->dtype = (ckpt_dtype)e->dtype;
	v->shape.rank = e->rank;
	memcpy(v->shape.dims, e->dims, (size_t)e->rank * sizeof(e->dims[0]));
	v->shard = -1;
	v->offset = -1;
	uint64_t nelem;
	if (ckpt_shape_num_elements(&nelem, &v->shape) < 0)
		return ckpt__fail(CKPT_ELIMIT, path, v->name, (int64_t)off, "element count of the shape overflows");
	if (pb && pb->n_slices) {
		/* a "full" entry: no data range of its own; its bytes are the assembled slices */
		CKPT_TRY(fill_slices(v, pb, path, off));
		CKPT_TRY(tfb_slices_check(v, path, off));
		if (ckpt_dtype_valid(v->dtype) && v->dtype != CKPT_DT_STRING &&
			ckpt_shape_nbytes(&v->nbytes, &v->shape, v->dtype) < 0)
			return ckpt__fail(CKPT_ELIMIT, path, v->name, (int64_t)off, "byte size of the shape overflows");
		return CKPT_OK;
	}
	if (e->shard_id < 0 || e->shard_id >= s->num_shards)
		return ckpt__fail(CKPT_EFORMAT, path, v->name, (int64_t)off,
			"shard id %d out of range: the header has %d shard(s)", (int)e->shard_id, (int)s->num_shards);
	if (e->offset < 0 || e->size < 0)
		return ckpt__fail(CKPT_EFORMAT, path, v->name, (int64_t)off,
			"negative offset %lld or size %lld", (long long)e->offset, (long long)e->size);
	uint64_t end;
	if (ckpt__add_u64((uint64_t)e->offset, (uint64_t)e->size, &end) || end > (uint64_t)INT64_MAX)
		return ckpt__fail(CKPT_EFORMAT, path, v->name, (int64_t)off, "offset + size overflows");
	v->shard = e->shard_id;
	v->offset = e->offset;
	v->nbytes = (uint64_t)e->size;
	v->has_crc32c = 1;
	v->crc32c = ckpt_crc32c_unmask(e->crc32c);
	if (v->dtype == CKPT_DT_STRING) {
		if (nelem > 0 && (nelem > UINT64_MAX - 4 || (uint64_t)e->size < nelem + 4))
			return ckpt__fail(CKPT_EFORMAT, path, v->name, (int64_t)off,
				"string tensor of %llu elements needs at least %llu bytes, entry says %lld",
				(unsigned long long)nelem, (unsigned long long)nelem + 4, (long long)e->size);
	} else if (ckpt_dtype_valid(v->dtype)) {
		uint64_t want;
		if (ckpt_shape_nbytes(&want, &v->shape, v->dtype) < 0)
			return ckpt__fail(CKPT_ELIMIT, path, v->name, (int64_t)off, "byte size of the shape overflows");
		if (want != (uint64_t)e->size)
			return ckpt__fail(CKPT_EFORMAT, path, v->name, (int64_t)off,
				"size mismatch: %s needs %llu bytes (%llu elements x %zu), entry says %lld",
				ckpt_dtype_name(v->dtype), (unsigned long long)want,
				(unsigned long long)nelem, ckpt_dtype_size(v->dtype), (long long)e->size);
	}
	/* other dtypes (variant, quantized, ...) are listed; reading them is EUNSUPPORTED */
	return CKPT_OK;
}

/*
 * r->vars and s->x as one buffer of cap entries (the old ones copied in):
 * from 2 MiB on it is huge pages, so the ~400 bytes of 10,000 tiny entries
 * cost a few faults instead of a thousand. Freed with ckpt__buffer_free(r->vars).
 */
static int entry_arrays(tfb_reader *s, size_t cap)
{
	ckpt_reader *r = s->r;
	size_t xat = (cap * sizeof(ckpt_var_info) + 63) & ~(size_t)63;
	unsigned char *b = ckpt__buffer_alloc((uint64_t)xat + (uint64_t)cap * sizeof(tfb_extra), 0);
	if (!b)
		return CKPT_ENOMEM;
	if (r->nvars) {
		memcpy(b, r->vars, r->nvars * sizeof(ckpt_var_info));
		memcpy(b + xat, s->x, r->nvars * sizeof(tfb_extra));
	}
	ckpt__buffer_free(r->vars);
	r->vars = (ckpt_var_info *)(void *)b;
	s->x = (tfb_extra *)(void *)(b + xat);
	s->cap = cap;
	return CKPT_OK;
}

static int on_entry(void *ctx, const unsigned char *key, size_t klen,
	const unsigned char *val, size_t vlen, uint64_t off)
{
	tfb_reader *s = ctx;
	ckpt_reader *r = s->r;
	if (!s->seen_header) {
		if (klen != 0)
			return ckpt__fail(CKPT_EFORMAT, s->index_path, NULL, (int64_t)off,
				"first key is not the header key \"\"");
		return header_entry(s, val, vlen, off);
	}
	if (r->nvars >= CKPT_MAX_VARIABLES)
		return ckpt__fail(CKPT_ELIMIT, s->index_path, NULL, (int64_t)off,
			"more than %d entries", CKPT_MAX_VARIABLES);
	if (r->nvars == s->cap)
		CKPT_TRY(entry_arrays(s, s->cap * 2));
	ckpt_var_info *v = &r->vars[r->nvars];
	memset(v, 0, sizeof(*v));
	tfb_extra *x = &s->x[r->nvars];
	memset(x, 0, sizeof(*x));
	x->off = off;
	v->name = key_name(s, key, klen);
	if (!v->name)
		return CKPT_ENOMEM;
	r->nvars++;
	const unsigned char *nul = memchr(key, 0, klen);
	if (nul && nul != key)
		return ckpt__fail(CKPT_EFORMAT, s->index_path, v->name, (int64_t)off,
			"key contains an embedded NUL byte at position %zu", (size_t)(nul - key));
	if (nul) {
		/* only a partitioned variable's slice key may start with 0x00 (checked against its entry later) */
		v->slice_part = 1;
		x->key = ckpt__calloc(1, sizeof(*x->key));
		if (!x->key)
			return CKPT_ENOMEM;
		int k = tfb_slice_key_decode(key, klen, x->key);
		if (k == CKPT_ENOMEM)
			return k;
		if (k < 0)
			return ckpt__fail(CKPT_EFORMAT, s->index_path, v->name, (int64_t)off,
				"key starts with a NUL byte but is not a valid slice key (EncodeTensorNameSlice)");
	}
	v->role = ckpt__role_from_key(v->name);
	tfb_entry fe;
	if (tfb_entry_decode_fast(val, vlen, &fe))
		return check_entry(s, v, &fe, NULL, off);
	ckpt_error_clear();
	tfb_pb_scratch scratch;
	ProtobufCAllocator pa;
	tfb_pb_scratch_init(&scratch, &pa);
	CkptTf__BundleEntryProto *e = ckpt_tf__bundle_entry_proto__unpack(&pa, vlen, val);
	if (!e && ckpt_error_last()->code == CKPT_ENOMEM)
		return CKPT_ENOMEM;
	if (!e)
		return ckpt__fail(CKPT_EFORMAT, s->index_path, v->name, (int64_t)off,
			"cannot decode the BundleEntryProto (%zu bytes)", vlen);
	int rc = entry_from_pb(&fe, e, s->index_path, v->name, off);
	if (rc == CKPT_OK)
		rc = check_entry(s, v, &fe, e, off);
	ckpt_tf__bundle_entry_proto__free_unpacked(e, &pa);
	return rc;
}

/* ---- partitioned variables: linking slice entries, assembling the full tensor ---- */

typedef struct data_range {
	int shard;
	uint64_t start, end;
	size_t idx;
} data_range;

static int cmp_range(const void *a, const void *b)
{
	const data_range *x = a, *y = b;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static int shard_io(tfb_reader *s, int shard, const char *key, ckpt_io **io, uint64_t *size);

/* On the error path only: an overlap that runs past the end of the file is reported as that. */
static int past_end(ckpt_reader *r, size_t i)
{
	const ckpt_var_info *v = &r->vars[i];
	ckpt_io *io;
	uint64_t fsize;
	if (!r->shard_exists[v->shard] || shard_io(r->state, v->shard, v->name, &io, &fsize) < 0 ||
		(uint64_t)v->offset + v->nbytes <= fsize)
		return CKPT_OK;
	return ckpt__fail(CKPT_EFORMAT, r->shard_paths[v->shard], v->name, v->offset,
		"tensor extends past the end of its data file: offset %lld + size %llu > file size %llu",
		(long long)v->offset, (unsigned long long)v->nbytes, (unsigned long long)fsize);
}

/* Group small entries that follow each other without a gap (ranges sorted by shard, start). */
static void mark_runs(ckpt_reader *r, const data_range *a, size_t n)
{
	tfb_reader *s = r->state;
	for (size_t k = 0; k < n;) {
		size_t e = k + 1;
		if (a[k].end - a[k].start <= SMALL_MAX)
			while (e < n && a[e].shard == a[k].shard && a[e].start == a[e - 1].end &&
				a[e].end - a[e].start <= SMALL_MAX && a[e].end - a[k].start <= WINDOW)
				e++;
		if (e - k > 1)
			for (size_t q = k; q < e; q++) {
				s->x[a[q].idx].run_off = a[k].start;
				s->x[a[q].idx].run_len = (uint32_t)(a[e - 1].end - a[k].start);
			}
		k = e;
	}
}

/* Hostile item 3: two entries may not share data bytes (zero-size entries own none). */
static int check_overlaps(ckpt_reader *r)
{
	data_range *a = ckpt__calloc(r->nvars ? r->nvars : 1, sizeof(*a));
	if (!a)
		return CKPT_ENOMEM;
	size_t n = 0;
	for (size_t i = 0; i < r->nvars; i++) {
		const ckpt_var_info *v = &r->vars[i];
		if (v->shard >= 0 && v->offset >= 0 && v->nbytes > 0)
			a[n++] = (data_range){ v->shard, (uint64_t)v->offset, (uint64_t)v->offset + v->nbytes, i };
	}
	/* a bundle's data nearly follows its key order (the graph's entry sorts first, is written last) */
	int rc = ckpt__sort(a, n, sizeof(*a), cmp_range);
	if (rc < 0) {
		ckpt__free(a);
		return rc;
	}
	mark_runs(r, a, n);
	size_t far = 0; /* the entry reaching furthest so far in this shard */
	for (size_t k = 1; k < n; k++) {
		if (a[k].shard != a[far].shard) {
			far = k;
			continue;
		}
		if (a[k].start < a[far].end) {
			if ((rc = past_end(r, a[k].idx)) < 0 || (rc = past_end(r, a[far].idx)) < 0)
				break;
			const ckpt_var_info *p = &r->vars[a[far].idx], *q = &r->vars[a[k].idx];
			rc = ckpt__fail(CKPT_EFORMAT, r->shard_paths[a[k].shard], q->name, (int64_t)a[k].start,
				"byte ranges overlap in shard %d: '%s' [%llu, %llu) and '%s' [%llu, %llu)",
				a[k].shard, p->name, (unsigned long long)a[far].start, (unsigned long long)a[far].end,
				q->name, (unsigned long long)a[k].start, (unsigned long long)a[k].end);
			break;
		}
		if (a[k].end > a[far].end)
			far = k;
	}
	ckpt__free(a);
	return rc;
}

/* Rows [rank, start[rank], length[rank], k] of one full entry's resolved slices, for bsearch. */
static int cmp_row(const void *a, const void *b)
{
	const int64_t *x = *(const int64_t *const *)a, *y = *(const int64_t *const *)b;
	for (int64_t d = 1; d <= 2 * x[0]; d++)
		if (x[d] != y[d])
			return x[d] < y[d] ? -1 : 1;
	return 0;
}

/* The plain (non-slice) entry named `name`: entries after `first` are in key (strcmp) order. */
static size_t find_plain(const ckpt_reader *r, size_t first, const tfb_slice_key *k)
{
	if (strlen(k->name) != k->nlen)
		return SIZE_MAX; /* a NUL in the name: no plain key holds one */
	size_t lo = first, hi = r->nvars;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(r->vars[mid].name, k->name);
		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return SIZE_MAX;
}

/*
 * Every slice key must name a partitioned ("full") entry of the same rank and
 * dtype and one of the slices it lists, with a matching shape. Slice keys sort
 * first (leading 0x00), those of one name next to each other.
 */
static int link_slices(ckpt_reader *r)
{
	tfb_reader *s = r->state;
	const char *path = s->index_path;
	size_t first = 0;
	while (first < r->nvars && s->x[first].key)
		first++;
	for (size_t i = first; i < r->nvars; i++) {
		const ckpt_var_info *v = &r->vars[i];
		if (!v->nslices)
			continue;
		s->x[i].parts = ckpt__malloc(v->nslices * sizeof(size_t));
		if (!s->x[i].parts)
			return CKPT_ENOMEM;
		for (size_t k = 0; k < v->nslices; k++)
			s->x[i].parts[k] = SIZE_MAX;
	}
	int rc = CKPT_OK;
	int64_t *rows = NULL;
	int64_t **sorted = NULL;
	size_t full = SIZE_MAX;
	for (size_t j = 0; rc == CKPT_OK && j < first; j++) {
		const ckpt_var_info *sv = &r->vars[j];
		const tfb_slice_key *k = s->x[j].key;
		int64_t off = (int64_t)s->x[j].off;
		if (j == 0 || strcmp(k->name, s->x[j - 1].key->name) != 0 || k->nlen != s->x[j - 1].key->nlen) {
			/* a new name: find its full entry and sort that entry's slices */
			ckpt__free(rows);
			ckpt__free(sorted);
			rows = NULL;
			sorted = NULL;
			full = find_plain(r, first, k);
			if (full == SIZE_MAX) {
				rc = ckpt__fail(CKPT_EFORMAT, path, sv->name, off,
					"slice key for '%s' refers to no entry of that name", k->name);
				break;
			}
			const ckpt_var_info *fv = &r->vars[full];
			if (!fv->nslices) {
				rc = ckpt__fail(CKPT_EFORMAT, path, sv->name, off,
					"slice key for '%s', but that entry is not partitioned (lists no slices)", fv->name);
				break;
			}
			size_t w = 2 * (size_t)fv->shape.rank + 2;
			rows = ckpt__calloc(fv->nslices, w * sizeof(int64_t));
			sorted = ckpt__calloc(fv->nslices, sizeof(*sorted));
			if (!rows || !sorted) {
				rc = CKPT_ENOMEM;
				break;
			}
			for (size_t q = 0; q < fv->nslices; q++) {
				int64_t *row = rows + q * w;
				row[0] = fv->shape.rank;
				(void)tfb_slice_resolve(&fv->shape, &fv->slices[q], row + 1, row + 1 + fv->shape.rank);
				row[w - 1] = (int64_t)q;
				sorted[q] = row;
			}
			qsort(sorted, fv->nslices, sizeof(*sorted), cmp_row);
		}
		const ckpt_var_info *fv = &r->vars[full];
		const int rank = fv->shape.rank;
		if (k->rank != rank) {
			rc = ckpt__fail(CKPT_EFORMAT, path, sv->name, off,
				"slice key for '%s' has rank %d, the entry has rank %d", fv->name, k->rank, rank);
			break;
		}
		if (sv->nslices || sv->dtype != fv->dtype) {
			rc = ckpt__fail(CKPT_EFORMAT, path, sv->name, off,
				"slice entry for '%s' must be plain data of its dtype %s, is %s%s", fv->name,
				ckpt_dtype_name(fv->dtype), ckpt_dtype_name(sv->dtype), sv->nslices ? " (partitioned)" : "");
			break;
		}
		int64_t want[2 * CKPT_MAX_RANK + 2];
		int64_t *wp = want;
		want[0] = rank;
		ckpt_extent ex[CKPT_MAX_RANK];
		for (int d = 0; d < rank; d++)
			ex[d] = (ckpt_extent){ k->start[d], k->length[d] };
		ckpt_slice ks = { rank, ex };
		int64_t **hit = NULL;
		if (tfb_slice_resolve(&fv->shape, &ks, want + 1, want + 1 + rank) == 0)
			hit = bsearch(&wp, sorted, fv->nslices, sizeof(*sorted), cmp_row);
		if (!hit) {
			rc = ckpt__fail(CKPT_EFORMAT, path, sv->name, off,
				"slice key for '%s' names a slice that the entry does not list", fv->name);
			break;
		}
		size_t q = (size_t)(*hit)[2 * rank + 1];
		for (int d = 0; d < rank && rc == CKPT_OK; d++)
			if (sv->shape.rank != rank || sv->shape.dims[d] != want[1 + rank + d])
				rc = ckpt__fail(CKPT_EFORMAT, path, sv->name, off,
					"slice entry for '%s' has shape dim %d = %lld, the slice is %lld long", fv->name, d,
					sv->shape.rank == rank ? (long long)sv->shape.dims[d] : -1LL,
					(long long)want[1 + rank + d]);
		if (rc == CKPT_OK && s->x[full].parts[q] != SIZE_MAX)
			rc = ckpt__fail(CKPT_EFORMAT, path, sv->name, off,
				"slice %zu of '%s' is stored twice", q, fv->name);
		if (rc == CKPT_OK)
			s->x[full].parts[q] = j;
	}
	ckpt__free(rows);
	ckpt__free(sorted);
	return rc;
}

static int locate(ckpt_reader *r, size_t i, ckpt_io **io);
static int read_verified(ckpt_reader *r, size_t i, ckpt_io *io, unsigned char *dst, size_t n);

/*
 * Assemble partitioned entry i into dst (n bytes, or a new buffer when dst is
 * NULL). Each slice entry is read and crc-checked on its own; the slices tile
 * the shape (checked at open), so their stored bytes add up to exactly n.
 */
static int read_partitioned(ckpt_reader *r, size_t i, unsigned char *dst, ckpt_tensor **out)
{
	tfb_reader *s = r->state;
	const ckpt_var_info *v = &r->vars[i];
	if (!ckpt_dtype_valid(v->dtype) || v->dtype == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EUNSUPPORTED, s->index_path, v->name, (int64_t)s->x[i].off,
			"partitioned %s tensor stored as %zu slices: only fixed-size dtypes are assembled",
			ckpt_dtype_name(v->dtype), v->nslices);
	const size_t *parts = s->x[i].parts;
	uint64_t stored = 0, largest = 0;
	for (size_t k = 0; k < v->nslices; k++) {
		int64_t st[CKPT_MAX_RANK], len[CKPT_MAX_RANK];
		(void)tfb_slice_resolve(&v->shape, &v->slices[k], st, len);
		int empty = 0;
		for (int d = 0; d < v->shape.rank; d++)
			empty |= len[d] == 0;
		if (empty)
			continue;
		if (parts[k] == SIZE_MAX)
			return ckpt__fail(CKPT_EFORMAT, s->index_path, v->name, (int64_t)s->x[i].off,
				"slice %zu of %zu has no slice entry in the index", k, v->nslices);
		uint64_t nb = r->vars[parts[k]].nbytes;
		if (ckpt__add_u64(stored, nb, &stored))
			return ckpt__fail(CKPT_EFORMAT, s->index_path, v->name, -1, "slice sizes overflow");
		if (nb > largest)
			largest = nb;
	}
	if (stored != v->nbytes)
		return ckpt__fail(CKPT_EFORMAT, s->index_path, v->name, (int64_t)s->x[i].off,
			"slice entries hold %llu bytes, the tensor needs %llu",
			(unsigned long long)stored, (unsigned long long)v->nbytes);
	uint64_t budget = r->opts.memory_budget ? r->opts.memory_budget : CKPT_DEFAULT_MEMORY_BUDGET;
	if (v->nbytes > SIZE_MAX || (!dst && v->nbytes > budget) || largest > budget - (dst ? 0 : v->nbytes))
		return ckpt__fail(CKPT_ELIMIT, s->index_path, v->name, -1,
			"partitioned tensor of %llu bytes exceeds the memory budget of %llu bytes",
			(unsigned long long)v->nbytes, (unsigned long long)budget);
	unsigned char *buf = dst ? dst : ckpt__malloc(v->nbytes ? (size_t)v->nbytes : 1);
	unsigned char *tmp = ckpt__malloc(largest ? (size_t)largest : 1);
	int rc = (!buf || !tmp) ? CKPT_ENOMEM : CKPT_OK;
	size_t esize = ckpt_dtype_size(v->dtype);
	for (size_t k = 0; rc == CKPT_OK && k < v->nslices; k++) {
		if (parts[k] == SIZE_MAX)
			continue; /* an empty slice (checked above) */
		const ckpt_var_info *sv = &r->vars[parts[k]];
		int64_t st[CKPT_MAX_RANK], len[CKPT_MAX_RANK];
		(void)tfb_slice_resolve(&v->shape, &v->slices[k], st, len);
		ckpt_io *io = NULL;
		rc = locate(r, parts[k], &io);
		if (rc == CKPT_OK && sv->nbytes)
			rc = read_verified(r, parts[k], io, tmp, (size_t)sv->nbytes);
		if (rc == CKPT_OK && sv->nbytes)
			tfb_slice_scatter(buf, &v->shape, esize, st, len, tmp);
	}
	ckpt__free(tmp);
	if (dst)
		return rc;
	ckpt_tensor *t = NULL;
	if (rc == CKPT_OK)
		rc = ckpt_tensor_wrap(&t, v->dtype, &v->shape, buf, v->nbytes);
	if (rc < 0) {
		ckpt__free(buf);
		return rc;
	}
	t->owns_data = 1;
	*out = t;
	return CKPT_OK;
}

/* The open io of `shard`, opening it on first use. */
static int shard_io(tfb_reader *s, int shard, const char *key, ckpt_io **io, uint64_t *size)
{
	ckpt_reader *r = s->r;
	int rc = CKPT_OK;
	pthread_mutex_lock(&s->lock);
	if (!s->io[shard]) {
		if (!r->shard_exists[shard]) {
			rc = ckpt__fail(CKPT_ENOTFOUND, r->shard_paths[shard], key, -1,
				"data file missing: %s (shard %d of %d)", r->shard_paths[shard], shard, r->nshards);
		} else {
			ckpt_io *f = NULL;
			rc = ckpt_vfs_open(&f, r->vfs, r->shard_paths[shard], CKPT_IO_READ);
			if (rc == CKPT_OK && (rc = ckpt_io_size(&s->size[shard], f)) < 0)
				ckpt_io_close(f);
			else if (rc == CKPT_OK)
				s->io[shard] = f;
			if (rc < 0)
				ckpt__error_annotate(r->shard_paths[shard], key);
		}
	}
	*io = s->io[shard];
	*size = s->size[shard];
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Locate entry i's bytes: checks dtype support, shard presence and bounds. */
static int locate(ckpt_reader *r, size_t i, ckpt_io **io)
{
	tfb_reader *s = r->state;
	const ckpt_var_info *v = &r->vars[i];
	if (!ckpt_dtype_valid(v->dtype))
		return ckpt__fail(CKPT_EUNSUPPORTED, s->index_path, v->name, -1,
			"dtype %d is not supported", (int)v->dtype);
	uint64_t fsize = 0;
	CKPT_TRY(shard_io(s, v->shard, v->name, io, &fsize));
	uint64_t budget = r->opts.memory_budget ? r->opts.memory_budget : CKPT_DEFAULT_MEMORY_BUDGET;
	if ((uint64_t)v->offset > fsize || v->nbytes > fsize - (uint64_t)v->offset)
		return ckpt__fail(CKPT_EFORMAT, r->shard_paths[v->shard], v->name, v->offset,
			"tensor extends past the end of its data file: offset %lld + size %llu > file size %llu",
			(long long)v->offset, (unsigned long long)v->nbytes, (unsigned long long)fsize);
	if (v->nbytes > budget || v->nbytes > SIZE_MAX)
		return ckpt__fail(CKPT_ELIMIT, r->shard_paths[v->shard], v->name, v->offset,
			"tensor of %llu bytes exceeds the memory budget of %llu bytes",
			(unsigned long long)v->nbytes, (unsigned long long)budget);
	return CKPT_OK;
}

/* Entry i's bytes [off, off+len) into dst (or, when dst is NULL, through `bounce`), crc-ed piece by piece. */
static int read_span(ckpt_reader *r, size_t i, ckpt_io *io, unsigned char *dst, unsigned char *bounce,
	uint64_t off, size_t len, int verify, uint32_t *crc)
{
	const ckpt_var_info *v = &r->vars[i];
	uint32_t c = 0;
	size_t piece = dst ? READ_PIECE : BOUNCE_SIZE;
	for (size_t done = 0; done < len;) {
		size_t k = len - done < piece ? len - done : piece;
		unsigned char *p = dst ? dst + done : bounce;
		int rc = ckpt_io_read_exact(io, p, k, (uint64_t)v->offset + off + done);
		if (rc < 0) {
			ckpt__error_annotate(r->shard_paths[v->shard], v->name);
			return rc;
		}
		if (verify)
			c = ckpt_crc32c_extend(c, p, k);
		done += k;
	}
	*crc = c;
	return CKPT_OK;
}

static int crc_mismatch(ckpt_reader *r, size_t i, uint32_t got)
{
	const ckpt_var_info *v = &r->vars[i];
	return ckpt__fail(CKPT_ECHECKSUM, r->shard_paths[v->shard], v->name, v->offset,
		"crc32c mismatch: want 0x%08x, got 0x%08x (%llu bytes at offset %lld)",
		v->crc32c, got, (unsigned long long)v->nbytes, (long long)v->offset);
}

/* A verify buffer from the reader's pool (or a new one); NULL with ENOMEM set. */
static unsigned char *bounce_get(tfb_reader *s)
{
	void *b = NULL;
	pthread_mutex_lock(&s->lock);
	if (s->nbounce > 0)
		b = s->bounce[--s->nbounce];
	pthread_mutex_unlock(&s->lock);
	return b ? b : ckpt__malloc(BOUNCE_SIZE);
}

static void bounce_put(tfb_reader *s, unsigned char *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&s->lock);
	if (s->nbounce < BOUNCE_POOL) {
		s->bounce[s->nbounce++] = b;
		b = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	ckpt__free(b);
}

/* One parallel pass: chunk k is [k*chunk, min(n, (k+1)*chunk)). */
typedef struct par_pass {
	ckpt_reader *r;
	size_t i;
	ckpt_io *io;
	unsigned char *dst;        /* NULL: verify through bounce buffers */
	size_t n, chunk, nchunks;
	int verify;
	tfb_first_error err;       /* the lowest failing chunk's */
	uint32_t crc[PAR_MAX_CHUNKS];
} par_pass;

static void par_chunk(void *arg, size_t k)
{
	par_pass *p = arg;
	if (atomic_load_explicit(&p->err.failed, memory_order_relaxed))
		return;
	tfb_reader *s = p->r->state;
	unsigned char *bounce = NULL;
	if (!p->dst && !(bounce = bounce_get(s))) {
		tfb_first_error_note(&p->err, k);
		return;
	}
	size_t a = k * p->chunk, len = p->n - a < p->chunk ? p->n - a : p->chunk;
	if (read_span(p->r, p->i, p->io, p->dst ? p->dst + a : NULL, bounce, a, len, p->verify, &p->crc[k]) < 0)
		tfb_first_error_note(&p->err, k);
	bounce_put(s, bounce);
}

/* Read (dst) or verify (dst NULL) entry i of n bytes in chunks on up to `threads` threads. */
static int par_read(ckpt_reader *r, size_t i, ckpt_io *io, unsigned char *dst, size_t n, int threads)
{
	par_pass *p = ckpt__malloc(sizeof(*p));
	if (!p)
		return CKPT_ENOMEM;
	memset(p, 0, sizeof(*p));
	p->r = r;
	p->i = i;
	p->io = io;
	p->dst = dst;
	p->n = n;
	p->verify = !r->opts.no_verify;
	tfb_first_error_init(&p->err);
	size_t chunk = n / ((size_t)threads * PAR_CHUNKS_PER_THREAD);
	if (chunk < PAR_CHUNK_MIN)
		chunk = PAR_CHUNK_MIN;
	if (chunk < n / PAR_MAX_CHUNKS + 1)
		chunk = n / PAR_MAX_CHUNKS + 1;
	chunk = (chunk + 65535) & ~(size_t)65535; /* page-aligned pieces */
	p->chunk = chunk;
	p->nchunks = (n + chunk - 1) / chunk;
	tfb_par_for(p->nchunks, par_chunk, p);
	int rc = tfb_first_error_finish(&p->err);
	if (rc == CKPT_OK && p->verify) {
		uint32_t crc = p->crc[0];
		for (size_t k = 1; k < p->nchunks; k++) {
			size_t len = n - k * chunk < chunk ? n - k * chunk : chunk;
			crc = ckpt__crc32c_combine(crc, p->crc[k], len);
		}
		if (crc != r->vars[i].crc32c)
			rc = crc_mismatch(r, i, crc);
	}
	ckpt__free(p);
	return rc;
}

/* A small entry of a run: from the window, reading its whole run into it first when needed. */
static int read_small(ckpt_reader *r, size_t i, ckpt_io *io, unsigned char *dst, size_t n)
{
	tfb_reader *s = r->state;
	const ckpt_var_info *v = &r->vars[i];
	const tfb_extra *x = &s->x[i];
	uint64_t off = (uint64_t)v->offset;
	int rc = CKPT_OK;
	pthread_mutex_lock(&s->wlock);
	/*
	 * Hits only move forward through a run: reading an entry again (or an
	 * earlier one) rereads the file, so a file changed under the reader is
	 * seen as it is now, as without the window.
	 */
	if (!(s->wlen && s->wshard == v->shard && off >= s->wpos && off + n <= s->woff + s->wlen)) {
		s->wlen = 0;
		if (!s->wbuf && !(s->wbuf = ckpt__malloc(WINDOW)))
			rc = CKPT_ENOMEM;
		/* a truncated file fails the entries past its end only (locate checked this one) */
		uint64_t fsize = s->size[v->shard], len = x->run_len;
		if (x->run_off + len > fsize)
			len = fsize - x->run_off;
		if (rc == CKPT_OK && (rc = ckpt_io_read_exact(io, s->wbuf, (size_t)len, x->run_off)) < 0)
			ckpt__error_annotate(r->shard_paths[v->shard], v->name);
		if (rc == CKPT_OK) {
			s->wshard = v->shard;
			s->woff = x->run_off;
			s->wlen = len;
		}
	}
	uint32_t crc = 0;
	if (rc == CKPT_OK) {
		s->wpos = off + n;
		const unsigned char *p = s->wbuf + (off - s->woff);
		if (dst)
			memcpy(dst, p, n);
		if (!r->opts.no_verify)
			crc = ckpt_crc32c_extend(0, p, n);
	}
	pthread_mutex_unlock(&s->wlock);
	if (rc == CKPT_OK && !r->opts.no_verify && crc != v->crc32c)
		rc = crc_mismatch(r, i, crc);
	return rc;
}

/* Read (dst) or verify (dst NULL) entry i, whose n bytes are located; parallel when it pays. */
static int read_verified(ckpt_reader *r, size_t i, ckpt_io *io, unsigned char *dst, size_t n)
{
	tfb_reader *s = r->state;
	int verify = !r->opts.no_verify;
	int threads = n >= PAR_MIN_BYTES ? tfb_par_threads() : 1;
	if (threads > 1)
		return par_read(r, i, io, dst, n, threads);
	/*
	 * Reading a run of small entries ahead pays on a local file (one that
	 * lends a descriptor); a file system without one (remote, counting,
	 * fault-injecting) gets exactly the bytes of each entry it is asked for.
	 */
	if (s->x[i].run_len && ckpt_io_fd(io) >= 0)
		return read_small(r, i, io, dst, n);
	unsigned char small[4096], *bounce = NULL;
	if (!dst)
		bounce = n <= sizeof(small) ? small : bounce_get(s);
	if (!dst && !bounce)
		return CKPT_ENOMEM;
	uint32_t crc = 0;
	int rc = read_span(r, i, io, dst, bounce, 0, n, verify, &crc);
	if (bounce != small)
		bounce_put(s, bounce);
	if (rc == CKPT_OK && verify && crc != r->vars[i].crc32c)
		rc = crc_mismatch(r, i, crc);
	return rc;
}

int tfb_string_decode(const unsigned char *p, size_t n, uint64_t nelem, ckpt_bytes *elems,
	int verify, uint32_t want_masked, const char *path, const char *key, uint64_t off)
{
	if (n == 0) {
		/* BundleReader returns early for size 0: every element is empty */
		for (uint64_t i = 0; i < nelem; i++) {
			elems[i].len = 0;
			elems[i].data = (char *)"";
		}
		return CKPT_OK;
	}
	const unsigned char *q = p, *end = p + n;
	uint32_t crc = 0;
	uint64_t total = 0;
	for (uint64_t i = 0; i < nelem; i++) {
		uint64_t len;
		size_t k = tfb_varint_get(q, end, &len);
		if (!k)
			return ckpt__fail(CKPT_EFORMAT, path, key, (int64_t)(off + (uint64_t)(q - p)),
				"bad varint for the length of string element %llu", (unsigned long long)i);
		q += k;
		elems[i].len = len;
		if (len <= 0xffffffffu) {
			unsigned char b[4];
			tfb_put32(b, (uint32_t)len);
			crc = ckpt_crc32c_extend(crc, b, 4);
		} else {
			unsigned char b[8];
			tfb_put32(b, (uint32_t)len);
			tfb_put32(b + 4, (uint32_t)(len >> 32));
			crc = ckpt_crc32c_extend(crc, b, 8);
		}
		if (ckpt__add_u64(total, len, &total) || total > n)
			return ckpt__fail(CKPT_EFORMAT, path, key, (int64_t)(off + (uint64_t)(q - p - k)),
				"string lengths add up to more than the %zu stored bytes", n);
	}
	if (end - q < 4)
		return ckpt__fail(CKPT_EFORMAT, path, key, (int64_t)(off + (uint64_t)(q - p)),
			"string tensor truncated before its length checksum");
	uint32_t stored = ckpt_crc32c_unmask(tfb_get32(q));
	if (stored != crc)
		return ckpt__fail(CKPT_ECHECKSUM, path, key, (int64_t)(off + (uint64_t)(q - p)),
			"string length checksum mismatch: want 0x%08x, got 0x%08x", stored, crc);
	crc = ckpt_crc32c_extend(crc, q, 4);
	q += 4;
	if (total > (uint64_t)(end - q))
		return ckpt__fail(CKPT_EFORMAT, path, key, (int64_t)(off + (uint64_t)(q - p)),
			"string bytes truncated: %llu needed, %zu left", (unsigned long long)total, (size_t)(end - q));
	if (verify)
		crc = ckpt_crc32c_extend(crc, q, (size_t)total);
	for (uint64_t i = 0; i < nelem; i++) {
		elems[i].data = (char *)q;
		q += elems[i].len;
	}
	if (verify && crc != ckpt_crc32c_unmask(want_masked))
		return ckpt__fail(CKPT_ECHECKSUM, path, key, (int64_t)off,
			"crc32c mismatch: want 0x%08x, got 0x%08x", ckpt_crc32c_unmask(want_masked), crc);
	return CKPT_OK;
}

static int read_strings(ckpt_reader *r, size_t i, ckpt_io *io, ckpt_tensor **out)
{
	const ckpt_var_info *v = &r->vars[i];
	uint64_t nelem;
	CKPT_TRY(ckpt_shape_num_elements(&nelem, &v->shape));
	if (nelem > v->nbytes && v->nbytes > 0)
		return ckpt__fail(CKPT_EFORMAT, r->shard_paths[v->shard], v->name, v->offset,
			"%llu string elements cannot fit in %llu bytes",
			(unsigned long long)nelem, (unsigned long long)v->nbytes);
	/* an empty (size 0) entry may claim many empty strings: their descriptors count against the budget */
	uint64_t budget = r->opts.memory_budget ? r->opts.memory_budget : CKPT_DEFAULT_MEMORY_BUDGET;
	if (nelem > budget / sizeof(ckpt_bytes))
		return ckpt__fail(CKPT_ELIMIT, r->shard_paths[v->shard], v->name, v->offset,
			"%llu string elements exceed the memory budget of %llu bytes",
			(unsigned long long)nelem, (unsigned long long)budget);
	unsigned char *raw = ckpt__malloc((size_t)v->nbytes);
	ckpt_bytes *elems = ckpt__calloc(nelem ? (size_t)nelem : 1, sizeof(*elems));
	int rc = (!raw || !elems) ? CKPT_ENOMEM : CKPT_OK;
	if (rc == CKPT_OK && v->nbytes) {
		rc = ckpt_io_read_exact(io, raw, (size_t)v->nbytes, (uint64_t)v->offset);
		if (rc < 0)
			ckpt__error_annotate(r->shard_paths[v->shard], v->name);
	}
	if (rc == CKPT_OK)
		rc = tfb_string_decode(raw, (size_t)v->nbytes, nelem, elems, !r->opts.no_verify,
			ckpt_crc32c_mask(v->crc32c), r->shard_paths[v->shard], v->name, (uint64_t)v->offset);
	if (rc == CKPT_OK)
		rc = ckpt_tensor_new_strings(out, &v->shape, elems);
	ckpt__free(elems);
	ckpt__free(raw);
	return rc;
}

int tfb_read(ckpt_reader *r, size_t i, ckpt_tensor **out)
{
	*out = NULL;
	if (i >= r->nvars)
		return ckpt__fail(CKPT_EINVAL, r->path, NULL, -1, "entry %zu out of range (%zu entries)", i, r->nvars);
	ckpt_io *io = NULL;
	if (r->vars[i].nslices)
		return read_partitioned(r, i, NULL, out);
	CKPT_TRY(locate(r, i, &io));
	const ckpt_var_info *v = &r->vars[i];
	if (v->dtype == CKPT_DT_STRING)
		return read_strings(r, i, io, out);
	if (v->nbytes == 0) {
		CKPT_TRY(ckpt_tensor_new(out, v->dtype, &v->shape));
		if (!r->opts.no_verify && v->crc32c != 0)
			return ckpt__fail(CKPT_ECHECKSUM, r->shard_paths[v->shard], v->name, v->offset,
				"crc32c mismatch: want 0x%08x, got 0x00000000 (empty tensor)", v->crc32c);
		return CKPT_OK;
	}
	unsigned char *data = ckpt__malloc((size_t)v->nbytes);
	if (!data)
		return CKPT_ENOMEM;
	ckpt__advise_huge(data, (size_t)v->nbytes); /* the 2 MiB-aligned interior, if asked for */
	int rc = read_verified(r, i, io, data, (size_t)v->nbytes);
	ckpt_tensor *t = NULL;
	if (rc == CKPT_OK)
		rc = ckpt_tensor_wrap(&t, v->dtype, &v->shape, data, v->nbytes);
	if (rc < 0) {
		ckpt__free(data);
		return rc;
	}
	t->owns_data = 1; /* the buffer is ours (ckpt__malloc): hand it over */
	*out = t;
	return CKPT_OK;
}

int tfb_read_into(ckpt_reader *r, size_t i, void *dst, size_t n)
{
	if (i >= r->nvars)
		return ckpt__fail(CKPT_EINVAL, r->path, NULL, -1, "entry %zu out of range (%zu entries)", i, r->nvars);
	const ckpt_var_info *v = &r->vars[i];
	if (v->dtype == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EINVAL, r->path, v->name, -1, "read_into needs a fixed-size dtype, entry is a string tensor");
	if (v->nslices) {
		if (n != v->nbytes)
			return ckpt__fail(CKPT_EINVAL, r->path, v->name, -1,
				"destination holds %zu bytes, tensor has %llu", n, (unsigned long long)v->nbytes);
		return read_partitioned(r, i, dst, NULL);
	}
	ckpt_io *io = NULL;
	CKPT_TRY(locate(r, i, &io));
	if (n != v->nbytes)
		return ckpt__fail(CKPT_EINVAL, r->shard_paths[v->shard], v->name, v->offset,
			"destination holds %zu bytes, tensor has %llu", n, (unsigned long long)v->nbytes);
	if (n == 0) {
		if (!r->opts.no_verify && v->crc32c != 0)
			return ckpt__fail(CKPT_ECHECKSUM, r->shard_paths[v->shard], v->name, v->offset,
				"crc32c mismatch: want 0x%08x, got 0x00000000 (empty tensor)", v->crc32c);
		return CKPT_OK;
	}
	return read_verified(r, i, io, dst, n);
}

/*
 * Check entry i's crc without keeping its bytes: streamed through a bounce
 * buffer (parallel over chunks for big entries). String and partitioned
 * entries are checked by a full read.
 */
int tfb_verify(ckpt_reader *r, size_t i)
{
	if (i >= r->nvars)
		return ckpt__fail(CKPT_EINVAL, r->path, NULL, -1, "entry %zu out of range (%zu entries)", i, r->nvars);
	const ckpt_var_info *v = &r->vars[i];
	if (v->nslices || v->dtype == CKPT_DT_STRING) {
		ckpt_tensor *t = NULL;
		int rc = tfb_read(r, i, &t);
		ckpt_tensor_free(t);
		return rc;
	}
	ckpt_io *io = NULL;
	CKPT_TRY(locate(r, i, &io));
	if (r->opts.no_verify)
		return CKPT_OK; /* structure only: locate checked the bounds against the file */
	if (v->nbytes == 0) {
		if (v->crc32c != 0)
			return ckpt__fail(CKPT_ECHECKSUM, r->shard_paths[v->shard], v->name, v->offset,
				"crc32c mismatch: want 0x%08x, got 0x00000000 (empty tensor)", v->crc32c);
		return CKPT_OK;
	}
	return read_verified(r, i, io, NULL, (size_t)v->nbytes);
}

/*
 * Many whole entries at once: from data files that lend a descriptor,
 * through the cold-read pipeline when the batch is big and mostly not in the
 * page cache (bundle_direct.c); from files that lend none (object storage),
 * in few large reads over runs of neighbouring entries (bundle_runs.c).
 * Declined otherwise (local files always under CKPT__READ_MANY_REMOTE_ONLY),
 * and when an entry does not locate (the entry-by-entry path then reports it
 * exactly as it always has).
 */
int tfb_read_many(ckpt_reader *r, const ckpt__read_req *req, size_t n, unsigned flags)
{
	int policy = tfb_direct_policy();
	uint64_t total = 0;
	for (size_t k = 0; k < n; k++) {
		if (!req[k].dst && r->opts.no_verify)
			return CKPT__DECLINED; /* nothing to read: tfb_verify checks the structure only */
		total += r->vars[req[k].entry].nbytes;
	}
	tfb_span *spans = ckpt__malloc((n ? n : 1) * sizeof(*spans));
	ckpt_io **ios = ckpt__calloc((size_t)r->nshards, sizeof(*ios));
	int rc = spans && ios ? CKPT_OK : CKPT_ENOMEM;
	size_t m = 0, with_fd = 0, without_fd = 0;
	for (size_t k = 0; rc == CKPT_OK && k < n; k++) {
		const ckpt_var_info *v = &r->vars[req[k].entry];
		ckpt_io *io = NULL;
		if (locate(r, req[k].entry, &io) < 0) {
			ckpt_error_clear();
			rc = CKPT__DECLINED;
		} else if (v->nbytes) {
			if (!ios[v->shard] && ckpt_io_fd(io) >= 0)
				with_fd++;
			else if (!ios[v->shard])
				without_fd++;
			ios[v->shard] = io;
			tfb_span *sp = &spans[m++];
			sp->shard = v->shard;
			sp->off = (uint64_t)v->offset;
			sp->n = v->nbytes;
			sp->dst = req[k].dst;
			sp->name = v->name;
			sp->crc = 0;
		}
	}
	if (rc == CKPT_OK && with_fd && (flags & CKPT__READ_MANY_REMOTE_ONLY))
		rc = CKPT__DECLINED;
	else if (rc == CKPT_OK && without_fd && !with_fd)
		rc = tfb_run_read(spans, m, ios, (const char *const *)r->shard_paths, !r->opts.no_verify);
	else if (rc == CKPT_OK && (without_fd || policy == TFB_DIRECT_NEVER ||
		(policy == TFB_DIRECT_AUTO && total < tfb_direct_min_bytes())))
		rc = CKPT__DECLINED;
	else if (rc == CKPT_OK)
		rc = tfb_direct_read(spans, m, ios, (const char *const *)r->shard_paths, r->nshards,
			!r->opts.no_verify, policy);
	for (size_t k = 0, j = 0; rc == CKPT_OK && !r->opts.no_verify && k < n; k++) {
		const ckpt_var_info *v = &r->vars[req[k].entry];
		uint32_t got = v->nbytes ? spans[j++].crc : 0;
		if (got != v->crc32c)
			rc = crc_mismatch(r, req[k].entry, got);
	}
	ckpt__free(spans);
	ckpt__free(ios);
	return rc;
}

/*
 * Bytes [off, off + len) of stored entry e into dst: a whole entry is read
 * and crc-checked as usual; a part of one is read alone and its crc32c kept
 * in `pieces`, for the caller to combine with the other parts' (reader_rows.c).
 */
static int read_entry_range(ckpt_reader *r, size_t e, uint64_t off, size_t len, unsigned char *dst,
	ckpt__row_pieces *pieces)
{
	const ckpt_var_info *v = &r->vars[e];
	ckpt_io *io = NULL;
	CKPT_TRY(locate(r, e, &io));
	if (len == 0)
		return CKPT_OK;
	if (off == 0 && len == v->nbytes)
		return read_verified(r, e, io, dst, len);
	uint32_t crc = 0;
	int verify = !r->opts.no_verify;
	CKPT_TRY(read_span(r, e, io, dst, NULL, off, len, verify, &crc));
	return verify ? ckpt__row_pieces_push(pieces, e, off, len, crc) : CKPT_OK;
}

/*
 * Rows [row0, row0 + nrows) of entry i: of a plain entry, one contiguous
 * range; of a partitioned one, the rows of every axis-0 slice that overlaps
 * them (contiguous in that slice's row-major bytes).
 */
int tfb_read_rows(ckpt_reader *r, size_t i, int64_t row0, int64_t nrows, void *dst, size_t n,
	ckpt__row_pieces *pieces)
{
	tfb_reader *s = r->state;
	const ckpt_var_info *v = &r->vars[i];
	uint64_t rowbytes = nrows ? n / (uint64_t)nrows : 0;
	unsigned char *out = dst;
	if (nrows == 0)
		return CKPT_OK;
	if (!v->nslices)
		return read_entry_range(r, i, (uint64_t)row0 * rowbytes, n, out, pieces);
	const size_t *parts = s->x[i].parts;
	int64_t covered = 0;
	for (size_t k = 0; k < v->nslices; k++) {
		int64_t st[CKPT_MAX_RANK], len[CKPT_MAX_RANK];
		(void)tfb_slice_resolve(&v->shape, &v->slices[k], st, len);
		for (int d = 1; d < v->shape.rank; d++)
			if (st[d] != 0 || len[d] != v->shape.dims[d])
				return ckpt__fail(CKPT_EUNSUPPORTED, s->index_path, v->name, (int64_t)s->x[i].off,
					"slice %zu does not span dimension %d in full: only variables partitioned along "
					"axis 0 are read by rows", k, d);
		int64_t lo = st[0] > row0 ? st[0] : row0;
		int64_t hi = st[0] + len[0] < row0 + nrows ? st[0] + len[0] : row0 + nrows;
		if (hi <= lo)
			continue;
		if (parts[k] == SIZE_MAX)
			return ckpt__fail(CKPT_EFORMAT, s->index_path, v->name, (int64_t)s->x[i].off,
				"slice %zu of %zu has no slice entry in the index", k, v->nslices);
		CKPT_TRY(read_entry_range(r, parts[k], (uint64_t)(lo - st[0]) * rowbytes, (size_t)((uint64_t)(hi - lo) * rowbytes),
			out + (uint64_t)(lo - row0) * rowbytes, pieces));
		covered += hi - lo;
	}
	if (covered != nrows) /* the slices tile the shape (checked at open) */
		return ckpt__fail(CKPT_EFORMAT, s->index_path, v->name, (int64_t)s->x[i].off,
			"the slices cover %lld of rows [%lld, %lld)", (long long)covered, (long long)row0,
			(long long)(row0 + nrows));
	return CKPT_OK;
}

static int load_graph(ckpt_reader *r)
{
	size_t gi = r->nvars;
	for (size_t i = 0; i < r->nvars; i++)
		if (strcmp(r->vars[i].name, CKPT_OBJECT_GRAPH_KEY) == 0)
			gi = i;
	if (gi == r->nvars)
		return CKPT_OK; /* TF1 name-based bundle */
	const ckpt_var_info *v = &r->vars[gi];
	if (v->dtype != CKPT_DT_STRING || v->shape.rank != 0)
		return ckpt__fail(CKPT_EFORMAT, r->path, v->name, -1,
			"object graph entry must be a scalar string, is %s of rank %d",
			ckpt_dtype_name(v->dtype), v->shape.rank);
	if (!r->shard_exists[v->shard])
		return CKPT_OK; /* listing still works without it */
	if (v->nbytes > CKPT_MAX_OBJECT_GRAPH_BYTES + 16)
		return ckpt__fail(CKPT_ELIMIT, r->path, v->name, -1, "object graph of %llu bytes exceeds the cap",
			(unsigned long long)v->nbytes);
	ckpt_tensor *t = NULL;
	CKPT_TRY(tfb_read(r, gi, &t));
	const ckpt_bytes *b = t->data;
	int rc = ckpt_object_graph_parse(&r->graph, b->data, (size_t)b->len);
	if (rc < 0)
		ckpt__error_annotate(r->shard_paths[v->shard], v->name);
	ckpt_tensor_free(t);
	return rc;
}

static int open_bundle(ckpt_reader *r)
{
	tfb_reader *s = ckpt__calloc(1, sizeof(*s));
	if (!s)
		return CKPT_ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->wlock, NULL);
	s->r = r;
	r->state = s;
	r->format_name = "tf-bundle";
	char *prefix = NULL;
	int rc = tfb_resolve_path(r->vfs, r->user_path, &prefix);
	if (rc < 0)
		return rc;
	r->path = prefix;
	s->index_path = tfb_index_path(prefix);
	if (!s->index_path)
		return CKPT_ENOMEM;
	void *buf = NULL;
	size_t n = 0;
	CKPT_TRY(ckpt_vfs_read_all(&buf, &n, r->vfs, s->index_path, CKPT_MAX_INDEX_BYTES));
	/*
	 * Room for the entries an index of this size usually holds (tens of bytes
	 * each), so that the arrays are not copied and faulted in again as they
	 * double; pages never written are never touched.
	 */
	size_t guess = n / 32 + 64;
	if (guess > CKPT_MAX_VARIABLES)
		guess = CKPT_MAX_VARIABLES;
	if ((rc = entry_arrays(s, guess)) < 0) {
		ckpt__free(buf);
		return rc;
	}
	rc = tfb_table_walk(buf, n, s->index_path, on_entry, s);
	ckpt__free(buf);
	if (rc < 0)
		return rc;
	if (!s->seen_header)
		return ckpt__fail(CKPT_EFORMAT, s->index_path, NULL, -1, "index has no header entry");
	r->nshards = s->num_shards;
	r->shard_paths = ckpt__calloc((size_t)s->num_shards, sizeof(char *));
	r->shard_exists = ckpt__calloc((size_t)s->num_shards, sizeof(int));
	s->io = ckpt__calloc((size_t)s->num_shards, sizeof(ckpt_io *));
	s->size = ckpt__calloc((size_t)s->num_shards, sizeof(uint64_t));
	if (!r->shard_paths || !r->shard_exists || !s->io || !s->size)
		return CKPT_ENOMEM;
	for (int i = 0; i < s->num_shards; i++) {
		r->shard_paths[i] = tfb_data_path(prefix, i, s->num_shards);
		if (!r->shard_paths[i])
			return CKPT_ENOMEM;
		int d = 0, e = ckpt_vfs_exists(&d, r->vfs, r->shard_paths[i]);
		if (e < 0)
			return e; /* an outage is not a missing shard */
		r->shard_exists[i] = e > 0 && !d;
	}
	CKPT_TRY(check_overlaps(r));
	CKPT_TRY(link_slices(r));
	return load_graph(r);
}

void tfb_close(ckpt_reader *r)
{
	tfb_reader *s = r->state;
	if (!s)
		return;
	for (size_t i = 0; i < r->nvars; i++) {
		if (r->vars[i].slices) {
			for (size_t k = 0; k < r->vars[i].nslices; k++)
				ckpt__free(r->vars[i].slices[k].extents);
			ckpt__free((void *)r->vars[i].slices);
		}
		if (s->x[i].key)
			ckpt__free(s->x[i].key->name);
		ckpt__free(s->x[i].key);
		ckpt__free(s->x[i].parts);
	}
	ckpt__buffer_free(r->vars); /* and s->x, in the same buffer (entry_arrays) */
	s->x = NULL;
	r->vars = NULL;
	r->nvars = 0;
	if (r->shard_paths)
		for (int i = 0; i < r->nshards; i++)
			ckpt__free(r->shard_paths[i]);
	if (s->io)
		for (int i = 0; i < s->num_shards; i++)
			ckpt_io_close(s->io[i]);
	ckpt__free(r->shard_paths);
	ckpt__free(r->shard_exists);
	r->shard_paths = NULL;
	r->shard_exists = NULL;
	ckpt__free(s->io);
	ckpt__free(s->size);
	ckpt__free(s->index_path);
	for (int i = 0; i < s->nbounce; i++)
		ckpt__free(s->bounce[i]);
	ckpt__free(s->wbuf);
	ckpt__strpool_free(&s->names);
	pthread_mutex_destroy(&s->wlock);
	pthread_mutex_destroy(&s->lock);
	ckpt__free(s);
	r->state = NULL;
}

void tfb_trim(ckpt_reader *r)
{
	tfb_reader *s = r->state;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->nbounce; i++)
		ckpt__free(s->bounce[i]);
	s->nbounce = 0;
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_lock(&s->wlock);
	ckpt__free(s->wbuf);
	s->wbuf = NULL;
	s->wlen = 0;
	pthread_mutex_unlock(&s->wlock);
}

int tfb_open(ckpt_reader *r)
{
	int rc = open_bundle(r);
	if (rc == CKPT_OK)
		rc = tfb_attach_saved_model(r);
	if (rc < 0)
		tfb_close(r); /* leave nothing half-built; close is a no-op after this */
	return rc;
}

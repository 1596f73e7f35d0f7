/*
 * TensorBundle backend: private interfaces between its files.
 *
 *   sstable_read.c   the leveldb-style table in P.index (blocks, trailers, footer)
 *   sstable_write.c  TensorFlow's TableBuilder, byte for byte
 *   bundle_read.c    header / entry protos, string tensors, data shards
 *   bundle_write.c   BundleWriter: temporaries, data order, commit
 *   path.c           PATH forms -> bundle prefix
 *   slice.c          partitioned variables: slice keys, tiling, assembly
 *   tf_bundle.c      the backend table and the bid
 *
 * See docs/formats/tf-bundle.md for every byte layout.
 */
#ifndef CKPT_TFB_H
#define CKPT_TFB_H

#include <pthread.h>
#include <stdatomic.h>
#include "../format.h"

#define TFB_TABLE_MAGIC 0xdb4775248b80fb57ull
#define TFB_FOOTER_LEN 48
#define TFB_TRAILER_LEN 5
#define TFB_BLOCK_SIZE 262144
#define TFB_RESTART_INTERVAL 16

/* ---- varints and fixed-width little-endian integers ---- */

/** Decode a varint64 from [p, end). Returns bytes used, 0 when truncated or over 10 bytes. */
size_t tfb_varint_get(const unsigned char *p, const unsigned char *end, uint64_t *v);
/** Encode a varint64 into p (room for 10 bytes). Returns bytes written. */
size_t tfb_varint_put(unsigned char *p, uint64_t v);
static inline uint32_t tfb_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void tfb_put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

/* ---- growable byte buffer (ckpt__ allocator) ---- */
typedef struct tfb_buf {
	unsigned char *p;
	size_t len, cap;
} tfb_buf;
int tfb_buf_reserve(tfb_buf *b, size_t extra);
int tfb_buf_append(tfb_buf *b, const void *data, size_t n);
int tfb_buf_varint(tfb_buf *b, uint64_t v);
int tfb_buf_fixed32(tfb_buf *b, uint32_t v);
void tfb_buf_free(tfb_buf *b);

/* ---- SSTable reading ---- */

/** Called for every key/value of the table, in file order. Pointers are valid during the call. */
typedef int (*tfb_table_fn)(void *ctx, const unsigned char *key, size_t klen,
	const unsigned char *val, size_t vlen, uint64_t file_offset);
/**
 * Walk every entry of the table held in `buf` (the whole .index file). Checks
 * the footer magic, every block trailer CRC, block structure and that keys are
 * strictly increasing. `path` is used for error context.
 */
int tfb_table_walk(const unsigned char *buf, size_t n, const char *path, tfb_table_fn fn, void *ctx);

/* ---- SSTable writing ---- */

/** One key/value pair; the caller keeps keys strictly increasing. */
typedef struct tfb_kv {
	const unsigned char *key;
	size_t klen;
	const unsigned char *val;
	size_t vlen;
} tfb_kv;
/** Build a whole table (TensorFlow's TableBuilder rules) into `out` (appended). */
int tfb_table_build(tfb_buf *out, const tfb_kv *kv, size_t n, size_t block_size);
/** TableBuilder's index-key helpers (exposed for tests). Result replaces *start / *key. */
void tfb_shortest_separator(tfb_buf *start, const unsigned char *limit, size_t llen);
void tfb_short_successor(tfb_buf *key);

/* ---- paths ---- */

/**
 * Resolve a user PATH to a bundle prefix (see reader.h for the forms).
 * `*prefix` is ckpt__malloc'ed. ENOTFOUND when nothing resolves.
 */
int tfb_resolve_path(ckpt_vfs *vfs, const char *path, char **prefix);
/** "P.index", "P.data-SSSSS-of-NNNNN" (ckpt__malloc'ed; NULL on failure). */
char *tfb_index_path(const char *prefix);
char *tfb_data_path(const char *prefix, int shard, int nshards);
/** mkdir -p of the directory holding bundle prefix `prefix`. */
int tfb_make_parent_dirs(ckpt_vfs *vfs, const char *prefix);

/** DIR/saved_model.pb into r->saved_model when r->path is DIR/variables/variables (saved_model_dir.c). */
int tfb_attach_saved_model(ckpt_reader *r);

/* ---- masked crc over a string tensor's stored bytes, and its decoder ---- */

/**
 * Decode a stored DT_STRING tensor of `nelem` elements from `p` (size `n`):
 * fills elems[i] to point into `p`. Checks the length checksum and, unless
 * `no_verify`, the entry crc `want_masked`. `path`/`key`/`off` give context.
 */
int tfb_string_decode(const unsigned char *p, size_t n, uint64_t nelem, ckpt_bytes *elems,
	int verify, uint32_t want_masked, const char *path, const char *key, uint64_t off);

/* ---- index entries (entry_decode.c) ---- */

/** The fields of a BundleEntryProto that an ordinary (unsliced) tensor uses. */
typedef struct tfb_entry {
	int32_t dtype;
	int rank;
	int64_t dims[CKPT_MAX_RANK];
	int32_t shard_id;
	int64_t offset, size;
	uint32_t crc32c;       /* masked, as stored */
} tfb_entry;
/**
 * Decode the common form of a BundleEntryProto (see entry_decode.c): 1 when
 * `e` holds it, 0 when the entry needs protobuf-c (slices, unusual or
 * malformed bytes). Never accepts bytes protobuf-c would refuse.
 */
int tfb_entry_decode_fast(const unsigned char *p, size_t n, tfb_entry *e);
/** An unsliced entry to encode: tfb_entry's fields, the dims where they lie. */
typedef struct tfb_entry_fields {
	int32_t dtype;
	int rank;
	const int64_t *dims;
	int32_t shard_id;
	int64_t offset, size;
	uint32_t crc32c;       /* masked, as stored */
} tfb_entry_fields;
/** Append e as a BundleEntryProto: the bytes protobuf-c packs for it (entry_encode.c). */
int tfb_entry_encode(tfb_buf *out, const tfb_entry_fields *e);

/* ---- partitioned variables (slice.c) ---- */

/** A decoded EncodeTensorNameSlice key. */
typedef struct tfb_slice_key {
	char *name;            /* ckpt__malloc'ed, NUL-terminated (may hold NULs: see nlen) */
	size_t nlen;
	int rank;
	int64_t start[CKPT_MAX_RANK], length[CKPT_MAX_RANK];
} tfb_slice_key;
/** Decode a slice key (leading 0x00). CKPT_OK, CKPT_ENOMEM, or -1 when the bytes are no valid key. */
int tfb_slice_key_decode(const unsigned char *k, size_t n, tfb_slice_key *out);
/** Append EncodeTensorNameSlice(name, slice) to `b` (length -1 = full extent). */
int tfb_slice_key_encode(tfb_buf *b, const unsigned char *name, size_t nlen, int rank,
	const int64_t *start, const int64_t *length);
/**
 * Resolve `sl` against the full shape into [start, start+length) per dim.
 * 0, -1 when the ranks differ, -2-d when dim d lies outside the shape.
 */
int tfb_slice_resolve(const ckpt_shape *full, const ckpt_slice *sl, int64_t *start, int64_t *length);
/**
 * Partitioned along axis 0 (BundleWriter::AddSlice as TF1's Saver calls it):
 * append the slice key of rows [row0, row0 + rows) x every other dim in full
 * (every extent explicit) to `b`.
 */
int tfb_row_slice_key(tfb_buf *b, const char *name, const ckpt_shape *full, int64_t row0, int64_t rows);
/** Append the packed BundleEntryProto of the full entry: dtype, shape, one slice per part. */
int tfb_pack_partitioned_entry(tfb_buf *out, ckpt_dtype dt, const ckpt_shape *full, int nparts,
	const int64_t *row0, const int64_t *rows);
/** EFORMAT (naming v) unless v's slices tile its shape exactly. */
int tfb_slices_check(const ckpt_var_info *v, const char *path, uint64_t off);
/** Copy a dense slice (row-major, `esize` bytes per element) into its place in the full tensor. */
void tfb_slice_scatter(unsigned char *dst, const ckpt_shape *full, size_t esize,
	const int64_t *start, const int64_t *length, const unsigned char *src);

/* ---- helper threads for the data path (par.c) ---- */

typedef void (*tfb_par_fn)(void *arg, size_t k);
/** A job of n chunks; fields are par.c's. */
typedef struct tfb_par_job {
	tfb_par_fn fn;
	void *arg;
	size_t n;
	_Atomic size_t next, done;
	int users, posted;
} tfb_par_job;
/** Threads a parallel pass may use now (1: stay serial, e.g. inside an OpenMP region). */
int tfb_par_threads(void);
/**
 * Post fn(arg, k) for k in [0, n) to the helpers (when idle ones exist) and
 * return at once; the caller may do other work, then must call finish, which
 * runs the chunks no helper took and returns when all are done. Returns 0
 * when nothing was posted (one thread, pool busy): then finish would run every
 * chunk here, and the caller may instead do the work its own way and skip it.
 */
int tfb_par_start(tfb_par_job *j, size_t n, tfb_par_fn fn, void *arg);
void tfb_par_finish(tfb_par_job *j);
/**
 * Between start and finish: claim and run the next chunk no thread took yet
 * (chunks are claimed in order); 0 when every chunk was claimed. The caller
 * that needs chunk k done takes its turn instead of waiting for a helper the
 * kernel may not have scheduled.
 */
int tfb_par_help(tfb_par_job *j);
/** start + finish. */
void tfb_par_for(size_t n, tfb_par_fn fn, void *arg);

/**
 * The error a parallel pass reports: the one of the lowest failing index,
 * which a serial pass would have met first. Threads call tfb_first_error_note
 * right after a failure (it clears their own error); the owner raises it.
 */
typedef struct tfb_first_error {
	atomic_int failed;     /* any failure yet: workers stop early */
	pthread_mutex_t lock;
	size_t at;             /* lowest failing index, SIZE_MAX = none */
	ckpt__error_slot err;
} tfb_first_error;
void tfb_first_error_init(tfb_first_error *e);
void tfb_first_error_note(tfb_first_error *e, size_t index);
/** CKPT_OK when nothing failed, else that error raised on this thread; frees what e holds. */
int tfb_first_error_finish(tfb_first_error *e);

/* ---- the cold-read pipeline: several O_DIRECT reads in flight (bundle_direct.c) ---- */

/** One located entry's bytes in a data file. */
typedef struct tfb_span {
	int shard;
	uint64_t off, n;       /* n > 0 */
	unsigned char *dst;    /* NULL: crc only */
	const char *name;      /* for messages */
	uint32_t crc;          /* out: crc32c of the bytes (unmasked; when verifying) */
} tfb_span;
enum { TFB_DIRECT_AUTO, TFB_DIRECT_NEVER, TFB_DIRECT_ALWAYS };
/** CKPT_DIRECT_READ: never, always, or (unset, anything else) auto. */
int tfb_direct_policy(void);
/** Batches smaller than this are declined under the auto policy. */
uint64_t tfb_direct_min_bytes(void);
/**
 * Read spans (crc each when `verify`) from the data files open as ios[shard]
 * (the reader's own, each lending a descriptor; NULL for a shard no span
 * reads; paths for messages). Under the auto policy, CKPT__DECLINED
 * (nothing read) when most bytes are cached, the kernel cannot say, or a
 * data file cannot be read around the page cache; else CKPT_OK or the error
 * of the lowest failing span (file, variable and byte offset named).
 * Checksums are the caller's to compare.
 */
int tfb_direct_read(tfb_span *spans, size_t n, ckpt_io *const *ios, const char *const *paths, int nshards,
	int verify, int policy);
/** Chunks the pipeline read with O_DIRECT and through the page cache, in this process. */
void tfb_direct_stats(uint64_t *direct_chunks, uint64_t *buffered_chunks);

/* ---- batched reads of files without a descriptor: one read per run of entries (bundle_runs.c) ---- */
/**
 * Read spans (crc each when `verify`) from the data files open as ios[shard]
 * (NULL for a shard no span reads; paths for messages), in few large reads:
 * neighbouring spans of one file are read together. CKPT_OK or the error of
 * the failing read (file and variable named). Checksums are the caller's.
 */
int tfb_run_read(tfb_span *spans, size_t n, ckpt_io *const *ios, const char *const *paths, int verify);

/* ---- one data file being written (bundle_write.c; bundle_part.c writes one shard of many) ---- */
typedef struct wshard {
	char *tmp, *final;
	ckpt_io *io;
	uint64_t pos;      /* bytes handed to the shard so far (incl. buffered) */
	uint64_t flushed;  /* bytes written to the file */
	tfb_buf buf;
} wshard;
int tfb_shard_flush(wshard *s);
/** Append a fixed-size tensor's bytes; its crc32c (unmasked) in *crc. */
int tfb_shard_put_fixed(wshard *s, const unsigned char *p, uint64_t n, uint32_t *crc);
/** Append a DT_STRING tensor of n elements in TensorBundle's layout; crc as above. */
int tfb_shard_put_strings(wshard *s, const ckpt_bytes *el, uint64_t n, uint32_t *crc);

/* ---- the writer's state (bundle_write.c; bundle_incr.c places reused values in it) ---- */
/* Kept small (many-tiny saves add 10,000s): the dims live in tfb_writer.dims. */
typedef struct wentry {
	char *key;         /* slice keys hold NUL bytes: klen is the length */
	size_t klen;
	unsigned char *packed; /* a partitioned variable's full entry: its BundleEntryProto, no data */
	size_t npacked;
	ckpt_dtype dtype;
	int rank;
	int shard;
	uint32_t masked_crc;
	size_t dims_at;    /* index of dim 0 in tfb_writer.dims */
	uint64_t offset, size;
	uint32_t *blocks;  /* incremental saves: crc32c of each TFB_INCR_BLOCK bytes, or NULL */
} wentry;


typedef struct tfb_writer {
	int nshards;
	wshard *sh;
	wentry *e;
	size_t ne, cap;
	tfb_buf dims;      /* int64 dims of every entry, in add order */
	char *index_tmp, *index_final;
	int failed;        /* first error; the writer refuses to commit after it */
	int committed;
	struct tfb_incr *incr; /* incremental save (bundle_incr.c), or NULL */
} tfb_writer;

int tfb_shard_append(wshard *s, const void *p, size_t n);
/** A new shard (index returned in *k) whose temporary is named after `suffix`; opened for writing when `open`. */
int tfb_writer_add_shard(ckpt_writer *w, int *k, int open);

/* ---- incremental saves (bundle_incr.c) ---- */

/*
 * Blocks of 4 KiB: the page and file-system block, the smallest unit the
 * kernel copies or shares (reflink) and the page cache writes back, so a
 * smaller block saves no I/O; one row of a 1024-wide float32 embedding.
 * With 5 % of rows touched at random a 4 KiB block holds a touched row with
 * probability 1 - 0.95^(4096 / row bytes): 10 % for 2 KiB rows, where 64 KiB
 * blocks would be 81 % (no saving at all). Its crc costs nothing beyond the
 * whole value's (combined with ckpt__crc32c_combine) and 1/1024 of the value
 * in memory. Values below TFB_INCR_MIN are written whole.
 */
#define TFB_INCR_BLOCK 4096u
#define TFB_INCR_MIN (64u << 10)
typedef struct tfb_incr tfb_incr;
typedef struct tfb_ientry tfb_ientry;
/** writer_incremental: 1 when this writer can reuse bytes (POSIX, one shard, another prefix). */
int tfb_writer_incremental(ckpt_writer *w, struct ckpt__incr *inc);
int tfb_writer_add_clean(ckpt_writer *w, const char *name, const ckpt_tensor *t);
/** The last save's entry `key` when it has this dtype, shape and size (clean values: reusable), else NULL. */
const tfb_ientry *tfb_incr_find(const tfb_incr *x, const char *key, size_t klen, ckpt_dtype dt,
	const ckpt_shape *shape, uint64_t nbytes);
/** Its masked crc32c and size. */
uint32_t tfb_ientry_crc(const tfb_ientry *b);
/** Remember clean value e (s->e[ei], bytes at data) for placement at commit. */
int tfb_incr_defer(tfb_incr *x, size_t ei, const tfb_ientry *b, const void *data);
/**
 * A changed fixed-size value of n >= TFB_INCR_MIN bytes at p: crc each block,
 * copy the blocks equal to the last save's from its file, write the others.
 * *crc: the whole value's (unmasked); *blocks: the block crcs (ckpt__malloc'ed).
 */
int tfb_incr_put(tfb_incr *x, wshard *s, const char *key, size_t klen, const ckpt_tensor *t, uint32_t *crc,
	uint32_t **blocks);
/** Commit, before the index: place the deferred values (hard-linked shards, copies); final shard names. */
int tfb_incr_place(ckpt_writer *w, tfb_writer *s);
/** Commit, after publishing: the record of this save replaces inc->base. */
void tfb_incr_record(ckpt_writer *w, tfb_writer *s);
void tfb_incr_free(tfb_incr *x);

/* ---- backend entry points (tf_bundle.c builds the vtable from these) ---- */
int tfb_open(ckpt_reader *r);
int tfb_read(ckpt_reader *r, size_t i, ckpt_tensor **out);
int tfb_read_into(ckpt_reader *r, size_t i, void *dst, size_t n);
int tfb_verify(ckpt_reader *r, size_t i);
int tfb_read_many(ckpt_reader *r, const ckpt__read_req *req, size_t n, unsigned flags);
int tfb_read_rows(ckpt_reader *r, size_t i, int64_t row0, int64_t nrows, void *dst, size_t n,
	ckpt__row_pieces *pieces);
int tfb_writer_add_partitioned(ckpt_writer *w, const char *name, ckpt_dtype dt, const ckpt_shape *full,
	int nparts, const int64_t *row0, const int64_t *rows, const void *const *data);
void tfb_close(ckpt_reader *r);
/** Free the bounce pool and the read window (the reader stays open). */
void tfb_trim(ckpt_reader *r);
int tfb_writer_open(ckpt_writer *w);
int tfb_writer_add(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard);
int tfb_writer_add_pieces(ckpt_writer *w, const char *name, ckpt_dtype dt, const ckpt_shape *shape, uint64_t nbytes,
	ckpt__piece_fn next, void *ctx);
int tfb_writer_commit(ckpt_writer *w);
void tfb_writer_close(ckpt_writer *w);

/** protobuf-c allocator routed through the ckpt__ hook. */
struct ProtobufCAllocator;
extern struct ProtobufCAllocator tfb_pb_allocator;
/*
 * Per-call scratch for unpacking one small message (an index entry: the
 * entry, its shape and every dim are separate protobuf-c allocations): bump
 * allocation in the caller's buffer, the allocator hook past it.
 */
typedef struct tfb_pb_scratch {
	union { unsigned char b[1024]; long double align; } buf;
	size_t used;
} tfb_pb_scratch;
void tfb_pb_scratch_init(tfb_pb_scratch *s, struct ProtobufCAllocator *a);

#endif

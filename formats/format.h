/*
 * The format backend interface. One const struct per backend, listed in the
 * compile-time table in libckpt/reader/format_registry.c (curl's vtls table;
 * libarchive's bidding). The core knows formats only through that table and
 * includes this header only through libckpt/reader/format_registry.h.
 *
 * Reader life cycle: the core resolves nothing; it asks each backend to bid
 * on the user's PATH (0..100, -1 = not mine), calls open() on the highest
 * bidder, then read()/read_into() per entry, then close().
 * Writer life cycle: writer_open(), writer_add() per tensor, writer_commit()
 * (atomic: temporaries then rename), writer_close() (removes temporaries when
 * not committed).
 */
#ifndef CKPT_FORMAT_H
#define CKPT_FORMAT_H

#include "../libckpt/internal.h"

typedef struct ckpt_format ckpt_format;
struct ckpt__row_pieces;
struct ckpt__incr;
/**
 * The bytes of a value handed over in order, a piece at a time (a save of a
 * device value through the pinned ring): *piece (*n bytes, n > 0) stays valid
 * until the next call. Negative code on failure.
 */
typedef int (*ckpt__piece_fn)(void *ctx, const void **piece, size_t *n);

/** Reader state shared between the core and the backend. */
struct ckpt_reader {
	const ckpt_format *fmt;
	void *state;                 /* backend-private */
	ckpt_vfs *vfs;               /* borrowed */
	ckpt_open_options opts;
	char *user_path;             /* as given (core-owned) */
	char *path;                  /* resolved path: set by backend open (ckpt__malloc'ed; core frees) */
	const char *format_name;     /* static string, set by backend open */
	ckpt_var_info *vars;         /* set by backend open; owned by the backend */
	size_t nvars;
	ckpt_object_graph *graph;    /* set by backend or core; freed by the core */
	int nshards;                 /* set by backend; 1 for single-file formats */
	char **shard_paths;          /* owned by the backend; may be NULL when nshards == 1 */
	int *shard_exists;           /* owned by the backend; may be NULL */
	char **meta_keys, **meta_vals; /* via ckpt__reader_set_meta; core-owned */
	size_t nmeta;
	size_t *name_index;          /* core-owned: hash index of the names (entry index + 1, 0 = empty), built at open */
	size_t name_cap;             /* its slots, a power of 2 (0 = none: few entries, scanned) */
	struct ckpt_saved_model *saved_model; /* set by the backend (TensorBundle in a SavedModel); freed by the core */
	struct ckpt__kv_store *kv;   /* typed metadata pairs (kv_store.h): set by the backend, freed by the core */
};

struct ckpt_writer {
	const ckpt_format *fmt;
	void *state;                 /* backend-private */
	ckpt_vfs *vfs;               /* borrowed */
	ckpt_write_options opts;
	char *path;                  /* target (bundle prefix or file) */
	char *format_name;           /* as requested: "tf-bundle", "keras-h5", ... */
	ckpt_object_graph *graph;    /* copy, or NULL */
	const ckpt_object_graph *graph_borrowed; /* ckpt__writer_borrow_object_graph: used instead of graph */
	char **meta_keys, **meta_vals;
	size_t nmeta;
	int committed;
	int announced;               /* ckpt_writer_announce was called */
	int added;                   /* ckpt_writer_add was called */
	int incremental;             /* ckpt__writer_incremental took it */
};

struct ckpt_format {
	unsigned version;            /* 1 */
	const char *name;            /* backend name: "tf-bundle", "keras-h5", "keras-archive" */
	/**
	 * How well this backend reads `path`: 0..100, -1 = not mine. `head` holds
	 * the first bytes of `path` when it is a regular file (n may be < 8), else
	 * n == 0. Bidding must not keep state.
	 */
	int (*bid)(ckpt_vfs *vfs, const char *path, const unsigned char *head, size_t n);
	int (*open)(ckpt_reader *r);
	/** NULL (backends without string entries): the core reads into a new tensor through read_into. */
	int (*read)(ckpt_reader *r, size_t i, ckpt_tensor **out);
	int (*read_into)(ckpt_reader *r, size_t i, void *dst, size_t n);
	void (*close)(ckpt_reader *r);
	/** NULL-terminated list of format names this backend writes (NULL = none). */
	const char *const *write_formats;
	int (*writer_open)(ckpt_writer *w);      /* on failure the backend frees what it allocated */
	int (*writer_add)(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard);
	int (*writer_commit)(ckpt_writer *w);
	void (*writer_close)(ckpt_writer *w);
	/** Optional (NULL: core reads into a temporary tensor): check entry i without keeping it. */
	int (*verify)(ckpt_reader *r, size_t i);
	/**
	 * Optional (NULL: announcements are accepted and ignored): a tensor that
	 * will be added (ckpt_writer_announce). Called before any writer_add.
	 */
	int (*writer_announce)(ckpt_writer *w, const char *name, ckpt_dtype dtype, const ckpt_shape *shape);
	/**
	 * Optional (NULL: the core reads the whole tensor and copies the rows):
	 * rows [row0, row0 + nrows) of entry i (plain of rank >= 1, or partitioned
	 * along axis 0) into dst (n bytes), reading only those byte ranges. A range
	 * that is a whole stored entry is crc-checked here; each other range is
	 * appended to *pieces for ckpt__row_pieces_verify.
	 */
	int (*read_rows)(ckpt_reader *r, size_t i, int64_t row0, int64_t nrows, void *dst, size_t n,
		struct ckpt__row_pieces *pieces);
	/**
	 * Optional (NULL: EUNSUPPORTED): add a variable partitioned along axis 0
	 * as TensorFlow's BundleWriter::AddSlice does: part k's `data` (rows
	 * [row0[k], row0[k] + rows[k]) of `full`) under its slice key, and the
	 * entry `name` listing every part's slice.
	 */
	int (*writer_add_partitioned)(ckpt_writer *w, const char *name, ckpt_dtype dt, const ckpt_shape *full,
		int nparts, const int64_t *row0, const int64_t *rows, const void *const *data);
	/**
	 * Optional (NULL: entry by entry): read (dst) or verify (dst NULL) many
	 * whole fixed-size entries at once, where the backend can do better than
	 * one entry at a time (a cold file: several reads in flight). Validated by
	 * the core as read_into is. CKPT_OK, an error naming the lowest failing
	 * request's file, variable and offset, or CKPT__DECLINED before any dst
	 * was written (the core then reads entry by entry). `flags`:
	 * CKPT__READ_MANY_* bits.
	 */
	int (*read_many)(ckpt_reader *r, const ckpt__read_req *req, size_t n, unsigned flags);
	/**
	 * Optional (NULL: the core hands the whole value to writer_add): add the
	 * fixed-size tensor `name` (dtype dt, `shape`, nbytes bytes, shard 0)
	 * whose bytes come in order from next(ctx) until nbytes have come. The
	 * file is byte-identical to writer_add's of the same bytes.
	 */
	int (*writer_add_pieces)(ckpt_writer *w, const char *name, ckpt_dtype dt, const ckpt_shape *shape,
		uint64_t nbytes, ckpt__piece_fn next, void *ctx);
	/**
	 * Optional (NULL: nothing to free): free the scratch buffers the reader
	 * keeps between reads; it stays open and usable (a restore keeps its
	 * reader for restore-on-create, and should hold no more than its index).
	 */
	void (*trim)(ckpt_reader *r);
};

/*
 * Incremental saves: what a backend keeps of the last committed save of a
 * checkpoint (bundle_incr.c for tf-bundle), owned by the checkpoint.
 */
typedef struct ckpt__incr {
	void *base;                 /* the backend's record of the last save; NULL: none yet */
	void (*base_free)(void *base);
	uint64_t base_gen;          /* ckpt__change_gen taken before that save read any value */
	uint64_t written, reused;   /* data bytes of the last save: sent through this process / reused in place */
} ckpt__incr;
/*
 * The incremental hooks of a backend, beside its ckpt_format (whose tables
 * are positional): ckpt__format_incr finds them.
 */
typedef struct ckpt__format_incr {
	const ckpt_format *fmt;
	/**
	 * Optional (NULL: every save is full): make this writer incremental
	 * against inc->base (ckpt__incr). Called right after open, before any
	 * add. 1 taken, 0 declined (this file system cannot share bytes), or an
	 * error. A taken writer replaces inc->base at a successful commit.
	 */
	int (*writer_incremental)(ckpt_writer *w, ckpt__incr *inc);
	/**
	 * Optional (NULL: writer_add): add a fixed-size value known to be unchanged
	 * since the save inc->base records; t->data stays valid until commit
	 * (the value is written from it where its stored bytes cannot be reused).
	 */
	int (*writer_add_clean)(ckpt_writer *w, const char *name, const ckpt_tensor *t);
} ckpt__format_incr;
extern const ckpt__format_incr ckpt_format_tf_bundle_incr;
/** Free what inc holds (keeps the struct). */
void ckpt__incr_clear(ckpt__incr *inc);
/** Core: ckpt_format.writer_incremental (0 without one). */
int ckpt__writer_incremental(ckpt_writer *w, ckpt__incr *inc);
/** Core: writer_add_clean where the backend has it, else writer_add (shard 0). */
int ckpt__writer_add_clean(ckpt_writer *w, const char *name, const ckpt_tensor *t);

/*
 * Byte ranges of stored entries read without their neighbours (row reads of
 * partitioned variables): each with the crc32c of its bytes, so that the
 * ranges covering an entry (possibly read by different processes) can be
 * combined and checked against the entry's crc32c.
 */
typedef struct ckpt__row_piece {
	uint64_t entry;    /* reader index of the stored entry */
	uint64_t off, len; /* within the entry's bytes */
	uint32_t crc;      /* crc32c (unmasked) of those bytes */
	uint32_t pad;
} ckpt__row_piece;
typedef struct ckpt__row_pieces {
	ckpt__row_piece *p;
	size_t n, cap;
} ckpt__row_pieces;
int ckpt__row_pieces_push(ckpt__row_pieces *ps, uint64_t entry, uint64_t off, uint64_t len, uint32_t crc);
/**
 * Every entry some piece touches must be covered exactly by its pieces
 * (duplicates of one range allowed): combine their crcs in order and
 * compare with the stored crc32c. ECHECKSUM naming the entry; EINVAL when
 * the pieces leave a gap (processes restored different row sets).
 */
int ckpt__row_pieces_verify(ckpt_reader *r, ckpt__row_piece *p, size_t n);
/** Core: rows of entry i (see read_rows); formats without it read the whole tensor. */
int ckpt__reader_read_rows(ckpt_reader *r, size_t i, int64_t row0, int64_t nrows, void *dst, size_t n,
	ckpt__row_pieces *pieces);
/** Core: ckpt_format.writer_add_partitioned of the writer's backend (EUNSUPPORTED without one). */
int ckpt__writer_add_partitioned(ckpt_writer *w, const char *name, ckpt_dtype dt, const ckpt_shape *full,
	int nparts, const int64_t *row0, const int64_t *rows, const void *const *data);

/** Core: ckpt_format.writer_add_pieces of the writer's backend (EUNSUPPORTED without one). */
int ckpt__writer_add_pieces(ckpt_writer *w, const char *name, ckpt_dtype dt, const ckpt_shape *shape,
	uint64_t nbytes, ckpt__piece_fn next, void *ctx);
/** 1 when the writer's backend takes a value in pieces (writer_add_pieces). */
int ckpt__writer_streams(const ckpt_writer *w);

/** Core helper for backends: record a metadata string (copied). */
int ckpt__reader_set_meta(ckpt_reader *r, const char *key, const char *value);
/** Core helper for backends: look up writer metadata (NULL when absent). */
const char *ckpt__writer_meta(const ckpt_writer *w, const char *key);
/** Core helper for backends: the object graph to write (set or borrowed), NULL when none. */
const ckpt_object_graph *ckpt__writer_graph(const ckpt_writer *w);
/**
 * Core (checkpoint save): let the writer use `g` without copying it; `g` must
 * stay valid and unchanged until the writer is committed or freed.
 */
int ckpt__writer_borrow_object_graph(ckpt_writer *w, const ckpt_object_graph *g);

extern const ckpt_format ckpt_format_tf_bundle;
#ifdef CKPT_HAVE_HDF5
extern const ckpt_format ckpt_format_keras_h5;
#endif
#ifdef CKPT_HAVE_LIBARCHIVE
extern const ckpt_format ckpt_format_keras_archive;
#endif
extern const ckpt_format ckpt_format_safetensors;
extern const ckpt_format ckpt_format_gguf;

#endif

/*
 * The format backend interface. One const struct per backend, listed in the
 * compile-time table in libckpt/reader.c (curl's vtls table; libarchive's
 * bidding). The core knows formats only through this table.
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
};

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

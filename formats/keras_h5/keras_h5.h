/*
 * Private interface of the Keras HDF5 backend, shared with the .keras
 * archive backend (which opens its model.weights.h5 member through the same
 * code, as a file image) and with the Keras <-> TensorFlow name mapping.
 */
#ifndef CKPT_KERAS_H5_H
#define CKPT_KERAS_H5_H

#include "formats/format.h"

/** Load libhdf5 (h5_lib.c) before any HDF5 call; CKPT_OK or CKPT_EUNSUPPORTED naming `path`. */
int ckpt__h5_lib(const char *path);

/* Layouts of a Keras HDF5 file (keras.md §0). */
enum {
	CKPT_KERAS_LEGACY = 1,         /* model.save("x.h5"): model_weights + optimizer_weights */
	CKPT_KERAS_LEGACY_WEIGHTS = 2, /* save_weights("x.h5"): layer groups at the root */
	CKPT_KERAS_V3 = 3              /* Keras 3 store: layers/.../vars/N, optimizer/vars/N */
};

/* What a stored entry is, for the name mapping. */
enum { CKPT_KE_MODEL = 0, CKPT_KE_OPTIMIZER = 1, CKPT_KE_OTHER = 2 };

/** One stored dataset as the mapping sees it. */
typedef struct ckpt__keras_entry {
	const char *path;     /* dataset path in the file, no leading '/' */
	int kind;             /* CKPT_KE_* */
	const char *layer;    /* legacy: layer name (layer_names item); v3: saveable path ("layers/lstm/cell") */
	const char *weight;   /* legacy: weight name as listed ("dense_1/kernel:0"); v3: NULL */
	const char *vname;    /* v3: the vars group's `name` attribute, or NULL */
	int index;            /* legacy: position in weight_names; v3: N of vars/N */
	ckpt_dtype dtype;
	ckpt_shape shape;
} ckpt__keras_entry;

/** What the mapping knows about the file beyond its entries. */
typedef struct ckpt__keras_ctx {
	int layout;                  /* CKPT_KERAS_* */
	const char *keras_version;   /* NULL when unknown */
	const char *model_config;    /* legacy model_config JSON, or NULL */
	const char *training_config; /* legacy training_config JSON, or NULL */
	const char *config_json;     /* .keras config.json, or NULL */
} ckpt__keras_ctx;

/**
 * Build the TensorFlow-style object graph for `n` entries: root (the model)
 * -> layer_with_weights-K -> variables, root -> optimizer -> iter (and
 * learning_rate) with slot variables. Every VARIABLE_VALUE attribute has
 * checkpoint_key = the TF key and full_name = the Keras dataset path, which
 * links graph and entries. Entries the rules cannot place with certainty
 * stay out of the graph; `*notes` (ckpt__malloc'ed, NULL when none) says
 * which and why. Keras 3: `*layer_names` is a JSON object from
 * "layers/<key>" to the real layer name (vars@name, else config.json).
 */
int ckpt__keras_map(const ckpt__keras_ctx *ctx, const ckpt__keras_entry *e, size_t n,
	ckpt_object_graph **graph, char **notes, char **layer_names);

/**
 * Lambda layers, __lambda__ objects and custom registered classes named in
 * a Keras config (JSON text), as one line for the "config_warnings"
 * metadata; *out NULL when none. The config is data: nothing is resolved,
 * imported or executed.
 */
int ckpt__keras_config_warnings(const char *json_text, char **out);

/**
 * Open a Keras HDF5 file image for reader `r` (sets format_name, vars, graph,
 * meta). Takes ownership of `image` (ckpt__malloc'ed) in every case.
 * `archive_meta` non-NULL marks the member of a .keras archive: the layout
 * must be Keras 3, format_name becomes "keras-v3" and `config_json` feeds
 * the mapping.
 */
int ckpt__keras_h5_attach(ckpt_reader *r, void *image, size_t n, const char *config_json, int from_archive);
/**
 * Same for a regular file of the POSIX VFS: `map` is a read-only mapping of
 * all `n` bytes of open file `fd` (HDF5 parses the metadata from it; only the
 * pages it touches are read), and contiguous datasets stored as they are read
 * with pread(fd) straight into the caller's buffer. Takes ownership of both.
 */
int ckpt__keras_h5_attach_file(ckpt_reader *r, int fd, void *map, size_t n);
/**
 * attach_file (fd >= 0) or attach of an image (fd -1, `map` ckpt__malloc'ed)
 * with `shard` 1: one file of a sharded Keras 3 store. Its vars groups may
 * hold any distinct indices (a group can be split over shards) and no graph
 * is built: keras_sharded.c checks and maps the union.
 */
int ckpt__keras_h5_attach_shard(ckpt_reader *r, int fd, void *map, size_t n, int shard);
/* keras_sharded.c: sharded Keras 3 weights (x.weights.json + x_0000N.weights.h5), through this backend */
int ckpt__keras_sharded_bid(const unsigned char *head, size_t n);
int ckpt__keras_sharded_is(const ckpt_reader *r);
int ckpt__keras_sharded_open(ckpt_reader *r);
int ckpt__keras_sharded_read(ckpt_reader *r, size_t i, ckpt_tensor **out);
int ckpt__keras_sharded_read_into(ckpt_reader *r, size_t i, void *dst, size_t n);
void ckpt__keras_sharded_close(ckpt_reader *r);

/** The mapping's view of entry i of an attached reader. */
void ckpt__keras_h5_entry(const ckpt_reader *r, size_t i, ckpt__keras_entry *e);
/**
 * The model.weights.h5 member of a .keras archive, spooled to file `fd`
 * (mapped at `map`, `n` bytes): as ckpt__keras_h5_attach_file, with the
 * archive's rules (Keras 3 layout, format "keras-v3", `config_json` for the
 * mapping, which must not be NULL).
 */
int ckpt__keras_h5_attach_member(ckpt_reader *r, int fd, void *map, size_t n, const char *config_json);
int ckpt__keras_h5_read(ckpt_reader *r, size_t i, ckpt_tensor **out);
int ckpt__keras_h5_read_into(ckpt_reader *r, size_t i, void *dst, size_t n);
void ckpt__keras_h5_close(ckpt_reader *r);

/**
 * A Keras HDF5 file being written: every tensor's data goes into the file when
 * it is added (from the caller's buffer, no copy kept), as an anonymous
 * dataset; names, groups and attributes are laid out at finish, when all
 * names, the object graph and the metadata are known.
 */
typedef struct ckpt__keras_h5w ckpt__keras_h5w;
/**
 * Start a file in the legacy (CKPT_KERAS_LEGACY) or Keras 3 layout: written
 * through `io` (borrowed, opened CKPT_IO_READ | CKPT_IO_WRITE on an empty
 * file, closed by the caller after finish or free; h5_vfd.h) or, io NULL,
 * in memory.
 */
int ckpt__keras_h5w_open(ckpt__keras_h5w **out, const ckpt_writer *w, int layout, ckpt_io *io);
/** Write `t` now, to be linked under the dataset path `name` maps to (duplicates and strings rejected). */
int ckpt__keras_h5w_add(ckpt__keras_h5w *b, const char *name, const ckpt_tensor *t);
/**
 * Lay out the file and close it (once; the builder is spent afterwards). In
 * memory, `*image` (ckpt__malloc'ed) and `*len` receive the bytes; on disk
 * they may be NULL.
 */
int ckpt__keras_h5w_finish(ckpt__keras_h5w *b, void **image, size_t *len);
/** Close without laying out (the caller closes the io and removes its file). NULL ok. */
void ckpt__keras_h5w_free(ckpt__keras_h5w *b);

/**
 * Build the HDF5 image of a writer's tensors in the legacy ("keras-h5") or
 * Keras 3 ("keras-weights") layout. `*image` is ckpt__malloc'ed. (The .keras
 * archive writer's path: it keeps copies; ckpt__keras_h5w avoids them.)
 */
typedef struct ckpt__keras_wtensor {
	char *name;           /* as added */
	ckpt_tensor *t;       /* copy owned by the writer */
} ckpt__keras_wtensor;
/** Append a private copy of `t` under `name` to a writer's list (duplicates and strings rejected). */
int ckpt__keras_wlist_add(ckpt__keras_wtensor **v, size_t *n, size_t *cap, const char *name, const ckpt_tensor *t);
void ckpt__keras_wlist_free(ckpt__keras_wtensor *v, size_t n);
int ckpt__keras_h5_build(const ckpt_writer *w, int layout, const ckpt__keras_wtensor *v, size_t n,
	void **image, size_t *len);
/** The checks every added tensor passes: storable dtype, data size matching the shape. */
int ckpt__keras_check_tensor(const char *name, const ckpt_tensor *t);

struct ckpt__h5_job;
/** Run a libhdf5 job (layout scan, dataset read) in the sandbox's child, forked by the sandbox server or the caller. */
int ckpt__keras_h5_serve(const struct ckpt__h5_job *j, void **payload, size_t *len);

/** Natural order of names: "dense_2" < "dense_10" (digit runs compared as numbers). */
int ckpt__keras_natcmp(const char *a, const char *b);
/** Keras' naming.to_snake_case(class_name), into a fresh string. */
char *ckpt__keras_snake_case(const char *s);

#endif

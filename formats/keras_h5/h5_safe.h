/*
 * The one guarded way into an HDF5 file. Every group, dataset and attribute
 * the Keras backends touch is reached through these functions, which:
 *  - walk paths one component at a time and follow only hard links
 *    (soft, external and user-defined links are errors, never followed);
 *  - validate every name that came from the file (no empty, "." or ".."
 *    components, no leading "/", no embedded NUL);
 *  - refuse external storage, virtual datasets, filtered layouts and
 *    "shape bombs" (declared bytes above the bytes actually stored);
 *  - cap attribute sizes (CKPT_MAX_ATTR_BYTES), list lengths and depth;
 *  - keep HDF5's own error printing silent and report through ckpt__fail
 *    with the file path and the object name.
 */
#ifndef CKPT_H5_SAFE_H
#define CKPT_H5_SAFE_H

#include "formats/keras_h5/h5_lib.h"
#include "formats/format.h"

/** Deepest group nesting we walk (Keras layouts need < 16). */
#define CKPT_H5_MAX_DEPTH 64
/** Most parts of a chunked list attribute ("layer_names0..K"). */
#define CKPT_H5_MAX_ATTR_CHUNKS 4096
/** Most items in one list attribute or links in one group. */
#define CKPT_H5_MAX_LIST 1000000

/**
 * Serialize HDF5 use: the Keras backends take this lock at every entry
 * point (open, read, close, build), so readers may be used from several
 * threads (e.g. OpenMP restores) although libhdf5 is not thread-safe.
 */
void ckpt__h5_lock(void);
void ckpt__h5_unlock(void);

/**
 * Once libhdf5 is loaded (h5_lib.c): stop libhdf5 from registering its own
 * exit handler and register ours (h5_safe.c says why).
 */
void ckpt__h5_take_over_exit(void);

/** Initialize libhdf5, silence it and register our conversions (idempotent; before forking a sandboxed child). */
void ckpt__h5_prepare(void);

/**
 * A file, dataset, group or attribute failed to close (a flush to a full
 * disk): libhdf5 keeps a half-closed object it would crash on at exit, so
 * libhdf5 is not shut down at exit any more (h5_safe.c). Closes made
 * through ckpt__h5_close mark it themselves.
 */
void ckpt__h5_mark_unclean(void);
int ckpt__h5_is_unclean(void);

/** Silence HDF5's automatic error stack printing (idempotent). */
void ckpt__h5_quiet(void);

/**
 * Open `n` bytes at `buf` as a read-only HDF5 file image. `buf` is borrowed
 * (not copied, not released) and must outlive the file id.
 */
int ckpt__h5_open_image(hid_t *out, const void *buf, size_t n, const char *path);

/** Close a file opened by ckpt__h5_open_image (and forget its image). */
void ckpt__h5_close_image(hid_t file);

/** Close any HDF5 id (ignores negative ids). */
void ckpt__h5_close(hid_t id);

/** 0 when `name` is one acceptable link name (no '/', not "." / "..", not empty). */
int ckpt__h5_check_component(const char *name, size_t len);
/**
 * 0 when `rel` is an acceptable relative path from the file ('/'-joined
 * components, each acceptable). Reports EFORMAT naming `what`.
 */
int ckpt__h5_check_relpath(const char *rel, const char *path, const char *what);

enum { CKPT_H5_ABSENT = 0, CKPT_H5_GROUP = 1, CKPT_H5_DATASET = 2 };

/**
 * What the hard link `name` (one component) in `loc` points at. Soft,
 * external and user-defined links are EUNSUPPORTED errors. `where` names
 * `loc` in messages.
 */
int ckpt__h5_child_kind(hid_t loc, const char *name, const char *path, const char *where, int *kind);

/**
 * Open `rel` below `loc`, one hard link at a time. `want` is CKPT_H5_GROUP
 * or CKPT_H5_DATASET. Missing → ENOTFOUND, wrong kind → EFORMAT.
 */
int ckpt__h5_open(hid_t loc, const char *rel, int want, const char *path, hid_t *out);

/** One link of a group, as listed by ckpt__h5_list. */
typedef struct ckpt__h5_link {
	char *name;
	int kind;   /* CKPT_H5_GROUP or CKPT_H5_DATASET */
} ckpt__h5_link;
/**
 * Links of group `g` in name order (every link checked: hard only, groups
 * and datasets only). Free with ckpt__h5_free_links.
 */
int ckpt__h5_list(hid_t g, const char *path, const char *where, ckpt__h5_link **out, size_t *n);
void ckpt__h5_free_links(ckpt__h5_link *l, size_t n);

/** 1 / 0 whether attribute `name` exists on `obj`. */
int ckpt__h5_attr_exists(hid_t obj, const char *name, int *exists);
/**
 * A scalar (or 1-element) string attribute, fixed or variable length, ASCII
 * or UTF-8, as a fresh NUL-terminated string. ENOTFOUND when absent.
 */
int ckpt__h5_attr_string(hid_t obj, const char *name, const char *path, const char *where, char **out);
/**
 * A list-of-strings attribute (fixed or variable length). Any non-string
 * attribute with 0 elements is the empty list (Keras' float64[0]).
 * ENOTFOUND when absent. Items are ckpt__malloc'ed.
 */
int ckpt__h5_attr_strings(hid_t obj, const char *name, const char *path, const char *where,
	char ***out, size_t *n);
/**
 * Keras' chunked list: `name` if present, else `name0`, `name1`, ... until
 * one is missing. ENOTFOUND when neither `name` nor `name0` exists.
 */
int ckpt__h5_attr_list_chunked(hid_t obj, const char *name, const char *path, const char *where,
	char ***out, size_t *n);
void ckpt__h5_free_strings(char **s, size_t n);

/** Checked description of a dataset, ready to read. */
typedef struct ckpt__h5_dsinfo {
	ckpt_dtype dtype;
	ckpt_shape shape;
	uint64_t nbytes;
	int64_t offset;      /* contiguous data address in the file, -1 otherwise */
	int raw;             /* 1 = read with the file type (bytes copied as stored) */
} ckpt__h5_dsinfo;

/**
 * Validate dataset `ds` (named `name` in messages) of a file image of
 * `image_size` bytes: layout, storage, dtype, shape and size caps.
 */
int ckpt__h5_dataset_info(hid_t ds, const char *path, const char *name, uint64_t image_size,
	uint64_t budget, ckpt__h5_dsinfo *info);
/** Read a dataset described by `info` into `dst` (info->nbytes bytes). */
int ckpt__h5_dataset_read(hid_t ds, const ckpt__h5_dsinfo *info, const char *path, const char *name,
	void *dst);

/** HDF5 memory/file type for writing a ckpt dtype (caller closes unless it is predefined: use ckpt__h5_close). */
int ckpt__h5_type_for(ckpt_dtype dt, hid_t *out);

#endif

/*
 * Shared by the two flat formats (safetensors, GGUF): the name mapping
 * between TensorFlow checkpoint keys and flat dotted names, the object graph
 * synthesized from flat names, and a writer that stages tensors and commits
 * one file atomically (temporary sibling, fsync, rename, fsync of the dir).
 *
 * Name mapping (documented in README.md, "safetensors and GGUF"):
 *   P/.ATTRIBUTES/VARIABLE_VALUE                        <-> p            (P's "/" -> ".")
 *   V/.OPTIMIZER_SLOT/O/S/.ATTRIBUTES/VARIABLE_VALUE    <-> v.__slot__.o.S
 *   P/.ATTRIBUTES/A   (A != VARIABLE_VALUE)             <-> p.__attr__.A
 * A key maps only when every component is non-empty, holds no '.' (TF writes
 * a '.' in a name as ".." and '/' as ".S") and is not __slot__ / __attr__;
 * any other key (TF1 names, Keras dataset paths) is stored verbatim, and a
 * stored name that contains '/' is never mapped back.
 */
#ifndef CKPT_FLAT_H
#define CKPT_FLAT_H

#include "formats/format.h"

/** TF key -> flat name (a fresh ckpt__malloc'ed string; the key itself when unmapped). */
char *ckpt__flat_from_key(const char *key);
/** Flat name -> TF key (fresh string), or NULL with no error when the name does not map. */
char *ckpt__flat_to_key(const char *name);
/**
 * An object graph for the reader's entries: every name that maps gets the
 * node path of its TF key, an attribute with that checkpoint key and
 * full_name = the stored name; slots are registered on their optimizer node.
 * Sets r->graph (NULL when no name maps) and each entry's role.
 */
int ckpt__flat_build_graph(ckpt_reader *r);

/*
 * A flat reader's state begins with this (the format's own fields follow):
 * the open file, and the stored names r->vars[i].name points into.
 */
typedef struct flat_reader {
	ckpt_io *io;
	char **names;
	size_t n;
} flat_reader;

/** Backend read_into of both flat formats: entry i is one contiguous range (offset in r->vars). */
int ckpt__flat_read_into(ckpt_reader *r, size_t i, void *dst, size_t n);
/** Backend close of both flat formats: the file, the names, r->vars and the state itself. */
void ckpt__flat_close(ckpt_reader *r);

/** One tensor of a flat writer: staged (a copy), or announced (written straight to the file). */
typedef struct flat_entry {
	char *name;          /* as stored */
	ckpt_dtype dtype;
	ckpt_shape shape;
	uint64_t nbytes;
	void *data;          /* staged copy (ckpt__malloc); NULL when announced */
	int ftype;           /* format-specific element type (GGUF ggml type, safetensors dtype index) */
	uint64_t offset;     /* in the data section, set by the format's layout */
	int written;         /* announced: its bytes are in the file */
} flat_entry;

/*
 * The header of both flat formats comes first and lists every tensor, so a
 * writer that is told only one tensor at a time stages a copy of each until
 * commit. A writer whose tensors were all announced (ckpt_writer_announce)
 * is laid out at its first add instead: the header goes to the temporary
 * file then, and each add is written straight to its place — no copy, and
 * memory that does not grow with the checkpoint.
 */
typedef struct flat_writer {
	flat_entry *e;
	size_t n, cap;
	size_t *slot;        /* name hash table of entry index + 1 (0 = empty), nslot a power of two */
	size_t nslot;
	int planned;         /* tensors were announced */
	int started;         /* planned: laid out and the header written; adds go to the file */
	ckpt_io *io;         /* planned, started: the temporary file */
	char *tmp;
	uint64_t hlen, data_start, total;
} flat_writer;

/** Stage a copy of `t` under `name`; EINVAL for a duplicate name or after announcements. */
int ckpt__flat_stage(flat_writer *fw, const char *path, const char *name, const ckpt_tensor *t, int ftype);
/** Announce `name` (no data yet); EINVAL for a duplicate, after a staged add, or once started. */
int ckpt__flat_announce(flat_writer *fw, const char *path, const char *name, ckpt_dtype dtype,
	const ckpt_shape *shape, int ftype);
/** Removes the temporary of a planned writer that was not committed. */
void ckpt__flat_writer_free(ckpt_writer *w, flat_writer *fw);
/**
 * Write `head` (hlen bytes) at 0, then every entry at data_start + offset,
 * zero-filling gaps, to a temporary sibling of `path`; then sync and rename.
 * `total` is the file size. Entries must be in offset order.
 */
int ckpt__flat_commit(ckpt_writer *w, flat_writer *fw, const void *head, size_t hlen, uint64_t data_start,
	uint64_t total);
/** Planned: open the temporary and write `head`; the layout (offsets, order) is final from here on. */
int ckpt__flat_begin(ckpt_writer *w, flat_writer *fw, const void *head, size_t hlen, uint64_t data_start,
	uint64_t total);
/**
 * A format's add after it mapped the name: staged (nothing announced), or
 * written in place, `begin` (the format's layout + ckpt__flat_begin) first
 * on the first add of an announced writer.
 */
int ckpt__flat_add(ckpt_writer *w, flat_writer *fw, const char *name, const ckpt_tensor *t, int ftype,
	int (*begin)(ckpt_writer *w));
/** Planned, started: write the announced tensor `name` (same dtype and shape) at its place. */
int ckpt__flat_put(ckpt_writer *w, flat_writer *fw, const char *name, const ckpt_tensor *t);
/** Planned, started: every announced tensor written? Zero the gaps, sync, rename into place. */
int ckpt__flat_finish(ckpt_writer *w, flat_writer *fw);

#endif

/*
 * The restore session (restore_session.c): a stored checkpoint opened for
 * restoring, refcounted. It holds the file's object graph and one record per
 * stored value: where the value lies (the reader's entry: data file, offset,
 * length, crc32c), not its bytes. Values not consumed at restore time stay
 * in the file, the reader open: live objects hold pending records
 * (restore_pending.h) with a reference to the session, and restore-on-create
 * reads the value when its object exists, checked against the crc32c the
 * file stores or, for formats without one, the crc32c the first restore
 * computed (a file changed in between fails the creation, CKPT_ECHECKSUM).
 *
 * The struct is opaque: restore_session.c alone creates, fills, stages and
 * frees it, and every other file (the restore's match and commit, load's
 * tree building, partitioned variables, status) goes through the functions
 * below. Its value records (ckpt__value) are read through
 * ckpt__session_value; they change only through the session's functions.
 * scripts/include_graph.py --owned checks that no other file defines the
 * struct again (tests/core/test_include_graph.c).
 */
#ifndef CKPT_RESTORE_SESSION_H
#define CKPT_RESTORE_SESSION_H

#include "internal.h"

typedef struct ckpt__session ckpt__session;

/* ---- stored values ---- */

typedef struct ckpt__value {
	int node;            /* stored node id; -1: no attribute refers to it (TF1 name-based files) */
	/* the strings live in the session: key in its pool, the others in its graph (or static / inside key) */
	const char *attr;    /* attribute name ("VARIABLE_VALUE", "table") */
	const char *suffix;  /* "" or, for a multi-tensor attribute, the tensor's key suffix ("-keys") */
	const char *key;     /* stored key */
	const char *full_name;
	size_t reader_index;
	ckpt_dtype dtype;
	ckpt__cshape shape;  /* dims in the session's pool (ckpt__cshape_expand for a ckpt_shape) */
	ckpt_tensor *t;      /* read value (wraps an arena); NULL once consumed and released */
	int consumed;
	int temp;            /* staged in the current commit's temporary arena */
	int initialized;     /* load created its variable with this value (no assign needed) */
	ckpt_role role;      /* from the reader's entry, as are the three below */
	ckpt_synchronization sync;
	ckpt_aggregation aggregation;
	int sync_source;     /* CKPT_SYNC_SOURCE_* */
	int has_crc;         /* deferred without a stored crc32c: crc is that of its bytes when it was deferred */
	uint32_t crc;
} ckpt__value;


int ckpt__session_open(ckpt__session **out, const char *path, const ckpt_checkpoint_options *o);
void ckpt__session_unref(ckpt__session *s);
void ckpt__session_ref(ckpt__session *s);

/* ---- what was stored ---- */

/** The stored object graph (borrowed), or NULL for a name-based file. */
const ckpt_object_graph *ckpt__session_graph(const ckpt__session *s);
/** How many stored values the session holds (indices 0 .. n-1). */
size_t ckpt__session_nvals(const ckpt__session *s);
/** Stored value `i` (borrowed; read only: it changes through the functions below). */
const ckpt__value *ckpt__session_value(const ckpt__session *s, size_t i);
/** The values of stored node `node`: indices [*first, *end). */
void ckpt__session_node_values(const ckpt__session *s, int node, size_t *first, size_t *end);
/** The values no attribute refers to (node -1, matched by name): indices [*first, *end). */
void ckpt__session_flat_values(const ckpt__session *s, size_t *first, size_t *end);

/* ---- reading the values (the reader stays open until every value is read) ---- */

/**
 * Read the values flagged in want[0 .. nvals-1] into one arena; *arena
 * receives it (NULL when empty) and is the caller's to free or to hand to
 * ckpt__session_keep_arena. With parts > 1, only part `part` of the arena's
 * bytes is read and bounds[0..parts] receives where each part begins.
 * @return CKPT_OK, or an error (no value of `want` is left staged).
 */
int ckpt__session_stage(ckpt__session *s, const unsigned char *want, void **arena, int parts, int part,
	uint64_t *bounds);
/**
 * The values set in want[0 .. nvals-1] are left in the file for
 * restore-on-create: those whose entry has no stored crc32c (or is
 * partitioned) are read once through one scratch buffer, the size of the
 * largest, and their crc32c kept, so that ckpt__session_stage can tell a
 * file changed since. Strings are not covered (they are staged instead).
 * @return CKPT_OK or the read's error (nothing recorded for that value).
 */
int ckpt__session_defer(ckpt__session *s, const unsigned char *want);
/**
 * Keep the values restore-on-create needs later in memory, as strings are,
 * instead of in the file: for a source removed once the restore returns
 * (the memory tier's staging directory across workers).
 */
void ckpt__session_hold_deferred(ckpt__session *s);
int ckpt__session_holds_deferred(const ckpt__session *s);
/** Read every value into an arena the session keeps and close the reader (load). */
int ckpt__session_stage_all(ckpt__session *s);
/** Flag as temporary exactly the values set in want[0 .. nvals-1] (staged for one commit). */
void ckpt__session_mark_temp(ckpt__session *s, const unsigned char *want);
/** Drop the tensors of the temporary values and free their `arena`. */
void ckpt__session_release_temp(ckpt__session *s, void *arena);
/** Drop the tensors of the values set in `want` and free their `arena` (a failed commit's later values). */
void ckpt__session_release(ckpt__session *s, const unsigned char *want, void *arena);
/** Room to keep one more arena. @return CKPT_OK or CKPT_ENOMEM. */
int ckpt__session_reserve_arena(ckpt__session *s);
/** Keep `arena` (its values stay for restore-on-create) until the session is freed. Room reserved. */
void ckpt__session_keep_arena(ckpt__session *s, void *arena);
/** Every value is read: close the reader. */
void ckpt__session_close_reader(ckpt__session *s);
/** Close the reader when no value is left for a later restore (every value consumed); else free its read buffers. */
void ckpt__session_close_if_done(ckpt__session *s);

/* ---- what the restores did with them ---- */

/** Load created the variable of value `i` with the value as its initial value (no assign needed). */
void ckpt__session_mark_initialized(ckpt__session *s, size_t i);
/**
 * Value `i` went to live variable `var`: remember the binding when it is a
 * node's VARIABLE_VALUE, mark it consumed and release its tensor.
 */
void ckpt__session_consume(ckpt__session *s, size_t i, ckpt_variable *var);
/** Room for `n` more entries of ckpt__session_assigned. @return CKPT_OK or CKPT_ENOMEM. */
int ckpt__session_reserve_assigned(ckpt__session *s, size_t n);
/** Note that a value went to `var` (room reserved). */
void ckpt__session_push_assigned(ckpt__session *s, ckpt_variable *var);
/** The live variable stored node `node` last restored into (compared, never dereferenced); NULL when none. */
const ckpt_variable *ckpt__session_bound_var(const ckpt__session *s, int node);
/** The checkpoint's resolved path. */
const char *ckpt__session_path(const ckpt__session *s);
/** The open reader (borrowed), or NULL once every value was read and it was closed. */
ckpt_reader *ckpt__session_reader(const ckpt__session *s);
/** The bytes of every stored value of the checkpoint, as its index gives them. */
uint64_t ckpt__session_stored_bytes(const ckpt__session *s);
/** Mark every value stored under `key` consumed (restored by other means: partitioned variables). */
void ckpt__session_consume_key(ckpt__session *s, const char *key);
/** How many values no restore consumed; with keys non-NULL, their keys (session-owned) are written there too. */
size_t ckpt__session_unconsumed(const ckpt__session *s, const char **keys);
/** Every live variable a value went to, *n of them (compared, never dereferenced). */
ckpt_variable *const *ckpt__session_assigned(const ckpt__session *s, size_t *n);
/** ckpt_checkpoint_options.restore_single_pass of the options the session was opened with. */
int ckpt__session_single_pass(const ckpt__session *s);
/** The warning sink of the options the session was opened with (*ctx its context). */
ckpt_warning_fn ckpt__session_warning(const ckpt__session *s, void **ctx);
/**
 * Load: remember variable `v`, created without a value (the load zero-fills
 * those its restore run did not assign).
 * @return CKPT_OK or CKPT_ENOMEM.
 */
int ckpt__session_note_unfilled(ckpt__session *s, ckpt_variable *v);
/** The variables noted by ckpt__session_note_unfilled, *n of them. */
ckpt_variable *const *ckpt__session_unfilled(const ckpt__session *s, size_t *n);

#endif

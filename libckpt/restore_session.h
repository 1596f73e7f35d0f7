/*
 * The restore session (restore_session.c): a stored checkpoint opened for
 * restoring, refcounted. It holds the file's object graph and every stored
 * value, read into memory before any live variable is touched. Values not
 * consumed at restore time stay in the session; live objects hold pending
 * records (restore_pending.h) with a reference to it. restore_session.c
 * creates, fills and frees it; outside the restore's own match and commit
 * (restore_match.c, restore_commit.c, which consume its values) and load's
 * tree building (which reads its value table), the accessors below are
 * the way in.
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
} ckpt__value;

struct ckpt__session {
	int refs;
	char *path;                  /* resolved */
	char *format;
	ckpt_object_graph *graph;    /* NULL for name-based files; taken from the reader */
	ckpt__strpool strings;       /* the values' keys and the dims of their shapes */
	size_t nvals;
	ckpt__value *vals;           /* sorted by node, then attribute order */
	size_t *node_first;          /* per node: first value index (nnodes + 1 entries) */
	ckpt_variable **bound_var;   /* per node: live variable it restored into (compared, never dereferenced) */
	size_t nflat_first;          /* values [nflat_first, nvals): node -1, no attribute refers to them */
	size_t nassigned, capassigned;
	ckpt_variable **assigned;    /* every live variable a value went to */
	ckpt_warning_fn warn;
	void *warn_ctx;
	ckpt_reader *reader;         /* open until every value is read */
	void **arenas;               /* staged values kept for restore-on-create */
	size_t narenas;
	ckpt_variable **unfilled;    /* load: variables it created without a value (compared, never dereferenced) */
	size_t nunfilled, capunfilled;
};

int ckpt__session_open(ckpt__session **out, const char *path, const ckpt_checkpoint_options *o);
/* Read every value into an arena the session keeps and close the reader (load). */
int ckpt__session_stage_all(ckpt__session *s);
void ckpt__session_unref(ckpt__session *s);
void ckpt__session_ref(ckpt__session *s);
/** The live variable stored node `node` last restored into (compared, never dereferenced); NULL when none. */
const ckpt_variable *ckpt__session_bound_var(const ckpt__session *s, int node);
/** The checkpoint's resolved path. */
const char *ckpt__session_path(const ckpt__session *s);
/** The open reader (borrowed), or NULL once every value was read and it was closed. */
ckpt_reader *ckpt__session_reader(ckpt__session *s);
/** Mark every value stored under `key` consumed (restored by other means: partitioned variables). */
void ckpt__session_consume_key(ckpt__session *s, const char *key);
/** How many values no restore consumed; with keys non-NULL, their keys (session-owned) are written there too. */
size_t ckpt__session_unconsumed(const ckpt__session *s, const char **keys);
/** Every live variable a value went to, *n of them (compared, never dereferenced). */
ckpt_variable *const *ckpt__session_assigned(const ckpt__session *s, size_t *n);
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

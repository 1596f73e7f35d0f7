/*
 * libckpt internals for strategies, replica context and variables: what the
 * checkpoint code (save / restore / load) needs beyond variable.h, and the
 * glue between strategy.c, replica.c and variable.c. Not installed.
 *
 * Restore path for the checkpoint code (all-or-nothing, see
 * checkpoint_restore.c and restore_commit.c): values that cannot be read
 * in place are staged; the others are verified in the file; every assignment is checked
 * (ckpt__assign_plan_new); only then are values read straight into copy 0
 * and fanned out to the other copies (ckpt__assign_plan_run).
 * Save path: a plain / mirrored variable's value is
 * ckpt_variable_replica_data(v, 0) (no copy); a sync-on-read one needs
 * ckpt_variable_read() into a buffer (the aggregate), and so does any
 * variable whose copies are device memory (ckpt__variable_on_device).
 */
#ifndef CKPT_VARIABLE_INTERNAL_H
#define CKPT_VARIABLE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "internal.h"

/* ---- strategies (strategy.c) ---- */

/** Most replicas a mirrored strategy may have (ELIMIT above). */
#define CKPT__MAX_REPLICAS 1024
/** Deepest scope nesting per thread (ELIMIT above). */
#define CKPT__MAX_SCOPE_DEPTH 64

/**
 * References that keep a strategy alive after ckpt_strategy_free(): every
 * live variable, every scope-stack entry and every ckpt_strategy_run in
 * progress holds one. No-ops for the
 * default strategy. Thread-safe.
 */
typedef enum { CKPT__REF_VARIABLE, CKPT__REF_SCOPE, CKPT__REF_RUN } ckpt__strategy_ref;
void ckpt__strategy_retain(ckpt_strategy *s, ckpt__strategy_ref what);
void ckpt__strategy_release(ckpt_strategy *s, ckpt__strategy_ref what);

/**
 * Around a replica function: scopes entered before the run are hidden from
 * the replica (its current strategy is the one being run). begin returns the
 * previous base for end; end unwinds scopes the replica left entered and
 * returns how many it unwound.
 */
int ckpt__scope_replica_begin(void);
int ckpt__scope_replica_end(int prev_base);

/**
 * replica.c, around a replica function: `s` is the strategy this thread now
 * runs a replica of (NULL: none); returns the one before, to put back.
 */
ckpt_strategy *ckpt__strategy_set_running(ckpt_strategy *s);

/* ---- buffers: util/hugebuf.h ---- */

/* ---- variables (variable.c) ---- */

/**
 * Writable copy `replica` of `v` (0 <= replica < num_replicas), or NULL.
 * For writing values straight into a copy (e.g. a reader filling replica 0)
 * before ckpt__variable_broadcast_primary().
 */
void *ckpt__variable_data(ckpt_variable *v, int replica);

/**
 * Assign srcs[i] (sizes[i] bytes, == nbytes of vars[i]) to vars[i] for all i,
 * with ckpt_variable_assign's semantics, as one parallel fan-out. Every
 * argument is checked before anything is written: on error no variable has
 * changed. Cross-replica context only (ESCOPE in replica context).
 * srcs[i] must not overlap any copy of any variable being assigned.
 */
int ckpt__variable_assign_many(ckpt_variable *const *vars, const void *const *srcs,
	const size_t *sizes, size_t count);

/**
 * ckpt__variable_assign_many in two steps, for a commit that must not fail
 * half-way: _new checks every argument and allocates (may fail, writes
 * nothing); _run writes and cannot fail. srcs[i] may be copy 0 of vars[i]
 * itself (a value read in place): then it is fanned out to the other copies
 * (sync-on-read SUM: split, copy 0 last).
 */
typedef struct ckpt__assign_plan ckpt__assign_plan;
int ckpt__assign_plan_new(ckpt__assign_plan **out, ckpt_variable *const *vars, const void *const *srcs,
	const size_t *sizes, size_t count);
/* Host copies: cannot fail. Device copies (ckpt/memory.h): a provider failure is returned (the
 * value is then partly written: every check passed before, so only the device can fail here). */
int ckpt__assign_plan_run(ckpt__assign_plan *p);
/*
 * The device variables of the plan only, in order, stopping at the first
 * provider failure; `starting` (may be NULL) is called before each one's
 * copies begin. _run then does the host variables only.
 */
int ckpt__assign_plan_run_device(ckpt__assign_plan *p, void (*starting)(void *ctx, const ckpt_variable *v), void *ctx);
void ckpt__assign_plan_free(ckpt__assign_plan *p);

/**
 * ckpt_variable_new for load: without an initial value, library-allocated
 * copies are left unwritten (not zero-filled) because every one is about to
 * be assigned; whatever load does not assign it must ckpt__variable_zero.
 */
int ckpt__variable_new_unfilled(ckpt_variable **out, const char *name, ckpt_dtype dt,
	const ckpt_shape *shape, const ckpt_variable_options *o);
/**
 * A host-state variable (ckpt/host.h): one copy wrapping `ptr` (the
 * caller's memory, contents kept), under the default strategy whatever
 * scope is active, so saves read `ptr` and restores write it. Fixed-size
 * dtypes only (EINVAL for STRING).
 */
int ckpt__variable_new_host(ckpt_variable **out, const char *name, ckpt_dtype dt, const ckpt_shape *shape,
	void *ptr);
/**
 * A plain variable (one copy) under the default strategy whatever scope is
 * active: a part of a partitioned variable that only its owner holds
 * (ckpt/partitioned.h), outside the multi-worker strategy's collective
 * creation.
 */
int ckpt__variable_new_part(ckpt_variable **out, const char *name, ckpt_dtype dt, const ckpt_shape *shape,
	const ckpt_variable_options *o);
/*
 * ckpt_variable_read, where a device sync-on-read aggregate stages each
 * replica's chunk in `scratch` (pinned memory of v's provider, scratch_n
 * bytes; NULL: its own): a save aggregates through its ring.
 */
int ckpt__variable_read_staged(const ckpt_variable *v, void *dst, size_t n, void *scratch, size_t scratch_n);
/*
 * Change detection (incremental saves): ckpt__change_gen() is a fresh stamp
 * of a global counter; every write the library sees stamps its variable.
 * A save takes a stamp before reading any value; a variable is unchanged
 * since a save of stamp `gen` when its last write was stamped below it. 1
 * only when that is certain: host copies the library writes (or caller
 * memory whose writes the trainer marks, ckpt_variable_set_marks_writes),
 * not sync-on-read (an aggregate), not device, not strings.
 */
uint64_t ckpt__change_gen(void);
int ckpt__variable_unchanged_since(const ckpt_variable *v, uint64_t gen);
/* ckpt__variable_read_copy / _write_copy / _on_device: strategy_impl.h (exported for ckpt_mpi) */
/** Zero every library-allocated copy (fixed-size dtypes; no-op otherwise). */
void ckpt__variable_zero(ckpt_variable *v);

/**
 * Whether a restore may read a value straight into copy 0 of `v` (fixed-size
 * dtype, non-empty; plain, or mirrored so that copy 1 still holds the old
 * value for ckpt__variable_rollback_primary). Sync-on-read copies differ, so
 * they are restored from a staged value.
 */
int ckpt__variable_direct_restorable(const ckpt_variable *v);
/** Mirrored: put the old value back into copy 0 from copy 1 (1); otherwise nothing (0). */
int ckpt__variable_rollback_primary(ckpt_variable *v);

/**
 * Treat the current contents of copy 0 as the value to assign (as if
 * ckpt_variable_assign(v, copy0)) and fan it out to the other copies
 * (sync-on-read SUM: split). Lets a reader write directly into copy 0.
 */
int ckpt__variable_broadcast_primary(ckpt_variable *v);

/*
 * Two-phase assign of a STRING variable (restore's all-or-nothing commit):
 * stage builds every replica's deep copy of `t` (checked: dtype, shape,
 * elements; may fail, changes nothing); commit swaps them in and cannot
 * fail; discard frees a staged value that is not committed. `staged` is
 * owned by the caller until commit / discard.
 */
int ckpt__variable_stage_strings(const ckpt_variable *v, const ckpt_tensor *t, void **staged);
void ckpt__variable_commit_strings(ckpt_variable *v, void *staged);
void ckpt__variable_discard_strings(const ckpt_variable *v, void *staged);

#endif

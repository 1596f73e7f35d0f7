/*
 * Partitioned variables (ckpt/partitioned.h) inside the checkpoint code:
 * the single-process write, the staged restore, and what the cross-process
 * save needs. Not installed.
 */
#ifndef CKPT_PARTITIONED_INTERNAL_H
#define CKPT_PARTITIONED_INTERNAL_H

#include "checkpoint_internal.h"
#include "ckpt/partitioned.h"

/* A partitioned variable (partitioned.c creates and frees it; partitioned_io.c reads it). */
struct ckpt_partitioned {
	char *name;
	ckpt_dtype dtype;
	ckpt_shape shape;
	int nparts;
	int64_t *row0, *rows;   /* per part */
	ckpt_variable **part;   /* per part; NULL where another worker holds it */
	ckpt_strategy *strategy;/* created under (holds a variable reference) */
	int workers, rank;      /* of that strategy: 1, 0 in-process */
};

/** The strategy `p` was created under (its owner rule's). */
ckpt_strategy *ckpt__partitioned_strategy(const ckpt_partitioned *p);

/** A partitioned variable a save / restore handles, with the key it is stored under. */
typedef struct ckpt__parted_ref {
	ckpt_partitioned *p;
	const char *key;   /* its name (tracked by the checkpoint) or its object path's VARIABLE_VALUE key (plan-owned) */
} ckpt__parted_ref;
/** Those tracked by `ck`, then those of `plan`'s nodes (ckpt__free *out; NULL when none). */
int ckpt__partitioned_refs(ckpt__parted_ref **out, size_t *n, const ckpt_checkpoint *ck, const ckpt__plan *plan);

/** Single-process write of `refs` (all parts local) into `w`. */
int ckpt__partitioned_write(ckpt_writer *w, const ckpt__parted_ref *refs, size_t n);

/*
 * Restore: stage reads, into buffers of their own, the rows of every part
 * this process holds (only those byte ranges), checks dtype and shape, and
 * verifies the checksums of the entries read in pieces — with `cs`, over the
 * pieces of every process (collective: call it on every process, with this
 * process's status so far in `rc`; nothing is read when rc < 0). It marks
 * the stored entries consumed in the session. commit assigns the staged
 * rows (after the rest of the restore committed); it cannot fail for host
 * parts (device parts: only when their provider fails).
 */
typedef struct ckpt__partitioned_restore ckpt__partitioned_restore;
int ckpt__partitioned_stage(ckpt__partitioned_restore **out, ckpt_checkpoint *ck, ckpt__session *s,
	ckpt_strategy *cs, int rc);
int ckpt__partitioned_commit(ckpt__partitioned_restore *pr);
void ckpt__partitioned_restore_free(ckpt__partitioned_restore *pr);

#endif

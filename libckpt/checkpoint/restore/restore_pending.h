/*
 * Restore-on-create (restore_pending.c): what a restore could not apply
 * yet because the live child or slot did not exist. An object owns one
 * ckpt__pending; the restore run that leaves a record says, through the
 * record's ops, how to restore it later, so the object code never calls up
 * into the restore code: it asks its ckpt__pending to apply what is due.
 */
#ifndef CKPT_RESTORE_PENDING_H
#define CKPT_RESTORE_PENDING_H

#include <stddef.h>
#include "internal.h"

typedef struct ckpt__session ckpt__session;

/**
 * How a pending record is restored into the object that now exists (the
 * restore code's). `fresh`: the object's variables were created by this
 * call, in memory of the library's, and go with it when the restore fails,
 * so nothing old needs keeping: each value is read once, with no
 * verification pass first.
 */
typedef struct ckpt__pending_ops {
	/** Match stored node `node` of `s` against the new child `child`, then commit. */
	int (*restore_child)(ckpt__session *s, int node, ckpt_object *child, int fresh);
	/** Match the stored slot variable node `slot_node` of `s` against the new slot's node, then commit. */
	int (*restore_slot)(ckpt__session *s, int slot_node, ckpt_object *node, int fresh);
} ckpt__pending_ops;

typedef struct ckpt__pending_child {
	char *name;
	ckpt__session *s;    /* reference */
	int node;            /* stored node id */
	const ckpt__pending_ops *ops;
} ckpt__pending_child;

typedef struct ckpt__pending_slot {
	ckpt__session *s;    /* reference */
	int orig_node;       /* stored node of the primary variable */
	char *slot_name;
	int slot_node;
	const ckpt__pending_ops *ops;
} ckpt__pending_slot;

/** The pending records of one object. Zero-initialise. */
typedef struct ckpt__pending {
	size_t nchild, capchild;
	ckpt__pending_child *child;
	size_t nslot, capslot;
	ckpt__pending_slot *slot;
} ckpt__pending;

/**
 * Room for `nchild` more child records and `nslot` more slot records, so
 * that the pushes after values were assigned cannot fail.
 * @return CKPT_OK or CKPT_ENOMEM (records unchanged).
 */
int ckpt__pending_reserve(ckpt__pending *p, size_t nchild, size_t nslot);
/** Record child `name` (taken: freed with the record) of stored node `node`; takes a reference to s. Room reserved. */
void ckpt__pending_push_child(ckpt__pending *p, char *name, ckpt__session *s, int node, const ckpt__pending_ops *ops);
/** Record slot `slot_name` (taken) of stored primary node `orig_node`; takes a reference to s. Room reserved. */
void ckpt__pending_push_slot(ckpt__pending *p, ckpt__session *s, int orig_node, char *slot_name, int slot_node,
	const ckpt__pending_ops *ops);
/**
 * Child `name` was just added: restore it from the most recent record for
 * that name, then drop every record for the name.
 * @return CKPT_OK (also when there is none) or the restore's error (records kept).
 */
int ckpt__pending_apply_child(ckpt__pending *p, const char *name, ckpt_object *child, int fresh);
/**
 * Slot `slot_name` of `primary` was just created as `node`: restore it from
 * the most recent matching record, then drop that record.
 * @return CKPT_OK (also when there is none) or the restore's error (record kept).
 */
int ckpt__pending_apply_slot(ckpt__pending *p, const ckpt_variable *primary, const char *slot_name, ckpt_object *node,
	int fresh);
/** Drop every record (their session references and names); the arrays stay for reuse. */
void ckpt__pending_clear(ckpt__pending *p);
/** ckpt__pending_clear and free the arrays. */
void ckpt__pending_free(ckpt__pending *p);

#endif

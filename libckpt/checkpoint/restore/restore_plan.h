/*
 * Between matching and committing a restore: the plan a matching run builds
 * (restore_match.c) and the commit carries out (restore_commit.c). Only
 * those two files include it.
 */
#ifndef CKPT_RESTORE_PLAN_H
#define CKPT_RESTORE_PLAN_H

#include "checkpoint/checkpoint_internal.h"

/* One stored value going to one live variable. */
typedef struct assignment {
	size_t val;
	ckpt_variable *var;
	ckpt_object *owner;  /* variable node that gets source_key */
} assignment;

typedef struct pend_child {
	ckpt_object *obj;
	char *name;         /* owned until attached */
	int node;
} pend_child;

typedef struct pend_slot {
	ckpt_object *opt;
	int orig, slot_node;
	char *slot_name;    /* owned until attached */
} pend_slot;

struct ckpt__run {
	ckpt__session *s;
	size_t nasg, capasg;
	assignment *asg;
	size_t npc, cappc;
	pend_child *pc;
	size_t nps, capps;
	pend_slot *ps;
	unsigned char *visited;
	ckpt_variable **bound;    /* per node, this run */
	ckpt__ptrmap vars;        /* live variables given a value in this run */
	int fresh;                /* every variable is new (ckpt__run_set_fresh): load, restore-on-create of variables the call made */
	ckpt_strategy *cs;        /* restore across processes (ckpt__run_set_collective) */
};

/* restore_match.c */
/** Match stored node `start` and everything below it against the live object `obj` (no side effects on it). */
int ckpt__run_match_node(ckpt__run *r, int start, ckpt_object *obj);
/** Match stored slot variable node `slot_node` against the live variable node `node`. */
int ckpt__run_match_slot(ckpt__run *r, int slot_node, ckpt_object *node);

#endif

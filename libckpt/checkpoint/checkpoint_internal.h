/*
 * Internals of the object-based checkpoint (checkpoint_*.c, manager.c).
 *
 * Live side: ckpt_object nodes (refcounted) with named edges, attributes
 * (name -> variable) and, for optimizers, slot variables keyed by
 * (primary variable, slot name). A "variable node" is the object made by
 * ckpt_object_track_variable: one VARIABLE_VALUE attribute, no children; in
 * the object graph it is identified by its variable, so a variable tracked
 * twice is one node.
 *
 * Stored side (restore_session.h, restore_pending.h): a restore session
 * (ckpt__session, refcounted) holds the
 * file's object graph and every stored value, read into memory before any
 * live variable is touched. Values not consumed at restore time stay in the
 * session; live objects hold "pending" records pointing into it, applied
 * when the child / slot is created (restore-on-create).
 */
#ifndef CKPT_CHECKPOINT_INTERNAL_H
#define CKPT_CHECKPOINT_INTERNAL_H

#include "internal.h"
#include "ckpt/sys/strategy.h"

#include "checkpoint/restore/restore_session.h"
#include "checkpoint/restore/restore_pending.h"
#include "util/ptrmap.h"
#include "util/array.h"
#include "util/warn.h"

typedef struct ckpt__edge {
	char *name;          /* edge_name_dup: in the slab unless too long for it */
	ckpt_object *child;
	int weak;            /* closes a cycle / alias made by load: holds no reference */
	int name_in_slab;
} ckpt__edge;

/*
 * One stored tensor of an object. Most attributes are one tensor
 * (VARIABLE_VALUE, key "<path>/.ATTRIBUTES/<name>"); TF's multi-tensor
 * SaveableObjects (lookup tables) save one attribute as several tensors:
 * attribute "table", checkpoint key "<path>/.ATTRIBUTES/table" in the
 * object graph, tensors "<key>-keys" and "<key>-values". Those are one
 * ckpt__attr per tensor, sharing `name`, each with its `suffix`.
 */
typedef struct ckpt__attr {
	char *name;          /* "VARIABLE_VALUE", "table" */
	char *suffix;        /* NULL: the attribute's only tensor; else "-keys", "-values" */
	ckpt_variable *var;
	int owned;           /* freed with the object */
	char *source_key;    /* attributes of non-variable nodes: stored key last restored from */
	int no_full_name;    /* loaded from an attribute TF wrote without full_name: written without one again */
} ckpt__attr;

typedef struct ckpt__slot {
	ckpt_variable *primary;
	char *name;
	ckpt_object *node;   /* variable node holding the slot variable (owned reference) */
	long prev;           /* previous slot of the same primary, -1 */
} ckpt__slot;

/* Objects, their only attribute and their edges' names live in the slab (util/slab.c): load makes 10,000s. */
struct ckpt_object {
	int refs;
	int is_var_node;
	struct ckpt_partitioned *parted; /* a partitioned variable's node (ckpt_object_track_partitioned; borrowed) */
	char *opt_name;      /* optimizer name, prefixes slot variable names */
	char *source_key;    /* variable nodes: stored key last restored from */
	size_t nedges, capedges;
	ckpt__edge *edges;
	size_t ecap;         /* hash index of edge names (built from 16 edges on), 0 = none */
	size_t *eidx;        /* edge index + 1, 0 = empty */
	size_t nattrs, capattrs;
	ckpt__attr *attrs;   /* attr1 while there is at most one (a variable node's only attribute) */
	ckpt__attr attr1;
	size_t nslots, capslots;
	ckpt__slot *slots;
	ckpt__ptrmap slot_last;  /* primary -> index of its latest slot */
	ckpt__pending pending;   /* restore-on-create records (restore_pending.c owns them) */
};

struct ckpt_checkpoint {
	ckpt_object *root;
	ckpt_checkpoint_options opts;
	char *last_path;     /* of the last save / write */
	struct ckpt__find_cache *find; /* ckpt_checkpoint_find_variable's index, NULL until used */
	struct ckpt_partitioned **parted; /* tracked partitioned variables (borrowed), in tracking order */
	size_t nparted, capparted;
	int graph_without_has_values; /* loaded from a graph written without has_checkpoint_values: written so again */
	int incremental;     /* saves reuse the bytes of the last one (ckpt_manager_options.incremental) */
	struct ckpt__incr *incr; /* that save's record (formats/format.h), NULL until the first incremental save */
	/* multi-process incremental saves: this process's shard of the last one (ckpt/sys/bundle_part.h) */
	struct ckpt_bundle_part_record *part_rec;
	uint64_t part_gen;   /* ckpt__change_gen taken before that save read any value; 0: none to compare with */
	int last_collective; /* the last save was multi-process: its bytes are part_rec's */
};

/* checkpoint_object.c */
/* Bumped by every change of any object's edges, attributes or slots (caches compare it). */
unsigned long ckpt__tree_generation(void);
void ckpt__tree_changed(void);
int ckpt__object_alloc(ckpt_object **out);
void ckpt__object_ref(ckpt_object *o);
/* Edge without restore-on-create (load builds trees with it). */
int ckpt__object_link(ckpt_object *parent, const char *name, ckpt_object *child, int weak);
int ckpt__object_push_attr(ckpt_object *o, const char *name, ckpt_variable *var, int owned);
/* Tensor `suffix` (NULL / "" = the only one) of attribute `name`. */
int ckpt__object_push_attr_tensor(ckpt_object *o, const char *name, const char *suffix, ckpt_variable *var, int owned);
/* A new variable node holding `var`. */
int ckpt__var_node_new(ckpt_object **out, ckpt_variable *var, int owned);
const ckpt__edge *ckpt__object_edge(const ckpt_object *o, const char *name);
ckpt__slot *ckpt__object_slot(const ckpt_object *o, const ckpt_variable *primary, const char *name);
/*
 * Slot creation without the restore-on-create step (load uses it). var_name NULL = "<opt>/<primary>/<slot>".
 * unfilled: the copies are left unwritten (load: its restore run writes them, and zeroes what it did not).
 */
int ckpt__slot_create(ckpt_variable **out, ckpt_object **node, ckpt_object *opt, ckpt_variable *primary,
	const char *slot_name, const char *var_name, const ckpt_variable_options *o, int unfilled);
int ckpt__check_not_replica(const char *what);

/* checkpoint_graph.c: bump allocator (chunks freed together) */
typedef struct ckpt__arena {
	struct ckpt__arena_chunk *head;
} ckpt__arena;
void ckpt__arena_free(ckpt__arena *a);

/*
 * checkpoint_graph.c: the object graph save would write. The graph's strings
 * and arrays live in `arena` or point into the live tree (names of edges,
 * attributes and variables): free it with ckpt__plan_free only, and do not
 * change the tree while a plan is in use.
 */
typedef struct ckpt__plan_node {
	ckpt_object *obj;
	char *path;
	char **keys;                 /* per live attribute of obj: the key its tensor is stored under */
	int slot_of;                 /* slot nodes: id of the primary's node, else -1 */
	const ckpt__slot *slot;
	int depth;                   /* BFS depth (capped at CKPT_MAX_OBJECT_GRAPH_DEPTH) */
	char *parted_key;            /* obj->parted: the key of its VARIABLE_VALUE */
} ckpt__plan_node;
typedef struct ckpt__plan {
	size_t n;
	ckpt__plan_node *nodes;
	ckpt_object_graph *graph;
	ckpt__arena arena;
} ckpt__plan;
int ckpt__plan_build(ckpt__plan *p, ckpt_object *root);
/* The plan of what `ck` writes: ckpt__plan_build, and has_checkpoint_values as TF sets it (unless ck's source had none). */
int ckpt__plan_build_to_write(ckpt__plan *p, ckpt_checkpoint *ck);
void ckpt__plan_free(ckpt__plan *p);
void ckpt__find_cache_free(struct ckpt__find_cache *c);


/* restore_match.c (ckpt__run_commit: restore_commit.c) */
/* One matching run: match (no side effects), then commit (read all, assign, attach pending). */
typedef struct ckpt__run ckpt__run;
int ckpt__run_new(ckpt__run **out, ckpt__session *s);
/* Match the stored root (or, for name-based files, every live variable by name) against `root`. */
int ckpt__run_match_root(ckpt__run *r, ckpt_object *root);
int ckpt__run_commit(ckpt__run *r);
void ckpt__run_discard(ckpt__run *r);
/*
 * Load: every variable of the run is new (not visible to the caller until
 * the load succeeds, freed if it fails), so values are read straight in with
 * their checksums and no verification pass, and a failure needs no undo.
 */
void ckpt__run_set_fresh(ckpt__run *r);
/*
 * Restore across processes (a strategy with share_staged): every value is
 * staged in memory (this process's part when the processes share the
 * reading), the outcome agreed, and only then assigned from memory, which
 * cannot fail: every process restores or none does. The commit's status is
 * agreed.
 */
void ckpt__run_set_collective(ckpt__run *r, ckpt_strategy *cs);
/* Whether the committed run assigned `var` (load zero-fills what it did not). */
int ckpt__run_assigned(const ckpt__run *r, const ckpt_variable *var);
/* checkpoint_status.c */
int ckpt__restore_status_new(ckpt_restore_status **out, ckpt__session *s, ckpt_checkpoint *ck);
/* Which tier (ckpt_tier) the restore read: the memory tier sets CKPT_TIER_MEMORY; the default is storage. */
void ckpt__restore_status_set_tier(ckpt_restore_status *st, int tier);

/* checkpoint_divergence.c: with opts.check_mirrored, ESCOPE naming the first mirrored variable whose copies differ */
int ckpt__checkpoint_check_mirrored(ckpt_checkpoint *ck, const char *path);

/* checkpoint.c */
/* Set save_counter to `number` and write `path`; the counter is rolled back on failure. */
int ckpt__checkpoint_save_as(ckpt_checkpoint *ck, const char *path, int64_t number);
/**
 * The save counter (0 when there is none yet), or the read's failure: a
 * counter in device memory is read through its provider, which may fail,
 * and a save must not number itself from a counter it could not read.
 */
int ckpt__checkpoint_read_save_counter(const ckpt_checkpoint *ck, int64_t *out);
/* Saves of ck reuse the bytes of its last one from now on (the manager's option). */
void ckpt__checkpoint_set_incremental(ckpt_checkpoint *ck, int on);
/* Same, written through `vfs` (NULL = the checkpoint's) as a TensorBundle without fsync: the memory tier's copy. */
int ckpt__checkpoint_save_via(ckpt_checkpoint *ck, const char *path, int64_t number, ckpt_vfs *vfs);
/*
 * The memory tier's piece of a multi-process save (ckpt/sys/strategy.h): this process's data shard as a
 * temporary under `path` on `vfs`, its index entries and token in *piece; collective, nothing merged.
 */
int ckpt__checkpoint_save_piece(ckpt_checkpoint *ck, const char *path, int64_t number, ckpt_vfs *vfs,
	ckpt_strategy_piece *piece);
/* ckpt_checkpoint_restore reading through `vfs` (NULL = the checkpoint's); `*status` as there. `transient`: the
 * source is removed once this returns, so values restore-on-create needs later are held in memory. */
int ckpt__checkpoint_restore_via(ckpt_restore_status **status, ckpt_checkpoint *ck, const char *path, ckpt_vfs *vfs,
	int transient);
/*
 * The cross-process strategy (strategy_impl.h) a checkpoint's save / restore
 * must be collective under: the current scope's when it is one, else the
 * first among the tree's variables; NULL for a single-process checkpoint.
 */
ckpt_strategy *ckpt__checkpoint_collective(ckpt_checkpoint *ck);

#endif

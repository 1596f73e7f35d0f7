/*
 * The strategy interface: what distinguishes default, mirrored and
 * multi-worker strategies, as formats/format.h does for backends. Not
 * installed; the symbols below are exported (CKPT_API) only so that the
 * separate ckpt_mpi library can implement a strategy without libckpt
 * linking MPI.
 *
 * A strategy has `num_replicas` replicas in all, `local_replicas` of them
 * in this process (global ids replica_offset .. replica_offset + local - 1);
 * a variable holds one copy per local replica. The in-process strategies
 * (default, mirrored) have local == num_replicas, offset 0 and no
 * cross-process hooks (NULL): the core then does everything itself. A
 * cross-process strategy supplies the hooks; each is *collective* — every
 * process calls it in the same order — and must fail on every process
 * instead of hanging when they disagree.
 */
#ifndef CKPT_STRATEGY_IMPL_H
#define CKPT_STRATEGY_IMPL_H

#include "internal.h"
#include "ckpt/strategy.h"
#include "ckpt/variable.h"
#include "ckpt/object_graph.h"
#include "ckpt/io.h"
#include "ckpt/partitioned.h"

/** Element kinds the cross-process reduce handles. */
enum { CKPT__KIND_F32 = 0, CKPT__KIND_F64 = 1, CKPT__KIND_I32 = 2, CKPT__KIND_I64 = 3 };

/** What a checkpoint write hands a cross-process strategy: one value per logical variable. */
typedef struct ckpt__save_request {
	const char *path;                 /* bundle prefix */
	ckpt_vfs *vfs;
	int no_fsync;
	size_t count;
	const char *const *keys;          /* checkpoint keys, in TF2 save order */
	ckpt_variable *const *vars;
	const ckpt_object_graph *graph;   /* written as _CHECKPOINTABLE_OBJECT_GRAPH */
	size_t nparted;                   /* partitioned variables: each part written by its owner */
	ckpt_partitioned *const *parted;
	const char *const *parted_keys;   /* the key each is stored under */
} ckpt__save_request;

typedef struct ckpt__strategy_ops {
	const char *name;                 /* ckpt_strategy_name: "default", "mirrored", "multi_worker" */
	ckpt_strategy_kind kind;
	/* ---- cross-process hooks (NULL in-process) ---- */
	/**
	 * A variable was just created with its local copies filled (`filled` = 0:
	 * load path, left for the restore to write): agree that every process
	 * created the same one, then make copy 0 the initial value of process 0
	 * and fan it out (ckpt__variable_fill_from_primary). On error the core
	 * frees the variable.
	 */
	int (*on_create)(ckpt_strategy *s, ckpt_variable *v, int filled);
	/**
	 * All-reduce in replica context, called by local replica 0 once every
	 * local replica has published its buffer: bufs[0..local-1] hold n
	 * elements each; write the result (combined in global replica order)
	 * into every one. `local_error` non-NULL: the local replicas disagreed
	 * (the message); take part anyway so peers fail too, and fail.
	 */
	int (*all_reduce)(ckpt_strategy *s, void *const *bufs, size_t n, int kind, ckpt_reduce_op op,
		const char *local_error);
	/** Barrier across processes, by local replica 0 inside a replica barrier. */
	int (*barrier)(ckpt_strategy *s);
	/** End of ckpt_strategy_run: agree on its status (rc, this thread's last error); returns the agreed one. */
	int (*run_end)(ckpt_strategy *s, int rc);
	/** Cross-replica read of a sync-on-read SUM / MEAN / ONLY_FIRST variable, aggregated over every process. */
	int (*read)(ckpt_strategy *s, const ckpt_variable *v, void *dst, size_t n);
	/** Write a checkpoint (replaces the single-writer path; all-or-nothing across processes). */
	int (*write)(ckpt_strategy *s, const ckpt__save_request *req);
	/** Agree on an outcome: every process returns the first failing process's status (rc, last error). */
	int (*agree)(ckpt_strategy *s, int rc);
	/**
	 * Restore, all or nothing across processes: how many processes share
	 * the reading of a restore's values (1: every process reads every value
	 * it needs), and which part is this process's (*part, 0-based).
	 */
	int (*restore_parts)(ckpt_strategy *s, int *part);
	/**
	 * Restore, after every process staged its part into memory and checked
	 * and prepared every assignment (nothing assigned yet): agree on `rc`
	 * (the first failing process's status everywhere, naming it); when all
	 * succeeded, make each of the `n` arenas whole on every process: part
	 * p's bytes [bounds[k][p], bounds[k][p + 1]) of bases[k], read by process
	 * p, to every process (bounds[k] NULL: each process read all of it).
	 */
	int (*share_staged)(ckpt_strategy *s, int rc, size_t n, void *const *bases, const uint64_t *const *bounds);
	/**
	 * Every process's `n` bytes, concatenated in process order, into
	 * *all (ckpt__malloc'ed; *lens: one length per process, ckpt__malloc'ed).
	 */
	int (*allgather)(ckpt_strategy *s, const void *mine, size_t n, void **all, size_t **lens, int *nprocs);
	/** 1 on the process that writes shared files (manager state, deletions). */
	int (*is_writer)(ckpt_strategy *s);
	/** Free the implementation's state (the core frees the strategy). */
	void (*destroy)(ckpt_strategy *s);
} ckpt__strategy_ops;

/**
 * A strategy of a given implementation; `desc` for messages (copied, cut at
 * 95 bytes), "#<id>" appended. `impl` belongs to ops->destroy.
 */
CKPT_API int ckpt__strategy_create(ckpt_strategy **out, const ckpt__strategy_ops *ops, int num_replicas,
	int local_replicas, int replica_offset, void *impl, const char *desc);
CKPT_API const ckpt__strategy_ops *ckpt__strategy_ops_of(const ckpt_strategy *s);
CKPT_API void *ckpt__strategy_impl(const ckpt_strategy *s);
CKPT_API int ckpt__strategy_local_replicas(const ckpt_strategy *s);
CKPT_API int ckpt__strategy_replica_offset(const ckpt_strategy *s);
/** 1 when `s` has cross-process hooks. */
CKPT_API int ckpt__strategy_is_collective(const ckpt_strategy *s);
/**
 * Put the local replicas of `s` (just created, no variable yet) in the memory
 * of `provider`, local replica r on devices[r] (ckpt/memory.h). For
 * strategies made outside strategy.c (the multi-worker one).
 */
CKPT_API int ckpt__strategy_attach_memory(ckpt_strategy *s, const ckpt_memory_provider *provider, const int *devices);
/** Whether any cross-process strategy exists in this process now. */
int ckpt__strategy_any_collective(void);

/** Copy 0 of `v` into its other local copies unchanged (creation semantics, not assign's split). */
CKPT_API void ckpt__variable_fill_from_primary(ckpt_variable *v);
/**
 * Local copy `replica` of `v` from / into host memory (nbytes; fixed-size
 * dtypes): memcpy for host copies, the provider's copies for device ones.
 */
CKPT_API int ckpt__variable_read_copy(const ckpt_variable *v, int replica, void *dst);
CKPT_API int ckpt__variable_write_copy(ckpt_variable *v, int replica, const void *src);
/** 1 when `v`'s copies are device memory that only the provider's copies may touch. */
CKPT_API int ckpt__variable_on_device(const ckpt_variable *v);
/** Writable local copy `i` (0 <= i < local copies), or NULL. */
CKPT_API void *ckpt__variable_local_copy(ckpt_variable *v, int i);

#endif

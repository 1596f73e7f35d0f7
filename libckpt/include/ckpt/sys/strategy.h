/*
 * libckpt for extenders — implementing a distribution strategy.
 *
 * The library's own strategies (default, mirrored) and ckpt_mpi's
 * multi-worker strategy are each a method table over the same core; a
 * strategy that spans processes (or machines) supplies the cross-process
 * methods, so that libckpt itself never links a communication library.
 *
 * A strategy has `num_replicas` replicas in all, `local_replicas` of them in
 * this process (global ids replica_offset .. replica_offset + local - 1); a
 * variable holds one copy per local replica. An in-process strategy has
 * local == num_replicas, offset 0 and no cross-process methods (all NULL):
 * the core does everything itself. A cross-process strategy supplies them
 * all (restore_parts and run_end may stay NULL); each is *collective* —
 * every process calls it in the same order — and must fail on every process
 * instead of hanging when they disagree. Methods report errors like the
 * library (ckpt/sys/error.h) and allocate what the core frees with
 * ckpt/sys/alloc.h.
 */
#ifndef CKPT_SYS_STRATEGY_H
#define CKPT_SYS_STRATEGY_H

#include "ckpt/common.h"
#include "ckpt/io.h"
#include "ckpt/strategy.h"
#include "ckpt/variable.h"
#include "ckpt/object_graph.h"
#include "ckpt/partitioned.h"
#include "ckpt/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Element types the `all_reduce` method is asked to combine (its `elem` argument). */
typedef enum ckpt_reduce_elem {
	CKPT_REDUCE_ELEM_F32 = 0,
	CKPT_REDUCE_ELEM_F64 = 1,
	CKPT_REDUCE_ELEM_I32 = 2,
	CKPT_REDUCE_ELEM_I64 = 3
} ckpt_reduce_elem;

/**
 * The memory tier's save of one process's piece (ckpt_strategy_save_request
 * .piece, read by version-2 tables): the strategy writes this process's data
 * shard as its temporary (`<path>.data-K-of-N.tempstate<token>`, on `vfs`:
 * each process's own node, no shared file system), agrees on the outcome
 * as for a checkpoint, and returns its index entries and the token instead
 * of merging and committing. The caller commits.
 */
typedef struct ckpt_strategy_piece {
	void *entries;      /**< out: this process's index entries (ckpt_bundle_part_finish's), ckpt_malloc'ed */
	size_t entries_len; /**< out */
	uint64_t token;     /**< out: names the temporary */
} ckpt_strategy_piece;

/** What a checkpoint write hands a cross-process strategy: one value per logical variable. Borrowed for the call. */
typedef struct ckpt_strategy_save_request {
	const char *path;                 /**< bundle prefix */
	ckpt_vfs *vfs;
	int no_fsync;
	size_t count;
	const char *const *keys;          /**< checkpoint keys, in TF2 save order */
	ckpt_variable *const *vars;
	const ckpt_object_graph *graph;   /**< written as _CHECKPOINTABLE_OBJECT_GRAPH */
	size_t nparted;                   /**< partitioned variables: each part written by its owner */
	ckpt_partitioned *const *parted;
	const char *const *parted_keys;   /**< the key each is stored under */
	/** Version 2: NULL = an ordinary checkpoint; else a memory tier piece (ckpt_strategy_piece). */
	ckpt_strategy_piece *piece;
	/**
	 * Incremental saves (read by any table version; NULL = full save): this
	 * process's record of its shard of the checkpoint's last committed save,
	 * for ckpt_bundle_part_incremental. The core settles it after `write`
	 * returns (ckpt_bundle_part_record_settle): a strategy that ignores it
	 * writes a full save, correctly.
	 */
	struct ckpt_bundle_part_record *incremental;
	/** With `incremental`: per value (count), 1 = unchanged since that save (ckpt_bundle_part_add_clean), else NULL. */
	const unsigned char *clean;
} ckpt_strategy_save_request;

/** Version of ckpt_strategy_methods this header describes. */
#define CKPT_STRATEGY_METHODS_VERSION 3

/**
 * Methods of a strategy. Append-only: a later version adds fields at the
 * end, and the core reads only the fields of the version a table declares,
 * so a table built against an older header keeps working.
 */
typedef struct ckpt_strategy_methods {
	unsigned version;                 /**< CKPT_STRATEGY_METHODS_VERSION (1 .. the library's) */
	const char *name;                 /**< ckpt_strategy_name: "default", "mirrored", "multi_worker" */
	ckpt_strategy_kind kind;
	/* ---- cross-process methods (NULL in-process) ---- */
	/**
	 * A variable was just created with its local copies filled (`filled` = 0:
	 * load path, left for the restore to write): agree that every process
	 * created the same one, then make copy 0 the initial value of process 0
	 * and fan it out (ckpt_variable_fill_from_primary). On error the core
	 * frees the variable.
	 */
	int (*on_create)(ckpt_strategy *s, ckpt_variable *v, int filled);
	/**
	 * All-reduce in replica context, called by local replica 0 once every
	 * local replica has published its buffer: bufs[0..local-1] hold n
	 * elements each of type `elem` (a ckpt_reduce_elem); write the result
	 * (combined in global replica order) into every one. `local_error`
	 * non-NULL: the local replicas disagreed (the message); take part anyway
	 * so peers fail too, and fail.
	 */
	int (*all_reduce)(ckpt_strategy *s, void *const *bufs, size_t n, int elem, ckpt_reduce_op op,
		const char *local_error);
	/** Barrier across processes, by local replica 0 inside a replica barrier. */
	int (*barrier)(ckpt_strategy *s);
	/** Optional. End of ckpt_strategy_run: agree on its status (rc, this thread's last error); returns the agreed one. */
	int (*run_end)(ckpt_strategy *s, int rc);
	/**
	 * Cross-replica read of a sync-on-read SUM / MEAN / ONLY_FIRST variable
	 * into `dst` (n bytes), aggregated over every process.
	 */
	int (*read)(ckpt_strategy *s, const ckpt_variable *v, void *dst, size_t n);
	/** Write a checkpoint (replaces the single-writer path; all-or-nothing across processes). */
	int (*write)(ckpt_strategy *s, const ckpt_strategy_save_request *req);
	/** Agree on an outcome: every process returns the first failing process's status (rc, last error). */
	int (*agree)(ckpt_strategy *s, int rc);
	/**
	 * Optional. Restore, all or nothing across processes: returns how many
	 * processes share the reading of a restore's values (1: every process
	 * reads every value it needs) and sets `*part` to this process's part
	 * (0-based).
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
	 * Every process's `n` bytes of `mine`, concatenated in process order,
	 * into `*all`, with one length per process in `*lens` and the number of
	 * processes in `*nprocs`; both arrays allocated with ckpt_malloc, the
	 * caller frees them with ckpt_free.
	 */
	int (*allgather)(ckpt_strategy *s, const void *mine, size_t n, void **all, size_t **lens, int *nprocs);
	/** 1 on the process that writes shared files (manager state, deletions). */
	int (*is_writer)(ckpt_strategy *s);
	/** Optional. Free the implementation's state `impl` (the core frees the strategy itself). */
	void (*destroy)(ckpt_strategy *s);
	/* ---- version 2 ---- */
	/**
	 * Optional (NULL, or a version-1 table: the memory tier refuses
	 * multi-process saves with CKPT_EUNSUPPORTED). Personalised exchange:
	 * send[p] (send_lens[p] bytes, borrowed; 0 = nothing) goes to process p;
	 * recv[p] receives process p's bytes for this one (ckpt_malloc'ed, the
	 * caller frees each with ckpt_free; NULL when 0 bytes), recv_lens[p]
	 * their length. Arrays of one entry per process. Also understands
	 * ckpt_strategy_save_request.piece in `write`.
	 */
	int (*exchange)(ckpt_strategy *s, const void *const *send, const uint64_t *send_lens, void **recv,
		uint64_t *recv_lens);
	/* ---- version 3 ---- */
	/**
	 * Optional (NULL, or an older table: the memory tier's memory_async is
	 * refused with CKPT_EUNSUPPORTED). Collective: a second strategy over
	 * the same processes whose `agree` and `exchange` one other thread may
	 * call while the caller's thread goes on using `s` (the memory tier's
	 * copies to other nodes). *side is caller-owned (ckpt_strategy_free,
	 * collective too) and NULL with CKPT_OK on every process when any
	 * process cannot have one (an MPI library initialized below
	 * MPI_THREAD_MULTIPLE); *why then says why, a static string.
	 */
	int (*side_channel)(ckpt_strategy *s, ckpt_strategy **side, const char **why);
} ckpt_strategy_methods;

/**
 * A strategy implemented by `methods`.
 * @param[out] out the new strategy, caller-owned (free with ckpt_strategy_free;
 *             NULL on failure)
 * @param methods the method table (borrowed: it must outlive the strategy;
 *        usually a static const table); its cross-process methods are all
 *        set or all NULL, as the top of this header says
 * @param num_replicas replicas over every process (>= 1, at most the
 *        library's replica cap)
 * @param local_replicas replicas in this process (1 .. num_replicas;
 *        num_replicas for an in-process table)
 * @param replica_offset global id of this process's first replica
 *        (replica_offset + local_replicas <= num_replicas; 0 for an
 *        in-process table)
 * @param impl the implementation's state, returned by ckpt_strategy_impl;
 *        owned by the strategy once created (methods->destroy frees it),
 *        still the caller's when this fails
 * @param desc description for messages (copied, cut at 95 bytes; "#<id>" is appended)
 * @return CKPT_OK; CKPT_EINVAL (a NULL argument, an unknown table version,
 *         counts that do not fit, a cross-process method missing);
 *         CKPT_ELIMIT (too many replicas); CKPT_ENOMEM
 */
CKPT_API int ckpt_strategy_custom_new(ckpt_strategy **out, const ckpt_strategy_methods *methods,
	int num_replicas, int local_replicas, int replica_offset, void *impl, const char *desc);

/**
 * @param s a strategy; NULL means the default strategy
 * @return its method table (borrowed, lives as long as the strategy); an
 *         implementation recognises its own strategies by comparing it with
 *         its table
 */
CKPT_API const ckpt_strategy_methods *ckpt_strategy_method_table(const ckpt_strategy *s);

/**
 * @param s a strategy, or NULL
 * @return the `impl` given to ckpt_strategy_custom_new (borrowed); NULL for
 *         NULL and for the library's own strategies
 */
CKPT_API void *ckpt_strategy_impl(const ckpt_strategy *s);

/**
 * Copy local copy 0 of `v` into its other local copies unchanged (what a
 * variable's creation does, not assign's split of a value); for the
 * `on_create` method after it set copy 0. No-op for NULL, a single copy or
 * a string variable.
 * @param v the variable
 */
CKPT_API void ckpt_variable_fill_from_primary(ckpt_variable *v);

/**
 * @param v the variable
 * @param i local copy index (0 <= i < ckpt_variable_num_replicas(v), the copies this process holds)
 * @return local copy `i`, writable (borrowed, valid until the variable is
 *         freed); NULL when `v` is NULL or `i` is out of range
 */
CKPT_API void *ckpt_variable_local_copy(ckpt_variable *v, int i);

/*
 * Replicas in device memory (ckpt/memory.h). A strategy of this API may
 * keep its local replicas in a memory provider's memory; its methods then
 * reach a copy's bytes only through the calls below, never through
 * ckpt_variable_local_copy's pointer (a device address).
 */

/**
 * Put the local replicas of a strategy just made by ckpt_strategy_custom_new
 * (no variable created yet) in the memory of `provider`: local replica r on
 * devices[r]. The table is copied; provider->ctx must outlive the strategy.
 * @param s the strategy
 * @param provider a provider table (ckpt_memory_provider_check rules)
 * @param devices one device id per local replica
 * @return CKPT_OK; CKPT_EINVAL (a bad table or device id, a strategy that
 *         has variables or a provider already); the provider's status when a
 *         queue cannot be made
 */
CKPT_API int ckpt_strategy_attach_memory(ckpt_strategy *s, const ckpt_memory_provider *provider, const int *devices);

/**
 * @param v the variable
 * @return 1 when its copies are device memory that only the provider's
 *         copies may touch (then use the two calls below), else 0
 */
CKPT_API int ckpt_variable_on_device(const ckpt_variable *v);

/**
 * Copy local copy `i` of `v` (ckpt_variable_nbytes bytes, fixed-size dtype)
 * into host memory; for device copies through the provider, landed on return.
 * @param[out] dst host memory of ckpt_variable_nbytes(v) bytes
 * @param v the variable
 * @param i local copy index
 * @return CKPT_OK; CKPT_EINVAL (bad index, string dtype); the provider's failure
 */
CKPT_API int ckpt_variable_read_copy(void *dst, const ckpt_variable *v, int i);

/**
 * Set local copy `i` of `v` from host memory `src` (ckpt_variable_nbytes
 * bytes), as ckpt_variable_read_copy the other way; the other copies are
 * not touched (ckpt_variable_fill_from_primary fans copy 0 out).
 * @return CKPT_OK; CKPT_EINVAL; the provider's failure
 */
CKPT_API int ckpt_variable_write_copy(ckpt_variable *v, int i, const void *src);

#ifdef __cplusplus
}
#endif
#endif

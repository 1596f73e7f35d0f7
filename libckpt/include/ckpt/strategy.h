/*
 * libckpt — distribution strategies, scopes and replica context: the C
 * counterpart of tf.distribute.
 *
 * A strategy's scope is a *variable-creation context*: variables created
 * while it is the current strategy belong to it (mirrored: one copy per
 * replica, kept identical). Reading files and running steps need no scope;
 * ckpt_strategy_run() enters replica context by itself. With no scope active
 * the default one-replica strategy is current, so code written once works
 * with and without distribution. ckpt_strategy_current() is never NULL.
 *
 *     typedef struct model model;                      // the trainer's
 *     int build_model(model **m);
 *     int train_step(ckpt_replica_ctx *ctx, void *m);
 *
 *     static int train(model **m)
 *     {
 *         ckpt_strategy *s;
 *         int rc = ckpt_strategy_mirrored_new(&s, 2);
 *         if (rc < 0)
 *             return rc;
 *         ckpt_scope_enter(s);
 *             rc = build_model(m);                     // weights, slots, metrics: mirrored
 *         ckpt_scope_exit(s);
 *         if (rc == CKPT_OK)
 *             rc = ckpt_strategy_run(s, train_step, *m);   // once per replica
 *         ckpt_strategy_free(s);
 *         return rc;
 *     }
 */
#ifndef CKPT_STRATEGY_H
#define CKPT_STRATEGY_H

#include "ckpt/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckpt_strategy ckpt_strategy;
typedef struct ckpt_replica_ctx ckpt_replica_ctx;

typedef enum ckpt_strategy_kind {
	CKPT_STRATEGY_DEFAULT = 0,   /**< one replica; plain variables */
	CKPT_STRATEGY_MIRRORED = 1,  /**< N replicas on OpenMP threads; mirrored variables */
	CKPT_STRATEGY_MULTI_WORKER = 2 /**< workers (MPI processes) x local replicas: ckpt/mpi.h */
} ckpt_strategy_kind;

typedef enum ckpt_reduce_op {
	CKPT_REDUCE_SUM = 0,
	CKPT_REDUCE_MEAN = 1
} ckpt_reduce_op;

/**
 * A mirrored strategy with `num_replicas` (>= 1) replicas, at most 1024.
 * @param[out] out caller-owned; free with ckpt_strategy_free
 * @return CKPT_OK; CKPT_EINVAL below 1 or for a NULL `out`; CKPT_ELIMIT above 1024; CKPT_ENOMEM
 */
CKPT_API int ckpt_strategy_mirrored_new(ckpt_strategy **out, int num_replicas);
/** @return the process-wide default strategy (one replica). Never freed. */
CKPT_API ckpt_strategy *ckpt_strategy_default(void);
/**
 * Free a strategy. EINVAL-level misuse (still in scope, variables alive) is reported, not crashed.
 * Variables and scope entries hold references: with any alive the EINVAL is
 * recorded in ckpt_error_last() and the memory goes with the last variable
 * freed / scope exited (the strategy stays usable through them until then).
 */
CKPT_API void ckpt_strategy_free(ckpt_strategy *s);

/** @return the kind of `s` (CKPT_STRATEGY_DEFAULT for NULL). */
CKPT_API ckpt_strategy_kind ckpt_strategy_kind_of(const ckpt_strategy *s);
/** @return "default", "mirrored" or "multi_worker" (static). */
CKPT_API const char *ckpt_strategy_name(const ckpt_strategy *s);
/** @return the replicas in all (multi-worker: over every worker; this process holds its local ones); 1 for NULL. */
CKPT_API int ckpt_strategy_num_replicas(const ckpt_strategy *s);
/** @return a short description for messages, "MirroredStrategy(4 replicas)#2", borrowed from `s`. */
CKPT_API const char *ckpt_strategy_describe(const ckpt_strategy *s);

/** Push `s` on this thread's scope stack.
 * @return CKPT_OK; CKPT_ESCOPE when a scope of another strategy is active (they may not nest) */
CKPT_API int ckpt_scope_enter(ckpt_strategy *s);
/** Pop `s` from this thread's scope stack.
 * @return CKPT_OK; CKPT_ESCOPE when `s` is not the innermost scope */
CKPT_API int ckpt_scope_exit(ckpt_strategy *s);
/**
 * In replica context: the strategy being run (scopes the caller entered
 * before ckpt_strategy_run are not visible to the replicas).
 * @return the innermost scope's strategy, or the default strategy; never NULL
 */
CKPT_API ckpt_strategy *ckpt_strategy_current(void);
/** @return 1 when a scope (of any strategy other than the default) is active on this thread, else 0. */
CKPT_API int ckpt_in_scope(void);

/** A replica function: return CKPT_OK or a status; the first failure is returned by run. */
typedef int (*ckpt_replica_fn)(ckpt_replica_ctx *ctx, void *arg);

/**
 * Run `fn` once per replica in replica context (OpenMP threads, one per
 * replica even when replicas outnumber cores). Errors raised in a replica are
 * carried back: the lowest-numbered failing replica's status and last error
 * are returned on the calling thread.
 * Replica 0 runs on the calling thread. Inside another OpenMP parallel region
 * (where OpenMP would deny threads) each replica gets a POSIX thread instead.
 * A replica that returns while peers wait in a barrier / all-reduce breaks it:
 * they fail with ESCOPE instead of hanging (and a failure that merely follows
 * from a failed peer is not the one reported).
 * @return CKPT_OK; the failing replica's status; CKPT_ESCOPE when called from replica context
 */
CKPT_API int ckpt_strategy_run(ckpt_strategy *s, ckpt_replica_fn fn, void *arg);

/** @return this thread's replica context (borrowed), NULL outside ckpt_strategy_run. */
CKPT_API ckpt_replica_ctx *ckpt_replica_current(void);
/** @return the global replica id (multi-worker: worker-major, worker * local_replicas + local index); 0 for NULL. */
CKPT_API int ckpt_replica_id(const ckpt_replica_ctx *ctx);
/** @return the replicas in all of the run `ctx` belongs to (over every worker); 1 for NULL. */
CKPT_API int ckpt_replica_num_replicas(const ckpt_replica_ctx *ctx);
/** @return the strategy being run (borrowed); the default strategy for NULL. */
CKPT_API ckpt_strategy *ckpt_replica_strategy(const ckpt_replica_ctx *ctx);

/**
 * All-reduce `n` values in place across replicas. Every replica must call it
 * with the same n. Values are combined in replica order 0..N-1, so every
 * replica gets bit-identical results.
 * Accumulation is in the buffer's type; MEAN divides the fixed-order sum by
 * N (not a multiplication by 1/N).
 * @return CKPT_OK; CKPT_EINVAL in every replica when replicas disagree on n / op;
 *         CKPT_ESCOPE when a peer left the run
 */
CKPT_API int ckpt_replica_all_reduce_f32(ckpt_replica_ctx *ctx, ckpt_reduce_op op, float *buf, size_t n);
/** ckpt_replica_all_reduce_f32 for doubles.
 * @return as ckpt_replica_all_reduce_f32 */
CKPT_API int ckpt_replica_all_reduce_f64(ckpt_replica_ctx *ctx, ckpt_reduce_op op, double *buf, size_t n);
/** Wait until every replica reaches the barrier.
 * @return CKPT_OK; CKPT_EINVAL for a NULL `ctx`; CKPT_ESCOPE with another thread's context or
 *         when a peer left the run; a multi-worker strategy's barrier failure */
CKPT_API int ckpt_replica_barrier(ckpt_replica_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif

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
 *     ckpt_strategy *s;
 *     ckpt_strategy_mirrored_new(&s, 2);
 *     ckpt_scope_enter(s);
 *         build_model(&m);          // weights, slots, metrics: mirrored
 *     ckpt_scope_exit(s);
 *     ckpt_strategy_run(s, train_step, &m);   // once per replica
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

/** A mirrored strategy with `num_replicas` (>= 1) replicas. At most 1024 (ELIMIT above). */
CKPT_API int ckpt_strategy_mirrored_new(ckpt_strategy **out, int num_replicas);
/** The process-wide default strategy (one replica). Never freed. */
CKPT_API ckpt_strategy *ckpt_strategy_default(void);
/**
 * Free a strategy. EINVAL-level misuse (still in scope, variables alive) is reported, not crashed.
 * Variables and scope entries hold references: with any alive the EINVAL is
 * recorded in ckpt_error_last() and the memory goes with the last variable
 * freed / scope exited (the strategy stays usable through them until then).
 */
CKPT_API void ckpt_strategy_free(ckpt_strategy *s);

CKPT_API ckpt_strategy_kind ckpt_strategy_get_kind(const ckpt_strategy *s);
/** "default", "mirrored" or "multi_worker". */
CKPT_API const char *ckpt_strategy_name(const ckpt_strategy *s);
/** Replicas in all (multi-worker: over every worker; this process holds its local ones). */
CKPT_API int ckpt_strategy_num_replicas(const ckpt_strategy *s);
/** A short description for messages: "MirroredStrategy(4 replicas)#2". */
CKPT_API const char *ckpt_strategy_describe(const ckpt_strategy *s);

/** Push `s` on this thread's scope stack. Scopes of different strategies may not nest (ESCOPE). */
CKPT_API int ckpt_scope_enter(ckpt_strategy *s);
/** Pop; ESCOPE when `s` is not the innermost scope. */
CKPT_API int ckpt_scope_exit(ckpt_strategy *s);
/**
 * The innermost scope's strategy, or the default strategy. Never NULL.
 * In replica context: the strategy being run (scopes the caller entered
 * before ckpt_strategy_run are not visible to the replicas).
 */
CKPT_API ckpt_strategy *ckpt_strategy_current(void);
/** 1 when a scope (of any strategy other than the default) is active on this thread. */
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
 * from a failed peer is not the one reported). Calling run from replica
 * context is ESCOPE.
 */
CKPT_API int ckpt_strategy_run(ckpt_strategy *s, ckpt_replica_fn fn, void *arg);

/** This thread's replica context, NULL outside ckpt_strategy_run. */
CKPT_API ckpt_replica_ctx *ckpt_replica_current(void);
/** The global replica id (multi-worker: worker-major, worker * local_replicas + local index). */
CKPT_API int ckpt_replica_id(const ckpt_replica_ctx *ctx);
CKPT_API int ckpt_replica_num_replicas(const ckpt_replica_ctx *ctx);
CKPT_API ckpt_strategy *ckpt_replica_strategy(const ckpt_replica_ctx *ctx);

/**
 * All-reduce `n` values in place across replicas. Every replica must call it
 * with the same n. Values are combined in replica order 0..N-1, so every
 * replica gets bit-identical results.
 * Accumulation is in the buffer's type; MEAN divides the fixed-order sum by
 * N (not a multiplication by 1/N). Replicas disagreeing on n / op: EINVAL in
 * every replica.
 */
CKPT_API int ckpt_replica_all_reduce_f32(ckpt_replica_ctx *ctx, ckpt_reduce_op op, float *buf, size_t n);
CKPT_API int ckpt_replica_all_reduce_f64(ckpt_replica_ctx *ctx, ckpt_reduce_op op, double *buf, size_t n);
/** Wait until every replica reaches the barrier. */
CKPT_API int ckpt_replica_barrier(ckpt_replica_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif

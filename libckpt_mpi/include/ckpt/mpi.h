/*
 * libckpt — the multi-worker mirrored strategy over MPI (library ckpt_mpi,
 * CMake target ckpt::ckpt_mpi, pkg-config ckpt-mpi). libckpt itself never
 * links MPI; this is the only part that does.
 *
 * The scope rule of ckpt/strategy.h across processes: each worker (an MPI
 * process of `comm`) holds `local_replicas` replicas on threads; a variable
 * created inside the scope is mirrored over all workers x local replicas
 * (global replica id = worker * local_replicas + local index). Everything
 * below is *collective*: every worker makes the same calls in the same order.
 *
 *  - Creation: each variable's initial value is broadcast from worker 0, so
 *    differently seeded workers start identical. A worker that creates a
 *    different variable (name, dtype, shape, kind, or order) is detected at
 *    that creation or at the next collective call, and every worker fails
 *    with CKPT_ESCOPE naming the variable and the two workers — never a
 *    hang. After such a disagreement the strategy is broken: every later
 *    collective call fails at once with the same message.
 *  - ckpt_strategy_run: the local replicas on threads, as mirrored; the
 *    run's status is agreed (a failure on any worker is returned on every
 *    worker, naming it).
 *  - ckpt_replica_all_reduce_f32/f64 and ckpt_replica_barrier span every
 *    replica of every worker. Every element is combined in global replica
 *    order 0..R-1, so results are bit-identical on every replica AND for
 *    any split of R into workers x local replicas (1x4, 2x2, 4x1 give the
 *    same bits as ckpt_strategy_mirrored_new(4)).
 *  - ckpt_variable_read of a sync-on-read variable aggregates over every
 *    replica of every worker (collective).
 *  - Checkpoint write / save / manager save: each value written once, the
 *    variables spread over the workers by bytes, worker k writing data
 *    shard `P.data-0000k-of-0000W`; worker 0 merges every shard's entries
 *    into one `P.index` (TensorFlow's MergeBundles layout) and commits only
 *    after every worker has fsynced its shard: all or nothing. A failure on
 *    one worker is returned on every worker naming its rank. The workers
 *    must share one file system (as TensorFlow assumes).
 *  - Restore (checkpoint restore, manager restore_latest): every worker
 *    reads the values it needs and fans them out to its local replicas; the
 *    workers agree before any variable is assigned, and on the status.
 *    Any checkpoint restores onto any worker count and replica count (also
 *    single-process, with `ckpt restore` or the one-process strategies).
 *  - Manager: worker 0 alone writes the state file and deletes old
 *    checkpoints; every worker returns the same path.
 *  - Partitioned variables (ckpt/partitioned.h): created collectively,
 *    part i held by worker i % W only (one plain copy). A save writes each
 *    part's rows into its owner's data shard under TensorFlow's slice key
 *    (worker 0 adds the full entry listing every slice); a restore onto any
 *    P and W reads, on each worker, only the byte ranges of the rows of the
 *    parts it holds, and the workers exchange the crc32c of those ranges so
 *    that every stored slice is verified whole. TensorFlow-written ones
 *    (TF1 PartitionedVariable, TF2 ShardedVariable) restore the same way,
 *    or into a variable of the full shape on every worker.
 *  - Not guaranteed: a read failing inside a restore's commit on one worker
 *    after all agreed (that worker keeps its old values, all-or-nothing
 *    locally; every worker still returns the failure); string variables'
 *    initial values are not broadcast (each worker keeps its own).
 *
 * Threads: MPI is called only from the thread that called ckpt_strategy_run
 * / the creating or saving thread, so MPI_THREAD_FUNNELED suffices.
 * MPI_Init / MPI_Finalize stay the caller's; free the strategy (and every
 * variable) before MPI_Finalize.
 */
#ifndef CKPT_MPI_H
#define CKPT_MPI_H

#include <mpi.h>
#include "ckpt/ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A multi-worker strategy over the processes of `comm` (duplicated: the
 * caller keeps its own), each holding `local_replicas` (>= 1) replicas;
 * every process passes the same count (EINVAL on every process otherwise).
 * Collective. Name "multi_worker", kind CKPT_STRATEGY_MULTI_WORKER; the
 * description says both counts and this worker. At most 1024 replicas in
 * all (ELIMIT).
 */
CKPT_API int ckpt_strategy_multi_worker_new(ckpt_strategy **out, MPI_Comm comm, int local_replicas);
/** This process's worker index (its rank in `comm`), 0 for any other strategy. */
CKPT_API int ckpt_multi_worker_rank(const ckpt_strategy *s);
/** Workers (processes), 1 for any other strategy. */
CKPT_API int ckpt_multi_worker_size(const ckpt_strategy *s);

#ifdef __cplusplus
}
#endif
#endif

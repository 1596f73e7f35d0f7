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
 *  - Creation: each variable's initial value is broadcast from worker 0
 *    (strings too: element lengths, then bytes), so differently seeded
 *    workers start identical. A worker that creates a different variable
 *    (name, dtype, shape, kind, or order) is detected at that creation or
 *    at the next collective call, and every worker fails with CKPT_ESCOPE
 *    naming the variable and the two workers — never a hang. After such a
 *    disagreement the strategy is broken: every later collective call fails
 *    at once with the same message.
 *  - ckpt_strategy_run: the local replicas on threads, as mirrored; the
 *    run's status is agreed (a failure on any worker is returned on every
 *    worker, naming it).
 *  - ckpt_replica_all_reduce_f32/f64 and ckpt_replica_barrier span every
 *    replica of every worker. Every element is combined in global replica
 *    order 0..R-1, so results are bit-identical on every replica AND for
 *    any split of R into workers x local replicas (1x4, 2x2, 4x1 give the
 *    same bits as ckpt_strategy_mirrored_new(4)).
 *  - ckpt_variable_read of a sync-on-read variable aggregates over every
 *    replica of every worker (collective), combined exactly as the
 *    single-process read does (SUM in the type in replica order; float MEAN
 *    summed in a wider type and divided once; integers in int64), so any
 *    split of R gives the bits of ckpt_strategy_mirrored_new(R). An integer
 *    sum that overflows fails with CKPT_ELIMIT on every worker, naming the
 *    variable and the first such element, as in one process.
 *  - Checkpoint write / save / manager save: each value written once, the
 *    variables spread over the workers by bytes, worker k writing data
 *    shard `P.data-0000k-of-0000W`; worker 0 merges every shard's entries
 *    into one `P.index` (TensorFlow's MergeBundles layout) and commits only
 *    after every worker has fsynced its shard: all or nothing. A failure on
 *    one worker is returned on every worker naming its rank. The workers
 *    must share one file system (as TensorFlow assumes).
 *  - Restore (checkpoint restore, manager restore_latest): all or nothing
 *    across workers. Every worker stages the values it needs in memory
 *    (checksums verified; peak memory is the live state plus the staged
 *    values) and prepares every assignment; the outcome is agreed; only
 *    then does every worker assign, from memory, which cannot fail. A read
 *    failure on any worker leaves every worker's variables untouched and
 *    every worker returns it, naming the rank; the status is the same on
 *    every worker. Who reads: every worker reads what it needs itself
 *    (CKPT_MW_RESTORE_READ_ALL, the default), or each reads a 1/W part by
 *    bytes and the parts are broadcast (ckpt_multi_worker_set_restore).
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
 * @param[out] out caller-owned; free with ckpt_strategy_free (before MPI_Finalize)
 * @return CKPT_OK or a negative ckpt_status as said above (the same on every process)
 */
CKPT_API int ckpt_strategy_multi_worker_new(ckpt_strategy **out, MPI_Comm comm, int local_replicas);
/**
 * ckpt_strategy_multi_worker_new with this worker's local replicas in the
 * memory of `provider` (ckpt/memory.h): local replica r on devices[r]. Every
 * path that touches a replica's bytes goes through the provider, as for
 * ckpt_strategy_mirrored_on (the cross-process exchanges go through host
 * memory). Collective: a bad table or device on one worker fails every
 * worker.
 * @param[out] out caller-owned; free with ckpt_strategy_free (before MPI_Finalize)
 * @return CKPT_OK or a negative ckpt_status (CKPT_EINVAL for a bad table or device)
 */
CKPT_API int ckpt_strategy_multi_worker_new_on(ckpt_strategy **out, MPI_Comm comm, const ckpt_memory_provider *provider,
	const int *devices, int local_replicas);
/** Who reads a restore's values (ckpt_multi_worker_set_restore). */
typedef enum ckpt_mw_restore {
	CKPT_MW_RESTORE_READ_ALL = 0, /**< every worker reads every value it needs (the default) */
	CKPT_MW_RESTORE_SPLIT = 1     /**< each worker reads a 1/W part by bytes; the parts are broadcast */
} ckpt_mw_restore;

/**
 * Choose who reads a restore's values; the default is
 * CKPT_MW_RESTORE_READ_ALL, or CKPT_MW_RESTORE_SPLIT when worker 0's
 * environment has CKPT_MPI_RESTORE=split when the strategy is made.
 * Collective: worker 0's choice wins on every worker.
 * @return CKPT_OK; CKPT_EINVAL for an unknown mode or another strategy; an MPI failure
 */
CKPT_API int ckpt_multi_worker_set_restore(ckpt_strategy *s, ckpt_mw_restore mode);
/** @return this process's worker index (its rank in `comm`), 0 for any other strategy. */
CKPT_API int ckpt_multi_worker_rank(const ckpt_strategy *s);
/** @return the number of workers (processes), 1 for any other strategy. */
CKPT_API int ckpt_multi_worker_size(const ckpt_strategy *s);

#ifdef __cplusplus
}
#endif
#endif

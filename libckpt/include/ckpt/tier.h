/*
 * libckpt — the memory tier: the newest checkpoint steps kept in shared
 * memory on the machine (a file system in RAM, /dev/shm by default), so that
 * a restarted trainer restores without reading storage, and the tools that
 * list and drop what a machine holds.
 *
 * A manager saves to it when its options ask (ckpt_manager_options:
 * memory_every, persist_every, memory_job, memory_limit; checkpoint.h).
 * Layout, under the tier directory (CKPT_TIER_DIR, else
 * /dev/shm/ckpt-<uid>, mode 0700):
 *
 *   <job>/step-<N>.w<R>-of-<W>/     one segment: step N of worker R of W
 *       SEGMENT                     header: job, step, worker, sizes, the
 *                                   index's crc32c, its own crc32c
 *       ckpt.index, ckpt.data-*     the worker's state as a TensorBundle
 *                                   (a crc32c per tensor, in the index)
 *
 * A segment is written under a temporary name (".tmp-…") and renamed when
 * whole, so a process killed during a save leaves the previous step intact;
 * files are mode 0600. Superseded steps are removed after each save, but
 * for their data files: each worker keeps those open and mapped as spares
 * ("<job>/.spare.w<R>-of-<W>.<K>") and the next save writes over them by
 * memcpy, so a worker holds its committed step plus one step of spares
 * between saves (what a save needs at its peak anyway). A step that a
 * background copy to storage still reads is never written over. A clean
 * finish removes the spares; a restarted worker removes the ones a killed
 * run of its rank left.
 *
 * Across workers (a multi-process checkpoint, ckpt_mpi): a node is the
 * set of workers that share a tier directory: by default the workers of one
 * host; CKPT_TIER_NODES ("a,a,b,b": one name per worker rank) emulates
 * nodes on one machine, node "a" keeping its segments in <tier dir>/a and
 * reading nothing of another node's but through the strategy (MPI). Each
 * save of step N by W workers writes, per worker R, the piece the
 * multi-worker write gives it (its share of the values by bytes, the rows
 * of its parts of partitioned variables, the object graph on worker 0) as
 * segment step-<N>.w<R>-of-<W> on its node — the data shard and its index
 * entries ("ckpt.entries"), every file's crc32c in the SEGMENT header —
 * and sends it to the lowest worker of each of the memory_copies (F) next
 * nodes, which stores it under the same name. Then a two-phase commit:
 * every worker votes (its piece and the copies it received stored and
 * checked); on a yes from all, each node writes the record
 * commit-<N>.of-<W> (renamed whole) and the save returns once every node
 * has; then each node removes every other step. A step without a record on
 * some surviving node is never restored, even with every piece present,
 * so no kill leaves a partial step restorable, and the previous recorded
 * step stays until N is recorded.
 *
 * With memory_async (checkpoint.h), the save returns once every worker's
 * piece is on its own node: the copies to the F nodes go from a thread of
 * the tier, over the strategy's side channel (a second communicator: MPI at
 * MPI_THREAD_MULTIPLE), while the trainer trains on, and the vote, the
 * records and the removal of step N - 1 run at the next manager call (the
 * next save first commits step N, then writes N + 1). A node then holds at
 * most the committed step and the one being copied, as before; a failure
 * before that call restores step N - 1: at most one step is lost, never a
 * mix of two.
 *
 * The restore (ckpt_manager_restore_latest in a job of any worker count and
 * local split, on the nodes that survived) agrees on the newest recorded
 * step, newer than the directory's newest checkpoint, whose every piece has
 * a copy that checks on some surviving node; each node assembles it as an
 * ordinary merged TensorBundle in a staging directory (its own pieces
 * hard-linked, the others received from a holder over MPI) and every worker
 * restores it with the ordinary multi-worker restore (resharding partitioned
 * variables, all or nothing). A copy whose crc32c fails is skipped for
 * another; with no whole step (more than F nodes lost) the directory's
 * newest checkpoint is restored, after a warning naming the missing piece.
 *
 * Why files in /dev/shm and not a memfd handed to a keeper process: the
 * kernel is the keeper (nothing to start, supervise or restart, and no
 * keeper whose death loses every node's copy), the segments are found by
 * name by a restarted job with any number of workers and by `ckpt tier`,
 * rename(2) gives the atomic commit, permissions are ordinary file modes,
 * and the readers read them as they read any checkpoint. The cost: they
 * outlive the job until removed (a clean finish removes them; `ckpt tier
 * drop` does it by hand) and count against /dev/shm's size, which a save
 * checks before it writes (CKPT_ELIMIT naming what is needed and free).
 */
#ifndef CKPT_TIER_H
#define CKPT_TIER_H

#include "ckpt/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Where a restore's values came from (ckpt_restore_status_tier, checkpoint.h). */
typedef enum ckpt_tier {
	CKPT_TIER_NONE = 0,    /**< nothing was restored (a fresh start) */
	CKPT_TIER_STORAGE = 1, /**< the checkpoint directory (POSIX, s3://) */
	CKPT_TIER_MEMORY = 2   /**< the memory tier's segments */
} ckpt_tier;

/** The environment variable that overrides the tier directory (tests, emulated nodes). */
#define CKPT_TIER_DIR_ENV "CKPT_TIER_DIR"

/**
 * The tier directory of this process: $CKPT_TIER_DIR, else /dev/shm/ckpt-<uid>.
 * @param[out] out caller-owned (free with ckpt_free)
 * @return CKPT_OK; CKPT_ENOMEM
 */
CKPT_API int ckpt_tier_dir(char **out);

/** One step of one job held in a tier directory. */
typedef struct ckpt_tier_entry {
	const char *job;
	int64_t step;
	int num_workers;      /**< workers that saved the step (W of "of-W") */
	int num_present;      /**< segments of it whose header checks */
	uint64_t bytes;       /**< bytes of those segments */
	int complete;         /**< every worker's segment is present and checks (a multi-process step: and its commit record) */
} ckpt_tier_entry;

typedef struct ckpt_tier_list ckpt_tier_list;

/**
 * What the tier directory `dir` (NULL = ckpt_tier_dir()) holds, by job then
 * step, ascending. A missing directory is an empty list. Temporaries of
 * saves in progress (or killed) are not listed.
 * @param[out] out caller-owned; free with ckpt_tier_list_free
 * @return CKPT_OK; CKPT_EIO when the directory cannot be read; CKPT_ENOMEM
 */
CKPT_API int ckpt_tier_scan(ckpt_tier_list **out, const char *dir);
/** @return the entries of the list (0 for NULL). */
CKPT_API size_t ckpt_tier_list_num_entries(const ckpt_tier_list *l);
/** @return entry i, borrowed from the list; NULL when out of range. */
CKPT_API const ckpt_tier_entry *ckpt_tier_list_entry(const ckpt_tier_list *l, size_t i);
/** Free the list. NULL ok. */
CKPT_API void ckpt_tier_list_free(ckpt_tier_list *l);

/**
 * Remove everything job `job` holds in the tier directory `dir` (NULL =
 * ckpt_tier_dir()), temporaries included, then the job's directory.
 * @return CKPT_OK (also when the job holds nothing); CKPT_EINVAL for a job
 *         name that is empty, starts with '.' or has a '/'; CKPT_EIO
 */
CKPT_API int ckpt_tier_drop(const char *dir, const char *job);

#ifdef __cplusplus
}
#endif
#endif

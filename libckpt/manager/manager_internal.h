/*
 * Internals of the checkpoint manager shared by manager.c,
 * manager_async.c and a collective (multi-worker) manager. The pieces are
 * split so that a caller that writes a checkpoint by other means (one data
 * shard per worker, one merged index) can still reuse the lock and the
 * commit bookkeeping:
 *
 *   lock      ckpt_vfs_lock()                 one writer per directory (io.h)
 *   plan      ckpt__manager_plan()            number, path, retention list
 *   write     (any writer: ckpt__checkpoint_save_as, async, collective)
 *   commit    ckpt__manager_commit_files()    delete the oldest, write the state file
 *   apply     ckpt__manager_apply()           in-memory list, max_number, save_counter
 *
 * commit_files touches only the plan and the manager's read-only fields
 * (vfs, dir, no_fsync), so it may run on a background thread while the
 * trainer keeps the manager; apply runs on the caller's thread.
 */
#ifndef CKPT_MANAGER_INTERNAL_H
#define CKPT_MANAGER_INTERNAL_H

#include "internal.h"
#include "ckpt/checkpoint.h"

/* ---- one save, planned / written / committed / applied ---- */

typedef struct ckpt__manager_save {
	char *path;            /* "<dir>/<name>-N" */
	int64_t number;
	int64_t old_counter;   /* save_counter before the save (rolled back when the write fails) */
	double time;
	char **paths;          /* the list after the save, oldest first (owned copies) */
	double *times;
	size_t n;
	char **del;            /* the oldest beyond max_to_keep, to delete (owned copies) */
	double *del_times;
	size_t ndel;
	/* results, filled by whoever writes and commits */
	int written;           /* the checkpoint itself was committed */
	size_t ndeleted;       /* how many of del are gone; the others (retention refused) are del[0 .. ndel - ndeleted) */
	int rc;                /* first error of write + commit */
	ckpt__error_slot error;/* its error, for a caller on another thread */
} ckpt__manager_save;

/** Plan the save of number `number` (list, retention) from the manager's current list. */
int ckpt__manager_plan(ckpt__manager_save *s, ckpt_manager *m, int64_t number);
/** After the checkpoint was written: delete s->del (index first), then write the state file. */
int ckpt__manager_commit_files(ckpt_manager *m, ckpt__manager_save *s);
/** Fold the outcome into the manager (list, max_number, last_saved); frees the plan. */
void ckpt__manager_apply(ckpt_manager *m, ckpt__manager_save *s);
void ckpt__manager_save_free(ckpt__manager_save *s);
/** The number the next ckpt_manager_save gets: max(save_counter, highest seen) + 1. */
int ckpt__manager_next_number(ckpt_manager *m, int64_t *out);
/** The manager's checkpoint, directory, warning sink. */
ckpt_checkpoint *ckpt__manager_checkpoint(ckpt_manager *m);
const char *ckpt__manager_dir(const ckpt_manager *m);
void ckpt__manager_warn(ckpt_manager *m, const char *fmt, ...) CKPT_PRINTF(2, 3);

/* ---- async saves through the manager (manager_async.c) ---- */

/** The manager's save in flight, if any (opaque to manager.c). */
typedef struct ckpt__manager_async ckpt__manager_async;
ckpt__manager_async **ckpt__manager_async_slot(ckpt_manager *m);
/** How manager.c finishes the save in flight (ckpt__manager_async_finish) without calling into manager_async.c. */
typedef int (*ckpt__manager_finish_fn)(ckpt_manager *m);
/** Start tracking save `a` in flight, finished by `finish`. */
void ckpt__manager_set_async(ckpt_manager *m, ckpt__manager_async *a, ckpt__manager_finish_fn finish);
/**
 * Wait for the manager's async save in flight (if any) and apply it. Its
 * status (the background error, re-raised on this thread) or CKPT_OK.
 */
int ckpt__manager_async_finish(ckpt_manager *m);

/* ---- the persistent tier written from the memory tier (manager_persist.c) ---- */

typedef struct ckpt__persist ckpt__persist;
/** The manager's commit of a written checkpoint (ckpt__manager_commit_files), run on the background thread. */
typedef int (*ckpt__persist_commit_fn)(ckpt_manager *m, ckpt__manager_save *s);
/**
 * Copy the memory tier segment at `segment_prefix` (a TensorBundle) to
 * s->path on `vfs` on a background thread, then `commit(m, s)` there. The
 * segment's files are open when this returns. Takes the plan (*s zeroed);
 * on failure nothing started and *s is the caller's still.
 */
int ckpt__persist_start(ckpt__persist **out, ckpt_manager *m, ckpt__manager_save *s, const char *segment_prefix,
	ckpt_vfs *vfs, int fsync, ckpt__persist_commit_fn commit);
/** Wait for it, hand its plan and outcome back in *s (to apply), free it; its status, raised on this thread. */
int ckpt__persist_join(ckpt__persist *p, ckpt__manager_save *s);
/**
 * A multi-process checkpoint's piece: copy the segment's data shard(s) to
 * s->path's names as ckpt_bundle_merge_commit's temporaries
 * ("<name>.tempstate<token>") on a background thread that calls no MPI,
 * and read the piece's index entries ("<segment_prefix>.entries") now. No
 * index, no commit: the caller merges and commits on its own thread.
 */
int ckpt__persist_start_piece(ckpt__persist **out, ckpt__manager_save *s, const char *segment_prefix, ckpt_vfs *vfs,
	int fsync, uint64_t token);
/** 1 once the background thread has finished (a join then does not block). */
int ckpt__persist_done(const ckpt__persist *p);
/** A piece's index entries (borrowed, until the join). */
const void *ckpt__persist_entries(const ckpt__persist *p, size_t *len);
/**
 * Bytes of the segment files an unfinished copy holds open that are no
 * longer in their segment (removed: a newer memory step superseded it), so
 * that no listing of the tier sees them; 0 when done or NULL.
 */
uint64_t ckpt__persist_unlinked_bytes(const ckpt__persist *p);
/** Wait for the manager's background copy to storage, if any, and apply it (manager.c). */
int ckpt__manager_persist_finish(ckpt_manager *m);

#endif

/*
 * The memory tier (ckpt/tier.h) inside the library.
 *
 *   tier_segment.c   the layout on the node: directories, names, the
 *                    SEGMENT header, commit by rename, listing, removal
 *   tier_manager.c   what the manager calls: open with its options, route a
 *                    save to the tiers, save a step, restore the newest one
 *   tier_mw.c        the same for a multi-process checkpoint: each worker's
 *                    piece on its node and on F other nodes, a two-phase
 *                    commit (memory_async: the copies on a thread of the tier)
 *   tier_mw_restore.c  its restore from the surviving copies onto any count
 *   tier_slots.c     superseded data files kept mapped for the next save
 *
 * The segment functions know nothing of checkpoints: a segment is a
 * directory of files plus a header that checks them, written under a
 * temporary name and renamed. The manager glue writes the state into it
 * with the ordinary TensorBundle writer (a crc32c per tensor) and restores
 * it with the ordinary restore, through the POSIX VFS, never the manager's.
 */
#ifndef CKPT_TIER_INTERNAL_H
#define CKPT_TIER_INTERNAL_H

#include <dirent.h>
#include "internal.h"
#include "ckpt/checkpoint.h"

typedef struct ckpt__tier_slots ckpt__tier_slots; /* tier_slots.c */

/* ---- tier_segment.c ---- */

/** The bundle prefix inside a segment directory. */
#define CKPT__TIER_PREFIX "ckpt"

/** A job name is usable: non-empty, at most 200 bytes, no '/', not starting with '.'. */
int ckpt__tier_check_job(const char *job);
/** Create `dir` (and its parent) mode 0700 when missing; refuse one owned by another user. */
int ckpt__tier_prepare_dir(const char *base, const char *job_dir);
/** "<job_dir>/step-<N>.w<R>-of-<W>", caller frees. */
char *ckpt__tier_segment_path(const char *job_dir, int64_t step, int worker, int num_workers);
/** A fresh temporary directory for that segment (mode 0700, any old one of this name removed). */
int ckpt__tier_segment_begin(char **tmp_out, const char *job_dir, int64_t step, int worker, int num_workers);
/**
 * Seal a written temporary segment: files to mode 0600, the SEGMENT header
 * (sizes, the index's crc32c), then rename it to its final name (replacing
 * an older one of that name). `*bytes` = the bytes it holds. With
 * `crc_all`, every file's crc32c is in the header: taken from `known` for
 * the files it wrote (NULL: none), read back for the others.
 */
int ckpt__tier_segment_commit(uint64_t *bytes, const char *tmp, const char *final, const char *job, int64_t step,
	int worker, int num_workers, int crc_all, const ckpt__tier_slots *known);
/**
 * Check a committed segment against its header (names, sizes, the index's
 * crc32c; the tensors' own crc32c are checked by the restore that reads
 * them). CKPT_OK, or CKPT_EFORMAT / CKPT_ECHECKSUM / CKPT_ENOTFOUND naming what differs.
 */
int ckpt__tier_segment_check(uint64_t *bytes, const char *seg, const char *job, int64_t step, int worker,
	int num_workers);
/** Parse "step-<N>.w<R>-of-<W>"; 0 when `name` is not a segment's name. */
int ckpt__tier_parse_name(const char *name, int64_t *step, int *worker, int *num_workers);
/** Remove a directory tree (segments are one level deep; depth-limited). Missing is OK. */
/** All of `path` in a fresh buffer (*out, ckpt__free) of *len bytes, its size from stat; errors name it. */
int ckpt__tier_read_whole(void **out, uint64_t *len, const char *path);
/** Write n bytes at p as the whole file `path` (created 0600 or truncated); errors name it. */
int ckpt__tier_write_file(const char *path, const void *p, uint64_t n);
int ckpt__tier_remove_tree(const char *path);
/** The job directory, opened for listing; NULL with *rc CKPT_OK when it does not exist, else the error. */
DIR *ckpt__tier_open_job(const char *job_dir, int *rc);
/** Bytes free for unprivileged writers in the file system of `dir`. */
int ckpt__tier_free_bytes(uint64_t *out, const char *dir);
/**
 * The commit record of multi-process step N of W workers,
 * "<job_dir>/commit-<N>.of-<W>": written (renamed whole) by each node once
 * every worker's piece and its copies are stored; a step without one on
 * any surviving node is never restored.
 */
char *ckpt__tier_marker_path(const char *job_dir, int64_t step, int num_workers);
int ckpt__tier_parse_marker(const char *name, int64_t *step, int *num_workers);
int ckpt__tier_marker_write(const char *job_dir, const char *job, int64_t step, int num_workers);
/** CKPT_OK when the record is present and whole; CKPT_ENOTFOUND / CKPT_ECHECKSUM otherwise. */
int ckpt__tier_marker_check(const char *job_dir, const char *job, int64_t step, int num_workers);

/* ---- tier_slots.c: superseded data files kept mapped for the next save to write over ---- */

/**
 * The spares of worker R of W in `job_dir` (any a killed run of that rank left are removed). With
 * `crc_files`, each data file's crc32c is taken while it is written (ckpt__tier_slots_known).
 */
int ckpt__tier_slots_new(ckpt__tier_slots **out, const char *job_dir, int worker, int num_workers, int crc_files);
/** POSIX, except that data files opened for writing reuse a spare and are written by memcpy. Borrowed. */
ckpt_vfs *ckpt__tier_slots_vfs(ckpt__tier_slots *t);
/**
 * Before segment `seg` is removed: its data files become spares (renamed out of it); with `only_live`
 * only those this worker wrote (its node's other workers retire their own). NULL `t`: nothing.
 */
int ckpt__tier_slots_retire(ckpt__tier_slots *t, const char *seg, int only_live);
/**
 * A data file this worker wrote and still holds mapped: its bytes (borrowed, valid until the file is
 * retired or the slots freed) and size, and its crc32c when *crc_known. NULL when it is not one.
 */
const void *ckpt__tier_slots_known(const ckpt__tier_slots *t, const char *path, uint64_t *size, uint32_t *crc,
	int *crc_known);
/** Bytes the spares hold: space the next save reuses. */
uint64_t ckpt__tier_slots_spare_bytes(const ckpt__tier_slots *t);
/** Unmap and close everything; the spares are unlinked. NULL ok. */
void ckpt__tier_slots_free(ckpt__tier_slots *t);

/* ---- tier_manager.c ---- */

typedef struct ckpt__tier {
	int memory_every, persist_every;
	uint64_t limit;
	char *base;        /* the tier directory */
	char *job;
	char *job_dir;     /* base/job (multi-process: the node's directory/job) */
	int worker, num_workers;
	char *last_path;   /* bundle prefix of the last segment saved or restored */
	int named_base;    /* the base came from CKPT_TIER_DIR: not ours to remove */
	/* multi-process (tier_mw.c), known after the first collective save or restore */
	int copies;        /* memory_copies: F */
	int mw_known;
	int nnodes;
	int *node_of;      /* node index of each worker */
	int *leader;       /* the lowest worker of each node: it writes the node's copies and records */
	char *node_dir;    /* this node's tier directory */
	ckpt__tier_slots *slots; /* this worker's spares, made by its first save */
	int64_t pinned;    /* a step whose files a background copy reads: never reused as spares (-1: none) */
	/*
	 * Bytes a background copy to storage still holds open in segments already
	 * removed (this node's, multi-process): counted against memory_limit and
	 * the free space as if still held. Set by the manager before each save.
	 */
	uint64_t pending;
	/* memory_async (tier_mw.c): the copies to other nodes on a thread of the tier's */
	int async;
	ckpt_strategy *cs;       /* the checkpoint's strategy (borrowed), from the first multi-process save */
	ckpt_strategy *side;     /* its side channel, the copies' thread's (owned) */
	struct ckpt__tier_copy *copy; /* the step whose copies are in flight; NULL when none */
} ckpt__tier;

/** Which tiers a save of `number` goes to. */
enum { CKPT__TIER_TO_STORAGE = 1, CKPT__TIER_TO_MEMORY = 2 };

/**
 * The tier of a manager over `dir`, from its options (memory_every > 0);
 * *out = NULL without one. EINVAL for inconsistent options.
 */
int ckpt__tier_open(ckpt__tier **out, const ckpt_manager_options *o, const char *dir);
/**
 * The bytes of removed segments still held open by a background copy:
 * `bytes[w]` of each of `n` workers (n == 1: this process's); the tier
 * keeps the sum over the workers of this node in t->pending.
 */
void ckpt__tier_set_pending(ckpt__tier *t, const uint64_t *bytes, int n);
/** Where a save of `number` goes: CKPT__TIER_TO_* bits; STORAGE only without a tier. */
int ckpt__tier_route(const ckpt__tier *t, int64_t number);
/** Write the live state of `ck` as step `number` (save_counter = number) and commit it. */
int ckpt__tier_save(const char **path_out, ckpt__tier *t, ckpt_checkpoint *ck, int64_t number);
/**
 * Restore the newest complete step newer than `newer_than` into `ck`.
 * *restored = 0 (CKPT_OK) when there is none or none checks (each skipped
 * one is warned about through `warn`); the caller then uses the directory.
 */
int ckpt__tier_restore(ckpt_restore_status **status, int *restored, const char **path_out, ckpt__tier *t,
	ckpt_checkpoint *ck, int64_t newer_than, ckpt_warning_fn warn, void *warn_ctx);
/**
 * The same for a tool: the newest complete single-process step newer than
 * `newer_than` loaded (ckpt_checkpoint_load, options `o`, its VFS POSIX)
 * into a new checkpoint *out; *loaded = 0 when there is none.
 */
int ckpt__tier_load(ckpt_checkpoint **out, ckpt_restore_status **status, int *loaded, const char **path_out,
	ckpt__tier *t, const ckpt_checkpoint_options *o, int64_t newer_than, ckpt_warning_fn warn, void *warn_ctx);
/**
 * Close the tier: with `newest_persistent` >= the newest step it holds,
 * remove the job's segments (a clean finish); else keep them and warn.
 */
void ckpt__tier_close(ckpt__tier *t, int64_t newest_persistent, ckpt_warning_fn warn, void *warn_ctx);
/** Free the tier, touching no segment (a manager that failed to start). NULL ok. */
void ckpt__tier_free(ckpt__tier *t);
/** Step `step` is being read by a background copy (-1: none is): its files are unlinked, never reused. */
void ckpt__tier_pin(ckpt__tier *t, int64_t step);
/** A superseded segment of this worker goes: data files to the spares (unless pinned), the rest removed. */
int ckpt__tier_retire(ckpt__tier *t, const char *seg, int64_t step);
/** A save no tier takes: only save_counter advances to `number`. */
int ckpt__tier_skip(ckpt_checkpoint *ck, int64_t number);

/* ---- tier_mw.c: the same for a multi-process checkpoint under `cs` ---- */
/**
 * Step `number` of this worker into the memory tier, collectively. With memory_async and copies, it
 * returns before the copies are made and the step is committed at the next call (ckpt__tier_mw_settle),
 * unless `commit_now`.
 */
int ckpt__tier_mw_save(const char **path_out, ckpt__tier *t, ckpt_strategy *cs, ckpt_checkpoint *ck, int64_t number,
	int commit_now);
int ckpt__tier_mw_restore(ckpt_restore_status **status, int *restored, const char **path_out, ckpt__tier *t,
	ckpt_strategy *cs, ckpt_checkpoint *ck, int64_t newer_than, ckpt_warning_fn warn, void *warn_ctx);
/**
 * Collective. The step whose copies are in flight (memory_async) committed
 * once they are done, or removed when one failed (that failure returned).
 * CKPT_OK when none is.
 */
int ckpt__tier_mw_settle(ckpt__tier *t);
/** The copies' thread joined, its step left uncommitted, the side channel freed (ckpt__tier_free). */
void ckpt__tier_mw_stop(ckpt__tier *t);
/** The same for any tier: nothing to do but for a multi-process one with memory_async. NULL ok. */
int ckpt__tier_settle(ckpt__tier *t);
/** A clean finish removes this node's copies of the job (its leader does); else they stay, with a warning. */
void ckpt__tier_mw_close(ckpt__tier *t, int64_t newest_persistent, ckpt_warning_fn warn, void *warn_ctx);
void ckpt__tier_mw_free(ckpt__tier *t);

#endif

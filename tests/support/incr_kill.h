/*
 * kill -9 of a trainer saving incrementally in a loop (issue 33 point 7),
 * shared by tests/manager/test_incremental_kill.c (POSIX) and
 * tests/s3/test_s3_incremental.c (s3://). Declarations only (incr_kill.c).
 *
 * The state: mc_state's value (= the save's number) and vec, a frozen
 * `base` of base_rows 4 KiB rows (a fixed pattern, reused by every save),
 * and an embedding `emb` of emb_rows 4 KiB rows of which each save changes
 * one (row number % emb_rows, set to the number): the saves hard-link or
 * copy the base and the embedding's untouched blocks from the last one.
 */
#ifndef CKPT_INCR_KILL_H
#define CKPT_INCR_KILL_H

#include <stdint.h>
#include <sys/types.h>
#include "ckpt/ckpt.h"

/*
 * The child: restore the latest, then save forever (never returns). vfs:
 * the child's own, or NULL (POSIX). Once restored it creates `log`.ready;
 * after each save it appends the bytes the save reused (copied or linked)
 * to the local file `log`.
 */
void ik_save_forever(const char *dir, ckpt_vfs *vfs, int base_rows, int emb_rows, const char *log);

/*
 * The parent's side of the child's start: wait (up to 120 s, failing if the
 * child ends first) until the child has restored and is about to save
 * (it creates `log`.ready), then remove the mark for the next child.
 */
void ik_wait_started(const char *log, pid_t child, int kill_no);

/* The sum of what `log` holds. */
uint64_t ik_reused(const char *log);

/*
 * After a kill: `dir`'s latest valid checkpoint (if any) passes a full
 * verify (every byte against its crc32c), restores, and holds its own
 * number's state: value and vec, the base's pattern, the embedding's row
 * of that number. Returns the number (-1 when nothing is complete yet).
 */
int64_t ik_check_latest(const char *dir, ckpt_vfs *vfs, int base_rows, int emb_rows, int kill_no);

#endif

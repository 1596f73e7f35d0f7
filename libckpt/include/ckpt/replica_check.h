/*
 * Checking restored replicas in place: every copy of a fixed-size variable
 * is checksummed where it lies (crc32c) and compared with the checksum the
 * file stores, without a second copy of the state. Host copies are
 * checksummed in parallel, one (variable, replica) pair per task; copies in
 * the memory of a provider the CPU cannot address are copied back through
 * that provider (one pinned buffer, one queue per device), so the same call
 * checks host and device replicas.
 *
 *     static int first_bad_replica(const ckpt_variable *v, const ckpt_var_info *info)
 *     {
 *         ckpt_replica_check c = { v, info->crc32c, -1, 0 };
 *         int rc = ckpt_replica_check_crc32c(&c, 1);
 *         return rc < 0 ? rc : c.bad_replica;   // -1: every replica matches the file
 *     }
 */
#ifndef CKPT_REPLICA_CHECK_H
#define CKPT_REPLICA_CHECK_H

#include "ckpt/common.h"
#include "ckpt/variable.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One variable to check: its replicas must all have the crc32c `expected_crc32c`. */
typedef struct ckpt_replica_check {
	const ckpt_variable *variable; /**< in: a fixed-size variable (not a string); borrowed */
	uint32_t expected_crc32c;      /**< in: crc32c of its bytes, as the file stores it */
	int bad_replica;               /**< out: the lowest replica that is missing or differs, -1 when all match */
	/**
	 * in: the first replica to checksum; 0 checks them all (set it: an
	 * initializer without it leaves it 0). Copies below it are taken as
	 * known good: e.g. 1 after ckpt_checkpoint_load, whose copy 0 holds the
	 * bytes it verified against the file's checksum, checks only the
	 * fanned-out copies and saves a pass over the state.
	 */
	int first_replica;
} ckpt_replica_check;

/**
 * Checksum every replica copy of each checks[i].variable in place and set
 * checks[i].bad_replica. A copy the provider fails to copy back counts as
 * differing (bad_replica names it), so one unreadable device does not hide
 * the others' results. Call from one thread, outside ckpt_strategy_run.
 *
 * @param[in,out] checks the variables and expected checksums; bad_replica is written
 * @param n number of checks (0: nothing to do)
 * @return CKPT_OK when every check ran (a mismatch is a result, not an
 *         error); CKPT_EINVAL for a NULL variable or a string variable, or
 *         a first_replica outside [0, number of replicas],
 *         CKPT_ENOMEM; the message names the variable.
 */
CKPT_API int ckpt_replica_check_crc32c(ckpt_replica_check *checks, size_t n);

#ifdef __cplusplus
}
#endif

#endif

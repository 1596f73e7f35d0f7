/*
 * Multi-worker restore, all or nothing across workers (the core's
 * ckpt__run_commit drives it, strategy_impl.h): every worker stages what it
 * needs in memory and prepares every assignment; the outcome is agreed
 * (a failure on any worker, a read error included, fails every worker and
 * names it); only then does every worker assign, from memory.
 *
 * Who reads (ckpt_multi_worker_set_restore; CKPT_MPI_RESTORE, read on
 * worker 0 when the strategy is made):
 *  - "all" (default): every worker reads every value it needs itself;
 *  - "split": each worker reads a 1/W part of the staged bytes (whole
 *    entries, cut by their offset in the staging arena) and the parts are
 *    broadcast, part w from worker w. bench/mpi_bench.c measures both
 *    (bench/MPI_RESULTS.md).
 */
#include <stdlib.h>
#include <string.h>
#include "mw_internal.h"

int mw_restore_mode_from_env(void)
{
	const char *e = getenv("CKPT_MPI_RESTORE");
	return e && strcmp(e, "split") == 0 ? MW_RESTORE_SPLIT : MW_RESTORE_ALL;
}

int ckpt_multi_worker_set_restore(ckpt_strategy *s, ckpt_mw_restore mode)
{
	if (!s || ckpt_strategy_kind_of(s) != CKPT_STRATEGY_MULTI_WORKER)
		return ckpt_error_set(CKPT_EINVAL, NULL, NULL, -1, "ckpt_multi_worker_set_restore: not a multi-worker strategy");
	mw *m = mw_of(s);
	/* every worker takes part, even one passing a bad mode, so none waits */
	int mine = mode == CKPT_MW_RESTORE_SPLIT ? MW_RESTORE_SPLIT : MW_RESTORE_ALL, chosen = mine;
	int err = MPI_Bcast(&chosen, 1, MPI_INT, 0, m->comm);
	if (err != MPI_SUCCESS)
		return mw_mpi_fail(m, err, "MPI_Bcast");
	if (mode != CKPT_MW_RESTORE_READ_ALL && mode != CKPT_MW_RESTORE_SPLIT)
		return ckpt_error_set(CKPT_EINVAL, NULL, NULL, -1, "ckpt_multi_worker_set_restore: unknown mode %d", (int)mode);
	m->restore_mode = chosen;
	return CKPT_OK;
}

int mw_restore_parts(ckpt_strategy *s, int *part)
{
	mw *m = mw_of(s);
	if (m->restore_mode != MW_RESTORE_SPLIT || m->size == 1) {
		*part = 0;
		return 1;
	}
	*part = m->rank;
	return m->size;
}

int mw_share_staged(ckpt_strategy *s, int rc, size_t n, void *const *bases, const uint64_t *const *bounds)
{
	mw *m = mw_of(s);
	CKPT_TRY(mw_agree(s, rc));
	for (size_t k = 0; k < n; k++) {
		if (!bounds || !bounds[k] || !bases[k])
			continue;
		const uint64_t *b = bounds[k];
		for (int w = 0; w < m->size; w++) {
			unsigned char *p = (unsigned char *)bases[k] + b[w];
			for (uint64_t off = 0, len = b[w + 1] - b[w]; off < len;) {
				int c = len - off > (1u << 30) ? 1 << 30 : (int)(len - off);
				int err = MPI_Bcast(p + off, c, MPI_BYTE, w, m->comm);
				if (err != MPI_SUCCESS) {
					/* some workers may have assigned: the sequences no longer line up */
					m->broken = 1;
					mw_mpi_fail(m, err, "MPI_Bcast of a restore part");
					mw_copy(m->broken_msg, sizeof(m->broken_msg), mw_last_message());
					return CKPT_EIO;
				}
				off += (uint64_t)c;
			}
		}
	}
	return CKPT_OK;
}

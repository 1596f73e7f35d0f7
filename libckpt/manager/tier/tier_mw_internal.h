/*
 * Shared by the two halves of the multi-process memory tier: tier_mw.c (the
 * nodes, a piece on the wire, the save and its commit) and
 * tier_mw_restore.c (the restore from the surviving copies).
 */
#ifndef CKPT_TIER_MW_INTERNAL_H
#define CKPT_TIER_MW_INTERNAL_H
#include "model/strategy_impl.h"
#include "tier_internal.h"

#define ENTRIES "ckpt.entries"
#define FRAME_MAGIC 0x636b7074706365ull /* "ckptpce" */

/*
 * One piece on the wire: this header and its index entries in a first
 * exchange, then its data shard alone in a second one, sent straight from
 * the file's mapping (tier_slots.c), so that the sender copies nothing.
 */
typedef struct frame_hdr {
	uint64_t magic;
	int64_t step;
	int32_t piece, num_workers;
	uint64_t elen, dlen;
	uint32_t ecrc, dcrc;
} frame_hdr;

const ckpt__strategy_ops *ckpt__tier_mw_ops(ckpt_strategy *cs);
/** The strategy's agreement on `rc` over every worker. */
int ckpt__tier_mw_agree(ckpt_strategy *cs, int rc);
/** Worker `rank` is its node's leader (its lowest worker): it keeps the node's copies and records. */
int ckpt__tier_mw_is_leader(const ckpt__tier *t, int rank);
/** Collective. The nodes of the job's workers (CKPT_TIER_NODES or the host names), known from then on. */
int ckpt__tier_mw_learn_nodes(ckpt__tier *t, ckpt_strategy *cs);
/** "<dir>/ckpt.data-<piece>-of-<num_workers>", caller frees. */
char *ckpt__tier_mw_data_name(const char *dir, int piece, int num_workers);
/**
 * The frame of a committed segment's piece (header and index entries, *out
 * of *len bytes, ckpt__free) and its data shard (*data: the writer's mapping
 * when it holds one, else read into *owned, ckpt__free).
 */
int ckpt__tier_mw_frame_from_segment(void **out, uint64_t *len, const void **data, void **owned, const ckpt__tier *t,
	const char *seg, int64_t step, int piece, int num_workers);
#endif

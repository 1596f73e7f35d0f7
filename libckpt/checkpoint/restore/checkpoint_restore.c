/*
 * Restore into live objects (tf.train.Checkpoint.restore).
 *
 * Phases, so that a failed restore changes no live variable:
 *  1. match: walk the stored object graph from a node and the live tree from
 *     an object in step, by child names (TF's _CheckpointPosition); check
 *     dtype and shape of every matched value (EMISMATCH names the variable
 *     and both shapes); note children and slots that do not exist yet;
 *  2. verify: values that can be read in place (plain and mirrored
 *     variables, checksummed entries) have their checksums verified in the
 *     file; the others (sync-on-read, strings, partitioned entries) are
 *     staged in memory. Values kept for restore-on-create stay in the file
 *     (the session keeps the reader and, where the entry stores no crc32c,
 *     one it computes) and are read when their object is created;
 *  3. commit: every assignment is checked, then verified values are read
 *     straight into copy 0 and everything is fanned out to every replica
 *     (sync-on-read SUM is split by the variable layer); then the "pending"
 *     records that restore-on-create applies later are attached.
 * No copy of the whole state is made: peak memory is the live variables plus
 * what has to be staged. See ckpt__run_commit for the one failure that can
 * come after a variable was written (the file changing under the restore).
 * String values are read as owned string tensors (not into the arena); in
 * the commit their per-replica copies are built (ckpt__variable_stage_strings)
 * before anything is written and swapped in only after the fixed-size
 * fan-out succeeded, so a failure leaves string variables unchanged too.
 * TF1 name-based files have no object graph: they match live variables by
 * ckpt_variable_name, as TF2's name-based restore does.
 * Across processes (ckpt__run_set_collective) nothing is read in place:
 * every value is staged (this process's part of the bytes when the
 * strategy shares the reading), every assignment prepared, the outcome
 * agreed through the strategy's share_staged, and only then is anything
 * written, from memory: every process restores or none does.
 */
#include <stdlib.h>
#include <string.h>
#include "checkpoint/checkpoint_internal.h"
#include "checkpoint/partitioned_internal.h"
#include "model/strategy_impl.h"
#include "model/variable_internal.h"
#include "device/device_stream.h"

/* ================================================================== */
/* public entry point                                                   */
/* ================================================================== */

int ckpt_checkpoint_restore(ckpt_restore_status **status, ckpt_checkpoint *ck, const char *path)
{
	return ckpt__checkpoint_restore_via(status, ck, path, NULL);
}

int ckpt__checkpoint_restore_via(ckpt_restore_status **status, ckpt_checkpoint *ck, const char *path, ckpt_vfs *vfs)
{
	if (status)
		*status = NULL;
	if (!ck || !path)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_restore: NULL argument");
	CKPT_TRY(ckpt__check_not_replica("ckpt_checkpoint_restore"));
	ckpt_checkpoint_options io = ck->opts;
	if (vfs)
		io.vfs = vfs;
	/* multi-process: every process agrees before any assigns, so all restore or none does */
	ckpt_strategy *cs = ckpt__checkpoint_collective(ck);
	ckpt__session *s;
	int rc = ckpt__session_open(&s, path, &io);
	if (rc < 0)
		return cs ? ckpt__strategy_ops_of(cs)->agree(cs, rc) : rc;
	/* like TF, restoring a file that has a save_counter creates ours */
	const ckpt_object_graph *g = ckpt__session_graph(s);
	if (g) {
		const ckpt_og_node *root = &g->nodes[0];
		for (size_t c = 0; c < root->nchildren; c++) {
			if (strcmp(root->children[c].local_name, "save_counter") == 0 &&
				!ckpt__object_edge(ck->root, "save_counter")) {
				ckpt_variable *v;
				rc = ckpt_status_of(v = ckpt_checkpoint_save_counter_variable(ck));
				break;
			}
		}
	}
	ckpt__run *r = NULL;
	ckpt_restore_status *st = NULL;
	if (rc == CKPT_OK)
		rc = ckpt__run_new(&r, s);
	if (rc == CKPT_OK)
		rc = ckpt__run_match_root(r, ck->root);
	/* partitioned variables: each part's rows read (only those) and checked now, assigned at commit */
	ckpt__partitioned_restore *pr = NULL;
	rc = ckpt__partitioned_stage(&pr, ck, s, cs, rc);
	/* the status first: nothing may fail once values are assigned */
	if (rc == CKPT_OK && status)
		rc = ckpt__restore_status_new(&st, s, ck);
	if (cs)
		rc = ckpt__strategy_ops_of(cs)->agree(cs, rc);
	/* across processes the commit stages everything, agrees, and only then assigns: its status is agreed */
	if (rc == CKPT_OK && cs)
		ckpt__run_set_collective(r, cs);
	if (rc == CKPT_OK)
		rc = ckpt__run_commit(r);
	/* partitioned parts were read and checked before the agreement: assigning them cannot fail (device parts: only the provider can) */
	if (rc == CKPT_OK)
		rc = ckpt__partitioned_commit(pr);
	ckpt__partitioned_restore_free(pr);
	ckpt__run_discard(r);
	if (rc < 0) {
		if (st)
			ckpt_restore_status_expect_partial(st);
		ckpt_restore_status_free(st);
		st = NULL;
	}
	if (status)
		*status = st;
	ckpt__session_unref(s);
	return rc;
}

void ckpt_checkpoint_discard_pending(ckpt_checkpoint *ck)
{
	if (!ck)
		return;
	ckpt__plan p;
	if (ckpt__plan_build(&p, ck->root) < 0) {
		ckpt_error_clear();
		return;
	}
	for (size_t i = 0; i < p.n; i++) {
		ckpt__pending_clear(&p.nodes[i].obj->pending);
	}
	ckpt__plan_free(&p);
}

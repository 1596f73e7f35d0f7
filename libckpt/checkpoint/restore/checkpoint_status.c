/*
 * The restore status (TF's CheckpointLoadStatus): unmatched stored values,
 * live variables that got no value, assert_consumed / expect_partial.
 * Lists are recomputed on demand because restore-on-create keeps
 * consuming values after the restore call returned.
 */
#include <string.h>
#include "checkpoint/checkpoint_internal.h"

struct ckpt_restore_status {
	ckpt__session *s;
	ckpt_checkpoint *ck;       /* borrowed: the status is freed before the checkpoint */
	int expect_partial;
	size_t nunmatched;
	const char **unmatched;    /* borrowed from the session */
	ckpt_tracked_list *live;   /* keeps the unrestored keys alive */
	size_t nunrestored;
	const char **unrestored;
	int tier;                  /* ckpt_tier the values came from */
};

int ckpt__restore_status_new(ckpt_restore_status **out, ckpt__session *s, ckpt_checkpoint *ck)
{
	ckpt_restore_status *st = ckpt__calloc(1, sizeof(*st));
	if (!st)
		return CKPT_ENOMEM;
	ckpt__session_ref(s);
	st->s = s;
	st->ck = ck;
	st->tier = CKPT_TIER_STORAGE;
	*out = st;
	return CKPT_OK;
}

size_t ckpt_restore_status_num_unmatched(ckpt_restore_status *st)
{
	if (!st)
		return 0;
	ckpt__session *s = st->s;
	ckpt__free(st->unmatched);
	st->unmatched = NULL;
	st->nunmatched = 0;
	size_t n = ckpt__session_unconsumed(s, NULL);
	if (!n || !(st->unmatched = ckpt__calloc(n, sizeof(char *))))
		return 0;
	st->nunmatched = ckpt__session_unconsumed(s, st->unmatched);
	return st->nunmatched;
}

const char *ckpt_restore_status_unmatched(const ckpt_restore_status *st, size_t i)
{
	return st && i < st->nunmatched ? st->unmatched[i] : NULL;
}

size_t ckpt_restore_status_num_unrestored(ckpt_restore_status *st)
{
	if (!st)
		return 0;
	ckpt__free(st->unrestored);
	ckpt_tracked_list_free(st->live);
	st->unrestored = NULL;
	st->live = NULL;
	st->nunrestored = 0;
	if (ckpt_checkpoint_variables(&st->live, st->ck) < 0)
		return 0;
	ckpt__ptrmap got = { 0 };
	size_t nassigned;
	ckpt_variable *const *assigned = ckpt__session_assigned(st->s, &nassigned);
	for (size_t i = 0; i < nassigned; i++)
		if (ckpt__ptrmap_put(&got, assigned[i], 1) < 0)
			goto done;
	size_t n = ckpt_tracked_list_num_entries(st->live);
	if (!n || !(st->unrestored = ckpt__calloc(n, sizeof(char *))))
		goto done;
	for (size_t i = 0; i < n; i++) {
		const ckpt_tracked_variable *t = ckpt_tracked_list_get(st->live, i);
		if (ckpt__ptrmap_get(&got, t->variable) < 0)
			st->unrestored[st->nunrestored++] = t->key;
	}
done:
	ckpt__ptrmap_free(&got);
	return st->nunrestored;
}

const char *ckpt_restore_status_unrestored(const ckpt_restore_status *st, size_t i)
{
	return st && i < st->nunrestored ? st->unrestored[i] : NULL;
}

size_t ckpt_restore_status_num_restored(const ckpt_restore_status *st)
{
	size_t n = 0;
	if (st)
		ckpt__session_assigned(st->s, &n);
	return n;
}

const char *ckpt_restore_status_path(const ckpt_restore_status *st)
{
	return st ? ckpt__session_path(st->s) : NULL;
}

int ckpt_restore_status_assert_existing_objects_matched(ckpt_restore_status *st)
{
	/* NULL: nothing was restored (the manager's fresh start): nothing can have mismatched */
	if (!st)
		return CKPT_OK;
	size_t n = ckpt_restore_status_num_unrestored(st);
	if (n)
		return ckpt__fail(CKPT_ENOTFOUND, ckpt__session_path(st->s), st->unrestored[0], -1,
			"%zu live variable(s) received no value from the checkpoint (first: '%s')", n, st->unrestored[0]);
	return CKPT_OK;
}

int ckpt_restore_status_assert_consumed(ckpt_restore_status *st)
{
	if (!st)
		return CKPT_OK; /* nothing was restored: see ckpt_restore_status_assert_existing_objects_matched */
	size_t n = ckpt_restore_status_num_unmatched(st);
	if (n)
		return ckpt__fail(CKPT_ENOTFOUND, ckpt__session_path(st->s), st->unmatched[0], -1,
			"%zu checkpoint value(s) were not restored into any live variable (first: '%s'); "
			"create the objects they belong to, or use expect_partial",
			n, st->unmatched[0]);
	return ckpt_restore_status_assert_existing_objects_matched(st);
}

void ckpt_restore_status_expect_partial(ckpt_restore_status *st)
{
	if (st)
		st->expect_partial = 1;
}

void ckpt_restore_status_free(ckpt_restore_status *st)
{
	if (!st)
		return;
	if (!st->expect_partial) {
		size_t n = ckpt_restore_status_num_unmatched(st);
		void *warn_ctx;
		ckpt_warning_fn warn = ckpt__session_warning(st->s, &warn_ctx);
		if (n)
			ckpt__warn(warn, warn_ctx,
				"%zu value(s) in '%s' were not restored (first: '%s'); call "
				"ckpt_restore_status_expect_partial() if that is intended",
				n, ckpt__session_path(st->s), st->unmatched[0]);
	}
	ckpt__free(st->unmatched);
	ckpt__free(st->unrestored);
	ckpt_tracked_list_free(st->live);
	ckpt__session_unref(st->s);
	ckpt__free(st);
}

void ckpt__restore_status_set_tier(ckpt_restore_status *st, int tier)
{
	st->tier = tier;
}

int ckpt_restore_status_tier(const ckpt_restore_status *st)
{
	return st ? st->tier : CKPT_TIER_NONE;
}

/* A restore reads one checkpoint whole from one tier (all or nothing): the other tier served 0 bytes. */
uint64_t ckpt_restore_status_tier_bytes(const ckpt_restore_status *st, int tier)
{
	return st && tier == st->tier ? ckpt__session_stored_bytes(st->s) : 0;
}

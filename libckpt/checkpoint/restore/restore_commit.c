/*
 * Restore, phases 2 and 3 (see checkpoint_restore.c): stage or verify the
 * matched values, assign them all or none, and leave the restore-on-create
 * records (restore_pending.c) with the objects, restored later through the
 * ops defined here.
 */
#include <stdlib.h>
#include <string.h>
#include "restore_plan.h"
#include "checkpoint/partitioned_internal.h"
#include "model/strategy_impl.h"
#include "model/variable_internal.h"
#include "device/device_stream.h"
#include "restore_undo.h"

static const ckpt__pending_ops pending_ops; /* restore-on-create: at the end */

static int reserve_pending(ckpt__run *r)
{
	/* room for every record, so that attaching cannot fail after values were assigned */
	for (size_t i = 0; i < r->npc; i++)
		CKPT_TRY(ckpt__pending_reserve(&r->pc[i].obj->pending, r->npc, 0));
	for (size_t i = 0; i < r->nps; i++)
		CKPT_TRY(ckpt__pending_reserve(&r->ps[i].opt->pending, 0, r->nps));
	return CKPT_OK;
}

/*
 * A value read straight into copy 0 of its variable (no staging): the
 * variable is plain or mirrored, the entry has a stored crc32c and is not
 * partitioned, and no other variable of this run takes the same value.
 */
typedef struct direct {
	int rollback;        /* read without a verification pass first: mirrored (copy 1 still holds the old value), new, or single-pass */
	size_t val;
	size_t entry;        /* reader index */
	ckpt_variable *var;
	void *dst;           /* copy 0 */
	size_t n;
} direct;

/* Entries from this size on go one at a time: the reader spreads each over the threads. */
#define DIRECT_BIG ((size_t)8 << 20)
/* Below this many bytes in all, a thread team costs more than it saves. */
#define DIRECT_PARALLEL_MIN ((uint64_t)4 << 20)

static int direct_one(ckpt_reader *rd, const direct *d, int read)
{
	return read ? ckpt_reader_read_into(rd, d->entry, d->dst, d->n) : ckpt_reader_verify(rd, d->entry);
}

/*
 * Verify (read = 0) or read (read = 1) every direct value: big entries one
 * after the other, the rest spread over an OpenMP team. touched[i] is set
 * before value i is read. The error of the lowest failing index is raised.
 */
static int run_direct(ckpt_reader *rd, const direct *d, size_t n, int read, unsigned char *touched)
{
	/*
	 * Reads go to the backend as one batch first: a cold TensorBundle is read
	 * with several O_DIRECT requests in flight, object storage in few large
	 * ranged reads. Verification passes of local files stay entry by entry:
	 * they are followed by the reads, which want the page cache the
	 * verification filled; of object storage they are batched too (a GET per
	 * entry otherwise).
	 */
	ckpt__read_req *req = n ? ckpt__malloc(n * sizeof(*req)) : NULL;
	if (req) {
		for (size_t i = 0; i < n; i++)
			req[i] = (ckpt__read_req){ d[i].entry, read ? d[i].dst : NULL, read ? d[i].n : 0 };
		int rc = ckpt__reader_read_many(rd, req, n, read ? 0 : CKPT__READ_MANY_REMOTE_ONLY);
		ckpt__free(req);
		if (rc != CKPT__DECLINED) {
			if (touched)
				memset(touched, 1, n);
			return rc;
		}
	} else if (n) {
		ckpt_error_clear(); /* no room for the batch: entry by entry */
	}
	uint64_t small = 0;
	for (size_t i = 0; i < n; i++) {
		if (d[i].n < DIRECT_BIG) {
			small += d[i].n;
			continue;
		}
		if (touched)
			touched[i] = 1;
		CKPT_TRY(direct_one(rd, &d[i], read));
	}
	ckpt__error_slot slot = { 0 };
	long first = -1;
	int err = CKPT_OK, failed = 0;
	long nn = (long)n;
	#pragma omp parallel for schedule(dynamic, 8) if (small >= DIRECT_PARALLEL_MIN)
	for (long i = 0; i < nn; i++) {
		int stop;
		#pragma omp atomic read
		stop = failed;
		if (stop || d[i].n >= DIRECT_BIG)
			continue;
		if (touched)
			touched[i] = 1;
		int e = direct_one(rd, &d[i], read);
		if (e < 0) {
			#pragma omp critical(ckpt_restore_direct)
			{
				if (first < 0 || i < first) {
					first = i;
					err = e;
					ckpt__error_capture(&slot);
				}
				#pragma omp atomic write
				failed = 1;
			}
		}
	}
	if (first >= 0) {
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	return err;
}

/*
 * A direct read failed after every check had passed (the file changed while
 * it was read, or the device failed): put mirrored copies 0 back from copy 1;
 * a plain variable has no second copy, so say which ones may be partial.
 */
static void undo_direct(ckpt__session *s, const direct *d, size_t n, const unsigned char *touched)
{
	ckpt__error_slot slot = { 0 };
	ckpt__error_capture(&slot);
	size_t lost = 0;
	const char *first = NULL;
	for (size_t i = 0; i < n; i++) {
		if (touched[i] && !ckpt__variable_rollback_primary(d[i].var)) {
			if (!lost++)
				first = ckpt_variable_name(d[i].var);
		}
	}
	void *warn_ctx;
	ckpt_warning_fn warn = ckpt__session_warning(s, &warn_ctx);
	if (lost)
		ckpt__warn(warn, warn_ctx,
			"restore from %s failed after its checksums were verified (the file changed or the device "
			"failed while it was read): %zu plain variable(s), first '%s', may hold partial values",
			ckpt__session_path(s), lost, first);
	ckpt__error_raise(&slot);
	ckpt__error_slot_clear(&slot);
}

static int cmp_rollback_first(const void *a, const void *b)
{
	const direct *x = a, *y = b;
	if (x->rollback != y->rollback)
		return y->rollback - x->rollback;
	return x->val < y->val ? -1 : x->val > y->val; /* keep file order within each group */
}

/* Whether value `val` of this run can be read in place into `var`. */
static int can_read_direct(const ckpt__session *s, const ckpt__value *v, ckpt_variable *var, unsigned uses)
{
	ckpt_reader *rd = ckpt__session_reader(s);
	if (!rd || v->t || v->initialized || uses != 1 || v->dtype == CKPT_DT_STRING ||
	    !ckpt__variable_direct_restorable(var))
		return 0;
	const ckpt_var_info *vi = ckpt_reader_var(rd, v->reader_index);
	return vi && vi->has_crc32c && vi->nslices == 0;
}

/*
 * Whether value `val` goes to a device variable through the pinned ring
 * (device_stream.h): as can_read_direct, for copies only the provider may
 * touch. Sync-on-read ones are staged (their copies differ: no rollback).
 */
static int can_stream(const ckpt__session *s, const ckpt__value *v, ckpt_variable *var, unsigned uses)
{
	ckpt_reader *rd = ckpt__session_reader(s);
	if (!rd || v->t || v->initialized || uses != 1 || v->dtype == CKPT_DT_STRING ||
	    !ckpt__variable_on_device(var) || ckpt_variable_kind(var) == CKPT_VAR_SYNC_ON_READ ||
	    ckpt_variable_nbytes(var) == 0)
		return 0;
	const ckpt_var_info *vi = ckpt_reader_var(rd, v->reader_index);
	return vi && vi->has_crc32c && vi->nslices == 0;
}

/* Stream every value of `d` into copy 0 of its device variable; touched[i] is set before value i is written. */
static int run_stream(ckpt_reader *rd, const direct *d, size_t n, unsigned char *touched)
{
	ckpt__ring ring = { 0 };
	for (size_t i = 0; i < n; i++)
		if (d[i].n > ring.want)
			ring.want = d[i].n;
	int rc = CKPT_OK;
	for (size_t i = 0; i < n && rc == CKPT_OK; i++) {
		touched[i] = 1;
		rc = ckpt__ring_stream(&ring, ckpt__strategy_mem(ckpt_variable_strategy(d[i].var)), rd, d[i].entry, d[i].dst,
			d[i].n, ckpt_variable_name(d[i].var));
	}
	ckpt__ring_free(&ring);
	return rc;
}

/*
 * One commit's scratch: what each step leaves for the next. commit_begin
 * allocates it, commit_free_scratch frees all of it but the keys, which
 * commit_attach hands to the objects or commit_abandon frees.
 */
typedef struct commit {
	ckpt__run *r;
	ckpt__session *s;
	size_t nvals;
	unsigned char *uses;                  /* per value: how many assignments take it (capped at 2) */
	unsigned char *want_now, *want_later; /* per value: staged for this commit / for restore-on-create */
	unsigned char *touched, *is_direct;   /* per assignment */
	direct *dir;                          /* read in place into copy 0; the nrb rollbackable ones first */
	size_t ndir, nrb;
	direct *str;                          /* device variables: streamed through the pinned ring into copy 0, like dir */
	unsigned char *str_touched;
	size_t nstream, nsrb;
	char **keys;                          /* per assignment: its stored key (the objects' source_key) */
	ckpt_variable **vars;                 /* the assign plan's writes */
	const void **srcs;
	size_t *sizes;
	size_t nwrite;
	ckpt_variable **svars;                /* string values: per-replica copies built now, swapped in after the fan-out */
	void **sstaged;
	size_t nstr;
	int parts, part;                      /* across processes: this process's part of the reading */
	uint64_t *bnow, *blater;              /* and where each part lies in the arenas */
	void *now, *later;                    /* the arenas: this commit's values, and those kept for later */
	ckpt__assign_plan *plan;
	ckpt__device_undo undo;               /* the old values of the device variables written (not for load) */
} commit;

/* Allocate the scratch of a commit of `r`: CKPT_OK or CKPT_ENOMEM (then the steps are skipped, the rest is NULL). */
static int commit_begin(commit *c, ckpt__run *r)
{
	memset(c, 0, sizeof(*c));
	c->r = r;
	c->s = r->s;
	c->nvals = ckpt__session_nvals(c->s);
	size_t nv = c->nvals ? c->nvals : 1, na1 = r->nasg ? r->nasg : 1;
	c->uses = ckpt__calloc(nv, 1);
	c->want_now = ckpt__calloc(nv, 1);
	c->want_later = ckpt__calloc(nv, 1);
	c->touched = ckpt__calloc(na1, 1);
	c->is_direct = ckpt__calloc(na1, 1);
	c->dir = ckpt__calloc(na1, sizeof(*c->dir));
	c->str = ckpt__calloc(na1, sizeof(*c->str));
	c->str_touched = ckpt__calloc(na1, 1);
	c->keys = ckpt__calloc(na1, sizeof(char *));
	c->vars = ckpt__calloc(na1, sizeof(*c->vars));
	c->srcs = ckpt__calloc(na1, sizeof(*c->srcs));
	c->sizes = ckpt__calloc(na1, sizeof(*c->sizes));
	c->svars = ckpt__calloc(na1, sizeof(*c->svars));
	c->sstaged = ckpt__calloc(na1, sizeof(*c->sstaged));
	int arena_rc = ckpt__session_reader(c->s) ? ckpt__session_reserve_arena(c->s) : CKPT_OK;
	c->parts = 1;
	if (r->cs && ckpt__strategy_ops_of(r->cs)->restore_parts)
		c->parts = ckpt__strategy_ops_of(r->cs)->restore_parts(r->cs, &c->part);
	if (c->parts > 1) {
		c->bnow = ckpt__calloc((size_t)c->parts + 1, sizeof(*c->bnow));
		c->blater = ckpt__calloc((size_t)c->parts + 1, sizeof(*c->blater));
	}
	return (!c->uses || !c->want_now || !c->want_later || !c->touched || !c->is_direct || !c->dir || !c->str ||
		!c->str_touched || !c->keys || !c->vars || !c->srcs || !c->sizes || !c->svars || !c->sstaged ||
		arena_rc < 0 || (c->parts > 1 && (!c->bnow || !c->blater))) ? CKPT_ENOMEM : CKPT_OK;
}

/* Step 1a: which values are read in place (dir), streamed to a device (str) or staged now (want_now). */
static void commit_classify(commit *c)
{
	const ckpt__run *r = c->r;
	for (size_t i = 0; i < r->nasg; i++)
		if (c->uses[r->asg[i].val] < 2)
			c->uses[r->asg[i].val]++;
	for (size_t i = 0; i < r->nasg; i++) {
		const assignment *a = &r->asg[i];
		const ckpt__value *v = ckpt__session_value(c->s, a->val);
		if (!r->cs && can_read_direct(c->s, v, a->var, c->uses[a->val])) {
			/* no verification pass for new variables, mirrored ones (copy 1 rolls back) and single-pass restores */
			c->is_direct[i] = 1;
			c->dir[c->ndir++] = (direct){ r->fresh || ckpt_variable_num_replicas(a->var) > 1 ||
				ckpt__session_single_pass(c->s), a->val,
				v->reader_index, a->var, ckpt__variable_data(a->var, 0), (size_t)ckpt_variable_nbytes(a->var) };
		} else if (!r->cs && can_stream(c->s, v, a->var, c->uses[a->val])) {
			/* rollback: the old value is kept on the device first (restore_undo.h); load's are new */
			c->is_direct[i] = 1;
			c->str[c->nstream++] = (direct){ 1, a->val,
				v->reader_index, a->var, ckpt__variable_data(a->var, 0), (size_t)ckpt_variable_nbytes(a->var) };
		} else if (!v->t && ckpt__session_reader(c->s))
			c->want_now[a->val] = 1;
	}
}

/*
 * Step 1b: stage this commit's values (temporary). Those restore-on-create
 * needs later stay in the file (the session keeps the reader): only a
 * crc32c is taken of the ones whose entry stores none, and strings, small
 * and variable-length, are staged and kept, as every later value is when
 * the source goes away after the restore (ckpt__session_hold_deferred).
 */
static int commit_stage_values(commit *c)
{
	for (size_t i = 0; i < c->nvals; i++) {
		const ckpt__value *v = ckpt__session_value(c->s, i);
		c->want_later[i] = !c->want_now[i] && !v->t && !v->consumed;
	}
	for (size_t i = 0; i < c->ndir; i++)
		c->want_later[c->dir[i].val] = 0;
	for (size_t i = 0; i < c->nstream; i++)
		c->want_later[c->str[i].val] = 0;
	int rc = ckpt__session_stage(c->s, c->want_now, &c->now, c->parts, c->part, c->bnow);
	if (rc == CKPT_OK)
		ckpt__session_mark_temp(c->s, c->want_now);
	int hold = ckpt__session_holds_deferred(c->s); /* a source that goes away: every later value staged */
	if (rc == CKPT_OK && !hold)
		rc = ckpt__session_defer(c->s, c->want_later);
	for (size_t i = 0; i < c->nvals && !hold; i++)
		if (c->want_later[i] && ckpt__session_value(c->s, i)->dtype != CKPT_DT_STRING)
			c->want_later[i] = 0;
	if (rc == CKPT_OK)
		rc = ckpt__session_stage(c->s, c->want_later, &c->later, c->parts, c->part, c->blater);
	return rc;
}

/* Step 1c (after `rc`, step 1b's status): order the in-place values and verify in the file those without rollback. */
static int commit_verify(commit *c, int rc)
{
	/* rollbackable values first; only the others need a verification pass */
	int src = ckpt__sort(c->dir, c->ndir, sizeof(*c->dir), cmp_rollback_first); /* nearly sorted: built in value order */
	if (rc == CKPT_OK)
		rc = src;
	while (c->nrb < c->ndir && c->dir[c->nrb].rollback)
		c->nrb++;
	if (rc == CKPT_OK)
		rc = run_direct(ckpt__session_reader(c->s), c->dir + c->nrb, c->ndir - c->nrb, 0, NULL);
	/* device values without a second copy to roll back from are verified in the file first, too */
	int ssrc = ckpt__sort(c->str, c->nstream, sizeof(*c->str), cmp_rollback_first);
	if (rc == CKPT_OK)
		rc = ssrc;
	while (c->nsrb < c->nstream && c->str[c->nsrb].rollback)
		c->nsrb++;
	if (rc == CKPT_OK)
		rc = run_direct(ckpt__session_reader(c->s), c->str + c->nsrb, c->nstream - c->nsrb, 0, NULL);
	return rc;
}

/* Step 1: stage and verify. */
static int commit_stage(commit *c)
{
	commit_classify(c);
	if (!ckpt__session_reader(c->s))
		return CKPT_OK;
	return commit_verify(c, commit_stage_values(c));
}

/* Step 2: check every assignment and allocate what the commit needs (the keys, the strings, the assign plan). */
static int commit_prepare(commit *c)
{
	const ckpt__run *r = c->r;
	int rc = CKPT_OK;
	for (size_t i = 0; i < r->nasg && rc == CKPT_OK; i++) {
		const assignment *a = &r->asg[i];
		const ckpt__value *v = ckpt__session_value(c->s, a->val);
		const ckpt_tensor *t = v->t;
		if (!(c->keys[i] = ckpt__strdup(v->key)))
			rc = CKPT_ENOMEM;
		else if (c->is_direct[i]) {
			c->vars[c->nwrite] = a->var;
			c->srcs[c->nwrite] = ckpt__variable_data(a->var, 0);
			c->sizes[c->nwrite] = (size_t)ckpt_variable_nbytes(a->var);
			c->nwrite++;
		} else if (!t)
			rc = ckpt__fail(CKPT_ERROR, ckpt__session_path(c->s), v->key, -1, "value was released before use");
		else if (v->initialized)
			continue; /* load already created the variable with this value */
		else if (t->dtype == CKPT_DT_STRING) {
			rc = ckpt__variable_stage_strings(a->var, t, &c->sstaged[c->nstr]);
			if (rc == CKPT_OK)
				c->svars[c->nstr++] = a->var;
			else
				ckpt__error_annotate(ckpt__session_path(c->s), v->key);
		} else {
			c->vars[c->nwrite] = a->var;
			c->srcs[c->nwrite] = t->data;
			c->sizes[c->nwrite] = (size_t)t->nbytes;
			c->nwrite++;
		}
	}
	if (rc == CKPT_OK)
		rc = reserve_pending(c->r);
	if (rc == CKPT_OK)
		rc = ckpt__assign_plan_new(&c->plan, c->vars, c->srcs, c->sizes, c->nwrite);
	/* the last step that may fail without changing anything: keep the device variables' old values */
	if (rc == CKPT_OK && !r->fresh)
		rc = ckpt__device_undo_keep(&c->undo, c->vars, c->nwrite);
	return rc;
}

static void undo_touch(void *ctx, const ckpt_variable *v)
{
	ckpt__device_undo_touch(ctx, v);
}

/* A failed step after the device variables' old values were kept: put them back (the error is kept). */
static void undo_device(commit *c)
{
	const char *first = NULL;
	size_t lost = ckpt__device_undo_rollback(&c->undo, &first);
	void *warn_ctx;
	ckpt_warning_fn warn = ckpt__session_warning(c->s, &warn_ctx);
	if (lost)
		ckpt__warn(warn, warn_ctx,
			"restore from %s failed and %zu device variable(s), first '%s', could not be put back (the memory "
			"provider failed again): their replicas may hold partial values", ckpt__session_path(c->s), lost,
			first);
}

/*
 * Step 3: every device variable first, all of it: the streamed values into
 * replica 0 (checksums verified as they are read), then the staged ones and
 * the fan-out to the other replicas; a failure puts every device variable
 * written back from the old values step 2 kept, and no host variable has
 * been touched yet. Then the host values read in place: mirrored ones
 * first, so a bad one is undone before any plain variable is written.
 */
static int commit_read_in_place(commit *c)
{
	const ckpt__run *r = c->r;
	ckpt__session *s = c->s;
	int rc = CKPT_OK;
	if (c->nstream) {
		rc = run_stream(ckpt__session_reader(s), c->str, c->nstream, c->str_touched);
		for (size_t i = 0; i < c->nstream; i++)
			if (c->str_touched[i])
				ckpt__device_undo_touch(&c->undo, c->str[i].var);
	}
	if (rc == CKPT_OK)
		rc = ckpt__assign_plan_run_device(c->plan, undo_touch, &c->undo);
	if (rc < 0) {
		if (!r->fresh)
			undo_device(c);
		return rc;
	}
	if (c->ndir) {
		rc = run_direct(ckpt__session_reader(s), c->dir, c->nrb, 1, c->touched);
		if (rc == CKPT_OK)
			rc = run_direct(ckpt__session_reader(s), c->dir + c->nrb, c->ndir - c->nrb, 1, c->touched + c->nrb);
		if (rc < 0 && !r->fresh) {
			undo_direct(s, c->dir, c->ndir, c->touched);
			undo_device(c);
		}
	}
	return rc;
}

/*
 * Step 4 (after `rc`, the steps' status): fan out the host variables and
 * swap in strings, which cannot fail (device variables are done); keep the
 * strings staged for later, or drop them.
 */
static int commit_fan_out(commit *c, int rc)
{
	ckpt__session *s = c->s;
	if (rc == CKPT_OK)
		rc = ckpt__assign_plan_run(c->plan);
	ckpt__assign_plan_free(c->plan);
	c->plan = NULL;
	for (size_t i = 0; i < c->nstr; i++) {
		if (rc == CKPT_OK)
			ckpt__variable_commit_strings(c->svars[i], c->sstaged[i]);
		else
			ckpt__variable_discard_strings(c->svars[i], c->sstaged[i]);
	}
	if (rc == CKPT_OK && ckpt__session_reader(s)) {
		if (c->later)
			ckpt__session_keep_arena(s, c->later);
		c->later = NULL;
	}
	if (c->later)
		ckpt__session_release(s, c->want_later, c->later);
	c->later = NULL;
	return rc;
}

/* The scratch but the keys and the temporary arena. */
static void commit_free_scratch(commit *c)
{
	ckpt__free(c->uses);
	ckpt__free(c->want_now);
	ckpt__free(c->want_later);
	ckpt__free(c->touched);
	ckpt__free(c->is_direct);
	ckpt__free(c->dir);
	ckpt__free(c->str);
	ckpt__free(c->str_touched);
	ckpt__free(c->vars);
	ckpt__free(c->srcs);
	ckpt__free(c->sizes);
	ckpt__free(c->svars);
	ckpt__free(c->sstaged);
	ckpt__free(c->bnow);
	ckpt__free(c->blater);
	ckpt__device_undo_free(&c->undo);
}

/* A failed commit: free the keys and drop this commit's staged values. */
static void commit_abandon(commit *c)
{
	for (size_t i = 0; c->keys && i < c->r->nasg; i++)
		ckpt__free(c->keys[i]);
	ckpt__free(c->keys);
	ckpt__session_release_temp(c->s, c->now);
}

/* A commit that succeeded: report the keys, consume the values, attach the pending records. Cannot fail. */
static void commit_attach(commit *c)
{
	ckpt__run *r = c->r;
	ckpt__session *s = c->s;
	for (size_t i = 0; i < r->nasg; i++) {
		assignment *a = &r->asg[i];
		ckpt__session_push_assigned(s, a->var);
		/* where the key is reported: the variable node, or the attribute of any other object */
		char **sk = a->owner->is_var_node ? &a->owner->source_key : NULL;
		for (size_t k = 0; !sk && k < a->owner->nattrs; k++)
			if (a->owner->attrs[k].var == a->var)
				sk = &a->owner->attrs[k].source_key;
		if (c->keys[i] && sk) {
			ckpt__free(*sk);
			*sk = c->keys[i];
			c->keys[i] = NULL;
		}
	}
	for (size_t i = 0; i < r->nasg; i++)
		ckpt__session_consume(s, r->asg[i].val, r->asg[i].var);
	/* values still waiting for their objects keep the reader open (file, offset, length, crc32c; no bytes) */
	ckpt__session_close_if_done(s);
	ckpt__free(c->keys);
	ckpt__session_release_temp(s, c->now);
	for (size_t i = 0; i < r->npc; i++)
		ckpt__pending_push_child(&r->pc[i].obj->pending, r->pc[i].name, s, r->pc[i].node, &pending_ops);
	for (size_t i = 0; i < r->nps; i++)
		ckpt__pending_push_slot(&r->ps[i].opt->pending, s, r->ps[i].orig, r->ps[i].slot_name, r->ps[i].slot_node,
			&pending_ops);
	r->npc = r->nps = 0; /* names now belong to the objects */
}

/*
 * Commit one run, all or nothing:
 *  1. stage what cannot be read in place (sync-on-read, strings, partitioned
 *     or unchecksummed entries, values shared by several variables) and what
 *     restore-on-create needs later; verify in the file the checksums of the
 *     plain variables' values (bounded buffers, no copy of the state);
 *  2. check every assignment and allocate everything the commit needs,
 *     and keep the old values of the device variables it writes;
 *  3. write every device variable (streamed into copy 0, checksums verified
 *     on the way, then fanned out; a provider failure or a bad checksum puts
 *     all of them back from step 2's copies); then read host values straight
 *     into copy 0: mirrored variables first (a failure puts copy 0 back from
 *     copy 1, and the device variables back too), then the plain ones,
 *     verified in step 1;
 *  4. fan out the host variables, swap in strings, attach pending records.
 * Steps 1–2 change nothing; a failure in step 3 is undone (for plain host
 * variables it needs the file to change under us after step 1, and for
 * device ones a second provider failure while they are put back: both
 * warn); step 4 cannot fail. Across processes there is no reading in place:
 * between 2 and 3 the processes agree (and share staged parts).
 */
int ckpt__run_commit(ckpt__run *r)
{
	if (ckpt__session_reserve_assigned(r->s, r->nasg) < 0)
		return r->cs ? ckpt__strategy_ops_of(r->cs)->share_staged(r->cs, CKPT_ENOMEM, 0, NULL, NULL) : CKPT_ENOMEM;
	commit c;
	int rc = commit_begin(&c, r);
	if (rc == CKPT_OK)
		rc = commit_stage(&c);
	if (rc == CKPT_OK)
		rc = commit_prepare(&c);
	/* across processes: everything staged and prepared everywhere, or nobody assigns */
	if (r->cs) {
		void *bases[2] = { c.now, c.later };
		const uint64_t *bounds[2] = { c.bnow, c.blater };
		rc = ckpt__strategy_ops_of(r->cs)->share_staged(r->cs, rc, 2, bases, bounds);
	}
	if (rc == CKPT_OK)
		rc = commit_read_in_place(&c);
	rc = commit_fan_out(&c, rc);
	commit_free_scratch(&c);
	if (rc < 0) {
		commit_abandon(&c);
		return rc;
	}
	commit_attach(&c);
	return CKPT_OK;
}

/* ================================================================== */
/* restore-on-create                                                    */
/* ================================================================== */

/*
 * A deferred value read now failed its checksum: the file changed after the
 * restore that deferred it (rewritten in place; replaced, on object
 * storage). Say so, keeping the file, the key and the offset.
 */
static int changed_since_restore(ckpt__session *s, int rc)
{
	if (rc != CKPT_ECHECKSUM)
		return rc;
	const ckpt_error *e = ckpt_error_last();
	char *msg = ckpt__strdup(e->message ? e->message : "");
	char *path = ckpt__strdup(e->path ? e->path : ckpt__session_path(s));
	char *var = e->variable ? ckpt__strdup(e->variable) : NULL;
	int64_t off = e->offset;
	if (msg && path)
		rc = ckpt__fail(rc, path, var, off, "restore on create of '%s' from %s: %s (the file changed after "
			"ckpt_checkpoint_restore; it is read when the object is created)", var ? var : "?",
			ckpt__session_path(s), msg);
	ckpt__free(msg);
	ckpt__free(path);
	ckpt__free(var);
	return rc;
}

/* A pending child, now created: match its stored node against it and commit. */
static int restore_pending_child(ckpt__session *s, int node, ckpt_object *child, int fresh)
{
	ckpt__run *r;
	CKPT_TRY(ckpt__run_new(&r, s));
	if (fresh)
		ckpt__run_set_fresh(r);
	int rc = ckpt__run_match_node(r, node, child);
	if (rc == CKPT_OK)
		rc = ckpt__run_commit(r);
	ckpt__run_discard(r);
	return changed_since_restore(s, rc);
}

/* A pending slot, now created: match the stored slot variable's values against its node and commit. */
static int restore_pending_slot(ckpt__session *s, int slot_node, ckpt_object *node, int fresh)
{
	ckpt__run *r;
	CKPT_TRY(ckpt__run_new(&r, s));
	if (fresh)
		ckpt__run_set_fresh(r);
	int rc = ckpt__run_match_slot(r, slot_node, node);
	if (rc == CKPT_OK)
		rc = ckpt__run_commit(r);
	ckpt__run_discard(r);
	return changed_since_restore(s, rc);
}

static const ckpt__pending_ops pending_ops = { restore_pending_child, restore_pending_slot };


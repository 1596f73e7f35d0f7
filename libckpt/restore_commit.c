/*
 * Restore, phases 2 and 3 (see checkpoint_restore.c): stage or verify the
 * matched values, assign them all or none, and leave the restore-on-create
 * records (restore_pending.c) with the objects, restored later through the
 * ops defined here.
 */
#include <stdlib.h>
#include <string.h>
#include "restore_plan.h"
#include "partitioned_internal.h"
#include "strategy_impl.h"
#include "variable_internal.h"
#include "device_stream.h"

static const ckpt__pending_ops pending_ops; /* restore-on-create: at the end */

static int stage(ckpt__session *s, const unsigned char *want, void **arena, int parts, int part, uint64_t *bounds);

int ckpt__session_stage_all(ckpt__session *s)
{
	if (!s->reader)
		return CKPT_OK;
	unsigned char *want = ckpt__calloc(s->nvals ? s->nvals : 1, 1);
	void **na = ckpt__realloc(s->arenas, (s->narenas + 1) * sizeof(*na));
	int rc = (!want || !na) ? CKPT_ENOMEM : CKPT_OK;
	if (na)
		s->arenas = na;
	for (size_t i = 0; i < s->nvals && rc == CKPT_OK; i++)
		want[i] = !s->vals[i].t && !s->vals[i].consumed;
	void *arena = NULL;
	if (rc == CKPT_OK)
		rc = stage(s, want, &arena, 1, 0, NULL);
	if (rc == CKPT_OK) {
		if (arena)
			s->arenas[s->narenas++] = arena;
		ckpt_reader_free(s->reader);
		s->reader = NULL;
	}
	ckpt__free(want);
	return rc;
}

/* Drop the tensors staged in the temporary arena (values of this run) and the arena itself. */
static void release_staged(ckpt__session *s, void *arena)
{
	for (size_t i = 0; i < s->nvals; i++) {
		ckpt__value *v = &s->vals[i];
		if (v->temp) {
			ckpt_tensor_free(v->t);
			v->t = NULL;
			v->temp = 0;
		}
	}
	ckpt__buffer_free(arena);
}

/* Drop the values staged for later (restore-on-create) when the commit failed. */
static void release_later(ckpt__session *s, const unsigned char *want, void *arena)
{
	for (size_t i = 0; i < s->nvals; i++) {
		if (want[i]) {
			ckpt_tensor_free(s->vals[i].t);
			s->vals[i].t = NULL;
		}
	}
	ckpt__buffer_free(arena);
}

/*
 * Read the values flagged in `want` into one huge-page arena (fresh 4 KiB
 * pages cost more than the read itself), straight from the reader with
 * checksums verified. The tensors wrap the arena; *arena is freed by the
 * caller once they are released.
 * parts > 1 (a restore whose processes share the reading): the arena's
 * bytes are cut into `parts` equal ranges, each value belongs to the range
 * its first byte is in, and only the values of range `part` are read here
 * (strings, outside the arena, always are); bounds[0..parts] receives where
 * each part's values begin in the arena (bounds[parts]: its size), for the
 * strategy to share them.
 */
/*
 * stage()'s reads as one batch, where the backend has a batched path (object
 * storage: few large ranged reads instead of one per value): the fixed-size,
 * whole entries of this process's part go to their places in the arena
 * (laid out as stage() lays them). *batched (caller frees) flags the values
 * read, NULL when the backend declined; the others are read one by one.
 */
static int stage_batch(ckpt__session *s, const unsigned char *want, unsigned char *base, uint64_t chunk, int part,
	unsigned char **batched)
{
	*batched = NULL;
	ckpt__read_req *req = ckpt__malloc((s->nvals ? s->nvals : 1) * sizeof(*req));
	unsigned char *in = ckpt__calloc(s->nvals ? s->nvals : 1, 1);
	size_t n = 0;
	uint64_t off = 0;
	for (size_t i = 0; req && in && i < s->nvals; i++) {
		const ckpt__value *v = &s->vals[i];
		if (!want[i] || v->dtype == CKPT_DT_STRING)
			continue;
		uint64_t nb;
		ckpt_shape sh;
		ckpt__cshape_expand(&v->shape, &sh);
		ckpt_shape_nbytes(&sh, v->dtype, &nb);
		off = (off + 63) & ~(uint64_t)63;
		int owner = chunk ? (int)(off / chunk) : part;
		const ckpt_var_info *vi = ckpt_reader_var(s->reader, v->reader_index);
		/* anything unusual (partitioned, another size) keeps its own path and its own error */
		if (nb && owner == part && vi && vi->nslices == 0 && vi->dtype == v->dtype && vi->nbytes == nb) {
			req[n++] = (ckpt__read_req){ v->reader_index, base + off, (size_t)nb };
			in[i] = 1;
		}
		off += nb;
	}
	int rc = req && in && n ? ckpt__reader_read_many(s->reader, req, n, 0) : CKPT__DECLINED;
	ckpt__free(req);
	if (rc == CKPT_OK) {
		*batched = in;
		return CKPT_OK;
	}
	ckpt__free(in);
	if (rc == CKPT__DECLINED) {
		ckpt_error_clear(); /* declined, or no room for the requests: one by one */
		return CKPT_OK;
	}
	return rc;
}

static int stage(ckpt__session *s, const unsigned char *want, void **arena, int parts, int part, uint64_t *bounds)
{
	static unsigned char empty[64];
	*arena = NULL;
	uint64_t total = 0;
	for (size_t i = 0; i < s->nvals; i++) {
		if (!want[i] || s->vals[i].dtype == CKPT_DT_STRING)
			continue;
		uint64_t nb;
		ckpt_shape sh;
		ckpt__cshape_expand(&s->vals[i].shape, &sh);
		CKPT_TRY(ckpt_shape_nbytes(&sh, s->vals[i].dtype, &nb));
		if (ckpt__add_u64(total, 63, &total) || ckpt__add_u64(total & ~(uint64_t)63, nb, &total))
			return ckpt__fail(CKPT_ELIMIT, s->path, s->vals[i].key, -1, "checkpoint values exceed 2^64 bytes");
	}
	if (total > SIZE_MAX)
		return ckpt__fail(CKPT_ELIMIT, s->path, NULL, -1, "%llu bytes of values do not fit in memory",
			(unsigned long long)total);
	unsigned char *base = total ? ckpt__buffer_alloc(total, 0) : NULL;
	if (total && !base)
		return CKPT_ENOMEM;
	uint64_t chunk = parts > 1 ? total / (uint64_t)parts + 1 : 0;
	unsigned char *batched = NULL;
	int rc = stage_batch(s, want, base, chunk, part, &batched);
	uint64_t off = 0;
	int next = 0; /* the first part whose start is not known yet */
	size_t i;
	for (i = 0; i < s->nvals && rc == CKPT_OK; i++) {
		ckpt__value *v = &s->vals[i];
		if (!want[i])
			continue;
		ckpt_shape sh;
		ckpt__cshape_expand(&v->shape, &sh);
		if (v->dtype == CKPT_DT_STRING) {
			/* variable-length elements: an owned string tensor, outside the arena */
			rc = ckpt_reader_read(s->reader, v->reader_index, &v->t);
			if (rc == CKPT_OK && (v->t->dtype != CKPT_DT_STRING || !ckpt_shape_equal(&v->t->shape, &sh))) {
				ckpt_tensor_free(v->t);
				v->t = NULL;
				rc = ckpt__fail(CKPT_EFORMAT, s->path, v->key, -1,
					"string entry read back with another dtype or shape than its index entry");
			}
			if (rc < 0)
				ckpt__error_annotate(s->path, v->key);
			continue;
		}
		uint64_t nb;
		ckpt_shape_nbytes(&sh, v->dtype, &nb);
		off = (off + 63) & ~(uint64_t)63;
		unsigned char *dst = nb ? base + off : empty;
		int owner = parts > 1 ? (int)(off / chunk) : part;
		while (bounds && next <= owner)
			bounds[next++] = off;
		rc = nb && owner == part && !(batched && batched[i]) ?
			ckpt_reader_read_into(s->reader, v->reader_index, dst, (size_t)nb) : CKPT_OK;
		if (rc == CKPT_EUNSUPPORTED) {
			/* e.g. a partitioned entry the backend only assembles in ckpt_reader_read */
			ckpt_tensor *t;
			if ((rc = ckpt_reader_read(s->reader, v->reader_index, &t)) == CKPT_OK) {
				if (t->nbytes == nb)
					memcpy(dst, t->data, (size_t)nb);
				else
					rc = ckpt__fail(CKPT_EFORMAT, s->path, v->key, -1, "entry has %llu bytes, want %llu",
						(unsigned long long)t->nbytes, (unsigned long long)nb);
				ckpt_tensor_free(t);
			}
		}
		if (rc == CKPT_OK)
			rc = ckpt_tensor_wrap(&v->t, v->dtype, &sh, dst, nb);
		if (rc < 0)
			ckpt__error_annotate(s->path, v->key);
		off += nb;
	}
	ckpt__free(batched);
	if (rc < 0) {
		for (size_t k = 0; k < i; k++) {
			if (want[k]) {
				ckpt_tensor_free(s->vals[k].t);
				s->vals[k].t = NULL;
			}
		}
		ckpt__buffer_free(base);
		return rc;
	}
	while (bounds && next <= parts)
		bounds[next++] = total;
	*arena = base;
	return CKPT_OK;
}

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
	int rollback;        /* mirrored: copy 1 still holds the old value */
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
	if (lost)
		ckpt__warn(s->warn, s->warn_ctx,
			"restore from %s failed after its checksums were verified (the file changed or the device "
			"failed while it was read): %zu plain variable(s), first '%s', may hold partial values",
			s->path, lost, first);
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
	if (!s->reader || v->t || v->initialized || uses != 1 || v->dtype == CKPT_DT_STRING ||
	    !ckpt__variable_direct_restorable(var))
		return 0;
	const ckpt_var_info *vi = ckpt_reader_var(s->reader, v->reader_index);
	return vi && vi->has_crc32c && vi->nslices == 0;
}

/*
 * Whether value `val` goes to a device variable through the pinned ring
 * (device_stream.h): as can_read_direct, for copies only the provider may
 * touch. Sync-on-read ones are staged (their copies differ: no rollback).
 */
static int can_stream(const ckpt__session *s, const ckpt__value *v, ckpt_variable *var, unsigned uses)
{
	if (!s->reader || v->t || v->initialized || uses != 1 || v->dtype == CKPT_DT_STRING ||
	    !ckpt__variable_on_device(var) || ckpt_variable_kind(var) == CKPT_VAR_SYNC_ON_READ ||
	    ckpt_variable_nbytes(var) == 0)
		return 0;
	const ckpt_var_info *vi = ckpt_reader_var(s->reader, v->reader_index);
	return vi && vi->has_crc32c && vi->nslices == 0;
}

/* Stream every value of `d` into copy 0 of its device variable; touched[i] is set before value i is written. */
static int run_stream(ckpt_reader *rd, const direct *d, size_t n, unsigned char *touched)
{
	ckpt__ring ring = { 0 };
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
 * Commit one run, all or nothing:
 *  1. stage what cannot be read in place (sync-on-read, strings, partitioned
 *     or unchecksummed entries, values shared by several variables) and what
 *     restore-on-create needs later; verify in the file the checksums of the
 *     plain variables' values (bounded buffers, no copy of the state);
 *  2. check every assignment and allocate everything the commit needs;
 *  3. read straight into copy 0, checksums verified on the way: mirrored
 *     variables first (a failure puts copy 0 back from copy 1), then the
 *     plain ones, verified in step 1;
 *  4. fan out to the other copies, swap in strings, attach pending records.
 * Steps 1–2 change nothing; a failure in step 3 is undone for mirrored
 * variables, and for plain ones it needs the file to change under us after
 * step 1 (undo_direct warns); step 4 cannot fail. Across processes there is
 * no step 3: between 2 and 4 the processes agree (and share staged parts).
 */
int ckpt__run_commit(ckpt__run *r)
{
	ckpt__session *s = r->s;
	size_t need = s->nassigned + r->nasg;
	if (need > s->capassigned) {
		ckpt_variable **na = ckpt__realloc(s->assigned, (need ? need : 1) * sizeof(*na));
		if (!na)
			return r->cs ? ckpt__strategy_ops_of(r->cs)->share_staged(r->cs, CKPT_ENOMEM, 0, NULL, NULL) : CKPT_ENOMEM;
		s->assigned = na;
		s->capassigned = need;
	}
	size_t nv = s->nvals ? s->nvals : 1, na1 = r->nasg ? r->nasg : 1;
	unsigned char *uses = ckpt__calloc(nv, 1);
	unsigned char *want_now = ckpt__calloc(nv, 1), *want_later = ckpt__calloc(nv, 1);
	unsigned char *touched = ckpt__calloc(na1, 1), *is_direct = ckpt__calloc(na1, 1);
	direct *dir = ckpt__calloc(na1, sizeof(*dir));
	/* device variables: streamed through the pinned ring into copy 0, like dir */
	direct *str = ckpt__calloc(na1, sizeof(*str));
	unsigned char *str_touched = ckpt__calloc(na1, 1);
	char **keys = ckpt__calloc(na1, sizeof(char *));
	ckpt_variable **vars = ckpt__calloc(na1, sizeof(*vars));
	const void **srcs = ckpt__calloc(na1, sizeof(*srcs));
	size_t *sizes = ckpt__calloc(na1, sizeof(*sizes));
	/* string values: per-replica copies built now, swapped in after the fan-out */
	ckpt_variable **svars = ckpt__calloc(na1, sizeof(*svars));
	void **sstaged = ckpt__calloc(na1, sizeof(*sstaged));
	void **arenas = s->reader ? ckpt__realloc(s->arenas, (s->narenas + 1) * sizeof(*arenas)) : s->arenas;
	if (arenas)
		s->arenas = arenas;
	/* across processes: this process's part of the reading, and where each part lies in the arenas */
	int parts = 1, part = 0;
	if (r->cs && ckpt__strategy_ops_of(r->cs)->restore_parts)
		parts = ckpt__strategy_ops_of(r->cs)->restore_parts(r->cs, &part);
	uint64_t *bnow = parts > 1 ? ckpt__calloc((size_t)parts + 1, sizeof(*bnow)) : NULL;
	uint64_t *blater = parts > 1 ? ckpt__calloc((size_t)parts + 1, sizeof(*blater)) : NULL;
	int rc = (!uses || !want_now || !want_later || !touched || !is_direct || !dir || !str || !str_touched || !keys || !vars || !srcs || !sizes ||
		!svars || !sstaged || (s->reader && !arenas) || (parts > 1 && (!bnow || !blater))) ? CKPT_ENOMEM : CKPT_OK;
	void *now = NULL, *later = NULL;
	ckpt__assign_plan *plan = NULL;
	size_t ndir = 0, nrb = 0, nwrite = 0, nstr = 0, nstream = 0, nsrb = 0;

	/* 1. stage and verify */
	for (size_t i = 0; i < r->nasg && rc == CKPT_OK; i++)
		if (uses[r->asg[i].val] < 2)
			uses[r->asg[i].val]++;
	for (size_t i = 0; i < r->nasg && rc == CKPT_OK; i++) {
		const assignment *a = &r->asg[i];
		ckpt__value *v = &s->vals[a->val];
		if (!r->cs && can_read_direct(s, v, a->var, uses[a->val])) {
			is_direct[i] = 1;
			dir[ndir++] = (direct){ r->fresh || ckpt_variable_num_replicas(a->var) > 1, a->val, v->reader_index, a->var,
				ckpt__variable_data(a->var, 0), (size_t)ckpt_variable_nbytes(a->var) };
		} else if (!r->cs && can_stream(s, v, a->var, uses[a->val])) {
			is_direct[i] = 1;
			str[nstream++] = (direct){ r->fresh || ckpt_variable_num_replicas(a->var) > 1, a->val, v->reader_index,
				a->var, ckpt__variable_data(a->var, 0), (size_t)ckpt_variable_nbytes(a->var) };
		} else if (!v->t && s->reader)
			want_now[a->val] = 1;
	}
	if (rc == CKPT_OK && s->reader) {
		for (size_t i = 0; i < s->nvals; i++)
			want_later[i] = !want_now[i] && !s->vals[i].t && !s->vals[i].consumed;
		for (size_t i = 0; i < ndir; i++)
			want_later[dir[i].val] = 0;
		for (size_t i = 0; i < nstream; i++)
			want_later[str[i].val] = 0;
		rc = stage(s, want_now, &now, parts, part, bnow);
		for (size_t i = 0; i < s->nvals && rc == CKPT_OK; i++)
			s->vals[i].temp = want_now[i];
		if (rc == CKPT_OK)
			rc = stage(s, want_later, &later, parts, part, blater);
		/* rollbackable values first; only the others need a verification pass */
		int src = ckpt__sort(dir, ndir, sizeof(*dir), cmp_rollback_first); /* nearly sorted: built in value order */
		if (rc == CKPT_OK)
			rc = src;
		while (nrb < ndir && dir[nrb].rollback)
			nrb++;
		if (rc == CKPT_OK)
			rc = run_direct(s->reader, dir + nrb, ndir - nrb, 0, NULL);
		/* device values without a second copy to roll back from are verified in the file first, too */
		int ssrc = ckpt__sort(str, nstream, sizeof(*str), cmp_rollback_first);
		if (rc == CKPT_OK)
			rc = ssrc;
		while (nsrb < nstream && str[nsrb].rollback)
			nsrb++;
		if (rc == CKPT_OK)
			rc = run_direct(s->reader, str + nsrb, nstream - nsrb, 0, NULL);
	}

	/* 2. check and allocate */
	for (size_t i = 0; i < r->nasg && rc == CKPT_OK; i++) {
		const assignment *a = &r->asg[i];
		const ckpt__value *v = &s->vals[a->val];
		const ckpt_tensor *t = v->t;
		if (!(keys[i] = ckpt__strdup(v->key)))
			rc = CKPT_ENOMEM;
		else if (is_direct[i]) {
			vars[nwrite] = a->var;
			srcs[nwrite] = ckpt__variable_data(a->var, 0);
			sizes[nwrite] = (size_t)ckpt_variable_nbytes(a->var);
			nwrite++;
		} else if (!t)
			rc = ckpt__fail(CKPT_ERROR, s->path, v->key, -1, "value was released before use");
		else if (v->initialized)
			continue; /* load already created the variable with this value */
		else if (t->dtype == CKPT_DT_STRING) {
			rc = ckpt__variable_stage_strings(a->var, t, &sstaged[nstr]);
			if (rc == CKPT_OK)
				svars[nstr++] = a->var;
			else
				ckpt__error_annotate(s->path, v->key);
		} else {
			vars[nwrite] = a->var;
			srcs[nwrite] = t->data;
			sizes[nwrite] = (size_t)t->nbytes;
			nwrite++;
		}
	}
	if (rc == CKPT_OK)
		rc = reserve_pending(r);
	if (rc == CKPT_OK)
		rc = ckpt__assign_plan_new(&plan, vars, srcs, sizes, nwrite);
	/* across processes: everything staged and prepared everywhere, or nobody assigns */
	if (r->cs) {
		void *bases[2] = { now, later };
		const uint64_t *bounds[2] = { bnow, blater };
		rc = ckpt__strategy_ops_of(r->cs)->share_staged(r->cs, rc, 2, bases, bounds);
	}

	/* 3. read in place (checksums verified as they are read): mirrored values
	 * first, so a bad one is undone before any plain variable is written */
	/* device values first (a failing device then has touched no host variable), rollbackable ones first */
	if (rc == CKPT_OK && nstream) {
		rc = run_stream(s->reader, str, nstream, str_touched);
		if (rc < 0 && !r->fresh)
			undo_direct(s, str, nstream, str_touched);
	}
	if (rc == CKPT_OK && ndir) {
		rc = run_direct(s->reader, dir, nrb, 1, touched);
		if (rc == CKPT_OK)
			rc = run_direct(s->reader, dir + nrb, ndir - nrb, 1, touched + nrb);
		if (rc < 0 && !r->fresh) {
			undo_direct(s, dir, ndir, touched);
			undo_direct(s, str, nstream, str_touched);
		}
	}

	/* 4. fan out and swap in: cannot fail on the host (device copies: only the provider can) */
	if (rc == CKPT_OK)
		rc = ckpt__assign_plan_run(plan);
	ckpt__assign_plan_free(plan);
	for (size_t i = 0; i < nstr; i++) {
		if (rc == CKPT_OK)
			ckpt__variable_commit_strings(svars[i], sstaged[i]);
		else
			ckpt__variable_discard_strings(svars[i], sstaged[i]);
	}
	if (rc == CKPT_OK && s->reader) {
		if (later)
			s->arenas[s->narenas++] = later;
		later = NULL;
		ckpt_reader_free(s->reader);
		s->reader = NULL;
	}
	if (later)
		release_later(s, want_later, later);
	ckpt__free(uses);
	ckpt__free(want_now);
	ckpt__free(want_later);
	ckpt__free(touched);
	ckpt__free(is_direct);
	ckpt__free(dir);
	ckpt__free(str);
	ckpt__free(str_touched);
	ckpt__free(vars);
	ckpt__free(srcs);
	ckpt__free(sizes);
	ckpt__free(svars);
	ckpt__free(sstaged);
	ckpt__free(bnow);
	ckpt__free(blater);
	if (rc < 0) {
		for (size_t i = 0; keys && i < r->nasg; i++)
			ckpt__free(keys[i]);
		ckpt__free(keys);
		release_staged(s, now);
		return rc;
	}
	for (size_t i = 0; i < r->nasg; i++) {
		assignment *a = &r->asg[i];
		s->assigned[s->nassigned++] = a->var;
		/* where the key is reported: the variable node, or the attribute of any other object */
		char **sk = a->owner->is_var_node ? &a->owner->source_key : NULL;
		for (size_t k = 0; !sk && k < a->owner->nattrs; k++)
			if (a->owner->attrs[k].var == a->var)
				sk = &a->owner->attrs[k].source_key;
		if (keys[i] && sk) {
			ckpt__free(*sk);
			*sk = keys[i];
			keys[i] = NULL;
		}
	}
	for (size_t i = 0; i < r->nasg; i++) {
		ckpt__value *v = &s->vals[r->asg[i].val];
		if (v->node >= 0 && !*v->suffix && strcmp(v->attr, CKPT_VARIABLE_VALUE_KEY) == 0)
			s->bound_var[v->node] = r->asg[i].var;
		if (!v->consumed) {
			v->consumed = 1;
			ckpt_tensor_free(v->t);
			v->t = NULL;
		}
	}
	ckpt__free(keys);
	release_staged(s, now);
	for (size_t i = 0; i < r->npc; i++)
		ckpt__pending_push_child(&r->pc[i].obj->pending, r->pc[i].name, s, r->pc[i].node, &pending_ops);
	for (size_t i = 0; i < r->nps; i++)
		ckpt__pending_push_slot(&r->ps[i].opt->pending, s, r->ps[i].orig, r->ps[i].slot_name, r->ps[i].slot_node,
			&pending_ops);
	r->npc = r->nps = 0; /* names now belong to the objects */
	return CKPT_OK;
}

/* ================================================================== */
/* restore-on-create                                                    */
/* ================================================================== */

/* A pending child, now created: match its stored node against it and commit. */
static int restore_pending_child(ckpt__session *s, int node, ckpt_object *child)
{
	ckpt__run *r;
	CKPT_TRY(ckpt__run_new(&r, s));
	int rc = ckpt__run_match_node(r, node, child);
	if (rc == CKPT_OK)
		rc = ckpt__run_commit(r);
	ckpt__run_discard(r);
	return rc;
}

/* A pending slot, now created: match the stored slot variable's values against its node and commit. */
static int restore_pending_slot(ckpt__session *s, int slot_node, ckpt_object *node)
{
	ckpt__run *r;
	CKPT_TRY(ckpt__run_new(&r, s));
	int rc = ckpt__run_match_slot(r, slot_node, node);
	if (rc == CKPT_OK)
		rc = ckpt__run_commit(r);
	ckpt__run_discard(r);
	return rc;
}

static const ckpt__pending_ops pending_ops = { restore_pending_child, restore_pending_slot };


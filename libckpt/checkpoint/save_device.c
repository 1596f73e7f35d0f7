/* Device values of a save through the pinned ring (save_device.h). */
#include <string.h>
#include "save_device.h"
#include "model/strategy_impl.h"
#include "reader/format_registry.h"

int ckpt__save_prefetchable(const ckpt_variable *v)
{
	return ckpt__variable_on_device(v) && ckpt_variable_kind(v) != CKPT_VAR_SYNC_ON_READ &&
		ckpt_variable_dtype(v) != CKPT_DT_STRING && ckpt_variable_nbytes(v) > 0;
}

static ckpt__mem *mem_of(const ckpt_variable *v)
{
	return ckpt__strategy_mem(ckpt_variable_strategy(v));
}

int ckpt__save_in_pieces(const ckpt_variable *v)
{
	return ckpt_variable_nbytes(v) > mem_of(v)->staging_bytes / 2;
}

/* The ring for memory m; reallocated only when nothing is in flight and the writer holds no half. */
static int ring_for(ckpt__save_prefetch *pf, ckpt__mem *m, const char *name)
{
	if (pf->m == m && pf->base)
		return CKPT_OK;
	if (pf->base)
		ckpt__mem_pinned_free(pf->m, pf->base, 2 * pf->half);
	pf->base = NULL;
	size_t half = m->staging_bytes / 2;
	if (pf->largest && pf->largest < half)
		half = pf->largest;
	void *p;
	CKPT_TRY(ckpt__mem_pinned_alloc(m, &p, 2 * half, name));
	pf->m = m;
	pf->base = p;
	pf->half = half;
	return CKPT_OK;
}

int ckpt__save_prefetch_start(ckpt__save_prefetch *pf, const ckpt_variable *next)
{
	if (!next || pf->inflight || ckpt__save_in_pieces(next))
		return CKPT_OK;
	if (pf->base && pf->m != mem_of(next))
		return CKPT_OK; /* another provider's ring: made when the writer no longer reads this one */
	CKPT_TRY(ring_for(pf, mem_of(next), ckpt_variable_name(next)));
	int slot = 1 - pf->current;
	CKPT_TRY(ckpt__mem_d2h(mem_of(next), 0, pf->base + (size_t)slot * pf->half, ckpt_variable_replica_data(next, 0),
		(size_t)ckpt_variable_nbytes(next), ckpt_variable_name(next)));
	pf->inflight = next;
	pf->inflight_slot = slot;
	return CKPT_OK;
}

static int finish(ckpt__save_prefetch *pf)
{
	const ckpt_variable *v = pf->inflight;
	pf->inflight = NULL;
	return v ? ckpt__mem_sync(mem_of(v), 0, ckpt_variable_name(v)) : CKPT_OK;
}

int ckpt__save_prefetch_get(ckpt__save_prefetch *pf, const ckpt_variable *v, const void **out)
{
	*out = NULL;
	if (pf->inflight && pf->inflight != v)
		CKPT_TRY(finish(pf)); /* not the one expected: let it land, then start v */
	size_t n = (size_t)ckpt_variable_nbytes(v);
	if (ckpt__save_in_pieces(v)) {
		/* a writer that takes values only whole: pinned memory of the value's size */
		void *dst;
		CKPT_TRY(ckpt__pinned_cache_get(&pf->whole, mem_of(v), n, &dst, ckpt_variable_name(v)));
		CKPT_TRY(ckpt__mem_d2h(mem_of(v), 0, dst, ckpt_variable_replica_data(v, 0), n, ckpt_variable_name(v)));
		CKPT_TRY(ckpt__mem_sync(mem_of(v), 0, ckpt_variable_name(v)));
		*out = dst;
		return CKPT_OK;
	}
	if (!pf->inflight) {
		CKPT_TRY(ring_for(pf, mem_of(v), ckpt_variable_name(v)));
		CKPT_TRY(ckpt__save_prefetch_start(pf, v));
	}
	int slot = pf->inflight_slot;
	CKPT_TRY(finish(pf));
	pf->current = slot;
	*out = pf->base + (size_t)slot * pf->half;
	return CKPT_OK;
}

/* The pieces of one value: piece k lands in half k % 2 while piece k - 1 is written from the other. */
typedef struct piece_feed {
	ckpt__save_prefetch *pf;
	const ckpt_variable *v;
	size_t n;
	size_t at, len;   /* the piece in flight (len 0: none) */
	unsigned k;       /* its index */
} piece_feed;

static int feed_enqueue(piece_feed *f, size_t at)
{
	f->at = at;
	f->len = f->n - at < f->pf->half ? f->n - at : f->pf->half;
	return ckpt__mem_d2h(f->pf->m, 0, f->pf->base + (size_t)(f->k % 2) * f->pf->half,
		(const unsigned char *)ckpt_variable_replica_data(f->v, 0) + at, f->len, ckpt_variable_name(f->v));
}

static int feed_next(void *ctx, const void **piece, size_t *n)
{
	piece_feed *f = ctx;
	*piece = NULL;
	*n = 0;
	if (!f->len && f->k == 0)
		CKPT_TRY(feed_enqueue(f, 0));
	if (!f->len)
		return ckpt__fail(CKPT_EINVAL, NULL, ckpt_variable_name(f->v), -1, "value asked for past its %zu bytes",
			f->n);
	/* only this piece is in flight: once landed, the half the writer just finished takes the next */
	int rc = ckpt__mem_sync(f->pf->m, 0, ckpt_variable_name(f->v));
	size_t at = f->at, len = f->len;
	unsigned char *half = f->pf->base + (size_t)(f->k % 2) * f->pf->half;
	f->len = 0;
	if (rc < 0)
		return rc;
	f->k++;
	if (at + len < f->n)
		CKPT_TRY(feed_enqueue(f, at + len));
	*piece = half;
	*n = len;
	return CKPT_OK;
}

int ckpt__save_stream(ckpt__save_prefetch *pf, ckpt_writer *w, const ckpt_variable *v, const char *key)
{
	CKPT_TRY(finish(pf));
	CKPT_TRY(ring_for(pf, mem_of(v), ckpt_variable_name(v)));
	piece_feed f = { pf, v, (size_t)ckpt_variable_nbytes(v), 0, 0, 0 };
	int rc = ckpt__writer_add_pieces(w, key, ckpt_variable_dtype(v), ckpt_variable_shape(v), f.n, feed_next, &f);
	/* nothing stays in flight on return, success or not */
	if (f.len) {
		int src = ckpt__mem_sync(pf->m, 0, ckpt_variable_name(v));
		if (rc == CKPT_OK)
			rc = src;
	}
	return rc;
}

int ckpt__save_scratch(ckpt__save_prefetch *pf, const ckpt_variable *v, void **out, size_t *n)
{
	ckpt__mem *m = mem_of(v);
	*out = NULL;
	*n = 0;
	if (pf->m != m && pf->inflight)
		return CKPT_OK; /* another provider's ring, still filling */
	CKPT_TRY(ring_for(pf, m, ckpt_variable_name(v)));
	*out = pf->base + (size_t)pf->current * pf->half;
	*n = pf->half;
	return CKPT_OK;
}

void ckpt__save_prefetch_free(ckpt__save_prefetch *pf)
{
	(void)finish(pf);
	if (pf->base)
		ckpt__mem_pinned_free(pf->m, pf->base, 2 * pf->half);
	pf->base = NULL;
	ckpt__pinned_cache_free(&pf->whole);
}

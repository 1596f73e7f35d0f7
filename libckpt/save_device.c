/* Device values of a save, copied one ahead of the writer (save_device.h). */
#include "save_device.h"
#include "strategy_impl.h"

int ckpt__save_prefetchable(const ckpt_variable *v)
{
	return ckpt__variable_on_device(v) && ckpt_variable_kind(v) != CKPT_VAR_SYNC_ON_READ &&
		ckpt_variable_dtype(v) != CKPT_DT_STRING && ckpt_variable_nbytes(v) > 0;
}

static ckpt__mem *mem_of(const ckpt_variable *v)
{
	return ckpt__strategy_mem(ckpt_variable_strategy(v));
}

int ckpt__save_prefetch_start(ckpt__save_prefetch *pf, const ckpt_variable *next)
{
	if (!next || pf->inflight)
		return CKPT_OK;
	int slot = 1 - pf->current;
	size_t n = (size_t)ckpt_variable_nbytes(next);
	void *dst;
	CKPT_TRY(ckpt__pinned_cache_get(&pf->slot[slot], mem_of(next), n, &dst, ckpt_variable_name(next)));
	CKPT_TRY(ckpt__mem_d2h(mem_of(next), 0, dst, ckpt_variable_replica_data(next, 0), n, ckpt_variable_name(next)));
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
	if (!pf->inflight)
		CKPT_TRY(ckpt__save_prefetch_start(pf, v));
	int slot = pf->inflight_slot;
	CKPT_TRY(finish(pf));
	pf->current = slot;
	*out = pf->slot[slot].p;
	return CKPT_OK;
}

void ckpt__save_prefetch_free(ckpt__save_prefetch *pf)
{
	(void)finish(pf);
	ckpt__pinned_cache_free(&pf->slot[0]);
	ckpt__pinned_cache_free(&pf->slot[1]);
}

/*
 * Strategies and the thread-local scope stack.
 *
 * A scope is a variable-creation context (the rule of README.md, "Using
 * libckpt in a trainer"). Each thread has its own bounded stack of entered
 * strategies; the innermost one is current, the default strategy when the
 * stack is empty. In replica context the strategy being run is current.
 *
 * Nesting (as tf.distribute): re-entering the innermost strategy is fine;
 * entering any other strategy while a non-default one is innermost is
 * ESCOPE naming both; a mirrored scope inside a default scope is fine.
 *
 * Lifetime: the owner's reference, every live variable and every scope-stack
 * entry hold a reference. ckpt_strategy_free() drops the owner's; memory goes
 * with the last reference, so freeing a strategy that is still in scope or
 * still has variables is reported (EINVAL in ckpt_error_last) but safe.
 *
 * Implementations (strategy_impl.h): default and mirrored live here and have
 * no cross-process hooks; multi-worker is in the ckpt_mpi library.
 */
#include <stdio.h>
#include <string.h>
#include "variable_internal.h"
#include "strategy_impl.h"
#include "device/memory_internal.h"

struct ckpt_strategy {
	ckpt_strategy_kind kind;
	const ckpt__strategy_ops *ops;
	int num_replicas;     /* over every process */
	int local_replicas;   /* in this process: copies per variable */
	int replica_offset;   /* global id of local replica 0 */
	void *impl;
	unsigned id;
	int refs;      /* atomic: owner (until released) + variables + scope entries */
	int variables; /* atomic: live variables (for messages) */
	int scopes;    /* atomic: scope-stack entries over all threads (for messages) */
	int released;  /* atomic: owner called ckpt_strategy_free */
	char desc[112];
	ckpt__mem *mem;       /* ckpt_strategy_mirrored_on: the provider, devices, queues; NULL: library host buffers */
	size_t staging_bytes; /* the pinned ring (strategies without a provider keep it for their own setting) */
};

static const ckpt__strategy_ops default_ops = { .name = "default", .kind = CKPT_STRATEGY_DEFAULT };
static const ckpt__strategy_ops mirrored_ops = { .name = "mirrored", .kind = CKPT_STRATEGY_MIRRORED };

static ckpt_strategy default_strategy = {
	.kind = CKPT_STRATEGY_DEFAULT, .ops = &default_ops, .num_replicas = 1, .local_replicas = 1,
	.refs = 1, .desc = "DefaultStrategy", .staging_bytes = CKPT_STAGING_DEFAULT_BYTES
};

static unsigned next_id; /* atomic */

static _Thread_local ckpt_strategy *scope_stack[CKPT__MAX_SCOPE_DEPTH];
static _Thread_local int scope_depth;
/* entries below this were entered before the running replica began: not visible to it */
static _Thread_local int scope_base;

/* Cross-process strategies alive now: without one, no checkpoint needs its tree searched for them. */
static int collective_live;

int ckpt__strategy_any_collective(void)
{
	return __atomic_load_n(&collective_live, __ATOMIC_ACQUIRE) > 0;
}

int ckpt__strategy_create(ckpt_strategy **out, const ckpt__strategy_ops *ops, int num_replicas,
	int local_replicas, int replica_offset, void *impl, const char *desc)
{
	ckpt_strategy *s = ckpt__calloc(1, sizeof(*s));
	if (!s)
		return CKPT_ENOMEM;
	s->kind = ops->kind;
	s->ops = ops;
	s->num_replicas = num_replicas;
	s->local_replicas = local_replicas;
	s->replica_offset = replica_offset;
	s->impl = impl;
	s->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
	s->refs = 1;
	s->staging_bytes = CKPT_STAGING_DEFAULT_BYTES;
	snprintf(s->desc, sizeof(s->desc), "%.95s#%u", desc, s->id);
	if (ckpt__strategy_is_collective(s))
		__atomic_add_fetch(&collective_live, 1, __ATOMIC_ACQ_REL);
	*out = s;
	return CKPT_OK;
}

int ckpt_strategy_mirrored_new(ckpt_strategy **out, int num_replicas)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_strategy_mirrored_new: out is NULL");
	*out = NULL;
	if (num_replicas < 1)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"a mirrored strategy needs at least 1 replica, got %d", num_replicas);
	if (num_replicas > CKPT__MAX_REPLICAS)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1,
			"a mirrored strategy has at most %d replicas, got %d", CKPT__MAX_REPLICAS, num_replicas);
	char desc[64];
	snprintf(desc, sizeof(desc), "MirroredStrategy(%d replica%s)", num_replicas, num_replicas == 1 ? "" : "s");
	return ckpt__strategy_create(out, &mirrored_ops, num_replicas, num_replicas, 0, NULL, desc);
}

int ckpt_strategy_mirrored_on(ckpt_strategy **out, const ckpt_memory_provider *provider,
	const int *devices, int n)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_strategy_mirrored_on: out is NULL");
	*out = NULL;
	if (n < 1)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"a mirrored strategy needs at least 1 replica, got %d", n);
	if (n > CKPT__MAX_REPLICAS)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1,
			"a mirrored strategy has at most %d replicas, got %d", CKPT__MAX_REPLICAS, n);
	ckpt__mem *m;
	CKPT_TRY(ckpt__mem_new(&m, provider, devices, n));
	char desc[96];
	snprintf(desc, sizeof(desc), "MirroredStrategy(%d replica%s on %.40s)", n, n == 1 ? "" : "s", m->caps.name);
	ckpt_strategy *s;
	int rc = ckpt__strategy_create(&s, &mirrored_ops, n, n, 0, NULL, desc);
	if (rc < 0) {
		ckpt__mem_free(m);
		return rc;
	}
	s->mem = m;
	*out = s;
	return CKPT_OK;
}

int ckpt__strategy_attach_memory(ckpt_strategy *s, const ckpt_memory_provider *provider, const int *devices)
{
	if (!s || s == &default_strategy || s->mem || __atomic_load_n(&s->variables, __ATOMIC_ACQUIRE) > 0)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "memory can be attached only to a new strategy without variables");
	ckpt__mem *m;
	CKPT_TRY(ckpt__mem_new(&m, provider, devices, s->local_replicas));
	m->staging_bytes = s->staging_bytes;
	s->mem = m;
	/* the description says where the replicas live */
	size_t len = strlen(s->desc);
	snprintf(s->desc + len, sizeof(s->desc) - len, " on %.20s", m->caps.name);
	return CKPT_OK;
}

ckpt__mem *ckpt__strategy_mem(const ckpt_strategy *s)
{
	return s ? s->mem : NULL;
}

const ckpt_memory_provider *ckpt_strategy_memory_provider(const ckpt_strategy *s)
{
	return s && s->mem ? &s->mem->p : ckpt_memory_provider_host();
}

int ckpt_strategy_replica_device(const ckpt_strategy *s, int replica)
{
	if (replica < 0 || replica >= ckpt__strategy_local_replicas(s))
		return -1;
	return s && s->mem ? s->mem->devices[replica] : 0;
}

int ckpt_strategy_set_staging_bytes(ckpt_strategy *s, size_t bytes)
{
	if (!s || s == &default_strategy)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_strategy_set_staging_bytes: %s",
			s ? "the default strategy's ring is fixed" : "strategy is NULL");
	if (bytes == 0)
		bytes = CKPT_STAGING_DEFAULT_BYTES;
	if (bytes < CKPT_STAGING_MIN_BYTES)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"staging ring of %zu bytes for %s: at least %zu (two halves of %zu)", bytes, s->desc,
			(size_t)CKPT_STAGING_MIN_BYTES, (size_t)CKPT_STAGING_MIN_BYTES / 2);
	s->staging_bytes = bytes;
	if (s->mem)
		s->mem->staging_bytes = bytes;
	return CKPT_OK;
}

size_t ckpt_strategy_staging_bytes(const ckpt_strategy *s)
{
	return s ? s->staging_bytes : CKPT_STAGING_DEFAULT_BYTES;
}

const ckpt__strategy_ops *ckpt__strategy_ops_of(const ckpt_strategy *s)
{
	return s ? s->ops : &default_ops;
}

void *ckpt__strategy_impl(const ckpt_strategy *s)
{
	return s ? s->impl : NULL;
}

int ckpt__strategy_local_replicas(const ckpt_strategy *s)
{
	return s ? s->local_replicas : 1;
}

int ckpt__strategy_replica_offset(const ckpt_strategy *s)
{
	return s ? s->replica_offset : 0;
}

int ckpt__strategy_is_collective(const ckpt_strategy *s)
{
	return s && s->ops->on_create != NULL;
}

ckpt_strategy *ckpt_strategy_default(void)
{
	return &default_strategy;
}

static void drop_ref(ckpt_strategy *s)
{
	if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		if (ckpt__strategy_is_collective(s))
			__atomic_sub_fetch(&collective_live, 1, __ATOMIC_ACQ_REL);
		if (s->ops->destroy)
			s->ops->destroy(s);
		ckpt__mem_free(s->mem);
		ckpt__free(s);
	}
}

void ckpt_strategy_free(ckpt_strategy *s)
{
	if (!s || s == &default_strategy)
		return;
	if (__atomic_exchange_n(&s->released, 1, __ATOMIC_ACQ_REL)) {
		ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "%s freed twice", s->desc);
		return;
	}
	int vars = __atomic_load_n(&s->variables, __ATOMIC_ACQUIRE);
	int scopes = __atomic_load_n(&s->scopes, __ATOMIC_ACQUIRE);
	if (vars > 0 || scopes > 0)
		ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"%s freed while %d variable(s) and %d scope entr%s still use it; "
			"it is released when the last of them goes",
			s->desc, vars, scopes, scopes == 1 ? "y" : "ies");
	drop_ref(s);
}

void ckpt__strategy_retain(ckpt_strategy *s, ckpt__strategy_ref what)
{
	if (!s || s == &default_strategy)
		return;
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	if (what != CKPT__REF_RUN)
		__atomic_add_fetch(what == CKPT__REF_VARIABLE ? &s->variables : &s->scopes, 1, __ATOMIC_RELAXED);
}

void ckpt__strategy_release(ckpt_strategy *s, ckpt__strategy_ref what)
{
	if (!s || s == &default_strategy)
		return;
	if (what != CKPT__REF_RUN)
		__atomic_sub_fetch(what == CKPT__REF_VARIABLE ? &s->variables : &s->scopes, 1, __ATOMIC_RELEASE);
	drop_ref(s);
}

ckpt_strategy_kind ckpt_strategy_kind_of(const ckpt_strategy *s)
{
	return s ? s->kind : CKPT_STRATEGY_DEFAULT;
}

const char *ckpt_strategy_name(const ckpt_strategy *s)
{
	return ckpt__strategy_ops_of(s)->name;
}

int ckpt_strategy_num_replicas(const ckpt_strategy *s)
{
	return s ? s->num_replicas : 1;
}

const char *ckpt_strategy_describe(const ckpt_strategy *s)
{
	return s ? s->desc : default_strategy.desc;
}

/* The strategy whose replica function this thread is running (replica.c says so), or NULL. */
static _Thread_local ckpt_strategy *running;

ckpt_strategy *ckpt__strategy_set_running(ckpt_strategy *s)
{
	ckpt_strategy *prev = running;
	running = s;
	return prev;
}

/* The strategy a new scope nests in: the innermost entered one, else the one being run. */
static ckpt_strategy *innermost(void)
{
	if (scope_depth > scope_base)
		return scope_stack[scope_depth - 1];
	return running;
}

int ckpt_scope_enter(ckpt_strategy *s)
{
	if (!s)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_scope_enter: strategy is NULL");
	if (__atomic_load_n(&s->released, __ATOMIC_ACQUIRE))
		return ckpt__fail(CKPT_ESCOPE, NULL, NULL, -1,
			"cannot enter the scope of %s: it was freed", s->desc);
	ckpt_strategy *in = innermost();
	if (in && in != s && in->kind != CKPT_STRATEGY_DEFAULT)
		return ckpt__fail(CKPT_ESCOPE, NULL, NULL, -1,
			"cannot enter the scope of %s inside the scope of %s: scopes of different "
			"strategies may not nest; exit %s first", s->desc, in->desc, in->desc);
	if (scope_depth >= CKPT__MAX_SCOPE_DEPTH)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1,
			"scope of %s nested deeper than %d on this thread (missing ckpt_scope_exit?)",
			s->desc, CKPT__MAX_SCOPE_DEPTH);
	ckpt__strategy_retain(s, CKPT__REF_SCOPE);
	scope_stack[scope_depth++] = s;
	return CKPT_OK;
}

int ckpt_scope_exit(ckpt_strategy *s)
{
	if (!s)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_scope_exit: strategy is NULL");
	if (scope_depth == scope_base)
		return ckpt__fail(CKPT_ESCOPE, NULL, NULL, -1,
			"ckpt_scope_exit(%s) with no scope entered on this thread%s", s->desc,
			scope_base > 0 ? " inside this replica" : "");
	ckpt_strategy *top = scope_stack[scope_depth - 1];
	if (top != s)
		return ckpt__fail(CKPT_ESCOPE, NULL, NULL, -1,
			"ckpt_scope_exit(%s) but the innermost scope on this thread is %s: "
			"exit scopes in reverse order of entry", s->desc, top->desc);
	scope_stack[--scope_depth] = NULL;
	ckpt__strategy_release(s, CKPT__REF_SCOPE);
	return CKPT_OK;
}

ckpt_strategy *ckpt_strategy_current(void)
{
	ckpt_strategy *in = innermost();
	return in ? in : &default_strategy;
}

int ckpt_in_scope(void)
{
	return ckpt_strategy_current()->kind != CKPT_STRATEGY_DEFAULT;
}

int ckpt__scope_replica_begin(void)
{
	int prev = scope_base;
	scope_base = scope_depth;
	return prev;
}

int ckpt__scope_replica_end(int prev_base)
{
	int left = scope_depth - scope_base;
	while (scope_depth > scope_base) {
		ckpt_strategy *s = scope_stack[--scope_depth];
		scope_stack[scope_depth] = NULL;
		ckpt__strategy_release(s, CKPT__REF_SCOPE);
	}
	scope_base = prev_base;
	return left;
}

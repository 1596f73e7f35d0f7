/*
 * Old values of device variables during a restore (restore_undo.h).
 *
 * Each kept value costs one more copy of the variable on replica 0's
 * device (a device-to-device copy: no host round trip), or in pinned host
 * memory when that allocation fails; sync-on-read variables, whose
 * replicas differ, keep every replica's. The copies are enqueued for every
 * variable, then every queue is synchronized once.
 */
#include <string.h>
#include "restore_undo.h"
#include "model/strategy_impl.h"
#include "model/variable_internal.h"
#include "util/sort.h"

struct ckpt__undo_entry {
	ckpt_variable *var;
	ckpt__mem *m;
	size_t nbytes;
	int nold;               /* 1: replica 0's value stands for every replica; else one per replica */
	void **old;             /* [nold] */
	unsigned char *on_host; /* [nold]: old[i] is pinned host memory (the device had no room) */
	int touched;
};

static int cmp_entry(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const ckpt__undo_entry *)a)->var, y = (uintptr_t)((const ckpt__undo_entry *)b)->var;
	return x < y ? -1 : x > y;
}

static void entry_free(ckpt__undo_entry *e)
{
	for (int i = 0; e->old && i < e->nold; i++) {
		if (!e->old[i])
			continue;
		if (e->on_host[i])
			ckpt__mem_pinned_free(e->m, e->old[i], e->nbytes);
		else
			ckpt__mem_device_free(e->m, i, e->old[i], e->nbytes);
	}
	ckpt__free(e->old);
	ckpt__free(e->on_host);
}

void ckpt__device_undo_free(ckpt__device_undo *u)
{
	for (size_t i = 0; i < u->n; i++)
		entry_free(&u->e[i]);
	ckpt__free(u->e);
	memset(u, 0, sizeof(*u));
}

/* Room for replica i's old value: on its device, else pinned host memory. */
static int entry_alloc(ckpt__undo_entry *e, int i)
{
	const char *name = ckpt_variable_name(e->var);
	if (ckpt__mem_device_alloc(e->m, i, &e->old[i], e->nbytes, name) == CKPT_OK)
		return CKPT_OK;
	ckpt_error_clear();
	e->on_host[i] = 1;
	int rc = ckpt__mem_pinned_alloc(e->m, &e->old[i], e->nbytes, name);
	if (rc < 0)
		return ckpt__fail(rc, NULL, name, -1, "restore: cannot keep the old value of '%s' (%zu bytes) while it "
			"is restored: memory provider '%s' has no room on device %d nor in pinned host memory", name,
			e->nbytes, e->m->caps.name, e->m->devices[i]);
	return CKPT_OK;
}

/* Enqueue the copies of e's old values. */
static int entry_save(ckpt__undo_entry *e)
{
	const char *name = ckpt_variable_name(e->var);
	int rc = CKPT_OK;
	for (int i = 0; i < e->nold && rc == CKPT_OK; i++) {
		const void *live = ckpt__variable_data(e->var, i);
		rc = e->on_host[i] ? ckpt__mem_d2h(e->m, i, e->old[i], live, e->nbytes, name)
			: ckpt__mem_d2d(e->m, i, e->old[i], i, live, e->nbytes, name);
	}
	return rc;
}

/* Synchronize every queue of every distinct memory among the entries; the first failure. */
static int sync_entries(const ckpt__device_undo *u, const unsigned char *only)
{
	int first = CKPT_OK;
	ckpt__error_slot err = { 0 };
	for (size_t i = 0; i < u->n; i++) {
		if (only && !only[i])
			continue;
		int seen = 0; /* strategies are few: a backward scan finds an earlier entry of the same memory */
		for (size_t j = 0; j < i && !seen; j++)
			seen = u->e[j].m == u->e[i].m && (!only || only[j]);
		if (seen)
			continue;
		int rc = ckpt__mem_sync_all(u->e[i].m, ckpt_variable_name(u->e[i].var));
		if (rc < 0 && first == CKPT_OK) {
			first = rc;
			ckpt__error_capture(&err);
		}
	}
	if (first < 0)
		ckpt__error_raise(&err);
	ckpt__error_slot_clear(&err);
	return first;
}

int ckpt__device_undo_keep(ckpt__device_undo *u, ckpt_variable *const *vars, size_t n)
{
	memset(u, 0, sizeof(*u));
	size_t count = 0;
	for (size_t i = 0; i < n; i++)
		count += ckpt__variable_on_device(vars[i]) && ckpt_variable_nbytes(vars[i]) > 0;
	if (!count)
		return CKPT_OK;
	if (!(u->e = ckpt__calloc(count, sizeof(*u->e))))
		return CKPT_ENOMEM;
	int rc = CKPT_OK;
	for (size_t i = 0; i < n && rc == CKPT_OK; i++) {
		ckpt_variable *v = vars[i];
		if (!ckpt__variable_on_device(v) || ckpt_variable_nbytes(v) == 0)
			continue;
		ckpt__undo_entry *e = &u->e[u->n++];
		e->var = v;
		e->m = ckpt__strategy_mem(ckpt_variable_strategy(v));
		e->nbytes = (size_t)ckpt_variable_nbytes(v);
		e->nold = ckpt_variable_kind(v) == CKPT_VAR_SYNC_ON_READ ? ckpt_variable_num_replicas(v) : 1;
		e->old = ckpt__calloc((size_t)e->nold, sizeof(*e->old));
		e->on_host = ckpt__calloc((size_t)e->nold, 1);
		if (!e->old || !e->on_host)
			rc = CKPT_ENOMEM;
		for (int r = 0; r < e->nold && rc == CKPT_OK; r++)
			rc = entry_alloc(e, r);
	}
	for (size_t i = 0; i < u->n && rc == CKPT_OK; i++)
		rc = entry_save(&u->e[i]);
	/* every queue, even after a failed enqueue: nothing may still be in flight on return */
	int src = sync_entries(u, NULL);
	if (rc == CKPT_OK)
		rc = src;
	if (rc == CKPT_OK)
		rc = ckpt__sort(u->e, u->n, sizeof(*u->e), cmp_entry);
	if (rc < 0)
		ckpt__device_undo_free(u);
	return rc;
}

void ckpt__device_undo_touch(ckpt__device_undo *u, const ckpt_variable *v)
{
	size_t lo = 0, hi = u->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if ((uintptr_t)u->e[mid].var < (uintptr_t)v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < u->n && u->e[lo].var == v)
		u->e[lo].touched = 1;
}

/* Enqueue copies of e's old values into every replica. */
static int entry_restore(ckpt__undo_entry *e)
{
	const char *name = ckpt_variable_name(e->var);
	int first = CKPT_OK;
	for (int r = 0; r < ckpt_variable_num_replicas(e->var); r++) {
		int i = e->nold == 1 ? 0 : r;
		void *live = ckpt__variable_data(e->var, r);
		int rc = e->on_host[i] ? ckpt__mem_h2d(e->m, r, live, e->old[i], e->nbytes, name)
			: ckpt__mem_d2d(e->m, r, live, i, e->old[i], e->nbytes, name);
		if (rc < 0 && first == CKPT_OK)
			first = rc;
	}
	return first;
}

size_t ckpt__device_undo_rollback(ckpt__device_undo *u, const char **first)
{
	*first = NULL;
	if (!u->n)
		return 0;
	ckpt__error_slot slot = { 0 };
	ckpt__error_capture(&slot);
	unsigned char *failed = ckpt__calloc(u->n, 1), *touched = ckpt__calloc(u->n, 1);
	size_t lost = 0;
	int any = 0;
	for (size_t i = 0; i < u->n; i++) {
		if (!u->e[i].touched)
			continue;
		any = 1;
		if (touched)
			touched[i] = 1;
		if (entry_restore(&u->e[i]) < 0 && failed)
			failed[i] = 1;
	}
	/* a copy that fails at synchronize leaves its queue's copies since the last one unknown: all of them */
	int sync_failed = any && sync_entries(u, touched) < 0;
	for (size_t i = 0; i < u->n; i++) {
		if (!u->e[i].touched || !(sync_failed || !failed || !touched || failed[i]))
			continue;
		if (!lost++)
			*first = ckpt_variable_name(u->e[i].var);
	}
	ckpt__free(failed);
	ckpt__free(touched);
	ckpt__error_raise(&slot);
	ckpt__error_slot_clear(&slot);
	return lost;
}

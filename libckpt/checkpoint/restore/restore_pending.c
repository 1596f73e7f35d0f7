/*
 * Restore-on-create records (restore_pending.h): the pending children and
 * slots of one object. Only this file edits them; the restore that leaves a
 * record supplies how it is restored (ckpt__pending_ops).
 */
#include <stdint.h>
#include <string.h>
#include "restore_pending.h"
#include "restore_session.h"

static int reserve(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return CKPT_OK;
	void *p = ckpt__realloc(*arr, need * elem);
	if (!p)
		return CKPT_ENOMEM;
	*arr = p;
	*cap = need;
	return CKPT_OK;
}

int ckpt__pending_reserve(ckpt__pending *p, size_t nchild, size_t nslot)
{
	if (nchild)
		CKPT_TRY(reserve((void **)&p->child, &p->capchild, p->nchild + nchild, sizeof(*p->child)));
	if (nslot)
		CKPT_TRY(reserve((void **)&p->slot, &p->capslot, p->nslot + nslot, sizeof(*p->slot)));
	return CKPT_OK;
}

void ckpt__pending_push_child(ckpt__pending *p, char *name, ckpt__session *s, int node, const ckpt__pending_ops *ops)
{
	ckpt__session_ref(s);
	p->child[p->nchild++] = (ckpt__pending_child){ name, s, node, ops };
}

void ckpt__pending_push_slot(ckpt__pending *p, ckpt__session *s, int orig_node, char *slot_name, int slot_node,
	const ckpt__pending_ops *ops)
{
	ckpt__session_ref(s);
	p->slot[p->nslot++] = (ckpt__pending_slot){ s, orig_node, slot_name, slot_node, ops };
}

int ckpt__pending_apply_child(ckpt__pending *p, const char *name, ckpt_object *child, int fresh)
{
	/* the most recent restore wins */
	size_t found = SIZE_MAX;
	for (size_t i = p->nchild; i-- > 0;) {
		if (strcmp(p->child[i].name, name) == 0) {
			found = i;
			break;
		}
	}
	if (found == SIZE_MAX)
		return CKPT_OK;
	ckpt__pending_child pc = p->child[found];
	CKPT_TRY(pc.ops->restore_child(pc.s, pc.node, child, fresh));
	/* consumed: drop every record for this name */
	size_t j = 0;
	for (size_t i = 0; i < p->nchild; i++) {
		if (strcmp(p->child[i].name, name) == 0) {
			ckpt__session_unref(p->child[i].s);
			ckpt__free(p->child[i].name);
		} else {
			p->child[j++] = p->child[i];
		}
	}
	p->nchild = j;
	return CKPT_OK;
}

int ckpt__pending_apply_slot(ckpt__pending *p, const ckpt_variable *primary, const char *slot_name, ckpt_object *node,
	int fresh)
{
	size_t found = SIZE_MAX;
	for (size_t i = p->nslot; i-- > 0;) {
		const ckpt__pending_slot *ps = &p->slot[i];
		if (strcmp(ps->slot_name, slot_name) == 0 && ckpt__session_bound_var(ps->s, ps->orig_node) == primary) {
			found = i;
			break;
		}
	}
	if (found == SIZE_MAX)
		return CKPT_OK;
	ckpt__pending_slot ps = p->slot[found];
	CKPT_TRY(ps.ops->restore_slot(ps.s, ps.slot_node, node, fresh));
	ckpt__session_unref(ps.s);
	ckpt__free(ps.slot_name);
	memmove(&p->slot[found], &p->slot[found + 1], (p->nslot - found - 1) * sizeof(*p->slot));
	p->nslot--;
	return CKPT_OK;
}

void ckpt__pending_clear(ckpt__pending *p)
{
	for (size_t i = 0; i < p->nchild; i++) {
		ckpt__session_unref(p->child[i].s);
		ckpt__free(p->child[i].name);
	}
	for (size_t i = 0; i < p->nslot; i++) {
		ckpt__session_unref(p->slot[i].s);
		ckpt__free(p->slot[i].slot_name);
	}
	p->nchild = p->nslot = 0;
}

void ckpt__pending_free(ckpt__pending *p)
{
	ckpt__pending_clear(p);
	ckpt__free(p->child);
	ckpt__free(p->slot);
	memset(p, 0, sizeof(*p));
}

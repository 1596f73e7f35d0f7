/*
 * Partitioned variables in a checkpoint: the ones a save / restore handles,
 * the single-process write and the staged, range-reading restore.
 */
#include <stdio.h>
#include <string.h>
#include "partitioned_internal.h"
#include "model/strategy_impl.h"
#include "model/variable_internal.h"
#include "reader/format_registry.h"

int ckpt__partitioned_refs(ckpt__parted_ref **out, size_t *n, const ckpt_checkpoint *ck, const ckpt__plan *plan)
{
	*out = NULL;
	*n = 0;
	size_t total = ck->nparted;
	for (size_t i = 0; i < plan->n; i++)
		total += plan->nodes[i].obj->parted != NULL;
	if (!total)
		return CKPT_OK;
	ckpt__parted_ref *r = ckpt__calloc(total, sizeof(*r));
	if (!r)
		return CKPT_ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < ck->nparted; i++)
		r[k++] = (ckpt__parted_ref){ ck->parted[i], ck->parted[i]->name };
	for (size_t i = 0; i < plan->n; i++)
		if (plan->nodes[i].obj->parted)
			r[k++] = (ckpt__parted_ref){ plan->nodes[i].obj->parted, plan->nodes[i].parted_key };
	*out = r;
	*n = k;
	return CKPT_OK;
}

/* ---- save (single process: every part is local) ---- */

int ckpt__partitioned_write(ckpt_writer *w, const ckpt__parted_ref *refs, size_t nrefs)
{
	for (size_t k = 0; k < nrefs; k++) {
		ckpt_partitioned *p = refs[k].p;
		const void **data = ckpt__calloc((size_t)p->nparts, sizeof(*data));
		void **host = ckpt__calloc((size_t)p->nparts, sizeof(*host)); /* device parts' copies */
		int rc = data && host ? CKPT_OK : CKPT_ENOMEM;
		for (int i = 0; i < p->nparts && rc == CKPT_OK; i++) {
			if (!p->part[i]) {
				rc = ckpt__fail(CKPT_EINVAL, NULL, p->name, -1, "part %d is held by worker %d", i,
					ckpt_partitioned_owner(p, i));
			} else if (ckpt__variable_on_device(p->part[i])) {
				/* a part in device memory: replica 0 through its provider */
				size_t nb = (size_t)ckpt_variable_nbytes(p->part[i]);
				if (!(host[i] = ckpt__malloc(nb ? nb : 1)))
					rc = ckpt__fail(CKPT_ENOMEM, NULL, p->name, -1, "no host memory for part %d of '%s'", i, p->name);
				else
					rc = ckpt__variable_read_copy(p->part[i], 0, host[i]);
				data[i] = host[i];
			} else {
				data[i] = ckpt_variable_replica_data(p->part[i], 0);
			}
		}
		if (rc == CKPT_OK)
			rc = ckpt__writer_add_partitioned(w, refs[k].key, p->dtype, &p->shape, p->nparts, p->row0, p->rows, data);
		for (int i = 0; host && i < p->nparts; i++)
			ckpt__free(host[i]);
		ckpt__free(host);
		ckpt__free(data);
		CKPT_TRY(rc);
	}
	return CKPT_OK;
}

/* ---- restore ---- */

struct ckpt__partitioned_restore {
	size_t n;
	ckpt_partitioned **p;
	void ***bufs;            /* per variable, per part: its staged rows (NULL: not held here) */
};

/* The message names the variable and, when it differs, the key. */
static const char *what(const ckpt_partitioned *p, const char *key, char *buf, size_t n)
{
	if (strcmp(p->name, key) == 0)
		snprintf(buf, n, "partitioned variable '%s'", p->name);
	else
		snprintf(buf, n, "partitioned variable '%s' (key '%s')", p->name, key);
	return buf;
}

void ckpt__partitioned_restore_free(ckpt__partitioned_restore *pr)
{
	if (!pr)
		return;
	for (size_t k = 0; k < pr->n; k++) {
		for (int i = 0; pr->bufs && pr->bufs[k] && i < pr->p[k]->nparts; i++)
			ckpt__buffer_free(pr->bufs[k][i]);
		if (pr->bufs)
			ckpt__free(pr->bufs[k]);
	}
	ckpt__free(pr->bufs);
	ckpt__free(pr->p);
	ckpt__free(pr);
}

/* The rows of every part of `p` held here, from entry `idx`. */
static int stage_one(ckpt__partitioned_restore *pr, size_t k, const char *key, ckpt_reader *rd, size_t idx,
	ckpt__row_pieces *pcs)
{
	ckpt_partitioned *p = pr->p[k];
	const ckpt_var_info *v = ckpt_reader_var(rd, idx);
	char a[160], b[160], w[400];
	if (v->dtype != p->dtype || !ckpt_shape_equal(&v->shape, &p->shape)) {
		ckpt_shape_format(&v->shape, a, sizeof(a));
		ckpt_shape_format(&p->shape, b, sizeof(b));
		return ckpt__fail(CKPT_EMISMATCH, ckpt_reader_path(rd), key, -1, "%s is %s %s, the checkpoint holds %s %s",
			what(p, key, w, sizeof(w)), ckpt_dtype_name(p->dtype), b, ckpt_dtype_name(v->dtype), a);
	}
	if (!(pr->bufs[k] = ckpt__calloc((size_t)p->nparts, sizeof(void *))))
		return CKPT_ENOMEM;
	for (int i = 0; i < p->nparts; i++) {
		if (!p->part[i])
			continue;
		uint64_t nb = ckpt_variable_nbytes(p->part[i]);
		if (!(pr->bufs[k][i] = ckpt__buffer_alloc(nb, 0)))
			return CKPT_ENOMEM;
		CKPT_TRY(ckpt__reader_read_rows(rd, idx, p->row0[i], p->rows[i], pr->bufs[k][i], (size_t)nb, pcs));
	}
	return CKPT_OK;
}

/* Every process's pieces (each blob: int32 status, then its pieces); verified unless one process failed. */
static int verify_everywhere(ckpt_strategy *cs, ckpt_reader *rd, ckpt__row_pieces *pcs, int rc)
{
	size_t mine = sizeof(int32_t) + pcs->n * sizeof(ckpt__row_piece);
	unsigned char *blob = ckpt__malloc(mine);
	int32_t st = rc < 0 ? rc : (blob ? 0 : CKPT_ENOMEM);
	if (blob) {
		memcpy(blob, &st, sizeof(st));
		if (pcs->n)
			memcpy(blob + sizeof(st), pcs->p, pcs->n * sizeof(ckpt__row_piece));
	}
	void *all = NULL;
	size_t *lens = NULL;
	int np = 0;
	int grc = ckpt__strategy_ops_of(cs)->allgather(cs, blob, blob ? mine : 0, &all, &lens, &np);
	ckpt__free(blob);
	if (rc == CKPT_OK && st < 0)
		rc = st;
	if (rc == CKPT_OK && grc < 0)
		rc = grc;
	size_t total = 0, off = 0, npieces = 0;
	int failed = 0;
	for (int w = 0; grc == CKPT_OK && w < np; w++) {
		int32_t ws = CKPT_ERROR;
		if (lens[w] >= sizeof(ws))
			memcpy(&ws, (unsigned char *)all + total, sizeof(ws));
		failed |= ws < 0 || (lens[w] - sizeof(ws)) % sizeof(ckpt__row_piece) != 0;
		total += lens[w];
	}
	/* a failed process's own error is what the restore agrees on: no verdict over its missing pieces */
	ckpt__row_piece *ps = rc == CKPT_OK && !failed ? ckpt__calloc(total / sizeof(ckpt__row_piece) + 1, sizeof(*ps)) : NULL;
	if (rc == CKPT_OK && !failed && !ps)
		rc = CKPT_ENOMEM;
	for (int w = 0; ps && w < np; w++) {
		size_t k = (lens[w] - sizeof(int32_t)) / sizeof(ckpt__row_piece);
		if (k)
			memcpy(ps + npieces, (unsigned char *)all + off + sizeof(int32_t), k * sizeof(*ps));
		npieces += k;
		off += lens[w];
	}
	if (ps)
		rc = ckpt__row_pieces_verify(rd, ps, npieces);
	ckpt__free(ps);
	ckpt__free(all);
	ckpt__free(lens);
	return rc;
}

int ckpt__partitioned_stage(ckpt__partitioned_restore **out, ckpt_checkpoint *ck, ckpt__session *s,
	ckpt_strategy *cs, int rc)
{
	*out = NULL;
	ckpt__plan plan;
	memset(&plan, 0, sizeof(plan));
	ckpt__parted_ref *refs = NULL;
	size_t nrefs = 0;
	int prc = ckpt__plan_build(&plan, ck->root);
	if (prc == CKPT_OK)
		prc = ckpt__partitioned_refs(&refs, &nrefs, ck, &plan);
	if (prc < 0 && rc == CKPT_OK)
		rc = prc;
	/* every process has the same partitioned variables: none here, nothing collective either */
	if (prc == CKPT_OK && !nrefs) {
		ckpt__plan_free(&plan);
		return rc;
	}
	ckpt__partitioned_restore *pr = ckpt__calloc(1, sizeof(*pr));
	if (rc == CKPT_OK && !pr)
		rc = CKPT_ENOMEM;
	if (rc == CKPT_OK) {
		pr->p = ckpt__calloc(nrefs, sizeof(*pr->p));
		pr->bufs = ckpt__calloc(nrefs, sizeof(*pr->bufs));
		if (!pr->p || !pr->bufs)
			rc = CKPT_ENOMEM;
		else {
			for (size_t k = 0; k < nrefs; k++)
				pr->p[k] = refs[k].p;
			pr->n = nrefs;
		}
	}
	ckpt__row_pieces pcs = { 0 };
	for (size_t k = 0; rc == CKPT_OK && k < pr->n; k++) {
		size_t idx;
		char w[400];
		if (ckpt_reader_find(&idx, ckpt__session_reader(s), refs[k].key) < 0) {
			rc = ckpt__fail(CKPT_ENOTFOUND, ckpt__session_path(s), refs[k].key, -1, "%s is not in the checkpoint",
				what(refs[k].p, refs[k].key, w, sizeof(w)));
			break;
		}
		rc = stage_one(pr, k, refs[k].key, ckpt__session_reader(s), idx, &pcs);
		/* its stored entry is this variable's, not a value left unmatched */
		if (rc == CKPT_OK)
			ckpt__session_consume_key(s, refs[k].key);
	}
	ckpt__free(refs);
	ckpt__plan_free(&plan);
	if (cs)
		rc = verify_everywhere(cs, ckpt__session_reader(s), &pcs, rc);
	else if (rc == CKPT_OK)
		rc = ckpt__row_pieces_verify(ckpt__session_reader(s), pcs.p, pcs.n);
	ckpt__free(pcs.p);
	if (rc < 0) {
		ckpt__partitioned_restore_free(pr);
		return rc;
	}
	*out = pr;
	return CKPT_OK;
}

int ckpt__partitioned_commit(ckpt__partitioned_restore *pr)
{
	int first = CKPT_OK;
	for (size_t k = 0; pr && k < pr->n; k++)
		for (int i = 0; i < pr->p[k]->nparts; i++)
			if (pr->bufs[k][i]) {
				/* host parts cannot fail here; device parts only when the provider does */
				int rc = ckpt_variable_assign(pr->p[k]->part[i], pr->bufs[k][i],
					(size_t)ckpt_variable_nbytes(pr->p[k]->part[i]));
				if (rc < 0 && first == CKPT_OK)
					first = rc;
			}
	return first;
}

/*
 * Multi-worker checkpoint write: one logical checkpoint in TensorFlow's
 * merged layout, all or nothing across workers.
 *
 *  1. Agree on the call (path, entry count, keys) and on a temporary token
 *     (from worker 0).
 *  2. Values: a mirrored variable's copy 0 (identical on every worker); a
 *     sync-on-read one aggregated over every replica of every worker
 *     (collective, in entry order).
 *  3. Owners: entries by decreasing size go to the least-loaded worker
 *     (ties: lower rank; the object graph and scalars to worker 0), the same
 *     on every worker, so W workers write about 1/W of the bytes each, in
 *     parallel. Scalars (counters, steps) change at every save and weigh
 *     nothing: beside the graph, they leave the other workers' shards
 *     whole when nothing else changed (incremental saves link those).
 *  4. Worker k writes and fsyncs `P.data-k-of-W.tempstate<token>`, with
 *     the rows of the parts of partitioned variables it owns (part i: worker
 *     i % W) under their slice keys; worker 0 adds each one's full entry.
 *     Incremental saves (req->incremental): the bytes of its shard of the
 *     last committed save that did not change are copied by the kernel
 *     (ckpt_bundle_part_incremental), or that shard is hard-linked whole when
 *     it holds exactly this worker's values, all unchanged
 *     (ckpt_bundle_part_reuse_all); the core settles the record after.
 *  5. Every worker's outcome is exchanged: any failure → every worker
 *     removes its temporary (worker 0 all of them) and returns the failure,
 *     naming the rank.
 *  6. Worker 0 gathers every shard's index entries, writes the merged
 *     `P.index` (temporary, fsync), renames the data shards, then the index
 *     (visible from here), fsyncs the directory; its outcome is broadcast.
 * A worker killed at any point leaves no index (nothing visible) or a
 * complete checkpoint: the index is renamed after every shard is durable.
 * Shared file system assumed (as TensorFlow does): worker 0 renames the
 * other workers' files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "mw_internal.h"
#include "ckpt/sys/bundle_part.h"

#define GRAPH_KEY "_CHECKPOINTABLE_OBJECT_GRAPH"

typedef struct ent {
	uint64_t bytes;
	size_t idx;
} ent;

static int cmp_ent(const void *a, const void *b)
{
	const ent *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/* owner[i] for every entry (entry `count` = the object graph, worker 0). */
static int assign_owners(const ckpt_strategy_save_request *req, int W, int *owner)
{
	ent *e = ckpt_calloc(req->count ? req->count : 1, sizeof(*e));
	uint64_t *load = ckpt_calloc((size_t)W, sizeof(*load));
	if (!e || !load) {
		ckpt_free(e);
		ckpt_free(load);
		return CKPT_ENOMEM;
	}
	for (size_t i = 0; i < req->count; i++) {
		e[i].bytes = ckpt_variable_nbytes(req->vars[i]) + 1; /* empty ones spread too */
		e[i].idx = i;
	}
	qsort(e, req->count, sizeof(*e), cmp_ent);
	for (size_t i = 0; i < req->count; i++) {
		if (ckpt_variable_shape(req->vars[e[i].idx])->rank == 0) {
			owner[e[i].idx] = 0;
			load[0] += e[i].bytes;
			continue;
		}
		int best = 0;
		for (int w = 1; w < W; w++)
			if (load[w] < load[best])
				best = w;
		owner[e[i].idx] = best;
		load[best] += e[i].bytes;
	}
	ckpt_free(e);
	ckpt_free(load);
	return CKPT_OK;
}

/* Step 2: every entry's value as a tensor; sync-on-read aggregates are collective. */
static int entry_value(mw *m, ckpt_variable *v, int mine, ckpt_tensor **out)
{
	*out = NULL;
	ckpt_dtype dt = ckpt_variable_dtype(v);
	if (ckpt_variable_kind(v) == CKPT_VAR_SYNC_ON_READ && ckpt_strategy_method_table(ckpt_variable_strategy(v))->read) {
		ckpt_tensor *t;
		CKPT_TRY(ckpt_tensor_new(&t, dt, ckpt_variable_shape(v)));
		int rc = ckpt_variable_read(v, t->data, (size_t)t->nbytes); /* collective: every worker */
		if (rc < 0 || !mine) {
			ckpt_tensor_free(t);
			return rc;
		}
		*out = t;
		return CKPT_OK;
	}
	if (!mine)
		return CKPT_OK;
	if (dt == CKPT_DT_STRING)
		return ckpt_variable_read_tensor(out, v);
	(void)m;
	if (ckpt_variable_on_device(v)) {
		/* device copies: replica 0 through the provider into host memory */
		ckpt_tensor *t;
		CKPT_TRY(ckpt_tensor_new(&t, dt, ckpt_variable_shape(v)));
		int rc = ckpt_variable_read_copy(t->data, v, 0);
		if (rc < 0) {
			ckpt_tensor_free(t);
			return rc;
		}
		*out = t;
		return CKPT_OK;
	}
	return ckpt_tensor_wrap(out, dt, ckpt_variable_shape(v), (void *)ckpt_variable_replica_data(v, 0),
		ckpt_variable_nbytes(v));
}

static void hdr_error(mw_hdr *h, int rc)
{
	char buf[512];
	h->status = rc;
	mw_copy(h->msg, sizeof(h->msg), ckpt_error_format(ckpt_error_last(), buf, sizeof(buf)));
}

/*
 * Incremental: when every value this worker owns is unchanged since the last save, and it writes no part of a
 * partitioned variable and not the object graph, its shard of that save may be this one (a hard link):
 * 1 linked, 0 not (the values are then added as usual), or an error.
 */
static int reuse_whole_shard(mw *m, const ckpt_strategy_save_request *req, const int *owner, ckpt_bundle_part *p)
{
	if (!req->clean || m->rank == 0)
		return 0;
	for (size_t k = 0; k < req->nparted; k++)
		for (int i = 0; i < ckpt_partitioned_num_parts(req->parted[k]); i++)
			if (ckpt_partitioned_owner(req->parted[k], i) == m->rank)
				return 0;
	size_t n = 0;
	for (size_t i = 0; i < req->count; i++) {
		if (owner[i] != m->rank)
			continue;
		if (!req->clean[i])
			return 0;
		n++;
	}
	const char **keys = ckpt_calloc(n ? n : 1, sizeof(*keys));
	ckpt_tensor *t = ckpt_calloc(n ? n : 1, sizeof(*t));
	const ckpt_tensor **tp = ckpt_calloc(n ? n : 1, sizeof(*tp));
	int rc = keys && t && tp ? CKPT_OK : CKPT_ENOMEM;
	for (size_t i = 0, k = 0; rc == CKPT_OK && i < req->count; i++) {
		if (owner[i] != m->rank)
			continue;
		/* a header is all it compares: a clean value is a host copy of a fixed-size dtype */
		ckpt_variable *v = req->vars[i];
		keys[k] = req->keys[i];
		t[k].dtype = ckpt_variable_dtype(v);
		t[k].shape = *ckpt_variable_shape(v);
		t[k].nbytes = ckpt_variable_nbytes(v);
		t[k].data = (void *)ckpt_variable_replica_data(v, 0);
		tp[k] = &t[k];
		k++;
	}
	if (rc == CKPT_OK)
		rc = ckpt_bundle_part_reuse_all(p, n, keys, tp);
	ckpt_free(keys);
	ckpt_free(t);
	ckpt_free(tp);
	return rc;
}

/* Step 4 on this worker: its shard, fsynced; its entries in *blob. */
static int write_shard(mw *m, const ckpt_strategy_save_request *req, const int *owner, uint64_t token,
	void **blob, size_t *blen)
{
	ckpt_bundle_part *p = NULL;
	int rc = ckpt_bundle_part_open(&p, req->vfs, req->path, m->rank, m->size, token);
	/* incremental: this worker's shard reuses the unchanged bytes of its shard of the last save */
	int incr = 0;
	if (rc == CKPT_OK && req->incremental && (incr = ckpt_bundle_part_incremental(p, req->incremental)) < 0)
		rc = incr;
	int linked = incr > 0 ? reuse_whole_shard(m, req, owner, p) : 0;
	if (linked < 0)
		rc = linked;
	for (size_t i = 0; i < req->count; i++) {
		int mine = owner[i] == m->rank && rc == CKPT_OK && linked <= 0;
		ckpt_tensor *t = NULL;
		/* even after a local failure, take part in the collective aggregates */
		int vrc = entry_value(m, req->vars[i], mine, &t);
		if (rc == CKPT_OK && vrc < 0)
			rc = vrc;
		/* a value this worker saw no write to since that save: copied from it without reading memory */
		if (rc == CKPT_OK && t)
			rc = incr > 0 && req->clean && req->clean[i] ? ckpt_bundle_part_add_clean(p, req->keys[i], t)
				: ckpt_bundle_part_add(p, req->keys[i], t);
		ckpt_tensor_free(t);
		if (m->broken)
			break;
	}
	/* partitioned variables: each owner its parts' rows, worker 0 the full entries listing every part */
	for (size_t k = 0; k < req->nparted && rc == CKPT_OK; k++) {
		const ckpt_partitioned *pv = req->parted[k];
		int np = ckpt_partitioned_num_parts(pv);
		int64_t *row0 = ckpt_calloc((size_t)np, sizeof(int64_t)), *rows = ckpt_calloc((size_t)np, sizeof(int64_t));
		rc = row0 && rows ? CKPT_OK : CKPT_ENOMEM;
		for (int i = 0; i < np && rc == CKPT_OK; i++) {
			rc = ckpt_partitioned_part_rows(&row0[i], &rows[i], pv, i);
			if (rc < 0 || ckpt_partitioned_owner(pv, i) != m->rank)
				continue;
			ckpt_variable *part = ckpt_partitioned_part(pv, i);
			ckpt_tensor *t = NULL;
			rc = ckpt_tensor_wrap(&t, ckpt_variable_dtype(part), ckpt_variable_shape(part),
				(void *)ckpt_variable_replica_data(part, 0), ckpt_variable_nbytes(part));
			if (rc == CKPT_OK)
				rc = ckpt_bundle_part_add_slice(p, req->parted_keys[k], ckpt_partitioned_shape(pv), row0[i], t);
			ckpt_tensor_free(t);
		}
		if (rc == CKPT_OK && m->rank == 0)
			rc = ckpt_bundle_part_add_partitioned_entry(p, req->parted_keys[k], ckpt_partitioned_dtype(pv),
				ckpt_partitioned_shape(pv), np, row0, rows);
		ckpt_free(row0);
		ckpt_free(rows);
	}
	if (rc == CKPT_OK && m->rank == 0 && req->graph) {
		void *g = NULL;
		size_t gn = 0;
		rc = ckpt_object_graph_serialize(&g, &gn, req->graph);
		if (rc == CKPT_OK) {
			ckpt_bytes b = { gn, g };
			ckpt_tensor t;
			memset(&t, 0, sizeof(t));
			t.dtype = CKPT_DT_STRING;
			t.nbytes = gn;
			t.data = &b;
			rc = ckpt_bundle_part_add(p, GRAPH_KEY, &t);
		}
		free(g);
	}
	if (rc == CKPT_OK)
		rc = ckpt_bundle_part_finish(blob, blen, p, req->no_fsync);
	ckpt_bundle_part_free(p);
	return rc;
}

static uint64_t fresh_token(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	x ^= (uint64_t)getpid() << 40;
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Step 6 (worker 0): gather entry lists, merge, commit. */
static int gather_and_commit(mw *m, const ckpt_strategy_save_request *req, uint64_t token, void *blob, size_t blen)
{
	int W = m->size;
	int mylen = (int)blen;
	int *lens = m->rank == 0 ? ckpt_calloc((size_t)W, sizeof(int)) : NULL;
	int *disp = m->rank == 0 ? ckpt_calloc((size_t)W, sizeof(int)) : NULL;
	int err = MPI_Gather(&mylen, 1, MPI_INT, lens, 1, MPI_INT, 0, m->comm);
	if (err != MPI_SUCCESS)
		return mw_mpi_fail(m, err, "MPI_Gather");
	unsigned char *all = NULL;
	int rc = CKPT_OK;
	size_t total = 0;
	if (m->rank == 0) {
		for (int w = 0; w < W; w++) {
			disp[w] = (int)total;
			total += (size_t)lens[w];
		}
		all = ckpt_malloc(total + 1);
	}
	err = MPI_Gatherv(blob, mylen, MPI_BYTE, all, lens, disp, MPI_BYTE, 0, m->comm);
	if (err != MPI_SUCCESS)
		rc = mw_mpi_fail(m, err, "MPI_Gatherv");
	if (m->rank == 0 && rc == CKPT_OK) {
		const void **parts = ckpt_calloc((size_t)W, sizeof(*parts));
		size_t *plens = ckpt_calloc((size_t)W, sizeof(*plens));
		rc = parts && plens && all ? CKPT_OK : CKPT_ENOMEM;
		for (int w = 0; w < W && rc == CKPT_OK; w++) {
			parts[w] = all + disp[w];
			plens[w] = (size_t)lens[w];
		}
		if (rc == CKPT_OK)
			rc = ckpt_bundle_merge_commit(req->vfs, req->path, W, token, parts, plens, req->no_fsync);
		ckpt_free(parts);
		ckpt_free(plens);
	}
	ckpt_free(all);
	ckpt_free(lens);
	ckpt_free(disp);
	/* worker 0's outcome, to everyone */
	mw_hdr h;
	mw_hdr_init(m, &h, MW_SAVE_DONE, "");
	if (m->rank == 0 && rc < 0)
		hdr_error(&h, rc);
	err = MPI_Bcast(&h, (int)sizeof(h), MPI_BYTE, 0, m->comm);
	if (err != MPI_SUCCESS)
		return mw_mpi_fail(m, err, "MPI_Bcast");
	if (m->rank != 0 && h.status < 0)
		return ckpt_error_set(h.status, req->path, NULL, -1, "worker 0 of %s could not commit: %s",
			ckpt_strategy_describe(m->self), h.msg);
	return rc;
}

int mw_write(ckpt_strategy *s, const ckpt_strategy_save_request *req)
{
	mw *m = mw_of(s);
	mw_hdr h;
	/* a memory tier piece goes to each worker's own node: the paths differ, the call does not */
	mw_hdr_init(m, &h, MW_SAVE, req->piece ? "(memory tier piece)" : req->path);
	h.n = req->count;
	h.h2 = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < req->count; i++)
		h.h2 = mw_hash(h.h2, req->keys[i]);
	/* the same partitioned variables, split alike, on every worker */
	for (size_t k = 0; k < req->nparted; k++) {
		char d[64];
		snprintf(d, sizeof(d), "/%d parts", ckpt_partitioned_num_parts(req->parted[k]));
		h.h2 = mw_hash(mw_hash(h.h2, req->parted_keys[k]), d);
	}
	CKPT_TRY(mw_exchange(m, &h));
	uint64_t token = m->rank == 0 ? fresh_token() : 0;
	int err = MPI_Bcast(&token, 1, MPI_UINT64_T, 0, m->comm);
	if (err != MPI_SUCCESS)
		return mw_mpi_fail(m, err, "MPI_Bcast");

	int *owner = ckpt_calloc(req->count ? req->count : 1, sizeof(*owner));
	int rc = owner ? assign_owners(req, m->size, owner) : CKPT_ENOMEM;
	void *blob = NULL;
	size_t blen = 0;
	if (rc == CKPT_OK) {
		rc = write_shard(m, req, owner, token, &blob, &blen);
	} else {
		/* take part in the aggregates anyway */
		for (size_t i = 0; i < req->count && !m->broken; i++) {
			ckpt_tensor *t = NULL;
			entry_value(m, req->vars[i], 0, &t);
		}
	}
	ckpt_free(owner);
	if (m->broken) {
		ckpt_free(blob);
		ckpt_bundle_part_discard(req->vfs, req->path, m->rank, m->size, token);
		return rc < 0 ? rc : ckpt_error_set(CKPT_ESCOPE, NULL, NULL, -1, "%s", m->broken_msg);
	}
	if (rc == CKPT_OK && blen > (size_t)1 << 30)
		rc = ckpt_error_set(CKPT_ELIMIT, req->path, NULL, -1, "shard %d has too many index entries", m->rank);
	/* step 5: every worker's outcome */
	mw_hdr_init(m, &h, MW_SAVE_DONE, req->piece ? "(memory tier piece)" : req->path);
	if (rc < 0)
		hdr_error(&h, rc);
	rc = mw_exchange(m, &h);
	if (rc < 0) {
		ckpt_free(blob);
		ckpt_bundle_part_discard(req->vfs, req->path, m->rank, m->size, token);
		if (m->rank == 0 && !req->piece)
			for (int w = 1; w < m->size; w++)
				ckpt_bundle_part_discard(req->vfs, req->path, w, m->size, token);
		return rc;
	}
	if (req->piece) {
		/* the memory tier merges and commits on each node itself (manager/tier/tier_mw.c) */
		req->piece->entries = blob;
		req->piece->entries_len = blen;
		req->piece->token = token;
		return CKPT_OK;
	}
	rc = gather_and_commit(m, req, token, blob, blen);
	ckpt_free(blob);
	return rc;
}

/*
 * The multi-worker strategy: construction, the header exchange every
 * collective call starts with (mw_internal.h), collective creation with
 * worker 0's initial value, barrier, and the agreed status of runs, restores
 * and manager calls.
 */
#include <stdio.h>
#include <string.h>
#include "mw_internal.h"

#define MW_MAX_REPLICAS MW_LOCAL_MAX

uint64_t mw_hash(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h ^ 0xff; /* a separator, so "ab"+"c" != "a"+"bc" */
}

void mw_describe(const ckpt_variable *v, char *buf, size_t n)
{
	char shp[96];
	ckpt_shape_format(ckpt_variable_shape(v), shp, sizeof(shp));
	snprintf(buf, n, "'%.80s' %.12s %.40s %.12s", ckpt_variable_name(v), ckpt_dtype_name(ckpt_variable_dtype(v)), shp,
		ckpt_var_kind_name(ckpt_variable_kind(v)));
}

int mw_mpi_fail(mw *m, int err, const char *call)
{
	char es[MPI_MAX_ERROR_STRING];
	int len = 0;
	es[0] = '\0';
	MPI_Error_string(err, es, &len);
	return ckpt_error_set(CKPT_EIO, NULL, NULL, -1, "worker %d of %s: %s failed: %s", m->rank,
		ckpt_strategy_describe(m->self), call, es);
}

void mw_hdr_init(mw *m, mw_hdr *h, int op, const char *what)
{
	memset(h, 0, sizeof(*h));
	h->op = op;
	h->seq = m->created;
	h->hash = m->hash;
	mw_copy(h->what, sizeof(h->what), what ? what : "");
	mw_copy(h->last, sizeof(h->last), m->last);
}

static const char *op_name(int op)
{
	switch (op) {
	case MW_CREATE: return "creates variable";
	case MW_REDUCE: return "calls all-reduce";
	case MW_BARRIER: return "calls barrier";
	case MW_RUN_END: return "ends ckpt_strategy_run";
	case MW_READ: return "reads sync-on-read variable";
	case MW_SAVE: return "saves checkpoint";
	case MW_SAVE_DONE: return "finishes its checkpoint shard";
	case MW_AGREE: return "agrees on a restore / manager status";
	case MW_GATHER: return "gathers restore checksums";
	case MW_EXCHANGE: return "exchanges memory tier pieces";
	default: return "?";
	}
}

/* Where workers 0 and w disagree, as a message; 0 when they agree. */
static int differ(const mw_hdr *a, const mw_hdr *b, int w, char *msg, size_t n)
{
	if (a->seq != b->seq || a->hash != b->hash) {
		if (a->seq == b->seq)
			snprintf(msg, n, "worker 0 and worker %d created different variables (%llu each; "
				"last on worker 0: %s, on worker %d: %s)", w, (unsigned long long)a->seq,
				a->last, w, b->last);
		else
			snprintf(msg, n, "worker 0 has created %llu variable(s) (last %s), worker %d %llu (last %s)",
				(unsigned long long)a->seq, a->last[0] ? a->last : "none", w,
				(unsigned long long)b->seq, b->last[0] ? b->last : "none");
		return 1;
	}
	if (a->op != b->op) {
		snprintf(msg, n, "worker 0 %s %s while worker %d %s %s", op_name(a->op), a->what, w,
			op_name(b->op), b->what);
		return 1;
	}
	if (a->op == MW_CREATE && strcmp(a->what, b->what) != 0) {
		snprintf(msg, n, "variable #%llu differs: worker 0 creates %s, worker %d creates %s",
			(unsigned long long)a->seq + 1, a->what, w, b->what);
		return 1;
	}
	if (a->n != b->n || a->kind != b->kind || a->h2 != b->h2 || strcmp(a->what, b->what) != 0) {
		snprintf(msg, n, "worker 0 %s %s (%llu, kind %d) but worker %d %s %s (%llu, kind %d)",
			op_name(a->op), a->what, (unsigned long long)a->n, a->kind, w, op_name(b->op), b->what,
			(unsigned long long)b->n, b->kind);
		return 1;
	}
	return 0;
}

static int broken_error(mw *m)
{
	return ckpt_error_set(CKPT_ESCOPE, NULL, NULL, -1, "%s", m->broken_msg);
}

int mw_exchange(mw *m, mw_hdr *h)
{
	if (m->broken)
		return broken_error(m);
	int err = MPI_Allgather(h, (int)sizeof(*h), MPI_BYTE, m->all, (int)sizeof(*h), MPI_BYTE, m->comm);
	if (err != MPI_SUCCESS) {
		/* the call sequences may no longer line up */
		m->broken = 1;
		mw_mpi_fail(m, err, "MPI_Allgather");
		mw_copy(m->broken_msg, sizeof(m->broken_msg), mw_last_message());
		return CKPT_EIO;
	}
	char why[512];
	for (int w = 1; w < m->size; w++)
		if (differ(&m->all[0], &m->all[w], w, why, sizeof(why))) {
			m->broken = 1;
			snprintf(m->broken_msg, sizeof(m->broken_msg),
				"%s: the workers disagree: %s; every worker must create the same variables in "
				"the same order and make the same collective calls", ckpt_strategy_describe(m->self), why);
			return broken_error(m);
		}
	for (int w = 0; w < m->size; w++)
		if (m->all[w].status < 0) {
			/* where the failure began: a worker that relays another's passes on the other's message */
			int origin = m->all[w].relayed > 0 ? m->all[w].relayed - 1 : w;
			if (w == m->rank || (origin == m->rank && h->status < 0 && !h->relayed))
				return h->status; /* this worker's own error is already the last error */
			int rc = ckpt_error_set(m->all[w].status, NULL, NULL, -1, "worker %d of %s failed: %s", origin,
				ckpt_strategy_describe(m->self), m->all[w].msg);
			m->relay_origin = origin;
			mw_copy(m->relay_msg, sizeof(m->relay_msg), m->all[w].msg);
			mw_copy(m->relay_text, sizeof(m->relay_text), mw_last_message());
			return rc;
		}
	return CKPT_OK;
}

void mw_hdr_status(mw *m, mw_hdr *h, int rc)
{
	h->status = rc < 0 ? rc : 0;
	if (rc < 0) {
		char buf[512];
		const ckpt_error *e = ckpt_error_last();
		if (e->code == rc && m->relay_text[0] && e->message && strcmp(e->message, m->relay_text) == 0) {
			h->relayed = m->relay_origin + 1;
			mw_copy(h->msg, sizeof(h->msg), m->relay_msg);
			return;
		}
		if (e->code == rc)
			ckpt_error_format(e, buf, sizeof(buf));
		else
			mw_copy(buf, sizeof(buf), ckpt_status_name(rc));
		mw_copy(h->msg, sizeof(h->msg), buf);
	}
}

int mw_agree(ckpt_strategy *s, int rc)
{
	mw *m = mw_of(s);
	mw_hdr h;
	mw_hdr_init(m, &h, MW_AGREE, "");
	mw_hdr_status(m, &h, rc);
	if (m->broken)
		return rc < 0 ? rc : broken_error(m);
	return mw_exchange(m, &h);
}

static int mw_run_end(ckpt_strategy *s, int rc)
{
	mw *m = mw_of(s);
	if (m->broken)
		return rc < 0 ? rc : broken_error(m);
	mw_hdr h;
	mw_hdr_init(m, &h, MW_RUN_END, "");
	mw_hdr_status(m, &h, rc);
	return mw_exchange(m, &h);
}

static int mw_barrier(ckpt_strategy *s)
{
	mw *m = mw_of(s);
	mw_hdr h;
	mw_hdr_init(m, &h, MW_BARRIER, "");
	/* the header exchange is itself a barrier */
	return mw_exchange(m, &h);
}

/* MPI_Bcast from worker 0 of any size, in pieces an int counts. */
static int bcast_bytes(mw *m, void *p, uint64_t n, const char *what)
{
	for (uint64_t off = 0; off < n;) {
		int k = n - off > (1u << 30) ? 1 << 30 : (int)(n - off);
		int err = MPI_Bcast((unsigned char *)p + off, k, MPI_BYTE, 0, m->comm);
		if (err != MPI_SUCCESS)
			return mw_mpi_fail(m, err, what);
		off += (uint64_t)k;
	}
	return CKPT_OK;
}

/* This worker's rc against every worker's: a failure anywhere fails everywhere (no header: sizes agreed). */
static int all_ok(mw *m, int rc, const char *name)
{
	int ok = rc == CKPT_OK, all = 0;
	int err = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, m->comm);
	if (err != MPI_SUCCESS)
		return rc < 0 ? rc : mw_mpi_fail(m, err, "MPI_Allreduce");
	if (!all && rc == CKPT_OK)
		return ckpt_error_set(CKPT_ENOMEM, NULL, name, -1,
			"initial value of string variable '%s': another worker of %s ran out of memory", name,
			ckpt_strategy_describe(m->self));
	return rc;
}

/*
 * Worker 0's string value to every worker: the element lengths, then their
 * bytes; the others assign it (staged: a failure changes nothing). Every
 * step's outcome is agreed, so all workers create the variable or none.
 */
static int bcast_strings(mw *m, ckpt_variable *v, uint64_t nelem)
{
	const char *name = ckpt_variable_name(v);
	ckpt_tensor *t = NULL;
	ckpt_bytes *elems = NULL;
	char *bytes = NULL;
	uint64_t *lens = ckpt_calloc(nelem + 1, sizeof(*lens)); /* lens[nelem]: the total */
	int rc = lens ? CKPT_OK : CKPT_ENOMEM;
	if (rc == CKPT_OK && m->rank == 0 && (rc = ckpt_variable_read_tensor(&t, v)) == CKPT_OK)
		for (uint64_t i = 0; i < nelem; i++)
			lens[nelem] += lens[i] = ((const ckpt_bytes *)t->data)[i].len;
	if ((rc = all_ok(m, rc, name)) == CKPT_OK)
		rc = bcast_bytes(m, lens, (nelem + 1) * sizeof(*lens), "MPI_Bcast of string lengths");
	if (rc == CKPT_OK) {
		bytes = ckpt_malloc(lens[nelem] ? lens[nelem] : 1);
		elems = ckpt_calloc(nelem ? nelem : 1, sizeof(*elems));
		rc = all_ok(m, bytes && elems ? CKPT_OK : CKPT_ENOMEM, name);
	}
	for (uint64_t i = 0, at = 0; rc == CKPT_OK && i < nelem; at += lens[i], i++) {
		if (m->rank == 0 && lens[i])
			memcpy(bytes + at, ((const ckpt_bytes *)t->data)[i].data, lens[i]);
		elems[i] = (ckpt_bytes){ lens[i], bytes + at };
	}
	if (rc == CKPT_OK)
		rc = bcast_bytes(m, bytes, lens[nelem], "MPI_Bcast of string bytes");
	if (rc == CKPT_OK && m->rank != 0) {
		ckpt_tensor_free(t);
		t = NULL;
		rc = ckpt_tensor_new_strings(&t, ckpt_variable_shape(v), elems);
		if (rc == CKPT_OK)
			rc = ckpt_variable_assign_tensor(v, t);
	}
	if (rc != CKPT_EIO) /* an MPI failure already failed every worker */
		rc = all_ok(m, rc, name);
	ckpt_tensor_free(t);
	ckpt_free(bytes);
	ckpt_free(elems);
	ckpt_free(lens);
	return rc;
}

static int mw_on_create(ckpt_strategy *s, ckpt_variable *v, int filled)
{
	mw *m = mw_of(s);
	mw_hdr h;
	char d[160];
	mw_describe(v, d, sizeof(d));
	mw_hdr_init(m, &h, MW_CREATE, d);
	int str = ckpt_variable_dtype(v) == CKPT_DT_STRING;
	uint64_t nelem = 0;
	if (str)
		ckpt_shape_num_elements(&nelem, ckpt_variable_shape(v));
	/* a string variable's byte count is its value's: workers agree on the element count */
	h.n = str ? nelem : ckpt_variable_nbytes(v);
	h.aux = filled;
	CKPT_TRY(mw_exchange(m, &h));
	m->created++;
	m->hash = mw_hash(m->hash, d);
	mw_copy(m->last, sizeof(m->last), d);
	/* worker 0's initial value */
	if (!m->all[0].aux || m->size == 1 || (h.n == 0 && !str))
		return CKPT_OK;
	if (str)
		return bcast_strings(m, v, nelem);
	if (ckpt_variable_on_device(v)) {
		/* device copies: worker 0's copy 0 through host memory, then into every worker's copy 0 */
		void *tmp = ckpt_malloc((size_t)h.n);
		int rc = tmp ? CKPT_OK : ckpt_error_set(CKPT_ENOMEM, NULL, ckpt_variable_name(v), -1,
			"no host memory to broadcast the initial value of '%s'", ckpt_variable_name(v));
		if (rc == CKPT_OK && m->rank == 0)
			rc = ckpt_variable_read_copy(tmp, v, 0);
		/* every worker takes part in the broadcast, even after a local failure */
		int brc = bcast_bytes(m, tmp, tmp ? h.n : 0, "MPI_Bcast of an initial value");
		if (rc == CKPT_OK)
			rc = brc;
		if (rc == CKPT_OK && m->rank != 0)
			rc = ckpt_variable_write_copy(v, 0, tmp);
		ckpt_free(tmp);
		CKPT_TRY(rc);
	} else {
		CKPT_TRY(bcast_bytes(m, ckpt_variable_local_copy(v, 0), h.n, "MPI_Bcast of an initial value"));
	}
	ckpt_variable_fill_from_primary(v);
	return CKPT_OK;
}

/*
 * Every worker's bytes, in rank order. The first header exchange carries the
 * lengths (aux); a second one agrees that every worker could allocate what
 * it receives, so none enters MPI_Allgatherv without room (or alone).
 */
static int mw_allgather(ckpt_strategy *s, const void *mine, size_t n, void **all, size_t **lens, int *nprocs)
{
	mw *m = mw_of(s);
	*all = NULL;
	*lens = NULL;
	*nprocs = 0;
	mw_hdr h;
	mw_hdr_init(m, &h, MW_GATHER, "");
	if (n > (size_t)1 << 30)
		mw_hdr_status(m, &h, ckpt_error_set(CKPT_ELIMIT, NULL, NULL, -1, "allgather of %zu bytes", n));
	else
		h.aux = (int32_t)n;
	CKPT_TRY(mw_exchange(m, &h));
	size_t total = 0;
	for (int w = 0; w < m->size; w++)
		total += (size_t)m->all[w].aux;
	int *cnt = ckpt_calloc((size_t)m->size, sizeof(int)), *disp = ckpt_calloc((size_t)m->size, sizeof(int));
	size_t *l = ckpt_calloc((size_t)m->size, sizeof(size_t));
	unsigned char *buf = ckpt_malloc(total + 1);
	int rc = cnt && disp && l && buf ? CKPT_OK : CKPT_ENOMEM;
	if (rc == CKPT_OK && total > (size_t)INT32_MAX)
		rc = ckpt_error_set(CKPT_ELIMIT, NULL, NULL, -1, "allgather of %zu bytes in all", total);
	for (int w = 0, at = 0; rc == CKPT_OK && w < m->size; w++) {
		cnt[w] = m->all[w].aux;
		disp[w] = at;
		l[w] = (size_t)cnt[w];
		at += cnt[w];
	}
	mw_hdr_init(m, &h, MW_GATHER, "");
	mw_hdr_status(m, &h, rc);
	rc = mw_exchange(m, &h);
	if (rc == CKPT_OK) {
		int err = MPI_Allgatherv(mine, (int)n, MPI_BYTE, buf, cnt, disp, MPI_BYTE, m->comm);
		if (err != MPI_SUCCESS) {
			m->broken = 1;
			rc = mw_mpi_fail(m, err, "MPI_Allgatherv");
			mw_copy(m->broken_msg, sizeof(m->broken_msg), mw_last_message());
		}
	}
	ckpt_free(cnt);
	ckpt_free(disp);
	if (rc < 0) {
		ckpt_free(l);
		ckpt_free(buf);
		return rc;
	}
	*all = buf;
	*lens = l;
	*nprocs = m->size;
	return CKPT_OK;
}

static int mw_is_writer(ckpt_strategy *s)
{
	return mw_of(s)->rank == 0;
}

static void mw_destroy(ckpt_strategy *s)
{
	mw *m = mw_of(s);
	int fin = 0;
	MPI_Finalized(&fin);
	if (!fin)
		MPI_Comm_free(&m->comm);
	ckpt_free(m->all);
	ckpt_free(m->scratch);
	ckpt_free(m);
}

/*
 * A second strategy on its own duplicate of the communicator, for the
 * memory tier's background copies: its collectives never interleave with
 * the trainer's. Another thread may call MPI only at MPI_THREAD_MULTIPLE,
 * which every worker must have, or none uses one.
 */
static int mw_side_channel(ckpt_strategy *s, ckpt_strategy **side, const char **why)
{
	mw *m = mw_of(s);
	*side = NULL;
	*why = NULL;
	int level = MPI_THREAD_SINGLE;
	MPI_Query_thread(&level);
	mw_hdr h;
	mw_hdr_init(m, &h, MW_AGREE, "side channel");
	h.aux = level == MPI_THREAD_MULTIPLE;
	CKPT_TRY(mw_exchange(m, &h));
	for (int w = 0; w < m->size; w++)
		if (!m->all[w].aux) {
			*why = "MPI was initialized below MPI_THREAD_MULTIPLE on some worker (MPI_Init_thread with "
			       "MPI_THREAD_MULTIPLE lets another thread call MPI)";
			return CKPT_OK;
		}
	int rc = mw_agree(s, ckpt_strategy_multi_worker_new(side, m->comm, m->local));
	if (rc < 0) {
		ckpt_strategy_free(*side);
		*side = NULL;
	}
	return rc;
}

static const ckpt_strategy_methods multi_worker_ops = {
	.version = CKPT_STRATEGY_METHODS_VERSION,
	.name = "multi_worker",
	.kind = CKPT_STRATEGY_MULTI_WORKER,
	.on_create = mw_on_create,
	.all_reduce = mw_all_reduce,
	.barrier = mw_barrier,
	.run_end = mw_run_end,
	.read = mw_read,
	.write = mw_write,
	.agree = mw_agree,
	.restore_parts = mw_restore_parts,
	.share_staged = mw_share_staged,
	.allgather = mw_allgather,
	.is_writer = mw_is_writer,
	.destroy = mw_destroy,
	.exchange = mw_exchange_bytes,
	.side_channel = mw_side_channel,
};

int ckpt_strategy_multi_worker_new(ckpt_strategy **out, MPI_Comm comm, int local_replicas)
{
	if (!out)
		return ckpt_error_set(CKPT_EINVAL, NULL, NULL, -1, "ckpt_strategy_multi_worker_new: out is NULL");
	*out = NULL;
	int init = 0;
	MPI_Initialized(&init);
	if (!init)
		return ckpt_error_set(CKPT_EINVAL, NULL, NULL, -1,
			"ckpt_strategy_multi_worker_new: call MPI_Init (or MPI_Init_thread) first");
	mw *m = ckpt_calloc(1, sizeof(*m));
	if (!m)
		return CKPT_ENOMEM;
	int err = MPI_Comm_dup(comm, &m->comm);
	if (err != MPI_SUCCESS) {
		ckpt_free(m);
		return ckpt_error_set(CKPT_EIO, NULL, NULL, -1, "MPI_Comm_dup failed (%d)", err);
	}
	MPI_Comm_rank(m->comm, &m->rank);
	MPI_Comm_size(m->comm, &m->size);
	m->local = local_replicas;
	m->hash = 0xcbf29ce484222325ull;
	/* worker 0's choice of restore reading, so every worker stages alike */
	m->restore_mode = mw_restore_mode_from_env();
	MPI_Bcast(&m->restore_mode, 1, MPI_INT, 0, m->comm);
	int *locals = ckpt_calloc((size_t)m->size, sizeof(int));
	m->all = ckpt_calloc((size_t)m->size, sizeof(*m->all));
	int rc = locals && m->all ? CKPT_OK : CKPT_ENOMEM;
	/* every worker learns every count, so all fail alike */
	err = MPI_Allgather(&local_replicas, 1, MPI_INT, locals ? locals : &local_replicas, locals ? 1 : 0, MPI_INT, m->comm);
	if (rc == CKPT_OK && err != MPI_SUCCESS)
		rc = ckpt_error_set(CKPT_EIO, NULL, NULL, -1, "MPI_Allgather of local replica counts failed (%d)", err);
	for (int w = 0; w < m->size && rc == CKPT_OK; w++)
		if (locals[w] != local_replicas || locals[w] < 1)
			rc = ckpt_error_set(CKPT_EINVAL, NULL, NULL, -1,
				"multi-worker strategy: worker %d asks for %d local replica(s), worker %d for %d; "
				"every worker needs the same count, >= 1", m->rank, local_replicas, w, locals[w]);
	if (rc == CKPT_OK && (int64_t)m->size * local_replicas > MW_MAX_REPLICAS)
		rc = ckpt_error_set(CKPT_ELIMIT, NULL, NULL, -1, "multi-worker strategy: %d workers x %d replicas "
			"exceeds %d replicas", m->size, local_replicas, MW_MAX_REPLICAS);
	ckpt_free(locals);
	char desc[96];
	snprintf(desc, sizeof(desc), "MultiWorkerMirroredStrategy(%d worker%s x %d local replica%s, worker %d)",
		m->size, m->size == 1 ? "" : "s", local_replicas, local_replicas == 1 ? "" : "s", m->rank);
	ckpt_strategy *s = NULL;
	if (rc == CKPT_OK)
		rc = ckpt_strategy_custom_new(&s, &multi_worker_ops, m->size * local_replicas, local_replicas,
			m->rank * local_replicas, m, desc);
	if (rc < 0) {
		MPI_Comm_free(&m->comm);
		ckpt_free(m->all);
		ckpt_free(m);
		return rc;
	}
	m->self = s;
	*out = s;
	return CKPT_OK;
}

int ckpt_strategy_multi_worker_new_on(ckpt_strategy **out, MPI_Comm comm, const ckpt_memory_provider *provider,
	const int *devices, int local_replicas)
{
	ckpt_strategy *s = NULL;
	CKPT_TRY(ckpt_strategy_multi_worker_new(&s, comm, local_replicas));
	/* every worker attaches, or every worker fails (a bad table or device on one process) */
	int rc = ckpt_strategy_attach_memory(s, provider, devices);
	rc = ckpt_strategy_method_table(s)->agree(s, rc);
	if (rc < 0) {
		ckpt_strategy_free(s);
		return rc;
	}
	*out = s;
	return CKPT_OK;
}

int ckpt_multi_worker_rank(const ckpt_strategy *s)
{
	return ckpt_strategy_method_table(s) == &multi_worker_ops ? ((mw *)ckpt_strategy_impl(s))->rank : 0;
}

int ckpt_multi_worker_size(const ckpt_strategy *s)
{
	return ckpt_strategy_method_table(s) == &multi_worker_ops ? ((mw *)ckpt_strategy_impl(s))->size : 1;
}

/*
 * ckpt_strategy_run: replica context, barrier and deterministic all-reduce.
 *
 * Threads: one OpenMP thread per replica (`omp parallel num_threads(N)` with
 * dynamic adjustment off, so 8 replicas on 2 cores still get 8 threads);
 * replica 0 is the calling thread. Barriers and all-reduce block, so every
 * replica needs its own thread; when OpenMP cannot give a full team (nested
 * inside another parallel region beyond max-active-levels, thread limit),
 * the run uses one POSIX thread per replica instead. Never a serial loop:
 * that would deadlock at the first barrier.
 *
 * Barrier: a mutex/condvar barrier of the run rather than `omp barrier`, so
 * it works on both thread kinds and can be *broken*: a replica that returns
 * (fails, or forgets a barrier its peers wait in) makes every pending and
 * later barrier of the run fail instead of hanging.
 *
 * Errors: each replica clears its last error, runs, and on failure copies
 * its error into its own slot. After the run the lowest-numbered replica
 * that failed on its own (not merely because a failed peer broke a barrier)
 * is re-raised on the calling thread.
 *
 * All-reduce: each replica publishes its buffer, barrier, each reduces its
 * own contiguous chunk of elements over replicas in fixed order 0..N-1 and
 * writes the result into every replica's buffer, barrier. Results are
 * bit-identical for all replicas and independent of timing. Accumulation is
 * in the buffer's type; MEAN divides the fixed-order sum by N (not a
 * multiplication by 1/N, which rounds differently for N not a power of 2).
 *
 * Cross-process strategies (strategy_impl.h): the run holds this process's
 * local replicas; ids are global (offset + local index). Barrier and
 * all-reduce first meet locally, then local replica 0 — the calling thread,
 * so MPI_THREAD_FUNNELED suffices — runs the strategy's hook for the whole
 * process while its peers wait in a second local barrier, and every local
 * replica returns the hook's status. The run's status is agreed by run_end.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <omp.h>
#include "variable_internal.h"
#include "strategy_impl.h"
#include "device/variable_device.h"

struct run;

struct ckpt_replica_ctx {
	struct run *run;
	int id;
	int abandoned; /* a barrier failed because a peer had failed: this failure is secondary */
};

struct run {
	ckpt_strategy *strategy;
	int n;
	ckpt_replica_fn fn;
	void *arg;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	int arrived;        /* replicas waiting in the current barrier */
	int departed;       /* replicas whose fn has returned */
	unsigned gen;       /* barrier generation */
	int broken;         /* a barrier can no longer complete */
	int first_failed;   /* lowest replica that returned an error, -1 */
	int last_departed;  /* for the "returned without reaching the barrier" message */

	/* all-reduce rendezvous: valid between the two barriers of one call */
	void **bufs;
	size_t *counts;
	int *kinds;

	struct ckpt_replica_ctx *ctx;
	ckpt__error_slot *slots;
	int *rcs;

	/* cross-process hooks: local replica 0's result, for its peers */
	int coll_rc;
	ckpt__error_slot coll_err;
	int offset;         /* global id of local replica 0 */
	int global_n;

	/* POSIX fallback: start gate */
	int go;             /* 1 = run, -1 = abort (could not start every thread) */
};

static _Thread_local ckpt_replica_ctx *tls_ctx;

ckpt_replica_ctx *ckpt_replica_current(void)
{
	return tls_ctx;
}

int ckpt_replica_id(const ckpt_replica_ctx *ctx)
{
	return ctx ? ctx->run->offset + ctx->id : 0;
}

int ckpt_replica_num_replicas(const ckpt_replica_ctx *ctx)
{
	return ctx ? ctx->run->global_n : 1;
}

ckpt_strategy *ckpt_replica_strategy(const ckpt_replica_ctx *ctx)
{
	return ctx ? ctx->run->strategy : ckpt_strategy_default();
}

/* ---- barrier ---- */

/* Called with mu held: no barrier can complete once every replica has arrived or left. */
static void check_broken(struct run *r)
{
	if (r->departed > 0 && r->arrived > 0 && r->arrived + r->departed == r->n) {
		r->broken = 1;
		pthread_cond_broadcast(&r->cv);
	}
}

static int broken_error(struct ckpt_replica_ctx *ctx)
{
	struct run *r = ctx->run;
	if (r->first_failed >= 0) {
		ctx->abandoned = 1;
		return ckpt__fail(CKPT_ESCOPE, NULL, NULL, -1,
			"replica %d of %s: barrier abandoned because replica %d failed",
			ctx->id, ckpt_strategy_describe(r->strategy), r->first_failed);
	}
	return ckpt__fail(CKPT_ESCOPE, NULL, NULL, -1,
		"replica %d of %s: barrier cannot complete because replica %d returned without "
		"reaching it; every replica must make the same barrier / all-reduce calls",
		ctx->id, ckpt_strategy_describe(r->strategy), r->last_departed);
}

static int barrier(struct ckpt_replica_ctx *ctx)
{
	struct run *r = ctx->run;
	int ok;
	pthread_mutex_lock(&r->mu);
	if (r->broken) {
		ok = 0;
	} else if (++r->arrived == r->n) {
		r->arrived = 0;
		r->gen++;
		pthread_cond_broadcast(&r->cv);
		ok = 1;
	} else {
		unsigned gen = r->gen;
		check_broken(r);
		while (r->gen == gen && !r->broken)
			pthread_cond_wait(&r->cv, &r->mu);
		ok = r->gen != gen;
	}
	int rc = ok ? CKPT_OK : broken_error(ctx);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static void depart(struct run *r, int id, int rc)
{
	pthread_mutex_lock(&r->mu);
	r->departed++;
	r->last_departed = id;
	if (rc < 0 && !r->ctx[id].abandoned && (r->first_failed < 0 || id < r->first_failed))
		r->first_failed = id;
	check_broken(r);
	pthread_mutex_unlock(&r->mu);
}

static int check_ctx(ckpt_replica_ctx *ctx, const char *what)
{
	if (!ctx)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "%s: replica context is NULL", what);
	if (ctx != tls_ctx)
		return ckpt__fail(CKPT_ESCOPE, NULL, NULL, -1,
			"%s called with the context of replica %d outside that replica's thread", what, ctx->id);
	return CKPT_OK;
}

/*
 * Local replica 0 runs `hook_rc` (already computed by the caller on replica
 * 0) for the process; the second barrier hands its status to the peers.
 */
static int share_hook_result(ckpt_replica_ctx *ctx, int hook_rc)
{
	struct run *r = ctx->run;
	if (ctx->id == 0) {
		r->coll_rc = hook_rc;
		if (hook_rc < 0)
			ckpt__error_capture(&r->coll_err);
	}
	int rc = barrier(ctx);
	if (rc < 0)
		return rc;
	if (r->coll_rc < 0)
		return ctx->id == 0 ? r->coll_rc : ckpt__error_raise(&r->coll_err);
	return CKPT_OK;
}

int ckpt_replica_barrier(ckpt_replica_ctx *ctx)
{
	CKPT_TRY(check_ctx(ctx, "ckpt_replica_barrier"));
	const ckpt__strategy_ops *ops = ckpt__strategy_ops_of(ctx->run->strategy);
	int rc = barrier(ctx);
	if (!ops->barrier || rc < 0)
		return rc;
	return share_hook_result(ctx, ctx->id == 0 ? ops->barrier(ctx->run->strategy) : CKPT_OK);
}

/* ---- all-reduce ---- */

/* The chunk of [0, n) replica `id` of `k` reduces; spread evenly without overflowing n * id. */
static void chunk_of(size_t n, int id, int k, size_t *lo, size_t *hi)
{
	size_t q = n / (size_t)k, rem = n % (size_t)k, i = (size_t)id;
	*lo = q * i + (i < rem ? i : rem);
	*hi = *lo + q + (i < rem ? 1 : 0);
}

#define REDUCE_BLOCK 512

#define DEFINE_REDUCE(NAME, T) \
static void NAME(T *const *bufs, int k, size_t lo, size_t hi, int mean) \
{ \
	T acc[REDUCE_BLOCK]; \
	for (size_t b = lo; b < hi; b += REDUCE_BLOCK) { \
		size_t m = hi - b < REDUCE_BLOCK ? hi - b : REDUCE_BLOCK; \
		memcpy(acc, bufs[0] + b, m * sizeof(T)); \
		for (int r = 1; r < k; r++) { \
			const T *src = bufs[r] + b; \
			for (size_t j = 0; j < m; j++) \
				acc[j] += src[j]; \
		} \
		if (mean) \
			for (size_t j = 0; j < m; j++) \
				acc[j] /= (T)k; \
		for (int r = 0; r < k; r++) \
			memcpy(bufs[r] + b, acc, m * sizeof(T)); \
	} \
}
DEFINE_REDUCE(reduce_f32, float)
DEFINE_REDUCE(reduce_f64, double)

enum { KIND_F32 = CKPT__KIND_F32, KIND_F64 = CKPT__KIND_F64 };

/* Multi-process all-reduce: local replica 0 hands every local buffer to the strategy. */
static int cross_reduce(ckpt_replica_ctx *ctx, const ckpt__strategy_ops *ops, ckpt_reduce_op op,
	void *buf, size_t n, int kind)
{
	struct run *r = ctx->run;
	int hook_rc = CKPT_OK;
	if (ctx->id == 0) {
		/* local disagreement still takes part, so other processes fail instead of waiting */
		char why[256] = "";
		for (int i = 0; i < r->n && !why[0]; i++) {
			if (r->counts[i] == (size_t)-1)
				snprintf(why, sizeof(why), "replica %d passed invalid arguments", r->offset + i);
			else if (r->counts[i] != n || r->kinds[i] != r->kinds[0])
				snprintf(why, sizeof(why), "replicas %d and %d disagree (%zu vs %zu values, kind %d vs %d)",
					r->offset, r->offset + i, n, r->counts[i], r->kinds[0], r->kinds[i]);
		}
		hook_rc = ops->all_reduce(r->strategy, r->bufs, n, kind, op, why[0] ? why : NULL);
	}
	(void)buf;
	return share_hook_result(ctx, hook_rc);
}

/* Device replicas: the reduced host copy back into this replica's device buffer; frees the host copy. */
static int copy_back(ckpt_replica_ctx *ctx, ckpt__mem *m, void *dev, void *host, size_t nbytes, int rc)
{
	if (rc == CKPT_OK)
		rc = ckpt__mem_h2d(m, ctx->id, dev, host, nbytes, NULL);
	int src = ckpt__mem_sync(m, ctx->id, NULL);
	if (rc == CKPT_OK)
		rc = src;
	ckpt__free(host);
	return rc;
}

static int all_reduce(ckpt_replica_ctx *ctx, ckpt_reduce_op op, void *buf, size_t n, int kind)
{
	static const char *const fn_name[] = { "ckpt_replica_all_reduce_f32", "ckpt_replica_all_reduce_f64" };
	CKPT_TRY(check_ctx(ctx, fn_name[kind]));
	struct run *r = ctx->run;
	int bad = (op != CKPT_REDUCE_SUM && op != CKPT_REDUCE_MEAN) ? 1 : (!buf && n > 0) ? 2 : 0;
	/* device replicas: reduce host copies made through the provider, then copy the result back */
	ckpt__mem *m = ckpt__strategy_mem(r->strategy);
	void *dev = NULL;
	size_t nbytes = n * (kind == KIND_F32 ? sizeof(float) : sizeof(double));
	int dev_rc = CKPT_OK;
	if (!bad && n > 0 && ckpt__mem_is_device(m)) {
		dev = buf;
		buf = ckpt__malloc(nbytes);
		dev_rc = !buf ? ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "%s: no host memory for %zu bytes of replica %d",
				fn_name[kind], nbytes, ctx->id)
			: ckpt__device_read(m, ctx->id, dev, 0, buf, nbytes, NULL);
		if (dev_rc < 0)
			bad = 3;
	}
	/* even a bad call takes part in the rendezvous, so peers fail instead of waiting */
	r->bufs[ctx->id] = buf;
	r->counts[ctx->id] = bad ? (size_t)-1 : n;
	r->kinds[ctx->id] = kind * 2 + (op == CKPT_REDUCE_MEAN);
	int rc = barrier(ctx);
	const ckpt__strategy_ops *ops = ckpt__strategy_ops_of(r->strategy);
	if (ops->all_reduce && rc == CKPT_OK) {
		rc = cross_reduce(ctx, ops, op, buf, n, kind);
		return dev ? copy_back(ctx, m, dev, buf, nbytes, rc) : rc;
	}
	if (bad == 1)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "%s: unknown reduce op %d", fn_name[kind], (int)op);
	if (bad == 2)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "%s: buffer is NULL", fn_name[kind]);
	if (bad == 3) {
		ckpt__free(buf);
		return dev_rc; /* its error is still this thread's last (a passing barrier records none) */
	}
	if (rc < 0) {
		if (dev)
			ckpt__free(buf);
		return rc;
	}
	/* every replica sees the same published arguments, so all agree on failing */
	for (int i = 0; i < r->n; i++) {
		if (r->counts[i] == (size_t)-1 || r->counts[i] != n || r->kinds[i] != r->kinds[ctx->id])
			if (dev)
				ckpt__free(buf);
		if (r->counts[i] == (size_t)-1)
			return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
				"%s: replica %d passed invalid arguments", fn_name[kind], i);
		if (r->counts[i] != n || r->kinds[i] != r->kinds[ctx->id])
			return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
				"%s: replicas disagree: replica %d reduces %zu values (%s, op %d), replica %d reduces %zu (%s, op %d)",
				fn_name[kind], ctx->id, n, kind ? "f64" : "f32", (int)op,
				i, r->counts[i], (r->kinds[i] / 2) ? "f64" : "f32", r->kinds[i] % 2);
	}
	size_t lo, hi;
	chunk_of(n, ctx->id, r->n, &lo, &hi);
	if (kind == KIND_F32)
		reduce_f32((float *const *)r->bufs, r->n, lo, hi, op == CKPT_REDUCE_MEAN);
	else
		reduce_f64((double *const *)r->bufs, r->n, lo, hi, op == CKPT_REDUCE_MEAN);
	/* nobody returns (and reuses its buffer) before every chunk is written */
	rc = barrier(ctx);
	return dev ? copy_back(ctx, m, dev, buf, nbytes, rc) : rc;
}

int ckpt_replica_all_reduce_f32(ckpt_replica_ctx *ctx, ckpt_reduce_op op, float *buf, size_t n)
{
	return all_reduce(ctx, op, buf, n, KIND_F32);
}

int ckpt_replica_all_reduce_f64(ckpt_replica_ctx *ctx, ckpt_reduce_op op, double *buf, size_t n)
{
	return all_reduce(ctx, op, buf, n, KIND_F64);
}

/* ---- running replicas ---- */

static void replica_main(struct run *r, int id)
{
	struct ckpt_replica_ctx *ctx = &r->ctx[id];
	ckpt_replica_ctx *prev = tls_ctx;
	tls_ctx = ctx;
	ckpt_strategy *prev_running = ckpt__strategy_set_running(ctx->run->strategy);
	int base = ckpt__scope_replica_begin();
	ckpt_error_clear();
	int rc = r->fn(ctx, r->arg);
	if (rc > 0)
		rc = CKPT_OK;
	int left = ckpt__scope_replica_end(base);
	if (rc == CKPT_OK && left > 0)
		rc = ckpt__fail(CKPT_ESCOPE, NULL, NULL, -1,
			"replica %d of %s returned with %d strategy scope(s) still entered",
			id, ckpt_strategy_describe(r->strategy), left);
	if (rc < 0) {
		if (ckpt_error_last()->code == CKPT_OK)
			ckpt__fail(rc, NULL, NULL, -1, "replica %d of %s failed with %s",
				id, ckpt_strategy_describe(r->strategy), ckpt_status_name(rc));
		ckpt__error_capture(&r->slots[id]);
		r->slots[id].code = rc;
	}
	r->rcs[id] = rc;
	tls_ctx = prev;
	ckpt__strategy_set_running(prev_running);
	depart(r, id, rc);
}

struct thread_arg {
	struct run *run;
	int id;
};

static void *posix_replica(void *p)
{
	struct thread_arg *ta = p;
	struct run *r = ta->run;
	pthread_mutex_lock(&r->mu);
	while (r->go == 0)
		pthread_cond_wait(&r->cv, &r->mu);
	int go = r->go;
	pthread_mutex_unlock(&r->mu);
	if (go > 0)
		replica_main(r, ta->id);
	return NULL;
}

/* One POSIX thread per replica (replica 0 on the caller), for when OpenMP cannot give a full team. */
static int run_posix(struct run *r)
{
	pthread_t *th = ckpt__calloc((size_t)r->n, sizeof(*th));
	struct thread_arg *ta = ckpt__calloc((size_t)r->n, sizeof(*ta));
	if (!th || !ta) {
		ckpt__free(th);
		ckpt__free(ta);
		return CKPT_ENOMEM;
	}
	int started = 1, err = 0;
	for (int i = 1; i < r->n; i++) {
		ta[i].run = r;
		ta[i].id = i;
		err = pthread_create(&th[i], NULL, posix_replica, &ta[i]);
		if (err)
			break;
		started++;
	}
	pthread_mutex_lock(&r->mu);
	r->go = err ? -1 : 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (!err)
		replica_main(r, 0);
	for (int i = 1; i < started; i++)
		pthread_join(th[i], NULL);
	ckpt__free(th);
	ckpt__free(ta);
	if (err)
		return ckpt__fail(CKPT_ERROR, NULL, NULL, -1, "cannot start thread %d of %d for %s: %s",
			started, r->n, ckpt_strategy_describe(r->strategy), strerror(err));
	return CKPT_OK;
}

/* 1 when OpenMP gave a team of r->n threads and the replicas ran on it. */
static int run_openmp(struct run *r)
{
	if (omp_get_active_level() >= omp_get_max_active_levels() || r->n > omp_get_thread_limit())
		return 0;
	int dynamic = omp_get_dynamic();
	omp_set_dynamic(0);
	int full = 0;
	#pragma omp parallel num_threads(r->n) shared(full)
	{
		if (omp_get_num_threads() == r->n) {
			#pragma omp master
			full = 1;
			replica_main(r, omp_get_thread_num());
		}
	}
	omp_set_dynamic(dynamic);
	return full;
}

int ckpt_strategy_run(ckpt_strategy *s, ckpt_replica_fn fn, void *arg)
{
	if (!s || !fn)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_strategy_run: %s is NULL", s ? "fn" : "strategy");
	if (tls_ctx)
		return ckpt__fail(CKPT_ESCOPE, NULL, NULL, -1,
			"ckpt_strategy_run(%s) called from replica %d of %s: runs do not nest",
			ckpt_strategy_describe(s), tls_ctx->id, ckpt_strategy_describe(tls_ctx->run->strategy));
	int n = ckpt__strategy_local_replicas(s);
	struct run r;
	memset(&r, 0, sizeof(r));
	r.strategy = s;
	r.n = n;
	r.offset = ckpt__strategy_replica_offset(s);
	r.global_n = ckpt_strategy_num_replicas(s);
	r.coll_err.offset = -1;
	r.fn = fn;
	r.arg = arg;
	r.first_failed = -1;
	r.last_departed = -1;
	r.bufs = ckpt__calloc((size_t)n, sizeof(*r.bufs));
	r.counts = ckpt__calloc((size_t)n, sizeof(*r.counts));
	r.kinds = ckpt__calloc((size_t)n, sizeof(*r.kinds));
	r.ctx = ckpt__calloc((size_t)n, sizeof(*r.ctx));
	r.slots = ckpt__calloc((size_t)n, sizeof(*r.slots));
	r.rcs = ckpt__calloc((size_t)n, sizeof(*r.rcs));
	int rc = CKPT_OK;
	if (!r.bufs || !r.counts || !r.kinds || !r.ctx || !r.slots || !r.rcs) {
		rc = CKPT_ENOMEM;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		r.ctx[i].run = &r;
		r.ctx[i].id = i;
		r.slots[i].offset = -1;
	}
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	/* keep the strategy alive even if a replica frees it */
	ckpt__strategy_retain(s, CKPT__REF_RUN);
	if (n == 1)
		replica_main(&r, 0);
	else if (!run_openmp(&r))
		rc = run_posix(&r);
	ckpt__strategy_release(s, CKPT__REF_RUN);
	pthread_cond_destroy(&r.cv);
	pthread_mutex_destroy(&r.mu);
	if (rc == CKPT_OK) {
		int pick = -1;
		for (int i = 0; i < n && pick < 0; i++)
			if (r.rcs[i] < 0 && !r.ctx[i].abandoned)
				pick = i;
		for (int i = 0; i < n && pick < 0; i++)
			if (r.rcs[i] < 0)
				pick = i;
		if (pick >= 0)
			rc = ckpt__error_raise(&r.slots[pick]);
		else
			ckpt_error_clear();
	}
	/* every process returns the same status */
	if (ckpt__strategy_ops_of(s)->run_end)
		rc = ckpt__strategy_ops_of(s)->run_end(s, rc);
	ckpt__error_slot_clear(&r.coll_err);
out:
	if (r.slots)
		for (int i = 0; i < n; i++)
			ckpt__error_slot_clear(&r.slots[i]);
	ckpt__free(r.bufs);
	ckpt__free(r.counts);
	ckpt__free(r.kinds);
	ckpt__free(r.ctx);
	ckpt__free(r.slots);
	ckpt__free(r.rcs);
	return rc;
}

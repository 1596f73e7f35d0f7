/*
 * The ordered all-reduce over every replica of every worker, and the
 * sync-on-read read built on it.
 *
 * For a block of elements, worker w owns a contiguous part; every worker
 * sends worker w its local replicas' slices of that part (MPI_Alltoallv), so
 * w holds all R contributions of its part in global replica order (worker-
 * major: worker v's local replica l is replica v*L + l). It combines them
 * exactly as the in-process code does, so the bits depend only on R and the
 * values, not on how R is split into workers x local replicas, nor on
 * timing:
 *  - all-reduce (replica.c): acc = replica 0, then acc += replica 1, ...,
 *    R-1 in the element type; MEAN divides that sum by R;
 *  - sync-on-read read (variable.c, ckpt_variable_read): SUM the same; MEAN
 *    of floats sums in a wider type (double for f32, long double for f64)
 *    and rounds once; integers sum in int64 and fail with ELIMIT at the
 *    first element whose sum leaves the type (int64: any partial sum), as
 *    the single-process read does, on every worker (the lowest such element
 *    over all workers is agreed).
 * MPI_Allgatherv returns every part to every worker, which copies it into
 * its local buffers. Each worker sends and receives about (L + 1) x n
 * elements per call, like a reduce-scatter + all-gather.
 */
#include <string.h>
#include "mw_internal.h"

#define BLOCK_BYTES ((size_t)32 << 20) /* per worker per round: bounds memory and int counts */

static size_t elem_size(int kind)
{
	return kind == CKPT_REDUCE_ELEM_F32 || kind == CKPT_REDUCE_ELEM_I32 ? 4 : 8;
}

/* The part [lo, hi) of m elements worker w owns. */
static void part_of(size_t m, int w, int k, size_t *lo, size_t *hi)
{
	size_t q = m / (size_t)k, rem = m % (size_t)k, i = (size_t)w;
	*lo = q * i + (i < rem ? i : rem);
	*hi = *lo + q + (i < rem ? 1 : 0);
}

/* all-reduce: in the element type, MEAN divides the ordered sum (replica.c reduce_f32/f64) */
#define DEFINE_COMBINE(NAME, T) \
static void NAME(const unsigned char *in, int R, size_t cnt, unsigned char *out, int mean) \
{ \
	const T *src = (const T *)in; \
	T *dst = (T *)out; \
	for (size_t j = 0; j < cnt; j++) { \
		T acc = src[j]; \
		for (int r = 1; r < R; r++) \
			acc += src[(size_t)r * cnt + j]; \
		if (mean) \
			acc /= (T)R; \
		dst[j] = acc; \
	} \
}
DEFINE_COMBINE(combine_f32, float)
DEFINE_COMBINE(combine_f64, double)

/* sync-on-read read of floats: SUM in T, MEAN in the wider W rounded once (variable.c agg_f32/f64) */
#define DEFINE_COMBINE_READ(NAME, T, W) \
static void NAME(const unsigned char *in, int R, size_t cnt, unsigned char *out, int mean) \
{ \
	const T *src = (const T *)in; \
	T *dst = (T *)out; \
	for (size_t j = 0; j < cnt; j++) { \
		if (mean) { \
			W acc = src[j]; \
			for (int r = 1; r < R; r++) \
				acc += src[(size_t)r * cnt + j]; \
			dst[j] = (T)(acc / (W)R); \
		} else { \
			T acc = src[j]; \
			for (int r = 1; r < R; r++) \
				acc += src[(size_t)r * cnt + j]; \
			dst[j] = acc; \
		} \
	} \
}
DEFINE_COMBINE_READ(read_f32, float, double)
DEFINE_COMBINE_READ(read_f64, double, long double)

/* sync-on-read read of integers (variable.c agg_i32/i64); returns the first overflowing index or cnt */
static size_t read_i32(const unsigned char *in, int R, size_t cnt, unsigned char *out, int mean, int64_t *bad)
{
	const int32_t *src = (const int32_t *)(const void *)in;
	int32_t *dst = (int32_t *)(void *)out;
	for (size_t j = 0; j < cnt; j++) {
		int64_t acc = 0;
		for (int r = 0; r < R; r++)
			acc += src[(size_t)r * cnt + j];
		if (mean)
			acc /= R;
		else if (acc > INT32_MAX || acc < INT32_MIN) {
			*bad = acc;
			return j;
		}
		dst[j] = (int32_t)acc;
	}
	return cnt;
}

static size_t read_i64(const unsigned char *in, int R, size_t cnt, unsigned char *out, int mean, int64_t *bad)
{
	const int64_t *src = (const int64_t *)(const void *)in;
	int64_t *dst = (int64_t *)(void *)out;
	for (size_t j = 0; j < cnt; j++) {
		int64_t acc = 0;
		for (int r = 0; r < R; r++)
			if (__builtin_add_overflow(acc, src[(size_t)r * cnt + j], &acc)) {
				*bad = 0;
				return j;
			}
		dst[j] = mean ? acc / R : acc;
	}
	return cnt;
}

/*
 * This worker's first overflowing element (global index, UINT64_MAX: none)
 * against every worker's: the lowest wins, the same on every worker.
 */
static int agree_overflow(mw *m, uint64_t at, int64_t acc, mw_overflow *ovf)
{
	int64_t mine[2] = { (int64_t)at, acc }, all[2 * MW_LOCAL_MAX]; /* workers <= replicas <= MW_LOCAL_MAX */
	int err = MPI_Allgather(mine, 2, MPI_INT64_T, all, 2, MPI_INT64_T, m->comm);
	if (err != MPI_SUCCESS)
		return mw_mpi_fail(m, err, "MPI_Allgather");
	ovf->at = UINT64_MAX;
	for (int w = 0; w < m->size; w++)
		if ((uint64_t)all[2 * w] < ovf->at) {
			ovf->at = (uint64_t)all[2 * w];
			ovf->acc = all[2 * w + 1];
		}
	return CKPT_OK;
}

int mw_ordered_reduce(mw *m, void *const *bufs, size_t n, int kind, ckpt_reduce_op op, int as_read, mw_overflow *ovf)
{
	if (ovf)
		ovf->at = UINT64_MAX;
	const size_t es = elem_size(kind);
	const int W = m->size, L = m->local, R = W * L;
	const int mean = op == CKPT_REDUCE_MEAN;
	size_t block = BLOCK_BYTES / (es * (size_t)L);
	if (block < (size_t)W)
		block = (size_t)W;
	if (block > n)
		block = n;
	size_t mine_max = block / (size_t)W + 1;
	size_t a = (block * (size_t)L * es + 63) & ~(size_t)63, b = (mine_max * (size_t)R * es + 63) & ~(size_t)63;
	size_t c = (mine_max * es + 63) & ~(size_t)63, need = a + b + c + block * es + (size_t)W * 4 * sizeof(int);
	if (need > m->scratch_cap) {
		ckpt_free(m->scratch);
		m->scratch_cap = 0;
		m->scratch = ckpt_malloc(need);
		if (m->scratch)
			m->scratch_cap = need;
	}
	int rc = m->scratch ? CKPT_OK : CKPT_ENOMEM;
	unsigned char *send = m->scratch, *recv = send + a, *part = recv + b, *res = part + c;
	int *sc = (int *)(void *)(res + block * es); /* block * es is a multiple of 4 */
	/* a worker out of memory still takes part, or the others would wait */
	int ok = rc == CKPT_OK, all_ok = 0;
	int err = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, m->comm);
	if (err != MPI_SUCCESS)
		rc = mw_mpi_fail(m, err, "MPI_Allreduce");
	else if (!all_ok && rc == CKPT_OK)
		rc = ckpt_error_set(CKPT_ENOMEM, NULL, NULL, -1, "all-reduce of %zu values: another worker ran out of memory", n);
	int *sd = sc + W, *rcnt = sc + 2 * W, *rd = sc + 3 * W;
	for (size_t b0 = 0; b0 < n && rc == CKPT_OK; b0 += block) {
		size_t mlen = n - b0 < block ? n - b0 : block;
		size_t mylo, myhi;
		part_of(mlen, m->rank, W, &mylo, &myhi);
		size_t mine = myhi - mylo, at = 0;
		for (int w = 0; w < W; w++) {
			size_t lo, hi;
			part_of(mlen, w, W, &lo, &hi);
			sd[w] = (int)at;
			for (int l = 0; l < L; l++) {
				memcpy(send + at, (unsigned char *)bufs[l] + (b0 + lo) * es, (hi - lo) * es);
				at += (hi - lo) * es;
			}
			sc[w] = (int)(at - (size_t)sd[w]);
			rcnt[w] = (int)(mine * (size_t)L * es);
			rd[w] = w * rcnt[w];
		}
		err = MPI_Alltoallv(send, sc, sd, MPI_BYTE, recv, rcnt, rd, MPI_BYTE, m->comm);
		if (err != MPI_SUCCESS) {
			rc = mw_mpi_fail(m, err, "MPI_Alltoallv");
			break;
		}
		/* recv holds replica r's part at r * mine: worker-major order is global replica order */
		if (!as_read) {
			if (kind == CKPT_REDUCE_ELEM_F32)
				combine_f32(recv, R, mine, part, mean);
			else
				combine_f64(recv, R, mine, part, mean);
		} else if (kind == CKPT_REDUCE_ELEM_F32 || kind == CKPT_REDUCE_ELEM_F64) {
			(kind == CKPT_REDUCE_ELEM_F32 ? read_f32 : read_f64)(recv, R, mine, part, mean);
		} else {
			int64_t acc = 0;
			size_t j = (kind == CKPT_REDUCE_ELEM_I32 ? read_i32 : read_i64)(recv, R, mine, part, mean, &acc);
			rc = agree_overflow(m, j < mine ? (uint64_t)(b0 + mylo + j) : UINT64_MAX, acc, ovf);
			if (rc == CKPT_OK && ovf->at != UINT64_MAX)
				return CKPT_ELIMIT; /* the caller names the variable; the workers stay in step */
			if (rc < 0)
				break;
		}
		for (int w = 0; w < W; w++) {
			size_t lo, hi;
			part_of(mlen, w, W, &lo, &hi);
			rcnt[w] = (int)((hi - lo) * es);
			rd[w] = (int)(lo * es);
		}
		err = MPI_Allgatherv(part, (int)(mine * es), MPI_BYTE, res, rcnt, rd, MPI_BYTE, m->comm);
		if (err != MPI_SUCCESS) {
			rc = mw_mpi_fail(m, err, "MPI_Allgatherv");
			break;
		}
		for (int l = 0; l < L; l++)
			memcpy((unsigned char *)bufs[l] + b0 * es, res, mlen * es);
	}
	if (rc < 0 && rc != CKPT_ENOMEM) {
		m->broken = 1;
		mw_copy(m->broken_msg, sizeof(m->broken_msg), mw_last_message());
	}
	return rc;
}

int mw_all_reduce(ckpt_strategy *s, void *const *bufs, size_t n, int kind, ckpt_reduce_op op, const char *local_error)
{
	mw *m = mw_of(s);
	mw_hdr h;
	mw_hdr_init(m, &h, MW_REDUCE, kind == CKPT_REDUCE_ELEM_F32 ? "f32" : "f64");
	h.n = n;
	h.kind = kind * 2 + (op == CKPT_REDUCE_MEAN);
	if (local_error || (op != CKPT_REDUCE_SUM && op != CKPT_REDUCE_MEAN)) {
		h.status = CKPT_EINVAL;
		snprintf(h.msg, sizeof(h.msg), "all-reduce on worker %d: %s", m->rank,
			local_error ? local_error : "unknown reduce op");
		ckpt_error_set(CKPT_EINVAL, NULL, NULL, -1, "%s", h.msg);
	}
	CKPT_TRY(mw_exchange(m, &h));
	if (n == 0)
		return CKPT_OK;
	return mw_ordered_reduce(m, bufs, n, kind, op, 0, NULL);
}

static int kind_of(ckpt_dtype dt)
{
	switch (dt) {
	case CKPT_DT_FLOAT: return CKPT_REDUCE_ELEM_F32;
	case CKPT_DT_DOUBLE: return CKPT_REDUCE_ELEM_F64;
	case CKPT_DT_INT32: return CKPT_REDUCE_ELEM_I32;
	case CKPT_DT_INT64: return CKPT_REDUCE_ELEM_I64;
	default: return -1;
	}
}

int mw_read(ckpt_strategy *s, const ckpt_variable *v, void *dst, size_t n)
{
	mw *m = mw_of(s);
	mw_hdr h;
	char d[160];
	mw_describe(v, d, sizeof(d));
	mw_hdr_init(m, &h, MW_READ, d);
	h.n = n;
	ckpt_aggregation agg = ckpt_variable_aggregation(v);
	int kind = kind_of(ckpt_variable_dtype(v));
	int summed = agg == CKPT_AGG_SUM || agg == CKPT_AGG_MEAN;
	/* allocated before the exchange: a worker out of memory says so there instead of leaving */
	unsigned char *tmp = summed && n ? ckpt_malloc(n * (size_t)m->local) : NULL;
	if (summed && n && (!tmp || kind < 0)) {
		h.status = ckpt_error_set(tmp ? CKPT_EUNSUPPORTED : CKPT_ENOMEM, NULL, ckpt_variable_name(v), -1,
			"cannot aggregate sync-on-read variable '%s' on worker %d", ckpt_variable_name(v), m->rank);
		mw_copy(h.msg, sizeof(h.msg), mw_last_message());
	} else if (n != ckpt_variable_nbytes(v) || (!dst && n)) {
		h.status = ckpt_error_set(CKPT_EINVAL, NULL, ckpt_variable_name(v), -1,
			"read of variable '%s': want %llu bytes, got a buffer of %zu", ckpt_variable_name(v),
			(unsigned long long)ckpt_variable_nbytes(v), n);
		mw_copy(h.msg, sizeof(h.msg), mw_last_message());
	}
	int rc = mw_exchange(m, &h);
	if (rc < 0 || n == 0) {
		ckpt_free(tmp);
		return rc;
	}
	if (!summed) {
		/* ONLY_FIRST_REPLICA: global replica 0 lives on worker 0 */
		int crc = ckpt_variable_read_copy(dst, v, 0); /* device copies: through the provider */
		if (crc < 0)
			return crc;
		int err = MPI_Bcast(dst, (int)n, MPI_BYTE, 0, m->comm);
		return err == MPI_SUCCESS ? CKPT_OK : mw_mpi_fail(m, err, "MPI_Bcast");
	}
	void *bufs[MW_LOCAL_MAX];
	for (int l = 0; l < m->local; l++) {
		bufs[l] = tmp + (size_t)l * n;
		rc = ckpt_variable_read_copy(bufs[l], v, l); /* device copies: through the provider */
		if (rc < 0) {
			ckpt_free(tmp);
			return rc;
		}
	}
	mw_overflow ovf;
	rc = mw_ordered_reduce(m, bufs, n / (kind == CKPT_REDUCE_ELEM_F32 || kind == CKPT_REDUCE_ELEM_I32 ? 4 : 8), kind,
		agg == CKPT_AGG_MEAN ? CKPT_REDUCE_MEAN : CKPT_REDUCE_SUM, 1, &ovf);
	/* every worker, the single-process read's words (variable.c agg_i32 / agg_i64) */
	if (rc == CKPT_ELIMIT && ovf.at != UINT64_MAX && kind == CKPT_REDUCE_ELEM_I32)
		rc = ckpt_error_set(CKPT_ELIMIT, NULL, ckpt_variable_name(v), -1,
			"SUM of sync-on-read variable '%s' overflows int32 at element %llu (%lld)",
			ckpt_variable_name(v), (unsigned long long)ovf.at, (long long)ovf.acc);
	else if (rc == CKPT_ELIMIT && ovf.at != UINT64_MAX)
		rc = ckpt_error_set(CKPT_ELIMIT, NULL, ckpt_variable_name(v), -1,
			"%s of sync-on-read variable '%s' overflows int64 at element %llu",
			agg == CKPT_AGG_MEAN ? "MEAN" : "SUM", ckpt_variable_name(v), (unsigned long long)ovf.at);
	if (rc == CKPT_OK)
		memcpy(dst, tmp, n);
	ckpt_free(tmp);
	return rc;
}

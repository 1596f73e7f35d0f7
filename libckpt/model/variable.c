/*
 * Variables created through the current strategy: plain (1 copy), mirrored
 * and sync-on-read (one copy per replica).
 *
 * Copies are ckpt__variable_buffer_alloc buffers (packed into huge-page blocks) or
 * trainer-owned buffers (replica_buffers: zero copy, assign writes into the
 * caller's memory). Every multi-copy write (initial value, zeroing, assign,
 * assign_many) goes through one fan-out engine: the value is cut into
 * (2 MiB chunk, replica) pieces written by an OpenMP team, so replicas are
 * filled (and first-touched) in parallel rather than replica after replica.
 *
 * Sync-on-read aggregation (reads) and restore split (assigns), for
 * float32/float64/int32/int64 (other dtypes: ONLY_FIRST_REPLICA only):
 *  - read SUM: elementwise sum over replicas in fixed order 0..N-1, in the
 *    variable's type (int32 / int64 overflow: ELIMIT); MEAN: the sum in a
 *    wider type divided by N and rounded once (exact for N equal copies;
 *    integers truncate toward zero); ONLY_FIRST_REPLICA: replica 0.
 *  - assign SUM: replica 0 gets the value and the others zero, so the
 *    aggregate read back is the value bit for bit for every N. (TensorFlow
 *    divides by N instead, which is inexact unless N is a power of 2.)
 *    Floats: the others get -0.0, the identity of IEEE addition: x + -0.0
 *    is x for every x, +0.0 and -0.0 included (+0.0 would turn a stored
 *    -0.0 into +0.0). MEAN / ONLY_FIRST_REPLICA: every replica gets the
 *    value.
 * The initial value (creation) is copied into every replica unsplit.
 *
 * STRING variables (plain or mirrored only) keep one ckpt_tensor of
 * ckpt_bytes per replica (deep copies; bufs[r] is that tensor's element
 * array). They never go through the fan-out engine: values change only
 * through ckpt_variable_assign_tensor / the staged pair below, which build
 * every new copy before swapping any in, so a failure changes nothing.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include "variable_internal.h"
#include "strategy_impl.h"
#include "device/variable_device.h"
#include "wrap_registry.h"

struct ckpt_variable {
	char *name;              /* in the variable's own allocation (var_alloc), as is bufs */
	const char *origin;      /* static, or origin_owned */
	char *origin_owned;
	ckpt_dtype dtype;
	ckpt_shape shape;
	uint64_t nbytes;
	ckpt_var_kind kind;
	ckpt_aggregation agg;
	int trainable;
	ckpt_strategy *strategy; /* holds a CKPT__REF_VARIABLE reference */
	int copies;              /* local copies (this process's replicas) */
	int global_copies;       /* replicas over every process: sync-on-read SUM splits by it */
	int holds_replica0;      /* copy 0 is global replica 0 (integer SUM split keeps the value there) */
	int wrapped;             /* bufs belong to the caller */
	int wrap_registered;     /* its host bufs are in wrap_registry.c's set */
	int host;                /* host state tracked by pointer: one copy, no strategy's (ckpt/host.h) */
	int in_slab;             /* the variable's allocation is a ckpt__slab_alloc one */
	ckpt__mem *pmem;         /* the provider that allocated the copies (ckpt_strategy_mirrored_on), or NULL */
	int dev;                 /* copies are device memory: every access goes through pmem's copies */
	void **bufs;             /* copies pointers (STRING: strs[r]->data) */
	ckpt_tensor **strs;      /* STRING only: one deep copy per replica */
	_Atomic uint64_t mod_gen; /* ckpt__change_gen of the last write the library saw (or was told of) */
	int marks_writes;        /* the trainer marks its writes to caller memory (ckpt_variable_set_marks_writes) */
};

/*
 * Change detection for incremental saves: a global counter stamps every write
 * the library sees (assign, fan-out, restore, a writable pointer handed out);
 * a save takes a stamp before it reads any value, and a value stamped below
 * the stamp of the last committed save is unchanged since that save.
 */
static _Atomic uint64_t change_gen = 1;

uint64_t ckpt__change_gen(void)
{
	return atomic_fetch_add(&change_gen, 1) + 1;
}

static void mark(ckpt_variable *v)
{
	atomic_store(&v->mod_gen, ckpt__change_gen());
}

int ckpt__variable_unchanged_since(const ckpt_variable *v, uint64_t gen)
{
	if (!v || !gen || v->dev || v->kind == CKPT_VAR_SYNC_ON_READ || v->dtype == CKPT_DT_STRING)
		return 0;
	/* caller memory: the library sees no write to it unless the trainer promised to mark them */
	if (v->wrapped && !v->marks_writes)
		return 0;
	return atomic_load(&v->mod_gen) < gen;
}

int ckpt_variable_mark_dirty(ckpt_variable *v)
{
	if (!v)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_variable_mark_dirty: variable is NULL");
	mark(v);
	return CKPT_OK;
}

int ckpt_variable_set_marks_writes(ckpt_variable *v, int on)
{
	if (!v)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_variable_set_marks_writes: variable is NULL");
	mark(v); /* writes before the promise are unknown */
	v->marks_writes = on != 0;
	return CKPT_OK;
}

const char *ckpt_var_kind_name(ckpt_var_kind k)
{
	switch (k) {
	case CKPT_VAR_PLAIN: return "plain";
	case CKPT_VAR_MIRRORED: return "mirrored";
	case CKPT_VAR_SYNC_ON_READ: return "sync-on-read";
	default: return "invalid";
	}
}

static const char *agg_name(ckpt_aggregation a)
{
	switch (a) {
	case CKPT_AGG_NONE: return "NONE";
	case CKPT_AGG_SUM: return "SUM";
	case CKPT_AGG_MEAN: return "MEAN";
	case CKPT_AGG_ONLY_FIRST_REPLICA: return "ONLY_FIRST_REPLICA";
	default: return "invalid";
	}
}

/*
 * The variable, its copy pointers and its name in one allocation: loading
 * 10,000 tiny variables made five allocations for each.
 */
static ckpt_variable *var_alloc(const char *name, size_t name_len, int copies)
{
	size_t bufs_at = (sizeof(ckpt_variable) + sizeof(void *) - 1) / sizeof(void *) * sizeof(void *);
	size_t name_at = bufs_at + (size_t)copies * sizeof(void *);
	size_t total = name_at + name_len + 1;
	/* packed with other variables (util/slab.c): 10,000 tiny ones fault in a few huge pages, not 1,000 small ones */
	int in_slab = total <= CKPT__SLAB_MAX;
	unsigned char *p = in_slab ? ckpt__slab_alloc(total, 16) : ckpt__malloc(total);
	if (!p)
		return NULL;
	memset(p, 0, total);
	ckpt_variable *v = (ckpt_variable *)(void *)p;
	v->in_slab = in_slab;
	atomic_init(&v->mod_gen, ckpt__change_gen()); /* a new value: never saved */
	v->bufs = (void **)(void *)(p + bufs_at);
	v->name = (char *)p + name_at;
	memcpy(v->name, name, name_len);
	return v;
}

/* Where a variable came from, for messages: static text unless it names a strategy. */
static int set_origin(ckpt_variable *v, const ckpt_strategy *s, int mirrored, int host)
{
	if (host == 1) {
		v->origin = "host memory tracked by pointer (one copy per process, no strategy's)";
	} else if (host == 2) {
		v->origin = "as this worker's part of a partitioned variable (one copy, held by its owner only)";
	} else if (!mirrored) {
		v->origin = "outside any strategy scope";
	} else {
		v->origin = v->origin_owned = ckpt__asprintf("inside %s scope", ckpt_strategy_describe(s));
		if (!v->origin_owned)
			return CKPT_ENOMEM;
	}
	return CKPT_OK;
}

static int summable(ckpt_dtype dt)
{
	return dt == CKPT_DT_FLOAT || dt == CKPT_DT_DOUBLE || dt == CKPT_DT_INT32 || dt == CKPT_DT_INT64;
}

/* ---- fan-out engine ---- */

typedef enum {
	FILL_COPY,      /* every copy = src */
	FILL_ZERO,      /* every copy = 0 */
	FILL_SPLIT_F32, /* copy 0 = src, others = -0.0f */
	FILL_SPLIT_F64, /* copy 0 = src, others = -0.0 */
	FILL_SPLIT_INT  /* copy 0 = src, others = 0 */
} fill_mode;

typedef struct {
	ckpt_variable *v;
	const unsigned char *src; /* whole value (offset applied when writing) */
	size_t off, len;
	fill_mode mode;
	int copy;                 /* the copy to write, or -1: all, copy 0 last */
} piece;

#define PIECE_BYTES ((size_t)2 << 20)   /* one huge page: one thread faults it */
#define PIECE_BATCH 1024
#define PARALLEL_MIN_BYTES ((uint64_t)4 << 20)

static void apply_piece(const piece *p)
{
	ckpt_variable *v = p->v;
	int n = v->copies;
	const unsigned char *src = p->src ? p->src + p->off : NULL;
	int hi = p->copy < 0 ? n - 1 : p->copy, lo = p->copy < 0 ? 0 : p->copy;
	/* copy 0 last: ckpt__variable_broadcast_primary passes copy 0 as src */
	for (int r = hi; r >= lo; r--) {
		unsigned char *dst = (unsigned char *)v->bufs[r] + p->off;
		switch (p->mode) {
		case FILL_COPY:
			if (dst != src)
				memcpy(dst, src, p->len);
			break;
		case FILL_ZERO:
			memset(dst, 0, p->len);
			break;
		case FILL_SPLIT_INT:
		case FILL_SPLIT_F32:
		case FILL_SPLIT_F64:
			/* the value in global replica 0's copy, zero (-0.0: x + -0.0 == x bit for bit) elsewhere */
			if (r == 0 && v->holds_replica0) {
				if (dst != src)
					memcpy(dst, src, p->len);
			} else if (p->mode == FILL_SPLIT_INT) {
				memset(dst, 0, p->len);
			} else if (p->mode == FILL_SPLIT_F32) {
				const float nz = -0.0f;
				for (size_t i = 0; i < p->len; i += sizeof(float))
					memcpy(dst + i, &nz, sizeof(nz));
			} else {
				const double nz = -0.0;
				for (size_t i = 0; i < p->len; i += sizeof(double))
					memcpy(dst + i, &nz, sizeof(nz));
			}
			break;
		}
	}
}

static void run_pieces(const piece *p, size_t count, uint64_t bytes)
{
	if (count > 1 && bytes >= PARALLEL_MIN_BYTES && omp_get_max_threads() > 1) {
		long nc = (long)count;
		#pragma omp parallel for schedule(dynamic, 1)
		for (long i = 0; i < nc; i++)
			apply_piece(&p[i]);
	} else {
		for (size_t i = 0; i < count; i++)
			apply_piece(&p[i]);
	}
}

typedef struct {
	piece *batch;      /* cap pieces: a small stack array for one variable, PIECE_BATCH for many */
	size_t cap, count;
	uint64_t bytes;
} fanout;

/* Pieces one variable's write queues before flushing (on the stack: no allocation per variable). */
#define LOCAL_BATCH 64

static void fanout_flush(fanout *f)
{
	run_pieces(f->batch, f->count, f->bytes);
	f->count = 0;
	f->bytes = 0;
}

/*
 * Queue the pieces of one variable: one per (2 MiB chunk, copy), so even a
 * single variable spreads over the team; when the source is copy 0 itself
 * (broadcast), one per chunk writing every copy with copy 0 last.
 */
static void fanout_add(fanout *f, ckpt_variable *v, const void *src, fill_mode mode)
{
	int per_copy = src == NULL || src != v->bufs[0];
	mark(v);
	for (size_t off = 0; off < v->nbytes; off += PIECE_BYTES) {
		size_t len = v->nbytes - off < PIECE_BYTES ? (size_t)(v->nbytes - off) : PIECE_BYTES;
		for (int c = per_copy ? 0 : -1; c < (per_copy ? v->copies : 0); c++) {
			if (f->count == f->cap)
				fanout_flush(f);
			piece *p = &f->batch[f->count++];
			p->v = v;
			p->src = src;
			p->off = off;
			p->len = len;
			p->mode = mode;
			p->copy = c;
			f->bytes += (uint64_t)len * (uint64_t)(c < 0 ? v->copies : 1);
		}
	}
}

/* How assign writes `v`. */
static fill_mode assign_mode(const ckpt_variable *v)
{
	if (v->kind != CKPT_VAR_SYNC_ON_READ || v->agg != CKPT_AGG_SUM || v->global_copies == 1)
		return FILL_COPY;
	switch (v->dtype) {
	case CKPT_DT_FLOAT: return FILL_SPLIT_F32;
	case CKPT_DT_DOUBLE: return FILL_SPLIT_F64;
	default: return FILL_SPLIT_INT; /* int32 / int64: creation admits nothing else for SUM */
	}
}

/* ---- creation ---- */

static int ranges_overlap(const void *a, const void *b, uint64_t n)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
	return n > 0 && x < y + n && y < x + n;
}

static int check_options(const ckpt_variable_options *o, const char *name, ckpt_dtype dt)
{
	if (o->version != CKPT_VARIABLE_OPTIONS_VERSION)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1,
			"ckpt_variable_options.version is %u, want %u (CKPT_VARIABLE_OPTIONS_INIT)",
			o->version, (unsigned)CKPT_VARIABLE_OPTIONS_VERSION);
	if ((unsigned)o->sync > CKPT_SYNC_ON_READ)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "unknown synchronization %d", (int)o->sync);
	if ((unsigned)o->aggregation > CKPT_AGG_ONLY_FIRST_REPLICA)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "unknown aggregation %d", (int)o->aggregation);
	if (o->sync == CKPT_SYNC_ON_READ) {
		if (o->aggregation == CKPT_AGG_NONE)
			return ckpt__fail(CKPT_EINVAL, NULL, name, -1,
				"a sync-on-read variable needs an aggregation (SUM, MEAN or ONLY_FIRST_REPLICA)");
		if ((o->aggregation == CKPT_AGG_SUM || o->aggregation == CKPT_AGG_MEAN) && !summable(dt))
			return ckpt__fail(CKPT_EUNSUPPORTED, NULL, name, -1,
				"sync-on-read %s aggregation supports float32, float64, int32 and int64, not %s",
				agg_name(o->aggregation), ckpt_dtype_name(dt));
	}
	return CKPT_OK;
}

/* Sum of element lengths, overflow-checked; NULL data with a length is EINVAL. */
static int strings_nbytes(const ckpt_bytes *e, uint64_t n, const char *name, uint64_t *out)
{
	uint64_t total = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (e[i].len > 0 && !e[i].data)
			return ckpt__fail(CKPT_EINVAL, NULL, name, -1,
				"string variable '%s': element %llu has length %llu but no data",
				name, (unsigned long long)i, (unsigned long long)e[i].len);
		if (__builtin_add_overflow(total, e[i].len, &total))
			return ckpt__fail(CKPT_ELIMIT, NULL, name, -1,
				"string variable '%s': total length overflows", name);
	}
	*out = total;
	return CKPT_OK;
}

/* Deep copies of `elems` (NULL: empty strings) for every copy of `v`; frees what it built on error. */
static int build_string_copies(const ckpt_variable *v, const ckpt_bytes *elems, ckpt_tensor ***out)
{
	*out = NULL;
	ckpt_tensor **ts = ckpt__calloc((size_t)v->copies, sizeof(*ts));
	if (!ts)
		return ckpt__fail(CKPT_ENOMEM, NULL, v->name, -1, "out of memory copying string variable '%s'", v->name);
	for (int r = 0; r < v->copies; r++) {
		int rc = elems ? ckpt_tensor_new_strings(&ts[r], &v->shape, elems)
			: ckpt_tensor_new(&ts[r], CKPT_DT_STRING, &v->shape);
		if (rc < 0) {
			for (int i = 0; i < r; i++)
				ckpt_tensor_free(ts[i]);
			ckpt__free(ts);
			return ckpt__fail(rc, NULL, v->name, -1, "copying string variable '%s' (replica %d of %d) failed",
				v->name, r, v->copies);
		}
	}
	*out = ts;
	return CKPT_OK;
}

static void free_string_copies(ckpt_tensor **ts, int n)
{
	if (!ts)
		return;
	for (int r = 0; r < n; r++)
		ckpt_tensor_free(ts[r]);
	ckpt__free(ts);
}

/* Swap built copies in (cannot fail) and free the old ones. */
static void install_string_copies(ckpt_variable *v, ckpt_tensor **ts)
{
	ckpt_tensor **old = v->strs;
	v->strs = ts;
	for (int r = 0; r < v->copies; r++)
		v->bufs[r] = ts[r]->data;
	v->nbytes = ts[0]->nbytes;
	free_string_copies(old, v->copies);
	mark(v);
}

static int new_string_variable(ckpt_variable **out, const char *name, size_t name_len,
	const ckpt_shape *shape, const ckpt_variable_options *o)
{
	uint64_t nelem, nbytes = 0;
	CKPT_TRY(ckpt_shape_num_elements(&nelem, shape));
	if (nelem > SIZE_MAX / sizeof(ckpt_bytes))
		return ckpt__fail(CKPT_ELIMIT, NULL, name, -1, "string variable '%s' of %llu elements is too large",
			name, (unsigned long long)nelem);
	CKPT_TRY(check_options(o, name, CKPT_DT_STRING));
	if (o->sync == CKPT_SYNC_ON_READ)
		return ckpt__fail(CKPT_EUNSUPPORTED, NULL, name, -1,
			"string variable '%s': sync-on-read string variables are not supported (use on-write)", name);
	if (o->replica_buffers)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1,
			"string variable '%s': replica_buffers wraps fixed-size buffers only; pass initial_value "
			"(an array of ckpt_bytes) instead", name);
	if (o->initial_value)
		CKPT_TRY(strings_nbytes(o->initial_value, nelem, name, &nbytes));

	ckpt_strategy *s = ckpt_strategy_current();
	if (ckpt__mem_is_device(ckpt__strategy_mem(s)))
		return ckpt__fail(CKPT_EUNSUPPORTED, NULL, name, -1,
			"string variable '%s' under %s: string elements are host objects and cannot live in device "
			"memory; create it outside the scope (a plain variable)", name, ckpt_strategy_describe(s));
	int mirrored = ckpt_strategy_kind_of(s) != CKPT_STRATEGY_DEFAULT;
	int copies = mirrored ? ckpt__strategy_local_replicas(s) : 1;
	ckpt_variable *v = var_alloc(name, name_len, copies);
	if (!v)
		return ckpt__fail(CKPT_ENOMEM, NULL, name, -1, "out of memory creating string variable '%s'", name);
	v->dtype = CKPT_DT_STRING;
	v->shape = *shape;
	v->nbytes = 0;
	v->kind = mirrored ? CKPT_VAR_MIRRORED : CKPT_VAR_PLAIN;
	v->agg = o->aggregation;
	v->trainable = o->trainable;
	v->copies = copies;
	v->strategy = s;
	ckpt__strategy_retain(s, CKPT__REF_VARIABLE);
	if (set_origin(v, s, mirrored, 0) < 0) {
		ckpt_variable_free(v);
		return ckpt__fail(CKPT_ENOMEM, NULL, name, -1, "out of memory creating string variable '%s'", name);
	}
	ckpt_tensor **ts;
	int rc = build_string_copies(v, o->initial_value, &ts);
	if (rc < 0) {
		ckpt_variable_free(v);
		return rc;
	}
	install_string_copies(v, ts);
	if (ckpt__strategy_ops_of(s)->on_create && (rc = ckpt__strategy_ops_of(s)->on_create(s, v, 1)) < 0) {
		ckpt_variable_free(v);
		return rc;
	}
	*out = v;
	return CKPT_OK;
}

/*
 * host = 1: one copy wrapping o->replica_buffers[0] under the default strategy, whatever the scope;
 * host = 2: one plain copy under the default strategy, whatever the scope (a part of a partitioned variable)
 */
static int variable_new(ckpt_variable **out, const char *name, ckpt_dtype dt,
	const ckpt_shape *shape, const ckpt_variable_options *o, int fill, int host)
{
	static const ckpt_variable_options defaults = CKPT_VARIABLE_OPTIONS_INIT;
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "ckpt_variable_new: out is NULL");
	*out = NULL;
	if (!name || !shape)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "ckpt_variable_new: %s is NULL", name ? "shape" : "name");
	size_t name_len = strlen(name);
	if (name_len == 0 || name_len > CKPT_MAX_NAME_LEN)
		return ckpt__fail(name_len ? CKPT_ELIMIT : CKPT_EINVAL, NULL, NULL, -1,
			"variable name of %zu bytes (want 1..%d)", name_len, CKPT_MAX_NAME_LEN);
	ckpt_replica_ctx *ctx = ckpt_replica_current();
	if (ctx)
		return ckpt__fail(CKPT_ESCOPE, NULL, name, -1,
			"variable '%s' created in replica context (replica %d of %s): create variables "
			"outside ckpt_strategy_run, inside the strategy's scope", name,
			ckpt_replica_id(ctx), ckpt_strategy_describe(ckpt_replica_strategy(ctx)));
	if (!o)
		o = &defaults;
	if (!ckpt_dtype_valid((int)dt))
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "invalid dtype %d", (int)dt);
	if (dt == CKPT_DT_STRING)
		return new_string_variable(out, name, name_len, shape, o);
	uint64_t nbytes;
	CKPT_TRY(ckpt_shape_nbytes(&nbytes, shape, dt));
	if (nbytes > SIZE_MAX)
		return ckpt__fail(CKPT_ELIMIT, NULL, name, -1, "variable of %llu bytes exceeds the address space",
			(unsigned long long)nbytes);
	CKPT_TRY(check_options(o, name, dt));

	ckpt_strategy *s = host ? ckpt_strategy_default() : ckpt_strategy_current();
	int mirrored = ckpt_strategy_kind_of(s) != CKPT_STRATEGY_DEFAULT;
	int copies = mirrored ? ckpt__strategy_local_replicas(s) : 1;
	ckpt__mem *pmem = mirrored ? ckpt__strategy_mem(s) : NULL;
	/* device pointers are not host addresses: overlap with host memory means nothing */
	if (o->replica_buffers && !ckpt__mem_is_device(pmem)) {
		for (int i = 0; i < copies; i++) {
			if (!o->replica_buffers[i] && nbytes > 0)
				return ckpt__fail(CKPT_EINVAL, NULL, name, -1,
					"replica_buffers[%d] is NULL (%d buffer(s) of %llu bytes needed under %s)",
					i, copies, (unsigned long long)nbytes, ckpt_strategy_describe(s));
			if (o->initial_value && o->initial_value != o->replica_buffers[i] &&
			    ranges_overlap(o->initial_value, o->replica_buffers[i], nbytes))
				return ckpt__fail(CKPT_EINVAL, NULL, name, -1,
					"initial_value partly overlaps replica_buffers[%d]", i);
			for (int j = 0; j < i; j++)
				if (ranges_overlap(o->replica_buffers[i], o->replica_buffers[j], nbytes))
					return ckpt__fail(CKPT_EINVAL, NULL, name, -1,
						"replica_buffers[%d] and [%d] overlap: each replica needs its own %llu bytes",
						j, i, (unsigned long long)nbytes);
		}
	}

	ckpt_variable *v = var_alloc(name, name_len, copies);
	if (!v)
		return ckpt__fail(CKPT_ENOMEM, NULL, name, -1, "out of memory creating variable '%s'", name);
	v->dtype = dt;
	v->shape = *shape;
	v->nbytes = nbytes;
	v->kind = !mirrored ? CKPT_VAR_PLAIN : o->sync == CKPT_SYNC_ON_READ ? CKPT_VAR_SYNC_ON_READ : CKPT_VAR_MIRRORED;
	v->agg = o->aggregation;
	v->trainable = o->trainable;
	v->copies = copies;
	v->global_copies = mirrored ? ckpt_strategy_num_replicas(s) : 1;
	v->holds_replica0 = !mirrored || ckpt__strategy_replica_offset(s) == 0;
	v->wrapped = o->replica_buffers != NULL;
	v->host = host == 1;
	v->pmem = pmem;
	v->dev = ckpt__mem_is_device(pmem);
	v->strategy = s;
	ckpt__strategy_retain(s, CKPT__REF_VARIABLE);
	if (set_origin(v, s, mirrored, host) < 0)
		goto nomem;
	for (int i = 0; i < copies; i++) {
		if (v->wrapped) {
			v->bufs[i] = o->replica_buffers[i];
		} else if (pmem) {
			uint64_t seq = ckpt__error_seq();
			int rc = nbytes ? ckpt__mem_value_alloc(pmem, i, &v->bufs[i], (size_t)nbytes) : CKPT_OK;
			if (rc < 0) {
				char why[512];
				ckpt__mem_provider_why(why, sizeof(why), rc, seq);
				v->bufs[i] = NULL;
				ckpt_variable_free(v);
				return ckpt__fail(rc, NULL, name, -1,
					"memory provider '%s': cannot allocate %llu bytes on device %d for replica %d of variable '%s'%s",
					pmem->caps.name, (unsigned long long)nbytes, pmem->devices[i], i, name, why);
			}
		} else if (!(v->bufs[i] = ckpt__variable_buffer_alloc(nbytes))) {
			goto nomem;
		}
	}
	/* host memory another live variable wraps would be overwritten by its restores, and ours by its */
	if (v->wrapped && !v->dev) {
		int rc = ckpt__wrap_register(v, v->bufs, copies, nbytes, name);
		if (rc < 0) {
			ckpt_variable_free(v);
			return rc;
		}
		v->wrap_registered = 1;
	}
	if (v->dev) {
		/* replica 0 from the host, the others device to device */
		if (o->initial_value || (!v->wrapped && fill)) {
			int rc = ckpt__device_write(pmem, v->bufs, (size_t)nbytes, o->initial_value, NULL, 0, name);
			if (rc < 0) {
				ckpt_variable_free(v);
				return rc;
			}
		}
	} else if (o->initial_value || (!v->wrapped && fill)) {
		/* first touch of fresh buffers happens here, in parallel (load leaves them to its reads) */
		piece local[LOCAL_BATCH];
		fanout f = { local, LOCAL_BATCH, 0, 0 };
		fanout_add(&f, v, o->initial_value, o->initial_value ? FILL_COPY : FILL_ZERO);
		fanout_flush(&f);
	}
	/* cross-process strategies: the same variable everywhere, process 0's initial value */
	if (ckpt__strategy_ops_of(s)->on_create) {
		int rc = ckpt__strategy_ops_of(s)->on_create(s, v, fill || o->initial_value || v->wrapped);
		if (rc < 0) {
			ckpt_variable_free(v);
			return rc;
		}
	}
	*out = v;
	return CKPT_OK;
nomem:
	ckpt_variable_free(v);
	return ckpt__fail(CKPT_ENOMEM, NULL, name, -1, "out of memory creating variable '%s' (%d cop%s of %llu bytes)",
		name, copies, copies == 1 ? "y" : "ies", (unsigned long long)nbytes);
}

int ckpt_variable_new(ckpt_variable **out, const char *name, ckpt_dtype dt,
	const ckpt_shape *shape, const ckpt_variable_options *o)
{
	return variable_new(out, name, dt, shape, o, 1, 0);
}

int ckpt__variable_new_part(ckpt_variable **out, const char *name, ckpt_dtype dt, const ckpt_shape *shape,
	const ckpt_variable_options *o)
{
	return variable_new(out, name, dt, shape, o, 1, 2);
}

int ckpt__variable_new_unfilled(ckpt_variable **out, const char *name, ckpt_dtype dt,
	const ckpt_shape *shape, const ckpt_variable_options *o)
{
	return variable_new(out, name, dt, shape, o, 0, 0);
}

int ckpt__variable_new_host(ckpt_variable **out, const char *name, ckpt_dtype dt, const ckpt_shape *shape,
	void *ptr)
{
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	void *bufs[1] = { ptr };
	if (out)
		*out = NULL;
	if (dt == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1,
			"host state '%s': a string tensor is not plain memory; track it as a variable instead", name);
	o.trainable = 0;
	o.replica_buffers = bufs;
	return variable_new(out, name, dt, shape, &o, 0, 1);
}

int ckpt_variable_is_host(const ckpt_variable *v)
{
	return v ? v->host : 0;
}

void ckpt__variable_zero(ckpt_variable *v)
{
	if (!v || v->dtype == CKPT_DT_STRING || v->wrapped)
		return;
	if (v->dev) {
		/* load's unassigned variables: a provider failure leaves them unzeroed, recorded in the last error */
		(void)ckpt__device_write(v->pmem, v->bufs, (size_t)v->nbytes, NULL, NULL, 0, v->name);
		return;
	}
	piece local[LOCAL_BATCH];
	fanout f = { local, LOCAL_BATCH, 0, 0 };
	fanout_add(&f, v, NULL, FILL_ZERO);
	fanout_flush(&f);
}

void ckpt_variable_free(ckpt_variable *v)
{
	if (!v)
		return;
	if (v->wrap_registered)
		ckpt__wrap_unregister(v, v->bufs, v->copies, v->nbytes);
	if (v->dtype == CKPT_DT_STRING)
		free_string_copies(v->strs, v->copies);
	else if (v->bufs && !v->wrapped && v->pmem)
		for (int i = 0; i < v->copies; i++) {
			ckpt__mem_value_free(v->pmem, i, v->bufs[i], (size_t)v->nbytes);
		}
	else if (v->bufs && !v->wrapped)
		for (int i = 0; i < v->copies; i++)
			ckpt__variable_buffer_free(v->bufs[i], v->nbytes);
	ckpt__free(v->origin_owned);
	ckpt__strategy_release(v->strategy, CKPT__REF_VARIABLE);
	if (v->in_slab)
		ckpt__slab_free(v);
	else
		ckpt__free(v);
}

/* ---- accessors ---- */

const char *ckpt_variable_name(const ckpt_variable *v) { return v ? v->name : NULL; }
ckpt_dtype ckpt_variable_dtype(const ckpt_variable *v) { return v ? v->dtype : CKPT_DT_INVALID; }
const ckpt_shape *ckpt_variable_shape(const ckpt_variable *v) { return v ? &v->shape : NULL; }
uint64_t ckpt_variable_nbytes(const ckpt_variable *v) { return v ? v->nbytes : 0; }
ckpt_var_kind ckpt_variable_kind(const ckpt_variable *v) { return v ? v->kind : CKPT_VAR_PLAIN; }
ckpt_aggregation ckpt_variable_aggregation(const ckpt_variable *v) { return v ? v->agg : CKPT_AGG_NONE; }
ckpt_strategy *ckpt_variable_strategy(const ckpt_variable *v) { return v ? v->strategy : NULL; }
int ckpt_variable_num_replicas(const ckpt_variable *v) { return v ? v->copies : 0; }
const char *ckpt_variable_origin(const ckpt_variable *v) { return v ? v->origin : NULL; }

const void *ckpt_variable_replica_data(const ckpt_variable *v, int replica)
{
	if (!v || replica < 0 || replica >= v->copies)
		return NULL;
	return v->bufs[replica];
}

void *ckpt__variable_data(ckpt_variable *v, int replica)
{
	if (v)
		mark(v); /* a writable copy: whatever is written there is a change */
	return (void *)ckpt_variable_replica_data(v, replica);
}

void *ckpt__variable_local_copy(ckpt_variable *v, int i)
{
	return ckpt__variable_data(v, i);
}

void ckpt__variable_fill_from_primary(ckpt_variable *v)
{
	if (!v || v->copies < 2 || v->dtype == CKPT_DT_STRING)
		return;
	if (v->dev) {
		(void)ckpt__mem_fanout(v->pmem, v->bufs, 0, (size_t)v->nbytes, v->name);
		return;
	}
	piece local[LOCAL_BATCH];
	fanout f = { local, LOCAL_BATCH, 0, 0 };
	fanout_add(&f, v, v->bufs[0], FILL_COPY);
	fanout_flush(&f);
}

/* ---- cross-replica assign ---- */

static int check_assign(const ckpt_variable *v, const void *src, size_t n, const char *what)
{
	if (!v)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "%s: variable is NULL", what);
	ckpt_replica_ctx *ctx = ckpt_replica_current();
	if (ctx)
		return ckpt__fail(CKPT_ESCOPE, NULL, v->name, -1,
			"%s of variable '%s' in replica context (replica %d of %s): assign is a cross-replica "
			"update; in replica context update this replica's copy from ckpt_variable_local",
			what, v->name, ckpt_replica_id(ctx), ckpt_strategy_describe(ckpt_replica_strategy(ctx)));
	if (v->dtype == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EINVAL, NULL, v->name, -1,
			"%s of string variable '%s' through the raw-bytes API: use ckpt_variable_assign_tensor "
			"(ckpt_variable_read_tensor to read)", what, v->name);
	if (n != v->nbytes) {
		char shp[256];
		ckpt_shape_format(&v->shape, shp, sizeof(shp));
		return ckpt__fail(CKPT_EINVAL, NULL, v->name, -1,
			"%s of variable '%s' (%s %s): want %llu bytes, got %zu",
			what, v->name, ckpt_dtype_name(v->dtype), shp, (unsigned long long)v->nbytes, n);
	}
	if (!src && n > 0)
		return ckpt__fail(CKPT_EINVAL, NULL, v->name, -1, "%s of variable '%s': source is NULL", what, v->name);
	for (int r = 0; r < v->copies && !v->dev; r++)
		if (ranges_overlap(src, v->bufs[r], n) && !(r == 0 && src == v->bufs[0]))
			return ckpt__fail(CKPT_EINVAL, NULL, v->name, -1,
				"%s of variable '%s': the source overlaps the variable's replica %d copy", what, v->name, r);
	return CKPT_OK;
}

/* The device form of an assign: copy 0 from `src` (host, or copy 0 itself), the others by mode. */
static int device_assign(ckpt_variable *v, const void *src)
{
	mark(v);
	static const float nz32 = -0.0f;
	static const double nz64 = -0.0;
	static const int64_t zero = 0;
	fill_mode mode = assign_mode(v);
	/* another process holds global replica 0: every local copy gets the split's zero */
	if (mode != FILL_COPY && !v->holds_replica0) {
		const void *unit = mode == FILL_SPLIT_F32 ? (const void *)&nz32 : mode == FILL_SPLIT_F64 ? (const void *)&nz64
			: (const void *)&zero;
		size_t us = mode == FILL_SPLIT_F32 ? sizeof(nz32) : mode == FILL_SPLIT_F64 ? sizeof(nz64) : 1;
		for (int r = 0; r < v->copies; r++)
			CKPT_TRY(ckpt__mem_fill(v->pmem, r, v->bufs[r], (size_t)v->nbytes, unit, us, v->name));
		return CKPT_OK;
	}
	switch (mode) {
	case FILL_SPLIT_F32: return ckpt__device_write(v->pmem, v->bufs, (size_t)v->nbytes, src, &nz32, sizeof(nz32), v->name);
	case FILL_SPLIT_F64: return ckpt__device_write(v->pmem, v->bufs, (size_t)v->nbytes, src, &nz64, sizeof(nz64), v->name);
	case FILL_SPLIT_INT: return ckpt__device_write(v->pmem, v->bufs, (size_t)v->nbytes, src, &zero, 1, v->name);
	default: return ckpt__device_write(v->pmem, v->bufs, (size_t)v->nbytes, src, NULL, 0, v->name);
	}
}

int ckpt_variable_assign(ckpt_variable *v, const void *src, size_t n)
{
	CKPT_TRY(check_assign(v, src, n, "assign"));
	if (v->dev)
		return device_assign(v, src);
	piece local[LOCAL_BATCH];
	fanout f = { local, LOCAL_BATCH, 0, 0 };
	fanout_add(&f, v, src, assign_mode(v));
	fanout_flush(&f);
	return CKPT_OK;
}

int ckpt__variable_broadcast_primary(ckpt_variable *v)
{
	if (!v)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "broadcast: variable is NULL");
	return ckpt_variable_assign(v, v->bufs[0], (size_t)v->nbytes);
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
	return x < y ? -1 : x > y;
}

struct ckpt__assign_plan {
	ckpt_variable **vars;
	const void **srcs;
	size_t count;
	int device_done;    /* ckpt__assign_plan_run_device ran: _run does the host variables only */
	fanout f;
	piece batch[PIECE_BATCH];
};

int ckpt__assign_plan_new(ckpt__assign_plan **out, ckpt_variable *const *vars, const void *const *srcs,
	const size_t *sizes, size_t count)
{
	*out = NULL;
	if (count && (!vars || !srcs || !sizes))
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "assign_many: NULL array");
	for (size_t i = 0; i < count; i++)
		CKPT_TRY(check_assign(vars[i], srcs[i], sizes[i], "assign"));
	ckpt__assign_plan *p = ckpt__calloc(1, sizeof(*p));
	if (!p)
		return CKPT_ENOMEM;
	p->vars = ckpt__calloc(count ? count : 1, sizeof(*p->vars));
	p->srcs = ckpt__calloc(count ? count : 1, sizeof(*p->srcs));
	ckpt_variable **sorted = ckpt__calloc(count ? count : 1, sizeof(*sorted));
	if (!p->vars || !p->srcs || !sorted) {
		ckpt__free(sorted);
		ckpt__assign_plan_free(p);
		return CKPT_ENOMEM;
	}
	p->count = count;
	if (count) {
		memcpy(p->vars, vars, count * sizeof(*p->vars));
		memcpy(p->srcs, srcs, count * sizeof(*p->srcs));
		memcpy(sorted, vars, count * sizeof(*sorted));
	}
	/* the same variable twice would be written concurrently (variables made together sit in address order) */
	int rc = ckpt__sort(sorted, count, sizeof(*sorted), cmp_ptr);
	if (rc < 0) {
		ckpt__free(sorted);
		ckpt__assign_plan_free(p);
		return rc;
	}
	for (size_t i = 1; i < count; i++)
		if (sorted[i] == sorted[i - 1]) {
			const char *nm = sorted[i]->name;
			ckpt__free(sorted);
			ckpt__assign_plan_free(p);
			return ckpt__fail(CKPT_EINVAL, NULL, nm, -1, "assign_many: variable '%s' appears twice", nm);
		}
	ckpt__free(sorted);
	*out = p;
	return CKPT_OK;
}

int ckpt__assign_plan_run_device(ckpt__assign_plan *p, void (*starting)(void *ctx, const ckpt_variable *v), void *ctx)
{
	p->device_done = 1;
	for (size_t i = 0; i < p->count; i++) {
		ckpt_variable *v = p->vars[i];
		if (!v->dev)
			continue;
		if (starting)
			starting(ctx, v);
		CKPT_TRY(device_assign(v, p->srcs[i]));
	}
	return CKPT_OK;
}

int ckpt__assign_plan_run(ckpt__assign_plan *p)
{
	p->f = (fanout){ p->batch, PIECE_BATCH, 0, 0 };
	int rc = CKPT_OK;
	for (size_t i = 0; i < p->count; i++) {
		ckpt_variable *v = p->vars[i];
		if (v->dev && p->device_done)
			continue;
		if (v->dev) {
			int vrc = device_assign(v, p->srcs[i]);
			if (vrc < 0 && rc == CKPT_OK)
				rc = vrc;
			continue;
		}
		/* a value read straight into a single copy is already in place */
		if (p->srcs[i] == v->bufs[0] && v->copies == 1 && assign_mode(v) == FILL_COPY)
			continue;
		fanout_add(&p->f, v, p->srcs[i], assign_mode(v));
	}
	fanout_flush(&p->f);
	return rc;
}

void ckpt__assign_plan_free(ckpt__assign_plan *p)
{
	if (!p)
		return;
	ckpt__free(p->vars);
	ckpt__free(p->srcs);
	ckpt__free(p);
}

int ckpt__variable_assign_many(ckpt_variable *const *vars, const void *const *srcs,
	const size_t *sizes, size_t count)
{
	if (count == 0)
		return CKPT_OK;
	ckpt__assign_plan *p;
	CKPT_TRY(ckpt__assign_plan_new(&p, vars, srcs, sizes, count));
	int rc = ckpt__assign_plan_run(p);
	ckpt__assign_plan_free(p);
	return rc;
}

int ckpt__variable_direct_restorable(const ckpt_variable *v)
{
	/* device copies are filled from the staged value through the provider, never read into in place */
	return v && !v->dev && v->dtype != CKPT_DT_STRING && v->nbytes > 0 &&
		(v->copies == 1 || v->kind == CKPT_VAR_MIRRORED);
}

int ckpt__variable_rollback_primary(ckpt_variable *v)
{
	if (!v || v->copies < 2 || v->kind != CKPT_VAR_MIRRORED)
		return 0;
	if (v->dev) {
		int rc = ckpt__mem_d2d(v->pmem, 0, v->bufs[0], 1, v->bufs[1], (size_t)v->nbytes, v->name);
		int src = ckpt__mem_sync(v->pmem, 0, v->name);
		return rc == CKPT_OK && src == CKPT_OK;
	}
	memcpy(v->bufs[0], v->bufs[1], (size_t)v->nbytes);
	mark(v);
	return 1;
}

/* ---- cross-replica read ---- */

/*
 * SUM adds in the variable's type, in replica order (as TensorFlow's
 * cross-replica reduction does). MEAN adds in a wider type W (double for
 * float32, long double's 64-bit mantissa for float64) and rounds once: with N
 * copies of one value x (what a restore or a cross-replica assign leaves),
 * N * x is exact in W (for N <= 2^29 and N <= 2048) and so is its quotient by
 * N, so the mean reads back x bit for bit for every N, not only powers of two.
 */
#define DEFINE_AGG_FLOAT(NAME, T, W) \
static void NAME(const void *const *bufs, int copies, T *dst, uint64_t count, int mean) \
{ \
	for (uint64_t i = 0; i < count; i++) { \
		if (mean) { \
			W acc = ((const T *)bufs[0])[i]; \
			for (int r = 1; r < copies; r++) \
				acc += ((const T *)bufs[r])[i]; \
			dst[i] = (T)(acc / (W)copies); \
		} else { \
			T acc = ((const T *)bufs[0])[i]; \
			for (int r = 1; r < copies; r++) \
				acc += ((const T *)bufs[r])[i]; \
			dst[i] = acc; \
		} \
	} \
}
DEFINE_AGG_FLOAT(agg_f32, float, double)
DEFINE_AGG_FLOAT(agg_f64, double, long double)

/* `first`: the index of element 0 of this chunk in the variable, for messages */
static int agg_i32(const ckpt_variable *v, const void *const *bufs, int32_t *dst, uint64_t first, uint64_t count,
	int mean)
{
	for (uint64_t i = 0; i < count; i++) {
		int64_t acc = 0;
		for (int r = 0; r < v->copies; r++)
			acc += ((const int32_t *)bufs[r])[i];
		if (mean)
			acc /= v->copies;
		else if (acc > INT32_MAX || acc < INT32_MIN)
			return ckpt__fail(CKPT_ELIMIT, NULL, v->name, -1,
				"SUM of sync-on-read variable '%s' overflows int32 at element %llu (%lld)",
				v->name, (unsigned long long)(first + i), (long long)acc);
		dst[i] = (int32_t)acc;
	}
	return CKPT_OK;
}

static int agg_i64(const ckpt_variable *v, const void *const *bufs, int64_t *dst, uint64_t first, uint64_t count,
	int mean)
{
	for (uint64_t i = 0; i < count; i++) {
		int64_t acc = 0;
		for (int r = 0; r < v->copies; r++)
			if (__builtin_add_overflow(acc, ((const int64_t *)bufs[r])[i], &acc))
				return ckpt__fail(CKPT_ELIMIT, NULL, v->name, -1,
					"%s of sync-on-read variable '%s' overflows int64 at element %llu",
					mean ? "MEAN" : "SUM", v->name, (unsigned long long)(first + i));
		dst[i] = mean ? acc / v->copies : acc;
	}
	return CKPT_OK;
}

/* Aggregate `count` elements of the copies bufs[] (host memory) into dst. */
static int aggregate(const ckpt_variable *v, const void *const *bufs, void *dst, uint64_t first, uint64_t count)
{
	int mean = v->agg == CKPT_AGG_MEAN;
	switch (v->dtype) {
	case CKPT_DT_FLOAT: agg_f32(bufs, v->copies, dst, count, mean); return CKPT_OK;
	case CKPT_DT_DOUBLE: agg_f64(bufs, v->copies, dst, count, mean); return CKPT_OK;
	case CKPT_DT_INT32: return agg_i32(v, bufs, dst, first, count, mean);
	case CKPT_DT_INT64: return agg_i64(v, bufs, dst, first, count, mean);
	default:
		return ckpt__fail(CKPT_EUNSUPPORTED, NULL, v->name, -1,
			"%s aggregation of %s variable '%s' is not supported",
			agg_name(v->agg), ckpt_dtype_name(v->dtype), v->name);
	}
}

/*
 * Device copies: each replica's chunk to pinned memory (the caller's
 * `scratch` of scratch_n bytes when it holds an element per replica, else
 * its own), then the same fixed-order aggregation.
 */
static int aggregate_device(const ckpt_variable *v, void *dst, void *scratch, size_t scratch_n)
{
	size_t es = ckpt_dtype_size(v->dtype), total = (size_t)v->nbytes;
	int own = !scratch || scratch_n / (size_t)v->copies < es;
	size_t most = own ? CKPT__DEVICE_CHUNK : scratch_n / (size_t)v->copies;
	size_t chunk = total < most ? total : most;
	chunk -= chunk % es;
	void *tmp = scratch;
	if (own)
		CKPT_TRY(ckpt__mem_pinned_alloc(v->pmem, &tmp, chunk * (size_t)v->copies, v->name));
	const void **bufs = ckpt__calloc((size_t)v->copies, sizeof(*bufs));
	int rc = bufs ? CKPT_OK : CKPT_ENOMEM;
	for (int r = 0; r < v->copies && bufs; r++)
		bufs[r] = (char *)tmp + (size_t)r * chunk;
	for (size_t off = 0; off < total && rc == CKPT_OK; off += chunk) {
		size_t n = total - off < chunk ? total - off : chunk;
		for (int r = 0; r < v->copies && rc == CKPT_OK; r++)
			rc = ckpt__mem_d2h(v->pmem, r, (void *)bufs[r], (const char *)v->bufs[r] + off, n, v->name);
		int src = ckpt__mem_sync_all(v->pmem, v->name);
		if (rc == CKPT_OK)
			rc = src;
		if (rc == CKPT_OK)
			rc = aggregate(v, bufs, (char *)dst + off, off / es, n / es);
	}
	ckpt__free(bufs);
	if (own)
		ckpt__mem_pinned_free(v->pmem, tmp, chunk * (size_t)v->copies);
	return rc;
}

int ckpt__variable_read_staged(const ckpt_variable *v, void *dst, size_t n, void *scratch, size_t scratch_n)
{
	if (v && v->dev && v->kind == CKPT_VAR_SYNC_ON_READ && v->copies > 1 && n == v->nbytes && dst &&
	    (v->agg == CKPT_AGG_SUM || v->agg == CKPT_AGG_MEAN) && !ckpt__strategy_ops_of(v->strategy)->read)
		return aggregate_device(v, dst, scratch, scratch_n);
	return ckpt_variable_read(v, dst, n);
}

int ckpt_variable_read(const ckpt_variable *v, void *dst, size_t n)
{
	if (!v)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "read: variable is NULL");
	if (v->dtype == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EINVAL, NULL, v->name, -1,
			"read of string variable '%s' through the raw-bytes API: use ckpt_variable_read_tensor "
			"(ckpt_variable_assign_tensor to assign)", v->name);
	if (n != v->nbytes)
		return ckpt__fail(CKPT_EINVAL, NULL, v->name, -1,
			"read of variable '%s': want %llu bytes, got a buffer of %zu",
			v->name, (unsigned long long)v->nbytes, n);
	if (!dst && n > 0)
		return ckpt__fail(CKPT_EINVAL, NULL, v->name, -1, "read of variable '%s': destination is NULL", v->name);
	/* the aggregate over other processes' replicas too: collective */
	if (v->kind == CKPT_VAR_SYNC_ON_READ && ckpt__strategy_ops_of(v->strategy)->read)
		return ckpt__strategy_ops_of(v->strategy)->read(v->strategy, v, dst, n);
	if (v->kind != CKPT_VAR_SYNC_ON_READ || v->copies == 1 ||
	    (v->agg != CKPT_AGG_SUM && v->agg != CKPT_AGG_MEAN)) {
		if (v->dev)
			return ckpt__device_read(v->pmem, 0, v->bufs[0], 0, dst, n, v->name);
		if (n > 0)
			memcpy(dst, v->bufs[0], n);
		return CKPT_OK;
	}
	if (v->dev)
		return aggregate_device(v, dst, NULL, 0);
	return aggregate(v, (const void *const *)v->bufs, dst, 0, v->nbytes / ckpt_dtype_size(v->dtype));
}

int ckpt__variable_read_copy(const ckpt_variable *v, int replica, void *dst)
{
	if (!v || replica < 0 || replica >= v->copies || v->dtype == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EINVAL, NULL, v ? v->name : NULL, -1, "read_copy: bad variable or replica %d", replica);
	if (v->dev)
		return ckpt__device_read(v->pmem, replica, v->bufs[replica], 0, dst, (size_t)v->nbytes, v->name);
	if (v->nbytes)
		memcpy(dst, v->bufs[replica], (size_t)v->nbytes);
	return CKPT_OK;
}

int ckpt__variable_write_copy(ckpt_variable *v, int replica, const void *src)
{
	if (!v || replica < 0 || replica >= v->copies || v->dtype == CKPT_DT_STRING || !src)
		return ckpt__fail(CKPT_EINVAL, NULL, v ? v->name : NULL, -1, "write_copy: bad variable or replica %d", replica);
	mark(v);
	if (v->dev) {
		int rc = ckpt__mem_h2d(v->pmem, replica, v->bufs[replica], src, (size_t)v->nbytes, v->name);
		int src_rc = ckpt__mem_sync(v->pmem, replica, v->name);
		return rc < 0 ? rc : src_rc;
	}
	if (v->nbytes && src != v->bufs[replica])
		memcpy(v->bufs[replica], src, (size_t)v->nbytes);
	return CKPT_OK;
}

int ckpt__variable_on_device(const ckpt_variable *v)
{
	return v && v->dev;
}

/* ---- replica-context access ---- */

static int variable_local_rc(ckpt_variable *v, void **out)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, v ? v->name : NULL, -1, "ckpt_variable_local: out is NULL");
	*out = NULL;
	if (!v)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_variable_local: variable is NULL");
	ckpt_replica_ctx *ctx = ckpt_replica_current();
	if (!ctx) {
		if (v->copies > 1 || v->kind != CKPT_VAR_PLAIN)
			return ckpt__fail(CKPT_ESCOPE, NULL, v->name, -1,
				"variable '%s' is %s across %d replica(s) of %s: outside replica context use "
				"ckpt_variable_assign for cross-replica updates (ckpt_variable_read to read it)",
				v->name, ckpt_var_kind_name(v->kind), v->copies, ckpt_strategy_describe(v->strategy));
		mark(v); /* a writable pointer: the caller's writes are changes */
		*out = v->bufs[0];
		return CKPT_OK;
	}
	ckpt_strategy *running = ckpt_replica_strategy(ctx);
	if (v->host)
		return ckpt__fail(CKPT_ESCOPE, NULL, v->name, -1,
			"'%s' is host state tracked by pointer (ckpt_object_track_host), not a variable of %s: update "
			"your own memory directly; from replica context, keeping it consistent is the trainer's "
			"business (for example only replica 0 writes it, or the loop does after ckpt_strategy_run)",
			v->name, ckpt_strategy_describe(running));
	if (running != v->strategy) {
		if (v->kind == CKPT_VAR_PLAIN)
			return ckpt__fail(CKPT_ESCOPE, NULL, v->name, -1,
				"variable '%s' was created outside strategy scope (plain, under %s) but is updated "
				"in replica context of %s: create or load it inside the scope (`ckpt_scope_enter`) "
				"so it is mirrored", v->name, ckpt_strategy_describe(v->strategy),
				ckpt_strategy_describe(running));
		return ckpt__fail(CKPT_ESCOPE, NULL, v->name, -1,
			"variable '%s' was created inside the scope of %s (%s) but is updated in replica "
			"context of %s: a variable is updated only by the strategy that created it; create "
			"or load it inside the scope of %s", v->name, ckpt_strategy_describe(v->strategy),
			ckpt_var_kind_name(v->kind), ckpt_strategy_describe(running),
			ckpt_strategy_describe(running));
	}
	mark(v);
	*out = v->bufs[ckpt_replica_id(ctx) - ckpt__strategy_replica_offset(running)];
	return CKPT_OK;
}

void *ckpt_variable_local(ckpt_variable *v)
{
	void *out = NULL;
	int rc = variable_local_rc(v, &out);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}

int ckpt_variable_replicas_identical(const ckpt_variable *v)
{
	if (!v)
		return 0;
	if (v->dtype == CKPT_DT_STRING) {
		uint64_t n = ckpt_tensor_num_elements(v->strs[0]);
		for (int r = 1; r < v->copies; r++) {
			const ckpt_bytes *a = v->bufs[0], *b = v->bufs[r];
			for (uint64_t i = 0; i < n; i++)
				if (a[i].len != b[i].len || (a[i].len > 0 && memcmp(a[i].data, b[i].data, (size_t)a[i].len) != 0))
					return 0;
		}
		return 1;
	}
	for (int r = 1; r < v->copies; r++) {
		/* a provider failure cannot be told apart from a difference here: say "not identical" (error recorded) */
		if (v->dev && ckpt__device_equal(v->pmem, v->bufs, r, (size_t)v->nbytes, v->name) != 1)
			return 0;
		if (!v->dev && v->nbytes > 0 && memcmp(v->bufs[0], v->bufs[r], (size_t)v->nbytes) != 0)
			return 0;
	}
	return 1;
}

/* ---- tensor API (every dtype) ---- */

static int check_tensor(const ckpt_variable *v, const ckpt_tensor *t, const char *what)
{
	if (!v)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "%s: variable is NULL", what);
	if (!t)
		return ckpt__fail(CKPT_EINVAL, NULL, v->name, -1, "%s of variable '%s': tensor is NULL", what, v->name);
	if (t->dtype != v->dtype || !ckpt_shape_equal(&t->shape, &v->shape)) {
		char a[256], b[256];
		ckpt_shape_format(&v->shape, a, sizeof(a));
		ckpt_shape_format(&t->shape, b, sizeof(b));
		return ckpt__fail(CKPT_EMISMATCH, NULL, v->name, -1,
			"%s of variable '%s': variable is %s %s, tensor is %s %s",
			what, v->name, ckpt_dtype_name(v->dtype), a, ckpt_dtype_name(t->dtype), b);
	}
	if (!t->data && ckpt_tensor_num_elements(t) > 0)
		return ckpt__fail(CKPT_EINVAL, NULL, v->name, -1, "%s of variable '%s': tensor has no data", what, v->name);
	return CKPT_OK;
}

int ckpt__variable_stage_strings(const ckpt_variable *v, const ckpt_tensor *t, void **staged)
{
	if (!staged)
		return ckpt__fail(CKPT_EINVAL, NULL, v ? v->name : NULL, -1, "stage: staged is NULL");
	*staged = NULL;
	CKPT_TRY(check_tensor(v, t, "assign"));
	if (v->dtype != CKPT_DT_STRING)
		return ckpt__fail(CKPT_EINVAL, NULL, v->name, -1, "stage: variable '%s' is not a string variable", v->name);
	ckpt_replica_ctx *ctx = ckpt_replica_current();
	if (ctx)
		return ckpt__fail(CKPT_ESCOPE, NULL, v->name, -1,
			"assign of variable '%s' in replica context (replica %d of %s): assign is a cross-replica update",
			v->name, ckpt_replica_id(ctx), ckpt_strategy_describe(ckpt_replica_strategy(ctx)));
	uint64_t nb;
	CKPT_TRY(strings_nbytes(t->data, ckpt_tensor_num_elements(t), v->name, &nb));
	ckpt_tensor **ts;
	CKPT_TRY(build_string_copies(v, t->data, &ts));
	*staged = ts;
	return CKPT_OK;
}

void ckpt__variable_commit_strings(ckpt_variable *v, void *staged)
{
	if (v && staged)
		install_string_copies(v, staged);
}

void ckpt__variable_discard_strings(const ckpt_variable *v, void *staged)
{
	if (v && staged)
		free_string_copies(staged, v->copies);
}

int ckpt_variable_assign_tensor(ckpt_variable *v, const ckpt_tensor *t)
{
	CKPT_TRY(check_tensor(v, t, "assign_tensor"));
	if (v->dtype != CKPT_DT_STRING)
		return ckpt_variable_assign(v, t->data, (size_t)t->nbytes);
	void *staged;
	CKPT_TRY(ckpt__variable_stage_strings(v, t, &staged));
	ckpt__variable_commit_strings(v, staged);
	return CKPT_OK;
}

int ckpt_variable_read_tensor(ckpt_tensor **out, const ckpt_variable *v)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, v ? v->name : NULL, -1, "read_tensor: out is NULL");
	*out = NULL;
	if (!v)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "read_tensor: variable is NULL");
	ckpt_tensor *t;
	if (v->dtype == CKPT_DT_STRING) {
		int rc = ckpt_tensor_new_strings(&t, &v->shape, v->bufs[0]);
		if (rc < 0)
			return ckpt__fail(rc, NULL, v->name, -1, "read_tensor of string variable '%s' failed", v->name);
		*out = t;
		return CKPT_OK;
	}
	int rc = ckpt_tensor_new(&t, v->dtype, &v->shape);
	if (rc < 0)
		return ckpt__fail(rc, NULL, v->name, -1, "read_tensor of variable '%s': no memory for %llu bytes",
			v->name, (unsigned long long)v->nbytes);
	rc = ckpt_variable_read(v, t->data, (size_t)t->nbytes);
	if (rc < 0) {
		ckpt_tensor_free(t);
		return rc;
	}
	*out = t;
	return CKPT_OK;
}

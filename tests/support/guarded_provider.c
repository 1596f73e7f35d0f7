/*
 * The guarded test provider (guarded_provider.h). One global mutex: copies
 * run only under it, inside synchronize, so two replicas' threads never open
 * and close the same mapping at once.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "ckpt/sys/error.h"
#include "guarded_provider.h"

typedef struct gbuf {
	char *base;
	size_t len;      /* mapped length (whole pages) */
	size_t n;        /* requested */
	int device;
	struct gbuf *next;
} gbuf;

typedef struct gop {
	int kind;        /* 0 h2d, 1 d2h, 2 d2d, 3 fill (src unused, `value`) */
	void *dst;
	const void *src;
	size_t n;
	int value;
	int fail;        /* injected: fails at synchronize, half written */
} gop;

struct ckpt_memory_queue {
	int device;
	gop *ops;
	size_t count, cap;
};

struct ts_guarded {
	ckpt_memory_provider table;
	int num_devices;
	pthread_mutex_t mu;
	gbuf *bufs;
	gbuf *pinned;      /* host_alloc buffers (device -1) */
	ts_guarded_stats st;
	uint64_t pinned_bytes;
	uint64_t fail_after, fail_count;
	unsigned inj_mask;   /* ts_guarded_fail_nth: the kinds counted, 0 when disarmed */
	uint64_t inj_left;   /* calls of those kinds still to pass */
	int inj_at_sync, inj_fired;
};

/* Whether this call of kind `kind` (a TS_G_ bit) is the one to fail. Called with mu held. */
static int inject(ts_guarded *g, unsigned kind)
{
	if (!(g->inj_mask & kind))
		return 0;
	if (g->inj_left) {
		g->inj_left--;
		return 0;
	}
	g->inj_mask = 0;
	g->inj_fired = 1;
	return 1;
}

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/* The buffer of list `b` holding [p, p + n), or NULL. Called with mu held. */
static gbuf *find_in(gbuf *b, const void *p, size_t n)
{
	const char *c = p;
	for (; b; b = b->next)
		if (c >= b->base && c + n <= b->base + b->n && c + n >= c)
			return b;
	return NULL;
}

/* The device buffer holding [p, p + n), or NULL. Called with mu held. */
static gbuf *find(ts_guarded *g, const void *p, size_t n)
{
	const char *c = p;
	for (gbuf *b = g->bufs; b; b = b->next)
		if (c >= b->base && c + n <= b->base + b->n && c + n >= c)
			return b;
	return NULL;
}

static int g_caps(void *ctx, ckpt_memory_caps *out)
{
	ts_guarded *g = ctx;
	out->name = "guarded";
	out->alignment = page_size();
	out->host_addressable = 0;
	out->num_devices = g->num_devices;
	return CKPT_OK;
}

static int g_device_alloc(void *ctx, void **out, int device, size_t n)
{
	ts_guarded *g = ctx;
	*out = NULL;
	if (device < 0 || device >= g->num_devices || n == 0)
		return CKPT_EINVAL;
	pthread_mutex_lock(&g->mu);
	g->st.device_alloc_calls++;
	int fail = inject(g, TS_G_DEVICE_ALLOC);
	pthread_mutex_unlock(&g->mu);
	if (fail)
		return ckpt_error_set(CKPT_ENOMEM, NULL, NULL, -1, "guarded provider: injected device allocation failure");
	size_t ps = page_size(), len = (n + ps - 1) / ps * ps;
	void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	gbuf *b = malloc(sizeof(*b));
	if (p == MAP_FAILED || !b) {
		if (p != MAP_FAILED)
			munmap(p, len);
		free(b);
		return CKPT_ENOMEM;
	}
	*b = (gbuf){ p, len, n, device, NULL };
	pthread_mutex_lock(&g->mu);
	b->next = g->bufs;
	g->bufs = b;
	g->st.device_live++;
	pthread_mutex_unlock(&g->mu);
	*out = p;
	return CKPT_OK;
}

static void g_device_free(void *ctx, int device, void *p, size_t n)
{
	ts_guarded *g = ctx;
	(void)device, (void)n;
	if (!p)
		return;
	pthread_mutex_lock(&g->mu);
	for (gbuf **pp = &g->bufs; *pp; pp = &(*pp)->next) {
		if ((*pp)->base == p) {
			gbuf *b = *pp;
			*pp = b->next;
			munmap(b->base, b->len);
			free(b);
			g->st.device_live--;
			break;
		}
	}
	pthread_mutex_unlock(&g->mu);
}

static int g_host_alloc(void *ctx, void **out, size_t n)
{
	ts_guarded *g = ctx;
	*out = NULL;
	pthread_mutex_lock(&g->mu);
	g->st.host_alloc_calls++;
	int fail = inject(g, TS_G_HOST_ALLOC);
	pthread_mutex_unlock(&g->mu);
	if (fail)
		return ckpt_error_set(CKPT_ENOMEM, NULL, NULL, -1, "guarded provider: injected pinned allocation failure");
	gbuf *b = malloc(sizeof(*b));
	if (n == 0 || !b || posix_memalign(out, 64, n) != 0) {
		free(b);
		*out = NULL;
		return CKPT_ENOMEM;
	}
	*b = (gbuf){ *out, n, n, -1, NULL };
	pthread_mutex_lock(&g->mu);
	b->next = g->pinned;
	g->pinned = b;
	g->st.pinned_live++;
	g->pinned_bytes += n;
	if (g->pinned_bytes > g->st.pinned_peak)
		g->st.pinned_peak = g->pinned_bytes;
	pthread_mutex_unlock(&g->mu);
	return CKPT_OK;
}

static void g_host_free(void *ctx, void *p, size_t n)
{
	ts_guarded *g = ctx;
	if (!p)
		return;
	pthread_mutex_lock(&g->mu);
	for (gbuf **pp = &g->pinned; *pp; pp = &(*pp)->next) {
		if ((*pp)->base == p) {
			gbuf *b = *pp;
			*pp = b->next;
			free(b);
			break;
		}
	}
	g->st.pinned_live--;
	g->pinned_bytes -= n;
	pthread_mutex_unlock(&g->mu);
	free(p);
}

static int g_queue_new(void *ctx, ckpt_memory_queue **out, int device)
{
	ts_guarded *g = ctx;
	*out = NULL;
	if (device < 0 || device >= g->num_devices)
		return CKPT_EINVAL;
	ckpt_memory_queue *q = calloc(1, sizeof(*q));
	if (!q)
		return CKPT_ENOMEM;
	q->device = device;
	*out = q;
	return CKPT_OK;
}

static int run_ops(ts_guarded *g, ckpt_memory_queue *q);

static void g_queue_free(void *ctx, ckpt_memory_queue *q)
{
	if (!q)
		return;
	run_ops(ctx, q);
	free(q->ops);
	free(q);
}

/* Check and queue one copy. dst_dev / src_dev: the device each side must be on, -1 for host memory. */
static int enqueue(ts_guarded *g, ckpt_memory_queue *q, int kind, void *dst, int dst_dev, const void *src, int src_dev,
	size_t n, int value)
{
	static const unsigned kind_bit[4] = { TS_G_H2D, TS_G_D2H, TS_G_D2D, TS_G_FILL };
	if (!q || !dst || (!src && kind != 3) || n == 0)
		return CKPT_EINVAL;
	pthread_mutex_lock(&g->mu);
	int rc = CKPT_OK, fail_at_sync = 0;
	gbuf *d = find(g, dst, n), *s = kind == 3 ? NULL : find(g, src, n);
	if ((dst_dev >= 0) != (d != NULL) || (src_dev >= 0) != (s != NULL) ||
	    (d && d->device != dst_dev) || (s && s->device != src_dev))
		rc = CKPT_EINVAL; /* a host pointer passed as device memory, or the other way round */
	else if (inject(g, kind_bit[kind]) && !(fail_at_sync = g->inj_at_sync))
		rc = ckpt_error_set(CKPT_EIO, NULL, NULL, -1, "guarded provider: injected copy failure");
	else if (!fail_at_sync && g->fail_count && g->fail_after == 0) {
		g->fail_count--;
		/* a message of its own, as a real provider's (a CUDA error's text): the library keeps it */
		rc = ckpt_error_set(CKPT_EIO, NULL, NULL, -1, "guarded provider: injected copy failure");
	} else {
		if (g->fail_count)
			g->fail_after--;
		if (q->count == q->cap) {
			size_t cap = q->cap ? 2 * q->cap : 16;
			gop *ops = realloc(q->ops, cap * sizeof(*ops));
			if (!ops)
				rc = CKPT_ENOMEM;
			else {
				q->ops = ops;
				q->cap = cap;
			}
		}
		if (rc == CKPT_OK) {
			q->ops[q->count++] = (gop){ kind, dst, src, n, value, fail_at_sync };
			uint64_t *bytes = kind == 0 ? &g->st.h2d_bytes : kind == 1 ? &g->st.d2h_bytes
				: kind == 2 ? &g->st.d2d_bytes : &g->st.fill_bytes;
			uint64_t *calls = kind == 0 ? &g->st.h2d_calls : kind == 1 ? &g->st.d2h_calls
				: kind == 2 ? &g->st.d2d_calls : &g->st.fill_calls;
			*bytes += n;
			(*calls)++;
			if (kind == 0 && find_in(g->pinned, src, n))
				g->st.h2d_pinned_bytes += n;
			if (kind == 1 && find_in(g->pinned, dst, n))
				g->st.d2h_pinned_bytes += n;
		}
	}
	pthread_mutex_unlock(&g->mu);
	return rc;
}

static int g_h2d(void *ctx, ckpt_memory_queue *q, void *dst, const void *src, size_t n)
{
	return enqueue(ctx, q, 0, dst, q ? q->device : 0, src, -1, n, 0);
}

static int g_d2h(void *ctx, ckpt_memory_queue *q, void *dst, const void *src, size_t n)
{
	return enqueue(ctx, q, 1, dst, -1, src, q ? q->device : 0, n, 0);
}

static int g_d2d(void *ctx, ckpt_memory_queue *q, void *dst, int dst_device, const void *src, int src_device, size_t n)
{
	if (q && q->device != dst_device)
		return CKPT_EINVAL;
	return enqueue(ctx, q, 2, dst, dst_device, src, src_device, n, 0);
}

static int g_fill(void *ctx, ckpt_memory_queue *q, void *dst, int value, size_t n)
{
	return enqueue(ctx, q, 3, dst, q ? q->device : 0, NULL, -1, n, value);
}

static void open_buf(gbuf *b, int on)
{
	mprotect(b->base, b->len, on ? PROT_READ | PROT_WRITE : PROT_NONE);
}

/* Run q's copies with their device buffers opened, then close them again. */
static int run_ops(ts_guarded *g, ckpt_memory_queue *q)
{
	pthread_mutex_lock(&g->mu);
	int rc = CKPT_OK;
	for (size_t i = 0; i < q->count; i++) {
		gop *o = &q->ops[i];
		gbuf *d = find(g, o->dst, o->n), *s = o->kind == 3 ? NULL : find(g, o->src, o->n);
		/* freed while the copy was pending: the caller broke the contract */
		if ((o->kind != 1 && !d) || (o->kind != 0 && o->kind != 3 && !s)) {
			rc = CKPT_EINVAL;
			continue;
		}
		if (d)
			open_buf(d, 1);
		if (s)
			open_buf(s, 1);
		/* an injected failure lands half of its bytes; what was queued after it is dropped */
		size_t len = o->fail ? o->n / 2 : o->n;
		if (o->kind == 3)
			memset(o->dst, o->value, len);
		else
			memmove(o->dst, o->src, len);
		if (d)
			open_buf(d, 0);
		if (s)
			open_buf(s, 0);
		if (o->fail) {
			rc = ckpt_error_set(CKPT_EIO, NULL, NULL, -1, "guarded provider: injected copy failure at synchronize");
			break;
		}
	}
	q->count = 0;
	g->st.syncs++;
	pthread_mutex_unlock(&g->mu);
	return rc;
}

static int g_sync(void *ctx, ckpt_memory_queue *q)
{
	if (!q)
		return CKPT_EINVAL;
	return run_ops(ctx, q);
}

static int g_broadcast(void *ctx, void *const *bufs, const int *devices, int count, int root, size_t n)
{
	ts_guarded *g = ctx;
	if (!bufs || !devices || root < 0 || root >= count || n == 0)
		return CKPT_EINVAL;
	pthread_mutex_lock(&g->mu);
	int rc = CKPT_OK;
	gbuf *s = find(g, bufs[root], n);
	if (!s || s->device != devices[root])
		rc = CKPT_EINVAL;
	for (int i = 0; i < count && rc == CKPT_OK; i++) {
		gbuf *d = find(g, bufs[i], n);
		if (!d || d->device != devices[i])
			rc = CKPT_EINVAL;
	}
	if (rc == CKPT_OK && inject(g, TS_G_BROADCAST)) {
		/* the first destination half written, the others not */
		int first = root == 0 ? 1 : 0;
		gbuf *d = find(g, bufs[first], n);
		open_buf(s, 1);
		open_buf(d, 1);
		memcpy(bufs[first], bufs[root], n / 2);
		open_buf(d, 0);
		open_buf(s, 0);
		pthread_mutex_unlock(&g->mu);
		return ckpt_error_set(CKPT_EIO, NULL, NULL, -1, "guarded provider: injected broadcast failure");
	}
	if (rc == CKPT_OK) {
		open_buf(s, 1);
		for (int i = 0; i < count; i++) {
			if (i == root)
				continue;
			gbuf *d = find(g, bufs[i], n);
			open_buf(d, 1);
			memcpy(bufs[i], bufs[root], n);
			if (d != s)
				open_buf(d, 0);
		}
		open_buf(s, 0);
		g->st.broadcast_calls++;
		g->st.broadcast_bytes += n * (uint64_t)(count - 1);
	}
	pthread_mutex_unlock(&g->mu);
	return rc;
}

ts_guarded *ts_guarded_new(int num_devices, int with_broadcast)
{
	ts_guarded *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->num_devices = num_devices;
	pthread_mutex_init(&g->mu, NULL);
	g->table = (ckpt_memory_provider){
		.version = CKPT_MEMORY_PROVIDER_VERSION,
		.struct_size = sizeof(ckpt_memory_provider),
		.ctx = g,
		.caps = g_caps,
		.device_alloc = g_device_alloc,
		.device_free = g_device_free,
		.host_alloc = g_host_alloc,
		.host_free = g_host_free,
		.queue_new = g_queue_new,
		.queue_free = g_queue_free,
		.copy_h2d = g_h2d,
		.copy_d2h = g_d2h,
		.copy_d2d = g_d2d,
		.synchronize = g_sync,
		.broadcast = with_broadcast ? g_broadcast : NULL,
		.fill = NULL,
	};
	return g;
}

void ts_guarded_set_fill(ts_guarded *g, int with_fill)
{
	g->table.fill = with_fill ? g_fill : NULL;
}

void ts_guarded_free(ts_guarded *g)
{
	if (!g)
		return;
	while (g->bufs) {
		gbuf *b = g->bufs;
		g->bufs = b->next;
		munmap(b->base, b->len);
		free(b);
	}
	while (g->pinned) {
		gbuf *b = g->pinned;
		g->pinned = b->next;
		free(b);
	}
	pthread_mutex_destroy(&g->mu);
	free(g);
}

const ckpt_memory_provider *ts_guarded_provider(ts_guarded *g)
{
	return &g->table;
}

ts_guarded_stats ts_guarded_get_stats(ts_guarded *g)
{
	pthread_mutex_lock(&g->mu);
	ts_guarded_stats s = g->st;
	pthread_mutex_unlock(&g->mu);
	return s;
}

void ts_guarded_fail_copies(ts_guarded *g, uint64_t after, uint64_t count)
{
	pthread_mutex_lock(&g->mu);
	g->fail_after = after;
	g->fail_count = count;
	pthread_mutex_unlock(&g->mu);
}

void ts_guarded_reset_peak(ts_guarded *g)
{
	pthread_mutex_lock(&g->mu);
	g->st.pinned_peak = g->pinned_bytes;
	pthread_mutex_unlock(&g->mu);
}

void ts_guarded_fail_nth(ts_guarded *g, unsigned mask, uint64_t k, int at_sync)
{
	pthread_mutex_lock(&g->mu);
	g->inj_mask = mask;
	g->inj_left = k;
	g->inj_at_sync = at_sync;
	g->inj_fired = 0;
	pthread_mutex_unlock(&g->mu);
}

int ts_guarded_fired(ts_guarded *g)
{
	pthread_mutex_lock(&g->mu);
	int fired = g->inj_fired;
	g->inj_mask = 0;
	pthread_mutex_unlock(&g->mu);
	return fired;
}

/*
 * Memory providers (ckpt/memory.h): the built-in host provider, the check of
 * a provider table, and the library-side helpers of memory_internal.h.
 *
 * The host provider keeps today's behaviour: "device" buffers are host
 * memory the CPU may dereference, copies are memcpy done when enqueued.
 * Strategies not made by ckpt_strategy_mirrored_on() carry no provider at
 * all (their variables use the library's own packed buffers); the host
 * provider is what a trainer passes to get the same memory explicitly, and
 * the reference the conformance suite checks other providers against.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memory_internal.h"

/* ---- the host provider ---- */

#define HOST_ALIGN 64

static int host_caps(void *ctx, ckpt_memory_caps *out)
{
	(void)ctx;
	out->name = "host";
	out->alignment = HOST_ALIGN;
	out->host_addressable = 1;
	out->num_devices = 1;
	return CKPT_OK;
}

static int host_device_alloc(void *ctx, void **out, int device, size_t n)
{
	(void)ctx;
	*out = NULL;
	if (device != 0 || n == 0)
		return CKPT_EINVAL;
	size_t rounded = (n + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
	void *p = NULL;
	if (posix_memalign(&p, HOST_ALIGN, rounded) != 0)
		return CKPT_ENOMEM;
	*out = p;
	return CKPT_OK;
}

static void host_device_free(void *ctx, int device, void *p, size_t n)
{
	(void)ctx, (void)device, (void)n;
	free(p);
}

static int host_host_alloc(void *ctx, void **out, size_t n)
{
	return host_device_alloc(ctx, out, 0, n);
}

static void host_host_free(void *ctx, void *p, size_t n)
{
	(void)ctx, (void)n;
	free(p);
}

/* Copies complete when enqueued: a queue needs no state; any non-NULL token will do. */
static char host_queue_token;

static int host_queue_new(void *ctx, ckpt_memory_queue **out, int device)
{
	(void)ctx;
	*out = NULL;
	if (device != 0)
		return CKPT_EINVAL;
	*out = (ckpt_memory_queue *)(void *)&host_queue_token;
	return CKPT_OK;
}

static void host_queue_free(void *ctx, ckpt_memory_queue *q)
{
	(void)ctx, (void)q;
}

static int host_copy(void *ctx, ckpt_memory_queue *q, void *dst, const void *src, size_t n)
{
	(void)ctx, (void)q;
	if (n && dst != src)
		memmove(dst, src, n);
	return CKPT_OK;
}

static int host_copy_d2d(void *ctx, ckpt_memory_queue *q, void *dst, int dst_device, const void *src,
	int src_device, size_t n)
{
	(void)dst_device, (void)src_device;
	return host_copy(ctx, q, dst, src, n);
}

static int host_synchronize(void *ctx, ckpt_memory_queue *q)
{
	(void)ctx, (void)q;
	return CKPT_OK;
}

static const ckpt_memory_provider host_provider = {
	.version = CKPT_MEMORY_PROVIDER_VERSION,
	.struct_size = sizeof(ckpt_memory_provider),
	.ctx = NULL,
	.caps = host_caps,
	.device_alloc = host_device_alloc,
	.device_free = host_device_free,
	.host_alloc = host_host_alloc,
	.host_free = host_host_free,
	.queue_new = host_queue_new,
	.queue_free = host_queue_free,
	.copy_h2d = host_copy,
	.copy_d2h = host_copy,
	.copy_d2d = host_copy_d2d,
	.synchronize = host_synchronize,
	.broadcast = NULL,
};

const ckpt_memory_provider *ckpt_memory_provider_host(void)
{
	return &host_provider;
}

/* ---- checking a table ---- */

int ckpt_memory_provider_check(const ckpt_memory_provider *p)
{
	if (!p)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "memory provider is NULL");
	if (p->version < 1 || p->version > CKPT_MEMORY_PROVIDER_VERSION)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"memory provider version is %u, this library speaks versions 1 to %u", p->version,
			(unsigned)CKPT_MEMORY_PROVIDER_VERSION);
	size_t need = p->version == 1 ? CKPT_MEMORY_PROVIDER_V1_SIZE : sizeof(ckpt_memory_provider);
	if (p->struct_size < need)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"memory provider struct_size is %zu, version %u needs %zu", p->struct_size,
			p->version, need);
	const char *missing = !p->caps ? "caps" : !p->device_alloc ? "device_alloc" : !p->device_free ? "device_free"
		: !p->host_alloc ? "host_alloc" : !p->host_free ? "host_free" : !p->queue_new ? "queue_new"
		: !p->queue_free ? "queue_free" : !p->copy_h2d ? "copy_h2d" : !p->copy_d2h ? "copy_d2h"
		: !p->copy_d2d ? "copy_d2d" : !p->synchronize ? "synchronize" : NULL;
	if (missing)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "memory provider has no %s method", missing);
	ckpt_memory_caps c = { 0 };
	int rc = p->caps(p->ctx, &c);
	if (rc < 0)
		return ckpt__fail(rc, NULL, NULL, -1, "memory provider: caps failed (%s)", ckpt_status_name(rc));
	if (!c.name || !c.name[0])
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "memory provider: caps gives no name");
	if (c.alignment == 0 || (c.alignment & (c.alignment - 1)))
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"memory provider '%s': alignment %zu is not a power of two", c.name, c.alignment);
	if (c.num_devices < 1)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"memory provider '%s': %d devices", c.name, c.num_devices);
	return CKPT_OK;
}

/* ---- a strategy's memory ---- */

void ckpt__mem_free(ckpt__mem *m)
{
	if (!m)
		return;
	for (int r = 0; r < m->n; r++)
		if (m->queues && m->queues[r])
			m->p.queue_free(m->p.ctx, m->queues[r]);
	ckpt__pool_free(m->pool, m);
	ckpt__free(m->queues);
	ckpt__free(m->devices);
	ckpt__free(m);
}

int ckpt__mem_new(ckpt__mem **out, const ckpt_memory_provider *p, const int *devices, int n)
{
	*out = NULL;
	CKPT_TRY(ckpt_memory_provider_check(p));
	if (!devices)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_strategy_mirrored_on: devices is NULL");
	ckpt__mem *m = ckpt__calloc(1, sizeof(*m));
	if (!m)
		return CKPT_ENOMEM;
	/* a version 1 table ends at broadcast: nothing past struct_size is read (later members stay NULL) */
	memcpy(&m->p, p, p->struct_size < sizeof(m->p) ? p->struct_size : sizeof(m->p));
	p->caps(p->ctx, &m->caps);
	m->n = n;
	m->staging_bytes = CKPT_STAGING_DEFAULT_BYTES;
	m->devices = ckpt__calloc((size_t)n, sizeof(*m->devices));
	m->queues = ckpt__calloc((size_t)n, sizeof(*m->queues));
	if (!m->devices || !m->queues || ckpt__pool_new(&m->pool, &m->caps) < 0) {
		ckpt__mem_free(m);
		return CKPT_ENOMEM;
	}
	for (int r = 0; r < n; r++) {
		if (devices[r] < 0 || devices[r] >= m->caps.num_devices) {
			int d = devices[r], nd = m->caps.num_devices;
			const char *name = m->caps.name;
			ckpt__mem_free(m);
			return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
				"replica %d on device %d: memory provider '%s' has devices 0..%d", r, d, name, nd - 1);
		}
		m->devices[r] = devices[r];
		int rc = m->p.queue_new(m->p.ctx, &m->queues[r], devices[r]);
		if (rc < 0 || !m->queues[r]) {
			const char *name = m->caps.name;
			int d = devices[r];
			m->queues[r] = NULL;
			ckpt__mem_free(m);
			return ckpt__fail(rc < 0 ? rc : CKPT_ERROR, NULL, NULL, -1,
				"memory provider '%s': cannot make a queue on device %d for replica %d", name, d, r);
		}
	}
	*out = m;
	return CKPT_OK;
}

int ckpt__mem_is_device(const ckpt__mem *m)
{
	return m && !m->caps.host_addressable;
}

void ckpt__mem_provider_why(char *buf, size_t n, int rc, uint64_t seq)
{
	const ckpt_error *e = ckpt_error_last();
	buf[0] = '\0';
	if (ckpt__error_seq() != seq && e->code == rc && e->message && *e->message)
		snprintf(buf, n, ": %s", e->message); /* copied: the caller's ckpt__fail replaces it */
}

/*
 * A provider's failure, naming the operation, replica and variable; the
 * provider's own message (a CUDA error's name and text, say) is kept after
 * ours when it set one during this call (`seq`: ckpt__error_seq() before it).
 */
static int op_failed(ckpt__mem *m, int rc, const char *op, int r, size_t n, const char *var, uint64_t seq)
{
	char why[512], size[48] = "";
	ckpt__mem_provider_why(why, sizeof(why), rc, seq);
	if (n) /* a synchronize has no size: it reports a copy enqueued earlier */
		snprintf(size, sizeof(size), " of %zu bytes", n);
	return ckpt__fail(rc, NULL, var, -1, "memory provider '%s': %s%s for replica %d (device %d)%s%s%s failed (%s)%s",
		m->caps.name, op, size, r, m->devices[r], var ? " of variable '" : "", var ? var : "", var ? "'" : "",
		ckpt_status_name(rc), why);
}

int ckpt__mem_device_alloc(ckpt__mem *m, int r, void **out, size_t n, const char *var)
{
	*out = NULL;
	uint64_t seq = ckpt__error_seq();
	int rc = m->p.device_alloc(m->p.ctx, out, m->devices[r], n ? n : 1);
	if (rc < 0 || !*out) {
		*out = NULL;
		return op_failed(m, rc < 0 ? rc : CKPT_ENOMEM, "allocation", r, n, var, seq);
	}
	return CKPT_OK;
}

void ckpt__mem_device_free(ckpt__mem *m, int r, void *p, size_t n)
{
	if (p)
		m->p.device_free(m->p.ctx, m->devices[r], p, n ? n : 1);
}

int ckpt__mem_value_alloc(ckpt__mem *m, int r, void **out, size_t n)
{
	*out = NULL;
	if (ckpt__pool_takes(m->pool, n))
		return ckpt__pool_alloc(m->pool, m, r, out, n);
	int rc = m->p.device_alloc(m->p.ctx, out, m->devices[r], n);
	if (rc >= 0 && !*out)
		rc = CKPT_ENOMEM;
	if (rc < 0)
		*out = NULL;
	return rc;
}

void ckpt__mem_value_free(ckpt__mem *m, int r, void *p, size_t n)
{
	if (!p)
		return;
	if (ckpt__pool_takes(m->pool, n))
		ckpt__pool_release(m->pool, m, r, p);
	else
		m->p.device_free(m->p.ctx, m->devices[r], p, n);
}

int ckpt__mem_h2d(ckpt__mem *m, int r, void *dst, const void *src, size_t n, const char *var)
{
	if (n == 0)
		return CKPT_OK;
	uint64_t seq = ckpt__error_seq();
	int rc = m->p.copy_h2d(m->p.ctx, m->queues[r], dst, src, n);
	return rc < 0 ? op_failed(m, rc, "host-to-device copy", r, n, var, seq) : CKPT_OK;
}

int ckpt__mem_d2h(ckpt__mem *m, int r, void *dst, const void *src, size_t n, const char *var)
{
	if (n == 0)
		return CKPT_OK;
	uint64_t seq = ckpt__error_seq();
	int rc = m->p.copy_d2h(m->p.ctx, m->queues[r], dst, src, n);
	return rc < 0 ? op_failed(m, rc, "device-to-host copy", r, n, var, seq) : CKPT_OK;
}

int ckpt__mem_d2d(ckpt__mem *m, int dst_r, void *dst, int src_r, const void *src, size_t n, const char *var)
{
	if (n == 0)
		return CKPT_OK;
	uint64_t seq = ckpt__error_seq();
	int rc = m->p.copy_d2d(m->p.ctx, m->queues[dst_r], dst, m->devices[dst_r], src, m->devices[src_r], n);
	return rc < 0 ? op_failed(m, rc, "device-to-device copy", dst_r, n, var, seq) : CKPT_OK;
}

int ckpt__mem_sync(ckpt__mem *m, int r, const char *var)
{
	uint64_t seq = ckpt__error_seq();
	int rc = m->p.synchronize(m->p.ctx, m->queues[r]);
	return rc < 0 ? op_failed(m, rc, "synchronize", r, 0, var, seq) : CKPT_OK;
}

int ckpt__mem_sync_all(ckpt__mem *m, const char *var)
{
	int first = CKPT_OK;
	ckpt__error_slot err = { 0 };
	for (int r = 0; r < m->n; r++) {
		int rc = ckpt__mem_sync(m, r, var);
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

int ckpt__mem_fanout(ckpt__mem *m, void *const *bufs, size_t off, size_t n, const char *var)
{
	if (m->n < 2 || n == 0)
		return CKPT_OK;
	if (m->p.broadcast && off == 0) {
		uint64_t seq = ckpt__error_seq();
		int rc = m->p.broadcast(m->p.ctx, bufs, m->devices, m->n, 0, n);
		return rc < 0 ? op_failed(m, rc, "broadcast", 0, n, var, seq) : CKPT_OK;
	}
	int rc = CKPT_OK;
	for (int r = 1; r < m->n && rc == CKPT_OK; r++)
		rc = ckpt__mem_d2d(m, r, (char *)bufs[r] + off, 0, (const char *)bufs[0] + off, n, var);
	/* every queue, even after a failed enqueue: nothing may still be in flight on return */
	int src = ckpt__mem_sync_all(m, var);
	return rc < 0 ? rc : src;
}

#define FILL_CHUNK ((size_t)1 << 20)

/* Zeros for ckpt__mem_fill: host memory a copy may read from (pinned or not), no allocation per fill. */
static const unsigned char zeros[64 << 10];

int ckpt__mem_fill(ckpt__mem *m, int r, void *dst, size_t n, const void *unit, size_t usize, const char *var)
{
	if (n == 0)
		return CKPT_OK;
	int all_zero = 1;
	for (size_t i = 0; i < usize; i++)
		all_zero &= ((const unsigned char *)unit)[i] == 0;
	int bytewise = 1;
	for (size_t i = 1; i < usize; i++)
		bytewise &= ((const unsigned char *)unit)[i] == ((const unsigned char *)unit)[0];
	if (bytewise && m->p.fill) {
		/* on the device: a 40 MB zeroed variable costs no 40 MB upload */
		uint64_t seq = ckpt__error_seq();
		int rc = m->p.fill(m->p.ctx, m->queues[r], dst, ((const unsigned char *)unit)[0], n);
		if (rc < 0)
			rc = op_failed(m, rc, "fill", r, n, var, seq);
		int src = ckpt__mem_sync(m, r, var);
		return rc < 0 ? rc : src;
	}
	if (all_zero) {
		/* creating 10,000 zeroed variables must not allocate pinned memory 10,000 times */
		int rc = CKPT_OK;
		for (size_t off = 0; off < n && rc == CKPT_OK; off += sizeof(zeros))
			rc = ckpt__mem_h2d(m, r, (char *)dst + off, zeros, n - off < sizeof(zeros) ? n - off : sizeof(zeros), var);
		int src = ckpt__mem_sync(m, r, var);
		return rc < 0 ? rc : src;
	}
	size_t chunk = n < FILL_CHUNK ? n : FILL_CHUNK;
	chunk -= chunk % usize;
	void *pat;
	CKPT_TRY(ckpt__mem_pinned_alloc(m, &pat, chunk, var));
	for (size_t i = 0; i < chunk; i += usize)
		memcpy((char *)pat + i, unit, usize);
	int rc = CKPT_OK;
	for (size_t off = 0; off < n && rc == CKPT_OK; off += chunk)
		rc = ckpt__mem_h2d(m, r, (char *)dst + off, pat, n - off < chunk ? n - off : chunk, var);
	int src = ckpt__mem_sync(m, r, var);
	ckpt__mem_pinned_free(m, pat, chunk);
	return rc < 0 ? rc : src;
}

int ckpt__mem_pinned_alloc(ckpt__mem *m, void **out, size_t n, const char *what)
{
	*out = NULL;
	uint64_t seq = ckpt__error_seq();
	int rc = m->p.host_alloc(m->p.ctx, out, n ? n : 1);
	if (rc < 0 || !*out) {
		char why[512];
		ckpt__mem_provider_why(why, sizeof(why), rc, seq);
		*out = NULL;
		return ckpt__fail(rc < 0 ? rc : CKPT_ENOMEM, NULL, what, -1,
			"memory provider '%s': cannot allocate %zu bytes of pinned host memory%s%s%s%s", m->caps.name, n,
			what ? " for '" : "", what ? what : "", what ? "'" : "", why);
	}
	return CKPT_OK;
}

void ckpt__mem_pinned_free(ckpt__mem *m, void *p, size_t n)
{
	if (p)
		m->p.host_free(m->p.ctx, p, n ? n : 1);
}

void ckpt__pinned_cache_free(ckpt__pinned_cache *c)
{
	if (c->m && c->p)
		ckpt__mem_pinned_free(c->m, c->p, c->cap);
	c->m = NULL;
	c->p = NULL;
	c->cap = 0;
}

int ckpt__pinned_cache_get(ckpt__pinned_cache *c, ckpt__mem *m, size_t n, void **out, const char *what)
{
	*out = NULL;
	if (c->m != m || c->cap < n) {
		ckpt__pinned_cache_free(c);
		CKPT_TRY(ckpt__mem_pinned_alloc(m, &c->p, n ? n : 1, what));
		c->m = m;
		c->cap = n ? n : 1;
	}
	*out = c->p;
	return CKPT_OK;
}

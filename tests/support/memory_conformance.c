/*
 * The provider conformance suite (memory_conformance.h). Each check is one
 * function returning NULL (passed) or what went wrong; bytes are always
 * looked at through copy_d2h into pinned memory, never by dereferencing a
 * device pointer, and only after synchronize.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memory_conformance.h"

typedef struct conf {
	const ckpt_memory_provider *p;
	ckpt_memory_caps caps;
	char why[256];
} conf;

#define FAIL(c, ...) do { snprintf((c)->why, sizeof((c)->why), __VA_ARGS__); return (c)->why; } while (0)
#define CALL(c, expr) do { int rc_ = (expr); if (rc_ != CKPT_OK) FAIL(c, "%s returned %s", #expr, ckpt_status_name(rc_)); } while (0)

static void pattern(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 8)) & 0xff);
}

/* Everything one check needs: a queue, a device buffer, two pinned buffers of n bytes. */
typedef struct kit {
	ckpt_memory_queue *q;
	void *dev;
	unsigned char *in, *out;
	size_t n;
	int device;
} kit;

static void kit_free(conf *c, kit *k)
{
	const ckpt_memory_provider *p = c->p;
	if (k->q)
		p->queue_free(p->ctx, k->q);
	if (k->dev)
		p->device_free(p->ctx, k->device, k->dev, k->n);
	if (k->in)
		p->host_free(p->ctx, k->in, k->n);
	if (k->out)
		p->host_free(p->ctx, k->out, k->n);
	memset(k, 0, sizeof(*k));
}

static const char *kit_new(conf *c, kit *k, int device, size_t n)
{
	const ckpt_memory_provider *p = c->p;
	memset(k, 0, sizeof(*k));
	k->n = n;
	k->device = device;
	void *in = NULL, *out = NULL;
	if (p->queue_new(p->ctx, &k->q, device) != CKPT_OK || !k->q)
		FAIL(c, "queue_new on device %d failed", device);
	if (p->device_alloc(p->ctx, &k->dev, device, n) != CKPT_OK || !k->dev)
		FAIL(c, "device_alloc(%zu) on device %d failed", n, device);
	if (p->host_alloc(p->ctx, &in, n) != CKPT_OK || !in || p->host_alloc(p->ctx, &out, n) != CKPT_OK || !out) {
		k->in = in;
		k->out = out;
		FAIL(c, "host_alloc(%zu) failed", n);
	}
	k->in = in;
	k->out = out;
	return NULL;
}

static const char *check_table(conf *c)
{
	if (ckpt_memory_provider_check(c->p) != CKPT_OK)
		FAIL(c, "ckpt_memory_provider_check: %s", ckpt_error_last()->message);
	if (c->p->caps(c->p->ctx, &c->caps) != CKPT_OK)
		FAIL(c, "caps failed");
	return NULL;
}

/* A table with a wrong version or a missing method is refused, naming it. */
static const char *check_rejects_bad_tables(conf *c)
{
	ckpt_memory_provider bad = *c->p;
	bad.version = CKPT_MEMORY_PROVIDER_VERSION + 1;
	if (ckpt_memory_provider_check(&bad) != CKPT_EINVAL)
		FAIL(c, "a table of version %u was accepted", bad.version);
	bad = *c->p;
	bad.copy_d2d = NULL;
	if (ckpt_memory_provider_check(&bad) != CKPT_EINVAL || !strstr(ckpt_error_last()->message, "copy_d2d"))
		FAIL(c, "a table without copy_d2d was accepted or not named");
	return NULL;
}

static const char *check_alignment(conf *c)
{
	const size_t sizes[] = { 1, 3, 4096 + 5, 1 << 20 };
	for (int d = 0; d < c->caps.num_devices && d < 4; d++) {
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			void *p = NULL;
			CALL(c, c->p->device_alloc(c->p->ctx, &p, d, sizes[i]));
			uintptr_t a = (uintptr_t)p;
			c->p->device_free(c->p->ctx, d, p, sizes[i]);
			if (!p || a % c->caps.alignment)
				FAIL(c, "device_alloc(%zu) on device %d gave %p, not %zu-aligned", sizes[i], d, p, c->caps.alignment);
		}
	}
	return NULL;
}

static const char *check_pinned_is_host_memory(conf *c)
{
	void *p = NULL;
	CALL(c, c->p->host_alloc(c->p->ctx, &p, 12345));
	memset(p, 0x5a, 12345);
	int ok = ((unsigned char *)p)[12344] == 0x5a;
	c->p->host_free(c->p->ctx, p, 12345);
	if (!ok)
		FAIL(c, "pinned memory did not keep what the CPU wrote");
	return NULL;
}

/* H2D then D2H, whole and at odd offsets, on every device. */
static const char *check_round_trip(conf *c)
{
	for (int d = 0; d < c->caps.num_devices && d < 4; d++) {
		kit k;
		const char *w = kit_new(c, &k, d, (3u << 20) + 17);
		if (w) {
			kit_free(c, &k);
			return w;
		}
		pattern(k.in, k.n, (unsigned)d + 1);
		memset(k.out, 0, k.n);
		int rc = c->p->copy_h2d(c->p->ctx, k.q, k.dev, k.in, k.n);
		if (rc == CKPT_OK)
			rc = c->p->synchronize(c->p->ctx, k.q);
		if (rc == CKPT_OK)
			rc = c->p->copy_d2h(c->p->ctx, k.q, k.out + 7, (char *)k.dev + 7, k.n - 7 - 5);
		if (rc == CKPT_OK)
			rc = c->p->synchronize(c->p->ctx, k.q);
		int same = rc == CKPT_OK && memcmp(k.out + 7, k.in + 7, k.n - 12) == 0 && k.out[0] == 0;
		kit_free(c, &k);
		if (rc != CKPT_OK)
			FAIL(c, "round trip on device %d: %s", d, ckpt_status_name(rc));
		if (!same)
			FAIL(c, "round trip on device %d: bytes differ", d);
	}
	return NULL;
}

/* Copies on one queue complete in order: the second write to the same bytes wins, a read sees the write before it. */
static const char *check_queue_order(conf *c)
{
	kit k;
	const char *w = kit_new(c, &k, 0, 8192);
	if (w) {
		kit_free(c, &k);
		return w;
	}
	unsigned char *a = k.in, *b = k.out;
	memset(a, 1, 4096);
	memset(a + 4096, 2, 4096);
	int rc = c->p->copy_h2d(c->p->ctx, k.q, k.dev, a, 4096);
	if (rc == CKPT_OK)
		rc = c->p->copy_h2d(c->p->ctx, k.q, k.dev, a + 4096, 4096);
	if (rc == CKPT_OK)
		rc = c->p->copy_d2h(c->p->ctx, k.q, b, k.dev, 4096);
	if (rc == CKPT_OK)
		rc = c->p->synchronize(c->p->ctx, k.q);
	int ok = rc == CKPT_OK && b[0] == 2 && b[4095] == 2;
	kit_free(c, &k);
	if (rc != CKPT_OK)
		FAIL(c, "queued copies: %s", ckpt_status_name(rc));
	if (!ok)
		FAIL(c, "copies on one queue did not complete in order");
	return NULL;
}

/* D2D within a device and, with two devices, across them (peer copy). */
static const char *check_d2d(conf *c)
{
	int nd = c->caps.num_devices > 1 ? 2 : 1;
	for (int dst = 0; dst < nd; dst++) {
		kit k0, k1;
		const char *w = kit_new(c, &k0, 0, 1 << 20);
		if (!w)
			w = kit_new(c, &k1, dst, 1 << 20);
		else
			memset(&k1, 0, sizeof(k1));
		if (w) {
			kit_free(c, &k0);
			kit_free(c, &k1);
			return w;
		}
		pattern(k0.in, k0.n, 9);
		int rc = c->p->copy_h2d(c->p->ctx, k0.q, k0.dev, k0.in, k0.n);
		if (rc == CKPT_OK)
			rc = c->p->synchronize(c->p->ctx, k0.q);
		if (rc == CKPT_OK)
			rc = c->p->copy_d2d(c->p->ctx, k1.q, (char *)k1.dev + 64, dst, (char *)k0.dev + 128, 0, k0.n - 4096);
		if (rc == CKPT_OK)
			rc = c->p->copy_d2h(c->p->ctx, k1.q, k1.out, (char *)k1.dev + 64, k0.n - 4096);
		if (rc == CKPT_OK)
			rc = c->p->synchronize(c->p->ctx, k1.q);
		int ok = rc == CKPT_OK && memcmp(k1.out, k0.in + 128, k0.n - 4096) == 0;
		kit_free(c, &k0);
		kit_free(c, &k1);
		if (rc != CKPT_OK)
			FAIL(c, "device-to-device copy 0 -> %d: %s", dst, ckpt_status_name(rc));
		if (!ok)
			FAIL(c, "device-to-device copy 0 -> %d: bytes differ", dst);
	}
	return NULL;
}

/* Two queues on one device are independent: synchronizing one completes its own copies. */
static const char *check_two_queues(conf *c)
{
	kit a, b;
	const char *w = kit_new(c, &a, 0, 65536);
	if (!w)
		w = kit_new(c, &b, 0, 65536);
	else
		memset(&b, 0, sizeof(b));
	if (w) {
		kit_free(c, &a);
		kit_free(c, &b);
		return w;
	}
	pattern(a.in, a.n, 3);
	pattern(b.in, b.n, 4);
	int rc = c->p->copy_h2d(c->p->ctx, a.q, a.dev, a.in, a.n);
	if (rc == CKPT_OK)
		rc = c->p->copy_h2d(c->p->ctx, b.q, b.dev, b.in, b.n);
	if (rc == CKPT_OK)
		rc = c->p->synchronize(c->p->ctx, b.q);
	if (rc == CKPT_OK)
		rc = c->p->synchronize(c->p->ctx, a.q);
	if (rc == CKPT_OK)
		rc = c->p->copy_d2h(c->p->ctx, a.q, a.out, a.dev, a.n);
	if (rc == CKPT_OK)
		rc = c->p->copy_d2h(c->p->ctx, b.q, b.out, b.dev, b.n);
	if (rc == CKPT_OK)
		rc = c->p->synchronize(c->p->ctx, a.q);
	if (rc == CKPT_OK)
		rc = c->p->synchronize(c->p->ctx, b.q);
	int ok = rc == CKPT_OK && !memcmp(a.out, a.in, a.n) && !memcmp(b.out, b.in, b.n);
	kit_free(c, &a);
	kit_free(c, &b);
	if (rc != CKPT_OK)
		FAIL(c, "two queues: %s", ckpt_status_name(rc));
	if (!ok)
		FAIL(c, "two queues on one device mixed their copies");
	return NULL;
}

/* The optional broadcast: root's bytes in every buffer on return. */
static const char *check_broadcast(conf *c)
{
	if (!c->p->broadcast)
		return NULL;
	enum { N = 3 };
	size_t n = 300000;
	kit k[N];
	void *bufs[N];
	int devs[N];
	const char *w = NULL;
	int made = 0;
	for (int i = 0; i < N && !w; i++, made++) {
		devs[i] = i % c->caps.num_devices;
		w = kit_new(c, &k[i], devs[i], n);
		bufs[i] = k[i].dev;
	}
	int rc = CKPT_OK, ok = 0;
	if (!w) {
		pattern(k[1].in, n, 11);
		rc = c->p->copy_h2d(c->p->ctx, k[1].q, k[1].dev, k[1].in, n);
		if (rc == CKPT_OK)
			rc = c->p->synchronize(c->p->ctx, k[1].q);
		if (rc == CKPT_OK)
			rc = c->p->broadcast(c->p->ctx, bufs, devs, N, 1, n);
		ok = rc == CKPT_OK;
		for (int i = 0; i < N && rc == CKPT_OK; i++) {
			rc = c->p->copy_d2h(c->p->ctx, k[i].q, k[i].out, k[i].dev, n);
			if (rc == CKPT_OK)
				rc = c->p->synchronize(c->p->ctx, k[i].q);
			ok = ok && rc == CKPT_OK && !memcmp(k[i].out, k[1].in, n);
		}
	}
	for (int i = 0; i < made; i++)
		kit_free(c, &k[i]);
	if (w)
		return w;
	if (rc != CKPT_OK)
		FAIL(c, "broadcast: %s", ckpt_status_name(rc));
	if (!ok)
		FAIL(c, "broadcast left a replica without root's bytes");
	return NULL;
}

/* ---- the library over the provider ---- */

static int replicas_on(conf *c, ckpt_strategy **s, int n)
{
	int devs[4];
	for (int i = 0; i < n; i++)
		devs[i] = i % c->caps.num_devices;
	return ckpt_strategy_mirrored_on(s, c->p, devs, n);
}

/* Create (initial value), assign, read and compare a mirrored variable of 3 replicas, two sharing a device. */
static const char *check_mirrored_variable(conf *c)
{
	ckpt_strategy *s;
	CALL(c, replicas_on(c, &s, 3));
	enum { N = 100000 };
	float *init = malloc(N * sizeof(float)), *back = malloc(N * sizeof(float));
	for (int i = 0; i < N; i++)
		init[i] = (float)i * 0.5f;
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.initial_value = init;
	ckpt_shape sh = { 1, { N } };
	ckpt_variable *v = NULL;
	const char *w = NULL;
	ckpt_scope_enter(s);
	int rc = ckpt_variable_new(&v, "w", CKPT_DT_FLOAT, &sh, &o);
	ckpt_scope_exit(s);
	if (rc != CKPT_OK)
		w = "ckpt_variable_new over the provider failed";
	if (!w && (ckpt_variable_read(v, back, N * sizeof(float)) != CKPT_OK || memcmp(back, init, N * sizeof(float))))
		w = "read after create did not give the initial value";
	if (!w && ckpt_variable_replicas_identical(v) != 1)
		w = "replicas differ after create";
	for (int i = 0; i < N && !w; i++)
		init[i] = -(float)i;
	if (!w && ckpt_variable_assign(v, init, N * sizeof(float)) != CKPT_OK)
		w = "assign failed";
	memset(init, 0, N * sizeof(float)); /* the library must not keep reading the source after assign returns */
	if (!w && (ckpt_variable_read(v, back, N * sizeof(float)) != CKPT_OK || back[7] != -7.0f || back[N - 1] != -(float)(N - 1)))
		w = "read after assign did not give the assigned value";
	if (!w && ckpt_variable_replicas_identical(v) != 1)
		w = "replicas differ after assign";
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
	free(init);
	free(back);
	if (w)
		FAIL(c, "%s (%s)", w, ckpt_error_last()->message);
	return NULL;
}

/* A sync-on-read SUM variable: assign splits, read aggregates through the provider. */
static const char *check_sync_on_read(conf *c)
{
	ckpt_strategy *s;
	CALL(c, replicas_on(c, &s, 4));
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.sync = CKPT_SYNC_ON_READ;
	o.aggregation = CKPT_AGG_SUM;
	ckpt_shape sh = { 1, { 5 } };
	ckpt_variable *v = NULL;
	ckpt_scope_enter(s);
	int rc = ckpt_variable_new(&v, "total", CKPT_DT_INT64, &sh, &o);
	ckpt_scope_exit(s);
	int64_t val[5] = { 1, -2, 3, 1 << 30, 5 }, back[5] = { 0 };
	if (rc == CKPT_OK)
		rc = ckpt_variable_assign(v, val, sizeof(val));
	if (rc == CKPT_OK)
		rc = ckpt_variable_read(v, back, sizeof(back));
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
	if (rc != CKPT_OK)
		FAIL(c, "sync-on-read over the provider: %s", ckpt_error_last()->message);
	if (memcmp(val, back, sizeof(val)))
		FAIL(c, "sync-on-read SUM read back %lld, want %lld", (long long)back[3], (long long)val[3]);
	return NULL;
}

/* The all-reduce of ckpt_strategy_run over device buffers (each replica's copy of a variable). */
static int reduce_step(ckpt_replica_ctx *ctx, void *arg)
{
	ckpt_variable *v = arg;
	void *mine;
	int rc = ckpt_status_of(mine = ckpt_variable_local(v));
	if (rc < 0)
		return rc;
	return ckpt_replica_all_reduce_f32(ctx, CKPT_REDUCE_SUM, mine, 1000);
}

static const char *check_all_reduce(conf *c)
{
	ckpt_strategy *s;
	CALL(c, replicas_on(c, &s, 3));
	float init[1000], back[1000];
	for (int i = 0; i < 1000; i++)
		init[i] = (float)i;
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.initial_value = init;
	ckpt_shape sh = { 1, { 1000 } };
	ckpt_variable *v = NULL;
	ckpt_scope_enter(s);
	int rc = ckpt_variable_new(&v, "g", CKPT_DT_FLOAT, &sh, &o);
	ckpt_scope_exit(s);
	if (rc == CKPT_OK)
		rc = ckpt_strategy_run(s, reduce_step, v);
	if (rc == CKPT_OK)
		rc = ckpt_variable_read(v, back, sizeof(back));
	int same = rc == CKPT_OK && ckpt_variable_replicas_identical(v) == 1;
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
	if (rc != CKPT_OK)
		FAIL(c, "all-reduce over device buffers: %s", ckpt_error_last()->message);
	if (!same || back[999] != 3 * 999.0f)
		FAIL(c, "all-reduce over device buffers gave %g, want %g", (double)back[999], 3 * 999.0);
	return NULL;
}

/* Trainer-owned device buffers wrapped as replicas keep their bytes and are not freed by the library. */
static const char *check_wrap(conf *c)
{
	ckpt_strategy *s;
	CALL(c, replicas_on(c, &s, 2));
	kit k[2];
	const char *w = kit_new(c, &k[0], 0, 4096);
	if (!w)
		w = kit_new(c, &k[1], 1 % c->caps.num_devices, 4096);
	else
		memset(&k[1], 0, sizeof(k[1]));
	int rc = CKPT_OK;
	double back[512];
	if (!w) {
		pattern(k[0].in, 4096, 5);
		for (int i = 0; i < 2 && rc == CKPT_OK; i++) {
			rc = c->p->copy_h2d(c->p->ctx, k[i].q, k[i].dev, k[0].in, 4096);
			if (rc == CKPT_OK)
				rc = c->p->synchronize(c->p->ctx, k[i].q);
		}
		void *bufs[2] = { k[0].dev, k[1].dev };
		ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
		o.replica_buffers = bufs;
		ckpt_shape sh = { 1, { 512 } };
		ckpt_variable *v = NULL;
		ckpt_scope_enter(s);
		if (rc == CKPT_OK)
			rc = ckpt_variable_new(&v, "wrapped", CKPT_DT_DOUBLE, &sh, &o);
		ckpt_scope_exit(s);
		if (rc == CKPT_OK)
			rc = ckpt_variable_read(v, back, sizeof(back));
		if (rc == CKPT_OK && memcmp(back, k[0].in, 4096))
			w = "a wrapped device buffer did not keep its contents";
		ckpt_variable_free(v);
		/* still ours: the library did not free it */
		if (!w && rc == CKPT_OK) {
			rc = c->p->copy_d2h(c->p->ctx, k[1].q, k[1].out, k[1].dev, 4096);
			if (rc == CKPT_OK)
				rc = c->p->synchronize(c->p->ctx, k[1].q);
			if (rc == CKPT_OK && memcmp(k[1].out, k[0].in, 4096))
				w = "a wrapped buffer changed after its variable was freed";
		}
	}
	kit_free(c, &k[0]);
	kit_free(c, &k[1]);
	ckpt_strategy_free(s);
	if (w)
		return w;
	if (rc != CKPT_OK)
		FAIL(c, "wrapping device buffers: %s", ckpt_error_last()->message);
	return NULL;
}

/* A device id the provider does not have is refused by name. */
static const char *check_bad_device(conf *c)
{
	ckpt_strategy *s = NULL;
	int devs[2] = { 0, c->caps.num_devices };
	int rc = ckpt_strategy_mirrored_on(&s, c->p, devs, 2);
	ckpt_strategy_free(s);
	if (rc != CKPT_EINVAL || !strstr(ckpt_error_last()->message, c->caps.name))
		FAIL(c, "device %d of a provider with %d was not refused naming the provider", devs[1], c->caps.num_devices);
	return NULL;
}

typedef const char *(*check_fn)(conf *c);

int ckpt_memory_conformance(const ckpt_memory_provider *p, char *report, size_t report_len)
{
	static const struct { const char *name; check_fn fn; } checks[] = {
		{ "table", check_table },
		{ "rejects_bad_tables", check_rejects_bad_tables },
		{ "alignment", check_alignment },
		{ "pinned_is_host_memory", check_pinned_is_host_memory },
		{ "round_trip", check_round_trip },
		{ "queue_order", check_queue_order },
		{ "d2d", check_d2d },
		{ "two_queues", check_two_queues },
		{ "broadcast", check_broadcast },
		{ "mirrored_variable", check_mirrored_variable },
		{ "sync_on_read", check_sync_on_read },
		{ "all_reduce", check_all_reduce },
		{ "wrap", check_wrap },
		{ "bad_device", check_bad_device },
	};
	conf c = { .p = p };
	int passed = 0, failed = 0;
	char fails[1024] = "";
	size_t used = 0;
	size_t nchecks = sizeof(checks) / sizeof(checks[0]);
	for (size_t i = 0; i < nchecks; i++) {
		/* without a valid table nothing else can run */
		const char *w = (i > 0 && failed && passed == 0) ? "skipped: the table is invalid" : checks[i].fn(&c);
		if (!w) {
			passed++;
			continue;
		}
		failed++;
		if (used < sizeof(fails))
			used += (size_t)snprintf(fails + used, sizeof(fails) - used, "%s%s: %s", failed > 1 ? "; " : "",
				checks[i].name, w);
	}
	if (report && report_len) {
		if (failed)
			snprintf(report, report_len, "%d passed, %d failed: %s", passed, failed, fails);
		else
			snprintf(report, report_len, "%d passed", passed);
	}
	return failed;
}

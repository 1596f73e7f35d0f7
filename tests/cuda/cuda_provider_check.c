/*
 * cuda_provider_check: the CUDA provider (ckpt/cuda.h) through the provider
 * conformance suite every provider runs (tests/support/memory_conformance.c),
 * then CUDA-specific checks through its table and through the library, as
 * one program so it runs the same way in two places:
 *  - here, without a GPU, against tests/cuda/fake_cudart.c put in place of
 *    libcudart (LD_LIBRARY_PATH; tests/memory/test_cuda_provider.c): that checks
 *    our CUDA call sequence against an emulation, not a GPU;
 *  - on a GPU, against the real runtime, plain and under
 *    `compute-sanitizer --tool memcheck` (bench/gpu_check.sh).
 *
 * Usage: cuda_provider_check [--mistake deref|nosync]
 * --mistake runs one deliberate misuse that must fail (a crash, or stale
 * bytes reported), to show the emulation can catch it. Exit 0 when every
 * check passed; each failure is printed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "ckpt/cuda.h"
#include "memory_conformance.h"

static int g_failures;

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			g_failures++; \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fprintf(stderr, " [last error: %s]\n", ckpt_error_last()->message ? ckpt_error_last()->message : "-"); \
		} \
	} while (0)

#define OK(call) CHECK((call) == CKPT_OK, "%s", #call)

static void pattern(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;
	uint32_t x = seed * 2654435761u + 1;

	for (i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (unsigned char)(x >> 16);
	}
}

/* One device: h2d then d2h round trips, at odd sizes and offsets, from pinned and from pageable memory. */
static void check_round_trip(const ckpt_memory_provider *t, int dev)
{
	void *d = NULL, *pin_a = NULL, *pin_b = NULL;
	unsigned char *page = malloc(1 << 20);
	ckpt_memory_queue *q = NULL;
	ckpt_memory_caps caps;
	const size_t n = 1 << 20, odd = 4097, off = 3;

	t->caps(t->ctx, &caps);
	OK(t->queue_new(t->ctx, &q, dev));
	OK(t->device_alloc(t->ctx, &d, dev, n));
	OK(t->host_alloc(t->ctx, &pin_a, n));
	OK(t->host_alloc(t->ctx, &pin_b, n));
	if (!q || !d || !pin_a || !pin_b || !page)
		goto out;
	CHECK(((uintptr_t)d & (caps.alignment - 1)) == 0, "device buffer %p not %zu-aligned", d, caps.alignment);
	pattern(pin_a, n, (unsigned)dev + 1);
	memset(pin_b, 0, n);
	OK(t->copy_h2d(t->ctx, q, d, pin_a, n));
	OK(t->copy_d2h(t->ctx, q, pin_b, d, n));
	OK(t->synchronize(t->ctx, q));
	CHECK(memcmp(pin_a, pin_b, n) == 0, "device %d: pinned round trip of %zu bytes differs", dev, n);

	/* an odd range at an odd offset, from and to pageable memory */
	pattern(page, odd, 77);
	OK(t->copy_h2d(t->ctx, q, (char *)d + off, page, odd));
	memset(page, 0, odd); /* the runtime took the bytes at the call (pageable source) */
	OK(t->copy_d2h(t->ctx, q, (char *)pin_b + off, (char *)d + off, odd));
	OK(t->synchronize(t->ctx, q));
	pattern(page, odd, 77);
	CHECK(memcmp((char *)pin_b + off, page, odd) == 0, "device %d: odd-offset round trip differs", dev);
	CHECK(memcmp(pin_b, pin_a, off) == 0, "device %d: bytes before the odd range changed", dev);

	/* copies on one queue complete in order: the second upload must not overtake the first download */
	pattern(pin_a, 4096, 5);
	OK(t->copy_h2d(t->ctx, q, d, pin_a, 4096));
	OK(t->copy_d2h(t->ctx, q, pin_b, d, 4096));
	OK(t->copy_h2d(t->ctx, q, d, (char *)pin_a + 4096, 4096));
	OK(t->synchronize(t->ctx, q));
	CHECK(memcmp(pin_a, pin_b, 4096) == 0, "device %d: copies on one queue ran out of order", dev);
out:
	t->host_free(t->ctx, pin_a, n);
	t->host_free(t->ctx, pin_b, n);
	t->device_free(t->ctx, dev, d, n);
	t->queue_free(t->ctx, q);
	free(page);
}

/* Device to device on one device and, with two or more, across devices (peer copies). */
static void check_d2d(const ckpt_memory_provider *t, int ndev)
{
	int src_dev, dst_dev;
	const size_t n = 256 << 10;
	void *pin_a = NULL, *pin_b = NULL;

	OK(t->host_alloc(t->ctx, &pin_a, n));
	OK(t->host_alloc(t->ctx, &pin_b, n));
	if (!pin_a || !pin_b)
		goto out;
	for (src_dev = 0; src_dev < ndev && src_dev < 2; src_dev++)
		for (dst_dev = 0; dst_dev < ndev && dst_dev < 2; dst_dev++) {
			void *s = NULL, *d = NULL;
			ckpt_memory_queue *qs = NULL, *qd = NULL;
			OK(t->queue_new(t->ctx, &qs, src_dev));
			OK(t->queue_new(t->ctx, &qd, dst_dev));
			OK(t->device_alloc(t->ctx, &s, src_dev, n));
			OK(t->device_alloc(t->ctx, &d, dst_dev, n));
			if (qs && qd && s && d) {
				pattern(pin_a, n, (unsigned)(src_dev * 10 + dst_dev));
				memset(pin_b, 0, n);
				OK(t->copy_h2d(t->ctx, qs, s, pin_a, n));
				OK(t->synchronize(t->ctx, qs)); /* the source is complete before another queue reads it */
				OK(t->copy_d2d(t->ctx, qd, d, dst_dev, s, src_dev, n));
				OK(t->copy_d2h(t->ctx, qd, pin_b, d, n));
				OK(t->synchronize(t->ctx, qd));
				CHECK(memcmp(pin_a, pin_b, n) == 0, "d2d %d -> %d differs", src_dev, dst_dev);
				/* a copy onto another device than the queue's, or onto no device, is refused, not run */
				CHECK(t->copy_d2d(t->ctx, qs, d, dst_dev == src_dev ? ndev : dst_dev, s, src_dev, n) == CKPT_EINVAL,
					"d2d onto device %d accepted on a queue of device %d", dst_dev == src_dev ? ndev : dst_dev,
					src_dev);
			}
			t->device_free(t->ctx, src_dev, s, n);
			t->device_free(t->ctx, dst_dev, d, n);
			t->queue_free(t->ctx, qs);
			t->queue_free(t->ctx, qd);
		}
out:
	t->host_free(t->ctx, pin_a, n);
	t->host_free(t->ctx, pin_b, n);
}

/* broadcast over `devices` (count replicas): every buffer ends equal to the root's. */
static void check_broadcast(const ckpt_memory_provider *t, const int *devices, int count, int root)
{
	void *bufs[8] = { 0 };
	ckpt_memory_queue *q[8] = { 0 };
	const size_t n = 300 << 10;
	void *pin_a = NULL, *pin_b = NULL;
	int i;

	OK(t->host_alloc(t->ctx, &pin_a, n));
	OK(t->host_alloc(t->ctx, &pin_b, n));
	for (i = 0; i < count; i++) {
		OK(t->queue_new(t->ctx, &q[i], devices[i]));
		OK(t->device_alloc(t->ctx, &bufs[i], devices[i], n));
	}
	if (!pin_a || !pin_b)
		goto out;
	for (i = 0; i < count; i++)
		if (!bufs[i] || !q[i])
			goto out;
	memset(pin_b, 0x11, n);
	for (i = 0; i < count; i++)
		OK(t->copy_h2d(t->ctx, q[i], bufs[i], pin_b, n)); /* stale bytes in every replica */
	pattern(pin_a, n, 99);
	OK(t->copy_h2d(t->ctx, q[root], bufs[root], pin_a, n));
	for (i = 0; i < count; i++)
		OK(t->synchronize(t->ctx, q[i]));
	OK(t->broadcast(t->ctx, bufs, devices, count, root, n));
	for (i = 0; i < count; i++) {
		memset(pin_b, 0, n);
		OK(t->copy_d2h(t->ctx, q[i], pin_b, bufs[i], n));
		OK(t->synchronize(t->ctx, q[i]));
		CHECK(memcmp(pin_a, pin_b, n) == 0, "broadcast from replica %d: replica %d (device %d) differs", root, i,
			devices[i]);
	}
out:
	for (i = 0; i < count; i++) {
		t->device_free(t->ctx, devices[i], bufs[i], n);
		t->queue_free(t->ctx, q[i]);
	}
	t->host_free(t->ctx, pin_a, n);
	t->host_free(t->ctx, pin_b, n);
}

/* Misuse the provider's own checks refuse with a message. */
static void check_refusals(const ckpt_memory_provider *t, int ndev)
{
	void *d = NULL;
	ckpt_memory_queue *q = NULL;

	CHECK(t->device_alloc(t->ctx, &d, ndev, 64) == CKPT_EINVAL && !d, "device_alloc on device %d accepted", ndev);
	CHECK(strstr(ckpt_error_last()->message, "device") != NULL, "no device in '%s'", ckpt_error_last()->message);
	CHECK(t->queue_new(t->ctx, &q, -1) == CKPT_EINVAL && !q, "queue_new on device -1 accepted");
	CHECK(t->device_alloc(t->ctx, &d, 0, 0) == CKPT_EINVAL, "device_alloc of 0 bytes accepted");
}

/*
 * Through the library: a mirrored strategy over the provider, variables
 * assigned, read, saved, and restored into a second strategy's variables.
 */
static void check_library(const ckpt_memory_provider *t, int ndev, const char *dir)
{
	int devices[4], i, r;
	ckpt_strategy *s = NULL, *s2 = NULL;
	ckpt_checkpoint *ck = NULL, *ck2 = NULL;
	ckpt_variable *v = NULL, *v2 = NULL;
	ckpt_restore_status *st = NULL;
	ckpt_shape shape;
	int64_t dims[2] = { 123, 77 };
	size_t nbytes = 123 * 77 * sizeof(float);
	float *a = malloc(nbytes), *b = malloc(nbytes);
	char prefix[4096];
	void *pin = NULL;
	ckpt_memory_queue *q = NULL;

	for (i = 0; i < 4; i++)
		devices[i] = i * ndev / 4; /* 4 replicas over the devices, some sharing one */
	ckpt_shape_make(&shape, 2, dims);
	for (i = 0; i < 123 * 77; i++)
		a[i] = (float)i * 0.25f - 7.0f;
	OK(ckpt_strategy_mirrored_on(&s, t, devices, 4));
	OK(ckpt_strategy_mirrored_on(&s2, t, devices, 4));
	if (!s || !s2)
		goto out;
	OK(ckpt_checkpoint_new(&ck, NULL));
	OK(ckpt_checkpoint_new(&ck2, NULL));
	OK(ckpt_scope_enter(s));
	OK(ckpt_status_of(v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "w", "w", CKPT_DT_FLOAT, &shape, NULL)));
	ckpt_scope_exit(s);
	OK(ckpt_scope_enter(s2));
	OK(ckpt_status_of(v2 = ckpt_object_add_variable(ckpt_checkpoint_root(ck2), "w", "w", CKPT_DT_FLOAT, &shape, NULL)));
	ckpt_scope_exit(s2);
	if (!v || !v2)
		goto out;
	OK(ckpt_variable_assign(v, a, nbytes));
	memset(b, 0, nbytes);
	OK(ckpt_variable_read(v, b, nbytes));
	CHECK(memcmp(a, b, nbytes) == 0, "read after assign differs");
	CHECK(ckpt_variable_replicas_identical(v) == 1, "replicas of an assigned variable differ");

	snprintf(prefix, sizeof(prefix), "%s/ckpt", dir);
	OK(ckpt_checkpoint_write(ck, prefix));
	OK(ckpt_checkpoint_restore(&st, ck2, prefix));
	ckpt_restore_status_free(st);
	/* every replica of the restored variable, copied back through the provider */
	OK(t->host_alloc(t->ctx, &pin, nbytes));
	for (r = 0; pin && r < 4; r++) {
		OK(t->queue_new(t->ctx, &q, devices[r]));
		if (!q)
			break;
		memset(pin, 0, nbytes);
		OK(t->copy_d2h(t->ctx, q, pin, ckpt_variable_replica_data(v2, r), nbytes));
		OK(t->synchronize(t->ctx, q));
		CHECK(memcmp(pin, a, nbytes) == 0, "restored replica %d (device %d) differs from the saved value", r,
			devices[r]);
		t->queue_free(t->ctx, q);
		q = NULL;
	}
	t->host_free(t->ctx, pin, nbytes);
out:
	ckpt_checkpoint_free(ck);
	ckpt_checkpoint_free(ck2);
	ckpt_strategy_free(s);
	ckpt_strategy_free(s2);
	free(a);
	free(b);
}

/* Deliberate misuse: must fail under the emulation (and on a GPU). */
static int mistake(const ckpt_memory_provider *t, const char *what)
{
	void *d = NULL, *pin = NULL;
	ckpt_memory_queue *q = NULL;
	unsigned char want[4096];
	int stale;

	OK(t->queue_new(t->ctx, &q, 0));
	OK(t->device_alloc(t->ctx, &d, 0, sizeof(want)));
	OK(t->host_alloc(t->ctx, &pin, sizeof(want)));
	if (!q || !d || !pin)
		return 1;
	if (strcmp(what, "deref") == 0) {
		volatile unsigned char *p = d;
		printf("reading device memory from the host: %d\n", p[0]); /* must crash */
		return 0;
	}
	/* nosync: read the destination of a device-to-host copy before synchronizing */
	pattern(want, sizeof(want), 3);
	memcpy(pin, want, sizeof(want));
	OK(t->copy_h2d(t->ctx, q, d, pin, sizeof(want)));
	OK(t->synchronize(t->ctx, q));
	memset(pin, 0, sizeof(want));
	OK(t->copy_d2h(t->ctx, q, pin, d, sizeof(want)));
	stale = memcmp(pin, want, sizeof(want)) != 0;
	printf("read before synchronize: %s\n", stale ? "stale bytes" : "the copied bytes");
	OK(t->synchronize(t->ctx, q));
	t->host_free(t->ctx, pin, sizeof(want));
	t->device_free(t->ctx, 0, d, sizeof(want));
	t->queue_free(t->ctx, q);
	return stale ? 1 : 0;
}

int main(int argc, char **argv)
{
	ckpt_cuda_provider *cp = NULL, *reg = NULL;
	ckpt_cuda_options ro = CKPT_CUDA_OPTIONS_INIT;
	const ckpt_memory_provider *t;
	ckpt_memory_caps caps;
	int ndev, rc, dev;
	char dir[] = "/tmp/cuda_provider_check.XXXXXX";

	setvbuf(stdout, NULL, _IONBF, 0);
	if ((rc = ckpt_cuda_provider_new(&cp, NULL)) != CKPT_OK) {
		fprintf(stderr, "cuda_provider_check: no CUDA provider: %s\n", ckpt_error_last()->message);
		return 2;
	}
	t = ckpt_cuda_provider_table(cp);
	ndev = ckpt_cuda_provider_num_devices(cp);
	printf("provider: %s\n", ckpt_cuda_provider_describe(cp));
	if (argc == 3 && strcmp(argv[1], "--mistake") == 0) {
		rc = mistake(t, argv[2]);
		ckpt_cuda_provider_free(cp);
		return rc;
	}
	OK(ckpt_memory_provider_check(t));
	{
		char report[2048];
		int failed = ckpt_memory_conformance(t, report, sizeof(report));
		printf("conformance suite: %s\n", report);
		CHECK(failed == 0, "conformance suite: %d failed", failed);
	}
	t->caps(t->ctx, &caps);
	CHECK(strcmp(caps.name, "cuda") == 0 && caps.host_addressable == 0 && caps.num_devices == ndev &&
		caps.alignment >= 256, "caps: %s, addressable %d, %d devices, alignment %zu", caps.name,
		caps.host_addressable, caps.num_devices, caps.alignment);

	for (dev = 0; dev < ndev; dev++)
		check_round_trip(t, dev);
	printf("round trips on %d device(s): %s\n", ndev, g_failures ? "FAILED" : "ok");
	check_d2d(t, ndev);
	printf("device-to-device copies: %s\n", g_failures ? "FAILED" : "ok");
	{
		int same[3] = { 0, 0, 0 }, spread[4] = { 0, 1, 0, 1 }, distinct[2] = { 0, 1 };
		check_broadcast(t, same, 3, 0);
		check_broadcast(t, same, 3, 2);
		if (ndev >= 2) {
			check_broadcast(t, spread, 4, 1);
			check_broadcast(t, distinct, 2, 0); /* NCCL when it loaded */
			check_broadcast(t, distinct, 2, 1);
		}
	}
	printf("broadcast: %s\n", g_failures ? "FAILED" : "ok");
	check_refusals(t, ndev);

	ro.pinned = CKPT_CUDA_PINNED_REGISTER;
	if ((rc = ckpt_cuda_provider_new(&reg, &ro)) == CKPT_OK) {
		check_round_trip(ckpt_cuda_provider_table(reg), 0);
		ckpt_cuda_provider_free(reg);
	}
	CHECK(rc == CKPT_OK, "provider with cudaHostRegister pinning");
	printf("cudaHostRegister pinning: %s\n", g_failures ? "FAILED" : "ok");

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	check_library(t, ndev, dir);
	printf("library over the provider (assign, read, save, restore, 4 replicas): %s\n", g_failures ? "FAILED" : "ok");
	{
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cuda_provider_check: could not remove %s\n", dir);
	}
	ckpt_cuda_provider_free(cp);
	printf("%d failure(s)\n", g_failures);
	return g_failures ? 1 : 0;
}

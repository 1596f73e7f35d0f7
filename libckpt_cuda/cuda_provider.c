/*
 * The CUDA memory provider (ckpt/cuda.h): device memory with cudaMalloc,
 * pinned host memory with cudaMallocHost or cudaHostRegister, one
 * non-blocking stream per queue, copies with cudaMemcpyAsync and
 * cudaMemcpyPeerAsync. Broadcast is in cuda_broadcast.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "cuda_internal.h"

int ckpt_cuda__fail(cudaError_t e, const char *call, int device)
{
	int code = e == cudaErrorMemoryAllocation ? CKPT_ENOMEM
		: (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice) ? CKPT_EUNSUPPORTED : CKPT_EIO;

	(void)cudaGetLastError(); /* a non-sticky error must not surface again at the next call */
	if (device >= 0)
		return ckpt__fail(code, NULL, NULL, -1, "CUDA: %s on device %d failed: %s (%s)", call, device,
			cudaGetErrorString(e), cudaGetErrorName(e));
	return ckpt__fail(code, NULL, NULL, -1, "CUDA: %s failed: %s (%s)", call, cudaGetErrorString(e),
		cudaGetErrorName(e));
}

int ckpt_cuda__use(int device)
{
	cudaError_t e = cudaSetDevice(device);
	return e == cudaSuccess ? CKPT_OK : ckpt_cuda__fail(e, "cudaSetDevice", device);
}

static int valid_device(const ckpt_cuda_provider *p, int device, const char *what)
{
	if (device < 0 || device >= p->ndev)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "CUDA: %s: device %d, the runtime sees 0..%d", what, device,
			p->ndev - 1);
	return CKPT_OK;
}

/* ---- the table ---- */

static int cuda_caps(void *ctx, ckpt_memory_caps *out)
{
	const ckpt_cuda_provider *p = ctx;

	out->name = "cuda";
	out->alignment = CKPT_CUDA_ALIGNMENT;
	out->host_addressable = 0;
	out->num_devices = p->ndev;
	return CKPT_OK;
}

static int cuda_device_alloc(void *ctx, void **out, int device, size_t n)
{
	cudaError_t e;

	*out = NULL;
	CKPT_TRY(valid_device(ctx, device, "device_alloc"));
	if (n == 0)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "CUDA: device_alloc of 0 bytes");
	CKPT_TRY(ckpt_cuda__use(device));
	if ((e = cudaMalloc(out, n)) != cudaSuccess) {
		*out = NULL;
		return ckpt_cuda__fail(e, "cudaMalloc", device);
	}
	return CKPT_OK;
}

static void cuda_device_free(void *ctx, int device, void *ptr, size_t n)
{
	(void)ctx, (void)n;
	if (!ptr)
		return;
	/* cudaFree needs no current device, but the trainer's setting is the least surprise */
	if (cudaSetDevice(device) != cudaSuccess || cudaFree(ptr) != cudaSuccess)
		(void)cudaGetLastError(); /* a free has no way to fail; nothing more to do */
}

static size_t page_round(size_t n)
{
	size_t page = 4096;
	return (n + page - 1) / page * page;
}

static int cuda_host_alloc(void *ctx, void **out, size_t n)
{
	ckpt_cuda_provider *p = ctx;
	cudaError_t e;

	*out = NULL;
	if (n == 0)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "CUDA: host_alloc of 0 bytes");
	if (p->opts.pinned == CKPT_CUDA_PINNED_REGISTER) {
		size_t len = page_round(n);
		void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "CUDA: mmap of %zu bytes to pin failed", len);
		if ((e = cudaHostRegister(m, len, cudaHostRegisterPortable)) != cudaSuccess) {
			munmap(m, len);
			return ckpt_cuda__fail(e, "cudaHostRegister", -1);
		}
		*out = m;
		return CKPT_OK;
	}
	if ((e = cudaMallocHost(out, n)) != cudaSuccess) {
		*out = NULL;
		return ckpt_cuda__fail(e, "cudaMallocHost", -1);
	}
	return CKPT_OK;
}

static void cuda_host_free(void *ctx, void *ptr, size_t n)
{
	ckpt_cuda_provider *p = ctx;

	if (!ptr)
		return;
	if (p->opts.pinned == CKPT_CUDA_PINNED_REGISTER) {
		if (cudaHostUnregister(ptr) != cudaSuccess)
			(void)cudaGetLastError();
		munmap(ptr, page_round(n));
		return;
	}
	if (cudaFreeHost(ptr) != cudaSuccess)
		(void)cudaGetLastError();
}

static int cuda_queue_new(void *ctx, ckpt_memory_queue **out, int device)
{
	ckpt_memory_queue *q;
	cudaError_t e;

	*out = NULL;
	CKPT_TRY(valid_device(ctx, device, "queue_new"));
	CKPT_TRY(ckpt_cuda__use(device));
	if (!(q = calloc(1, sizeof(*q))))
		return ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "CUDA: out of memory for a queue");
	q->device = device;
	/* non-blocking: the trainer's work on the legacy default stream does not serialize with ours */
	if ((e = cudaStreamCreateWithFlags(&q->stream, cudaStreamNonBlocking)) != cudaSuccess) {
		free(q);
		return ckpt_cuda__fail(e, "cudaStreamCreateWithFlags", device);
	}
	*out = q;
	return CKPT_OK;
}

static void cuda_queue_free(void *ctx, ckpt_memory_queue *q)
{
	(void)ctx;
	if (!q)
		return;
	/* pending copies complete first (ckpt/memory.h); cudaStreamDestroy alone would let them run on */
	if (cudaSetDevice(q->device) != cudaSuccess || cudaStreamSynchronize(q->stream) != cudaSuccess ||
		cudaStreamDestroy(q->stream) != cudaSuccess)
		(void)cudaGetLastError();
	free(q);
}

static int enqueue(ckpt_memory_queue *q, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
	const char *what)
{
	cudaError_t e;

	if (n == 0)
		return CKPT_OK;
	CKPT_TRY(ckpt_cuda__use(q->device));
	if ((e = cudaMemcpyAsync(dst, src, n, kind, q->stream)) != cudaSuccess)
		return ckpt_cuda__fail(e, what, q->device);
	return CKPT_OK;
}

static int cuda_copy_h2d(void *ctx, ckpt_memory_queue *q, void *dst, const void *src, size_t n)
{
	(void)ctx;
	return enqueue(q, dst, src, n, cudaMemcpyHostToDevice, "cudaMemcpyAsync host-to-device");
}

static int cuda_copy_d2h(void *ctx, ckpt_memory_queue *q, void *dst, const void *src, size_t n)
{
	(void)ctx;
	return enqueue(q, dst, src, n, cudaMemcpyDeviceToHost, "cudaMemcpyAsync device-to-host");
}

static int cuda_fill(void *ctx, ckpt_memory_queue *q, void *dst, int value, size_t n)
{
	cudaError_t e;

	(void)ctx;
	if (n == 0)
		return CKPT_OK;
	CKPT_TRY(ckpt_cuda__use(q->device));
	if ((e = cudaMemsetAsync(dst, value, n, q->stream)) != cudaSuccess)
		return ckpt_cuda__fail(e, "cudaMemsetAsync", q->device);
	return CKPT_OK;
}

static int cuda_copy_d2d(void *ctx, ckpt_memory_queue *q, void *dst, int dst_device, const void *src, int src_device,
	size_t n)
{
	ckpt_cuda_provider *p = ctx;
	cudaError_t e;

	CKPT_TRY(valid_device(p, dst_device, "copy_d2d destination"));
	CKPT_TRY(valid_device(p, src_device, "copy_d2d source"));
	if (dst_device != q->device)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "CUDA: copy_d2d to device %d on a queue of device %d",
			dst_device, q->device);
	if (src_device == dst_device)
		return enqueue(q, dst, src, n, cudaMemcpyDeviceToDevice, "cudaMemcpyAsync device-to-device");
	if (n == 0)
		return CKPT_OK;
	CKPT_TRY(ckpt_cuda__use(q->device));
	/* direct over NVLink / PCIe where peer access is enabled, staged by the driver elsewhere */
	if ((e = cudaMemcpyPeerAsync(dst, dst_device, src, src_device, n, q->stream)) != cudaSuccess)
		return ckpt_cuda__fail(e, "cudaMemcpyPeerAsync", q->device);
	return CKPT_OK;
}

static int cuda_synchronize(void *ctx, ckpt_memory_queue *q)
{
	cudaError_t e;

	(void)ctx;
	CKPT_TRY(ckpt_cuda__use(q->device));
	if ((e = cudaStreamSynchronize(q->stream)) != cudaSuccess)
		return ckpt_cuda__fail(e, "cudaStreamSynchronize", q->device);
	return CKPT_OK;
}

/* ---- making one ---- */

static int enable_peers(ckpt_cuda_provider *p)
{
	int i, j, can;
	cudaError_t e;

	for (i = 0; i < p->ndev; i++) {
		for (j = 0; j < p->ndev; j++) {
			if (i == j)
				continue;
			if ((e = cudaDeviceCanAccessPeer(&can, i, j)) != cudaSuccess)
				return ckpt_cuda__fail(e, "cudaDeviceCanAccessPeer", i);
			if (!can || !p->opts.peer_access)
				continue;
			CKPT_TRY(ckpt_cuda__use(i));
			e = cudaDeviceEnablePeerAccess(j, 0);
			if (e == cudaErrorPeerAccessAlreadyEnabled) { /* the trainer did it: fine */
				(void)cudaGetLastError();
				e = cudaSuccess;
			}
			if (e != cudaSuccess)
				return ckpt_cuda__fail(e, "cudaDeviceEnablePeerAccess", i);
			p->peer[i][j] = 1;
		}
	}
	return CKPT_OK;
}

static void describe(ckpt_cuda_provider *p)
{
	int rt = 0, drv = 0, i, j;
	size_t len;
	struct cudaDeviceProp prop;
	const char *sep = "";

	cudaRuntimeGetVersion(&rt);
	cudaDriverGetVersion(&drv);
	len = (size_t)snprintf(p->describe, sizeof(p->describe), "CUDA runtime %d.%d, driver %d.%d, %d device%s (",
		rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10, p->ndev, p->ndev == 1 ? "" : "s");
	for (i = 0; i < p->ndev && len < sizeof(p->describe); i++) {
		if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
			(void)cudaGetLastError();
			snprintf(prop.name, sizeof(prop.name), "?");
		}
		len += (size_t)snprintf(p->describe + len, sizeof(p->describe) - len, "%s%d: %s", i ? ", " : "", i,
			prop.name);
	}
	if (len < sizeof(p->describe))
		len += (size_t)snprintf(p->describe + len, sizeof(p->describe) - len, "), peer access");
	for (i = 0; i < p->ndev; i++)
		for (j = i + 1; j < p->ndev; j++)
			if (p->peer[i][j] && p->peer[j][i] && len < sizeof(p->describe)) {
				len += (size_t)snprintf(p->describe + len, sizeof(p->describe) - len, "%s %d<->%d", sep, i, j);
				sep = ",";
			}
	if (!*sep && len < sizeof(p->describe))
		len += (size_t)snprintf(p->describe + len, sizeof(p->describe) - len, " none");
	if (len < sizeof(p->describe))
		snprintf(p->describe + len, sizeof(p->describe) - len, ", broadcast: %s",
			p->opts.nccl == CKPT_CUDA_NCCL_OFF ? "device copies (NCCL off)" : ckpt_cuda__nccl_describe());
}

int ckpt_cuda_provider_new(ckpt_cuda_provider **out, const ckpt_cuda_options *o)
{
	ckpt_cuda_options defaults = CKPT_CUDA_OPTIONS_INIT;
	ckpt_cuda_provider *p;
	cudaError_t e;
	int n = 0, rc, dev0 = 0;

	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_cuda_provider_new: out is NULL");
	*out = NULL;
	if (!o)
		o = &defaults;
	if (o->version != CKPT_CUDA_OPTIONS_VERSION)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_cuda_options version %u, this library speaks %u",
			o->version, (unsigned)CKPT_CUDA_OPTIONS_VERSION);
	if ((unsigned)o->pinned > CKPT_CUDA_PINNED_REGISTER || (unsigned)o->nccl > CKPT_CUDA_NCCL_REQUIRE)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_cuda_options: pinned %d / nccl %d out of range",
			(int)o->pinned, (int)o->nccl);
	if ((e = cudaGetDeviceCount(&n)) != cudaSuccess) {
		(void)cudaGetLastError();
		return ckpt__fail(CKPT_EUNSUPPORTED, NULL, NULL, -1, "CUDA: no usable device: cudaGetDeviceCount: %s (%s)",
			cudaGetErrorString(e), cudaGetErrorName(e));
	}
	if (n < 1)
		return ckpt__fail(CKPT_EUNSUPPORTED, NULL, NULL, -1, "CUDA: the runtime sees no device");
	if (n > CKPT_CUDA_MAX_DEVICES)
		n = CKPT_CUDA_MAX_DEVICES;
	if (o->nccl == CKPT_CUDA_NCCL_REQUIRE && (rc = ckpt_cuda__nccl_load()) != CKPT_OK)
		return rc;
	if (!(p = calloc(1, sizeof(*p))))
		return ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "CUDA: out of memory for the provider");
	p->opts = *o;
	p->ndev = n;
	pthread_mutex_init(&p->lock, NULL);
	/* enabling peers changes the current device: leave the caller's as it was */
	if ((e = cudaGetDevice(&dev0)) != cudaSuccess) {
		rc = ckpt_cuda__fail(e, "cudaGetDevice", -1);
		ckpt_cuda_provider_free(p);
		return rc;
	}
	if ((rc = enable_peers(p)) != CKPT_OK) {
		ckpt_cuda_provider_free(p);
		cudaSetDevice(dev0);
		return rc;
	}
	cudaSetDevice(dev0);
	if (o->nccl != CKPT_CUDA_NCCL_OFF)
		(void)ckpt_cuda__nccl_load(); /* AUTO: its absence shows in describe, broadcast copies instead */
	ckpt_error_clear();
	describe(p);

	p->table.version = CKPT_MEMORY_PROVIDER_VERSION;
	p->table.struct_size = sizeof(p->table);
	p->table.ctx = p;
	p->table.caps = cuda_caps;
	p->table.device_alloc = cuda_device_alloc;
	p->table.device_free = cuda_device_free;
	p->table.host_alloc = cuda_host_alloc;
	p->table.host_free = cuda_host_free;
	p->table.queue_new = cuda_queue_new;
	p->table.queue_free = cuda_queue_free;
	p->table.copy_h2d = cuda_copy_h2d;
	p->table.copy_d2h = cuda_copy_d2h;
	p->table.copy_d2d = cuda_copy_d2d;
	p->table.synchronize = cuda_synchronize;
	p->table.broadcast = ckpt_cuda__broadcast;
	p->table.fill = cuda_fill;
	*out = p;
	return CKPT_OK;
}

const ckpt_memory_provider *ckpt_cuda_provider_table(const ckpt_cuda_provider *p)
{
	return p ? &p->table : NULL;
}

int ckpt_cuda_provider_num_devices(const ckpt_cuda_provider *p)
{
	return p ? p->ndev : 0;
}

const char *ckpt_cuda_provider_describe(const ckpt_cuda_provider *p)
{
	return p ? p->describe : "";
}

void ckpt_cuda_provider_free(ckpt_cuda_provider *p)
{
	int d;

	if (!p)
		return;
	ckpt_cuda__nccl_free(p);
	for (d = 0; d < p->ndev; d++)
		if (p->bcast_stream[d]) {
			if (cudaSetDevice(d) != cudaSuccess || cudaStreamSynchronize(p->bcast_stream[d]) != cudaSuccess ||
				cudaStreamDestroy(p->bcast_stream[d]) != cudaSuccess)
				(void)cudaGetLastError();
		}
	pthread_mutex_destroy(&p->lock);
	free(p);
}

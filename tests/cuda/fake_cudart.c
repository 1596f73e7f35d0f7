/*
 * fake_cudart: a strict host emulation of the part of the CUDA runtime API
 * (and of NCCL) that libckpt_cuda calls, built as a shared library with the
 * runtime's SONAME so a test process loads it in place of libcudart.
 *
 * It is NOT a GPU test. It checks our call sequence against the rules the
 * runtime documents, more strictly than a GPU would enforce them, so that
 * a provider that breaks one fails here instead of "working by luck":
 *
 * - Device memory is a PROT_NONE view of a memfd: a host dereference of a
 *   device pointer crashes. Copies go through a second, private view.
 * - Nothing queued on a stream runs before a synchronization point
 *   (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize,
 *   cudaFree/cudaFreeHost, a device->pageable copy, cudaStreamQuery and
 *   cudaEventQuery), so reading a destination before synchronizing sees
 *   stale bytes. cudaStreamWaitEvent orders streams as on a GPU.
 * - Every copy's range must lie inside one allocation (or be host memory)
 *   and match the copy's kind; cudaMemcpyPeerAsync's pointers must be on
 *   the devices named. Handles are checked for liveness; events may only be
 *   recorded on a stream of their own device; the legacy NULL stream is
 *   refused (the provider must use its own streams).
 * - At exit, device allocations, pinned buffers, registrations, streams,
 *   events and communicators still alive are reported and the process
 *   exits with status 3 (leaks fail the test).
 *
 * Environment: FAKE_CUDART_DEVICES=N (default 2), FAKE_CUDART_PEER=1 (every
 * pair of distinct devices can access each other; default none can),
 * FAKE_CUDART_FAIL=insufficient-driver|no-device (every call fails as the
 * runtime does without a driver / without a GPU), FAKE_NCCL_INIT_FAIL=1
 * (ncclCommInitAll fails), FAKE_CUDART_TRACE=1
 * (one line per call on stderr). Statistics: FAKE_CUDART_STATS=FILE
 * appends "key value" lines at exit (copies by kind, pageable copies,
 * bytes, peak device bytes) for tests to assert on.
 *
 * One global lock serializes everything; it is a test tool.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAKE_MAX_DEVICES 16

typedef enum { MEM_DEVICE, MEM_PINNED, MEM_REGISTERED } mem_kind;

typedef struct mem_block {
	mem_kind kind;
	int device;            /* device memory: its device; pinned: the device current at allocation */
	char *base;            /* the address the caller sees */
	char *shadow;          /* device memory: the emulation's read-write view; host memory: base */
	size_t size;
	int alive;
	struct mem_block *next;
} mem_block;

typedef enum { OP_COPY, OP_WAIT, OP_FILL } op_kind;

typedef struct fake_op {
	op_kind kind;
	char *dst;             /* OP_COPY: translated (host-addressable) pointers */
	const char *src;
	size_t n;
	char *owned_src;       /* a pageable host->device copy's bytes, captured at the call */
	struct CUstream_st *wait_stream;   /* OP_WAIT: run that stream up to wait_seq first */
	uint64_t wait_seq;
	int value;             /* OP_FILL: the byte written to dst[0, n) */
} fake_op;

struct CUstream_st {
	uint32_t magic;
	int device;
	int alive;
	fake_op *ops;          /* ops[i] has sequence number base + i; [done, queued) pending */
	uint64_t base, queued, done, cap;   /* sequence numbers only grow: events hold them */
	struct CUstream_st *next;
};

struct CUevent_st {
	uint32_t magic;
	int device;
	int alive;
	struct CUstream_st *stream;   /* recorded on, NULL before the first record */
	uint64_t seq;
	struct CUevent_st *next;
};

#define STREAM_MAGIC 0x57524d31u
#define EVENT_MAGIC 0x45564e31u
#define COMM_MAGIC 0x434f4d31u

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_ndev = 2;
static int g_peer;               /* FAKE_CUDART_PEER */
static cudaError_t g_fail = cudaSuccess;
static int g_trace;
static mem_block *g_mem;
static struct CUstream_st *g_streams;
static struct CUevent_st *g_events;
static int g_peer_enabled[FAKE_MAX_DEVICES][FAKE_MAX_DEVICES];
static __thread int t_device;
static __thread cudaError_t t_last_error = cudaSuccess;

static struct {
	unsigned long long h2d, d2h, d2d, h2h, peer, pageable, bytes, nccl_bcast;
	unsigned long long device_bytes, peak_device_bytes;
} g_stats;

static void fake_atexit_check(void);

static void fake_init(void)
{
	const char *s;

	if ((s = getenv("FAKE_CUDART_DEVICES")) != NULL) {
		g_ndev = atoi(s);
		if (g_ndev < 0 || g_ndev > FAKE_MAX_DEVICES)
			g_ndev = 2;
	}
	g_peer = (s = getenv("FAKE_CUDART_PEER")) != NULL && strcmp(s, "1") == 0;
	g_trace = (s = getenv("FAKE_CUDART_TRACE")) != NULL && strcmp(s, "1") == 0;
	if ((s = getenv("FAKE_CUDART_FAIL")) != NULL) {
		if (strcmp(s, "insufficient-driver") == 0)
			g_fail = cudaErrorInsufficientDriver;
		else if (strcmp(s, "no-device") == 0)
			g_fail = cudaErrorNoDevice;
	}
	if (g_fail == cudaSuccess && g_ndev == 0)
		g_fail = cudaErrorNoDevice;
	atexit(fake_atexit_check);
}

static void trace(const char *fmt, ...)
{
	va_list ap;

	if (!g_trace)
		return;
	va_start(ap, fmt);
	fputs("fake_cudart: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Every entry point: lazy init, the lock, and the emulated missing driver. */
static cudaError_t enter(const char *fn)
{
	pthread_once(&g_once, fake_init);
	trace("%s", fn);
	pthread_mutex_lock(&g_lock);
	return g_fail;
}

static cudaError_t leave(cudaError_t e)
{
	pthread_mutex_unlock(&g_lock);
	if (e != cudaSuccess)
		t_last_error = e;
	return e;
}

/* A misuse the emulation refuses: said on stderr too, since callers often print only the code. */
static cudaError_t refuse(cudaError_t e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("fake_cudart: refused: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return e;
}

/* The block containing [p, p + n), or NULL when p lies in none (pageable host memory). */
static mem_block *find_block(const void *p, size_t n, int *straddles)
{
	mem_block *b;
	const char *c = (const char *)p;

	*straddles = 0;
	for (b = g_mem; b; b = b->next) {
		if (!b->alive)
			continue;
		if (c >= b->base && c < b->base + b->size) {
			if (n > (size_t)(b->base + b->size - c))
				*straddles = 1;
			return b;
		}
		if (c < b->base && n > (size_t)(b->base - c))
			*straddles = 1; /* a host range running into a block */
	}
	return NULL;
}

/* ---------------- streams: queued work runs only when synchronized ---------------- */

static int stream_ok(struct CUstream_st *s)
{
	struct CUstream_st *x;

	for (x = g_streams; x; x = x->next)
		if (x == s)
			return s->magic == STREAM_MAGIC && s->alive;
	return 0;
}

static int event_ok(struct CUevent_st *e)
{
	struct CUevent_st *x;

	for (x = g_events; x; x = x->next)
		if (x == e)
			return e->magic == EVENT_MAGIC && e->alive;
	return 0;
}

static int push_op(struct CUstream_st *s, const fake_op *op)
{
	if (s->queued - s->base == s->cap) {
		uint64_t cap = s->cap ? s->cap * 2 : 64;
		fake_op *ops = realloc(s->ops, cap * sizeof(*ops));
		if (!ops)
			return -1;
		s->ops = ops;
		s->cap = cap;
	}
	s->ops[s->queued - s->base] = *op;
	s->queued++;
	return 0;
}

static void drain(struct CUstream_st *s, uint64_t upto)
{
	while (s->done < upto && s->done < s->queued) {
		fake_op *op = &s->ops[s->done - s->base];
		if (op->kind == OP_WAIT) {
			drain(op->wait_stream, op->wait_seq);
		} else if (op->kind == OP_FILL) {
			memset(op->dst, op->value, op->n);
		} else {
			memmove(op->dst, op->src, op->n);
			free(op->owned_src);
			op->owned_src = NULL;
		}
		s->done++;
	}
	if (s->done == s->queued)
		s->base = s->done; /* empty: the array is reused from its start */
}

static void drain_device(int device)
{
	struct CUstream_st *s;

	for (s = g_streams; s; s = s->next)
		if (s->alive && (device < 0 || s->device == device))
			drain(s, UINT64_MAX);
}

/* ---------------- device management ---------------- */

cudaError_t cudaGetDeviceCount(int *count)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess) {
		*count = 0;
		return leave(e);
	}
	*count = g_ndev;
	return leave(cudaSuccess);
}

cudaError_t cudaSetDevice(int device)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if (device < 0 || device >= g_ndev)
		return leave(cudaErrorInvalidDevice);
	t_device = device;
	return leave(cudaSuccess);
}

cudaError_t cudaGetDevice(int *device)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	*device = t_device;
	return leave(cudaSuccess);
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if (device < 0 || device >= g_ndev)
		return leave(cudaErrorInvalidDevice);
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "fake_cudart emulated device %d", device);
	prop->totalGlobalMem = (size_t)1 << 34;
	prop->unifiedAddressing = 1;
	prop->textureAlignment = 512;
	return leave(cudaSuccess);
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if (device < 0 || device >= g_ndev || peer < 0 || peer >= g_ndev)
		return leave(cudaErrorInvalidDevice);
	*can = g_peer && device != peer;
	return leave(cudaSuccess);
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if (flags != 0)
		return leave(refuse(cudaErrorInvalidValue, "cudaDeviceEnablePeerAccess flags must be 0"));
	if (peer < 0 || peer >= g_ndev)
		return leave(cudaErrorInvalidDevice);
	if (!g_peer || peer == t_device)
		return leave(cudaErrorPeerAccessUnsupported);
	if (g_peer_enabled[t_device][peer])
		return leave(cudaErrorPeerAccessAlreadyEnabled);
	g_peer_enabled[t_device][peer] = 1;
	return leave(cudaSuccess);
}

cudaError_t cudaDeviceSynchronize(void)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	drain_device(t_device);
	return leave(cudaSuccess);
}

cudaError_t cudaDriverGetVersion(int *v)
{
	pthread_once(&g_once, fake_init);
	*v = g_fail == cudaErrorInsufficientDriver ? 0 : CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
	*v = CUDART_VERSION;
	return cudaSuccess;
}

/* ---------------- errors ---------------- */

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = t_last_error;
	t_last_error = cudaSuccess;
	return e;
}

cudaError_t cudaPeekAtLastError(void)
{
	return t_last_error;
}

static const struct {
	cudaError_t e;
	const char *name, *text;
} g_errors[] = {
	{ cudaSuccess, "cudaSuccess", "no error" },
	{ cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument" },
	{ cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory" },
	{ cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
		"CUDA driver version is insufficient for CUDA runtime version" },
	{ cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected" },
	{ cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal" },
	{ cudaErrorPeerAccessUnsupported, "cudaErrorPeerAccessUnsupported",
		"peer access is not supported between these two devices" },
	{ cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle" },
	{ cudaErrorNotReady, "cudaErrorNotReady", "device not ready" },
	{ cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled",
		"peer access is already enabled" },
	{ cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
		"part or all of the requested memory range is already mapped" },
	{ cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
		"pointer does not correspond to a registered memory region" },
};

const char *cudaGetErrorString(cudaError_t error)
{
	size_t i;

	for (i = 0; i < sizeof(g_errors) / sizeof(g_errors[0]); i++)
		if (g_errors[i].e == error)
			return g_errors[i].text;
	return "unrecognized error code";
}

const char *cudaGetErrorName(cudaError_t error)
{
	size_t i;

	for (i = 0; i < sizeof(g_errors) / sizeof(g_errors[0]); i++)
		if (g_errors[i].e == error)
			return g_errors[i].name;
	return "cudaErrorUnknown";
}

/* ---------------- memory ---------------- */

static mem_block *new_block(mem_kind kind, char *base, char *shadow, size_t size)
{
	mem_block *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->kind = kind;
	b->device = t_device;
	b->base = base;
	b->shadow = shadow;
	b->size = size;
	b->alive = 1;
	b->next = g_mem;
	g_mem = b;
	return b;
}

cudaError_t cudaMalloc(void **p, size_t size)
{
	cudaError_t e = enter(__func__);
	size_t map;
	int fd;
	char *base, *shadow;

	if (e != cudaSuccess)
		return leave(e);
	*p = NULL;
	map = size ? size : 1;
	fd = memfd_create("fake_cudart_device", MFD_CLOEXEC);
	if (fd < 0)
		return leave(cudaErrorMemoryAllocation);
	if (ftruncate(fd, (off_t)map) != 0) {
		close(fd);
		return leave(cudaErrorMemoryAllocation);
	}
	/* what the caller gets cannot be touched from the host */
	base = mmap(NULL, map, PROT_NONE, MAP_SHARED, fd, 0);
	shadow = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED || shadow == MAP_FAILED) {
		if (base != MAP_FAILED)
			munmap(base, map);
		if (shadow != MAP_FAILED)
			munmap(shadow, map);
		return leave(cudaErrorMemoryAllocation);
	}
	/* fresh device memory is not zero on a GPU: make reading it before writing visible */
	memset(shadow, 0xA5, map);
	if (!new_block(MEM_DEVICE, base, shadow, map)) {
		munmap(base, map);
		munmap(shadow, map);
		return leave(cudaErrorMemoryAllocation);
	}
	g_stats.device_bytes += map;
	if (g_stats.device_bytes > g_stats.peak_device_bytes)
		g_stats.peak_device_bytes = g_stats.device_bytes;
	*p = base;
	return leave(cudaSuccess);
}

static mem_block *block_at(const void *p, mem_kind kind)
{
	mem_block *b;

	for (b = g_mem; b; b = b->next)
		if (b->alive && b->base == p && b->kind == kind)
			return b;
	return NULL;
}

cudaError_t cudaFree(void *p)
{
	cudaError_t e = enter(__func__);
	mem_block *b;

	if (e != cudaSuccess)
		return leave(e);
	if (!p)
		return leave(cudaSuccess);
	if (!(b = block_at(p, MEM_DEVICE)))
		return leave(refuse(cudaErrorInvalidValue, "cudaFree(%p): not the start of a live device allocation", p));
	drain_device(-1); /* cudaFree synchronizes */
	munmap(b->base, b->size);
	munmap(b->shadow, b->size);
	b->alive = 0;
	g_stats.device_bytes -= b->size;
	return leave(cudaSuccess);
}

cudaError_t cudaMallocHost(void **p, size_t size)
{
	cudaError_t e = enter(__func__);
	size_t map;
	char *base;

	if (e != cudaSuccess)
		return leave(e);
	*p = NULL;
	map = size ? size : 1;
	base = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return leave(cudaErrorMemoryAllocation);
	if (!new_block(MEM_PINNED, base, base, map)) {
		munmap(base, map);
		return leave(cudaErrorMemoryAllocation);
	}
	*p = base;
	return leave(cudaSuccess);
}

cudaError_t cudaFreeHost(void *p)
{
	cudaError_t e = enter(__func__);
	mem_block *b;

	if (e != cudaSuccess)
		return leave(e);
	if (!p)
		return leave(cudaSuccess);
	if (!(b = block_at(p, MEM_PINNED)))
		return leave(refuse(cudaErrorInvalidValue, "cudaFreeHost(%p): not from cudaMallocHost", p));
	drain_device(-1);
	munmap(b->base, b->size);
	b->alive = 0;
	return leave(cudaSuccess);
}

cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags)
{
	cudaError_t e = enter(__func__);
	int straddles;

	if (e != cudaSuccess)
		return leave(e);
	if (!p || !size)
		return leave(cudaErrorInvalidValue);
	if (find_block(p, size, &straddles) || straddles)
		return leave(cudaErrorHostMemoryAlreadyRegistered);
	if (!new_block(MEM_REGISTERED, p, p, size))
		return leave(cudaErrorMemoryAllocation);
	(void)flags;
	return leave(cudaSuccess);
}

cudaError_t cudaHostUnregister(void *p)
{
	cudaError_t e = enter(__func__);
	mem_block *b;

	if (e != cudaSuccess)
		return leave(e);
	if (!(b = block_at(p, MEM_REGISTERED)))
		return leave(cudaErrorHostMemoryNotRegistered);
	drain_device(-1); /* copies still reading the range complete first */
	b->alive = 0;
	return leave(cudaSuccess);
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
	cudaError_t e = enter(__func__);
	mem_block *b;
	int straddles;

	if (e != cudaSuccess)
		return leave(e);
	memset(a, 0, sizeof(*a));
	a->device = -2;
	b = find_block(p, 1, &straddles);
	if (!b) {
		a->type = cudaMemoryTypeUnregistered;
		a->hostPointer = (void *)p;
		return leave(cudaSuccess);
	}
	a->device = b->device;
	if (b->kind == MEM_DEVICE) {
		a->type = cudaMemoryTypeDevice;
		a->devicePointer = (void *)p;
	} else {
		a->type = cudaMemoryTypeHost;
		a->hostPointer = (void *)p;
		a->devicePointer = (void *)p;
	}
	return leave(cudaSuccess);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	*total = (size_t)1 << 34;
	*free_bytes = *total - (size_t)g_stats.device_bytes;
	return leave(cudaSuccess);
}

/* ---------------- streams and events ---------------- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
	cudaError_t e = enter(__func__);
	struct CUstream_st *s;

	if (e != cudaSuccess)
		return leave(e);
	if (flags != cudaStreamDefault && flags != cudaStreamNonBlocking)
		return leave(cudaErrorInvalidValue);
	s = calloc(1, sizeof(*s));
	if (!s)
		return leave(cudaErrorMemoryAllocation);
	s->magic = STREAM_MAGIC;
	s->device = t_device;
	s->alive = 1;
	s->next = g_streams;
	g_streams = s;
	*out = s;
	return leave(cudaSuccess);
}

cudaError_t cudaStreamCreate(cudaStream_t *out)
{
	return cudaStreamCreateWithFlags(out, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if (!stream_ok(s))
		return leave(refuse(cudaErrorInvalidResourceHandle, "cudaStreamDestroy(%p): not a live stream", (void *)s));
	/* work queued before the destroy still completes (the runtime's rule) */
	drain(s, UINT64_MAX);
	s->alive = 0;
	free(s->ops);
	s->ops = NULL;
	s->cap = 0;
	return leave(cudaSuccess);
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if (!stream_ok(s))
		return leave(refuse(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize(%p): not a live stream (the NULL stream is refused)",
			(void *)s));
	drain(s, UINT64_MAX);
	return leave(cudaSuccess);
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if (!stream_ok(s))
		return leave(cudaErrorInvalidResourceHandle);
	drain(s, UINT64_MAX); /* a poll is where the emulated device makes progress */
	return leave(cudaSuccess);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags)
{
	cudaError_t e = enter(__func__);
	struct CUevent_st *ev;

	if (e != cudaSuccess)
		return leave(e);
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return leave(cudaErrorMemoryAllocation);
	ev->magic = EVENT_MAGIC;
	ev->device = t_device;
	ev->alive = 1;
	ev->next = g_events;
	g_events = ev;
	*out = ev;
	(void)flags;
	return leave(cudaSuccess);
}

cudaError_t cudaEventCreate(cudaEvent_t *out)
{
	return cudaEventCreateWithFlags(out, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if (!event_ok(ev))
		return leave(refuse(cudaErrorInvalidResourceHandle, "cudaEventDestroy(%p): not a live event", (void *)ev));
	ev->alive = 0;
	return leave(cudaSuccess);
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if (!event_ok(ev) || !stream_ok(s))
		return leave(refuse(cudaErrorInvalidResourceHandle, "cudaEventRecord(%p, %p): not a live event and stream",
			(void *)ev, (void *)s));
	if (ev->device != s->device)
		return leave(refuse(cudaErrorInvalidResourceHandle,
			"cudaEventRecord: event of device %d recorded on a stream of device %d", ev->device, s->device));
	ev->stream = s;
	ev->seq = s->queued;
	return leave(cudaSuccess);
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if (!event_ok(ev))
		return leave(refuse(cudaErrorInvalidResourceHandle, "cudaEventSynchronize(%p): not a live event", (void *)ev));
	if (ev->stream && ev->stream->alive)
		drain(ev->stream, ev->seq);
	return leave(cudaSuccess);
}

cudaError_t cudaEventQuery(cudaEvent_t ev)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if (!event_ok(ev))
		return leave(cudaErrorInvalidResourceHandle);
	if (ev->stream && ev->stream->alive)
		drain(ev->stream, ev->seq);
	return leave(cudaSuccess);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
	cudaError_t e = enter(__func__);
	fake_op op;

	if (e != cudaSuccess)
		return leave(e);
	if (!stream_ok(s) || !event_ok(ev))
		return leave(refuse(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent(%p, %p): not a live stream and event",
			(void *)s, (void *)ev));
	if (!ev->stream) /* never recorded: nothing to wait for */
		return leave(cudaSuccess);
	memset(&op, 0, sizeof(op));
	op.kind = OP_WAIT;
	op.wait_stream = ev->stream;
	op.wait_seq = ev->seq;
	(void)flags;
	if (push_op(s, &op) != 0)
		return leave(cudaErrorMemoryAllocation);
	return leave(cudaSuccess);
}

/* ---------------- copies ---------------- */

/*
 * Checks one side of a copy and gives the address the emulation may touch.
 * want_device: 1 device memory, 0 host memory (pinned, registered or
 * pageable), -1 either (cudaMemcpyDefault). *pageable: host memory the
 * runtime does not know.
 */
static cudaError_t resolve(const void *p, size_t n, int want_device, int want_dev_id, const char *side,
	char **out, int *is_device, int *pageable, int *device)
{
	int straddles;
	mem_block *b = find_block(p, n, &straddles);

	if (straddles)
		return refuse(cudaErrorInvalidValue, "copy %s [%p, +%zu) runs past the allocation it starts in", side, p, n);
	*is_device = b && b->kind == MEM_DEVICE;
	*pageable = !b;
	*device = b ? b->device : -1;
	if (want_device == 1 && !*is_device)
		return refuse(cudaErrorInvalidValue, "copy %s %p is not device memory but the kind says it is", side, p);
	if (want_device == 0 && *is_device)
		return refuse(cudaErrorInvalidValue, "copy %s %p is device memory but the kind says host", side, p);
	if (want_dev_id >= 0 && (!*is_device || b->device != want_dev_id))
		return refuse(cudaErrorInvalidValue, "copy %s %p is not memory of device %d", side, p, want_dev_id);
	*out = *is_device ? b->shadow + ((const char *)p - b->base) : (char *)p;
	return cudaSuccess;
}

static cudaError_t enqueue_copy(void *dst, const void *src, size_t n, int dst_kind, int src_kind, int dst_dev, int src_dev,
	cudaStream_t s, int is_peer)
{
	char *d, *sp;
	int d_dev, s_dev, d_page, s_page, d_is, s_is;
	cudaError_t e;
	fake_op op;

	if (!stream_ok(s))
		return refuse(cudaErrorInvalidResourceHandle, "copy on %p: not a live stream (the NULL stream is refused)", (void *)s);
	if (n == 0)
		return cudaSuccess;
	if (!dst || !src)
		return cudaErrorInvalidValue;
	if ((e = resolve(dst, n, dst_kind, dst_dev, "destination", &d, &d_is, &d_page, &d_dev)) != cudaSuccess)
		return e;
	if ((e = resolve(src, n, src_kind, src_dev, "source", &sp, &s_is, &s_page, &s_dev)) != cudaSuccess)
		return e;
	memset(&op, 0, sizeof(op));
	op.kind = OP_COPY;
	op.dst = d;
	op.src = sp;
	op.n = n;
	g_stats.bytes += n;
	if (is_peer)
		g_stats.peer++;
	else if (d_is && s_is)
		g_stats.d2d++;
	else if (d_is)
		g_stats.h2d++;
	else if (s_is)
		g_stats.d2h++;
	else
		g_stats.h2h++;
	if (s_page && d_is) {
		/* pageable -> device: the runtime stages the bytes before returning */
		g_stats.pageable++;
		if (!(op.owned_src = malloc(n)))
			return cudaErrorMemoryAllocation;
		memcpy(op.owned_src, sp, n);
		op.src = op.owned_src;
	}
	if (push_op(s, &op) != 0) {
		free(op.owned_src);
		return cudaErrorMemoryAllocation;
	}
	if (d_page && s_is) {
		/* device -> pageable: the runtime returns once the bytes have landed */
		g_stats.pageable++;
		drain(s, UINT64_MAX);
	}
	return cudaSuccess;
}

static int kind_side(enum cudaMemcpyKind kind, int dst_side)
{
	switch (kind) {
	case cudaMemcpyHostToDevice: return dst_side ? 1 : 0;
	case cudaMemcpyDeviceToHost: return dst_side ? 0 : 1;
	case cudaMemcpyDeviceToDevice: return 1;
	case cudaMemcpyHostToHost: return 0;
	default: return -1;
	}
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if ((int)kind < 0 || kind > cudaMemcpyDefault)
		return leave(cudaErrorInvalidValue);
	return leave(enqueue_copy(dst, src, n, kind_side(kind, 1), kind_side(kind, 0), -1, -1, s, 0));
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s)
{
	cudaError_t e = enter(__func__);
	char *d;
	int d_is, d_page, d_dev;
	fake_op op;

	if (e != cudaSuccess)
		return leave(e);
	if (!stream_ok(s))
		return leave(refuse(cudaErrorInvalidResourceHandle, "cudaMemsetAsync on %p: not a live stream", (void *)s));
	if (n == 0)
		return leave(cudaSuccess);
	if (!dst)
		return leave(cudaErrorInvalidValue);
	if ((e = resolve(dst, n, 1, -1, "destination", &d, &d_is, &d_page, &d_dev)) != cudaSuccess)
		return leave(e);
	memset(&op, 0, sizeof(op));
	op.kind = OP_FILL;
	op.dst = d;
	op.n = n;
	op.value = value;
	if (push_op(s, &op) != 0)
		return leave(cudaErrorMemoryAllocation);
	return leave(cudaSuccess);
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_dev, const void *src, int src_dev, size_t n, cudaStream_t s)
{
	cudaError_t e = enter(__func__);
	if (e != cudaSuccess)
		return leave(e);
	if (dst_dev < 0 || dst_dev >= g_ndev || src_dev < 0 || src_dev >= g_ndev)
		return leave(cudaErrorInvalidDevice);
	return leave(enqueue_copy(dst, src, n, 1, 1, dst_dev, src_dev, s, 1));
}

/* ---------------- NCCL: communicators over distinct devices, broadcast ---------------- */

struct ncclComm {
	uint32_t magic;
	int alive;
	int rank, nranks, device;
	struct ncclComm *first;       /* rank 0's comm: the clique */
	struct ncclComm *next_all;
};

static struct ncclComm *g_comms;

/* a group's broadcast calls, matched at ncclGroupEnd */
typedef struct bcast_call {
	const void *send;
	void *recv;
	size_t bytes;
	int root;
	struct ncclComm *comm;
	struct CUstream_st *stream;
} bcast_call;

static bcast_call g_group[FAKE_MAX_DEVICES * 4];
static int g_group_n, g_group_depth;

static size_t nccl_type_size(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: case ncclUint8: return 1;
	case ncclFloat16: case ncclBfloat16: return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
	case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
	default: return 0;
	}
}

ncclResult_t ncclGetVersion(int *version)
{
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
	switch (r) {
	case ncclSuccess: return "no error";
	case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case ncclSystemError: return "unhandled system error";
	default: return "unhandled error";
	}
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	int i, j;
	struct ncclComm *first = NULL;

	if (enter(__func__) != cudaSuccess) {
		leave(cudaSuccess);
		return ncclUnhandledCudaError;
	}
	if (ndev < 1 || ndev > g_ndev) {
		leave(cudaSuccess);
		return ncclInvalidArgument;
	}
	if (getenv("FAKE_NCCL_INIT_FAIL")) { /* as NCCL does where it cannot set up its transports */
		leave(cudaSuccess);
		return ncclUnhandledCudaError;
	}
	for (i = 0; i < ndev; i++) {
		int d = devlist ? devlist[i] : i;
		if (d < 0 || d >= g_ndev) {
			leave(cudaSuccess);
			return ncclInvalidArgument;
		}
		for (j = 0; j < i; j++)
			if ((devlist ? devlist[j] : j) == d) {
				leave(cudaSuccess);
				refuse(cudaSuccess, "ncclCommInitAll: duplicate GPU %d in one communicator", d);
				return ncclInvalidUsage;
			}
	}
	for (i = 0; i < ndev; i++) {
		struct ncclComm *c = calloc(1, sizeof(*c));
		if (!c) {
			leave(cudaSuccess);
			return ncclSystemError;
		}
		c->magic = COMM_MAGIC;
		c->alive = 1;
		c->rank = i;
		c->nranks = ndev;
		c->device = devlist ? devlist[i] : i;
		c->first = first ? first : c;
		if (!first)
			first = c;
		c->next_all = g_comms;
		g_comms = c;
		comms[i] = c;
	}
	leave(cudaSuccess);
	return ncclSuccess;
}

static int comm_ok(struct ncclComm *c)
{
	struct ncclComm *x;

	for (x = g_comms; x; x = x->next_all)
		if (x == c)
			return c->magic == COMM_MAGIC && c->alive;
	return 0;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
	enter(__func__);
	if (!comm_ok(c)) {
		leave(cudaSuccess);
		return ncclInvalidArgument;
	}
	c->alive = 0;
	leave(cudaSuccess);
	return ncclSuccess;
}

/* nccl.h declares ncclGroupStart() and ncclGroupEnd() without a prototype */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
ncclResult_t ncclGroupStart(void)
{
	enter(__func__);
	g_group_depth++;
	leave(cudaSuccess);
	return ncclSuccess;
}

/* Every rank of one clique called broadcast with the same root and size: queue the copies. */
static ncclResult_t run_group(void)
{
	int i, j;
	ncclResult_t res = ncclSuccess;

	for (i = 0; i < g_group_n; i++) {
		bcast_call *c = &g_group[i], *root = NULL;
		int seen = 0;
		if (!c->comm)
			continue;
		for (j = 0; j < g_group_n; j++) {
			bcast_call *o = &g_group[j];
			if (!o->comm || o->comm->first != c->comm->first)
				continue;
			seen++;
			if (o->root != c->root || o->bytes != c->bytes) {
				refuse(cudaSuccess, "ncclBroadcast: ranks disagree on root or count");
				res = ncclInvalidUsage;
			}
			if (o->comm->rank == o->root)
				root = o;
		}
		if (seen != c->comm->nranks || !root) {
			refuse(cudaSuccess, "ncclBroadcast: %d of %d ranks called it in the group", seen, c->comm->nranks);
			res = ncclInvalidUsage;
		}
		if (res != ncclSuccess)
			break;
		/* each rank's copy waits for the root's stream to reach the call */
		{
			struct ncclComm *clique = c->comm->first;
			struct CUstream_st *root_stream = root->stream;
			uint64_t root_seq = root->stream->queued;
			char *s;
			int is, pg, dv;
			if (resolve(root->send, root->bytes, 1, root->comm->device, "broadcast source", &s, &is, &pg, &dv) !=
				cudaSuccess) {
				res = ncclInvalidArgument;
				break;
			}
			for (j = 0; j < g_group_n; j++) {
				bcast_call *o = &g_group[j];
				fake_op op;
				char *d;
				if (!o->comm || o->comm->first != clique)
					continue;
				if (resolve(o->recv, o->bytes, 1, o->comm->device, "broadcast destination", &d, &is, &pg, &dv) !=
					cudaSuccess) {
					res = ncclInvalidArgument;
					break;
				}
				memset(&op, 0, sizeof(op));
				if (o->stream != root_stream) {
					op.kind = OP_WAIT;
					op.wait_stream = root_stream;
					op.wait_seq = root_seq;
					if (push_op(o->stream, &op) != 0)
						return ncclSystemError;
				}
				op.kind = OP_COPY;
				op.dst = d;
				op.src = s;
				op.n = o->bytes;
				if (d != s && push_op(o->stream, &op) != 0)
					return ncclSystemError;
				g_stats.nccl_bcast++;
			}
			for (j = 0; j < g_group_n; j++) /* this clique's calls are done */
				if (g_group[j].comm && g_group[j].comm->first == clique)
					g_group[j].comm = NULL;
		}
		if (res != ncclSuccess)
			break;
	}
	g_group_n = 0;
	return res;
}

ncclResult_t ncclGroupEnd(void)
{
	ncclResult_t r = ncclSuccess;

	enter(__func__);
	if (g_group_depth <= 0) {
		leave(cudaSuccess);
		return ncclInvalidUsage;
	}
	if (--g_group_depth == 0)
		r = run_group();
	leave(cudaSuccess);
	return r;
}
#pragma GCC diagnostic pop

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
	cudaStream_t stream)
{
	bcast_call *c;
	ncclResult_t r = ncclSuccess;

	enter(__func__);
	if (!comm_ok(comm) || !stream_ok(stream) || root < 0 || root >= comm->nranks || !nccl_type_size(type)) {
		leave(cudaSuccess);
		return ncclInvalidArgument;
	}
	if (stream->device != comm->device) {
		leave(cudaSuccess);
		refuse(cudaSuccess, "ncclBroadcast: stream of device %d on the communicator of device %d", stream->device,
			comm->device);
		return ncclInvalidUsage;
	}
	if (g_group_n == (int)(sizeof(g_group) / sizeof(g_group[0]))) {
		leave(cudaSuccess);
		return ncclInvalidUsage;
	}
	c = &g_group[g_group_n++];
	c->send = comm->rank == root ? send : NULL;
	c->recv = recv;
	c->bytes = count * nccl_type_size(type);
	c->root = root;
	c->comm = comm;
	c->stream = stream;
	if (g_group_depth == 0 && comm->nranks > 1) {
		/* outside a group every rank would block waiting for the others: NCCL deadlocks */
		g_group_n = 0;
		leave(cudaSuccess);
		refuse(cudaSuccess, "ncclBroadcast outside ncclGroupStart/End from one thread deadlocks with %d ranks",
			comm->nranks);
		return ncclInvalidUsage;
	}
	if (g_group_depth == 0)
		r = run_group();
	leave(cudaSuccess);
	return r;
}

/* ---------------- at exit: leaks fail ---------------- */

static void fake_atexit_check(void)
{
	mem_block *b;
	struct CUstream_st *s;
	struct CUevent_st *ev;
	struct ncclComm *c;
	unsigned long dev = 0, pinned = 0, reg = 0, streams = 0, events = 0, comms = 0;
	const char *stats = getenv("FAKE_CUDART_STATS");

	pthread_mutex_lock(&g_lock);
	for (b = g_mem; b; b = b->next)
		if (b->alive) {
			if (b->kind == MEM_DEVICE)
				dev++;
			else if (b->kind == MEM_PINNED)
				pinned++;
			else
				reg++;
		}
	for (s = g_streams; s; s = s->next)
		streams += (unsigned long)s->alive;
	for (ev = g_events; ev; ev = ev->next)
		events += (unsigned long)ev->alive;
	for (c = g_comms; c; c = c->next_all)
		comms += (unsigned long)c->alive;
	if (stats) {
		FILE *f = fopen(stats, "a");
		if (f) {
			fprintf(f, "h2d %llu\nd2h %llu\nd2d %llu\nh2h %llu\npeer %llu\npageable %llu\nbytes %llu\n"
				"nccl_broadcast %llu\npeak_device_bytes %llu\n",
				g_stats.h2d, g_stats.d2h, g_stats.d2d, g_stats.h2h, g_stats.peer, g_stats.pageable, g_stats.bytes,
				g_stats.nccl_bcast, g_stats.peak_device_bytes);
			fclose(f);
		}
	}
	pthread_mutex_unlock(&g_lock);
	if (dev || pinned || reg || streams || events || comms) {
		fprintf(stderr, "fake_cudart: at exit still alive: %lu device allocations (%llu bytes), %lu pinned buffers, "
			"%lu host registrations, %lu streams, %lu events, %lu NCCL communicators\n",
			dev, g_stats.device_bytes, pinned, reg, streams, events, comms);
		fflush(NULL);
		_exit(3);
	}
}

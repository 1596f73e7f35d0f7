/*
 * libckpt — memory providers: where a mirrored variable's replicas live.
 *
 * A provider is a table of functions that allocates device buffers and
 * pinned host buffers and copies between them on queues. The library never
 * links a device runtime: a provider (the built-in host one, or one in its
 * own library such as ckpt_cuda) is handed to ckpt_strategy_mirrored_on(),
 * and every path that touches a replica's bytes then goes through it (assign,
 * read, sync-on-read aggregation, the all-reduce of ckpt_strategy_run,
 * the divergence check, save, async save, restore, load).
 *
 *     static int two_replicas(ckpt_strategy **s)
 *     {
 *         const ckpt_memory_provider *p = ckpt_memory_provider_host();
 *         int devices[2] = { 0, 0 };               // two replicas may share a device
 *         return ckpt_strategy_mirrored_on(s, p, devices, 2);
 *     }
 *
 * Ownership:
 *  - The provider table is copied by ckpt_strategy_mirrored_on(); `ctx` is
 *    borrowed and must outlive every strategy created over it, and every
 *    async saver (ckpt/async.h) that staged its variables (the saver keeps
 *    its pinned arena until it is freed).
 *  - Device buffers the library allocates (variable copies) are freed by the
 *    library through device_free when the variable is freed. Buffers a
 *    trainer wraps (ckpt_variable_options.replica_buffers) stay the
 *    trainer's: the library never frees them.
 *  - Pinned host buffers (host_alloc) are the library's staging memory: the
 *    restore ring, the save stream and the async-save arena.
 *
 * Completion: copy_h2d / copy_d2h / copy_d2d only *enqueue* a copy on a
 * queue. Nothing may be assumed about the destination, and the source must
 * stay valid and unchanged, until synchronize() of that queue returns OK. A
 * provider may perform the copy at any moment in between (the host provider
 * copies at once; the guarded test provider only at synchronize). Copies on
 * one queue complete in the order they were enqueued.
 *
 * A failed copy: an enqueue that fails has enqueued nothing. A copy that
 * fails later is reported by the synchronize of its queue; then the
 * destination of every copy enqueued on that queue since its previous
 * synchronize is undefined (the failed one may be partly written, the later
 * ones done, partly done or not done: a CUDA stream stops, the guarded test
 * provider drops them), and the queue takes new copies again (a provider
 * whose device cannot, such as CUDA after a sticky error, fails them). The
 * library treats each such destination as unknown: a restore puts the old
 * values back (see ckpt_strategy_mirrored_on), a save fails.
 *
 * Errors: every int-returning method returns CKPT_OK or a negative
 * ckpt_status (CKPT_ENOMEM for a failed allocation, CKPT_EIO for a failed
 * copy); the library turns it into an error naming the provider, the
 * operation and the variable.
 */
#ifndef CKPT_MEMORY_H
#define CKPT_MEMORY_H

#include "ckpt/common.h"
#include "ckpt/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An in-order stream of copies on one device (a CUDA stream, for instance). Provider-defined. */
typedef struct ckpt_memory_queue ckpt_memory_queue;

/** What a provider can do; filled by ckpt_memory_provider.caps. */
typedef struct ckpt_memory_caps {
	const char *name;       /**< "host", "cuda", ...: for messages; static or owned by ctx */
	size_t alignment;       /**< alignment of device_alloc's buffers, a power of two (>= 1) */
	int host_addressable;   /**< 1: the CPU may dereference device buffers (the library then may memcpy) */
	int num_devices;        /**< valid device ids are 0 .. num_devices - 1 */
} ckpt_memory_caps;

/**
 * Version of ckpt_memory_provider this header describes. 2 appends `fill`;
 * version 1 tables (struct_size up to `broadcast`) are still accepted.
 */
#define CKPT_MEMORY_PROVIDER_VERSION 2

/**
 * The provider interface. Set `version` to CKPT_MEMORY_PROVIDER_VERSION and
 * `struct_size` to sizeof(ckpt_memory_provider); later versions only append
 * members, and the library reads none beyond `struct_size` (a member past
 * it counts as NULL). Every method gets `ctx` first. Methods marked
 * optional may be NULL.
 *
 * Thread safety: methods may be called from several threads at once (one
 * per replica inside ckpt_strategy_run), but never on the same queue at
 * once. The library makes one queue per replica and enqueues every copy
 * on the queue of the replica it writes (reads: of the replica it reads):
 * the fan-out of a value to replicas 1..n-1 goes on each destination's
 * queue, then every queue is synchronized. Cross-replica calls (assign,
 * read, save, restore) use several replicas' queues, so make them from one
 * thread at a time, outside ckpt_strategy_run.
 *
 * Ordering with the trainer's own device work. The library's copies run on
 * its own queues, never on the trainer's, and every call that touches
 * device values (assign, read, fill at creation, save, async save's
 * staging, restore, load, ckpt_replica_check_crc32c, the fan-out inside
 * ckpt_strategy_run) synchronizes those queues before it returns, failed
 * or not: after the call the trainer needs no synchronization of its own.
 * Before it, the trainer must have completed whatever of its work touches
 * those buffers: kernels that write a variable the call reads (save, read,
 * staging) and kernels that read or write a variable the call writes
 * (assign, restore, load). With CUDA, synchronize the streams that ran
 * them (cudaStreamSynchronize, or cudaDeviceSynchronize) first.
 * Small values share device buffers (a slot of a 1 MiB buffer per value of
 * at most 64 KiB, for providers that are not host_addressable): the
 * pointer ckpt_variable_replica_data returns may be inside a buffer that
 * other variables use, so never free it, and write only its own bytes.
 */
typedef struct ckpt_memory_provider {
	unsigned version;       /**< CKPT_MEMORY_PROVIDER_VERSION */
	size_t struct_size;     /**< sizeof(ckpt_memory_provider) as the provider was compiled */
	void *ctx;              /**< passed to every method; borrowed */

	/** Fill `*out` (never fails for a valid provider). */
	int (*caps)(void *ctx, ckpt_memory_caps *out);

	/** @param[out] out a device buffer of `n` (> 0) bytes on `device`, caps.alignment-aligned, contents undefined. */
	int (*device_alloc)(void *ctx, void **out, int device, size_t n);
	/** Free a device_alloc buffer (NULL: no-op). No copy involving it may be pending. */
	void (*device_free)(void *ctx, int device, void *p, size_t n);
	/** @param[out] out a pinned (page-locked) host buffer of `n` (> 0) bytes, CPU-addressable. */
	int (*host_alloc)(void *ctx, void **out, size_t n);
	/** Free a host_alloc buffer (NULL: no-op). No copy involving it may be pending. */
	void (*host_free)(void *ctx, void *p, size_t n);

	/** @param[out] out a new queue on `device`. */
	int (*queue_new)(void *ctx, ckpt_memory_queue **out, int device);
	/** Free a queue (NULL: no-op); pending copies are completed first. */
	void (*queue_free)(void *ctx, ckpt_memory_queue *q);

	/**
	 * Enqueue a copy of `n` bytes from host memory `src` (pinned or not;
	 * pinned is faster) to device buffer `dst` (on the queue's device; any
	 * offset into a device_alloc or wrapped buffer).
	 */
	int (*copy_h2d)(void *ctx, ckpt_memory_queue *q, void *dst, const void *src, size_t n);
	/** Enqueue a copy of `n` bytes from device memory `src` (on the queue's device) to host memory `dst`. */
	int (*copy_d2h)(void *ctx, ckpt_memory_queue *q, void *dst, const void *src, size_t n);
	/**
	 * Enqueue a copy of `n` bytes from `src` on `src_device` to `dst` on
	 * `dst_device` (equal or not: a peer copy). `q` is a queue of dst_device.
	 * The source must not be written until synchronize(q) returns.
	 */
	int (*copy_d2d)(void *ctx, ckpt_memory_queue *q, void *dst, int dst_device, const void *src, int src_device,
		size_t n);
	/** Wait until every copy enqueued on `q` has completed; reports the first failed one. */
	int (*synchronize)(void *ctx, ckpt_memory_queue *q);

	/**
	 * Optional. Copy `n` bytes of bufs[root] into every other bufs[i]
	 * (devices[i]), i < count, and return when all have completed (NCCL
	 * broadcast, for instance). bufs[root]'s copies must have completed
	 * (synchronized) before the call. NULL: the library enqueues
	 * copy_d2d from the root to each replica instead.
	 */
	int (*broadcast)(void *ctx, void *const *bufs, const int *devices, int count, int root, size_t n);

	/* ---- version 2 ---- */

	/**
	 * Optional. Enqueue setting `n` bytes of device buffer `dst` (on the
	 * queue's device) to (unsigned char)value, completed like a copy
	 * (cudaMemsetAsync, for instance). The library uses it for zero-filled
	 * variables and any byte-uniform fill instead of uploading the bytes.
	 * NULL: it copies them from host memory (copy_h2d).
	 */
	int (*fill)(void *ctx, ckpt_memory_queue *q, void *dst, int value, size_t n);
} ckpt_memory_provider;

/** struct_size of a version 1 table: ckpt_memory_provider up to and including `broadcast`. */
#define CKPT_MEMORY_PROVIDER_V1_SIZE (offsetof(ckpt_memory_provider, broadcast) + sizeof(((ckpt_memory_provider *)0)->broadcast))

/**
 * The built-in host provider: "device" buffers are 64-byte-aligned host
 * memory (host_addressable = 1, one device, id 0), pinned buffers are plain
 * host memory, copies are memcpy performed at once. The default: mirrored
 * strategies made by ckpt_strategy_mirrored_new() use it.
 * @return the static host provider; never NULL, never freed
 */
CKPT_API const ckpt_memory_provider *ckpt_memory_provider_host(void);

/**
 * Check a provider table: version, struct_size, every mandatory method
 * present, caps sane (name set, alignment a power of two, num_devices >= 1).
 * @return CKPT_OK or CKPT_EINVAL with a message naming what is wrong.
 */
CKPT_API int ckpt_memory_provider_check(const ckpt_memory_provider *p);

/**
 * A mirrored strategy of `n` replicas (1..1024) whose copies live in the
 * memory of `provider`: replica r on devices[r] (several replicas may share
 * one device). The provider table is copied; `provider->ctx` must outlive
 * the strategy. Fails with CKPT_EINVAL (bad table, a device id outside
 * 0..caps.num_devices - 1), or the provider's status when a queue cannot be
 * made.
 *
 * The multi-worker strategy takes a provider too (ckpt/mpi.h:
 * ckpt_strategy_multi_worker_new_on). Partitioned variables created in the
 * scope have device parts.
 *
 * Variables created in its scope hold one device buffer per replica
 * (allocated through device_alloc, or the trainer's own device buffers
 * passed as ckpt_variable_options.replica_buffers, replica r's on
 * devices[r]). ckpt_variable_replica_data() and ckpt_variable_local() then
 * return device pointers: the library never dereferences them unless
 * caps.host_addressable; a host pointer a caller passes (assign's source,
 * read's destination, initial_value) is host memory. Inside
 * ckpt_strategy_run, all-reduce buffers are device buffers of this provider
 * (replica r's on devices[r]), as ckpt_variable_local() returns.
 *
 * A restore into such variables is all-or-nothing whatever the provider
 * fails: it first keeps the old values of the variables it writes (one more
 * device buffer per variable on replica 0's device, or pinned host memory
 * when device_alloc fails), and a later failure copies them back into every
 * replica. Replica pointers never change.
 *
 * @param[out] out the strategy, caller-owned (ckpt_strategy_free).
 * @return CKPT_OK or a negative ckpt_status as said above
 */
CKPT_API int ckpt_strategy_mirrored_on(ckpt_strategy **out, const ckpt_memory_provider *provider,
	const int *devices, int n);

/** @return the provider of `s`'s replicas (borrowed from `s`): the host provider for every strategy not made
 * by ckpt_strategy_mirrored_on. */
CKPT_API const ckpt_memory_provider *ckpt_strategy_memory_provider(const ckpt_strategy *s);
/** @return the device of local replica `replica` of `s` (0 for strategies not made by ckpt_strategy_mirrored_on),
 * or -1 when `replica` is not a local replica of `s`. */
CKPT_API int ckpt_strategy_replica_device(const ckpt_strategy *s, int replica);

/** Default size of the pinned staging ring: two 32 MiB halves (as llm.c streams its checkpoints). */
#define CKPT_STAGING_DEFAULT_BYTES ((size_t)64 << 20)
/** Smallest staging ring accepted (two 64 KiB halves). */
#define CKPT_STAGING_MIN_BYTES ((size_t)128 << 10)

/**
 * Set the size of the pinned staging ring (both halves together) that
 * restore, load and save stream device variables of `s` through: the file
 * is read into one half while the other is copied to the device (a save:
 * one half is written to the file while the other is copied from the
 * device, a value larger than a half in pieces). Peak pinned memory per
 * restore / save is this size (a save's halves no larger than its largest
 * device value; TensorBundle only: formats that take a value whole get one
 * larger than a half through pinned memory of its size). `bytes` 0 restores
 * the default.
 * @return CKPT_OK; CKPT_EINVAL below CKPT_STAGING_MIN_BYTES, for a NULL `s` or the default strategy (its ring is fixed)
 */
CKPT_API int ckpt_strategy_set_staging_bytes(ckpt_strategy *s, size_t bytes);
/** @return the staging ring size of `s` (CKPT_STAGING_DEFAULT_BYTES unless set). */
CKPT_API size_t ckpt_strategy_staging_bytes(const ckpt_strategy *s);

#ifdef __cplusplus
}
#endif
#endif

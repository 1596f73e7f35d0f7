/*
 * libckpt — the CUDA memory provider (library ckpt_cuda, CMake target
 * ckpt::ckpt_cuda, pkg-config ckpt-cuda). libckpt and the `ckpt` tool never
 * link it: a trainer links it, and `ckpt restore --device cuda` loads it at
 * run time. Built only where CMake finds the CUDA toolkit.
 *
 *     ckpt_cuda_provider *cp;
 *     ckpt_cuda_provider_new(&cp, NULL);              // fails cleanly without a GPU
 *     int devices[4] = { 0, 0, 1, 1 };                // replicas 0,1 on GPU 0; 2,3 on GPU 1
 *     ckpt_strategy *s;
 *     ckpt_strategy_mirrored_on(&s, ckpt_cuda_provider_table(cp), devices, 4);
 *     ...
 *     ckpt_strategy_free(s);
 *     ckpt_cuda_provider_free(cp);                    // after every strategy over it
 *
 * What the table does (ckpt/memory.h says when each copy completes):
 *  - device_alloc / device_free: cudaMalloc / cudaFree on the replica's device.
 *  - host_alloc / host_free: pinned host memory, cudaMallocHost, or with
 *    CKPT_CUDA_PINNED_REGISTER anonymous memory pinned by cudaHostRegister
 *    (portable: every device sees it as pinned).
 *  - a queue is a non-blocking CUDA stream of its device; copies are
 *    cudaMemcpyAsync on it; synchronize is cudaStreamSynchronize.
 *  - copy_d2d between two devices is cudaMemcpyPeerAsync: direct where
 *    cudaDeviceCanAccessPeer allows it (peer access is enabled for every
 *    such pair when the provider is made), staged by the driver elsewhere.
 *  - broadcast: with NCCL (loaded at the first broadcast, libnccl.so.2 or
 *    the file CKPT_NCCL_LIBRARY names) and every replica on its own device,
 *    one ncclBroadcast per replica in one group; otherwise (replicas sharing
 *    a device, or no NCCL) device-to-device copies from the root on each
 *    replica's device, all in flight together. Communicators are made once
 *    per device list and kept until the provider is freed.
 *
 * Errors carry the CUDA / NCCL error name and text (ckpt_error_last()).
 * Thread safety: as ckpt/memory.h requires; every call sets the calling
 * thread's current device first, so the trainer's current device is changed
 * on threads that call into the provider.
 */
#ifndef CKPT_CUDA_H
#define CKPT_CUDA_H

#include "ckpt/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckpt_cuda_provider ckpt_cuda_provider;

/** How host_alloc pins memory. */
typedef enum ckpt_cuda_pinned {
	CKPT_CUDA_PINNED_ALLOC = 0,    /**< cudaMallocHost (default) */
	CKPT_CUDA_PINNED_REGISTER = 1  /**< mmap + cudaHostRegister(cudaHostRegisterPortable) */
} ckpt_cuda_pinned;

/** Whether broadcast uses NCCL. */
typedef enum ckpt_cuda_nccl {
	CKPT_CUDA_NCCL_AUTO = 0,    /**< when NCCL loads and every replica has its own device (default) */
	CKPT_CUDA_NCCL_OFF = 1,     /**< device-to-device copies only */
	CKPT_CUDA_NCCL_REQUIRE = 2  /**< provider creation fails unless NCCL loads */
} ckpt_cuda_nccl;

#define CKPT_CUDA_OPTIONS_VERSION 1

/** Options; start from CKPT_CUDA_OPTIONS_INIT. */
typedef struct ckpt_cuda_options {
	unsigned version;         /**< CKPT_CUDA_OPTIONS_VERSION */
	ckpt_cuda_pinned pinned;
	int peer_access;          /**< 1 (default): enable peer access for every device pair that allows it */
	ckpt_cuda_nccl nccl;
} ckpt_cuda_options;

#define CKPT_CUDA_OPTIONS_INIT { CKPT_CUDA_OPTIONS_VERSION, CKPT_CUDA_PINNED_ALLOC, 1, CKPT_CUDA_NCCL_AUTO }

/**
 * Make a CUDA provider over every device the runtime sees.
 * @param[out] out the provider (ckpt_cuda_provider_free), NULL on failure.
 * @param o options, NULL for the defaults.
 * @return CKPT_OK; CKPT_EUNSUPPORTED when the runtime has no usable device
 *   (the message gives the runtime's reason, e.g. "CUDA driver version is
 *   insufficient for CUDA runtime version" on a machine without a GPU);
 *   CKPT_EINVAL for bad options; CKPT_EIO for another CUDA failure.
 */
CKPT_API int ckpt_cuda_provider_new(ckpt_cuda_provider **out, const ckpt_cuda_options *o);

/** @return the provider table to give ckpt_strategy_mirrored_on() (borrowed: lives as long as `p`); NULL for NULL. */
CKPT_API const ckpt_memory_provider *ckpt_cuda_provider_table(const ckpt_cuda_provider *p);

/** @return the devices the runtime sees (>= 1); 0 for NULL. */
CKPT_API int ckpt_cuda_provider_num_devices(const ckpt_cuda_provider *p);

/**
 * One line for logs: runtime and driver versions, devices and their names,
 * peer pairs, NCCL.
 * @return the line, borrowed: lives as long as `p`; "" for NULL
 */
CKPT_API const char *ckpt_cuda_provider_describe(const ckpt_cuda_provider *p);

/** Free the provider, its NCCL communicators and its internal streams (NULL: no-op). Strategies over it go first. */
CKPT_API void ckpt_cuda_provider_free(ckpt_cuda_provider *p);

#ifdef __cplusplus
}
#endif
#endif

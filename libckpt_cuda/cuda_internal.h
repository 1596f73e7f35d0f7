/*
 * ckpt_cuda internals: the provider's state, its queues, and the two things
 * beside the copies (broadcast, NCCL loaded at run time). Not installed.
 */
#ifndef CKPT_CUDA_INTERNAL_H
#define CKPT_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include "libckpt/internal.h"
#include "ckpt/cuda.h"

#define CKPT_CUDA_MAX_DEVICES 64
#define CKPT_CUDA_ALIGNMENT 256      /* what cudaMalloc guarantees */

struct ckpt_memory_queue {
	int device;
	cudaStream_t stream;
};

typedef struct cuda_nccl_clique cuda_nccl_clique;

struct ckpt_cuda_provider {
	ckpt_memory_provider table;      /* ctx = this */
	ckpt_cuda_options opts;
	int ndev;
	unsigned char peer[CKPT_CUDA_MAX_DEVICES][CKPT_CUDA_MAX_DEVICES]; /* 1: direct peer copies i <- j */
	char describe[1024];

	pthread_mutex_t lock;            /* the broadcast streams and the NCCL cliques */
	cudaStream_t bcast_stream[CKPT_CUDA_MAX_DEVICES]; /* made at the first broadcast on a device */
	cuda_nccl_clique *cliques;
	int nccl_broken;                 /* NCCL_AUTO: communicators could not be made; copies from then on */
};

/** Turn a failed CUDA call into a libckpt error naming the call and the device; returns the status. */
int ckpt_cuda__fail(cudaError_t e, const char *call, int device);

/** cudaSetDevice, failing as above. */
int ckpt_cuda__use(int device);

/** The provider's own stream on `device` for broadcasts, made at first use. Caller holds p->lock. */
int ckpt_cuda__bcast_stream(ckpt_cuda_provider *p, int device, cudaStream_t *out);

/** The provider table's broadcast method (cuda_broadcast.c). */
int ckpt_cuda__broadcast(void *ctx, void *const *bufs, const int *devices, int count, int root, size_t n);

/* ---- NCCL (cuda_nccl.c): loaded at first use; all of it absent when built without nccl.h ---- */

/** Load NCCL once; CKPT_OK, or CKPT_EUNSUPPORTED naming why (not built with it, library not found). */
int ckpt_cuda__nccl_load(void);
/** NCCL's version line ("NCCL 2.28.3"), or the reason it is not loaded. */
const char *ckpt_cuda__nccl_describe(void);
/**
 * Broadcast bufs[root] into every bufs[i] over the communicator of exactly
 * `devices` (distinct, made and cached on first use); enqueued on each
 * device's broadcast stream, synchronized before return. Caller holds p->lock.
 * *not_started: 1 when it failed before enqueueing anything (no communicator).
 */
int ckpt_cuda__nccl_broadcast(ckpt_cuda_provider *p, void *const *bufs, const int *devices, int count, int root,
	size_t n, int *not_started);
/** Destroy the cached communicators. */
void ckpt_cuda__nccl_free(ckpt_cuda_provider *p);

#endif

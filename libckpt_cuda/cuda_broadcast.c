/*
 * The provider's broadcast (ckpt/memory.h): bufs[root] into every other
 * replica's buffer, returning when all have landed. NCCL when every replica
 * has its own device and NCCL loaded (NCCL refuses two ranks on one GPU);
 * otherwise one device-to-device copy per replica, each on the stream of
 * its destination device so copies to different devices run at once.
 */
#include <string.h>
#include "cuda_internal.h"

int ckpt_cuda__bcast_stream(ckpt_cuda_provider *p, int device, cudaStream_t *out)
{
	cudaError_t e;

	if (!p->bcast_stream[device]) {
		CKPT_TRY(ckpt_cuda__use(device));
		if ((e = cudaStreamCreateWithFlags(&p->bcast_stream[device], cudaStreamNonBlocking)) != cudaSuccess) {
			p->bcast_stream[device] = NULL;
			return ckpt_cuda__fail(e, "cudaStreamCreateWithFlags", device);
		}
	}
	*out = p->bcast_stream[device];
	return CKPT_OK;
}

static int all_distinct(const int *devices, int count)
{
	int i, j;

	for (i = 0; i < count; i++)
		for (j = 0; j < i; j++)
			if (devices[i] == devices[j])
				return 0;
	return 1;
}

/* Copies from the root, then one synchronize per destination device (every one, even after a failure). */
static int copy_fanout(ckpt_cuda_provider *p, void *const *bufs, const int *devices, int count, int root, size_t n)
{
	unsigned char used[CKPT_CUDA_MAX_DEVICES];
	int i, rc = CKPT_OK, src;
	cudaError_t e;
	cudaStream_t s = NULL; /* set by bcast_stream before any use; the initialiser quiets -O2 */

	memset(used, 0, sizeof(used));
	for (i = 0; i < count && rc == CKPT_OK; i++) {
		if (i == root || bufs[i] == bufs[root])
			continue;
		if ((rc = ckpt_cuda__bcast_stream(p, devices[i], &s)) != CKPT_OK)
			break;
		used[devices[i]] = 1;
		if ((rc = ckpt_cuda__use(devices[i])) != CKPT_OK)
			break;
		if (devices[i] == devices[root])
			e = cudaMemcpyAsync(bufs[i], bufs[root], n, cudaMemcpyDeviceToDevice, s);
		else
			e = cudaMemcpyPeerAsync(bufs[i], devices[i], bufs[root], devices[root], n, s);
		if (e != cudaSuccess)
			rc = ckpt_cuda__fail(e, devices[i] == devices[root] ? "cudaMemcpyAsync device-to-device (broadcast)"
				: "cudaMemcpyPeerAsync (broadcast)", devices[i]);
	}
	for (i = 0; i < p->ndev; i++) {
		if (!used[i])
			continue;
		if ((src = ckpt_cuda__use(i)) == CKPT_OK && (e = cudaStreamSynchronize(p->bcast_stream[i])) != cudaSuccess)
			src = ckpt_cuda__fail(e, "cudaStreamSynchronize (broadcast)", i);
		if (rc == CKPT_OK)
			rc = src;
	}
	return rc;
}

int ckpt_cuda__broadcast(void *ctx, void *const *bufs, const int *devices, int count, int root, size_t n)
{
	ckpt_cuda_provider *p = ctx;
	int i, rc;

	if (!bufs || !devices || count < 1 || root < 0 || root >= count)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "CUDA: broadcast of %d buffers from root %d", count, root);
	for (i = 0; i < count; i++)
		if (devices[i] < 0 || devices[i] >= p->ndev || !bufs[i])
			return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "CUDA: broadcast: buffer %d on device %d (devices 0..%d)",
				i, devices[i], p->ndev - 1);
	if (count < 2 || n == 0)
		return CKPT_OK;
	pthread_mutex_lock(&p->lock);
	if (p->opts.nccl != CKPT_CUDA_NCCL_OFF && !p->nccl_broken && all_distinct(devices, count) &&
		ckpt_cuda__nccl_load() == CKPT_OK) {
		int not_started = 0;
		rc = ckpt_cuda__nccl_broadcast(p, bufs, devices, count, root, n, &not_started);
		if (rc != CKPT_OK && not_started && p->opts.nccl == CKPT_CUDA_NCCL_AUTO) {
			/* AUTO: NCCL that cannot make a communicator here (no driver support, a container
			   without shared memory) is not used again; the copies below do the same work */
			p->nccl_broken = 1;
			ckpt_error_clear();
			rc = copy_fanout(p, bufs, devices, count, root, n);
		}
	} else {
		rc = copy_fanout(p, bufs, devices, count, root, n);
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/*
 * NCCL for the provider's broadcast, loaded at first use (dlopen): its
 * library is over 200 MB, most trainers already map the copy their
 * framework ships, and a machine without it still gets a working provider.
 * CKPT_NCCL_LIBRARY names the file to load instead of libnccl.so.2.
 * Built only where CMake found nccl.h (CKPT_CUDA_HAVE_NCCL).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_internal.h"

#ifdef CKPT_CUDA_HAVE_NCCL
#include <dlfcn.h>
#include <nccl.h>

static struct {
	pthread_once_t once;
	int loaded;
	char why[512];
	char version[64];
	ncclResult_t (*comm_init_all)(ncclComm_t *, int, const int *);
	ncclResult_t (*comm_destroy)(ncclComm_t);
	ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
	ncclResult_t (*group_start)(void);
	ncclResult_t (*group_end)(void);
	const char *(*error_string)(ncclResult_t);
	ncclResult_t (*get_version)(int *);
} nccl = { PTHREAD_ONCE_INIT, 0, "", "", NULL, NULL, NULL, NULL, NULL, NULL, NULL };

struct cuda_nccl_clique {
	int count;
	int devices[CKPT_CUDA_MAX_DEVICES];
	ncclComm_t comms[CKPT_CUDA_MAX_DEVICES];
	cuda_nccl_clique *next;
};

static int sym(void *h, const char *name, void *slot)
{
	void *f = dlsym(h, name);
	if (!f) {
		snprintf(nccl.why, sizeof(nccl.why), "NCCL library lacks %s", name);
		return -1;
	}
	memcpy(slot, &f, sizeof(f));
	return 0;
}

static void load_once(void)
{
	const char *file = getenv("CKPT_NCCL_LIBRARY");
	void *h;
	int v = 0;

	if (!file || !*file)
		file = CKPT_NCCL_SONAME;
	if (!(h = dlopen(file, RTLD_NOW | RTLD_LOCAL))) {
		snprintf(nccl.why, sizeof(nccl.why), "NCCL not loaded (%s)", dlerror());
		return;
	}
	if (sym(h, "ncclCommInitAll", &nccl.comm_init_all) || sym(h, "ncclCommDestroy", &nccl.comm_destroy) ||
		sym(h, "ncclBroadcast", &nccl.broadcast) || sym(h, "ncclGroupStart", &nccl.group_start) ||
		sym(h, "ncclGroupEnd", &nccl.group_end) || sym(h, "ncclGetErrorString", &nccl.error_string) ||
		sym(h, "ncclGetVersion", &nccl.get_version)) {
		dlclose(h);
		return;
	}
	if (nccl.get_version(&v) == ncclSuccess)
		snprintf(nccl.version, sizeof(nccl.version), "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
	else
		snprintf(nccl.version, sizeof(nccl.version), "NCCL (version unknown)");
	__atomic_store_n(&nccl.loaded, 1, __ATOMIC_RELEASE); /* the handle stays open for the process */
}

int ckpt_cuda__nccl_load(void)
{
	pthread_once(&nccl.once, load_once);
	if (__atomic_load_n(&nccl.loaded, __ATOMIC_ACQUIRE))
		return CKPT_OK;
	return ckpt__fail(CKPT_EUNSUPPORTED, NULL, NULL, -1, "CUDA: %s", nccl.why);
}

const char *ckpt_cuda__nccl_describe(void)
{
	pthread_once(&nccl.once, load_once);
	return nccl.loaded ? nccl.version : nccl.why;
}

static int nccl_fail(ncclResult_t r, const char *call)
{
	return ckpt__fail(CKPT_EIO, NULL, NULL, -1, "NCCL: %s failed: %s", call, nccl.error_string(r));
}

static int clique_for(ckpt_cuda_provider *p, const int *devices, int count, cuda_nccl_clique **out)
{
	cuda_nccl_clique *c;
	ncclResult_t r;

	for (c = p->cliques; c; c = c->next)
		if (c->count == count && memcmp(c->devices, devices, (size_t)count * sizeof(int)) == 0) {
			*out = c;
			return CKPT_OK;
		}
	if (!(c = calloc(1, sizeof(*c))))
		return ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "CUDA: out of memory for an NCCL communicator");
	c->count = count;
	memcpy(c->devices, devices, (size_t)count * sizeof(int));
	if ((r = nccl.comm_init_all(c->comms, count, devices)) != ncclSuccess) {
		free(c);
		return nccl_fail(r, "ncclCommInitAll");
	}
	c->next = p->cliques;
	p->cliques = c;
	*out = c;
	return CKPT_OK;
}

int ckpt_cuda__nccl_broadcast(ckpt_cuda_provider *p, void *const *bufs, const int *devices, int count, int root,
	size_t n, int *not_started)
{
	cuda_nccl_clique *c = NULL;
	cudaStream_t s[CKPT_CUDA_MAX_DEVICES];
	ncclResult_t r;
	cudaError_t e;
	int i, rc = CKPT_OK, src;

	*not_started = 1;
	CKPT_TRY(clique_for(p, devices, count, &c));
	for (i = 0; i < count; i++)
		CKPT_TRY(ckpt_cuda__bcast_stream(p, devices[i], &s[i]));
	if ((r = nccl.group_start()) != ncclSuccess)
		return nccl_fail(r, "ncclGroupStart");
	*not_started = 0;
	for (i = 0; i < count && rc == CKPT_OK; i++) {
		if ((rc = ckpt_cuda__use(devices[i])) != CKPT_OK)
			break;
		if ((r = nccl.broadcast(bufs[root], bufs[i], n, ncclUint8, root, c->comms[i], s[i])) != ncclSuccess)
			rc = nccl_fail(r, "ncclBroadcast");
	}
	/* the group ends even after a failed call: NCCL's state must not stay inside a group */
	if ((r = nccl.group_end()) != ncclSuccess && rc == CKPT_OK)
		rc = nccl_fail(r, "ncclGroupEnd");
	for (i = 0; i < count; i++) {
		if ((src = ckpt_cuda__use(devices[i])) == CKPT_OK && (e = cudaStreamSynchronize(s[i])) != cudaSuccess)
			src = ckpt_cuda__fail(e, "cudaStreamSynchronize (NCCL broadcast)", devices[i]);
		if (rc == CKPT_OK)
			rc = src;
	}
	return rc;
}

void ckpt_cuda__nccl_free(ckpt_cuda_provider *p)
{
	cuda_nccl_clique *c, *next;
	int i;

	for (c = p->cliques; c; c = next) {
		next = c->next;
		for (i = 0; i < c->count; i++)
			nccl.comm_destroy(c->comms[i]);
		free(c);
	}
	p->cliques = NULL;
}

#else /* built without nccl.h */

int ckpt_cuda__nccl_load(void)
{
	return ckpt__fail(CKPT_EUNSUPPORTED, NULL, NULL, -1, "CUDA: ckpt_cuda was built without NCCL (no nccl.h)");
}

const char *ckpt_cuda__nccl_describe(void)
{
	return "device copies (built without NCCL)";
}

int ckpt_cuda__nccl_broadcast(ckpt_cuda_provider *p, void *const *bufs, const int *devices, int count, int root,
	size_t n, int *not_started)
{
	(void)p, (void)bufs, (void)devices, (void)count, (void)root, (void)n;
	*not_started = 1;
	return ckpt_cuda__nccl_load();
}

void ckpt_cuda__nccl_free(ckpt_cuda_provider *p)
{
	(void)p;
}

#endif

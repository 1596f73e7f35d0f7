/*
 * gpu_bench: the GPU rows of bench/gpu_check.sh, one mode per process (so
 * each reports its own peak RSS). Needs a GPU; run by gpu_check.sh.
 *
 *   gpu_bench make PREFIX MIB        write a MIB-MiB state (float32 variables of 64 MiB, or one smaller)
 *   gpu_bench limits PREFIX          what the hardware allows, on the state's data file:
 *                                    file read (warm, into pinned memory), pinned H2D with
 *                                    cudaMemcpyAsync, D2D, D2H, each of the whole state
 *   gpu_bench restore PREFIX R       ckpt_checkpoint_load into R replicas on GPU 0
 *   gpu_bench asyncsave PREFIX OUT   restore x1 on GPU 0, then ckpt_async_save to OUT:
 *                                    the seconds the trainer was blocked
 *
 * Each mode prints "row NAME SECONDS BYTES" lines and "rss_mb MODE N".
 */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "ckpt/cuda.h"

#define VAR_BYTES ((size_t)64 << 20)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void rss(const char *mode)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("rss_mb %s %.1f\n", mode, (double)ru.ru_maxrss / 1024.0);
}

static int die(const char *what)
{
	fprintf(stderr, "gpu_bench: %s: %s\n", what, ckpt_error_last()->message ? ckpt_error_last()->message : "?");
	return 1;
}

#define CU(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
	fprintf(stderr, "gpu_bench: %s: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)

static int make(const char *prefix, int mib)
{
	ckpt_checkpoint *ck = NULL;
	ckpt_shape shape;
	size_t var_bytes = (size_t)mib << 20 < VAR_BYTES ? (size_t)mib << 20 : VAR_BYTES;
	int64_t dims[1] = { (int64_t)(var_bytes / 4) };
	float *val = malloc(var_bytes ? var_bytes : 1);
	int i, nvar = var_bytes ? (int)(((size_t)mib << 20) / var_bytes) : 0;
	size_t k;

	if (!val || ckpt_checkpoint_new(&ck, NULL) != CKPT_OK)
		return die("make");
	ckpt_shape_make(&shape, 1, dims);
	for (i = 0; i < nvar; i++) {
		char name[64];
		ckpt_variable *v = NULL;
		snprintf(name, sizeof(name), "layer%03d/w", i);
		for (k = 0; k < var_bytes / 4; k++)
			val[k] = (float)((k * 2654435761u + (size_t)i) % 100000) * 1e-3f;
		if (ckpt_status_of(v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), name, name, CKPT_DT_FLOAT, &shape, NULL)) != CKPT_OK ||
			ckpt_variable_assign(v, val, var_bytes) != CKPT_OK)
			return die("make: variable");
	}
	if (ckpt_checkpoint_write(ck, prefix) != CKPT_OK)
		return die("make: write");
	ckpt_checkpoint_free(ck);
	free(val);
	printf("made %s: %d variables, %zu bytes\n", prefix, nvar, (size_t)nvar * var_bytes);
	return 0;
}

static int limits(const char *prefix)
{
	char data[4096];
	size_t n, off;
	void *pin = NULL, *d1 = NULL, *d2 = NULL;
	cudaStream_t s;
	double t0;
	int fd, pass;
	off_t size;

	snprintf(data, sizeof(data), "%s.data-00000-of-00001", prefix);
	if ((fd = open(data, O_RDONLY)) < 0) {
		perror(data);
		return 1;
	}
	size = lseek(fd, 0, SEEK_END);
	n = (size_t)size;
	CU(cudaSetDevice(0));
	CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CU(cudaMallocHost(&pin, n));
	CU(cudaMalloc(&d1, n));
	CU(cudaMalloc(&d2, n));
	for (pass = 0; pass < 2; pass++) { /* the first pass warms the page cache and the pinned pages */
		t0 = now();
		for (off = 0; off < n;) {
			ssize_t got = pread(fd, (char *)pin + off, n - off < ((size_t)64 << 20) ? n - off : ((size_t)64 << 20), (off_t)off);
			if (got <= 0) {
				perror("pread");
				return 1;
			}
			off += (size_t)got;
		}
		if (pass)
			printf("row file_read_warm %.4f %zu\n", now() - t0, n);
	}
	for (pass = 0; pass < 2; pass++) {
		t0 = now();
		CU(cudaMemcpyAsync(d1, pin, n, cudaMemcpyHostToDevice, s));
		CU(cudaStreamSynchronize(s));
		if (pass)
			printf("row pinned_h2d %.4f %zu\n", now() - t0, n);
		t0 = now();
		CU(cudaMemcpyAsync(d2, d1, n, cudaMemcpyDeviceToDevice, s));
		CU(cudaStreamSynchronize(s));
		if (pass)
			printf("row d2d %.4f %zu\n", now() - t0, n);
		t0 = now();
		CU(cudaMemcpyAsync(pin, d2, n, cudaMemcpyDeviceToHost, s));
		CU(cudaStreamSynchronize(s));
		if (pass)
			printf("row pinned_d2h %.4f %zu\n", now() - t0, n);
	}
	CU(cudaFree(d1));
	CU(cudaFree(d2));
	CU(cudaFreeHost(pin));
	CU(cudaStreamDestroy(s));
	close(fd);
	rss("limits");
	return 0;
}

static int restore(const char *prefix, int replicas, const char *save_to)
{
	ckpt_cuda_provider *cp = NULL;
	ckpt_strategy *s = NULL;
	ckpt_checkpoint *ck = NULL;
	ckpt_restore_status *st = NULL;
	int devices[16] = { 0 }, rc;
	double t0, t;
	char row[64];

	if (ckpt_cuda_provider_new(&cp, NULL) != CKPT_OK)
		return die("provider");
	printf("provider: %s\n", ckpt_cuda_provider_describe(cp));
	if (ckpt_strategy_mirrored_on(&s, ckpt_cuda_provider_table(cp), devices, replicas) != CKPT_OK ||
		ckpt_scope_enter(s) != CKPT_OK)
		return die("strategy");
	t0 = now();
	rc = ckpt_checkpoint_load(&ck, &st, prefix, NULL);
	t = now() - t0;
	ckpt_scope_exit(s);
	if (rc != CKPT_OK)
		return die("load");
	snprintf(row, sizeof(row), save_to ? "restore_x%d_before_save" : "restore_x%d", replicas);
	printf("row %s %.4f 0\n", row, t);
	if (save_to) {
		ckpt_async_saver *as = NULL;
		if (ckpt_async_saver_new(&as, NULL) != CKPT_OK)
			return die("async saver");
		if (ckpt_async_save(as, ck, save_to) != CKPT_OK) /* a first save sizes the arena */
			return die("async save");
		if (ckpt_async_wait(as) != CKPT_OK)
			return die("async wait");
		t0 = now();
		if (ckpt_async_save(as, ck, save_to) != CKPT_OK)
			return die("async save");
		t = now() - t0;
		printf("row async_save_blocking %.4f 0\n", t);
		printf("row async_save_blocking_reported %.4f 0\n", ckpt_async_last_blocking_seconds(as));
		if (ckpt_async_wait(as) != CKPT_OK)
			return die("async wait");
		ckpt_async_saver_free(as);
	}
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	ckpt_cuda_provider_free(cp);
	rss(save_to ? "asyncsave" : row);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && strcmp(argv[1], "make") == 0)
		return make(argv[2], atoi(argv[3]));
	if (argc == 3 && strcmp(argv[1], "limits") == 0)
		return limits(argv[2]);
	if (argc == 4 && strcmp(argv[1], "restore") == 0)
		return restore(argv[2], atoi(argv[3]), NULL);
	if (argc == 4 && strcmp(argv[1], "asyncsave") == 0)
		return restore(argv[2], 1, argv[3]);
	fprintf(stderr, "usage: gpu_bench make PREFIX MIB | limits PREFIX | restore PREFIX R | asyncsave PREFIX OUT\n");
	return 2;
}

/*
 * Worker-split bit identity: `mpi_split LOCAL OUT [mirrored]`.
 *
 * Every worker starts from a different seed; creation must give everyone
 * worker 0's values. Then 12 training steps: replica g's gradient is a
 * function of (g, step) with magnitudes over 12 decades (so the order of a
 * float sum shows in its bits), all-reduced SUM (f32) and MEAN (f64), plus
 * a barrier. Every replica's copies must be bit-identical (checked across
 * local replicas and across workers), and worker 0 writes the final bytes
 * to OUT: the suite compares the files of 1x4, 2x2, 4x1 and an in-process
 * mirrored(4) run byte for byte. Prints "CHECKS n" (summed over workers).
 */
#include <math.h>
#include <string.h>
#include <ckpt/mpi.h>
#include "mpi_model.h"
#include "mpi_report.h"

#define N32 1000
#define N64 333
#define STEPS 12

static ckpt_variable *w32, *w64;

static double grad_of(int g, int step, int i)
{
	uint64_t x = (uint64_t)g * 0x9e3779b97f4a7c15ull ^ (uint64_t)step * 0xbf58476d1ce4e5b9ull ^ (uint64_t)i * 0x94d049bb133111ebull;
	x ^= x >> 31;
	x *= 0xd6e8feb86659fd93ull;
	x ^= x >> 32;
	double u = (double)(x & 0xffffff) / (double)0x1000000;  /* [0, 1) */
	int e = (int)((x >> 24) % 12) - 6;
	return (u - 0.5) * pow(10.0, e);
}

typedef struct { int step; long checks; int bad; } step_arg;

static int train_step(ckpt_replica_ctx *ctx, void *p)
{
	step_arg *a = p;
	int g = ckpt_replica_id(ctx);
	float gf[N32];
	double gd[N64];
	for (int i = 0; i < N32; i++)
		gf[i] = (float)grad_of(g, a->step, i);
	for (int i = 0; i < N64; i++)
		gd[i] = grad_of(g + 1000, a->step, i);
	int rc = ckpt_replica_all_reduce_f32(ctx, CKPT_REDUCE_SUM, gf, N32);
	if (rc == CKPT_OK)
		rc = ckpt_replica_all_reduce_f64(ctx, CKPT_REDUCE_MEAN, gd, N64);
	if (rc == CKPT_OK)
		rc = ckpt_replica_barrier(ctx);
	void *pf = NULL, *pd = NULL;
	if (rc == CKPT_OK)
		rc = ckpt_status_of(pf = ckpt_variable_local(w32));
	if (rc == CKPT_OK)
		rc = ckpt_status_of(pd = ckpt_variable_local(w64));
	if (rc < 0)
		return rc;
	float *f = pf;
	double *d = pd;
	for (int i = 0; i < N32; i++)
		f[i] -= 0.01f * gf[i];
	for (int i = 0; i < N64; i++)
		d[i] = d[i] * 0.999 - gd[i];
	return CKPT_OK;
}

static uint64_t fnv(const void *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= ((const unsigned char *)p)[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		TM_FAIL("usage: mpi_split LOCAL OUT [mirrored]");
	int prov;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int local = atoi(argv[1]);
	ckpt_strategy *s;
	if (argc > 3 && strcmp(argv[3], "mirrored") == 0)
		TM_TRY(ckpt_strategy_mirrored_new(&s, local));
	else
		TM_TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, local));
	long checks = 0;
	int bad = 0;
	if (strcmp(ckpt_strategy_name(s), argc > 3 ? "mirrored" : "multi_worker") != 0 ||
	    ckpt_strategy_num_replicas(s) != size * local)
		TM_FAIL("worker %d: strategy %s with %d replicas", rank, ckpt_strategy_describe(s), ckpt_strategy_num_replicas(s));
	checks += 2;

	/* differently seeded workers: worker 0's value wins */
	float init32[N32];
	double init64[N64];
	for (int i = 0; i < N32; i++)
		init32[i] = (float)(rank * 7 + 1) * (float)i * 0.001f;
	for (int i = 0; i < N64; i++)
		init64[i] = (double)(rank * 7 + 1) / (double)(i + 1);
	ckpt_shape s32 = { 1, { N32 } }, s64 = { 1, { N64 } };
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	TM_TRY(ckpt_scope_enter(s));
	o.initial_value = init32;
	TM_TRY(ckpt_variable_new(&w32, "w32", CKPT_DT_FLOAT, &s32, &o));
	o.initial_value = init64;
	TM_TRY(ckpt_variable_new(&w64, "w64", CKPT_DT_DOUBLE, &s64, &o));
	TM_TRY(ckpt_scope_exit(s));
	for (int r = 0; r < ckpt_variable_num_replicas(w32); r++) {
		const float *f = ckpt_variable_replica_data(w32, r);
		const double *d = ckpt_variable_replica_data(w64, r);
		for (int i = 0; i < N32; i++, checks++)
			if (f[i] != (float)1 * (float)i * 0.001f && bad++ < 3)
				fprintf(stderr, "worker %d copy %d: w32[%d] = %g is not worker 0's initial value\n", rank, r, i, f[i]);
		for (int i = 0; i < N64; i++, checks++)
			if (d[i] != 1.0 / (double)(i + 1) && bad++ < 3)
				fprintf(stderr, "worker %d copy %d: w64[%d] = %g is not worker 0's initial value\n", rank, r, i, d[i]);
	}

	for (int st = 0; st < STEPS; st++) {
		step_arg a = { st, 0, 0 };
		TM_TRY(ckpt_strategy_run(s, train_step, &a));
	}
	/* bit-identical on every local replica and every worker */
	for (int r = 1; r < ckpt_variable_num_replicas(w32); r++, checks += 2)
		if (!ckpt_variable_replicas_identical(w32) || !ckpt_variable_replicas_identical(w64))
			bad++, fprintf(stderr, "worker %d: local copies differ\n", rank);
	uint64_t h[2] = { fnv(ckpt_variable_replica_data(w32, 0), sizeof(float) * N32),
		fnv(ckpt_variable_replica_data(w64, 0), sizeof(double) * N64) };
	uint64_t *all = calloc((size_t)size * 2, sizeof(uint64_t));
	MPI_Allgather(h, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, MPI_COMM_WORLD);
	for (int w = 0; w < size; w++, checks += 2)
		if (all[2 * w] != h[0] || all[2 * w + 1] != h[1])
			bad++, fprintf(stderr, "worker %d: values differ from worker %d's\n", rank, w);
	free(all);
	if (rank == 0) {
		FILE *f = fopen(argv[2], "wb");
		if (!f || fwrite(ckpt_variable_replica_data(w32, 0), sizeof(float), N32, f) != N32 ||
		    fwrite(ckpt_variable_replica_data(w64, 0), sizeof(double), N64, f) != N64 || fclose(f))
			TM_FAIL("cannot write %s", argv[2]);
	}
	ckpt_variable_free(w32);
	ckpt_variable_free(w64);
	ckpt_strategy_free(s);
	return tm_report(checks, bad, NULL);
}

/*
 * Sync-on-read reads across workers, exactly as in one process:
 * `mpi_syncread LOCAL OUT [mirrored]`.
 *
 * Sync-on-read SUM and MEAN variables of f32, f64, i32 and i64; replica g's
 * values are a function of g (floats over 12 decades, so the order and the
 * width of a sum show in its bits). Worker 0 writes every read's bytes to
 * OUT, then, for two integer variables whose sums overflow (int32 SUM at
 * elements 5 and 7, int64 MEAN at element 6), the status and message: the
 * suite compares the files of 1x4, 2x2, 4x1 and an in-process mirrored(4)
 * byte for byte. Checked here: every worker reads the same bytes and fails
 * the overflowing reads with the same ELIMIT naming the variable; a MEAN of
 * equal copies reads back the value; a string variable created with a
 * different initial value (other lengths too) on every worker holds worker
 * 0's on every copy of every worker. Prints "CHECKS n FAILED f".
 */
#include <math.h>
#include <string.h>
#include <ckpt/mpi.h>
#include "mpi_model.h"
#include "mpi_report.h"

#define N 97
#define NV 8
#define NOVF 8

static int rank, size;
static long checks;
static int bad;
static ckpt_variable *vars[NV], *ovf32, *ovf64, *same32, *same64;
static const ckpt_dtype dts[4] = { CKPT_DT_FLOAT, CKPT_DT_DOUBLE, CKPT_DT_INT32, CKPT_DT_INT64 };

static double val_of(int g, int v, int i)
{
	uint64_t x = (uint64_t)(g + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(v + 1) * 0xbf58476d1ce4e5b9ull ^
		(uint64_t)(i + 1) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	x *= 0xd6e8feb86659fd93ull;
	x ^= x >> 32;
	double u = (double)(x & 0xffffff) / (double)0x1000000;
	int e = (int)((x >> 24) % 12) - 6;
	return (u - 0.5) * pow(10.0, e);
}

static int set_replicas(ckpt_replica_ctx *ctx, void *p)
{
	(void)p;
	int g = ckpt_replica_id(ctx);
	for (int k = 0; k < NV; k++) {
		void *d;
		TM_RET(ckpt_status_of(d = ckpt_variable_local(vars[k])));
		for (int i = 0; i < N; i++) {
			double x = val_of(g, k, i);
			switch (dts[k / 2]) {
			case CKPT_DT_FLOAT: ((float *)d)[i] = (float)x; break;
			case CKPT_DT_DOUBLE: ((double *)d)[i] = x; break;
			case CKPT_DT_INT32: ((int32_t *)d)[i] = (int32_t)(x * 1e2); break;   /* |x| < 5e7: 4 fit */
			default: ((int64_t *)d)[i] = (int64_t)(x * 1e11); break;            /* |x| < 5e16 */
			}
		}
	}
	void *a, *b, *c, *e;
	TM_RET(ckpt_status_of(a = ckpt_variable_local(ovf32)));
	TM_RET(ckpt_status_of(b = ckpt_variable_local(ovf64)));
	TM_RET(ckpt_status_of(c = ckpt_variable_local(same32)));
	TM_RET(ckpt_status_of(e = ckpt_variable_local(same64)));
	for (int i = 0; i < NOVF; i++) {
		((int32_t *)a)[i] = (i == 5 || i == 7) ? 0x30000000 + g : g - 7;   /* 4 x 0x3.. > INT32_MAX */
		((int64_t *)b)[i] = i == 6 ? INT64_MAX / 3 : -(int64_t)g;          /* overflows at the 4th */
	}
	for (int i = 0; i < N; i++) {
		((float *)c)[i] = 0.1f * (float)(i + 1);
		((double *)e)[i] = 0.1 * (double)(i + 1);
	}
	return CKPT_OK;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= ((const unsigned char *)p)[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Every worker has the same hash of `what`. */
static void same_everywhere(const char *what, uint64_t h)
{
	uint64_t *all = calloc((size_t)size, sizeof(h));
	MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
	for (int w = 0; w < size; w++, checks++)
		if (all[w] != h)
			bad++, fprintf(stderr, "worker %d: %s differs from worker %d's\n", rank, what, w);
	free(all);
}

static void check_strings(ckpt_variable *v)
{
	static const char *const want[3] = { "worker 0 seeds this", "", "and this, longer: 0123456789abcdef" };
	ckpt_tensor *t = NULL;
	TM_TRY(ckpt_variable_read_tensor(&t, v));
	for (int r = 0; r < ckpt_variable_num_replicas(v); r++) {
		const ckpt_bytes *b = ckpt_variable_replica_data(v, r);
		for (int i = 0; i < 3; i++, checks++)
			if (b[i].len != strlen(want[i]) || memcmp(b[i].data, want[i], b[i].len) != 0)
				bad++, fprintf(stderr, "worker %d copy %d: string [%d] = '%.*s', not worker 0's '%s'\n", rank, r, i,
					(int)b[i].len, b[i].data, want[i]);
	}
	ckpt_tensor_free(t);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		TM_FAIL("usage: mpi_syncread LOCAL OUT [mirrored]");
	int prov;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int local = atoi(argv[1]);
	ckpt_strategy *s;
	if (argc > 3 && strcmp(argv[3], "mirrored") == 0)
		TM_TRY(ckpt_strategy_mirrored_new(&s, local));
	else
		TM_TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, local));

	ckpt_shape sh = { 1, { N } }, so = { 1, { NOVF } }, s3 = { 1, { 3 } };
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.sync = CKPT_SYNC_ON_READ;
	TM_TRY(ckpt_scope_enter(s));
	for (int k = 0; k < NV; k++) {
		char name[32];
		o.aggregation = k % 2 ? CKPT_AGG_MEAN : CKPT_AGG_SUM;
		snprintf(name, sizeof(name), "%s_%s", ckpt_dtype_name(dts[k / 2]), k % 2 ? "mean" : "sum");
		TM_TRY(ckpt_variable_new(&vars[k], name, dts[k / 2], &sh, &o));
	}
	o.aggregation = CKPT_AGG_SUM;
	TM_TRY(ckpt_variable_new(&ovf32, "ovf32", CKPT_DT_INT32, &so, &o));
	o.aggregation = CKPT_AGG_MEAN;
	TM_TRY(ckpt_variable_new(&ovf64, "ovf64", CKPT_DT_INT64, &so, &o));
	TM_TRY(ckpt_variable_new(&same32, "same32", CKPT_DT_FLOAT, &sh, &o));
	TM_TRY(ckpt_variable_new(&same64, "same64", CKPT_DT_DOUBLE, &sh, &o));
	/* differently seeded workers, other lengths too: worker 0's strings win */
	char s0[64], s2[64];
	snprintf(s0, sizeof(s0), "worker %d seeds this", rank);
	snprintf(s2, sizeof(s2), rank ? "worker %d" : "and this, longer: 0123456789abcdef", rank);
	ckpt_bytes init[3] = { { strlen(s0), s0 }, { (uint64_t)rank * 3, "xyzxyzxyzxyz" }, { strlen(s2), s2 } };
	ckpt_variable_options so_ = CKPT_VARIABLE_OPTIONS_INIT;
	so_.initial_value = init;
	ckpt_variable *str;
	TM_TRY(ckpt_variable_new(&str, "tag", CKPT_DT_STRING, &s3, &so_));
	TM_TRY(ckpt_scope_exit(s));
	check_strings(str);

	TM_TRY(ckpt_strategy_run(s, set_replicas, NULL));
	FILE *f = rank == 0 ? fopen(argv[2], "wb") : NULL;
	if (rank == 0 && !f)
		TM_FAIL("cannot write %s", argv[2]);
	for (int k = 0; k < NV; k++) {
		unsigned char buf[N * 8];
		size_t n = (size_t)ckpt_variable_nbytes(vars[k]);
		TM_TRY(ckpt_variable_read(vars[k], buf, n));
		same_everywhere(ckpt_variable_name(vars[k]), fnv(0xcbf29ce484222325ull, buf, n));
		if (f && fwrite(buf, 1, n, f) != n)
			TM_FAIL("cannot write %s", argv[2]);
	}
	/* the mean of equal copies is the value, whatever R */
	float c[N];
	double e[N];
	TM_TRY(ckpt_variable_read(same32, c, sizeof(c)));
	TM_TRY(ckpt_variable_read(same64, e, sizeof(e)));
	for (int i = 0; i < N; i++, checks += 2)
		if (c[i] != 0.1f * (float)(i + 1) || e[i] != 0.1 * (double)(i + 1))
			bad++, fprintf(stderr, "worker %d: MEAN of equal copies [%d] = %.9g / %.17g\n", rank, i, c[i], e[i]);
	/* overflow: the same failure on every worker, naming the variable */
	ckpt_variable *ov[2] = { ovf32, ovf64 };
	for (int k = 0; k < 2; k++) {
		int64_t buf[NOVF];
		int rc = ckpt_variable_read(ov[k], buf, (size_t)ckpt_variable_nbytes(ov[k]));
		char msg[512];
		snprintf(msg, sizeof(msg), "%s: %s", ckpt_status_name(rc), rc < 0 ? ckpt_error_last()->message : "no error");
		checks += 2;
		if (rc != CKPT_ELIMIT)
			bad++, fprintf(stderr, "worker %d: read of %s: %s, want ELIMIT\n", rank, ckpt_variable_name(ov[k]), msg);
		if (!strstr(msg, k ? "'ovf64'" : "'ovf32'") || !strstr(msg, k ? "element 6" : "element 5"))
			bad++, fprintf(stderr, "worker %d: overflow message does not name the variable and element: %s\n", rank, msg);
		same_everywhere("overflow message", fnv(0xcbf29ce484222325ull, msg, strlen(msg)));
		if (f)
			fprintf(f, "%s\n", msg);
	}
	if (f && fclose(f) != 0)
		TM_FAIL("cannot write %s", argv[2]);
	for (int k = 0; k < NV; k++)
		ckpt_variable_free(vars[k]);
	ckpt_variable_free(ovf32);
	ckpt_variable_free(ovf64);
	ckpt_variable_free(same32);
	ckpt_variable_free(same64);
	ckpt_variable_free(str);
	ckpt_strategy_free(s);
	return tm_report(checks, bad, NULL);
}

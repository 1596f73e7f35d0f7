/*
 * The multi-worker strategy with replicas in device memory: the guarded
 * test provider (PROT_NONE device memory, copies landing at synchronize).
 *
 *   mpi_device save host|guarded LOCAL PREFIX   build, set step-7 values (an
 *                      all-reduce in a replica run included), write PREFIX
 *                      (the test compares the host and guarded files byte
 *                      for byte)
 *   mpi_device restore LOCAL PREFIX             guarded replicas with other
 *                      values, restore PREFIX, every value and every local
 *                      replica checked through the provider
 * Prints "CHECKS n FAILED f" (summed over workers).
 */
#include <stdlib.h>
#include <string.h>
#include <ckpt/mpi.h>
#include "guarded_provider.h"
#include "mpi_report.h"

#define NK 3000
#define TRY(expr) do { int rc_ = (expr); if (rc_ < 0) { fprintf(stderr, "worker %d: %s: %s\n", rank, #expr, \
	ckpt_error_last()->message); exit(1); } } while (0)

static int rank;
static long checks, bad;

typedef struct dmodel {
	ckpt_checkpoint *ck;
	ckpt_variable *kernel, *bias, *total, *step;
} dmodel;

static void build(dmodel *m, ckpt_strategy *s)
{
	int64_t nk = NK, nb = 5;
	ckpt_shape sk, sb, sc = { 0 };
	ckpt_shape_make(&sk, 1, &nk);
	ckpt_shape_make(&sb, 1, &nb);
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	TRY(ckpt_checkpoint_new(&m->ck, &o));
	ckpt_object *net;
	TRY(ckpt_status_of(net = ckpt_object_new_child(ckpt_checkpoint_root(m->ck), "model")));
	TRY(ckpt_scope_enter(s));
	TRY(ckpt_status_of(m->kernel = ckpt_object_add_variable(net, "kernel", "kernel", CKPT_DT_FLOAT, &sk, NULL)));
	TRY(ckpt_status_of(m->bias = ckpt_object_add_variable(net, "bias", "bias", CKPT_DT_FLOAT, &sb, NULL)));
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.sync = CKPT_SYNC_ON_READ;
	vo.aggregation = CKPT_AGG_SUM;
	TRY(ckpt_status_of(m->total = ckpt_object_add_variable(net, "total", "total", CKPT_DT_DOUBLE, &sb, &vo)));
	TRY(ckpt_status_of(m->step = ckpt_object_add_variable(ckpt_checkpoint_root(m->ck), "step", "step", CKPT_DT_INT64, &sc, NULL)));
	TRY(ckpt_scope_exit(s));
}

static float kval(int64_t s, int i) { return (float)s + (float)i * 0.25f; }

/* Each replica all-reduces (MEAN) its device copy of the kernel: equal copies stay as they are. */
static int mean_step(ckpt_replica_ctx *ctx, void *arg)
{
	dmodel *m = arg;
	void *mine;
	int rc = ckpt_status_of(mine = ckpt_variable_local(m->kernel));
	return rc < 0 ? rc : ckpt_replica_all_reduce_f32(ctx, CKPT_REDUCE_MEAN, mine, NK);
}

static void set_values(dmodel *m, ckpt_strategy *s, int64_t step)
{
	float k[NK], b[5];
	double t[5];
	for (int i = 0; i < NK; i++)
		k[i] = kval(step, i);
	for (int i = 0; i < 5; i++) {
		b[i] = -(float)step - (float)i;
		t[i] = (double)step * 1.5 + i;
	}
	TRY(ckpt_variable_assign(m->kernel, k, sizeof(k)));
	TRY(ckpt_variable_assign(m->bias, b, sizeof(b)));
	TRY(ckpt_variable_assign(m->total, t, sizeof(t)));
	TRY(ckpt_variable_assign(m->step, &step, sizeof(step)));
	TRY(ckpt_strategy_run(s, mean_step, m));
}

static void check(dmodel *m, int64_t step)
{
	float k[NK], b[5];
	double t[5];
	int64_t st = -1;
	TRY(ckpt_variable_read(m->kernel, k, sizeof(k)));
	TRY(ckpt_variable_read(m->bias, b, sizeof(b)));
	TRY(ckpt_variable_read(m->total, t, sizeof(t))); /* collective: aggregated over every worker */
	TRY(ckpt_variable_read(m->step, &st, sizeof(st)));
	for (int i = 0; i < NK; i++, checks++)
		if (k[i] != kval(step, i) && bad++ < 3)
			fprintf(stderr, "worker %d: kernel[%d] = %g, want %g\n", rank, i, (double)k[i], (double)kval(step, i));
	for (int i = 0; i < 5; i++, checks += 2) {
		if (b[i] != -(float)step - (float)i && bad++ < 3)
			fprintf(stderr, "worker %d: bias[%d] = %g\n", rank, i, (double)b[i]);
		if (t[i] != (double)step * 1.5 + i && bad++ < 3)
			fprintf(stderr, "worker %d: total[%d] = %g, want %g\n", rank, i, t[i], (double)step * 1.5 + i);
	}
	checks += 3;
	if (st != step && bad++ < 3)
		fprintf(stderr, "worker %d: step = %lld\n", rank, (long long)st);
	if (!ckpt_variable_replicas_identical(m->kernel) && bad++ < 3)
		fprintf(stderr, "worker %d: kernel replicas differ\n", rank);
	if (!ckpt_variable_replicas_identical(m->bias) && bad++ < 3)
		fprintf(stderr, "worker %d: bias replicas differ\n", rank);
}

int main(int argc, char **argv)
{
	int prov, size;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int save = argc == 5 && strcmp(argv[1], "save") == 0;
	if (!save && !(argc == 4 && strcmp(argv[1], "restore") == 0)) {
		fprintf(stderr, "usage: mpi_device save host|guarded LOCAL PREFIX | restore LOCAL PREFIX\n");
		return 2;
	}
	int guarded = !save || strcmp(argv[2], "guarded") == 0;
	int local = atoi(argv[save ? 3 : 2]);
	const char *prefix = argv[save ? 4 : 3];
	ts_guarded *g = ts_guarded_new(2, rank % 2); /* worker 1 offers a broadcast, worker 0 fans out by D2D */
	int devices[8] = { 0, 1, 0, 1, 0, 1, 0, 1 };
	ckpt_strategy *s;
	if (guarded)
		TRY(ckpt_strategy_multi_worker_new_on(&s, MPI_COMM_WORLD, ts_guarded_provider(g), devices, local));
	else
		TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, local));
	dmodel m;
	build(&m, s);
	if (save) {
		set_values(&m, s, 7);
		check(&m, 7);
		TRY(ckpt_checkpoint_write(m.ck, prefix));
	} else {
		set_values(&m, s, 2);
		TRY(ckpt_checkpoint_restore(NULL, m.ck, prefix));
		check(&m, 7);
		checks++;
		if (guarded && ts_guarded_get_stats(g).h2d_bytes == 0 && bad++ < 3)
			fprintf(stderr, "worker %d: nothing went to the devices\n", rank);
	}
	ckpt_checkpoint_free(m.ck);
	ckpt_strategy_free(s);
	checks++;
	if (ts_guarded_get_stats(g).device_live != 0 && bad++ < 3)
		fprintf(stderr, "worker %d: device buffers leaked\n", rank);
	ts_guarded_free(g);
	return (int)tm_report(checks, bad, NULL);
}

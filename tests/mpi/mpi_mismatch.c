/*
 * Workers that create different variables: `mpi_mismatch CASE`, 2+ workers.
 * The last worker diverges (CASE = shape, dtype, order, extra, missing);
 * every worker must fail with CKPT_ESCOPE whose message names the variable
 * and the two workers, at that creation or the next collective call, and a
 * later collective call fails at once (no hang: the suite runs this under a
 * timeout). Prints "CHECKS n".
 */
#include <string.h>
#include <ckpt/mpi.h>
#include "mpi_model.h"
#include "mpi_report.h"

static int add(ckpt_object *o, const char *name, ckpt_dtype dt, int64_t n, ckpt_variable **v)
{
	ckpt_shape sh = { 1, { n } };
	return ckpt_status_of(v ? (*v = ckpt_object_add_variable(o, name, name, dt, &sh, NULL)) : ckpt_object_add_variable(o, name, name, dt, &sh, NULL));
}

static int step(ckpt_replica_ctx *ctx, void *p)
{
	float g[3] = { 1, 2, 3 };
	(void)p;
	return ckpt_replica_all_reduce_f32(ctx, CKPT_REDUCE_SUM, g, 3);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		TM_FAIL("usage: mpi_mismatch shape|dtype|order|extra|missing");
	int prov;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	const char *c = argv[1];
	int odd = rank == size - 1;
	ckpt_strategy *s;
	TM_TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, 2));
	ckpt_checkpoint *ck;
	ckpt_variable *a = NULL, *b = NULL, *x = NULL;
	TM_TRY(ckpt_scope_enter(s));
	TM_TRY(ckpt_checkpoint_new(&ck, NULL));
	ckpt_object *root = ckpt_checkpoint_root(ck);
	TM_TRY(add(root, "first", CKPT_DT_FLOAT, 4, &x));
	int rc = CKPT_OK;
	const char *want = "kernel";
	if (strcmp(c, "shape") == 0) {
		rc = add(root, "kernel", CKPT_DT_FLOAT, odd ? 5 : 4, &a);
	} else if (strcmp(c, "dtype") == 0) {
		rc = add(root, "kernel", odd ? CKPT_DT_DOUBLE : CKPT_DT_FLOAT, 4, &a);
	} else if (strcmp(c, "order") == 0) {
		rc = add(root, odd ? "bias" : "kernel", CKPT_DT_FLOAT, 4, &a);
		if (rc == CKPT_OK)
			rc = add(root, odd ? "kernel" : "bias", CKPT_DT_FLOAT, 4, &b);
	} else if (strcmp(c, "extra") == 0) {
		want = "extra";
		if (odd)
			rc = add(root, "extra", CKPT_DT_FLOAT, 4, &a);
		if (rc == CKPT_OK)
			rc = ckpt_strategy_run(s, step, NULL);
	} else if (strcmp(c, "missing") == 0) {
		/* the odd worker skips 'kernel' and goes on to save */
		if (!odd)
			rc = add(root, "kernel", CKPT_DT_FLOAT, 4, &a);
		if (rc == CKPT_OK)
			rc = ckpt_checkpoint_write(ck, argc > 2 ? argv[2] : "/tmp/ckpt-mismatch-never");
	} else {
		TM_FAIL("unknown case %s", c);
	}
	long checks = 0;
	int bad = 0;
	char buf[2048];
	ckpt_error_format(ckpt_error_last(), buf, sizeof(buf));
	checks += 4;
	if (rc != CKPT_ESCOPE)
		bad++, fprintf(stderr, "worker %d (%s): rc %s, want ESCOPE: %s\n", rank, c, ckpt_status_name(rc), buf);
	if (!strstr(buf, want))
		bad++, fprintf(stderr, "worker %d (%s): message does not name '%s': %s\n", rank, c, want, buf);
	char wa[32], wb[32];
	snprintf(wa, sizeof(wa), "worker 0");
	snprintf(wb, sizeof(wb), "worker %d", size - 1);
	if (!strstr(buf, wa) || !strstr(buf, wb))
		bad++, fprintf(stderr, "worker %d (%s): message does not name %s and %s: %s\n", rank, c, wa, wb, buf);
	/* broken from now on: fails at once, on every worker */
	TM_TRY(ckpt_scope_exit(s));
	rc = ckpt_strategy_run(s, step, NULL);
	if (rc != CKPT_ESCOPE)
		bad++, fprintf(stderr, "worker %d (%s): run after the disagreement: %s\n", rank, c, ckpt_status_name(rc));
	if (rank == 0)
		fprintf(stderr, "worker 0 (%s): %s\n", c, buf);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	return tm_report(checks, bad, NULL);
}

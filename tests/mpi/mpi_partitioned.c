/*
 * TensorFlow-written partitioned variables restored by a multi-worker job:
 * `mpi_partitioned LOCAL DIR` where DIR holds tests/oracles/tf_partitioned.py's
 * output (a TF1 PartitionedVariable of 3 parts, a TF2 ShardedVariable of 3
 * shards, and full.f32). Every worker restores both into an unpartitioned
 * mirrored variable of the full shape (each assembles it from the slices it
 * reads) and every local copy must equal the full tensor; then both into a
 * partitioned variable of 2 parts (part i on worker i % W, each reading only
 * its rows of TensorFlow's 3 slices), each part equal to its rows.
 * Prints "CHECKS n FAILED f".
 */
#include <string.h>
#include <ckpt/mpi.h>
#include "mpi_model.h"
#include "mpi_report.h"

#define ROWS 7
#define COLS 4

static int check_copies(ckpt_variable *v, const float *full, const char *what, int rank, long *checks)
{
	int bad = 0;
	for (int r = 0; r < ckpt_variable_num_replicas(v); r++) {
		const float *p = ckpt_variable_replica_data(v, r);
		for (int i = 0; i < ROWS * COLS; i++, (*checks)++)
			if (p[i] != full[i] && bad++ < 3)
				fprintf(stderr, "worker %d %s copy %d: [%d] = %g, want %g\n", rank, what, r, i, p[i], full[i]);
	}
	return bad;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		TM_FAIL("usage: mpi_partitioned LOCAL DIR");
	int prov, rank, size;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	float full[ROWS * COLS];
	char p[1024];
	snprintf(p, sizeof(p), "%s/full.f32", argv[2]);
	FILE *f = fopen(p, "rb");
	if (!f || fread(full, sizeof(float), ROWS * COLS, f) != ROWS * COLS)
		TM_FAIL("cannot read %s", p);
	fclose(f);
	ckpt_strategy *s;
	TM_TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, atoi(argv[1])));
	long checks = 0;
	int bad = 0;
	ckpt_shape sh = { 2, { ROWS, COLS } };
	static const char *const files[2] = { "tf2/ckpt-1", "tf1/model.ckpt" };
	for (int k = 0; k < 2; k++) {
		ckpt_checkpoint *ck;
		ckpt_variable *emb;
		TM_TRY(ckpt_scope_enter(s));
		TM_TRY(ckpt_checkpoint_new(&ck, NULL));
		/* TF2: the object-graph key; TF1 (name-based): the variable's name */
		TM_TRY(ckpt_status_of(emb = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "emb", "emb", CKPT_DT_FLOAT, &sh, NULL)));
		snprintf(p, sizeof(p), "%s/%s", argv[2], files[k]);
		ckpt_restore_status *st;
		TM_TRY(ckpt_checkpoint_restore(&st, ck, p));
		TM_TRY(ckpt_scope_exit(s));
		checks++;
		if (ckpt_restore_status_num_restored(st) < 1)
			bad++, fprintf(stderr, "worker %d: %s restored nothing\n", rank, files[k]);
		/* the slice entries themselves are counted as values not restored: expected here */
		ckpt_restore_status_expect_partial(st);
		ckpt_restore_status_free(st);
		bad += check_copies(emb, full, files[k], rank, &checks);
		ckpt_checkpoint_free(ck);
		/* resharded at load: TF's P = 3 onto P = 2 over these workers */
		ckpt_partitioned *pv;
		TM_TRY(ckpt_scope_enter(s));
		TM_TRY(ckpt_checkpoint_new(&ck, NULL));
		TM_TRY(ckpt_partitioned_new(&pv, "emb", CKPT_DT_FLOAT, &sh, 2, NULL));
		if (k == 0) /* TF2 ShardedVariable: its object key; TF1 Saver: its name */
			TM_TRY(ckpt_object_track_partitioned(ckpt_checkpoint_root(ck), "emb", pv));
		else
			TM_TRY(ckpt_checkpoint_track_partitioned(ck, pv));
		TM_TRY(ckpt_checkpoint_restore(&st, ck, p));
		TM_TRY(ckpt_scope_exit(s));
		ckpt_restore_status_expect_partial(st); /* TF2's save_counter has no live counterpart */
		ckpt_restore_status_free(st);
		for (int i = 0; i < 2; i++) {
			ckpt_variable *part = ckpt_partitioned_part(pv, i);
			checks++;
			if ((part != NULL) != (i % size == rank)) {
				bad++;
				fprintf(stderr, "worker %d: part %d held %d\n", rank, i, part != NULL);
			}
			if (!part)
				continue;
			int64_t first, rows;
			TM_TRY(ckpt_partitioned_part_rows(&first, &rows, pv, i));
			checks++;
			if (memcmp(ckpt_variable_replica_data(part, 0), full + first * COLS, (size_t)(rows * COLS) * sizeof(float)))
				bad++, fprintf(stderr, "worker %d: %s part %d of 2 differs\n", rank, files[k], i);
		}
		ckpt_checkpoint_free(ck);
		ckpt_partitioned_free(pv);
	}
	ckpt_strategy_free(s);
	return tm_report(checks, bad, NULL);
}

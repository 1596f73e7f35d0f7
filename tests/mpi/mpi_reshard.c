/*
 * Partitioned variables across workers: `mpi_reshard MODE P DIR`.
 *
 *   save P DIR     every worker creates emb [10 x 6] float32 in P parts
 *                  (part i on worker i % W; saved under its name, TF1's
 *                  layout) and `table` [9 x 4] in P parts (tracked as the
 *                  root's child "table": TF2's object key), fills the parts
 *                  it owns with the element index, and the job writes
 *                  DIR/ckpt with a mirrored `bias` beside them. Worker 0 then checks the file
 *                  in one process: the full entry lists P row slices, each
 *                  slice entry lives in its owner's data shard, and each
 *                  shard holds exactly its owner's part bytes (+ what the
 *                  mirrored save gave it).
 *   restore P DIR  every worker creates emb in P parts (another P, another
 *                  W), restores DIR/ckpt through a read-counting file
 *                  system, and checks that every part it holds equals those
 *                  rows of the full tensor, that the restore read exactly
 *                  its parts' bytes of the stored slices (no more), and that
 *                  the status is consumed.
 *   badcrc P DIR   worker 0 flips a byte in row 6 of emb's stored slice
 *                  [4, 7) (DIR/ckpt is damaged for good); with P = 2 on 2
 *                  workers each reads only a piece of that slice, so
 *                  neither can check it alone: the restore must fail with
 *                  ECHECKSUM on every worker (the pieces' crc32c combined
 *                  across workers) and leave every part as it was.
 *   full 0 DIR     restores into an unpartitioned mirrored variable `emb`
 *                  of the full shape (2 local replicas): every copy is the
 *                  full tensor.
 * Prints "CHECKS n FAILED f".
 */
#include <string.h>
#include <ckpt/mpi.h>
#include "mpi_model.h"
#include "mpi_report.h"
#include "count_vfs.h"

#define ROWS 10
#define COLS 6

static long checks;
static int bad;

#define CHECK(cond, ...) do { checks++; if (!(cond)) { bad++; fprintf(stderr, "worker %d: ", rank); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static int rank, size;

static float value_at(int64_t i) { return (float)i; }

static ckpt_partitioned *table;

static void build(ckpt_checkpoint **ck, ckpt_variable **bias, ckpt_partitioned **emb, int P, ckpt_vfs *vfs)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.vfs = vfs;
	o.no_fsync = 1;
	TM_TRY(ckpt_checkpoint_new(ck, &o));
	float b0[5] = { 1, 2, 3, 4, 5 };
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.initial_value = b0;
	ckpt_shape bs = { 1, { 5 } };
	TM_TRY(ckpt_status_of(bias ? (*bias = ckpt_object_add_variable(ckpt_checkpoint_root(*ck), "bias", "bias", CKPT_DT_FLOAT, &bs, &vo)) : ckpt_object_add_variable(ckpt_checkpoint_root(*ck), "bias", "bias", CKPT_DT_FLOAT, &bs, &vo)));
	ckpt_shape sh = { 2, { ROWS, COLS } };
	TM_TRY(ckpt_partitioned_new(emb, "emb", CKPT_DT_FLOAT, &sh, P, NULL));
	TM_TRY(ckpt_checkpoint_track_partitioned(*ck, *emb));
	ckpt_shape ts = { 2, { 9, 4 } };
	TM_TRY(ckpt_partitioned_new(&table, "table", CKPT_DT_FLOAT, &ts, P, NULL));
	TM_TRY(ckpt_object_track_partitioned(ckpt_checkpoint_root(*ck), "table", table));
}

static void fill_owned(ckpt_partitioned *emb)
{
	int cols = (int)ckpt_partitioned_shape(emb)->dims[1];
	for (int i = 0; i < ckpt_partitioned_num_parts(emb); i++) {
		ckpt_variable *part = ckpt_partitioned_part(emb, i);
		CHECK((part != NULL) == (ckpt_partitioned_owner(emb, i) == rank), "part %d held %d, owner %d", i,
			part != NULL, ckpt_partitioned_owner(emb, i));
		if (!part)
			continue;
		int64_t first, rows;
		TM_TRY(ckpt_partitioned_part_rows(&first, &rows, emb, i));
		float *v = malloc((size_t)(rows * cols) * sizeof(float));
		for (int64_t k = 0; k < rows * cols; k++)
			v[k] = value_at(first * cols + k);
		TM_TRY(ckpt_variable_assign(part, v, (size_t)(rows * cols) * sizeof(float)));
		free(v);
	}
}

/* Worker 0, single process: the layout the job wrote. */
static void check_file(const char *path, int P)
{
	ckpt_reader *r;
	TM_TRY(ckpt_reader_open(&r, path, NULL));
	CHECK(ckpt_reader_num_shards(r) == size, "%d data shards, want %d", ckpt_reader_num_shards(r), size);
	size_t fi;
	TM_TRY(ckpt_reader_find(&fi, r, "emb"));
	const ckpt_var_info *full = ckpt_reader_var(r, fi);
	CHECK(full->nslices == (size_t)P, "emb lists %zu slices, want %d", full->nslices, P);
	uint64_t *owned = calloc((size_t)size, sizeof(uint64_t)), *stored = calloc((size_t)size, sizeof(uint64_t));
	int64_t q = ROWS / P, rem = ROWS % P, at = 0;
	for (int i = 0; i < P && (size_t)i < full->nslices; i++) {
		int64_t rows = q + (i < rem);
		const ckpt_slice *sl = &full->slices[i];
		CHECK(sl->rank == 2 && sl->extents[0].start == at && sl->extents[0].length == rows &&
			sl->extents[1].start == 0 && sl->extents[1].length == COLS, "slice %d is not rows [%lld, %lld) x %d",
			i, (long long)at, (long long)(at + rows), COLS);
		owned[i % size] += (uint64_t)(rows * COLS) * sizeof(float);
		at += rows;
	}
	/* table under TF2's object key, with its slices */
	size_t ti;
	TM_TRY(ckpt_reader_find(&ti, r, "table/.ATTRIBUTES/VARIABLE_VALUE"));
	CHECK(ckpt_reader_var(r, ti)->nslices == (size_t)P, "table lists %zu slices", ckpt_reader_var(r, ti)->nslices);
	for (int i = 0; i < P; i++) {
		int64_t a, n;
		TM_TRY(ckpt_partitioned_part_rows(&a, &n, table, i));
		owned[i % size] += (uint64_t)(n * 4) * sizeof(float);
	}
	int nslice = 0;
	for (size_t e = 0; e < ckpt_reader_num_entries(r); e++) {
		const ckpt_var_info *v = ckpt_reader_var(r, e);
		if (v->shard >= 0 && v->shard < size)
			stored[v->shard] += v->nbytes;
		if (!v->slice_part || v->shape.dims[1] != COLS)
			continue; /* table's slices: checked by the restores */
		nslice++;
		ckpt_tensor *t;
		TM_TRY(ckpt_reader_read(&t, r, e));
		const float *f = t->data;
		int64_t first = (int64_t)f[0] / COLS, k;
		for (k = 0; k < v->shape.dims[0] * COLS && f[k] == value_at(first * COLS + k); k++)
			;
		CHECK(k == v->shape.dims[0] * COLS, "slice entry %s: element %lld is %g", v->name, (long long)k, f[k]);
		/* which part: the one starting at `first` */
		int part = -1;
		for (int i = 0, a = 0; i < P; a += (int)(q + (i < rem)), i++)
			if (a == first)
				part = i;
		CHECK(part >= 0 && v->shard == part % size, "slice of rows from %lld (part %d) is in shard %d, its owner is "
			"worker %d", (long long)first, part, v->shard, part % size);
		ckpt_tensor_free(t);
	}
	CHECK(nslice == P, "%d slice entries, want %d", nslice, P);
	/* every byte of a shard is an entry of it; each worker's shard holds its parts (and its share of the rest) */
	for (int w = 0; w < size; w++) {
		int ex = 0;
		const char *sp = ckpt_reader_shard_path(r, w, &ex);
		FILE *f = fopen(sp, "rb");
		long sz = -1;
		if (f && fseek(f, 0, SEEK_END) == 0)
			sz = ftell(f);
		if (f)
			fclose(f);
		CHECK(ex && sz == (long)stored[w], "shard %d: %ld bytes on disk, its entries hold %llu", w, sz,
			(unsigned long long)stored[w]);
		CHECK(stored[w] >= owned[w], "shard %d holds %llu bytes, less than its parts' %llu", w,
			(unsigned long long)stored[w], (unsigned long long)owned[w]);
	}
	free(owned);
	free(stored);
	ckpt_reader_free(r);
}

static uint64_t check_values(ckpt_partitioned *emb)
{
	uint64_t mine = 0;
	int cols = (int)ckpt_partitioned_shape(emb)->dims[1];
	for (int i = 0; i < ckpt_partitioned_num_parts(emb); i++) {
		ckpt_variable *part = ckpt_partitioned_part(emb, i);
		CHECK((part != NULL) == (ckpt_partitioned_owner(emb, i) == rank), "part %d held %d", i, part != NULL);
		if (!part)
			continue;
		int64_t first, rows;
		TM_TRY(ckpt_partitioned_part_rows(&first, &rows, emb, i));
		mine += ckpt_variable_nbytes(part);
		for (int c = 0; c < ckpt_variable_num_replicas(part); c++) {
			const float *v = ckpt_variable_replica_data(part, c);
			int64_t k;
			for (k = 0; k < rows * cols && v[k] == value_at(first * cols + k); k++)
				;
			CHECK(k == rows * cols, "%s part %d (rows %lld..) copy %d: element %lld is %g, want %g",
				ckpt_partitioned_name(emb), i, (long long)first, c, (long long)k, v[k], value_at(first * cols + k));
		}
	}
	return mine;
}

static void check_parts(ckpt_partitioned *emb, count_vfs *cv, const char *path)
{
	uint64_t mine = check_values(emb) + check_values(table);
	/* the bytes read inside the stored slices: exactly this worker's rows */
	uint64_t got = 0;
	TM_TRY(count_vfs_slice_bytes(&got, NULL, cv, path));
	CHECK(got == mine, "read %llu bytes of the stored slices, its parts hold %llu", (unsigned long long)got,
		(unsigned long long)mine);
	printf("worker %d: read %llu bytes of the stored slices for %llu bytes of parts\n", rank, (unsigned long long)got,
		(unsigned long long)mine);
}

int main(int argc, char **argv)
{
	if (argc < 4)
		TM_FAIL("usage: mpi_reshard save|restore|full P DIR");
	int prov;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	const char *mode = argv[1];
	int P = atoi(argv[2]);
	char path[1024];
	snprintf(path, sizeof(path), "%s/ckpt", argv[3]);
	ckpt_strategy *s;
	TM_TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, strcmp(mode, "full") == 0 ? 2 : 1));
	ckpt_checkpoint *ck;
	ckpt_variable *bias;
	ckpt_partitioned *emb = NULL;
	if (strcmp(mode, "save") == 0) {
		TM_TRY(ckpt_scope_enter(s));
		build(&ck, &bias, &emb, P, NULL);
		fill_owned(emb);
		fill_owned(table);
		TM_TRY(ckpt_checkpoint_write(ck, path));
		TM_TRY(ckpt_scope_exit(s));
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 0)
			check_file(path, P);
	} else if (strcmp(mode, "badcrc") == 0) {
		if (rank == 0) {
			ckpt_reader *r;
			TM_TRY(ckpt_reader_open(&r, path, NULL));
			int flipped = 0;
			for (size_t e = 0; e < ckpt_reader_num_entries(r); e++) {
				const ckpt_var_info *v = ckpt_reader_var(r, e);
				if (!v->slice_part || v->shape.dims[1] != COLS || v->shape.dims[0] != 3)
					continue;
				float first;
				int ex;
				const char *sp = ckpt_reader_shard_path(r, v->shard, &ex);
				FILE *f = fopen(sp, "r+b");
				if (!f || fseek(f, v->offset, SEEK_SET) != 0 || fread(&first, 4, 1, f) != 1)
					TM_FAIL("cannot read %s", sp);
				if (first != value_at(4 * COLS)) {
					fclose(f);
					continue;
				}
				unsigned char b;
				long at = (long)v->offset + 2 * COLS * 4 + 5;
				if (fseek(f, at, SEEK_SET) != 0 || fread(&b, 1, 1, f) != 1)
					TM_FAIL("cannot read %s", sp);
				b ^= 0x20;
				if (fseek(f, at, SEEK_SET) != 0 || fwrite(&b, 1, 1, f) != 1)
					TM_FAIL("cannot write %s", sp);
				fclose(f);
				flipped++;
			}
			ckpt_reader_free(r);
			CHECK(flipped == 1, "flipped %d slices", flipped);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		TM_TRY(ckpt_scope_enter(s));
		build(&ck, &bias, &emb, P, NULL);
		ckpt_restore_status *st = NULL;
		int rc = ckpt_checkpoint_restore(&st, ck, path);
		TM_TRY(ckpt_scope_exit(s));
		CHECK(rc == CKPT_ECHECKSUM && st == NULL, "restore of a damaged slice: %s (%s)", ckpt_status_name(rc),
			ckpt_error_last()->message);
		CHECK(strstr(ckpt_error_last()->message, "crc32c mismatch") != NULL, "%s", ckpt_error_last()->message);
		for (int i = 0; i < ckpt_partitioned_num_parts(emb); i++) {
			ckpt_variable *part = ckpt_partitioned_part(emb, i);
			if (!part)
				continue;
			const float *v = ckpt_variable_replica_data(part, 0);
			int64_t k, n = (int64_t)(ckpt_variable_nbytes(part) / 4);
			for (k = 0; k < n && v[k] == 0; k++)
				;
			CHECK(k == n, "part %d changed by a failed restore", i);
		}
		if (rank == 0)
			printf("worker 0: %s\n", ckpt_error_last()->message);
	} else if (strcmp(mode, "restore") == 0) {
		count_vfs *cv = count_vfs_new();
		TM_TRY(ckpt_scope_enter(s));
		build(&ck, &bias, &emb, P, &cv->base);
		ckpt_restore_status *st;
		TM_TRY(ckpt_checkpoint_restore(&st, ck, path));
		TM_TRY(ckpt_scope_exit(s));
		int rc = ckpt_restore_status_assert_consumed(st);
		CHECK(rc == CKPT_OK, "restore status: %s", ckpt_error_last()->message);
		ckpt_restore_status_free(st);
		const float *b = ckpt_variable_replica_data(bias, 0);
		CHECK(b[0] == 1 && b[4] == 5, "bias %g .. %g", b[0], b[4]);
		check_parts(emb, cv, path);
		ckpt_checkpoint_free(ck);
		ck = NULL;
		ckpt_vfs_free(&cv->base);
	} else {
		ckpt_variable *v;
		ckpt_shape sh = { 2, { ROWS, COLS } };
		TM_TRY(ckpt_scope_enter(s));
		TM_TRY(ckpt_checkpoint_new(&ck, NULL));
		/* TF1 name-based: the full entry "emb" matched by the variable's name */
		TM_TRY(ckpt_status_of(v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "emb", "emb", CKPT_DT_FLOAT, &sh, NULL)));
		ckpt_restore_status *st;
		TM_TRY(ckpt_checkpoint_restore(&st, ck, path));
		TM_TRY(ckpt_scope_exit(s));
		ckpt_restore_status_expect_partial(st); /* bias is not in this tree */
		CHECK(ckpt_restore_status_num_restored(st) == 1, "restored %zu values",
		      ckpt_restore_status_num_restored(st));
		ckpt_restore_status_free(st);
		for (int c = 0; c < ckpt_variable_num_replicas(v); c++) {
			const float *f = ckpt_variable_replica_data(v, c);
			int k;
			for (k = 0; k < ROWS * COLS && f[k] == value_at(k); k++)
				;
			CHECK(k == ROWS * COLS, "full copy %d: element %d is %g", c, k, f[k]);
		}
	}
	if (ck)
		ckpt_checkpoint_free(ck);
	ckpt_partitioned_free(emb);
	ckpt_partitioned_free(table);
	ckpt_strategy_free(s);
	return tm_report(checks, bad, NULL);
}

/*
 * Partitioned variables in one process (ckpt/partitioned.h): saved in
 * TensorFlow's layout (TF2 object key or TF1 Saver name), restored onto
 * another part count reading only the rows each part needs (counted by a
 * read-recording file system), checksums verified over pieces, and
 * TensorFlow as the reference both ways. The multi-worker side is
 * tests/mpi/mpi_reshard.c (suite mpi).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ckpt/ckpt.h"
#include "test_support.h"
#include "mpi/count_vfs.h"

#define ROWS 10
#define COLS 6
#define OBJ_KEY "table/.ATTRIBUTES/VARIABLE_VALUE"

#define OK(expr) do { int ok_rc_ = (expr); cr_assert_eq(ok_rc_, CKPT_OK, "%s = %s: %s", #expr, \
	ckpt_status_name(ok_rc_), ckpt_error_last()->message); } while (0)

static const ckpt_shape full_shape = { 2, { ROWS, COLS } };

/* A checkpoint with emb [10 x 6] = element index in P parts: under the root as "table" (by_object) or by name. */
static char *save_p(const char *dir, int P, int by_object)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_checkpoint *ck;
	OK(ckpt_checkpoint_new(&ck, &o));
	float init[ROWS * COLS];
	for (int i = 0; i < ROWS * COLS; i++)
		init[i] = (float)i;
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.initial_value = init;
	ckpt_partitioned *p;
	OK(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &full_shape, P, &vo));
	cr_assert_eq(ckpt_partitioned_num_parts(p), P);
	if (by_object)
		OK(ckpt_object_track_partitioned(ckpt_checkpoint_root(ck), "table", p));
	else
		OK(ckpt_checkpoint_track_partitioned(ck, p));
	char *prefix = ts_join(dir, "ckpt");
	const char *path;
	OK(ckpt_status_of(path = ckpt_checkpoint_save(ck, prefix)));
	char *out = strdup(path);
	free(prefix);
	ckpt_checkpoint_free(ck);
	ckpt_partitioned_free(p);
	return out;
}

/* Every local copy of every part equals its rows of the element index. */
static void check_parts(const ckpt_partitioned *p)
{
	for (int i = 0; i < ckpt_partitioned_num_parts(p); i++) {
		int64_t first, rows;
		OK(ckpt_partitioned_part_rows(&first, &rows, p, i));
		ckpt_variable *v = ckpt_partitioned_part(p, i);
		cr_assert_not_null(v, "part %d is not local in one process", i);
		for (int c = 0; c < ckpt_variable_num_replicas(v); c++) {
			const float *f = ckpt_variable_replica_data(v, c);
			for (int64_t k = 0; k < rows * COLS; k++)
				cr_assert_eq(f[k], (float)(first * COLS + k), "part %d copy %d element %lld: %g", i, c, (long long)k,
					f[k]);
		}
	}
}

/* Bytes the recorded reads took from the stored slice entries of `path`. */
static uint64_t slice_bytes_read(const count_vfs *cv, const char *path, uint64_t *stored)
{
	uint64_t got = 0;
	OK(count_vfs_slice_bytes(&got, stored, cv, path));
	return got;
}

static void oracle(const char *path, const char *key, const char *mode, const char *parts)
{
	char cmd[4096];
	ts_run_result r;
	snprintf(cmd, sizeof(cmd), "TF_CPP_MIN_LOG_LEVEL=3 %s " CKPT_SOURCE_DIR "/tests/oracles/tf_read_partitioned.py "
		"%s '%s' %d %d %s %s", ts_oracle_python(), path, key, ROWS, COLS, mode, parts);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "TensorFlow does not read %s:\n%s\n%s", path, r.out, r.err);
	cr_assert(strstr(r.out, "TF PARTITIONED READ OK"), "%s", r.out);
	cr_log_info("%s", r.out);
	ts_run_free(&r);
}

Test(partitioned, object_tracked_p3_restores_as_mirrored_p2_reading_each_row_once_and_tf2_restores_it)
{
	char *dir = ts_tmpdir();
	char *path = save_p(dir, 3, 1);
	/* TF2's layout: the object-graph key, full entry with 3 slices, a graph node naming the variable */
	ckpt_reader *rd;
	OK(ckpt_reader_open(&rd, path, NULL));
	size_t fi;
	OK(ckpt_reader_find(&fi, rd, OBJ_KEY));
	cr_assert_eq(ckpt_reader_var(rd, fi)->nslices, 3);
	const ckpt_object_graph *g = ckpt_reader_object_graph(rd);
	cr_assert_not_null(g);
	int named = 0;
	for (size_t n = 0; n < g->nnodes; n++)
		for (size_t a = 0; a < g->nodes[n].nattrs; a++)
			named += strcmp(g->nodes[n].attrs[a].checkpoint_key, OBJ_KEY) == 0 &&
				strcmp(g->nodes[n].attrs[a].full_name, "emb") == 0;
	cr_assert_eq(named, 1, "no graph node holds %s with full_name emb", OBJ_KEY);
	ckpt_reader_free(rd);

	ckpt_strategy *s;
	OK(ckpt_strategy_mirrored_new(&s, 2));
	count_vfs *cv = count_vfs_new();
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.vfs = &cv->base;
	ckpt_checkpoint *ck;
	ckpt_partitioned *p;
	OK(ckpt_scope_enter(s));
	OK(ckpt_checkpoint_new(&ck, &o));
	OK(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &full_shape, 2, NULL));
	OK(ckpt_object_track_partitioned(ckpt_checkpoint_root(ck), "table", p));
	ckpt_restore_status *st;
	OK(ckpt_checkpoint_restore(&st, ck, path));
	OK(ckpt_scope_exit(s));
	OK(ckpt_restore_status_assert_consumed(st));
	ckpt_restore_status_free(st);
	cr_assert_eq(ckpt_variable_kind(ckpt_partitioned_part(p, 0)), CKPT_VAR_MIRRORED);
	check_parts(p);
	uint64_t stored, got = slice_bytes_read(cv, path, &stored);
	cr_assert_eq(got, (uint64_t)ROWS * COLS * 4, "read %llu bytes of the slices for %d", (unsigned long long)got,
		ROWS * COLS * 4);
	cr_assert_eq(stored, got);
	ckpt_checkpoint_free(ck);
	ckpt_partitioned_free(p);
	ckpt_vfs_free(&cv->base);
	ckpt_strategy_free(s);
	/* the same bytes into an unpartitioned variable tracked where the parts were */
	ckpt_variable *v;
	OK(ckpt_checkpoint_new(&ck, NULL));
	OK(ckpt_status_of(v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "table", "emb", CKPT_DT_FLOAT, &full_shape, NULL)));
	OK(ckpt_checkpoint_restore(&st, ck, path));
	OK(ckpt_restore_status_assert_consumed(st));
	ckpt_restore_status_free(st);
	const float *f = ckpt_variable_replica_data(v, 0);
	for (int k = 0; k < ROWS * COLS; k++)
		cr_assert_eq(f[k], (float)k);
	ckpt_checkpoint_free(ck);
	oracle(path, OBJ_KEY, "tf2", "3 2 1");
	free(path);
	ts_rmtree(dir);
	free(dir);
}

Test(partitioned, name_keyed_p3_restores_as_p4_reading_each_stored_byte_once_and_tf1_saver_restores_it)
{
	char *dir = ts_tmpdir();
	char *path = save_p(dir, 3, 0);
	/* 4 parts over 3 stored slices: every stored byte read once, in pieces (no slice read whole twice) */
	count_vfs *cv = count_vfs_new();
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.vfs = &cv->base;
	ckpt_checkpoint *ck;
	ckpt_partitioned *p;
	OK(ckpt_checkpoint_new(&ck, &o));
	OK(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &full_shape, 4, NULL));
	OK(ckpt_checkpoint_track_partitioned(ck, p));
	ckpt_restore_status *st;
	OK(ckpt_checkpoint_restore(&st, ck, path));
	OK(ckpt_restore_status_assert_consumed(st));
	ckpt_restore_status_free(st);
	check_parts(p);
	uint64_t stored, got = slice_bytes_read(cv, path, &stored);
	cr_assert_eq(got, stored, "4 parts read %llu of the %llu stored slice bytes", (unsigned long long)got,
		(unsigned long long)stored);
	ckpt_checkpoint_free(ck);
	ckpt_partitioned_free(p);
	ckpt_vfs_free(&cv->base);
	oracle(path, "emb", "tf1", "3 2 4 1");
	free(path);
	ts_rmtree(dir);
	free(dir);
}

Test(partitioned, tensorflow_written_p3_restores_into_p2_and_p4_parts, .timeout = 300)
{
	char *dir = ts_tmpdir();
	char cmd[4096];
	ts_run_result r;
	snprintf(cmd, sizeof(cmd), "TF_CPP_MIN_LOG_LEVEL=3 %s " CKPT_SOURCE_DIR "/tests/oracles/tf_partitioned.py %s",
		ts_oracle_python(), dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "%s\n%s", r.out, r.err);
	ts_run_free(&r);
	char *fp = ts_join(dir, "full.f32");
	size_t n;
	float *full = (float *)ts_read_file(fp, &n);
	cr_assert(full && n == 7 * 4 * sizeof(float));
	ckpt_shape sh = { 2, { 7, 4 } };
	static const char *const files[2] = { "tf1/model.ckpt", "tf2/ckpt-1" };
	for (int k = 0; k < 2; k++) {
		int P = k ? 4 : 2;
		ckpt_checkpoint *ck;
		ckpt_partitioned *p;
		OK(ckpt_checkpoint_new(&ck, NULL));
		OK(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &sh, P, NULL));
		/* TF1 Saver: by name; TF2 ShardedVariable: the object key */
		if (k)
			OK(ckpt_object_track_partitioned(ckpt_checkpoint_root(ck), "emb", p));
		else
			OK(ckpt_checkpoint_track_partitioned(ck, p));
		char *path = ts_join(dir, files[k]);
		ckpt_restore_status *st;
		OK(ckpt_checkpoint_restore(&st, ck, path));
		ckpt_restore_status_expect_partial(st); /* TF2's save_counter has no live counterpart here */
		ckpt_restore_status_free(st);
		for (int i = 0; i < P; i++) {
			int64_t first, rows;
			OK(ckpt_partitioned_part_rows(&first, &rows, p, i));
			cr_assert_eq(rows, 7 / P + (i < 7 % P), "part %d of %d: %lld rows", i, P, (long long)rows);
			cr_assert(memcmp(ckpt_variable_replica_data(ckpt_partitioned_part(p, i), 0), full + first * 4,
				(size_t)rows * 4 * sizeof(float)) == 0, "%s part %d of %d differs", files[k], i, P);
		}
		free(path);
		ckpt_checkpoint_free(ck);
		ckpt_partitioned_free(p);
	}
	free(full);
	free(fp);
	ts_rmtree(dir);
	free(dir);
}

Test(partitioned, a_flipped_byte_of_a_slice_read_in_pieces_is_a_checksum_error_and_changes_no_part)
{
	char *dir = ts_tmpdir();
	char *path = save_p(dir, 3, 0);
	/* slice 1 holds rows [4, 7): parts [0, 5) and [5, 10) of P = 2 each read a piece of it */
	ckpt_reader *rd;
	OK(ckpt_reader_open(&rd, path, NULL));
	int64_t off = -1;
	const char *shard = NULL;
	for (size_t e = 0; e < ckpt_reader_num_entries(rd); e++) {
		const ckpt_var_info *v = ckpt_reader_var(rd, e);
		if (v->slice_part && v->shape.dims[0] == 3 && off < 0) {
			int ex;
			off = v->offset + 2 * COLS * 4 + 5; /* row 6, inside the second part's piece */
			shard = ckpt_reader_shard_path(rd, v->shard, &ex);
		}
	}
	cr_assert(off >= 0);
	FILE *f = fopen(shard, "r+b");
	cr_assert_not_null(f);
	unsigned char b;
	cr_assert(fseek(f, off, SEEK_SET) == 0 && fread(&b, 1, 1, f) == 1);
	b ^= 0x40;
	cr_assert(fseek(f, off, SEEK_SET) == 0 && fwrite(&b, 1, 1, f) == 1);
	fclose(f);
	ckpt_reader_free(rd);
	float before[ROWS * COLS];
	for (int i = 0; i < ROWS * COLS; i++)
		before[i] = -1;
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.initial_value = before;
	ckpt_checkpoint *ck;
	ckpt_partitioned *p;
	OK(ckpt_checkpoint_new(&ck, NULL));
	OK(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &full_shape, 2, &vo));
	OK(ckpt_checkpoint_track_partitioned(ck, p));
	ckpt_restore_status *st = NULL;
	int rc = ckpt_checkpoint_restore(&st, ck, path);
	cr_assert_eq(rc, CKPT_ECHECKSUM, "restore of a flipped byte: %s (%s)", ckpt_status_name(rc),
		ckpt_error_last()->message);
	cr_assert(strstr(ckpt_error_last()->message, "crc32c mismatch") && strstr(ckpt_error_last()->message, "row ranges"),
		"%s", ckpt_error_last()->message);
	cr_assert_null(st);
	for (int i = 0; i < 2; i++) {
		const float *v = ckpt_variable_replica_data(ckpt_partitioned_part(p, i), 0);
		for (int k = 0; k < 5 * COLS; k++)
			cr_assert_eq(v[k], -1.0f, "part %d changed by a failed restore", i);
	}
	/* a part that reads the damaged slice whole is stopped by that slice's own crc too */
	ckpt_checkpoint_free(ck);
	ckpt_partitioned_free(p);
	OK(ckpt_checkpoint_new(&ck, NULL));
	OK(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &full_shape, 3, NULL));
	OK(ckpt_checkpoint_track_partitioned(ck, p));
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, path), CKPT_ECHECKSUM);
	ckpt_checkpoint_free(ck);
	ckpt_partitioned_free(p);
	free(path);
	ts_rmtree(dir);
	free(dir);
}

Test(partitioned, wrong_shape_missing_key_split_cap_and_async_save_are_reported)
{
	char *dir = ts_tmpdir();
	char *path = save_p(dir, 3, 0);
	ckpt_checkpoint *ck;
	ckpt_partitioned *p;
	ckpt_restore_status *st;
	ckpt_shape other = { 2, { ROWS, COLS + 1 } };
	OK(ckpt_checkpoint_new(&ck, NULL));
	OK(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &other, 2, NULL));
	OK(ckpt_checkpoint_track_partitioned(ck, p));
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, path), CKPT_EMISMATCH);
	cr_assert(strstr(ckpt_error_last()->message, "[10, 7]") && strstr(ckpt_error_last()->message, "[10, 6]") &&
		strstr(ckpt_error_last()->message, "'emb'"), "%s", ckpt_error_last()->message);
	OK(ckpt_checkpoint_untrack_partitioned(ck, p));
	ckpt_partitioned_free(p);
	OK(ckpt_partitioned_new(&p, "nope", CKPT_DT_FLOAT, &full_shape, 2, NULL));
	OK(ckpt_checkpoint_track_partitioned(ck, p));
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, path), CKPT_ENOTFOUND);
	cr_assert(strstr(ckpt_error_last()->message, "'nope' is not in the checkpoint"), "%s", ckpt_error_last()->message);
	ckpt_async_saver *as;
	OK(ckpt_async_saver_new(&as, NULL));
	char *p2 = ts_join(dir, "async");
	cr_assert_eq(ckpt_async_save(as, ck, p2), CKPT_EUNSUPPORTED);
	ckpt_async_saver_free(as);
	free(p2);
	ckpt_checkpoint_free(ck);
	ckpt_partitioned_free(p);
	/* fixed_size_partitioner's cap: at most one part per row; the first R % P parts one row more */
	OK(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &full_shape, 25, NULL));
	cr_assert_eq(ckpt_partitioned_num_parts(p), ROWS);
	ckpt_partitioned_free(p);
	OK(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &full_shape, 4, NULL));
	static const int64_t want[4][2] = { { 0, 3 }, { 3, 3 }, { 6, 2 }, { 8, 2 } };
	for (int i = 0; i < 4; i++) {
		int64_t a, n;
		OK(ckpt_partitioned_part_rows(&a, &n, p, i));
		cr_assert(a == want[i][0] && n == want[i][1], "part %d: rows [%lld, +%lld)", i, (long long)a, (long long)n);
		cr_assert_eq(ckpt_partitioned_owner(p, i), 0);
	}
	cr_assert_null(ckpt_partitioned_part(p, 4));
	ckpt_partitioned_free(p);
	ckpt_shape scalar = { 0 };
	cr_assert_eq(ckpt_partitioned_new(&p, "s", CKPT_DT_FLOAT, &scalar, 2, NULL), CKPT_EINVAL);
	free(path);
	ts_rmtree(dir);
	free(dir);
}

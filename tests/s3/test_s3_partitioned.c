/*
 * Partitioned (sliced) variables on s3:// (ckpt/partitioned.h): saved in
 * TensorFlow's layout to S3 (boto3: the same bytes as the same save on a
 * local disk), restored from S3 onto the same and onto other part counts,
 * mirrored parts included, every part's rows exact.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "s3_common.h"

#define ROWS 1000
#define COLS 96 /* 384 KB: a data object read in ranges, not whole */

#define OK(expr) do { int ok_rc_ = (expr); cr_assert_eq(ok_rc_, CKPT_OK, "%s = %s: %s", #expr, \
	ckpt_status_name(ok_rc_), ckpt_error_last()->message); } while (0)

static const ckpt_shape full_shape = { 2, { ROWS, COLS } };

/* emb [ROWS x COLS] = element index, in P parts, tracked under the root as "table"; saved to dir/ckpt. */
static char *save_p(const char *dir, int P)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_checkpoint *ck;
	OK(ckpt_checkpoint_new(&ck, &o));
	float *init = malloc(sizeof(float) * ROWS * COLS);
	for (int i = 0; i < ROWS * COLS; i++)
		init[i] = (float)i;
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.initial_value = init;
	ckpt_partitioned *p;
	OK(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &full_shape, P, &vo));
	OK(ckpt_object_track_partitioned(ckpt_checkpoint_root(ck), "table", p));
	char *prefix = ts_join(dir, "ckpt");
	const char *path;
	OK(ckpt_checkpoint_save(&path, ck, prefix));
	char *out = strdup(path);
	free(prefix);
	free(init);
	ckpt_checkpoint_free(ck);
	ckpt_partitioned_free(p);
	return out;
}

/* Restore `path` into P parts (mirrored over `replicas` copies when > 1): every copy holds its rows. */
static void restore_p(const char *path, int P, int replicas)
{
	ckpt_strategy *s = NULL;
	if (replicas > 1) {
		OK(ckpt_strategy_mirrored_new(&s, replicas));
		OK(ckpt_scope_enter(s));
	}
	ckpt_checkpoint *ck;
	ckpt_partitioned *p;
	OK(ckpt_checkpoint_new(&ck, NULL));
	OK(ckpt_partitioned_new(&p, "emb", CKPT_DT_FLOAT, &full_shape, P, NULL));
	OK(ckpt_object_track_partitioned(ckpt_checkpoint_root(ck), "table", p));
	ckpt_restore_status *st;
	OK(ckpt_checkpoint_restore(&st, ck, path));
	if (s)
		OK(ckpt_scope_exit(s));
	OK(ckpt_restore_status_assert_consumed(st));
	ckpt_restore_status_free(st);
	cr_assert_eq(ckpt_partitioned_num_parts(p), P);
	for (int i = 0; i < P; i++) {
		int64_t first, rows;
		OK(ckpt_partitioned_part_rows(p, i, &first, &rows));
		ckpt_variable *v = ckpt_partitioned_part(p, i);
		cr_assert_not_null(v, "part %d is not local in one process", i);
		cr_assert_eq(ckpt_variable_num_replicas(v), replicas > 1 ? replicas : 1);
		for (int c = 0; c < ckpt_variable_num_replicas(v); c++) {
			const float *f = ckpt_variable_replica_data(v, c);
			for (int64_t k = 0; k < rows * COLS; k++)
				cr_assert_eq(f[k], (float)(first * COLS + k), "P=%d part %d copy %d element %lld: %g", P, i, c,
					(long long)k, f[k]);
		}
	}
	ckpt_checkpoint_free(ck);
	ckpt_partitioned_free(p);
	ckpt_strategy_free(s);
}

Test(s3_partitioned, saved_to_s3_and_restored_onto_other_partitionings, .timeout = 300)
{
	char *dir = s3t_prefix("part");
	char *path = save_p(dir, 3);
	cr_assert(strncmp(path, "s3://", 5) == 0, "%s", path);
	/* boto3: the objects, byte for byte those of the same save on a local disk */
	char *keys = s3t_oracle("keys", dir, NULL);
	cr_expect_str_eq(keys, "ckpt-1.data-00000-of-00001\nckpt-1.index\n");
	free(keys);
	char *tmp = ts_tmpdir();
	char *lpath = save_p(tmp, 3);
	const char *files[] = { "ckpt-1.index", "ckpt-1.data-00000-of-00001" };
	for (size_t i = 0; i < 2; i++) {
		char *obj = ts_join(dir, files[i]), *local = ts_join(tmp, files[i]);
		free(s3t_oracle("same", obj, local, NULL));
		free(obj);
		free(local);
	}
	/* the same partitioning, fewer and more parts, and mirrored parts */
	restore_p(path, 3, 1);
	restore_p(path, 2, 1);
	restore_p(path, 4, 1);
	restore_p(path, 5, 2);
	/* the reader sees one full entry stored in 3 slices */
	ckpt_reader *rd;
	OK(ckpt_reader_open(&rd, path, NULL));
	size_t fi;
	OK(ckpt_reader_find(rd, "table/.ATTRIBUTES/VARIABLE_VALUE", &fi));
	cr_expect_eq(ckpt_reader_var(rd, fi)->nslices, 3u);
	ckpt_reader_free(rd);
	ts_rmtree(tmp);
	free(tmp);
	free(lpath);
	free(path);
	free(dir);
}

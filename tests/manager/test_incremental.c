/*
 * Incremental saves (issue 33, ckpt_manager_options.incremental): each
 * checkpoint is a complete TensorBundle that TensorFlow restores with
 * assert_consumed, stays valid when every older one is deleted, and its
 * unchanged bytes came from the previous checkpoint (hard links, kernel
 * copies) rather than through the process; a previous checkpoint changed
 * behind the library's back is never reused.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "oracle_common.h"
#include "test_support.h"

#define BASE_ROWS 256   /* frozen: 1 MiB */
#define HEAD_N 256      /* trainable: 1 KiB, every step */
#define EMB_ROWS 2048   /* 1 KiB rows: 2 MiB, 5 % of rows per step */
#define EMB_W 256

typedef struct state {
	ckpt_checkpoint *ck;
	ckpt_manager *m;
	ckpt_variable *base, *head, *emb;
	float *wrapped;        /* emb's memory when it wraps a trainer buffer */
	char *dir, *expect;
	uint64_t rng;
} state;

static uint64_t next(state *s)
{
	s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
	return s->rng >> 33;
}

static void build(state *s, int wrap_emb, int max_to_keep)
{
	memset(s, 0, sizeof(*s));
	s->dir = ts_tmpdir();
	s->expect = ts_tmpdir();
	s->rng = 33;
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	cr_assert_eq(ckpt_checkpoint_new(&s->ck, &o), CKPT_OK);
	ckpt_object *root = ckpt_checkpoint_root(s->ck);
	int64_t bd[2] = { BASE_ROWS, 1024 }, hd[1] = { HEAD_N }, ed[2] = { EMB_ROWS, EMB_W };
	ckpt_shape bs, hs, es;
	cr_assert_eq(ckpt_shape_make(&bs, 2, bd), CKPT_OK);
	cr_assert_eq(ckpt_shape_make(&hs, 1, hd), CKPT_OK);
	cr_assert_eq(ckpt_shape_make(&es, 2, ed), CKPT_OK);
	float *init = malloc(sizeof(float) * BASE_ROWS * 1024);
	for (size_t i = 0; i < (size_t)BASE_ROWS * 1024; i++)
		init[i] = (float)i * 0.5f;
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.initial_value = init;
	cr_assert_eq(ckpt_status_of(s->base = ckpt_object_add_variable(root, "base", "base", CKPT_DT_FLOAT, &bs, &vo)),
		CKPT_OK);
	free(init);
	cr_assert_eq(ckpt_status_of(s->head = ckpt_object_add_variable(root, "head", "head", CKPT_DT_FLOAT, &hs, NULL)),
		CKPT_OK);
	ckpt_variable_options eo = CKPT_VARIABLE_OPTIONS_INIT;
	void *bufs[1];
	if (wrap_emb) {
		s->wrapped = calloc((size_t)EMB_ROWS * EMB_W, sizeof(float));
		bufs[0] = s->wrapped;
		eo.replica_buffers = bufs;
	}
	cr_assert_eq(ckpt_status_of(s->emb = ckpt_object_add_variable(root, "emb", "emb", CKPT_DT_FLOAT, &es, &eo)),
		CKPT_OK);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.incremental = 1;
	mo.no_fsync = 1;
	cr_assert_eq(ckpt_manager_new_ext(&s->m, s->ck, s->dir, max_to_keep, &mo), CKPT_OK);
}

static void done(state *s)
{
	ckpt_manager_free(s->m);
	ckpt_checkpoint_free(s->ck);
	free(s->wrapped);
	ts_rmtree(s->dir);
	ts_rmtree(s->expect);
	free(s->dir);
	free(s->expect);
}

/* A training step: the head changes, 5 % of the embedding's rows (contiguous, or spread at random). */
static void step(state *s, int k, int spread)
{
	float h[HEAD_N];
	for (int i = 0; i < HEAD_N; i++)
		h[i] = (float)(k * 1000 + i);
	cr_assert_eq(ckpt_variable_assign(s->head, h, sizeof(h)), CKPT_OK);
	float *e = s->wrapped ? s->wrapped : ckpt_variable_local(s->emb);
	cr_assert_not_null(e);
	int nrows = EMB_ROWS / 20, first = (int)(next(s) % (EMB_ROWS - nrows));
	for (int r = 0; r < nrows; r++) {
		int row = spread ? (int)(next(s) % EMB_ROWS) : first + r;
		for (int j = 0; j < EMB_W; j++)
			e[(size_t)row * EMB_W + j] = (float)(k + row * 0.001 + j);
	}
}

static void write_value(const char *dir, const char *name, ckpt_variable *v)
{
	char path[4096];
	size_t n = (size_t)ckpt_variable_nbytes(v);
	void *buf = malloc(n);
	cr_assert_eq(ckpt_variable_read(v, buf, n), CKPT_OK);
	snprintf(path, sizeof(path), "%s/%s.f32", dir, name);
	cr_assert_eq(ts_write_file(path, buf, n), 0);
	free(buf);
	const ckpt_shape *sh = ckpt_variable_shape(v);
	char dims[64] = "";
	for (int i = 0; i < sh->rank; i++)
		snprintf(dims + strlen(dims), sizeof(dims) - strlen(dims), "%lld ", (long long)sh->dims[i]);
	snprintf(path, sizeof(path), "%s/%s.shape", dir, name);
	cr_assert_eq(ts_write_file(path, dims, strlen(dims)), 0);
}

/* Save, and record what the checkpoint must hold in expect/<ckpt-N>/. */
static const char *save(state *s)
{
	const char *p = ckpt_manager_save(s->m);
	cr_assert_not_null(p, "save: %s", ckpt_error_last()->message);
	const char *b = strrchr(p, '/');
	char *d = ts_join(s->expect, b + 1);
	cr_assert_eq(mkdir(d, 0755), 0);
	write_value(d, "base", s->base);
	write_value(d, "head", s->head);
	write_value(d, "emb", s->emb);
	free(d);
	return p;
}

/* Every value of checkpoint `path` read back by libckpt (every entry's crc checked) equals the record. */
static void check_ours(state *s, const char *path)
{
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, path, NULL), CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
	cr_assert_eq(ckpt_reader_verify_all(r), CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
	const char *names[] = { "base", "head", "emb" };
	for (int k = 0; k < 3; k++) {
		char key[128], f[4096];
		snprintf(key, sizeof(key), "%s/.ATTRIBUTES/VARIABLE_VALUE", names[k]);
		size_t i;
		cr_assert_eq(ckpt_reader_find(&i, r, key), CKPT_OK, "%s: %s", path, key);
		snprintf(f, sizeof(f), "%s/%s/%s.f32", s->expect, strrchr(path, '/') + 1, names[k]);
		size_t n;
		char *want = ts_read_file(f, &n);
		cr_assert_not_null(want);
		void *got = malloc(n);
		cr_assert_eq(ckpt_reader_read_into(r, i, got, n), CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
		cr_assert(memcmp(got, want, n) == 0, "%s: %s differs from what was saved", path, names[k]);
		free(got);
		free(want);
	}
	ckpt_reader_free(r);
}

static void tf_restores_all(state *s)
{
	ts_run_result r = oracle_run("tf_incremental.py", s->dir, s->expect, NULL);
	oracle_expect_ok(&r, "tf_incremental.py");
	ts_run_free(&r);
}

/* Inode of `path` (0 when absent). */
static ino_t inode(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_ino : 0;
}

static char *data_file(const char *prefix, int k, int n)
{
	char *p = malloc(strlen(prefix) + 64);
	sprintf(p, "%s.data-%05d-of-%05d", prefix, k, n);
	return p;
}

Test(incremental, frozen_shard_linked_changes_only_written_tf_restores)
{
	state s;
	build(&s, 0, 3);
	uint64_t wr, ru;
	char *p1 = strdup(save(&s));
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck), CKPT_OK);
	cr_assert_eq(ru, 0, "the first save has nothing to reuse");
	step(&s, 1, 0);
	char *p2 = strdup(save(&s));
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck), CKPT_OK);
	/* the frozen base moves to its own shard by a kernel copy; the embedding's untouched blocks are copied */
	cr_assert_geq(ru, (uint64_t)BASE_ROWS * 4096 + (uint64_t)EMB_ROWS * EMB_W * 4 * 9 / 10, "reused %llu",
		(unsigned long long)ru);
	step(&s, 2, 0);
	char *p3 = strdup(save(&s));
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck), CKPT_OK);
	/* written: the head, 5 % of the embedding (+ a block at each end), the graph and the counter */
	uint64_t changed = HEAD_N * 4 + (EMB_ROWS / 20) * EMB_W * 4;
	cr_assert_leq(wr, changed + 2 * 4096 + 4096, "wrote %llu for %llu changed bytes", (unsigned long long)wr,
		(unsigned long long)changed);
	cr_assert_geq(ru, (uint64_t)BASE_ROWS * 4096, "reused %llu", (unsigned long long)ru);
	/* the base's shard of ckpt-3 is ckpt-2's file itself */
	char *f2 = data_file(p2, 1, 2), *f3 = data_file(p3, 1, 2);
	cr_assert_neq(inode(f2), 0, "%s", f2);
	cr_assert_eq(inode(f2), inode(f3), "%s is not a link of %s", f3, f2);
	/* `ckpt inspect --json`: the linked shard is shared, the changed one is not */
	ts_run_result ir = ts_cli("inspect", p3, "--json", NULL);
	ts_assert_exit(&ir, 0, "ckpt inspect --json %s", p3);
	json_error_t jerr;
	json_t *doc = json_loads(ir.out, 0, &jerr);
	cr_assert_not_null(doc, "%s", jerr.text);
	json_t *files = json_object_get(doc, "files");
	cr_assert_eq(json_array_size(files), 2);
	cr_assert(json_is_false(json_object_get(json_array_get(files, 0), "shared")));
	cr_assert(json_is_true(json_object_get(json_array_get(files, 1), "shared")));
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(files, 1), "bytes")), BASE_ROWS * 4096);
	json_decref(doc);
	ts_run_free(&ir);
	const char *all[] = { p1, p2, p3 };
	for (int i = 0; i < 3; i++)
		check_ours(&s, all[i]);
	tf_restores_all(&s);
	free(f2);
	free(f3);
	free(p1);
	free(p2);
	free(p3);
	done(&s);
}

/* Remove every file of checkpoint `prefix` (index and data shards). */
static void remove_checkpoint(const char *prefix)
{
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "rm -f '%s'.index '%s'.data-*", prefix, prefix);
	ts_run_result r;
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "%s", cmd);
	ts_run_free(&r);
}

Test(incremental, chain_of_30_max_to_keep_3_each_restores_and_survives_deletion)
{
	state s;
	build(&s, 0, 3);
	for (int k = 1; k <= 30; k++) {
		step(&s, k, k % 2); /* contiguous and spread rows by turns */
		save(&s);
	}
	cr_assert_eq(ckpt_manager_num_checkpoints(s.m), 3);
	for (size_t i = 0; i < 3; i++)
		check_ours(&s, ckpt_manager_checkpoint(s.m, i));
	tf_restores_all(&s);
	/* retention deletes the older ones: the newest does not need them */
	char *latest = strdup(ckpt_manager_latest(s.m));
	for (size_t i = 0; i < 2; i++)
		remove_checkpoint(ckpt_manager_checkpoint(s.m, i));
	check_ours(&s, latest);
	/* and a fresh checkpoint restores it bit for bit */
	ckpt_checkpoint *ck2;
	cr_assert_eq(ckpt_checkpoint_new(&ck2, NULL), CKPT_OK);
	int64_t ed[2] = { EMB_ROWS, EMB_W };
	ckpt_shape es;
	cr_assert_eq(ckpt_shape_make(&es, 2, ed), CKPT_OK);
	ckpt_variable *emb2;
	cr_assert_eq(ckpt_status_of(emb2 = ckpt_object_add_variable(ckpt_checkpoint_root(ck2), "emb", "emb",
		CKPT_DT_FLOAT, &es, NULL)), CKPT_OK);
	ckpt_restore_status *st = NULL;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck2, latest), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_expect_partial(st);
	ckpt_restore_status_free(st);
	size_t n = (size_t)ckpt_variable_nbytes(s.emb);
	void *a = malloc(n), *b = malloc(n);
	cr_assert_eq(ckpt_variable_read(s.emb, a, n), CKPT_OK);
	cr_assert_eq(ckpt_variable_read(emb2, b, n), CKPT_OK);
	cr_assert(memcmp(a, b, n) == 0, "the restored embedding differs");
	free(a);
	free(b);
	ckpt_checkpoint_free(ck2);
	free(latest);
	done(&s);
}

/* A previous checkpoint changed behind the library's back is never reused: the new one holds the values in memory. */
Test(incremental, tampered_previous_checkpoint_is_not_reused)
{
	state s;
	build(&s, 0, 0);
	save(&s);
	step(&s, 1, 0);
	char *p2 = strdup(save(&s));
	/* after the file system's timestamp tick of the commit (the check compares modification times) */
	usleep(50 * 1000);
	char *frozen = data_file(p2, 1, 2), *hot = data_file(p2, 0, 2);
	cr_assert_eq(ts_flip_byte(frozen, 100, 0x40), 0, "%s", frozen);       /* in the base */
	cr_assert_eq(ts_flip_byte(hot, 4096 * 3 + 7, 0x01), 0, "%s", hot);    /* in the embedding */
	step(&s, 2, 0);
	char *p3 = strdup(save(&s));
	uint64_t wr, ru;
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck), CKPT_OK);
	cr_assert_eq(ru, 0, "reused %llu bytes of modified files", (unsigned long long)ru);
	check_ours(&s, p3);
	/* replaced by another file of the same size: not the committed one either */
	step(&s, 3, 0);
	char *p4 = strdup(save(&s));
	char *f4 = data_file(p4, 1, 2), *copy = ts_join(s.dir, "replacement");
	cr_assert_eq(ts_copy(f4, copy), 0);
	cr_assert_eq(rename(copy, f4), 0);
	cr_assert_eq(ts_flip_byte(f4, 8, 0x10), 0);
	step(&s, 4, 0);
	char *p5 = strdup(save(&s));
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck), CKPT_OK);
	/* the embedding's unchanged blocks (under 2 MiB) come from the untouched shard 0; the base (1 MiB) is not reused */
	cr_assert_lt(ru, (uint64_t)EMB_ROWS * EMB_W * 4, "the replaced base shard was reused: %llu", (unsigned long long)ru);
	cr_assert_gt(ru, 0);
	check_ours(&s, p5);
	free(f4);
	free(copy);
	free(frozen);
	free(hot);
	free(p2);
	free(p3);
	free(p4);
	free(p5);
	done(&s);
}

/* Trainer memory the library cannot watch: compared block by block unless the trainer promises to mark writes. */
Test(incremental, wrapped_buffer_in_doubt_is_compared_marked_writes_trusted)
{
	state s;
	build(&s, 1, 0);
	save(&s);
	step(&s, 1, 0); /* writes the wrapped embedding directly, unmarked */
	char *p2 = strdup(save(&s));
	check_ours(&s, p2); /* the change is in the checkpoint */
	uint64_t wr, ru;
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck), CKPT_OK);
	cr_assert_lt(wr, (uint64_t)EMB_ROWS * EMB_W * 4 / 4, "the embedding was rewritten whole: %llu",
		(unsigned long long)wr);
	/* promised and marked: written; promised and not marked: reused as it was */
	cr_assert_eq(ckpt_variable_set_marks_writes(s.emb, 1), CKPT_OK);
	step(&s, 2, 0);
	char *p3 = strdup(save(&s));
	check_ours(&s, p3); /* set_marks_writes counts as a write */
	step(&s, 3, 0);
	cr_assert_eq(ckpt_variable_mark_dirty(s.emb), CKPT_OK);
	char *p4 = strdup(save(&s));
	check_ours(&s, p4);
	cr_assert_eq(ckpt_variable_mark_dirty(NULL), CKPT_EINVAL);
	cr_assert_eq(ckpt_variable_set_marks_writes(NULL, 1), CKPT_EINVAL);
	free(p2);
	free(p3);
	free(p4);
	done(&s);
}

/* A restore is a change: the next save writes the restored values. */
Test(incremental, restore_marks_values_changed)
{
	state s;
	build(&s, 0, 0);
	char *p1 = strdup(save(&s));
	step(&s, 1, 0);
	save(&s);
	ckpt_restore_status *st = NULL;
	cr_assert_eq(ckpt_checkpoint_restore(&st, s.ck, p1), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	char *p3 = strdup(save(&s));
	check_ours(&s, p3);
	free(p1);
	free(p3);
	done(&s);
}

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
#include "incr_common.h"
#include "oracle_common.h"
#include "test_support.h"

#define BASE_ROWS 256   /* frozen: 1 MiB */
#define HEAD_N 256      /* trainable: 1 KiB, every step */
#define EMB_ROWS 2048   /* 1 KiB rows: 2 MiB, 5 % of rows per step */
#define EMB_W 256

typedef ic_state state;

static void build(state *s, int wrap_emb, int max_to_keep)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	ic_build(s, &o, BASE_ROWS, 1024, 0.5f, HEAD_N, EMB_ROWS, EMB_W, wrap_emb);
	s->dir = ts_tmpdir();
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.incremental = 1;
	mo.no_fsync = 1;
	cr_assert_eq(ckpt_manager_new_ext(&s->m, s->ck, s->dir, max_to_keep, &mo), CKPT_OK);
}

/* Save, and record what the checkpoint must hold in expect/<ckpt-N>/. */
static const char *save(state *s)
{
	const char *p = ckpt_manager_save(s->m);
	cr_assert_not_null(p, "save: %s", ckpt_error_last()->message);
	ic_record(s, p);
	return p;
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

Test(incremental, frozen_shard_linked_changes_only_written_tf_restores)
{
	state s;
	build(&s, 0, 3);
	uint64_t wr, ru;
	char *p1 = strdup(save(&s));
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck), CKPT_OK);
	cr_assert_eq(ru, 0, "the first save has nothing to reuse");
	ic_step(&s, 1, 0);
	char *p2 = strdup(save(&s));
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck), CKPT_OK);
	/* the frozen base moves to its own shard by a kernel copy; the embedding's untouched blocks are copied */
	cr_assert_geq(ru, (uint64_t)BASE_ROWS * 4096 + (uint64_t)EMB_ROWS * EMB_W * 4 * 9 / 10, "reused %llu",
		(unsigned long long)ru);
	ic_step(&s, 2, 0);
	char *p3 = strdup(save(&s));
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck), CKPT_OK);
	/* written: the head, 5 % of the embedding (+ a block at each end), the graph and the counter */
	uint64_t changed = HEAD_N * 4 + (EMB_ROWS / 20) * EMB_W * 4;
	cr_assert_leq(wr, changed + 2 * 4096 + 4096, "wrote %llu for %llu changed bytes", (unsigned long long)wr,
		(unsigned long long)changed);
	cr_assert_geq(ru, (uint64_t)BASE_ROWS * 4096, "reused %llu", (unsigned long long)ru);
	/* the base's shard of ckpt-3 is ckpt-2's file itself */
	char *f2 = ic_data_file(p2, 1, 2), *f3 = ic_data_file(p3, 1, 2);
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
		ic_check_ours(&s, all[i]);
	tf_restores_all(&s);
	free(f2);
	free(f3);
	free(p1);
	free(p2);
	free(p3);
	ic_done(&s, 1);
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
		ic_step(&s, k, k % 2); /* contiguous and spread rows by turns */
		save(&s);
	}
	cr_assert_eq(ckpt_manager_num_checkpoints(s.m), 3);
	for (size_t i = 0; i < 3; i++)
		ic_check_ours(&s, ckpt_manager_checkpoint(s.m, i));
	tf_restores_all(&s);
	/* retention deletes the older ones: the newest does not need them */
	char *latest = strdup(ckpt_manager_latest(s.m));
	for (size_t i = 0; i < 2; i++)
		remove_checkpoint(ckpt_manager_checkpoint(s.m, i));
	ic_check_ours(&s, latest);
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
	ic_done(&s, 1);
}

/* A previous checkpoint changed behind the library's back is never reused: the new one holds the values in memory. */
Test(incremental, tampered_previous_checkpoint_is_not_reused)
{
	state s;
	build(&s, 0, 0);
	save(&s);
	ic_step(&s, 1, 0);
	char *p2 = strdup(save(&s));
	/* after the file system's timestamp tick of the commit (the check compares modification times) */
	usleep(50 * 1000);
	char *frozen = ic_data_file(p2, 1, 2), *hot = ic_data_file(p2, 0, 2);
	cr_assert_eq(ts_flip_byte(frozen, 100, 0x40), 0, "%s", frozen);       /* in the base */
	cr_assert_eq(ts_flip_byte(hot, 4096 * 3 + 7, 0x01), 0, "%s", hot);    /* in the embedding */
	ic_step(&s, 2, 0);
	char *p3 = strdup(save(&s));
	uint64_t wr, ru;
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck), CKPT_OK);
	cr_assert_eq(ru, 0, "reused %llu bytes of modified files", (unsigned long long)ru);
	ic_check_ours(&s, p3);
	/* replaced by another file of the same size: not the committed one either */
	ic_step(&s, 3, 0);
	char *p4 = strdup(save(&s));
	char *f4 = ic_data_file(p4, 1, 2), *copy = ts_join(s.dir, "replacement");
	cr_assert_eq(ts_copy(f4, copy), 0);
	cr_assert_eq(rename(copy, f4), 0);
	cr_assert_eq(ts_flip_byte(f4, 8, 0x10), 0);
	ic_step(&s, 4, 0);
	char *p5 = strdup(save(&s));
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck), CKPT_OK);
	/* the embedding's unchanged blocks (under 2 MiB) come from the untouched shard 0; the base (1 MiB) is not reused */
	cr_assert_lt(ru, (uint64_t)EMB_ROWS * EMB_W * 4, "the replaced base shard was reused: %llu", (unsigned long long)ru);
	cr_assert_gt(ru, 0);
	ic_check_ours(&s, p5);
	free(f4);
	free(copy);
	free(frozen);
	free(hot);
	free(p2);
	free(p3);
	free(p4);
	free(p5);
	ic_done(&s, 1);
}

/* Trainer memory the library cannot watch: compared block by block unless the trainer promises to mark writes. */
Test(incremental, wrapped_buffer_in_doubt_is_compared_marked_writes_trusted)
{
	state s;
	build(&s, 1, 0);
	save(&s);
	ic_step(&s, 1, 0); /* writes the wrapped embedding directly, unmarked */
	char *p2 = strdup(save(&s));
	ic_check_ours(&s, p2); /* the change is in the checkpoint */
	uint64_t wr, ru;
	cr_assert_eq(ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck), CKPT_OK);
	cr_assert_lt(wr, (uint64_t)EMB_ROWS * EMB_W * 4 / 4, "the embedding was rewritten whole: %llu",
		(unsigned long long)wr);
	/* promised and marked: written; promised and not marked: reused as it was */
	cr_assert_eq(ckpt_variable_set_marks_writes(s.emb, 1), CKPT_OK);
	ic_step(&s, 2, 0);
	char *p3 = strdup(save(&s));
	ic_check_ours(&s, p3); /* set_marks_writes counts as a write */
	ic_step(&s, 3, 0);
	cr_assert_eq(ckpt_variable_mark_dirty(s.emb), CKPT_OK);
	char *p4 = strdup(save(&s));
	ic_check_ours(&s, p4);
	cr_assert_eq(ckpt_variable_mark_dirty(NULL), CKPT_EINVAL);
	cr_assert_eq(ckpt_variable_set_marks_writes(NULL, 1), CKPT_EINVAL);
	free(p2);
	free(p3);
	free(p4);
	ic_done(&s, 1);
}

/* A restore is a change: the next save writes the restored values. */
Test(incremental, restore_marks_values_changed)
{
	state s;
	build(&s, 0, 0);
	char *p1 = strdup(save(&s));
	ic_step(&s, 1, 0);
	save(&s);
	ckpt_restore_status *st = NULL;
	cr_assert_eq(ckpt_checkpoint_restore(&st, s.ck, p1), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	char *p3 = strdup(save(&s));
	ic_check_ours(&s, p3);
	free(p1);
	free(p3);
	ic_done(&s, 1);
}

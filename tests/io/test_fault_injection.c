/*
 * Fault injection (SQLite test_vfs.c, curl torture): count the calls a full
 * operation makes, then fail the i-th call for EVERY i -- once through the
 * fault-injecting file system (ckpt_vfs_faulty_new over a memory file
 * system), once through the allocator hook (ckpt_set_allocator) -- over
 *   - a TensorBundle save (ckpt_writer_open/add/commit/free, 2 shards),
 *   - a full restore (ckpt_reader_open + read of every entry),
 *   - a manager save (ckpt_manager_save).
 * Each failure must return a negative status with a message, crash nothing,
 * leak nothing (the counting allocator sees every library block; run under
 * ASan for the rest), and after a failed save the target must be the
 * previous checkpoint, intact (re-read equal), or absent -- never a mix.
 */
#include "rel_common.h"
#include "ckpt/sys/vfs_faulty.h"
#include "ckpt/sys/vfs_memory.h"

#define PREFIX "c/ckpt"

/* The two states: A is on "disk" before each try, B is being saved. */
static void make_state(ckpt_tensor **t, float base)
{
	ckpt_shape s;
	cr_assert_eq(ckpt_shape_make(&s, 2, (int64_t[]){ 3, 5 }), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&t[0], CKPT_DT_FLOAT, &s), CKPT_OK);
	for (int i = 0; i < 15; i++)
		((float *)t[0]->data)[i] = base + (float)i;
	ckpt_shape scalar = { 0 };
	cr_assert_eq(ckpt_tensor_new(&t[1], CKPT_DT_INT64, &scalar), CKPT_OK);
	*(int64_t *)t[1]->data = (int64_t)base;
	ckpt_bytes el[2] = { { 5, base > 1.5f ? "state" : "STATE" }, { 1, "b" } };
	cr_assert_eq(ckpt_shape_make(&s, 1, (int64_t[]){ 2 }), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new_strings(&t[2], &s, el), CKPT_OK);
}

static const char *const names[3] = { "model/kernel", "optimizer/iter", "vocab" };

static void free_state(ckpt_tensor **t)
{
	for (int i = 0; i < 3; i++)
		ckpt_tensor_free(t[i]);
}

/* The error recorded by the failing call itself, before any cleanup ran. */
static int failed_code;
static char failed_message[512];
static int cleared_by_free;

/* Before every try: no earlier try's error or notes may stand in for this one's. */
static void reset_failure(void)
{
	ckpt_error_clear();
	failed_code = 0;
	failed_message[0] = '\0';
	cleared_by_free = 0;
}

/* The first failing call of a try; its status must be the error it recorded. */
static int note_failure(int rc)
{
	if (rc < 0 && failed_code == 0) {
		const ckpt_error *e = ckpt_error_last();
		failed_code = e->code == rc ? e->code : 0;
		snprintf(failed_message, sizeof(failed_message), "%s", e->message ? e->message : "");
	}
	return rc;
}

/* After the cleanup (free) calls: the error must still be there. */
static void note_after_free(int rc)
{
	if (rc < 0 && ckpt_error_last()->code != failed_code)
		cleared_by_free++;
}

static int save(ckpt_vfs *vfs, ckpt_tensor *const *t)
{
	ckpt_write_options wo = CKPT_WRITE_OPTIONS_INIT;
	wo.vfs = vfs;
	wo.num_shards = 2;
	ckpt_writer *w = NULL;
	int rc = ckpt_writer_open(&w, PREFIX, NULL, &wo);
	note_failure(rc);
	for (int i = 0; rc == CKPT_OK && i < 3; i++)
		rc = note_failure(ckpt_writer_add(w, names[i], t[i], i % 2));
	if (rc == CKPT_OK)
		rc = note_failure(ckpt_writer_commit(w));
	ckpt_writer_free(w); /* removes temporaries; must keep the error being reported */
	note_after_free(rc);
	return rc;
}

/* 1 = equals `t`, 0 = absent, -1 = present but different or unreadable. */
static int compare(ckpt_vfs *vfs, ckpt_tensor *const *t)
{
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	o.vfs = vfs;
	ckpt_reader *r = NULL;
	int rc = ckpt_reader_open(&r, PREFIX, &o);
	if (rc == CKPT_ENOTFOUND)
		return 0;
	if (rc < 0)
		return -1;
	int same = ckpt_reader_num_entries(r) == 3;
	for (int i = 0; same && i < 3; i++) {
		size_t k;
		ckpt_tensor *got = NULL;
		same = ckpt_reader_find(&k, r, names[i]) == CKPT_OK && ckpt_reader_read(&got, r, k) == CKPT_OK &&
			ckpt_tensor_equal(got, t[i]);
		ckpt_tensor_free(got);
	}
	ckpt_reader_free(r);
	return same ? 1 : -1;
}

/* The memory file system with state A saved at PREFIX. */
static ckpt_vfs *with_previous(ckpt_tensor *const *a)
{
	ckpt_vfs *mem;
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	cr_assert_eq(save(mem, a), CKPT_OK, "%s", ckpt_error_last()->message);
	return mem;
}

/* A try that returned rc < 0: the failing call recorded its own error, and cleanup kept it. */
static void check_failure(int rc, const char *what, long i)
{
	cr_assert_lt(failed_code, 0, "%s: call %ld: returned %s without recording that error", what, i,
		ckpt_status_name(rc));
	cr_assert(failed_message[0], "%s: call %ld: empty message", what, i);
	cr_assert_eq(cleared_by_free, 0, "%s: call %ld: freeing the writer/manager replaced the error (%s) with %s",
		what, i, failed_message, ckpt_status_name(ckpt_error_last()->code));
}

/* ---- saves ---- */

static void save_sweep(int alloc)
{
	rel_alloc_install(0, 0);
	ckpt_tensor *a[3], *b[3];
	make_state(a, 1.0f);
	make_state(b, 2.0f);
	/* count */
	ckpt_vfs *mem = with_previous(a);
	ckpt_vfs *f;
	cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, 0), CKPT_OK);
	rel_alloc_arm(0);
	cr_assert_eq(save(f, b), CKPT_OK);
	long total = alloc ? rel_calls : ckpt_vfs_faulty_calls(f);
	ckpt_vfs_free(f);
	cr_assert_eq(compare(mem, b), 1);
	ckpt_vfs_free(mem);
	cr_assert_gt(total, 5);
	long kept_old = 0, absent = 0, became_new = 0;
	for (long i = 1; i <= total; i++) {
		long live0 = rel_live_blocks;
		mem = with_previous(a);
		long live1 = rel_live_blocks;
		cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, alloc ? 0 : i), CKPT_OK);
		reset_failure();
		rel_alloc_arm(alloc ? i : 0);
		int rc = save(f, b);
		rel_alloc_disarm();
		int fired = alloc ? rel_calls >= i : ckpt_vfs_faulty_fired(f);
		cr_assert(fired, "call %ld of %ld never happened: the save is not deterministic", i, total);
		if (rc >= 0) {
			/* a failure the save could absorb (cleanup): then B must be complete */
			cr_assert_eq(compare(mem, b), 1, "call %ld: success reported but the target is not the new state", i);
			became_new++;
		} else {
			check_failure(rc, alloc ? "save (allocation)" : "save (I/O)", i);
			int c = compare(mem, a);
			cr_assert_neq(c, -1, "call %ld: after a failed save the target is neither the previous checkpoint "
				"intact nor absent (%s)", i, ckpt_error_last()->message);
			c ? kept_old++ : absent++;
		}
		ckpt_vfs_free(f);
		/* the save may release the old index (target absent), never keep more than it found */
		cr_assert_leq(rel_live_blocks, live1, "call %ld: %ld library blocks leaked by the failed save", i,
			rel_live_blocks - live1);
		ckpt_vfs_free(mem);
		cr_assert_eq(rel_live_blocks, live0);
	}
	cr_log_info("save, failing each of %ld %s calls: previous kept %ld, absent %ld, absorbed %ld", total,
		alloc ? "allocation" : "I/O", kept_old, absent, became_new);
	cr_assert_gt(kept_old + absent, 0, "no injected failure reached the caller");
	free_state(a);
	free_state(b);
	rel_alloc_restore();
}

Test(fault_injection, tensorbundle_save_every_io_call, .timeout = 120)
{
	save_sweep(0);
}

Test(fault_injection, tensorbundle_save_every_allocation, .timeout = 120)
{
	save_sweep(1);
}

/* ---- restores ---- */

static int restore(ckpt_vfs *vfs)
{
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	o.vfs = vfs;
	ckpt_reader *r = NULL;
	int rc = note_failure(ckpt_reader_open(&r, PREFIX, &o));
	for (size_t i = 0; rc == CKPT_OK && i < ckpt_reader_num_entries(r); i++) {
		ckpt_tensor *t = NULL;
		rc = note_failure(ckpt_reader_read(&t, r, i));
		ckpt_tensor_free(t);
		if (rc == CKPT_OK && ckpt_reader_var(r, i)->dtype != CKPT_DT_STRING) {
			size_t n = (size_t)ckpt_reader_var(r, i)->nbytes;
			void *buf = malloc(n ? n : 1);
			rc = note_failure(ckpt_reader_read_into(r, i, buf, n));
			free(buf);
		}
	}
	ckpt_reader_free(r);
	note_after_free(rc);
	return rc;
}

static void restore_sweep(int alloc)
{
	rel_alloc_install(0, 0);
	ckpt_tensor *a[3];
	make_state(a, 1.0f);
	ckpt_vfs *mem = with_previous(a), *f;
	cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, 0), CKPT_OK);
	rel_alloc_arm(0);
	cr_assert_eq(restore(f), CKPT_OK);
	long total = alloc ? rel_calls : ckpt_vfs_faulty_calls(f);
	ckpt_vfs_free(f);
	cr_assert_gt(total, 3);
	long absorbed = 0;
	for (long i = 1; i <= total; i++) {
		long live = rel_live_blocks;
		cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, alloc ? 0 : i), CKPT_OK);
		reset_failure();
		rel_alloc_arm(alloc ? i : 0);
		int rc = restore(f);
		rel_alloc_disarm();
		if (rc >= 0) {
			/* a probe whose failure changes nothing (format bidding): the data must still be right */
			cr_assert_eq(compare(mem, a), 1, "call %ld: restore reported success", i);
			absorbed++;
		} else {
			check_failure(rc, alloc ? "restore (allocation)" : "restore (I/O)", i);
		}
		ckpt_vfs_free(f);
		cr_assert_eq(rel_live_blocks, live, "call %ld: %ld library blocks leaked by the failed restore", i,
			rel_live_blocks - live);
	}
	cr_assert_eq(compare(mem, a), 1);
	cr_log_info("restore: failed each of %ld %s calls (%ld absorbed by probes)", total, alloc ? "allocation" : "I/O",
		absorbed);
	cr_assert_lt(absorbed, total, "no injected failure reached the caller");
	ckpt_vfs_free(mem);
	free_state(a);
	rel_alloc_restore();
}

Test(fault_injection, tensorbundle_restore_every_io_call, .timeout = 120)
{
	restore_sweep(0);
}

Test(fault_injection, tensorbundle_restore_every_allocation, .timeout = 120)
{
	restore_sweep(1);
}

/* ---- the manager ---- */

static void quiet(const char *m, void *ctx)
{
	(void)m;
	(void)ctx;
}

/* A checkpoint with one variable whose value is `v`, managed in "run" on `vfs`. */
static ckpt_checkpoint *mgr_state(ckpt_vfs *vfs, int64_t v)
{
	ckpt_checkpoint_options co = CKPT_CHECKPOINT_OPTIONS_INIT;
	co.vfs = vfs;
	co.no_fsync = 1;
	co.warn = quiet;
	ckpt_checkpoint *ck = NULL;
	int rc = ckpt_checkpoint_new(&ck, &co);
	if (rc < 0)
		return NULL;
	ckpt_variable *var;
	ckpt_shape s = { 0 };
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.initial_value = &v;
	rc = ckpt_status_of(var = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "value", "value", CKPT_DT_INT64, &s, &vo));
	if (rc < 0) {
		ckpt_checkpoint_free(ck);
		return NULL;
	}
	return ck;
}

static int mgr_save(ckpt_vfs *vfs, int64_t v)
{
	ckpt_checkpoint *ck = mgr_state(vfs, v);
	if (!ck)
		return note_failure(ckpt_error_last()->code < 0 ? ckpt_error_last()->code : CKPT_ERROR);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = vfs;
	mo.no_fsync = 1;
	mo.warn = quiet;
	ckpt_manager *m = NULL;
	int rc = note_failure(ckpt_manager_new_ext(&m, ck, "run", 2, &mo));
	if (rc == CKPT_OK)
		rc = note_failure(ckpt_status_of(ckpt_manager_save(m)));
	ckpt_manager_free(m);
	ckpt_checkpoint_free(ck);
	note_after_free(rc);
	return rc;
}

/* The value held by the manager's latest valid checkpoint in "run" (-1 none, -2 unreadable). */
static int64_t mgr_latest_value(ckpt_vfs *vfs)
{
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = vfs;
	mo.warn = quiet;
	ckpt_manager *m = NULL;
	if (ckpt_manager_new_ext(&m, NULL, "run", 0, &mo) < 0)
		return -2;
	const char *p = NULL;
	int rc = ckpt_status_of(p = ckpt_manager_latest_valid(m));
	int64_t v = rc == CKPT_ENOTFOUND ? -1 : -2;
	if (rc == CKPT_OK) {
		ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
		o.vfs = vfs;
		ckpt_reader *r = NULL;
		size_t k;
		ckpt_tensor *t = NULL;
		if (ckpt_reader_open(&r, p, &o) == CKPT_OK &&
			ckpt_reader_find(&k, r, "value/.ATTRIBUTES/VARIABLE_VALUE") == CKPT_OK &&
			ckpt_reader_read(&t, r, k) == CKPT_OK)
			v = *(int64_t *)t->data;
		ckpt_tensor_free(t);
		ckpt_reader_free(r);
	}
	ckpt_manager_free(m);
	return v;
}

static void manager_sweep(int alloc)
{
	rel_alloc_install(0, 0);
	ckpt_vfs *mem, *f;
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	cr_assert_eq(mgr_save(mem, 41), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(mgr_latest_value(mem), 41);
	ckpt_vfs_free(mem);
	/* count the calls of the second save */
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	cr_assert_eq(mgr_save(mem, 41), CKPT_OK);
	cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, 0), CKPT_OK);
	rel_alloc_arm(0);
	cr_assert_eq(mgr_save(f, 42), CKPT_OK, "%s", ckpt_error_last()->message);
	long total = alloc ? rel_calls : ckpt_vfs_faulty_calls(f);
	ckpt_vfs_free(f);
	cr_assert_eq(mgr_latest_value(mem), 42);
	ckpt_vfs_free(mem);
	long kept = 0, absorbed = 0;
	for (long i = 1; i <= total; i++) {
		long live0 = rel_live_blocks;
		cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
		cr_assert_eq(mgr_save(mem, 41), CKPT_OK);
		cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, alloc ? 0 : i), CKPT_OK);
		reset_failure();
		rel_alloc_arm(alloc ? i : 0);
		int rc = mgr_save(f, 42);
		rel_alloc_disarm();
		ckpt_vfs_free(f);
		int64_t v = mgr_latest_value(mem);
		if (rc >= 0) {
			absorbed++;
			cr_assert_eq(v, 42, "call %ld: success reported but the latest valid checkpoint holds %lld", i,
				(long long)v);
		} else {
			check_failure(rc, alloc ? "manager save (allocation)" : "manager save (I/O)", i);
			/* the previous checkpoint survives; a complete new one may have been written before the state file */
			cr_assert(v == 41 || v == 42, "call %ld: after a failed manager save the latest valid checkpoint "
				"holds %lld", i, (long long)v);
			kept++;
		}
		ckpt_vfs_free(mem);
		cr_assert_eq(rel_live_blocks, live0, "call %ld: %ld library blocks leaked", i, rel_live_blocks - live0);
	}
	cr_log_info("manager save, failing each of %ld %s calls: failed cleanly %ld, absorbed %ld", total,
		alloc ? "allocation" : "I/O", kept, absorbed);
	cr_assert_gt(kept, 0, "no injected failure reached the caller");
	rel_alloc_restore();
}

Test(fault_injection, manager_save_every_io_call, .timeout = 120)
{
	manager_sweep(0);
}

Test(fault_injection, manager_save_every_allocation, .timeout = 120)
{
	manager_sweep(1);
}

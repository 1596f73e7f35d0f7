/*
 * Asynchronous saves through the manager (issue 13, point 3): numbering,
 * save_counter, retention, the state file, latest-valid and the lock, as a
 * synchronous manager save; the bytes written are the same; a background
 * failure (every I/O call of the background work failed in turn through
 * the faulty VFS) is reported on the next call or on wait, nothing of the
 * failed checkpoint remains, and the previous latest stays the latest.
 */
#include <sys/stat.h>
#include "manager_common.h"
#include "ckpt/sys/vfs_faulty.h"
#include "ckpt/sys/vfs_memory.h"

static ckpt_manager *manager_on(mc_state *s, ckpt_vfs *vfs, const char *dir, int keep)
{
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = vfs;
	mo.no_fsync = 1;
	mo.warn = mc_on_warn;
	mo.warn_ctx = &s->warn;
	ckpt_manager *m = NULL;
	cr_assert_eq(ckpt_manager_new_ext(&m, s->ck, dir, keep, &mo), CKPT_OK, "%s", ckpt_error_last()->message);
	return m;
}

static int save_async(mc_state *s, ckpt_manager *m, ckpt_async_saver *as, const char **path)
{
	int rc = mc_set(s, ckpt_checkpoint_save_counter(s->ck) + 1);
	return rc < 0 ? rc : ckpt_status_of(path ? (*path = ckpt_manager_save_async(m, as)) : ckpt_manager_save_async(m, as));
}

static void file_bytes_equal(const char *a, const char *b)
{
	size_t na, nb;
	char *x = ts_read_file(a, &na), *y = ts_read_file(b, &nb);
	cr_assert_not_null(x, "%s", a);
	cr_assert_not_null(y, "%s", b);
	cr_assert_eq(na, nb, "%s: %zu bytes, %s: %zu", a, na, b, nb);
	cr_assert_eq(memcmp(x, y, na), 0, "%s and %s differ", a, b);
	free(x);
	free(y);
}

Test(manager_async, does_everything_a_synchronous_save_does)
{
	char *sync_dir = ts_tmpdir(), *async_dir = ts_tmpdir();
	mc_state a, b;
	cr_assert_eq(mc_build(&a, NULL), CKPT_OK);
	cr_assert_eq(mc_build(&b, NULL), CKPT_OK);
	ckpt_manager *ms = manager_on(&a, NULL, sync_dir, 2), *ma = manager_on(&b, NULL, async_dir, 2);
	ckpt_async_saver *as;
	cr_assert_eq(ckpt_async_saver_new(&as, NULL), CKPT_OK);
	for (int i = 1; i <= 5; i++) {
		const char *p = NULL;
		cr_assert_eq(mc_save(&a, ms, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
		cr_assert_eq(save_async(&b, ma, as, &p), CKPT_OK, "%s", ckpt_error_last()->message);
		char want[32];
		snprintf(want, sizeof(want), "/ckpt-%d", i);
		cr_assert(strstr(p, want), "save %d writes %s", i, p);
		cr_assert_eq(ckpt_checkpoint_save_counter(b.ck), i);
		/* the trainer moves on at once: the staged state is what gets written */
		cr_assert_eq(mc_set(&b, -7), CKPT_OK);
	}
	/* the lock is the manager's, async or not */
	mc_state c;
	cr_assert_eq(mc_build(&c, NULL), CKPT_OK);
	ckpt_manager *m2 = NULL;
	cr_assert_eq(ckpt_manager_new(&m2, c.ck, async_dir, 2), CKPT_EBUSY);
	cr_assert_eq(ckpt_manager_wait(ma), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_manager_wait(ma), CKPT_OK); /* nothing in flight */
	cr_assert_eq(ckpt_manager_num_checkpoints(ma), 2);
	cr_assert(strstr(ckpt_manager_latest(ma), "/ckpt-5"));
	cr_assert(strstr(ckpt_manager_checkpoint(ma, 0), "/ckpt-4"));
	/* same files, same bytes, same state file listing */
	mc_dir ds, da;
	mc_scan(&ds, NULL, sync_dir);
	mc_scan(&da, NULL, async_dir);
	cr_assert_eq(da.ncomplete, 2);
	cr_assert_eq(da.c[0].number, 4);
	cr_assert_eq(da.newest_complete, 5);
	cr_assert_eq(da.state_latest, 5);
	cr_assert_eq(da.nlisted, 2);
	cr_assert_eq(da.ntemp, 0);
	cr_assert_eq(ds.ncomplete, da.ncomplete);
	const char *files[] = { "ckpt-4.index", "ckpt-4.data-00000-of-00001", "ckpt-5.index", "ckpt-5.data-00000-of-00001" };
	for (int i = 0; i < 4; i++) {
		char *x = ts_join(sync_dir, files[i]), *y = ts_join(async_dir, files[i]);
		file_bytes_equal(x, y);
		free(x);
		free(y);
	}
	/* latest-valid and restore in a new process (a new manager) */
	ckpt_manager_free(ma);
	ckpt_checkpoint_free(c.ck);
	cr_assert_eq(mc_build(&c, NULL), CKPT_OK);
	ckpt_manager *mr = manager_on(&c, NULL, async_dir, 2);
	ckpt_restore_status *st;
	const char *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_restore_latest(&st, mr)), CKPT_OK, "%s",
		     ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	cr_assert(strstr(p, "/ckpt-5"));
	cr_assert_eq(mc_get(&c), 5);
	cr_assert_eq(c.warn.n, 0, "%s", c.warn.all);
	ckpt_manager_free(mr);
	ckpt_manager_free(ms);
	ckpt_async_saver_free(as);
	ckpt_checkpoint_free(a.ck);
	ckpt_checkpoint_free(b.ck);
	ckpt_checkpoint_free(c.ck);
	ts_rmtree(sync_dir);
	ts_rmtree(async_dir);
	free(sync_dir);
	free(async_dir);
}

Test(manager_async, mixes_with_synchronous_saves_and_restores)
{
	char *dir = ts_tmpdir();
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager *m = manager_on(&s, NULL, dir, 3);
	ckpt_async_saver *as;
	cr_assert_eq(ckpt_async_saver_new(&as, NULL), CKPT_OK);
	const char *p;
	cr_assert_eq(save_async(&s, m, as, NULL), CKPT_OK);
	cr_assert_eq(mc_save(&s, m, &p), CKPT_OK, "%s", ckpt_error_last()->message); /* waits for ckpt-1 first */
	cr_assert(strstr(p, "/ckpt-2"), "%s", p);
	cr_assert_eq(save_async(&s, m, as, NULL), CKPT_OK);
	/* latest_valid waits too, and sees ckpt-3 */
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_latest_valid(m)), CKPT_OK);
	cr_assert(strstr(p, "/ckpt-3"), "%s", p);
	cr_assert_eq(save_async(&s, m, as, NULL), CKPT_OK);
	cr_assert_eq(mc_set(&s, 0), CKPT_OK);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_restore_latest(&st, m)), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	cr_assert(strstr(p, "/ckpt-4"), "%s", p);
	cr_assert_eq(mc_get(&s), 4);
	/* while the manager owns the saver, a direct save on it is refused; ckpt_async_wait is fine */
	cr_assert_eq(save_async(&s, m, as, NULL), CKPT_OK);
	char *other = ts_join(dir, "elsewhere");
	cr_assert_eq(ckpt_async_save(as, s.ck, other), CKPT_EINVAL);
	cr_assert(strstr(ckpt_error_last()->message, "ckpt_manager_wait"), "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_async_wait(as), CKPT_OK);
	cr_assert_eq(ckpt_manager_wait(m), CKPT_OK);
	cr_assert_eq(ckpt_async_save(as, s.ck, other), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_async_wait(as), CKPT_OK);
	/* freeing the manager with a save in flight applies it: the state file lists ckpt-6 */
	cr_assert_eq(save_async(&s, m, as, NULL), CKPT_OK);
	ckpt_manager_free(m);
	mc_dir d;
	mc_scan(&d, NULL, dir);
	cr_assert_eq(d.state_latest, 6);
	cr_assert_eq(d.ncomplete, 3);
	/* a saver freed before its manager: the write is joined, the manager applies it */
	m = manager_on(&s, NULL, dir, 3);
	cr_assert_eq(save_async(&s, m, as, &p), CKPT_OK);
	ckpt_async_saver_free(as);
	cr_assert_eq(ckpt_manager_wait(m), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(strstr(ckpt_manager_latest(m), "/ckpt-7"));
	ckpt_manager_free(m);
	mc_scan(&d, NULL, dir);
	cr_assert_eq(d.state_latest, 7);
	ckpt_checkpoint_free(s.ck);
	free(other);
	ts_rmtree(dir);
	free(dir);
}

/* ---- a failing background write ---- */

/* ckpt-1 and ckpt-2 on `vfs` through async saves; the manager and saver stay open for the third. */
static void two_saves(mc_state *s, ckpt_vfs *vfs, ckpt_manager **m, ckpt_async_saver **as)
{
	cr_assert_eq(mc_build(s, vfs), CKPT_OK);
	*m = manager_on(s, vfs, "run", 2);
	cr_assert_eq(ckpt_async_saver_new(as, NULL), CKPT_OK);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(save_async(s, *m, *as, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_manager_wait(*m), CKPT_OK, "%s", ckpt_error_last()->message);
}

/*
 * Fail each I/O call of the third save's background work (write, retention,
 * state file) in turn. The failure is reported by ckpt_manager_wait (odd
 * calls) or by the next ckpt_manager_save_async (even calls), which starts
 * nothing; the previous latest stays valid; the retry gets the right number.
 */
Test(manager_async, a_failing_background_write_is_reported_and_the_previous_latest_stays, .timeout = 120)
{
	/* calls before and during the third save */
	ckpt_vfs *mem, *f;
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, 0), CKPT_OK);
	mc_state s;
	ckpt_manager *m;
	ckpt_async_saver *as;
	two_saves(&s, f, &m, &as);
	long before = ckpt_vfs_faulty_calls(f);
	cr_assert_eq(save_async(&s, m, as, NULL), CKPT_OK);
	cr_assert_eq(ckpt_manager_wait(m), CKPT_OK);
	long total = ckpt_vfs_faulty_calls(f) - before;
	ckpt_manager_free(m);
	ckpt_async_saver_free(as);
	ckpt_checkpoint_free(s.ck);
	ckpt_vfs_free(f);
	ckpt_vfs_free(mem);
	cr_assert_gt(total, 10);
	long reported = 0, absorbed = 0, kept_new = 0;
	for (long i = 1; i <= total; i++) {
		cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
		cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, before + i), CKPT_OK);
		two_saves(&s, f, &m, &as);
		const char *p = NULL;
		cr_assert_eq(save_async(&s, m, as, &p), CKPT_OK, "call %ld: staging does no I/O", i);
		cr_assert(strstr(p, "run/ckpt-3"), "%s", p);
		int rc;
		if (i % 2) {
			rc = ckpt_manager_wait(m);
		} else {
			rc = save_async(&s, m, as, NULL); /* reports the failure and starts nothing */
		}
		char msg[1024] = "", epath[512] = "";
		if (rc < 0) {
			snprintf(msg, sizeof(msg), "%s", ckpt_error_last()->message ? ckpt_error_last()->message : "");
			snprintf(epath, sizeof(epath), "%s", ckpt_error_last()->path ? ckpt_error_last()->path : "");
		}
		cr_assert(ckpt_vfs_faulty_fired(f), "call %ld never happened", i);
		mc_dir d;
		mc_scan(&d, mem, "run");
		if (rc == CKPT_OK) {
			/* absorbed (a read-side close): the save went through */
			absorbed++;
			cr_assert_eq(ckpt_manager_wait(m), CKPT_OK);
		} else {
			reported++;
			cr_assert(strstr(msg, "injected"), "call %ld: %s", i, msg);
			cr_assert(strstr(epath, "run"), "call %ld: the error names no path (%s)", i, epath);
			if (d.newest_complete == 3) {
				/* committed, then retention or the state file failed: ckpt-3 is there and the manager knows it */
				kept_new++;
				cr_assert_eq(ckpt_checkpoint_save_counter(s.ck), 3);
				cr_assert(strstr(ckpt_manager_latest(m), "/ckpt-3"), "call %ld", i);
			} else {
				cr_assert_eq(d.newest_complete, 2, "call %ld", i);
				cr_assert_eq(ckpt_checkpoint_save_counter(s.ck), 2, "call %ld: save_counter not rolled back", i);
				cr_assert(strstr(ckpt_manager_latest(m), "/ckpt-2"), "call %ld: %s", i, ckpt_manager_latest(m));
				cr_assert_eq(d.ntemp, 0, "call %ld: the failed write left temporaries", i);
			}
			cr_assert_leq(d.ncomplete, 3);
			/* reported once; the retry saves with the next number */
			cr_assert_eq(ckpt_manager_wait(m), CKPT_OK);
			const char *q;
			cr_assert_eq(save_async(&s, m, as, &q), CKPT_OK, "call %ld: %s", i, ckpt_error_last()->message);
			cr_assert_eq(ckpt_manager_wait(m), CKPT_OK, "call %ld: %s", i, ckpt_error_last()->message);
			char want[32];
			snprintf(want, sizeof(want), "/ckpt-%lld", (long long)d.newest_complete + 1);
			cr_assert(strstr(ckpt_manager_latest(m), want), "call %ld: retry wrote %s", i, ckpt_manager_latest(m));
		}
		/* the previous latest (or the new one) restores */
		const char *lv;
		cr_assert_eq(ckpt_status_of(lv = ckpt_manager_latest_valid(m)), CKPT_OK, "call %ld: %s", i,
			     ckpt_error_last()->message);
		ckpt_manager_free(m);
		ckpt_async_saver_free(as);
		ckpt_checkpoint_free(s.ck);
		ckpt_vfs_free(f);
		mc_scan(&d, mem, "run");
		/* retention is best effort: a delete that failed is a warning, and that checkpoint stays listed */
		int refused = strstr(s.warn.all, "retention: could not delete") != NULL;
		cr_assert_leq(d.ncomplete, 2 + (size_t)refused, "call %ld: max_to_keep", i);
		if (refused)
			cr_assert(mc_listed(&d, d.c[0].number), "call %ld: the checkpoint retention kept is not listed", i);
		cr_assert_eq(d.state_latest, d.newest_complete, "call %ld", i);
		ckpt_vfs_free(mem);
	}
	cr_log_info("async manager save, failing each of %ld background I/O calls: reported %ld (the new checkpoint "
		"already committed in %ld), absorbed %ld", total, reported, kept_new, absorbed);
	cr_assert_gt(reported, total / 2);
}

/*
 * Asynchronous manager saves to s3:// (ckpt_manager_save_async): numbering,
 * retention, the state file and the lock as a synchronous save; boto3 sees
 * exactly the committed objects, byte for byte those of the same saves on
 * a local disk; a new trainer loads the latest bit-exact.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "manager_common.h"
#include "s3_common.h"

/* `count` saves into `dir`, each staged while the trainer moves on (async) or written at once; max_to_keep 2. */
static void saves(const char *dir, int count, int async)
{
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.no_fsync = 1;
	ckpt_manager *m = NULL;
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 2, &mo), CKPT_OK, "%s: %s", dir, ckpt_error_last()->message);
	ckpt_async_saver *as = NULL;
	cr_assert_eq(ckpt_async_saver_new(&as, NULL), CKPT_OK);
	for (int i = 1; i <= count; i++) {
		const char *p = NULL;
		cr_assert_eq(mc_set(&s, i), CKPT_OK);
		if (async) {
			cr_assert_eq(ckpt_manager_save_async(&p, m, as), CKPT_OK, "save %d: %s", i,
				ckpt_error_last()->message);
			char want[32];
			snprintf(want, sizeof(want), "/ckpt-%d", i);
			cr_assert(p && strstr(p, want), "save %d writes %s", i, p ? p : "(null)");
			cr_assert(strncmp(p, "s3://", 5) == 0 || !ckpt_path_is_s3(dir), "%s", p);
			/* the trainer moves on at once: the staged state is what gets written */
			cr_assert_eq(mc_set(&s, -7), CKPT_OK);
		} else {
			cr_assert_eq(ckpt_manager_save(&p, m), CKPT_OK, "save %d: %s", i, ckpt_error_last()->message);
		}
	}
	cr_assert_eq(ckpt_manager_wait(m), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_manager_count(m), 2);
	cr_assert(strstr(ckpt_manager_latest(m), "/ckpt-4") != NULL, "%s", ckpt_manager_latest(m));
	cr_assert_eq(s.warn.n, 0, "%s", s.warn.all);
	ckpt_manager_free(m);
	ckpt_async_saver_free(as);
	ckpt_checkpoint_free(s.ck);
}

Test(s3_async, manager_async_saves_with_retention_load_bit_exact, .timeout = 300)
{
	char *dir = s3t_prefix("async");
	saves(dir, 4, 1);
	/* boto3: ckpt-3 and ckpt-4 with the state file; ckpt-1 and ckpt-2 gone, no lock, no temporaries */
	char *keys = s3t_oracle("keys", dir, NULL);
	cr_expect_str_eq(keys,
		"checkpoint\nckpt-3.data-00000-of-00001\nckpt-3.index\nckpt-4.data-00000-of-00001\nckpt-4.index\n");
	free(keys);
	/* the same saves, synchronous, on a local disk: the same bytes */
	char *tmp = ts_tmpdir();
	saves(tmp, 4, 0);
	const char *files[] = { "ckpt-3.index", "ckpt-3.data-00000-of-00001", "ckpt-4.index",
		"ckpt-4.data-00000-of-00001" };
	for (size_t i = 0; i < 4; i++) {
		char *obj = ts_join(dir, files[i]), *local = ts_join(tmp, files[i]);
		free(s3t_oracle("same", obj, local, NULL));
		free(obj);
		free(local);
	}
	/* what the state file names, read without a manager */
	mc_dir d;
	ckpt_vfs *v = NULL;
	cr_assert_eq(ckpt_vfs_s3_shared(&v), CKPT_OK);
	mc_scan(&d, v, dir);
	cr_expect_eq(d.ncomplete, 2u);
	cr_expect_eq(d.newest_complete, 4);
	cr_expect_eq(d.state_latest, 4);
	cr_expect_eq(d.nlisted, 2u);
	cr_expect_eq(d.ntemp, 0u);
	/* a new trainer restores ckpt-4: every element is the value staged for save 4 */
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager *m = NULL;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 2), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status *st = NULL;
	const char *p = NULL;
	cr_assert_eq(ckpt_manager_restore_latest(&st, &p, m), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	cr_assert(p && strstr(p, "/ckpt-4"), "%s", p ? p : "(null)");
	cr_expect_eq(mc_get(&s), 4);
	int64_t vec[64];
	cr_assert_eq(ckpt_variable_read(s.vec, vec, sizeof(vec)), CKPT_OK);
	for (int i = 0; i < 64; i++)
		cr_assert_eq(vec[i], 4, "vec[%d] = %lld", i, (long long)vec[i]);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ts_rmtree(tmp);
	free(tmp);
	free(dir);
}

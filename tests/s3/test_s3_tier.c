/*
 * The memory tier over an s3:// directory: the persisted steps are copied
 * from the memory segments in the background (ckpt_manager_options
 * persist_every), written straight to their final keys (the store has no
 * rename), index last; boto3 sees exactly the committed objects and a new
 * trainer without a memory tier loads the newest one from the bucket.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "manager_common.h"
#include "s3_common.h"

Test(s3_tier, persisted_steps_are_copied_from_memory_to_the_bucket, .timeout = 300)
{
	char *dir = s3t_prefix("tier");
	char *tmp = ts_tmpdir();
	char *tier = ts_join(tmp, "shm");
	setenv(CKPT_TIER_DIR_ENV, tier, 1);
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.no_fsync = 1;
	mo.memory_every = 1;
	mo.persist_every = 2;
	mo.memory_job = "s3job";
	ckpt_manager *m = NULL;
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 2, &mo), CKPT_OK, "%s: %s", dir, ckpt_error_last()->message);
	for (int i = 1; i <= 6; i++) {
		const char *p = NULL;
		cr_assert_eq(mc_set(&s, i), CKPT_OK);
		cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK, "save %d: %s", i, ckpt_error_last()->message);
		cr_assert_eq(mc_set(&s, -7), CKPT_OK); /* the copy is the step's, not the live values */
	}
	cr_assert_eq(ckpt_manager_wait(m), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_manager_num_checkpoints(m), 2);
	cr_assert(strstr(ckpt_manager_latest(m), "/ckpt-6") != NULL, "%s", ckpt_manager_latest(m));
	ckpt_manager_free(m); /* a clean finish: storage holds step 6, the segments go */
	ckpt_checkpoint_free(s.ck);
	char *keys = s3t_oracle("keys", dir, NULL);
	cr_expect_str_eq(keys,
		"checkpoint\nckpt-4.data-00000-of-00001\nckpt-4.index\nckpt-6.data-00000-of-00001\nckpt-6.index\n");
	free(keys);

	/* a trainer without a memory tier: the bucket's newest, step 6 */
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager_options plain = CKPT_MANAGER_OPTIONS_INIT;
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 2, &plain), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status *st = NULL;
	const char *from;
	cr_assert_eq(ckpt_status_of(from = ckpt_manager_restore_latest(&st, m)), CKPT_OK, "%s",
		ckpt_error_last()->message);
	cr_assert(from && strstr(from, "/ckpt-6"), "%s", from ? from : "(none)");
	cr_assert_eq(ckpt_restore_status_tier(st), CKPT_TIER_STORAGE);
	cr_assert_gt(ckpt_restore_status_tier_bytes(st, CKPT_TIER_STORAGE), 0);
	cr_assert_eq(mc_get(&s), 6);
	ckpt_restore_status_free(st);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	unsetenv(CKPT_TIER_DIR_ENV);
	ts_rmtree(tmp);
	free(tier);
	free(tmp);
	free(dir);
}

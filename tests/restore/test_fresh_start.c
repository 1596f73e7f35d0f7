/*
 * One restore pattern for a first start and a resume (issue 13, point 1):
 * on a fresh start ckpt_manager_restore_latest gives from == NULL and a NULL
 * status, and every status call accepts NULL — counts 0, path NULL, the
 * assertions CKPT_OK — while on a resume the same assertions still catch a
 * tree that does not match.
 */
#include <criterion/criterion.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

static ckpt_checkpoint *tree(int with_extra, ckpt_variable **w)
{
	ckpt_checkpoint *ck;
	ckpt_shape sc = { 0 };
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
	cr_assert_eq(ckpt_status_of(w ? (*w = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "w", "w", CKPT_DT_FLOAT, &sc, NULL)) : ckpt_object_add_variable(ckpt_checkpoint_root(ck), "w", "w", CKPT_DT_FLOAT, &sc, NULL)),
		     CKPT_OK);
	if (with_extra)
		cr_assert_eq(ckpt_status_of(ckpt_object_add_variable(ckpt_checkpoint_root(ck), "extra", "extra", CKPT_DT_FLOAT, &sc, NULL)),
			     CKPT_OK);
	return ck;
}

Test(fresh_start, null_status_passes_on_a_first_start_and_the_resume_still_checks)
{
	char *dir = ts_tmpdir();
	ckpt_variable *w;
	ckpt_checkpoint *ck = tree(0, &w);
	ckpt_manager *mgr;
	ckpt_restore_status *st = (ckpt_restore_status *)&st; /* must be overwritten */
	const char *from = "unset";

	cr_assert_eq(ckpt_manager_new(&mgr, ck, dir, 2), CKPT_OK);
	cr_assert_eq(ckpt_status_of(from = ckpt_manager_restore_latest(&st, mgr)), CKPT_OK);
	cr_assert_null(from, "fresh start");
	cr_assert_null(st, "fresh start: NULL status");
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK);
	cr_assert_eq(ckpt_restore_status_assert_existing_objects_matched(st), CKPT_OK);
	cr_assert_eq(ckpt_restore_status_num_restored(st), 0);
	cr_assert_eq(ckpt_restore_status_num_unmatched(st), 0);
	cr_assert_eq(ckpt_restore_status_num_unrestored(st), 0);
	cr_assert_null(ckpt_restore_status_path(st));
	ckpt_restore_status_expect_partial(st);
	ckpt_restore_status_free(st);
	const float one = 1.0f;
	cr_assert_eq(ckpt_variable_assign(w, &one, sizeof(one)), CKPT_OK);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save(mgr)), CKPT_OK);
	ckpt_manager_free(mgr);
	ckpt_checkpoint_free(ck);

	/* resume into the same tree: a real status, consumed */
	ck = tree(0, &w);
	cr_assert_eq(ckpt_manager_new(&mgr, ck, dir, 2), CKPT_OK);
	cr_assert_eq(ckpt_status_of(from = ckpt_manager_restore_latest(&st, mgr)), CKPT_OK);
	cr_assert_not_null(from);
	cr_assert_not_null(st);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	ckpt_manager_free(mgr);
	ckpt_checkpoint_free(ck);

	/* resume into a tree with a variable the file lacks: the same call fails, naming it */
	ck = tree(1, &w);
	cr_assert_eq(ckpt_manager_new(&mgr, ck, dir, 2), CKPT_OK);
	cr_assert_eq(ckpt_status_of(from = ckpt_manager_restore_latest(&st, mgr)), CKPT_OK);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_ENOTFOUND);
	cr_assert(strstr(ckpt_error_last()->message, "extra"), "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	ckpt_manager_free(mgr);
	ckpt_checkpoint_free(ck);
	ts_rmtree(dir);
	free(dir);
}

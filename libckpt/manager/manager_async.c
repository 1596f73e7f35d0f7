/*
 * Asynchronous saves through the manager: the same save as
 * ckpt_manager_save (number, save_counter, retention, state file, the
 * directory's lock), with the file work on the async saver's background
 * thread. The caller's thread plans the save (manager.c) and stages the
 * state; the background thread writes ckpt-N, then deletes the oldest and
 * writes the state file (ckpt__manager_commit_files reads only the plan and
 * the manager's fixed fields); the outcome is folded into the manager's
 * list on the caller's thread by the next call that waits. Until then the
 * manager shows the previous latest, which stays valid whatever happens to
 * the write: a failed write commits nothing and its temporaries are gone.
 */
#include "checkpoint/checkpoint_internal.h"
#include "manager_internal.h"
#include "checkpoint/async_internal.h"

struct ckpt__manager_async {
	ckpt_manager *m;
	ckpt_async_saver *saver;  /* NULL once the saver was freed (it joined the job first) */
	ckpt__manager_save save;
};

/* Background thread: after the write, the manager's part of the commit. */
static int on_written(int rc, void *ctx)
{
	ckpt__manager_async *a = ctx;
	if (rc == CKPT_OK) {
		a->save.written = 1;
		rc = ckpt__manager_commit_files(a->m, &a->save);
	}
	a->save.rc = rc;
	if (rc < 0)
		ckpt__error_capture(&a->save.error);
	return rc;
}

static void on_saver_freed(void *ctx)
{
	((ckpt__manager_async *)ctx)->saver = NULL;
}

int ckpt__manager_async_finish(ckpt_manager *m)
{
	ckpt__manager_async **slot = ckpt__manager_async_slot(m);
	ckpt__manager_async *a = *slot;
	if (!a)
		return CKPT_OK;
	*slot = NULL;
	if (a->saver)
		ckpt__async_release(a->saver, a);
	int rc = a->save.rc;
	ckpt__error_slot err = a->save.error;
	a->save.error = (ckpt__error_slot){ 0 };
	ckpt__manager_apply(m, &a->save);
	if (rc < 0)
		ckpt__error_raise(&err);
	ckpt__error_slot_clear(&err);
	ckpt__free(a);
	return rc;
}

static int manager_save_async_rc(const char **path_out, ckpt_manager *m, ckpt_async_saver *s)
{
	if (path_out)
		*path_out = NULL;
	if (!m || !s)
		return ckpt__fail(CKPT_EINVAL, m ? ckpt__manager_dir(m) : NULL, NULL, -1,
			"ckpt_manager_save_async: NULL argument");
	ckpt_checkpoint *ck = ckpt__manager_checkpoint(m);
	if (!ck)
		return ckpt__fail(CKPT_EINVAL, ckpt__manager_dir(m), NULL, -1,
			"ckpt_manager_save_async: the manager has no checkpoint to save");
	if (ckpt_replica_current())
		return ckpt__fail(CKPT_ESCOPE, ckpt__manager_dir(m), NULL, -1, "ckpt_manager_save_async called from "
			"replica context; save from the training loop, outside ckpt_strategy_run");
	/* the previous save (or copy from the memory tier) first: its failure is reported now and nothing new starts */
	CKPT_TRY(ckpt__manager_persist_finish(m));
	CKPT_TRY(ckpt__manager_async_finish(m));
	int64_t number = 0;
	CKPT_TRY(ckpt__manager_next_number(m, &number));
	ckpt_variable *counter;
	CKPT_TRY(ckpt_status_of(counter = ckpt_checkpoint_save_counter_variable(ck)));
	ckpt__manager_async *a = ckpt__calloc(1, sizeof(*a));
	if (!a)
		return CKPT_ENOMEM;
	a->m = m;
	a->saver = s;
	int rc = ckpt__manager_plan(&a->save, m, number);
	if (rc < 0) {
		ckpt__free(a);
		return rc;
	}
	/* the staged state carries the new save_counter, as a synchronous save writes it */
	rc = ckpt_variable_assign(counter, &number, sizeof(number));
	if (rc == CKPT_OK) {
		ckpt_write_options wo = CKPT_WRITE_OPTIONS_INIT;
		wo.vfs = ck->opts.vfs;
		wo.no_fsync = ck->opts.no_fsync;
		rc = ckpt__async_save_job(s, ck, a->save.path, &wo, ck->opts.format, on_written, on_saver_freed, a,
			ckpt__manager_dir(m));
	}
	if (rc < 0) {
		/* nothing started: the counter goes back (apply does it for an unwritten save) */
		ckpt__error_slot err = { 0 };
		ckpt__error_capture(&err);
		ckpt__manager_apply(m, &a->save);
		ckpt__free(a);
		ckpt__error_raise(&err);
		ckpt__error_slot_clear(&err);
		return rc;
	}
	ckpt__manager_set_async(m, a, ckpt__manager_async_finish);
	if (path_out)
		*path_out = a->save.path;
	return CKPT_OK;
}

const char *ckpt_manager_save_async(ckpt_manager *m, ckpt_async_saver *s)
{
	const char *path_out = NULL;
	int rc = manager_save_async_rc(&path_out, m, s);
	ckpt__borrowed_status(rc, path_out != NULL);
	return rc == CKPT_OK ? path_out : NULL;
}

int ckpt_manager_wait(ckpt_manager *m)
{
	if (!m)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_manager_wait: NULL manager");
	int rc = ckpt__manager_persist_finish(m);
	int arc = ckpt__manager_async_finish(m);
	return rc < 0 ? rc : arc;
}

/*
 * The persistent tier written from the memory tier (issue 32 point 3): a
 * save to both tiers returns once the memory segment is committed, the
 * directory's checkpoint is copied from the segment in the background (not
 * from the live variables, which the trainer changes meanwhile), it is an
 * ordinary TensorBundle that TensorFlow restores, and a kill -9 during the
 * copy leaves the previous checkpoint in the directory the newest loadable.
 *
 * A gate file system holds the copy's data writes in the directory until
 * the test opens it, so "in flight" is a state, not a race.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "mpi/count_vfs.h"
#include "test_support.h"
#include "tier_common.h"

/* ---- the gate: pwrite of an armed pattern's files waits until opened (or `max_wait` seconds) ---- */

typedef struct gate_vfs {
	count_vfs cv; /* first: its methods forward everything else */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	char pattern[64]; /* "" = not armed */
	int opened, waiting, max_wait;
} gate_vfs;

static int gate_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off)
{
	cv_io *c = (cv_io *)io;
	gate_vfs *g = (gate_vfs *)c->vfs;
	pthread_mutex_lock(&g->mu);
	if (g->pattern[0] && strstr(io->path, g->pattern)) {
		g->waiting = 1;
		pthread_cond_broadcast(&g->cond);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += g->max_wait;
		while (!g->opened && pthread_cond_timedwait(&g->cond, &g->mu, &until) == 0)
			;
	}
	pthread_mutex_unlock(&g->mu);
	return cv_pwrite(io, buf, n, off);
}

static const ckpt_io_methods gate_io_methods = { .version = CKPT_IO_METHODS_V1, .pread = cv_pread,
	.pwrite = gate_pwrite, .size = cv_size, .sync = cv_sync, .close = cv_close };

static int gate_open(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out)
{
	int rc = cv_open(vfs, path, flags, out);
	if (rc == CKPT_OK)
		(*out)->methods = &gate_io_methods;
	return rc;
}

static const ckpt_vfs_methods gate_vfs_methods = { .version = CKPT_VFS_METHODS_V1, .open = gate_open,
	.rename = cv_rename, .remove = cv_remove, .exists = cv_exists, .sync_dir = cv_sync_dir, .list = cv_list,
	.mkdir = cv_mkdir, .destroy = cv_destroy };

static gate_vfs *gate_new(int max_wait)
{
	gate_vfs *g = calloc(1, sizeof(*g));
	g->cv.base.methods = &gate_vfs_methods;
	g->cv.inner = ckpt_vfs_default();
	pthread_mutex_init(&g->cv.lock, NULL);
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cond, NULL);
	g->max_wait = max_wait;
	return g;
}

static void gate_arm(gate_vfs *g, const char *pattern)
{
	pthread_mutex_lock(&g->mu);
	snprintf(g->pattern, sizeof(g->pattern), "%s", pattern);
	pthread_mutex_unlock(&g->mu);
}

/* 1 once a write is held at the gate, within `seconds` */
static int gate_wait_held(gate_vfs *g, int seconds)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += seconds;
	pthread_mutex_lock(&g->mu);
	while (!g->waiting && pthread_cond_timedwait(&g->cond, &g->mu, &until) == 0)
		;
	int w = g->waiting;
	pthread_mutex_unlock(&g->mu);
	return w;
}

static void gate_open_all(gate_vfs *g)
{
	pthread_mutex_lock(&g->mu);
	g->opened = 1;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->mu);
}

/* ---- the state: value = v, big[i] = v * 1000 + i ---- */

typedef struct tstate {
	ckpt_checkpoint *ck;
	ckpt_variable *value, *big;
} tstate;

static void quiet(const char *msg, void *ctx)
{
	(void)msg;
	(void)ctx;
}

static void build(tstate *s)
{
	memset(s, 0, sizeof(*s));
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	o.warn = quiet;
	cr_assert_eq(ckpt_checkpoint_new(&s->ck, &o), CKPT_OK);
	tt_model_add(s->ck, &s->value, &s->big);
}

/* The checkpoint at `prefix`, restored into a fresh state: the step it holds. */
static int64_t step_in(const char *prefix)
{
	tstate r;
	build(&r);
	ckpt_restore_status *st = NULL;
	cr_assert_eq(ckpt_checkpoint_restore(&st, r.ck, prefix), CKPT_OK, "%s: %s", prefix, ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK);
	ckpt_restore_status_free(st);
	int64_t v = tt_get_step(r.value, r.big);
	ckpt_checkpoint_free(r.ck);
	return v;
}

static void remove_tmpdirs(void)
{
	tt_tmpdirs_remove();
	unsetenv(CKPT_TIER_DIR_ENV);
}

TestSuite(tier_persist, .fini = remove_tmpdirs);

static ckpt_manager_options persist_opts(ckpt_vfs *vfs)
{
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.no_fsync = 1;
	mo.vfs = vfs;
	mo.memory_every = 1;
	mo.persist_every = 2;
	mo.memory_job = "pjob";
	return mo;
}

static int exists(const char *dir, const char *name)
{
	char *p = ts_join(dir, name);
	struct stat st;
	int e = stat(p, &st) == 0;
	free(p);
	return e;
}

/* TensorFlow's CheckpointManager over `dir`: its latest checkpoint restored whole into a tf.Module. */
static void tf_restores(const char *dir, const char *latest, int64_t step)
{
	char *script = ts_join(dir, "oracle.py");
	const char *src =
		"import sys, os\n"
		"import tensorflow as tf\n"
		"m = tf.Module()\n"
		"m.value = tf.Variable(tf.constant(0, tf.int64))\n"
		"m.big = tf.Variable(tf.zeros([65536]))\n"
		"ck = tf.train.Checkpoint(model=m)\n"
		"mgr = tf.train.CheckpointManager(ck, sys.argv[1], max_to_keep=5)\n"
		"print('latest', os.path.basename(mgr.latest_checkpoint))\n"
		"ck.restore(mgr.latest_checkpoint).assert_consumed()\n"
		"print('value', int(m.value.numpy()), 'big1', int(m.big[1].numpy()), 'save_counter',"
		" int(ck.save_counter.numpy()))\n";
	cr_assert_eq(ts_write_file(script, src, strlen(src)), 0);
	char *const argv[] = { (char *)ts_oracle_python(), script, (char *)dir, NULL };
	ts_run_result r;
	cr_assert_eq(ts_run(&r, argv), 0);
	ts_assert_exit(&r, 0, "TensorFlow failed: %s", r.err);
	char want[256];
	snprintf(want, sizeof(want), "latest %s\n", latest);
	cr_assert(strstr(r.out, want), "%s", r.out);
	snprintf(want, sizeof(want), "value %lld big1 %lld save_counter %lld", (long long)step,
		(long long)(step * 1000 + 1), (long long)step);
	cr_assert(strstr(r.out, want), "want '%s': %s", want, r.out);
	ts_run_free(&r);
	remove(script);
	free(script);
}

Test(tier_persist, copied_from_memory_in_the_background_and_tensorflow_restores_it, .timeout = 300)
{
	char *tier = ts_join(tt_tmpdir(), "shm");
	setenv(CKPT_TIER_DIR_ENV, tier, 1);
	char *dir = tt_tmpdir();
	gate_vfs *g = gate_new(20);
	tstate s;
	build(&s);
	ckpt_manager *m;
	ckpt_manager_options mo = persist_opts(&g->cv.base);
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	tt_set_step(s.value, s.big, 1);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save(m)), CKPT_OK); /* memory only */

	/* step 2 goes to both tiers: the save returns while the copy's data write is held at the gate */
	gate_arm(g, "ckpt-2.data-");
	tt_set_step(s.value, s.big, 2);
	const char *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(strstr(p, "/ckpt-2"), "save 2 returned %s", p);
	cr_assert(!exists(dir, "ckpt-2.index"), "ckpt-2 was written before the save returned");
	cr_assert(gate_wait_held(g, 10), "no write of ckpt-2 in the background");
	char data2[1024];
	snprintf(data2, sizeof(data2), "%s/pjob/step-000000000002.w0-of-1/ckpt.data-00000-of-00001", tier);
	struct stat st2;
	cr_assert_eq(stat(data2, &st2), 0, "%s", data2);

	/* the trainer goes on: new values, and a memory save that supersedes (removes) step 2's segment */
	tt_set_step(s.value, s.big, 3);
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(strstr(p, "step-000000000003"), "save 3 returned %s", p);
	cr_assert(!exists(dir, "ckpt-2.index"));
	/* and one more memory save (odd: memory only): a superseded step's data file is written over by the save
	 * after next (tier_slots.c), never one that the copy still reads */
	tt_set_step(s.value, s.big, 5);
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save_number(m, 5)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(strstr(p, "step-000000000005"), "save 5 returned %s", p);
	char data5[1024];
	snprintf(data5, sizeof(data5), "%s/pjob/step-000000000005.w0-of-1/ckpt.data-00000-of-00001", tier);
	struct stat st5;
	cr_assert_eq(stat(data5, &st5), 0, "%s", data5);
	cr_assert_neq(st5.st_ino, st2.st_ino, "step 5 was written over the file the copy of step 2 reads");
	free(tier);
	tt_set_step(s.value, s.big, 99);

	gate_open_all(g);
	cr_assert_eq(ckpt_manager_wait(m), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_manager_num_checkpoints(m), 1);
	cr_assert(strstr(ckpt_manager_latest(m), "/ckpt-2"), "%s", ckpt_manager_latest(m));
	/* step 2's values, not the live ones */
	char *ck2 = ts_join(dir, "ckpt-2");
	cr_assert_eq(step_in(ck2), 2);
	free(ck2);
	cr_assert_eq(ckpt_checkpoint_save_counter(s.ck), 5);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ckpt_vfs_free(&g->cv.base);
	tf_restores(dir, "ckpt-2", 2);
}

Test(tier_persist, kill_during_the_background_copy_keeps_the_previous_checkpoint, .timeout = 300)
{
	char *tier = ts_join(tt_tmpdir(), "shm");
	setenv(CKPT_TIER_DIR_ENV, tier, 1);
	free(tier);
	char *dir = tt_tmpdir();
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		gate_vfs *g = gate_new(60);
		tstate s;
		build(&s);
		ckpt_manager *m;
		ckpt_manager_options mo = persist_opts(&g->cv.base);
		if (ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo) != CKPT_OK)
			_exit(3);
		gate_arm(g, "ckpt-4.data-"); /* ckpt-2 is written; ckpt-4's copy never finishes */
		for (int64_t v = 1; v <= 4; v++) {
			tt_set_step(s.value, s.big, v);
			if (!ckpt_manager_save(m))
				_exit(4);
		}
		/* save 4 returned: the copy is (or is about to be) held at the gate */
		if (!gate_wait_held(g, 30))
			_exit(5);
		char c = 1;
		if (write(fds[1], &c, 1) != 1)
			_exit(6);
		pause();
		_exit(7);
	}
	close(fds[1]);
	struct pollfd pf = { fds[0], POLLIN, 0 };
	int ready = poll(&pf, 1, 15000);
	char c = 0;
	int got = ready == 1 && read(fds[0], &c, 1) == 1;
	kill(pid, SIGKILL);
	int ws;
	waitpid(pid, &ws, 0);
	close(fds[0]);
	cr_assert(got, "the child's save 4 did not return while its copy to storage was held (status %d)", ws);
	cr_assert(WIFSIGNALED(ws), "the child ended by itself: status %d", ws);

	cr_assert(exists(dir, "ckpt-2.index"));
	cr_assert(!exists(dir, "ckpt-4.index"), "the killed copy committed ckpt-4");
	/* the directory's newest loadable checkpoint is the previous one, by libckpt and by TensorFlow */
	tstate r;
	build(&r);
	ckpt_manager *m;
	ckpt_manager_options mo = persist_opts(NULL);
	cr_assert_eq(ckpt_manager_new_ext(&m, r.ck, dir, 5, &mo), CKPT_OK, "%s", ckpt_error_last()->message);
	/* the killed copy's temporary is gone: the new lock holder removed it */
	DIR *d = opendir(dir);
	cr_assert(d);
	struct dirent *e;
	while ((e = readdir(d)))
		cr_assert(strncmp(e->d_name, "ckpt-4", 6) != 0, "%s left in the directory", e->d_name);
	closedir(d);
	const char *v;
	cr_assert_eq(ckpt_status_of(v = ckpt_manager_latest_valid(m)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(strstr(v, "/ckpt-2"), "%s", v);
	cr_assert_eq(step_in(v), 2);
	/* and memory still holds step 4, committed before the copy began */
	ckpt_restore_status *st = NULL;
	cr_assert_eq(ckpt_status_of(ckpt_manager_restore_latest(&st, m)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_tier(st), CKPT_TIER_MEMORY);
	cr_assert_eq(tt_get_step(r.value, r.big), 4);
	ckpt_restore_status_free(st);
	ckpt_tier_drop(NULL, "pjob");
	ckpt_manager_free(m);
	ckpt_checkpoint_free(r.ck);
	tf_restores(dir, "ckpt-2", 2);
}

/*
 * memory_limit counts the step a background copy still reads: step 10's copy
 * is held at the gate while memory saves 11 and 12 go on; save 11 removes
 * step 10's segment, whose files the copy keeps open (their pages stay
 * used), so save 12 must not fit a limit that holds two steps and a half.
 */
Test(tier_persist, memory_limit_counts_a_removed_step_the_background_copy_still_reads, .timeout = 300)
{
	char *tier = ts_join(tt_tmpdir(), "shm");
	setenv(CKPT_TIER_DIR_ENV, tier, 1);
	tstate s;
	build(&s);
	/* one step's segment bytes, from a job without a limit */
	ckpt_manager *m;
	ckpt_manager_options mo = persist_opts(NULL);
	mo.memory_job = "measure";
	mo.persist_every = 10;
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, tt_tmpdir(), 5, &mo), CKPT_OK);
	tt_set_step(s.value, s.big, 1);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save(m)), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_tier_list *l = NULL;
	cr_assert_eq(ckpt_tier_scan(&l, tier), CKPT_OK);
	cr_assert_eq(ckpt_tier_list_num_entries(l), 1);
	uint64_t seg = ckpt_tier_list_entry(l, 0)->bytes;
	ckpt_tier_list_free(l);
	ckpt_manager_free(m); /* keeps the memory step (nothing persisted): dropped below */
	cr_assert_eq(ckpt_tier_drop(NULL, "measure"), CKPT_OK);
	/* what a save asks for (the variables plus 1 MiB), plus two steps and a half held */
	uint64_t need = ckpt_variable_nbytes(s.value) + ckpt_variable_nbytes(s.big) + (1u << 20);

	gate_vfs *g = gate_new(20);
	char *dir = tt_tmpdir();
	mo = persist_opts(&g->cv.base);
	mo.persist_every = 10;
	mo.memory_limit = need + seg + seg / 2;
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	gate_arm(g, "ckpt-10.data-");
	tt_set_step(s.value, s.big, 10);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save_number(m, 10)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(gate_wait_held(g, 10), "no write of ckpt-10 in the background");
	tt_set_step(s.value, s.big, 11);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save_number(m, 11)), CKPT_OK, "%s", ckpt_error_last()->message);
	/* step 10's segment is gone from the tier, not from memory */
	tt_set_step(s.value, s.big, 12);
	cr_assert_null(ckpt_manager_save_number(m, 12), "save 12 fit: the copy's %llu bytes were not counted",
		(unsigned long long)seg);
	cr_assert_eq(ckpt_error_last()->code, CKPT_ELIMIT);
	cr_assert(strstr(ckpt_error_last()->message, "still being copied to storage"), "%s", ckpt_error_last()->message);
	/* once the copy is done its bytes are free again */
	gate_open_all(g);
	cr_assert_eq(ckpt_manager_wait(m), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save_number(m, 12)), CKPT_OK, "%s", ckpt_error_last()->message);
	char *ck10 = ts_join(dir, "ckpt-10");
	cr_assert_eq(step_in(ck10), 10);
	free(ck10);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	ckpt_vfs_free(&g->cv.base);
	free(tier);
}

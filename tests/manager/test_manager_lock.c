/*
 * One writer per checkpoint directory (issue 12, point 3): a manager that
 * saves holds the directory's lock for its lifetime; a second one — in the
 * same process or another — fails at creation with CKPT_EBUSY naming the
 * holder's pid; a killed holder never blocks the next manager; clean-up
 * touches only temporaries whose writer is gone; readers need no lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "manager_common.h"
#include "ckpt/sys/vfs_memory.h"

static int file_exists(const char *dir, const char *name)
{
	char *p = ts_join(dir, name);
	struct stat st;
	int r = stat(p, &st) == 0;
	free(p);
	return r;
}

static long lock_file_pid(const char *dir)
{
	char *p = ts_join(dir, "checkpoint.lock");
	char *t = ts_read_file(p, NULL);
	free(p);
	long pid = t ? strtol(t, NULL, 10) : -1;
	free(t);
	return pid;
}

Test(manager_lock, second_manager_in_the_same_process_is_refused)
{
	char *dir = ts_tmpdir();
	mc_state a, b;
	cr_assert_eq(mc_build(&a, NULL), CKPT_OK);
	cr_assert_eq(mc_build(&b, NULL), CKPT_OK);
	ckpt_manager *m1, *m2 = NULL;
	cr_assert_eq(ckpt_manager_new(&m1, a.ck, dir, 3), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(mc_save(&a, m1, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(lock_file_pid(dir), (long)getpid());
	/* flock is per open file description: the second manager opens its own, and is refused anyway */
	char pid[32];
	snprintf(pid, sizeof(pid), "pid %ld", (long)getpid());
	char *slash = ts_join(dir, "");
	const char *spellings[] = { dir, slash };
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(ckpt_manager_new(&m2, b.ck, spellings[i], 3), CKPT_EBUSY, "%s: %s", spellings[i],
			ckpt_status_name(ckpt_error_last()->code));
		cr_assert_null(m2);
		const char *msg = ckpt_error_last()->message;
		cr_assert(strstr(msg, pid), "%s", msg);
		cr_assert(strstr(msg, dir), "%s", msg);
		cr_assert(strstr(msg, "one writer per directory"), "%s", msg);
		cr_assert(strstr(ckpt_error_last()->path, "checkpoint.lock"), "%s", ckpt_error_last()->path);
	}
	/* readers take no lock */
	ckpt_manager *ro;
	cr_assert_eq(ckpt_manager_new(&ro, NULL, dir, 0), CKPT_OK, "%s", ckpt_error_last()->message);
	const char *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_latest_valid(ro)), CKPT_OK);
	cr_assert(strstr(p, "ckpt-1"));
	ckpt_manager_free(ro);
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, dir, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_reader_free(r);
	/* the holder is untouched and keeps saving */
	cr_assert_eq(mc_save(&a, m1, &p), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(strstr(p, "ckpt-2"));
	ckpt_manager_free(m1);
	/* released with the manager: the next one gets it */
	cr_assert_eq(ckpt_manager_new(&m2, b.ck, dir, 3), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(lock_file_pid(dir), (long)getpid());
	ckpt_manager_free(m2);
	cr_assert(file_exists(dir, "checkpoint.lock"), "the lock file is kept (unlinking it would race)");
	cr_assert_eq(lock_file_pid(dir), 0, "a released lock leaves no pid behind");
	ckpt_checkpoint_free(a.ck);
	ckpt_checkpoint_free(b.ck);
	ts_rmtree(dir);
	free(dir);
	free(slash);
}

Test(manager_lock, other_vfs_one_manager_per_directory)
{
	ckpt_vfs *mem;
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	mc_state a, b;
	cr_assert_eq(mc_build(&a, mem), CKPT_OK);
	cr_assert_eq(mc_build(&b, mem), CKPT_OK);
	ckpt_manager *m1, *m2, *m3;
	cr_assert_eq(ckpt_manager_new(&m1, a.ck, "run", 2), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_manager_new(&m2, b.ck, "run", 2), CKPT_EBUSY);
	cr_assert(strstr(ckpt_error_last()->message, "run"), "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_manager_new(&m3, b.ck, "other", 2), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_manager_free(m3);
	ckpt_manager_free(m1);
	cr_assert_eq(ckpt_manager_new(&m2, b.ck, "run", 2), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_manager_free(m2);
	ckpt_checkpoint_free(a.ck);
	ckpt_checkpoint_free(b.ck);
	ckpt_vfs_free(mem);
}

/* ---- other processes ---- */

typedef struct report {
	int rc;
	long pid;
	char message[1024];
} report;

static void send_report(int fd, int rc)
{
	report r = { rc, (long)getpid(), "" };
	if (rc < 0)
		snprintf(r.message, sizeof(r.message), "%s", ckpt_error_last()->message);
	if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(90);
}

static report recv_report(int fd)
{
	report r;
	memset(&r, 0, sizeof(r));
	cr_assert_eq(read(fd, &r, sizeof(r)), (ssize_t)sizeof(r), "the child died before reporting");
	return r;
}

/* "ckpt-N.index" files in `dir` (no Criterion asserts: runs in forked children). */
static int count_indexes(const char *dir)
{
	char **names = NULL;
	size_t n = 0;
	if (ckpt_vfs_list(&names, &n, ckpt_vfs_default(), dir) < 0)
		return 1000;
	int c = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(names[i]);
		c += strncmp(names[i], "ckpt-", 5) == 0 && l > 6 && strcmp(names[i] + l - 6, ".index") == 0;
	}
	ckpt_vfs_free_list(names, n);
	return c;
}

/*
 * Child: wait for a byte on `go`, try to become the writer of `dir`, report,
 * hold it until `hold` closes. `hold` must not be a pipe other children still
 * read their start byte from: a winner draining it would eat a late loser's
 * byte, and the loser would wait for ever.
 */
static void contender(const char *dir, int go, int hold, int out, int saves)
{
	char c;
	if (read(go, &c, 1) != 1)
		_exit(91);
	mc_state s;
	if (mc_build(&s, NULL) < 0)
		_exit(92);
	ckpt_manager *m = NULL;
	int rc = ckpt_manager_new(&m, s.ck, dir, 3);
	ckpt_restore_status *st = NULL;
	if (rc == CKPT_OK)
		rc = ckpt_status_of(ckpt_manager_restore_latest(&st, m));
	ckpt_restore_status_free(st);
	send_report(out, rc);
	if (rc < 0)
		_exit(0);
	for (int i = 0; i < saves; i++) {
		if (mc_save(&s, m, NULL) < 0) {
			send_report(out, ckpt_error_last()->code);
			_exit(93);
		}
		/* never more than max_to_keep, after every save */
		if (count_indexes(dir) > 3) {
			send_report(out, CKPT_ERROR);
			_exit(94);
		}
	}
	send_report(out, CKPT_OK);
	while (read(hold, &c, 1) > 0)
		;
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	_exit(0);
}

Test(manager_lock, another_process_is_refused_with_the_holders_pid)
{
	char *dir = ts_tmpdir();
	int go[2], out[2];
	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(pipe(out), 0);
	fflush(NULL);
	/* forked before the parent has a manager, so the child's refusal comes from the lock file, not the registry */
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(go[1]);
		close(out[0]);
		contender(dir, go[0], go[0], out[1], 0);
	}
	close(go[0]);
	close(out[1]);
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 3), CKPT_OK, "%s", ckpt_error_last()->message);
	/* a temporary of the live writer: the refused manager must not touch it */
	char *tmp = ts_join(dir, "ckpt-7.index.tempstate1234");
	cr_assert_eq(ts_write_file(tmp, "x", 1), 0);
	cr_assert_eq(write(go[1], "g", 1), 1);
	report r = recv_report(out[0]);
	cr_assert_eq(r.rc, CKPT_EBUSY, "%s", r.message);
	char want[64];
	snprintf(want, sizeof(want), "pid %ld", (long)getpid());
	cr_assert(strstr(r.message, want), "the refusal does not name the holder (%s): %s", want, r.message);
	cr_assert(strstr(r.message, "checkpoint.lock"), "%s", r.message);
	close(go[1]);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_assert(file_exists(dir, "ckpt-7.index.tempstate1234"), "a refused manager deleted the writer's temporary");
	cr_assert_eq(mc_save(&s, m, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	free(tmp);
	close(out[0]);
	ts_rmtree(dir);
	free(dir);
}

Test(manager_lock, a_killed_holder_never_blocks_the_next_manager)
{
	char *dir = ts_tmpdir();
	for (int round = 0; round < 3; round++) {
		int go[2], out[2];
		cr_assert_eq(pipe(go), 0);
		cr_assert_eq(pipe(out), 0);
		fflush(NULL);
		pid_t pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			close(go[1]);
			close(out[0]);
			contender(dir, go[0], go[0], out[1], 2);
		}
		close(go[0]);
		close(out[1]);
		cr_assert_eq(write(go[1], "g", 1), 1);
		report r = recv_report(out[0]);
		cr_assert_eq(r.rc, CKPT_OK, "round %d: %s", round, r.message);
		r = recv_report(out[0]); /* its saves are done; it holds the lock and waits */
		cr_assert_eq(r.rc, CKPT_OK, "round %d: %s", round, r.message);
		/* a temporary as a writer killed mid-save leaves it */
		char *tmp = ts_join(dir, "ckpt-99.data-00000-of-00001.tempstate42");
		cr_assert_eq(ts_write_file(tmp, "x", 1), 0);
		mc_state s;
		cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
		ckpt_manager *m = NULL;
		cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 3), CKPT_EBUSY);
		char want[64];
		snprintf(want, sizeof(want), "pid %ld", (long)pid);
		cr_assert(strstr(ckpt_error_last()->message, want), "%s", ckpt_error_last()->message);
		cr_assert_eq(lock_file_pid(dir), (long)pid);
		cr_assert(file_exists(dir, "ckpt-99.data-00000-of-00001.tempstate42"));
		kill(pid, SIGKILL);
		int st;
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		/* the kernel dropped the lock with the process; the stale pid in the file does not matter */
		cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 3), CKPT_OK, "round %d: %s", round, ckpt_error_last()->message);
		cr_assert_eq(lock_file_pid(dir), (long)getpid());
		cr_assert(!file_exists(dir, "ckpt-99.data-00000-of-00001.tempstate42"),
			"the temporary of a dead writer was not cleaned up");
		ckpt_restore_status *rs;
		const char *p;
		cr_assert_eq(ckpt_status_of(p = ckpt_manager_restore_latest(&rs, m)), CKPT_OK, "%s",
			     ckpt_error_last()->message);
		ckpt_restore_status_free(rs);
		cr_assert_eq(mc_get(&s), 2 * (round + 1), "round %d: restored %s", round, p);
		ckpt_manager_free(m);
		ckpt_checkpoint_free(s.ck);
		free(tmp);
		close(go[1]);
		close(out[0]);
	}
	ts_rmtree(dir);
	free(dir);
}

/* ---- a holder that was killed but has not finished dying (issue 26, point 1) ---- */

typedef struct contend_thread {
	ckpt_checkpoint *ck;
	const char *dir;
	ckpt_manager *m;
	int rc;
	char message[1024];
	volatile int done;
} contend_thread;

static void *contend_main(void *arg)
{
	contend_thread *t = arg;
	t->rc = ckpt_manager_new(&t->m, t->ck, t->dir, 3);
	if (t->rc < 0)
		snprintf(t->message, sizeof(t->message), "%s", ckpt_error_last()->message);
	t->done = 1;
	return NULL;
}

/* 1 when another open file description can take the lock of `dir` now (it is dropped again at once). */
static int lock_is_free(const char *dir)
{
	char *p = ts_join(dir, "checkpoint.lock");
	int fd = open(p, O_RDWR | O_CLOEXEC);
	free(p);
	cr_assert_geq(fd, 0);
	int free_now = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return free_now;
}

/*
 * Start a writer of `dir` in a child traced by this process, with
 * PTRACE_O_TRACEEXIT: SIGKILLed, it stops at the very start of its exit,
 * before it closes its files. That is the state mpirun leaves a killed rank
 * in when it returns (the kernel still finishing its fsync or freeing its
 * memory): dying, and still holding the lock. Returns its pid once it holds
 * the directory with 2 saves.
 */
static pid_t start_traced_writer(const char *dir, int *go_out, int *out_in)
{
	int go[2], out[2];
	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(pipe(out), 0);
	fflush(NULL);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(go[1]);
		close(out[0]);
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
			_exit(95);
		raise(SIGSTOP);
		contender(dir, go[0], go[0], out[1], 2);
	}
	close(go[0]);
	close(out[1]);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP, "the traced child did not stop (status %d): is ptrace "
		"forbidden here (kernel.yama.ptrace_scope 3, a seccomp filter)?", st);
	cr_assert_eq(ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)(PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL)), 0,
		"PTRACE_SETOPTIONS: %s", strerror(errno));
	cr_assert_eq(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
	cr_assert_eq(write(go[1], "g", 1), 1);
	report r = recv_report(out[0]);
	cr_assert_eq(r.rc, CKPT_OK, "%s", r.message);
	r = recv_report(out[0]); /* its saves are done; it holds the lock and waits */
	cr_assert_eq(r.rc, CKPT_OK, "%s", r.message);
	*go_out = go[1];
	*out_in = out[0];
	return pid;
}

/* SIGKILL the traced writer and hold it at its exit stop: it is dying and still holds the lock. */
static void kill_and_hold_in_exit(pid_t pid, const char *dir)
{
	cr_assert_eq(kill(pid, SIGKILL), 0);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSTOPPED(st) && (st >> 8) == (SIGTRAP | (PTRACE_EVENT_EXIT << 8)),
		"the killed writer did not stop in its exit (status %#x)", st);
	cr_assert(!lock_is_free(dir), "the dying writer no longer holds the lock: the scenario is not set up");
	cr_assert_eq(lock_file_pid(dir), (long)pid);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

Test(manager_lock, a_holder_killed_but_still_dying_never_blocks_the_next_manager, .timeout = 120)
{
	char *dir = ts_tmpdir();
	for (int round = 0; round < 2; round++) {
		int go, out;
		pid_t pid = start_traced_writer(dir, &go, &out);
		kill_and_hold_in_exit(pid, dir);
		/* the next trainer starts while the killed one is still dying: it must wait for it, not refuse */
		mc_state s;
		cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
		contend_thread t = { s.ck, dir, NULL, 0, "", 0 };
		pthread_t th;
		cr_assert_eq(pthread_create(&th, NULL, contend_main, &t), 0);
		/* a refusal comes at once; give it time to show (not a timed assertion: waiting is correct) */
		for (int i = 0; i < 100 && !t.done; i++)
			sleep_ms(10);
		int answered_while_dying = t.done;
		/* let it finish dying: the kernel drops the lock */
		cr_assert_eq(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
		int st;
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %#x", st);
		cr_assert_eq(pthread_join(th, NULL), 0);
		cr_assert_eq(t.rc, CKPT_OK, "round %d: a manager was refused because of a killed, still dying holder "
			"(pid %ld)%s: %s", round, (long)pid, answered_while_dying ? " while it was dying" : "", t.message);
		cr_assert_eq(lock_file_pid(dir), (long)getpid());
		ckpt_restore_status *rs;
		const char *p;
		cr_assert_eq(ckpt_status_of(p = ckpt_manager_restore_latest(&rs, t.m)), CKPT_OK, "%s",
			     ckpt_error_last()->message);
		ckpt_restore_status_free(rs);
		cr_assert_eq(mc_get(&s), 2 * (round + 1), "round %d: restored %s", round, p);
		/* what it restored is saved on, so the next round's writer resumes from it */
		ckpt_manager_free(t.m);
		ckpt_checkpoint_free(s.ck);
		close(go);
		close(out);
	}
	ts_rmtree(dir);
	free(dir);
}

/* ---- holders that are alive, however they look, are still refused ---- */

typedef struct holder_args {
	const char *dir;
	int go, out;
} holder_args;

static void *holder_thread(void *arg)
{
	holder_args *h = arg;
	contender(h->dir, h->go, h->go, h->out, 1);
	return NULL;
}

/*
 * A writer child; with `leader_exits`, its main thread leaves through
 * pthread_exit once another thread holds the directory (the leader shows as
 * a zombie in /proc while the process lives on).
 */
static pid_t start_writer(const char *dir, int leader_exits, int *go_out, int *out_in)
{
	int go[2], out[2];
	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(pipe(out), 0);
	fflush(NULL);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(go[1]);
		close(out[0]);
		if (!leader_exits)
			contender(dir, go[0], go[0], out[1], 1);
		static holder_args h;
		h = (holder_args){ dir, go[0], out[1] };
		pthread_t th;
		if (pthread_create(&th, NULL, holder_thread, &h) != 0)
			_exit(96);
		pthread_exit(NULL);
	}
	close(go[0]);
	close(out[1]);
	cr_assert_eq(write(go[1], "g", 1), 1);
	report r = recv_report(out[0]);
	cr_assert_eq(r.rc, CKPT_OK, "%s", r.message);
	r = recv_report(out[0]);
	cr_assert_eq(r.rc, CKPT_OK, "%s", r.message);
	*go_out = go[1];
	*out_in = out[0];
	return pid;
}

static void assert_refused_naming(const char *dir, pid_t pid, const char *what)
{
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager *m = NULL;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 3), CKPT_EBUSY, "%s holder: not refused", what);
	char want[64];
	snprintf(want, sizeof(want), "pid %ld", (long)pid);
	cr_assert(strstr(ckpt_error_last()->message, want), "%s holder: %s", what, ckpt_error_last()->message);
	cr_assert(strstr(ckpt_error_last()->message, "in use by another trainer"), "%s holder: %s", what,
		ckpt_error_last()->message);
	ckpt_checkpoint_free(s.ck);
}

Test(manager_lock, a_stopped_holder_and_one_whose_main_thread_exited_are_still_refused, .timeout = 60)
{
	for (int leader_exits = 0; leader_exits < 2; leader_exits++) {
		char *dir = ts_tmpdir();
		int go, out;
		pid_t pid = start_writer(dir, leader_exits, &go, &out);
		if (!leader_exits) {
			cr_assert_eq(kill(pid, SIGSTOP), 0);
			int st;
			cr_assert_eq(waitpid(pid, &st, WUNTRACED), pid);
			cr_assert(WIFSTOPPED(st));
		}
		assert_refused_naming(dir, pid, leader_exits ? "main-thread-exited" : "stopped");
		if (!leader_exits)
			cr_assert_eq(kill(pid, SIGCONT), 0);
		close(go); /* it lets go and exits by itself */
		int st;
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
		close(out);
		ts_rmtree(dir);
		free(dir);
	}
}

/*
 * The reproduction: two trainers started together on one directory,
 * 16 times. Exactly one runs; the other fails at creation naming the
 * winner's pid; the winner never dies and the directory never holds more
 * than max_to_keep checkpoints.
 */
Test(manager_lock, reproduction_two_trainers_on_one_directory, .timeout = 120)
{
	for (int trial = 0; trial < 16; trial++) {
		char *dir = ts_tmpdir();
		int go[2], hold[2], out[2][2];
		pid_t pids[2];
		cr_assert_eq(pipe(go), 0);
		cr_assert_eq(pipe(hold), 0);
		fflush(NULL);
		for (int k = 0; k < 2; k++) {
			cr_assert_eq(pipe(out[k]), 0);
			pids[k] = fork();
			cr_assert_geq(pids[k], 0);
			if (pids[k] == 0) {
				close(go[1]);
				close(hold[1]);
				close(out[k][0]);
				contender(dir, go[0], hold[0], out[k][1], 12);
			}
			close(out[k][1]);
		}
		close(go[0]);
		close(hold[0]);
		cr_assert_eq(write(go[1], "gg", 2), 2); /* both start at once */
		report r[2] = { recv_report(out[0][0]), recv_report(out[1][0]) };
		int w = r[0].rc == CKPT_OK ? 0 : 1, l = 1 - w;
		cr_assert_eq(r[w].rc, CKPT_OK, "trial %d: nobody got the directory: %s / %s", trial, r[0].message,
			r[1].message);
		cr_assert_eq(r[l].rc, CKPT_EBUSY, "trial %d: both trainers run on one directory", trial);
		char want[64];
		snprintf(want, sizeof(want), "pid %ld", (long)pids[w]);
		cr_assert(strstr(r[l].message, want), "trial %d: %s", trial, r[l].message);
		report done = recv_report(out[w][0]);
		cr_assert_eq(done.rc, CKPT_OK, "trial %d: the running trainer failed: %s", trial, done.message);
		close(go[1]);
		close(hold[1]);
		for (int k = 0; k < 2; k++) {
			int st;
			cr_assert_eq(waitpid(pids[k], &st, 0), pids[k]);
			cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "trial %d: trainer %d died (status %d)", trial, k,
				WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
			close(out[k][0]);
		}
		mc_dir d;
		mc_scan(&d, NULL, dir);
		cr_assert_eq(d.ncomplete, 3, "trial %d", trial);
		cr_assert_eq(d.newest_complete, 12, "trial %d", trial);
		cr_assert_eq(d.state_latest, 12, "trial %d", trial);
		cr_assert_eq(d.ntemp, 0, "trial %d", trial);
		ts_rmtree(dir);
		free(dir);
	}
}

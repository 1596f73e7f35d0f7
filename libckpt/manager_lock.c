/*
 * One writer per checkpoint directory (the manager's lock).
 *
 * Two trainers on one directory destroy each other: each one's start-up
 * clean-up deletes the other's temporaries, and both apply retention to a
 * list the other does not see. A manager that saves therefore holds, for
 * its whole lifetime:
 *
 *   - on the POSIX VFS, an exclusive flock(2) on `<dir>/checkpoint.lock`,
 *     which holds the holder's pid as text ("4242\n") for the refusal
 *     message. The kernel drops the lock when the holder dies, however it
 *     dies, so a SIGKILLed trainer never blocks the next one; the pid left
 *     in the file by a dead holder is overwritten by the next. The file is
 *     never unlinked: removing it would let a second process lock a fresh
 *     inode while the first still holds the old one.
 *     The lock goes only when the holder has finished dying, and that can
 *     come well after its death was decided: a SIGKILLed process first
 *     leaves an uninterruptible wait (an fsync on a busy disk), then frees
 *     its memory, and closes its files last; mpirun returns without
 *     waiting for the ranks it killed. A contender that finds the lock held
 *     by a process that is exiting (SIGKILL pending, or every thread
 *     exiting: /proc/PID/status and /proc/PID/task/TID/stat) therefore
 *     waits for it to go — up to EXIT_WAIT_MS, 60 s — instead of refusing;
 *     a live holder is refused at once, naming it.
 *   - an entry in an in-process registry, keyed by the lock file's
 *     device and inode (POSIX) or by VFS and directory (other VFSs), so a
 *     second manager of the same process is refused by the registry itself
 *     and not only by flock's per-open-file-description semantics (NFS
 *     emulates flock with fcntl locks, which are per process).
 *
 * Readers (ckpt_reader_open, restore, inspect, verify, a manager without a
 * checkpoint) take no lock: the state file and every checkpoint are
 * replaced atomically, so they never see a partial one.
 *
 * A process that forks while holding the lock shares it with the child
 * (same open file description); O_CLOEXEC keeps exec'd children out.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "manager_internal.h"

#define PID_TRIES 2000 /* x 1 ms: how long a contender waits for the holder's pid to appear */
#define EXIT_WAIT_MS 60000 /* how long a contender waits for a killed holder to finish exiting */
#define PF_EXITING_FLAG 0x4u /* include/linux/sched.h: the task is in do_exit() */

struct ckpt__dir_lock {
	int fd;                /* POSIX: the locked file, else -1 */
	pid_t owner;           /* the process that took it (a forked child must not clear the pid) */
	char *key;             /* registry key */
	char *path;            /* lock file (POSIX) or directory */
	ckpt__dir_lock *next;
};

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static ckpt__dir_lock *registry;

static ckpt__dir_lock *registry_find(const char *key)
{
	for (ckpt__dir_lock *l = registry; l; l = l->next)
		if (strcmp(l->key, key) == 0)
			return l;
	return NULL;
}

/* The pid recorded in the lock file, 0 when none (a holder that has not written it yet). */
static long holder_pid(int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *end;
	long pid = strtol(buf, &end, 10);
	return (end != buf && pid > 0) ? pid : 0;
}

/* What the process holding the lock is doing. */
typedef enum holder_state {
	HOLDER_LIVE,    /* running (or not inspectable): a real second trainer */
	HOLDER_EXITING, /* dying, still holding its files: the lock goes when it is gone */
	HOLDER_GONE,    /* no such process, or a zombie (its files are closed: someone else holds the lock) */
} holder_state;

/* The hexadecimal mask after `field` ("ShdPnd:") in a /proc status file; 0 when absent. */
static unsigned long long status_mask(const char *path, const char *field)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *p = strstr(buf, field);
	return p ? strtoull(p + strlen(field), NULL, 16) : 0;
}

#define SIGKILL_BIT (1ull << (SIGKILL - 1))

/*
 * One thread of the holder, from /proc/PID/task/TID: 'Z' (it holds
 * nothing), 'E' (exiting: PF_EXITING, or SIGKILL pending for it), 'L'
 * (live), or 0 when it is gone or unreadable.
 */
static char thread_state(long pid, const char *tid)
{
	char path[320], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/task/%s/stat", pid, tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* "tid (comm) S ppid pgrp session tty tpgid flags ...": comm may hold ") " itself */
	const char *p = strrchr(buf, ')');
	char state;
	unsigned long flags;
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2)
		return 0;
	if (state == 'Z' || state == 'X' || state == 'x')
		return 'Z';
	snprintf(path, sizeof(path), "/proc/%ld/task/%s/status", pid, tid);
	return (flags & PF_EXITING_FLAG) || (status_mask(path, "\nSigPnd:") & SIGKILL_BIT) ? 'E' : 'L';
}

/*
 * Whether `pid` is dying. Linux only (/proc); elsewhere, or when /proc
 * cannot tell, a process that exists is live. A zombie thread-group leader
 * whose other threads still run is live; one whose threads are all exiting
 * is exiting.
 */
static holder_state holder_state_of(long pid)
{
	if (kill((pid_t)pid, 0) != 0 && errno != EPERM)
		return HOLDER_GONE;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if (status_mask(path, "\nShdPnd:") & SIGKILL_BIT)
		return HOLDER_EXITING; /* kill(2) of the process: every thread dies */
	snprintf(path, sizeof(path), "/proc/%ld/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return HOLDER_LIVE;
	int exiting = 0, live = 0, seen = 0;
	for (struct dirent *e; !live && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char st = thread_state(pid, e->d_name);
		seen += st != 0;
		exiting += st == 'E';
		live += st == 'L';
	}
	closedir(d);
	if (!seen)
		return HOLDER_LIVE; /* unreadable: refuse, as without /proc */
	return live ? HOLDER_LIVE : exiting ? HOLDER_EXITING : HOLDER_GONE;
}

static long elapsed_ms(const struct timespec *since)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long)(now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

static int refuse(const char *dir, const char *lock_path, long pid)
{
	if (pid == (long)getpid())
		return ckpt__fail(CKPT_EBUSY, lock_path, NULL, -1,
			"checkpoint directory %s already has a manager in this process (pid %ld); one writer per "
			"directory: free the other manager first, or save to another directory", dir, pid);
	if (pid > 0)
		return ckpt__fail(CKPT_EBUSY, lock_path, NULL, -1,
			"checkpoint directory %s is in use by another trainer (pid %ld holds %s); one writer per "
			"directory: stop that process first, or save to another directory", dir, pid, lock_path);
	return ckpt__fail(CKPT_EBUSY, lock_path, NULL, -1,
		"checkpoint directory %s is in use by another trainer (it holds %s but has not written its pid "
		"there); one writer per directory", dir, lock_path);
}

static int refuse_still_exiting(const char *dir, const char *lock_path, long pid)
{
	return ckpt__fail(CKPT_EBUSY, lock_path, NULL, -1,
		"checkpoint directory %s is still locked by pid %ld, which was killed but has not finished exiting "
		"after %d s (it holds %s until it is gone); one writer per directory: wait for that process to go",
		dir, pid, EXIT_WAIT_MS / 1000, lock_path);
}

static char *posix_key(const struct stat *st)
{
	return ckpt__asprintf("posix:%llu:%llu", (unsigned long long)st->st_dev, (unsigned long long)st->st_ino);
}

/* 1 when a manager of this process holds the lock file `st` describes. */
static int held_here(const struct stat *st)
{
	char *key = posix_key(st);
	pthread_mutex_lock(&registry_mu);
	int held = key && registry_find(key);
	pthread_mutex_unlock(&registry_mu);
	ckpt__free(key);
	return held;
}

static int lock_posix(ckpt__dir_lock *l, const char *dir)
{
	l->path = ckpt__path_join(dir, CKPT_MANAGER_LOCK_FILE);
	if (!l->path)
		return CKPT_ENOMEM;
	/* held by this process: refuse before opening it (a close could drop a per-process lock on NFS) */
	struct stat st;
	if (stat(l->path, &st) == 0 && held_here(&st))
		return refuse(dir, l->path, (long)getpid());
	l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (l->fd < 0)
		return ckpt__fail_errno(errno, l->path, "cannot open the manager's lock file");
	if (fstat(l->fd, &st) < 0)
		return ckpt__fail_errno(errno, l->path, "cannot stat the manager's lock file");
	if (!(l->key = posix_key(&st)))
		return CKPT_ENOMEM;
	/*
	 * A holder writes its pid just after it gets the lock, so a contender may
	 * find it locked but without a live pid in it (empty, or a dead holder's):
	 * look again, briefly, so that the refusal names the right process —
	 * and the lock itself may come free meanwhile. A holder that is exiting
	 * is waited for (see the top of this file).
	 */
	struct timespec exiting_since = { 0, 0 };
	long exiting_pid = 0;
	for (int tries = 0;;) {
		if (flock(l->fd, LOCK_EX | LOCK_NB) == 0)
			break;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return ckpt__fail_errno(errno, l->path, "cannot lock the manager's lock file");
		long pid = holder_pid(l->fd);
		holder_state hs = pid > 0 ? holder_state_of(pid) : HOLDER_GONE;
		if (hs == HOLDER_LIVE)
			return refuse(dir, l->path, pid);
		if (hs == HOLDER_EXITING) {
			if (pid != exiting_pid) {
				exiting_pid = pid;
				clock_gettime(CLOCK_MONOTONIC, &exiting_since);
			} else if (elapsed_ms(&exiting_since) >= EXIT_WAIT_MS) {
				return refuse_still_exiting(dir, l->path, pid);
			}
		} else if (++tries >= PID_TRIES) {
			return refuse(dir, l->path, 0);
		}
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(l->fd, 0) < 0 || pwrite(l->fd, pid, (size_t)n, 0) != n)
		return ckpt__fail_errno(errno ? errno : EIO, l->path, "cannot write our pid into the lock file");
	return CKPT_OK;
}

int ckpt__dir_lock_acquire(ckpt__dir_lock **out, ckpt_vfs *vfs, const char *dir)
{
	*out = NULL;
	ckpt__dir_lock *l = ckpt__calloc(1, sizeof(*l));
	if (!l)
		return CKPT_ENOMEM;
	l->fd = -1;
	l->owner = getpid();
	int rc;
	if (vfs == ckpt_vfs_default()) {
		rc = lock_posix(l, dir); /* outside the registry's mutex: it may wait for a starting holder's pid */
	} else {
		l->path = ckpt__strdup(dir);
		l->key = ckpt__asprintf("vfs:%p:%s", (void *)vfs, dir);
		rc = (!l->path || !l->key) ? CKPT_ENOMEM : CKPT_OK;
	}
	pthread_mutex_lock(&registry_mu);
	/* two threads of this process racing for one directory: flock alone may let both through on NFS */
	if (rc == CKPT_OK && registry_find(l->key))
		rc = refuse(dir, l->fd >= 0 ? l->path : dir, (long)getpid());
	if (rc == CKPT_OK) {
		l->next = registry;
		registry = l;
	}
	pthread_mutex_unlock(&registry_mu);
	if (rc < 0) {
		if (l->fd >= 0)
			close(l->fd); /* a lock we took dies with the descriptor */
		ckpt__free(l->key);
		ckpt__free(l->path);
		ckpt__free(l);
		return rc;
	}
	*out = l;
	return CKPT_OK;
}

void ckpt__dir_lock_release(ckpt__dir_lock *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&registry_mu);
	for (ckpt__dir_lock **pp = &registry; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	pthread_mutex_unlock(&registry_mu);
	if (l->fd >= 0) {
		/* no stale pid for the next reader; a forked child closing its copy leaves the parent's pid */
		if (l->owner == getpid() && ftruncate(l->fd, 0) < 0)
			errno = 0; /* harmless: the next holder overwrites it */
		close(l->fd);
	}
	ckpt__free(l->key);
	ckpt__free(l->path);
	ckpt__free(l);
}

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
	 * and the lock itself may come free meanwhile.
	 */
	for (int tries = 0;; tries++) {
		if (flock(l->fd, LOCK_EX | LOCK_NB) == 0)
			break;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return ckpt__fail_errno(errno, l->path, "cannot lock the manager's lock file");
		long pid = holder_pid(l->fd);
		if ((pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM)) || tries == PID_TRIES)
			return refuse(dir, l->path, pid > 0 && tries < PID_TRIES ? pid : 0);
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

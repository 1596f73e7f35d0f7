/*
 * The POSIX file system's one-writer lock of a checkpoint directory
 * (ckpt_vfs_methods.lock): an exclusive flock(2) on `<dir>/checkpoint.lock`,
 * which holds the holder's pid as text ("4242\n") for the refusal message.
 * The kernel drops the lock when the holder dies, however it dies, so a
 * SIGKILLed trainer never blocks the next one; the pid left in the file by a
 * dead holder is overwritten by the next. The file is never unlinked:
 * removing it would let a second process lock a fresh inode while the first
 * still holds the old one.
 *
 * The lock goes only when the holder has finished dying, which can come well
 * after its death was decided (mpirun returns without waiting for the ranks
 * it SIGKILLed; a dying rank may sit in an fsync first). A contender that
 * finds the lock held by a process that is exiting (lock_holder.c) waits for
 * it to go, up to EXIT_WAIT_MS (60 s), instead of refusing; a live holder is
 * refused at once, naming it.
 *
 * The lock is also entered in the in-process registry (io_lock_registry.c)
 * under the lock file's device and inode, so that a second manager of the
 * same process is refused whatever the spelling of the directory and
 * whatever flock's semantics on this file system.
 *
 * A process that forks while holding the lock shares it with the child
 * (same open file description); O_CLOEXEC keeps exec'd children out.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"

#define PID_TRIES 2000 /* x 1 ms: how long a contender waits for the holder's pid to appear */
#define EXIT_WAIT_MS 60000 /* how long a contender waits for a killed holder to finish exiting */

typedef struct posix_lock {
	int fd;           /* the locked file */
	pid_t owner;      /* the process that took it (a forked child must not clear the pid) */
	void *entry;      /* in the in-process registry */
	char *path;       /* the lock file */
} posix_lock;

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

static char *posix_key(const struct stat *st)
{
	return ckpt__asprintf("posix:%llu:%llu", (unsigned long long)st->st_dev, (unsigned long long)st->st_ino);
}

static long elapsed_ms(const struct timespec *since)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long)(now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

static int refuse_still_exiting(const char *dir, const char *lock_path, long pid)
{
	return ckpt__fail(CKPT_EBUSY, lock_path, NULL, -1,
		"checkpoint directory %s is still locked by pid %ld, which was killed but has not finished exiting "
		"after %d s (it holds %s until it is gone); one writer per directory: wait for that process to go",
		dir, pid, EXIT_WAIT_MS / 1000, lock_path);
}

/* flock the open lock file: wait for a starting holder's pid (to name it) and for a dying holder to go. */
static int take_flock(posix_lock *l, const char *dir)
{
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
			return CKPT_OK;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return ckpt__fail_errno(errno, l->path, "cannot lock the manager's lock file");
		long pid = holder_pid(l->fd);
		ckpt__holder_state hs = pid > 0 ? ckpt__lock_holder_state(pid) : CKPT__HOLDER_GONE;
		if (hs == CKPT__HOLDER_LIVE)
			return ckpt__lock_refuse(dir, l->path, pid);
		if (hs == CKPT__HOLDER_EXITING) {
			if (pid != exiting_pid) {
				exiting_pid = pid;
				clock_gettime(CLOCK_MONOTONIC, &exiting_since);
			} else if (elapsed_ms(&exiting_since) >= EXIT_WAIT_MS) {
				return refuse_still_exiting(dir, l->path, pid);
			}
		} else if (++tries >= PID_TRIES) {
			return ckpt__lock_refuse(dir, l->path, 0);
		}
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
}

static int lock_file(posix_lock *l, const char *dir)
{
	if (!(l->path = ckpt__path_join(dir, CKPT_LOCK_FILE)))
		return CKPT_ENOMEM;
	/* held by this process: refuse before opening it (a close could drop a per-process lock on NFS) */
	struct stat st;
	char *key = NULL;
	if (stat(l->path, &st) == 0 && (key = posix_key(&st)) && ckpt__lock_registry_has(key)) {
		ckpt__free(key);
		return ckpt__lock_refuse(dir, l->path, (long)getpid());
	}
	ckpt__free(key);
	l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (l->fd < 0)
		return ckpt__fail_errno(errno, l->path, "cannot open the manager's lock file");
	if (fstat(l->fd, &st) < 0)
		return ckpt__fail_errno(errno, l->path, "cannot stat the manager's lock file");
	CKPT_TRY(take_flock(l, dir));
	/* two threads of this process racing for one directory: flock alone may let both through on NFS */
	if (!(key = posix_key(&st)))
		return CKPT_ENOMEM;
	int rc = ckpt__lock_registry_add(&l->entry, key);
	ckpt__free(key);
	if (rc == CKPT_EBUSY)
		return ckpt__lock_refuse(dir, l->path, (long)getpid());
	CKPT_TRY(rc);
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	errno = 0;
	if (ftruncate(l->fd, 0) < 0 || pwrite(l->fd, pid, (size_t)n, 0) != n)
		return ckpt__fail_errno(errno ? errno : EIO, l->path, "cannot write our pid into the lock file");
	return CKPT_OK;
}

void ckpt__posix_unlock(ckpt_vfs *vfs, void *token)
{
	(void)vfs;
	posix_lock *l = token;
	if (!l)
		return;
	ckpt__lock_registry_remove(l->entry);
	if (l->fd >= 0) {
		/* no stale pid for the next reader; a forked child closing its copy leaves the parent's pid */
		if (l->entry && l->owner == getpid() && ftruncate(l->fd, 0) < 0)
			errno = 0; /* harmless: the next holder overwrites it */
		close(l->fd); /* a lock we took dies with the descriptor */
	}
	ckpt__free(l->path);
	ckpt__free(l);
}

int ckpt__posix_lock(void **token, ckpt_vfs *vfs, const char *dir)
{
	*token = NULL;
	posix_lock *l = ckpt__calloc(1, sizeof(*l));
	if (!l)
		return CKPT_ENOMEM;
	l->fd = -1;
	l->owner = getpid();
	int rc = lock_file(l, dir);
	if (rc < 0) {
		ckpt__posix_unlock(vfs, l);
		return rc;
	}
	*token = l;
	return CKPT_OK;
}

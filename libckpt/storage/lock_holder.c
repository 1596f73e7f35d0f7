/*
 * Whether the process named in a lock file still holds its lock for good.
 *
 * A lock goes only when its holder has finished dying, and that can come
 * well after its death was decided: a SIGKILLed process first leaves an
 * uninterruptible wait (an fsync on a busy disk), then frees its memory, and
 * closes its files last; mpirun returns without waiting for the ranks it
 * killed. So a contender asks what the holder is doing: exiting (SIGKILL
 * pending, or every thread exiting or a zombie) means "wait for it to go";
 * live means "a real second writer: refuse". Linux only (/proc); elsewhere,
 * or when /proc cannot tell, a process that exists is live.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"

#define PF_EXITING_FLAG 0x4u /* include/linux/sched.h: the task is in do_exit() */
#define SIGKILL_BIT (1ull << (SIGKILL - 1))

/* The hexadecimal mask after `field` ("\nShdPnd:") in a /proc status file; 0 when absent. */
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

ckpt__holder_state ckpt__lock_holder_state(long pid)
{
	if (kill((pid_t)pid, 0) != 0 && errno != EPERM)
		return CKPT__HOLDER_GONE;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if (status_mask(path, "\nShdPnd:") & SIGKILL_BIT)
		return CKPT__HOLDER_EXITING; /* kill(2) of the process: every thread dies */
	snprintf(path, sizeof(path), "/proc/%ld/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return CKPT__HOLDER_LIVE;
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
		return CKPT__HOLDER_LIVE; /* unreadable: refuse, as without /proc */
	/* a zombie leader whose other threads still run is live */
	return live ? CKPT__HOLDER_LIVE : exiting ? CKPT__HOLDER_EXITING : CKPT__HOLDER_GONE;
}

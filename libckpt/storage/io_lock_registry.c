/*
 * The in-process half of the one-writer lock of a checkpoint directory
 * (ckpt_vfs_lock): a registry of the locks this process holds, so that a
 * second manager of the same process is refused by the registry itself and
 * not only by the file system's lock, whose per-process semantics vary (NFS
 * emulates flock with fcntl locks, which a second open in the same process
 * does not conflict with). The POSIX lock (io_posix_lock.c) keys its entry
 * by the lock file's device and inode; a file system without a lock method
 * gets this registry alone, keyed by the VFS and the directory.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"

typedef struct lock_entry {
	char *key;
	struct lock_entry *next;
} lock_entry;

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static lock_entry *registry;

static lock_entry *find_locked(const char *key)
{
	for (lock_entry *e = registry; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

int ckpt__lock_registry_has(const char *key)
{
	pthread_mutex_lock(&registry_mu);
	int held = find_locked(key) != NULL;
	pthread_mutex_unlock(&registry_mu);
	return held;
}

int ckpt__lock_registry_add(void **entry, const char *key)
{
	*entry = NULL;
	lock_entry *e = ckpt__calloc(1, sizeof(*e));
	if (!e || !(e->key = ckpt__strdup(key))) {
		ckpt__free(e);
		return CKPT_ENOMEM;
	}
	pthread_mutex_lock(&registry_mu);
	int held = find_locked(key) != NULL;
	if (!held) {
		e->next = registry;
		registry = e;
	}
	pthread_mutex_unlock(&registry_mu);
	if (held) {
		ckpt__free(e->key);
		ckpt__free(e);
		return CKPT_EBUSY; /* the caller words the refusal */
	}
	*entry = e;
	return CKPT_OK;
}

void ckpt__lock_registry_remove(void *entry)
{
	lock_entry *e = entry;
	if (!e)
		return;
	pthread_mutex_lock(&registry_mu);
	for (lock_entry **pp = &registry; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	}
	pthread_mutex_unlock(&registry_mu);
	ckpt__free(e->key);
	ckpt__free(e);
}

int ckpt__lock_refuse(const char *dir, const char *lock_path, long pid)
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

int ckpt__lock_registry_take(void **token, ckpt_vfs *vfs, const char *dir)
{
	char *key = ckpt__asprintf("vfs:%p:%s", (void *)vfs, dir);
	if (!key)
		return CKPT_ENOMEM;
	int rc = ckpt__lock_registry_add(token, key);
	ckpt__free(key);
	if (rc == CKPT_EBUSY)
		rc = ckpt__lock_refuse(dir, dir, (long)getpid());
	return rc;
}

void ckpt__lock_registry_drop(void *token)
{
	ckpt__lock_registry_remove(token);
}

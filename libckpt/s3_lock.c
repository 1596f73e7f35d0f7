/*
 * One writer per S3 prefix: the lock object `<prefix>/checkpoint.lock`,
 * created by a conditional PUT (If-None-Match: *) that the server grants to
 * one contender only. Its body names the holder ("host H pid P lease L").
 *
 * The holder renews it (an unconditional PUT of the same body, after
 * checking the body is still its own) every lease/3 seconds from a thread,
 * so its Last-Modified stays fresh. A contender that finds the object treats
 * it as stale, deletes it and tries again when either
 *  - the server's clock (its Date minus the object's Last-Modified) says it
 *    was not renewed for longer than the lease it states
 *    (CKPT_S3_LOCK_LEASE_SECONDS, default 60 s), or
 *  - the holder runs on this host and its pid no longer exists (a killed
 *    trainer restarted on the same machine does not wait for the lease).
 * Otherwise the contender gets CKPT_EBUSY naming the holder. Between reading
 * a stale lock and deleting it another contender may have replaced it; the
 * window is one round trip and only opens after a holder has died.
 *
 * The lock is also entered in the in-process registry, so a second manager
 * of the same process is refused without a request.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"
#include "s3_internal.h"

typedef struct s3_lock {
	s3_client *c;
	char *bucket, *key, *path;
	char body[320];
	void *entry;          /* in the in-process registry */
	pid_t owner;
	pthread_t renewer;
	int renewing;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
} s3_lock;

static int put_lock(s3_lock *l, int exclusive, s3_response *rs)
{
	const char *hdrs[] = { exclusive ? "If-None-Match: *" : NULL, NULL };
	s3_request rq = { "PUT", l->bucket, l->key, NULL, l->body, strlen(l->body), hdrs, !exclusive, 0, 0, 0, NULL, 1 };
	static const long quiet_412[] = { 412, 0 };
	return s3_perform_quiet(l->c, &rq, rs, exclusive ? quiet_412 : NULL);
}

/* The lock object's body (NUL-terminated, caller frees) and its age by the server's clock. */
static int get_lock(s3_lock *l, char **body, long long *age)
{
	static const long quiet_404[] = { 404, 0 };
	s3_request rq = { "GET", l->bucket, l->key, NULL, NULL, 0, NULL, 1, 0, 0, 0, NULL, 0 };
	s3_response rs;
	int rc = s3_perform_quiet(l->c, &rq, &rs, quiet_404);
	if (rc == CKPT_OK) {
		*body = rs.body ? rs.body : ckpt__strdup("");
		rs.body = NULL;
		*age = rs.date && rs.last_modified ? rs.date - rs.last_modified : 0;
	}
	s3_response_clear(&rs);
	return rc;
}

static void *renew(void *arg)
{
	s3_lock *l = arg;
	unsigned lease = s3_client_config(l->c)->lock_lease_seconds;
	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += lease / 3 ? lease / 3 : 1;
		while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &until) != ETIMEDOUT)
			;
		if (l->stop)
			break;
		pthread_mutex_unlock(&l->mu);
		char *body = NULL;
		long long age;
		int mine = get_lock(l, &body, &age) == CKPT_OK && strcmp(body, l->body) == 0;
		ckpt__free(body);
		s3_response rs;
		if (mine)
			put_lock(l, 0, &rs), s3_response_clear(&rs);
		ckpt_error_clear(); /* a failed renewal is retried at the next period; the thread has no caller */
		pthread_mutex_lock(&l->mu);
		if (!mine)
			break; /* taken over (we were stale): never overwrite the new holder */
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static int holder_dead_here(const char *body)
{
	char host[256] = "", me[256] = "";
	long pid = 0;
	if (sscanf(body, "host %255s pid %ld", host, &pid) != 2 || pid <= 0)
		return 0;
	if (gethostname(me, sizeof(me) - 1) < 0 || strcmp(host, me) != 0)
		return 0;
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

static void lock_free(s3_lock *l)
{
	ckpt__lock_registry_remove(l->entry);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	ckpt__free(l->bucket);
	ckpt__free(l->key);
	ckpt__free(l->path);
	ckpt__free(l);
}

static int acquire(s3_lock *l, const char *dir)
{
	unsigned lease = s3_client_config(l->c)->lock_lease_seconds;
	for (int round = 0; round < 4; round++) {
		s3_response rs;
		int rc = put_lock(l, 1, &rs);
		long status = rs.status;
		s3_response_clear(&rs);
		if (rc == CKPT_OK)
			return CKPT_OK;
		if (!(rc == CKPT_EBUSY && status == 412))
			return rc;
		char *body = NULL;
		long long age = 0;
		rc = get_lock(l, &body, &age);
		if (rc == CKPT_ENOTFOUND)
			continue; /* released meanwhile */
		if (rc < 0)
			return rc;
		unsigned held_lease = lease;
		const char *lp = strstr(body, " lease ");
		if (lp)
			held_lease = (unsigned)strtoul(lp + 7, NULL, 10);
		if (!held_lease)
			held_lease = lease;
		if (age > (long long)held_lease || holder_dead_here(body)) {
			ckpt__free(body);
			s3_request rq = { "DELETE", l->bucket, l->key, NULL, NULL, 0, NULL, 1, 0, 0, 0, NULL, 0 };
			rc = s3_perform(l->c, &rq, &rs);
			s3_response_clear(&rs);
			if (rc < 0)
				return rc;
			continue;
		}
		size_t n = strlen(body);
		while (n && (body[n - 1] == '\n' || body[n - 1] == '\r'))
			body[--n] = '\0';
		rc = ckpt__fail(CKPT_EBUSY, l->path, NULL, -1,
			"checkpoint prefix %s is in use by another trainer (%s; renewed %lld s ago, stale after %u s); "
			"one writer per prefix: stop that process first, or save to another prefix",
			dir, body, age, held_lease);
		ckpt__free(body);
		return rc;
	}
	return ckpt__fail(CKPT_EBUSY, l->path, NULL, -1,
		"checkpoint prefix %s: the lock changed hands during 4 attempts to take it", dir);
}

int ckpt__s3_lock(void **token, ckpt_vfs *vfs, const char *dir)
{
	*token = NULL;
	s3_lock *l = ckpt__calloc(1, sizeof(*l));
	if (!l)
		return CKPT_ENOMEM;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	l->c = ckpt__vfs_s3_client(vfs);
	l->owner = getpid();
	char *prefix = NULL;
	int rc = ckpt_s3_path_split(&l->bucket, &prefix, dir);
	if (rc == CKPT_OK) {
		l->key = prefix[0] ? ckpt__asprintf("%s/%s", prefix, CKPT_LOCK_FILE) : ckpt__strdup(CKPT_LOCK_FILE);
		l->path = ckpt__asprintf("s3://%s/%s", l->bucket, l->key ? l->key : "");
		rc = l->key && l->path ? CKPT_OK : CKPT_ENOMEM;
	}
	ckpt__free(prefix);
	if (rc == CKPT_OK) {
		char host[256] = "unknown";
		gethostname(host, sizeof(host) - 1);
		unsigned nonce = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16) ^ (unsigned)(uintptr_t)l;
		snprintf(l->body, sizeof(l->body), "host %s pid %ld lease %u nonce %08x\n", host, (long)getpid(),
			s3_client_config(l->c)->lock_lease_seconds, nonce);
		char *key = ckpt__asprintf("s3:%s", l->path);
		rc = key ? ckpt__lock_registry_add(&l->entry, key) : CKPT_ENOMEM;
		ckpt__free(key);
		if (rc == CKPT_EBUSY)
			rc = ckpt__lock_refuse(dir, l->path, (long)getpid());
	}
	if (rc == CKPT_OK)
		rc = acquire(l, dir);
	if (rc == CKPT_OK && pthread_create(&l->renewer, NULL, renew, l) == 0)
		l->renewing = 1;
	else if (rc == CKPT_OK)
		rc = ckpt__fail(CKPT_ERROR, l->path, NULL, -1, "cannot start the thread that renews the lock");
	if (rc < 0) {
		if (l->entry && rc != CKPT_EBUSY) {
			/* we may hold the object: give it back */
			s3_request rq = { "DELETE", l->bucket, l->key, NULL, NULL, 0, NULL, 1, 0, 0, 0, NULL, 0 };
			s3_response rs;
			ckpt__error_slot keep = { 0 };
			ckpt__error_capture(&keep);
			s3_perform(l->c, &rq, &rs);
			s3_response_clear(&rs);
			ckpt__error_raise(&keep);
			ckpt__error_slot_clear(&keep);
		}
		lock_free(l);
		return rc;
	}
	*token = l;
	return CKPT_OK;
}

void ckpt__s3_unlock(ckpt_vfs *vfs, void *token)
{
	(void)vfs;
	s3_lock *l = token;
	if (!l)
		return;
	if (l->renewing) {
		pthread_mutex_lock(&l->mu);
		l->stop = 1;
		pthread_cond_broadcast(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->renewer, NULL);
	}
	if (l->owner == getpid()) {
		ckpt__error_slot keep = { 0 };
		ckpt__error_capture(&keep);
		char *body = NULL;
		long long age;
		if (get_lock(l, &body, &age) == CKPT_OK && strcmp(body, l->body) == 0) {
			s3_request rq = { "DELETE", l->bucket, l->key, NULL, NULL, 0, NULL, 1, 0, 0, 0, NULL, 0 };
			s3_response rs;
			s3_perform(l->c, &rq, &rs);
			s3_response_clear(&rs);
		}
		ckpt__free(body);
		ckpt__error_raise(&keep);
		ckpt__error_slot_clear(&keep);
	}
	lock_free(l);
}

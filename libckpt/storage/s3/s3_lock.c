/*
 * One writer per S3 prefix: the lock object `<prefix>/checkpoint.lock`,
 * created by a conditional PUT (If-None-Match: *) that the server grants to
 * one contender only. Its body names the holder and counts its renewals
 * ("host H pid P lease L nonce N renewal K"), so every write of it has a
 * new ETag.
 *
 * The holder renews it every lease/3 seconds from a thread with a PUT
 * conditional on the ETag of its own last write (If-Match), so its
 * Last-Modified stays fresh and a renewal never overwrites a lock that
 * was taken over meanwhile (the PUT is refused with 412 and the holder
 * stops renewing). A contender that finds the object treats it as stale
 * when either
 *  - the server's clock (its Date minus the object's Last-Modified) says it
 *    was not renewed for longer than the lease it states
 *    (CKPT_S3_LOCK_LEASE_SECONDS, default 60 s), or
 *  - the holder runs on this host and its pid no longer exists (a killed
 *    trainer restarted on the same machine does not wait for the lease).
 * It then takes the lock over in one request: a PUT of its own body with
 * If-Match: <the ETag of the stale version it read>. Of several contenders
 * that judged the same version stale, the server grants that PUT to one;
 * the others get 412, read the winner's fresh lock and fail with
 * CKPT_EBUSY naming it. A holder that renewed in between changed the ETag,
 * so its lock is not taken either. (SeaweedFS, the test server, honours
 * If-Match on PUT and DELETE, as S3 does; tests/s3/test_s3_lock.c races takers.)
 * Otherwise the contender gets CKPT_EBUSY naming the holder. Release is a
 * DELETE conditional on the holder's ETag: never another writer's lock.
 *
 * The lock is taken only from a server that honours those conditions
 * (s3_conditional.c probes it once per endpoint and bucket); a server that
 * ignores them gets a clear refusal unless CKPT_S3_SINGLE_WRITER=1.
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
	char ident[288];      /* "host H pid P lease L nonce N": who holds it */
	char body[320];       /* ident + " renewal K\n": the last body written */
	unsigned renewal;
	char etag[128];       /* the ETag of our last write of the object ("" until we hold it) */
	void *entry;          /* in the in-process registry */
	pid_t owner;
	pthread_t renewer;
	int renewing;
	int unchecked;        /* CKPT_S3_SINGLE_WRITER=1 on a server without conditional writes: no lock object */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
} s3_lock;

static const long quiet_404_412[] = { 404, 412, 0 };

static void next_body(s3_lock *l)
{
	snprintf(l->body, sizeof(l->body), "%s renewal %u\n", l->ident, l->renewal++);
}

/*
 * PUT our next body: created only if absent (if_match NULL), or replacing
 * only the version whose ETag is if_match. Conditional, so tried once. On
 * success l->etag is the new version's. 412 (and 404: the version is gone)
 * come back quietly.
 */
static int put_lock(s3_lock *l, const char *if_match)
{
	char cond[160];
	if (if_match)
		snprintf(cond, sizeof(cond), "If-Match: %s", if_match);
	else
		snprintf(cond, sizeof(cond), "If-None-Match: *");
	const char *hdrs[] = { cond, NULL };
	next_body(l);
	s3_request rq = { "PUT", l->bucket, l->key, NULL, l->body, strlen(l->body), hdrs, S3_ONCE, 0, 0, 0, NULL, 1 };
	s3_response rs;
	int rc = s3_perform_quiet(l->c, &rq, &rs, quiet_404_412);
	if (rc == CKPT_OK)
		snprintf(l->etag, sizeof(l->etag), "%s", rs.etag);
	s3_response_clear(&rs);
	return rc;
}

/* The lock object's body (NUL-terminated, caller frees), its ETag and its age by the server's clock. */
static int get_lock(s3_lock *l, char **body, char etag[128], long long *age)
{
	static const long quiet_404[] = { 404, 0 };
	s3_request rq = { "GET", l->bucket, l->key, NULL, NULL, 0, NULL, S3_RETRIED, 0, 0, 0, NULL, 0 };
	s3_response rs;
	int rc = s3_perform_quiet(l->c, &rq, &rs, quiet_404);
	if (rc == CKPT_OK) {
		*body = rs.body ? rs.body : ckpt__strdup("");
		rs.body = NULL;
		snprintf(etag, 128, "%s", rs.etag);
		*age = rs.date && rs.last_modified ? rs.date - rs.last_modified : 0;
	}
	s3_response_clear(&rs);
	return rc;
}

/* Does the lock body `body` name us (whatever its renewal count)? */
static int is_ours(const s3_lock *l, const char *body)
{
	size_t n = strlen(l->ident);
	return strncmp(body, l->ident, n) == 0 && strncmp(body + n, " renewal ", 9) == 0;
}

/*
 * After a refused conditional write of ours: is the object still ours (a
 * write whose answer was lost, or the ETag changed by the server)? Then
 * adopt its ETag and return 1.
 */
static int still_ours(s3_lock *l)
{
	char *body = NULL, etag[128];
	long long age;
	ckpt__error_slot keep = { 0 };
	ckpt__error_capture(&keep); /* the caller's error outlives this look */
	int ours = get_lock(l, &body, etag, &age) == CKPT_OK && is_ours(l, body);
	if (ours)
		snprintf(l->etag, sizeof(l->etag), "%s", etag);
	ckpt__free(body);
	ckpt__error_raise(&keep);
	ckpt__error_slot_clear(&keep);
	return ours;
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
		char etag[128];
		snprintf(etag, sizeof(etag), "%s", l->etag);
		int rc = put_lock(l, etag);
		/* refused: taken over (we were stale) unless the object still names us */
		int lost = (rc == CKPT_EBUSY || rc == CKPT_ENOTFOUND) && !still_ours(l);
		ckpt_error_clear(); /* a failed renewal is retried at the next period; the thread has no caller */
		pthread_mutex_lock(&l->mu);
		if (lost)
			break; /* never overwrite the new holder */
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* Delete the lock object if it is ours, conditionally on its ETag (a cleanup: retried); errors kept quiet. */
static void release_if_ours(s3_lock *l)
{
	ckpt__error_slot keep = { 0 };
	ckpt__error_capture(&keep);
	for (int round = 0; round < 2 && l->etag[0]; round++) {
		char cond[160];
		snprintf(cond, sizeof(cond), "If-Match: %s", l->etag);
		const char *hdrs[] = { cond, NULL };
		s3_request rq = { "DELETE", l->bucket, l->key, NULL, NULL, 0, hdrs, S3_CLEANUP, 0, 0, 0, NULL, 0 };
		s3_response rs;
		int rc = s3_perform_quiet(l->c, &rq, &rs, quiet_404_412);
		s3_response_clear(&rs);
		if (rc != CKPT_EBUSY || !still_ours(l))
			break;
	}
	ckpt__error_raise(&keep);
	ckpt__error_slot_clear(&keep);
}

static int holder_dead_here(const char *body)
{
	char host[256] = "", me[256] = "";
	long pid = 0;
	if (sscanf(body, "host %255s pid %ld", host, &pid) != 2 || pid <= 0)
		return 0;
	if (gethostname(me, sizeof(me) - 1) < 0 || strcmp(host, me) != 0)
		return 0;
	/*
	 * A zombie holds nothing; a holder that is exiting (SIGKILL pending: mpirun
	 * returns before its killed ranks are gone) is waited for, up to 10 s.
	 */
	for (int waited = 0; waited < 200; waited++) {
		ckpt__holder_state st = ckpt__lock_holder_state(pid);
		if (st != CKPT__HOLDER_EXITING)
			return st == CKPT__HOLDER_GONE;
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return 0;
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
		int rc = put_lock(l, NULL);
		if (rc == CKPT_OK)
			return CKPT_OK;
		if (rc != CKPT_EBUSY)
			return rc;
		char *body = NULL, etag[128];
		long long age = 0;
		rc = get_lock(l, &body, etag, &age);
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
		if ((age > (long long)held_lease || holder_dead_here(body)) && etag[0]) {
			ckpt__free(body);
			/* replace exactly the stale version: one contender wins, a renewed lock is not taken */
			rc = put_lock(l, etag);
			if (rc == CKPT_OK)
				return CKPT_OK;
			if (rc != CKPT_EBUSY && rc != CKPT_ENOTFOUND)
				return rc;
			continue; /* another contender took it, or it changed: look again */
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
		char host[200] = "unknown"; /* HOST_NAME_MAX is 64; ident must hold it and the rest */
		gethostname(host, sizeof(host) - 1);
		unsigned nonce = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16) ^ (unsigned)(uintptr_t)l;
		snprintf(l->ident, sizeof(l->ident), "host %s pid %ld lease %u nonce %08x", host, (long)getpid(),
			s3_client_config(l->c)->lock_lease_seconds, nonce);
		char *key = ckpt__asprintf("s3:%s", l->path);
		rc = key ? ckpt__lock_registry_add(&l->entry, key) : CKPT_ENOMEM;
		ckpt__free(key);
		if (rc == CKPT_EBUSY)
			rc = ckpt__lock_refuse(dir, l->path, (long)getpid());
	}
	if (rc == CKPT_OK) {
		char *prefix_key = NULL, *b = NULL;
		rc = ckpt_s3_path_split(&b, &prefix_key, dir);
		if (rc == CKPT_OK && (rc = s3_conditional_writes_check(l->c, b, prefix_key, dir)) == 1) {
			l->unchecked = 1;
			rc = CKPT_OK;
		}
		ckpt__free(prefix_key);
		ckpt__free(b);
	}
	if (rc == CKPT_OK && l->unchecked) {
		*token = l; /* the user guarantees one writer: only the in-process registry excludes */
		return CKPT_OK;
	}
	if (rc == CKPT_OK)
		rc = acquire(l, dir);
	if (rc == CKPT_OK && pthread_create(&l->renewer, NULL, renew, l) == 0)
		l->renewing = 1;
	else if (rc == CKPT_OK)
		rc = ckpt__fail(CKPT_ERROR, l->path, NULL, -1, "cannot start the thread that renews the lock");
	if (rc < 0) {
		if (l->entry && rc != CKPT_EBUSY && (l->etag[0] || still_ours(l)))
			release_if_ours(l); /* we hold the object (maybe a create whose answer was lost): give it back */
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
	if (l->owner == getpid() && !l->unchecked)
		release_if_ours(l);
	lock_free(l);
}

/*
 * Thread-local last error (libgit2's errors.c model): never NULL, with a
 * static out-of-memory error that works even when formatting cannot allocate.
 * Strings are owned by the thread's slot and replaced on the next failure.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

typedef struct {
	ckpt_error pub;
	char *message, *path, *variable;
} error_state;

static _Thread_local error_state tls_error = { { CKPT_OK, "", NULL, NULL, -1, 0 }, NULL, NULL, NULL };

static const ckpt_error oom_error = { CKPT_ENOMEM, "out of memory", NULL, NULL, -1, ENOMEM };
static _Thread_local int tls_oom;
/* errors recorded on this thread so far: tells whether a call (a provider's) set one */
static _Thread_local uint64_t tls_error_seq;

uint64_t ckpt__error_seq(void)
{
	return tls_error_seq;
}

int ckpt_version_number(void) { return CKPT_VERSION_NUMBER; }

const char *ckpt_status_name(int code)
{
	switch (code) {
	case CKPT_OK: return "CKPT_OK";
	case CKPT_ERROR: return "CKPT_ERROR";
	case CKPT_ENOTFOUND: return "CKPT_ENOTFOUND";
	case CKPT_EFORMAT: return "CKPT_EFORMAT";
	case CKPT_ECHECKSUM: return "CKPT_ECHECKSUM";
	case CKPT_EUNSUPPORTED: return "CKPT_EUNSUPPORTED";
	case CKPT_EIO: return "CKPT_EIO";
	case CKPT_ENOMEM: return "CKPT_ENOMEM";
	case CKPT_EINVAL: return "CKPT_EINVAL";
	case CKPT_ITEROVER: return "CKPT_ITEROVER";
	case CKPT_ESCOPE: return "CKPT_ESCOPE";
	case CKPT_EMISMATCH: return "CKPT_EMISMATCH";
	case CKPT_ELIMIT: return "CKPT_ELIMIT";
	case CKPT_EBUSY: return "CKPT_EBUSY";
	case CKPT_EEXIST: return "CKPT_EEXIST";
	default: return "CKPT_UNKNOWN";
	}
}

/*
 * A thread that exits frees its error's strings (a key's destructor: a
 * _Thread_local has none), so a trainer's worker threads that met an error
 * leak nothing.
 */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static _Thread_local int tls_exit_registered;

static void free_at_thread_exit(void *p)
{
	error_state *e = p;
	free(e->message);
	free(e->path);
	free(e->variable);
	e->message = e->path = e->variable = NULL;
	e->pub.message = "";
	e->pub.path = e->pub.variable = NULL;
}

static void make_exit_key(void)
{
	pthread_key_create(&exit_key, free_at_thread_exit);
}

static void register_thread_exit(error_state *e)
{
	if (tls_exit_registered)
		return;
	tls_exit_registered = 1;
	if (pthread_once(&exit_key_once, make_exit_key) == 0)
		pthread_setspecific(exit_key, e);
}

/* Error strings use plain malloc: they must survive a failing allocator hook. */
static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void set_error(int code, const char *path, const char *var, int64_t offset, int sys_errno, char *msg)
{
	error_state *e = &tls_error;
	register_thread_exit(e);
	tls_error_seq++;
	free(e->message);
	free(e->path);
	free(e->variable);
	e->message = msg;
	e->path = dup_or_null(path);
	e->variable = dup_or_null(var);
	tls_oom = (msg == NULL);
	e->pub.code = code;
	e->pub.message = msg ? msg : "out of memory while recording an error";
	e->pub.path = e->path;
	e->pub.variable = e->variable;
	e->pub.offset = offset;
	e->pub.sys_errno = sys_errno;
}

static char *vformat(const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return NULL;
	char *s = malloc((size_t)n + 1);
	if (s)
		vsnprintf(s, (size_t)n + 1, fmt, ap);
	return s;
}

int ckpt_error_set(int code, const char *path, const char *var, int64_t offset, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *msg = vformat(fmt, ap);
	va_end(ap);
	if (code == CKPT_ENOMEM && !msg) {
		tls_oom = 1;
		return code;
	}
	set_error(code, path, var, offset, 0, msg);
	return code;
}

int ckpt__fail_errno(int err, const char *path, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *body = vformat(fmt, ap);
	va_end(ap);
	char *msg = NULL;
	if (body) {
		const char *why = strerror(err);
		size_t n = strlen(body) + strlen(why) + 3;
		msg = malloc(n);
		if (msg)
			snprintf(msg, n, "%s: %s", body, why);
		free(body);
	}
	int code = err == ENOENT ? CKPT_ENOTFOUND : err == ENOMEM ? CKPT_ENOMEM : err == EEXIST ? CKPT_EEXIST : CKPT_EIO;
	set_error(code, path, NULL, -1, err, msg);
	return code;
}

void ckpt__error_annotate(const char *path, const char *var)
{
	error_state *e = &tls_error;
	if (path && !e->path) {
		e->path = strdup(path);
		e->pub.path = e->path;
	}
	if (var && !e->variable) {
		e->variable = strdup(var);
		e->pub.variable = e->variable;
	}
}

const ckpt_error *ckpt_error_last(void)
{
	if (tls_oom && tls_error.pub.code == CKPT_OK)
		return &oom_error;
	return &tls_error.pub;
}

void ckpt_error_clear(void)
{
	set_error(CKPT_OK, NULL, NULL, -1, 0, NULL);
	tls_error.pub.message = "";
	tls_oom = 0;
}

int ckpt__message_names(const char *message, const char *name)
{
	if (!message || !name || !*name)
		return 0;
	size_t n = strlen(name);
	for (const char *p = strchr(message, '\''); p; p = strchr(p + 1, '\''))
		if (strncmp(p + 1, name, n) == 0 && p[1 + n] == '\'')
			return 1;
	return 0;
}

char *ckpt_error_format(const ckpt_error *e, char *buf, size_t n)
{
	if (!buf || n == 0)
		return buf;
	if (!e)
		e = ckpt_error_last();
	/* "<path>: variable '<v>' at offset <n>: <message>", omitting unknown parts */
	char where[64] = "";
	if (e->offset >= 0)
		snprintf(where, sizeof(where), "at offset %lld", (long long)e->offset);
	/* most messages name their variable already: say it once */
	const char *var = ckpt__message_names(e->message, e->variable) ? NULL : e->variable;
	snprintf(buf, n, "%s%s%s%s%s%s%s%s",
		e->path ? e->path : "", e->path ? ": " : "",
		var ? "variable '" : "", var ? var : "", var ? "'" : "",
		(var && where[0]) ? " " : "", where, (var || where[0]) ? ": " : "");
	size_t used = strlen(buf);
	if (used < n)
		snprintf(buf + used, n - used, "%s", e->message ? e->message : "");
	return buf;
}

void ckpt__error_slot_clear(ckpt__error_slot *slot)
{
	free(slot->message);
	free(slot->path);
	free(slot->variable);
	memset(slot, 0, sizeof(*slot));
	slot->offset = -1;
}

void ckpt__error_capture(ckpt__error_slot *slot)
{
	const ckpt_error *e = ckpt_error_last();
	ckpt__error_slot_clear(slot);
	slot->code = e->code;
	slot->message = dup_or_null(e->message);
	slot->path = dup_or_null(e->path);
	slot->variable = dup_or_null(e->variable);
	slot->offset = e->offset;
	slot->sys_errno = e->sys_errno;
}

int ckpt__error_raise(const ckpt__error_slot *slot)
{
	set_error(slot->code, slot->path, slot->variable, slot->offset, slot->sys_errno,
		dup_or_null(slot->message ? slot->message : "error in replica"));
	return slot->code;
}

int ckpt_status_of(const void *result)
{
	return result ? CKPT_OK : ckpt_error_last()->code;
}

void ckpt__borrowed_status(int rc, int have_result)
{
	/* ckpt_status_of reads a NULL result's status from the last error: make
	 * it the code the call returned, and CKPT_OK for a successful NULL */
	if (rc != CKPT_OK && ckpt_error_last()->code != rc)
		ckpt_error_set(rc, NULL, NULL, -1, "%s", ckpt_status_name(rc));
	else if (rc == CKPT_OK && !have_result)
		ckpt_error_clear();
}

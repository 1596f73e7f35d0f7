/* ts_assert_error_at: see error_assert.h. */
#include <criterion/criterion.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "error_assert.h"

void ts_assert_error_at(int rc, int code, const char *needle, const char *path)
{
	const ckpt_error *e = ckpt_error_last();
	cr_assert_eq(rc, code, "rc %d (%s), want %d", rc, e->message ? e->message : "", code);
	cr_assert(e->message && strstr(e->message, needle), "message '%s' lacks '%s'", e->message ? e->message : "", needle);
	cr_assert(e->path && strcmp(e->path, path) == 0, "path '%s', want '%s'", e->path ? e->path : "(null)", path);
}

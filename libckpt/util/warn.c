/* A warning to the caller's callback, or to stderr when there is none. */
#include <stdarg.h>
#include <stdio.h>
#include "../internal.h"
#include "warn.h"

void ckpt__warn(ckpt_warning_fn fn, void *ctx, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (fn)
		fn(buf, ctx);
	else
		fprintf(stderr, "libckpt: warning: %s\n", buf);
}

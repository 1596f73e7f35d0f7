/* warn.c: a generic utility of the core (depends on nothing above libckpt/util/). */
#ifndef CKPT_UTIL_WARN_H
#define CKPT_UTIL_WARN_H

#include "ckpt/ckpt.h"

/** Format a warning and hand it to fn(message, ctx), or print it to stderr when fn is NULL. */
void ckpt__warn(ckpt_warning_fn fn, void *ctx, const char *fmt, ...) CKPT_PRINTF(3, 4);

#endif

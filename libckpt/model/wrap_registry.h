/* The host memory live variables wrap, refused when it overlaps (wrap_registry.c). */
#ifndef CKPT_WRAP_REGISTRY_H
#define CKPT_WRAP_REGISTRY_H

#include <stdint.h>

/* Record bufs[0..nbufs), nbytes each, as `owner`'s; EINVAL naming both variables when one overlaps a live one. */
int ckpt__wrap_register(const void *owner, void *const *bufs, int nbufs, uint64_t nbytes, const char *name);
/* Forget what ckpt__wrap_register recorded for `owner`. */
void ckpt__wrap_unregister(const void *owner, void *const *bufs, int nbufs, uint64_t nbytes);
/* EINVAL (naming `name`, `what` and the other variable) when [p, p + nbytes) overlaps a live wrap. */
int ckpt__wrap_check(const void *p, uint64_t nbytes, const char *name, const char *what);

#endif

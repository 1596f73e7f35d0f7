/*
 * The conformance suite of the memory-provider interface (ckpt/memory.h):
 * what the library relies on from any provider, checked through the
 * provider's own copies (so it runs on a GPU provider as on the host one),
 * then the library's mirrored-variable paths over a strategy made on it.
 * Uses the public API only: compile it with any provider.
 */
#ifndef CKPT_TEST_MEMORY_CONFORMANCE_H
#define CKPT_TEST_MEMORY_CONFORMANCE_H

#include <stddef.h>
#include "ckpt/ckpt.h"

/**
 * Run every check over `p`. `report` (may be NULL) receives "N passed" or
 * "N passed, M failed: <first failures>". Returns the number of failed
 * checks (0: conformant).
 */
int ckpt_memory_conformance(const ckpt_memory_provider *p, char *report, size_t report_len);

#endif

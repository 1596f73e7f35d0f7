/*
 * Whether fresh tensor memory is advised as transparent huge pages: the one
 * place that decides (hugebuf.c's buffers and blocks, slab.c's blocks, the
 * bundle reader's read buffers all ask here).
 *
 * Huge pages were the default until measured in whole processes: a fresh
 * process's first touch of its tensor memory is what a restore pays, and on
 * this project's VMs (Firecracker with free page reporting, order 11) free
 * 2 MiB blocks are the ones handed back to the host, so a huge page faults
 * in from the host: 400 MiB touched in 1.0 s as huge pages, 0.15 s as
 * 4 KiB pages (5 s apart from the last big free, 3 runs each). The
 * in-process figures that had chosen huge pages (0.3 against 7-10 GB/s)
 * reused memory the process had already faulted in. CKPT_HUGE_PAGES=1 turns
 * them back on where a machine keeps its memory (bare metal, no balloon).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "huge_advice.h"

#define HUGE_PAGE ((uintptr_t)2 << 20)

static int huge_wanted;
static pthread_once_t huge_once = PTHREAD_ONCE_INIT;

static void huge_read_env(void)
{
	const char *e = getenv("CKPT_HUGE_PAGES");
	huge_wanted = e && strcmp(e, "1") == 0;
}

void ckpt__advise_huge(void *p, size_t n)
{
	pthread_once(&huge_once, huge_read_env);
#ifdef MADV_HUGEPAGE
	if (!huge_wanted)
		return;
	uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	uintptr_t b = ((uintptr_t)p + n) & ~(HUGE_PAGE - 1);
	if (b > a)
		(void)madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
	(void)p;
	(void)n;
#endif
}

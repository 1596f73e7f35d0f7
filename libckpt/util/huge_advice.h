/* huge_advice.c: a generic utility of the core (depends on nothing above libckpt/util/). */
#ifndef CKPT_UTIL_HUGE_ADVICE_H
#define CKPT_UTIL_HUGE_ADVICE_H

#include <stddef.h>

/**
 * Ask for transparent huge pages on the whole 2 MiB pages inside
 * [p, p + n) — only when CKPT_HUGE_PAGES=1 (read once). Off by default:
 * on the VMs this project is measured on (Firecracker, free page reporting)
 * a huge page lands on memory the host has taken back, and first touch ran
 * at 0.4 GB/s against 2.7 GB/s for 4 KiB pages (a 2.1 GB restore from S3:
 * 6.0-7.7 s with, 3.3-4.0 s without). Only a hint either way.
 */
void ckpt__advise_huge(void *p, size_t n);

#endif

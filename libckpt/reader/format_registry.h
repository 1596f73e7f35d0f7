/*
 * The core's one door to formats/: the backend interface (formats/format.h:
 * the reader and writer state shared with the backends, the row-range and
 * piece helpers they call back) and the table of compiled-in backends
 * (format_registry.c). Files of libckpt/ include this header, never
 * formats/ directly, and only format_registry.c names a backend, so adding
 * a format touches formats/ and that table alone (curl's vtls table).
 * scripts/include_graph.py checks both rules.
 */
#ifndef CKPT_FORMAT_REGISTRY_H
#define CKPT_FORMAT_REGISTRY_H

#include "formats/format.h"

/**
 * The backend whose bid() on PATH is highest (head: the first nhead bytes of
 * the file, nhead 0 when it is absent or a directory), or NULL when none
 * bids (every bid negative).
 */
const ckpt_format *ckpt__format_bid(ckpt_vfs *vfs, const char *path, const unsigned char *head, size_t nhead);

/** The backend that writes FORMAT (one of its write_formats names), or NULL. */
const ckpt_format *ckpt__format_writer(const char *format);

/** F's incremental-save methods, or NULL when F cannot write only what changed. */
const ckpt__format_incr *ckpt__format_incr_of(const ckpt_format *f);

#endif

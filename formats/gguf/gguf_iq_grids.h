/*
 * The lookup tables of ggml's IQ block types (ggml-common.h), defined in
 * gguf_iq_grids.c, which scripts/gen_iq_grids.py generates from gguf-py's
 * gguf/quants.py. A grid row is the 8 (or 4) element magnitudes one index
 * selects, byte by byte as ggml's uint64 (uint32) grid words hold them.
 */
#ifndef CKPT_GGUF_IQ_GRIDS_H
#define CKPT_GGUF_IQ_GRIDS_H

#include <stdint.h>

extern const uint8_t ckpt__ksigns_iq2xs[128];
extern const int8_t ckpt__kvalues_iq4nl[16];
extern const uint8_t ckpt__iq2xxs_grid[256][8];
extern const uint8_t ckpt__iq2xs_grid[512][8];
extern const uint8_t ckpt__iq2s_grid[1024][8];
extern const uint8_t ckpt__iq3xxs_grid[256][4];
extern const uint8_t ckpt__iq3s_grid[512][4];
extern const int8_t ckpt__iq1s_grid[2048][8];

#endif

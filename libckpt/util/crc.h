/* crc.c: a generic utility of the core (depends on nothing above libckpt/util/). */
#ifndef CKPT_UTIL_CRC_H
#define CKPT_UTIL_CRC_H

#include <stddef.h>
#include <stdint.h>

/** crc32c of A || B from crc1 = crc32c(A), crc2 = crc32c(B) and len2 = |B| (ckpt_crc32c_extend's convention). */
uint32_t ckpt__crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);
/** The operator ckpt__crc32c_combine applies for len2 (many combines of one length: computed once). */
uint32_t ckpt__crc32c_shift(uint64_t len2);
/** ckpt__crc32c_combine with shift = ckpt__crc32c_shift(len2). */
uint32_t ckpt__crc32c_combine_shift(uint32_t crc1, uint32_t crc2, uint32_t shift);

#endif

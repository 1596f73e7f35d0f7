/*
 * CRC-32C through ISA-L's crc32_iscsi (hardware-accelerated). ISA-L's
 * convention is an un-inverted running value, and its length is an int, so
 * large buffers are fed in pieces.
 */
#include <isa-l.h>
#include "internal.h"

uint32_t ckpt_crc32c_extend(uint32_t crc, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	uint32_t c = ~crc;
	while (n > 0) {
		size_t k = n > (1u << 30) ? (1u << 30) : n;
		c = crc32_iscsi((unsigned char *)p, (int)k, c);
		p += k;
		n -= k;
	}
	return ~c;
}

#define MASK_DELTA 0xa282ead8u

uint32_t ckpt_crc32c_mask(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + MASK_DELTA;
}

uint32_t ckpt_crc32c_unmask(uint32_t masked)
{
	uint32_t r = masked - MASK_DELTA;
	return (r >> 17) | (r << 15);
}

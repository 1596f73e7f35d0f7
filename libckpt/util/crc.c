/*
 * CRC-32C through ISA-L's crc32_iscsi (hardware-accelerated). ISA-L's
 * convention is an un-inverted running value, and its length is an int, so
 * large buffers are fed in pieces.
 */
#include <isa-l.h>
#include "../internal.h"

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

/*
 * Combining (zlib 1.2.12's crc32_combine, for the Castagnoli polynomial):
 * crc(A || B) = crc(A) * x^(8 * len(B)) mod P  xor  crc(B), in the reflected
 * bit order. x2n[k] = x^(2^k) mod P; the powers repeat with period 31.
 */
#define POLY_C 0x82f63b78u

static const uint32_t x2n[32] = {
	0x40000000, 0x20000000, 0x08000000, 0x00800000, 0x00008000, 0x82f63b78,
	0x6ea2d55c, 0x18b8ea18, 0x510ac59a, 0xb82be955, 0xb8fdb1e7, 0x88e56f72,
	0x74c360a4, 0xe4172b16, 0x0d65762a, 0x35d73a62, 0x28461564, 0xbf455269,
	0xe2ea32dc, 0xfe7740e6, 0xf946610b, 0x3c204f8f, 0x538586e3, 0x59726915,
	0x734d5309, 0xbc1ac763, 0x7d0722cc, 0xd289cabe, 0xe94ca9bc, 0x05b74f3f,
	0xa51e1f42, 0x40000000,
};

/* a * b mod P (reflected: bit 31 is x^0). */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;
	for (;;) {
		if (a & m) {
			p ^= b;
			if ((a & (m - 1)) == 0)
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ POLY_C : b >> 1;
	}
	return p;
}

uint32_t ckpt__crc32c_shift(uint64_t len2)
{
	uint32_t p = 1u << 31; /* x^0 */
	unsigned k = 3;        /* 8 * len2 = len2 << 3 */
	for (uint64_t n = len2; n; n >>= 1, k++)
		if (n & 1)
			p = multmodp(x2n[k % 31], p);
	return p;
}

uint32_t ckpt__crc32c_combine_shift(uint32_t crc1, uint32_t crc2, uint32_t shift)
{
	return multmodp(shift, crc1) ^ crc2;
}

uint32_t ckpt__crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2)
{
	return ckpt__crc32c_combine_shift(crc1, crc2, ckpt__crc32c_shift(len2));
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

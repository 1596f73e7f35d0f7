/*
 * Device-resident variable copies: writes and reads through the provider
 * (variable_device.h). Every write ends with the queues synchronized, so a
 * value is in place when the call returns, as memcpy's would be.
 */
#include <string.h>
#include "variable_device.h"

int ckpt__device_write(ckpt__mem *m, void *const *bufs, size_t nbytes, const void *src,
	const void *other_unit, size_t usize, const char *name)
{
	if (nbytes == 0)
		return CKPT_OK;
	static const uint64_t zero = 0;
	if (src != bufs[0]) {
		if (src) {
			CKPT_TRY(ckpt__mem_h2d(m, 0, bufs[0], src, nbytes, name));
			CKPT_TRY(ckpt__mem_sync(m, 0, name));
		} else {
			CKPT_TRY(ckpt__mem_fill(m, 0, bufs[0], nbytes, &zero, 1, name));
		}
	}
	if (!other_unit)
		return ckpt__mem_fanout(m, bufs, 0, nbytes, name);
	for (int r = 1; r < m->n; r++)
		CKPT_TRY(ckpt__mem_fill(m, r, bufs[r], nbytes, other_unit, usize, name));
	return CKPT_OK;
}

int ckpt__device_read(ckpt__mem *m, int replica, const void *buf, size_t off, void *dst, size_t n,
	const char *name)
{
	if (n == 0)
		return CKPT_OK;
	int rc = ckpt__mem_d2h(m, replica, dst, (const char *)buf + off, n, name);
	int src = ckpt__mem_sync(m, replica, name);
	return rc < 0 ? rc : src;
}

int ckpt__device_equal(ckpt__mem *m, void *const *bufs, int r, size_t nbytes, const char *name)
{
	size_t chunk = nbytes < CKPT__DEVICE_CHUNK ? nbytes : CKPT__DEVICE_CHUNK;
	if (nbytes == 0)
		return 1;
	void *a;
	CKPT_TRY(ckpt__mem_pinned_alloc(m, &a, 2 * chunk, name));
	char *b = (char *)a + chunk;
	int rc = 1;
	for (size_t off = 0; off < nbytes && rc == 1; off += chunk) {
		size_t n = nbytes - off < chunk ? nbytes - off : chunk;
		int e = ckpt__device_read(m, 0, bufs[0], off, a, n, name);
		if (e == CKPT_OK)
			e = ckpt__device_read(m, r, bufs[r], off, b, n, name);
		rc = e < 0 ? e : memcmp(a, b, n) == 0;
	}
	ckpt__mem_pinned_free(m, a, 2 * chunk);
	return rc;
}

/* Shapes with checked arithmetic, and tensors. */
#include <stdio.h>
#include <string.h>
#include <zlib.h>
#include "internal.h"

int ckpt_shape_make(ckpt_shape *out, int rank, const int64_t *dims)
{
	if (!out || rank < 0 || rank > CKPT_MAX_RANK || (rank > 0 && !dims))
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "invalid shape rank %d (max %d)", rank, CKPT_MAX_RANK);
	memset(out, 0, sizeof(*out));
	out->rank = rank;
	for (int i = 0; i < rank; i++) {
		if (dims[i] < 0)
			return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "negative dimension %lld at axis %d",
				(long long)dims[i], i);
		out->dims[i] = dims[i];
	}
	return CKPT_OK;
}

int ckpt_shape_num_elements(uint64_t *out, const ckpt_shape *s)
{
	if (!s || s->rank < 0 || s->rank > CKPT_MAX_RANK)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "invalid shape rank %d", s ? s->rank : -1);
	uint64_t n = 1;
	for (int i = 0; i < s->rank; i++) {
		if (s->dims[i] < 0)
			return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "negative dimension %lld at axis %d",
				(long long)s->dims[i], i);
		if (ckpt__mul_u64(n, (uint64_t)s->dims[i], &n))
			return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "element count of shape overflows 64 bits");
	}
	if (out)
		*out = n;
	return CKPT_OK;
}

int ckpt_shape_nbytes(uint64_t *out, const ckpt_shape *s, ckpt_dtype dt)
{
	size_t es = ckpt_dtype_size(dt);
	if (es == 0)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "dtype %s has no fixed element size",
			ckpt_dtype_name(dt));
	uint64_t n;
	CKPT_TRY(ckpt_shape_num_elements(&n, s));
	if (ckpt__mul_u64(n, es, &n))
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "byte size of shape overflows 64 bits");
	if (out)
		*out = n;
	return CKPT_OK;
}

int ckpt_shape_equal(const ckpt_shape *a, const ckpt_shape *b)
{
	if (a->rank != b->rank)
		return 0;
	for (int i = 0; i < a->rank; i++)
		if (a->dims[i] != b->dims[i])
			return 0;
	return 1;
}

/* ---- compact shapes (internal.h) ---- */

int ckpt__cshape_make(ckpt__cshape *out, ckpt__strpool *p, const ckpt_shape *s)
{
	out->rank = s->rank;
	out->dims = NULL;
	if (s->rank <= 0)
		return CKPT_OK;
	int64_t *d = ckpt__strpool_alloc(p, (size_t)s->rank * sizeof(int64_t));
	if (!d)
		return CKPT_ENOMEM;
	memcpy(d, s->dims, (size_t)s->rank * sizeof(int64_t));
	out->dims = d;
	return CKPT_OK;
}

void ckpt__cshape_expand(const ckpt__cshape *c, ckpt_shape *out)
{
	out->rank = c->rank;
	if (c->rank > 0)
		memcpy(out->dims, c->dims, (size_t)c->rank * sizeof(int64_t));
}

int ckpt__cshape_equal(const ckpt__cshape *c, const ckpt_shape *s)
{
	return c->rank == s->rank && (c->rank <= 0 || memcmp(c->dims, s->dims, (size_t)c->rank * sizeof(int64_t)) == 0);
}

int ckpt_shape_format(const ckpt_shape *s, char *buf, size_t n)
{
	size_t used = 0;
	int want = 0;
	char tmp[32];
#define PUT(str) do { size_t l_ = strlen(str); want += (int)l_; \
		if (buf && used + l_ < n) { memcpy(buf + used, str, l_); used += l_; } } while (0)
	PUT("[");
	for (int i = 0; i < s->rank; i++) {
		snprintf(tmp, sizeof(tmp), "%s%lld", i ? ", " : "", (long long)s->dims[i]);
		PUT(tmp);
	}
	PUT("]");
#undef PUT
	if (buf && n)
		buf[used < n ? used : n - 1] = '\0';
	return want;
}

static int tensor_alloc_header(ckpt_tensor **out, ckpt_dtype dt, const ckpt_shape *s)
{
	if (!out || !s)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "NULL argument");
	if (!ckpt_dtype_valid((int)dt))
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "invalid dtype %d", (int)dt);
	CKPT_TRY(ckpt_shape_num_elements(NULL, s));
	ckpt_tensor *t = ckpt__calloc(1, sizeof(*t));
	if (!t)
		return CKPT_ENOMEM;
	t->dtype = dt;
	t->shape = *s;
	*out = t;
	return CKPT_OK;
}

int ckpt_tensor_new(ckpt_tensor **out, ckpt_dtype dt, const ckpt_shape *s)
{
	ckpt_tensor *t = NULL;
	CKPT_TRY(tensor_alloc_header(&t, dt, s));
	uint64_t n = 0, nbytes = 0;
	ckpt_shape_num_elements(&n, s);
	if (dt == CKPT_DT_STRING) {
		if (n > SIZE_MAX / sizeof(ckpt_bytes)) {
			ckpt__free(t);
			return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "string tensor of %llu elements is too large",
				(unsigned long long)n);
		}
		t->data = ckpt__calloc((size_t)n, sizeof(ckpt_bytes));
		t->nbytes = 0;
	} else {
		int rc = ckpt_shape_nbytes(&nbytes, s, dt);
		if (rc < 0 || nbytes > SIZE_MAX) {
			ckpt__free(t);
			return rc < 0 ? rc : ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "tensor too large");
		}
		t->data = ckpt__calloc(1, (size_t)nbytes);
		t->nbytes = nbytes;
	}
	if (!t->data) {
		ckpt__free(t);
		return CKPT_ENOMEM;
	}
	t->owns_data = 1;
	*out = t;
	return CKPT_OK;
}

int ckpt_tensor_wrap(ckpt_tensor **out, ckpt_dtype dt, const ckpt_shape *s, void *data, uint64_t nbytes)
{
	if (dt == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_tensor_wrap: string tensors cannot be wrapped");
	uint64_t want;
	CKPT_TRY(ckpt_shape_nbytes(&want, s, dt));
	if (want != nbytes)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_tensor_wrap: %llu bytes given, shape needs %llu",
			(unsigned long long)nbytes, (unsigned long long)want);
	ckpt_tensor *t = NULL;
	CKPT_TRY(tensor_alloc_header(&t, dt, s));
	t->data = data;
	t->nbytes = nbytes;
	t->owns_data = 0;
	*out = t;
	return CKPT_OK;
}

int ckpt_tensor_new_strings(ckpt_tensor **out, const ckpt_shape *s, const ckpt_bytes *elems)
{
	ckpt_tensor *t = NULL;
	CKPT_TRY(ckpt_tensor_new(&t, CKPT_DT_STRING, s));
	uint64_t n = ckpt_tensor_num_elements(t), total = 0;
	ckpt_bytes *dst = t->data;
	for (uint64_t i = 0; i < n; i++) {
		if (elems[i].len > SIZE_MAX - 1) {
			ckpt_tensor_free(t);
			return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "string element too large");
		}
		dst[i].data = ckpt__malloc((size_t)elems[i].len + 1);
		if (!dst[i].data) {
			ckpt_tensor_free(t);
			return CKPT_ENOMEM;
		}
		if (elems[i].len)
			memcpy(dst[i].data, elems[i].data, (size_t)elems[i].len);
		dst[i].data[elems[i].len] = '\0';
		dst[i].len = elems[i].len;
		total += elems[i].len;
	}
	t->nbytes = total;
	*out = t;
	return CKPT_OK;
}

uint64_t ckpt_tensor_num_elements(const ckpt_tensor *t)
{
	uint64_t n = 0;
	if (t && ckpt_shape_num_elements(&n, &t->shape) < 0)
		return 0;
	return n;
}

void ckpt_tensor_free(ckpt_tensor *t)
{
	if (!t)
		return;
	if (t->owns_data && t->data) {
		if (t->dtype == CKPT_DT_STRING) {
			uint64_t n = ckpt_tensor_num_elements(t);
			ckpt_bytes *b = t->data;
			for (uint64_t i = 0; i < n; i++)
				ckpt__free(b[i].data);
		}
		ckpt__free(t->data);
	}
	ckpt__free(t);
}

static uint32_t crc32_big(uint32_t crc, const void *buf, uint64_t n)
{
	const unsigned char *p = buf;
	while (n > 0) {
		uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
		crc = (uint32_t)crc32(crc, p, k);
		p += k;
		n -= k;
	}
	return crc;
}

uint32_t ckpt_tensor_crc32(const ckpt_tensor *t)
{
	uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
	if (!t || !t->data)
		return crc;
	if (t->dtype == CKPT_DT_STRING) {
		uint64_t n = ckpt_tensor_num_elements(t);
		const ckpt_bytes *b = t->data;
		for (uint64_t i = 0; i < n; i++)
			crc = crc32_big(crc, b[i].data, b[i].len);
		return crc;
	}
	return crc32_big(crc, t->data, t->nbytes);
}

uint32_t ckpt_tensor_crc32c(const ckpt_tensor *t)
{
	uint32_t crc = 0;
	if (!t || !t->data)
		return crc;
	if (t->dtype == CKPT_DT_STRING) {
		uint64_t n = ckpt_tensor_num_elements(t);
		const ckpt_bytes *b = t->data;
		for (uint64_t i = 0; i < n; i++)
			crc = ckpt_crc32c_extend(crc, b[i].data, (size_t)b[i].len);
		return crc;
	}
	return ckpt_crc32c_extend(crc, t->data, (size_t)t->nbytes);
}

int ckpt_tensor_equal(const ckpt_tensor *a, const ckpt_tensor *b)
{
	if (!a || !b || a->dtype != b->dtype || !ckpt_shape_equal(&a->shape, &b->shape))
		return 0;
	if (a->dtype == CKPT_DT_STRING) {
		uint64_t n = ckpt_tensor_num_elements(a);
		const ckpt_bytes *x = a->data, *y = b->data;
		for (uint64_t i = 0; i < n; i++)
			if (x[i].len != y[i].len || (x[i].len && memcmp(x[i].data, y[i].data, (size_t)x[i].len)))
				return 0;
		return 1;
	}
	return a->nbytes == b->nbytes && (a->nbytes == 0 || memcmp(a->data, b->data, (size_t)a->nbytes) == 0);
}

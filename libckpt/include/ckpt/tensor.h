/*
 * libckpt — dtypes (TensorFlow's DataType numbering), shapes with checked
 * arithmetic, and tensors (row-major, little-endian bytes).
 */
#ifndef CKPT_TENSOR_H
#define CKPT_TENSOR_H

#include "ckpt/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** TensorFlow DataType values (types.proto). Only these are supported. */
typedef enum ckpt_dtype {
	CKPT_DT_INVALID = 0,
	CKPT_DT_FLOAT = 1,      /**< "float32" */
	CKPT_DT_DOUBLE = 2,     /**< "float64" */
	CKPT_DT_INT32 = 3,
	CKPT_DT_UINT8 = 4,
	CKPT_DT_INT16 = 5,
	CKPT_DT_INT8 = 6,
	CKPT_DT_STRING = 7,     /**< "string": elements are ckpt_bytes */
	CKPT_DT_COMPLEX64 = 8,
	CKPT_DT_INT64 = 9,
	CKPT_DT_BOOL = 10,      /**< one byte, 0 or 1 */
	CKPT_DT_BFLOAT16 = 14,
	CKPT_DT_UINT16 = 17,
	CKPT_DT_COMPLEX128 = 18,
	CKPT_DT_HALF = 19,      /**< "float16" */
	CKPT_DT_UINT32 = 22,
	CKPT_DT_UINT64 = 23,
	CKPT_DT_FLOAT8_E5M2 = 24,   /**< "float8_e5m2" (safetensors F8_E5M2) */
	CKPT_DT_FLOAT8_E4M3FN = 25  /**< "float8_e4m3fn" (safetensors F8_E4M3) */
} ckpt_dtype;

/** @return 1 if `v` is one of the ckpt_dtype values above (not INVALID), else 0. */
CKPT_API int ckpt_dtype_valid(int v);
/** @return the element size in bytes; 0 for STRING and INVALID. */
CKPT_API size_t ckpt_dtype_size(ckpt_dtype dt);
/** @return TensorFlow's name ("float32", "int64", "string", ...), static; "invalid" otherwise. */
CKPT_API const char *ckpt_dtype_name(ckpt_dtype dt);
/**
 * Parse a name as printed by ckpt_dtype_name (also "float", "double", "half").
 * @param[out] out the dtype named
 * @return CKPT_OK; CKPT_ENOTFOUND for an unknown name; CKPT_EINVAL for a NULL argument
 */
CKPT_API int ckpt_dtype_from_name(ckpt_dtype *out, const char *name);

/** A fully known shape. rank 0 is a scalar; dims may be 0 (empty tensor). */
typedef struct ckpt_shape {
	int rank;
	int64_t dims[CKPT_MAX_RANK];
} ckpt_shape;

/**
 * Build a shape from `rank` dims.
 * @param[out] out the shape
 * @return CKPT_OK; CKPT_EINVAL for rank outside [0, CKPT_MAX_RANK] or a negative dim
 */
CKPT_API int ckpt_shape_make(ckpt_shape *out, int rank, const int64_t *dims);
/**
 * Element count with overflow checking.
 * @param[out] out the product of the dims (1 for a scalar)
 * @return CKPT_OK; CKPT_ELIMIT on overflow; CKPT_EINVAL on a negative dim
 */
CKPT_API int ckpt_shape_num_elements(uint64_t *out, const ckpt_shape *s);
/**
 * Byte size of a tensor of dtype `dt` and shape `s`, overflow-checked.
 * @param[out] out element count times ckpt_dtype_size(dt)
 * @return CKPT_OK; CKPT_EINVAL for STRING, INVALID or a negative dim; CKPT_ELIMIT on overflow
 */
CKPT_API int ckpt_shape_nbytes(uint64_t *out, const ckpt_shape *s, ckpt_dtype dt);
/** @return 1 when `a` and `b` have the same rank and dims, else 0. */
CKPT_API int ckpt_shape_equal(const ckpt_shape *a, const ckpt_shape *b);
/** Format as "[2, 2]" / "[]" into `buf` (`n` bytes, NUL-terminated when n > 0).
 * @return the length it wanted, like snprintf */
CKPT_API int ckpt_shape_format(const ckpt_shape *s, char *buf, size_t n);

/** One element of a string tensor. */
typedef struct ckpt_bytes {
	uint64_t len;
	char *data;  /**< not NUL-terminated in general */
} ckpt_bytes;

/**
 * A tensor. For fixed-size dtypes `data` holds `nbytes` row-major
 * little-endian bytes. For STRING, `data` is an array of num_elements
 * ckpt_bytes and `nbytes` is the sum of their lengths.
 */
typedef struct ckpt_tensor {
	ckpt_dtype dtype;
	ckpt_shape shape;
	uint64_t nbytes;
	void *data;
	int owns_data;  /**< 1 when ckpt_tensor_free releases `data` */
} ckpt_tensor;

/**
 * Allocate a zero-filled tensor (STRING: all elements empty).
 * @param[out] out the tensor, owned by the caller (ckpt_tensor_free)
 * @return CKPT_OK; CKPT_EINVAL for a bad dtype or shape; CKPT_ELIMIT when too large; CKPT_ENOMEM
 */
CKPT_API int ckpt_tensor_new(ckpt_tensor **out, ckpt_dtype dt, const ckpt_shape *s);
/**
 * A tensor header over caller-owned bytes (fixed-size dtypes only); nothing
 * copied, and ckpt_tensor_free leaves `data` alone (owns_data = 0).
 * @param[out] out the header, owned by the caller (ckpt_tensor_free); `data` must outlive it
 * @return CKPT_OK; CKPT_EINVAL for STRING or when `nbytes` is not what `s` needs; CKPT_ENOMEM
 */
CKPT_API int ckpt_tensor_wrap(ckpt_tensor **out, ckpt_dtype dt, const ckpt_shape *s, void *data, uint64_t nbytes);
/**
 * A STRING tensor holding copies of `elems` (num_elements of `s`).
 * @param[out] out the tensor, owned by the caller (ckpt_tensor_free)
 * @return CKPT_OK; CKPT_ELIMIT when too large; CKPT_ENOMEM
 */
CKPT_API int ckpt_tensor_new_strings(ckpt_tensor **out, const ckpt_shape *s, const ckpt_bytes *elems);
/** Free `t` (and its data when it owns it). NULL is accepted. */
CKPT_API void ckpt_tensor_free(ckpt_tensor *t);
/** @return the element count (checked when the tensor was built). */
CKPT_API uint64_t ckpt_tensor_num_elements(const ckpt_tensor *t);
/**
 * zlib crc32 of the raw bytes (STRING: of the concatenated element bytes).
 * This is the format-independent checksum printed by `ckpt inspect --json`.
 * @return the crc32
 */
CKPT_API uint32_t ckpt_tensor_crc32(const ckpt_tensor *t);
/** @return 1 when dtype, shape and every byte are equal, else 0 (also when either is NULL). */
CKPT_API int ckpt_tensor_equal(const ckpt_tensor *a, const ckpt_tensor *b);

/**
 * CRC-32C (Castagnoli) of the raw bytes (STRING: of the concatenated element
 * bytes). For fixed-size dtypes this is the checksum a TensorBundle stores
 * for the entry; `ckpt inspect --json` and `ckpt restore --json` print it.
 * @return the crc32c (unmasked)
 */
CKPT_API uint32_t ckpt_tensor_crc32c(const ckpt_tensor *t);
/** @return the standard CRC-32C (Castagnoli) of `n` bytes, continuing from `crc` (start with 0). */
CKPT_API uint32_t ckpt_crc32c_extend(uint32_t crc, const void *buf, size_t n);
/** @return `crc` masked as TensorFlow stores it (crc32c.h Mask). */
CKPT_API uint32_t ckpt_crc32c_mask(uint32_t crc);
/** @return the crc a TensorFlow-masked value stands for (crc32c.h Unmask). */
CKPT_API uint32_t ckpt_crc32c_unmask(uint32_t masked);

#ifdef __cplusplus
}
#endif
#endif

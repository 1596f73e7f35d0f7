/* TensorFlow DataType numbering, sizes and names. */
#include <string.h>
#include "internal.h"

static const struct {
	ckpt_dtype dt;
	size_t size;
	const char *name;
} dtypes[] = {
	{ CKPT_DT_FLOAT, 4, "float32" },     { CKPT_DT_DOUBLE, 8, "float64" },
	{ CKPT_DT_INT32, 4, "int32" },       { CKPT_DT_UINT8, 1, "uint8" },
	{ CKPT_DT_INT16, 2, "int16" },       { CKPT_DT_INT8, 1, "int8" },
	{ CKPT_DT_STRING, 0, "string" },     { CKPT_DT_COMPLEX64, 8, "complex64" },
	{ CKPT_DT_INT64, 8, "int64" },       { CKPT_DT_BOOL, 1, "bool" },
	{ CKPT_DT_BFLOAT16, 2, "bfloat16" }, { CKPT_DT_UINT16, 2, "uint16" },
	{ CKPT_DT_COMPLEX128, 16, "complex128" }, { CKPT_DT_HALF, 2, "float16" },
	{ CKPT_DT_UINT32, 4, "uint32" },     { CKPT_DT_UINT64, 8, "uint64" },
	{ CKPT_DT_FLOAT8_E5M2, 1, "float8_e5m2" }, { CKPT_DT_FLOAT8_E4M3FN, 1, "float8_e4m3fn" },
};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

int ckpt_dtype_valid(int v)
{
	for (size_t i = 0; i < NDTYPES; i++)
		if ((int)dtypes[i].dt == v)
			return 1;
	return 0;
}

size_t ckpt_dtype_size(ckpt_dtype dt)
{
	for (size_t i = 0; i < NDTYPES; i++)
		if (dtypes[i].dt == dt)
			return dtypes[i].size;
	return 0;
}

const char *ckpt_dtype_name(ckpt_dtype dt)
{
	for (size_t i = 0; i < NDTYPES; i++)
		if (dtypes[i].dt == dt)
			return dtypes[i].name;
	return "invalid";
}

int ckpt_dtype_from_name(ckpt_dtype *out, const char *name)
{
	static const struct { const char *alias; ckpt_dtype dt; } aliases[] = {
		{ "float", CKPT_DT_FLOAT }, { "double", CKPT_DT_DOUBLE }, { "half", CKPT_DT_HALF },
	};
	if (!out || !name)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_dtype_from_name: NULL argument");
	for (size_t i = 0; i < NDTYPES; i++)
		if (strcmp(dtypes[i].name, name) == 0) {
			*out = dtypes[i].dt;
			return CKPT_OK;
		}
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcmp(aliases[i].alias, name) == 0) {
			*out = aliases[i].dt;
			return CKPT_OK;
		}
	return ckpt__fail(CKPT_ENOTFOUND, NULL, NULL, -1, "unknown dtype name '%s'", name);
}

/*
 * Backend "safetensors" (safetensors-gguf.md):
 *
 *   u64 LE   N          header size (<= 100 MB, inside the file)
 *   N bytes  JSON       {"NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}, ...,
 *                        "__metadata__": {"key": "value"}}   padded with spaces to a multiple of 8
 *   rest     buffer     tensors back to back from 0 to its end, row-major little-endian
 *
 * Recognised from the bytes: a plausible N followed by '{'. No checksums.
 */
#include <string.h>
#include "st.h"

/* Ranks follow the reference's Dtype enum order (its writer sorts by it, largest first, then by name). */
static const st_dtype st_dtypes[] = {
	{ "BOOL", CKPT_DT_BOOL, 1, 0 },     { "U8", CKPT_DT_UINT8, 1, 1 },
	{ "I8", CKPT_DT_INT8, 1, 2 },       { "F8_E5M2", CKPT_DT_FLOAT8_E5M2, 1, 3 },
	{ "F8_E4M3", CKPT_DT_FLOAT8_E4M3FN, 1, 4 }, { "I16", CKPT_DT_INT16, 2, 5 },
	{ "U16", CKPT_DT_UINT16, 2, 6 },    { "F16", CKPT_DT_HALF, 2, 7 },
	{ "BF16", CKPT_DT_BFLOAT16, 2, 8 }, { "I32", CKPT_DT_INT32, 4, 9 },
	{ "U32", CKPT_DT_UINT32, 4, 10 },   { "F32", CKPT_DT_FLOAT, 4, 11 },
	{ "C64", CKPT_DT_COMPLEX64, 8, 12 }, { "F64", CKPT_DT_DOUBLE, 8, 13 },
	{ "I64", CKPT_DT_INT64, 8, 14 },    { "U64", CKPT_DT_UINT64, 8, 15 },
	/* known to newer safetensors, sub-byte or scale-only: refused as unsupported */
	{ "F8_E8M0", CKPT_DT_INVALID, 1, -1 }, { "F4", CKPT_DT_INVALID, 0, -1 },
	{ "F6_E2M3", CKPT_DT_INVALID, 0, -1 }, { "F6_E3M2", CKPT_DT_INVALID, 0, -1 },
};

const st_dtype *ckpt__st_dtype_by_name(const char *name)
{
	for (size_t i = 0; i < sizeof(st_dtypes) / sizeof(st_dtypes[0]); i++)
		if (strcmp(st_dtypes[i].name, name) == 0)
			return &st_dtypes[i];
	return NULL;
}

const st_dtype *ckpt__st_dtype_by_dt(ckpt_dtype dt)
{
	for (size_t i = 0; i < sizeof(st_dtypes) / sizeof(st_dtypes[0]); i++)
		if (st_dtypes[i].dt == dt && dt != CKPT_DT_INVALID)
			return &st_dtypes[i];
	return NULL;
}

static int st_bid(ckpt_vfs *vfs, const char *path, const unsigned char *head, size_t n)
{
	uint64_t hl = 0;
	(void)vfs;
	(void)path;
	if (n < 9 || head[8] != '{' || memcmp(head, "GGUF", 4) == 0) /* a GGUF with 123 tensors has '{' there too */
		return -1;
	for (int i = 7; i >= 0; i--)
		hl = hl << 8 | head[i];
	return hl >= 2 ? 90 : -1; /* a size the file may not hold is open's error to report */
}

static const char *const st_write_formats[] = { "safetensors", NULL };

const ckpt_format ckpt_format_safetensors = {
	1,
	"safetensors",
	st_bid,
	ckpt__st_open,
	NULL, /* read: the core, through read_into */
	ckpt__flat_read_into,
	ckpt__flat_close,
	st_write_formats,
	ckpt__st_writer_open,
	ckpt__st_writer_add,
	ckpt__st_writer_commit,
	ckpt__st_writer_close,
	NULL,
	ckpt__st_writer_announce,
	NULL, /* read_rows: the core reads whole tensors */
	NULL, /* no partitioned variables */
	NULL, /* read_many: entry by entry */
	NULL, /* writer_add_pieces: values whole (a device value larger than the ring goes through pinned memory of its size) */
	NULL, /* trim: no scratch kept between reads */
};

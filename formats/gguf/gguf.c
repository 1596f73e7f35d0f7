/*
 * Backend "gguf" (GGUF version 3, safetensors-gguf.md):
 *
 *   u32 magic "GGUF"  u32 version  u64 tensor_count  u64 kv_count
 *   kv_count x     { string key; u32 value_type; value }
 *   tensor_count x { string name; u32 n_dims; u64 ne[n_dims]; u32 ggml_type; u64 offset }
 *   padding to general.alignment (default 32), then the data; offsets are relative to it
 *   string = u64 length + bytes; array = u32 element type + u64 count + elements
 *
 * ne is ggml's order, fastest-varying first: row-major [2, 3] is ne = [3, 2].
 * F32/F16/BF16/F64/I8..I64 map to libckpt dtypes; quantized block types are
 * exposed as uint8 byte views [ne[n-1], ..., ne[1], bytes per row] and their
 * type name is in the reader's "gguf.tensor_types" metadata.
 */
#include <string.h>
#include "gguf.h"

/* ggml.h's type table (ids, block sizes and bytes per block), as gguf-py's GGML_QUANT_SIZES. */
static const gguf_type types[] = {
	{ 0, "F32", 1, 4, CKPT_DT_FLOAT },     { 1, "F16", 1, 2, CKPT_DT_HALF },
	{ 2, "Q4_0", 32, 18, CKPT_DT_INVALID }, { 3, "Q4_1", 32, 20, CKPT_DT_INVALID },
	{ 6, "Q5_0", 32, 22, CKPT_DT_INVALID }, { 7, "Q5_1", 32, 24, CKPT_DT_INVALID },
	{ 8, "Q8_0", 32, 34, CKPT_DT_INVALID }, { 9, "Q8_1", 32, 40, CKPT_DT_INVALID },
	{ 10, "Q2_K", 256, 84, CKPT_DT_INVALID }, { 11, "Q3_K", 256, 110, CKPT_DT_INVALID },
	{ 12, "Q4_K", 256, 144, CKPT_DT_INVALID }, { 13, "Q5_K", 256, 176, CKPT_DT_INVALID },
	{ 14, "Q6_K", 256, 210, CKPT_DT_INVALID }, { 15, "Q8_K", 256, 292, CKPT_DT_INVALID },
	{ 16, "IQ2_XXS", 256, 66, CKPT_DT_INVALID }, { 17, "IQ2_XS", 256, 74, CKPT_DT_INVALID },
	{ 18, "IQ3_XXS", 256, 98, CKPT_DT_INVALID }, { 19, "IQ1_S", 256, 50, CKPT_DT_INVALID },
	{ 20, "IQ4_NL", 32, 18, CKPT_DT_INVALID }, { 21, "IQ3_S", 256, 110, CKPT_DT_INVALID },
	{ 22, "IQ2_S", 256, 82, CKPT_DT_INVALID }, { 23, "IQ4_XS", 256, 136, CKPT_DT_INVALID },
	{ 24, "I8", 1, 1, CKPT_DT_INT8 },      { 25, "I16", 1, 2, CKPT_DT_INT16 },
	{ 26, "I32", 1, 4, CKPT_DT_INT32 },    { 27, "I64", 1, 8, CKPT_DT_INT64 },
	{ 28, "F64", 1, 8, CKPT_DT_DOUBLE },   { 29, "IQ1_M", 256, 56, CKPT_DT_INVALID },
	{ 30, "BF16", 1, 2, CKPT_DT_BFLOAT16 }, { 34, "TQ1_0", 256, 54, CKPT_DT_INVALID },
	{ 35, "TQ2_0", 256, 66, CKPT_DT_INVALID }, { 39, "MXFP4", 32, 17, CKPT_DT_INVALID },
	{ 40, "NVFP4", 64, 36, CKPT_DT_INVALID }, { 41, "Q1_0", 128, 18, CKPT_DT_INVALID },
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

const gguf_type *ckpt__gguf_type(int id)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].id == id)
			return &types[i];
	return NULL;
}

const gguf_type *ckpt__gguf_type_by_name(const char *name)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (strcmp(types[i].name, name) == 0)
			return &types[i];
	return NULL;
}

const gguf_type *ckpt__gguf_type_by_dt(ckpt_dtype dt)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].dt == dt && dt != CKPT_DT_INVALID)
			return &types[i];
	return NULL;
}

static const char *const vtypes[GV_COUNT] = { "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string",
	"array", "u64", "i64", "f64" };

const char *ckpt__gguf_vtype_name(unsigned t)
{
	return t < GV_COUNT ? vtypes[t] : NULL;
}

int ckpt__gguf_vtype_by_name(const char *name)
{
	for (int i = 0; i < GV_COUNT; i++)
		if (strcmp(vtypes[i], name) == 0)
			return i;
	return -1;
}

static int gguf_bid(ckpt_vfs *vfs, const char *path, const unsigned char *head, size_t n)
{
	(void)vfs;
	(void)path;
	return n >= 4 && memcmp(head, "GGUF", 4) == 0 ? 90 : -1;
}

static const char *const gguf_write_formats[] = { "gguf", NULL };

const ckpt_format ckpt_format_gguf = {
	1,
	"gguf",
	gguf_bid,
	ckpt__gguf_open,
	NULL, /* read: the core, through read_into */
	ckpt__flat_read_into,
	ckpt__flat_close,
	gguf_write_formats,
	ckpt__gguf_writer_open,
	ckpt__gguf_writer_add,
	ckpt__gguf_writer_commit,
	ckpt__gguf_writer_close,
	NULL,
	ckpt__gguf_writer_announce,
	NULL, /* read_rows: the core reads whole tensors */
	NULL, /* no partitioned variables */
	NULL, /* read_many: entry by entry */
	NULL, /* writer_add_pieces: values whole (a device value larger than the ring goes through pinned memory of its size) */
};

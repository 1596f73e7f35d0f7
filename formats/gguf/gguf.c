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
#include <strings.h>
#include "gguf.h"

/* ggml.h's type table (ids, block sizes and bytes per block), as gguf-py's GGML_QUANT_SIZES. */
static const gguf_type types[] = {
	{ 0, "F32", 1, 4, CKPT_DT_FLOAT, ckpt__deq_f32, ckpt__q_f32 },
	{ 1, "F16", 1, 2, CKPT_DT_HALF, ckpt__deq_f16, ckpt__q_f16 },
	{ 2, "Q4_0", 32, 18, CKPT_DT_INVALID, ckpt__deq_q4_0, ckpt__q_q4_0 },
	{ 3, "Q4_1", 32, 20, CKPT_DT_INVALID, ckpt__deq_q4_1, ckpt__q_q4_1 },
	{ 6, "Q5_0", 32, 22, CKPT_DT_INVALID, ckpt__deq_q5_0, ckpt__q_q5_0 },
	{ 7, "Q5_1", 32, 24, CKPT_DT_INVALID, ckpt__deq_q5_1, ckpt__q_q5_1 },
	{ 8, "Q8_0", 32, 34, CKPT_DT_INVALID, ckpt__deq_q8_0, ckpt__q_q8_0 },
	{ 9, "Q8_1", 32, 40, CKPT_DT_INVALID, NULL, NULL },
	{ 10, "Q2_K", 256, 84, CKPT_DT_INVALID, ckpt__deq_q2_k, NULL },
	{ 11, "Q3_K", 256, 110, CKPT_DT_INVALID, ckpt__deq_q3_k, NULL },
	{ 12, "Q4_K", 256, 144, CKPT_DT_INVALID, ckpt__deq_q4_k, ckpt__q_q4_k },
	{ 13, "Q5_K", 256, 176, CKPT_DT_INVALID, ckpt__deq_q5_k, NULL },
	{ 14, "Q6_K", 256, 210, CKPT_DT_INVALID, ckpt__deq_q6_k, ckpt__q_q6_k },
	{ 15, "Q8_K", 256, 292, CKPT_DT_INVALID, NULL, NULL },
	{ 16, "IQ2_XXS", 256, 66, CKPT_DT_INVALID, ckpt__deq_iq2_xxs, NULL },
	{ 17, "IQ2_XS", 256, 74, CKPT_DT_INVALID, ckpt__deq_iq2_xs, NULL },
	{ 18, "IQ3_XXS", 256, 98, CKPT_DT_INVALID, ckpt__deq_iq3_xxs, NULL },
	{ 19, "IQ1_S", 256, 50, CKPT_DT_INVALID, ckpt__deq_iq1_s, NULL },
	{ 20, "IQ4_NL", 32, 18, CKPT_DT_INVALID, ckpt__deq_iq4_nl, NULL },
	{ 21, "IQ3_S", 256, 110, CKPT_DT_INVALID, ckpt__deq_iq3_s, NULL },
	{ 22, "IQ2_S", 256, 82, CKPT_DT_INVALID, ckpt__deq_iq2_s, NULL },
	{ 23, "IQ4_XS", 256, 136, CKPT_DT_INVALID, ckpt__deq_iq4_xs, NULL },
	{ 24, "I8", 1, 1, CKPT_DT_INT8, NULL, NULL },
	{ 25, "I16", 1, 2, CKPT_DT_INT16, NULL, NULL },
	{ 26, "I32", 1, 4, CKPT_DT_INT32, NULL, NULL },
	{ 27, "I64", 1, 8, CKPT_DT_INT64, NULL, NULL },
	{ 28, "F64", 1, 8, CKPT_DT_DOUBLE, NULL, NULL },
	{ 29, "IQ1_M", 256, 56, CKPT_DT_INVALID, ckpt__deq_iq1_m, NULL },
	{ 30, "BF16", 1, 2, CKPT_DT_BFLOAT16, ckpt__deq_bf16, ckpt__q_bf16 },
	{ 34, "TQ1_0", 256, 54, CKPT_DT_INVALID, ckpt__deq_tq1_0, NULL },
	{ 35, "TQ2_0", 256, 66, CKPT_DT_INVALID, ckpt__deq_tq2_0, NULL },
	{ 39, "MXFP4", 32, 17, CKPT_DT_INVALID, ckpt__deq_mxfp4, NULL },
	{ 40, "NVFP4", 64, 36, CKPT_DT_INVALID, ckpt__deq_nvfp4, NULL },
	{ 41, "Q1_0", 128, 18, CKPT_DT_INVALID, NULL, NULL },
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
		if (strcasecmp(types[i].name, name) == 0) /* "q8_0" on a command line is Q8_0 */
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
	NULL, /* trim: no scratch kept between reads */
};

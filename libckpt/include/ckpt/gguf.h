/*
 * libckpt — GGUF's ggml block types (quantized tensors) to and from float32.
 *
 * A GGUF reader exposes a quantized tensor as a uint8 view [rows..., bytes
 * per row] and names its ggml type in the "gguf.tensor_types" metadata
 * ({"name": {"type": "Q4_0", "shape": [logical dims]}}). These functions
 * decode such bytes and encode float32 into them; the GGUF writer stores a
 * uint8 view listed in "gguf.tensor_types" (by its flat name or by the name
 * given to the writer) with that ggml type. Type names are ggml's, case
 * ignored: "Q4_0", "Q8_0", "Q4_K", "BF16", ... `n` counts elements and
 * must be a multiple of the type's block (32 or 256; 1 for F32/F16/BF16).
 *
 * Decoding: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K, TQ1_0, TQ2_0, MXFP4, NVFP4, IQ1_S, IQ1_M, IQ2_XXS,
 * IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS; bit-identical with gguf-py's
 * gguf.quants.dequantize (float32), then rounded to nearest even for
 * float16 / bfloat16 output (numpy's astype, gguf-py's BF16).
 * Encoding: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (bit-identical
 * with gguf-py's gguf.quants.quantize), Q4_K, Q6_K (ggml's reference
 * quantize_row_q4_K_ref / quantize_row_q6_K_ref). Other types are
 * CKPT_EUNSUPPORTED. Both run at several GB/s of float32 per core for
 * Q8_0 / Q4_0 (bench/RESULTS.md).
 */
#ifndef CKPT_GGUF_API_H
#define CKPT_GGUF_API_H

#include "ckpt/common.h"
#include "ckpt/tensor.h"
#include "ckpt/reader.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The block geometry of ggml type `type`.
 * @param[out] block_elems elements per block (1 for F32, F16, BF16)
 * @param[out] block_bytes bytes per block
 * @return CKPT_OK, or CKPT_EINVAL for a name ggml does not define
 */
CKPT_API int ckpt_gguf_type_block(int64_t *block_elems, int64_t *block_bytes, const char *type);

/**
 * Decode `n` elements of ggml type `type` from `blocks` (n / block_elems
 * blocks) into `out` as `out_dtype`: CKPT_DT_FLOAT, CKPT_DT_HALF or
 * CKPT_DT_BFLOAT16.
 * @param[out] out n elements of out_dtype
 * @return CKPT_OK; CKPT_EINVAL for an unknown type or dtype, or n not a multiple of the block;
 *         CKPT_EUNSUPPORTED for a type with no decoder here (Q8_1, Q8_K, Q1_0, F64, integers)
 */
CKPT_API int ckpt_gguf_dequantize(void *out, ckpt_dtype out_dtype, const char *type, const void *blocks, int64_t n);

/**
 * Encode `n` float32 values as ggml type `type`.
 * @param[out] out n / block_elems blocks of `type` (see ckpt_gguf_type_block)
 * @return CKPT_OK; CKPT_EINVAL for an unknown type or n not a multiple of the block;
 *         CKPT_EUNSUPPORTED for a type with no encoder here
 */
CKPT_API int ckpt_gguf_quantize(void *out, const char *type, const float *x, int64_t n);

/**
 * Open a GGUF file for its header and key-value pairs only: the tensor
 * table is not read, so a file whose tensor table is broken (overlapping
 * offsets, say) still shows its metadata. The reader has no entries;
 * ckpt_reader_num_kv / ckpt_reader_kv and the "gguf.version",
 * "gguf.alignment" and "gguf.kv" metadata work as for ckpt_reader_open.
 * @param[out] out caller-owned; free with ckpt_reader_free
 * @return CKPT_OK or a negative ckpt_status (not a GGUF file, a broken header or key-value section)
 */
CKPT_API int ckpt_gguf_open_metadata(ckpt_reader **out, const char *path, const ckpt_open_options *o);

#ifdef __cplusplus
}
#endif
#endif

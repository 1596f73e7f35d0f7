/* GGUF backend: shared between its halves. */
#ifndef CKPT_GGUF_H
#define CKPT_GGUF_H

#include <jansson.h>
#include "formats/flat/flat.h"
#include "gguf_quant.h"

#define GGUF_MAX_DIMS 4          /* ggml's GGML_MAX_DIMS */
#define GGUF_MAX_NAME 63         /* ggml's GGML_MAX_NAME (64) less the terminator */
#define GGUF_DEFAULT_ALIGNMENT 32

/** One ggml tensor type: blocks of `blck` elements stored in `size` bytes. */
typedef struct gguf_type {
	int id;
	const char *name;
	unsigned blck, size;
	ckpt_dtype dt;  /* CKPT_DT_INVALID for quantized block formats (byte views) */
	gguf_to_float_fn to_float;     /* NULL: no decoder (integer types, F64, Q8_1, Q8_K, Q1_0) */
	gguf_from_float_fn from_float; /* NULL: no encoder */
} gguf_type;

const gguf_type *ckpt__gguf_type(int id);
const gguf_type *ckpt__gguf_type_by_name(const char *name);
const gguf_type *ckpt__gguf_type_by_dt(ckpt_dtype dt);

/** KV value types. */
enum { GV_U8, GV_I8, GV_U16, GV_I16, GV_U32, GV_I32, GV_F32, GV_BOOL, GV_STRING, GV_ARRAY, GV_U64, GV_I64,
	GV_F64, GV_COUNT };
/** "u8", ..., "f64" (NULL for an unknown type). */
const char *ckpt__gguf_vtype_name(unsigned t);
int ckpt__gguf_vtype_by_name(const char *name);

int ckpt__gguf_open(ckpt_reader *r);

int ckpt__gguf_writer_open(ckpt_writer *w);
int ckpt__gguf_writer_add(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard);
int ckpt__gguf_writer_announce(ckpt_writer *w, const char *name, ckpt_dtype dtype, const ckpt_shape *shape);
int ckpt__gguf_writer_commit(ckpt_writer *w);
void ckpt__gguf_writer_close(ckpt_writer *w);

#endif

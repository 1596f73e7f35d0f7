/* safetensors backend: shared between its read and write halves. */
#ifndef CKPT_ST_H
#define CKPT_ST_H

#include "formats/flat/flat.h"

#define ST_MAX_HEADER 100000000ull /* the reference's MAX_HEADER_SIZE (100 MB) */

/** One safetensors dtype: its header name, libckpt dtype, size and the reference writer's sort rank. */
typedef struct st_dtype {
	const char *name;
	ckpt_dtype dt;   /* CKPT_DT_INVALID: known to safetensors, not representable here */
	size_t size;
	int rank;
} st_dtype;

/** By header name; NULL when unknown. */
const st_dtype *ckpt__st_dtype_by_name(const char *name);
/** By libckpt dtype; NULL when safetensors has none. */
const st_dtype *ckpt__st_dtype_by_dt(ckpt_dtype dt);

int ckpt__st_open(ckpt_reader *r);

int ckpt__st_writer_open(ckpt_writer *w);
int ckpt__st_writer_add(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard);
int ckpt__st_writer_announce(ckpt_writer *w, const char *name, ckpt_dtype dtype, const ckpt_shape *shape);
int ckpt__st_writer_commit(ckpt_writer *w);
void ckpt__st_writer_close(ckpt_writer *w);

#endif

/*
 * `ckpt convert --dequantize DT` and `--to gguf --quantize TYPE`: what
 * happens to each entry's value on the way to the writer.
 *
 * A quantized GGUF tensor (a uint8 view the reader names in
 * "gguf.tensor_types") is decoded to its logical shape as float32, float16
 * or bfloat16 with --dequantize; so are F16 / BF16 GGUF tensors (to DT).
 * With --quantize, each floating-point tensor of rank >= 2 whose name
 * matches none of the --keep patterns (default `*norm*`) and whose rows
 * are whole blocks is encoded, as llama.cpp's quantize does: 1-D tensors
 * (biases, norms, scalars) and norm weights stay in their float type
 * (--quantize-1d and --keep '' override). Every encoded tensor is decoded
 * again to measure its max abs error and RMSE against the float32 source.
 */
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "cli.h"

static int is_float(ckpt_dtype dt)
{
	return dt == CKPT_DT_FLOAT || dt == CKPT_DT_HALF || dt == CKPT_DT_BFLOAT16 || dt == CKPT_DT_DOUBLE;
}

/* 1 when `name` matches one of the comma-separated glob patterns in `globs`. */
static int matches_any(const char *globs, const char *name)
{
	const char *p = globs;
	char pat[256];
	while (p && *p) {
		size_t n = strcspn(p, ",");
		if (n && n < sizeof(pat)) {
			memcpy(pat, p, n);
			pat[n] = '\0';
			if (fnmatch(pat, name, 0) == 0)
				return 1;
		}
		p += n + (p[n] == ',');
	}
	return 0;
}

/* The logical row-major shape json [d0, ..., dn] of a quantized entry (from "gguf.tensor_types"). */
static int shape_from_json(ckpt_shape *s, json_t *a)
{
	int64_t dims[CKPT_MAX_RANK];
	size_t i, n = json_array_size(a);
	if (!n || n > CKPT_MAX_RANK)
		return -1;
	for (i = 0; i < n; i++)
		dims[i] = json_integer_value(json_array_get(a, i));
	return ckpt_shape_make(s, (int)n, dims) == CKPT_OK ? 0 : -1;
}

int cli_qplan_make(cli_qplan *p, const cli_qopts *o, const ckpt_var_info *v, const char *key, json_t *qtypes,
	int to_gguf)
{
	const char *st = cli_flat_qtype(qtypes, v->name);
	int64_t blck = 1, bytes = 0;
	memset(p, 0, sizeof(*p));
	p->dtype = v->dtype;
	p->shape = v->shape;
	p->logical = v->shape;
	if (st) {
		json_t *e = json_object_get(qtypes, v->name);
		p->src_type = st;
		if (shape_from_json(&p->logical, json_object_get(e, "shape")) < 0)
			return cli_report(NULL, v->name, -1, "gguf.tensor_types: no usable shape for '%s'", v->name);
		if (!o->deq) {
			p->raw_quant = 1; /* copied raw to GGUF; elsewhere the caller lists it as unmappable */
			return 0;
		}
		p->in_type = st;
		p->dtype = o->deq;
		p->shape = p->logical;
	} else if (o->deq && o->deq != v->dtype && (v->dtype == CKPT_DT_HALF || v->dtype == CKPT_DT_BFLOAT16)) {
		p->in_type = v->dtype == CKPT_DT_HALF ? "F16" : "BF16";
		p->dtype = o->deq;
	}
	if (!o->quant || !to_gguf || !is_float(p->dtype))
		return 0;
	if (ckpt_gguf_type_block(&blck, &bytes, o->quant) != CKPT_OK)
		return cli_report_last(NULL, NULL);
	if (p->logical.rank < 2 && !o->quant_1d)
		p->kept = p->logical.rank ? "1-D" : "scalar";
	else if (!p->logical.rank || p->logical.dims[p->logical.rank - 1] % blck)
		p->kept = blck == 32 ? "rows not a multiple of 32" : "rows not a multiple of 256";
	else if (o->keep && (matches_any(o->keep, v->name) || matches_any(o->keep, key)))
		p->kept = "--keep";
	if (p->kept)
		return 0;
	p->q = o->quant;
	p->dtype = CKPT_DT_UINT8;
	p->shape = p->logical;
	p->shape.dims[p->shape.rank - 1] = p->logical.dims[p->logical.rank - 1] / blck * bytes;
	return 0;
}

static int grow(void **buf, size_t *cap, size_t n)
{
	void *nb;
	if (n <= *cap)
		return 0;
	if (!(nb = realloc(*buf, n)))
		return -1;
	*buf = nb;
	*cap = n;
	return 0;
}

/* The stored value as float32 (in b->f unless it is float32 already). */
static int as_f32(const cli_qplan *p, const ckpt_var_info *v, const void *raw, uint64_t n, cli_qbufs *b,
	const float **out)
{
	if (!p->in_type && v->dtype == CKPT_DT_FLOAT) {
		*out = raw;
		return CKPT_OK;
	}
	if (grow((void **)&b->f, &b->fcap, n * 4 + 4) < 0)
		return CKPT_ENOMEM;
	*out = b->f;
	if (p->in_type)
		return ckpt_gguf_dequantize(b->f, CKPT_DT_FLOAT, p->in_type, raw, (int64_t)n);
	if (v->dtype == CKPT_DT_DOUBLE) {
		const double *d = raw;
		for (uint64_t i = 0; i < n; i++)
			b->f[i] = (float)d[i];
		return CKPT_OK;
	}
	return ckpt_gguf_dequantize(b->f, CKPT_DT_FLOAT, v->dtype == CKPT_DT_HALF ? "F16" : "BF16", raw, (int64_t)n);
}

int cli_qplan_value(const cli_qplan *p, const ckpt_var_info *v, const void *raw, cli_qbufs *b, const void **out,
	uint64_t *out_bytes, double *max_err, double *rmse)
{
	uint64_t n = 0, nb = 0;
	const float *x;
	int rc;
	*out = raw;
	*out_bytes = v->nbytes;
	if (!p->in_type && !p->q)
		return CKPT_OK;
	ckpt_shape_num_elements(&n, &p->logical);
	ckpt_shape_nbytes(&nb, &p->shape, p->dtype);
	if (!p->q && p->dtype != CKPT_DT_FLOAT) { /* float16 / bfloat16 straight from the blocks */
		if (grow(&b->out, &b->ocap, nb + 1) < 0)
			return CKPT_ENOMEM;
		*out = b->out;
		*out_bytes = nb;
		return ckpt_gguf_dequantize(b->out, p->dtype, p->in_type, raw, (int64_t)n);
	}
	if ((rc = as_f32(p, v, raw, n, b, &x)) != CKPT_OK)
		return rc;
	*out = x;
	*out_bytes = nb;
	if (!p->q)
		return CKPT_OK;
	if (grow(&b->out, &b->ocap, nb + 1) < 0 || grow((void **)&b->back, &b->bcap, n * 4 + 4) < 0)
		return CKPT_ENOMEM;
	*out = b->out;
	if ((rc = ckpt_gguf_quantize(b->out, p->q, x, (int64_t)n)) != CKPT_OK ||
	    (rc = ckpt_gguf_dequantize(b->back, CKPT_DT_FLOAT, p->q, b->out, (int64_t)n)) != CKPT_OK)
		return rc;
	double mx = 0, ss = 0;
	for (uint64_t i = 0; i < n; i++) {
		double d = fabs((double)b->back[i] - (double)x[i]);
		mx = d > mx ? d : mx;
		ss += d * d;
	}
	*max_err = mx;
	*rmse = n ? sqrt(ss / (double)n) : 0;
	return CKPT_OK;
}

void cli_qbufs_free(cli_qbufs *b)
{
	free(b->f);
	free(b->out);
	free(b->back);
	memset(b, 0, sizeof(*b));
}

/*
 * ggml block codecs (issue 37): `ckpt convert --dequantize` is bit-identical
 * with gguf-py's gguf.quants.dequantize for every type gguf-py decodes (the
 * IQ types and NVFP4 included), in a file GGUFWriter wrote, and refuses
 * by name the types it cannot decode; `--to gguf --quantize` writes the
 * bytes gguf-py's quantize makes (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) and ggml's reference
 * quantizer makes (Q4_K, Q6_K: vectors from ggml's own code), reports each
 * tensor's error as numpy computes it, and leaves 1-D and norm tensors as
 * llama.cpp does unless told otherwise; a TF checkpoint goes to Q8_0 GGUF
 * and back.
 */
#include "flat_test.h"
#include "fixtures/gguf/kquant_input.h"

static void cli_ok(ts_run_result *r, const char *cmd)
{
	cr_assert_eq(ts_run_sh(r, cmd), 0);
	ts_assert_exit(r, 0, "%s", cmd);
}

Test(gguf_quant, dequantize_is_gguf_py_bit_for_bit, .timeout = 180)
{
	char *dir = ts_tmpdir(), cmd[4096];
	const char *dts[] = { "f32", "f16", "bf16" };
	snprintf(cmd, sizeof(cmd), "write %s", dir);
	free(ft_oracle("gguf_quant.py", cmd));
	for (size_t i = 0; i < 3; i++) {
		ts_run_result r;
		char *out;
		snprintf(cmd, sizeof(cmd), "%s convert %s/blocks.gguf %s/out_%s.safetensors --to safetensors --dequantize %s",
			TS_CLI, dir, dir, dts[i], dts[i]);
		cli_ok(&r, cmd);
		cr_assert(strstr(r.out, "26 entries"), "%s", r.out);
		ts_run_free(&r);
		snprintf(cmd, sizeof(cmd), "check-deq %s/blocks.gguf %s/out_%s.safetensors %s", dir, dir, dts[i], dts[i]);
		out = ft_oracle("gguf_quant.py", cmd);
		cr_assert(strstr(out, "OK 26 tensors bit-identical"), "%s", out);
		free(out);
	}
	ts_rmtree(dir);
	free(dir);
}

/* Q8_K (nor Q8_1, Q1_0) has no decoder, here as in gguf-py: --dequantize names the tensor and the type. */
Test(gguf_quant, dequantize_refuses_a_type_without_decoder, .timeout = 120)
{
	char *dir = ts_tmpdir(), cmd[4096];
	ts_run_result r;
	snprintf(cmd, sizeof(cmd), "write %s", dir);
	free(ft_oracle("gguf_quant.py", cmd));
	snprintf(cmd, sizeof(cmd), "%s convert %s/q8_k.gguf %s/o.safetensors --to safetensors --dequantize f32", TS_CLI,
		dir, dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 1, "%s", cmd);
	cr_assert(strstr(r.err, "variable 'blk.q8_k.weight': ckpt_gguf_dequantize: no decoder for Q8_K"), "%s", r.err);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
}

/* Without --dequantize a quantized tensor still cannot leave GGUF, and the message says how it could. */
Test(gguf_quant, quantized_to_safetensors_names_the_option, .timeout = 120)
{
	char *dir = ts_tmpdir(), cmd[4096];
	ts_run_result r;
	snprintf(cmd, sizeof(cmd), "write %s", dir);
	free(ft_oracle("gguf_quant.py", cmd));
	snprintf(cmd, sizeof(cmd), "%s convert %s/blocks.gguf %s/o.safetensors --to safetensors", TS_CLI, dir, dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 1, "%s", cmd);
	cr_assert(strstr(r.err, "'blk.q4_k.weight': cannot be mapped to safetensors: it is Q4_K-quantized"), "%s", r.err);
	cr_assert(strstr(r.err, "--dequantize"), "%s", r.err);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
}

Test(gguf_quant, quantize_matches_gguf_py_and_ggml, .timeout = 240)
{
	char *dir = ts_tmpdir(), cmd[4096];
	const char *types[] = { "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q6_k" };
	snprintf(cmd, sizeof(cmd), "write %s", dir);
	free(ft_oracle("gguf_quant.py", cmd));
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		ts_run_result r;
		char *out;
		snprintf(cmd, sizeof(cmd), "%s convert %s/float.safetensors %s/q_%s.gguf --to gguf --quantize %s --json > "
			"%s/rep_%s.json", TS_CLI, dir, dir, types[i], types[i], dir, types[i]);
		cli_ok(&r, cmd);
		ts_run_free(&r);
		snprintf(cmd, sizeof(cmd), "check-q %s/float.safetensors %s/q_%s.gguf %s %s/rep_%s.json", dir, dir, types[i],
			types[i], dir, types[i]);
		out = ft_oracle("gguf_quant.py", cmd);
		/* tok_embd, attn_q and the float16 matrix; attn_norm (--keep), the bias (1-D), the odd rows stay */
		cr_assert(strstr(out, "OK 3 tensors encoded"), "%s: %s", types[i], out);
		free(out);
	}
	ts_rmtree(dir);
	free(dir);
}

/* The text report names each encoded tensor with its error, and each kept one with why. */
Test(gguf_quant, text_report_and_overrides, .timeout = 120)
{
	char *dir = ts_tmpdir(), cmd[4096];
	ts_run_result r;
	json_t *j, *t;
	size_t i, enc = 0;
	snprintf(cmd, sizeof(cmd), "write %s", dir);
	free(ft_oracle("gguf_quant.py", cmd));
	snprintf(cmd, sizeof(cmd), "%s convert %s/float.safetensors %s/q.gguf --to gguf --quantize Q8_0", TS_CLI, dir, dir);
	cli_ok(&r, cmd);
	cr_assert(strstr(r.out, "quantized 3 tensors to Q8_0"), "%s", r.out);
	cr_assert(strstr(r.out, "  blk.0.attn_q.weight  Q8_0 [64, 512]  max abs error "), "%s", r.out);
	cr_assert(strstr(r.out, "  blk.0.attn_norm.weight  float32 (--keep)"), "%s", r.out);
	cr_assert(strstr(r.out, "  blk.0.ffn_up.bias  float32 (1-D)"), "%s", r.out);
	cr_assert(strstr(r.out, "  blk.0.odd.weight  float32 (rows not a multiple of 32)"), "%s", r.out);
	ts_run_free(&r);
	/* --keep '' and --quantize-1d: the norm and the bias are encoded too */
	snprintf(cmd, sizeof(cmd), "%s convert %s/float.safetensors %s/q2.gguf --to gguf --quantize q8_0 --keep '' "
		"--quantize-1d --json", TS_CLI, dir, dir);
	cli_ok(&r, cmd);
	cr_assert(j = json_loads(r.out, 0, NULL), "%s", r.out);
	json_array_foreach(json_object_get(j, "tensors"), i, t)
		enc += json_object_get(t, "max_abs_error") != NULL;
	cr_assert_eq(enc, 5, "%s", r.out);
	json_decref(j);
	ts_run_free(&r);
	snprintf(cmd, sizeof(cmd), "%s convert %s/float.safetensors %s/q3.gguf --to tf --quantize q8_0", TS_CLI, dir, dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 2, "%s", cmd);
	ts_run_free(&r);
	snprintf(cmd, sizeof(cmd), "%s convert %s/float.safetensors %s/q3.gguf --to gguf --quantize iq2_xxs", TS_CLI, dir,
		dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 2, "%s", cmd);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
}

/* inspect --json: ggml type, logical shape and data offset of every tensor, as gguf.GGUFReader has them. */
Test(gguf_quant, inspect_json_gives_logical_shapes_and_offsets, .timeout = 120)
{
	char *dir = ts_tmpdir(), cmd[4096], *out;
	ts_run_result r;
	snprintf(cmd, sizeof(cmd), "write %s", dir);
	free(ft_oracle("gguf_quant.py", cmd));
	snprintf(cmd, sizeof(cmd), "%s inspect %s/blocks.gguf --json > %s/inspect.json", TS_CLI, dir, dir);
	cli_ok(&r, cmd);
	ts_run_free(&r);
	snprintf(cmd, sizeof(cmd), "check-inspect %s/blocks.gguf %s/inspect.json", dir, dir);
	out = ft_oracle("gguf_quant.py", cmd);
	cr_assert(strstr(out, "OK 26 tensors"), "%s", out);
	free(out);
	ts_rmtree(dir);
	free(dir);
}

/* A broken tensor table (overlapping offsets): inspect shows the header and the pairs, then the error, exit 1. */
Test(gguf_lenient, inspect_shows_metadata_of_overlapping_tensors, .timeout = 120)
{
	char *dir = ts_tmpdir(), cmd[4096];
	ts_run_result r;
	json_t *j;
	snprintf(cmd, sizeof(cmd), "overlap %s", dir);
	free(ft_oracle("gguf_quant.py", cmd));
	snprintf(cmd, sizeof(cmd), "%s inspect %s/overlap.gguf", TS_CLI, dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 1, "%s", cmd);
	cr_assert(strstr(r.out, "gguf: version 3, alignment 32, 3 key-value pairs"), "%s", r.out);
	cr_assert(strstr(r.out, "general.name (string) = \"overlapping tiny\""), "%s", r.out);
	cr_assert(strstr(r.out, "llama.context_length (u32) = 2048"), "%s", r.out);
	cr_assert(strstr(r.err, "tensor 'b.weight': offset 0, expected 256") && strstr(r.err, "overlapping data"), "%s",
		r.err);
	ts_run_free(&r);
	snprintf(cmd, sizeof(cmd), "%s inspect %s/overlap.gguf --json", TS_CLI, dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 1, "%s", cmd);
	cr_assert(j = json_loads(r.out, 0, NULL), "%s", r.out);
	cr_assert(strstr(json_string_value(json_object_get(j, "error")), "overlapping data"), "%s", r.out);
	cr_assert_eq(json_array_size(json_object_get(json_object_get(j, "gguf"), "kv")), 3, "%s", r.out);
	json_decref(j);
	ts_run_free(&r);
	ts_rmtree(dir);
	free(dir);
}

static size_t unhex(const char *s, unsigned char *out, size_t cap)
{
	size_t n = 0;
	for (; *s && n < cap; s++) {
		int v = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : -1, w;
		if (v < 0)
			continue;
		s++;
		w = *s >= '0' && *s <= '9' ? *s - '0' : *s - 'a' + 10;
		out[n++] = (unsigned char)(v << 4 | w);
	}
	return n;
}

/* Q4_K and Q6_K: the bytes ggml's quantize_row_q4_K_ref / quantize_row_q6_K_ref made of the same input. */
Test(gguf_quant, kquants_are_ggml_reference_bytes)
{
	static float x[16 * 256];
	static unsigned char want[16 * 210], got[16 * 210];
	size_t n;
	char *txt = ts_read_file(ts_fixture("gguf/kquant_golden.txt"), &n), *q4, *q6;
	cr_assert(txt);
	cr_assert((q4 = strstr(txt, "\nQ4_K\n")) && (q6 = strstr(txt, "\nQ6_K\n")));
	*q6 = '\0';
	kq_input(x, 16 * 256);
	cr_assert_eq(unhex(q4 + 6, want, sizeof(want)), 16 * 144);
	cr_assert_eq(ckpt_gguf_quantize(got, "Q4_K", x, 16 * 256), CKPT_OK);
	for (size_t i = 0; i < 16 * 144; i++)
		cr_assert_eq(got[i], want[i], "Q4_K byte %zu (block %zu)", i, i / 144);
	cr_assert_eq(unhex(q6 + 6, want, sizeof(want)), 16 * 210);
	cr_assert_eq(ckpt_gguf_quantize(got, "q6_k", x, 16 * 256), CKPT_OK);
	for (size_t i = 0; i < 16 * 210; i++)
		cr_assert_eq(got[i], want[i], "Q6_K byte %zu (block %zu)", i, i / 210);
	free(txt);
}

Test(gguf_quant, codec_arguments)
{
	float x[64] = { 0 }, y[64];
	unsigned char b[64 * 4];
	int64_t blck, bytes;
	cr_assert_eq(ckpt_gguf_type_block(&blck, &bytes, "q4_k"), CKPT_OK);
	cr_assert(blck == 256 && bytes == 144);
	cr_assert_eq(ckpt_gguf_type_block(&blck, &bytes, "Q9_9"), CKPT_EINVAL);
	cr_assert_eq(ckpt_gguf_quantize(b, "Q8_0", x, 48), CKPT_EINVAL);
	cr_assert(strstr(ckpt_error_last()->message, "not whole Q8_0 blocks of 32"), "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_gguf_quantize(b, "Q2_K", x, 256), CKPT_EUNSUPPORTED);
	cr_assert_eq(ckpt_gguf_dequantize(y, CKPT_DT_FLOAT, "Q8_K", b, 256), CKPT_EUNSUPPORTED); /* gguf-py has none */
	cr_assert(strstr(ckpt_error_last()->message, "no decoder for Q8_K"), "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_gguf_dequantize(y, CKPT_DT_FLOAT, "q8_1", b, 32), CKPT_EUNSUPPORTED);
	cr_assert_eq(ckpt_gguf_dequantize(y, CKPT_DT_INT32, "Q8_0", b, 32), CKPT_EINVAL);
	/* an all-zero block decodes to zeros */
	cr_assert_eq(ckpt_gguf_quantize(b, "Q4_0", x, 64), CKPT_OK);
	cr_assert_eq(ckpt_gguf_dequantize(y, CKPT_DT_FLOAT, "Q4_0", b, 64), CKPT_OK);
	for (int i = 0; i < 64; i++)
		cr_assert(y[i] == 0.0f);
}

/* README: a TF checkpoint to a Q8_0 GGUF and back to TF. */
Test(gguf_quant, tf_checkpoint_to_q8_0_gguf_and_back, .timeout = 120)
{
	char *dir = ts_tmpdir(), *prefix = ts_join(dir, "ckpt-1"), cmd[4096];
	ckpt_writer *w;
	ckpt_reader *r;
	ckpt_tensor *k, *b, *t;
	ckpt_shape ks, bs;
	int64_t kd[] = { 16, 64 }, bd[] = { 64 };
	unsigned char q[16 * 64 / 32 * 34];
	float want[16 * 64];
	ts_run_result rr;
	size_t idx;
	cr_assert_eq(ckpt_shape_make(&ks, 2, kd), CKPT_OK);
	cr_assert_eq(ckpt_shape_make(&bs, 1, bd), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&k, CKPT_DT_FLOAT, &ks), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&b, CKPT_DT_FLOAT, &bs), CKPT_OK);
	for (int i = 0; i < 16 * 64; i++)
		((float *)k->data)[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
	for (int i = 0; i < 64; i++)
		((float *)b->data)[i] = (float)i / 64.0f;
	cr_assert_eq(ckpt_writer_open(&w, prefix, "tf-bundle", NULL), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE", k, 0), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "model/dense/bias/.ATTRIBUTES/VARIABLE_VALUE", b, 0), CKPT_OK);
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	snprintf(cmd, sizeof(cmd), "cd %s && %s convert ckpt-1 model-q8_0.gguf --to gguf --quantize q8_0 && "
		"%s convert model-q8_0.gguf back --to tf --dequantize f32", dir, TS_CLI, TS_CLI);
	cli_ok(&rr, cmd);
	cr_assert(strstr(rr.out, "quantized 1 tensor to Q8_0"), "%s", rr.out);
	ts_run_free(&rr);
	snprintf(cmd, sizeof(cmd), "%s/back", dir);
	cr_assert_eq(ckpt_reader_open(&r, cmd, NULL), CKPT_OK);
	cr_assert_eq(ckpt_gguf_quantize(q, "Q8_0", k->data, 16 * 64), CKPT_OK);
	cr_assert_eq(ckpt_gguf_dequantize(want, CKPT_DT_FLOAT, "Q8_0", q, 16 * 64), CKPT_OK);
	cr_assert_eq(ckpt_reader_find(&idx, r, "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	cr_assert_eq(ckpt_reader_read(&t, r, idx), CKPT_OK);
	cr_assert(t->dtype == CKPT_DT_FLOAT && ckpt_shape_equal(&t->shape, &ks));
	cr_assert_eq(memcmp(t->data, want, sizeof(want)), 0);
	ckpt_tensor_free(t);
	cr_assert_eq(ckpt_reader_find(&idx, r, "model/dense/bias/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	cr_assert_eq(ckpt_reader_read(&t, r, idx), CKPT_OK);
	cr_assert_eq(memcmp(t->data, b->data, 64 * 4), 0); /* 1-D: kept float32 */
	ckpt_tensor_free(t);
	ckpt_reader_free(r);
	ckpt_tensor_free(k);
	ckpt_tensor_free(b);
	ts_rmtree(dir);
	free(dir);
	free(prefix);
}

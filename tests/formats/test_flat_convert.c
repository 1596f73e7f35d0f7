/*
 * The TF key <-> flat name mapping, and `ckpt convert` / inspect / verify /
 * diff on safetensors and GGUF: a libckpt-trained checkpoint with Adam slots
 * goes tf -> safetensors -> tf and tf -> gguf -> tf unchanged (ckpt diff), and
 * TensorFlow itself restores the result with the original's object graph;
 * --no-optimizer drops the slots and their graph entries; quantized GGUF
 * tensors copy raw to GGUF and are refused everywhere else.
 */
#include <stdarg.h>
#include "flat_test.h"
#include "formats/flat/flat.h"

/* ---- the name mapping ---- */

static const char *const mapped[][2] = {
	{ "model/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE", "model.layer_with_weights-0.kernel" },
	{ "save_counter/.ATTRIBUTES/VARIABLE_VALUE", "save_counter" },
	{ "model/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
	  "model.layer_with_weights-0.kernel.__slot__.optimizer.m" },
	{ "model/dense/bias/.OPTIMIZER_SLOT/optimizer/inner_optimizer/momentum/.ATTRIBUTES/VARIABLE_VALUE",
	  "model.dense.bias.__slot__.optimizer.inner_optimizer.momentum" },
	{ "table/.ATTRIBUTES/table-keys", "table.__attr__.table-keys" },
	{ "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE", "optimizer.iter" },
};

Test(flat_names, tf_keys_map_both_ways)
{
	for (size_t i = 0; i < sizeof(mapped) / sizeof(mapped[0]); i++) {
		char *f = ckpt__flat_from_key(mapped[i][0]), *k = ckpt__flat_to_key(mapped[i][1]);
		cr_assert_str_eq(f, mapped[i][1]);
		cr_assert(k, "%s does not map back", mapped[i][1]);
		cr_assert_str_eq(k, mapped[i][0]);
		ckpt__free(f);
		ckpt__free(k);
	}
}

Test(flat_names, other_keys_are_kept_verbatim_and_never_mapped_back)
{
	static const char *const verbatim[] = {
		"dense/kernel",                                 /* TF1 name */
		"dense/kernel/Adam_1",
		"model_weights/dense/dense/kernel:0",           /* Keras HDF5 dataset path */
		"a..b/c/.ATTRIBUTES/VARIABLE_VALUE",            /* TF's escape of a '.' */
		"a.S/c/.ATTRIBUTES/VARIABLE_VALUE",             /* TF's escape of a '/' */
		"a//c/.ATTRIBUTES/VARIABLE_VALUE",
		"__slot__/x/.ATTRIBUTES/VARIABLE_VALUE",
		"/.ATTRIBUTES/VARIABLE_VALUE",
		"v/.OPTIMIZER_SLOT/m/.ATTRIBUTES/VARIABLE_VALUE", /* no optimizer path */
	};
	for (size_t i = 0; i < sizeof(verbatim) / sizeof(verbatim[0]); i++) {
		char *f = ckpt__flat_from_key(verbatim[i]);
		cr_assert_str_eq(f, verbatim[i]);
		cr_assert(strchr(f, '/'));
		cr_assert_null(ckpt__flat_to_key(f), "%s maps back", f);
		ckpt__free(f);
	}
	/* flat names that are no TF path stay without a graph entry */
	static const char *const unmappable[] = { "a..b", ".a", "a.", "__slot__.o.m", "v.__slot__.m", "v.__attr__",
		"v.__attr__.a.b", "", "v.__slot__", "__attr__" };
	for (size_t i = 0; i < sizeof(unmappable) / sizeof(unmappable[0]); i++)
		cr_assert_null(ckpt__flat_to_key(unmappable[i]), "'%s' maps", unmappable[i]);
	/* every plain flat name is a TF object path */
	char *k = ckpt__flat_to_key("conv1.weight");
	cr_assert_str_eq(k, "conv1/weight/.ATTRIBUTES/VARIABLE_VALUE");
	ckpt__free(k);
}

/* ---- the CLI ---- */

static ts_run_result cli(const char *fmt, ...) CKPT_PRINTF(1, 2);
static ts_run_result cli(const char *fmt, ...)
{
	char cmd[8192], args[7000];
	va_list ap;
	ts_run_result r;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "%s %s", TS_CLI, args);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	return r;
}

#define CLI_OK(res) cr_assert_eq((res).status, 0, "exit %d\n%s\n%s", (res).status, (res).out, (res).err)

/* A trained checkpoint with Adam slots, metrics and counters (the mirrored MLP sample). */
static char *trained(const char *dir)
{
	char cmd[4096];
	ts_run_result r;
	snprintf(cmd, sizeof(cmd), "%s/samples/mlp_mirrored --dir %s/run --epochs 1", CKPT_BINARY_DIR, dir);
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	ts_assert_exit(&r, 0, "%s\n%s", r.out, r.err);
	ts_run_free(&r);
	return ts_join(dir, "run/ckpt-1");
}

Test(flat_convert, tf_to_safetensors_and_gguf_and_back, .timeout = 300)
{
	char *dir = ts_tmpdir(), *ck = trained(dir), args[4096], *out;
	ts_run_result r;
	r = cli("convert %s %s/m.safetensors --to safetensors", ck, dir);
	CLI_OK(r);
	cr_assert(strstr(r.out, "23 entries"), "%s", r.out);
	ts_run_free(&r);
	r = cli("inspect --json %s/m.safetensors", dir);
	CLI_OK(r);
	cr_assert(strstr(r.out, "\"model.layer_with_weights-0.kernel\""), "%s", r.out);
	cr_assert(strstr(r.out, "\"model.layer_with_weights-0.kernel.__slot__.optimizer.m\""));
	cr_assert(strstr(r.out, "\"format\": \"safetensors\""));
	cr_assert_null(strstr(r.out, "_CHECKPOINTABLE_OBJECT_GRAPH"));
	ts_run_free(&r);
	/* same values under the same object paths */
	r = cli("diff %s %s/m.safetensors", ck, dir);
	CLI_OK(r);
	cr_assert(strstr(r.out, "equal: 23 compared"), "%s", r.out);
	ts_run_free(&r);
	r = cli("convert %s/m.safetensors %s/back --to tf", dir, dir);
	CLI_OK(r);
	ts_run_free(&r);
	r = cli("diff %s %s/back", ck, dir);
	CLI_OK(r);
	cr_assert(strstr(r.out, "equal: 23 compared, 0 differ, 0 only in A, 0 only in B"), "%s", r.out);
	ts_run_free(&r);
	r = cli("convert %s %s/m.gguf --to gguf", ck, dir);
	CLI_OK(r);
	ts_run_free(&r);
	r = cli("convert %s/m.gguf %s/back2 --to tf", dir, dir);
	CLI_OK(r);
	ts_run_free(&r);
	r = cli("diff %s %s/back2", ck, dir);
	CLI_OK(r);
	cr_assert(strstr(r.out, "equal: 23 compared, 0 differ, 0 only in A, 0 only in B"), "%s", r.out);
	ts_run_free(&r);
	/* safetensors -> gguf -> safetensors is the identity on bytes */
	r = cli("convert %s/m.gguf %s/again.safetensors --to safetensors", dir, dir);
	CLI_OK(r);
	ts_run_free(&r);
	{
		char *a = ts_join(dir, "m.safetensors"), *b = ts_join(dir, "again.safetensors"), *x, *y;
		size_t nx, ny;
		x = ts_read_file(a, &nx);
		y = ts_read_file(b, &ny);
		cr_assert(nx == ny && memcmp(x, y, nx) == 0, "safetensors -> gguf -> safetensors changed the file");
		free(x);
		free(y);
		free(a);
		free(b);
	}
	/* restored from the flat file under a mirrored strategy: every entry placed, saved back unchanged */
	r = cli("restore %s/m.gguf --strategy mirrored --replicas 2 --save %s/rs", dir, dir);
	CLI_OK(r);
	cr_assert(strstr(r.out, "23 variables") && strstr(r.out, "; 0 unmatched"), "%s", r.out);
	ts_run_free(&r);
	r = cli("diff %s %s/rs", ck, dir);
	CLI_OK(r);
	cr_assert(strstr(r.out, "equal: 23 compared, 0 differ, 0 only in A, 0 only in B"), "%s", r.out);
	ts_run_free(&r);
	/* TensorFlow: same keys and values, same object graph, tf.train.Checkpoint restores it */
	snprintf(args, sizeof(args), "%s %s/back", ck, dir);
	out = ft_oracle("flat_tf_check.py", args);
	cr_assert(strstr(out, "OK 24 keys"), "%s", out);
	free(out);
	snprintf(args, sizeof(args), "%s %s/back2", ck, dir);
	out = ft_oracle("flat_tf_check.py", args);
	cr_assert(strstr(out, "OK 24 keys"), "%s", out);
	free(out);
	free(ck);
	ts_rmtree(dir);
	free(dir);
}

Test(flat_convert, optimizer_slots_kept_by_default_dropped_on_request, .timeout = 120)
{
	char *dir = ts_tmpdir(), *ck = trained(dir);
	ts_run_result r;
	r = cli("convert %s %s/all.safetensors --to safetensors --keep-optimizer", ck, dir);
	CLI_OK(r);
	ts_run_free(&r);
	r = cli("convert %s %s/w.safetensors --to safetensors --no-optimizer", ck, dir);
	CLI_OK(r);
	cr_assert(strstr(r.out, "10 entries") && strstr(r.out, "13 optimizer entries dropped"), "%s", r.out);
	ts_run_free(&r);
	r = cli("inspect %s/w.safetensors", dir);
	CLI_OK(r);
	cr_assert_null(strstr(r.out, "__slot__"));
	cr_assert_null(strstr(r.out, "optimizer"), "%s", r.out);
	ts_run_free(&r);
	/* tf: the object graph loses the slots' and optimizer's attributes with their values */
	r = cli("convert %s %s/w --to tf --no-optimizer", ck, dir);
	CLI_OK(r);
	ts_run_free(&r);
	r = cli("inspect %s/w", dir);
	CLI_OK(r);
	cr_assert_null(strstr(r.out, "OPTIMIZER_SLOT"), "%s", r.out);
	cr_assert_null(strstr(r.out, "optimizer/"), "%s", r.out);
	ts_run_free(&r);
	r = cli("diff %s %s/w", ck, dir);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.out, "10 compared, 0 differ, 13 only in A, 0 only in B"), "%s", r.out);
	ts_run_free(&r);
	r = cli("convert %s %s/x.safetensors --to safetensors --no-optimizer --keep-optimizer", ck, dir);
	ts_assert_exit(&r, 2, "exit status");
	ts_run_free(&r);
	free(ck);
	ts_rmtree(dir);
	free(dir);
}

Test(flat_convert, quantized_gguf_copies_raw_and_is_refused_elsewhere, .timeout = 120)
{
	json_t *m;
	char *dir = ft_reference_files(&m);
	ts_run_result r;
	int exists = 0;
	char *p;
	r = cli("inspect %s/ref.gguf", dir);
	CLI_OK(r);
	cr_assert(strstr(r.out, "blk.0.ffn_q8.weight  Q8_0 [3, 64]  204 bytes"), "%s", r.out);
	cr_assert(strstr(r.out, "llama.context_length (u32) = 4096"), "%s", r.out);
	cr_assert(strstr(r.out, "tokenizer.ggml.tokens (array) = array[string] of 4"), "%s", r.out);
	ts_run_free(&r);
	r = cli("inspect --json %s/ref.gguf", dir);
	CLI_OK(r);
	cr_assert(strstr(r.out, "\"ggml_type\": \"Q4_0\""), "%s", r.out);
	ts_run_free(&r);
	r = cli("convert %s/ref.gguf %s/q.gguf --to gguf", dir, dir);
	CLI_OK(r);
	ts_run_free(&r);
	r = cli("diff %s/ref.gguf %s/q.gguf", dir, dir);
	CLI_OK(r);
	ts_run_free(&r);
	r = cli("convert %s/ref.gguf %s/q.safetensors --to safetensors", dir, dir);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.err, "'blk.0.ffn_q8.weight'") && strstr(r.err, "Q8_0-quantized") &&
		strstr(r.err, "--dequantize f32|f16|bf16 decodes it"), "%s", r.err);
	cr_assert(strstr(r.err, "nothing written"), "%s", r.err);
	ts_run_free(&r);
	p = ts_join(dir, "q.safetensors");
	cr_assert_not(ckpt_vfs_exists(&exists, ckpt_vfs_default(), p));
	r = cli("convert %s/ref.gguf %s/q.safetensors --to safetensors --allow-partial", dir, dir);
	CLI_OK(r);
	cr_assert(strstr(r.out, "8 entries") && strstr(r.out, "2 entries not mappable"), "%s", r.out);
	ts_run_free(&r);
	r = cli("convert %s/ref.gguf %s/q --to tf --allow-partial", dir, dir);
	CLI_OK(r);
	ts_run_free(&r);
	r = cli("convert %s/ref.safetensors %s/k.weights.h5 --to keras-weights", dir, dir);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.err, "do not record the order"), "%s", r.err);
	ts_run_free(&r);
	free(p);
	json_decref(m);
	ts_rmtree(dir);
	free(dir);
}

Test(flat_convert, verify_says_what_it_checks, .timeout = 120)
{
	json_t *m;
	char *dir = ft_reference_files(&m), *p = ts_join(dir, "ref.safetensors"), *buf;
	size_t n;
	ts_run_result r;
	r = cli("verify %s", p);
	CLI_OK(r);
	cr_assert(strstr(r.out, "OK: 15 tensors") && strstr(r.out, "15 without a stored checksum"), "%s", r.out);
	ts_run_free(&r);
	/* a trailing byte (a polyglot file) is a structure error with the file and the offset */
	buf = ts_read_file(p, &n);
	buf = realloc(buf, n + 1);
	buf[n] = 'x';
	cr_assert_eq(ts_write_file(p, buf, n + 1), 0);
	r = cli("verify %s", p);
	ts_assert_exit(&r, 1, "exit status");
	cr_assert(strstr(r.err, "ref.safetensors") && strstr(r.err, "at offset") && strstr(r.err, "1 trailing bytes"),
		"%s", r.err);
	ts_run_free(&r);
	free(buf);
	free(p);
	json_decref(m);
	ts_rmtree(dir);
	free(dir);
}

/*
 * `ckpt convert IN OUT --to tf|keras-h5|keras-weights|keras|safetensors|gguf
 *   [--allow-partial] [--no-optimizer | --keep-optimizer] [--dequantize f32|f16|bf16]
 *   [--quantize TYPE [--keep GLOBS] [--quantize-1d]] [--json]`
 *
 * Reads every entry, the object graph and the metadata of IN and writes
 * them with ckpt_writer_open(OUT, format). Entries go in under their
 * canonical keys: the graph's TF-style checkpoint key where the graph has
 * an attribute for the entry (Keras readers put the dataset path in the
 * attribute's full_name, which the Keras writers use to lay out datasets),
 * else the stored name. The graph is passed unchanged.
 * Entries the target cannot take (the writer answers CKPT_EUNSUPPORTED)
 * are listed; without --allow-partial nothing is written and the exit
 * status is 1. Values are copied bit for bit.
 * Optimizer state (slots, iterations, hyper-parameters) is kept unless
 * --no-optimizer drops it (and its attributes from the object graph), with
 * the trainer state (role "trainer": data position, RNG state; ckpt/host.h),
 * which means nothing without the optimizer's.
 * Quantized GGUF tensors are copied raw to GGUF; --dequantize decodes them
 * (convert_quant.c), and --quantize encodes float tensors for a GGUF target,
 * with a report of each one's error (text, or --json).
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "cli.h"

/* The options of `ckpt convert`, filled by cli_parse through convert_opts[].field. */
typedef struct convert_args {
	const char *in;
	const char *out;
	const char *to;
	int allow_partial;
	int no_optimizer;
	int keep_optimizer;
	const char *dequantize;
	const char *quantize;
	const char *keep;
	int quantize_1d;
	int json;
} convert_args;

static const cli_opt convert_opts[] = {
	{ CLI_OPT_ARG, "IN", NULL, 1, "checkpoint to read (any supported format)",
		CLI_FIELD(convert_args, in) },
	{ CLI_OPT_ARG, "OUT", NULL, 1, "output: bundle prefix, or the file to write",
		CLI_FIELD(convert_args, out) },
	{ CLI_OPT_VALUE, "to", "FORMAT", 1, "tf | keras-h5 | keras-weights | keras | safetensors | gguf",
		CLI_FIELD(convert_args, to) },
	{ CLI_OPT_SWITCH, "allow-partial", NULL, 0, "write what can be mapped even if some entries cannot",
		CLI_FIELD(convert_args, allow_partial) },
	{ CLI_OPT_SWITCH, "no-optimizer", NULL, 0,
		"drop optimizer slots and state, and trainer state (default: keep them)",
		CLI_FIELD(convert_args, no_optimizer) },
	{ CLI_OPT_SWITCH, "keep-optimizer", NULL, 0, "keep optimizer slots and state (the default)",
		CLI_FIELD(convert_args, keep_optimizer) },
	{ CLI_OPT_VALUE, "dequantize", "DTYPE", 0, "decode quantized GGUF tensors (and F16/BF16 ones) to f32, f16 or bf16",
		CLI_FIELD(convert_args, dequantize) },
	{ CLI_OPT_VALUE, "quantize", "TYPE", 0, "--to gguf: encode float tensors as q8_0, q4_0, q4_1, q5_0, q5_1, q4_k or q6_k",
		CLI_FIELD(convert_args, quantize) },
	{ CLI_OPT_VALUE, "keep", "GLOBS", 0, "with --quantize: comma-separated names left as they are (default '*norm*')",
		CLI_FIELD(convert_args, keep) },
	{ CLI_OPT_SWITCH, "quantize-1d", NULL, 0, "with --quantize: encode 1-D tensors too (default: they stay float)",
		CLI_FIELD(convert_args, quantize_1d) },
	{ CLI_OPT_SWITCH, "json", NULL, 0, "print the result and the per-tensor quantization report as JSON",
		CLI_FIELD(convert_args, json) },
	{ CLI_OPT_END, NULL, NULL, 0, NULL, 0 }
};

static const struct {
	const char *to, *format;
} targets[] = {
	{ "tf", "tf-bundle" },
	{ "keras-h5", "keras-h5" },
	{ "keras-weights", "keras-weights" },
	{ "keras", "keras" },
	{ "safetensors", "safetensors" },
	{ "gguf", "gguf" },
};

static const char *const meta_keys[] = {
	"keras_version", "backend", "model_config", "training_config", "config.json", "metadata.json",
	"safetensors.metadata", "gguf.kv", "gguf.tensor_types"
};

/* An entry the target format cannot hold (the writer's EUNSUPPORTED message says why). */
static void report_unmappable(const char *in, const char *name, const char *format)
{
	const ckpt_error *e = ckpt_error_last();
	cli_progress_clear_line();
	fprintf(stderr, "ckpt: %s: variable '%s': cannot be mapped to %s: ", cli_vis(in), cli_vis(name), format);
	fprintf(stderr, "%s\n", cli_vis(e->message ? e->message : "unsupported"));
	ckpt_error_clear();
}

/* A writer's answer for one entry: 0 taken; 1 the target cannot hold it (listed, counted); -1 failed (reported). */
static int outcome(int arc, const char *in, const char *out, const char *name, const char *key, const char *format,
	size_t *unmapped)
{
	if (arc == CKPT_EUNSUPPORTED) {
		report_unmappable(in, name, format);
		(*unmapped)++;
		return 1;
	}
	if (arc != CKPT_OK) {
		cli_report_last(out, key);
		return -1;
	}
	return 0;
}

static void report_partial(const char *out, size_t unmapped, const char *format)
{
	cli_report(out, NULL, -1, "%zu entr%s cannot be written as %s; nothing written (use --allow-partial to write "
		"the rest)", unmapped, unmapped == 1 ? "y" : "ies", format);
}

/*
 * The order entries are handed to the writer: object-graph order first (the
 * graph lists layers as the model tracks them: layer_with_weights-0, -1,
 * ..., -10, where stored names sort "-10" before "-2"), then entries no
 * attribute refers to, in stored order. Keras writers lay out layers in
 * the order they first see them.
 */
static int write_order(const ckpt_reader *r, size_t **out)
{
	const ckpt_object_graph *g = ckpt_reader_object_graph(r);
	size_t n = ckpt_reader_num_entries(r), i, k, m = 0, idx;
	size_t *order = malloc((n ? n : 1) * sizeof(size_t));
	unsigned char *placed = calloc(n ? n : 1, 1);

	if (!order || !placed) {
		free(order);
		free(placed);
		return cli_report(ckpt_reader_path(r), NULL, -1, "out of memory");
	}
	for (i = 0; g && i < g->nnodes; i++) {
		for (k = 0; k < g->nodes[i].nattrs; k++) {
			if (cli_attr_find(r, &g->nodes[i].attrs[k], &idx) && !placed[idx]) {
				placed[idx] = 1;
				order[m++] = idx;
			}
		}
	}
	for (i = 0; i < n; i++)
		if (!placed[i])
			order[m++] = i;
	free(placed);
	*out = order;
	return CLI_EXIT_OK;
}

/* One conversion: the options, what is open, and what was written (the summary line prints it). */
typedef struct convert_job {
	const char *in, *out, *format;
	int allow_partial, no_optimizer;
	ckpt_reader *r;
	ckpt_writer *w;
	cli_progress *prog;
	char **keys;             /* canonical keys, one per entry */
	size_t n, *order;        /* entries, in write order */
	unsigned char *drop;     /* --no-optimizer: entries left out */
	unsigned char *go;       /* entries the writer took in pass 1 */
	ckpt_object_graph *pruned;
	json_t *qtypes;
	cli_qopts qo;
	char qname[16];
	int json;
	cli_qplan *plan;         /* one per entry */
	double *qerr;            /* per entry: max abs error, RMSE of an encoded value */
	cli_qbufs qb;
	size_t quantized, kept;
	void *buf;               /* one buffer reused for every fixed-size value */
	uint64_t bufcap, bytes;
	size_t dropped, written, unmapped;
} convert_job;

static int convert_parse(const cli_cmd *cmd, int argc, char **argv, convert_job *j)
{
	convert_args args;
	size_t i;
	int rc;

	memset(&args, 0, sizeof(args));
	rc = cli_parse(cmd, argc, argv, &args);
	if (rc != CLI_EXIT_OK)
		return rc;
	j->in = args.in;
	j->out = args.out;
	j->allow_partial = args.allow_partial;
	j->no_optimizer = args.no_optimizer;
	if (args.no_optimizer && args.keep_optimizer)
		return cli_usage_error(cmd, "--no-optimizer and --keep-optimizer exclude each other");
	for (i = 0; i < sizeof(targets) / sizeof(targets[0]); i++)
		if (strcmp(targets[i].to, args.to) == 0)
			j->format = targets[i].format;
	if (!j->format)
		return cli_usage_error(cmd, "--to wants tf, keras-h5, keras-weights, keras, safetensors or gguf, got '%s'",
			args.to);
	j->json = args.json;
	if (args.dequantize) {
		static const char *const dn[][2] = { { "f32", "float32" }, { "f16", "float16" }, { "bf16", "bfloat16" } };
		for (i = 0; i < 3; i++)
			if (strcmp(args.dequantize, dn[i][0]) == 0 || strcmp(args.dequantize, dn[i][1]) == 0)
				ckpt_dtype_from_name(&j->qo.deq, dn[i][1]);
		if (!j->qo.deq)
			return cli_usage_error(cmd, "--dequantize wants f32, f16 or bf16, got '%s'", args.dequantize);
	}
	if (args.quantize) {
		if (strcmp(j->format, "gguf") != 0)
			return cli_usage_error(cmd, "--quantize needs --to gguf");
		if (ckpt_gguf_quantize(NULL, args.quantize, NULL, 0) != CKPT_OK || args.quantize[0] == 'f' ||
		    args.quantize[0] == 'F' || args.quantize[0] == 'b' || args.quantize[0] == 'B') {
			ckpt_error_clear();
			return cli_usage_error(cmd, "--quantize wants q8_0, q4_0, q4_1, q5_0, q5_1, q4_k or q6_k, got '%s'",
				args.quantize);
		}
		for (i = 0; args.quantize[i] && i + 1 < sizeof(j->qname); i++) /* ggml's spelling: Q8_0 */
			j->qname[i] = (char)toupper((unsigned char)args.quantize[i]);
		j->qo.quant = j->qname;
	}
	if ((args.keep || args.quantize_1d) && !args.quantize)
		return cli_usage_error(cmd, "--keep and --quantize-1d go with --quantize");
	j->qo.keep = args.keep ? args.keep : "*norm*";
	j->qo.quant_1d = args.quantize_1d;
	return CLI_EXIT_OK;
}

/* The input: reader, keys, entries dropped with --no-optimizer; refuses what the target cannot be written from. */
static int convert_open_input(convert_job *j)
{
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	size_t i;

	cli_progress_start(&j->prog, "convert", 0, j->json);
	oo.vfs = cli_progress_vfs(j->prog, j->in, j->out);
	if (ckpt_reader_open(&j->r, j->in, &oo) != CKPT_OK)
		return cli_report_last(j->in, NULL);
	cli_progress_set_total(j->prog, 2 * cli_reader_bytes(j->r)); /* read once, written once */
	/* Keras lays a layer's variables out by position (vars/0, vars/1); flat files sort by name and lose it */
	if (strncmp(j->format, "keras", 5) == 0 && (strcmp(ckpt_reader_format(j->r), "safetensors") == 0 ||
	    strcmp(ckpt_reader_format(j->r), "gguf") == 0))
		return cli_report(j->in, NULL, -1, "%s files do not record the order of a Keras layer's variables, so %s "
			"cannot be written from them; convert to tf (or keep the original Keras file)",
			ckpt_reader_format(j->r), j->format);
	j->n = ckpt_reader_num_entries(j->r);
	if (cli_report_missing_shards(j->r))
		return CLI_EXIT_ERROR;
	if (cli_canonical_keys(j->r, &j->keys) != CLI_EXIT_OK)
		return CLI_EXIT_ERROR;
	if (!(j->drop = calloc(j->n ? j->n : 1, 1)))
		return cli_report(j->in, NULL, -1, "out of memory");
	for (i = 0; j->no_optimizer && i < j->n; i++)
		if ((ckpt_reader_var(j->r, i)->role == CKPT_ROLE_OPTIMIZER || ckpt_reader_var(j->r, i)->role ==
			CKPT_ROLE_TRAINER) && (j->drop[i] = 1))
			j->dropped++;
	if (j->dropped && cli_graph_without(j->r, j->drop, &j->pruned) != CLI_EXIT_OK)
		return CLI_EXIT_ERROR;
	j->qtypes = cli_flat_qtypes(j->r);
	if (!(j->plan = calloc(j->n ? j->n : 1, sizeof(*j->plan))) || !(j->qerr = calloc(j->n ? 2 * j->n : 1, sizeof(double))))
		return cli_report(j->in, NULL, -1, "out of memory");
	return CLI_EXIT_OK;
}

/*
 * Each entry's plan (convert_quant.c), and the "gguf.tensor_types" the
 * GGUF writer gets: quantized tensors copied raw under their stored names,
 * newly encoded ones under the keys they are written with.
 */
static int convert_plan(convert_job *j, json_t **types)
{
	size_t i;
	int to_gguf = strcmp(j->format, "gguf") == 0;

	*types = json_object();
	if (!*types)
		return cli_report(j->in, NULL, -1, "out of memory");
	for (i = 0; i < j->n; i++) {
		const ckpt_var_info *v = ckpt_reader_var(j->r, i);
		cli_qplan *p = &j->plan[i];

		if (cli_qplan_make(p, &j->qo, v, j->keys[i], j->qtypes, to_gguf) != CLI_EXIT_OK)
			return CLI_EXIT_ERROR;
		if (p->raw_quant && to_gguf)
			json_object_set(*types, v->name, json_object_get(j->qtypes, v->name));
		if (p->q) {
			json_t *sh = json_array();
			for (int d = 0; sh && d < p->logical.rank; d++)
				json_array_append_new(sh, json_integer(p->logical.dims[d]));
			json_object_set_new(*types, j->keys[i], json_pack("{s:s,s:o}", "type", p->q, "shape", sh));
		}
	}
	return CLI_EXIT_OK;
}

/* The writer, with the object graph and the metadata the target keeps. */
static int convert_open_output(convert_job *j)
{
	ckpt_write_options wo = CKPT_WRITE_OPTIONS_INIT;
	const ckpt_object_graph *g = j->dropped ? j->pruned : ckpt_reader_object_graph(j->r);
	size_t i;

	json_t *types = NULL;
	char *ts;

	wo.vfs = cli_progress_vfs(j->prog, j->in, j->out);
	if (convert_plan(j, &types) != CLI_EXIT_OK) {
		json_decref(types);
		return CLI_EXIT_ERROR;
	}
	ts = json_object_size(types) ? json_dumps(types, JSON_COMPACT) : NULL;
	json_decref(types);
	if (ckpt_writer_open(&j->w, j->out, j->format, &wo) != CKPT_OK || (ts &&
	    ckpt_writer_set_meta(j->w, "gguf.tensor_types", ts) != CKPT_OK)) {
		free(ts);
		return cli_report_last(j->out, NULL);
	}
	free(ts);
	if (g && ckpt_writer_set_object_graph(j->w, g) != CKPT_OK)
		return cli_report_last(j->out, NULL);
	for (i = 0; i < sizeof(meta_keys) / sizeof(meta_keys[0]); i++) {
		const char *value = ckpt_reader_meta(j->r, meta_keys[i]);
		int mrc;

		if (!value || strcmp(meta_keys[i], "gguf.tensor_types") == 0) /* convert_plan's, set above */
			continue;
		mrc = ckpt_writer_set_meta(j->w, meta_keys[i], value);
		if (mrc == CKPT_EUNSUPPORTED) {
			fprintf(stderr, "ckpt: %s: note: metadata '%s' is not kept by %s\n", cli_vis(j->out), meta_keys[i],
				j->format);
			ckpt_error_clear();
		} else if (mrc != CKPT_OK) {
			return cli_report_last(j->out, meta_keys[i]);
		}
	}
	return write_order(j->r, &j->order);
}

/*
 * Pass 1: which entries go, announced to the writer. Flat targets then
 * write each tensor straight to its place (no staged copy of the whole
 * checkpoint), and an entry the target cannot take is known before any
 * data is read.
 */
static int convert_announce(convert_job *j)
{
	size_t i, k;

	if (!(j->go = calloc(j->n ? j->n : 1, 1)))
		return cli_report(j->in, NULL, -1, "out of memory");
	for (k = 0; k < j->n; k++) {
		const ckpt_var_info *v = ckpt_reader_var(j->r, (i = j->order[k]));
		const char *qtype;
		int arc;

		/* the writer stores the graph given above as its own entry; slices are in their full entry's value */
		if (strcmp(v->name, CKPT_OBJECT_GRAPH_KEY) == 0 || v->slice_part || j->drop[i])
			continue;
		if ((qtype = j->plan[i].src_type) && j->plan[i].raw_quant && strcmp(j->format, "gguf") != 0) {
			cli_progress_clear_line();
			fprintf(stderr, "ckpt: %s: variable '%s': cannot be mapped to %s: it is %s-quantized (GGUF -> GGUF "
				"copies it raw; --dequantize f32|f16|bf16 decodes it)\n", cli_vis(j->in), cli_vis(v->name), j->format,
				qtype);
			j->unmapped++;
			continue;
		}
		arc = outcome(ckpt_writer_announce(j->w, j->keys[i], j->plan[i].dtype, &j->plan[i].shape), j->in, j->out,
			v->name, j->keys[i], j->format, &j->unmapped);
		if (arc < 0)
			return CLI_EXIT_ERROR;
		j->go[i] = arc == 0;
	}
	return CLI_EXIT_OK;
}

/* The reused buffer, grown to hold a fixed-size value of `v`. */
static int grow_buffer(convert_job *j, const ckpt_var_info *v)
{
	void *nb;

	if (v->dtype == CKPT_DT_STRING || v->nbytes <= j->bufcap)
		return CLI_EXIT_OK;
	if (!(nb = realloc(j->buf, v->nbytes)))
		return cli_report(j->in, v->name, -1, "out of memory for %" PRIu64 " bytes", v->nbytes);
	j->buf = nb;
	j->bufcap = v->nbytes;
	return CLI_EXIT_OK;
}

/* Entry i's value: strings read whole, fixed-size values into the reused buffer (grow_buffer first). */
static int read_value(convert_job *j, size_t i, ckpt_tensor **t, ckpt_tensor *fixed)
{
	const ckpt_var_info *v = ckpt_reader_var(j->r, i);

	if (v->dtype == CKPT_DT_STRING)
		return ckpt_reader_read(t, j->r, i);
	*fixed = (ckpt_tensor){ v->dtype, v->shape, v->nbytes, j->buf, 0 };
	*t = fixed;
	return ckpt_reader_read_into(j->r, i, j->buf, v->nbytes);
}

/* Pass 2: the values of the entries pass 1 let through. */
static int convert_copy(convert_job *j)
{
	size_t i, k;

	for (k = 0; k < j->n; k++) {
		const ckpt_var_info *v = ckpt_reader_var(j->r, (i = j->order[k]));
		const cli_qplan *p = &j->plan[i];
		ckpt_tensor *t = NULL, fixed;
		const void *val;
		uint64_t nb;
		int arc;

		if (!j->go[i])
			continue;
		if (grow_buffer(j, v) != CLI_EXIT_OK)
			return CLI_EXIT_ERROR;
		if ((arc = read_value(j, i, &t, &fixed)) != CKPT_OK)
			return cli_report_last(ckpt_reader_path(j->r), v->name);
		if (t == &fixed) {
			if ((arc = cli_qplan_value(p, v, j->buf, &j->qb, &val, &nb, &j->qerr[2 * i], &j->qerr[2 * i + 1])) != CKPT_OK)
				return arc == CKPT_ENOMEM ? cli_report(j->in, v->name, -1, "out of memory") :
					cli_report_last(ckpt_reader_path(j->r), v->name);
			fixed = (ckpt_tensor){ p->dtype, p->shape, nb, (void *)val, 0 };
			j->quantized += p->q != NULL;
			j->kept += p->kept != NULL;
		}
		nb = t == &fixed ? fixed.nbytes : v->nbytes;
		arc = ckpt_writer_add(j->w, j->keys[i], t, 0);
		if (t != &fixed)
			ckpt_tensor_free(t);
		arc = outcome(arc, j->in, j->out, v->name, j->keys[i], j->format, &j->unmapped);
		if (arc < 0)
			return CLI_EXIT_ERROR;
		if (arc > 0)
			continue;
		j->written++;
		j->bytes += nb;
	}
	return CLI_EXIT_OK;
}

/* The entries --quantize encoded, with their error, then those it left as they were and why. */
static void convert_print_quant(const convert_job *j)
{
	size_t i, k;
	char sh[256];

	if (!j->qo.quant)
		return;
	printf("quantized %zu tensor%s to %s (error of the decoded values against the source):\n", j->quantized,
		j->quantized == 1 ? "" : "s", j->qo.quant);
	for (k = 0; k < j->n; k++) {
		const cli_qplan *p = &j->plan[i = j->order[k]];
		if (!j->go[i] || !p->q)
			continue;
		ckpt_shape_format(&p->logical, sh, sizeof(sh));
		printf("  %s  %s %s  max abs error %.6g  RMSE %.6g\n", cli_vis(ckpt_reader_var(j->r, i)->name), p->q, sh,
			j->qerr[2 * i], j->qerr[2 * i + 1]);
	}
	if (j->kept)
		printf("kept as stored: %zu tensor%s\n", j->kept, j->kept == 1 ? "" : "s");
	for (k = 0; k < j->n; k++) {
		const cli_qplan *p = &j->plan[i = j->order[k]];
		if (j->go[i] && p->kept)
			printf("  %s  %s (%s)\n", cli_vis(ckpt_reader_var(j->r, i)->name), ckpt_dtype_name(p->dtype), p->kept);
	}
}

static void convert_print_json(const convert_job *j)
{
	jw w;
	size_t i, k;

	jw_init(&w, stdout);
	jw_object_begin(&w);
	jw_key(&w, "output");
	jw_string(&w, j->out);
	jw_key(&w, "format");
	jw_string(&w, j->format);
	jw_key(&w, "entries");
	jw_uint(&w, j->written);
	jw_key(&w, "bytes");
	jw_uint(&w, j->bytes);
	jw_key(&w, "unmapped");
	jw_uint(&w, j->unmapped);
	jw_key(&w, "optimizer_dropped");
	jw_uint(&w, j->dropped);
	jw_key(&w, "dequantize");
	jw_string(&w, j->qo.deq ? ckpt_dtype_name(j->qo.deq) : NULL);
	jw_key(&w, "quantize");
	jw_string(&w, j->qo.quant);
	jw_key(&w, "tensors");
	jw_array_begin(&w);
	for (k = 0; k < j->n; k++) {
		const cli_qplan *p = &j->plan[i = j->order[k]];
		if (!j->go[i])
			continue;
		jw_object_begin(&w);
		jw_key(&w, "name");
		jw_string(&w, ckpt_reader_var(j->r, i)->name);
		jw_key(&w, "type");
		jw_string(&w, p->q ? p->q : p->raw_quant ? p->src_type : ckpt_dtype_name(p->dtype));
		jw_key(&w, "shape");
		jw_shape(&w, &p->logical);
		if (p->src_type) {
			jw_key(&w, "source_type");
			jw_string(&w, p->src_type);
		}
		if (p->q) {
			jw_key(&w, "max_abs_error");
			jw_double(&w, j->qerr[2 * i]);
			jw_key(&w, "rmse");
			jw_double(&w, j->qerr[2 * i + 1]);
		}
		if (p->kept) {
			jw_key(&w, "kept");
			jw_string(&w, p->kept);
		}
		jw_object_end(&w);
	}
	jw_array_end(&w);
	jw_object_end(&w);
	jw_end_line(&w);
}

static void convert_print(const convert_job *j)
{
	if (j->json) {
		convert_print_json(j);
		return;
	}
	printf("wrote %s (%s): %zu entries, %" PRIu64 " bytes", cli_vis(j->out), j->format, j->written, j->bytes);
	if (j->unmapped)
		printf("; %zu entr%s not mappable, skipped", j->unmapped, j->unmapped == 1 ? "y" : "ies");
	if (j->dropped)
		printf("; %zu optimizer entr%s dropped", j->dropped, j->dropped == 1 ? "y" : "ies");
	printf("\n");
	convert_print_quant(j);
}

static void convert_job_free(convert_job *j)
{
	free(j->buf);
	free(j->plan);
	free(j->qerr);
	cli_qbufs_free(&j->qb);
	free(j->go);
	free(j->order);
	free(j->drop);
	cli_graph_free(j->pruned);
	json_decref(j->qtypes);
	ckpt_writer_free(j->w);
	cli_keys_free(j->keys, j->n);
	ckpt_reader_free(j->r);
	cli_progress_free(j->prog);
}

/* Entries left unmapped fail the conversion unless --allow-partial. */
static int partial_ok(const convert_job *j)
{
	if (j->unmapped && !j->allow_partial) {
		report_partial(j->out, j->unmapped, j->format);
		return 0;
	}
	return 1;
}

static int cmd_convert(const cli_cmd *cmd, int argc, char **argv)
{
	convert_job j;
	int rc;

	memset(&j, 0, sizeof(j));
	rc = convert_parse(cmd, argc, argv, &j);
	if (rc != CLI_EXIT_OK)
		return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
	rc = CLI_EXIT_ERROR;
	if (convert_open_input(&j) == CLI_EXIT_OK && convert_open_output(&j) == CLI_EXIT_OK &&
	    convert_announce(&j) == CLI_EXIT_OK && partial_ok(&j) && convert_copy(&j) == CLI_EXIT_OK && partial_ok(&j)) {
		if (ckpt_writer_commit(j.w) != CKPT_OK) {
			cli_report_last(j.out, NULL);
		} else {
			cli_progress_done(j.prog);
			convert_print(&j);
			rc = CLI_EXIT_OK;
		}
	}
	convert_job_free(&j);
	return rc;
}

const cli_cmd cli_cmd_convert = {
	"convert", cmd_convert, "Convert between TensorBundle, Keras, safetensors and GGUF files",
	convert_opts,
	"Reads every entry, the object graph and the metadata of IN and writes\n"
	"OUT in the target format (tf: a TensorBundle at prefix OUT; keras-h5: a\n"
	"legacy Keras .h5; keras-weights: a Keras 3 .weights.h5; keras: a .keras\n"
	"archive; safetensors, gguf: one flat file, TF keys mapped to dotted names\n"
	"as README.md describes). Values are copied bit for bit (but see --dequantize\n"
	"and --quantize below). Entries the target\n"
	"cannot take (GGUF: unsigned, bool and empty tensors, names over 63 bytes;\n"
	"quantized GGUF tensors anywhere but GGUF, unless --dequantize) are listed;\n"
	"then nothing is written and the exit status is 1, unless --allow-partial\n"
	"is given.\n"
	"--dequantize decodes quantized GGUF tensors (and F16/BF16 ones) to the\n"
	"given float type, bit-identical with gguf-py. --quantize (--to gguf)\n"
	"encodes float tensors of rank >= 2 as llama.cpp's quantize does: 1-D\n"
	"tensors and names matching --keep (default '*norm*') stay as they are;\n"
	"the report gives each encoded tensor's max abs error and RMSE.\n"
	"Optimizer slots and state, and the trainer state (role trainer), are kept\n"
	"unless --no-optimizer is given.\n"
	"safetensors and GGUF convert to tf, safetensors and gguf, not to Keras\n"
	"files (they do not record the order of a layer's variables)."
};

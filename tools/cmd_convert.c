/*
 * `ckpt convert IN OUT --to tf|keras-h5|keras-weights|keras|safetensors|gguf
 *   [--allow-partial] [--no-optimizer | --keep-optimizer]`
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
 * --no-optimizer drops it (and its attributes from the object graph).
 * Quantized GGUF tensors go to GGUF only: any other target would need
 * them dequantized, which convert refuses.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "cli.h"

static const cli_opt convert_opts[] = {
	{ CLI_OPT_ARG, "IN", NULL, 1, "checkpoint to read (any supported format)" },
	{ CLI_OPT_ARG, "OUT", NULL, 1, "output: bundle prefix, or the file to write" },
	{ CLI_OPT_VALUE, "to", "FORMAT", 1, "tf | keras-h5 | keras-weights | keras | safetensors | gguf" },
	{ CLI_OPT_SWITCH, "allow-partial", NULL, 0, "write what can be mapped even if some entries cannot" },
	{ CLI_OPT_SWITCH, "no-optimizer", NULL, 0, "drop optimizer slots and state (default: keep them)" },
	{ CLI_OPT_SWITCH, "keep-optimizer", NULL, 0, "keep optimizer slots and state (the default)" },
	{ CLI_OPT_END, NULL, NULL, 0, NULL }
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
	size_t n = ckpt_reader_count(r), i, k, m = 0, idx;
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

static int cmd_convert(const cli_cmd *cmd, int argc, char **argv)
{
	cli_args args;
	const char *in, *out, *to, *format = NULL;
	int allow_partial, no_opt, rc;
	unsigned char *drop = NULL, *go = NULL;
	void *buf = NULL;
	uint64_t bufcap = 0;
	ckpt_object_graph *pruned = NULL;
	json_t *qtypes = NULL;
	size_t dropped = 0;
	ckpt_reader *r = NULL;
	ckpt_writer *w = NULL;
	const ckpt_object_graph *g;
	ckpt_write_options wo = CKPT_WRITE_OPTIONS_INIT;
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	cli_progress *prog = NULL;
	char **keys = NULL;
	size_t i, k, n = 0, written = 0, unmapped = 0, *order = NULL;
	uint64_t bytes = 0;

	rc = cli_parse(cmd, argc, argv, &args);
	if (rc == CLI_PARSE_HELP)
		return CLI_EXIT_OK;
	if (rc != CLI_EXIT_OK)
		return rc;
	in = cli_get(cmd, &args, "IN");
	out = cli_get(cmd, &args, "OUT");
	to = cli_get(cmd, &args, "to");
	allow_partial = cli_get(cmd, &args, "allow-partial") != NULL;
	no_opt = cli_get(cmd, &args, "no-optimizer") != NULL;
	if (no_opt && cli_get(cmd, &args, "keep-optimizer"))
		return cli_usage_error(cmd, "--no-optimizer and --keep-optimizer exclude each other");
	for (i = 0; i < sizeof(targets) / sizeof(targets[0]); i++)
		if (strcmp(targets[i].to, to) == 0)
			format = targets[i].format;
	if (!format)
		return cli_usage_error(cmd, "--to wants tf, keras-h5, keras-weights, keras, safetensors or gguf, got '%s'", to);

	cli_progress_start(&prog, "convert", 0, 0);
	oo.vfs = cli_progress_vfs(prog, in, out);
	wo.vfs = oo.vfs;
	if (ckpt_reader_open(&r, in, &oo) != CKPT_OK) {
		cli_progress_free(prog);
		return cli_report_last(in, NULL);
	}
	cli_progress_set_total(prog, 2 * cli_reader_bytes(r)); /* read once, written once */
	rc = CLI_EXIT_ERROR;
	/* Keras lays a layer's variables out by position (vars/0, vars/1); flat files sort by name and lose it */
	if (strncmp(format, "keras", 5) == 0 && (strcmp(ckpt_reader_format(r), "safetensors") == 0 ||
	    strcmp(ckpt_reader_format(r), "gguf") == 0)) {
		cli_report(in, NULL, -1, "%s files do not record the order of a Keras layer's variables, so %s cannot "
			"be written from them; convert to tf (or keep the original Keras file)", ckpt_reader_format(r), format);
		goto done;
	}
	n = ckpt_reader_count(r);
	if (cli_report_missing_shards(r))
		goto done;
	if (cli_canonical_keys(r, &keys) != CLI_EXIT_OK)
		goto done;
	g = ckpt_reader_object_graph(r);
	if (!(drop = calloc(n ? n : 1, 1))) {
		cli_report(in, NULL, -1, "out of memory");
		goto done;
	}
	for (i = 0; no_opt && i < n; i++)
		if (ckpt_reader_var(r, i)->role == CKPT_ROLE_OPTIMIZER && (drop[i] = 1))
			dropped++;
	if (dropped) {
		if (cli_graph_without(r, drop, &pruned) != CLI_EXIT_OK)
			goto done;
		g = pruned;
	}
	qtypes = cli_flat_qtypes(r);
	if (ckpt_writer_open(&w, out, format, &wo) != CKPT_OK) {
		cli_report_last(out, NULL);
		goto done;
	}
	if (g && ckpt_writer_set_object_graph(w, g) != CKPT_OK) {
		cli_report_last(out, NULL);
		goto done;
	}
	for (i = 0; i < sizeof(meta_keys) / sizeof(meta_keys[0]); i++) {
		const char *value = ckpt_reader_meta(r, meta_keys[i]);
		int mrc;

		if (!value)
			continue;
		mrc = ckpt_writer_set_meta(w, meta_keys[i], value);
		if (mrc == CKPT_EUNSUPPORTED) {
			fprintf(stderr, "ckpt: %s: note: metadata '%s' is not kept by %s\n", cli_vis(out), meta_keys[i], format);
			ckpt_error_clear();
		} else if (mrc != CKPT_OK) {
			cli_report_last(out, meta_keys[i]);
			goto done;
		}
	}
	if (write_order(r, &order) != CLI_EXIT_OK)
		goto done;
	/*
	 * Pass 1: which entries go, announced to the writer. Flat targets then
	 * write each tensor straight to its place (no staged copy of the whole
	 * checkpoint), and an entry the target cannot take is known before any
	 * data is read.
	 */
	if (!(go = calloc(n ? n : 1, 1))) {
		cli_report(in, NULL, -1, "out of memory");
		goto done;
	}
	for (k = 0; k < n; k++) {
		const ckpt_var_info *v;
		int arc;

		i = order[k];
		v = ckpt_reader_var(r, i);
		/* the writer stores the graph given above as its own entry; slices are in their full entry's value */
		if (strcmp(v->name, CKPT_OBJECT_GRAPH_KEY) == 0 || v->slice_part || drop[i])
			continue;
		if (cli_flat_qtype(qtypes, v->name) && strcmp(format, "gguf") != 0) {
			cli_progress_clear_line();
			fprintf(stderr, "ckpt: %s: variable '%s': cannot be mapped to %s: it is %s-quantized and converting "
				"it would need dequantizing, which ckpt does not do (GGUF -> GGUF copies it raw)\n", cli_vis(in),
				cli_vis(v->name), format, cli_flat_qtype(qtypes, v->name));
			unmapped++;
			continue;
		}
		arc = outcome(ckpt_writer_announce(w, keys[i], v->dtype, &v->shape), in, out, v->name, keys[i], format,
			&unmapped);
		if (arc < 0)
			goto done;
		go[i] = arc == 0;
	}
	if (unmapped && !allow_partial) {
		report_partial(out, unmapped, format);
		goto done;
	}
	/* Pass 2: the values, through one buffer reused for every fixed-size entry */
	for (k = 0; k < n; k++) {
		const ckpt_var_info *v;
		ckpt_tensor *t = NULL, fixed;
		int arc;

		i = order[k];
		v = ckpt_reader_var(r, i);
		if (!go[i])
			continue;
		if (v->dtype == CKPT_DT_STRING) {
			arc = ckpt_reader_read(r, i, &t);
		} else {
			if (v->nbytes > bufcap) {
				void *nb = realloc(buf, v->nbytes);
				if (!nb) {
					cli_report(in, v->name, -1, "out of memory for %" PRIu64 " bytes", v->nbytes);
					goto done;
				}
				buf = nb;
				bufcap = v->nbytes;
			}
			fixed = (ckpt_tensor){ v->dtype, v->shape, v->nbytes, buf, 0 };
			t = &fixed;
			arc = ckpt_reader_read_into(r, i, buf, v->nbytes);
		}
		if (arc != CKPT_OK) {
			cli_report_last(ckpt_reader_path(r), v->name);
			goto done;
		}
		arc = ckpt_writer_add(w, keys[i], t, 0);
		if (t != &fixed)
			ckpt_tensor_free(t);
		arc = outcome(arc, in, out, v->name, keys[i], format, &unmapped);
		if (arc < 0)
			goto done;
		if (arc > 0)
			continue;
		written++;
		bytes += v->nbytes;
	}
	if (unmapped && !allow_partial) {
		report_partial(out, unmapped, format);
		goto done;
	}
	if (ckpt_writer_commit(w) != CKPT_OK) {
		cli_report_last(out, NULL);
		goto done;
	}
	cli_progress_done(prog);
	printf("wrote %s (%s): %zu entries, %" PRIu64 " bytes", cli_vis(out), format, written, bytes);
	if (unmapped)
		printf("; %zu entr%s not mappable, skipped", unmapped, unmapped == 1 ? "y" : "ies");
	if (dropped)
		printf("; %zu optimizer entr%s dropped", dropped, dropped == 1 ? "y" : "ies");
	printf("\n");
	rc = CLI_EXIT_OK;
done:
	free(buf);
	free(go);
	free(order);
	free(drop);
	cli_graph_free(pruned);
	json_decref(qtypes);
	ckpt_writer_free(w);
	cli_keys_free(keys, n);
	ckpt_reader_free(r);
	cli_progress_free(prog);
	return rc;
}

const cli_cmd cli_cmd_convert = {
	"convert", cmd_convert, "Convert between TensorBundle, Keras, safetensors and GGUF files",
	convert_opts,
	"Reads every entry, the object graph and the metadata of IN and writes\n"
	"OUT in the target format (tf: a TensorBundle at prefix OUT; keras-h5: a\n"
	"legacy Keras .h5; keras-weights: a Keras 3 .weights.h5; keras: a .keras\n"
	"archive; safetensors, gguf: one flat file, TF keys mapped to dotted names\n"
	"as README.md describes). Values are copied bit for bit. Entries the target\n"
	"cannot take (GGUF: unsigned, bool and empty tensors, names over 63 bytes;\n"
	"quantized GGUF tensors anywhere but GGUF) are listed; then nothing is\n"
	"written and the exit status is 1, unless --allow-partial is given.\n"
	"Optimizer slots and state are kept unless --no-optimizer is given.\n"
	"safetensors and GGUF convert to tf, safetensors and gguf, not to Keras\n"
	"files (they do not record the order of a layer's variables)."
};

/*
 * `ckpt inspect PATH [--json]`: what a checkpoint holds.
 *
 * Human output: format, data files (and missing ones), the object tree
 * (model, optimizer with its slot variables, metrics, other state), for
 * Keras files the layers from the model config, and a table of tensors
 * with their checksum status and totals. Every tensor is read, so every
 * stored checksum is verified.
 *
 * --json prints exactly
 *   {"path": "...", "format": "tf-bundle", "variables": [{"name": "<key as
 *   stored>", "dtype": "float32", "shape": [2, 2], "bytes": 16,
 *   "crc32": "0x1a2b3c4d", "crc32c": "0x5e6f7a8b", "role": "model"}, ...]}
 * (a partitioned entry adds "slices": [[[start, end] or null per dimension], ...])
 * with crc32 = zlib crc32 of the tensor (ckpt_tensor_crc32) and crc32c its
 * CRC-32C (ckpt_tensor_crc32c, what `ckpt restore` checks copies against),
 * null when the data cannot be read (the error goes to stderr and the exit status is 1),
 * followed by the sections inspect_json.c writes (files, GGUF / safetensors
 * metadata, Keras metadata, the object graph) and "saved_model".
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "cli.h"

/* The options of `ckpt inspect`, filled by cli_parse through inspect_opts[].field. */
typedef struct inspect_args {
	const char *path;
	int json;
	const char *max_array;
	const char *sync_on_read;
} inspect_args;

static const cli_opt inspect_opts[] = {
	{ CLI_OPT_ARG, "PATH", NULL, 1, "checkpoint: bundle prefix, .index, directory, SavedModel, .h5, .keras, .safetensors, .gguf",
		CLI_FIELD(inspect_args, path) },
	{ CLI_OPT_SWITCH, "json", NULL, 0, "print machine-readable JSON (one object) instead of text",
		CLI_FIELD(inspect_args, json) },
	{ CLI_OPT_VALUE, "max-array", "N", 0, "--json: the first N values of each metadata array (default 1024; 0: all)",
		CLI_FIELD(inspect_args, max_array) },
	{ CLI_OPT_VALUE, "sync-on-read", "PATTERN=AGG[,...]", 0,
		"treat matching variables as sync-on-read (AGG sum, mean or first; sum: role metric)",
		CLI_FIELD(inspect_args, sync_on_read) },
	{ CLI_OPT_END, NULL, NULL, 0, NULL, 0 }
};

/* Per-entry outcome of reading the data. */
enum { ST_OK, ST_MISSING, ST_BAD };

typedef struct inspect_state {
	ckpt_reader *r;
	size_t n;
	int *status;        /* ST_* per entry */
	uint32_t *crc;      /* zlib crc32 per entry when ST_OK */
	uint32_t *crc32c;   /* CRC-32C per entry when ST_OK (what `ckpt restore` checks copies against) */
	int failed;         /* entries that could not be read */
	uint64_t max_array; /* --json: values shown of a metadata array (0: all) */
} inspect_state;

/* Read every entry once: checksum verification and crc32 for the output. */
static void read_all(inspect_state *st)
{
	size_t i;

	for (i = 0; i < st->n; i++) {
		const ckpt_var_info *v = ckpt_reader_var(st->r, i);
		ckpt_tensor *t = NULL;

		if (cli_var_in_missing_shard(st->r, v)) {
			st->status[i] = ST_MISSING;
			st->failed++;
			continue;
		}
		if (ckpt_reader_read(&t, st->r, i) != CKPT_OK) {
			cli_report_last(ckpt_reader_path(st->r), v->name);
			st->status[i] = ST_BAD;
			st->failed++;
			continue;
		}
		st->crc[i] = ckpt_tensor_crc32(t);
		st->crc32c[i] = ckpt_tensor_crc32c(t);
		st->status[i] = ST_OK;
		ckpt_tensor_free(t);
	}
}

/* A partitioned entry's slices: [start, end] per dimension (null: all of it). */
static void print_slices_json(jw *w, const ckpt_var_info *v)
{
	jw_key(w, "slices");
	jw_array_begin(w);
	for (size_t k = 0; k < v->nslices; k++) {
		const ckpt_slice *sl = &v->slices[k];
		jw_array_begin(w);
		for (int d = 0; d < sl->rank; d++) {
			const ckpt_extent *e = &sl->extents[d];
			if (e->length < 0) {
				jw_null(w);
				continue;
			}
			jw_array_begin(w);
			jw_int(w, e->start);
			jw_int(w, e->start + e->length);
			jw_array_end(w);
		}
		jw_array_end(w);
	}
	jw_array_end(w);
}

/*
 * A GGUF tensor as ggml sees it, so a reader of the JSON needs no block
 * tables: its ggml type, its logical row-major shape (a quantized tensor's
 * "dtype"/"shape" are the uint8 byte view) and where its data starts in the file.
 */
static void print_gguf_tensor_json(jw *w, const ckpt_var_info *v, json_t *qtypes)
{
	static const struct {
		ckpt_dtype dt;
		const char *name;
	} plain[] = { { CKPT_DT_FLOAT, "F32" }, { CKPT_DT_HALF, "F16" }, { CKPT_DT_BFLOAT16, "BF16" },
		{ CKPT_DT_DOUBLE, "F64" }, { CKPT_DT_INT8, "I8" }, { CKPT_DT_INT16, "I16" }, { CKPT_DT_INT32, "I32" },
		{ CKPT_DT_INT64, "I64" } };
	const char *q = cli_flat_qtype(qtypes, v->name), *type = q;
	json_t *sh = q ? json_object_get(json_object_get(qtypes, v->name), "shape") : NULL;
	size_t k;

	for (k = 0; !type && k < sizeof(plain) / sizeof(plain[0]); k++)
		if (plain[k].dt == v->dtype)
			type = plain[k].name;
	jw_key(w, "ggml_type");
	jw_string(w, type);
	jw_key(w, "logical_shape");
	if (q) {
		jw_array_begin(w);
		for (k = 0; k < json_array_size(sh); k++)
			jw_int(w, json_integer_value(json_array_get(sh, k)));
		jw_array_end(w);
	} else {
		jw_shape(w, &v->shape);
	}
	jw_key(w, "data_offset");
	jw_int(w, v->offset);
}

static void print_var_json(jw *w, const inspect_state *st, size_t i, json_t *qtypes)
{
	const ckpt_var_info *v = ckpt_reader_var(st->r, i);

	jw_object_begin(w);
	jw_key(w, "name");
	jw_string(w, v->name);
	jw_key(w, "dtype");
	jw_string(w, ckpt_dtype_name(v->dtype));
	jw_key(w, "shape");
	jw_shape(w, &v->shape);
	jw_key(w, "bytes");
	jw_uint(w, v->nbytes);
	jw_key(w, "crc32");
	st->status[i] == ST_OK ? jw_crc32(w, st->crc[i]) : jw_null(w);
	jw_key(w, "crc32c");
	st->status[i] == ST_OK ? jw_crc32(w, st->crc32c[i]) : jw_null(w);
	jw_key(w, "role");
	jw_string(w, ckpt_role_name(v->role));
	if (strcmp(ckpt_reader_format(st->r), "gguf") == 0)
		print_gguf_tensor_json(w, v, qtypes);
	if (v->nslices)
		print_slices_json(w, v);
	if (v->sync_source != CKPT_SYNC_SOURCE_NONE) {
		/* only where saved_model.pb or --sync-on-read says it */
		jw_key(w, "sync");
		jw_string(w, cli_sync_name(v->sync));
		jw_key(w, "aggregation");
		jw_string(w, cli_aggregation_name(v->aggregation));
		jw_key(w, "sync_source");
		jw_string(w, cli_sync_source_name(v->sync_source));
	}
	jw_object_end(w);
}

static void print_json(const inspect_state *st)
{
	size_t i;
	json_t *qtypes = cli_flat_qtypes(st->r);
	jw w;

	jw_init(&w, stdout);
	jw_object_begin(&w);
	jw_key(&w, "path");
	jw_string(&w, ckpt_reader_path(st->r));
	jw_key(&w, "format");
	jw_string(&w, ckpt_reader_format(st->r));
	jw_key(&w, "variables");
	jw_array_begin(&w);
	for (i = 0; i < st->n; i++)
		print_var_json(&w, st, i, qtypes);
	jw_array_end(&w);
	cli_inspect_sections_json(&w, st->r, st->max_array);
	if (ckpt_reader_saved_model(st->r)) {
		jw_key(&w, "saved_model");
		cli_print_saved_model_json(&w, ckpt_reader_saved_model(st->r));
	}
	jw_object_end(&w);
	jw_end_line(&w);
	json_decref(qtypes);
}

/* Variables whose synchronization saved_model.pb or --sync-on-read gives. */
static void print_sync(const ckpt_reader *r)
{
	size_t i, n = 0;

	for (i = 0; i < ckpt_reader_num_entries(r); i++)
		n += ckpt_reader_var(r, i)->sync_source != CKPT_SYNC_SOURCE_NONE;
	if (!n)
		return;
	printf("synchronization (%zu variable%s):\n", n, n == 1 ? "" : "s");
	for (i = 0; i < ckpt_reader_num_entries(r); i++) {
		const ckpt_var_info *v = ckpt_reader_var(r, i);
		if (v->sync_source == CKPT_SYNC_SOURCE_NONE)
			continue;
		printf("  %s  %s %s  (%s)\n", cli_vis(v->name), v->sync == CKPT_SYNC_ON_READ ? "sync-on-read" : "on-write",
			cli_aggregation_name(v->aggregation),
			v->sync_source == CKPT_SYNC_SOURCE_SAVED_MODEL ? "saved_model.pb" : "--sync-on-read");
	}
	printf("\n");
}

/* ---- the object tree ---- */

typedef struct tree_ctx {
	const ckpt_object_graph *g;
	const ckpt_reader *r;
	unsigned char *has_values; /* subtree holds attributes or slots: 0/1; 2 computing; 3 unknown */
	unsigned char *printed;
	size_t hidden;             /* objects without saved values, not shown */
} tree_ctx;

static int subtree_has_values(tree_ctx *c, int id, int depth)
{
	const ckpt_og_node *n = &c->g->nodes[id];
	size_t k;
	int has;

	if (c->has_values[id] != 3)
		return c->has_values[id] == 1;
	if (depth >= CKPT_MAX_OBJECT_GRAPH_DEPTH)
		return 1; /* bounded recursion on hostile graphs: show rather than hide */
	c->has_values[id] = 2; /* a cycle back here counts as empty */
	has = n->nattrs > 0 || n->nslots > 0;
	for (k = 0; k < n->nchildren; k++) {
		int child = n->children[k].node_id;
		if (child >= 0 && (size_t)child < c->g->nnodes && subtree_has_values(c, child, depth + 1))
			has = 1;
	}
	c->has_values[id] = (unsigned char)has;
	return has;
}

/* The entries of a multi-tensor attribute: stored under its checkpoint key + a suffix ("…/table-keys"). */
static size_t print_attr_tensors(const tree_ctx *c, const ckpt_og_attr *a, int depth)
{
	size_t i, kl, found = 0, n = ckpt_reader_num_entries(c->r);
	char shape[256];

	if (!a->checkpoint_key || !*a->checkpoint_key)
		return 0;
	kl = strlen(a->checkpoint_key);
	for (i = 0; i < n; i++) {
		const ckpt_var_info *v = ckpt_reader_var(c->r, i);
		if (strncmp(v->name, a->checkpoint_key, kl) != 0 || !v->name[kl] || strchr(v->name + kl, '/'))
			continue;
		if (!found++)
			printf("\n");
		ckpt_shape_format(&v->shape, shape, sizeof(shape));
		printf("%*s%s  %s %s  <- %s\n", (depth + 1) * 2, "", cli_vis(v->name + kl), ckpt_dtype_name(v->dtype), shape,
			cli_vis(v->name));
	}
	return found;
}

static void print_attr(const tree_ctx *c, const ckpt_og_attr *a, int depth)
{
	size_t idx;
	char shape[256];

	/* depth < 0: continue the caller's line (a variable shown as one line), the node at depth -depth - 1 */
	if (depth >= 0)
		printf("%*s.%s", depth * 2, "", cli_vis(a->name ? a->name : "?"));
	else if (a->name && strcmp(a->name, CKPT_VARIABLE_VALUE_KEY) != 0)
		printf(" .%s", cli_vis(a->name));
	if (cli_attr_find(c->r, a, &idx)) {
		const ckpt_var_info *v = ckpt_reader_var(c->r, idx);
		ckpt_shape_format(&v->shape, shape, sizeof(shape));
		printf("  %s %s  <- %s\n", ckpt_dtype_name(v->dtype), shape, cli_vis(v->name));
	} else if (!print_attr_tensors(c, a, depth < 0 ? -depth : depth)) {
		printf("  <- %s (not stored)\n", cli_vis(a->checkpoint_key ? a->checkpoint_key : "?"));
	}
}

static void print_node(tree_ctx *c, int id, const char *local, int depth)
{
	const ckpt_og_node *n = &c->g->nodes[id];
	size_t k;

	if (c->printed[id]) {
		char *path = NULL;
		if (ckpt_object_graph_path(&path, c->g, id) == CKPT_OK)
			printf("%*s%s/ -> same object as %s\n", depth * 2, "", cli_vis(local), *path ? cli_vis(path) : "(root)");
		free(path);
		ckpt_error_clear();
		return;
	}
	c->printed[id] = 1;
	if (n->nattrs == 1 && n->nchildren == 0 && n->nslots == 0) {
		/* a plain variable: one line */
		printf("%*s%s", depth * 2, "", cli_vis(local));
		print_attr(c, &n->attrs[0], -depth - 1);
		return;
	}
	printf("%*s%s/\n", depth * 2, "", cli_vis(local));
	if (depth >= CKPT_MAX_OBJECT_GRAPH_DEPTH)
		return;
	for (k = 0; k < n->nattrs; k++)
		print_attr(c, &n->attrs[k], depth + 1);
	for (k = 0; k < n->nslots; k++) {
		const ckpt_og_slot *s = &n->slots[k];
		char *var = NULL, *slot = NULL;

		ckpt_object_graph_path(&var, c->g, s->original_variable_node_id);
		ckpt_object_graph_path(&slot, c->g, s->slot_variable_node_id);
		printf("%*sslot '%s' of %s -> %s\n", (depth + 1) * 2, "", cli_vis(s->slot_name ? s->slot_name : "?"),
			cli_vis(var ? var : "?"), cli_vis(slot ? slot : "?"));
		free(var);
		free(slot);
		ckpt_error_clear();
	}
	for (k = 0; k < n->nchildren; k++) {
		int child = n->children[k].node_id;
		if (child < 0 || (size_t)child >= c->g->nnodes)
			continue;
		if (!subtree_has_values(c, child, depth + 1)) {
			if (!c->printed[child]) {
				c->printed[child] = 1;
				c->hidden++;
			}
			continue;
		}
		print_node(c, child, n->children[k].local_name ? n->children[k].local_name : "?", depth + 1);
	}
}

static void print_object_tree(const ckpt_reader *r)
{
	const ckpt_object_graph *g = ckpt_reader_object_graph(r);
	tree_ctx c;

	if (!g || g->nnodes == 0) {
		printf("object graph: none (name-based checkpoint)\n\n");
		return;
	}
	memset(&c, 0, sizeof(c));
	c.g = g;
	c.r = r;
	c.has_values = malloc(g->nnodes);
	c.printed = calloc(g->nnodes, 1);
	if (!c.has_values || !c.printed) {
		free(c.has_values);
		free(c.printed);
		return;
	}
	memset(c.has_values, 3, g->nnodes);
	printf("object graph: %zu objects\n", g->nnodes);
	print_node(&c, 0, "(root)", 1);
	if (c.hidden)
		printf("  (%zu more objects, with what they hold, have no saved values)\n", c.hidden);
	printf("\n");
	free(c.has_values);
	free(c.printed);
}

/* ---- Keras: layers from the model config ---- */

/* 1 when one "/"-separated component of `name` equals `comp`. */
static int has_component(const char *name, const char *comp)
{
	size_t len = strlen(comp);
	const char *p = name;

	while (p && *p) {
		const char *slash = strchr(p, '/');
		size_t l = slash ? (size_t)(slash - p) : strlen(p);
		if (l == len && memcmp(p, comp, len) == 0)
			return 1;
		p = slash ? slash + 1 : NULL;
	}
	return 0;
}

static json_t *nested_layers(json_t *layer)
{
	json_t *cfg = json_object_get(layer, "config");

	if (json_is_array(cfg))
		return cfg; /* Keras 1 / 2.0 Sequential: config is the layer list */
	if (json_is_object(cfg) && json_is_array(json_object_get(cfg, "layers")))
		return json_object_get(cfg, "layers");
	return NULL;
}

static const char *layer_name(json_t *layer)
{
	json_t *cfg = json_object_get(layer, "config");
	const char *name = json_string_value(json_object_get(layer, "name"));

	if (!name && json_is_object(cfg))
		name = json_string_value(json_object_get(cfg, "name"));
	return name;
}

static void print_layers(const ckpt_reader *r, json_t *layers, int depth)
{
	size_t i, k;
	json_t *layer;

	if (depth > 64)
		return; /* configs are data; a deeply nested one is shown truncated */
	json_array_foreach(layers, i, layer) {
		const char *cls = json_string_value(json_object_get(layer, "class_name"));
		const char *name = layer_name(layer);
		json_t *cfg = json_object_get(layer, "config");
		json_t *inner = nested_layers(layer);
		json_t *wrapped = json_is_object(cfg) ? json_object_get(cfg, "layer") : NULL;
		size_t nweights = 0;
		uint64_t bytes = 0;

		for (k = 0; name && k < ckpt_reader_num_entries(r); k++) {
			const ckpt_var_info *v = ckpt_reader_var(r, k);
			if (v->role == CKPT_ROLE_MODEL && has_component(v->name, name)) {
				nweights++;
				bytes += v->nbytes;
			}
		}
		printf("%*s%s %s: %zu weights, %" PRIu64 " bytes\n", depth * 2, "", cli_vis(cls ? cls : "?"),
			cli_vis(name ? name : "?"), nweights, bytes);
		if (inner) {
			print_layers(r, inner, depth + 1);
		} else if (json_is_object(wrapped)) {
			/* Bidirectional, TimeDistributed: the weights above belong to the wrapper */
			const char *wcls = json_string_value(json_object_get(wrapped, "class_name"));
			const char *wname = layer_name(wrapped);
			printf("%*s(wraps %s %s)\n", (depth + 1) * 2, "", cli_vis(wcls ? wcls : "?"), cli_vis(wname ? wname : "?"));
		} else {
			for (k = 0; name && k < ckpt_reader_num_entries(r); k++) {
				const ckpt_var_info *v = ckpt_reader_var(r, k);
				char shape[256];
				if (v->role != CKPT_ROLE_MODEL || !has_component(v->name, name))
					continue;
				ckpt_shape_format(&v->shape, shape, sizeof(shape));
				printf("%*s%s %s  %s\n", (depth + 1) * 2, "", ckpt_dtype_name(v->dtype), shape, cli_vis(v->name));
			}
		}
	}
}

static int is_keras(const ckpt_reader *r)
{
	return strncmp(ckpt_reader_format(r), "keras", 5) == 0;
}

/*
 * The layer group of a stored Keras weight: "layers/<g>/...",
 * "model_weights/<g>/..." or "<g>/..."; length in *len, NULL for none.
 */
static const char *weight_group(const char *name, size_t *len)
{
	const char *p = name, *slash;

	if (strncmp(p, "layers/", 7) == 0)
		p += 7;
	else if (strncmp(p, "model_weights/", 14) == 0)
		p += 14;
	slash = strchr(p, '/');
	if (!slash)
		return NULL;
	*len = (size_t)(slash - p);
	return p;
}

/* Model weights grouped by layer, from the stored names (configs without a layer list). */
static void print_weight_groups(const ckpt_reader *r)
{
	size_t i, k, n = ckpt_reader_num_entries(r);

	printf("weights by layer (from the stored names):\n");
	for (i = 0; i < n; i++) {
		const ckpt_var_info *v = ckpt_reader_var(r, i);
		const char *g;
		size_t len, count = 0, seen = 0;
		uint64_t bytes = 0;

		if (v->role != CKPT_ROLE_MODEL || !(g = weight_group(v->name, &len)))
			continue;
		for (k = 0; k < i && !seen; k++) {
			size_t l2;
			const char *g2 = ckpt_reader_var(r, k)->role == CKPT_ROLE_MODEL ?
				weight_group(ckpt_reader_var(r, k)->name, &l2) : NULL;
			seen = g2 && l2 == len && memcmp(g, g2, len) == 0;
		}
		if (seen)
			continue;
		for (k = i; k < n; k++) {
			size_t l2;
			const ckpt_var_info *w = ckpt_reader_var(r, k);
			const char *g2 = w->role == CKPT_ROLE_MODEL ? weight_group(w->name, &l2) : NULL;
			if (g2 && l2 == len && memcmp(g, g2, len) == 0) {
				count++;
				bytes += w->nbytes;
			}
		}
		{
			char group[CKPT_MAX_NAME_LEN + 1];
			snprintf(group, sizeof(group), "%.*s", (int)len, g);
			printf("  %s: %zu weights, %" PRIu64 " bytes\n", cli_vis(group), count, bytes);
		}
	}
}

static void print_keras_model(const ckpt_reader *r)
{
	const char *text = ckpt_reader_meta(r, "config.json");
	const char *ver = ckpt_reader_meta(r, "keras_version");
	const char *backend = ckpt_reader_meta(r, "backend");
	json_error_t jerr;
	json_t *root, *layers;

	if (!text)
		text = ckpt_reader_meta(r, "model_config");
	if (ver)
		printf("keras: version %s%s%s\n", cli_vis(ver), backend ? ", backend " : "", backend ? cli_vis(backend) : "");
	if (!text) {
		if (is_keras(r)) {
			print_weight_groups(r);
			printf("\n");
		}
		return;
	}
	/*
	 * The config is data: it is shown, never interpreted (Lambda bytecode,
	 * custom objects). Lambda configs can hold NUL bytes in strings.
	 */
	root = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!root) {
		printf("model config: unreadable JSON (%s at line %d)\n", cli_vis(jerr.text), jerr.line);
		print_weight_groups(r);
		printf("\n");
		return;
	}
	layers = nested_layers(root);
	printf("model: %s %s\n", cli_vis(json_string_value(json_object_get(root, "class_name")) ?
		json_string_value(json_object_get(root, "class_name")) : "?"),
		cli_vis(layer_name(root) ? layer_name(root) : ""));
	if (layers && json_array_size(layers))
		print_layers(r, layers, 1);
	else
		print_weight_groups(r);
	printf("\n");
	json_decref(root);
}

/* ---- the tensor table ---- */


/* A partitioned variable's full entry: its parts, as "[start:end, :]" per slice. */
static void print_partitions(const ckpt_var_info *v, int w)
{
	printf("%-*s  partitioned into %zu slice%s:", w, "", v->nslices, v->nslices == 1 ? "" : "s");
	for (size_t k = 0; k < v->nslices; k++) {
		const ckpt_slice *sl = &v->slices[k];
		printf(" [");
		for (int d = 0; d < sl->rank; d++) {
			const ckpt_extent *e = &sl->extents[d];
			if (e->length < 0)
				printf("%s:", d ? ", " : "");
			else
				printf("%s%" PRId64 ":%" PRId64, d ? ", " : "", e->start, e->start + e->length);
		}
		printf("]");
	}
	printf("\n");
}

static void print_table(const inspect_state *st)
{
	size_t i, w = 4;
	/* per role (ckpt_role: model, optimizer, metric, other, trainer) */
	uint64_t total = 0, role_bytes[5] = { 0 };
	size_t role_count[5] = { 0 }, ok = 0, unchecked = 0;

	for (i = 0; i < st->n; i++) {
		size_t l = strlen(ckpt_reader_var(st->r, i)->name);
		if (l > w)
			w = l;
	}
	if (w > 100)
		w = 100;
	printf("%-*s  %-9s %-16s %12s  %-9s %s\n", (int)w, "NAME", "DTYPE", "SHAPE", "BYTES", "ROLE", "CHECKSUM");
	for (i = 0; i < st->n; i++) {
		const ckpt_var_info *v = ckpt_reader_var(st->r, i);
		char shape[256];
		const char *check;

		ckpt_shape_format(&v->shape, shape, sizeof(shape));
		if (st->status[i] == ST_MISSING)
			check = "MISSING DATA FILE";
		else if (st->status[i] == ST_BAD)
			check = "BAD (see error)";
		else if (v->has_crc32c)
			check = "ok (crc32c verified)";
		else
			check = "ok (read; no stored checksum)";
		if (st->status[i] == ST_OK) {
			ok++;
			if (!v->has_crc32c)
				unchecked++;
		}
		printf("%-*s  %-9s %-16s %12" PRIu64 "  %-9s %s\n", (int)w, cli_vis(v->name), ckpt_dtype_name(v->dtype),
			shape, v->nbytes, ckpt_role_name(v->role), check);
		if (v->nslices)
			print_partitions(v, (int)w);
		total += v->nbytes;
		if ((unsigned)v->role < 5) {
			role_count[v->role]++;
			role_bytes[v->role] += v->nbytes;
		}
	}
	printf("\ntotal: %zu tensors, %" PRIu64 " bytes", st->n, total);
	for (i = 0; i < 5; i++)
		if (role_count[i])
			printf("; %s %zu (%" PRIu64 " B)", ckpt_role_name((ckpt_role)i), role_count[i], role_bytes[i]);
	printf("\nread: %zu ok", ok);
	if (unchecked)
		printf(" (%zu without a stored checksum)", unchecked);
	if (st->failed)
		printf(", %d FAILED", st->failed);
	printf("\n");
}

static void print_human(const inspect_state *st)
{
	int s, nshards = ckpt_reader_num_shards(st->r);

	printf("path:   %s\nformat: %s\n", cli_vis(ckpt_reader_path(st->r)), ckpt_reader_format(st->r));
	printf("files:  %d data file%s\n", nshards, nshards == 1 ? "" : "s");
	for (s = 0; s < nshards; s++) {
		int exists = 1;
		const char *p = ckpt_reader_shard_path(st->r, s, &exists);
		printf("  [%d] %s%s\n", s, cli_vis(p ? p : "?"), exists ? "" : "  MISSING");
	}
	printf("\n");
	print_keras_model(st->r);
	cli_print_flat_meta(st->r);
	if (ckpt_reader_saved_model(st->r))
		cli_print_saved_model(stdout, ckpt_reader_saved_model(st->r));
	print_object_tree(st->r);
	print_sync(st->r);
	print_table(st);
}

/*
 * A file the reader refused as malformed: when it is a GGUF whose header
 * and key-value pairs are sound (the tensor table is what is broken:
 * overlapping offsets, say), show those first, then the error; exit 1.
 */
static int inspect_broken_gguf(const char *path, int json, uint64_t max_array)
{
	const ckpt_error *e = ckpt_error_last();
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	char *msg = strdup(e->message ? e->message : ckpt_status_name(e->code));
	char *var = e->variable ? strdup(e->variable) : NULL;
	char *epath = e->path ? strdup(e->path) : NULL; /* the file at fault (a SavedModel's saved_model.pb) */
	int64_t off = e->offset;
	ckpt_reader *m = NULL;
	int rc;

	oo.vfs = cli_vfs_for(path, NULL);
	if (!msg || ckpt_gguf_open_metadata(&m, path, &oo) != CKPT_OK) {
		ckpt_reader_free(m);
		m = NULL; /* not a GGUF, or its header is broken too: the first error alone */
	} else if (json) {
		jw w;
		jw_init(&w, stdout);
		jw_object_begin(&w);
		jw_key(&w, "path");
		jw_string(&w, path);
		jw_key(&w, "format");
		jw_string(&w, ckpt_reader_format(m));
		jw_key(&w, "error");
		jw_string(&w, msg);
		jw_key(&w, "variables");
		jw_array_begin(&w);
		jw_array_end(&w);
		cli_inspect_sections_json(&w, m, max_array);
		jw_object_end(&w);
		jw_end_line(&w);
	} else {
		printf("%s (gguf): the tensor table is broken; header and key-value pairs:\n\n", cli_vis(path));
		cli_print_flat_meta(m);
	}
	fflush(stdout);
	ckpt_reader_free(m);
	rc = msg ? cli_report(epath ? epath : path, var, off, "%s", msg) : cli_report(path, NULL, -1, "out of memory");
	free(msg);
	free(var);
	free(epath);
	return rc;
}

static int cmd_inspect(const cli_cmd *cmd, int argc, char **argv)
{
	inspect_args args;
	const char *path;
	int json, rc, missing;
	inspect_state st;
	cli_sync_rules rules;
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;

	memset(&args, 0, sizeof(args));
	rc = cli_parse(cmd, argc, argv, &args);
	if (rc == CLI_PARSE_HELP)
		return CLI_EXIT_OK;
	if (rc != CLI_EXIT_OK)
		return rc;
	path = args.path;
	json = args.json;
	memset(&st, 0, sizeof(st));
	st.max_array = 1024;
	if (args.max_array) {
		char *end;
		const char *a = args.max_array;
		unsigned long long v = strtoull(a, &end, 10);
		if (!*a || *end || *a == '-') {
			fprintf(stderr, "ckpt inspect: --max-array wants a count, not '%s'\n", a);
			return CLI_EXIT_USAGE;
		}
		st.max_array = v;
	}
	if (cli_parse_sync_rules(cmd, args.sync_on_read, &rules) != CLI_EXIT_OK)
		return CLI_EXIT_USAGE;
	oo.sync_rules = rules.rules;
	oo.num_sync_rules = rules.n;
	oo.vfs = cli_vfs_for(path, NULL);

	rc = ckpt_reader_open(&st.r, path, &oo);
	cli_sync_rules_free(&rules);
	if (rc == CKPT_EFORMAT)
		return inspect_broken_gguf(path, json, st.max_array);
	if (rc != CKPT_OK)
		return cli_report_last(path, NULL);
	st.n = ckpt_reader_num_entries(st.r);
	st.status = calloc(st.n ? st.n : 1, sizeof(int));
	st.crc = calloc(st.n ? st.n : 1, sizeof(uint32_t));
	st.crc32c = calloc(st.n ? st.n : 1, sizeof(uint32_t));
	if (!st.status || !st.crc || !st.crc32c) {
		rc = cli_report(path, NULL, -1, "out of memory");
		goto done;
	}
	missing = cli_report_missing_shards(st.r);
	read_all(&st);
	if (json)
		print_json(&st);
	else
		print_human(&st);
	fflush(stdout);
	rc = (missing || st.failed) ? CLI_EXIT_ERROR : CLI_EXIT_OK;
done:
	free(st.status);
	free(st.crc);
	free(st.crc32c);
	ckpt_reader_free(st.r);
	return rc;
}

const cli_cmd cli_cmd_inspect = {
	"inspect", cmd_inspect, "Show the format, object tree and tensors of a checkpoint",
	inspect_opts,
	"Reads every tensor, so every stored checksum is verified. --json prints\n"
	"{\"path\", \"format\", \"variables\": [{\"name\", \"dtype\", \"shape\", \"bytes\",\n"
	"\"crc32\", \"crc32c\", \"role\"}]} where crc32 is zlib's crc32 of the tensor\n"
	"bytes and crc32c their CRC-32C (null when they cannot be read). Missing\n"
	"data files and unreadable tensors are reported on stderr and make the\n"
	"exit status 1. The JSON also holds \"files\" [{\"path\", \"exists\"}],\n"
	"\"object_graph\" ({\"nodes\": [{\"children\", \"attributes\", \"slots\"}]} or\n"
	"null), GGUF's \"gguf\" {\"version\", \"alignment\", \"kv\": [{\"key\", \"type\",\n"
	"\"value\"} or {..., \"elem\", \"count\", \"values\" (the first --max-array),\n"
	"\"truncated\"}]}, safetensors' \"safetensors\" {\"metadata\"} and Keras'\n"
	"\"keras\" {\"keras_version\", \"backend\", \"model_config\", ... as stored}.\n"
	"A SavedModel also shows what `saved_model_cli show --all`\n"
	"shows of its signatures (JSON: \"saved_model\"); variables whose\n"
	"synchronization saved_model.pb or --sync-on-read gives also get \"sync\",\n"
	"\"aggregation\", \"sync_source\"."
};

/*
 * The sections of `ckpt inspect --json` beyond the tensor list, so the JSON
 * holds everything the text shows: the data files (a local one with its
 * "bytes" and "shared": hard-linked by another checkpoint), the typed metadata
 * (cli_kv.c), the Keras model's metadata and config, and the object graph.
 */
#include <string.h>
#include <sys/stat.h>
#include "cli.h"

static void files_json(jw *w, const ckpt_reader *r)
{
	int s, n = ckpt_reader_num_shards(r);

	jw_key(w, "files");
	jw_array_begin(w);
	for (s = 0; s < n; s++) {
		int exists = 1;
		const char *p = ckpt_reader_shard_path(r, s, &exists);
		jw_object_begin(w);
		jw_key(w, "path");
		jw_string(w, p);
		jw_key(w, "exists");
		jw_bool(w, exists);
		/*
		 * A local file's size, and whether another checkpoint links the same
		 * file: an incremental save (ckpt_manager_options.incremental) reused
		 * those bytes instead of writing them.
		 */
		struct stat st;
		if (exists && strstr(p, "://") == NULL && stat(p, &st) == 0) {
			jw_key(w, "bytes");
			jw_uint(w, (uint64_t)st.st_size);
			jw_key(w, "shared");
			jw_bool(w, st.st_nlink > 1);
		}
		jw_object_end(w);
	}
	jw_array_end(w);
}

/* Keras: the stored metadata strings (the config as the JSON text the file holds: it is data, never interpreted). */
static void keras_json(jw *w, const ckpt_reader *r)
{
	static const char *const keys[] = { "keras_version", "backend", "model_config", "training_config", "config.json",
		"metadata.json" };
	size_t k;

	if (strncmp(ckpt_reader_format(r), "keras", 5) != 0)
		return;
	jw_key(w, "keras");
	jw_object_begin(w);
	for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		const char *v = ckpt_reader_meta(r, keys[k]);
		if (!v)
			continue;
		jw_key(w, keys[k]);
		jw_string(w, v);
	}
	jw_object_end(w);
}

static void node_json(jw *w, const ckpt_og_node *n)
{
	size_t k;

	jw_object_begin(w);
	jw_key(w, "children");
	jw_array_begin(w);
	for (k = 0; k < n->nchildren; k++) {
		jw_object_begin(w);
		jw_key(w, "name");
		jw_string(w, n->children[k].local_name);
		jw_key(w, "node");
		jw_int(w, n->children[k].node_id);
		jw_object_end(w);
	}
	jw_array_end(w);
	jw_key(w, "attributes");
	jw_array_begin(w);
	for (k = 0; k < n->nattrs; k++) {
		jw_object_begin(w);
		jw_key(w, "name");
		jw_string(w, n->attrs[k].name);
		jw_key(w, "checkpoint_key");
		jw_string(w, n->attrs[k].checkpoint_key);
		jw_key(w, "full_name");
		jw_string(w, n->attrs[k].full_name);
		jw_object_end(w);
	}
	jw_array_end(w);
	jw_key(w, "slots");
	jw_array_begin(w);
	for (k = 0; k < n->nslots; k++) {
		jw_object_begin(w);
		jw_key(w, "slot_name");
		jw_string(w, n->slots[k].slot_name);
		jw_key(w, "original_variable");
		jw_int(w, n->slots[k].original_variable_node_id);
		jw_key(w, "slot_variable");
		jw_int(w, n->slots[k].slot_variable_node_id);
		jw_object_end(w);
	}
	jw_array_end(w);
	jw_object_end(w);
}

static void graph_json(jw *w, const ckpt_reader *r)
{
	const ckpt_object_graph *g = ckpt_reader_object_graph(r);
	size_t i;

	jw_key(w, "object_graph");
	if (!g) {
		jw_null(w);
		return;
	}
	jw_object_begin(w);
	jw_key(w, "nodes");
	jw_array_begin(w);
	for (i = 0; i < g->nnodes; i++)
		node_json(w, &g->nodes[i]);
	jw_array_end(w);
	jw_object_end(w);
}

void cli_inspect_sections_json(jw *w, const ckpt_reader *r, uint64_t max_array)
{
	files_json(w, r);
	cli_kv_print_json(w, r, max_array);
	keras_json(w, r);
	graph_json(w, r);
}

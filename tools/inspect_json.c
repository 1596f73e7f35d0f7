/*
 * The sections of `ckpt inspect --json` beyond the tensor list, so the JSON
 * holds everything the text shows: the data files, the typed metadata
 * (cli_kv.c), the Keras model's metadata and config, and the object graph.
 */
#include <string.h>
#include "cli.h"

static void files_json(FILE *f, const ckpt_reader *r)
{
	int s, n = ckpt_reader_num_shards(r);

	fputs(", \"files\": [", f);
	for (s = 0; s < n; s++) {
		int exists = 1;
		const char *p = ckpt_reader_shard_path(r, s, &exists);
		fputs(s ? ", {\"path\": " : "{\"path\": ", f);
		jout_cstring(f, p);
		fprintf(f, ", \"exists\": %s}", exists ? "true" : "false");
	}
	fputc(']', f);
}

/* Keras: the stored metadata strings (the config as the JSON text the file holds: it is data, never interpreted). */
static void keras_json(FILE *f, const ckpt_reader *r)
{
	static const char *const keys[] = { "keras_version", "backend", "model_config", "training_config", "config.json",
		"metadata.json" };
	size_t k;
	int any = 0;

	if (strncmp(ckpt_reader_format(r), "keras", 5) != 0)
		return;
	fputs(", \"keras\": {", f);
	for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		const char *v = ckpt_reader_meta(r, keys[k]);
		if (!v)
			continue;
		fputs(any++ ? ", " : "", f);
		jout_cstring(f, keys[k]);
		fputs(": ", f);
		jout_cstring(f, v);
	}
	fputc('}', f);
}

static void graph_json(FILE *f, const ckpt_reader *r)
{
	const ckpt_object_graph *g = ckpt_reader_object_graph(r);
	size_t i, k;

	fputs(", \"object_graph\": ", f);
	if (!g) {
		fputs("null", f);
		return;
	}
	fputs("{\"nodes\": [", f);
	for (i = 0; i < g->nnodes; i++) {
		const ckpt_og_node *n = &g->nodes[i];
		fputs(i ? ", {\"children\": [" : "{\"children\": [", f);
		for (k = 0; k < n->nchildren; k++) {
			fputs(k ? ", {\"name\": " : "{\"name\": ", f);
			jout_cstring(f, n->children[k].local_name);
			fprintf(f, ", \"node\": %d}", n->children[k].node_id);
		}
		fputs("], \"attributes\": [", f);
		for (k = 0; k < n->nattrs; k++) {
			fputs(k ? ", {\"name\": " : "{\"name\": ", f);
			jout_cstring(f, n->attrs[k].name);
			fputs(", \"checkpoint_key\": ", f);
			jout_cstring(f, n->attrs[k].checkpoint_key);
			fputs(", \"full_name\": ", f);
			jout_cstring(f, n->attrs[k].full_name);
			fputc('}', f);
		}
		fputs("], \"slots\": [", f);
		for (k = 0; k < n->nslots; k++) {
			fputs(k ? ", {\"slot_name\": " : "{\"slot_name\": ", f);
			jout_cstring(f, n->slots[k].slot_name);
			fprintf(f, ", \"original_variable\": %d, \"slot_variable\": %d}", n->slots[k].original_variable_node_id,
				n->slots[k].slot_variable_node_id);
		}
		fputs("]}", f);
	}
	fputs("]}", f);
}

void cli_inspect_sections_json(FILE *f, const ckpt_reader *r, uint64_t max_array)
{
	files_json(f, r);
	cli_kv_print_json(f, r, max_array);
	keras_json(f, r);
	graph_json(f, r);
}

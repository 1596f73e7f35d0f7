/*
 * What the flat formats carry besides tensors, for inspect and convert:
 * safetensors' __metadata__, GGUF's typed key-value pairs and the ggml
 * types of quantized GGUF tensors (exposed by the reader as uint8 byte
 * views; their type names come from the "gguf.tensor_types" metadata).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "cli.h"

json_t *cli_flat_qtypes(const ckpt_reader *r)
{
	const char *m = ckpt_reader_meta(r, "gguf.tensor_types");
	json_t *j = m ? json_loads(m, 0, NULL) : NULL;
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

const char *cli_flat_qtype(json_t *qtypes, const char *name)
{
	json_t *e = qtypes ? json_object_get(qtypes, name) : NULL;
	return e ? json_string_value(json_object_get(e, "type")) : NULL;
}

void cli_print_flat_meta(const ckpt_reader *r)
{
	size_t i, n = ckpt_reader_num_kv(r);
	ckpt_kv kv;
	json_t *j;
	int gguf = strcmp(ckpt_reader_format(r), "gguf") == 0;

	if (!gguf && n) { /* safetensors __metadata__ (not rendered as JSON to count it) */
		printf("safetensors __metadata__: %zu entr%s\n", n, n == 1 ? "y" : "ies");
		for (i = 0; i < n && ckpt_reader_kv(&kv, r, i) == CKPT_OK; i++) {
			printf("  %s = ", cli_vis(kv.key));
			cli_kv_print_text(&kv);
			printf("\n");
		}
		printf("\n");
	}
	if (gguf) {
		printf("gguf: version %s, alignment %s, %zu key-value pair%s\n",
			cli_vis(ckpt_reader_meta(r, "gguf.version") ? ckpt_reader_meta(r, "gguf.version") : "?"),
			cli_vis(ckpt_reader_meta(r, "gguf.alignment") ? ckpt_reader_meta(r, "gguf.alignment") : "?"),
			n, n == 1 ? "" : "s");
		for (i = 0; i < n && ckpt_reader_kv(&kv, r, i) == CKPT_OK; i++) {
			printf("  %s (%s) = ", cli_vis(kv.key), cli_kv_type_name(kv.type));
			cli_kv_print_text(&kv);
			printf("\n");
		}
		printf("\n");
	}
	if ((j = cli_flat_qtypes(r))) {
		printf("quantized tensors (uint8 views [rows..., bytes per row]; copied raw GGUF -> GGUF only):\n");
		for (i = 0; i < ckpt_reader_num_entries(r); i++) {
			const ckpt_var_info *var = ckpt_reader_var(r, i);
			json_t *e = json_object_get(j, var->name), *sh;
			size_t d;
			if (!e)
				continue;
			printf("  %s  %s [", cli_vis(var->name), json_string_value(json_object_get(e, "type")));
			sh = json_object_get(e, "shape");
			for (d = 0; d < json_array_size(sh); d++)
				printf("%s%lld", d ? ", " : "", (long long)json_integer_value(json_array_get(sh, d)));
			printf("]  %" PRIu64 " bytes\n", var->nbytes);
		}
		printf("\n");
		json_decref(j);
	}
}

/* ---- the object graph without some entries (convert --no-optimizer) ---- */

static char *dup_or_null(const char *s)
{
	char *d;
	if (!s)
		return NULL;
	d = malloc(strlen(s) + 1);
	if (d)
		strcpy(d, s);
	return d;
}

void cli_graph_free(ckpt_object_graph *g)
{
	size_t i, k;
	if (!g)
		return;
	for (i = 0; i < g->nnodes; i++) {
		ckpt_og_node *n = &g->nodes[i];
		for (k = 0; k < n->nchildren; k++)
			free(n->children[k].local_name);
		for (k = 0; k < n->nattrs; k++) {
			free(n->attrs[k].name);
			free(n->attrs[k].full_name);
			free(n->attrs[k].checkpoint_key);
		}
		for (k = 0; k < n->nslots; k++)
			free(n->slots[k].slot_name);
		free(n->children);
		free(n->attrs);
		free(n->slots);
		free(n->registered_saver);
	}
	free(g->nodes);
	free(g);
}

int cli_graph_without(const ckpt_reader *r, const unsigned char *drop, ckpt_object_graph **out)
{
	const ckpt_object_graph *g = ckpt_reader_object_graph(r);
	ckpt_object_graph *c;
	size_t i, k;
	int oom = 0;

	*out = NULL;
	if (!g)
		return CLI_EXIT_OK;
	if (!(c = calloc(1, sizeof(*c))) || !(c->nodes = calloc(g->nnodes ? g->nnodes : 1, sizeof(*c->nodes)))) {
		free(c);
		return cli_report(ckpt_reader_path(r), NULL, -1, "out of memory");
	}
	c->nnodes = g->nnodes;
	for (i = 0; i < g->nnodes && !oom; i++) {
		const ckpt_og_node *s = &g->nodes[i];
		ckpt_og_node *d = &c->nodes[i];
		d->has_checkpoint_values = s->has_checkpoint_values;
		d->registered_saver = dup_or_null(s->registered_saver);
		d->children = calloc(s->nchildren ? s->nchildren : 1, sizeof(*d->children));
		d->attrs = calloc(s->nattrs ? s->nattrs : 1, sizeof(*d->attrs));
		d->slots = calloc(s->nslots ? s->nslots : 1, sizeof(*d->slots));
		if (!d->children || !d->attrs || !d->slots || (s->registered_saver && !d->registered_saver)) {
			oom = 1;
			break;
		}
		for (k = 0; k < s->nchildren; k++) {
			d->children[d->nchildren].node_id = s->children[k].node_id;
			if (!(d->children[d->nchildren++].local_name = dup_or_null(s->children[k].local_name)))
				oom = 1;
		}
		for (k = 0; k < s->nattrs; k++) {
			size_t idx;
			ckpt_og_attr *a = &d->attrs[d->nattrs];
			if (cli_attr_find(r, &s->attrs[k], &idx) && drop[idx])
				continue;
			a->optional_restore = s->attrs[k].optional_restore;
			a->name = dup_or_null(s->attrs[k].name);
			a->full_name = dup_or_null(s->attrs[k].full_name);
			a->checkpoint_key = dup_or_null(s->attrs[k].checkpoint_key);
			d->nattrs++;
			if (!a->name || !a->full_name || !a->checkpoint_key)
				oom = 1;
		}
	}
	/* a slot whose variable lost its value is no slot any more */
	for (i = 0; i < g->nnodes && !oom; i++) {
		const ckpt_og_node *s = &g->nodes[i];
		ckpt_og_node *d = &c->nodes[i];
		for (k = 0; k < s->nslots; k++) {
			int sv = s->slots[k].slot_variable_node_id;
			if (sv >= 0 && (size_t)sv < c->nnodes && g->nodes[sv].nattrs && !c->nodes[sv].nattrs)
				continue;
			d->slots[d->nslots] = s->slots[k];
			if (!(d->slots[d->nslots++].slot_name = dup_or_null(s->slots[k].slot_name)))
				oom = 1;
		}
	}
	if (oom) {
		cli_graph_free(c);
		return cli_report(ckpt_reader_path(r), NULL, -1, "out of memory");
	}
	*out = c;
	return CLI_EXIT_OK;
}

/*
 * Freeing an object graph (ckpt_object_graph_free): below the decoders
 * (object_graph.c, og_decode.c), which both free what they fail to finish.
 */
#include "internal.h"

static void free_node(ckpt_og_node *n)
{
	for (size_t i = 0; i < n->nchildren; i++)
		ckpt__free(n->children[i].local_name);
	for (size_t i = 0; i < n->nattrs; i++) {
		ckpt__free(n->attrs[i].name);
		ckpt__free(n->attrs[i].full_name);
		ckpt__free(n->attrs[i].checkpoint_key);
	}
	for (size_t i = 0; i < n->nslots; i++)
		ckpt__free(n->slots[i].slot_name);
	ckpt__free(n->children);
	ckpt__free(n->attrs);
	ckpt__free(n->slots);
	ckpt__free(n->registered_saver);
}

void ckpt_object_graph_free(ckpt_object_graph *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->nnodes; i++)
		free_node(&g->nodes[i]);
	ckpt__free(g->nodes);
	ckpt__free(g);
}

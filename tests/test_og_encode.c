/* The hand-written object graph encoder against protobuf-c's pack, byte for byte. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "libckpt/checkpoint_internal.h"
#include "test_support.h"

static char *rnd_str(unsigned *seed, int allow_null)
{
	int k = rand_r(seed) % 8;
	if (k == 0 && allow_null)
		return NULL;
	if (k == 1)
		return ckpt__strdup("");
	/* lengths across the 1- / 2-byte varint boundary */
	size_t n = (size_t)(rand_r(seed) % (k == 2 ? 300 : 24)) + 1;
	char *s = ckpt__malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		s[i] = (char)(' ' + rand_r(seed) % 95);
	s[n] = 0;
	return s;
}

static ckpt_object_graph *rnd_graph(unsigned seed)
{
	ckpt_object_graph *g = ckpt__calloc(1, sizeof(*g));
	g->nnodes = (size_t)(rand_r(&seed) % 300) + 1;
	g->nodes = ckpt__calloc(g->nnodes, sizeof(*g->nodes));
	int nn = (int)g->nnodes;
	for (size_t i = 0; i < g->nnodes; i++) {
		ckpt_og_node *o = &g->nodes[i];
		o->has_checkpoint_values = rand_r(&seed) % 3 - 1;
		if (rand_r(&seed) % 5 == 0)
			o->registered_saver = rnd_str(&seed, 0);
		o->nchildren = (size_t)(rand_r(&seed) % 4);
		o->children = ckpt__calloc(o->nchildren + 1, sizeof(*o->children));
		for (size_t k = 0; k < o->nchildren; k++) {
			/* ids past 127 and 16383: multi-byte varints */
			o->children[k].node_id = rand_r(&seed) % nn;
			o->children[k].local_name = rnd_str(&seed, 1);
		}
		o->nattrs = (size_t)(rand_r(&seed) % 3);
		o->attrs = ckpt__calloc(o->nattrs + 1, sizeof(*o->attrs));
		for (size_t k = 0; k < o->nattrs; k++) {
			o->attrs[k].name = rnd_str(&seed, 1);
			o->attrs[k].full_name = rnd_str(&seed, 1);
			o->attrs[k].checkpoint_key = rnd_str(&seed, 1);
			o->attrs[k].optional_restore = rand_r(&seed) % 2;
		}
		o->nslots = (size_t)(rand_r(&seed) % 3);
		o->slots = ckpt__calloc(o->nslots + 1, sizeof(*o->slots));
		for (size_t k = 0; k < o->nslots; k++) {
			o->slots[k].original_variable_node_id = rand_r(&seed) % nn;
			o->slots[k].slot_variable_node_id = rand_r(&seed) % nn;
			o->slots[k].slot_name = rnd_str(&seed, 1);
		}
	}
	return g;
}

static void same_bytes(const ckpt_object_graph *g, const char *what)
{
	void *a, *b;
	size_t na, nb;
	cr_assert_eq(ckpt_object_graph_serialize(g, &a, &na), CKPT_OK, "%s", what);
	cr_assert_eq(ckpt__object_graph_serialize_pb(g, &b, &nb), CKPT_OK, "%s", what);
	cr_assert_eq(na, nb, "%s: %zu vs %zu bytes", what, na, nb);
	cr_assert_eq(memcmp(a, b, na), 0, "%s", what);
	/* and it parses back to the same bytes */
	ckpt_object_graph *p;
	cr_assert_eq(ckpt_object_graph_parse(&p, a, na), CKPT_OK, "%s", what);
	void *c;
	size_t nc;
	cr_assert_eq(ckpt_object_graph_serialize(p, &c, &nc), CKPT_OK);
	cr_assert(nc == na && memcmp(a, c, na) == 0, "%s: reparse", what);
	free(a);
	free(b);
	free(c);
	ckpt_object_graph_free(p);
}

Test(og_encode, matches_protobuf_c_on_random_graphs)
{
	char what[64];
	for (unsigned seed = 1; seed <= 200; seed++) {
		ckpt_object_graph *g = rnd_graph(seed);
		snprintf(what, sizeof what, "seed %u", seed);
		same_bytes(g, what);
		ckpt_object_graph_free(g);
	}
}

Test(og_encode, matches_protobuf_c_on_a_large_graph)
{
	/* node ids and lengths past every varint boundary a checkpoint reaches */
	ckpt_object_graph *g = ckpt__calloc(1, sizeof(*g));
	g->nnodes = 20000;
	g->nodes = ckpt__calloc(g->nnodes, sizeof(*g->nodes));
	g->nodes[0].nchildren = g->nnodes - 1;
	g->nodes[0].children = ckpt__calloc(g->nnodes, sizeof(ckpt_og_child));
	g->nodes[0].has_checkpoint_values = -1;
	for (size_t i = 1; i < g->nnodes; i++) {
		char nm[64];
		snprintf(nm, sizeof nm, "v%zu", i);
		g->nodes[0].children[i - 1].node_id = (int)i;
		g->nodes[0].children[i - 1].local_name = ckpt__strdup(nm);
		g->nodes[i].has_checkpoint_values = 1;
		g->nodes[i].nattrs = 1;
		g->nodes[i].attrs = ckpt__calloc(1, sizeof(ckpt_og_attr));
		g->nodes[i].attrs[0].name = ckpt__strdup("VARIABLE_VALUE");
		g->nodes[i].attrs[0].full_name = ckpt__strdup(nm);
		snprintf(nm, sizeof nm, "v%zu/.ATTRIBUTES/VARIABLE_VALUE", i);
		g->nodes[i].attrs[0].checkpoint_key = ckpt__strdup(nm);
	}
	same_bytes(g, "20000 nodes");
	ckpt_object_graph_free(g);
}

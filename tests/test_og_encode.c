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

/* ---- decoder: the direct path against protobuf-c ---- */

static int str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int graphs_equal(const ckpt_object_graph *a, const ckpt_object_graph *b)
{
	if (a->nnodes != b->nnodes)
		return 0;
	for (size_t i = 0; i < a->nnodes; i++) {
		const ckpt_og_node *x = &a->nodes[i], *y = &b->nodes[i];
		if (x->nchildren != y->nchildren || x->nattrs != y->nattrs || x->nslots != y->nslots ||
			x->has_checkpoint_values != y->has_checkpoint_values || !str_eq(x->registered_saver, y->registered_saver))
			return 0;
		for (size_t k = 0; k < x->nchildren; k++)
			if (x->children[k].node_id != y->children[k].node_id ||
				!str_eq(x->children[k].local_name, y->children[k].local_name))
				return 0;
		for (size_t k = 0; k < x->nattrs; k++)
			if (!str_eq(x->attrs[k].name, y->attrs[k].name) || !str_eq(x->attrs[k].full_name, y->attrs[k].full_name) ||
				!str_eq(x->attrs[k].checkpoint_key, y->attrs[k].checkpoint_key) ||
				x->attrs[k].optional_restore != y->attrs[k].optional_restore)
				return 0;
		for (size_t k = 0; k < x->nslots; k++)
			if (x->slots[k].original_variable_node_id != y->slots[k].original_variable_node_id ||
				x->slots[k].slot_variable_node_id != y->slots[k].slot_variable_node_id ||
				!str_eq(x->slots[k].slot_name, y->slots[k].slot_name))
				return 0;
	}
	return 1;
}

/* Both decoders: same status, same graph. */
static void same_parse(const void *buf, size_t n, const char *what)
{
	ckpt_object_graph *a = NULL, *b = NULL;
	int ra = ckpt_object_graph_parse(&a, buf, n);
	int rb = ckpt__object_graph_parse_pb(&b, buf, n);
	cr_assert_eq(ra, rb, "%s: direct %d, protobuf-c %d", what, ra, rb);
	if (ra == CKPT_OK)
		cr_assert(graphs_equal(a, b), "%s: graphs differ", what);
	ckpt_object_graph_free(a);
	ckpt_object_graph_free(b);
}

Test(og_encode, decoder_matches_protobuf_c_on_random_and_mutated_graphs)
{
	char what[96];
	for (unsigned seed = 1; seed <= 150; seed++) {
		ckpt_object_graph *g = rnd_graph(seed);
		/* bytes >= 0x80 in some strings (protobuf-c does not check UTF-8 either) */
		if (g->nodes[0].nchildren && g->nodes[0].children[0].local_name && g->nodes[0].children[0].local_name[0])
			g->nodes[0].children[0].local_name[0] = (char)0xc3;
		void *buf;
		size_t n;
		cr_assert_eq(ckpt_object_graph_serialize(g, &buf, &n), CKPT_OK);
		snprintf(what, sizeof what, "seed %u", seed);
		same_parse(buf, n, what);
		unsigned char *m = malloc(n + 16);
		unsigned st = seed * 7919u;
		for (int k = 0; k < 40; k++) {
			memcpy(m, buf, n);
			size_t mn = n;
			int kind = rand_r(&st) % 4;
			size_t at = n ? (size_t)rand_r(&st) % n : 0;
			if (kind == 0 && n)
				m[at] = (unsigned char)rand_r(&st); /* any byte */
			else if (kind == 1 && n)
				m[at] ^= (unsigned char)(1u << (rand_r(&st) % 8));
			else if (kind == 2)
				mn = at; /* truncated */
			else if (n) {
				/* an unknown or repeated field appended to the last message */
				static const unsigned char extra[][4] = {
					{ 0x30, 0x01 }, { 0x0a, 0x00 }, { 0x2a, 0x02, 0x08, 0x01 }, { 0x7a, 0x01, 'x' }, { 0x0b }, { 0x08, 0x05 },
				};
				int e = rand_r(&st) % 6;
				size_t el = e == 0 || e == 1 || e == 5 ? 2 : e == 4 ? 1 : e == 3 ? 3 : 4;
				memcpy(m + n, extra[e], el);
				mn = n + el;
			}
			snprintf(what, sizeof what, "seed %u mutation %d kind %d at %zu", seed, k, kind, at);
			same_parse(m, mn, what);
		}
		free(m);
		free(buf);
		ckpt_object_graph_free(g);
	}
}

Test(og_encode, decoder_matches_protobuf_c_on_fixtures)
{
	static const char *const fx[] = {
		"tf/tensorflow__lso_ckpt_tf2.2",
		"tf/tensorflow__VarsAndArithmeticObjectGraph",
		"tf/tensorflow__OptimizerSlotVariableModule_snappy",
		"tf/tfjs__int64_multiply",
		"tf/tfx__keras_adam_savedmodel",
	};
	for (size_t i = 0; i < sizeof(fx) / sizeof(fx[0]); i++) {
		ckpt_reader *r;
		cr_assert_eq(ckpt_reader_open(&r, ts_fixture(fx[i]), NULL), CKPT_OK, "%s", fx[i]);
		size_t k;
		cr_assert_eq(ckpt_reader_find(r, CKPT_OBJECT_GRAPH_KEY, &k), CKPT_OK);
		ckpt_tensor *t;
		cr_assert_eq(ckpt_reader_read(r, k, &t), CKPT_OK);
		const ckpt_bytes *b = t->data;
		same_parse(b->data, (size_t)b->len, fx[i]);
		ckpt_tensor_free(t);
		ckpt_reader_free(r);
	}
}

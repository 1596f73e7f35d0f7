/*
 * Object graph codec (protobuf-c through bulk views and an arena allocator):
 * serialize -> parse -> serialize is byte-identical and keeps every field,
 * on random graphs (varint boundaries, empty and absent strings) and on a
 * 20,000-node graph; every prefix of an encoding parses or fails cleanly.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "libckpt/checkpoint/checkpoint_internal.h"
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

static void same_graph(const ckpt_object_graph *a, const ckpt_object_graph *b, const char *what)
{
	cr_assert_eq(a->nnodes, b->nnodes, "%s", what);
	for (size_t i = 0; i < a->nnodes; i++) {
		const ckpt_og_node *x = &a->nodes[i], *y = &b->nodes[i];
		cr_assert_eq(x->has_checkpoint_values, y->has_checkpoint_values, "%s node %zu", what, i);
		cr_assert_str_eq(x->registered_saver ? x->registered_saver : "", y->registered_saver ? y->registered_saver : "");
		cr_assert(x->nchildren == y->nchildren && x->nattrs == y->nattrs && x->nslots == y->nslots,
			"%s node %zu: counts", what, i);
		for (size_t k = 0; k < x->nchildren; k++) {
			cr_assert_eq(x->children[k].node_id, y->children[k].node_id);
			cr_assert_str_eq(x->children[k].local_name ? x->children[k].local_name : "", y->children[k].local_name);
		}
		for (size_t k = 0; k < x->nattrs; k++) {
			cr_assert_str_eq(x->attrs[k].name ? x->attrs[k].name : "", y->attrs[k].name);
			cr_assert_str_eq(x->attrs[k].full_name ? x->attrs[k].full_name : "", y->attrs[k].full_name);
			cr_assert_str_eq(x->attrs[k].checkpoint_key ? x->attrs[k].checkpoint_key : "", y->attrs[k].checkpoint_key);
			cr_assert_eq(x->attrs[k].optional_restore, y->attrs[k].optional_restore);
		}
		for (size_t k = 0; k < x->nslots; k++) {
			cr_assert_eq(x->slots[k].original_variable_node_id, y->slots[k].original_variable_node_id);
			cr_assert_eq(x->slots[k].slot_variable_node_id, y->slots[k].slot_variable_node_id);
			cr_assert_str_eq(x->slots[k].slot_name ? x->slots[k].slot_name : "", y->slots[k].slot_name);
		}
	}
}

static void round_trip(const ckpt_object_graph *g, const char *what)
{
	void *a, *c;
	size_t na, nc;
	cr_assert_eq(ckpt_object_graph_serialize(&a, &na, g), CKPT_OK, "%s: %s", what, ckpt_error_last()->message);
	ckpt_object_graph *p;
	cr_assert_eq(ckpt_object_graph_parse(&p, a, na), CKPT_OK, "%s: %s", what, ckpt_error_last()->message);
	same_graph(g, p, what);
	cr_assert_eq(ckpt_object_graph_serialize(&c, &nc, p), CKPT_OK);
	cr_assert(nc == na && memcmp(a, c, na) == 0, "%s: re-serialized bytes differ", what);
	free(a);
	free(c);
	ckpt_object_graph_free(p);
}

Test(og_encode, random_graphs_round_trip)
{
	char what[64];
	for (unsigned seed = 1; seed <= 200; seed++) {
		ckpt_object_graph *g = rnd_graph(seed);
		snprintf(what, sizeof what, "seed %u", seed);
		round_trip(g, what);
		ckpt_object_graph_free(g);
	}
}

Test(og_encode, large_graph_round_trips)
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
	round_trip(g, "20000 nodes");
	ckpt_object_graph_free(g);
}

Test(og_encode, every_prefix_parses_or_fails_cleanly)
{
	ckpt_object_graph *g = rnd_graph(7);
	void *a;
	size_t na;
	cr_assert_eq(ckpt_object_graph_serialize(&a, &na, g), CKPT_OK);
	size_t failed = 0;
	for (size_t n = 0; n < na; n++) {
		ckpt_object_graph *p = NULL;
		int rc = ckpt_object_graph_parse(&p, a, n);
		cr_assert(rc == CKPT_OK || rc == CKPT_EFORMAT, "prefix %zu: %d (%s)", n, rc, ckpt_error_last()->message);
		if (rc == CKPT_OK)
			ckpt_object_graph_free(p);
		else
			failed++;
	}
	cr_assert_gt(failed, na / 2, "most prefixes cut a field and must be rejected");
	free(a);
	ckpt_object_graph_free(g);
}

/*
 * The decoder without protobuf-c (libckpt/graph/og_decode.c): it takes graphs as
 * TensorFlow writes them, and whatever it takes — those, and every prefix and
 * byte mutation of one — protobuf-c must take too, with the same graph.
 */
static int fast_agrees(const void *buf, size_t n, const char *what)
{
	ckpt_object_graph *f = NULL, *p = NULL;
	int rc = ckpt__object_graph_decode_fast(&f, buf, n);
	cr_assert(rc == 0 || rc == 1, "%s: %d", what, rc);
	if (rc == 0)
		return 0;
	/* both validate what they decoded (ids in range, a root): the verdicts must agree too */
	int vf = ckpt_object_graph_validate(f);
	int vp = ckpt__object_graph_parse_pb(&p, buf, n);
	cr_assert_eq(vf, vp, "%s: fast decoder %d, protobuf-c %d (%s)", what, vf, vp, ckpt_error_last()->message);
	if (vp == CKPT_OK)
		same_graph(p, f, what);
	ckpt_object_graph_free(f);
	ckpt_object_graph_free(p);
	return 1;
}

Test(og_encode, fast_decoder_takes_what_serialize_writes_and_agrees_with_protobuf_c)
{
	for (unsigned seed = 1; seed <= 20; seed++) {
		ckpt_object_graph *g = rnd_graph(seed);
		void *a;
		size_t na;
		cr_assert_eq(ckpt_object_graph_serialize(&a, &na, g), CKPT_OK);
		cr_assert(fast_agrees(a, na, "random graph"), "seed %u declined", seed);
		free(a);
		ckpt_object_graph_free(g);
	}
}

Test(og_encode, fast_decoder_on_every_prefix_and_mutation_agrees_with_protobuf_c, .timeout = 120)
{
	static const unsigned char vals[] = { 0x00, 0x01, 0x08, 0x0a, 0x12, 0x1a, 0x22, 0x2a, 0x7f, 0x80, 0xff, 0xc3 };
	/* a small random graph: every byte gets every mutation */
	unsigned seed = 1;
	ckpt_object_graph *g = rnd_graph(seed);
	while (g->nnodes > 8) {
		ckpt_object_graph_free(g);
		g = rnd_graph(++seed);
	}
	void *a;
	size_t na;
	cr_assert_eq(ckpt_object_graph_serialize(&a, &na, g), CKPT_OK);
	unsigned char *m = malloc(na);
	size_t taken = 0, tried = 0;
	for (size_t n = 0; n <= na; n++, tried++)
		taken += (size_t)fast_agrees(a, n, "prefix");
	for (size_t i = 0; i < na; i++)
		for (size_t v = 0; v < sizeof vals; v++, tried++) {
			memcpy(m, a, na);
			m[i] = vals[v];
			taken += (size_t)fast_agrees(m, na, "mutation");
		}
	cr_assert_gt(taken, 0u);
	cr_assert_lt(taken, tried);
	free(m);
	free(a);
	ckpt_object_graph_free(g);
}

Test(og_encode, fast_decoder_declines_unknown_fields_and_non_ascii)
{
	ckpt_object_graph *f = NULL;
	/* node { children { node_id 0 local_name "a" } } then one thing each that protobuf-c must judge */
	static const struct { const char *what; unsigned char b[24]; size_t n; } cases[] = {
		{ "unknown node field 6", { 0x0a, 0x09, 0x0a, 0x05, 0x08, 0x00, 0x12, 0x01, 'a', 0x30, 0x01 }, 11 },
		{ "unknown graph field 2", { 0x0a, 0x07, 0x0a, 0x05, 0x08, 0x00, 0x12, 0x01, 'a', 0x12, 0x00 }, 11 },
		{ "non-ASCII name", { 0x0a, 0x08, 0x0a, 0x06, 0x08, 0x00, 0x12, 0x02, 0xc3, 0xa9 }, 10 },
		{ "NUL in a name", { 0x0a, 0x08, 0x0a, 0x06, 0x08, 0x00, 0x12, 0x02, 'a', 0x00 }, 10 },
		{ "node_id twice", { 0x0a, 0x09, 0x0a, 0x07, 0x08, 0x00, 0x08, 0x00, 0x12, 0x01, 'a' }, 11 },
		{ "two registered savers", { 0x0a, 0x04, 0x22, 0x00, 0x22, 0x00 }, 6 },
		{ "negative node id", { 0x0a, 0x0e, 0x0a, 0x0c, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
			0xff, 0x01, 0x12, 0x00 }, 17 },
	};
	static const unsigned char plain[] = { 0x0a, 0x07, 0x0a, 0x05, 0x08, 0x00, 0x12, 0x01, 'a' };
	cr_assert_eq(ckpt__object_graph_decode_fast(&f, plain, sizeof plain), 1);
	cr_assert_eq(f->nnodes, 1u);
	cr_assert_str_eq(f->nodes[0].children[0].local_name, "a");
	ckpt_object_graph_free(f);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		f = NULL;
		cr_assert_eq(ckpt__object_graph_decode_fast(&f, cases[k].b, cases[k].n), 0, "took %s", cases[k].what);
		cr_assert_null(f);
		/* the public parse still decides, through protobuf-c */
		ckpt_object_graph *p = NULL;
		int rc = ckpt_object_graph_parse(&p, cases[k].b, cases[k].n);
		cr_assert(rc == CKPT_OK || rc == CKPT_EFORMAT, "%s: %d", cases[k].what, rc);
		ckpt_object_graph_free(p);
	}
}

/* The library's encoder (libckpt/graph/og_encode.c) writes exactly the bytes protobuf-c packs. */
Test(og_encode, encoder_writes_the_bytes_protobuf_c_packs)
{
	for (unsigned seed = 1; seed <= 40; seed++) {
		ckpt_object_graph *g = rnd_graph(seed);
		if (seed % 4 == 0 && g->nnodes > 1)
			g->nodes[1].has_checkpoint_values = 1; /* BoolValue with and without its field */
		void *a, *b;
		size_t na, nb;
		cr_assert_eq(ckpt_object_graph_serialize(&a, &na, g), CKPT_OK);
		cr_assert_eq(ckpt__object_graph_serialize_pb(g, &b, &nb), CKPT_OK);
		cr_assert_eq(na, nb, "seed %u: %zu bytes, protobuf-c %zu", seed, na, nb);
		cr_assert_eq(memcmp(a, b, na), 0, "seed %u: bytes differ", seed);
		free(a);
		free(b);
		ckpt_object_graph_free(g);
	}
}

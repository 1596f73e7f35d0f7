/*
 * TrackableObjectGraph without protobuf-c, for graphs as TensorFlow writes
 * them: every field of trackable_object_graph.proto (see object_graph.c),
 * one-byte tags, singular fields at most once, ids in 0..INT32_MAX, bools
 * 0 or 1, printable-ASCII strings. Opening a checkpoint of 10,000 tiny
 * variables spent a tenth of its time in protobuf-c building one message
 * per child, attribute and slot before they were copied out again; this
 * decodes straight into the ckpt_og_* structures.
 *
 * Anything else — unknown fields, other encodings, non-ASCII or NUL bytes in
 * a string, any malformed or truncated byte — is declined (0), and
 * ckpt_object_graph_parse decodes the graph with protobuf-c as before, which
 * accepts it or fails with its usual message. So this path never accepts what
 * protobuf-c would refuse, and never reads a field differently.
 */
#include <string.h>
#include "internal.h"

typedef struct cur {
	const unsigned char *p, *end;
} cur;

static int varint(cur *c, uint64_t *v)
{
	uint64_t r = 0;
	for (int i = 0; i < 10 && c->p < c->end; i++) {
		uint64_t b = *c->p++;
		if (i == 9 && b > 1)
			return 0;
		r |= (b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*v = r;
			return 1;
		}
	}
	return 0;
}

/* The body of a length-delimited field at c into *sub; c moves past it. */
static int sub(cur *c, cur *out)
{
	uint64_t n;
	if (!varint(c, &n) || n > (uint64_t)(c->end - c->p))
		return 0;
	out->p = c->p;
	out->end = c->p + n;
	c->p += n;
	return 1;
}

static int int32_field(cur *c, int *out)
{
	uint64_t v;
	if (!varint(c, &v) || v > (uint64_t)INT32_MAX)
		return 0;
	*out = (int)v;
	return 1;
}

static int bool_field(cur *c, int *out)
{
	uint64_t v;
	if (!varint(c, &v) || v > 1)
		return 0;
	*out = (int)v;
	return 1;
}

/* 1 with the string in *s (ckpt__malloc'ed), 0 declined, CKPT_ENOMEM. */
static int string_field(cur *c, char **s)
{
	cur b = { 0 };
	if (!sub(c, &b))
		return 0;
	for (const unsigned char *q = b.p; q < b.end; q++)
		if (*q < 0x20 || *q > 0x7e)
			return 0;
	*s = ckpt__strndup((const char *)b.p, (size_t)(b.end - b.p));
	return *s ? 1 : CKPT_ENOMEM;
}

/* Repeated sub-messages: 1 = ok, 0 = declined, <0 = error. The decoder's result (r) is passed on. */
#define TRY_FIELD(r) do { int r_ = (r); if (r_ <= 0) return r_; } while (0)

static int child(cur c, ckpt_og_child *o)
{
	unsigned seen = 0;
	while (c.p < c.end) {
		unsigned tag = *c.p++;
		if (tag & 0x80 || seen & (1u << (tag >> 3)))
			return 0;
		seen |= 1u << (tag >> 3);
		if (tag == 0x08)
			TRY_FIELD(int32_field(&c, &o->node_id));
		else if (tag == 0x12)
			TRY_FIELD(string_field(&c, &o->local_name));
		else
			return 0;
	}
	return o->local_name || (o->local_name = ckpt__strdup("")) ? 1 : CKPT_ENOMEM;
}

static int attr(cur c, ckpt_og_attr *o)
{
	unsigned seen = 0;
	while (c.p < c.end) {
		unsigned tag = *c.p++;
		if (tag & 0x80 || seen & (1u << (tag >> 3)))
			return 0;
		seen |= 1u << (tag >> 3);
		if (tag == 0x0a)
			TRY_FIELD(string_field(&c, &o->name));
		else if (tag == 0x12)
			TRY_FIELD(string_field(&c, &o->full_name));
		else if (tag == 0x1a)
			TRY_FIELD(string_field(&c, &o->checkpoint_key));
		else if (tag == 0x20)
			TRY_FIELD(bool_field(&c, &o->optional_restore));
		else
			return 0;
	}
	if ((!o->name && !(o->name = ckpt__strdup(""))) || (!o->full_name && !(o->full_name = ckpt__strdup(""))) ||
		(!o->checkpoint_key && !(o->checkpoint_key = ckpt__strdup(""))))
		return CKPT_ENOMEM;
	return 1;
}

static int slot(cur c, ckpt_og_slot *o)
{
	unsigned seen = 0;
	while (c.p < c.end) {
		unsigned tag = *c.p++;
		if (tag & 0x80 || seen & (1u << (tag >> 3)))
			return 0;
		seen |= 1u << (tag >> 3);
		if (tag == 0x08)
			TRY_FIELD(int32_field(&c, &o->original_variable_node_id));
		else if (tag == 0x12)
			TRY_FIELD(string_field(&c, &o->slot_name));
		else if (tag == 0x18)
			TRY_FIELD(int32_field(&c, &o->slot_variable_node_id));
		else
			return 0;
	}
	return o->slot_name || (o->slot_name = ckpt__strdup("")) ? 1 : CKPT_ENOMEM;
}

/* RegisteredSaver: its name (object_name is not kept, as in object_graph.c). */
static int saver(cur c, char **name)
{
	unsigned seen = 0;
	char *object_name = NULL;
	while (c.p < c.end) {
		unsigned tag = *c.p++;
		if (tag & 0x80 || seen & (1u << (tag >> 3)))
			return 0;
		seen |= 1u << (tag >> 3);
		if (tag == 0x0a) {
			TRY_FIELD(string_field(&c, name));
		} else if (tag == 0x12) {
			int r = string_field(&c, &object_name);
			ckpt__free(object_name);
			object_name = NULL;
			if (r <= 0)
				return r;
		} else {
			return 0;
		}
	}
	return *name || (*name = ckpt__strdup("")) ? 1 : CKPT_ENOMEM;
}

static int bool_value(cur c, int *out)
{
	*out = 0;
	if (c.p == c.end)
		return 1;
	if (*c.p++ != 0x08 || !bool_field(&c, out))
		return 0;
	return c.p == c.end;
}

/* Count the occurrences of each tag 0x0a, 0x12, 0x1a in a node, checking the framing of every field. */
static int count_node(cur c, size_t n[3])
{
	unsigned seen = 0;
	while (c.p < c.end) {
		unsigned tag = *c.p++;
		cur b = { 0 };
		if (tag != 0x0a && tag != 0x12 && tag != 0x1a && tag != 0x22 && tag != 0x2a)
			return 0;
		if (tag >= 0x22 && (seen & (1u << (tag >> 3))))
			return 0;
		seen |= 1u << (tag >> 3);
		if (!sub(&c, &b))
			return 0;
		if (tag <= 0x1a)
			n[(tag >> 3) - 1]++;
	}
	return 1;
}

static int node(cur c, ckpt_og_node *o)
{
	size_t n[3] = { 0, 0, 0 };
	if (!count_node(c, n))
		return 0;
	o->has_checkpoint_values = -1;
	if ((n[0] && !(o->children = ckpt__calloc(n[0], sizeof(*o->children)))) ||
		(n[1] && !(o->attrs = ckpt__calloc(n[1], sizeof(*o->attrs)))) ||
		(n[2] && !(o->slots = ckpt__calloc(n[2], sizeof(*o->slots)))))
		return CKPT_ENOMEM;
	while (c.p < c.end) {
		unsigned tag = *c.p++;
		cur b = { 0 };
		if (!sub(&c, &b)) /* framing was checked by count_node: cannot fail here */
			return 0;
		switch (tag) {
		case 0x0a: TRY_FIELD(child(b, &o->children[o->nchildren++])); break;
		case 0x12: TRY_FIELD(attr(b, &o->attrs[o->nattrs++])); break;
		case 0x1a: TRY_FIELD(slot(b, &o->slots[o->nslots++])); break;
		case 0x22: TRY_FIELD(saver(b, &o->registered_saver)); break;
		default: TRY_FIELD(bool_value(b, &o->has_checkpoint_values)); break;
		}
	}
	return 1;
}

int ckpt__object_graph_decode_fast(ckpt_object_graph **out, const void *buf, size_t n)
{
	*out = NULL;
	cur c = { buf, (const unsigned char *)buf + n };
	size_t nn = 0;
	for (cur s = c; s.p < s.end; nn++) {
		cur b = { 0 };
		if (*s.p++ != 0x0a || !sub(&s, &b))
			return 0;
	}
	ckpt_object_graph *g = ckpt__calloc(1, sizeof(*g));
	if (!g || (nn && !(g->nodes = ckpt__calloc(nn, sizeof(*g->nodes))))) {
		ckpt__free(g);
		return CKPT_ENOMEM;
	}
	int r = 1;
	while (r > 0 && c.p < c.end) {
		cur b = { 0 };
		c.p++;
		sub(&c, &b);
		r = node(b, &g->nodes[g->nnodes++]);
	}
	if (r <= 0) {
		ckpt_object_graph_free(g);
		return r;
	}
	*out = g;
	return 1;
}

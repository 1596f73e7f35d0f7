/*
 * TensorFlow's TrackableObjectGraph (trackable_object_graph.proto) as C data,
 * and TensorFlow's key naming (trackable_utils.py).
 *
 *   TrackableObjectGraph { repeated TrackableObject nodes = 1; }   node 0 = root
 *   TrackableObject { children = 1 {node_id = 1, local_name = 2};
 *                     attributes = 2 {name = 1, full_name = 2, checkpoint_key = 3, optional_restore = 4};
 *                     slot_variables = 3 {original_variable_node_id = 1, slot_name = 2, slot_variable_node_id = 3};
 *                     registered_saver = 4 {name = 1, object_name = 2};
 *                     has_checkpoint_values = 5 (BoolValue) }
 *
 * Decoding accepts fields in any order (protobuf-c); encoding is in
 * field-number order with proto3 defaults omitted, as TF 2.2-2.9 wrote it.
 * Graph members are allocated with ckpt__malloc; serialize / path / escape
 * results use plain malloc (callers free() them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <protobuf-c/protobuf-c.h>
#include "trackable_object_graph.pb-c.h"
#include "checkpoint_internal.h"

typedef CkptTf__TrackableObjectGraph PbGraph;
typedef CkptTf__TrackableObjectGraph__TrackableObject PbNode;
typedef CkptTf__TrackableObjectGraph__TrackableObject__ObjectReference PbChild;
typedef CkptTf__TrackableObjectGraph__TrackableObject__SerializedTensor PbAttr;
typedef CkptTf__TrackableObjectGraph__TrackableObject__SlotVariableReference PbSlot;

static void *og_pb_alloc(void *ctx, size_t n) { (void)ctx; return ckpt__malloc(n ? n : 1); }
static void og_pb_free(void *ctx, void *p) { (void)ctx; ckpt__free(p); }
static ProtobufCAllocator og_alloc = { og_pb_alloc, og_pb_free, NULL };

static char *dup_str(const char *s)
{
	return ckpt__strdup(s ? s : "");
}

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

int ckpt_object_graph_validate(const ckpt_object_graph *g)
{
	if (!g)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "NULL object graph");
	if (g->nnodes == 0)
		return ckpt__fail(CKPT_EFORMAT, NULL, NULL, -1, "object graph has no root node");
	if (g->nnodes > INT32_MAX)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "object graph has %zu nodes", g->nnodes);
	long n = (long)g->nnodes;
	for (size_t i = 0; i < g->nnodes; i++) {
		const ckpt_og_node *o = &g->nodes[i];
		for (size_t k = 0; k < o->nchildren; k++)
			if (o->children[k].node_id < 0 || o->children[k].node_id >= n)
				return ckpt__fail(CKPT_EFORMAT, NULL, o->children[k].local_name, -1,
					"node %zu: child '%s' refers to node %d, graph has %zu nodes", i,
					o->children[k].local_name ? o->children[k].local_name : "",
					o->children[k].node_id, g->nnodes);
		for (size_t k = 0; k < o->nslots; k++) {
			const ckpt_og_slot *s = &o->slots[k];
			if (s->original_variable_node_id < 0 || s->original_variable_node_id >= n ||
			    s->slot_variable_node_id < 0 || s->slot_variable_node_id >= n)
				return ckpt__fail(CKPT_EFORMAT, NULL, s->slot_name, -1,
					"node %zu: slot '%s' refers to nodes %d/%d, graph has %zu nodes", i,
					s->slot_name ? s->slot_name : "", s->original_variable_node_id,
					s->slot_variable_node_id, g->nnodes);
		}
	}
	return CKPT_OK;
}

static int convert_node(ckpt_og_node *d, const PbNode *s)
{
	d->has_checkpoint_values = s->has_checkpoint_values ? (s->has_checkpoint_values->value ? 1 : 0) : -1;
	if (s->registered_saver && !(d->registered_saver = dup_str(s->registered_saver->name)))
		return CKPT_ENOMEM;
	if (s->n_children && !(d->children = ckpt__calloc(s->n_children, sizeof(*d->children))))
		return CKPT_ENOMEM;
	for (; d->nchildren < s->n_children; d->nchildren++) {
		const PbChild *c = s->children[d->nchildren];
		ckpt_og_child *o = &d->children[d->nchildren];
		o->node_id = c->node_id;
		if (!(o->local_name = dup_str(c->local_name)))
			return CKPT_ENOMEM;
	}
	if (s->n_attributes && !(d->attrs = ckpt__calloc(s->n_attributes, sizeof(*d->attrs))))
		return CKPT_ENOMEM;
	for (; d->nattrs < s->n_attributes; d->nattrs++) {
		const PbAttr *a = s->attributes[d->nattrs];
		ckpt_og_attr *o = &d->attrs[d->nattrs];
		o->optional_restore = a->optional_restore ? 1 : 0;
		if (!(o->name = dup_str(a->name)) || !(o->full_name = dup_str(a->full_name)) ||
		    !(o->checkpoint_key = dup_str(a->checkpoint_key))) {
			d->nattrs++;
			return CKPT_ENOMEM;
		}
	}
	if (s->n_slot_variables && !(d->slots = ckpt__calloc(s->n_slot_variables, sizeof(*d->slots))))
		return CKPT_ENOMEM;
	for (; d->nslots < s->n_slot_variables; d->nslots++) {
		const PbSlot *sv = s->slot_variables[d->nslots];
		ckpt_og_slot *o = &d->slots[d->nslots];
		o->original_variable_node_id = sv->original_variable_node_id;
		o->slot_variable_node_id = sv->slot_variable_node_id;
		if (!(o->slot_name = dup_str(sv->slot_name))) {
			d->nslots++;
			return CKPT_ENOMEM;
		}
	}
	return CKPT_OK;
}

int ckpt__object_graph_parse_pb(ckpt_object_graph **out, const void *buf, size_t n)
{
	*out = NULL;
	if (n > CKPT_MAX_OBJECT_GRAPH_BYTES)
		return ckpt__fail(CKPT_ELIMIT, NULL, CKPT_OBJECT_GRAPH_KEY, -1,
			"object graph of %zu bytes exceeds the %llu-byte cap", n,
			(unsigned long long)CKPT_MAX_OBJECT_GRAPH_BYTES);
	ckpt_error_clear(); /* a NULL from unpack is ENOMEM only if the allocator said so */
	PbGraph *pg = ckpt_tf__trackable_object_graph__unpack(&og_alloc, n, buf);
	if (!pg && ckpt_error_last()->code == CKPT_ENOMEM)
		return CKPT_ENOMEM;
	if (!pg)
		return ckpt__fail(CKPT_EFORMAT, NULL, CKPT_OBJECT_GRAPH_KEY, -1,
			"cannot decode the TrackableObjectGraph (%zu bytes)", n);
	ckpt_object_graph *g = ckpt__calloc(1, sizeof(*g));
	int rc = g ? CKPT_OK : CKPT_ENOMEM;
	if (rc == CKPT_OK && pg->n_nodes && !(g->nodes = ckpt__calloc(pg->n_nodes, sizeof(*g->nodes))))
		rc = CKPT_ENOMEM;
	for (size_t i = 0; rc == CKPT_OK && i < pg->n_nodes; i++) {
		g->nnodes++;
		rc = convert_node(&g->nodes[i], pg->nodes[i]);
	}
	ckpt_tf__trackable_object_graph__free_unpacked(pg, &og_alloc);
	if (rc == CKPT_OK)
		rc = ckpt_object_graph_validate(g);
	if (rc < 0) {
		ckpt_object_graph_free(g);
		return rc;
	}
	*out = g;
	return CKPT_OK;
}

/*
 * Decoder for the graphs TensorFlow and this library write: straight into
 * ckpt_og_node (one allocation per string and array) instead of protobuf-c's
 * unpack and a conversion, which were most of opening a 10,000-variable
 * checkpoint. It takes only the canonical subset: known fields with their
 * wire types, singular fields at most once, minimal-form int32 / bool
 * varints, strings without NUL bytes. Anything else (unknown or repeated
 * singular fields, groups, odd varints, truncation) returns FALLBACK and the
 * protobuf-c path decodes it, so unusual input behaves exactly as before.
 */
#define FALLBACK 1

typedef struct rd {
	const unsigned char *p, *end;
} rd;

static int rd_varint(rd *r, uint64_t *v)
{
	uint64_t x = 0;
	for (int i = 0; i < 10; i++) {
		if (r->p == r->end)
			return FALLBACK;
		unsigned char b = *r->p++;
		if (i == 9 && b > 1)
			return FALLBACK;
		x |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*v = x;
			return CKPT_OK;
		}
	}
	return FALLBACK;
}

/* one-byte tag of a known field (fields 1..15) */
static int rd_tag(rd *r, unsigned *field, unsigned *wire)
{
	unsigned char b = *r->p++;
	if (b & 0x80)
		return FALLBACK;
	*field = b >> 3;
	*wire = b & 7;
	return *field ? CKPT_OK : FALLBACK;
}

static int rd_int32(rd *r, int *v)
{
	uint64_t x;
	if (rd_varint(r, &x))
		return FALLBACK;
	if (x <= (uint64_t)INT32_MAX) {
		*v = (int)x;
		return CKPT_OK;
	}
	/* negative: the 10-byte sign extension, nothing else */
	int64_t sx = (int64_t)x;
	if (sx < INT32_MIN || sx >= 0)
		return FALLBACK;
	*v = (int)sx;
	return CKPT_OK;
}

static int rd_bool(rd *r, int *v)
{
	uint64_t x;
	if (rd_varint(r, &x) || x > 1)
		return FALLBACK;
	*v = (int)x;
	return CKPT_OK;
}

static int rd_len(rd *r, rd *sub)
{
	uint64_t l;
	if (rd_varint(r, &l) || l > (uint64_t)(r->end - r->p))
		return FALLBACK;
	sub->p = r->p;
	sub->end = r->p + l;
	r->p += l;
	return CKPT_OK;
}

/* string field: a new NUL-terminated copy; *dst must be unset */
static int rd_str(rd *r, char **dst)
{
	rd s;
	if (*dst || rd_len(r, &s))
		return FALLBACK;
	size_t l = (size_t)(s.end - s.p);
	if (l && memchr(s.p, 0, l))
		return FALLBACK;
	char *d = ckpt__malloc(l + 1);
	if (!d)
		return CKPT_ENOMEM;
	memcpy(d, s.p, l);
	d[l] = '\0';
	*dst = d;
	return CKPT_OK;
}

#define RD_TRY(x) do { int rd_rc_ = (x); if (rd_rc_) return rd_rc_; } while (0)

static int rd_child(rd *r, ckpt_og_child *c)
{
	int have_id = 0;
	while (r->p < r->end) {
		unsigned f, w;
		RD_TRY(rd_tag(r, &f, &w));
		if (f == 1 && w == 0 && !have_id) {
			RD_TRY(rd_int32(r, &c->node_id));
			have_id = 1;
		} else if (f == 2 && w == 2) {
			RD_TRY(rd_str(r, &c->local_name));
		} else {
			return FALLBACK;
		}
	}
	return CKPT_OK;
}

static int rd_attr(rd *r, ckpt_og_attr *a)
{
	int have_opt = 0;
	while (r->p < r->end) {
		unsigned f, w;
		RD_TRY(rd_tag(r, &f, &w));
		if (f == 1 && w == 2)
			RD_TRY(rd_str(r, &a->name));
		else if (f == 2 && w == 2)
			RD_TRY(rd_str(r, &a->full_name));
		else if (f == 3 && w == 2)
			RD_TRY(rd_str(r, &a->checkpoint_key));
		else if (f == 4 && w == 0 && !have_opt) {
			RD_TRY(rd_bool(r, &a->optional_restore));
			have_opt = 1;
		} else
			return FALLBACK;
	}
	return CKPT_OK;
}

static int rd_slot(rd *r, ckpt_og_slot *s)
{
	int have_o = 0, have_s = 0;
	while (r->p < r->end) {
		unsigned f, w;
		RD_TRY(rd_tag(r, &f, &w));
		if (f == 1 && w == 0 && !have_o) {
			RD_TRY(rd_int32(r, &s->original_variable_node_id));
			have_o = 1;
		} else if (f == 2 && w == 2) {
			RD_TRY(rd_str(r, &s->slot_name));
		} else if (f == 3 && w == 0 && !have_s) {
			RD_TRY(rd_int32(r, &s->slot_variable_node_id));
			have_s = 1;
		} else {
			return FALLBACK;
		}
	}
	return CKPT_OK;
}

/* missing strings read as "" (protobuf-c's default, copied by convert_node) */
static int rd_default(char **s)
{
	if (!*s && !(*s = ckpt__strdup("")))
		return CKPT_ENOMEM;
	return CKPT_OK;
}

static int rd_node(rd *r, ckpt_og_node *d)
{
	/* count first: arrays are allocated once, exactly sized */
	size_t nc = 0, na = 0, ns = 0;
	int have_saver = 0, have_hcv = 0;
	rd scan = *r;
	while (scan.p < scan.end) {
		unsigned f, w;
		rd sub;
		RD_TRY(rd_tag(&scan, &f, &w));
		if (w != 2 || f > 5 || rd_len(&scan, &sub))
			return FALLBACK;
		nc += f == 1;
		na += f == 2;
		ns += f == 3;
		if ((f == 4 && have_saver++) || (f == 5 && have_hcv++))
			return FALLBACK;
	}
	d->has_checkpoint_values = -1;
	if (nc && !(d->children = ckpt__calloc(nc, sizeof(*d->children))))
		return CKPT_ENOMEM;
	if (na && !(d->attrs = ckpt__calloc(na, sizeof(*d->attrs))))
		return CKPT_ENOMEM;
	if (ns && !(d->slots = ckpt__calloc(ns, sizeof(*d->slots))))
		return CKPT_ENOMEM;
	while (r->p < r->end) {
		unsigned f, w;
		rd sub;
		RD_TRY(rd_tag(r, &f, &w));
		RD_TRY(rd_len(r, &sub));
		if (f == 1) {
			ckpt_og_child *c = &d->children[d->nchildren++];
			RD_TRY(rd_child(&sub, c));
			RD_TRY(rd_default(&c->local_name));
		} else if (f == 2) {
			ckpt_og_attr *a = &d->attrs[d->nattrs++];
			RD_TRY(rd_attr(&sub, a));
			RD_TRY(rd_default(&a->name));
			RD_TRY(rd_default(&a->full_name));
			RD_TRY(rd_default(&a->checkpoint_key));
		} else if (f == 3) {
			ckpt_og_slot *s = &d->slots[d->nslots++];
			RD_TRY(rd_slot(&sub, s));
			RD_TRY(rd_default(&s->slot_name));
		} else if (f == 4) {
			int have_obj = 0;
			while (sub.p < sub.end) {
				unsigned sf, sw;
				RD_TRY(rd_tag(&sub, &sf, &sw));
				if (sf == 1 && sw == 2) {
					RD_TRY(rd_str(&sub, &d->registered_saver));
				} else if (sf == 2 && sw == 2 && !have_obj) {
					rd skip;
					RD_TRY(rd_len(&sub, &skip)); /* object_name: not kept */
					have_obj = 1;
				} else {
					return FALLBACK;
				}
			}
			RD_TRY(rd_default(&d->registered_saver));
		} else {
			int v = 0, have_v = 0;
			while (sub.p < sub.end) {
				unsigned sf, sw;
				RD_TRY(rd_tag(&sub, &sf, &sw));
				if (sf != 1 || sw != 0 || have_v++)
					return FALLBACK;
				RD_TRY(rd_bool(&sub, &v));
			}
			d->has_checkpoint_values = v;
		}
	}
	return CKPT_OK;
}

/* CKPT_OK, CKPT_ENOMEM, or FALLBACK (input outside the canonical subset) */
static int parse_fast(ckpt_object_graph **out, const void *buf, size_t n)
{
	rd r = { buf, (const unsigned char *)buf + n };
	size_t nn = 0;
	for (rd scan = r; scan.p < scan.end;) {
		unsigned f, w;
		rd sub;
		if (rd_tag(&scan, &f, &w) || f != 1 || w != 2 || rd_len(&scan, &sub))
			return FALLBACK;
		nn++;
	}
	ckpt_object_graph *g = ckpt__calloc(1, sizeof(*g));
	if (!g)
		return CKPT_ENOMEM;
	int rc = CKPT_OK;
	if (nn && !(g->nodes = ckpt__calloc(nn, sizeof(*g->nodes))))
		rc = CKPT_ENOMEM;
	while (rc == CKPT_OK && r.p < r.end) {
		unsigned f, w;
		rd sub;
		rd_tag(&r, &f, &w);
		rd_len(&r, &sub);
		rc = rd_node(&sub, &g->nodes[g->nnodes++]);
	}
	if (rc != CKPT_OK) {
		ckpt_object_graph_free(g);
		return rc;
	}
	*out = g;
	return CKPT_OK;
}

int ckpt_object_graph_parse(ckpt_object_graph **out, const void *buf, size_t n)
{
	*out = NULL;
	if (n > CKPT_MAX_OBJECT_GRAPH_BYTES)
		return ckpt__fail(CKPT_ELIMIT, NULL, CKPT_OBJECT_GRAPH_KEY, -1,
			"object graph of %zu bytes exceeds the %llu-byte cap", n,
			(unsigned long long)CKPT_MAX_OBJECT_GRAPH_BYTES);
	ckpt_object_graph *g = NULL;
	int rc = parse_fast(&g, buf, n);
	if (rc == FALLBACK)
		return ckpt__object_graph_parse_pb(out, buf, n);
	if (rc == CKPT_OK && (rc = ckpt_object_graph_validate(g)) < 0)
		ckpt_object_graph_free(g);
	else if (rc == CKPT_OK)
		*out = g;
	return rc;
}

/*
 * Encoder: the bytes protobuf-c's pack writes for the same message (fields in
 * field-number order, proto3 zero values omitted, negative int32 as 10-byte
 * varints, present sub-messages always written), without building the
 * protobuf-c view: that took 6 allocations per node and was a quarter of a
 * 10,000-variable save. ckpt__object_graph_serialize_pb (below) is the
 * protobuf-c reference the tests compare against.
 */
static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static size_t int32_len(int v)
{
	return v < 0 ? 10 : varint_len((uint64_t)v);
}

/* tag + length + bytes of a non-empty string field (0 when omitted) */
static size_t str_field_len(const char *s)
{
	size_t l = s ? strlen(s) : 0;
	return l ? 1 + varint_len(l) + l : 0;
}

static size_t sub_len(size_t body)
{
	return 1 + varint_len(body) + body;
}

static size_t child_body(const ckpt_og_child *c)
{
	return (c->node_id ? 1 + int32_len(c->node_id) : 0) + str_field_len(c->local_name);
}

static size_t attr_body(const ckpt_og_attr *a)
{
	return str_field_len(a->name) + str_field_len(a->full_name) + str_field_len(a->checkpoint_key) +
		(a->optional_restore ? 2 : 0);
}

static size_t slot_body(const ckpt_og_slot *s)
{
	return (s->original_variable_node_id ? 1 + int32_len(s->original_variable_node_id) : 0) +
		str_field_len(s->slot_name) + (s->slot_variable_node_id ? 1 + int32_len(s->slot_variable_node_id) : 0);
}

static size_t node_body(const ckpt_og_node *o)
{
	size_t n = 0;
	for (size_t k = 0; k < o->nchildren; k++)
		n += sub_len(child_body(&o->children[k]));
	for (size_t k = 0; k < o->nattrs; k++)
		n += sub_len(attr_body(&o->attrs[k]));
	for (size_t k = 0; k < o->nslots; k++)
		n += sub_len(slot_body(&o->slots[k]));
	if (o->registered_saver)
		n += sub_len(str_field_len(o->registered_saver));
	if (o->has_checkpoint_values >= 0)
		n += sub_len(o->has_checkpoint_values ? 2 : 0);
	return n;
}

static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	*p++ = (unsigned char)v;
	return p;
}

static unsigned char *put_int32(unsigned char *p, unsigned tag, int v)
{
	if (!v)
		return p;
	*p++ = (unsigned char)tag;
	return put_varint(p, (uint64_t)(int64_t)v); /* negative: sign-extended, 10 bytes */
}

static unsigned char *put_str(unsigned char *p, unsigned tag, const char *s)
{
	size_t l = s ? strlen(s) : 0;
	if (!l)
		return p;
	*p++ = (unsigned char)tag;
	p = put_varint(p, l);
	memcpy(p, s, l);
	return p + l;
}

static unsigned char *put_head(unsigned char *p, unsigned tag, size_t body)
{
	*p++ = (unsigned char)tag;
	return put_varint(p, body);
}

static unsigned char *put_node(unsigned char *p, const ckpt_og_node *o)
{
	for (size_t k = 0; k < o->nchildren; k++) {
		const ckpt_og_child *c = &o->children[k];
		p = put_head(p, 0x0a, child_body(c));
		p = put_int32(p, 0x08, c->node_id);
		p = put_str(p, 0x12, c->local_name);
	}
	for (size_t k = 0; k < o->nattrs; k++) {
		const ckpt_og_attr *a = &o->attrs[k];
		p = put_head(p, 0x12, attr_body(a));
		p = put_str(p, 0x0a, a->name);
		p = put_str(p, 0x12, a->full_name);
		p = put_str(p, 0x1a, a->checkpoint_key);
		if (a->optional_restore) {
			*p++ = 0x20;
			*p++ = 1;
		}
	}
	for (size_t k = 0; k < o->nslots; k++) {
		const ckpt_og_slot *s = &o->slots[k];
		p = put_head(p, 0x1a, slot_body(s));
		p = put_int32(p, 0x08, s->original_variable_node_id);
		p = put_str(p, 0x12, s->slot_name);
		p = put_int32(p, 0x18, s->slot_variable_node_id);
	}
	if (o->registered_saver) {
		p = put_head(p, 0x22, str_field_len(o->registered_saver));
		p = put_str(p, 0x0a, o->registered_saver);
	}
	if (o->has_checkpoint_values >= 0) {
		p = put_head(p, 0x2a, o->has_checkpoint_values ? 2 : 0);
		if (o->has_checkpoint_values) {
			*p++ = 0x08;
			*p++ = 1;
		}
	}
	return p;
}

int ckpt_object_graph_serialize(const ckpt_object_graph *g, void **buf, size_t *n)
{
	*buf = NULL;
	*n = 0;
	CKPT_TRY(ckpt_object_graph_validate(g));
	size_t len = 0;
	for (size_t i = 0; i < g->nnodes; i++)
		len += sub_len(node_body(&g->nodes[i]));
	unsigned char *b = malloc(len ? len : 1);
	if (!b)
		return ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory (%zu bytes)", len);
	unsigned char *p = b;
	for (size_t i = 0; i < g->nnodes; i++) {
		p = put_head(p, 0x0a, node_body(&g->nodes[i]));
		p = put_node(p, &g->nodes[i]);
	}
	size_t wrote = (size_t)(p - b);
	if (wrote != len) {
		free(b);
		return ckpt__fail(CKPT_ERROR, NULL, NULL, -1, "object graph encoder: wrote %zu bytes, sized %zu",
			wrote, len);
	}
	*buf = b;
	*n = len;
	return CKPT_OK;
}

/* protobuf-c views of one node; everything points into `g` or the arrays here. */
typedef struct pb_node_mem {
	PbChild *c; PbChild **cp;
	PbAttr *a; PbAttr **ap;
	PbSlot *s; PbSlot **sp;
	CkptTf__RegisteredSaver saver;
	CkptTf__BoolValue hcv;
} pb_node_mem;

static char *nz(const char *s)
{
	return (char *)(s ? s : "");
}

int ckpt__object_graph_serialize_pb(const ckpt_object_graph *g, void **buf, size_t *n)
{
	*buf = NULL;
	*n = 0;
	CKPT_TRY(ckpt_object_graph_validate(g));
	PbGraph pg = CKPT_TF__TRACKABLE_OBJECT_GRAPH__INIT;
	PbNode *nodes = ckpt__calloc(g->nnodes, sizeof(*nodes));
	PbNode **np = ckpt__calloc(g->nnodes, sizeof(*np));
	pb_node_mem *mem = ckpt__calloc(g->nnodes, sizeof(*mem));
	int rc = (nodes && np && mem) ? CKPT_OK : CKPT_ENOMEM;
	for (size_t i = 0; rc == CKPT_OK && i < g->nnodes; i++) {
		const ckpt_og_node *o = &g->nodes[i];
		pb_node_mem *m = &mem[i];
		PbNode *p = &nodes[i];
		ckpt_tf__trackable_object_graph__trackable_object__init(p);
		np[i] = p;
		m->c = ckpt__calloc(o->nchildren + 1, sizeof(*m->c));
		m->cp = ckpt__calloc(o->nchildren + 1, sizeof(*m->cp));
		m->a = ckpt__calloc(o->nattrs + 1, sizeof(*m->a));
		m->ap = ckpt__calloc(o->nattrs + 1, sizeof(*m->ap));
		m->s = ckpt__calloc(o->nslots + 1, sizeof(*m->s));
		m->sp = ckpt__calloc(o->nslots + 1, sizeof(*m->sp));
		if (!m->c || !m->cp || !m->a || !m->ap || !m->s || !m->sp) {
			rc = CKPT_ENOMEM;
			break;
		}
		for (size_t k = 0; k < o->nchildren; k++) {
			ckpt_tf__trackable_object_graph__trackable_object__object_reference__init(&m->c[k]);
			m->c[k].node_id = o->children[k].node_id;
			m->c[k].local_name = nz(o->children[k].local_name);
			m->cp[k] = &m->c[k];
		}
		for (size_t k = 0; k < o->nattrs; k++) {
			ckpt_tf__trackable_object_graph__trackable_object__serialized_tensor__init(&m->a[k]);
			m->a[k].name = nz(o->attrs[k].name);
			m->a[k].full_name = nz(o->attrs[k].full_name);
			m->a[k].checkpoint_key = nz(o->attrs[k].checkpoint_key);
			m->a[k].optional_restore = o->attrs[k].optional_restore ? 1 : 0;
			m->ap[k] = &m->a[k];
		}
		for (size_t k = 0; k < o->nslots; k++) {
			ckpt_tf__trackable_object_graph__trackable_object__slot_variable_reference__init(&m->s[k]);
			m->s[k].original_variable_node_id = o->slots[k].original_variable_node_id;
			m->s[k].slot_name = nz(o->slots[k].slot_name);
			m->s[k].slot_variable_node_id = o->slots[k].slot_variable_node_id;
			m->sp[k] = &m->s[k];
		}
		p->n_children = o->nchildren;
		p->children = m->cp;
		p->n_attributes = o->nattrs;
		p->attributes = m->ap;
		p->n_slot_variables = o->nslots;
		p->slot_variables = m->sp;
		if (o->registered_saver) {
			ckpt_tf__registered_saver__init(&m->saver);
			m->saver.name = o->registered_saver;
			p->registered_saver = &m->saver;
		}
		if (o->has_checkpoint_values >= 0) {
			ckpt_tf__bool_value__init(&m->hcv);
			m->hcv.value = o->has_checkpoint_values ? 1 : 0;
			p->has_checkpoint_values = &m->hcv;
		}
	}
	if (rc == CKPT_OK) {
		pg.n_nodes = g->nnodes;
		pg.nodes = np;
		size_t len = ckpt_tf__trackable_object_graph__get_packed_size(&pg);
		unsigned char *b = malloc(len ? len : 1);
		if (!b) {
			rc = ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory (%zu bytes)", len);
		} else {
			*n = ckpt_tf__trackable_object_graph__pack(&pg, b);
			*buf = b;
		}
	}
	for (size_t i = 0; mem && i < g->nnodes; i++) {
		ckpt__free(mem[i].c); ckpt__free(mem[i].cp);
		ckpt__free(mem[i].a); ckpt__free(mem[i].ap);
		ckpt__free(mem[i].s); ckpt__free(mem[i].sp);
	}
	ckpt__free(mem);
	ckpt__free(nodes);
	ckpt__free(np);
	return rc;
}

int ckpt_object_graph_copy(ckpt_object_graph **out, const ckpt_object_graph *g)
{
	*out = NULL;
	if (!g)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "NULL object graph");
	ckpt_object_graph *c = ckpt__calloc(1, sizeof(*c));
	if (!c)
		return CKPT_ENOMEM;
	if (g->nnodes && !(c->nodes = ckpt__calloc(g->nnodes, sizeof(*c->nodes)))) {
		ckpt__free(c);
		return CKPT_ENOMEM;
	}
	int rc = CKPT_OK;
	for (size_t i = 0; rc == CKPT_OK && i < g->nnodes; i++) {
		const ckpt_og_node *s = &g->nodes[i];
		ckpt_og_node *d = &c->nodes[i];
		c->nnodes++;
		d->has_checkpoint_values = s->has_checkpoint_values;
		if (s->registered_saver && !(d->registered_saver = ckpt__strdup(s->registered_saver)))
			rc = CKPT_ENOMEM;
		if (rc == CKPT_OK && s->nchildren && !(d->children = ckpt__calloc(s->nchildren, sizeof(*d->children))))
			rc = CKPT_ENOMEM;
		for (; rc == CKPT_OK && d->nchildren < s->nchildren; d->nchildren++) {
			d->children[d->nchildren].node_id = s->children[d->nchildren].node_id;
			if (!(d->children[d->nchildren].local_name = dup_str(s->children[d->nchildren].local_name)))
				rc = CKPT_ENOMEM;
		}
		if (rc == CKPT_OK && s->nattrs && !(d->attrs = ckpt__calloc(s->nattrs, sizeof(*d->attrs))))
			rc = CKPT_ENOMEM;
		for (; rc == CKPT_OK && d->nattrs < s->nattrs; d->nattrs++) {
			const ckpt_og_attr *a = &s->attrs[d->nattrs];
			ckpt_og_attr *b = &d->attrs[d->nattrs];
			b->optional_restore = a->optional_restore;
			if (!(b->name = dup_str(a->name)) || !(b->full_name = dup_str(a->full_name)) ||
			    !(b->checkpoint_key = dup_str(a->checkpoint_key)))
				rc = CKPT_ENOMEM;
		}
		if (rc == CKPT_OK && s->nslots && !(d->slots = ckpt__calloc(s->nslots, sizeof(*d->slots))))
			rc = CKPT_ENOMEM;
		for (; rc == CKPT_OK && d->nslots < s->nslots; d->nslots++) {
			d->slots[d->nslots] = s->slots[d->nslots];
			if (!(d->slots[d->nslots].slot_name = dup_str(s->slots[d->nslots].slot_name)))
				rc = CKPT_ENOMEM;
		}
	}
	if (rc < 0) {
		ckpt_object_graph_free(c);
		return rc;
	}
	*out = c;
	return CKPT_OK;
}

/* ---- key naming ---- */

static char *escape_malloc(const char *name)
{
	size_t n = 0;
	for (const char *p = name; *p; p++)
		n += (*p == '.' || *p == '/') ? 2 : 1;
	char *o = malloc(n + 1);
	if (!o)
		return NULL;
	char *q = o;
	for (const char *p = name; *p; p++) {
		if (*p == '.') { *q++ = '.'; *q++ = '.'; }
		else if (*p == '/') { *q++ = '.'; *q++ = 'S'; }
		else *q++ = *p;
	}
	*q = '\0';
	return o;
}

int ckpt_key_escape(const char *name, char **out)
{
	*out = NULL;
	if (!name)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "NULL name");
	*out = escape_malloc(name);
	return *out ? CKPT_OK : ckpt__fail(CKPT_ENOMEM, NULL, name, -1, "out of memory");
}

int ckpt_key_attribute(const char *object_path, const char *attr, char **out)
{
	*out = NULL;
	if (!object_path || !attr)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "NULL object path or attribute");
	char *e = escape_malloc(attr);
	if (!e)
		return ckpt__fail(CKPT_ENOMEM, NULL, attr, -1, "out of memory");
	size_t n = strlen(object_path) + strlen("/.ATTRIBUTES/") + strlen(e) + 1;
	char *o = malloc(n);
	if (o)
		snprintf(o, n, "%s/.ATTRIBUTES/%s", object_path, e);
	free(e);
	*out = o;
	return o ? CKPT_OK : ckpt__fail(CKPT_ENOMEM, NULL, attr, -1, "out of memory");
}

/*
 * BFS from the root following children in declaration order: the first
 * visit fixes a node's parent edge (parent node, child index).
 */
static int bfs_parents(const ckpt_object_graph *g, int *pnode, int *pchild)
{
	int *queue = ckpt__calloc(g->nnodes, sizeof(int));
	if (!queue)
		return CKPT_ENOMEM;
	for (size_t i = 0; i < g->nnodes; i++)
		pnode[i] = -2; /* unvisited */
	pnode[0] = -1;
	size_t head = 0, tail = 0;
	queue[tail++] = 0;
	while (head < tail) {
		int u = queue[head++];
		const ckpt_og_node *o = &g->nodes[u];
		for (size_t k = 0; k < o->nchildren; k++) {
			int v = o->children[k].node_id;
			if (pnode[v] != -2)
				continue;
			pnode[v] = u;
			pchild[v] = (int)k;
			queue[tail++] = v;
		}
	}
	ckpt__free(queue);
	return CKPT_OK;
}

/* Escaped path of a BFS-reachable node into a fresh malloc'ed string. */
static int tree_path(const ckpt_object_graph *g, const int *pnode, const int *pchild, int node, char **out)
{
	int chain[CKPT_MAX_OBJECT_GRAPH_DEPTH];
	int depth = 0;
	for (int v = node; v != 0; v = pnode[v]) {
		if (depth == CKPT_MAX_OBJECT_GRAPH_DEPTH)
			return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1,
				"node %d is deeper than %d levels", node, CKPT_MAX_OBJECT_GRAPH_DEPTH);
		chain[depth++] = v;
	}
	size_t len = 1;
	char **parts = ckpt__calloc((size_t)depth + 1, sizeof(char *));
	if (!parts)
		return CKPT_ENOMEM;
	int rc = CKPT_OK;
	for (int i = 0; i < depth && rc == CKPT_OK; i++) {
		int v = chain[depth - 1 - i];
		const char *name = g->nodes[pnode[v]].children[pchild[v]].local_name;
		parts[i] = escape_malloc(name ? name : "");
		if (!parts[i])
			rc = ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory");
		else
			len += strlen(parts[i]) + 1;
	}
	char *o = rc == CKPT_OK ? malloc(len) : NULL;
	if (rc == CKPT_OK && !o)
		rc = ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory");
	if (o) {
		size_t p = 0;
		for (int i = 0; i < depth; i++) {
			if (i)
				o[p++] = '/';
			size_t l = strlen(parts[i]);
			memcpy(o + p, parts[i], l);
			p += l;
		}
		o[p] = '\0';
	}
	for (int i = 0; i < depth; i++)
		free(parts[i]);
	ckpt__free(parts);
	*out = o;
	return rc;
}

int ckpt_object_graph_path(const ckpt_object_graph *g, int node, char **out)
{
	*out = NULL;
	CKPT_TRY(ckpt_object_graph_validate(g));
	if (node < 0 || (size_t)node >= g->nnodes)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "node %d out of range (%zu nodes)", node, g->nnodes);
	int *pnode = ckpt__calloc(g->nnodes, sizeof(int));
	int *pchild = ckpt__calloc(g->nnodes, sizeof(int));
	int rc = (pnode && pchild) ? bfs_parents(g, pnode, pchild) : CKPT_ENOMEM;
	if (rc == CKPT_OK && pnode[node] != -2) {
		rc = tree_path(g, pnode, pchild, node, out);
		goto done;
	}
	/* a slot variable: "<var path>/.OPTIMIZER_SLOT/<optimizer path>/<escaped slot>" */
	for (size_t o = 0; rc == CKPT_OK && o < g->nnodes; o++) {
		const ckpt_og_node *opt = &g->nodes[o];
		for (size_t k = 0; k < opt->nslots; k++) {
			const ckpt_og_slot *s = &opt->slots[k];
			if (s->slot_variable_node_id != node || pnode[s->original_variable_node_id] == -2 ||
			    pnode[o] == -2)
				continue;
			char *vp = NULL, *op = NULL, *sn = NULL;
			rc = tree_path(g, pnode, pchild, s->original_variable_node_id, &vp);
			if (rc == CKPT_OK)
				rc = tree_path(g, pnode, pchild, (int)o, &op);
			if (rc == CKPT_OK && !(sn = escape_malloc(s->slot_name ? s->slot_name : "")))
				rc = ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory");
			if (rc == CKPT_OK) {
				size_t len = strlen(vp) + strlen(op) + strlen(sn) + sizeof("/.OPTIMIZER_SLOT//");
				*out = malloc(len);
				if (*out)
					snprintf(*out, len, "%s/.OPTIMIZER_SLOT/%s/%s", vp, op, sn);
				else
					rc = ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory");
			}
			free(vp);
			free(op);
			free(sn);
			goto done;
		}
	}
	if (rc == CKPT_OK)
		rc = ckpt__fail(CKPT_ENOTFOUND, NULL, NULL, -1,
			"node %d is not reachable from the root nor a slot variable", node);
done:
	ckpt__free(pnode);
	ckpt__free(pchild);
	return rc;
}

/* The object graph (TrackableObjectGraph) and TensorFlow key naming. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "formats/format.h"
#include "test_support.h"

extern const ckpt_format ckpt_format_tf_bundle;
const ckpt_format *const og_test_backend = &ckpt_format_tf_bundle;

/* The raw graph bytes of a fixture, read through the reader. */
static void *graph_bytes(const char *rel, size_t *n)
{
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, ts_fixture(rel), NULL), CKPT_OK, "%s", rel);
	size_t k;
	cr_assert_eq(ckpt_reader_find(&k, r, CKPT_OBJECT_GRAPH_KEY), CKPT_OK);
	ckpt_tensor *t;
	cr_assert_eq(ckpt_reader_read(&t, r, k), CKPT_OK);
	const ckpt_bytes *b = t->data;
	void *out = malloc(b->len);
	memcpy(out, b->data, b->len);
	*n = (size_t)b->len;
	ckpt_tensor_free(t);
	ckpt_reader_free(r);
	return out;
}

static const char *const field_order_fixtures[] = {
	"tf/tensorflow__lso_ckpt_tf2.2",
	"tf/tensorflow__VarsAndArithmeticObjectGraph",
	"tf/tensorflow__OptimizerSlotVariableModule_snappy",
	"tf/tfjs__int64_multiply",
	"tf/tfx__keras_adam_savedmodel",
};

Test(object_graph, parse_serialize_byte_identical)
{
	for (size_t i = 0; i < sizeof(field_order_fixtures) / sizeof(field_order_fixtures[0]); i++) {
		size_t n, m;
		void *raw = graph_bytes(field_order_fixtures[i], &n);
		ckpt_object_graph *g;
		cr_assert_eq(ckpt_object_graph_parse(&g, raw, n), CKPT_OK);
		void *out;
		cr_assert_eq(ckpt_object_graph_serialize(&out, &m, g), CKPT_OK);
		cr_assert_eq(m, n, "%s: %zu vs %zu bytes", field_order_fixtures[i], m, n);
		cr_assert_eq(memcmp(out, raw, n), 0, "%s", field_order_fixtures[i]);
		ckpt_object_graph *c;
		cr_assert_eq(ckpt_object_graph_copy(&c, g), CKPT_OK);
		void *out2;
		cr_assert_eq(ckpt_object_graph_serialize(&out2, &m, c), CKPT_OK);
		cr_assert_eq(memcmp(out2, raw, n), 0);
		free(out2);
		ckpt_object_graph_free(c);
		free(out);
		free(raw);
		ckpt_object_graph_free(g);
	}
}

Test(object_graph, reads_fields_out_of_order)
{
	/* serving half_plus_two writes local_name before node_id */
	size_t n, m;
	void *raw = graph_bytes("tf/serving__half_plus_two_tf2_cpu_snappy/00000123", &n);
	ckpt_object_graph *g;
	cr_assert_eq(ckpt_object_graph_parse(&g, raw, n), CKPT_OK);
	int found = 0;
	for (size_t i = 0; i < g->nodes[0].nchildren; i++)
		if (strcmp(g->nodes[0].children[i].local_name, "a") == 0) {
			found = 1;
			int id = g->nodes[0].children[i].node_id;
			cr_assert_gt(id, 0);
			cr_assert_eq(g->nodes[id].nattrs, 1);
			cr_assert_str_eq(g->nodes[id].attrs[0].checkpoint_key, "a/.ATTRIBUTES/VARIABLE_VALUE");
			cr_assert_eq(g->nodes[id].has_checkpoint_values, 1);
		}
	cr_assert(found);
	void *out;
	cr_assert_eq(ckpt_object_graph_serialize(&out, &m, g), CKPT_OK);
	cr_assert_eq(m, n); /* same size, canonical field order */
	ckpt_object_graph *g2;
	cr_assert_eq(ckpt_object_graph_parse(&g2, out, m), CKPT_OK);
	cr_assert_eq(g2->nnodes, g->nnodes);
	free(out);
	free(raw);
	ckpt_object_graph_free(g);
	ckpt_object_graph_free(g2);
}

/* Every attribute's checkpoint key is derived from its node's path. */
static void keys_match_paths(const char *rel)
{
	size_t n;
	void *raw = graph_bytes(rel, &n);
	ckpt_object_graph *g;
	cr_assert_eq(ckpt_object_graph_parse(&g, raw, n), CKPT_OK);
	size_t checked = 0;
	for (size_t i = 0; i < g->nnodes; i++) {
		for (size_t a = 0; a < g->nodes[i].nattrs; a++) {
			char *p = NULL, *key = NULL;
			cr_assert_eq(ckpt_object_graph_path(&p, g, (int)i), CKPT_OK, "%s node %zu", rel, i);
			cr_assert_eq(ckpt_key_attribute(&key, p, g->nodes[i].attrs[a].name), CKPT_OK);
			const char *want = g->nodes[i].attrs[a].checkpoint_key;
			/* legacy saveables use the key as a prefix; the attribute key itself is what is stored */
			cr_assert_str_eq(key, want, "%s node %zu", rel, i);
			free(p);
			free(key);
			checked++;
		}
	}
	cr_assert_gt(checked, 0);
	ckpt_object_graph_free(g);
	free(raw);
}

Test(object_graph, paths_reproduce_checkpoint_keys)
{
	keys_match_paths("tf/tensorflow__lso_ckpt_tf2.2");
	keys_match_paths("tf/tfx__keras_adam_savedmodel");
	keys_match_paths("tf/tensorflow__OptimizerSlotVariableModule_snappy");
	keys_match_paths("tf/tensorflow__VarsAndArithmeticObjectGraph");
	keys_match_paths("tf/serving__half_plus_two_tf2_cpu_snappy/00000123");
}

Test(object_graph, slot_path_and_root)
{
	size_t n;
	void *raw = graph_bytes("tf/tensorflow__lso_ckpt_tf2.2", &n);
	ckpt_object_graph *g;
	cr_assert_eq(ckpt_object_graph_parse(&g, raw, n), CKPT_OK);
	char *p;
	cr_assert_eq(ckpt_object_graph_path(&p, g, 0), CKPT_OK);
	cr_assert_str_eq(p, "");
	free(p);
	cr_assert_eq(ckpt_object_graph_path(&p, g, 13), CKPT_OK);
	cr_assert_str_eq(p, "layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/base_optimizer/momentum");
	free(p);
	cr_assert_eq(ckpt_object_graph_path(&p, g, 1), CKPT_OK);
	cr_assert_str_eq(p, "layer_with_weights-0"); /* first BFS edge, not layer-0 */
	free(p);
	cr_assert_eq(ckpt_object_graph_path(&p, g, 99), CKPT_EINVAL);
	ckpt_object_graph_free(g);
	free(raw);
}

Test(object_graph, escape_and_attribute_keys)
{
	char *s;
	cr_assert_eq(ckpt_key_escape(&s, "a.b/c..d"), CKPT_OK);
	cr_assert_str_eq(s, "a..b.Sc....d");
	free(s);
	cr_assert_eq(ckpt_key_escape(&s, ""), CKPT_OK);
	cr_assert_str_eq(s, "");
	free(s);
	cr_assert_eq(ckpt_key_attribute(&s, "model/dense", "VARIABLE_VALUE"), CKPT_OK);
	cr_assert_str_eq(s, "model/dense/.ATTRIBUTES/VARIABLE_VALUE");
	free(s);
	cr_assert_eq(ckpt_key_attribute(&s, "", "x/y.z"), CKPT_OK);
	cr_assert_str_eq(s, "/.ATTRIBUTES/x.Sy..z");
	free(s);
}

Test(object_graph, validation_and_garbage)
{
	ckpt_og_child kids[1] = { { 5, "x" } };
	ckpt_og_node nodes[2];
	memset(nodes, 0, sizeof(nodes));
	nodes[0].nchildren = 1;
	nodes[0].children = kids;
	nodes[0].has_checkpoint_values = -1;
	nodes[1].has_checkpoint_values = -1;
	ckpt_object_graph g = { 2, nodes };
	cr_assert_eq(ckpt_object_graph_validate(&g), CKPT_EFORMAT);
	cr_assert(strstr(ckpt_error_last()->message, "refers to node 5"));
	kids[0].node_id = 1;
	cr_assert_eq(ckpt_object_graph_validate(&g), CKPT_OK);
	void *buf;
	size_t n;
	cr_assert_eq(ckpt_object_graph_serialize(&buf, &n, &g), CKPT_OK);
	/* nodes { children { node_id: 1 local_name: "x" } } nodes { } */
	static const unsigned char want[] = { 0x0a, 0x07, 0x0a, 0x05, 0x08, 0x01, 0x12, 0x01, 'x', 0x0a, 0x00 };
	cr_assert_eq(n, sizeof(want));
	cr_assert_eq(memcmp(buf, want, n), 0);
	free(buf);
	ckpt_object_graph *p;
	cr_assert_eq(ckpt_object_graph_parse(&p, "\x0a\x05\x0a\x03\x08\x07", 6), CKPT_EFORMAT); /* truncated */
	cr_assert_eq(ckpt_object_graph_parse(&p, "\x0a\x04\x0a\x02\x08\x07", 6), CKPT_EFORMAT); /* child 7 of 1 node */
	cr_assert_eq(ckpt_object_graph_parse(&p, "", 0), CKPT_EFORMAT); /* no root */
}

Test(object_graph, roles)
{
	static const struct { const char *key; ckpt_role role; } cases[] = {
		{ "layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE", CKPT_ROLE_MODEL },
		{ "layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE", CKPT_ROLE_OPTIMIZER },
		{ "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE", CKPT_ROLE_OPTIMIZER },
		{ "net/optimizer/learning_rate/.ATTRIBUTES/VARIABLE_VALUE", CKPT_ROLE_OPTIMIZER },
		{ "conv2d/kernel/Adam_1", CKPT_ROLE_OPTIMIZER },
		{ "beta1_power", CKPT_ROLE_OPTIMIZER },
		{ "training/Ftrl/linear/linear_model/x/weights/accumulator", CKPT_ROLE_OPTIMIZER },
		{ "dense/kernel/Momentum", CKPT_ROLE_OPTIMIZER },
		{ "optimizer_weights/Adam/iterations:0", CKPT_ROLE_OPTIMIZER },
		{ "keras_api/metrics/0/total/.ATTRIBUTES/VARIABLE_VALUE", CKPT_ROLE_METRIC },
		{ "model/metrics/auc/true_positives", CKPT_ROLE_METRIC },
		{ "save_counter/.ATTRIBUTES/VARIABLE_VALUE", CKPT_ROLE_OTHER },
		{ "global_step", CKPT_ROLE_OTHER },
		{ "_CHECKPOINTABLE_OBJECT_GRAPH", CKPT_ROLE_OTHER },
		{ "linear/linear_model/bias_weights", CKPT_ROLE_MODEL },
		{ "asymmetric_conv/kernel", CKPT_ROLE_MODEL },
		{ "dnn/hiddenlayer_0/kernel", CKPT_ROLE_MODEL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_assert_eq(ckpt__role_from_key(cases[i].key), cases[i].role, "%s -> %s", cases[i].key,
			ckpt_role_name(ckpt__role_from_key(cases[i].key)));
	cr_assert_str_eq(ckpt_role_name(CKPT_ROLE_METRIC), "metric");
}

/*
 * The classifier in libckpt/reader/role.c scans a key once; the reference below is
 * the rule table evaluated rule by rule, as it was. They must agree on keys
 * assembled from every pattern, its fragments and neighbours.
 */
enum ref_match { R_PREFIX, R_CONTAINS, R_SUFFIX, R_COMPONENT, R_COMPONENT_PREFIX };
typedef struct ref_rule {
	enum ref_match how;
	const char *pat;
	ckpt_role role;
} ref_rule;
static const ref_rule ref_rules[] = {
	/* optimizer state: TF2 slots and hyper-parameters, TF1 slot variables, Keras h5 */
	{ R_CONTAINS, ".OPTIMIZER_SLOT", CKPT_ROLE_OPTIMIZER },
	{ R_PREFIX, "optimizer/", CKPT_ROLE_OPTIMIZER },
	{ R_CONTAINS, "/optimizer/", CKPT_ROLE_OPTIMIZER },
	{ R_PREFIX, "optimizer_weights/", CKPT_ROLE_OPTIMIZER },
	{ R_CONTAINS, "/optimizer_weights/", CKPT_ROLE_OPTIMIZER },
	{ R_PREFIX, "training/", CKPT_ROLE_OPTIMIZER },
	{ R_COMPONENT, "beta1_power", CKPT_ROLE_OPTIMIZER },
	{ R_COMPONENT, "beta2_power", CKPT_ROLE_OPTIMIZER },
	{ R_SUFFIX, "/Adam", CKPT_ROLE_OPTIMIZER },
	{ R_SUFFIX, "/Adam_1", CKPT_ROLE_OPTIMIZER },
	{ R_SUFFIX, "/Momentum", CKPT_ROLE_OPTIMIZER },
	{ R_SUFFIX, "/Adagrad", CKPT_ROLE_OPTIMIZER },
	{ R_SUFFIX, "/RMSProp", CKPT_ROLE_OPTIMIZER },
	{ R_SUFFIX, "/RMSProp_1", CKPT_ROLE_OPTIMIZER },
	{ R_SUFFIX, "/Ftrl", CKPT_ROLE_OPTIMIZER },
	{ R_SUFFIX, "/Ftrl_1", CKPT_ROLE_OPTIMIZER },
	{ R_SUFFIX, "/accumulator", CKPT_ROLE_OPTIMIZER },
	{ R_SUFFIX, "/linear", CKPT_ROLE_OPTIMIZER },
	{ R_COMPONENT, "iter", CKPT_ROLE_OPTIMIZER },          /* OptimizerV2 hyper-parameters */
	{ R_COMPONENT, "beta_1", CKPT_ROLE_OPTIMIZER },
	{ R_COMPONENT, "beta_2", CKPT_ROLE_OPTIMIZER },
	{ R_COMPONENT, "learning_rate", CKPT_ROLE_OPTIMIZER },
	/* metrics */
	{ R_PREFIX, "keras_api/metrics/", CKPT_ROLE_METRIC },
	{ R_CONTAINS, "/metrics/", CKPT_ROLE_METRIC },
	{ R_COMPONENT_PREFIX, "metric", CKPT_ROLE_METRIC },
	/* bookkeeping */
	{ R_COMPONENT, "save_counter", CKPT_ROLE_OTHER },
	{ R_COMPONENT, "global_step", CKPT_ROLE_OTHER },
	{ R_COMPONENT, "_CHECKPOINTABLE_OBJECT_GRAPH", CKPT_ROLE_OTHER },
	{ R_COMPONENT, "step", CKPT_ROLE_OTHER },
	{ R_COMPONENT, "rng", CKPT_ROLE_OTHER },
};

/* Does some "/"-separated component of key[0:n] equal (or start with) pat? */
static int ref_component(const char *key, size_t n, const char *pat, int prefix_only)
{
	size_t pl = strlen(pat);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && key[j] != '/')
			j++;
		size_t cl = j - i;
		if (cl >= pl && memcmp(key + i, pat, pl) == 0 && (prefix_only || cl == pl))
			return 1;
		i = j + 1;
	}
	return 0;
}

static ckpt_role ref_role(const char *key)
{
	if (!key)
		return CKPT_ROLE_OTHER;
	size_t len = strlen(key);
	/* match object paths, not the "/.ATTRIBUTES/VARIABLE_VALUE" tail */
	const char *attr = strstr(key, "/.ATTRIBUTES/");
	size_t n = attr ? (size_t)(attr - key) : len;
	for (size_t i = 0; i < sizeof(ref_rules) / sizeof(ref_rules[0]); i++) {
		const ref_rule *r = &ref_rules[i];
		size_t pl = strlen(r->pat);
		int hit = 0;
		switch (r->how) {
		case R_PREFIX: hit = len >= pl && memcmp(key, r->pat, pl) == 0; break;
		case R_CONTAINS: hit = strstr(key, r->pat) != NULL; break;
		case R_SUFFIX: hit = n >= pl && memcmp(key + n - pl, r->pat, pl) == 0; break;
		case R_COMPONENT: hit = ref_component(key, n, r->pat, 0); break;
		case R_COMPONENT_PREFIX: hit = ref_component(key, n, r->pat, 1); break;
		}
		if (hit)
			return r->role;
	}
	return CKPT_ROLE_MODEL;
}


Test(object_graph, roles_match_the_rule_table_on_assembled_keys)
{
	static const char *const parts[] = {
		"model", "optimizer", "optimizer_weights", "training", "metrics", "metric", "metrics_x", "xmetric",
		".OPTIMIZER_SLOT", ".ATTRIBUTES", "VARIABLE_VALUE", "beta1_power", "beta2_power", "iter", "iterx",
		"beta_1", "beta_2", "learning_rate", "save_counter", "global_step", "_CHECKPOINTABLE_OBJECT_GRAPH",
		"step", "rng", "Adam", "Adam_1", "Momentum", "Adagrad", "RMSProp", "RMSProp_1", "Ftrl", "Ftrl_1",
		"accumulator", "linear", "keras_api", "kernel", "", "a.OPTIMIZER_SLOTb", "x/", "/",
	};
	const size_t np = sizeof(parts) / sizeof(parts[0]);
	unsigned seed = 12345;
	size_t counts[4] = { 0 };
	for (int t = 0; t < 200000; t++) {
		char key[512];
		size_t o = 0;
		int k = 1 + rand_r(&seed) % 6;
		for (int i = 0; i < k; i++) {
			const char *p = parts[(size_t)rand_r(&seed) % np];
			int sep = rand_r(&seed) % 8;
			o += (size_t)snprintf(key + o, sizeof key - o, "%s%s", i ? (sep ? "/" : "") : "", p);
		}
		key[o] = 0;
		ckpt_role want = ref_role(key), got = ckpt__role_from_key(key);
		cr_assert_eq(got, want, "'%s': %s, the rule table says %s", key, ckpt_role_name(got), ckpt_role_name(want));
		counts[want]++;
	}
	for (int r = 0; r < 4; r++)
		cr_assert_gt(counts[r], 100u, "role %d barely covered", r);
}

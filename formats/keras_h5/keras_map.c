/*
 * Keras layouts -> TensorFlow's object tree (keras.md §2.2, §2.3, §4.1-§4.3).
 *
 * The synthesized graph has the shape `model.save_weights()` gives in TF
 * format, with the model as the root:
 *   root -> layer_with_weights-K [-> cell] -> kernel | bias | gamma | ...
 *   root -> optimizer -> iter [, learning_rate]
 *   optimizer slot_variables: (variable node, "m" | "v" | "vhat" |
 *       "momentum" | "rms" | "mg", slot node)
 * giving keys like layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE and
 * layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE.
 * Every VARIABLE_VALUE attribute carries full_name = the Keras dataset path,
 * which is how a converter pairs entries with keys.
 *
 * Rules, by era (anything else is left out of the graph and noted):
 *  model, legacy:  weight "<layer>/<attr>[:0]" -> attr; "<layer>/<x>_cell/<attr>"
 *                  and recurrent layers (class from model_config, or a
 *                  recurrent_kernel among the weights) -> cell/<attr>.
 *  model, Keras 3: layers/<key>[/cell]/vars/N; the layer class comes from
 *                  config.json (replaying snake_case(class) + counter) or
 *                  from the key itself; the attribute names from the class
 *                  and the number of variables.
 *  optimizer:      by name when the name says which variable it belongs to
 *                  (OptimizerV2 "Adam/<var>/m", new optimizer "Adam/m/<var>",
 *                  Keras 3 legacy "adam/<var_path>_momentum"); by position
 *                  (Keras 2.0/2.1 "Variable_N", Keras 3 optimizer/vars/N) only
 *                  when counts and every shape agree with exactly one reading.
 */
#include <string.h>
#include <ctype.h>
#include <stdlib.h>
#include <jansson.h>
#include "formats/keras_h5/keras_h5.h"

/* ---------------------------------------------------------------- helpers */

int ckpt__keras_natcmp(const char *a, const char *b)
{
	while (*a && *b) {
		if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
			const char *ea = a, *eb = b;
			size_t la, lb;
			while (*a == '0' && isdigit((unsigned char)a[1]))
				a++;
			while (*b == '0' && isdigit((unsigned char)b[1]))
				b++;
			for (ea = a; isdigit((unsigned char)*ea); ea++)
				;
			for (eb = b; isdigit((unsigned char)*eb); eb++)
				;
			la = (size_t)(ea - a);
			lb = (size_t)(eb - b);
			if (la != lb)
				return la < lb ? -1 : 1;
			{
				int c = memcmp(a, b, la);
				if (c)
					return c;
			}
			a = ea;
			b = eb;
			continue;
		}
		if (*a != *b)
			return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
		a++;
		b++;
	}
	return *a ? 1 : *b ? -1 : 0;
}

char *ckpt__keras_snake_case(const char *s)
{
	/* keras.src.utils.naming.to_snake_case:
	 *   name = re.sub(r"\W+", "", name)
	 *   name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
	 *   name = re.sub("([a-z])([A-Z])", r"\1_\2", name).lower() */
	size_t n = strlen(s), i, j = 0, k;
	char *w = ckpt__malloc(n + 1), *x = ckpt__malloc(2 * n + 1), *y = ckpt__malloc(4 * n + 1);
	if (!w || !x || !y) {
		ckpt__free(w);
		ckpt__free(x);
		ckpt__free(y);
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (isalnum((unsigned char)s[i]) || s[i] == '_')
			w[j++] = s[i];
	w[j] = '\0';
	n = j;
	for (i = 0, j = 0; i < n;) {
		if (i + 2 < n + 0 && isupper((unsigned char)w[i + 1]) && islower((unsigned char)w[i + 2])) {
			x[j++] = w[i];
			x[j++] = '_';
			x[j++] = w[i + 1];
			for (k = i + 2; k < n && islower((unsigned char)w[k]); k++)
				x[j++] = w[k];
			i = k;
		} else {
			x[j++] = w[i++];
		}
	}
	x[j] = '\0';
	n = j;
	for (i = 0, j = 0; i < n;) {
		if (i + 1 < n && islower((unsigned char)x[i]) && isupper((unsigned char)x[i + 1])) {
			y[j++] = x[i];
			y[j++] = '_';
			y[j++] = x[i + 1];
			i += 2;
		} else {
			y[j++] = x[i++];
		}
	}
	y[j] = '\0';
	for (i = 0; i < j; i++)
		y[i] = (char)tolower((unsigned char)y[i]);
	ckpt__free(w);
	ckpt__free(x);
	return y;
}

typedef struct sbuf {
	char *s;
	size_t n, cap;
	int oom;
} sbuf;

static void sb_addf(sbuf *b, const char *fmt, ...) CKPT_PRINTF(2, 3);
static void sb_addf(sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int need;
	if (b->oom)
		return;
	va_start(ap, fmt);
	need = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (need < 0)
		return;
	if (b->n + (size_t)need + 2 > b->cap) {
		size_t nc = (b->cap + (size_t)need + 2) * 2;
		char *ns = ckpt__realloc(b->s, nc);
		if (!ns) {
			b->oom = 1;
			return;
		}
		b->s = ns;
		b->cap = nc;
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
	va_end(ap);
	b->n += (size_t)need;
}

/* A note line; the notes are capped so a hostile file cannot grow them without bound. */
#define NOTE_CAP (1u << 20)
#define NOTE(nb, ...) do { if ((nb)->n < NOTE_CAP) { sb_addf((nb), __VA_ARGS__); sb_addf((nb), "\n"); } } while (0)

/* TensorFlow's escape of one local name: "." -> "..", "/" -> ".S". */
static void sb_escape(sbuf *b, const char *name)
{
	for (; *name; name++) {
		if (*name == '.')
			sb_addf(b, "..");
		else if (*name == '/')
			sb_addf(b, ".S");
		else
			sb_addf(b, "%c", *name);
	}
}

/* --------------------------------------------------------- graph builder */

typedef struct gb {
	ckpt_object_graph *g;
	size_t cap;
	char **paths;      /* object path of each node */
	size_t npaths;
	int err;
} gb;

static int gb_new_node(gb *b, const char *path)
{
	ckpt_og_node *n;
	if (b->err)
		return -1;
	if (b->g->nnodes == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 16;
		ckpt_og_node *nn = ckpt__realloc(b->g->nodes, nc * sizeof(*nn));
		char **np = ckpt__realloc(b->paths, nc * sizeof(char *));
		if (nn)
			b->g->nodes = nn;
		if (np)
			b->paths = np;
		if (!nn || !np) {
			b->err = CKPT_ENOMEM;
			return -1;
		}
		b->cap = nc;
	}
	n = &b->g->nodes[b->g->nnodes];
	memset(n, 0, sizeof(*n));
	n->has_checkpoint_values = -1;
	b->paths[b->g->nnodes] = ckpt__strdup(path);
	if (!b->paths[b->g->nnodes]) {
		b->err = CKPT_ENOMEM;
		return -1;
	}
	b->npaths = b->g->nnodes + 1;
	return (int)b->g->nnodes++;
}

static int gb_child(gb *b, int parent, const char *name)
{
	ckpt_og_node *p;
	ckpt_og_child *nc;
	sbuf path = { 0 };
	size_t i;
	int id;
	if (b->err || parent < 0)
		return -1;
	p = &b->g->nodes[parent];
	for (i = 0; i < p->nchildren; i++)
		if (strcmp(p->children[i].local_name, name) == 0)
			return p->children[i].node_id;
	if (*b->paths[parent])
		sb_addf(&path, "%s/", b->paths[parent]);
	sb_escape(&path, name);
	if (path.oom) {
		b->err = CKPT_ENOMEM;
		return -1;
	}
	id = gb_new_node(b, path.s);
	ckpt__free(path.s);
	if (id < 0)
		return -1;
	p = &b->g->nodes[parent];
	nc = ckpt__realloc(p->children, (p->nchildren + 1) * sizeof(*nc));
	if (!nc) {
		b->err = CKPT_ENOMEM;
		return -1;
	}
	p->children = nc;
	nc[p->nchildren].node_id = id;
	nc[p->nchildren].local_name = ckpt__strdup(name);
	if (!nc[p->nchildren].local_name) {
		b->err = CKPT_ENOMEM;
		return -1;
	}
	p->nchildren++;
	return id;
}

static void gb_var(gb *b, int node, const char *full_name)
{
	ckpt_og_node *n;
	ckpt_og_attr *na;
	sbuf key = { 0 };
	if (b->err || node < 0)
		return;
	n = &b->g->nodes[node];
	sb_addf(&key, "%s/.ATTRIBUTES/%s", b->paths[node], CKPT_VARIABLE_VALUE_KEY);
	na = key.oom ? NULL : ckpt__realloc(n->attrs, (n->nattrs + 1) * sizeof(*na));
	if (!na) {
		ckpt__free(key.s);
		b->err = CKPT_ENOMEM;
		return;
	}
	n->attrs = na;
	na[n->nattrs].name = ckpt__strdup(CKPT_VARIABLE_VALUE_KEY);
	na[n->nattrs].full_name = ckpt__strdup(full_name);
	na[n->nattrs].checkpoint_key = key.s;
	na[n->nattrs].optional_restore = 0;
	n->nattrs++;
	n->has_checkpoint_values = 1;
	if (!na[n->nattrs - 1].name || !na[n->nattrs - 1].full_name)
		b->err = CKPT_ENOMEM;
}

/* A slot node for (variable node, slot) owned by optimizer node `opt`. */
static void gb_slot(gb *b, int opt, int var, const char *slot, const char *full_name)
{
	ckpt_og_node *o;
	ckpt_og_slot *ns;
	sbuf path = { 0 };
	int id;
	if (b->err || opt < 0 || var < 0)
		return;
	sb_addf(&path, "%s/.OPTIMIZER_SLOT/%s/", b->paths[var], b->paths[opt]);
	sb_escape(&path, slot);
	if (path.oom) {
		b->err = CKPT_ENOMEM;
		return;
	}
	id = gb_new_node(b, path.s);
	ckpt__free(path.s);
	if (id < 0)
		return;
	gb_var(b, id, full_name);
	o = &b->g->nodes[opt];
	ns = ckpt__realloc(o->slots, (o->nslots + 1) * sizeof(*ns));
	if (!ns) {
		b->err = CKPT_ENOMEM;
		return;
	}
	o->slots = ns;
	ns[o->nslots].original_variable_node_id = var;
	ns[o->nslots].slot_variable_node_id = id;
	ns[o->nslots].slot_name = ckpt__strdup(slot);
	if (!ns[o->nslots].slot_name)
		b->err = CKPT_ENOMEM;
	o->nslots++;
}

/* ------------------------------------------------------- mapping context */

/* Per-entry mapping result. */
typedef struct mapped {
	int node;          /* variable node, -1 = unmapped */
	int trainable;     /* model variables: 1 unless a known non-trainable statistic */
	char *vpath;       /* legacy: weight name without ":0" */
} mapped;

typedef struct mctx {
	const ckpt__keras_ctx *ctx;
	const ckpt__keras_entry *e;
	size_t n;
	mapped *m;
	gb b;
	sbuf notes;
	int opt;           /* optimizer node or -1 */
	int *morder;       /* mapped model entries in model (layer) order */
	size_t nmorder;
	json_t *model_config, *training_config, *config;
	json_t *layer_names;  /* Keras 3: {"layers/<key>": "<layer name>"} */
} mctx;

static char *strip_colon0(const char *w)
{
	size_t n = strlen(w);
	if (n > 2 && strcmp(w + n - 2, ":0") == 0)
		n -= 2;
	return ckpt__strndup(w, n);
}

static int is_stat_name(const char *attr)
{
	return strcmp(attr, "moving_mean") == 0 || strcmp(attr, "moving_variance") == 0;
}

static const char *cls_of_legacy_layer(mctx *c, const char *layer)
{
	json_t *layers, *l;
	size_t i;
	if (!c->model_config)
		return NULL;
	layers = json_object_get(c->model_config, "config");
	if (layers && json_is_object(layers))
		layers = json_object_get(layers, "layers");
	if (!layers || !json_is_array(layers))
		return NULL;
	json_array_foreach(layers, i, l) {
		json_t *cfg = json_object_get(l, "config");
		const char *nm = json_string_value(json_object_get(l, "name"));
		if (!nm && cfg)
			nm = json_string_value(json_object_get(cfg, "name"));
		if (nm && strcmp(nm, layer) == 0)
			return json_string_value(json_object_get(l, "class_name"));
	}
	return NULL;
}

static int is_rnn_class(const char *cls)
{
	static const char *const k[] = { "LSTM", "GRU", "SimpleRNN", "CuDNNLSTM", "CuDNNGRU", NULL };
	size_t i;
	for (i = 0; cls && k[i]; i++)
		if (strcmp(cls, k[i]) == 0)
			return 1;
	return 0;
}

/* ---------------------------------------------------------- legacy model */

static void map_legacy_model(mctx *c)
{
	size_t i = 0, j;
	int k = 0;
	while (i < c->n) {
		const char *layer;
		size_t end;
		int rnn = 0, any = 0, lnode = -1;
		const char *cls;
		if (c->e[i].kind != CKPT_KE_MODEL) {
			i++;
			continue;
		}
		layer = c->e[i].layer ? c->e[i].layer : "";
		for (end = i; end < c->n && c->e[end].kind == CKPT_KE_MODEL && c->e[end].layer &&
			strcmp(c->e[end].layer, layer) == 0; end++)
			;
		if (end == i)
			end = i + 1;
		cls = cls_of_legacy_layer(c, layer);
		rnn = is_rnn_class(cls);
		for (j = i; j < end; j++) {
			char *w = c->m[j].vpath;
			const char *slash = w ? strrchr(w, '/') : NULL;
			if (!cls && slash && strcmp(slash + 1, "recurrent_kernel") == 0 && strchr(w, '/') == slash)
				rnn = 2;
		}
		if (strcmp(layer, "top_level_model_weights") == 0) {
			for (j = i; j < end; j++)
				NOTE(&c->notes, "%s: unmapped (weights of the model itself have no layer_with_weights-K slot)", c->e[j].path);
			i = end;
			continue;
		}
		if (rnn == 2)
			NOTE(&c->notes, "layer '%s': treated as recurrent (cell/...) because it has a recurrent_kernel and no model_config names its class", layer);
		for (j = i; j < end; j++) {
			char *w = c->m[j].vpath, *p1, *p2;
			const char *attr = NULL, *sub = NULL;
			if (!w)
				continue;
			p1 = strchr(w, '/');
			p2 = p1 ? strchr(p1 + 1, '/') : NULL;
			if (p1 && !p2 && (size_t)(p1 - w) == strlen(layer) && strncmp(w, layer, (size_t)(p1 - w)) == 0) {
				attr = p1 + 1;
				sub = rnn ? "cell" : NULL;
			} else if (p1 && p2 && !strchr(p2 + 1, '/') && (size_t)(p1 - w) == strlen(layer) &&
				strncmp(w, layer, (size_t)(p1 - w)) == 0 && p2 - p1 > 5 && strncmp(p2 - 5, "_cell", 5) == 0) {
				attr = p2 + 1;
				sub = "cell";
			}
			if (!attr || !*attr) {
				NOTE(&c->notes, "%s: unmapped (weight name '%s' is not '<layer>/<attribute>': Keras 1 or a nested model/wrapper)",
					c->e[j].path, c->e[j].weight ? c->e[j].weight : "");
				continue;
			}
			if (!any) {
				char nm[64];
				snprintf(nm, sizeof(nm), "layer_with_weights-%d", k);
				lnode = gb_child(&c->b, 0, nm);
				any = 1;
			}
			c->m[j].node = gb_child(&c->b, sub ? gb_child(&c->b, lnode, sub) : lnode, attr);
			c->m[j].trainable = !is_stat_name(attr);
			c->morder[c->nmorder++] = (int)j;
			gb_var(&c->b, c->m[j].node, c->e[j].path);
		}
		/* A layer counts in layer_with_weights-K when it has weights, mapped or not. */
		if (end > i)
			k++;
		i = end;
	}
}

/* ------------------------------------------------------ Keras 3 model */

typedef struct k3layer {
	char *key;          /* layers/<key> */
	const char *cls;    /* class name (borrowed) or NULL */
	const char *cname;  /* layer name from config.json (borrowed) or NULL */
	int order;          /* position in model.layers, -1 unknown */
} k3layer;

static const struct { const char *snake, *cls; } known_classes[] = {
	{ "dense", "Dense" }, { "conv1d", "Conv1D" }, { "conv2d", "Conv2D" }, { "conv3d", "Conv3D" },
	{ "conv1d_transpose", "Conv1DTranspose" }, { "conv2d_transpose", "Conv2DTranspose" },
	{ "conv3d_transpose", "Conv3DTranspose" }, { "depthwise_conv1d", "DepthwiseConv1D" },
	{ "depthwise_conv2d", "DepthwiseConv2D" }, { "separable_conv1d", "SeparableConv1D" },
	{ "separable_conv2d", "SeparableConv2D" }, { "batch_normalization", "BatchNormalization" },
	{ "layer_normalization", "LayerNormalization" }, { "embedding", "Embedding" },
	{ "lstm", "LSTM" }, { "gru", "GRU" }, { "simple_rnn", "SimpleRNN" }, { NULL, NULL }
};

/* "dense_12" -> "dense" (Keras' occurrence counter removed). */
static size_t key_base_len(const char *key)
{
	size_t n = strlen(key), i = n;
	while (i > 0 && isdigit((unsigned char)key[i - 1]))
		i--;
	if (i < n && i > 0 && key[i - 1] == '_')
		return i - 1;
	return n;
}

static const char *class_from_key(const char *key)
{
	size_t bl = key_base_len(key), i;
	for (i = 0; known_classes[i].snake; i++)
		if (strlen(known_classes[i].snake) == bl && strncmp(known_classes[i].snake, key, bl) == 0)
			return known_classes[i].cls;
	return NULL;
}

/* Attribute names of a layer's own variables, by class and count; NULL when unknown or ambiguous. */
static const char *const *attrs_for(const char *cls, size_t count, int cell)
{
	static const char *const kb[] = { "kernel", "bias" };
	static const char *const dkb[] = { "depthwise_kernel", "bias" };
	static const char *const sep[] = { "depthwise_kernel", "pointwise_kernel", "bias" };
	static const char *const bn4[] = { "gamma", "beta", "moving_mean", "moving_variance" };
	static const char *const bn2[] = { "moving_mean", "moving_variance" };
	static const char *const ln2[] = { "gamma", "beta" };
	static const char *const emb[] = { "embeddings" };
	static const char *const rnn[] = { "kernel", "recurrent_kernel", "bias" };
	if (!cls)
		return NULL;
	if (cell)
		return is_rnn_class(cls) && (count == 2 || count == 3) ? rnn : NULL;
	if (is_rnn_class(cls))
		return NULL;
	if (strncmp(cls, "Conv", 4) == 0 || strcmp(cls, "Dense") == 0)
		return count == 1 || count == 2 ? kb : NULL;
	if (strncmp(cls, "DepthwiseConv", 13) == 0)
		return count == 1 || count == 2 ? dkb : NULL;
	if (strncmp(cls, "SeparableConv", 13) == 0)
		return count == 2 || count == 3 ? sep : NULL;
	if (strcmp(cls, "BatchNormalization") == 0)
		return count == 4 ? bn4 : count == 2 ? bn2 : NULL;
	if (strcmp(cls, "LayerNormalization") == 0)
		return count == 2 ? ln2 : NULL;
	if (strcmp(cls, "Embedding") == 0)
		return count == 1 ? emb : NULL;
	return NULL;
}

/* Replay Keras' container keys over config.json's layer list (§4.1). */
static int config_layer_order(mctx *c, k3layer *L, size_t nl)
{
	json_t *cfg, *layers, *l;
	size_t i, j, npos = 0;
	const char *top;
	char **seen = NULL;
	int *cnt = NULL, ok = 0;
	size_t nseen = 0;
	if (!c->config)
		return 0;
	top = json_string_value(json_object_get(c->config, "class_name"));
	cfg = json_object_get(c->config, "config");
	layers = cfg ? json_object_get(cfg, "layers") : NULL;
	if (!layers || !json_is_array(layers) || json_array_size(layers) > 1000000)
		return 0;
	seen = ckpt__calloc(json_array_size(layers) + 1, sizeof(char *));
	cnt = ckpt__calloc(json_array_size(layers) + 1, sizeof(int));
	if (!seen || !cnt)
		goto out;
	json_array_foreach(layers, i, l) {
		const char *cls = json_string_value(json_object_get(l, "class_name"));
		char *snake, *key;
		if (!cls)
			goto out;
		/* Sequential.layers excludes its InputLayer; Functional.layers includes it. */
		if (top && strcmp(top, "Sequential") == 0 && strcmp(cls, "InputLayer") == 0)
			continue;
		snake = ckpt__keras_snake_case(cls);
		if (!snake)
			goto out;
		for (j = 0; j < nseen && strcmp(seen[j], snake) != 0; j++)
			;
		if (j == nseen) {
			seen[nseen++] = snake;
			key = ckpt__strdup(snake);
		} else {
			ckpt__free(snake);
			key = ckpt__asprintf("%s_%d", seen[j], ++cnt[j]);
		}
		if (!key)
			goto out;
		for (j = 0; j < nl; j++)
			if (strcmp(L[j].key, key) == 0) {
				L[j].order = (int)npos;
				L[j].cls = cls;
				L[j].cname = json_string_value(json_object_get(json_object_get(l, "config"), "name"));
			}
		npos++;
		ckpt__free(key);
	}
	ok = 1;
	for (j = 0; j < nl; j++)
		if (L[j].order < 0)
			ok = 0;
out:
	for (j = 0; j < nseen; j++)
		ckpt__free(seen[j]);
	ckpt__free(seen);
	ckpt__free(cnt);
	return ok;
}

static int k3_cmp_order(const void *a, const void *b)
{
	const k3layer *x = a, *y = b;
	if (x->order != y->order)
		return x->order < y->order ? -1 : 1;
	return ckpt__keras_natcmp(x->key, y->key);
}

/* Split "layers/<key>/<sub...>/vars/N" into key and sub ("" when none); 0 when not that shape. */
static int k3_split(const char *path, char **key, char **sub)
{
	const char *p = path + 7, *s, *v;
	*key = *sub = NULL;
	if (strncmp(path, "layers/", 7) != 0)
		return 0;
	s = strchr(p, '/');
	v = strstr(path, "/vars/");
	if (!s || !v)
		return 0;
	while (strstr(v + 1, "/vars/"))
		v = strstr(v + 1, "/vars/");
	*key = ckpt__strndup(p, (size_t)(s - p));
	*sub = s < v ? ckpt__strndup(s + 1, (size_t)(v - s - 1)) : ckpt__strdup("");
	return *key && *sub ? 1 : -1;
}

/* Layer keys sorted bytewise, for lookups (files with thousands of layers: no O(layers x entries) scans). */
typedef struct k3key {
	const char *key;
	size_t j;           /* index in L */
} k3key;

static int k3_cmp_key(const void *a, const void *b)
{
	return strcmp(((const k3key *)a)->key, ((const k3key *)b)->key);
}

static int k3_cmp_layer_key(const void *a, const void *b)
{
	return strcmp(((const k3layer *)a)->key, ((const k3layer *)b)->key);
}

/* Index in L of layer `key`, or (size_t)-1. */
static size_t k3_find(const k3key *idx, size_t nl, const char *key)
{
	k3key want = { key, 0 };
	const k3key *f = nl ? bsearch(&want, idx, nl, sizeof(*idx), k3_cmp_key) : NULL;
	return f ? f->j : (size_t)-1;
}

/* The real layer names: the vars group's `name` attribute (Keras >= 3.6), else config.json. */
static void k3_layer_names(mctx *c, const k3layer *L, size_t nl, const k3key *idx)
{
	const char **vn;
	size_t i, j;
	if (!c->layer_names && !(c->layer_names = json_object()))
		return;
	if (!(vn = ckpt__calloc(nl + 1, sizeof(*vn)))) {
		c->b.err = CKPT_ENOMEM;
		return;
	}
	/* the first entry (in order) of group "layers/<key>" itself that has a name */
	for (i = 0; i < c->n; i++)
		if (c->e[i].vname && c->e[i].layer && strncmp(c->e[i].layer, "layers/", 7) == 0 &&
			(j = k3_find(idx, nl, c->e[i].layer + 7)) != (size_t)-1 && !vn[j])
			vn[j] = c->e[i].vname;
	for (j = 0; j < nl; j++) {
		const char *nm = vn[j] ? vn[j] : L[j].cname;
		char key[512];
		snprintf(key, sizeof(key), "layers/%s", L[j].key);
		if (nm)
			json_object_set_new(c->layer_names, key, json_string(nm));
	}
	ckpt__free(vn);
}

/*
 * The model's layers: per entry its layer key and sub-path, split once
 * (ekey, esub; NULL for an entry that names no layer), and the distinct
 * layer keys into L (borrowed from ekey, order -1). Returns their count.
 */
static size_t k3_collect_layers(mctx *c, char **ekey, char **esub, k3layer *L)
{
	size_t nl = 0, i, q;
	for (i = 0; i < c->n; i++) {
		if (c->e[i].kind != CKPT_KE_MODEL)
			continue;
		if (k3_split(c->e[i].path, &ekey[i], &esub[i]) <= 0) {
			NOTE(&c->notes, "%s: unmapped (the model's own variables have no layer_with_weights-K slot)", c->e[i].path);
			ckpt__free(ekey[i]);
			ckpt__free(esub[i]);
			ekey[i] = esub[i] = NULL;
			continue;
		}
		/* entries of one layer are consecutive (the walk visits a layer's groups together) */
		if (nl && strcmp(L[nl - 1].key, ekey[i]) == 0)
			continue;
		L[nl].key = ekey[i]; /* borrowed from ekey */
		L[nl].order = -1;
		nl++;
	}
	/* any other repeats: by sorting (positions do not matter: the order comes from k3_cmp_order below) */
	qsort(L, nl, sizeof(*L), k3_cmp_layer_key);
	for (i = 0, q = 0; i < nl; i++)
		if (q == 0 || strcmp(L[q - 1].key, L[i].key) != 0)
			L[q++] = L[i];
	return q;
}

/*
 * Without config.json's layer list only one order is certain: all keys
 * share one class. 1 when they do (each layer then gets order 0 and the
 * class its key names); 0 when not, every layer entry noted as unmapped.
 */
static int k3_order_from_keys(mctx *c, char **ekey, k3layer *L, size_t nl)
{
	int same = 1;
	for (size_t j = 1; j < nl; j++)
		if (key_base_len(L[j].key) != key_base_len(L[0].key) ||
			strncmp(L[j].key, L[0].key, key_base_len(L[0].key)) != 0)
			same = 0;
	if (!same) {
		for (size_t i = 0; i < c->n; i++)
			if (ekey[i])
				NOTE(&c->notes, "%s: unmapped (layer order unknown: no config.json layer list and layer keys of several classes)",
					c->e[i].path);
		return 0;
	}
	for (size_t j = 0; j < nl; j++) {
		L[j].order = 0;
		L[j].cls = class_from_key(L[j].key);
	}
	return 1;
}

/* Map the entries order[q0 .. q1) of layer L (sub-paths esub) as children of the root's slot `nm`. */
static void k3_map_layer(mctx *c, const k3layer *L, const char *nm, const size_t *order, size_t q0, size_t q1,
	char **esub)
{
	int lnode = -1;
	const char *cls = L->cls ? L->cls : class_from_key(L->key);
	for (size_t q = q0; q < q1; q++) {
		size_t cnt = 0, x, i = order[q];
		const char *const *attrs;
		int cell;
		if (c->m[i].node >= 0 || c->m[i].trainable < 0)
			continue;
		/* entries of one vars group are consecutive and in index order */
		for (x = i; x < c->n && c->e[x].layer && c->e[i].layer && strcmp(c->e[x].layer, c->e[i].layer) == 0; x++)
			cnt++;
		cell = strcmp(esub[i], "cell") == 0;
		attrs = (*esub[i] == '\0' || cell) ? attrs_for(cls, cnt, cell) : NULL;
		for (x = i; x < i + cnt; x++) {
			if (!attrs) {
				NOTE(&c->notes, "%s: unmapped (%s%s%s with %zu variable(s): attribute names unknown)", c->e[x].path,
					cls ? "class " : "unknown class of 'layers/", cls ? cls : L->key, cls ? "" : "'", cnt);
				c->m[x].trainable = -1;
				continue;
			}
			if (lnode < 0)
				lnode = gb_child(&c->b, 0, nm);
			c->m[x].node = gb_child(&c->b, cell ? gb_child(&c->b, lnode, "cell") : lnode, attrs[c->e[x].index]);
			c->m[x].trainable = !is_stat_name(attrs[c->e[x].index]);
			c->morder[c->nmorder++] = (int)x;
			gb_var(&c->b, c->m[x].node, c->e[x].path);
		}
	}
}

static void map_k3_model(mctx *c)
{
	k3layer *L = NULL;
	k3key *idx = NULL;
	char **ekey = NULL, **esub = NULL; /* per entry: layer key and sub-path, split once */
	size_t *first = NULL, *order = NULL, *lj = NULL; /* entries of each layer, in entry order */
	size_t nl = 0, i, j;
	int k = 0;
	L = ckpt__calloc(c->n + 1, sizeof(*L));
	ekey = ckpt__calloc(c->n + 1, sizeof(char *));
	esub = ckpt__calloc(c->n + 1, sizeof(char *));
	idx = ckpt__calloc(c->n + 1, sizeof(*idx));
	lj = ckpt__calloc(c->n + 1, sizeof(size_t));
	order = ckpt__calloc(c->n + 1, sizeof(size_t));
	first = ckpt__calloc(c->n + 2, sizeof(size_t));
	if (!L || !ekey || !esub || !idx || !lj || !order || !first) {
		c->b.err = CKPT_ENOMEM;
		goto out;
	}
	nl = k3_collect_layers(c, ekey, esub, L);
	if (!config_layer_order(c, L, nl) && !k3_order_from_keys(c, ekey, L, nl))
		goto out;
	qsort(L, nl, sizeof(*L), k3_cmp_order);
	for (j = 0; j < nl; j++) {
		idx[j].key = L[j].key;
		idx[j].j = j;
	}
	qsort(idx, nl, sizeof(*idx), k3_cmp_key);
	k3_layer_names(c, L, nl, idx);
	/* entries by layer (counting sort: entry order kept within a layer) */
	for (i = 0; i < c->n; i++) {
		lj[i] = ekey[i] ? k3_find(idx, nl, ekey[i]) : (size_t)-1;
		if (lj[i] != (size_t)-1)
			first[lj[i] + 1]++;
	}
	for (j = 1; j <= nl; j++)
		first[j] += first[j - 1];
	for (i = 0; i < c->n; i++)
		if (lj[i] != (size_t)-1)
			order[first[lj[i]]++] = i;
	for (j = nl; j > 0; j--)
		first[j] = first[j - 1];
	first[0] = 0;
	for (j = 0; j < nl; j++) {
		char nm[64];
		snprintf(nm, sizeof(nm), "layer_with_weights-%d", k++);
		k3_map_layer(c, &L[j], nm, order, first[j], first[j + 1], esub);
	}
out:
	for (i = 0; ekey && i < c->n; i++) {
		ckpt__free(ekey[i]);
		ckpt__free(esub[i]);
	}
	ckpt__free(ekey);
	ckpt__free(esub);
	ckpt__free(idx);
	ckpt__free(lj);
	ckpt__free(order);
	ckpt__free(first);
	ckpt__free(L);
}

/* ------------------------------------------------------------ optimizer */

/* TF OptimizerV2 slot name for a Keras slot name under optimizer class `cls` (lowercase). */
static const char *tf_slot(const char *cls, const char *slot)
{
	if (strcmp(slot, "momentum") == 0)
		return (cls && (strcmp(cls, "adam") == 0 || strcmp(cls, "adamw") == 0 || strcmp(cls, "nadam") == 0 ||
			strcmp(cls, "adamax") == 0)) ? "m" : "momentum";
	if (strcmp(slot, "velocity") == 0)
		return (cls && strcmp(cls, "rmsprop") == 0) ? "rms" : "v";
	if (strcmp(slot, "velocity_hat") == 0)
		return "vhat";
	if (strcmp(slot, "average_gradient") == 0)
		return "mg";
	if (strcmp(slot, "m") == 0 && cls && strcmp(cls, "sgd") == 0)
		return "momentum";
	return slot;
}

static const char *const known_slots[] = { "m", "v", "vhat", "momentum", "velocity", "velocity_hat", "rms", "mg",
	"average_gradient", "accumulator", "delta_accumulator", NULL };

static int is_slot_name(const char *s, size_t n)
{
	size_t i;
	for (i = 0; known_slots[i]; i++)
		if (strlen(known_slots[i]) == n && strncmp(known_slots[i], s, n) == 0)
			return 1;
	return 0;
}

/* Optimizer class from the configs, lowercased into `out` ("" when unknown). */
static void optimizer_class(mctx *c, char *out, size_t cap)
{
	const char *cls = NULL;
	size_t i;
	json_t *o;
	if (c->training_config) {
		o = json_object_get(c->training_config, "optimizer_config");
		cls = json_string_value(json_object_get(o, "class_name"));
	}
	if (!cls && c->config) {
		o = json_object_get(json_object_get(c->config, "compile_config"), "optimizer");
		cls = json_string_value(json_object_get(o, "class_name"));
	}
	if (!cls) {
		for (i = 0; i < c->n; i++)
			if (c->e[i].kind == CKPT_KE_OPTIMIZER && c->e[i].vname) {
				cls = c->e[i].vname;
				break;
			}
	}
	out[0] = '\0';
	if (!cls)
		return;
	if (strncmp(cls, "Custom>", 7) == 0)
		cls += 7;
	for (i = 0; cls[i] && i + 1 < cap; i++)
		out[i] = (char)tolower((unsigned char)cls[i]);
	out[i] = '\0';
}

static json_t *optimizer_config(mctx *c)
{
	json_t *o = NULL;
	if (c->config)
		o = json_object_get(json_object_get(c->config, "compile_config"), "optimizer");
	if (!o && c->training_config)
		o = json_object_get(c->training_config, "optimizer_config");
	return o ? json_object_get(o, "config") : NULL;
}

/* Model entry whose legacy weight name (no ":0") equals [s, s+n); with `underscore`, '/' in names reads as '_'. -1 none, -2 several. */
static int find_var(mctx *c, const char *s, size_t n, int underscore)
{
	size_t i;
	int found = -1;
	for (i = 0; i < c->n; i++) {
		const char *v = c->m[i].vpath;
		size_t k;
		if (c->e[i].kind != CKPT_KE_MODEL || c->m[i].node < 0 || !v || strlen(v) != n)
			continue;
		for (k = 0; k < n; k++) {
			char a = v[k];
			if (underscore && a == '/')
				a = '_';
			if (a != s[k])
				break;
		}
		if (k == n) {
			if (found >= 0)
				return -2;
			found = (int)i;
		}
	}
	return found;
}

static void map_opt_entry(mctx *c, size_t i, int var, const char *slot, const char *cls)
{
	if (var < 0) {
		NOTE(&c->notes, "%s: unmapped (%s)", c->e[i].path, var == -2 ? "several variables match its name" : "no mapped variable matches its name");
		return;
	}
	gb_slot(&c->b, c->opt, c->m[var].node, tf_slot(cls, slot), c->e[i].path);
	c->m[i].node = 1;
}

static int is_positional_name(const char *w)
{
	const char *b = strrchr(w, '/');
	b = b ? b + 1 : w;
	if (strncmp(b, "Variable", 8) == 0) {
		b += 8;
		if (*b == '_')
			b++;
	} else if (strncmp(b, "param_", 6) == 0) {
		b += 6;
	} else {
		return 0;
	}
	for (; *b; b++)
		if (!isdigit((unsigned char)*b))
			return 0;
	return 1;
}

/* Trainable mapped model variables in model order. */
static size_t trainable_list(mctx *c, int *out)
{
	size_t k, n = 0;
	for (k = 0; k < c->nmorder; k++) {
		int i = c->morder[k];
		if (c->m[i].trainable == 1)
			out[n++] = i;
	}
	return n;
}

static int all_model_mapped(mctx *c)
{
	size_t i;
	for (i = 0; i < c->n; i++)
		if (c->e[i].kind == CKPT_KE_MODEL && c->m[i].node < 0)
			return 0;
	return 1;
}

/* Index into a positional list of slot `b` for trainable variable `t`: blocks, or pairs then blocks. */
static size_t slot_pos(size_t b, size_t t, size_t nt, int interleaved)
{
	if (!interleaved)
		return b * nt + t;
	return b < 2 ? t * 2 + b : 2 * nt + (b - 2) * nt + t;
}

/*
 * Positional slots: entries pos[0..np) are `nblocks` slots per trainable
 * variable T[t] (blocks, or pairs when `interleaved`), named names[b].
 * Maps only when every shape agrees (`dry` = only check); returns 1 when it fits.
 */
static int try_positional(mctx *c, const int *pos, size_t np, const int *T, size_t nt, const char *const *names,
	size_t nblocks, int interleaved, int dry)
{
	size_t b, t;
	if (nt == 0 || np != nblocks * nt)
		return 0;
	for (b = 0; b < nblocks; b++)
		for (t = 0; t < nt; t++)
			if (!ckpt_shape_equal(&c->e[pos[slot_pos(b, t, nt, interleaved)]].shape, &c->e[T[t]].shape))
				return 0;
	if (dry)
		return 1;
	for (b = 0; b < nblocks; b++)
		for (t = 0; t < nt; t++) {
			size_t pi = (size_t)pos[slot_pos(b, t, nt, interleaved)];
			gb_slot(&c->b, c->opt, c->m[T[t]].node, names[b], c->e[pi].path);
			c->m[pi].node = 1;
		}
	return 1;
}

static void note_unmapped_list(mctx *c, const int *pos, size_t np, const char *why)
{
	size_t i;
	for (i = 0; i < np; i++)
		NOTE(&c->notes, "%s: unmapped (%s)", c->e[pos[i]].path, why);
}

static void map_legacy_optimizer(mctx *c, const char *cls)
{
	size_t i, np = 0, nt;
	int *pos = ckpt__calloc(c->n + 1, sizeof(int)), *T = ckpt__calloc(c->n + 1, sizeof(int));
	if (!pos || !T) {
		c->b.err = CKPT_ENOMEM;
		goto out;
	}
	for (i = 0; i < c->n; i++) {
		char *w;
		const char *last, *p, *q;
		size_t nw;
		if (c->e[i].kind != CKPT_KE_OPTIMIZER)
			continue;
		w = c->m[i].vpath;
		if (!w)
			continue;
		nw = strlen(w);
		last = strrchr(w, '/');
		last = last ? last + 1 : w;
		if (strcmp(last, "iter") == 0 || strcmp(last, "iterations") == 0 || strcmp(last, "iteration") == 0) {
			int node = gb_child(&c->b, c->opt, "iter");
			gb_var(&c->b, node, c->e[i].path);
			c->m[i].node = node;
			continue;
		}
		if (strcmp(last, "learning_rate") == 0 || strcmp(last, "lr") == 0) {
			int node = gb_child(&c->b, c->opt, "learning_rate");
			gb_var(&c->b, node, c->e[i].path);
			c->m[i].node = node;
			continue;
		}
		if (is_positional_name(w)) {
			pos[np++] = (int)i;
			continue;
		}
		p = w;
		if (strncmp(p, "training/", 9) == 0)
			p += 9;
		q = strchr(p, '/');
		if (!q) {
			NOTE(&c->notes, "%s: unmapped (optimizer weight name '%s' follows no known pattern)", c->e[i].path, w);
			continue;
		}
		q++; /* after "<Optimizer>/" */
		{
			const char *s2 = strchr(q, '/');
			int v1 = -1, v2 = -1, v3 = -1;
			/* OptimizerV2: <var path>/<slot> */
			if (last > q && is_slot_name(last, strlen(last)))
				v1 = find_var(c, q, (size_t)(last - 1 - q), 0);
			/* new optimizer: <slot>/<var path> */
			if (s2 && is_slot_name(q, (size_t)(s2 - q)))
				v2 = find_var(c, s2 + 1, (size_t)(w + nw - s2 - 1), 0);
			if (v1 >= 0 && v2 < 0) {
				map_opt_entry(c, i, v1, last, cls);
				continue;
			}
			if (v2 >= 0 && v1 < 0) {
				char slot[32];
				size_t sl = (size_t)(s2 - q) < sizeof(slot) - 1 ? (size_t)(s2 - q) : sizeof(slot) - 1;
				memcpy(slot, q, sl);
				slot[sl] = '\0';
				map_opt_entry(c, i, v2, slot, cls);
				continue;
			}
			/* Keras 3 legacy: <var path with '/' as '_'>_<slot> */
			if (!s2) {
				size_t k;
				static const char *const sfx[] = { "velocity_hat", "momentum", "velocity", "average_gradient", NULL };
				for (k = 0; sfx[k]; k++) {
					size_t sl = strlen(sfx[k]), ql = strlen(q);
					if (ql > sl + 1 && q[ql - sl - 1] == '_' && strcmp(q + ql - sl, sfx[k]) == 0) {
						v3 = find_var(c, q, ql - sl - 1, 1);
						if (v3 != -1) {
							map_opt_entry(c, i, v3, sfx[k], cls);
							break;
						}
					}
				}
				if (sfx[k])
					continue;
			}
			NOTE(&c->notes, "%s: unmapped (no variable matches optimizer weight name '%s')", c->e[i].path, w);
		}
	}
	if (np) {
		static const char *const adam[] = { "m", "v", "vhat" };
		static const char *const rms[] = { "rms" };
		static const char *const sgd[] = { "momentum" };
		static const char *const adagrad[] = { "accumulator" };
		static const char *const adadelta[] = { "accumulator", "delta_accumulator" };
		const char *const *names = NULL;
		size_t maxb = 0, b;
		nt = trainable_list(c, T);
		if (!all_model_mapped(c)) {
			note_unmapped_list(c, pos, np, "positional optimizer weights, but some model weights are unmapped");
			goto out;
		}
		if (strcmp(cls, "adam") == 0 || strcmp(cls, "nadam") == 0 || strcmp(cls, "adamax") == 0) {
			names = adam;
			maxb = 3;
		} else if (strcmp(cls, "rmsprop") == 0) {
			names = rms;
			maxb = 1;
		} else if (strcmp(cls, "sgd") == 0) {
			names = sgd;
			maxb = 1;
		} else if (strcmp(cls, "adagrad") == 0) {
			names = adagrad;
			maxb = 1;
		} else if (strcmp(cls, "adadelta") == 0) {
			names = adadelta;
			maxb = 2;
		}
		if (!names || nt == 0 || np % nt != 0 || np / nt > maxb) {
			note_unmapped_list(c, pos, np, "positional optimizer weights whose count does not fit the optimizer class and trainable variables");
			goto out;
		}
		/* Map block by block; Keras 2.1's vhat placeholders ((1,) each) fail the shape check and stay unmapped. */
		for (b = 0; b < np / nt; b++) {
			if (!try_positional(c, pos + b * nt, nt, T, nt, names + b, 1, 0, 0))
				note_unmapped_list(c, pos + b * nt, nt, "positional block whose shapes differ from the trainable variables");
		}
	}
out:
	ckpt__free(pos);
	ckpt__free(T);
}

static void map_k3_optimizer(mctx *c, const char *cls)
{
	int *pos = ckpt__calloc(c->n + 1, sizeof(int)), *T = ckpt__calloc(c->n + 1, sizeof(int));
	size_t i, np = 0, nt, nint = 0;
	json_t *oc = optimizer_config(c);
	int lr_known = -1, fits = 0, lr_pick = 0;
	const char *const *names = NULL;
	size_t nb_pick = 0;
	int inter_pick = 0;
	if (!pos || !T) {
		c->b.err = CKPT_ENOMEM;
		goto out;
	}
	for (i = 0; i < c->n; i++)
		if (c->e[i].kind == CKPT_KE_OPTIMIZER && strncmp(c->e[i].path, "optimizer/vars/", 15) == 0)
			pos[np++] = (int)i;
	for (i = 0; i < c->n; i++)
		if (c->e[i].kind == CKPT_KE_OPTIMIZER && strncmp(c->e[i].path, "optimizer/vars/", 15) != 0)
			NOTE(&c->notes, "%s: unmapped (optimizer state outside optimizer/vars)", c->e[i].path);
	if (np == 0)
		goto out;
	/* vars/0 is the iteration counter (int64 scalar) in every Keras 3 optimizer. */
	if (c->e[pos[0]].shape.rank == 0 && (c->e[pos[0]].dtype == CKPT_DT_INT64 || c->e[pos[0]].dtype == CKPT_DT_INT32)) {
		int node = gb_child(&c->b, c->opt, "iter");
		gb_var(&c->b, node, c->e[pos[0]].path);
		c->m[pos[0]].node = node;
		nint = 1;
	} else {
		note_unmapped_list(c, pos, np, "optimizer/vars/0 is not an integer scalar iteration counter");
		goto out;
	}
	if (oc) {
		json_t *lr = json_object_get(oc, "learning_rate");
		if (lr)
			lr_known = json_is_number(lr) ? 1 : 0;
	}
	nt = trainable_list(c, T);
	if (!all_model_mapped(c)) {
		note_unmapped_list(c, pos + 1, np - 1, "positional optimizer variables, but some model variables are unmapped");
		goto out;
	}
	{
		static const char *const adam2[] = { "m", "v", "vhat" };
		static const char *const sgd1[] = { "momentum" };
		static const char *const rms1[] = { "rms", "momentum", "mg" };
		static const char *const rms_c[] = { "rms", "mg" };
		int lr, amsgrad = -1, centered = -1;
		double mom = -1;
		if (oc) {
			json_t *x = json_object_get(oc, "amsgrad");
			if (x)
				amsgrad = json_is_true(x);
			x = json_object_get(oc, "centered");
			if (x)
				centered = json_is_true(x);
			x = json_object_get(oc, "momentum");
			if (x && json_is_number(x))
				mom = json_number_value(x);
		}
		/* Try every reading; map only when exactly one fits counts and shapes. */
		for (lr = 0; lr <= 1; lr++) {
			size_t rest, base = 1 + (size_t)lr;
			if (lr_known >= 0 && lr != lr_known)
				continue;
			if (np < base)
				continue;
			if (lr && !(c->e[pos[1]].shape.rank == 0 && c->e[pos[1]].dtype != CKPT_DT_INT64))
				continue;
			rest = np - base;
			if (strcmp(cls, "adam") == 0 || strcmp(cls, "adamw") == 0) {
				size_t nb;
				for (nb = 2; nb <= 3; nb++) {
					if ((amsgrad == 1 && nb != 3) || (amsgrad == 0 && nb != 2))
						continue;
					if (try_positional(c, pos + base, rest, T, nt, adam2, nb, 1, 1)) {
						fits++;
						lr_pick = lr;
						names = adam2;
						nb_pick = nb;
						inter_pick = 1;
					}
				}
			} else if (strcmp(cls, "sgd") == 0) {
				if (rest == 0 && mom <= 0) {
					fits++;
					lr_pick = lr;
					names = sgd1;
					nb_pick = 0;
				} else if (try_positional(c, pos + base, rest, T, nt, sgd1, 1, 0, 1)) {
					fits++;
					lr_pick = lr;
					names = sgd1;
					nb_pick = 1;
				}
			} else if (strcmp(cls, "rmsprop") == 0) {
				size_t nb = nt ? rest / nt : 0;
				const char *const *nm = NULL;
				if (nb == 1)
					nm = rms1;
				else if (nb == 3)
					nm = rms1;
				else if (nb == 2 && mom > 0 && centered == 0)
					nm = rms1;
				else if (nb == 2 && mom == 0 && centered == 1)
					nm = rms_c;
				if (nm && try_positional(c, pos + base, rest, T, nt, nm, nb, 0, 1)) {
					fits++;
					lr_pick = lr;
					names = nm;
					nb_pick = nb;
				}
			}
		}
	}
	if (fits != 1) {
		note_unmapped_list(c, pos + nint, np - nint, fits ? "several readings of the optimizer variables fit" :
			*cls ? "optimizer variables do not fit the optimizer class and trainable variables" :
			"optimizer class unknown (no config and no optimizer/vars name attribute)");
		goto out;
	}
	if (lr_pick) {
		int node = gb_child(&c->b, c->opt, "learning_rate");
		gb_var(&c->b, node, c->e[pos[1]].path);
		c->m[pos[1]].node = node;
	}
	if (nb_pick)
		try_positional(c, pos + 1 + lr_pick, np - 1 - (size_t)lr_pick, T, nt, names, nb_pick, inter_pick, 0);
out:
	ckpt__free(pos);
	ckpt__free(T);
}

/* Lambda layers, lambdas, custom modules: listed for the caller, never executed or imported. */
static void scan_config(json_t *j, char *out, size_t cap, size_t *used, int depth)
{
	size_t i;
	const char *k;
	json_t *v;
	if (depth > CKPT_MAX_JSON_DEPTH || *used + 128 >= cap)
		return;
	if (json_is_object(j)) {
		const char *cls = json_string_value(json_object_get(j, "class_name"));
		const char *reg = json_string_value(json_object_get(j, "registered_name"));
		if (cls && (strcmp(cls, "Lambda") == 0 || strcmp(cls, "__lambda__") == 0 || strcmp(cls, "TFOpLambda") == 0)) {
			const char *nm = json_string_value(json_object_get(json_object_get(j, "config"), "name"));
			*used += (size_t)snprintf(out + *used, cap - *used, "%s%s '%s' (code not executed)", *used ? "; " : "",
				cls, nm ? nm : "?");
		} else if (reg && strchr(reg, '>')) {
			*used += (size_t)snprintf(out + *used, cap - *used, "%scustom class '%.80s' (not resolved)", *used ? "; " : "", reg);
		}
		json_object_foreach(j, k, v)
			scan_config(v, out, cap, used, depth + 1);
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v)
			scan_config(v, out, cap, used, depth + 1);
	}
	if (*used >= cap)
		*used = cap - 1;
}

int ckpt__keras_config_warnings(const char *json_text, char **out)
{
	char warn[4096];
	size_t used = 0;
	json_error_t err;
	json_t *j;
	*out = NULL;
	if (!json_text || strlen(json_text) > CKPT_MAX_ATTR_BYTES)
		return CKPT_OK;
	if (!(j = json_loads(json_text, 0, &err))) {
		/* Not JSON jansson accepts (Keras 2.0 stored raw bytecode as latin-1): say so if it names a Lambda. */
		if (strstr(json_text, "\"Lambda\"") || strstr(json_text, "__lambda__"))
			return (*out = ckpt__strdup("Lambda layer in a config that is not valid UTF-8 JSON (code not executed)")) ? CKPT_OK : CKPT_ENOMEM;
		return CKPT_OK;
	}
	warn[0] = '\0';
	scan_config(j, warn, sizeof(warn), &used, 0);
	json_decref(j);
	if (used && !(*out = ckpt__strdup(warn)))
		return CKPT_ENOMEM;
	return CKPT_OK;
}

/* --------------------------------------------------------------- driver */

static json_t *parse_json(const char *s)
{
	json_error_t err;
	if (!s || strlen(s) > CKPT_MAX_ATTR_BYTES)
		return NULL;
	return json_loads(s, 0, &err);
}

int ckpt__keras_map(const ckpt__keras_ctx *ctx, const ckpt__keras_entry *e, size_t n, ckpt_object_graph **graph,
	char **notes, char **layer_names)
{
	mctx c;
	size_t i;
	int has_opt = 0, rc = CKPT_OK;
	char cls[64];
	*graph = NULL;
	*notes = NULL;
	*layer_names = NULL;
	memset(&c, 0, sizeof(c));
	c.ctx = ctx;
	c.e = e;
	c.n = n;
	c.opt = -1;
	c.b.g = ckpt__calloc(1, sizeof(ckpt_object_graph));
	c.m = ckpt__calloc(n + 1, sizeof(mapped));
	c.morder = ckpt__calloc(n + 1, sizeof(int));
	if (!c.b.g || !c.m || !c.morder) {
		rc = CKPT_ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		c.m[i].node = -1;
		c.m[i].trainable = 0;
		if (e[i].weight && !(c.m[i].vpath = strip_colon0(e[i].weight))) {
			rc = CKPT_ENOMEM;
			goto out;
		}
		if (e[i].kind == CKPT_KE_OPTIMIZER)
			has_opt = 1;
	}
	c.model_config = parse_json(ctx->model_config);
	c.training_config = parse_json(ctx->training_config);
	c.config = parse_json(ctx->config_json);
	if (gb_new_node(&c.b, "") != 0) {
		rc = c.b.err ? c.b.err : CKPT_ENOMEM;
		goto out;
	}
	if (ctx->layout == CKPT_KERAS_V3)
		map_k3_model(&c);
	else
		map_legacy_model(&c);
	optimizer_class(&c, cls, sizeof(cls));
	if (has_opt) {
		c.opt = gb_child(&c.b, 0, "optimizer");
		if (ctx->layout == CKPT_KERAS_V3)
			map_k3_optimizer(&c, cls);
		else
			map_legacy_optimizer(&c, cls);
	}
	for (i = 0; i < n; i++)
		if (e[i].kind == CKPT_KE_OTHER)
			NOTE(&c.notes, "%s: unmapped (neither model nor optimizer state)", e[i].path);
	if (c.b.err) {
		rc = c.b.err;
		goto out;
	}
	if (c.notes.oom) {
		rc = CKPT_ENOMEM;
		goto out;
	}
	*graph = c.b.g;
	c.b.g = NULL;
	*notes = c.notes.s;
	c.notes.s = NULL;
	if (c.layer_names && json_object_size(c.layer_names)) {
		char *txt = json_dumps(c.layer_names, JSON_COMPACT | JSON_SORT_KEYS);
		if (txt) {
			*layer_names = ckpt__strdup(txt);
			free(txt);
		}
	}
out:
	if (c.b.g)
		ckpt_object_graph_free(c.b.g);
	for (i = 0; c.b.paths && i < c.b.npaths; i++)
		ckpt__free(c.b.paths[i]);
	ckpt__free(c.morder);
	ckpt__free(c.b.paths);
	for (i = 0; c.m && i < n; i++)
		ckpt__free(c.m[i].vpath);
	ckpt__free(c.m);
	ckpt__free(c.notes.s);
	if (c.model_config)
		json_decref(c.model_config);
	if (c.training_config)
		json_decref(c.training_config);
	if (c.config)
		json_decref(c.config);
	if (c.layer_names)
		json_decref(c.layer_names);
	return rc;
}

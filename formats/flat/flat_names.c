/*
 * TF checkpoint keys <-> flat dotted names (the table is in flat.h), and the
 * object graph a flat file's names stand for, so that safetensors -> tf
 * writes TensorFlow's keys and object graph shape.
 */
#include <string.h>
#include "flat.h"

#define SUFFIX "/.ATTRIBUTES/" CKPT_VARIABLE_VALUE_KEY
#define SLOT "/.OPTIMIZER_SLOT/"
#define ATTR "/.ATTRIBUTES/"

/* Components of s[0:n] split on '/': non-empty, no '.', not a marker. */
static int plain_path(const char *s, size_t n)
{
	size_t i = 0;
	if (n == 0)
		return 0;
	while (i <= n) {
		size_t j = i;
		while (j < n && s[j] != '/')
			j++;
		if (j == i || memchr(s + i, '.', j - i) ||
		    (j - i == 8 && (memcmp(s + i, "__slot__", 8) == 0 || memcmp(s + i, "__attr__", 8) == 0)))
			return 0;
		i = j + 1;
	}
	return 1;
}

static void put(char *out, size_t *o, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[(*o)++] = s[i] == '/' ? '.' : s[i];
}

char *ckpt__flat_from_key(const char *key)
{
	size_t kl = strlen(key), sl = strlen(SUFFIX), o = 0;
	const char *p, *slot;
	char *out;
	if (kl > sl && memcmp(key + kl - sl, SUFFIX, sl) == 0) {
		size_t pl = kl - sl;
		out = ckpt__malloc(kl + 16);
		if (!out)
			return NULL;
		slot = strstr(key, SLOT);
		if (slot && (size_t)(slot - key) < pl) {
			/* V / .OPTIMIZER_SLOT / O... / S */
			size_t vl = (size_t)(slot - key), rl = pl - vl - strlen(SLOT);
			const char *rest = slot + strlen(SLOT), *last = NULL;
			for (size_t i = 0; i < rl; i++)
				if (rest[i] == '/')
					last = rest + i;
			if (last && plain_path(key, vl) && plain_path(rest, rl)) {
				put(out, &o, key, vl);
				put(out, &o, ".__slot__.", 10);
				put(out, &o, rest, rl);
				out[o] = '\0';
				return out;
			}
		} else if (plain_path(key, pl)) {
			put(out, &o, key, pl);
			out[o] = '\0';
			return out;
		}
		ckpt__free(out);
		return ckpt__strdup(key);
	}
	p = strstr(key, ATTR);
	if (p && !strstr(key, SLOT)) {
		size_t pl = (size_t)(p - key);
		const char *a = p + strlen(ATTR);
		if (plain_path(key, pl) && plain_path(a, strlen(a)) && !strchr(a, '/')) {
			out = ckpt__malloc(kl + 16);
			if (!out)
				return NULL;
			put(out, &o, key, pl);
			put(out, &o, ".__attr__.", 10);
			put(out, &o, a, strlen(a));
			out[o] = '\0';
			return out;
		}
	}
	return ckpt__strdup(key);
}

/* Index of the first component equal to `m` in name (components split on '.'), -1 if none. */
static long find_marker(const char *name, const char *m, size_t *at)
{
	size_t ml = strlen(m);
	long k = 0;
	for (const char *c = name;; k++) {
		const char *d = strchr(c, '.');
		size_t cl = d ? (size_t)(d - c) : strlen(c);
		if (cl == ml && memcmp(c, m, ml) == 0) {
			*at = (size_t)(c - name);
			return k;
		}
		if (!d)
			return -1;
		c = d + 1;
	}
}

static void put_slashes(char *out, size_t *o, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[(*o)++] = s[i] == '.' ? '/' : s[i];
}

char *ckpt__flat_to_key(const char *name)
{
	size_t n = strlen(name), at, o = 0;
	char *out;
	if (n == 0 || strchr(name, '/') || name[0] == '.' || name[n - 1] == '.' || strstr(name, ".."))
		return NULL;
	out = ckpt__malloc(n + 64);
	if (!out)
		return NULL;
	if (find_marker(name, "__slot__", &at) >= 0) {
		if (!name[at + 8]) { /* the marker is the last component: nothing follows it */
			ckpt__free(out);
			return NULL;
		}
		const char *rest = name + at + 9, *last = strrchr(name, '.');
		size_t dummy;
		if (at == 0 || last < rest || find_marker(rest, "__slot__", &dummy) >= 0 ||
		    find_marker(name, "__attr__", &dummy) >= 0) {
			ckpt__free(out);
			return NULL;
		}
		put_slashes(out, &o, name, at - 1);
		memcpy(out + o, SLOT, strlen(SLOT));
		o += strlen(SLOT);
		put_slashes(out, &o, rest, n - (size_t)(rest - name));
	} else if (find_marker(name, "__attr__", &at) >= 0) {
		if (!name[at + 8]) {
			ckpt__free(out);
			return NULL;
		}
		const char *a = name + at + 9;
		if (at == 0 || !*a || strchr(a, '.') || find_marker(a, "__attr__", &at) >= 0) {
			ckpt__free(out);
			return NULL;
		}
		put_slashes(out, &o, name, (size_t)(a - 9 - 1 - name));
		memcpy(out + o, ATTR, strlen(ATTR));
		o += strlen(ATTR);
		memcpy(out + o, a, strlen(a));
		o += strlen(a);
		out[o] = '\0';
		return out;
	} else {
		put_slashes(out, &o, name, n);
	}
	memcpy(out + o, SUFFIX, strlen(SUFFIX) + 1);
	return out;
}

/* ------------------------------------------------------------ graph */

/* Node lookup by object path: open addressing over FNV-1a (a file may hold millions of names). */
typedef struct gbuild {
	ckpt_object_graph *g;
	size_t cap;
	char **paths;          /* by node id */
	size_t npaths;         /* entries of paths[] set */
	int *slots;            /* hash -> node id, -1 empty */
	size_t nslots;
} gbuild;

static uint64_t fnv(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static int rehash(gbuild *b)
{
	size_t ns = b->nslots ? b->nslots * 2 : 64;
	int *t = ckpt__malloc(ns * sizeof(int));
	if (!t)
		return CKPT_ENOMEM;
	for (size_t i = 0; i < ns; i++)
		t[i] = -1;
	for (size_t id = 0; id < b->g->nnodes; id++) {
		if (!b->paths[id])
			continue; /* slot nodes are not looked up by path */
		size_t h = fnv(b->paths[id], strlen(b->paths[id])) & (ns - 1);
		while (t[h] >= 0)
			h = (h + 1) & (ns - 1);
		t[h] = (int)id;
	}
	ckpt__free(b->slots);
	b->slots = t;
	b->nslots = ns;
	return CKPT_OK;
}

/* A new node; `path` (NULL for slot nodes) is copied. */
static int new_node(gbuild *b, const char *path, size_t pl, int *id)
{
	if (b->g->nnodes == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 16;
		ckpt_og_node *nn = ckpt__realloc(b->g->nodes, nc * sizeof(*nn));
		if (!nn)
			return CKPT_ENOMEM;
		b->g->nodes = nn;
		char **np = ckpt__realloc(b->paths, nc * sizeof(char *));
		if (!np)
			return CKPT_ENOMEM;
		b->paths = np;
		b->cap = nc;
	}
	ckpt_og_node *n = &b->g->nodes[b->g->nnodes];
	memset(n, 0, sizeof(*n));
	n->has_checkpoint_values = -1;
	b->paths[b->g->nnodes] = NULL;
	*id = (int)b->g->nnodes++;
	b->npaths = b->g->nnodes;
	if (path) {
		if (!(b->paths[*id] = ckpt__strndup(path, pl)))
			return CKPT_ENOMEM;
		if (b->g->nnodes * 2 > b->nslots)
			return rehash(b);
		size_t h = fnv(path, pl) & (b->nslots - 1);
		while (b->slots[h] >= 0)
			h = (h + 1) & (b->nslots - 1);
		b->slots[h] = *id;
	}
	return CKPT_OK;
}

static int find_path(const gbuild *b, const char *path, size_t pl)
{
	size_t h = fnv(path, pl) & (b->nslots - 1);
	for (; b->slots[h] >= 0; h = (h + 1) & (b->nslots - 1)) {
		const char *p = b->paths[b->slots[h]];
		if (strlen(p) == pl && memcmp(p, path, pl) == 0)
			return b->slots[h];
	}
	return -1;
}

/* The node at object path path[0:pl] ("a/b/c"), created with its ancestors. */
static int node_at(gbuild *b, const char *path, size_t pl, int *out)
{
	int id = pl ? find_path(b, path, pl) : 0, parent = 0;
	size_t cut = 0;
	if (id >= 0) {
		*out = id;
		return CKPT_OK;
	}
	for (size_t i = pl; i > 0; i--)
		if (path[i - 1] == '/') {
			cut = i - 1;
			break;
		}
	if (cut)
		CKPT_TRY(node_at(b, path, cut, &parent));
	const char *local = path + (cut ? cut + 1 : 0);
	size_t ll = pl - (size_t)(local - path);
	CKPT_TRY(new_node(b, path, pl, &id));
	ckpt_og_node *p = &b->g->nodes[parent];
	ckpt_og_child *nc = ckpt__realloc(p->children, (p->nchildren + 1) * sizeof(*nc));
	if (!nc)
		return CKPT_ENOMEM;
	p->children = nc;
	nc[p->nchildren].node_id = id;
	if (!(nc[p->nchildren].local_name = ckpt__strndup(local, ll)))
		return CKPT_ENOMEM;
	p->nchildren++;
	*out = id;
	return CKPT_OK;
}

static int add_attr(gbuild *b, int node, const char *attr, const char *key, const char *full)
{
	ckpt_og_node *n = &b->g->nodes[node];
	ckpt_og_attr *na = ckpt__realloc(n->attrs, (n->nattrs + 1) * sizeof(*na));
	if (!na)
		return CKPT_ENOMEM;
	n->attrs = na;
	na += n->nattrs++;
	memset(na, 0, sizeof(*na));
	na->name = ckpt__strdup(attr);
	na->full_name = ckpt__strdup(full);
	na->checkpoint_key = ckpt__strdup(key);
	n->has_checkpoint_values = 1;
	return na->name && na->full_name && na->checkpoint_key ? CKPT_OK : CKPT_ENOMEM;
}

/* Attach TF key `key` (a mapped flat name `full`) to the graph. */
static int add_key(gbuild *b, const char *key, const char *full)
{
	const char *slot = strstr(key, SLOT), *attr = strstr(key, ATTR);
	int node, opt, var;
	if (slot) {
		const char *o = slot + strlen(SLOT), *end = attr, *s = end;
		while (s > o && s[-1] != '/')
			s--;
		CKPT_TRY(node_at(b, key, (size_t)(slot - key), &var));
		CKPT_TRY(node_at(b, o, (size_t)(s - 1 - o), &opt));
		CKPT_TRY(new_node(b, NULL, 0, &node));
		CKPT_TRY(add_attr(b, node, CKPT_VARIABLE_VALUE_KEY, key, full));
		ckpt_og_node *on = &b->g->nodes[opt];
		ckpt_og_slot *ns = ckpt__realloc(on->slots, (on->nslots + 1) * sizeof(*ns));
		if (!ns)
			return CKPT_ENOMEM;
		on->slots = ns;
		ns += on->nslots++;
		ns->original_variable_node_id = var;
		ns->slot_variable_node_id = node;
		ns->slot_name = ckpt__strndup(s, (size_t)(end - s));
		return ns->slot_name ? CKPT_OK : CKPT_ENOMEM;
	}
	CKPT_TRY(node_at(b, key, (size_t)(attr - key), &node));
	return add_attr(b, node, attr + strlen(ATTR), key, full);
}

int ckpt__flat_build_graph(ckpt_reader *r)
{
	gbuild b = { 0 };
	int rc = CKPT_OK, any = 0, root;
	if (!(b.g = ckpt__calloc(1, sizeof(*b.g))))
		return CKPT_ENOMEM;
	if ((rc = rehash(&b)) < 0 || (rc = new_node(&b, "", 0, &root)) < 0)
		goto out;
	for (size_t i = 0; i < r->nvars; i++) {
		char *key = ckpt__flat_to_key(r->vars[i].name);
		r->vars[i].role = ckpt__role_from_key(key ? key : r->vars[i].name);
		if (!key)
			continue;
		rc = add_key(&b, key, r->vars[i].name);
		ckpt__free(key);
		if (rc < 0)
			goto out;
		any = 1;
	}
	if (any && (rc = ckpt_object_graph_validate(b.g)) == CKPT_OK) {
		r->graph = b.g;
		b.g = NULL;
	}
out:
	for (size_t i = 0; i < b.npaths; i++)
		ckpt__free(b.paths[i]);
	ckpt__free(b.paths);
	ckpt__free(b.slots);
	ckpt_object_graph_free(b.g);
	return rc;
}

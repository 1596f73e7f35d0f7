/*
 * Sharded Keras 3 weights: what model.save_weights("x.weights.json",
 * max_shard_size=...) writes (Keras 3.10+, ShardedH5IOStore).
 *
 *   x.weights.json   {"metadata": {"total_size": <bytes>},
 *                     "weight_map": {"/layers/dense/vars": ["x_00000.weights.h5"],
 *                                    "/optimizer/vars": ["x_00000.weights.h5", "x_00001.weights.h5"], ...}}
 *   x_0000N.weights.h5  Keras 3 stores, each holding some of the vars
 *                     groups; a group can be split over shards, each shard
 *                     keeping the original indices ("optimizer/vars/3".."6").
 *
 * Opened through the keras-h5 backend (the JSON file bids there): every
 * shard named in weight_map (plain file names beside the JSON, nothing
 * else) is attached as a Keras 3 store in shard mode; the entries of all
 * shards are listed together in the order one .weights.h5 would list them,
 * each with its shard index. Checked: the JSON's shape, every entry's
 * group listed in weight_map for its shard, no dataset in two shards, and
 * every vars group holding exactly 0..n-1 over the union. The object graph
 * is the Keras 3 mapping of the union, as for one file.
 */
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "formats/keras_h5/keras_h5.h"

#define KSH_MAX_JSON ((uint64_t)64 << 20)
#define KSH_MAX_SHARDS 100000

typedef struct ksh_state {
	size_t nsub;
	ckpt_reader **sub;      /* one attached reader per shard */
	char **shard_paths;
	int *exists;
	size_t n;
	ckpt_var_info *infos;
	size_t *sub_of, *idx;   /* per merged entry: shard and its index there */
	json_t *map;            /* weight_map */
} ksh_state;

int ckpt__keras_sharded_bid(const unsigned char *head, size_t n)
{
	size_t i = 0;
	while (i < n && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t'))
		i++;
	return i < n && head[i] == '{' ? 40 : -1;
}

int ckpt__keras_sharded_is(const ckpt_reader *r)
{
	return r->format_name && strcmp(r->format_name, "keras-weights-sharded") == 0;
}

static void sub_free(ckpt_reader *s)
{
	if (!s)
		return;
	ckpt__keras_h5_close(s);
	ckpt_object_graph_free(s->graph);
	for (size_t i = 0; i < s->nmeta; i++) {
		ckpt__free(s->meta_keys[i]);
		ckpt__free(s->meta_vals[i]);
	}
	ckpt__free(s->meta_keys);
	ckpt__free(s->meta_vals);
	ckpt__free(s->path);
	ckpt__free(s->user_path);
	ckpt__free(s);
}

void ckpt__keras_sharded_close(ckpt_reader *r)
{
	ksh_state *s = r->state;
	if (!s)
		return;
	for (size_t i = 0; i < s->nsub; i++) {
		sub_free(s->sub[i]);
		ckpt__free(s->shard_paths[i]);
	}
	ckpt__free(s->sub);
	ckpt__free(s->shard_paths);
	ckpt__free(s->exists);
	ckpt__free(s->infos);
	ckpt__free(s->sub_of);
	ckpt__free(s->idx);
	json_decref(s->map);
	ckpt__free(s);
	r->state = NULL;
	r->vars = NULL;
	r->nvars = 0;
	r->shard_paths = NULL;
	r->shard_exists = NULL;
}

/* Attach one shard file (read into memory through the VFS: a shard is small by construction). */
static int open_shard(ckpt_reader *r, const char *path, ckpt_reader **out)
{
	void *buf = NULL;
	size_t n = 0;
	uint64_t max = r->opts.memory_budget ? r->opts.memory_budget : CKPT_DEFAULT_MEMORY_BUDGET;
	ckpt_reader *s = ckpt__calloc(1, sizeof(*s));
	if (!s)
		return CKPT_ENOMEM;
	*out = s;
	s->fmt = r->fmt;
	s->vfs = r->vfs;
	s->opts = r->opts;
	s->nshards = 1;
	if (!(s->user_path = ckpt__strdup(path)) || !(s->path = ckpt__strdup(path)))
		return CKPT_ENOMEM;
	CKPT_TRY(ckpt_vfs_read_all(&buf, &n, r->vfs, path, max));
	if (n < 8 || memcmp(buf, "\x89HDF\r\n\x1a\n", 8) != 0) {
		ckpt__free(buf);
		return ckpt__fail(CKPT_EFORMAT, path, NULL, 0, "shard of sharded Keras weights is not an HDF5 file");
	}
	return ckpt__keras_h5_attach_shard(s, -1, buf, n, 1);
}

/* "layers/dense/vars/3" -> group "layers/dense/vars" length, index 3 */
static size_t group_len(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? (size_t)(slash - path) : 0;
}

typedef struct ksh_ref {
	const char *path;
	size_t sub, idx;
	int index;
} ksh_ref;

static int cmp_ref(const void *a, const void *b)
{
	const ksh_ref *x = a, *y = b;
	size_t gx = group_len(x->path), gy = group_len(y->path);
	int c = ckpt__keras_natcmp(x->path, y->path);
	if (gx == gy && strncmp(x->path, y->path, gx) == 0) /* one group: by index */
		return (x->index > y->index) - (x->index < y->index);
	return c;
}

/* Is shard `file` listed for "/<group>" in weight_map? */
static int listed(json_t *map, const char *path, size_t glen, const char *file)
{
	char key[4096];
	json_t *lst, *f;
	size_t i;
	if (glen + 2 > sizeof(key))
		return 0;
	key[0] = '/';
	memcpy(key + 1, path, glen);
	key[glen + 1] = '\0';
	lst = json_object_get(map, key);
	json_array_foreach(lst, i, f)
		if (json_is_string(f) && strcmp(json_string_value(f), file) == 0)
			return 1;
	return 0;
}

static int merge(ckpt_reader *r, ksh_state *s)
{
	size_t total = 0, k = 0;
	for (size_t i = 0; i < s->nsub; i++)
		total += s->sub[i]->nvars;
	if (total > CKPT_MAX_VARIABLES)
		return ckpt__fail(CKPT_ELIMIT, r->path, NULL, -1, "sharded weights list %zu datasets", total);
	ksh_ref *refs = ckpt__calloc(total ? total : 1, sizeof(*refs));
	ckpt__keras_entry *ents = ckpt__calloc(total ? total : 1, sizeof(*ents));
	s->infos = ckpt__calloc(total ? total : 1, sizeof(*s->infos));
	s->sub_of = ckpt__calloc(total ? total : 1, sizeof(size_t));
	s->idx = ckpt__calloc(total ? total : 1, sizeof(size_t));
	int rc = refs && ents && s->infos && s->sub_of && s->idx ? CKPT_OK : CKPT_ENOMEM;
	for (size_t i = 0; i < s->nsub && rc == CKPT_OK; i++) {
		const char *file = strrchr(s->shard_paths[i], '/');
		file = file ? file + 1 : s->shard_paths[i];
		for (size_t j = 0; j < s->sub[i]->nvars && rc == CKPT_OK; j++) {
			ckpt__keras_entry e;
			ckpt__keras_h5_entry(s->sub[i], j, &e);
			refs[k] = (ksh_ref){ e.path, i, j, e.index };
			if (!listed(s->map, e.path, group_len(e.path), file))
				rc = ckpt__fail(CKPT_EFORMAT, r->path, e.path, -1,
					"'%s' is stored in %s, but weight_map does not list that shard for '/%.*s'", e.path, file,
					(int)group_len(e.path), e.path);
			k++;
		}
	}
	if (rc == CKPT_OK)
		qsort(refs, total, sizeof(*refs), cmp_ref);
	for (size_t i = 0; i < total && rc == CKPT_OK; i++) {
		size_t gl = group_len(refs[i].path);
		int same = i > 0 && group_len(refs[i - 1].path) == gl && strncmp(refs[i - 1].path, refs[i].path, gl) == 0;
		int want = same ? refs[i - 1].index + 1 : 0;
		if (same && refs[i].index == refs[i - 1].index)
			rc = ckpt__fail(CKPT_EFORMAT, r->path, refs[i].path, -1, "'%s' is stored in two shards (%s and %s)",
				refs[i].path, s->shard_paths[refs[i - 1].sub], s->shard_paths[refs[i].sub]);
		else if (refs[i].index != want)
			rc = ckpt__fail(CKPT_EFORMAT, r->path, refs[i].path, -1,
				"'%.*s' has no variable %d in any of the %zu shards (next stored: %d)", (int)gl, refs[i].path, want,
				s->nsub, refs[i].index);
		if (rc < 0)
			break;
		s->sub_of[i] = refs[i].sub;
		s->idx[i] = refs[i].idx;
		s->infos[i] = s->sub[refs[i].sub]->vars[refs[i].idx];
		s->infos[i].shard = (int)refs[i].sub;
		ckpt__keras_h5_entry(s->sub[refs[i].sub], refs[i].idx, &ents[i]);
	}
	if (rc == CKPT_OK) {
		ckpt__keras_ctx ctx;
		char *notes = NULL, *names = NULL;
		s->n = total;
		r->vars = s->infos;
		r->nvars = total;
		memset(&ctx, 0, sizeof(ctx));
		ctx.layout = CKPT_KERAS_V3;
		rc = ckpt__keras_map(&ctx, ents, total, &r->graph, &notes, &names);
		if (rc >= 0 && notes)
			rc = ckpt__reader_set_meta(r, "mapping_notes", notes);
		if (rc >= 0 && names)
			rc = ckpt__reader_set_meta(r, "keras_layer_names", names);
		ckpt__free(notes);
		ckpt__free(names);
	}
	ckpt__free(refs);
	ckpt__free(ents);
	return rc;
}

/* The shard file names of weight_map, in order of first mention; plain names beside the JSON only. */
static int collect_shards(ckpt_reader *r, ksh_state *s, const char *dir)
{
	const char *key;
	json_t *lst;
	json_object_foreach(s->map, key, lst) {
		size_t i;
		json_t *f;
		if (!json_is_array(lst) || json_array_size(lst) == 0)
			return ckpt__fail(CKPT_EFORMAT, r->path, key, -1, "weight_map['%s'] is not a non-empty list of files", key);
		json_array_foreach(lst, i, f) {
			const char *name = json_string_value(f);
			size_t k;
			char *p;
			if (!name || !*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
				return ckpt__fail(CKPT_EFORMAT, r->path, key, -1,
					"weight_map['%s'] names '%s': a shard must be a plain file name beside the JSON", key,
					name ? name : "(not a string)");
			p = ckpt__path_join(dir, name);
			if (!p)
				return CKPT_ENOMEM;
			for (k = 0; k < s->nsub && strcmp(s->shard_paths[k], p) != 0; k++)
				;
			if (k < s->nsub) {
				ckpt__free(p);
				continue;
			}
			if (s->nsub >= KSH_MAX_SHARDS) {
				ckpt__free(p);
				return ckpt__fail(CKPT_ELIMIT, r->path, NULL, -1, "more than %d shards", KSH_MAX_SHARDS);
			}
			char **np = ckpt__realloc(s->shard_paths, (s->nsub + 1) * sizeof(char *));
			if (!np) {
				ckpt__free(p);
				return CKPT_ENOMEM;
			}
			s->shard_paths = np;
			s->shard_paths[s->nsub++] = p;
		}
	}
	if (!s->nsub)
		return ckpt__fail(CKPT_EFORMAT, r->path, NULL, -1, "weight_map lists no shard");
	return CKPT_OK;
}

int ckpt__keras_sharded_open(ckpt_reader *r)
{
	void *buf = NULL;
	size_t n = 0;
	json_error_t je;
	json_t *root;
	char *dir;
	int rc;
	ksh_state *s;
	if (!r->path && !(r->path = ckpt__strdup(r->user_path)))
		return CKPT_ENOMEM;
	CKPT_TRY(ckpt_vfs_read_all(&buf, &n, r->vfs, r->user_path, KSH_MAX_JSON));
	root = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
	ckpt__free(buf);
	if (!root)
		return ckpt__fail(CKPT_EFORMAT, r->path, NULL, je.position,
			"not sharded Keras weights: JSON error at line %d: %s", je.line, je.text);
	s = ckpt__calloc(1, sizeof(*s));
	if (!s) {
		json_decref(root);
		return CKPT_ENOMEM;
	}
	r->state = s;
	r->format_name = "keras-weights-sharded";
	s->map = json_incref(json_object_get(root, "weight_map"));
	json_decref(root);
	if (!json_is_object(s->map))
		return ckpt__fail(CKPT_EFORMAT, r->path, "weight_map", -1,
			"not sharded Keras weights: no \"weight_map\" object (a .weights.json names its shards there)");
	dir = ckpt__path_dir(r->path);
	if (!dir)
		return CKPT_ENOMEM;
	rc = collect_shards(r, s, dir);
	ckpt__free(dir);
	CKPT_TRY(rc);
	s->sub = ckpt__calloc(s->nsub, sizeof(*s->sub));
	s->exists = ckpt__calloc(s->nsub, sizeof(int));
	if (!s->sub || !s->exists)
		return CKPT_ENOMEM;
	for (size_t i = 0; i < s->nsub; i++) {
		s->exists[i] = ckpt_vfs_exists(NULL, r->vfs, s->shard_paths[i]);
		if (s->exists[i] < 0)
			return s->exists[i];
		rc = open_shard(r, s->shard_paths[i], &s->sub[i]);
		if (rc < 0) {
			ckpt__error_annotate(s->shard_paths[i], NULL);
			return rc;
		}
	}
	r->nshards = (int)s->nsub;
	r->shard_paths = s->shard_paths;
	r->shard_exists = s->exists;
	return merge(r, s);
}

static int check(const ckpt_reader *r, size_t i)
{
	if (!r->state || i >= r->nvars)
		return ckpt__fail(CKPT_EINVAL, r->path, NULL, -1, "entry %zu out of range (%zu entries)", i, r->nvars);
	return CKPT_OK;
}

int ckpt__keras_sharded_read_into(ckpt_reader *r, size_t i, void *dst, size_t n)
{
	ksh_state *s = r->state;
	CKPT_TRY(check(r, i));
	return ckpt__keras_h5_read_into(s->sub[s->sub_of[i]], s->idx[i], dst, n);
}

int ckpt__keras_sharded_read(ckpt_reader *r, size_t i, ckpt_tensor **out)
{
	ksh_state *s = r->state;
	*out = NULL;
	CKPT_TRY(check(r, i));
	return ckpt__keras_h5_read(s->sub[s->sub_of[i]], s->idx[i], out);
}

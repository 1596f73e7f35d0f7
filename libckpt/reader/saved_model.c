/*
 * saved_model.pb (tensorflow/core/protobuf/saved_model.proto) as C data:
 * MetaGraphs, their tags and signatures, and the variables of the
 * SavedObjectGraph. Decoded with protobuf-c from the trimmed protos in
 * formats/tf_bundle/proto/saved_model.proto:
 *
 *   SavedModel   { int64 saved_model_schema_version = 1; repeated MetaGraphDef meta_graphs = 2; }
 *   MetaGraphDef { MetaInfoDef meta_info_def = 1 {tags = 4, tensorflow_version = 5};
 *                  map<string, SignatureDef> signature_def = 5; SavedObjectGraph object_graph_def = 7; }
 *   SignatureDef { map<string, TensorInfo> inputs = 1, outputs = 2; string method_name = 3; }
 *   TensorInfo   { oneof {name = 1, coo_sparse = 4, composite_tensor = 5}; DataType dtype = 2;
 *                  TensorShapeProto tensor_shape = 3; }
 *   SavedObject  { children = 1; slot_variables = 3; oneof kind {user_object = 4, variable = 7, ...} }
 *   SavedVariable{ dtype = 1; shape = 2; trainable = 3; synchronization = 4; aggregation = 5; name = 6; }
 *
 * Map entries repeat keys at will on the wire; as in every protobuf runtime
 * the last one wins. Signatures and their tensors are sorted by key, the
 * order saved_model_cli prints them in.
 */
#include <stdlib.h>
#include <string.h>
#include <protobuf-c/protobuf-c.h>
#include "saved_model.pb-c.h"
#include "types.pb-c.h"
#include "internal.h"
#include "ckpt/saved_model.h"

typedef CkptTf__TensorInfo PbTensor;
typedef CkptTf__SignatureDef PbSig;
typedef CkptTf__TensorShapeProto PbShape;

static void *pb_alloc(void *ctx, size_t n)
{
	(void)ctx;
	return ckpt__malloc(n ? n : 1);
}

static void pb_free(void *ctx, void *p)
{
	(void)ctx;
	ckpt__free(p);
}

static ProtobufCAllocator sm_allocator = { pb_alloc, pb_free, NULL };

const char *ckpt_tf_dtype_name(int dtype)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&ckpt_tf__data_type__descriptor, dtype);
	return v ? v->name : NULL;
}

/* ---- freeing ---- */

static void free_tensor(ckpt_sm_tensor *t)
{
	ckpt__free(t->key);
	ckpt__free(t->name);
	ckpt__free(t->dims);
}

static void free_signature(ckpt_sm_signature *s)
{
	for (size_t i = 0; i < s->ninputs; i++)
		free_tensor(&s->inputs[i]);
	for (size_t i = 0; i < s->noutputs; i++)
		free_tensor(&s->outputs[i]);
	ckpt__free(s->inputs);
	ckpt__free(s->outputs);
	ckpt__free(s->key);
	ckpt__free(s->method_name);
}

static void free_meta_graph(ckpt_sm_meta_graph *m)
{
	for (size_t i = 0; i < m->ntags; i++)
		ckpt__free(m->tags[i]);
	ckpt__free(m->tags);
	ckpt__free(m->tensorflow_version);
	for (size_t i = 0; i < m->nsignatures; i++)
		free_signature(&m->signatures[i]);
	ckpt__free(m->signatures);
	for (size_t i = 0; i < m->nvariables; i++) {
		ckpt__free(m->variables[i].name);
		ckpt__free(m->variables[i].dims);
	}
	ckpt__free(m->variables);
}

void ckpt_saved_model_free(ckpt_saved_model *sm)
{
	if (!sm)
		return;
	for (size_t i = 0; i < sm->nmeta_graphs; i++)
		free_meta_graph(&sm->meta_graphs[i]);
	ckpt__free(sm->meta_graphs);
	ckpt__free(sm);
}

/* ---- conversion ---- */

/* A capped copy of a decoded string; `what` names it in the error. */
static int copy_str(char **out, const char *s, const char *what)
{
	if (!s)
		s = "";
	size_t n = strlen(s);
	if (n > CKPT_MAX_NAME_LEN)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "%s of %zu bytes exceeds the %d-byte cap", what, n,
			CKPT_MAX_NAME_LEN);
	*out = ckpt__strndup(s, n);
	return *out ? CKPT_OK : CKPT_ENOMEM;
}

static int copy_shape(int *rank, int64_t **dims, const PbShape *s, const char *what, const char *name)
{
	*rank = -1;
	*dims = NULL;
	if (!s) {
		*rank = 0; /* an absent shape is the default message: rank 0, as TF reads it */
		return CKPT_OK;
	}
	if (s->unknown_rank)
		return CKPT_OK;
	if (s->n_dim > CKPT_MAX_RANK)
		return ckpt__fail(CKPT_ELIMIT, NULL, name, -1, "%s '%s' has rank %zu, above the cap of %d", what, name,
			s->n_dim, CKPT_MAX_RANK);
	*rank = (int)s->n_dim;
	if (s->n_dim == 0)
		return CKPT_OK;
	if (!(*dims = ckpt__calloc(s->n_dim, sizeof(int64_t))))
		return CKPT_ENOMEM;
	for (size_t i = 0; i < s->n_dim; i++)
		(*dims)[i] = s->dim[i]->size;
	return CKPT_OK;
}

static int convert_tensor(ckpt_sm_tensor *d, const char *key, const PbTensor *t, const char *sig)
{
	CKPT_TRY(copy_str(&d->key, key, "a signature tensor key"));
	const char *name = "";
	d->encoding = CKPT_SM_ENCODING_NONE;
	if (t) {
		switch (t->encoding_case) {
		case CKPT_TF__TENSOR_INFO__ENCODING_NAME:
			d->encoding = CKPT_SM_ENCODING_NAME;
			name = t->name;
			break;
		case CKPT_TF__TENSOR_INFO__ENCODING_COO_SPARSE:
			d->encoding = CKPT_SM_ENCODING_COO_SPARSE;
			name = t->coo_sparse ? t->coo_sparse->values_tensor_name : "";
			break;
		case CKPT_TF__TENSOR_INFO__ENCODING_COMPOSITE_TENSOR:
			d->encoding = CKPT_SM_ENCODING_COMPOSITE;
			break;
		default:
			break;
		}
		d->dtype = t->dtype;
	}
	CKPT_TRY(copy_str(&d->name, name, "a signature tensor name"));
	return copy_shape(&d->rank, &d->dims, t ? t->tensor_shape : NULL, "signature tensor", sig);
}

/* Map entries -> array sorted by key, the last entry of each key kept. */
typedef struct kv_ref {
	const char *key;
	const void *value;
	size_t order;
} kv_ref;

static int cmp_kv(const void *a, const void *b)
{
	const kv_ref *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Sort `refs` by (key, order) and drop all but the last of each key; returns the new count. */
static size_t sort_unique_last(kv_ref *refs, size_t n)
{
	qsort(refs, n, sizeof(*refs), cmp_kv);
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (i + 1 < n && strcmp(refs[i].key, refs[i + 1].key) == 0)
			continue;
		refs[o++] = refs[i];
	}
	return o;
}

/* One signature's inputs or outputs from its map entries (`refs`, file order). */
static int convert_tensor_map(ckpt_sm_tensor **out, size_t *nout, kv_ref *refs, size_t n, const char *sig)
{
	*out = NULL;
	*nout = 0;
	if (!n)
		return CKPT_OK;
	size_t m = sort_unique_last(refs, n);
	ckpt_sm_tensor *t = ckpt__calloc(m, sizeof(*t));
	if (!t)
		return CKPT_ENOMEM;
	*out = t;
	for (size_t i = 0; i < m; i++) {
		*nout = i + 1;
		CKPT_TRY(convert_tensor(&t[i], refs[i].key, refs[i].value, sig));
	}
	return CKPT_OK;
}

#define FILL_REFS(refs, entries, n) do { \
	for (size_t k_ = 0; k_ < (n); k_++) { \
		(refs)[k_].key = (entries)[k_]->key ? (entries)[k_]->key : ""; \
		(refs)[k_].value = (entries)[k_]->value; \
		(refs)[k_].order = k_; \
	} \
} while (0)

static int convert_signatures(ckpt_sm_meta_graph *d, const CkptTf__MetaGraphDef *m)
{
	size_t n = m->n_signature_def;
	if (!n)
		return CKPT_OK;
	kv_ref *refs = ckpt__calloc(n, sizeof(*refs));
	if (!refs)
		return CKPT_ENOMEM;
	FILL_REFS(refs, m->signature_def, n);
	size_t k = sort_unique_last(refs, n);
	int rc = (d->signatures = ckpt__calloc(k, sizeof(*d->signatures))) ? CKPT_OK : CKPT_ENOMEM;
	for (size_t i = 0; rc == CKPT_OK && i < k; i++) {
		ckpt_sm_signature *s = &d->signatures[i];
		const PbSig *p = refs[i].value;
		d->nsignatures = i + 1;
		rc = copy_str(&s->key, refs[i].key, "a signature key");
		if (rc == CKPT_OK)
			rc = copy_str(&s->method_name, p ? p->method_name : "", "a method name");
		if (rc < 0 || !p || (!p->n_inputs && !p->n_outputs))
			continue;
		kv_ref *tr = ckpt__calloc(p->n_inputs > p->n_outputs ? p->n_inputs : p->n_outputs, sizeof(*tr));
		if (!tr) {
			rc = CKPT_ENOMEM;
			break;
		}
		FILL_REFS(tr, p->inputs, p->n_inputs);
		rc = convert_tensor_map(&s->inputs, &s->ninputs, tr, p->n_inputs, s->key);
		if (rc == CKPT_OK) {
			FILL_REFS(tr, p->outputs, p->n_outputs);
			rc = convert_tensor_map(&s->outputs, &s->noutputs, tr, p->n_outputs, s->key);
		}
		ckpt__free(tr);
	}
	ckpt__free(refs);
	return rc;
}

static ckpt_synchronization map_sync(int tf)
{
	switch (tf) {
	case 2: return CKPT_SYNC_ON_WRITE;
	case 3: return CKPT_SYNC_ON_READ;
	default: return CKPT_SYNC_AUTO; /* AUTO, NONE, unknown */
	}
}

static int convert_variables(ckpt_sm_meta_graph *d, const CkptTf__SavedObjectGraph *g)
{
	if (!g)
		return CKPT_OK;
	d->nobjects = g->n_nodes;
	size_t nv = 0;
	for (size_t i = 0; i < g->n_nodes; i++)
		if (g->nodes[i]->kind_case == CKPT_TF__SAVED_OBJECT__KIND_VARIABLE)
			nv++;
	if (!nv)
		return CKPT_OK;
	if (g->n_nodes > INT32_MAX)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "SavedObjectGraph of %zu nodes", g->n_nodes);
	if (!(d->variables = ckpt__calloc(nv, sizeof(*d->variables))))
		return CKPT_ENOMEM;
	for (size_t i = 0; i < g->n_nodes; i++) {
		const CkptTf__SavedObject *o = g->nodes[i];
		if (o->kind_case != CKPT_TF__SAVED_OBJECT__KIND_VARIABLE)
			continue;
		const CkptTf__SavedVariable *v = o->variable;
		ckpt_sm_variable *x = &d->variables[d->nvariables++];
		x->node_id = (int)i;
		x->dtype = v ? v->dtype : 0;
		x->trainable = v && v->trainable;
		x->tf_sync = v ? v->synchronization : 0;
		x->sync = map_sync(x->tf_sync);
		x->aggregation = v && v->aggregation >= 0 && v->aggregation <= 3 ? (ckpt_aggregation)v->aggregation
			: CKPT_AGG_NONE;
		CKPT_TRY(copy_str(&x->name, v ? v->name : "", "a variable name"));
		CKPT_TRY(copy_shape(&x->rank, &x->dims, v ? v->shape : NULL, "variable", x->name));
	}
	return CKPT_OK;
}

static int convert_meta_graph(ckpt_sm_meta_graph *d, const CkptTf__MetaGraphDef *m)
{
	const CkptTf__MetaGraphDef__MetaInfoDef *mi = m->meta_info_def;
	CKPT_TRY(copy_str(&d->tensorflow_version, mi ? mi->tensorflow_version : "", "tensorflow_version"));
	if (mi && mi->n_tags) {
		if (!(d->tags = ckpt__calloc(mi->n_tags, sizeof(char *))))
			return CKPT_ENOMEM;
		for (size_t i = 0; i < mi->n_tags; i++) {
			d->ntags = i + 1;
			CKPT_TRY(copy_str(&d->tags[i], mi->tags[i], "a tag"));
		}
	}
	CKPT_TRY(convert_signatures(d, m));
	return convert_variables(d, m->object_graph_def);
}

int ckpt_saved_model_parse(ckpt_saved_model **out, const void *buf, size_t n)
{
	if (!out || (!buf && n))
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_saved_model_parse: NULL argument");
	*out = NULL;
	if (n > CKPT_MAX_SAVED_MODEL_BYTES)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "saved_model.pb of %zu bytes exceeds the %llu-byte cap", n,
			(unsigned long long)CKPT_MAX_SAVED_MODEL_BYTES);
	ckpt_error_clear(); /* a NULL from unpack is ENOMEM only if the allocator said so */
	CkptTf__SavedModel *pm = ckpt_tf__saved_model__unpack(&sm_allocator, n, buf);
	if (!pm) {
		if (ckpt_error_last()->code == CKPT_ENOMEM)
			return CKPT_ENOMEM;
		return ckpt__fail(CKPT_EFORMAT, NULL, NULL, -1, "cannot decode the SavedModel proto (%zu bytes)", n);
	}
	ckpt_saved_model *sm = ckpt__calloc(1, sizeof(*sm));
	int rc = sm ? CKPT_OK : CKPT_ENOMEM;
	if (rc == CKPT_OK) {
		sm->schema_version = pm->saved_model_schema_version;
		if (pm->n_meta_graphs && !(sm->meta_graphs = ckpt__calloc(pm->n_meta_graphs, sizeof(*sm->meta_graphs))))
			rc = CKPT_ENOMEM;
	}
	for (size_t i = 0; rc == CKPT_OK && i < pm->n_meta_graphs; i++) {
		sm->nmeta_graphs = i + 1;
		rc = convert_meta_graph(&sm->meta_graphs[i], pm->meta_graphs[i]);
	}
	ckpt_tf__saved_model__free_unpacked(pm, &sm_allocator);
	if (rc < 0) {
		ckpt_saved_model_free(sm);
		return rc;
	}
	*out = sm;
	return CKPT_OK;
}

int ckpt_saved_model_read(ckpt_saved_model **out, const char *path, ckpt_vfs *vfs)
{
	if (!out || !path)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_saved_model_read: NULL argument");
	*out = NULL;
	CKPT_TRY(ckpt_status_of(vfs = ckpt_vfs_for_path(vfs, path)));
	int is_dir = 0;
	char *file = NULL;
	int e = ckpt_vfs_exists(&is_dir, vfs, path);
	if (e < 0)
		return e;
	if (e > 0 && is_dir) {
		if (!(file = ckpt__path_join(path, "saved_model.pb")))
			return CKPT_ENOMEM;
		if ((e = ckpt_vfs_exists(NULL, vfs, file)) < 0) {
			ckpt__free(file);
			return e;
		}
		if (e == 0) {
			char *txt = ckpt__path_join(path, "saved_model.pbtxt");
			int has_txt = txt && ckpt_vfs_exists(NULL, vfs, txt) > 0;
			ckpt__free(txt);
			int rc = has_txt
				? ckpt__fail(CKPT_EUNSUPPORTED, file, NULL, -1,
					"only saved_model.pbtxt (text format) is here; it is not read")
				: ckpt__fail(CKPT_ENOTFOUND, file, NULL, -1, "no saved_model.pb in this directory");
			ckpt__free(file);
			return rc;
		}
	} else if (!(file = ckpt__strdup(path))) {
		return CKPT_ENOMEM;
	}
	void *buf = NULL;
	size_t n = 0;
	int rc = ckpt_vfs_read_all(&buf, &n, vfs, file, CKPT_MAX_SAVED_MODEL_BYTES);
	if (rc == CKPT_OK)
		rc = ckpt_saved_model_parse(out, buf, n);
	if (rc < 0)
		ckpt__error_annotate(file, NULL);
	ckpt__free(buf);
	ckpt__free(file);
	return rc;
}

/*
 * `ckpt inspect` of a SavedModel: the MetaGraphs, signatures and variable
 * synchronization that saved_model.pb records (ckpt/saved_model.h).
 *
 * The text is what `saved_model_cli show --all --dir D` prints for each
 * tag-set and SignatureDef (tensorflow/python/tools/saved_model_cli.py
 * _show_all, _show_inputs_outputs_mgd, _print_tensor_info), line for line:
 * MetaGraphs sorted by their tag lists, signatures and tensors by key. The
 * op lists and concrete functions it prints after that come from the graph
 * and from loading the model in Python, and are not shown.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

static void dtype_text(char *buf, size_t n, int dtype)
{
	const char *name = ckpt_tf_dtype_name(dtype);
	if (name)
		snprintf(buf, n, "%s", name);
	else
		snprintf(buf, n, "DataType(%d)", dtype);
}

static void print_tensor(FILE *f, const char *map, const ckpt_sm_tensor *t)
{
	char dt[48];
	int i;

	dtype_text(dt, sizeof(dt), t->dtype);
	fprintf(f, "    %s['%s'] tensor_info:\n", map, cli_vis(t->key));
	fprintf(f, "        dtype: %s\n", dt);
	if (t->rank < 0) {
		fprintf(f, "        shape: unknown_rank\n");
	} else {
		fprintf(f, "        shape: (");
		for (i = 0; i < t->rank; i++)
			fprintf(f, "%s%" PRId64, i ? ", " : "", t->dims[i]);
		fprintf(f, ")\n");
	}
	/* TensorInfo.name, as saved_model_cli prints it: "" for sparse and composite tensors */
	fprintf(f, "        name: %s\n", t->encoding == CKPT_SM_ENCODING_NAME ? cli_vis(t->name) : "");
}

typedef struct mg_ref {
	const ckpt_sm_meta_graph *m;
	size_t index;
} mg_ref;

/* Python's list < list on the tag lists; equal lists keep file order (sorted() is stable). */
static int cmp_tags(const void *a, const void *b)
{
	const mg_ref *x = a, *y = b;
	size_t i;

	for (i = 0; i < x->m->ntags && i < y->m->ntags; i++) {
		int c = strcmp(x->m->tags[i], y->m->tags[i]);
		if (c)
			return c;
	}
	if (x->m->ntags != y->m->ntags)
		return x->m->ntags < y->m->ntags ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

void cli_print_saved_model(FILE *f, const ckpt_saved_model *sm)
{
	mg_ref *order;
	size_t i, k, t;

	order = calloc(sm->nmeta_graphs ? sm->nmeta_graphs : 1, sizeof(*order));
	if (!order)
		return;
	for (i = 0; i < sm->nmeta_graphs; i++) {
		order[i].m = &sm->meta_graphs[i];
		order[i].index = i;
	}
	qsort(order, sm->nmeta_graphs, sizeof(*order), cmp_tags);
	fprintf(f, "saved model: %zu MetaGraph%s (saved_model.pb)\n", sm->nmeta_graphs, sm->nmeta_graphs == 1 ? "" : "s");
	for (i = 0; i < sm->nmeta_graphs; i++) {
		const ckpt_sm_meta_graph *m = order[i].m;
		fprintf(f, "\nMetaGraphDef with tag-set: '");
		for (t = 0; t < m->ntags; t++)
			fprintf(f, "%s%s", t ? ", " : "", cli_vis(m->tags[t]));
		fprintf(f, "' contains the following SignatureDefs:\n");
		for (k = 0; k < m->nsignatures; k++) {
			const ckpt_sm_signature *s = &m->signatures[k];
			fprintf(f, "\nsignature_def['%s']:\n", cli_vis(s->key));
			fprintf(f, "  The given SavedModel SignatureDef contains the following input(s):\n");
			for (t = 0; t < s->ninputs; t++)
				print_tensor(f, "inputs", &s->inputs[t]);
			fprintf(f, "  The given SavedModel SignatureDef contains the following output(s):\n");
			for (t = 0; t < s->noutputs; t++)
				print_tensor(f, "outputs", &s->outputs[t]);
			fprintf(f, "  Method name is: %s\n", cli_vis(s->method_name));
		}
	}
	fprintf(f, "\n");
	free(order);
}

static void json_dims(jw *w, int rank, const int64_t *dims)
{
	int i;

	if (rank < 0) {
		jw_null(w);
		return;
	}
	jw_array_begin(w);
	for (i = 0; i < rank; i++)
		jw_int(w, dims[i]);
	jw_array_end(w);
}

static void json_dtype(jw *w, int dtype)
{
	char dt[48];

	dtype_text(dt, sizeof(dt), dtype);
	jw_string(w, dt);
}

static void json_tensors(jw *w, const ckpt_sm_tensor *t, size_t n)
{
	static const char *const enc[] = { "none", "name", "coo_sparse", "composite" };
	size_t i;

	jw_array_begin(w);
	for (i = 0; i < n; i++) {
		jw_object_begin(w);
		jw_key(w, "key");
		jw_string(w, t[i].key);
		jw_key(w, "name");
		jw_string(w, t[i].name);
		jw_key(w, "encoding");
		jw_string(w, (unsigned)t[i].encoding < 4 ? enc[t[i].encoding] : "none");
		jw_key(w, "dtype");
		json_dtype(w, t[i].dtype);
		jw_key(w, "shape");
		json_dims(w, t[i].rank, t[i].dims);
		jw_object_end(w);
	}
	jw_array_end(w);
}

static void json_signature(jw *w, const ckpt_sm_signature *s)
{
	jw_object_begin(w);
	jw_key(w, "name");
	jw_string(w, s->key);
	jw_key(w, "method_name");
	jw_string(w, s->method_name);
	jw_key(w, "inputs");
	json_tensors(w, s->inputs, s->ninputs);
	jw_key(w, "outputs");
	json_tensors(w, s->outputs, s->noutputs);
	jw_object_end(w);
}

static void json_variable(jw *w, const ckpt_sm_variable *v)
{
	jw_object_begin(w);
	jw_key(w, "node_id");
	jw_int(w, v->node_id);
	jw_key(w, "name");
	jw_string(w, v->name);
	jw_key(w, "dtype");
	json_dtype(w, v->dtype);
	jw_key(w, "shape");
	json_dims(w, v->rank, v->dims);
	jw_key(w, "trainable");
	jw_bool(w, v->trainable);
	jw_key(w, "synchronization");
	jw_string(w, cli_sync_name(v->sync));
	jw_key(w, "aggregation");
	jw_string(w, cli_aggregation_name(v->aggregation));
	jw_object_end(w);
}

void cli_print_saved_model_json(jw *w, const ckpt_saved_model *sm)
{
	size_t i, k;

	jw_object_begin(w);
	jw_key(w, "schema_version");
	jw_int(w, sm->schema_version);
	jw_key(w, "meta_graphs");
	jw_array_begin(w);
	for (i = 0; i < sm->nmeta_graphs; i++) {
		const ckpt_sm_meta_graph *m = &sm->meta_graphs[i];
		jw_object_begin(w);
		jw_key(w, "tags");
		jw_array_begin(w);
		for (k = 0; k < m->ntags; k++)
			jw_string(w, m->tags[k]);
		jw_array_end(w);
		jw_key(w, "tensorflow_version");
		jw_string(w, m->tensorflow_version);
		jw_key(w, "signatures");
		jw_array_begin(w);
		for (k = 0; k < m->nsignatures; k++)
			json_signature(w, &m->signatures[k]);
		jw_array_end(w);
		jw_key(w, "variables");
		jw_array_begin(w);
		for (k = 0; k < m->nvariables; k++)
			json_variable(w, &m->variables[k]);
		jw_array_end(w);
		jw_object_end(w);
	}
	jw_array_end(w);
	jw_object_end(w);
}

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

static void json_dims(FILE *f, int rank, const int64_t *dims)
{
	int i;

	if (rank < 0) {
		fputs("null", f);
		return;
	}
	fputc('[', f);
	for (i = 0; i < rank; i++)
		fprintf(f, "%s%" PRId64, i ? ", " : "", dims[i]);
	fputc(']', f);
}

static void json_dtype(FILE *f, int dtype)
{
	char dt[48];

	dtype_text(dt, sizeof(dt), dtype);
	jout_cstring(f, dt);
}

static void json_tensors(FILE *f, const ckpt_sm_tensor *t, size_t n)
{
	static const char *const enc[] = { "none", "name", "coo_sparse", "composite" };
	size_t i;

	fputc('[', f);
	for (i = 0; i < n; i++) {
		fputs(i ? ", {\"key\": " : "{\"key\": ", f);
		jout_cstring(f, t[i].key);
		fputs(", \"name\": ", f);
		jout_cstring(f, t[i].name);
		fputs(", \"encoding\": ", f);
		jout_cstring(f, (unsigned)t[i].encoding < 4 ? enc[t[i].encoding] : "none");
		fputs(", \"dtype\": ", f);
		json_dtype(f, t[i].dtype);
		fputs(", \"shape\": ", f);
		json_dims(f, t[i].rank, t[i].dims);
		fputc('}', f);
	}
	fputc(']', f);
}

void cli_print_saved_model_json(FILE *f, const ckpt_saved_model *sm)
{
	size_t i, k;

	fprintf(f, "{\"schema_version\": %" PRId64 ", \"meta_graphs\": [", sm->schema_version);
	for (i = 0; i < sm->nmeta_graphs; i++) {
		const ckpt_sm_meta_graph *m = &sm->meta_graphs[i];
		fputs(i ? ", {\"tags\": [" : "{\"tags\": [", f);
		for (k = 0; k < m->ntags; k++) {
			fputs(k ? ", " : "", f);
			jout_cstring(f, m->tags[k]);
		}
		fputs("], \"tensorflow_version\": ", f);
		jout_cstring(f, m->tensorflow_version);
		fputs(", \"signatures\": [", f);
		for (k = 0; k < m->nsignatures; k++) {
			const ckpt_sm_signature *s = &m->signatures[k];
			fputs(k ? ", {\"name\": " : "{\"name\": ", f);
			jout_cstring(f, s->key);
			fputs(", \"method_name\": ", f);
			jout_cstring(f, s->method_name);
			fputs(", \"inputs\": ", f);
			json_tensors(f, s->inputs, s->ninputs);
			fputs(", \"outputs\": ", f);
			json_tensors(f, s->outputs, s->noutputs);
			fputc('}', f);
		}
		fputs("], \"variables\": [", f);
		for (k = 0; k < m->nvariables; k++) {
			const ckpt_sm_variable *v = &m->variables[k];
			fprintf(f, "%s{\"node_id\": %d, \"name\": ", k ? ", " : "", v->node_id);
			jout_cstring(f, v->name);
			fputs(", \"dtype\": ", f);
			json_dtype(f, v->dtype);
			fputs(", \"shape\": ", f);
			json_dims(f, v->rank, v->dims);
			fprintf(f, ", \"trainable\": %s, \"synchronization\": ", v->trainable ? "true" : "false");
			jout_cstring(f, cli_sync_name(v->sync));
			fputs(", \"aggregation\": ", f);
			jout_cstring(f, cli_aggregation_name(v->aggregation));
			fputc('}', f);
		}
		fputs("]}", f);
	}
	fputs("]}", f);
}

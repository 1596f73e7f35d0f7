/*
 * SavedModels: saved_model.pb's tag-sets, signatures and variable
 * synchronization (ckpt/saved_model.h, `ckpt inspect`), and sync-on-read
 * variables on load — from the file (a SavedModel's SavedObjectGraph) and
 * from the caller (sync rules, `--sync-on-read`).
 *
 * The reference is TensorFlow itself (the venv of $CKPT_ORACLE_PYTHON):
 * tests/oracles/savedmodel_write.py writes SavedModels at test time (a
 * tf.Module with several signatures, dtypes and unknown dims, user-named
 * tf.keras metrics, a Keras model (tf.saved_model.save and Keras 3's
 * model.export()), a TF1 SavedModelBuilder model with a
 * DT_FLOAT_REF output and two MetaGraphs) and a plain checkpoint with
 * user-named metrics; tests/oracles/savedmodel_dump.py decodes each
 * saved_model.pb with TensorFlow's protobuf classes and runs
 * saved_model_cli's `show --all` (in process, and once as the real tool).
 * The fixture SavedModels of tests/fixtures/tf are checked the same way.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include "ckpt/ckpt.h"
#include "test_support.h"
#include "saved_model.pb-c.h"

#define WRITER CKPT_SOURCE_DIR "/tests/oracles/savedmodel_write.py"
#define DUMPER CKPT_SOURCE_DIR "/tests/oracles/savedmodel_dump.py"

static const char *const fixture_dirs[] = {
	"tf/tensorflow__half_plus_two_v1/00000123",
	"tf/tfx__keras_adam_savedmodel",
	"tf/serving__half_plus_two_tf2_cpu_snappy/00000123",
	"tf/tensorflow__OptimizerSlotVariableModule_snappy",
	"tf/tensorflow__VarsAndArithmeticObjectGraph",
	"tf/tfjs__int64_multiply",
};
#define NFIXTURES (sizeof(fixture_dirs) / sizeof(fixture_dirs[0]))

static json_t *parse_json(const char *text, const char *what)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);
	cr_assert_not_null(j, "%s: not JSON (%s at line %d): %.2000s", what, e.text, e.line, text);
	return j;
}

/* Run the oracle python on argv (NULL-terminated after the script); its stdout as JSON. */
static json_t *oracle(const char *script, const char *const *args)
{
	char *argv[40];
	int n = 0;
	argv[n++] = (char *)ts_oracle_python();
	argv[n++] = (char *)script;
	for (; *args && n < 39; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	ts_run_result r;
	cr_assert_eq(ts_run(&r, argv), 0, "could not start %s", argv[0]);
	ts_assert_exit(&r, 0, "%s failed (%d): %s", script, r.status, r.err);
	json_t *j = parse_json(r.out, script);
	ts_run_free(&r);
	return j;
}

/* Write the TF SavedModels into a fresh directory; returns it (free + ts_rmtree). */
static char *write_models(json_t **summary)
{
	char *dir = ts_tmpdir();
	const char *args[] = { dir, NULL };
	json_t *s = oracle(WRITER, args);
	if (summary)
		*summary = s;
	else
		json_decref(s);
	return dir;
}

/* ---- the C structures as the oracle's JSON ---- */

static json_t *dims_json(int rank, const int64_t *dims)
{
	if (rank < 0)
		return json_null();
	json_t *a = json_array();
	for (int i = 0; i < rank; i++)
		json_array_append_new(a, json_integer(dims[i]));
	return a;
}

static json_t *dtype_json(int dtype)
{
	const char *n = ckpt_tf_dtype_name(dtype);
	char buf[48];
	if (!n) {
		snprintf(buf, sizeof(buf), "DataType(%d)", dtype);
		n = buf;
	}
	return json_string(n);
}

static json_t *tensors_json(const ckpt_sm_tensor *t, size_t n)
{
	static const char *const enc[] = { "none", "name", "coo_sparse", "composite" };
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:o, s:o}", "key", t[i].key, "name", t[i].name,
			"encoding", enc[t[i].encoding], "dtype", dtype_json(t[i].dtype), "shape",
			dims_json(t[i].rank, t[i].dims)));
	return a;
}

static const char *sync_name(ckpt_synchronization s)
{
	return s == CKPT_SYNC_ON_READ ? "on_read" : s == CKPT_SYNC_ON_WRITE ? "on_write" : "auto";
}

static const char *agg_name(ckpt_aggregation a)
{
	static const char *const n[] = { "none", "sum", "mean", "only_first_replica" };
	return (unsigned)a < 4 ? n[a] : "?";
}

static json_t *saved_model_json(const ckpt_saved_model *sm)
{
	json_t *mgs = json_array();
	for (size_t i = 0; i < sm->nmeta_graphs; i++) {
		const ckpt_sm_meta_graph *m = &sm->meta_graphs[i];
		json_t *tags = json_array(), *sigs = json_array(), *vars = json_array();
		for (size_t k = 0; k < m->ntags; k++)
			json_array_append_new(tags, json_string(m->tags[k]));
		for (size_t k = 0; k < m->nsignatures; k++) {
			const ckpt_sm_signature *s = &m->signatures[k];
			json_array_append_new(sigs, json_pack("{s:s, s:s, s:o, s:o}", "name", s->key, "method_name",
				s->method_name, "inputs", tensors_json(s->inputs, s->ninputs), "outputs",
				tensors_json(s->outputs, s->noutputs)));
		}
		for (size_t k = 0; k < m->nvariables; k++) {
			const ckpt_sm_variable *v = &m->variables[k];
			json_array_append_new(vars, json_pack("{s:i, s:s, s:o, s:o, s:b, s:s, s:s}", "node_id", v->node_id,
				"name", v->name, "dtype", dtype_json(v->dtype), "shape", dims_json(v->rank, v->dims),
				"trainable", v->trainable, "synchronization", sync_name(v->sync), "aggregation",
				agg_name(v->aggregation)));
		}
		json_array_append_new(mgs, json_pack("{s:o, s:s, s:o, s:o}", "tags", tags, "tensorflow_version",
			m->tensorflow_version, "signatures", sigs, "variables", vars));
	}
	return json_pack("{s:I, s:o}", "schema_version", (json_int_t)sm->schema_version, "meta_graphs", mgs);
}

static void assert_json_same(json_t *got, json_t *want, const char *what)
{
	if (json_equal(got, want))
		return;
	char *g = json_dumps(got, JSON_SORT_KEYS), *w = json_dumps(want, JSON_SORT_KEYS);
	cr_assert_fail("%s differs from TensorFlow's:\n ours: %.3000s\n   TF: %.3000s", what, g, w);
}

/* The tag-set / SignatureDef part of `ckpt inspect DIR`. */
static char *inspect_signatures_text(const char *text)
{
	const char *a = strstr(text, "saved model: ");
	cr_assert_not_null(a, "no saved model section in:\n%s", text);
	a = strchr(a, '\n');
	cr_assert_not_null(a);
	a++;
	const char *b = strstr(a, "object graph:");
	cr_assert_not_null(b, "no object graph after the saved model section:\n%s", text);
	return strndup(a, (size_t)(b - a));
}

/* Everything checked for one SavedModel directory against its oracle entry. */
static void check_dir(const char *dir, json_t *want)
{
	/* the API: ckpt_saved_model_read of the directory */
	ckpt_saved_model *sm = NULL;
	cr_assert_eq(ckpt_saved_model_read(&sm, dir, NULL), CKPT_OK, "%s: %s", dir, ckpt_error_last()->message);
	json_t *got = saved_model_json(sm);
	assert_json_same(got, json_object_get(want, "saved_model"), dir);
	json_decref(got);
	ckpt_saved_model_free(sm);

	/* the reader: the same SavedModel, and each variable's sync from it */
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, dir, NULL), CKPT_OK, "%s: %s", dir, ckpt_error_last()->message);
	cr_assert_not_null(ckpt_reader_saved_model(r), "%s: the reader did not attach saved_model.pb", dir);
	json_t *sync = json_object_get(want, "sync");
	size_t nsync = 0;
	for (size_t i = 0; i < ckpt_reader_num_entries(r); i++) {
		const ckpt_var_info *v = ckpt_reader_var(r, i);
		json_t *w = json_object_get(sync, v->name);
		if (!w) {
			cr_assert_eq(v->sync_source, CKPT_SYNC_SOURCE_NONE, "%s: %s has sync from nowhere", dir, v->name);
			continue;
		}
		nsync++;
		cr_assert_eq(v->sync_source, CKPT_SYNC_SOURCE_SAVED_MODEL, "%s: %s", dir, v->name);
		cr_assert_str_eq(sync_name(v->sync), json_string_value(json_array_get(w, 0)), "%s: %s", dir, v->name);
		cr_assert_str_eq(agg_name(v->aggregation), json_string_value(json_array_get(w, 1)), "%s: %s", dir, v->name);
		if (v->sync == CKPT_SYNC_ON_READ && v->aggregation == CKPT_AGG_SUM)
			cr_assert_eq(v->role, CKPT_ROLE_METRIC, "%s: %s", dir, v->name);
	}
	cr_assert_eq(nsync, json_object_size(sync), "%s: %zu variables with sync, TF says %zu", dir, nsync,
		json_object_size(sync));
	ckpt_reader_free(r);

	/* ckpt inspect --json */
	ts_run_result res = ts_cli("inspect", "--json", dir, NULL);
	ts_assert_exit(&res, 0, "%s: exit %d: %s", dir, res.status, res.err);
	json_t *doc = parse_json(res.out, dir);
	assert_json_same(json_object_get(doc, "saved_model"), json_object_get(want, "saved_model"), dir);
	size_t k;
	json_t *v;
	nsync = 0;
	json_array_foreach(json_object_get(doc, "variables"), k, v) {
		json_t *w = json_object_get(sync, json_string_value(json_object_get(v, "name")));
		cr_assert_eq(w != NULL, json_object_get(v, "sync") != NULL, "%s: %s", dir,
			json_string_value(json_object_get(v, "name")));
		if (!w)
			continue;
		nsync++;
		cr_assert(json_equal(json_object_get(v, "sync"), json_array_get(w, 0)));
		cr_assert(json_equal(json_object_get(v, "aggregation"), json_array_get(w, 1)));
		cr_assert_str_eq(json_string_value(json_object_get(v, "sync_source")), "saved_model");
	}
	cr_assert_eq(nsync, json_object_size(sync));
	json_decref(doc);
	ts_run_free(&res);

	/* ckpt inspect: the text saved_model_cli show --all prints */
	res = ts_cli("inspect", dir, NULL);
	ts_assert_exit(&res, 0, "%s: exit %d: %s", dir, res.status, res.err);
	char *ours = inspect_signatures_text(res.out);
	const char *theirs = json_string_value(json_object_get(want, "show_all"));
	cr_assert_not_null(theirs);
	size_t tl = strlen(theirs);
	cr_assert(strlen(ours) == tl + 1 && strncmp(ours, theirs, tl) == 0 && ours[tl] == '\n',
		"%s: inspect text differs from saved_model_cli show --all:\n--- ours\n%s--- saved_model_cli\n%s", dir, ours,
		theirs);
	json_t *tool = json_object_get(want, "show_all_cli");
	if (tool)
		cr_assert_str_eq(json_string_value(tool), theirs, "%s: saved_model_cli (the tool) and _show_all differ", dir);
	free(ours);
	ts_run_free(&res);
}

Test(saved_model, signatures_and_sync_match_tensorflow, .timeout = 600)
{
	char *tmp = write_models(NULL);
	char *gen[4] = { ts_join(tmp, "module"), ts_join(tmp, "keras"), ts_join(tmp, "tf1"), ts_join(tmp, "keras_export") };
	const char *args[NFIXTURES + 5];
	char *cli_arg[2];
	size_t n = 0;
	char fx[NFIXTURES][1024];
	for (size_t i = 0; i < NFIXTURES; i++) {
		snprintf(fx[i], sizeof(fx[i]), "%s", ts_fixture(fixture_dirs[i]));
		args[n++] = fx[i];
	}
	/* the real saved_model_cli too, for a TF2 and the TF1 model (each a few seconds) */
	for (size_t i = 0; i < 2; i++) {
		const char *g = gen[i ? 2 : 0];
		cli_arg[i] = malloc(strlen(g) + 5);
		cr_assert_not_null(cli_arg[i]);
		sprintf(cli_arg[i], "cli:%s", g);
	}
	args[n++] = cli_arg[0];
	args[n++] = gen[1];
	args[n++] = cli_arg[1];
	args[n++] = gen[3];
	args[n] = NULL;
	json_t *want = oracle(DUMPER, args);
	for (size_t i = 0; i < NFIXTURES; i++)
		check_dir(fx[i], json_object_get(want, fx[i]));
	for (size_t i = 0; i < 4; i++) {
		json_t *w = json_object_get(want, gen[i]);
		cr_assert_not_null(w, "no oracle entry for %s", gen[i]);
		check_dir(gen[i], w);
	}
	/* what the generated models must contain for the comparison to mean something */
	json_t *mod = json_object_get(json_object_get(want, gen[0]), "sync");
	cr_assert_not_null(json_object_get(mod, "train_accuracy/total/.ATTRIBUTES/VARIABLE_VALUE"));
	cr_assert_not_null(json_object_get(mod, "moving_mean/.ATTRIBUTES/VARIABLE_VALUE"));
	const char *tf1 = json_string_value(json_object_get(json_object_get(want, gen[2]), "show_all"));
	cr_assert(strstr(tf1, "dtype: DT_FLOAT_REF") && strstr(tf1, "tag-set: 'train, gpu'"), "%s", tf1);
	const char *m = json_string_value(json_object_get(json_object_get(want, gen[0]), "show_all"));
	cr_assert(strstr(m, "shape: unknown_rank") && strstr(m, "shape: (-1, -1, 3)") && strstr(m, "DT_UINT8"), "%s", m);
	json_decref(want);
	for (size_t i = 0; i < 4; i++)
		free(gen[i]);
	free(cli_arg[0]);
	free(cli_arg[1]);
	ts_rmtree(tmp);
	free(tmp);
}

/* ---- load: sync-on-read where saved_model.pb or the caller says it ---- */

static ckpt_variable *find_var(ckpt_checkpoint *ck, const char *path)
{
	ckpt_variable *v = NULL;
	cr_assert_eq(ckpt_status_of(v = ckpt_checkpoint_find_variable(ck, path)), CKPT_OK, "%s: %s", path,
		     ckpt_error_last()->message);
	return v;
}

static float read_float(const ckpt_variable *v)
{
	float f;
	cr_assert_eq(ckpt_variable_read(v, &f, sizeof(f)), CKPT_OK);
	return f;
}

static ckpt_checkpoint *load_mirrored(const char *path, int replicas, const ckpt_checkpoint_options *o,
	ckpt_strategy **s)
{
	ckpt_checkpoint *ck;
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_strategy_mirrored_new(s, replicas), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(*s), CKPT_OK);
	int rc = ckpt_checkpoint_load(&ck, &st, path, o);
	cr_assert_eq(ckpt_scope_exit(*s), CKPT_OK);
	cr_assert_eq(rc, CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_num_unmatched(st), 0);
	ckpt_restore_status_free(st);
	return ck;
}

static double metric_value(json_t *summary, const char *key)
{
	json_t *v = json_object_get(json_object_get(summary, "metrics"), key);
	cr_assert(json_is_number(v), "writer did not report %s", key);
	return json_number_value(v);
}

/* restore --json: kind of each variable by stored key */
static const char *restored_kind(json_t *doc, const char *key)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(doc, "variables"), i, v)
		if (strcmp(json_string_value(json_object_get(v, "name")), key) == 0)
			return json_string_value(json_object_get(v, "kind"));
	cr_assert_fail("restore --json does not list %s", key);
	return NULL;
}

#define ACC_TOTAL "train_accuracy/total/.ATTRIBUTES/VARIABLE_VALUE"
#define ACC_COUNT "train_accuracy/count/.ATTRIBUTES/VARIABLE_VALUE"
#define LOSS_TOTAL "train_loss/total/.ATTRIBUTES/VARIABLE_VALUE"

Test(saved_model, load_and_restore_sync_on_read, .timeout = 300)
{
	json_t *summary;
	char *tmp = write_models(&summary);
	char *module = ts_join(tmp, "module"), *ckdir = ts_join(tmp, "ckpt/ckpt-1");
	ckpt_strategy *s;

	/* (a) the SavedModel says it: sync-on-read SUM metrics, MEAN moving_mean, mirrored weights */
	ckpt_checkpoint *ck = load_mirrored(module, 2, NULL, &s);
	ckpt_variable *total = find_var(ck, "train_accuracy/total"), *mm = find_var(ck, "moving_mean");
	ckpt_variable *w = find_var(ck, "w");
	cr_assert_eq(ckpt_variable_kind(total), CKPT_VAR_SYNC_ON_READ);
	cr_assert_eq(ckpt_variable_aggregation(total), CKPT_AGG_SUM);
	cr_assert_eq(ckpt_variable_kind(find_var(ck, "train_loss/total")), CKPT_VAR_SYNC_ON_READ);
	cr_assert_eq(ckpt_variable_kind(mm), CKPT_VAR_SYNC_ON_READ);
	cr_assert_eq(ckpt_variable_aggregation(mm), CKPT_AGG_MEAN);
	cr_assert_eq(ckpt_variable_kind(w), CKPT_VAR_MIRRORED);
	cr_assert_eq(read_float(total), 3.0f);
	cr_assert_eq(read_float(find_var(ck, "train_accuracy/count")), 4.0f);
	cr_assert_eq(read_float(find_var(ck, "train_loss/total")), 2.75f);
	/* SUM is split across the replicas, so that the aggregate is the stored value */
	float r0, r1;
	memcpy(&r0, ckpt_variable_replica_data(total, 0), 4);
	memcpy(&r1, ckpt_variable_replica_data(total, 1), 4);
	cr_assert_eq(r0 + r1, 3.0f);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);

	/* the caller may override the file: ON_WRITE makes the metric mirrored again */
	ckpt_sync_rule over[] = { { "train_accuracy/*", CKPT_SYNC_ON_WRITE, CKPT_AGG_NONE } };
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.sync_rules = over;
	o.num_sync_rules = 1;
	ck = load_mirrored(module, 2, &o, &s);
	cr_assert_eq(ckpt_variable_kind(find_var(ck, "train_accuracy/total")), CKPT_VAR_MIRRORED);
	cr_assert_eq(ckpt_variable_kind(find_var(ck, "train_loss/total")), CKPT_VAR_SYNC_ON_READ);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);

	/* (b) a plain checkpoint says nothing: mirrored without a rule ... */
	ck = load_mirrored(ckdir, 2, NULL, &s);
	cr_assert_eq(ckpt_variable_kind(find_var(ck, "train_accuracy/total")), CKPT_VAR_MIRRORED);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);

	/* ... sync-on-read SUM with one, the rule's copy owned by the checkpoint */
	char *pattern = strdup("train_*");
	ckpt_sync_rule rules[] = { { pattern, CKPT_SYNC_ON_READ, CKPT_AGG_SUM } };
	o.sync_rules = rules;
	ck = load_mirrored(ckdir, 4, &o, &s);
	free(pattern); /* copied */
	total = find_var(ck, "train_accuracy/total");
	cr_assert_eq(ckpt_variable_kind(total), CKPT_VAR_SYNC_ON_READ);
	cr_assert_eq(ckpt_variable_aggregation(total), CKPT_AGG_SUM);
	cr_assert_eq(ckpt_variable_num_replicas(total), 4);
	cr_assert_eq(ckpt_variable_kind(find_var(ck, "w")), CKPT_VAR_MIRRORED);
	cr_assert_eq(read_float(total), (float)metric_value(summary, ACC_TOTAL));
	cr_assert_eq(read_float(find_var(ck, "train_accuracy/count")), (float)metric_value(summary, ACC_COUNT));
	cr_assert_eq(read_float(find_var(ck, "train_loss/total")), (float)metric_value(summary, LOSS_TOTAL));
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);

	/* the hook sees the rule's word and can still change it */
	ckpt_reader *r;
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	oo.sync_rules = rules;
	oo.num_sync_rules = 1;
	rules[0].pattern = "train_accuracy/*";
	cr_assert_eq(ckpt_reader_open(&r, ckdir, &oo), CKPT_OK);
	size_t idx;
	cr_assert_eq(ckpt_reader_find(&idx, r, ACC_TOTAL), CKPT_OK);
	cr_assert_eq(ckpt_reader_var(r, idx)->sync, CKPT_SYNC_ON_READ);
	cr_assert_eq(ckpt_reader_var(r, idx)->sync_source, CKPT_SYNC_SOURCE_RULE);
	cr_assert_eq(ckpt_reader_var(r, idx)->role, CKPT_ROLE_METRIC);
	cr_assert_eq(ckpt_reader_find(&idx, r, LOSS_TOTAL), CKPT_OK);
	cr_assert_eq(ckpt_reader_var(r, idx)->sync_source, CKPT_SYNC_SOURCE_NONE);
	cr_assert_eq(ckpt_reader_var(r, idx)->role, CKPT_ROLE_MODEL, "user-named metrics are not guessed");
	cr_assert_null(ckpt_reader_saved_model(r));
	ckpt_reader_free(r);
	/* a catch-all glob leaves the object graph entry alone */
	ckpt_sync_rule all = { "*", CKPT_SYNC_ON_READ, CKPT_AGG_SUM };
	oo.sync_rules = &all;
	cr_assert_eq(ckpt_reader_open(&r, ckdir, &oo), CKPT_OK);
	cr_assert_eq(ckpt_reader_find(&idx, r, CKPT_OBJECT_GRAPH_KEY), CKPT_OK);
	cr_assert_eq(ckpt_reader_var(r, idx)->sync_source, CKPT_SYNC_SOURCE_NONE);
	cr_assert_eq(ckpt_reader_var(r, idx)->role, CKPT_ROLE_OTHER);
	cr_assert_eq(ckpt_reader_find(&idx, r, "w/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	cr_assert_eq(ckpt_reader_var(r, idx)->role, CKPT_ROLE_METRIC);
	ckpt_reader_free(r);

	/* the CLI: restore and inspect with --sync-on-read */
	ts_run_result res = ts_cli("restore", ckdir, "--strategy", "mirrored", "--replicas", "2", "--json",
		"--sync-on-read", "train_accuracy/*=sum,train_loss/*=mean", NULL);
	ts_assert_exit(&res, 0, "exit %d: %s", res.status, res.err);
	json_t *doc = parse_json(res.out, "restore --json");
	cr_assert_str_eq(restored_kind(doc, ACC_TOTAL), "sync-on-read");
	cr_assert_str_eq(restored_kind(doc, ACC_COUNT), "sync-on-read");
	cr_assert_str_eq(restored_kind(doc, LOSS_TOTAL), "sync-on-read");
	cr_assert_str_eq(restored_kind(doc, "w/.ATTRIBUTES/VARIABLE_VALUE"), "mirrored");
	json_decref(doc);
	ts_run_free(&res);
	res = ts_cli("restore", ckdir, "--strategy", "mirrored", "--json", NULL);
	ts_assert_exit(&res, 0, "exit %d: %s", res.status, res.err);
	doc = parse_json(res.out, "restore --json");
	cr_assert_str_eq(restored_kind(doc, ACC_TOTAL), "mirrored");
	json_decref(doc);
	ts_run_free(&res);
	res = ts_cli("restore", module, "--strategy", "mirrored", "--json", NULL);
	ts_assert_exit(&res, 0, "exit %d: %s", res.status, res.err);
	doc = parse_json(res.out, "restore --json");
	cr_assert_str_eq(restored_kind(doc, ACC_TOTAL), "sync-on-read");
	cr_assert_str_eq(restored_kind(doc, "moving_mean/.ATTRIBUTES/VARIABLE_VALUE"), "sync-on-read");
	json_decref(doc);
	ts_run_free(&res);

	res = ts_cli("inspect", "--json", ckdir, "--sync-on-read", "train_accuracy/*=sum,train_loss/total=first", NULL);
	ts_assert_exit(&res, 0, "exit %d: %s", res.status, res.err);
	doc = parse_json(res.out, "inspect --json");
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(doc, "variables"), i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		const char *role = json_string_value(json_object_get(v, "role"));
		if (!strcmp(name, ACC_TOTAL) || !strcmp(name, ACC_COUNT)) {
			cr_assert_str_eq(role, "metric", "%s", name);
			cr_assert_str_eq(json_string_value(json_object_get(v, "aggregation")), "sum");
			cr_assert_str_eq(json_string_value(json_object_get(v, "sync_source")), "rule");
		} else if (!strcmp(name, LOSS_TOTAL)) {
			cr_assert_str_eq(json_string_value(json_object_get(v, "aggregation")), "only_first_replica");
			cr_assert_str_eq(role, "model", "only SUM accumulators are called metrics");
		} else {
			cr_assert_null(json_object_get(v, "sync"), "%s", name);
		}
	}
	json_decref(doc);
	ts_run_free(&res);
	res = ts_cli("inspect", ckdir, NULL);
	ts_assert_exit(&res, 0, "exit status");
	cr_assert(strstr(res.out, "train_accuracy/total/.ATTRIBUTES/VARIABLE_VALUE") && !strstr(res.out, "synchronization ("),
		"%s", res.out);
	ts_run_free(&res);
	res = ts_cli("inspect", ckdir, "--sync-on-read", "train_accuracy/*=sum", NULL);
	ts_assert_exit(&res, 0, "exit status");
	cr_assert(strstr(res.out, "synchronization (2 variables):") && strstr(res.out, "sync-on-read sum  (--sync-on-read)"),
		"%s", res.out);
	ts_run_free(&res);
	const char *bad[] = { "train_*", "=sum", "x=avg", "a=sum,", "" };
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		res = ts_cli("restore", ckdir, "--strategy", "mirrored", "--sync-on-read", bad[i], NULL);
		ts_assert_exit(&res, 2, "'%s': exit %d", bad[i], res.status);
		cr_assert(strstr(res.err, "--sync-on-read wants"), "%s", res.err);
		ts_run_free(&res);
	}

	json_decref(summary);
	free(module);
	free(ckdir);
	ts_rmtree(tmp);
	free(tmp);
}

/* ---- options: versions and rules ---- */

Test(saved_model, option_versions_and_rule_checks)
{
	const char *fx = ts_fixture("tf/tfx__keras_adam_savedmodel");
	ckpt_reader *r = NULL;
	/* a version-1 caller (no sync_rules fields) still opens */
	struct { unsigned version; ckpt_vfs *vfs; int no_verify; uint64_t memory_budget; } v1 = { 1, NULL, 0, 0 };
	cr_assert_eq(ckpt_reader_open(&r, fx, (const ckpt_open_options *)(const void *)&v1), CKPT_OK);
	cr_assert_not_null(ckpt_reader_saved_model(r));
	ckpt_reader_free(r);
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	oo.version = 3;
	cr_assert_eq(ckpt_reader_open(&r, fx, &oo), CKPT_EINVAL);

	ckpt_checkpoint_options co = CKPT_CHECKPOINT_OPTIONS_INIT;
	ckpt_checkpoint *ck = NULL;
	co.version = 1;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &co), CKPT_OK);
	ckpt_checkpoint_free(ck);
	co.version = 2; /* before restore_single_pass */
	cr_assert_eq(ckpt_checkpoint_new(&ck, &co), CKPT_OK);
	ckpt_checkpoint_free(ck);
	co.version = CKPT_CHECKPOINT_OPTIONS_VERSION + 1;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &co), CKPT_EINVAL);

	ckpt_sync_rule bad[] = {
		{ NULL, CKPT_SYNC_ON_READ, CKPT_AGG_SUM },
		{ "x", CKPT_SYNC_ON_READ, CKPT_AGG_NONE },
		{ "x", CKPT_SYNC_AUTO, CKPT_AGG_SUM },
		{ "", CKPT_SYNC_ON_READ, CKPT_AGG_SUM },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		oo = (ckpt_open_options)CKPT_OPEN_OPTIONS_INIT;
		oo.sync_rules = &bad[i];
		oo.num_sync_rules = 1;
		cr_assert_eq(ckpt_reader_open(&r, fx, &oo), CKPT_EINVAL, "rule %zu", i);
		cr_assert_str_neq(ckpt_error_last()->message, "");
		co = (ckpt_checkpoint_options)CKPT_CHECKPOINT_OPTIONS_INIT;
		co.sync_rules = &bad[i];
		co.num_sync_rules = 1;
		cr_assert_eq(ckpt_checkpoint_new(&ck, &co), CKPT_EINVAL, "rule %zu", i);
	}
	oo = (ckpt_open_options)CKPT_OPEN_OPTIONS_INIT;
	oo.num_sync_rules = 2;
	cr_assert_eq(ckpt_reader_open(&r, fx, &oo), CKPT_EINVAL);

	/* matching: the key, or its object path */
	ckpt_sync_rule m = { "train_accuracy/*", CKPT_SYNC_ON_READ, CKPT_AGG_SUM };
	cr_assert(ckpt_sync_rule_matches(&m, ACC_TOTAL));
	cr_assert(ckpt_sync_rule_matches(&m, "train_accuracy/total"));
	cr_assert(!ckpt_sync_rule_matches(&m, "model/train_accuracy/total/.ATTRIBUTES/VARIABLE_VALUE"));
	m.pattern = "*/total";
	cr_assert(ckpt_sync_rule_matches(&m, ACC_TOTAL));
	cr_assert(!ckpt_sync_rule_matches(&m, ACC_COUNT));

	/* ckpt_saved_model_read: a directory without saved_model.pb, and one with only the text form */
	ckpt_saved_model *sm = NULL;
	cr_assert_eq(ckpt_saved_model_read(&sm, ts_fixture("tf/tensorflow__lso_ckpt_tf2.2"), NULL), CKPT_ENOTFOUND);
	cr_assert(strstr(ckpt_error_last()->path, "saved_model.pb"), "%s", ckpt_error_last()->path);
	char *tmp = ts_tmpdir(), *txt = ts_join(tmp, "saved_model.pbtxt");
	cr_assert_eq(ts_write_file(txt, "meta_graphs {}\n", 15), 0);
	cr_assert_eq(ckpt_saved_model_read(&sm, tmp, NULL), CKPT_EUNSUPPORTED);
	cr_assert_null(sm);
	free(txt);
	ts_rmtree(tmp);
	free(tmp);
	cr_assert_eq(ckpt_saved_model_read(&sm, ts_fixture("tf/tfjs__int64_multiply/saved_model.pb"), NULL), CKPT_OK);
	cr_assert_eq(sm->nmeta_graphs, 1);
	ckpt_saved_model_free(sm);
	ckpt_saved_model_free(NULL);

	/* dtype names as types.proto spells them */
	cr_assert_str_eq(ckpt_tf_dtype_name(1), "DT_FLOAT");
	cr_assert_str_eq(ckpt_tf_dtype_name(101), "DT_FLOAT_REF");
	cr_assert_str_eq(ckpt_tf_dtype_name(109), "DT_INT64_REF");
	cr_assert_str_eq(ckpt_tf_dtype_name(0), "DT_INVALID");
	cr_assert_null(ckpt_tf_dtype_name(99));
}

/* ---- hostile saved_model.pb ---- */

static void *pack_model(CkptTf__SavedModel *m, size_t *n)
{
	*n = ckpt_tf__saved_model__get_packed_size(m);
	void *b = malloc(*n ? *n : 1);
	ckpt_tf__saved_model__pack(m, b);
	return b;
}

/*
 * One meta graph with `nsig` SignatureDef entries, all keyed "s" (entry i's
 * method name is "m<i>"), each with one input `input_key` (padded with 'k' to
 * key_len bytes) of `rank` dims.
 */
static void *model_with_sigs(size_t *n, size_t nsig, size_t rank, const char *input_key, size_t key_len)
{
	static CkptTf__TensorShapeProto__Dim dims[40], *dp[40];
	CkptTf__TensorShapeProto shape = CKPT_TF__TENSOR_SHAPE_PROTO__INIT;
	for (size_t i = 0; i < rank; i++) {
		ckpt_tf__tensor_shape_proto__dim__init(&dims[i]);
		dims[i].size = (int64_t)i + 1;
		dp[i] = &dims[i];
	}
	shape.n_dim = rank;
	shape.dim = dp;
	CkptTf__TensorInfo ti = CKPT_TF__TENSOR_INFO__INIT;
	ti.encoding_case = CKPT_TF__TENSOR_INFO__ENCODING_NAME;
	ti.name = "x:0";
	ti.dtype = 101;
	ti.tensor_shape = &shape;
	char *key = malloc(key_len + 1);
	memset(key, 'k', key_len);
	key[key_len] = '\0';
	if (input_key)
		memcpy(key, input_key, strlen(input_key) < key_len ? strlen(input_key) : key_len);
	CkptTf__SignatureDef__InputsEntry in = CKPT_TF__SIGNATURE_DEF__INPUTS_ENTRY__INIT, *inp = &in;
	in.key = key;
	in.value = &ti;
	CkptTf__SignatureDef sig[4];
	CkptTf__MetaGraphDef__SignatureDefEntry se[4], *sep[4];
	char method[4][8];
	for (size_t i = 0; i < nsig && i < 4; i++) {
		ckpt_tf__signature_def__init(&sig[i]);
		sig[i].n_inputs = 1;
		sig[i].inputs = &inp;
		snprintf(method[i], sizeof(method[i]), "m%zu", i);
		sig[i].method_name = method[i];
		ckpt_tf__meta_graph_def__signature_def_entry__init(&se[i]);
		se[i].key = "s";
		se[i].value = &sig[i];
		sep[i] = &se[i];
	}
	CkptTf__MetaGraphDef mg = CKPT_TF__META_GRAPH_DEF__INIT, *mgp = &mg;
	mg.n_signature_def = nsig;
	mg.signature_def = sep;
	CkptTf__SavedModel sm = CKPT_TF__SAVED_MODEL__INIT;
	sm.n_meta_graphs = 1;
	sm.meta_graphs = &mgp;
	void *b = pack_model(&sm, n);
	free(key);
	return b;
}

static void *model_with(size_t *n, size_t rank, const char *input_key, size_t key_len)
{
	return model_with_sigs(n, 1, rank, input_key, key_len);
}

Test(saved_model, hostile_inputs)
{
	ckpt_saved_model *sm = NULL;
	size_t n;
	void *b = model_with(&n, 2, "k", 1);
	cr_assert_eq(ckpt_saved_model_parse(&sm, b, n), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(sm->meta_graphs[0].signatures[0].inputs[0].rank, 2);
	cr_assert_eq(sm->meta_graphs[0].signatures[0].inputs[0].dims[1], 2);
	ckpt_saved_model_free(sm);
	/* every prefix: parses, or fails with EFORMAT and a message; never crashes */
	for (size_t k = 0; k < n; k++) {
		int rc = ckpt_saved_model_parse(&sm, b, k);
		cr_assert(rc == CKPT_OK || rc == CKPT_EFORMAT, "prefix %zu: %d", k, rc);
		if (rc < 0)
			cr_assert_str_neq(ckpt_error_last()->message, "");
		ckpt_saved_model_free(sm);
		sm = NULL;
	}
	free(b);
	/* caps */
	b = model_with(&n, CKPT_MAX_RANK + 1, "k", 1);
	cr_assert_eq(ckpt_saved_model_parse(&sm, b, n), CKPT_ELIMIT);
	cr_assert(strstr(ckpt_error_last()->message, "rank 33"), "%s", ckpt_error_last()->message);
	cr_assert_null(sm);
	free(b);
	b = model_with(&n, 1, NULL, CKPT_MAX_NAME_LEN + 1);
	cr_assert_eq(ckpt_saved_model_parse(&sm, b, n), CKPT_ELIMIT);
	free(b);
	cr_assert_eq(ckpt_saved_model_parse(&sm, "\x0a\xff\xff\xff\xff\x0f", 6), CKPT_EFORMAT);

	/* repeated map keys: the last one wins, as in TensorFlow's protobuf runtimes */
	b = model_with_sigs(&n, 3, 1, "k", 1);
	cr_assert_eq(ckpt_saved_model_parse(&sm, b, n), CKPT_OK);
	cr_assert_eq(sm->meta_graphs[0].nsignatures, 1);
	cr_assert_str_eq(sm->meta_graphs[0].signatures[0].method_name, "m2");
	ckpt_saved_model_free(sm);
	free(b);

	/* a broken saved_model.pb fails the open of the SavedModel, naming the file */
	char *tmp = ts_tmpdir(), *dir = ts_join(tmp, "sm");
	cr_assert_eq(ts_copy(ts_fixture("tf/tfx__keras_adam_savedmodel"), dir), 0);
	char *pb = ts_join(dir, "saved_model.pb");
	size_t len;
	char *text = ts_read_file(pb, &len);
	cr_assert_not_null(text);
	chmod(pb, 0644);
	cr_assert_eq(ts_write_file(pb, text, len / 2), 0);
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, dir, NULL), CKPT_EFORMAT);
	cr_assert_not_null(ckpt_error_last()->path);
	cr_assert(strstr(ckpt_error_last()->path, "saved_model.pb"), "%s", ckpt_error_last()->path);
	ts_run_result res = ts_cli("inspect", dir, NULL);
	ts_assert_exit(&res, 1, "exit status");
	cr_assert(strstr(res.err, "saved_model.pb"), "%s", res.err);
	ts_run_free(&res);
	free(text);
	free(pb);
	free(dir);
	ts_rmtree(tmp);
	free(tmp);
}

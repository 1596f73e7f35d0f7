/*
 * Synchronization of stored variables: what a reader's entries get in
 * ckpt_var_info.sync / aggregation / sync_source, and the role that follows.
 *
 * A TensorBundle does not record synchronization. Two places do say it:
 *  - a SavedModel's saved_model.pb: each SavedVariable of the
 *    SavedObjectGraph has `synchronization` and `aggregation`. Its node ids
 *    are the checkpoint's TrackableObjectGraph node ids (TF's save.py
 *    builds both from one graph view; the SavedObjectGraph may have more
 *    nodes after them, for functions), so node i's VARIABLE_VALUE attribute
 *    names the entry. An attribute whose full_name disagrees with the
 *    SavedVariable's name is left alone rather than guessed at.
 *  - the caller's ckpt_sync_rule list (glob on key or object path), which
 *    wins over the file.
 * A sync-on-read SUM entry is a metric accumulator (tf.keras
 * Metric.add_weight makes exactly those), so its role becomes "metric";
 * sync-on-read MEAN (BatchNormalization's moving statistics) keeps its role.
 */
#include <fnmatch.h>
#include <string.h>
#include "reader/format_registry.h"
#include "ckpt/saved_model.h"

int ckpt_sync_rule_matches(const ckpt_sync_rule *rule, const char *key)
{
	if (!rule || !rule->pattern || !key)
		return 0;
	if (fnmatch(rule->pattern, key, 0) == 0)
		return 1;
	const char *attr = strstr(key, "/.ATTRIBUTES/");
	if (!attr)
		return 0;
	char *path = ckpt__strndup(key, (size_t)(attr - key));
	int hit = path && fnmatch(rule->pattern, path, 0) == 0;
	ckpt__free(path);
	return hit;
}

int ckpt__sync_rules_check(const ckpt_sync_rule *rules, size_t n)
{
	if (n && !rules)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "%zu sync rules but a NULL array", n);
	for (size_t i = 0; i < n; i++) {
		const ckpt_sync_rule *r = &rules[i];
		if (!r->pattern || !*r->pattern)
			return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "sync rule %zu has no pattern", i);
		if (r->sync == CKPT_SYNC_ON_READ) {
			if (r->aggregation != CKPT_AGG_SUM && r->aggregation != CKPT_AGG_MEAN &&
			    r->aggregation != CKPT_AGG_ONLY_FIRST_REPLICA)
				return ckpt__fail(CKPT_EINVAL, NULL, r->pattern, -1,
					"sync rule '%s': sync-on-read needs aggregation SUM, MEAN or ONLY_FIRST_REPLICA (got %d)",
					r->pattern, (int)r->aggregation);
		} else if (r->sync != CKPT_SYNC_ON_WRITE) {
			return ckpt__fail(CKPT_EINVAL, NULL, r->pattern, -1,
				"sync rule '%s': sync must be CKPT_SYNC_ON_READ or CKPT_SYNC_ON_WRITE (got %d)", r->pattern,
				(int)r->sync);
		}
	}
	return CKPT_OK;
}

int ckpt__sync_rules_copy(ckpt_sync_rule **out, const ckpt_sync_rule *rules, size_t n)
{
	*out = NULL;
	CKPT_TRY(ckpt__sync_rules_check(rules, n));
	if (!n)
		return CKPT_OK;
	ckpt_sync_rule *c = ckpt__calloc(n, sizeof(*c));
	if (!c)
		return CKPT_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		c[i] = rules[i];
		if (!(c[i].pattern = ckpt__strdup(rules[i].pattern))) {
			ckpt__sync_rules_free(c, i);
			return CKPT_ENOMEM;
		}
	}
	*out = c;
	return CKPT_OK;
}

void ckpt__sync_rules_free(ckpt_sync_rule *rules, size_t n)
{
	if (!rules)
		return;
	for (size_t i = 0; i < n; i++)
		ckpt__free((char *)rules[i].pattern);
	ckpt__free(rules);
}

/* The meta graph that carries the object graph (TF2 writes one; TF1 none). */
static const ckpt_sm_meta_graph *object_meta_graph(const ckpt_saved_model *sm)
{
	for (size_t i = 0; i < sm->nmeta_graphs; i++)
		if (sm->meta_graphs[i].nobjects)
			return &sm->meta_graphs[i];
	return NULL;
}

static void apply_saved_model(ckpt_reader *r)
{
	const ckpt_sm_meta_graph *mg = r->saved_model ? object_meta_graph(r->saved_model) : NULL;
	const ckpt_object_graph *g = r->graph;
	if (!mg || !g)
		return;
	for (size_t i = 0; i < mg->nvariables; i++) {
		const ckpt_sm_variable *v = &mg->variables[i];
		if (v->sync == CKPT_SYNC_AUTO || v->node_id < 0 || (size_t)v->node_id >= g->nnodes)
			continue;
		const ckpt_og_node *n = &g->nodes[v->node_id];
		for (size_t k = 0; k < n->nattrs; k++) {
			const ckpt_og_attr *a = &n->attrs[k];
			size_t idx;
			if (!a->name || strcmp(a->name, CKPT_VARIABLE_VALUE_KEY) != 0 || !a->checkpoint_key)
				continue;
			if (a->full_name && *a->full_name && v->name && *v->name && strcmp(a->full_name, v->name) != 0)
				continue; /* not the node we think it is */
			if (!ckpt__reader_lookup(r, a->checkpoint_key, &idx))
				continue;
			r->vars[idx].sync = v->sync;
			r->vars[idx].aggregation = v->aggregation;
			r->vars[idx].sync_source = CKPT_SYNC_SOURCE_SAVED_MODEL;
		}
	}
}

int ckpt__reader_apply_sync(ckpt_reader *r, const ckpt_sync_rule *rules, size_t n)
{
	CKPT_TRY(ckpt__sync_rules_check(rules, n));
	apply_saved_model(r);
	for (size_t i = 0; i < r->nvars; i++) {
		ckpt_var_info *v = &r->vars[i];
		if (strcmp(v->name, CKPT_OBJECT_GRAPH_KEY) == 0)
			continue; /* the graph itself is no variable, whatever a glob says */
		for (size_t k = 0; k < n; k++) {
			if (!ckpt_sync_rule_matches(&rules[k], v->name))
				continue;
			v->sync = rules[k].sync;
			v->aggregation = rules[k].sync == CKPT_SYNC_ON_READ ? rules[k].aggregation : CKPT_AGG_NONE;
			v->sync_source = CKPT_SYNC_SOURCE_RULE;
			break;
		}
		if (v->sync == CKPT_SYNC_ON_READ && v->aggregation == CKPT_AGG_SUM && v->dtype != CKPT_DT_STRING)
			v->role = CKPT_ROLE_METRIC;
	}
	return CKPT_OK;
}

/*
 * What a stored key belongs to: model, optimizer, metric or other. A small
 * ordered rule table over TF2 object paths, TF1 variable names and Keras
 * HDF5 dataset paths; the first matching rule wins, the default is model.
 */
#include <string.h>
#include "internal.h"

enum match { PREFIX, CONTAINS, SUFFIX, COMPONENT, COMPONENT_PREFIX };

typedef struct rule {
	enum match how;
	const char *pat;
	ckpt_role role;
} rule;

static const rule rules[] = {
	/* optimizer state: TF2 slots and hyper-parameters, TF1 slot variables, Keras h5 */
	{ CONTAINS, ".OPTIMIZER_SLOT", CKPT_ROLE_OPTIMIZER },
	{ PREFIX, "optimizer/", CKPT_ROLE_OPTIMIZER },
	{ CONTAINS, "/optimizer/", CKPT_ROLE_OPTIMIZER },
	{ PREFIX, "optimizer_weights/", CKPT_ROLE_OPTIMIZER },
	{ CONTAINS, "/optimizer_weights/", CKPT_ROLE_OPTIMIZER },
	{ PREFIX, "training/", CKPT_ROLE_OPTIMIZER },
	{ COMPONENT, "beta1_power", CKPT_ROLE_OPTIMIZER },
	{ COMPONENT, "beta2_power", CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, "/Adam", CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, "/Adam_1", CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, "/Momentum", CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, "/Adagrad", CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, "/RMSProp", CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, "/RMSProp_1", CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, "/Ftrl", CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, "/Ftrl_1", CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, "/accumulator", CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, "/linear", CKPT_ROLE_OPTIMIZER },
	{ COMPONENT, "iter", CKPT_ROLE_OPTIMIZER },          /* OptimizerV2 hyper-parameters */
	{ COMPONENT, "beta_1", CKPT_ROLE_OPTIMIZER },
	{ COMPONENT, "beta_2", CKPT_ROLE_OPTIMIZER },
	{ COMPONENT, "learning_rate", CKPT_ROLE_OPTIMIZER },
	/* metrics */
	{ PREFIX, "keras_api/metrics/", CKPT_ROLE_METRIC },
	{ CONTAINS, "/metrics/", CKPT_ROLE_METRIC },
	{ COMPONENT_PREFIX, "metric", CKPT_ROLE_METRIC },
	/* bookkeeping */
	{ COMPONENT, "save_counter", CKPT_ROLE_OTHER },
	{ COMPONENT, "global_step", CKPT_ROLE_OTHER },
	{ COMPONENT, "_CHECKPOINTABLE_OBJECT_GRAPH", CKPT_ROLE_OTHER },
	{ COMPONENT, "step", CKPT_ROLE_OTHER },
	{ COMPONENT, "rng", CKPT_ROLE_OTHER },
};

/* Does some "/"-separated component of key[0:n] equal (or start with) pat? */
static int component(const char *key, size_t n, const char *pat, int prefix_only)
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

ckpt_role ckpt__role_from_key(const char *key)
{
	if (!key)
		return CKPT_ROLE_OTHER;
	size_t len = strlen(key);
	/* match object paths, not the "/.ATTRIBUTES/VARIABLE_VALUE" tail */
	const char *attr = strstr(key, "/.ATTRIBUTES/");
	size_t n = attr ? (size_t)(attr - key) : len;
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		const rule *r = &rules[i];
		size_t pl = strlen(r->pat);
		int hit = 0;
		switch (r->how) {
		case PREFIX: hit = len >= pl && memcmp(key, r->pat, pl) == 0; break;
		case CONTAINS: hit = strstr(key, r->pat) != NULL; break;
		case SUFFIX: hit = n >= pl && memcmp(key + n - pl, r->pat, pl) == 0; break;
		case COMPONENT: hit = component(key, n, r->pat, 0); break;
		case COMPONENT_PREFIX: hit = component(key, n, r->pat, 1); break;
		}
		if (hit)
			return r->role;
	}
	return CKPT_ROLE_MODEL;
}

const char *ckpt_role_name(ckpt_role r)
{
	switch (r) {
	case CKPT_ROLE_MODEL: return "model";
	case CKPT_ROLE_OPTIMIZER: return "optimizer";
	case CKPT_ROLE_METRIC: return "metric";
	case CKPT_ROLE_OTHER: return "other";
	}
	return "model";
}

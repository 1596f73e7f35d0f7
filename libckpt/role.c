/*
 * What a stored key belongs to: model, optimizer, metric or other. A small
 * ordered rule table over TF2 object paths, TF1 variable names and Keras
 * HDF5 dataset paths; the first matching rule wins, the default is model.
 */
#include <stdint.h>
#include <string.h>
#include "internal.h"

enum match { PREFIX, CONTAINS, SUFFIX, COMPONENT, COMPONENT_PREFIX };

typedef struct rule {
	enum match how;
	const char *pat;
	size_t len;
	ckpt_role role;
} rule;

#define PAT(s) s, sizeof(s) - 1
static const rule rules[] = {
	/* optimizer state: TF2 slots and hyper-parameters, TF1 slot variables, Keras h5 */
	{ CONTAINS, PAT(".OPTIMIZER_SLOT"), CKPT_ROLE_OPTIMIZER },
	{ PREFIX, PAT("optimizer/"), CKPT_ROLE_OPTIMIZER },
	{ CONTAINS, PAT("/optimizer/"), CKPT_ROLE_OPTIMIZER },
	{ PREFIX, PAT("optimizer_weights/"), CKPT_ROLE_OPTIMIZER },
	{ CONTAINS, PAT("/optimizer_weights/"), CKPT_ROLE_OPTIMIZER },
	{ PREFIX, PAT("training/"), CKPT_ROLE_OPTIMIZER },
	{ COMPONENT, PAT("beta1_power"), CKPT_ROLE_OPTIMIZER },
	{ COMPONENT, PAT("beta2_power"), CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, PAT("/Adam"), CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, PAT("/Adam_1"), CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, PAT("/Momentum"), CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, PAT("/Adagrad"), CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, PAT("/RMSProp"), CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, PAT("/RMSProp_1"), CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, PAT("/Ftrl"), CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, PAT("/Ftrl_1"), CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, PAT("/accumulator"), CKPT_ROLE_OPTIMIZER },
	{ SUFFIX, PAT("/linear"), CKPT_ROLE_OPTIMIZER },
	{ COMPONENT, PAT("iter"), CKPT_ROLE_OPTIMIZER },          /* OptimizerV2 hyper-parameters */
	{ COMPONENT, PAT("beta_1"), CKPT_ROLE_OPTIMIZER },
	{ COMPONENT, PAT("beta_2"), CKPT_ROLE_OPTIMIZER },
	{ COMPONENT, PAT("learning_rate"), CKPT_ROLE_OPTIMIZER },
	/* metrics */
	{ PREFIX, PAT("keras_api/metrics/"), CKPT_ROLE_METRIC },
	{ CONTAINS, PAT("/metrics/"), CKPT_ROLE_METRIC },
	{ COMPONENT_PREFIX, PAT("metric"), CKPT_ROLE_METRIC },
	/* bookkeeping */
	{ COMPONENT, PAT("save_counter"), CKPT_ROLE_OTHER },
	{ COMPONENT, PAT("global_step"), CKPT_ROLE_OTHER },
	{ COMPONENT, PAT("_CHECKPOINTABLE_OBJECT_GRAPH"), CKPT_ROLE_OTHER },
	{ COMPONENT, PAT("step"), CKPT_ROLE_OTHER },
	{ COMPONENT, PAT("rng"), CKPT_ROLE_OTHER },
};
#undef PAT

#define NRULES (sizeof(rules) / sizeof(rules[0]))
_Static_assert(NRULES <= 64, "component hits are a 64-bit mask over the rules");

/*
 * Which COMPONENT / COMPONENT_PREFIX rules some "/"-separated component of
 * key[0:n] matches, as a mask over rule indexes: one pass over the key for
 * all of them (this runs once per entry when a checkpoint is opened).
 */
static uint64_t component_hits(const char *key, size_t n)
{
	uint64_t hits = 0;
	for (size_t i = 0; i < n;) {
		const char *c = memchr(key + i, '/', n - i);
		size_t j = c ? (size_t)(c - key) : n;
		size_t cl = j - i;
		for (size_t k = 0; k < NRULES; k++) {
			const rule *r = &rules[k];
			if ((r->how == COMPONENT && cl == r->len) || (r->how == COMPONENT_PREFIX && cl >= r->len))
				if (memcmp(key + i, r->pat, r->len) == 0)
					hits |= (uint64_t)1 << k;
		}
		i = j + 1;
	}
	return hits;
}

ckpt_role ckpt__role_from_key(const char *key)
{
	if (!key)
		return CKPT_ROLE_OTHER;
	size_t len = strlen(key);
	/* match object paths, not the "/.ATTRIBUTES/VARIABLE_VALUE" tail */
	const char *attr = strstr(key, "/.ATTRIBUTES/");
	size_t n = attr ? (size_t)(attr - key) : len;
	uint64_t comp = component_hits(key, n);
	for (size_t i = 0; i < NRULES; i++) {
		const rule *r = &rules[i];
		int hit = 0;
		switch (r->how) {
		case PREFIX: hit = len >= r->len && memcmp(key, r->pat, r->len) == 0; break;
		case CONTAINS: hit = strstr(key, r->pat) != NULL; break;
		case SUFFIX: hit = n >= r->len && memcmp(key + n - r->len, r->pat, r->len) == 0; break;
		case COMPONENT:
		case COMPONENT_PREFIX: hit = (comp >> i) & 1; break;
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

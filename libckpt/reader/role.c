/*
 * What a stored key belongs to: model, optimizer, metric, other or trainer
 * state. A small
 * ordered rule table over TF2 object paths, TF1 variable names and Keras
 * HDF5 dataset paths; the first matching rule wins, the default is model.
 */
#include <pthread.h>
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
	/* CONTAINS patterns that start with "/" are "/x/" with no other "/" (scan() relies on it) */
	/* the trainer's own state, first: its "step" or "rng" is not bookkeeping of the model (ckpt/host.h) */
	{ PREFIX, PAT("trainer_state/"), CKPT_ROLE_TRAINER },
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
 * One pass over the "/"-separated components of the whole key finds what
 * every rule but PREFIX / SUFFIX asks (this runs once per entry when a
 * checkpoint is opened; a strstr per CONTAINS rule cost more):
 *  - n, where the object path ends: the first "/.ATTRIBUTES/";
 *  - the COMPONENT / COMPONENT_PREFIX rules some component of key[0:n] matches;
 *  - the CONTAINS rules "/x/": a component x that has a "/" on both sides.
 * Result: a mask over rule indexes.
 */
/* First bytes a component must start with to match a component rule or a "/x/" rule (most start none). */
static unsigned char first_byte[256];
static pthread_once_t first_once = PTHREAD_ONCE_INIT;

static void first_init(void)
{
	for (size_t k = 0; k < NRULES; k++) {
		const rule *r = &rules[k];
		if (r->how == COMPONENT || r->how == COMPONENT_PREFIX)
			first_byte[(unsigned char)r->pat[0]] = 1;
		else if (r->how == CONTAINS && r->pat[0] == '/')
			first_byte[(unsigned char)r->pat[1]] = 1;
	}
}

static uint64_t scan(const char *key, size_t len, size_t *n_out)
{
	pthread_once(&first_once, first_init);
	uint64_t hits = 0;
	size_t n = len;
	for (size_t i = 0; i <= len;) {
		const char *c = memchr(key + i, '/', len - i);
		size_t j = c ? (size_t)(c - key) : len;
		size_t cl = j - i;
		int inner = i > 0 && c; /* "/" before and after */
		if (n == len && inner && cl == 11 && memcmp(key + i, ".ATTRIBUTES", 11) == 0)
			n = i - 1;
		for (size_t k = 0; cl && first_byte[(unsigned char)key[i]] && k < NRULES; k++) {
			const rule *r = &rules[k];
			int hit = 0;
			if (r->how == COMPONENT || r->how == COMPONENT_PREFIX)
				hit = j <= n && (r->how == COMPONENT ? cl == r->len : cl >= r->len) &&
					memcmp(key + i, r->pat, r->len) == 0;
			else if (r->how == CONTAINS && r->pat[0] == '/')
				hit = inner && cl + 2 == r->len && memcmp(key + i, r->pat + 1, cl) == 0;
			if (hit)
				hits |= (uint64_t)1 << k;
		}
		if (!c)
			break;
		i = j + 1;
	}
	*n_out = n;
	return hits;
}

ckpt_role ckpt__role_from_key(const char *key)
{
	if (!key)
		return CKPT_ROLE_OTHER;
	size_t len = strlen(key), n;
	/* match object paths (key[0:n]), not the "/.ATTRIBUTES/VARIABLE_VALUE" tail */
	uint64_t found = scan(key, len, &n);
	for (size_t i = 0; i < NRULES; i++) {
		const rule *r = &rules[i];
		int hit = 0;
		switch (r->how) {
		case PREFIX: hit = len >= r->len && memcmp(key, r->pat, r->len) == 0; break;
		case CONTAINS: hit = r->pat[0] == '/' ? (int)((found >> i) & 1) : strstr(key, r->pat) != NULL; break;
		case SUFFIX: hit = n >= r->len && memcmp(key + n - r->len, r->pat, r->len) == 0; break;
		case COMPONENT:
		case COMPONENT_PREFIX: hit = (found >> i) & 1; break;
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
	case CKPT_ROLE_TRAINER: return "trainer";
	}
	return "model";
}

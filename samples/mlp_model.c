/*
 * The MLP shared by the sample trainers (see mlp_model.h for the layout).
 *
 * Determinism: every replica computes its gradients in a fixed sample
 * order, the all-reduce sums in replica order, and every replica applies the
 * same Adam update to its own copy, so mirrored copies stay bit-identical
 * and a resumed run repeats the straight run bit for bit (for the same
 * number of replicas).
 */
#define _POSIX_C_SOURCE 200809L
#include "mlp_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- RNG ---- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void mlp_rng_seed(mlp_rng *r, uint64_t seed)
{
	int i;

	for (i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t mlp_rng_next(mlp_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

double mlp_rng_uniform(mlp_rng *r)
{
	return (double)(mlp_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

void mlp_rng_normal_fill(mlp_rng *r, float *dst, int n)
{
	const double two_pi = 6.283185307179586;
	int i;

	for (i = 0; i < n; i += 2) {
		double u1 = 1.0 - mlp_rng_uniform(r); /* (0, 1]: log is finite */
		double u2 = mlp_rng_uniform(r);
		double rad = sqrt(-2.0 * log(u1));

		dst[i] = (float)(rad * cos(two_pi * u2));
		if (i + 1 < n)
			dst[i + 1] = (float)(rad * sin(two_pi * u2));
	}
}

/* ---- dataset ---- */

void mlp_data_make(mlp_data *d, mlp_rng *r)
{
	mlp_rng_normal_fill(r, d->x, MLP_SAMPLES * MLP_IN);
	mlp_rng_normal_fill(r, d->y, MLP_SAMPLES * MLP_OUT);
}

/* ---- errors and options ---- */

int mlp_report(const char *prefix, int rc)
{
	char buf[1024];

	fprintf(stderr, "%s: %s: %s\n", prefix, ckpt_status_name(rc),
		ckpt_error_format(ckpt_error_last(), buf, sizeof buf));
	return rc;
}

int mlp_parse_int(const char *prog, const char *flag, const char *value)
{
	char *end;
	long v;

	if (!value) {
		fprintf(stderr, "%s: %s needs a value\n", prog, flag);
		exit(2);
	}
	v = strtol(value, &end, 10);
	if (*value == '\0' || *end != '\0' || v < 1 || v > 1000000) {
		fprintf(stderr, "%s: %s: '%s' is not a positive integer\n", prog, flag, value);
		exit(2);
	}
	return (int)v;
}

/* ---- model ---- */

#define TRY(expr) do { int rc_ = (expr); if (rc_ < 0) return rc_; } while (0)

static int add_var(ckpt_variable **out, ckpt_object *obj, const char *local, const char *full, ckpt_dtype dt,
	int rank, const int64_t *dims, const void *init, int trainable)
{
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	ckpt_shape shape;

	TRY(ckpt_shape_make(&shape, rank, dims));
	o.initial_value = init;
	o.trainable = trainable;
	return ckpt_status_of(out ? (*out = ckpt_object_add_variable(obj, local, full, dt, &shape, &o)) : ckpt_object_add_variable(obj, local, full, dt, &shape, &o));
}

static int add_dense(mlp_model *m, int k, int fan_in, int fan_out, mlp_rng *init)
{
	/* Keras defaults: glorot_uniform kernel, zero bias. */
	float kernel[MLP_IN * MLP_HIDDEN], bias[MLP_HIDDEN];
	double limit = sqrt(6.0 / (double)(fan_in + fan_out));
	int64_t kdims[2] = { fan_in, fan_out }, bdims[1] = { fan_out };
	char local[32], full[64];
	int i;

	for (i = 0; i < fan_in * fan_out; i++)
		kernel[i] = (float)(limit * (2.0 * mlp_rng_uniform(init) - 1.0));
	memset(bias, 0, sizeof bias);
	snprintf(local, sizeof local, "layer_with_weights-%d", k);
	TRY(ckpt_status_of(m->dense[k] = ckpt_object_new_child(m->model, local)));
	snprintf(full, sizeof full, k ? "mlp/dense_%d/kernel" : "mlp/dense/kernel", k);
	TRY(add_var(&m->kernel[k], m->dense[k], "kernel", full, CKPT_DT_FLOAT, 2, kdims, kernel, 1));
	snprintf(full, sizeof full, k ? "mlp/dense_%d/bias" : "mlp/dense/bias", k);
	return add_var(&m->bias[k], m->dense[k], "bias", full, CKPT_DT_FLOAT, 1, bdims, bias, 1);
}

static int add_metric_var(ckpt_variable **out, ckpt_object *metric, const char *local, const char *full)
{
	/* Metric state is per-replica and summed on read, as in tf.keras.metrics. */
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	ckpt_shape scalar;

	TRY(ckpt_shape_make(&scalar, 0, NULL));
	o.sync = CKPT_SYNC_ON_READ;
	o.aggregation = CKPT_AGG_SUM;
	o.trainable = 0;
	return ckpt_status_of(out ? (*out = ckpt_object_add_variable(metric, local, full, CKPT_DT_FLOAT, &scalar, &o)) : ckpt_object_add_variable(metric, local, full, CKPT_DT_FLOAT, &scalar, &o));
}

/* The loop's own state, tracked by pointer under the keys TF would use for variables. */
static const ckpt_host_field state_fields[] = {
	CKPT_HOST_SCALAR(mlp_train_state, step, CKPT_DT_INT64),
	CKPT_HOST_ARRAY(mlp_train_state, rng_state, CKPT_DT_INT64),
	CKPT_HOST_SCALAR(mlp_train_state, data_position, CKPT_DT_INT64),
};

static int build(mlp_model *m, mlp_rng *init)
{
	const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, decay = 0.0f;
	const int64_t zero = 0;
	ckpt_checkpoint_options co = CKPT_CHECKPOINT_OPTIONS_INIT;
	ckpt_object *root, *opt;
	int rc;

	co.check_mirrored = 1; /* a save fails if a replica-dependent update split the copies */
	TRY(ckpt_checkpoint_new(&m->ckpt, &co));
	root = ckpt_checkpoint_root(m->ckpt);

	TRY(ckpt_status_of(m->model = ckpt_object_new_child(root, "model")));
	TRY(add_dense(m, 0, MLP_IN, MLP_HIDDEN, init));
	TRY(add_dense(m, 1, MLP_HIDDEN, MLP_OUT, init));

	TRY(ckpt_optimizer_new(&opt, "Adam"));
	rc = ckpt_checkpoint_add(m->ckpt, "optimizer", opt);
	ckpt_object_free(opt); /* the root holds it now */
	TRY(rc);
	m->optimizer = opt;
	TRY(add_var(&m->iter, opt, "iter", "Adam/iter", CKPT_DT_INT64, 0, NULL, &zero, 0));
	TRY(add_var(&m->beta_1, opt, "beta_1", "Adam/beta_1", CKPT_DT_FLOAT, 0, NULL, &b1, 0));
	TRY(add_var(&m->beta_2, opt, "beta_2", "Adam/beta_2", CKPT_DT_FLOAT, 0, NULL, &b2, 0));
	TRY(add_var(&m->decay, opt, "decay", "Adam/decay", CKPT_DT_FLOAT, 0, NULL, &decay, 0));
	TRY(add_var(&m->learning_rate, opt, "learning_rate", "Adam/learning_rate", CKPT_DT_FLOAT, 0, NULL, &lr, 0));

	TRY(ckpt_status_of(m->metric = ckpt_object_new_child(root, "metric")));
	TRY(add_metric_var(&m->total, m->metric, "total", "mean_absolute_error/total"));
	TRY(add_metric_var(&m->count, m->metric, "count", "mean_absolute_error/count"));

	/* Custom state: what a bit-exact resume needs beyond weights and slots. */
	m->state.step = 0;
	memcpy(m->state.rng_state, init->s, sizeof m->state.rng_state);
	m->state.data_position = 0;
	TRY(ckpt_object_track_host_struct(root, &m->state, state_fields,
		sizeof state_fields / sizeof state_fields[0]));
	/* Created here, inside the scope, like every other variable of the tree. */
	return ckpt_status_of(m->save_counter = ckpt_checkpoint_save_counter_variable(m->ckpt));
}

int mlp_build_model(mlp_model *m, mlp_rng *init)
{
	int rc;

	memset(m, 0, sizeof *m);
	rc = build(m, init);
	if (rc < 0) {
		/* keep the error of the failing call, not of the cleanup */
		ckpt_checkpoint_free(m->ckpt);
		memset(m, 0, sizeof *m);
	}
	return rc;
}

static ckpt_variable **param(mlp_model *m, int i)
{
	return i % 2 == 0 ? &m->kernel[i / 2] : &m->bias[i / 2];
}

int mlp_build_slots(mlp_model *m)
{
	int i;

	/* Keras' Adam._create_slots order: every m, then every v. */
	for (i = 0; i < 4; i++)
		TRY(ckpt_status_of(m->m[i] = ckpt_optimizer_create_slot(m->optimizer, *param(m, i), "m", NULL)));
	for (i = 0; i < 4; i++)
		TRY(ckpt_status_of(m->v[i] = ckpt_optimizer_create_slot(m->optimizer, *param(m, i), "v", NULL)));
	return CKPT_OK;
}

int mlp_model_bind(mlp_model *m, ckpt_checkpoint *ckpt)
{
	ckpt_object *root = ckpt_checkpoint_root(ckpt);
	char path[64];
	int k, i;

	memset(m, 0, sizeof *m);
	m->ckpt = ckpt;
	TRY(ckpt_status_of(m->model = ckpt_object_find(root, "model")));
	TRY(ckpt_status_of(m->optimizer = ckpt_object_find(root, "optimizer")));
	TRY(ckpt_status_of(m->metric = ckpt_object_find(root, "metric")));
	for (k = 0; k < 2; k++) {
		snprintf(path, sizeof path, "model/layer_with_weights-%d", k);
		TRY(ckpt_status_of(m->dense[k] = ckpt_object_find(root, path)));
		TRY(ckpt_status_of(m->kernel[k] = ckpt_object_variable(m->dense[k], "kernel")));
		TRY(ckpt_status_of(m->bias[k] = ckpt_object_variable(m->dense[k], "bias")));
	}
	TRY(ckpt_status_of(m->iter = ckpt_checkpoint_find_variable(ckpt, "optimizer/iter")));
	TRY(ckpt_status_of(m->learning_rate = ckpt_checkpoint_find_variable(ckpt, "optimizer/learning_rate")));
	TRY(ckpt_status_of(m->beta_1 = ckpt_checkpoint_find_variable(ckpt, "optimizer/beta_1")));
	TRY(ckpt_status_of(m->beta_2 = ckpt_checkpoint_find_variable(ckpt, "optimizer/beta_2")));
	TRY(ckpt_status_of(m->decay = ckpt_checkpoint_find_variable(ckpt, "optimizer/decay")));
	TRY(ckpt_status_of(m->total = ckpt_checkpoint_find_variable(ckpt, "metric/total")));
	TRY(ckpt_status_of(m->count = ckpt_checkpoint_find_variable(ckpt, "metric/count")));
	for (i = 0; i < 4; i++) {
		m->m[i] = ckpt_optimizer_slot(m->optimizer, *param(m, i), "m");
		m->v[i] = ckpt_optimizer_slot(m->optimizer, *param(m, i), "v");
	}
	ckpt_error_clear();
	return CKPT_OK;
}

void mlp_model_free(mlp_model *m)
{
	ckpt_checkpoint_free(m->ckpt);
	memset(m, 0, sizeof *m);
}

int64_t mlp_epochs_done(const mlp_model *m)
{
	return m->state.step / MLP_STEPS_PER_EPOCH;
}

/* ---- one training step, run once per replica ---- */

typedef struct step_args {
	mlp_model *m;
	const mlp_data *d;
	const int *perm;  /* this epoch's sample order */
	int batch_start;  /* offset of the global batch within the epoch */
	float loss;       /* global-batch MSE, written by replica 0 */
} step_args;

/* Replica-local copies: plain pointers into this replica's buffers. */
typedef struct local_vars {
	float *w[4], *mo[4], *ve[4];
	float *lr, *b1, *b2, *decay, *total, *count;
	int64_t *iter;
} local_vars;

int mlp_local_f32(ckpt_variable *v, float **out)
{
	void *p;

	TRY(ckpt_status_of(p = ckpt_variable_local(v)));
	*out = p;
	return CKPT_OK;
}

int mlp_local_i64(ckpt_variable *v, int64_t **out)
{
	void *p;

	TRY(ckpt_status_of(p = ckpt_variable_local(v)));
	*out = p;
	return CKPT_OK;
}

static int get_locals(mlp_model *m, local_vars *l)
{
	int i;

	for (i = 0; i < 4; i++) {
		TRY(mlp_local_f32(*param(m, i), &l->w[i]));
		TRY(mlp_local_f32(m->m[i], &l->mo[i]));
		TRY(mlp_local_f32(m->v[i], &l->ve[i]));
	}
	TRY(mlp_local_f32(m->learning_rate, &l->lr));
	TRY(mlp_local_f32(m->beta_1, &l->b1));
	TRY(mlp_local_f32(m->beta_2, &l->b2));
	TRY(mlp_local_f32(m->decay, &l->decay));
	TRY(mlp_local_f32(m->total, &l->total));
	TRY(mlp_local_f32(m->count, &l->count));
	return mlp_local_i64(m->iter, &l->iter);
}

static const int param_size[4] = { MLP_IN * MLP_HIDDEN, MLP_HIDDEN, MLP_HIDDEN * MLP_OUT, MLP_OUT };

/* Forward and backward over this replica's share of the global batch. */
static float accumulate_grads(const local_vars *l, const step_args *a, int first, int count, float *g)
{
	const float *w1 = l->w[0], *b1 = l->w[1], *w2 = l->w[2], *b2 = l->w[3];
	float *gw1 = g, *gb1 = gw1 + param_size[0], *gw2 = gb1 + param_size[1], *gb2 = gw2 + param_size[2];
	float se_sum = 0.0f, ae_sum = 0.0f;
	int i, j, k;

	for (i = 0; i < count; i++) {
		int s = a->perm[first + i];
		const float *x = a->d->x + (size_t)s * MLP_IN;
		float z[MLP_HIDDEN], h[MLP_HIDDEN], out = b2[0], err, dout;

		for (j = 0; j < MLP_HIDDEN; j++) {
			z[j] = b1[j];
			for (k = 0; k < MLP_IN; k++)
				z[j] += x[k] * w1[k * MLP_HIDDEN + j];
			h[j] = z[j] > 0.0f ? z[j] : 0.0f;
			out += h[j] * w2[j];
		}
		err = out - a->d->y[s];
		se_sum += err * err;
		ae_sum += fabsf(err);
		/* d(sum of squared errors / global batch) / d out */
		dout = 2.0f * err / (float)MLP_GLOBAL_BATCH;
		gb2[0] += dout;
		for (j = 0; j < MLP_HIDDEN; j++) {
			float dz = z[j] > 0.0f ? dout * w2[j] : 0.0f;

			gw2[j] += dout * h[j];
			gb1[j] += dz;
			for (k = 0; k < MLP_IN; k++)
				gw1[k * MLP_HIDDEN + j] += dz * x[k];
		}
	}
	g[MLP_NPARAMS] = se_sum / (float)MLP_GLOBAL_BATCH;
	return ae_sum;
}

/* Keras Adam (TF's ApplyAdam kernel), the same on every replica. */
static void apply_adam(const local_vars *l, const float *g)
{
	float t = (float)(*l->iter + 1);
	float lr = *l->lr / (1.0f + *l->decay * (float)*l->iter);
	float b1 = *l->b1, b2 = *l->b2, eps = 1e-7f;
	float alpha = lr * sqrtf(1.0f - powf(b2, t)) / (1.0f - powf(b1, t));
	int i, j, off = 0;

	for (i = 0; i < 4; i++) {
		float *w = l->w[i], *mo = l->mo[i], *ve = l->ve[i];

		for (j = 0; j < param_size[i]; j++) {
			float gj = g[off + j];

			mo[j] += (gj - mo[j]) * (1.0f - b1);
			ve[j] += (gj * gj - ve[j]) * (1.0f - b2);
			w[j] -= (mo[j] * alpha) / (sqrtf(ve[j]) + eps);
		}
		off += param_size[i];
	}
	*l->iter += 1;
}

static int replica_step(ckpt_replica_ctx *ctx, void *arg)
{
	step_args *a = arg;
	int id = ckpt_replica_id(ctx), n = ckpt_replica_num_replicas(ctx);
	int per = MLP_GLOBAL_BATCH / n;
	float g[MLP_NPARAMS + 1];
	local_vars l;
	float ae_sum;

	TRY(get_locals(a->m, &l));
	memset(g, 0, sizeof g);
	ae_sum = accumulate_grads(&l, a, a->batch_start + id * per, per, g);
	/* gradients and loss summed over replicas: identical on every replica */
	TRY(ckpt_replica_all_reduce_f32(ctx, CKPT_REDUCE_SUM, g, MLP_NPARAMS + 1));
	apply_adam(&l, g);
	/* sync-on-read metric: each replica accumulates its own share */
	*l.total += ae_sum;
	*l.count += (float)per;
	if (id == 0)
		a->loss = g[MLP_NPARAMS];
	return CKPT_OK;
}

/* ---- the loop ---- */

static void shuffle(int *perm, mlp_rng *r)
{
	int i;

	for (i = 0; i < MLP_SAMPLES; i++)
		perm[i] = i;
	for (i = MLP_SAMPLES - 1; i > 0; i--) {
		int j = (int)(mlp_rng_next(r) % (uint64_t)(i + 1));
		int t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
}

static void progress(int tty, int64_t epoch, int64_t epochs, int done, int total)
{
	char bar[32];
	int i, width = 24, fill = done * width / total;

	for (i = 0; i < width; i++)
		bar[i] = i < fill ? '=' : (i == fill ? '>' : '.');
	bar[width] = '\0';
	/* on a terminal the bar redraws in place after every step */
	printf("%sepoch %lld/%lld [%s] %d/%d", tty ? "\r" : "", (long long)epoch, (long long)epochs, bar, done, total);
	fflush(stdout);
}

int mlp_print_variables(mlp_model *m, const char *indent)
{
	ckpt_tracked_list *list;
	size_t i, n, kinds[3] = { 0, 0, 0 };
	int copies[3] = { 0, 0, 0 }, k, sep = 0;

	TRY(ckpt_checkpoint_variables(&list, m->ckpt));
	n = ckpt_tracked_list_num_entries(list);
	for (i = 0; i < n; i++) {
		ckpt_variable *v = ckpt_tracked_list_get(list, i)->variable;

		k = (int)ckpt_variable_kind(v);
		kinds[k]++;
		copies[k] = ckpt_variable_num_replicas(v);
	}
	ckpt_tracked_list_free(list);
	printf("%s%zu variables:", indent, n);
	for (k = 0; k < 3; k++) {
		if (!kinds[k])
			continue;
		printf("%s %zu %s x%d", sep ? "," : "", kinds[k], ckpt_var_kind_name((ckpt_var_kind)k), copies[k]);
		sep = 1;
	}
	printf("\n");
	return CKPT_OK;
}

static int run_epoch(mlp_model *m, ckpt_strategy *s, const mlp_data *d, int64_t epoch, int64_t until,
	mlp_epoch_result *res)
{
	int tty = isatty(STDOUT_FILENO);
	int64_t pos;
	const float fzero = 0.0f;
	int perm[MLP_SAMPLES];
	step_args a;
	mlp_rng r;
	double loss_sum = 0.0;
	float total = 0.0f, count = 0.0f;
	int i, steps = 0, first_batch;

	/* The state holds the RNG at the epoch's start until the epoch ends, so
	 * a mid-epoch resume regenerates the same order. */
	memcpy(r.s, m->state.rng_state, sizeof r.s);
	shuffle(perm, &r);
	pos = m->state.data_position;
	if (pos < 0 || pos >= MLP_SAMPLES || pos % MLP_GLOBAL_BATCH != 0) {
		fprintf(stderr, "data_position %lld is not a batch boundary\n", (long long)pos);
		return CKPT_EINVAL;
	}
	if (pos == 0) {
		/* Keras resets metrics at the start of every epoch */
		TRY(ckpt_variable_assign(m->total, &fzero, sizeof fzero));
		TRY(ckpt_variable_assign(m->count, &fzero, sizeof fzero));
	}
	first_batch = (int)(pos / MLP_GLOBAL_BATCH);
	memset(&a, 0, sizeof a);
	a.m = m;
	a.d = d;
	a.perm = perm;
	for (i = first_batch; i < MLP_STEPS_PER_EPOCH; i++) {
		a.batch_start = i * MLP_GLOBAL_BATCH;
		TRY(ckpt_strategy_run(s, replica_step, &a));
		loss_sum += a.loss;
		steps++;
		/* host state: the loop updates it, once, outside replica context */
		m->state.step++;
		pos = (int64_t)(i + 1) * MLP_GLOBAL_BATCH;
		if (pos < MLP_SAMPLES)
			m->state.data_position = pos;
		if (tty)
			progress(1, epoch, until, i + 1, MLP_STEPS_PER_EPOCH);
	}
	/* epoch done: next epoch starts at sample 0 with the advanced RNG */
	memcpy(m->state.rng_state, r.s, sizeof m->state.rng_state);
	m->state.data_position = 0;
	TRY(ckpt_variable_read(m->total, &total, sizeof total));
	TRY(ckpt_variable_read(m->count, &count, sizeof count));
	res->loss = steps ? loss_sum / steps : 0.0;
	res->mae = count > 0.0f ? (double)total / (double)count : 0.0;
	if (!tty)
		progress(0, epoch, until, MLP_STEPS_PER_EPOCH, MLP_STEPS_PER_EPOCH);
	return CKPT_OK;
}

int mlp_train_step(mlp_model *m, ckpt_strategy *s, const mlp_data *d, int batch, float *loss)
{
	int perm[MLP_SAMPLES], i;
	step_args a;

	for (i = 0; i < MLP_SAMPLES; i++)
		perm[i] = i;
	memset(&a, 0, sizeof a);
	a.m = m;
	a.d = d;
	a.perm = perm;
	a.batch_start = (batch % MLP_STEPS_PER_EPOCH) * MLP_GLOBAL_BATCH;
	TRY(ckpt_strategy_run(s, replica_step, &a));
	if (loss)
		*loss = a.loss;
	return CKPT_OK;
}

int mlp_fit(mlp_model *m, ckpt_strategy *s, const mlp_data *d, ckpt_manager *mgr, int64_t until_epoch,
	mlp_epoch_result *last)
{
	int64_t epoch;
	mlp_epoch_result res = { 0.0, 0.0 };

	for (epoch = mlp_epochs_done(m); epoch < until_epoch; epoch++) {
		const char *path = NULL;

		TRY(run_epoch(m, s, d, epoch + 1, until_epoch, &res));
		printf("  loss %.6f  mae %.6f", res.loss, res.mae);
		if (mgr) {
			int rc = ckpt_status_of(path = ckpt_manager_save(mgr));

			if (rc < 0) {
				printf("\n");
				return rc;
			}
			printf("  saved %s", path);
		}
		printf("\n");
		fflush(stdout);
	}
	if (last)
		*last = res;
	return CKPT_OK;
}

/*
 * resume_from_tf: continue training from a checkpoint TensorFlow wrote.
 *
 * The checkpoint (tests/fixtures/tf/tensorflow__lso_ckpt_tf2.2) is Keras
 * save_weights output of TF 2.2: Sequential([Dense(2)]) trained one step
 * with SGD(0.1, momentum=0.1) wrapped in a dynamic LossScaleOptimizer on
 * x = ones((10, 2)), y = 100 * ones((10, 2)). Its object graph:
 *
 *   layer_with_weights-0 (= layer-0)/{kernel [2,2], bias [2]}
 *   optimizer/base_optimizer/{iter, decay, learning_rate, momentum}
 *       slots: kernel and bias "momentum"
 *   optimizer/loss_scale/{current_loss_scale, good_steps}
 *
 * This program builds the matching live tree inside a mirrored scope,
 * restores the file into it (ckpt_checkpoint_restore), creates the momentum
 * slots afterwards so they are restored on create, checks every restored
 * value on every replica against the values TensorFlow wrote, then runs
 * fine-tuning steps of SGD with momentum (Keras' ResourceApplyKerasMomentum:
 * accum = momentum * accum - lr * grad; var += accum) under the dynamic loss
 * scale, continuing from the restored momentum, on the generator's data.
 *
 *   resume_from_tf PATH [--replicas N] [--steps K] [--save PREFIX]
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlp_model.h"

#define N_SAMPLES 10
#define LOSS_SCALE_PERIOD 2000 /* DynamicLossScale increment_period */

/* The values TensorFlow stored (CONTENTS.txt, model_test.py). */
static const float want_kernel[4] = { 9.22968483f, 10.9011154f, 10.3707628f, 9.75736237f };
static const float want_bias[2] = { 10.049943f, 9.91769123f };
static const float want_mom_kernel[4] = { 10.049943f, 9.91769123f, 10.049943f, 9.91769123f };
static const float want_mom_bias[2] = { 10.049943f, 9.91769123f };
static const float want_lr = 0.100000001f, want_momentum = 0.100000001f, want_decay = 0.0f;
static const float want_loss_scale = 32768.0f;
static const int64_t want_iter = 1, want_good_steps = 1;

typedef struct tf_model {
	ckpt_checkpoint *ckpt;
	ckpt_object *dense, *base_optimizer;
	ckpt_variable *kernel, *bias, *mom_kernel, *mom_bias;
	ckpt_variable *iter, *decay, *lr, *momentum, *loss_scale, *good_steps;
} tf_model;

#define TRY(expr) do { int rc_ = (expr); if (rc_ < 0) return rc_; } while (0)

static int add(ckpt_variable **out, ckpt_object *obj, const char *local, const char *full, ckpt_dtype dt, int rank,
	const int64_t *dims)
{
	ckpt_shape shape;

	TRY(ckpt_shape_make(&shape, rank, dims));
	return ckpt_status_of(out ? (*out = ckpt_object_add_variable(obj, local, full, dt, &shape, NULL)) : ckpt_object_add_variable(obj, local, full, dt, &shape, NULL));
}

/* The Keras model and its LossScaleOptimizer, built as TF 2.2 tracks them. */
static int build(tf_model *t)
{
	const int64_t kd[2] = { 2, 2 }, bd[1] = { 2 };
	ckpt_object *root, *opt, *lso, *loss_scale;
	int rc;

	TRY(ckpt_checkpoint_new(&t->ckpt, NULL));
	root = ckpt_checkpoint_root(t->ckpt);
	TRY(ckpt_status_of(t->dense = ckpt_object_new_child(root, "layer_with_weights-0")));
	TRY(ckpt_object_add_child(root, "layer-0", t->dense)); /* Keras' alias: one node */
	TRY(add(&t->kernel, t->dense, "kernel", "sequential/dense/kernel", CKPT_DT_FLOAT, 2, kd));
	TRY(add(&t->bias, t->dense, "bias", "sequential/dense/bias", CKPT_DT_FLOAT, 1, bd));

	TRY(ckpt_status_of(lso = ckpt_object_new_child(root, "optimizer")));
	TRY(ckpt_optimizer_new(&opt, "SGD"));
	rc = ckpt_object_add_child(lso, "base_optimizer", opt);
	ckpt_object_free(opt); /* held by the loss-scale optimizer now */
	TRY(rc);
	t->base_optimizer = opt;
	TRY(add(&t->iter, opt, "iter", "SGD/iter", CKPT_DT_INT64, 0, NULL));
	TRY(add(&t->decay, opt, "decay", "SGD/decay", CKPT_DT_FLOAT, 0, NULL));
	TRY(add(&t->lr, opt, "learning_rate", "SGD/learning_rate", CKPT_DT_FLOAT, 0, NULL));
	TRY(add(&t->momentum, opt, "momentum", "SGD/momentum", CKPT_DT_FLOAT, 0, NULL));
	TRY(ckpt_status_of(loss_scale = ckpt_object_new_child(lso, "loss_scale")));
	TRY(add(&t->loss_scale, loss_scale, "current_loss_scale", "current_loss_scale", CKPT_DT_FLOAT, 0, NULL));
	return add(&t->good_steps, loss_scale, "good_steps", "good_steps", CKPT_DT_INT64, 0, NULL);
}

/* Keras creates slots on the first apply_gradients: after the restore. */
static int build_slots(tf_model *t)
{
	TRY(ckpt_status_of(t->mom_kernel = ckpt_optimizer_create_slot(t->base_optimizer, t->kernel, "momentum", NULL)));
	return ckpt_status_of(t->mom_bias = ckpt_optimizer_create_slot(t->base_optimizer, t->bias, "momentum", NULL));
}

static void print_floats(const float *v, int n)
{
	int i;

	printf("[");
	for (i = 0; i < n; i++)
		printf("%s%.9g", i ? ", " : "", v[i]);
	printf("]");
}

/* Every replica's copy must equal TensorFlow's value bit for bit. */
static int check(const char *name, const ckpt_variable *v, const void *want, size_t n)
{
	int r, nr = ckpt_variable_num_replicas(v), ok = ckpt_variable_nbytes(v) == n;

	for (r = 0; ok && r < nr; r++)
		ok = memcmp(ckpt_variable_replica_data(v, r), want, n) == 0;
	printf("  %-56s ", name);
	if (ckpt_variable_dtype(v) == CKPT_DT_FLOAT && ckpt_variable_shape(v)->rank == 0)
		printf("%.9g", *(const float *)ckpt_variable_replica_data(v, 0));
	else if (ckpt_variable_dtype(v) == CKPT_DT_FLOAT)
		print_floats(ckpt_variable_replica_data(v, 0), (int)(ckpt_variable_nbytes(v) / sizeof(float)));
	else
		printf("%lld", (long long)*(const int64_t *)ckpt_variable_replica_data(v, 0));
	printf("  %s x%d %s\n", ckpt_var_kind_name(ckpt_variable_kind(v)), nr, ok ? "ok" : "MISMATCH");
	return ok;
}

static int check_restored(const tf_model *t)
{
	int ok = 1;

	ok &= check("layer_with_weights-0/kernel", t->kernel, want_kernel, sizeof want_kernel);
	ok &= check("layer_with_weights-0/bias", t->bias, want_bias, sizeof want_bias);
	ok &= check("kernel/.OPTIMIZER_SLOT/optimizer/base_optimizer/momentum", t->mom_kernel, want_mom_kernel,
		sizeof want_mom_kernel);
	ok &= check("bias/.OPTIMIZER_SLOT/optimizer/base_optimizer/momentum", t->mom_bias, want_mom_bias,
		sizeof want_mom_bias);
	ok &= check("optimizer/base_optimizer/iter", t->iter, &want_iter, sizeof want_iter);
	ok &= check("optimizer/base_optimizer/decay", t->decay, &want_decay, sizeof want_decay);
	ok &= check("optimizer/base_optimizer/learning_rate", t->lr, &want_lr, sizeof want_lr);
	ok &= check("optimizer/base_optimizer/momentum", t->momentum, &want_momentum, sizeof want_momentum);
	ok &= check("optimizer/loss_scale/current_loss_scale", t->loss_scale, &want_loss_scale,
		sizeof want_loss_scale);
	ok &= check("optimizer/loss_scale/good_steps", t->good_steps, &want_good_steps, sizeof want_good_steps);
	return ok;
}

/* ---- one fine-tuning step per ckpt_strategy_run ---- */

typedef struct step_args {
	tf_model *t;
	float loss;      /* global-batch MSE (unscaled), from replica 0 */
	int applied;     /* 0 when the loss scale found non-finite gradients */
} step_args;

static int replica_step(ckpt_replica_ctx *ctx, void *arg)
{
	step_args *a = arg;
	tf_model *t = a->t;
	int id = ckpt_replica_id(ctx), n = ckpt_replica_num_replicas(ctx);
	int first = id * N_SAMPLES / n, last = (id + 1) * N_SAMPLES / n, i, j, k, finite = 1;
	float *w, *b, *mw, *mb, *lr, *mom, *scale;
	int64_t *iter, *good;
	float g[7] = { 0 }; /* dW (4), db (2), loss */

	TRY(mlp_local_f32(t->kernel, &w));
	TRY(mlp_local_f32(t->bias, &b));
	TRY(mlp_local_f32(t->mom_kernel, &mw));
	TRY(mlp_local_f32(t->mom_bias, &mb));
	TRY(mlp_local_f32(t->lr, &lr));
	TRY(mlp_local_f32(t->momentum, &mom));
	TRY(mlp_local_f32(t->loss_scale, &scale));
	TRY(mlp_local_i64(t->iter, &iter));
	TRY(mlp_local_i64(t->good_steps, &good));

	/* x = ones(10, 2), y = 100 * ones(10, 2): the data the checkpoint was trained on */
	for (i = first; i < last; i++) {
		const float x[2] = { 1.0f, 1.0f }, y = 100.0f;

		for (j = 0; j < 2; j++) {
			float pred = b[j] + x[0] * w[0 * 2 + j] + x[1] * w[1 * 2 + j];
			float err = pred - y;
			/* MSE: mean over the 2 outputs, then over the global batch; scaled */
			float d = err / (float)N_SAMPLES * *scale;

			g[6] += err * err / (2.0f * N_SAMPLES);
			for (k = 0; k < 2; k++)
				g[k * 2 + j] += d * x[k];
			g[4 + j] += d;
		}
	}
	TRY(ckpt_replica_all_reduce_f32(ctx, CKPT_REDUCE_SUM, g, 7));
	for (i = 0; i < 6; i++) {
		g[i] /= *scale; /* unscale: exact, the scale is a power of two */
		finite &= isfinite(g[i]) != 0;
	}
	if (finite) {
		for (i = 0; i < 4; i++) {
			mw[i] = *mom * mw[i] - *lr * g[i];
			w[i] += mw[i];
		}
		for (i = 0; i < 2; i++) {
			mb[i] = *mom * mb[i] - *lr * g[4 + i];
			b[i] += mb[i];
		}
		*iter += 1;
		if (++*good >= LOSS_SCALE_PERIOD) {
			*scale *= 2.0f;
			*good = 0;
		}
	} else {
		*scale = *scale / 2.0f < 1.0f ? 1.0f : *scale / 2.0f;
		*good = 0;
	}
	if (id == 0) {
		a->loss = g[6];
		a->applied = finite;
	}
	return CKPT_OK;
}

static void print_step(int step, const step_args *a, const tf_model *t)
{
	float w[4], b[2], mw[4], mb[2], scale;
	int64_t iter, good;

	ckpt_variable_read(t->kernel, w, sizeof w);
	ckpt_variable_read(t->bias, b, sizeof b);
	ckpt_variable_read(t->mom_kernel, mw, sizeof mw);
	ckpt_variable_read(t->mom_bias, mb, sizeof mb);
	ckpt_variable_read(t->loss_scale, &scale, sizeof scale);
	ckpt_variable_read(t->iter, &iter, sizeof iter);
	ckpt_variable_read(t->good_steps, &good, sizeof good);
	printf("step %d: loss %.9g | kernel ", step, a->loss);
	print_floats(w, 4);
	printf(" bias ");
	print_floats(b, 2);
	printf(" | momentum kernel ");
	print_floats(mw, 4);
	printf(" bias ");
	print_floats(mb, 2);
	printf(" | iter %lld, loss scale %.9g, good steps %lld%s\n", (long long)iter, scale, (long long)good,
		a->applied ? "" : " (non-finite gradients: step skipped)");
}

static int all_identical(const tf_model *t)
{
	const ckpt_variable *v[] = { t->kernel, t->bias, t->mom_kernel, t->mom_bias, t->iter, t->loss_scale,
		t->good_steps };
	size_t i;

	for (i = 0; i < sizeof v / sizeof v[0]; i++)
		if (!ckpt_variable_replicas_identical(v[i]))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	const char *prog = "resume_from_tf", *path = NULL, *save = NULL;
	int replicas = 2, steps = 3, i, rc, ok = 0;
	ckpt_restore_status *st = NULL;
	ckpt_strategy *s = NULL;
	tf_model t;
	step_args a;

	memset(&t, 0, sizeof t);
	for (i = 1; i < argc; i++) {
		const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(arg, "--replicas") == 0)
			replicas = mlp_parse_int(prog, arg, val), i++;
		else if (strcmp(arg, "--steps") == 0)
			steps = mlp_parse_int(prog, arg, val), i++;
		else if (strcmp(arg, "--save") == 0 && val)
			save = val, i++;
		else if (arg[0] != '-' && !path)
			path = arg;
		else {
			fprintf(stderr, "usage: %s PATH [--replicas N] [--steps K] [--save PREFIX]\n", prog);
			return 2;
		}
	}
	if (!path) {
		fprintf(stderr, "usage: %s PATH [--replicas N] [--steps K] [--save PREFIX]\n", prog);
		return 2;
	}

	rc = ckpt_strategy_mirrored_new(&s, replicas);
	if (rc == CKPT_OK)
		rc = ckpt_scope_enter(s);
	if (rc == CKPT_OK) {
		/* Inside the scope: the model, the restore, then the slots. */
		rc = build(&t);
		if (rc == CKPT_OK)
			rc = ckpt_checkpoint_restore(&st, t.ckpt, path);
		if (rc == CKPT_OK) {
			printf("%s: restored %s: %zu values now, %zu held for slots not created yet\n",
				ckpt_strategy_describe(s), ckpt_restore_status_path(st),
				ckpt_restore_status_num_restored(st), ckpt_restore_status_num_unmatched(st));
			rc = build_slots(&t);
		}
		if (rc == CKPT_OK)
			rc = ckpt_restore_status_assert_consumed(st);
		ckpt_scope_exit(s);
	}
	if (rc == CKPT_OK) {
		printf("restored state (%zu values, slots restored on create):\n", ckpt_restore_status_num_restored(st));
		ok = check_restored(&t);
		printf("%s\n", ok ? "restored values match TensorFlow's, bit for bit, on every replica"
			: "RESTORED VALUES DIFFER FROM TENSORFLOW'S");
	}
	/* Outside the scope: fine-tuning continues from the restored momentum. */
	memset(&a, 0, sizeof a);
	a.t = &t;
	for (i = 1; rc == CKPT_OK && ok && i <= steps; i++) {
		rc = ckpt_strategy_run(s, replica_step, &a);
		if (rc == CKPT_OK)
			print_step(i, &a, &t);
	}
	if (rc == CKPT_OK && ok && !all_identical(&t)) {
		printf("mirrored copies diverged\n");
		ok = 0;
	}
	if (rc == CKPT_OK && ok && save) {
		rc = ckpt_checkpoint_write(t.ckpt, save);
		if (rc == CKPT_OK)
			printf("saved the fine-tuned state to %s (TensorFlow's key layout)\n", save);
	}
	if (rc < 0)
		mlp_report(prog, rc);
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(t.ckpt);
	ckpt_strategy_free(s);
	return rc == CKPT_OK && ok ? 0 : 1;
}

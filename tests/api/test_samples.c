/*
 * The sample trainers (samples/), run as separate processes from
 * CKPT_BINARY_DIR "/samples":
 *  - bit-exact resume: 4 epochs straight vs 2 epochs + a new process that
 *    restores and trains 2 more, with 1, 2 and 4 replicas; the two final
 *    checkpoints are compared entry by entry with the library (every entry,
 *    the object graph and save_counter included) and with `ckpt diff`;
 *  - the scope-mistakes sample catches every mistake;
 *  - resume from the real TF checkpoint: restored values and one fine-tuning
 *    step checked against a reference computed here.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "test_support.h"
#include "checkpoint_compare.h"

#define SAMPLE(name) CKPT_BINARY_DIR "/samples/" name
#define LSO_CKPT CKPT_FIXTURES_DIR "/tf/tensorflow__lso_ckpt_tf2.2"

/* Run a program with a NULL-terminated argument list. */
static ts_run_result run(const char *prog, ...)
{
	char *argv[32];
	int n = 0;
	const char *arg;
	va_list ap;
	ts_run_result r;

	cr_assert(access(prog, X_OK) == 0, "%s is not built (build the samples/ targets)", prog);
	argv[n++] = (char *)prog;
	va_start(ap, prog);
	while ((arg = va_arg(ap, const char *)) != NULL && n < 31)
		argv[n++] = (char *)arg;
	va_end(ap);
	argv[n] = NULL;
	cr_assert_eq(ts_run(&r, argv), 0, "could not start %s", prog);
	return r;
}

static void expect_exit(const ts_run_result *r, int status, const char *what)
{
	cr_assert_eq(r->status, status, "%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r->status, status,
		r->out, r->err);
}

/* The keys everything that matters lives under: all must be present. */
static const char *const state_keys[] = {
	"model/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE",
	"model/layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE",
	"model/layer_with_weights-1/kernel/.ATTRIBUTES/VARIABLE_VALUE",
	"model/layer_with_weights-1/bias/.ATTRIBUTES/VARIABLE_VALUE",
	"model/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
	"model/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE",
	"model/layer_with_weights-0/bias/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
	"model/layer_with_weights-0/bias/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE",
	"model/layer_with_weights-1/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
	"model/layer_with_weights-1/kernel/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE",
	"model/layer_with_weights-1/bias/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
	"model/layer_with_weights-1/bias/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE",
	"optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE",
	"optimizer/learning_rate/.ATTRIBUTES/VARIABLE_VALUE",
	"optimizer/beta_1/.ATTRIBUTES/VARIABLE_VALUE",
	"optimizer/beta_2/.ATTRIBUTES/VARIABLE_VALUE",
	"optimizer/decay/.ATTRIBUTES/VARIABLE_VALUE",
	"metric/total/.ATTRIBUTES/VARIABLE_VALUE",
	"metric/count/.ATTRIBUTES/VARIABLE_VALUE",
	"step/.ATTRIBUTES/VARIABLE_VALUE",
	"rng_state/.ATTRIBUTES/VARIABLE_VALUE",
	"data_position/.ATTRIBUTES/VARIABLE_VALUE",
	"save_counter/.ATTRIBUTES/VARIABLE_VALUE",
	CKPT_OBJECT_GRAPH_KEY,
	NULL
};

static ckpt_tensor *read_entry(ckpt_reader *r, const char *key)
{
	ckpt_tensor *t = NULL;
	size_t i;

	cr_assert_eq(ckpt_reader_find(&i, r, key), CKPT_OK, "%s: no entry %s", ckpt_reader_path(r), key);
	cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK, "%s: reading %s: %s", ckpt_reader_path(r), key,
		     ckpt_error_last()->message);
	return t;
}

static int64_t read_i64(ckpt_reader *r, const char *key)
{
	ckpt_tensor *t = read_entry(r, key);
	int64_t v;

	cr_assert_eq(t->dtype, CKPT_DT_INT64, "%s is not int64", key);
	cr_assert_eq(ckpt_tensor_num_elements(t), 1);
	memcpy(&v, t->data, sizeof v);
	ckpt_tensor_free(t);
	return v;
}

static float read_f32(ckpt_reader *r, const char *key)
{
	ckpt_tensor *t = read_entry(r, key);
	float v;

	cr_assert_eq(t->dtype, CKPT_DT_FLOAT, "%s is not float32", key);
	memcpy(&v, t->data, sizeof v);
	ckpt_tensor_free(t);
	return v;
}

/*
 * Every entry of `a` exists in `b` with the same dtype, shape and bytes, and
 * `b` has no others. Nothing is excluded: with the manager numbering
 * checkpoints by save_counter and the resumed process restoring it, even
 * save_counter (and so the object graph) must match.
 */
static void expect_identical(const char *pa, const char *pb)
{
	ckpt_reader *a;
	size_t i, j;

	cr_assert_eq(ckpt_reader_open(&a, pa, NULL), CKPT_OK, "open %s: %s", pa, ckpt_error_last()->message);
	for (i = 0; state_keys[i]; i++)
		cr_assert_eq(ckpt_reader_find(&j, a, state_keys[i]), CKPT_OK, "%s lacks %s", pa, state_keys[i]);
	ckpt_reader_free(a);
	ts_assert_same_checkpoint(pa, pb);
}

/* The "loss .. mae .." part of the line for `epoch`. */
static char *epoch_metrics(const char *out, int epoch, int epochs)
{
	char tag[64], *line, *end;
	const char *p;

	snprintf(tag, sizeof tag, "epoch %d/%d ", epoch, epochs);
	p = strstr(out, tag);
	cr_assert_not_null(p, "no '%s' line in:\n%s", tag, out);
	p = strstr(p, "loss ");
	cr_assert_not_null(p);
	line = strdup(p);
	end = strstr(line, "  saved");
	cr_assert_not_null(end, "no checkpoint saved after %s", tag);
	*end = '\0';
	return line;
}

static void bit_exact_resume(int replicas)
{
	char *tmp = ts_tmpdir(), *a = ts_join(tmp, "straight"), *b = ts_join(tmp, "resumed");
	char *a4 = ts_join(a, "ckpt-4"), *a3 = ts_join(a, "ckpt-3"), *b4 = ts_join(b, "ckpt-4");
	char *m3, *m4, *r3, *r4, rep[16];
	ts_run_result straight, first, resumed, d;
	ckpt_reader *r;

	snprintf(rep, sizeof rep, "%d", replicas);
	straight = run(SAMPLE("mlp_mirrored"), "--replicas", rep, "--epochs", "4", "--dir", a, NULL);
	expect_exit(&straight, 0, "mlp_mirrored --epochs 4");
	first = run(SAMPLE("mlp_mirrored"), "--replicas", rep, "--epochs", "2", "--dir", b, NULL);
	expect_exit(&first, 0, "mlp_mirrored --epochs 2");
	resumed = run(SAMPLE("finetune_resume"), "--replicas", rep, "--epochs", "2", "--dir", b, NULL);
	expect_exit(&resumed, 0, "finetune_resume --epochs 2");
	/*
	 * What decides is independent of what the samples say about themselves:
	 * the two runs' checkpoints compared entry by entry (expect_identical,
	 * `ckpt diff`), the state read back against the numbers 4 epochs of 8
	 * steps must leave, and the printed metrics of both runs.
	 */
	/* the printed losses and metrics of epochs 3 and 4 agree too */
	m3 = epoch_metrics(straight.out, 3, 4);
	r3 = epoch_metrics(resumed.out, 3, 4);
	m4 = epoch_metrics(straight.out, 4, 4);
	r4 = epoch_metrics(resumed.out, 4, 4);
	cr_expect_str_eq(m3, r3);
	cr_expect_str_eq(m4, r4);

	expect_identical(a4, b4);

	/* the state is what 4 epochs of 8 steps leave */
	cr_assert_eq(ckpt_reader_open(&r, b4, NULL), CKPT_OK);
	cr_expect_eq(read_i64(r, "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE"), 32);
	cr_expect_eq(read_i64(r, "step/.ATTRIBUTES/VARIABLE_VALUE"), 32);
	cr_expect_eq(read_i64(r, "data_position/.ATTRIBUTES/VARIABLE_VALUE"), 0);
	cr_expect_eq(read_i64(r, "save_counter/.ATTRIBUTES/VARIABLE_VALUE"), 4);
	/* sync-on-read SUM: the aggregate over replicas of the last epoch's 512 samples */
	cr_expect_eq(read_f32(r, "metric/count/.ATTRIBUTES/VARIABLE_VALUE"), 512.0f);
	cr_expect_gt(read_f32(r, "metric/total/.ATTRIBUTES/VARIABLE_VALUE"), 0.0f);
	ckpt_reader_free(r);

	/* `ckpt diff`: equal → 0; a real difference (epoch 3 vs 4) → 1, so the check has teeth */
	d = run(TS_CLI, "diff", a4, b4, NULL);
	expect_exit(&d, 0, "ckpt diff straight resumed");
	ts_run_free(&d);
	d = run(TS_CLI, "diff", a3, a4, NULL);
	expect_exit(&d, 1, "ckpt diff epoch-3 epoch-4");
	ts_run_free(&d);

	free(m3), free(m4), free(r3), free(r4);
	ts_run_free(&straight), ts_run_free(&first), ts_run_free(&resumed);
	ts_rmtree(tmp);
	free(a4), free(a3), free(b4), free(a), free(b), free(tmp);
}

Test(samples, bit_exact_resume_1_replica, .timeout = 60)
{
	bit_exact_resume(1);
}

Test(samples, bit_exact_resume_2_replicas, .timeout = 60)
{
	bit_exact_resume(2);
}

Test(samples, bit_exact_resume_4_replicas, .timeout = 60)
{
	bit_exact_resume(4);
}

Test(samples, trainer_refuses_dir_with_checkpoints_and_resumer_needs_one, .timeout = 60)
{
	char *tmp = ts_tmpdir(), *dir = ts_join(tmp, "run"), *empty = ts_join(tmp, "empty");
	ts_run_result r;

	r = run(SAMPLE("finetune_resume"), "--dir", empty, NULL);
	expect_exit(&r, 1, "finetune_resume on an empty dir");
	cr_expect(strstr(r.err, "no checkpoint"), "stderr: %s", r.err);
	ts_run_free(&r);
	r = run(SAMPLE("mlp_mirrored"), "--epochs", "1", "--dir", dir, NULL);
	expect_exit(&r, 0, "mlp_mirrored --epochs 1");
	ts_run_free(&r);
	r = run(SAMPLE("mlp_mirrored"), "--epochs", "1", "--dir", dir, NULL);
	expect_exit(&r, 1, "mlp_mirrored over an existing run");
	cr_expect(strstr(r.err, "finetune_resume"), "stderr: %s", r.err);
	ts_run_free(&r);
	r = run(SAMPLE("mlp_mirrored"), "--replicas", "3", NULL);
	expect_exit(&r, 2, "mlp_mirrored --replicas 3");
	ts_run_free(&r);
	ts_rmtree(tmp);
	free(dir), free(empty), free(tmp);
}

Test(samples, scope_mistakes_all_caught, .timeout = 60)
{
	char *tmp = ts_tmpdir();
	ts_run_result r = run(SAMPLE("scope_mistakes"), "--replicas", "2", "--dir", tmp, NULL);
	const char *p;
	int caught = 0;

	expect_exit(&r, 0, "scope_mistakes");
	/*
	 * Judged on the library's own errors, which the sample prints verbatim
	 * (ckpt_error_format after each mistake), not on its verdict lines: four
	 * CKPT_ESCOPE failures, each naming the variable.
	 */
	for (p = r.out; (p = strstr(p, "    library: ")) != NULL; p++) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		char line[1024];
		snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line - 1 ? len : sizeof line - 1), p);
		cr_expect(strncmp(line, "    library: CKPT_ESCOPE: ", 26) == 0, "not a scope error: %s", line);
		cr_expect(strstr(line, "variable '"), "the error does not name the variable: %s", line);
		caught++;
	}
	cr_expect_eq(caught, 4, "want 4 library errors:\n%s", r.out);
	ts_run_free(&r);
	ts_rmtree(tmp);
	free(tmp);
}

/* ---- resume from TensorFlow ---- */

/* One Keras SGD-momentum step under the loss scale, in double, from TF's values. */
typedef struct tf_state {
	double w[4], b[2], mw[4], mb[2], loss;
} tf_state;

static tf_state reference_step(void)
{
	const double lr = 0.100000001490116, mom = 0.100000001490116;
	tf_state s = {
		{ 9.22968483, 10.9011154, 10.3707628, 9.75736237 },
		{ 10.049943, 9.91769123 },
		{ 10.049943, 9.91769123, 10.049943, 9.91769123 },
		{ 10.049943, 9.91769123 },
		0.0
	};
	double err[2], g;
	int j, k;

	/* x = ones(10, 2), y = 100: MSE = mean over outputs and batch */
	for (j = 0; j < 2; j++) {
		err[j] = s.b[j] + s.w[0 * 2 + j] + s.w[1 * 2 + j] - 100.0;
		s.loss += err[j] * err[j] / 2.0;
	}
	for (j = 0; j < 2; j++) {
		g = err[j]; /* d loss / d pred summed over 10 samples: 10 * err / 10 */
		for (k = 0; k < 2; k++) {
			s.mw[k * 2 + j] = mom * s.mw[k * 2 + j] - lr * g;
			s.w[k * 2 + j] += s.mw[k * 2 + j];
		}
		s.mb[j] = mom * s.mb[j] - lr * g;
		s.b[j] += s.mb[j];
	}
	return s;
}

static void expect_close(double got, double want, const char *what)
{
	cr_expect(fabs(got - want) <= 1e-5 * fabs(want) + 1e-5, "%s: got %.9g, want %.9g", what, got, want);
}

static void resume_from_tf(const char *replicas)
{
	char *tmp = ts_tmpdir(), *out = ts_join(tmp, "finetuned");
	ts_run_result r = run(SAMPLE("resume_from_tf"), LSO_CKPT, "--replicas", replicas, "--steps", "3", "--save",
		out, NULL);
	tf_state want = reference_step();
	tf_state got;
	long long iter, good;
	double scale;
	const char *p;
	ckpt_reader *fx, *ft;
	size_t i, j;
	int n;

	expect_exit(&r, 0, "resume_from_tf");
	/* judged below on the values: the printed step against reference_step(), the saved state against TF's */
	cr_expect(strstr(r.out, "[9.22968483, 10.9011154, 10.3707628, 9.75736237]"), "kernel not printed:\n%s",
		r.out);
	p = strstr(r.out, "step 1: ");
	cr_assert_not_null(p, "no step 1 line:\n%s", r.out);
	n = sscanf(p, "step 1: loss %lf | kernel [%lf, %lf, %lf, %lf] bias [%lf, %lf] | momentum kernel "
		"[%lf, %lf, %lf, %lf] bias [%lf, %lf] | iter %lld, loss scale %lf, good steps %lld",
		&got.loss, &got.w[0], &got.w[1], &got.w[2], &got.w[3], &got.b[0], &got.b[1], &got.mw[0], &got.mw[1],
		&got.mw[2], &got.mw[3], &got.mb[0], &got.mb[1], &iter, &scale, &good);
	cr_assert_eq(n, 16, "unparsable step line: %.400s", p);
	expect_close(got.loss, want.loss, "loss");
	for (i = 0; i < 4; i++) {
		expect_close(got.w[i], want.w[i], "kernel");
		expect_close(got.mw[i], want.mw[i], "kernel momentum");
	}
	for (i = 0; i < 2; i++) {
		expect_close(got.b[i], want.b[i], "bias");
		expect_close(got.mb[i], want.mb[i], "bias momentum");
	}
	cr_expect_eq(iter, 2, "iter continues from TF's 1");
	cr_expect_eq(good, 2, "good_steps continues from TF's 1");
	cr_expect_eq(scale, 32768.0);
	cr_expect(strstr(r.out, "step 3: "), "%s", r.out);

	/* written back with exactly TensorFlow's keys, dtypes and shapes */
	cr_assert_eq(ckpt_reader_open(&fx, LSO_CKPT, NULL), CKPT_OK);
	cr_assert_eq(ckpt_reader_open(&ft, out, NULL), CKPT_OK, "open %s: %s", out, ckpt_error_last()->message);
	cr_expect_eq(ckpt_reader_num_entries(fx), ckpt_reader_num_entries(ft));
	for (i = 0; i < ckpt_reader_num_entries(fx); i++) {
		const ckpt_var_info *v = ckpt_reader_var(fx, i);

		cr_assert_eq(ckpt_reader_find(&j, ft, v->name), CKPT_OK, "saved state lacks %s", v->name);
		cr_expect_eq(ckpt_reader_var(ft, j)->dtype, v->dtype, "%s", v->name);
		cr_expect(ckpt_shape_equal(&ckpt_reader_var(ft, j)->shape, &v->shape), "%s", v->name);
	}
	cr_expect_eq(read_i64(ft, "optimizer/base_optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE"), 4);
	ckpt_reader_free(fx);
	ckpt_reader_free(ft);
	ts_run_free(&r);
	ts_rmtree(tmp);
	free(out), free(tmp);
}

Test(samples, resume_from_tf_2_replicas, .timeout = 60)
{
	resume_from_tf("2");
}

Test(samples, resume_from_tf_4_replicas, .timeout = 60)
{
	resume_from_tf("4");
}

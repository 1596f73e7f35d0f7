/* The MPI tests' model (mpi_model.h). */
#include <math.h>
#include <string.h>
#include "mpi_model.h"

#define NK 32   /* kernel 8 x 4 */
#define NE 256  /* emb 64 x 4 */

int tm_build(tm_model *m, const ckpt_checkpoint_options *o, int with_slots)
{
	memset(m, 0, sizeof(*m));
	ckpt_shape ks = { 2, { 8, 4 } }, bs = { 1, { 4 } }, es = { 2, { 64, 4 } }, sc = { 0, { 0 } }, cs = { 1, { 2 } };
	ckpt_object *model, *dense, *metric;
	ckpt_variable_options sum = CKPT_VARIABLE_OPTIONS_INIT;
	sum.sync = CKPT_SYNC_ON_READ;
	sum.aggregation = CKPT_AGG_SUM;
	TM_RET(ckpt_checkpoint_new(&m->ck, o));
	TM_RET(ckpt_status_of(model = ckpt_object_new_child(ckpt_checkpoint_root(m->ck), "model")));
	TM_RET(ckpt_status_of(dense = ckpt_object_new_child(model, "layer_with_weights-0")));
	TM_RET(ckpt_status_of(m->kernel = ckpt_object_add_variable(dense, "kernel", "dense/kernel", CKPT_DT_FLOAT, &ks, NULL)));
	TM_RET(ckpt_status_of(m->bias = ckpt_object_add_variable(dense, "bias", "dense/bias", CKPT_DT_FLOAT, &bs, NULL)));
	TM_RET(ckpt_status_of(m->emb = ckpt_object_add_variable(model, "embedding", "emb", CKPT_DT_FLOAT, &es, NULL)));
	TM_RET(ckpt_optimizer_new(&m->opt, "Adam"));
	TM_RET(ckpt_checkpoint_add(m->ck, "optimizer", m->opt));
	ckpt_object_free(m->opt);
	TM_RET(ckpt_status_of(m->step = ckpt_object_add_variable(ckpt_checkpoint_root(m->ck), "step", "step", CKPT_DT_INT64, &sc, NULL)));
	TM_RET(ckpt_status_of(metric = ckpt_object_new_child(ckpt_checkpoint_root(m->ck), "metric")));
	TM_RET(ckpt_status_of(m->total = ckpt_object_add_variable(metric, "total", "mae/total", CKPT_DT_FLOAT, &sc, &sum)));
	TM_RET(ckpt_status_of(m->count = ckpt_object_add_variable(metric, "count", "mae/count", CKPT_DT_DOUBLE, &cs, &sum)));
	return with_slots ? tm_create_slots(m) : CKPT_OK;
}

int tm_create_slots(tm_model *m)
{
	return ckpt_status_of(m->slot_m = ckpt_optimizer_create_slot(m->opt, m->kernel, "m", NULL));
}

void tm_free(tm_model *m)
{
	ckpt_checkpoint_free(m->ck);
	memset(m, 0, sizeof(*m));
}

static float kval(int64_t s, int i) { return (float)s + (float)i * 0.25f; }
static float bval(int64_t s, int i) { return -(float)s - (float)i; }
static float eval_(int64_t s, int i) { return (float)s * 0.5f + (float)i / 3.0f; }
static float mval(int64_t s, int i) { return (float)s * 0.01f * (float)i; }

typedef struct { tm_model *m; int64_t step; } set_arg;

static int add_metrics(ckpt_replica_ctx *ctx, void *p)
{
	set_arg *a = p;
	void *t = NULL, *c = NULL;
	int rc = ckpt_status_of(t = ckpt_variable_local(a->m->total));
	if (rc == CKPT_OK)
		rc = ckpt_status_of(c = ckpt_variable_local(a->m->count));
	if (rc < 0)
		return rc;
	int r = ckpt_replica_id(ctx);
	*(float *)t = (float)(r + 1) * (float)a->step / 8.0f;
	((double *)c)[0] = (double)(r + 1);
	((double *)c)[1] = (double)a->step / 3.0;
	return CKPT_OK;
}

int tm_set(tm_model *m, ckpt_strategy *s, int64_t step)
{
	float k[NK], b[4], e[NE], sm[NK];
	for (int i = 0; i < NK; i++) {
		k[i] = kval(step, i);
		sm[i] = mval(step, i);
	}
	for (int i = 0; i < 4; i++)
		b[i] = bval(step, i);
	for (int i = 0; i < NE; i++)
		e[i] = eval_(step, i);
	TM_RET(ckpt_variable_assign(m->kernel, k, sizeof(k)));
	TM_RET(ckpt_variable_assign(m->bias, b, sizeof(b)));
	TM_RET(ckpt_variable_assign(m->emb, e, sizeof(e)));
	if (m->slot_m)
		TM_RET(ckpt_variable_assign(m->slot_m, sm, sizeof(sm)));
	TM_RET(ckpt_variable_assign(m->step, &step, sizeof(step)));
	set_arg a = { m, step };
	return ckpt_strategy_run(s, add_metrics, &a);
}

float tm_total(int64_t step, int R)
{
	float acc = 1.0f * (float)step / 8.0f;
	for (int r = 1; r < R; r++)
		acc += (float)(r + 1) * (float)step / 8.0f;
	return acc;
}

static int near(double a, double b)
{
	return fabs(a - b) <= 1e-5 * (fabs(b) > 1 ? fabs(b) : 1);
}

int tm_check(tm_model *m, int64_t step, int saved_R, const char *who, long *checks)
{
	int bad = 0;
	const float *k = ckpt_variable_replica_data(m->kernel, 0), *b = ckpt_variable_replica_data(m->bias, 0);
	const float *e = ckpt_variable_replica_data(m->emb, 0);
	for (int r = 0; r < ckpt_variable_num_replicas(m->kernel); r++) {
		k = ckpt_variable_replica_data(m->kernel, r);
		b = ckpt_variable_replica_data(m->bias, r);
		e = ckpt_variable_replica_data(m->emb, r);
		for (int i = 0; i < NK; i++, (*checks)++)
			if (k[i] != kval(step, i) && bad++ < 3)
				fprintf(stderr, "%s: kernel[%d] copy %d = %g, want %g\n", who, i, r, k[i], kval(step, i));
		for (int i = 0; i < 4; i++, (*checks)++)
			if (b[i] != bval(step, i) && bad++ < 3)
				fprintf(stderr, "%s: bias[%d] = %g, want %g\n", who, i, b[i], bval(step, i));
		for (int i = 0; i < NE; i++, (*checks)++)
			if (e[i] != eval_(step, i) && bad++ < 3)
				fprintf(stderr, "%s: emb[%d] = %g, want %g\n", who, i, e[i], eval_(step, i));
	}
	if (m->slot_m) {
		const float *sm = ckpt_variable_replica_data(m->slot_m, 0);
		for (int i = 0; i < NK; i++, (*checks)++)
			if (sm[i] != mval(step, i) && bad++ < 3)
				fprintf(stderr, "%s: slot m[%d] = %g, want %g\n", who, i, sm[i], mval(step, i));
	}
	int64_t st = -1;
	ckpt_variable_read(m->step, &st, sizeof(st));
	(*checks)++;
	if (st != step && bad++ < 3)
		fprintf(stderr, "%s: step = %lld, want %lld\n", who, (long long)st, (long long)step);
	/* the aggregate the checkpoint holds: written from ckpt_strategy_num_replicas replicas at save */
	float t = -1;
	double c[2] = { -1, -1 };
	ckpt_variable_read(m->total, &t, sizeof(t));
	ckpt_variable_read(m->count, c, sizeof(c));
	*checks += 3;
	double c1 = 0;
	for (int r = 0; r < saved_R; r++)
		c1 += (double)step / 3.0;
	if (!near(t, tm_total(step, saved_R)) && bad++ < 3)
		fprintf(stderr, "%s: metric total = %.9g, want %.9g\n", who, t, tm_total(step, saved_R));
	if (!near(c[0], saved_R * (saved_R + 1) / 2.0) && bad++ < 3)
		fprintf(stderr, "%s: metric count[0] = %.17g, want %d\n", who, c[0], saved_R * (saved_R + 1) / 2);
	if (!near(c[1], c1) && bad++ < 3)
		fprintf(stderr, "%s: metric count[1] = %.17g, want %.17g\n", who, c[1], c1);
	return bad;
}

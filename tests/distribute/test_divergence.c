/*
 * The opt-in divergence check (issue 13, point 6): with
 * ckpt_checkpoint_options.check_mirrored, a save whose mirrored copies
 * differ fails with CKPT_ESCOPE naming the first diverged variable and the
 * replicas, and writes nothing; without it the save goes through (and
 * writes replica 0's copy, which is why the check exists).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

#define REPLICAS 4

typedef struct net {
	ckpt_checkpoint *ck;
	ckpt_variable *kernel, *bias, *total;
} net;

static void build(net *n, ckpt_strategy *s, int check)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	ckpt_variable_options sum = CKPT_VARIABLE_OPTIONS_INIT;
	ckpt_object *dense;
	ckpt_shape k, b, scalar = { 0 };
	int64_t kd[2] = { 3, 2 }, bd[1] = { 2 };
	o.no_fsync = 1;
	o.check_mirrored = check;
	sum.sync = CKPT_SYNC_ON_READ;
	sum.aggregation = CKPT_AGG_SUM;
	cr_assert_eq(ckpt_shape_make(&k, 2, kd), CKPT_OK);
	cr_assert_eq(ckpt_shape_make(&b, 1, bd), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_new(&n->ck, &o), CKPT_OK);
	cr_assert_eq(ckpt_status_of(dense = ckpt_object_new_child(ckpt_checkpoint_root(n->ck), "dense")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(n->kernel = ckpt_object_add_variable(dense, "kernel", "dense/kernel", CKPT_DT_FLOAT, &k, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(n->bias = ckpt_object_add_variable(dense, "bias", "dense/bias", CKPT_DT_FLOAT, &b, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(n->total = ckpt_object_add_variable(ckpt_checkpoint_root(n->ck), "total", "metric/total", CKPT_DT_FLOAT, &scalar, &sum)),
		     CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
}

typedef struct upd {
	ckpt_variable *v;
	int elem;
	int from_replica; /* replicas >= this add their id: a replica-dependent update */
} upd;

static int update(ckpt_replica_ctx *ctx, void *arg)
{
	const upd *u = arg;
	void *p;
	int rc = ckpt_status_of(p = ckpt_variable_local(u->v));
	if (rc < 0)
		return rc;
	if (ckpt_replica_id(ctx) >= u->from_replica)
		((float *)p)[u->elem] += (float)ckpt_replica_id(ctx);
	return CKPT_OK;
}

/* every replica accumulates its own share: sync-on-read copies differ by design */
static int count(ckpt_replica_ctx *ctx, void *arg)
{
	void *p;
	int rc = ckpt_status_of(p = ckpt_variable_local(arg));
	if (rc == CKPT_OK)
		*(float *)p += (float)(ckpt_replica_id(ctx) + 1);
	return rc;
}

Test(divergence, save_fails_naming_the_first_diverged_variable_and_the_replicas)
{
	ckpt_strategy *s;
	char *dir = ts_tmpdir();
	net n;
	ckpt_manager *mgr;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, REPLICAS), CKPT_OK);
	build(&n, s, 1);
	cr_assert_eq(ckpt_manager_new(&mgr, n.ck, dir, 3), CKPT_OK);

	/* identical copies (and differing sync-on-read ones) save fine */
	cr_assert_eq(ckpt_strategy_run(s, count, n.total), CKPT_OK);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save(mgr)), CKPT_OK, "%s", ckpt_error_last()->message);

	/* replicas 2 and 3 change element 3 of the kernel, replica 3 the bias */
	upd uk = { n.kernel, 3, 2 }, ub = { n.bias, 1, 3 };
	cr_assert_eq(ckpt_strategy_run(s, update, &uk), CKPT_OK);
	cr_assert_eq(ckpt_strategy_run(s, update, &ub), CKPT_OK);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save(mgr)), CKPT_ESCOPE);
	const ckpt_error *e = ckpt_error_last();
	cr_assert_str_eq(e->variable, "dense/kernel", "the kernel comes first in save order: %s", e->message);
	cr_assert(strstr(e->message, "mirrored variable 'dense/kernel' (dense/kernel/.ATTRIBUTES/VARIABLE_VALUE)"),
		"%s", e->message);
	cr_assert(strstr(e->message, "replicas 2, 3 differ from replica 0"), "%s", e->message);
	cr_assert(strstr(e->message, "first difference at element 3 (replica 0 vs 2: 0 vs 2)"), "%s", e->message);
	cr_assert(strstr(e->message, "MirroredStrategy(4 replicas)"), "%s", e->message);
	cr_assert(e->path && strstr(e->path, "ckpt-2"), "names the checkpoint it refused: %s", e->path);
	/* nothing was written and the counter did not move */
	char *p2 = ts_join(dir, "ckpt-2.index");
	cr_assert_neq(access(p2, F_OK), 0, "ckpt-2 was written");
	cr_assert_eq(ckpt_checkpoint_save_counter(n.ck), 1);
	cr_assert_str_eq(ckpt_manager_latest(mgr), ckpt_manager_checkpoint(mgr, 0));

	/* the same through a plain write and an async save */
	char *w = ts_join(dir, "written");
	cr_assert_eq(ckpt_checkpoint_write(n.ck, w), CKPT_ESCOPE);
	ckpt_async_saver *as;
	cr_assert_eq(ckpt_async_saver_new(&as, NULL), CKPT_OK);
	cr_assert_eq(ckpt_async_save(as, n.ck, w), CKPT_ESCOPE);
	cr_assert_str_eq(ckpt_error_last()->variable, "dense/kernel");
	cr_assert_eq(ckpt_async_wait(as), CKPT_OK);
	ckpt_async_saver_free(as);

	/* fix the kernel: now the bias is the first, one replica */
	const float zeros[6] = { 0 };
	cr_assert_eq(ckpt_variable_assign(n.kernel, zeros, sizeof(zeros)), CKPT_OK);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save(mgr)), CKPT_ESCOPE);
	cr_assert_str_eq(ckpt_error_last()->variable, "dense/bias");
	cr_assert(strstr(ckpt_error_last()->message, "replica 3 differs from replica 0"), "%s",
		ckpt_error_last()->message);
	cr_assert_eq(ckpt_variable_assign(n.bias, zeros, 2 * sizeof(float)), CKPT_OK);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save(mgr)), CKPT_OK, "%s", ckpt_error_last()->message);

	ckpt_manager_free(mgr);
	ckpt_checkpoint_free(n.ck);
	ckpt_strategy_free(s);
	ts_rmtree(dir);
	free(p2), free(w), free(dir);
}

Test(divergence, off_by_default_the_save_writes_replica_0)
{
	ckpt_strategy *s;
	char *dir = ts_tmpdir(), *path = ts_join(dir, "ckpt");
	net n;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, REPLICAS), CKPT_OK);
	build(&n, s, 0);
	upd uk = { n.kernel, 0, 1 };
	cr_assert_eq(ckpt_strategy_run(s, update, &uk), CKPT_OK);
	cr_assert_eq(ckpt_variable_replicas_identical(n.kernel), 0);
	cr_assert_eq(ckpt_checkpoint_write(n.ck, path), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_reader *r;
	ckpt_tensor *t;
	size_t i;
	cr_assert_eq(ckpt_reader_open(&r, path, NULL), CKPT_OK);
	cr_assert_eq(ckpt_reader_find(&i, r, "dense/kernel/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK);
	cr_assert_eq(((const float *)t->data)[0], 0.0f, "replica 0's copy is what a save writes");
	ckpt_tensor_free(t);
	ckpt_reader_free(r);
	ckpt_checkpoint_free(n.ck);
	ckpt_strategy_free(s);
	ts_rmtree(dir);
	free(path), free(dir);
}

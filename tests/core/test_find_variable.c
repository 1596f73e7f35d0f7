/* ckpt_checkpoint_find_variable's cached index against a scan of ckpt_checkpoint_variables. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

/* The documented rule: first entry by path, key or source key; else first by variable name. */
static ckpt_variable *reference(ckpt_checkpoint *ck, const char *q)
{
	ckpt_tracked_list *l;
	cr_assert_eq(ckpt_checkpoint_variables(&l, ck), CKPT_OK);
	ckpt_variable *found = NULL;
	size_t n = ckpt_tracked_list_num_entries(l);
	for (size_t i = 0; i < n && !found; i++) {
		const ckpt_tracked_variable *t = ckpt_tracked_list_get(l, i);
		if (!strcmp(t->path, q) || !strcmp(t->key, q) || (t->source_key && !strcmp(t->source_key, q)))
			found = t->variable;
	}
	for (size_t i = 0; i < n && !found; i++)
		if (!strcmp(ckpt_tracked_list_get(l, i)->full_name, q))
			found = ckpt_tracked_list_get(l, i)->variable;
	ckpt_tracked_list_free(l);
	return found;
}

static void check(ckpt_checkpoint *ck, const char *q)
{
	ckpt_variable *v = NULL, *want = reference(ck, q);
	int rc = ckpt_status_of(v = ckpt_checkpoint_find_variable(ck, q));
	cr_assert_eq(rc, want ? CKPT_OK : CKPT_ENOTFOUND, "%s", q);
	cr_assert_eq(v, want, "%s", q);
}

Test(find_variable, index_follows_tree_changes_and_restores)
{
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_object *model, *opt;
	cr_assert_eq(ckpt_status_of(model = ckpt_object_new_child(ckpt_checkpoint_root(ck), "model")), CKPT_OK);
	cr_assert_eq(ckpt_optimizer_new(&opt, "Adam"), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_add(ck, "optimizer", opt), CKPT_OK);
	ckpt_shape s = { 1, { 4 } };
	ckpt_variable *v[40];
	char nm[64], full[64];
	for (int i = 0; i < 20; i++) {
		snprintf(nm, sizeof nm, "w.%d", i);
		/* names that collide with other variables' paths: the path wins, in order */
		snprintf(full, sizeof full, i % 5 == 0 ? "model/w..%d" : "dense_%d/kernel", (i + 1) % 20);
		cr_assert_eq(ckpt_status_of(v[i] = ckpt_object_add_variable(model, nm, full, CKPT_DT_FLOAT, &s, NULL)),
			     CKPT_OK);
	}
	static const char *const q[] = { "model/w..3", "model/w..3/.ATTRIBUTES/VARIABLE_VALUE", "dense_4/kernel",
		"w.3", "model/w.3", "dense_0/kernel", "nope", "model/w..19", "model/w..25", "dense_25/kernel",
		"model/w..3/.OPTIMIZER_SLOT/optimizer/m", "Adam/dense_4/kernel/m" };
	for (size_t k = 0; k < sizeof(q) / sizeof(q[0]); k++)
		check(ck, q[k]);
	/* the tree grows: the index is rebuilt */
	for (int i = 20; i < 30; i++) {
		snprintf(nm, sizeof nm, "w.%d", i);
		snprintf(full, sizeof full, "dense_%d/kernel", i);
		cr_assert_eq(ckpt_status_of(v[i] = ckpt_object_add_variable(model, nm, full, CKPT_DT_FLOAT, &s, NULL)),
			     CKPT_OK);
	}
	ckpt_variable *m;
	cr_assert_eq(ckpt_status_of(m = ckpt_optimizer_create_slot(opt, v[3], "m", NULL)), CKPT_OK);
	for (size_t k = 0; k < sizeof(q) / sizeof(q[0]); k++)
		check(ck, q[k]);
	/* a restore sets source keys without changing the tree */
	char *dir = ts_tmpdir();
	char *path = ts_join(dir, "ckpt");
	cr_assert_eq(ckpt_checkpoint_write(ck, path), CKPT_OK, "%s", ckpt_error_last()->message);
	check(ck, "model/w..7/.ATTRIBUTES/VARIABLE_VALUE");
	ckpt_restore_status *st = NULL;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, path), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_expect_partial(st);
	ckpt_restore_status_free(st);
	for (size_t k = 0; k < sizeof(q) / sizeof(q[0]); k++)
		check(ck, q[k]);
	check(ck, "model/w..7/.ATTRIBUTES/VARIABLE_VALUE");
	ckpt_object_free(opt);
	ckpt_checkpoint_free(ck);
	free(path);
	ts_rmtree(dir);
	free(dir);
}

Test(find_variable, many_variables)
{
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_object *model;
	cr_assert_eq(ckpt_status_of(model = ckpt_object_new_child(ckpt_checkpoint_root(ck), "model")), CKPT_OK);
	ckpt_shape s = { 1, { 2 } };
	enum { N = 3000 };
	static ckpt_variable *v[N];
	char nm[64];
	for (int i = 0; i < N; i++) {
		snprintf(nm, sizeof nm, "t-%05d", i);
		cr_assert_eq(ckpt_status_of(v[i] = ckpt_object_add_variable(model, nm, NULL, CKPT_DT_FLOAT, &s, NULL)),
			     CKPT_OK);
	}
	for (int i = 0; i < N; i++) {
		ckpt_variable *f;
		snprintf(nm, sizeof nm, "model/t-%05d", i);
		cr_assert_eq(ckpt_status_of(f = ckpt_checkpoint_find_variable(ck, nm)), CKPT_OK);
		cr_assert_eq(f, v[i]);
		snprintf(nm, sizeof nm, "t-%05d", i);
		cr_assert_eq(ckpt_status_of(f = ckpt_checkpoint_find_variable(ck, nm)), CKPT_OK);
		cr_assert_eq(f, v[i]);
	}
	ckpt_checkpoint_free(ck);
}

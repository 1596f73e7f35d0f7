/*
 * Variables laid out in one caller-owned buffer (issue 34, point 4;
 * ckpt/layout.h): table-driven registration of variables and their slots,
 * checked for bounds, alignment and overlap before anything is created; and
 * wrapped memory that overlaps another live variable's refused with an
 * error naming both (it was accepted silently).
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

Test(buffer_layout, overlapping_wrapped_buffers_are_refused_naming_both)
{
	float mem[32];
	ckpt_shape s16 = { 1, { 16 } }, s8 = { 1, { 8 } };
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	void *a[1] = { mem }, *b[1] = { mem + 12 }, *c[1] = { mem + 20 };
	ckpt_variable *va, *vb, *vc;
	o.replica_buffers = a;
	cr_assert_eq(ckpt_variable_new(&va, "first", CKPT_DT_FLOAT, &s16, &o), CKPT_OK);
	o.replica_buffers = b; /* mem[12..20) overlaps first's mem[0..16) */
	cr_assert_eq(ckpt_variable_new(&vb, "second", CKPT_DT_FLOAT, &s8, &o), CKPT_EINVAL);
	cr_assert_null(vb);
	const char *msg = ckpt_error_last()->message;
	cr_assert(strstr(msg, "'second'") && strstr(msg, "'first'") && strstr(msg, "overlaps"), "%s", msg);
	o.replica_buffers = c; /* mem[20..28): apart from first */
	cr_assert_eq(ckpt_variable_new(&vc, "third", CKPT_DT_FLOAT, &s8, &o), CKPT_OK, "%s", ckpt_error_last()->message);
	/* host state over a wrapped variable's memory is refused too */
	ckpt_checkpoint *ck;
	ckpt_shape scalar = { 0 };
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	cr_assert_eq(ckpt_object_track_host(ckpt_checkpoint_root(ck), "pos", CKPT_DT_FLOAT, &scalar, &mem[22]),
		CKPT_EINVAL);
	cr_assert(strstr(ckpt_error_last()->message, "'third'"), "%s", ckpt_error_last()->message);
	/* freed, its memory is free again */
	ckpt_variable_free(va);
	o.replica_buffers = b;
	cr_assert_eq(ckpt_variable_new(&vb, "second", CKPT_DT_FLOAT, &s8, &o), CKPT_OK);
	ckpt_variable_free(vb);
	ckpt_variable_free(vc);
	ckpt_checkpoint_free(ck);
}

/* llm.c's layout in small: three parameter tensors in one float buffer, AdamW's m and v in two more. */
enum { WTE, LN_W, FC_B, NT };
#define PARAMS (6 * 4 + 4 + 8)
static const ckpt_buffer_field fields[NT] = {
	{ "wte", CKPT_DT_FLOAT, { 2, { 6, 4 } }, 0 },
	{ "ln_w", CKPT_DT_FLOAT, { 1, { 4 } }, 24 * sizeof(float) },
	{ "fc_b", CKPT_DT_FLOAT, { 1, { 8 } }, 28 * sizeof(float) },
};

typedef struct model {
	ckpt_checkpoint *ck;
	ckpt_object *opt;
	float params[PARAMS], m[PARAMS], v[PARAMS];
} model;

static void build(model *t)
{
	cr_assert_eq(ckpt_checkpoint_new(&t->ck, NULL), CKPT_OK);
	ckpt_object *root = ckpt_checkpoint_root(t->ck);
	ckpt_object *gpt = ckpt_object_new_child(root, "model");
	cr_assert_not_null(gpt);
	cr_assert_eq(ckpt_object_add_buffer_variables(gpt, t->params, sizeof(t->params), fields, NT), CKPT_OK,
		"%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_optimizer_new(&t->opt, "AdamW"), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_add(t->ck, "optimizer", t->opt), CKPT_OK);
	cr_assert_eq(ckpt_optimizer_create_buffer_slots(t->opt, gpt, "m", t->m, sizeof(t->m), fields, NT),
		CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_optimizer_create_buffer_slots(t->opt, gpt, "v", t->v, sizeof(t->v), fields, NT),
		CKPT_OK, "%s", ckpt_error_last()->message);
}

static void drop(model *t)
{
	ckpt_object_free(t->opt);
	ckpt_checkpoint_free(t->ck);
}

Test(buffer_layout, one_table_registers_variables_and_slots_zero_copy)
{
	static model a, b;
	for (int i = 0; i < PARAMS; i++) {
		a.params[i] = (float)i;
		a.m[i] = (float)i / 2;
		a.v[i] = (float)i / 4;
	}
	build(&a);
	/* zero copy: the variables are the buffer */
	ckpt_object *gpt = ckpt_object_child(ckpt_checkpoint_root(a.ck), "model");
	ckpt_variable *ln_w = ckpt_object_variable(gpt, "ln_w"), *fc_b = ckpt_object_variable(gpt, "fc_b");
	cr_assert_eq(ckpt_variable_replica_data(ln_w, 0), (const void *)&a.params[24]);
	cr_assert_eq(ckpt_variable_replica_data(ckpt_optimizer_slot(a.opt, fc_b, "v"), 0), (const void *)&a.v[28]);
	char *dir = ts_tmpdir(), *prefix = ts_join(dir, "ckpt-1");
	cr_assert_eq(ckpt_checkpoint_write(a.ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);

	/* the keys and values a reader sees */
	ckpt_reader *r;
	size_t i;
	ckpt_tensor *t;
	cr_assert_eq(ckpt_reader_open(&r, prefix, NULL), CKPT_OK);
	cr_assert_eq(ckpt_reader_find(&i, r, "model/fc_b/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK);
	cr_assert_eq(memcmp(t->data, &a.params[28], 8 * sizeof(float)), 0);
	ckpt_tensor_free(t);
	cr_assert_eq(ckpt_reader_find(&i, r, "model/wte/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK);
	cr_assert_eq(memcmp(t->data, &a.v[0], 24 * sizeof(float)), 0);
	ckpt_tensor_free(t);
	ckpt_reader_free(r);

	/* a restore writes the other trainer's buffers in place */
	build(&b);
	ckpt_restore_status *st;
	cr_assert_eq(ckpt_checkpoint_restore(&st, b.ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	cr_assert_eq(memcmp(a.params, b.params, sizeof(a.params)), 0);
	cr_assert_eq(memcmp(a.m, b.m, sizeof(a.m)), 0);
	cr_assert_eq(memcmp(a.v, b.v, sizeof(a.v)), 0);
	/* a second table over the same buffer is refused while the first lives */
	ckpt_object *again = ckpt_object_new_child(ckpt_checkpoint_root(b.ck), "again");
	cr_assert_eq(ckpt_object_add_buffer_variables(again, b.params, sizeof(b.params), fields, NT), CKPT_EINVAL);
	cr_assert(strstr(ckpt_error_last()->message, "overlaps"), "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_object_num_children(again), 0);
	drop(&a);
	drop(&b);
	ts_rmtree(dir);
	free(dir), free(prefix);
}

static void expect_refused(const ckpt_buffer_field *f, size_t n, void *base, size_t size, const char *words)
{
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_object *root = ckpt_checkpoint_root(ck);
	cr_assert_eq(ckpt_object_add_buffer_variables(root, base, size, f, n), CKPT_EINVAL, "%s", words);
	cr_assert(strstr(ckpt_error_last()->message, words), "want '%s' in: %s", words, ckpt_error_last()->message);
	cr_assert_eq(ckpt_object_num_children(root), 0, "a bad table created something");
	ckpt_checkpoint_free(ck);
}

Test(buffer_layout, bad_tables_create_nothing)
{
	_Alignas(16) static char buf[256];
	const ckpt_buffer_field overlap[2] = {
		{ "a", CKPT_DT_FLOAT, { 1, { 8 } }, 0 },
		{ "b", CKPT_DT_FLOAT, { 1, { 8 } }, 16 },
	};
	expect_refused(overlap, 2, buf, sizeof(buf), "overlap");
	const ckpt_buffer_field outside[1] = { { "a", CKPT_DT_DOUBLE, { 1, { 40 } }, 0 } };
	expect_refused(outside, 1, buf, sizeof(buf), "outside the buffer");
	const ckpt_buffer_field misaligned[1] = { { "a", CKPT_DT_FLOAT, { 1, { 4 } }, 2 } };
	expect_refused(misaligned, 1, buf, sizeof(buf), "not aligned");
	const ckpt_buffer_field twice[2] = {
		{ "a", CKPT_DT_FLOAT, { 1, { 4 } }, 0 },
		{ "a", CKPT_DT_FLOAT, { 1, { 4 } }, 16 },
	};
	expect_refused(twice, 2, buf, sizeof(buf), "both named 'a'");
	const ckpt_buffer_field str[1] = { { "a", CKPT_DT_STRING, { 0 }, 0 } };
	expect_refused(str, 1, buf, sizeof(buf), "fixed-size");

	/* several replicas: one buffer cannot hold them */
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 2), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	expect_refused(overlap + 1, 1, buf, sizeof(buf), "replica_buffers");
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	ckpt_strategy_free(s);
}

/* The memory-tier tests' temporary directories and model (tier_common.h). */
#include "tier_common.h"
#include <criterion/criterion.h>
#include <stdlib.h>
#include "test_support.h"

static char *g_tmp[8];
static int g_ntmp;

char *tt_tmpdir(void)
{
	cr_assert_lt(g_ntmp, 8);
	return g_tmp[g_ntmp++] = ts_tmpdir();
}

void tt_tmpdirs_remove(void)
{
	for (int i = 0; i < g_ntmp; i++) {
		ts_rmtree(g_tmp[i]);
		free(g_tmp[i]);
	}
	g_ntmp = 0;
}

void tt_model_add(ckpt_checkpoint *ck, ckpt_variable **value, ckpt_variable **big)
{
	ckpt_shape sc, vb;
	int64_t d = TT_BIG;
	cr_assert_eq(ckpt_shape_make(&sc, 0, NULL), CKPT_OK);
	cr_assert_eq(ckpt_shape_make(&vb, 1, &d), CKPT_OK);
	ckpt_object *model;
	cr_assert_eq(ckpt_status_of(model = ckpt_object_new_child(ckpt_checkpoint_root(ck), "model")), CKPT_OK);
	cr_assert_eq(ckpt_status_of(*value = ckpt_object_add_variable(model, "value", "value", CKPT_DT_INT64, &sc,
		NULL)), CKPT_OK);
	cr_assert_eq(ckpt_status_of(*big = ckpt_object_add_variable(model, "big", "big", CKPT_DT_FLOAT, &vb, NULL)),
		CKPT_OK);
}

void tt_set_step(ckpt_variable *value, ckpt_variable *big, int64_t v)
{
	static float b[TT_BIG];
	for (int i = 0; i < TT_BIG; i++)
		b[i] = (float)(v * 1000 + i);
	cr_assert_eq(ckpt_variable_assign(value, &v, sizeof(v)), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign(big, b, sizeof(b)), CKPT_OK);
}

int64_t tt_get_step(ckpt_variable *value, ckpt_variable *big)
{
	static float b[TT_BIG];
	int64_t v = -1;
	cr_assert_eq(ckpt_variable_read(value, &v, sizeof(v)), CKPT_OK);
	cr_assert_eq(ckpt_variable_read(big, b, sizeof(b)), CKPT_OK);
	for (int i = 0; i < TT_BIG; i += 997)
		cr_assert_eq(b[i], (float)(v * 1000 + i), "big[%d] = %g is not step %lld's", i, b[i], (long long)v);
	return v;
}

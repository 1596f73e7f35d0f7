/* ts_assert_same_checkpoint: see checkpoint_compare.h. */
#include <criterion/criterion.h>
#include "ckpt/ckpt.h"
#include "checkpoint_compare.h"

void ts_assert_same_checkpoint(const char *pa, const char *pb)
{
	ckpt_reader *a, *b;
	size_t i, j, n;

	cr_assert_eq(ckpt_reader_open(&a, pa, NULL), CKPT_OK, "open %s: %s", pa, ckpt_error_last()->message);
	cr_assert_eq(ckpt_reader_open(&b, pb, NULL), CKPT_OK, "open %s: %s", pb, ckpt_error_last()->message);
	n = ckpt_reader_num_entries(a);
	cr_assert_eq(n, ckpt_reader_num_entries(b), "%s has %zu entries, %s has %zu", pa, n, pb,
		     ckpt_reader_num_entries(b));
	for (i = 0; i < n; i++) {
		const ckpt_var_info *va = ckpt_reader_var(a, i), *vb;
		ckpt_tensor *ta, *tb;

		cr_assert_eq(ckpt_reader_find(&j, b, va->name), CKPT_OK, "%s lacks %s", pb, va->name);
		vb = ckpt_reader_var(b, j);
		cr_assert_eq(va->dtype, vb->dtype, "%s: dtype differs", va->name);
		cr_assert(ckpt_shape_equal(&va->shape, &vb->shape), "%s: shape differs", va->name);
		cr_assert_eq(ckpt_reader_read(&ta, a, i), CKPT_OK);
		cr_assert_eq(ckpt_reader_read(&tb, b, j), CKPT_OK);
		cr_assert(ckpt_tensor_equal(ta, tb), "%s differs between %s and %s", va->name, pa, pb);
		ckpt_tensor_free(ta);
		ckpt_tensor_free(tb);
	}
	ckpt_reader_free(a);
	ckpt_reader_free(b);
}

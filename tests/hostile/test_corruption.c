/*
 * Corruption sweep: every fixture, every file of it, one bit flipped in every
 * byte (a fixed sample for files larger than the sample size), opened from the
 * memory file system and read completely: never a crash, a hang or an
 * allocation out of proportion; when the reader fails it says why (status,
 * message, context). Flips in slack bytes (HDF5 free space, zip timestamps,
 * SSTable footer padding) may go unnoticed. (Engine: rel_sweep_positions.)
 *
 * TensorBundle data: every flip inside the bytes of a stored tensor is
 * caught by the entry's crc32c (100 %, asserted), and no_verify reads the
 * same bytes without complaint.
 */
#include "rel_common.h"
#include "ckpt/sys/vfs_memory.h"

Test(corruption, tensorbundle_byte_flips, .timeout = 240)
{
	rel_sweep_positions(1 << REL_TF | 1 << REL_TF_STATE, REL_FLIP, 2048 + 1024, 0);
}

/* A flip mostly leaves an HDF5 file readable, so each case costs a full read (0.4-600 ms): 24 MiB of input per file at most. */
Test(corruption, keras_h5_byte_flips, .timeout = 240)
{
	if (rel_rerun_where_malloc_may_fail())
		return;
	rel_sweep_positions(1 << REL_KERAS_H5, REL_FLIP, 2048 + 512, 24u << 20);
}

Test(corruption, keras_archive_byte_flips, .timeout = 240)
{
	rel_sweep_positions(1 << REL_KERAS_ZIP, REL_FLIP, 2048 + 512, 0);
}

/*
 * Flip bytes of a data shard in place (the memory file system hands out its
 * buffer; the reader reads through pread on every call) and read the one
 * entry that covers them.
 */
#define CRC_DENSE_PER_TENSOR rel_scaled(4096)

Test(corruption, tensorbundle_data_flips_fail_crc32c, .timeout = 240)
{
	rel_units us = rel_fixture_units();
	long flips = 0, caught = 0, tensors = 0;
	double t0 = rel_now();
	for (size_t ui = 0; ui < us.n; ui++) {
		const rel_unit *u = &us.u[ui];
		if (u->kind != REL_TF)
			continue;
		ckpt_vfs *vfs = rel_unit_vfs(u);
		ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT, onv = CKPT_OPEN_OPTIONS_INIT;
		o.vfs = onv.vfs = vfs;
		onv.no_verify = 1;
		ckpt_reader *r = NULL, *rnv = NULL;
		cr_assert_eq(ckpt_reader_open(&r, u->open_path, &o), CKPT_OK, "%s: %s", u->name,
			ckpt_error_last()->message);
		cr_assert_eq(ckpt_reader_open(&rnv, u->open_path, &onv), CKPT_OK);
		for (size_t i = 0; i < ckpt_reader_num_entries(r); i++) {
			const ckpt_var_info *v = ckpt_reader_var(r, i);
			if (v->nslices || v->nbytes == 0 || v->shard < 0)
				continue;
			cr_assert(v->has_crc32c, "%s: %s has no crc32c", u->name, v->name);
			int exists = 0;
			const char *shard = ckpt_reader_shard_path(r, v->shard, &exists);
			cr_assert(exists);
			const void *cbuf;
			size_t n;
			cr_assert_eq(ckpt_status_of(cbuf = ckpt_vfs_memory_get(&n, vfs, shard)), CKPT_OK, "%s", shard);
			unsigned char *buf = (unsigned char *)cbuf;
			cr_assert_leq((uint64_t)v->offset + v->nbytes, n);
			tensors++;
			/* every byte of the tensor, or both ends densely and the middle spread */
			size_t *pos;
			size_t np = rel_positions((size_t)v->nbytes, CRC_DENSE_PER_TENSOR, &pos);
			for (size_t k = 0; k < np; k++) {
				size_t at = (size_t)v->offset + pos[k];
				unsigned char m = rel_flip_mask(at);
				buf[at] ^= m;
				ckpt_tensor *t = NULL;
				ckpt_error_clear();
				int rc = ckpt_reader_read(&t, r, i);
				ckpt_tensor_free(t);
				t = NULL;
				flips++;
				if (rc < 0)
					caught++;
				if (v->dtype != CKPT_DT_STRING) {
					cr_assert_eq(rc, CKPT_ECHECKSUM, "%s: flip at %s+%zu in '%s' not caught by crc32c (rc=%s)",
						u->name, shard, at, v->name, ckpt_status_name(rc));
					const ckpt_error *e = ckpt_error_last();
					cr_assert_eq(e->code, CKPT_ECHECKSUM);
					cr_assert_not_null(strstr(e->message, "crc32c"), "%s", e->message);
					cr_assert_str_eq(e->variable, v->name);
					cr_assert_not_null(e->path);
					/* the opt-out reads the (corrupt) bytes as stored */
					cr_assert_eq(ckpt_reader_read(&t, rnv, i), CKPT_OK, "no_verify: %s",
						     ckpt_error_last()->message);
					cr_assert_eq(((unsigned char *)t->data)[pos[k]], buf[at]);
					ckpt_tensor_free(t);
				} else {
					/* strings: a flip in a length is a format error, in the bytes a checksum error */
					cr_assert_lt(rc, 0, "%s: flip at %s+%zu in string '%s' not detected", u->name, shard, at,
						v->name);
					cr_assert(rc == CKPT_ECHECKSUM || rc == CKPT_EFORMAT, "%s", ckpt_status_name(rc));
					cr_assert_eq(ckpt_error_last()->code, rc, "the failure recorded no error of its own");
					cr_assert(ckpt_error_last()->message[0]);
				}
				buf[at] ^= m;
			}
			free(pos);
			/* and the pristine bytes still read (nothing cached the corruption) */
			ckpt_tensor *t = NULL;
			cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK, "%s: %s", v->name, ckpt_error_last()->message);
			ckpt_tensor_free(t);
		}
		ckpt_reader_free(r);
		ckpt_reader_free(rnv);
		ckpt_vfs_free(vfs);
	}
	rel_units_free(&us);
	cr_log_info("crc32c: %ld flips in %ld tensors, %ld caught (%.1f s)", flips, tensors, caught, rel_now() - t0);
	cr_assert_gt(flips, 1000);
	cr_assert_eq(caught, flips, "%ld of %ld flips inside tensor data went unnoticed", flips - caught, flips);
}

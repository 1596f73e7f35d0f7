/*
 * Sliced (partitioned) variables whose slices lie in several data shards:
 * a layout no fixture here has (issue 26). They are written with the
 * multi-process shard writer (ckpt/sys/bundle_part.h, what ckpt_mpi
 * runs: one part per data shard, process 0's merged index) from one
 * process, read back whole, then mutated: every mutant (bytes of the index
 * or of a shard flipped, set, or a file cut short) must open and read to a
 * correct tensor or fail with a negative status and a message, never crash.
 * The suite's ASan pass runs the same mutants under AddressSanitizer.
 *
 * CKPT_SLICED_SEED_OUT=FILE also writes the bundle as a tf_bundle fuzz input
 * ([u32 index length][index]([u32 length][shard])*), the seed of
 * tests/fuzz/corpora/tf_bundle/sliced_over_3_shards.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "ckpt/sys/bundle_part.h"
#include "ckpt/sys/vfs_memory.h"
#include "test_support.h"

#define OK(expr) do { int ok_rc_ = (expr); cr_assert_eq(ok_rc_, CKPT_OK, "%s = %s: %s", #expr, \
	ckpt_status_name(ok_rc_), ckpt_error_last()->message); } while (0)

#define NSHARDS 3
#define PREFIX "b/sliced"
#define MUTANTS 20000

/* emb: float [12, 4] in 3 row slices, one per shard; ids: int64 [7] in 2 slices in shards 2 and 1; step in shard 0. */
static const int64_t emb_row0[] = { 0, 5, 9 }, emb_rows[] = { 5, 4, 3 };
static const int emb_shard[] = { 0, 1, 2 };
static const int64_t ids_row0[] = { 0, 3 }, ids_rows[] = { 3, 4 };
static const int ids_shard[] = { 2, 1 };

static ckpt_tensor *rows_of(ckpt_dtype dt, const ckpt_shape *full, int64_t row0, int64_t rows)
{
	ckpt_shape s = *full;
	ckpt_tensor *t;
	s.dims[0] = rows;
	OK(ckpt_tensor_new(&t, dt, &s));
	uint64_t nel;
	OK(ckpt_shape_num_elements(&nel, &s));
	int64_t per_row = (int64_t)nel / (rows ? rows : 1);
	for (int64_t i = 0; i < rows * per_row; i++) {
		int64_t v = row0 * per_row + i;
		if (dt == CKPT_DT_FLOAT)
			((float *)t->data)[i] = (float)v * 0.5f;
		else
			((int64_t *)t->data)[i] = v * 1000 + 7;
	}
	return t;
}

/* The bundle PREFIX in `vfs`. */
static void write_sliced(ckpt_vfs *vfs)
{
	const ckpt_shape emb = { 2, { 12, 4 } }, ids = { 1, { 7 } }, scalar = { 0, { 0 } };
	ckpt_bundle_part *p[NSHARDS];
	void *entries[NSHARDS];
	size_t lens[NSHARDS];
	ckpt_tensor *t;

	for (int s = 0; s < NSHARDS; s++)
		OK(ckpt_bundle_part_open(&p[s], vfs, PREFIX, s, NSHARDS, 42));
	for (int k = 0; k < 3; k++) {
		t = rows_of(CKPT_DT_FLOAT, &emb, emb_row0[k], emb_rows[k]);
		OK(ckpt_bundle_part_add_slice(p[emb_shard[k]], "emb", &emb, emb_row0[k], t));
		ckpt_tensor_free(t);
	}
	for (int k = 0; k < 2; k++) {
		t = rows_of(CKPT_DT_INT64, &ids, ids_row0[k], ids_rows[k]);
		OK(ckpt_bundle_part_add_slice(p[ids_shard[k]], "ids", &ids, ids_row0[k], t));
		ckpt_tensor_free(t);
	}
	OK(ckpt_bundle_part_add_partitioned_entry(p[0], "emb", CKPT_DT_FLOAT, &emb, 3, emb_row0, emb_rows));
	OK(ckpt_bundle_part_add_partitioned_entry(p[0], "ids", CKPT_DT_INT64, &ids, 2, ids_row0, ids_rows));
	OK(ckpt_tensor_new(&t, CKPT_DT_INT64, &scalar));
	*(int64_t *)t->data = 99;
	OK(ckpt_bundle_part_add(p[0], "step", t));
	ckpt_tensor_free(t);
	for (int s = 0; s < NSHARDS; s++) {
		OK(ckpt_bundle_part_finish(&entries[s], &lens[s], p[s], 1));
		ckpt_bundle_part_free(p[s]);
	}
	OK(ckpt_bundle_merge_commit(vfs, PREFIX, NSHARDS, 42, (const void *const *)entries, lens, 1));
	for (int s = 0; s < NSHARDS; s++)
		free(entries[s]);
}

static ckpt_reader *open_in(ckpt_vfs *vfs, int *rc)
{
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	ckpt_reader *r = NULL;
	o.vfs = vfs;
	*rc = ckpt_reader_open(&r, PREFIX, &o);
	return *rc == CKPT_OK ? r : NULL;
}

static void file_names(char names[NSHARDS + 1][64])
{
	snprintf(names[0], 64, "%s.index", PREFIX);
	for (int s = 0; s < NSHARDS; s++)
		snprintf(names[s + 1], 64, "%s.data-%05d-of-%05d", PREFIX, s, NSHARDS);
}

Test(sliced_shards, slices_in_three_shards_read_back_whole)
{
	ckpt_vfs *vfs;
	ckpt_reader *r;
	ckpt_tensor *t;
	size_t i;
	int rc;

	OK(ckpt_vfs_memory_new(&vfs));
	write_sliced(vfs);
	r = open_in(vfs, &rc);
	cr_assert_not_null(r, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_reader_num_shards(r), NSHARDS);
	OK(ckpt_reader_find(&i, r, "emb"));
	cr_assert_eq(ckpt_reader_var(r, i)->nslices, 3);
	OK(ckpt_reader_read(&t, r, i));
	for (int k = 0; k < 48; k++)
		cr_assert_eq(((float *)t->data)[k], (float)k * 0.5f, "emb[%d]", k);
	ckpt_tensor_free(t);
	OK(ckpt_reader_find(&i, r, "ids"));
	OK(ckpt_reader_read(&t, r, i));
	for (int k = 0; k < 7; k++)
		cr_assert_eq(((int64_t *)t->data)[k], k * 1000 + 7, "ids[%d]", k);
	ckpt_tensor_free(t);
	OK(ckpt_reader_verify_all(r));
	ckpt_reader_free(r);

	if (getenv("CKPT_SLICED_SEED_OUT")) {
		char names[NSHARDS + 1][64];
		FILE *f = fopen(getenv("CKPT_SLICED_SEED_OUT"), "wb");
		cr_assert_not_null(f);
		file_names(names);
		for (int k = 0; k <= NSHARDS; k++) {
			const void *b;
			size_t n;
			unsigned char len[4];
			OK(ckpt_status_of(b = ckpt_vfs_memory_get(&n, vfs, names[k])));
			for (int j = 0; j < 4; j++)
				len[j] = (unsigned char)(n >> (8 * j));
			fwrite(len, 1, 4, f);
			fwrite(b, 1, n, f);
		}
		fclose(f);
	}
	ckpt_vfs_free(vfs);
}

/* xorshift: the same mutants on every run */
static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A failing call must say why. */
static void expect_contract(int rc, const char *what, int m)
{
	if (rc < 0)
		cr_assert(ckpt_error_last()->message && *ckpt_error_last()->message,
			"mutant %d: %s failed (%s) without a message", m, what, ckpt_status_name(rc));
}

Test(sliced_shards, mutants_fail_cleanly_or_read_correctly, .timeout = 600)
{
	ckpt_vfs *base;
	char names[NSHARDS + 1][64];
	const void *orig[NSHARDS + 1];
	size_t olen[NSHARDS + 1];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	int opened = 0, refused = 0, read_fail = 0, all_read = 0;

	OK(ckpt_vfs_memory_new(&base));
	write_sliced(base);
	file_names(names);
	for (int k = 0; k <= NSHARDS; k++)
		OK(ckpt_status_of(orig[k] = ckpt_vfs_memory_get(&olen[k], base, names[k])));
	for (int m = 0; m < MUTANTS; m++) {
		unsigned char *b[NSHARDS + 1];
		size_t n[NSHARDS + 1];
		ckpt_vfs *vfs;
		ckpt_reader *r;
		int rc, nmut = 1 + (int)(next(&seed) % 4), bad = 0;

		for (int k = 0; k <= NSHARDS; k++) {
			b[k] = malloc(olen[k] ? olen[k] : 1);
			memcpy(b[k], orig[k], olen[k]);
			n[k] = olen[k];
		}
		for (int j = 0; j < nmut; j++) {
			/* half of the mutations hit the index, the rest a data shard */
			int k = next(&seed) % 2 ? 0 : 1 + (int)(next(&seed) % NSHARDS);
			uint64_t kind = next(&seed) % 10;
			if (!n[k])
				continue;
			size_t at = (size_t)(next(&seed) % n[k]);
			if (kind < 5)
				b[k][at] ^= (unsigned char)(1u << (next(&seed) % 8));
			else if (kind < 7)
				b[k][at] = (unsigned char)next(&seed);
			else if (kind < 8)
				b[k][at] = kind & 1 ? 0xff : 0;
			else if (kind < 9)
				n[k] = at; /* cut short */
			else
				memset(b[k] + at, 0xff, n[k] - at < 8 ? n[k] - at : 8);
		}
		OK(ckpt_vfs_memory_new(&vfs));
		for (int k = 0; k <= NSHARDS; k++) {
			OK(ckpt_vfs_memory_put(vfs, names[k], b[k], n[k]));
			free(b[k]);
		}
		r = open_in(vfs, &rc);
		expect_contract(rc, "ckpt_reader_open", m);
		if (!r) {
			refused++;
			ckpt_vfs_free(vfs);
			continue;
		}
		opened++;
		for (size_t i = 0; i < ckpt_reader_num_entries(r); i++) {
			const ckpt_var_info *v = ckpt_reader_var(r, i);
			ckpt_tensor *t = NULL;
			rc = ckpt_reader_read(&t, r, i);
			expect_contract(rc, "ckpt_reader_read", m);
			if (rc < 0) {
				bad = 1;
				continue;
			}
			cr_assert_eq(t->dtype, v->dtype, "mutant %d: %s read as another dtype", m, v->name);
			cr_assert(ckpt_shape_equal(&t->shape, &v->shape), "mutant %d: %s read in another shape", m, v->name);
			ckpt_tensor_free(t);
		}
		expect_contract(ckpt_reader_verify_all(r), "ckpt_reader_verify_all", m);
		read_fail += bad;
		all_read += !bad;
		ckpt_reader_free(r);
		ckpt_vfs_free(vfs);
	}
	cr_log_info("%d mutants of a bundle with slices over %d shards: %d refused at open, %d opened (%d with an "
		"entry that failed to read, %d read whole)", MUTANTS, NSHARDS, refused, opened, read_fail, all_read);
	cr_assert_gt(refused, 0);
	cr_assert_gt(read_fail, 0, "no mutant reached a data shard's bytes");
	ckpt_vfs_free(base);
}

/*
 * Truncation sweep (libarchive test_read_truncated.c): every fixture in
 * ../shared/fixtures, every file of it cut at every prefix length (a dense
 * sample for large files: the first and last KiB byte by byte, the rest
 * evenly spread), opened from the memory file system and read completely.
 * A truncated file must never crash, hang or make the library ask for an
 * allocation out of proportion to the input, and must fail with a negative
 * status, a message and the file named.
 */
#include "rel_common.h"

/* Library allocations above this are refused and reported: no fixture needs more. */
#define REL_ALLOC_CAP (96u << 20)

/* Positions per file: all of them up to this size. */
static size_t dense_for(int kind)
{
	switch (kind) {
	case REL_KERAS_H5:
	case REL_KERAS_ZIP:
		return 2048 + 160; /* each HDF5 open costs ~1 ms: keep the sweep near 60 s on 2 cores */
	default:
		return 2048 + 1024;
	}
}

#define MAX_REPORTED 20

static void sweep(int kind_mask)
{
	rel_units us = rel_fixture_units();
	cr_assert_gt(us.n, 0, "no fixtures found under %s", CKPT_SHARED_DIR "/fixtures");
	rel_alloc_install(0, REL_ALLOC_CAP);
	long failures = 0, cases = 0, skipped = 0;
	double t0 = rel_now();
	for (size_t ui = 0; ui < us.n; ui++) {
		const rel_unit *u = &us.u[ui];
		if (!(kind_mask & (1 << u->kind)))
			continue;
		ckpt_vfs *vfs = rel_unit_vfs(u);
		rel_outcome base = rel_walk(vfs, u->open_path, 0);
		if (base.rc < 0) {
			/* The backend's own tests own this; the sweep needs a sound baseline. */
			cr_log_warn("truncation: skipping %s: intact file does not read: %s (%s)", u->name,
				ckpt_status_name(base.rc), base.message);
			skipped++;
			ckpt_vfs_free(vfs);
			continue;
		}
		for (int fi = 0; fi < u->nfiles; fi++) {
			const rel_file *f = &u->files[fi];
			size_t *pos;
			size_t np = rel_positions(f->n, dense_for(u->kind), &pos);
			for (size_t k = 0; k < np; k++) {
				size_t len = pos[k];
				cr_assert_eq(ckpt_vfs_memory_put(vfs, f->vpath, f->data, len), CKPT_OK);
				rel_largest = 0;
				rel_outcome o = rel_walk(vfs, u->open_path, 0);
				cases++;
				const char *why = NULL;
				/*
				 * A truncated member of a state-file directory may only cut an
				 * unused checkpoint or leave a shorter, still valid name.
				 */
				int must_fail = u->kind != REL_TF_STATE;
				if (must_fail && o.rc >= 0)
					why = "truncated input was accepted";
				else if (o.rc < 0 && (o.err_code >= 0 || !o.message[0]))
					why = "failure without a status or a message";
				else if (o.rc < 0 && !o.has_path)
					why = "error does not name the file";
				else if (rel_largest > REL_ALLOC_CAP)
					why = "allocation above the cap was requested";
				if (why) {
					if (failures < MAX_REPORTED)
						cr_log_error("%s: %s cut to %zu of %zu bytes: %s (rc=%s, largest alloc %zu, \"%s\")",
							u->name, f->vpath, len, f->n, why, ckpt_status_name(o.rc), rel_largest,
							o.message);
					failures++;
				}
			}
			free(pos);
			cr_assert_eq(ckpt_vfs_memory_put(vfs, f->vpath, f->data, f->n), CKPT_OK);
		}
		ckpt_vfs_free(vfs);
	}
	rel_alloc_restore();
	cr_log_info("truncation sweep (kinds 0x%x): %ld cases in %.1f s, %ld units skipped", kind_mask, cases,
		rel_now() - t0, skipped);
	rel_units_free(&us);
	if (cases == 0 && skipped > 0)
		cr_skip_test("no fixture of this kind reads yet (backend not linked?)");
	cr_assert_eq(failures, 0, "%ld of %ld truncated inputs mishandled (first %d listed above)", failures, cases,
		MAX_REPORTED);
	cr_assert_gt(cases, 0);
}

Test(truncation, tensorbundle_every_prefix, .timeout = 240)
{
	sweep(1 << REL_TF | 1 << REL_TF_STATE);
}

Test(truncation, keras_h5_prefixes, .timeout = 240)
{
	sweep(1 << REL_KERAS_H5);
}

Test(truncation, keras_archive_prefixes, .timeout = 240)
{
	sweep(1 << REL_KERAS_ZIP);
}

/*
 * Issue 12.1: no HDF5 file crashes us or makes us allocate beyond the
 * budget. The mutation campaign (tests/fuzz/h5_mutants.h) writes 8 bytes of
 * all ones, all zeros or a seeded random value at metadata offsets of every
 * Keras fixture, plus seeded random bit flips, and opens and reads each
 * mutant: every one must be read or refused with a proper error, never
 * crash the test process (Criterion reports a crash; the ASan pass reports
 * any sanitizer finding). The libhdf5 sandbox (formats/keras_h5/h5_sandbox.h)
 * is tested directly too: a child that segfaults, hangs, allocates without
 * bound or fails cleanly.
 *
 * Per fixture (defaults; times CKPT_TEST_SWEEP_SCALE under ASan, at least
 * 20 each; "all" for every slot, minutes per fixture, not the default):
 *  1. CKPT_H5_MUTANTS = 400 (field, pattern) slots, spread evenly (seeded
 *     phase) over every field start the structure walk knows
 *     (ckpt_h5m_fields: superblock, B-tree nodes, heaps, symbol table
 *     entries, global heap objects, object headers and their messages'
 *     address / length / size fields) times the three patterns;
 *  2. CKPT_H5_MUTANTS_BYTES = 100 slots over every metadata byte x 3;
 *  3. CKPT_H5_MUTANTS_FLIPS = 50 multi-bit flips.
 * The summary line says how many of how many slots each fixture got.
 */
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include "keras_test.h"
#include "error_assert.h"
#include <criterion/parameterized.h>
#include "formats/keras_h5/h5_safe.h"
#include "formats/keras_h5/h5_sandbox.h"
#include "tests/fuzz/h5_mutants.h"
#include "tests/fuzz/h5_mutants.c"

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Mutants of one kind per fixture: `dflt` (times CKPT_TEST_SWEEP_SCALE under ASan), at most `slots`. */
static size_t budget(const char *env, double dflt, size_t slots)
{
	const char *e = getenv(env), *sc = getenv("CKPT_TEST_SWEEP_SCALE");
	double scale = sc ? atof(sc) : 1.0, n;
	if (e && strcmp(e, "all") == 0)
		return slots;
	n = (e ? atof(e) : dflt) * (scale > 0 && scale <= 1 ? scale : 1.0);
	if (n < 20)
		n = 20;
	return (size_t)n < slots ? (size_t)n : slots;
}

/* Slot j of n spread over `slots` (all of them when n == slots), with a seeded phase. */
static size_t spread(size_t j, size_t n, size_t slots, uint64_t *seed)
{
	if (n == slots)
		return j;
	return (size_t)(((unsigned __int128)j * slots) / n + splitmix(seed) % (slots / n));
}

static void campaign(size_t fi)
{
	ckpt_h5m_base b;
	uint64_t seed = 0x12c0ffee00ull + fi, tally[3] = { 0, 0, 0 }, before = ckpt__h5_sandbox_count();
	size_t fslots, mslots, nf, nm, nflip, j;
	uint8_t *buf;
	cr_assert_eq(ckpt_h5m_load(&b, ts_fixture(kt_fixtures[fi].rel)), 0, "cannot load %s", kt_fixtures[fi].rel);
	cr_assert_gt(b.nmeta, 0);
	/* the walk must know the file: the superblock, the root group and its objects at least */
	cr_assert_gt(b.nstruct, 5, "%s: %zu structures walked", b.name, b.nstruct);
	cr_assert_gt(b.nfield, 100, "%s: %zu fields", b.name, b.nfield);
	buf = malloc(b.n);
	cr_assert(buf);
	cr_assert_eq(ckpt_h5m_run(b.bytes, b.n), CKPT_H5M_OPENED, "%s: the pristine file does not read", b.name);
	/* 1. field starts the structure walk knows, each slot (field, kind) one mutant: ones, zeros, a random value */
	fslots = 3 * b.nfield;
	nf = budget("CKPT_H5_MUTANTS", 400.0, fslots);
	for (j = 0; j < nf; j++) {
		size_t s = spread(j, nf, fslots, &seed);
		memcpy(buf, b.bytes, b.n);
		ckpt_h5m_apply_at(&b, buf, b.field[s / 3], (int)(s % 3), splitmix(&seed));
		tally[ckpt_h5m_run(buf, b.n)]++;
	}
	/* 2. any metadata byte (names, heap contents, padding, what the walk does not model) */
	mslots = 3 * b.nmeta;
	nm = budget("CKPT_H5_MUTANTS_BYTES", 100.0, mslots);
	for (j = 0; j < nm; j++) {
		size_t s = spread(j, nm, mslots, &seed);
		memcpy(buf, b.bytes, b.n);
		ckpt_h5m_apply(&b, buf, s / 3, (int)(s % 3), splitmix(&seed));
		tally[ckpt_h5m_run(buf, b.n)]++;
	}
	/* 3. random bit flips: 1-4 positions, 1-3 bits each */
	nflip = budget("CKPT_H5_MUTANTS_FLIPS", 50.0, SIZE_MAX);
	for (j = 0; j < nflip; j++) {
		int k, np = 1 + (int)(splitmix(&seed) % 4);
		memcpy(buf, b.bytes, b.n);
		for (k = 0; k < np; k++) {
			uint64_t r = splitmix(&seed), mask = (1ull << (r & 7)) | (1ull << ((r >> 3) & 63)) | (1ull << ((r >> 9) & 63));
			ckpt_h5m_apply(&b, buf, (size_t)(r >> 16), CKPT_H5M_XOR, mask & ((r >> 15) & 1 ? ~0ull : 0xffull));
		}
		tally[ckpt_h5m_run(buf, b.n)]++;
	}
	fprintf(stderr,
		"h5_mutants: %s: %zu structures, %zu field starts: %zu of %zu (field, pattern) mutants (%s; 8 bytes of ones / "
		"zeros / random); %zu of %zu (byte, pattern) mutants over %zu metadata bytes (%s); %zu flip mutants: %llu opened, %llu refused, "
		"%llu contained libhdf5 failures\n",
		b.name, b.nstruct, b.nfield, nf, fslots, nf == fslots ? "every one" : "spread over all", nm, mslots, b.nmeta,
		nm == mslots ? "every one" : "sampled", nflip, (unsigned long long)tally[CKPT_H5M_OPENED],
		(unsigned long long)tally[CKPT_H5M_REFUSED], (unsigned long long)tally[CKPT_H5M_CONTAINED]);
	/* every mutant that opened went through the sandbox: libhdf5 never ran on it in this process */
	cr_assert_geq(ckpt__h5_sandbox_count() - before, tally[CKPT_H5M_OPENED] + 1);
	/* a mutant campaign that refuses nothing mutated nothing */
	cr_assert_gt(tally[CKPT_H5M_REFUSED] + tally[CKPT_H5M_CONTAINED], 0);
	free(buf);
	ckpt_h5m_free(&b);
}

ParameterizedTestParameters(h5_mutants, every_fixture_survives_metadata_mutants)
{
	static size_t idx[KT_NFIX];
	size_t i;
	for (i = 0; i < KT_NFIX; i++)
		idx[i] = i;
	return cr_make_param_array(size_t, idx, KT_NFIX);
}

ParameterizedTest(size_t *fi, h5_mutants, every_fixture_survives_metadata_mutants, .timeout = 900)
{
	campaign(*fi);
}

/* ---- the sandbox itself ---- */

static int child_segv(void *arg, void **p, size_t *n)
{
	(void)p;
	(void)n;
	(void)arg;
	raise(SIGSEGV);
	return 0;
}

static int child_hang(void *arg, void **p, size_t *n)
{
	(void)p;
	(void)n;
	(void)arg;
	for (;;)
		pause();
	return 0;
}

static int child_spin(void *arg, void **p, size_t *n)
{
	volatile uint64_t x = 0;
	(void)p;
	(void)n;
	(void)arg;
	for (;;)
		x++;
	return 0;
}

/* Tries to allocate and touch 8 GiB in 64 MiB steps: the address-space limit must stop it. */
static int child_hog(void *arg, void **p, size_t *n)
{
	size_t i;
	(void)arg;
	(void)p;
	(void)n;
	for (i = 0; i < 128; i++) {
		char *b = malloc(64u << 20);
		if (!b)
			return ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "allocation %zu of 64 MiB failed", i);
		memset(b, 1, 64u << 20);
	}
	*p = NULL;
	*n = 0;
	return CKPT_OK; /* not reached under the limit */
}

static int child_fail(void *arg, void **p, size_t *n)
{
	(void)arg;
	(void)p;
	(void)n;
	return ckpt__fail(CKPT_ELIMIT, "ignored", "layers/dense/vars/0", 1234, "a clean refusal from the child");
}

static int child_ok(void *arg, void **p, size_t *n)
{
	*p = ckpt__strdup((const char *)arg);
	*n = strlen((const char *)arg);
	return CKPT_OK;
}

static int boxed(ckpt__h5_sandbox_fn fn, void *arg, unsigned timeout_ms, uint64_t mem)
{
	ckpt__h5_limits lim = { mem, timeout_ms };
	void *out = NULL;
	size_t n = 0;
	int rc;
	ckpt__h5_lock();
	rc = ckpt__h5_sandbox("/x/file.h5", "in a test", &lim, fn, arg, NULL, 0, 1 << 20, &out, &n);
	ckpt__h5_unlock();
	ckpt__free(out);
	return rc;
}

/* every boxed call here names the same made-up file */
#define assert_msg(rc, code, needle) ts_assert_error_at(rc, code, needle, "/x/file.h5")

Test(h5_mutants, sandbox_turns_crash_hang_and_hog_into_errors, .timeout = 120)
{
	assert_msg(boxed(child_segv, NULL, 10000, 64u << 20), CKPT_EFORMAT, "signal 11, SIGSEGV");
	assert_msg(boxed(child_hang, NULL, 300, 64u << 20), CKPT_EFORMAT, "longer than 300 ms");
	assert_msg(boxed(child_spin, NULL, 1000, 64u << 20), CKPT_EFORMAT, "libhdf5 ");
	{
		int rc = boxed(child_hog, NULL, 60000, 256u << 20);
		cr_assert_lt(rc, 0, "the child allocated 8 GiB under a 256 MiB limit");
		cr_assert(strstr(ckpt_error_last()->message, "64 MiB failed") || strstr(ckpt_error_last()->message, "libhdf5 "),
			"%s", ckpt_error_last()->message);
	}
	assert_msg(boxed(child_fail, NULL, 10000, 64u << 20), CKPT_ELIMIT, "a clean refusal from the child");
	cr_assert_str_eq(ckpt_error_last()->variable, "layers/dense/vars/0");
	cr_assert_eq(ckpt_error_last()->offset, 1234);
}

Test(h5_mutants, a_good_answer_arrives_whole)
{
	ckpt__h5_limits lim = { 64u << 20, 10000 };
	char *out = NULL, text[] = "layout bytes", dst[12];
	size_t n = 0;
	ckpt__h5_lock();
	cr_assert_eq(ckpt__h5_sandbox("/x/file.h5", "in a test", &lim, child_ok, text, NULL, 0, 100, (void **)&out, &n), CKPT_OK);
	cr_assert_eq(n, 12);
	cr_assert(memcmp(out, "layout bytes", 12) == 0);
	ckpt__free(out);
	cr_assert_eq(ckpt__h5_sandbox("/x/file.h5", "in a test", &lim, child_ok, text, dst, sizeof(dst), 0, NULL, NULL), CKPT_OK);
	cr_assert(memcmp(dst, "layout bytes", 12) == 0);
	cr_assert_eq(ckpt__h5_sandbox("/x/file.h5", "in a test", &lim, child_ok, text, dst, 5, 0, NULL, NULL), CKPT_EFORMAT);
	cr_assert_eq(ckpt__h5_sandbox("/x/file.h5", "in a test", &lim, child_ok, text, NULL, 0, 4, (void **)&out, &n), CKPT_ELIMIT);
	ckpt__h5_unlock();
}

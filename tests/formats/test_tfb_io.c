/*
 * The TensorBundle data path with helper threads (formats/tf_bundle/par.c):
 * crc32c combining, entries cut into chunks (read_into, verify, save), odd
 * sizes around the thresholds, a flipped byte in a multi-chunk entry,
 * concurrent callers (pthreads and an OpenMP region), and injected I/O and
 * allocation failures on the chunked paths.
 */
#include <criterion/criterion.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "ckpt/ckpt.h"
#include "ckpt/sys/vfs_faulty.h"
#include "ckpt/sys/vfs_memory.h"
#include "libckpt/internal.h"
#include "rel_common.h"
#include "test_support.h"

#define MiB (1u << 20)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	uint64_t x = 0x1234567ull + seed * 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (unsigned char)(x >> 56);
	}
}

Test(tfb_io, crc32c_combine_matches_extend_on_random_splits)
{
	size_t cap = 1 << 20;
	unsigned char *buf = malloc(cap);
	fill(buf, cap, 1);
	for (int t = 0; t < 300; t++) {
		size_t n = (size_t)(next_rand() % cap);
		size_t a = n ? (size_t)(next_rand() % (n + 1)) : 0;
		uint32_t whole = ckpt_crc32c_extend(0, buf, n);
		uint32_t c1 = ckpt_crc32c_extend(0, buf, a), c2 = ckpt_crc32c_extend(0, buf + a, n - a);
		cr_assert_eq(ckpt__crc32c_combine(c1, c2, n - a), whole, "n %zu split %zu", n, a);
		/* three pieces, combined left to right */
		size_t b = a + (n - a) / 3;
		uint32_t x = ckpt_crc32c_extend(0, buf, a), y = ckpt_crc32c_extend(0, buf + a, b - a),
			z = ckpt_crc32c_extend(0, buf + b, n - b);
		cr_assert_eq(ckpt__crc32c_combine(ckpt__crc32c_combine(x, y, b - a), z, n - b), whole);
		/* the operator computed once, applied as often */
		cr_assert_eq(ckpt__crc32c_combine_shift(c1, c2, ckpt__crc32c_shift(n - a)), whole, "n %zu split %zu", n, a);
	}
	cr_assert_eq(ckpt__crc32c_combine(0xdeadbeefu, 0, 0), 0xdeadbeefu);
	cr_assert_eq(ckpt__crc32c_combine(0, ckpt_crc32c_extend(0, "123456789", 9), 9), 0xe3069283u);
	/* shifting by L1 then L2 is shifting by L1 + L2, also past 2^31 bytes (the powers' period) */
	for (int t = 0; t < 200; t++) {
		uint32_t c = (uint32_t)next_rand();
		uint64_t l1 = next_rand() >> (24 + next_rand() % 40), l2 = next_rand() >> (24 + next_rand() % 40);
		cr_assert_eq(ckpt__crc32c_combine(ckpt__crc32c_combine(c, 0, l1), 0, l2),
			ckpt__crc32c_combine(c, 0, l1 + l2), "l1 %llu l2 %llu", (unsigned long long)l1,
			(unsigned long long)l2);
	}
	free(buf);
}

/* Entries around the thresholds (serial below 8 MiB reads, 2 MiB saves; chunks of >= 2 MiB). */
static const struct { const char *name; size_t n; } ents[] = {
	{ "a/empty", 0 },
	{ "b/small", 4093 },
	{ "c/save_edge", 2 * MiB },
	{ "d/read_edge_minus", 8 * MiB - 1 },
	{ "e/read_edge", 8 * MiB },
	{ "f/odd", 8 * MiB + 12345 },
	{ "g/big_odd", 27 * MiB + 7 },
};
#define NENTS (sizeof(ents) / sizeof(ents[0]))

static unsigned char *data[NENTS];

static void make_data(void)
{
	for (size_t i = 0; i < NENTS; i++) {
		data[i] = malloc(ents[i].n ? ents[i].n : 1);
		fill(data[i], ents[i].n, (unsigned)i + 7);
	}
}

static void free_data(void)
{
	for (size_t i = 0; i < NENTS; i++)
		free(data[i]);
}

static int save_all(const char *prefix, ckpt_vfs *vfs)
{
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.no_fsync = 1;
	o.vfs = vfs;
	ckpt_writer *w = NULL;
	int rc = ckpt_writer_open(&w, prefix, NULL, &o);
	for (size_t i = 0; rc == CKPT_OK && i < NENTS; i++) {
		ckpt_tensor *t = NULL;
		int64_t d = (int64_t)ents[i].n;
		ckpt_shape s;
		cr_assert_eq(ckpt_shape_make(&s, 1, &d), CKPT_OK);
		cr_assert_eq(ckpt_tensor_wrap(&t, CKPT_DT_UINT8, &s, data[i], ents[i].n), CKPT_OK);
		rc = ckpt_writer_add(w, ents[i].name, t, 0);
		ckpt_tensor_free(t);
	}
	if (rc == CKPT_OK)
		rc = ckpt_writer_commit(w);
	ckpt_writer_free(w);
	return rc;
}

static ckpt_reader *open_prefix(const char *prefix, ckpt_vfs *vfs)
{
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	o.vfs = vfs;
	ckpt_reader *r = NULL;
	int rc = ckpt_reader_open(&r, prefix, &o);
	char buf[1024];
	cr_assert_eq(rc, CKPT_OK, "%s", ckpt_error_format(NULL, buf, sizeof(buf)));
	return r;
}

static size_t index_of(ckpt_reader *r, size_t e)
{
	size_t k;
	cr_assert_eq(ckpt_reader_find(&k, r, ents[e].name), CKPT_OK);
	return k;
}

/* Every entry: stored crc is the one-pass crc (the writer's combine), read_into and verify agree. */
static void check_all(ckpt_reader *r)
{
	for (size_t e = 0; e < NENTS; e++) {
		size_t k = index_of(r, e);
		const ckpt_var_info *v = ckpt_reader_var(r, k);
		cr_assert_eq(v->nbytes, ents[e].n);
		cr_assert_eq(v->crc32c, ckpt_crc32c_extend(0, data[e], ents[e].n), "%s", ents[e].name);
		unsigned char *got = malloc(ents[e].n + 1);
		char buf[1024];
		cr_assert_eq(ckpt_reader_read_into(r, k, got, ents[e].n), CKPT_OK, "%s: %s", ents[e].name,
			ckpt_error_format(NULL, buf, sizeof(buf)));
		cr_assert_eq(memcmp(got, data[e], ents[e].n), 0, "%s", ents[e].name);
		cr_assert_eq(ckpt_reader_verify(r, k), CKPT_OK, "%s", ents[e].name);
		free(got);
	}
}

static void flip(const char *path, long off);

Test(tfb_io, chunked_save_read_into_and_verify_round_trip, .timeout = 120)
{
	make_data();
	char *dir = ts_tmpdir();
	char *prefix = ts_join(dir, "ck");
	cr_assert_eq(save_all(prefix, NULL), CKPT_OK);
	ckpt_reader *r = open_prefix(prefix, NULL);
	check_all(r);
	ckpt_reader_free(r);
	/* and with one thread: the serial paths give the same file */
	omp_set_num_threads(1);
	char *prefix1 = ts_join(dir, "ck1");
	cr_assert_eq(save_all(prefix1, NULL), CKPT_OK);
	r = open_prefix(prefix1, NULL);
	check_all(r);
	ckpt_reader_free(r);
	char *d0 = ts_join(dir, "ck.data-00000-of-00001"), *d1 = ts_join(dir, "ck1.data-00000-of-00001");
	size_t n0, n1;
	char *b0 = ts_read_file(d0, &n0), *b1 = ts_read_file(d1, &n1);
	cr_assert(b0 && b1 && n0 == n1 && memcmp(b0, b1, n0) == 0);
	/*
	 * TensorFlow reads the chunked file (checking every crc32c) and gets the
	 * bytes written; a copy with one byte of the 27 MiB entry flipped it
	 * refuses: the oracle does check.
	 */
	char *bad = ts_join(dir, "bad");
	char cmd[8192];
	ts_run_result res;
	snprintf(cmd, sizeof(cmd), "cp '%s.index' '%s.index' && cp '%s' '%s.data-00000-of-00001'", prefix, bad, d0, bad);
	cr_assert_eq(ts_run_sh(&res, cmd), 0);
	ts_assert_exit(&res, 0, "%s", res.err);
	ts_run_free(&res);
	r = open_prefix(prefix, NULL);
	int64_t big_off = ckpt_reader_var(r, index_of(r, NENTS - 1))->offset;
	ckpt_reader_free(r);
	char *bad_data = ts_join(dir, "bad.data-00000-of-00001");
	flip(bad_data, (long)big_off + (long)(ents[NENTS - 1].n / 2));
	free(bad_data);
	snprintf(cmd, sizeof(cmd), "'%s' '%s/tests/oracles/tf_bundle_digest.py' '%s' '%s'", ts_oracle_python(),
		CKPT_SOURCE_DIR, prefix, bad);
	cr_assert_eq(ts_run_sh(&res, cmd), 0);
	ts_assert_exit(&res, 0, "tf_bundle_digest.py: %s", res.err);
	char *second = strstr(res.out, "\n== ");
	cr_assert_not_null(second, "%s", res.out);
	char *bad_listing = second + 2;
	second[1] = '\0'; /* the first listing ends with its last newline; the second starts after "=" */
	for (size_t e = 0; e < NENTS; e++) {
		char want[256];
		snprintf(want, sizeof(want), "\n%s\tuint8\t%zu\t0x%08lx\n", ents[e].name, ents[e].n,
			crc32(0L, data[e], (uInt)ents[e].n));
		cr_assert_not_null(strstr(res.out, want), "TensorFlow does not read %s as written:\n%s", ents[e].name,
			res.out);
	}
	char want_bad[128];
	snprintf(want_bad, sizeof(want_bad), "%s\tERROR\t", ents[NENTS - 1].name);
	cr_assert_not_null(strstr(bad_listing, want_bad), "TensorFlow read the flipped entry:\n%s", bad_listing);
	ts_run_free(&res);
	free(bad);
	free(b0);
	free(b1);
	free(d0);
	free(d1);
	free(prefix1);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
	free_data();
}

static void flip(const char *path, long off)
{
	cr_assert_eq(ts_flip_byte(path, off, 0x20), 0, "%s at %ld", path, off);
}

static void expect_crc_error(int rc, const char *var, int64_t off)
{
	const ckpt_error *e = ckpt_error_last();
	cr_assert_eq(rc, CKPT_ECHECKSUM, "rc %s: %s", ckpt_status_name(rc), e->message);
	cr_assert(e->variable && strcmp(e->variable, var) == 0, "variable %s", e->variable ? e->variable : "(null)");
	cr_assert(e->path && strstr(e->path, ".data-00000-of-00001"), "path %s", e->path ? e->path : "(null)");
	cr_assert_eq(e->offset, off);
	cr_assert(strstr(e->message, "crc32c mismatch"), "%s", e->message);
}

Test(tfb_io, flipped_byte_in_a_multi_chunk_entry, .timeout = 120)
{
	make_data();
	char *dir = ts_tmpdir();
	char *prefix = ts_join(dir, "ck");
	cr_assert_eq(save_all(prefix, NULL), CKPT_OK);
	ckpt_reader *r = open_prefix(prefix, NULL);
	size_t g = index_of(r, 6), f = index_of(r, 5);
	int64_t goff = ckpt_reader_var(r, g)->offset, foff = ckpt_reader_var(r, f)->offset;
	ckpt_reader_free(r);
	char *path = ts_join(dir, "ck.data-00000-of-00001");
	flip(path, (long)(goff + (int64_t)ents[6].n / 2 + 3)); /* middle of g */
	flip(path, (long)(foff + (int64_t)ents[5].n - 1));     /* last byte of f (the short last chunk) */
	for (int threads = 2; threads >= 1; threads--) {
		omp_set_num_threads(threads);
		r = open_prefix(prefix, NULL);
		unsigned char *buf = malloc(ents[6].n);
		expect_crc_error(ckpt_reader_read_into(r, g, buf, ents[6].n), ents[6].name, goff);
		expect_crc_error(ckpt_reader_verify(r, g), ents[6].name, goff);
		expect_crc_error(ckpt_reader_read_into(r, f, buf, ents[5].n), ents[5].name, foff);
		expect_crc_error(ckpt_reader_verify(r, f), ents[5].name, foff);
		ckpt_tensor *t = NULL;
		expect_crc_error(ckpt_reader_read(&t, r, g), ents[6].name, goff);
		/* the other entries are fine */
		size_t e = index_of(r, 4);
		cr_assert_eq(ckpt_reader_verify(r, e), CKPT_OK);
		cr_assert_eq(ckpt_reader_read_into(r, e, buf, ents[4].n), CKPT_OK);
		free(buf);
		ckpt_reader_free(r);
	}
	/* no_verify: verify checks structure only, read_into reads the bytes as stored */
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	o.no_verify = 1;
	cr_assert_eq(ckpt_reader_open(&r, prefix, &o), CKPT_OK);
	cr_assert_eq(ckpt_reader_verify(r, g), CKPT_OK);
	unsigned char *buf = malloc(ents[6].n);
	cr_assert_eq(ckpt_reader_read_into(r, g, buf, ents[6].n), CKPT_OK);
	cr_assert_eq(buf[ents[6].n / 2 + 3], data[6][ents[6].n / 2 + 3] ^ 0x20);
	free(buf);
	ckpt_reader_free(r);
	free(path);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
	free_data();
}

/* ---- concurrent callers ---- */

typedef struct worker {
	ckpt_reader *r;
	int id, bad;
} worker;

static void *reader_thread(void *arg)
{
	worker *w = arg;
	for (int round = 0; round < 2; round++)
		for (size_t j = 0; j < NENTS; j++) {
			size_t e = (j + (size_t)w->id) % NENTS, k;
			if (ckpt_reader_find(&k, w->r, ents[e].name) < 0) {
				w->bad++;
				continue;
			}
			unsigned char *buf = malloc(ents[e].n + 1);
			if ((w->id + round) % 2 == 0) {
				if (ckpt_reader_read_into(w->r, k, buf, ents[e].n) < 0 || memcmp(buf, data[e], ents[e].n))
					w->bad++;
			} else if (ckpt_reader_verify(w->r, k) < 0) {
				w->bad++;
			}
			free(buf);
		}
	return NULL;
}

Test(tfb_io, concurrent_read_into_and_verify, .timeout = 180)
{
	make_data();
	char *dir = ts_tmpdir();
	char *prefix = ts_join(dir, "ck");
	cr_assert_eq(save_all(prefix, NULL), CKPT_OK);
	ckpt_reader *r = open_prefix(prefix, NULL);
	size_t k;
	cr_assert_eq(ckpt_reader_find(&k, r, ents[0].name), CKPT_OK); /* the name index exists before the threads */
	enum { NT = 4 };
	pthread_t th[NT];
	worker w[NT];
	for (int i = 0; i < NT; i++) {
		w[i] = (worker){ r, i, 0 };
		cr_assert_eq(pthread_create(&th[i], NULL, reader_thread, &w[i]), 0);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(w[i].bad, 0, "thread %d: %d failures", i, w[i].bad);
	}
	/* from inside an OpenMP region (nested regions off: each call runs serially) */
	int bad = 0;
	#pragma omp parallel for schedule(dynamic, 1) reduction(+:bad) num_threads(3)
	for (int j = 0; j < (int)(2 * NENTS); j++) {
		size_t e = (size_t)j % NENTS, idx;
		if (ckpt_reader_find(&idx, r, ents[e].name) < 0) {
			bad++;
			continue;
		}
		unsigned char *buf = malloc(ents[e].n + 1);
		if (j < (int)NENTS ? ckpt_reader_read_into(r, idx, buf, ents[e].n) < 0 || memcmp(buf, data[e], ents[e].n)
				   : ckpt_reader_verify(r, idx) < 0)
			bad++;
		free(buf);
	}
	cr_assert_eq(bad, 0);
	ckpt_reader_free(r);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
	free_data();
}

/* ---- injected failures on the chunked paths (memory file system) ---- */

/*
 * Open `prefix` and read_into + verify the large entries. *io_ok: the bytes
 * were right and a failure recorded its own error (that status, a message;
 * for an I/O failure of a read, the data file and the entry).
 */
static int read_big(ckpt_vfs *vfs, const char *prefix, int *io_ok)
{
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	o.vfs = vfs;
	ckpt_reader *r = NULL;
	*io_ok = 1;
	ckpt_error_clear();
	int rc = ckpt_reader_open(&r, prefix, &o);
	if (rc < 0)
		*io_ok = ckpt_error_last()->code == rc && ckpt_error_last()->message[0];
	for (size_t e = 4; rc == CKPT_OK && e < NENTS; e++) {
		size_t k;
		rc = ckpt_reader_find(&k, r, ents[e].name);
		unsigned char *buf = malloc(ents[e].n);
		ckpt_error_clear();
		if (rc == CKPT_OK)
			rc = ckpt_reader_read_into(r, k, buf, ents[e].n);
		if (rc == CKPT_OK && memcmp(buf, data[e], ents[e].n) != 0) {
			*io_ok = 0;
			rc = CKPT_ERROR;
		}
		if (rc == CKPT_OK) {
			ckpt_error_clear();
			rc = ckpt_reader_verify(r, k);
		}
		if (rc < 0 && *io_ok) {
			/* a failed read records its own error; an I/O failure also names the file and the entry */
			const ckpt_error *err = ckpt_error_last();
			*io_ok = err->code == rc && err->message && *err->message &&
				(rc != CKPT_EIO || (err->path && strstr(err->path, ".data-") && err->variable &&
					strcmp(err->variable, ents[e].name) == 0));
		}
		free(buf);
	}
	ckpt_reader_free(r);
	return rc;
}

static void read_sweep(int alloc)
{
	make_data();
	ckpt_vfs *mem;
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	cr_assert_eq(save_all("m/ck", mem), CKPT_OK);
	rel_alloc_install(0, 0);
	ckpt_vfs *f;
	int ok;
	cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, 0), CKPT_OK);
	rel_alloc_arm(0);
	cr_assert_eq(read_big(f, "m/ck", &ok), CKPT_OK);
	long total = alloc ? rel_calls : ckpt_vfs_faulty_calls(f);
	ckpt_vfs_free(f);
	long failed = 0, unfired = 0;
	for (long i = 1; i <= total; i++) {
		long live = rel_live_blocks;
		cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, alloc ? 0 : i), CKPT_OK);
		rel_alloc_arm(alloc ? i : 0);
		int rc = read_big(f, "m/ck", &ok);
		rel_alloc_disarm();
		int fired = alloc ? rel_calls >= i : ckpt_vfs_faulty_fired(f);
		ckpt_vfs_free(f);
		/* the helper threads' scheduling can make a read use fewer calls: then nothing failed, and it must succeed */
		if (!fired)
			cr_assert_eq(rc, CKPT_OK, "call %ld of %ld was not made, yet the read failed: %s", i, total,
				ckpt_error_last()->message);
		unfired += !fired;
		/* success: a probe absorbed it and the bytes are right; failure: its own error, with file and entry */
		cr_assert(ok, "call %ld: rc %s, wrong bytes or an error without its own status, message, file or entry "
			"(\"%s\")", i, ckpt_status_name(rc), ckpt_error_last()->message);
		failed += rc < 0;
		cr_assert_eq(rel_live_blocks, live, "call %ld: %ld blocks leaked", i, rel_live_blocks - live);
	}
	cr_log_info("chunked read, failing each of %ld %s calls: %ld failed, %ld not made in that run", total,
		alloc ? "allocation" : "I/O", failed, unfired);
	cr_assert_gt(failed, total / 2, "most injected failures must reach the caller");
	rel_alloc_restore();
	ckpt_vfs_free(mem);
	free_data();
}

Test(tfb_io, chunked_read_every_io_call_fails_cleanly, .timeout = 240)
{
	read_sweep(0);
}

Test(tfb_io, chunked_read_every_allocation_fails_cleanly, .timeout = 240)
{
	read_sweep(1);
}

Test(tfb_io, chunked_save_every_io_call_fails_cleanly, .timeout = 240)
{
	make_data();
	ckpt_vfs *mem, *f;
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, 0), CKPT_OK);
	cr_assert_eq(save_all("m/ck", f), CKPT_OK);
	long total = ckpt_vfs_faulty_calls(f);
	ckpt_vfs_free(f);
	ckpt_vfs_free(mem);
	long failed = 0, absorbed = 0;
	for (long i = 1; i <= total; i++) {
		/* a fresh file system each time, so every try makes the same calls as the counting run */
		cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
		cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, i), CKPT_OK);
		ckpt_error_clear();
		int rc = save_all("m/ck", f);
		int fired = ckpt_vfs_faulty_fired(f);
		ckpt_vfs_free(f);
		cr_assert(fired, "call %ld of %ld never happened: the save is not deterministic", i, total);
		int ok;
		if (rc >= 0) {
			/* absorbed (cleanup): then the checkpoint is complete and right */
			cr_assert_eq(read_big(mem, "m/ck", &ok), CKPT_OK, "call %ld: success reported, but: %s", i,
				ckpt_error_last()->message);
			cr_assert(ok, "call %ld: success reported with wrong bytes", i);
			absorbed++;
		} else {
			cr_assert_eq(ckpt_error_last()->code, rc, "call %ld: returned %s without recording that error", i,
				ckpt_status_name(rc));
			cr_assert(ckpt_error_last()->message[0], "call %ld: empty message", i);
			failed++;
		}
		ckpt_vfs_free(mem);
	}
	cr_log_info("chunked save, failing each of %ld I/O calls: %ld failed, %ld absorbed", total, failed, absorbed);
	cr_assert_gt(failed, 0, "no injected failure reached the caller");
	free_data();
}

/* ---- many tiny entries: runs read through the reader's window (POSIX files only) ---- */

Test(tfb_io, tiny_entries_through_the_window, .timeout = 120)
{
	enum { NT = 3000 };
	char *dir = ts_tmpdir();
	char *prefix = ts_join(dir, "tiny");
	static float vals[NT][16];
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_writer *w;
	cr_assert_eq(ckpt_writer_open(&w, prefix, NULL, &o), CKPT_OK);
	ckpt_shape s;
	int64_t d = 16;
	cr_assert_eq(ckpt_shape_make(&s, 1, &d), CKPT_OK);
	char name[64];
	for (int i = 0; i < NT; i++) {
		for (int k = 0; k < 16; k++)
			vals[i][k] = (float)(i * 16 + k);
		ckpt_tensor *t;
		cr_assert_eq(ckpt_tensor_wrap(&t, CKPT_DT_FLOAT, &s, vals[i], sizeof(vals[i])), CKPT_OK);
		snprintf(name, sizeof(name), "t/%05d", i);
		cr_assert_eq(ckpt_writer_add(w, name, t, 0), CKPT_OK);
		ckpt_tensor_free(t);
	}
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	ckpt_reader *r = open_prefix(prefix, NULL);
	float got[16];
	/* forward, backward, strided: every order reads the right bytes */
	for (int pass = 0; pass < 3; pass++)
		for (int j = 0; j < NT; j++) {
			int i = pass == 0 ? j : pass == 1 ? NT - 1 - j : (j * 7) % NT;
			size_t k;
			snprintf(name, sizeof(name), "t/%05d", i);
			cr_assert_eq(ckpt_reader_find(&k, r, name), CKPT_OK);
			cr_assert_eq(ckpt_reader_read_into(r, k, got, sizeof(got)), CKPT_OK);
			cr_assert_eq(memcmp(got, vals[i], sizeof(got)), 0, "%s pass %d", name, pass);
			cr_assert_eq(ckpt_reader_verify(r, k), CKPT_OK);
		}
	ckpt_reader_free(r);
	/* a flipped byte in one tiny entry is caught (read_into, verify), its neighbours read */
	snprintf(name, sizeof(name), "t/%05d", 1234);
	r = open_prefix(prefix, NULL);
	size_t k;
	cr_assert_eq(ckpt_reader_find(&k, r, name), CKPT_OK);
	int64_t off = ckpt_reader_var(r, k)->offset;
	ckpt_reader_free(r);
	char *dpath = ts_join(dir, "tiny.data-00000-of-00001");
	flip(dpath, (long)off + 5);
	r = open_prefix(prefix, NULL);
	for (int i = 1230; i < 1240; i++) {
		char nm[64];
		snprintf(nm, sizeof(nm), "t/%05d", i);
		size_t q;
		cr_assert_eq(ckpt_reader_find(&q, r, nm), CKPT_OK);
		if (i == 1234) {
			expect_crc_error(ckpt_reader_read_into(r, q, got, sizeof(got)), nm, off);
			expect_crc_error(ckpt_reader_verify(r, q), nm, off);
		} else {
			cr_assert_eq(ckpt_reader_read_into(r, q, got, sizeof(got)), CKPT_OK, "%s", nm);
			cr_assert_eq(ckpt_reader_verify(r, q), CKPT_OK, "%s", nm);
		}
	}
	ckpt_reader_free(r);
	/* a data file cut short: entries before the cut still read, the ones past it fail */
	flip(dpath, (long)off + 5);
	cr_assert_eq(truncate(dpath, (off_t)off + 30), 0);
	r = open_prefix(prefix, NULL);
	for (int i = 1200; i < 1240; i++) {
		char nm[64];
		snprintf(nm, sizeof(nm), "t/%05d", i);
		size_t q;
		cr_assert_eq(ckpt_reader_find(&q, r, nm), CKPT_OK);
		int rc = ckpt_reader_read_into(r, q, got, sizeof(got));
		if (i < 1234)
			cr_assert_eq(rc, CKPT_OK, "%s: %s", nm, ckpt_error_last()->message);
		else
			cr_assert_eq(rc, CKPT_EFORMAT, "%s: %s", nm, ckpt_status_name(rc));
	}
	ckpt_reader_free(r);
	free(dpath);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

/*
 * The TensorBundle reader's cold-read pipeline (formats/tf_bundle/
 * bundle_direct.c): several O_DIRECT reads in flight, pieces crc-ed and
 * copied out of aligned bounce buffers. CKPT_DIRECT_READ=always forces it
 * whatever the page cache holds, so every test here runs it and checks that
 * it did (the chunk counters). Entries straddle chunk edges at unaligned
 * offsets; requests come in any order; a flipped byte, a file cut short
 * under an open reader and a load into mirrored variables are checked
 * against what the entry-by-entry path gives.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "libckpt/internal.h"
#include "formats/tf_bundle/tfb.h"
#include "test_support.h"

#define MiB ((size_t)1 << 20)

/* odd sizes, so that offsets in the data file are not block-aligned and entries cross 4 MiB chunks */
static const struct { const char *name; size_t n; } ents[] = {
	{ "a/tiny", 17 },
	{ "b/empty", 0 },
	{ "c/crosses", 5 * MiB + 3 },
	{ "d/small", 4093 },
	{ "e/big", 13 * MiB + 1001 },
	{ "f/last", 2 * MiB + 511 },
};
#define NENTS (sizeof(ents) / sizeof(ents[0]))

static unsigned char *data[NENTS];

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	uint64_t x = 0x2545f4914f6cdd1dull * (seed + 1);
	for (size_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (unsigned char)(x >> 56);
	}
}

/* A bundle of ents (float32 where the size allows, so that a load makes float variables) under dir/ck. */
static char *save_bundle(const char *dir)
{
	char *prefix = ts_join(dir, "ck");
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_writer *w = NULL;
	cr_assert_eq(ckpt_writer_open(&w, prefix, NULL, &o), CKPT_OK);
	for (size_t i = 0; i < NENTS; i++) {
		data[i] = malloc(ents[i].n ? ents[i].n : 1);
		fill(data[i], ents[i].n, (unsigned)i);
		ckpt_tensor *t = NULL;
		int64_t d = (int64_t)ents[i].n;
		ckpt_shape s;
		cr_assert_eq(ckpt_shape_make(&s, 1, &d), CKPT_OK);
		cr_assert_eq(ckpt_tensor_wrap(&t, CKPT_DT_UINT8, &s, data[i], ents[i].n), CKPT_OK);
		cr_assert_eq(ckpt_writer_add(w, ents[i].name, t, 0), CKPT_OK);
		ckpt_tensor_free(t);
	}
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	return prefix;
}

static ckpt_reader *open_prefix(const char *prefix)
{
	ckpt_reader *r = NULL;
	char buf[1024];
	cr_assert_eq(ckpt_reader_open(&r, prefix, NULL), CKPT_OK, "%s", ckpt_error_format(NULL, buf, sizeof(buf)));
	return r;
}

static uint64_t direct_chunks(void)
{
	uint64_t d, b;
	tfb_direct_stats(&d, &b);
	return d;
}

/* One request per entry, in the order given by perm; destinations (or NULL to verify only) in bufs. */
static int read_many(ckpt_reader *r, const size_t *perm, unsigned char **bufs)
{
	ckpt__read_req req[NENTS];
	for (size_t k = 0; k < NENTS; k++) {
		size_t e = perm[k], idx;
		cr_assert_eq(ckpt_reader_find(&idx, r, ents[e].name), CKPT_OK);
		req[k] = (ckpt__read_req){ idx, bufs ? bufs[e] : NULL, bufs ? ents[e].n : 0 };
	}
	return ckpt__reader_read_many(r, req, NENTS, 0);
}

static void flip(const char *path, long off)
{
	cr_assert_eq(ts_flip_byte(path, off, 0x40), 0, "%s at %ld", path, off);
}

/* Remove the test's directory and free what it allocated. */
static void done_with(char *dir, char *prefix, char *other)
{
	ts_rmtree(dir);
	free(dir);
	free(prefix);
	free(other);
	for (size_t i = 0; i < NENTS; i++) {
		free(data[i]);
		data[i] = NULL;
	}
}

/* Where entry `name` of the bundle at prefix starts in its data file. */
static int64_t entry_offset(const char *prefix, const char *name)
{
	ckpt_reader *r = open_prefix(prefix);
	size_t i;
	cr_assert_eq(ckpt_reader_find(&i, r, name), CKPT_OK, "%s", name);
	int64_t off = ckpt_reader_var(r, i)->offset;
	ckpt_reader_free(r);
	return off;
}

Test(direct_read, forced_pipeline_reads_every_entry_in_any_order, .timeout = 60)
{
	setenv("CKPT_DIRECT_READ", "always", 1);
	char *dir = ts_tmpdir();
	char *prefix = save_bundle(dir);
	ckpt_reader *r = open_prefix(prefix);
	const size_t orders[3][NENTS] = { { 0, 1, 2, 3, 4, 5 }, { 5, 4, 3, 2, 1, 0 }, { 3, 0, 5, 1, 4, 2 } };
	for (int o = 0; o < 3; o++) {
		unsigned char *bufs[NENTS];
		for (size_t e = 0; e < NENTS; e++) {
			bufs[e] = malloc(ents[e].n + 1);
			memset(bufs[e], 0xa5, ents[e].n + 1);
		}
		uint64_t before = direct_chunks();
		char msg[1024];
		cr_assert_eq(read_many(r, orders[o], bufs), CKPT_OK, "%s", ckpt_error_format(NULL, msg, sizeof(msg)));
		/* 20 MiB in 2 MiB chunks: at least 10 direct reads (more where entries leave gaps between chunks) */
		cr_assert_geq(direct_chunks() - before, 10, "order %d: %llu direct chunks", o,
			(unsigned long long)(direct_chunks() - before));
		for (size_t e = 0; e < NENTS; e++) {
			cr_assert_eq(memcmp(bufs[e], data[e], ents[e].n), 0, "order %d: %s differs", o, ents[e].name);
			cr_assert_eq(bufs[e][ents[e].n], 0xa5, "order %d: %s written past its end", o, ents[e].name);
			free(bufs[e]);
		}
	}
	/* verify only (no destinations) */
	uint64_t before = direct_chunks();
	cr_assert_eq(read_many(r, orders[0], NULL), CKPT_OK);
	cr_assert_geq(direct_chunks() - before, 5);
	ckpt_reader_free(r);
	done_with(dir, prefix, NULL);
}

Test(direct_read, auto_declines_small_batches_and_never_turns_it_off)
{
	char *dir = ts_tmpdir();
	char *prefix = save_bundle(dir);
	ckpt_reader *r = open_prefix(prefix);
	const size_t order[NENTS] = { 0, 1, 2, 3, 4, 5 };
	unsetenv("CKPT_DIRECT_READ");
	/* 20 MiB is under the 32 MiB the auto policy wants */
	cr_assert_eq(read_many(r, order, NULL), CKPT__DECLINED);
	setenv("CKPT_DIRECT_READ", "never", 1);
	cr_assert_eq(read_many(r, order, NULL), CKPT__DECLINED);
	setenv("CKPT_DIRECT_READ", "always", 1);
	cr_assert_eq(read_many(r, order, NULL), CKPT_OK);
	ckpt_reader_free(r);
	done_with(dir, prefix, NULL);
}

Test(direct_read, flipped_byte_names_file_variable_and_offset, .timeout = 60)
{
	setenv("CKPT_DIRECT_READ", "always", 1);
	char *dir = ts_tmpdir();
	char *prefix = save_bundle(dir);
	char *data_path = ts_join(dir, "ck.data-00000-of-00001");
	int64_t off = entry_offset(prefix, "e/big");
	/* in the entry's fifth 2 MiB chunk, not its first */
	flip(data_path, (long)off + (long)(9 * MiB + 77));
	ckpt_reader *r = open_prefix(prefix);
	size_t big;
	cr_assert_eq(ckpt_reader_find(&big, r, "e/big"), CKPT_OK);
	const size_t order[NENTS] = { 5, 4, 3, 2, 1, 0 };
	for (int pass = 0; pass < 2; pass++) {
		unsigned char *bufs[NENTS];
		for (size_t e = 0; e < NENTS; e++)
			bufs[e] = malloc(ents[e].n + 1);
		int rc = read_many(r, order, pass ? NULL : bufs);
		const ckpt_error *err = ckpt_error_last();
		cr_assert_eq(rc, CKPT_ECHECKSUM, "pass %d: %d %s", pass, rc, err->message);
		cr_assert_str_eq(err->variable, "e/big");
		cr_assert_eq(err->offset, off);
		cr_assert_not_null(strstr(err->path, "ck.data-00000-of-00001"), "%s", err->path);
		/* what the entry-by-entry path says of the same entry */
		setenv("CKPT_DIRECT_READ", "never", 1);
		cr_assert_eq(ckpt_reader_read_into(r, big, bufs[4], ents[4].n), CKPT_ECHECKSUM);
		cr_assert_eq(ckpt_error_last()->offset, off);
		setenv("CKPT_DIRECT_READ", "always", 1);
		for (size_t e = 0; e < NENTS; e++)
			free(bufs[e]);
	}
	ckpt_reader_free(r);
	done_with(dir, prefix, data_path);
}

Test(direct_read, file_cut_short_under_an_open_reader_names_the_entry, .timeout = 60)
{
	setenv("CKPT_DIRECT_READ", "always", 1);
	char *dir = ts_tmpdir();
	char *prefix = save_bundle(dir);
	char *data_path = ts_join(dir, "ck.data-00000-of-00001");
	ckpt_reader *r = open_prefix(prefix);
	size_t tiny, big;
	cr_assert_eq(ckpt_reader_find(&tiny, r, "a/tiny"), CKPT_OK);
	cr_assert_eq(ckpt_reader_find(&big, r, "e/big"), CKPT_OK);
	unsigned char t[17];
	/* the data file is open (and its size known) before it shrinks */
	cr_assert_eq(ckpt_reader_read_into(r, tiny, t, sizeof(t)), CKPT_OK);
	int64_t off = ckpt_reader_var(r, big)->offset;
	cr_assert_eq(truncate(data_path, (off_t)(off + (int64_t)(6 * MiB))), 0);
	const size_t order[NENTS] = { 0, 1, 2, 3, 4, 5 };
	int rc = read_many(r, order, NULL);
	const ckpt_error *err = ckpt_error_last();
	cr_assert_eq(rc, CKPT_EFORMAT, "%d %s", rc, err->message);
	cr_assert_str_eq(err->variable, "e/big", "%s", err->message);
	cr_assert_not_null(strstr(err->message, "data file ended"), "%s", err->message);
	cr_assert_not_null(strstr(err->path, "ck.data-00000-of-00001"), "%s", err->path);
	ckpt_reader_free(r);
	done_with(dir, prefix, data_path);
}

/* What a trainer restarting on a cold cache runs: a load into mirrored variables, through the pipeline. */
Test(direct_read, mirrored_load_through_the_pipeline_matches_the_file, .timeout = 60)
{
	setenv("CKPT_DIRECT_READ", "always", 1);
	char *dir = ts_tmpdir();
	char *prefix = save_bundle(dir);
	ckpt_strategy *st = NULL;
	cr_assert_eq(ckpt_strategy_mirrored_new(&st, 3), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(st), CKPT_OK);
	ckpt_checkpoint *ck = NULL;
	ckpt_restore_status *rs = NULL;
	uint64_t before = direct_chunks();
	char msg[1024];
	cr_assert_eq(ckpt_checkpoint_load(&ck, &rs, prefix, NULL), CKPT_OK, "%s",
		ckpt_error_format(NULL, msg, sizeof(msg)));
	ckpt_scope_exit(st);
	cr_assert_geq(direct_chunks() - before, 5);
	ckpt_tracked_list *list = NULL;
	cr_assert_eq(ckpt_checkpoint_variables(&list, ck), CKPT_OK);
	size_t seen = 0;
	for (size_t i = 0; i < ckpt_tracked_list_num_entries(list); i++) {
		const ckpt_tracked_variable *tv = ckpt_tracked_list_get(list, i);
		for (size_t e = 0; e < NENTS; e++) {
			if (!tv->source_key || strcmp(tv->source_key, ents[e].name) != 0)
				continue;
			seen++;
			cr_assert_eq(ckpt_variable_num_replicas(tv->variable), 3);
			cr_assert_eq(ckpt_variable_nbytes(tv->variable), ents[e].n);
			for (int k = 0; k < 3; k++)
				cr_assert(!ents[e].n || memcmp(ckpt_variable_replica_data(tv->variable, k), data[e], ents[e].n) == 0,
					"%s replica %d differs", ents[e].name, k);
		}
	}
	cr_assert_eq(seen, NENTS);
	ckpt_tracked_list_free(list);
	ckpt_restore_status_free(rs);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(st);
	done_with(dir, prefix, NULL);
}

Test(direct_read, corrupt_file_fails_the_load_and_creates_nothing, .timeout = 60)
{
	setenv("CKPT_DIRECT_READ", "always", 1);
	char *dir = ts_tmpdir();
	char *prefix = save_bundle(dir);
	char *data_path = ts_join(dir, "ck.data-00000-of-00001");
	int64_t off = entry_offset(prefix, "c/crosses");
	flip(data_path, (long)off + (long)(5 * MiB));
	ckpt_checkpoint *ck = NULL;
	ckpt_restore_status *rs = NULL;
	int rc = ckpt_checkpoint_load(&ck, &rs, prefix, NULL);
	const ckpt_error *err = ckpt_error_last();
	cr_assert_eq(rc, CKPT_ECHECKSUM, "%d %s", rc, err->message);
	cr_assert_str_eq(err->variable, "c/crosses");
	cr_assert_eq(err->offset, off);
	cr_assert_null(ck);
	ckpt_restore_status_free(rs);
	done_with(dir, prefix, data_path);
}

/*
 * Bring the first `len` bytes of `fd`, and no more, into the page cache and
 * keep them there (mapped and locked): a page read with pread can be evicted again
 * before the policy looks when other processes need memory.
 */
static void *pin_in_cache(int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED, "mmap of %zu bytes", len);
	cr_assert_eq(madvise(p, len, MADV_RANDOM), 0); /* no read-around past `len` while it faults in */
	/* the system call itself: ASan's mlock interceptor does nothing */
	cr_assert_eq(syscall(SYS_mlock, p, len), 0, "mlock of %zu bytes (the test runs as root, like the suite)", len);
	return p;
}

static void unpin(void *p, size_t len)
{
	syscall(SYS_munlock, p, len);
	munmap(p, len);
}

/*
 * The auto policy on a file the page cache does not hold: the pipeline
 * reads it with O_DIRECT; chunks the cache holds in full (the first half,
 * read through once) go through the ordinary descriptor; once it is all
 * cached the batch is declined (entry by entry is one copy, not two).
 */
Test(direct_read, auto_policy_follows_the_page_cache, .timeout = 60)
{
	unsetenv("CKPT_DIRECT_READ");
	char *dir = ts_tmpdir();
	char *prefix = ts_join(dir, "big");
	const size_t n = 48 * MiB + 123;
	unsigned char *v = malloc(n), *got = malloc(n);
	fill(v, n, 99);
	ckpt_writer *w = NULL;
	cr_assert_eq(ckpt_writer_open(&w, prefix, NULL, NULL), CKPT_OK); /* fsync'ed: its pages can be dropped */
	ckpt_tensor *t = NULL;
	int64_t d = (int64_t)n;
	ckpt_shape s;
	cr_assert_eq(ckpt_shape_make(&s, 1, &d), CKPT_OK);
	cr_assert_eq(ckpt_tensor_wrap(&t, CKPT_DT_UINT8, &s, v, n), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "w", t, 0), CKPT_OK);
	ckpt_tensor_free(t);
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	char *data_path = ts_join(dir, "big.data-00000-of-00001");
	int fd = open(data_path, O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	ckpt_reader *r = open_prefix(prefix);
	ckpt__read_req req = { 0, got, n };
	uint64_t d0, b0, d1, b1;
	tfb_direct_stats(&d0, &b0);
	cr_assert_eq(ckpt__reader_read_many(r, &req, 1, 0), CKPT_OK);
	tfb_direct_stats(&d1, &b1);
	cr_assert_eq(memcmp(got, v, n), 0);
	cr_assert_geq(d1 - d0, 10, "%llu direct chunks of a cold 48 MiB file", (unsigned long long)(d1 - d0));
	/* cold again, then the first half read through: 2/3 cached is under the 3/4 that declines */
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), 0); /* no readahead past what is read */
	void *half = pin_in_cache(fd, 32 * MiB);
	memset(got, 0, n);
	int rc = ckpt__reader_read_many(r, &req, 1, 0);
	cr_assert_eq(rc, CKPT_OK, "%d %s", rc, ckpt_error_last()->message);
	tfb_direct_stats(&d0, &b0);
	cr_assert_eq(memcmp(got, v, n), 0);
	cr_assert_geq(b0 - b1, 6, "%llu chunks through the cache", (unsigned long long)(b0 - b1));
	cr_assert_geq(d0 - d1, 3, "%llu direct chunks", (unsigned long long)(d0 - d1));
	/* all of it cached: declined */
	void *all = pin_in_cache(fd, n);
	cr_assert_eq(ckpt__reader_read_many(r, &req, 1, 0), CKPT__DECLINED);
	unpin(all, n);
	unpin(half, 32 * MiB);
	close(fd);
	free(v);
	free(got);
	ckpt_reader_free(r);
	done_with(dir, prefix, data_path);
}

/* ckpt_reader_verify_all and `ckpt verify` on the forced pipeline: a good file passes, a flipped byte is named. */
Test(direct_read, verify_all_and_the_cli_find_a_flipped_byte, .timeout = 60)
{
	setenv("CKPT_DIRECT_READ", "always", 1);
	char *dir = ts_tmpdir();
	char *prefix = save_bundle(dir);
	ckpt_reader *r = open_prefix(prefix);
	uint64_t before = direct_chunks();
	cr_assert_eq(ckpt_reader_verify_all(r), CKPT_OK);
	cr_assert_geq(direct_chunks() - before, 5);
	ckpt_reader_free(r);
	int64_t off = entry_offset(prefix, "f/last");
	ts_run_result res = ts_cli("verify", prefix, NULL);
	ts_assert_exit(&res, 0, "%s", res.err);
	cr_assert_not_null(strstr(res.out, "OK: 6 tensors"), "%s", res.out);
	ts_run_free(&res);

	char *data_path = ts_join(dir, "ck.data-00000-of-00001");
	flip(data_path, (long)off + 3);
	r = open_prefix(prefix);
	int rc = ckpt_reader_verify_all(r);
	cr_assert_eq(rc, CKPT_ECHECKSUM);
	cr_assert_str_eq(ckpt_error_last()->variable, "f/last");
	cr_assert_eq(ckpt_error_last()->offset, off);
	ckpt_reader_free(r);
	res = ts_cli("verify", prefix, NULL);
	ts_assert_exit(&res, 1, "%s", res.out);
	cr_assert_not_null(strstr(res.err, "f/last"), "%s", res.err);
	cr_assert_not_null(strstr(res.err, "crc32c mismatch"), "%s", res.err);
	cr_assert_not_null(strstr(res.err, "FAILED: 1 problem in 6 tensors"), "%s", res.err);
	ts_run_free(&res);
	done_with(dir, prefix, data_path);
}

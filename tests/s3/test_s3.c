/*
 * Checkpoints on a real S3 server (SeaweedFS, started by
 * tests/s3/with_s3_server.sh): s3:// paths through the manager, the VFS and
 * every CLI command, checked by boto3 byte for byte and by TensorFlow.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "libckpt/internal.h"
#include "manager_common.h"
#include "s3_common.h"

static ckpt_vfs *shared_vfs(void)
{
	ckpt_vfs *v = NULL;
	cr_assert_eq(ckpt_status_of(v = ckpt_vfs_s3_shared()), CKPT_OK, "%s", ckpt_error_last()->message);
	return v;
}

/* Three saves with max_to_keep 2 into `dir` (s3:// or local); the state's value is 3 after. */
static void three_saves(const char *dir)
{
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 2), CKPT_OK, "%s: %s", dir, ckpt_error_last()->message);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(mc_save(&s, m, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
}

Test(s3, manager_round_trip_checked_by_boto3)
{
	char *dir = s3t_prefix("mgr");
	three_saves(dir);
	/* what the server holds, seen by boto3: retention removed ckpt-1, the lock is gone, no temporaries */
	char *keys = s3t_oracle("keys", dir, NULL);
	cr_expect_str_eq(keys,
		"checkpoint\nckpt-2.data-00000-of-00001\nckpt-2.index\nckpt-3.data-00000-of-00001\nckpt-3.index\n");
	free(keys);
	/* the same saves on a local disk give the same bytes */
	char *tmp = ts_tmpdir();
	three_saves(tmp);
	const char *files[] = { "ckpt-3.index", "ckpt-3.data-00000-of-00001", "ckpt-2.data-00000-of-00001" };
	for (size_t i = 0; i < 3; i++) {
		char *obj = ts_join(dir, files[i]), *local = ts_join(tmp, files[i]);
		free(s3t_oracle("same", obj, local, NULL));
		free(obj);
		free(local);
	}
	/* a new trainer restores the latest from S3 */
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 2), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status *st = NULL;
	const char *p = NULL;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_restore_latest(&st, m)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_not_null(p);
	cr_expect(strstr(p, "/ckpt-3") != NULL, "%s", p);
	cr_expect_eq(mc_get(&s), 3);
	ckpt_restore_status_free(st);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	/* the oracle that reads without a manager agrees */
	mc_dir d;
	mc_scan(&d, shared_vfs(), dir);
	cr_expect_eq(d.newest_complete, 3);
	cr_expect_eq(d.ncomplete, 2u);
	cr_expect_eq(d.state_latest, 3);
	ts_rmtree(tmp);
	free(tmp);
	free(dir);
}

Test(s3, multipart_parts_in_parallel_and_ranged_reads)
{
	size_t part = 5u << 20, n = 2 * part + 12345;
	ckpt_vfs *v = s3t_vfs(NULL, part, 2);
	char *dir = s3t_prefix("big"), *path = ts_join(dir, "blob");
	unsigned char *buf = malloc(n), *back = malloc(n);
	for (size_t i = 0; i < n; i++)
		buf[i] = (unsigned char)((i * 2654435761u) >> 13);
	ckpt_io *io;
	cr_assert_eq(ckpt_vfs_open(&io, v, path, CKPT_IO_WRITE), CKPT_OK, "%s", ckpt_error_last()->message);
	/* written in odd pieces, as a writer's buffer flushes them */
	for (size_t off = 0; off < n; off += 777777)
		cr_assert_eq(ckpt_io_pwrite(io, buf + off, n - off < 777777 ? n - off : 777777, off), CKPT_OK);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK, "%s", ckpt_error_last()->message);
	/* boto3: the bytes, and an ETag "<md5>-3": a multipart upload of 3 parts */
	char *tmp = ts_tmpdir(), *local = ts_join(tmp, "blob");
	cr_assert_eq(ts_write_file(local, buf, n), 0);
	free(s3t_oracle("same", path, local, NULL));
	char *sha = s3t_oracle("sha256", path, NULL);
	cr_expect(strstr(sha, "-3\n") != NULL, "not a 3-part upload: %s", sha);
	free(sha);
	/* our reads: the whole object (parallel ranges), and pieces across part boundaries */
	cr_assert_eq(ckpt_vfs_open(&io, v, path, CKPT_IO_READ), CKPT_OK, "%s", ckpt_error_last()->message);
	uint64_t size = 0;
	cr_assert_eq(ckpt_io_size(&size, io), CKPT_OK);
	cr_assert_eq(size, n);
	cr_assert_eq(ckpt_io_read_exact(io, back, n, 0), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert(memcmp(back, buf, n) == 0);
	const uint64_t offs[] = { 0, part - 10, part, 2 * part - 1, n - 100 };
	for (size_t i = 0; i < 5; i++) {
		memset(back, 0, 4096);
		size_t k = n - offs[i] < 4096 ? (size_t)(n - offs[i]) : 4096;
		cr_assert_eq(ckpt_io_read_exact(io, back, k, offs[i]), CKPT_OK);
		cr_assert(memcmp(back, buf + offs[i], k) == 0, "range at %llu", (unsigned long long)offs[i]);
	}
	/* a large read is cut on the object's part boundaries (each GET one stored part), not from its start */
	uint64_t gets0, bytes0, gets1, bytes1;
	ckpt__s3_read_stats(&gets0, &bytes0);
	cr_assert_eq(ckpt_io_read_exact(io, back, part + 20, part - 10), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt__s3_read_stats(&gets1, &bytes1);
	cr_assert(memcmp(back, buf + part - 10, part + 20) == 0);
	cr_expect_eq(gets1 - gets0, 3, "%llu GETs: ranges not on part boundaries", (unsigned long long)(gets1 - gets0));
	cr_expect_eq(bytes1 - bytes0, part + 20);
	size_t got = 1;
	cr_assert_eq(ckpt_io_pread(&got, io, back, 10, n), CKPT_OK);
	cr_expect_eq(got, 0u, "a read past the end is short, not an error");
	ckpt_io_close(io);
	free(buf);
	free(back);
	free(local);
	ts_rmtree(tmp);
	free(tmp);
	free(path);
	free(dir);
	ckpt_vfs_free(v);
}

/*
 * A load of a many-entry checkpoint into mirrored variables reads the data
 * object in a few large ranged GETs (runs of entries, split into parallel
 * parts by the VFS), each byte once, not one GET per entry.
 */
#define RUN_ENTRIES 120
Test(s3, mirrored_load_reads_runs_of_entries_each_byte_once, .timeout = 120)
{
	char *dir = s3t_prefix("runs"), *prefix = ts_join(dir, "ck");
	static unsigned char *vals[RUN_ENTRIES];
	size_t sizes[RUN_ENTRIES], total = 0;
	ckpt_writer *w = NULL;
	cr_assert_eq(ckpt_writer_open(&w, prefix, NULL, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	for (size_t i = 0; i < RUN_ENTRIES; i++) {
		char name[32];
		snprintf(name, sizeof(name), "v/%03zu", i);
		sizes[i] = (96u << 10) + 4 * (i % 7); /* above the VFS's small-read window: a GET per entry before */
		total += sizes[i];
		vals[i] = malloc(sizes[i]);
		for (size_t k = 0; k < sizes[i]; k++)
			vals[i][k] = (unsigned char)((k * 2654435761u + i) >> 11);
		int64_t d = (int64_t)sizes[i] / 4;
		ckpt_shape sh;
		ckpt_tensor *t = NULL;
		cr_assert_eq(ckpt_shape_make(&sh, 1, &d), CKPT_OK);
		cr_assert_eq(ckpt_tensor_wrap(&t, CKPT_DT_FLOAT, &sh, vals[i], sizes[i]), CKPT_OK);
		cr_assert_eq(ckpt_writer_add(w, name, t, 0), CKPT_OK, "%s", ckpt_error_last()->message);
		ckpt_tensor_free(t);
	}
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_writer_free(w);

	ckpt_strategy *st = NULL;
	cr_assert_eq(ckpt_strategy_mirrored_new(&st, 2), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(st), CKPT_OK);
	uint64_t gets0, bytes0, gets1, bytes1;
	ckpt__s3_read_stats(&gets0, &bytes0);
	ckpt_checkpoint *ck = NULL;
	ckpt_restore_status *rs = NULL;
	cr_assert_eq(ckpt_checkpoint_load(&ck, &rs, prefix, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt__s3_read_stats(&gets1, &bytes1);
	ckpt_scope_exit(st);
	/* the index (one small object, read whole) and 11.3 MiB of data in 8 MiB ranges; 120 GETs before */
	cr_expect_leq(gets1 - gets0, 6, "%llu GETs for %d entries", (unsigned long long)(gets1 - gets0), RUN_ENTRIES);
	uint64_t index_size = 0;
	char *index = ts_join(dir, "ck.index");
	ckpt_io *io = NULL;
	cr_assert_eq(ckpt_vfs_open(&io, shared_vfs(), index, CKPT_IO_READ), CKPT_OK);
	cr_assert_eq(ckpt_io_size(&index_size, io), CKPT_OK);
	ckpt_io_close(io);
	/* each data byte once; the index (a few KiB) is read whole by the load, up to twice */
	cr_expect(bytes1 - bytes0 >= total + index_size && bytes1 - bytes0 <= total + 2 * index_size,
		"read %llu bytes of %zu data + %llu index", (unsigned long long)(bytes1 - bytes0), total,
		(unsigned long long)index_size);
	/* every value in both copies */
	ckpt_tracked_list *list = NULL;
	cr_assert_eq(ckpt_checkpoint_variables(&list, ck), CKPT_OK);
	size_t seen = 0;
	for (size_t i = 0; i < ckpt_tracked_list_num_entries(list); i++) {
		const ckpt_tracked_variable *tv = ckpt_tracked_list_get(list, i);
		unsigned e;
		if (!tv->source_key || sscanf(tv->source_key, "v/%u", &e) != 1 || e >= RUN_ENTRIES)
			continue;
		seen++;
		cr_assert_eq(ckpt_variable_num_replicas(tv->variable), 2);
		cr_assert_eq(ckpt_variable_nbytes(tv->variable), sizes[e]);
		for (int k = 0; k < 2; k++)
			cr_assert(memcmp(ckpt_variable_replica_data(tv->variable, k), vals[e], sizes[e]) == 0,
				"%s replica %d differs", tv->source_key, k);
	}
	cr_expect_eq(seen, RUN_ENTRIES);
	ckpt_tracked_list_free(list);
	ckpt_restore_status_free(rs);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(st);
	for (size_t i = 0; i < RUN_ENTRIES; i++)
		free(vals[i]);
	free(index);
	free(prefix);
	free(dir);
}

/* Children "a" and "b" of the root, HALF float variables each, with the values of `vals` or zeros. */
#define HALF 60
static void add_half(ckpt_checkpoint *ck, const char *child, unsigned char **vals, const size_t *sizes,
	ckpt_variable **vars)
{
	ckpt_object *obj = NULL;
	cr_assert_eq(ckpt_status_of(obj = ckpt_object_new_child(ckpt_checkpoint_root(ck), child)), CKPT_OK);
	for (size_t i = 0; i < HALF; i++) {
		char local[32], name[32];
		snprintf(local, sizeof(local), "v%03zu", i);
		snprintf(name, sizeof(name), "%s/v%03zu", child, i);
		int64_t d = (int64_t)sizes[i] / 4;
		ckpt_shape sh;
		cr_assert_eq(ckpt_shape_make(&sh, 1, &d), CKPT_OK);
		cr_assert_eq(ckpt_status_of(vars[i] = ckpt_object_add_variable(obj, local, name, CKPT_DT_FLOAT, &sh, NULL)),
			     CKPT_OK,
			     "%s", ckpt_error_last()->message);
		if (vals)
			cr_assert_eq(ckpt_variable_assign(vars[i], vals[i], sizes[i]), CKPT_OK);
	}
}

/*
 * A restore into existing plain variables (no second copy: their values are
 * verified in the data object before any is written) reads the data object
 * in a few large ranged GETs, not one per entry: the verification pass and
 * the reads into the variables each go through runs of entries. Values whose
 * objects are created later stay in the object until then (restore-on-create
 * reads each as its variable is created).
 * Plain values are read twice (verified, then read in), the others once.
 */
Test(s3, plain_restore_verifies_and_stages_in_runs_of_entries, .timeout = 120)
{
	char *dir = s3t_prefix("plain"), *prefix = ts_join(dir, "ck");
	static unsigned char *vals[HALF];
	size_t sizes[HALF], half = 0;
	for (size_t i = 0; i < HALF; i++) {
		sizes[i] = (96u << 10) + 4 * (i % 7); /* above the VFS's small-read window: a GET per entry before */
		half += sizes[i];
		vals[i] = malloc(sizes[i]);
		for (size_t k = 0; k < sizes[i]; k++)
			vals[i][k] = (unsigned char)((k * 2654435761u + i) >> 11);
	}
	ckpt_variable *a[HALF], *b[HALF];
	ckpt_checkpoint *ck = NULL;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	add_half(ck, "a", vals, sizes, a);
	add_half(ck, "b", vals, sizes, b);
	cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_checkpoint_free(ck);

	/* a trainer that has built "a" (zeros) but not yet "b" */
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	add_half(ck, "a", NULL, sizes, a);
	uint64_t gets0, bytes0, gets1, bytes1;
	ckpt__s3_read_stats(&gets0, &bytes0);
	ckpt_restore_status *rs = NULL;
	cr_assert_eq(ckpt_checkpoint_restore(&rs, ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt__s3_read_stats(&gets1, &bytes1);
	/*
	 * The index (small, read whole) and two passes over a's 5.6 MiB run (2 × HALF
	 * more GETs before); b's values stay in the object until b exists (issue 34:
	 * they were a third pass, staged in memory, before).
	 */
	cr_expect_leq(gets1 - gets0, 8, "%llu GETs for %d entries", (unsigned long long)(gets1 - gets0), 2 * HALF);
	cr_expect_leq(bytes1 - bytes0, 2 * half + (1u << 20), "read %llu bytes of %zu data",
		(unsigned long long)(bytes1 - bytes0), 2 * half);
	/* "b" is created after the restore: each variable's value is read as it is created, once */
	add_half(ck, "b", NULL, sizes, b);
	uint64_t gets2, bytes2;
	ckpt__s3_read_stats(&gets2, &bytes2);
	cr_expect_geq(bytes2 - bytes1, half, "restore-on-create read %llu bytes of %zu", (unsigned long long)(bytes2 - bytes1),
		half);
	cr_expect_leq(bytes2 - bytes1, half + (1u << 20), "restore-on-create read %llu bytes of %zu",
		(unsigned long long)(bytes2 - bytes1), half);
	cr_expect_leq(gets2 - gets1, HALF, "%llu GETs for %d variables created one by one",
		(unsigned long long)(gets2 - gets1), HALF);
	for (size_t i = 0; i < HALF; i++) {
		cr_assert(memcmp(ckpt_variable_replica_data(a[i], 0), vals[i], sizes[i]) == 0, "a/v%03zu differs", i);
		cr_assert(memcmp(ckpt_variable_replica_data(b[i], 0), vals[i], sizes[i]) == 0, "b/v%03zu differs", i);
	}
	ckpt_restore_status_free(rs);
	ckpt_checkpoint_free(ck);
	for (size_t i = 0; i < HALF; i++)
		free(vals[i]);
	free(prefix);
	free(dir);
}

Test(s3, exclusive_create_and_errors_name_bucket_key_status_code)
{
	ckpt_vfs *v = shared_vfs();
	cr_assert(ckpt_vfs_caps(v) & CKPT_VFS_CAP_NO_RENAME);
	cr_assert(ckpt_vfs_caps(v) & CKPT_VFS_CAP_EXCL);
	char *dir = s3t_prefix("excl"), *path = ts_join(dir, "only-once");
	ckpt_io *io;
	for (int round = 0; round < 2; round++) {
		cr_assert_eq(ckpt_vfs_open(&io, v, path, CKPT_IO_WRITE | CKPT_IO_EXCL), CKPT_OK);
		cr_assert_eq(ckpt_io_pwrite(io, "abc", 3, 0), CKPT_OK);
		int rc = ckpt_io_close(io);
		if (round == 0) {
			cr_assert_eq(rc, CKPT_OK, "%s", ckpt_error_last()->message);
		} else {
			cr_assert_eq(rc, CKPT_EEXIST, "the second exclusive create: %d", rc);
			cr_expect(strstr(ckpt_error_last()->path, "only-once") != NULL);
			cr_expect(strstr(ckpt_error_last()->message, "412") != NULL, "%s", ckpt_error_last()->message);
		}
	}
	/* a missing bucket: the message names the bucket, the status and the S3 error code */
	char **names;
	size_t count;
	cr_assert_eq(ckpt_vfs_list(&names, &count, v, "s3://no-such-bucket-ckpt/x"), CKPT_ENOTFOUND);
	char line[2048];
	ckpt_error_format(NULL, line, sizeof(line));
	cr_expect(strstr(line, "no-such-bucket-ckpt") && strstr(line, "404") && strstr(line, "NoSuchBucket"), "%s",
		line);
	/* a missing key through the reader */
	char *missing = ts_join(dir, "nothing-here");
	ckpt_reader *r;
	cr_assert_lt(ckpt_reader_open(&r, missing, NULL), 0);
	ckpt_error_format(NULL, line, sizeof(line));
	cr_expect(strstr(line, "nothing-here") != NULL, "%s", line);
	/* wrong credentials: 403 and the server's code */
	ckpt_s3_config *c;
	cr_assert_eq(ckpt_s3_config_load(&c), CKPT_OK);
	free(c->secret_key);
	c->secret_key = strdup("not-the-secret");
	ckpt_vfs *bad;
	cr_assert_eq(ckpt_vfs_s3_new(&bad, c), CKPT_OK);
	ckpt_s3_config_free(c);
	cr_assert_lt(ckpt_vfs_list(&names, &count, bad, dir), 0);
	ckpt_error_format(NULL, line, sizeof(line));
	cr_expect(strstr(line, s3t_bucket()) && strstr(line, "403") && strstr(line, "SignatureDoesNotMatch"), "%s", line);
	cr_expect(strstr(line, "1 attempt") != NULL, "a 403 is not retried: %s", line);
	ckpt_vfs_free(bad);
	free(missing);
	free(path);
	free(dir);
}

/* A second writer (another process) is refused with the holder named; a stale lock is taken over. */
Test(s3, one_writer_per_prefix)
{
	char *dir = s3t_prefix("lock");
	mc_state s;
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 2), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(mc_save(&s, m, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	char *lock = ts_join(dir, "checkpoint.lock");
	char *body = s3t_oracle("get", lock, NULL);
	char want[64];
	snprintf(want, sizeof(want), " pid %ld ", (long)getpid());
	cr_expect(strstr(body, want) != NULL, "lock object: %s", body);
	free(body);
	/* another process (a fork would share this one's in-process registry): the sample trainer */
	char *argv[] = { CKPT_BINARY_DIR "/samples/mlp_mirrored", "--replicas", "1", "--epochs", "1", "--dir", dir, NULL };
	ts_run_result r;
	cr_assert_eq(ts_run(&r, argv), 0);
	cr_expect_neq(r.status, 0, "a second writer saved: %s", r.out);
	cr_expect(strstr(r.err, want) && strstr(r.err, "renewed") && strstr(r.err, "in use by another trainer"),
		"the refusal names the holder: %s", r.err);
	ts_run_free(&r);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	/* released: the object is gone */
	char *keys = s3t_oracle("keys", dir, NULL);
	cr_expect(strstr(keys, "checkpoint.lock") == NULL, "%s", keys);
	free(keys);
	/*
	 * a foreign holder on another host: honoured while its lease (in the lock,
	 * server clock) runs — an hour here, so no load can make it stale between
	 * the put and the manager's look — and taken over once it stopped renewing
	 * for longer than its lease (1 s here; any delay only makes it staler)
	 */
	free(s3t_oracle("put", lock, "host some-other-host pid 4242 lease 3600 nonce 0\n", NULL));
	cr_assert_eq(mc_build(&s, NULL), CKPT_OK);
	int rc = ckpt_manager_new(&m, s.ck, dir, 2);
	cr_assert_eq(rc, CKPT_EBUSY, "a fresh foreign lock is honoured: %d %s", rc, ckpt_error_last()->message);
	cr_expect(strstr(ckpt_error_last()->message, "some-other-host") != NULL, "%s", ckpt_error_last()->message);
	free(s3t_oracle("put", lock, "host some-other-host pid 4242 lease 1 nonce 1\n", NULL));
	sleep(3);
	cr_assert_eq(ckpt_manager_new(&m, s.ck, dir, 2), CKPT_OK, "stale lock not taken over: %s",
		ckpt_error_last()->message);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	free(lock);
	free(dir);
}

static void cli_ok(ts_run_result *r, const char *what)
{
	cr_assert_eq(r->status, 0, "%s: exit %d\n%s\n%s", what, r->status, r->out, r->err);
}

/* Every command takes s3:// paths; TensorFlow restores a checkpoint boto3 copied down. */
Test(s3, cli_commands_and_tensorflow_reads_a_downloaded_copy, .timeout = 600)
{
	char *dir = s3t_prefix("cli");
	char *tmp = ts_tmpdir(), *local = ts_join(tmp, "local"), *down = ts_join(tmp, "down");
	three_saves(dir);
	three_saves(local);
	char *ck = ts_join(dir, "ckpt-3"), *lck = ts_join(local, "ckpt-3");
	ts_run_result r = ts_cli("inspect", ck, NULL);
	cli_ok(&r, "inspect");
	cr_expect(strstr(r.out, "tf-bundle") != NULL, "%s", r.out);
	ts_run_free(&r);
	r = ts_cli("verify", ck, NULL);
	cli_ok(&r, "verify");
	ts_run_free(&r);
	r = ts_cli("diff", ck, lck, NULL);
	cli_ok(&r, "diff s3 local");
	ts_run_free(&r);
	char *st_local = ts_join(tmp, "x.safetensors"), *st_s3 = ts_join(dir, "x.safetensors");
	r = ts_cli("convert", ck, st_local, "--to", "safetensors", NULL);
	cli_ok(&r, "convert s3 -> local");
	ts_run_free(&r);
	r = ts_cli("convert", st_local, st_s3, "--to", "safetensors", NULL);
	cli_ok(&r, "convert local -> s3");
	ts_run_free(&r);
	free(s3t_oracle("same", st_s3, st_local, NULL));
	char *saved = ts_join(dir, "restored/ckpt");
	r = ts_cli("restore", ck, "--strategy", "default", "--save", saved, NULL);
	cli_ok(&r, "restore --save s3");
	ts_run_free(&r);
	r = ts_cli("diff", saved, lck, NULL);
	cli_ok(&r, "diff of the restored copy");
	ts_run_free(&r);
	/* uploads a killed process left: listed, aborted */
	char *left = ts_join(dir, "left/obj");
	free(s3t_oracle("upload_left", left, NULL));
	r = ts_cli("s3", "uploads", "list", dir, NULL);
	cli_ok(&r, "s3 uploads list");
	cr_expect(strstr(r.out, "left/obj") && strstr(r.out, "1 unfinished upload"), "%s", r.out);
	ts_run_free(&r);
	r = ts_cli("s3", "uploads", "abort", dir, NULL);
	cli_ok(&r, "s3 uploads abort");
	ts_run_free(&r);
	char *n = s3t_oracle("uploads", dir, NULL);
	cr_expect_str_eq(n, "0\n");
	free(n);
	/* TensorFlow: the copy boto3 downloaded is the checkpoint we wrote, and its manager state names ckpt-3 */
	free(s3t_oracle("download", dir, down, NULL));
	char *dck = ts_join(down, "ckpt-3");
	free(s3t_oracle("tf_same", dck, lck, NULL));
	free(s3t_oracle("tf_latest", down, "ckpt-3", NULL));
	free(dck);
	free(left);
	free(saved);
	free(st_local);
	free(st_s3);
	free(ck);
	free(lck);
	ts_rmtree(tmp);
	free(tmp);
	free(local);
	free(down);
	free(dir);
}

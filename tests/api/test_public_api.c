/*
 * Public entry points no other suite calls directly: the borrowed-memory
 * file (ckpt_io_open_memory), the ckpt_io and ckpt_vfs wrappers on a real
 * POSIX directory, the runtime version against the project's CMake version,
 * the save_counter variable, and the warning ckpt_restore_status_free gives
 * unless ckpt_restore_status_expect_partial silenced it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ckpt/ckpt.h"
#include "ckpt/sys/vfs_memory.h"
#include "test_support.h"

Test(public_api, io_open_memory_reads_the_callers_bytes)
{
	static const char buf[] = "0123456789abcdef";
	ckpt_io *io = NULL;
	cr_assert_eq(ckpt_io_open_memory(&io, buf, 16, "mem:sixteen"), CKPT_OK);
	cr_assert_str_eq(ckpt_io_path(io), "mem:sixteen");
	uint64_t size = 0;
	cr_assert_eq(ckpt_io_size(&size, io), CKPT_OK);
	cr_assert_eq(size, 16);
	char got[32];
	size_t n = 99;
	cr_assert_eq(ckpt_io_pread(&n, io, got, 4, 3), CKPT_OK);
	cr_assert_eq(n, 4);
	cr_assert_eq(memcmp(got, "3456", 4), 0);
	/* short at the end, nothing past it: pread reports what it got, no error */
	cr_assert_eq(ckpt_io_pread(&n, io, got, 10, 12), CKPT_OK);
	cr_assert_eq(n, 4);
	cr_assert_eq(memcmp(got, "cdef", 4), 0);
	cr_assert_eq(ckpt_io_pread(&n, io, got, 4, 16), CKPT_OK);
	cr_assert_eq(n, 0);
	/* read_exact turns a short read into a format error at that offset */
	ckpt_error_clear();
	cr_assert_eq(ckpt_io_read_exact(io, got, 8, 10), CKPT_EFORMAT);
	cr_assert_eq(ckpt_error_last()->code, CKPT_EFORMAT);
	cr_assert_str_eq(ckpt_error_last()->path, "mem:sixteen");
	cr_assert(ckpt_error_last()->message[0]);
	/* borrowed, not copied, and read-only */
	ckpt_error_clear();
	cr_assert_eq(ckpt_io_pwrite(io, "x", 1, 0), CKPT_EINVAL);
	cr_assert_not_null(strstr(ckpt_error_last()->message, "read-only"), "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK);
	cr_assert_eq(ckpt_io_close(NULL), CKPT_OK);
	cr_assert_eq(ckpt_io_open_memory(NULL, buf, 16, "x"), CKPT_EINVAL);
}

Test(public_api, io_and_vfs_wrappers_on_a_posix_directory)
{
	char *dir = ts_tmpdir(), *sub = ts_join(dir, "sub"), *file = ts_join(sub, "f.bin");
	char *deep = ts_join(dir, "missing/child");
	ckpt_vfs *vfs = ckpt_vfs_default();
	cr_assert_eq(ckpt_vfs_mkdir(vfs, sub), CKPT_OK, "%s", ckpt_error_last()->message);
	struct stat st;
	cr_assert_eq(stat(sub, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(ckpt_vfs_mkdir(vfs, sub), CKPT_OK, "an existing directory is fine");
	/* one level at a time: a missing parent is an error naming the path, with errno */
	ckpt_error_clear();
	int rc = ckpt_vfs_mkdir(vfs, deep);
	cr_assert_lt(rc, 0);
	cr_assert_eq(ckpt_error_last()->code, rc);
	cr_assert_eq(ckpt_error_last()->sys_errno, ENOENT);
	cr_assert_str_eq(ckpt_error_last()->path, deep);

	ckpt_io *io = NULL;
	cr_assert_eq(ckpt_vfs_open(&io, vfs, file, CKPT_IO_WRITE), CKPT_OK);
	cr_assert_str_eq(ckpt_io_path(io), file);
	cr_assert_eq(ckpt_io_pwrite(io, "hello, world", 12, 0), CKPT_OK);
	cr_assert_eq(ckpt_io_sync(io), CKPT_OK);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK);
	cr_assert_eq(ckpt_vfs_sync_dir(vfs, sub), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_error_clear();
	rc = ckpt_vfs_sync_dir(vfs, deep);
	cr_assert_lt(rc, 0);
	cr_assert_eq(ckpt_error_last()->code, rc);
	cr_assert_str_eq(ckpt_error_last()->path, deep);

	cr_assert_eq(ckpt_vfs_open(&io, vfs, file, CKPT_IO_READ), CKPT_OK);
	char got[16];
	size_t n = 0;
	cr_assert_eq(ckpt_io_pread(&n, io, got, sizeof(got), 7), CKPT_OK);
	cr_assert_eq(n, 5);
	cr_assert_eq(memcmp(got, "world", 5), 0);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK);
	/* the bytes are on disk, as an independent read sees them */
	size_t len;
	char *disk = ts_read_file(file, &len);
	cr_assert_not_null(disk);
	cr_assert_eq(len, 12);
	cr_assert_eq(memcmp(disk, "hello, world", 12), 0);
	free(disk);

	/* the memory file system accepts both as no-ops */
	ckpt_vfs *mem;
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	cr_assert_eq(ckpt_vfs_mkdir(mem, "a/b"), CKPT_OK);
	cr_assert_eq(ckpt_vfs_sync_dir(mem, "a/b"), CKPT_OK);
	ckpt_vfs_free(mem);
	ts_rmtree(dir);
	free(dir), free(sub), free(file), free(deep);
}

Test(public_api, version_number_matches_the_project_version)
{
	/* the independent source: project(libckpt VERSION x.y.z) in the top CMakeLists.txt */
	char *cm = ts_read_file(CKPT_SOURCE_DIR "/CMakeLists.txt", NULL);
	cr_assert_not_null(cm);
	const char *p = strstr(cm, "project(libckpt VERSION ");
	cr_assert_not_null(p);
	int major, minor, patch;
	cr_assert_eq(sscanf(p, "project(libckpt VERSION %d.%d.%d", &major, &minor, &patch), 3);
	free(cm);
	cr_assert_eq(ckpt_version_number(), major * 1000000 + minor * 1000 + patch);
	cr_assert_eq(ckpt_version_number(), CKPT_VERSION_NUMBER);
	char s[32];
	snprintf(s, sizeof s, "%d.%d.%d", major, minor, patch);
	cr_assert_str_eq(CKPT_VERSION_STRING, s);
}

static int64_t read_i64(const char *prefix, const char *key)
{
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, prefix, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	size_t i;
	cr_assert_eq(ckpt_reader_find(&i, r, key), CKPT_OK, "%s in %s", key, prefix);
	int64_t v = -1;
	cr_assert_eq(ckpt_reader_read_into(r, i, &v, sizeof(v)), CKPT_OK);
	ckpt_reader_free(r);
	return v;
}

Test(public_api, save_counter_variable_is_the_saved_counter)
{
	char *dir = ts_tmpdir(), *prefix = ts_join(dir, "ckpt");
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_save_counter(ck), 0);
	ckpt_variable *v = NULL, *again = NULL;
	cr_assert_eq(ckpt_status_of(v = ckpt_checkpoint_save_counter_variable(ck)), CKPT_OK);
	cr_assert_eq(ckpt_status_of(again = ckpt_checkpoint_save_counter_variable(ck)), CKPT_OK);
	cr_assert_eq(v, again, "one variable, created once");
	cr_assert_eq(ckpt_variable_dtype(v), CKPT_DT_INT64);
	cr_assert_eq(ckpt_variable_shape(v)->rank, 0);
	int64_t c = -1;
	cr_assert_eq(ckpt_variable_read(v, &c, sizeof(c)), CKPT_OK);
	cr_assert_eq(c, 0);
	const char *path;
	cr_assert_eq(ckpt_status_of(path = ckpt_checkpoint_save(ck, prefix)), CKPT_OK, "%s", ckpt_error_last()->message);
	char *want = ts_join(dir, "ckpt-1");
	cr_assert_str_eq(path, want);
	free(want);
	cr_assert_eq(ckpt_variable_read(v, &c, sizeof(c)), CKPT_OK);
	cr_assert_eq(c, 1);
	cr_assert_eq(read_i64(path, "save_counter/.ATTRIBUTES/VARIABLE_VALUE"), 1);
	/* assigning it sets the number of the next save */
	c = 41;
	cr_assert_eq(ckpt_variable_assign(v, &c, sizeof(c)), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_save_counter(ck), 41);
	cr_assert_eq(ckpt_status_of(path = ckpt_checkpoint_save(ck, prefix)), CKPT_OK);
	want = ts_join(dir, "ckpt-42");
	cr_assert_str_eq(path, want);
	free(want);
	cr_assert_eq(read_i64(path, "save_counter/.ATTRIBUTES/VARIABLE_VALUE"), 42);
	ckpt_checkpoint_free(ck);
	ts_rmtree(dir);
	free(dir), free(prefix);
}

typedef struct warnings {
	int n;
	char last[1024];
} warnings;

static void collect(const char *message, void *ctx)
{
	warnings *w = ctx;
	w->n++;
	snprintf(w->last, sizeof(w->last), "%s", message);
}

/* A checkpoint of two variables, restored into one that tracks only the first. */
static ckpt_restore_status *partial_restore(const char *prefix, warnings *w, ckpt_checkpoint **out)
{
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	o.warn = collect;
	o.warn_ctx = w;
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
	ckpt_variable *a;
	ckpt_shape s = { 0 };
	cr_assert_eq(ckpt_status_of(a = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "a", "a", CKPT_DT_FLOAT, &s, NULL)),
		     CKPT_OK);
	ckpt_restore_status *st = NULL;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_num_unmatched(st), 1);
	*out = ck;
	return st;
}

Test(public_api, expect_partial_silences_the_unused_values_warning)
{
	char *dir = ts_tmpdir(), *prefix = ts_join(dir, "two");
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
	ckpt_variable *v;
	ckpt_shape s = { 0 };
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "a", "a", CKPT_DT_FLOAT, &s, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "b", "b", CKPT_DT_FLOAT, &s, NULL)),
		     CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_checkpoint_free(ck);

	warnings w = { 0, "" };
	ckpt_restore_status *st = partial_restore(prefix, &w, &ck);
	cr_assert_eq(w.n, 0);
	ckpt_restore_status_free(st);
	cr_assert_eq(w.n, 1, "freeing a partly used status warns once");
	cr_assert_not_null(strstr(w.last, "1 value(s)"), "%s", w.last);
	cr_assert_not_null(strstr(w.last, "'b/.ATTRIBUTES/VARIABLE_VALUE'"), "%s", w.last);
	cr_assert_not_null(strstr(w.last, "ckpt_restore_status_expect_partial"), "%s", w.last);
	ckpt_checkpoint_free(ck);

	warnings quiet = { 0, "" };
	st = partial_restore(prefix, &quiet, &ck);
	ckpt_restore_status_expect_partial(st);
	ckpt_restore_status_free(st);
	cr_assert_eq(quiet.n, 0, "warned after expect_partial: %s", quiet.last);
	ckpt_checkpoint_free(ck);
	ts_rmtree(dir);
	free(dir), free(prefix);
}

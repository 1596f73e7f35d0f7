/* Core: errors, dtypes, shapes, tensors, CRC32C, and the three file systems. */
#include <criterion/criterion.h>
#include <string.h>
#include <zlib.h>
#include "libckpt/internal.h"
#include "test_support.h"
#include "ckpt/sys/vfs_faulty.h"
#include "ckpt/sys/vfs_memory.h"

Test(core, error_last_never_null_and_carries_context)
{
	ckpt_error_clear();
	cr_assert_not_null(ckpt_error_last());
	cr_assert_eq(ckpt_error_last()->code, CKPT_OK);
	int rc = ckpt__fail(CKPT_EFORMAT, "/x/y.index", "dense/kernel", 42, "bad thing %d", 7);
	cr_assert_eq(rc, CKPT_EFORMAT);
	const ckpt_error *e = ckpt_error_last();
	cr_assert_eq(e->code, CKPT_EFORMAT);
	cr_assert_str_eq(e->message, "bad thing 7");
	cr_assert_str_eq(e->path, "/x/y.index");
	cr_assert_str_eq(e->variable, "dense/kernel");
	cr_assert_eq(e->offset, 42);
	char line[256];
	ckpt_error_format(e, line, sizeof(line));
	cr_assert_str_eq(line, "/x/y.index: variable 'dense/kernel' at offset 42: bad thing 7");
	cr_assert_str_eq(ckpt_status_name(CKPT_ESCOPE), "CKPT_ESCOPE");
}

Test(core, error_slot_crosses_threads)
{
	ckpt__fail(CKPT_ECHECKSUM, "p", "v", 3, "crc mismatch");
	ckpt__error_slot slot = { 0 };
	ckpt__error_capture(&slot);
	ckpt_error_clear();
	cr_assert_eq(ckpt_error_last()->code, CKPT_OK);
	cr_assert_eq(ckpt__error_raise(&slot), CKPT_ECHECKSUM);
	cr_assert_str_eq(ckpt_error_last()->message, "crc mismatch");
	cr_assert_eq(ckpt_error_last()->offset, 3);
	ckpt__error_slot_clear(&slot);
}

Test(core, dtype_numbers_and_names)
{
	cr_assert_eq(CKPT_DT_FLOAT, 1);
	cr_assert_eq(CKPT_DT_HALF, 19);
	cr_assert_eq(CKPT_DT_UINT64, 23);
	cr_assert_str_eq(ckpt_dtype_name(CKPT_DT_FLOAT), "float32");
	cr_assert_str_eq(ckpt_dtype_name(CKPT_DT_HALF), "float16");
	cr_assert_str_eq(ckpt_dtype_name(CKPT_DT_BFLOAT16), "bfloat16");
	cr_assert_eq(ckpt_dtype_size(CKPT_DT_COMPLEX128), 16);
	cr_assert_eq(ckpt_dtype_size(CKPT_DT_STRING), 0);
	cr_assert_not(ckpt_dtype_valid(20));  /* DT_RESOURCE is never stored */
	cr_assert_not(ckpt_dtype_valid(-1));
	ckpt_dtype dt;
	cr_assert_eq(ckpt_dtype_from_name(&dt, "int64"), CKPT_OK);
	cr_assert_eq(dt, CKPT_DT_INT64);
	cr_assert_eq(ckpt_dtype_from_name(&dt, "nope"), CKPT_ENOTFOUND);
}

Test(core, shape_checked_arithmetic)
{
	ckpt_shape s;
	int64_t dims[3] = { 2, 3, 4 };
	cr_assert_eq(ckpt_shape_make(&s, 3, dims), CKPT_OK);
	uint64_t n;
	cr_assert_eq(ckpt_shape_num_elements(&n, &s), CKPT_OK);
	cr_assert_eq(n, 24);
	cr_assert_eq(ckpt_shape_nbytes(&n, &s, CKPT_DT_DOUBLE), CKPT_OK);
	cr_assert_eq(n, 192);
	char buf[64];
	ckpt_shape_format(&s, buf, sizeof(buf));
	cr_assert_str_eq(buf, "[2, 3, 4]");
	int64_t big[3] = { INT64_MAX, INT64_MAX, 2 };
	cr_assert_eq(ckpt_shape_make(&s, 3, big), CKPT_OK);
	cr_assert_eq(ckpt_shape_num_elements(&n, &s), CKPT_ELIMIT);
	int64_t neg[1] = { -1 };
	cr_assert_eq(ckpt_shape_make(&s, 1, neg), CKPT_EINVAL);
	cr_assert_eq(ckpt_shape_make(&s, CKPT_MAX_RANK + 1, dims), CKPT_EINVAL);
	ckpt_shape scalar = { 0 };
	ckpt_shape_format(&scalar, buf, sizeof(buf));
	cr_assert_str_eq(buf, "[]");
}

Test(core, tensor_crc32_is_zlib_crc_of_bytes)
{
	ckpt_shape s;
	int64_t d[1] = { 3 };
	ckpt_shape_make(&s, 1, d);
	ckpt_tensor *t;
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s), CKPT_OK);
	float v[3] = { 0.5f, 2.0f, 3.0f };
	memcpy(t->data, v, sizeof(v));
	cr_assert_eq(ckpt_tensor_crc32(t), (uint32_t)crc32(0, (const Bytef *)v, sizeof(v)));
	ckpt_tensor_free(t);

	ckpt_bytes el[2] = { { 5, "hello" }, { 0, "" } };
	cr_assert_eq(ckpt_shape_make(&s, 1, (int64_t[]){ 2 }), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new_strings(&t, &s, el), CKPT_OK);
	cr_assert_eq(t->nbytes, 5);
	cr_assert_eq(ckpt_tensor_crc32(t), (uint32_t)crc32(0, (const Bytef *)"hello", 5));
	ckpt_tensor_free(t);
	ckpt_tensor_free(NULL);
}

Test(core, crc32c_standard_and_masking)
{
	cr_assert_eq(ckpt_crc32c_extend(0, "123456789", 9), 0xe3069283u);
	uint32_t c = ckpt_crc32c_extend(0, "1234", 4);
	cr_assert_eq(ckpt_crc32c_extend(c, "56789", 5), 0xe3069283u);
	cr_assert_eq(ckpt_crc32c_mask(0), 0xa282ead8u);
	unsigned char zero[4] = { 0 };
	cr_assert_eq(ckpt_crc32c_mask(ckpt_crc32c_extend(0, zero, 4)), 0x3a117ba6u);
	cr_assert_eq(ckpt_crc32c_unmask(ckpt_crc32c_mask(0xdeadbeefu)), 0xdeadbeefu);
}

static void exercise_vfs(ckpt_vfs *vfs, const char *dir)
{
	char *a = ts_join(dir, "a.bin"), *b = ts_join(dir, "b.bin");
	ckpt_io *io;
	cr_assert_eq(ckpt_vfs_open(&io, vfs, a, CKPT_IO_WRITE), CKPT_OK);
	cr_assert_eq(ckpt_io_pwrite(io, "hello world", 11, 0), CKPT_OK);
	cr_assert_eq(ckpt_io_sync(io), CKPT_OK);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK);
	cr_assert_eq(ckpt_vfs_rename(vfs, a, b), CKPT_OK);
	cr_assert_not(ckpt_vfs_exists(NULL, vfs, a));
	int is_dir = 1;
	cr_assert(ckpt_vfs_exists(&is_dir, vfs, b));
	cr_assert_not(is_dir);
	cr_assert_eq(ckpt_vfs_open(&io, vfs, b, CKPT_IO_READ), CKPT_OK);
	char buf[16] = { 0 };
	cr_assert_eq(ckpt_io_read_exact(io, buf, 5, 6), CKPT_OK);
	cr_assert_str_eq(buf, "world");
	cr_assert_eq(ckpt_io_read_exact(io, buf, 8, 6), CKPT_EFORMAT);
	cr_assert_eq(ckpt_error_last()->offset, 6);
	cr_assert_not_null(strstr(ckpt_error_last()->message, "truncated"));
	uint64_t size;
	cr_assert_eq(ckpt_io_size(&size, io), CKPT_OK);
	cr_assert_eq(size, 11);
	ckpt_io_close(io);
	char **names;
	size_t n;
	cr_assert_eq(ckpt_vfs_list(&names, &n, vfs, dir), CKPT_OK);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(names[0], "b.bin");
	ckpt_vfs_free_list(names, n);
	cr_assert_eq(ckpt_vfs_write_atomic(vfs, a, "xyz", 3, 1), CKPT_OK);
	void *content;
	size_t len;
	cr_assert_eq(ckpt_vfs_read_all(&content, &len, vfs, a, 1 << 20), CKPT_OK);
	cr_assert_eq(len, 3);
	cr_assert_eq(memcmp(content, "xyz", 3), 0);
	ckpt__free(content);
	cr_assert_eq(ckpt_vfs_read_all(&content, &len, vfs, b, 4), CKPT_ELIMIT);
	cr_assert_eq(ckpt_vfs_remove(vfs, b), CKPT_OK);
	cr_assert_eq(ckpt_vfs_remove(vfs, b), CKPT_ENOTFOUND);
	cr_assert_eq(ckpt_vfs_open(&io, vfs, b, CKPT_IO_READ), CKPT_ENOTFOUND);
	cr_assert_str_eq(ckpt_error_last()->path, b);
	free(a);
	free(b);
}

Test(core, posix_vfs)
{
	char *dir = ts_tmpdir();
	exercise_vfs(ckpt_vfs_default(), dir);
	ts_rmtree(dir);
	free(dir);
}

Test(core, memory_vfs)
{
	ckpt_vfs *vfs;
	cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
	exercise_vfs(vfs, "mem/dir");
	int is_dir = 0;
	cr_assert(ckpt_vfs_exists(&is_dir, vfs, "mem"));
	cr_assert(is_dir);
	ckpt_vfs_free(vfs);
}

Test(core, faulty_vfs_fails_the_ith_call_and_atomic_write_keeps_old_file)
{
	ckpt_vfs *mem, *count;
	ckpt_vfs_memory_new(&mem);
	ckpt_vfs_memory_put(mem, "d/f", "old", 3);
	ckpt_vfs_faulty_new(&count, mem, 0);
	cr_assert_eq(ckpt_vfs_write_atomic(count, "d/f", "new!", 4, 1), CKPT_OK);
	long total = ckpt_vfs_faulty_calls(count);
	cr_assert_gt(total, 3);
	ckpt_vfs_free(count);
	for (long i = 1; i <= total; i++) {
		ckpt_vfs_memory_put(mem, "d/f", "old", 3);
		ckpt_vfs *f;
		ckpt_vfs_faulty_new(&f, mem, i);
		int rc = ckpt_vfs_write_atomic(f, "d/f", "new!", 4, 1);
		cr_assert(ckpt_vfs_faulty_fired(f));
		const void *buf;
		size_t n;
		cr_assert_eq(ckpt_status_of(buf = ckpt_vfs_memory_get(&n, mem, "d/f")), CKPT_OK);
		if (rc < 0) {
			cr_assert_eq(rc, CKPT_EIO);
			cr_assert_not_null(strstr(ckpt_error_last()->message, "injected"));
		}
		/* either the old content, intact, or the new one: never a mix */
		cr_assert((n == 3 && memcmp(buf, "old", 3) == 0) || (n == 4 && memcmp(buf, "new!", 4) == 0),
			"call %ld left %zu bytes", i, n);
		char **names;
		size_t cnt;
		ckpt_vfs_list(&names, &cnt, mem, "d");
		cr_assert_leq(cnt, 2, "at most the file and one stray temp (removed on failure): %zu", cnt);
		ckpt_vfs_free_list(names, cnt);
		ckpt_vfs_free(f);
	}
	ckpt_vfs_free(mem);
}

Test(core, error_format_omits_unknown_parts)
{
	char line[256];
	ckpt__fail(CKPT_EIO, "/a/b", NULL, -1, "boom");
	cr_assert_str_eq(ckpt_error_format(NULL, line, sizeof(line)), "/a/b: boom");
	ckpt__fail(CKPT_EFORMAT, NULL, "v", -1, "bad");
	cr_assert_str_eq(ckpt_error_format(NULL, line, sizeof(line)), "variable 'v': bad");
	ckpt__fail(CKPT_EFORMAT, "f", NULL, 7, "short");
	cr_assert_str_eq(ckpt_error_format(NULL, line, sizeof(line)), "f: at offset 7: short");
	ckpt__fail(CKPT_EFORMAT, NULL, NULL, -1, "plain");
	cr_assert_str_eq(ckpt_error_format(NULL, line, sizeof(line)), "plain");
}

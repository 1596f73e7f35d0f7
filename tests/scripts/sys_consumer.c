/*
 * An extender built against the installed headers only (tests/scripts/
 * install_test.sh compiles it with the installed library's pkg-config flags):
 * every ckpt/sys/ header, a strategy from its own method table, a one-shard
 * bundle written with the partial-bundle writer and read back with the
 * public reader, memory and errors through the library's hooks, and a file
 * system from its own method table (a counting wrapper over the memory VFS)
 * under the fault-injecting one.
 * Prints "sys consumer: OK" and exits 0, or names the first failed check.
 */
#include <stdio.h>
#include <string.h>
#include <ckpt/ckpt.h>
#include <ckpt/sys/alloc.h>
#include <ckpt/sys/bundle_part.h>
#include <ckpt/sys/error.h>
#include <ckpt/sys/strategy.h>
#include <ckpt/sys/vfs.h>
#include <ckpt/sys/vfs_faulty.h>
#include <ckpt/sys/vfs_memory.h>

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "sys consumer: %s:%d: %s failed (%s)\n", __FILE__, \
	__LINE__, #cond, ckpt_error_last()->message ? ckpt_error_last()->message : ""); return 1; } } while (0)

static int destroyed;

static void count_destroy(ckpt_strategy *s)
{
	(void)s;
	destroyed++;
}

static const ckpt_strategy_methods two_threads = {
	.version = CKPT_STRATEGY_METHODS_VERSION,
	.name = "two_threads",
	.kind = CKPT_STRATEGY_MIRRORED,
	.destroy = count_destroy,
};

static int strategy_from_a_table(void)
{
	static int impl;
	ckpt_strategy *s = NULL;
	CHECK(ckpt_strategy_custom_new(&s, &two_threads, 2, 2, 0, &impl, "TwoThreads") == CKPT_OK);
	CHECK(ckpt_strategy_method_table(s) == &two_threads);
	CHECK(ckpt_strategy_impl(s) == &impl);
	CHECK(strcmp(ckpt_strategy_name(s), "two_threads") == 0);
	CHECK(ckpt_strategy_num_replicas(s) == 2);
	ckpt_shape shape;
	static const int64_t dims[1] = { 3 };
	CHECK(ckpt_shape_make(&shape, 1, dims) == CKPT_OK);
	ckpt_variable *v = NULL;
	CHECK(ckpt_scope_enter(s) == CKPT_OK);
	int rc = ckpt_variable_new(&v, "w", CKPT_DT_FLOAT, &shape, NULL);
	CHECK(ckpt_scope_exit(s) == CKPT_OK);
	CHECK(rc == CKPT_OK);
	float *copy0 = ckpt_variable_local_copy(v, 0);
	CHECK(copy0 && ckpt_variable_local_copy(v, 2) == NULL);
	copy0[0] = 1.5f, copy0[1] = -2.0f, copy0[2] = 4.0f;
	ckpt_variable_fill_from_primary(v);
	const float *copy1 = ckpt_variable_local_copy(v, 1);
	CHECK(copy1 && memcmp(copy0, copy1, sizeof(float) * 3) == 0);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
	CHECK(destroyed == 1);
	return 0;
}

static int bundle_from_one_part(const char *dir)
{
	char prefix[4096];
	snprintf(prefix, sizeof(prefix), "%s/part", dir);
	ckpt_vfs *vfs = ckpt_vfs_default();
	const float w[4] = { 1, 2, 3, 4 };
	ckpt_shape shape;
	static const int64_t dims[2] = { 2, 2 };
	CHECK(ckpt_shape_make(&shape, 2, dims) == CKPT_OK);
	ckpt_tensor *t = NULL;
	CHECK(ckpt_tensor_wrap(&t, CKPT_DT_FLOAT, &shape, (void *)w, sizeof(w)) == CKPT_OK);
	ckpt_bundle_part *p = NULL;
	CHECK(ckpt_bundle_part_open(&p, vfs, prefix, 0, 1, 42) == CKPT_OK);
	CHECK(ckpt_bundle_part_add(p, "w", t) == CKPT_OK);
	void *entries = NULL;
	size_t n = 0;
	CHECK(ckpt_bundle_part_finish(&entries, &n, p, 1) == CKPT_OK);
	ckpt_bundle_part_free(p);
	CHECK(entries && n > 0);
	const void *all[1] = { entries };
	CHECK(ckpt_bundle_merge_commit(vfs, prefix, 1, 42, all, &n, 1) == CKPT_OK);
	ckpt_free(entries);

	ckpt_reader *r = NULL;
	CHECK(ckpt_reader_open(&r, prefix, NULL) == CKPT_OK);
	size_t i = 0;
	CHECK(ckpt_reader_find(&i, r, "w") == CKPT_OK);
	ckpt_tensor *back = NULL;
	CHECK(ckpt_reader_read(&back, r, i) == CKPT_OK);
	CHECK(ckpt_tensor_equal(back, t));
	ckpt_tensor_free(back);
	ckpt_reader_free(r);
	ckpt_tensor_free(t);
	return 0;
}

/* A VFS from its own table: every method passes to `inner`, opens counted. */
typedef struct {
	ckpt_vfs base;
	ckpt_vfs *inner;
	int opens;
} counting_vfs;

static int counting_open(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out)
{
	counting_vfs *c = (counting_vfs *)vfs;
	c->opens++;
	return c->inner->methods->open(c->inner, path, flags, out);
}

static int counting_exists(ckpt_vfs *vfs, const char *path, int *is_dir)
{
	counting_vfs *c = (counting_vfs *)vfs;
	return c->inner->methods->exists(c->inner, path, is_dir);
}

static const ckpt_vfs_methods counting_methods = {
	.version = CKPT_VFS_METHODS_V1,
	.open = counting_open,
	.exists = counting_exists,
};

static int vfs_from_a_table(void)
{
	ckpt_vfs *mem = NULL;
	CHECK(ckpt_vfs_memory_new(&mem) == CKPT_OK);
	CHECK(ckpt_vfs_memory_put(mem, "d/f", "abc", 3) == CKPT_OK);
	size_t n = 0;
	const char *bytes = ckpt_vfs_memory_get(&n, mem, "d/f");
	CHECK(bytes && n == 3 && memcmp(bytes, "abc", 3) == 0);
	CHECK(ckpt_vfs_memory_get(&n, mem, "d/none") == NULL && ckpt_error_last()->code == CKPT_ENOTFOUND);
	counting_vfs c = { { &counting_methods }, mem, 0 };
	ckpt_io *io = NULL;
	CHECK(ckpt_vfs_open(&io, &c.base, "d/f", CKPT_IO_READ) == CKPT_OK);
	char got[3];
	CHECK(ckpt_io_read_exact(io, got, 3, 0) == CKPT_OK && memcmp(got, "abc", 3) == 0);
	CHECK(ckpt_io_close(io) == CKPT_OK);
	CHECK(c.opens == 1);
	ckpt_vfs *faulty = NULL;
	CHECK(ckpt_vfs_faulty_new(&faulty, &c.base, 1) == CKPT_OK);
	CHECK(ckpt_vfs_open(&io, faulty, "d/f", CKPT_IO_READ) == CKPT_EIO);
	CHECK(ckpt_vfs_faulty_fired(faulty) == 1 && ckpt_vfs_faulty_calls(faulty) == 1);
	ckpt_vfs_free(faulty);
	ckpt_vfs_free(mem);
	return 0;
}

static int memory_and_errors(void)
{
	char *b = ckpt_malloc(16);
	CHECK(b);
	b = ckpt_realloc(b, 64);
	CHECK(b);
	ckpt_free(b);
	CHECK(ckpt_calloc((size_t)-1, 16) == NULL && ckpt_error_last()->code == CKPT_ELIMIT);
	CHECK(ckpt_error_set(CKPT_EFORMAT, "f.bin", "v", 12, "bad %s", "byte") == CKPT_EFORMAT);
	const ckpt_error *e = ckpt_error_last();
	CHECK(e->code == CKPT_EFORMAT && strcmp(e->message, "bad byte") == 0 && strcmp(e->path, "f.bin") == 0 &&
		strcmp(e->variable, "v") == 0 && e->offset == 12);
	ckpt_error_clear();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	if (strategy_from_a_table() || bundle_from_one_part(argv[1]) || memory_and_errors() || vfs_from_a_table())
		return 1;
	puts("sys consumer: OK");
	return 0;
}

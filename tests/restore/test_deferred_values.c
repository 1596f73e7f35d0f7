/*
 * Restore-on-create holds where a value lies, not its bytes (issue 34,
 * point 3): after a restore that leaves an optimizer's slots pending, the
 * library's live heap (counted through the allocator hook) grows by less
 * than one slot's bytes; the slot created later gets the stored value, read
 * once (a new slot has no old value to keep, so no verification pass); a
 * data file rewritten between the restore and the creation fails that
 * creation with CKPT_ECHECKSUM naming the file and the key, and the slot is
 * not created.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

#define ROWS 512
#define COLS 1024
#define N ((size_t)ROWS * COLS)

/* live bytes of the library's heap: malloc_usable_size of every block it holds */
static long long live;
static void *count_malloc(size_t n, void *ctx)
{
	(void)ctx;
	void *p = malloc(n);
	if (p)
		live += (long long)malloc_usable_size(p);
	return p;
}
static void *count_realloc(void *p, size_t n, void *ctx)
{
	(void)ctx;
	long long was = p ? (long long)malloc_usable_size(p) : 0;
	void *q = realloc(p, n);
	if (q)
		live += (long long)malloc_usable_size(q) - was;
	return q;
}
static void count_free(void *p, void *ctx)
{
	(void)ctx;
	if (p)
		live -= (long long)malloc_usable_size(p);
	free(p);
}

/* bytes this process read through read(2) and pread(2) */
static unsigned long long rchar(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	cr_assert_not_null(f);
	char line[256];
	unsigned long long v = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "rchar: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

static void fill(float *x, float base)
{
	for (size_t i = 0; i < N; i++)
		x[i] = base + (float)(i % 977);
}

/* model/kernel, and an optimizer with its m and v slots when `slots` */
static ckpt_checkpoint *build(ckpt_variable **kernel, ckpt_object **opt, int slots)
{
	ckpt_checkpoint *ck;
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_shape sh = { 2, { ROWS, COLS } };
	cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
	ckpt_object *model = ckpt_object_new_child(ckpt_checkpoint_root(ck), "model");
	cr_assert_not_null(model);
	cr_assert_not_null(*kernel = ckpt_object_add_variable(model, "kernel", "dense/kernel", CKPT_DT_FLOAT, &sh, NULL));
	cr_assert_eq(ckpt_optimizer_new(opt, "Adam"), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_add(ck, "optimizer", *opt), CKPT_OK);
	if (slots) {
		cr_assert_not_null(ckpt_optimizer_create_slot(*opt, *kernel, "m", NULL));
		cr_assert_not_null(ckpt_optimizer_create_slot(*opt, *kernel, "v", NULL));
	}
	return ck;
}

/* Save kernel = 1.., m = 2.., v = 3..; the prefix written. */
static char *save_state(const char *dir)
{
	ckpt_variable *kernel;
	ckpt_object *opt;
	ckpt_checkpoint *ck = build(&kernel, &opt, 1);
	float *x = malloc(N * sizeof(float));
	fill(x, 1);
	cr_assert_eq(ckpt_variable_assign(kernel, x, N * sizeof(float)), CKPT_OK);
	fill(x, 2);
	cr_assert_eq(ckpt_variable_assign(ckpt_optimizer_slot(opt, kernel, "m"), x, N * sizeof(float)), CKPT_OK);
	fill(x, 3);
	cr_assert_eq(ckpt_variable_assign(ckpt_optimizer_slot(opt, kernel, "v"), x, N * sizeof(float)), CKPT_OK);
	free(x);
	char *want = ts_join(dir, "ckpt");
	const char *p = ckpt_checkpoint_save(ck, want);
	cr_assert_not_null(p, "%s", ckpt_error_last()->message);
	char *prefix = strdup(p);
	free(want);
	ckpt_checkpoint_free(ck);
	return prefix;
}

static void check_value(const ckpt_variable *v, float base)
{
	float *x = malloc(N * sizeof(float)), *want = malloc(N * sizeof(float));
	fill(want, base);
	cr_assert_eq(ckpt_variable_read(v, x, N * sizeof(float)), CKPT_OK);
	cr_assert(memcmp(x, want, N * sizeof(float)) == 0, "restored on create: the stored value");
	free(x);
	free(want);
}

/* The stored key of slot `slot` of the kernel, and where it lies. */
static char *slot_entry(const char *prefix, const char *slot, char **file, int64_t *offset)
{
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, prefix, NULL), CKPT_OK);
	char *key = NULL;
	for (size_t i = 0; i < ckpt_reader_num_entries(r); i++) {
		const ckpt_var_info *vi = ckpt_reader_var(r, i);
		if (strstr(vi->name, "optimizer/") && strstr(vi->name, slot) && vi->nbytes == N * sizeof(float)) {
			key = strdup(vi->name);
			*file = strdup(ckpt_reader_shard_path(r, vi->shard, NULL));
			*offset = vi->offset;
		}
	}
	ckpt_reader_free(r);
	cr_assert_not_null(key, "no stored slot '%s'", slot);
	return key;
}

Test(deferred_values, a_pending_slot_holds_no_bytes_until_it_is_created)
{
	char *dir = ts_tmpdir(), *prefix = save_state(dir);
	free(dir);
	ckpt_variable *kernel;
	ckpt_object *opt;
	ckpt_checkpoint *ck = build(&kernel, &opt, 0);
	ckpt_allocator a = { count_malloc, count_realloc, count_free, NULL };
	ckpt_set_allocator(&a);
	live = 0;
	ckpt_restore_status *st = NULL;
	cr_assert_eq(ckpt_checkpoint_restore(&st, ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	long long held = live;
	/* m and v wait for their slots: 2 x 2 MiB in the file; the library keeps their places, not their bytes */
	cr_assert_lt(held, (long long)(N * sizeof(float)) / 4,
		"after the restore the library holds %lld bytes more (a slot is %zu bytes)", held, N * sizeof(float));
	check_value(kernel, 1);
	/* a slot the library allocates is new: its value is read once (no verification pass first) */
	unsigned long long r0 = rchar();
	ckpt_variable *m = ckpt_optimizer_create_slot(opt, kernel, "m", NULL);
	unsigned long long got = rchar() - r0;
	cr_assert_not_null(m, "%s", ckpt_error_last()->message);
	cr_assert(got >= N * sizeof(float) && got < N * sizeof(float) * 5 / 4, "read %llu bytes for a %zu-byte slot",
		got, N * sizeof(float));
	check_value(m, 2);
	ckpt_variable *v = ckpt_optimizer_create_slot(opt, kernel, "v", NULL);
	cr_assert_not_null(v, "%s", ckpt_error_last()->message);
	check_value(v, 3);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(ck);
	ckpt_set_allocator(NULL);
	free(prefix);
}

Test(deferred_values, a_file_changed_before_creation_fails_it_naming_file_and_variable)
{
	char *dir = ts_tmpdir(), *prefix = save_state(dir);
	free(dir);
	char *file = NULL;
	int64_t off = 0;
	char *key = slot_entry(prefix, "/v/", &file, &off);
	ckpt_variable *kernel;
	ckpt_object *opt;
	ckpt_checkpoint *ck = build(&kernel, &opt, 0);
	cr_assert_eq(ckpt_checkpoint_restore(NULL, ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	/* another writer changes v's bytes in place after the restore */
	int fd = open(file, O_WRONLY);
	cr_assert_geq(fd, 0);
	float junk[4] = { -1, -2, -3, -4 };
	cr_assert_eq(pwrite(fd, junk, sizeof(junk), (off_t)off + 4096), (ssize_t)sizeof(junk));
	close(fd);
	/* m is untouched: created and restored */
	ckpt_variable *m = ckpt_optimizer_create_slot(opt, kernel, "m", NULL);
	cr_assert_not_null(m, "%s", ckpt_error_last()->message);
	check_value(m, 2);
	/* v changed: its creation fails, naming the data file and the key, and no slot is made */
	cr_assert_null(ckpt_optimizer_create_slot(opt, kernel, "v", NULL));
	const ckpt_error *e = ckpt_error_last();
	cr_assert_eq(e->code, CKPT_ECHECKSUM, "%s: %s", ckpt_status_name(e->code), e->message);
	cr_assert(e->path && strcmp(e->path, file) == 0, "path %s, want %s", e->path ? e->path : "(null)", file);
	cr_assert(e->variable && strcmp(e->variable, key) == 0, "variable %s, want %s",
		e->variable ? e->variable : "(null)", key);
	cr_assert(strstr(e->message, "changed"), "%s", e->message);
	char buf[1024];
	ckpt_error_format(e, buf, sizeof(buf));
	cr_assert(strstr(buf, file) && strstr(buf, key), "%s", buf);
	cr_assert_eq(ckpt_status_of(ckpt_optimizer_slot(opt, kernel, "v")), CKPT_ENOTFOUND);
	ckpt_checkpoint_free(ck);
	free(key);
	free(file);
	free(prefix);
}

/*
 * safetensors stores no crc32c: the restore that defers a value takes one
 * of its bytes (through one bounded buffer), and the creation checks it.
 */
Test(deferred_values, a_format_without_checksums_is_checked_against_the_restore, .timeout = 120)
{
	char *dir = ts_tmpdir();
	char *prefix = save_state(dir);
	char *st_path = ts_join(dir, "m.safetensors");
	ts_run_result r = ts_cli("convert", prefix, st_path, "--to", "safetensors", (char *)NULL);
	ts_assert_exit(&r, 0, "convert");
	ts_run_free(&r);
	char *file = NULL;
	int64_t off = 0;
	char *key = NULL;
	{
		ckpt_reader *rd;
		cr_assert_eq(ckpt_reader_open(&rd, st_path, NULL), CKPT_OK);
		for (size_t i = 0; i < ckpt_reader_num_entries(rd); i++) {
			const ckpt_var_info *vi = ckpt_reader_var(rd, i);
			cr_assert_not(vi->has_crc32c);
			if (strstr(vi->name, "optimizer") && strstr(vi->name, ".v") && vi->nbytes == N * sizeof(float)) {
				key = strdup(vi->name);
				off = vi->offset;
			}
		}
		file = strdup(ckpt_reader_path(rd));
		ckpt_reader_free(rd);
		cr_assert_not_null(key);
	}
	ckpt_variable *kernel;
	ckpt_object *opt;
	ckpt_checkpoint *ck = build(&kernel, &opt, 0);
	ckpt_allocator a = { count_malloc, count_realloc, count_free, NULL };
	ckpt_set_allocator(&a);
	live = 0;
	cr_assert_eq(ckpt_checkpoint_restore(NULL, ck, st_path), CKPT_OK, "%s", ckpt_error_last()->message);
	long long held = live;
	ckpt_set_allocator(NULL);
	cr_assert_lt(held, (long long)(N * sizeof(float)) / 4, "after the restore the library holds %lld bytes more", held);
	check_value(kernel, 1);
	cr_assert_eq(ts_flip_byte(file, (long)off + 8192, 0x40), 0);
	ckpt_variable *m = ckpt_optimizer_create_slot(opt, kernel, "m", NULL);
	cr_assert_not_null(m, "%s", ckpt_error_last()->message);
	check_value(m, 2);
	cr_assert_null(ckpt_optimizer_create_slot(opt, kernel, "v", NULL));
	const ckpt_error *e = ckpt_error_last();
	cr_assert_eq(e->code, CKPT_ECHECKSUM, "%s: %s", ckpt_status_name(e->code), e->message);
	cr_assert(e->path && strcmp(e->path, file) == 0, "path %s, want %s", e->path ? e->path : "(null)", file);
	cr_assert(e->variable && strcmp(e->variable, key) == 0, "variable %s, want %s",
		e->variable ? e->variable : "(null)", key);
	cr_assert(strstr(e->message, "changed"), "%s", e->message);
	cr_assert_eq(ckpt_status_of(ckpt_optimizer_slot(opt, kernel, "v")), CKPT_ENOTFOUND);
	ckpt_checkpoint_free(ck);
	free(key);
	free(file);
	free(st_path);
	free(prefix);
	free(dir);
}

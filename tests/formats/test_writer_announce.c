/*
 * ckpt_writer_announce: a safetensors / GGUF writer told every tensor up
 * front writes each add straight to its place (GGUF in the order announced,
 * as the staged writer uses the add order). The file must be the same
 * bytes as the staged path writes (whatever order the adds come in), every
 * break of the contract fails with EINVAL naming the tensor and leaves
 * nothing behind, a failed I/O call at any point leaves no file and no
 * temporary, and `ckpt convert` to a flat file no longer holds the whole
 * checkpoint in memory.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ckpt/ckpt.h"
#include "ckpt/sys/vfs_faulty.h"
#include "ckpt/sys/vfs_memory.h"
#include "test_support.h"

#define NT 6

typedef struct wt {
	const char *name;
	ckpt_dtype dt;
	int rank;
	int64_t dims[2];
} wt;

/* names that sort differently from add order, mixed dtypes (the safetensors layout sorts by dtype, then name) */
static const wt tensors[NT] = {
	{ "model/w/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_FLOAT, 2, { 3, 5 } },
	{ "model/b/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_FLOAT, 1, { 5, 0 } },
	{ "step/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_INT64, 0, { 0, 0 } },
	{ "model/h/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_HALF, 2, { 7, 3 } },
	{ "model/d/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_DOUBLE, 1, { 9, 0 } },
	{ "model/i/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_INT32, 1, { 11, 0 } },
};

static ckpt_tensor *make(size_t k)
{
	ckpt_shape s;
	ckpt_tensor *t;
	cr_assert_eq(ckpt_shape_make(&s, tensors[k].rank, tensors[k].dims), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&t, tensors[k].dt, &s), CKPT_OK);
	unsigned char *p = t->data;
	for (uint64_t i = 0; i < t->nbytes; i++)
		p[i] = (unsigned char)(31 * k + 7 * i + 1);
	return t;
}

/* Write every tensor to `path`: staged, or announced and added in `order`. */
static int write_file(ckpt_vfs *vfs, const char *path, const char *format, const size_t *order)
{
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.vfs = vfs;
	o.no_fsync = 1;
	ckpt_writer *w;
	int rc = ckpt_writer_open(&w, path, format, &o);
	if (rc < 0)
		return rc;
	for (size_t k = 0; order && k < NT && rc == CKPT_OK; k++) {
		ckpt_shape s;
		ckpt_shape_make(&s, tensors[k].rank, tensors[k].dims);
		rc = ckpt_writer_announce(w, tensors[k].name, tensors[k].dt, &s);
	}
	if (rc == CKPT_OK && strcmp(format, "safetensors") == 0)
		rc = ckpt_writer_set_meta(w, "safetensors.metadata", "{\"format\":\"pt\"}");
	for (size_t k = 0; k < NT && rc == CKPT_OK; k++) {
		size_t i = order ? order[k] : k;
		ckpt_tensor *t = make(i);
		rc = ckpt_writer_add(w, tensors[i].name, t, 0);
		ckpt_tensor_free(t);
	}
	if (rc == CKPT_OK)
		rc = ckpt_writer_commit(w);
	ckpt_writer_free(w);
	return rc;
}

static const char *const flat_formats[] = { "safetensors", "gguf" };
static const size_t shuffled[NT] = { 4, 2, 0, 5, 1, 3 };

Test(writer_announce, announced_writes_the_same_bytes_as_staged_in_any_add_order)
{
	char *dir = ts_tmpdir();
	for (size_t f = 0; f < 2; f++) {
		char *a = ts_join(dir, "staged"), *b = ts_join(dir, "announced");
		cr_assert_eq(write_file(NULL, a, flat_formats[f], NULL), CKPT_OK, "%s", ckpt_error_last()->message);
		cr_assert_eq(write_file(NULL, b, flat_formats[f], shuffled), CKPT_OK, "%s: %s", flat_formats[f],
			ckpt_error_last()->message);
		size_t na, nb;
		char *x = ts_read_file(a, &na), *y = ts_read_file(b, &nb);
		cr_assert(x && y);
		cr_assert_eq(na, nb, "%s: %zu vs %zu bytes", flat_formats[f], na, nb);
		cr_assert(memcmp(x, y, na) == 0, "%s: the announced file differs from the staged one", flat_formats[f]);
		/* and the reader gets every value back */
		ckpt_reader *r;
		cr_assert_eq(ckpt_reader_open(&r, b, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
		cr_assert_eq(ckpt_reader_num_entries(r), NT);
		for (size_t k = 0; k < NT; k++) {
			/* flat files store dotted names; each tensor here has its own dtype and size */
			ckpt_tensor *want = make(k), *got;
			int found = 0;
			for (size_t e = 0; e < ckpt_reader_num_entries(r); e++) {
				const ckpt_var_info *v = ckpt_reader_var(r, e);
				if (v->nbytes != want->nbytes || v->dtype != want->dtype)
					continue;
				cr_assert_eq(ckpt_reader_read(&got, r, e), CKPT_OK);
				found += memcmp(got->data, want->data, want->nbytes) == 0;
				ckpt_tensor_free(got);
			}
			cr_assert_eq(found, 1, "%s: %s read back %d times", flat_formats[f], tensors[k].name, found);
			ckpt_tensor_free(want);
		}
		ckpt_reader_free(r);
		free(x);
		free(y);
		free(a);
		free(b);
	}
	ts_rmtree(dir);
	free(dir);
}

/* Names in `dir` other than "." and "..". */
static int entries_in(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	cr_assert(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

typedef enum { BREAK_UNANNOUNCED, BREAK_DTYPE, BREAK_SHAPE, BREAK_TWICE, BREAK_MISSING, BREAK_LATE_ANNOUNCE,
	BREAK_LATE_META, BREAK_DUP_ANNOUNCE, NBREAKS } breakage;

/* One writer that breaks the contract once: the failing call's status, its message in `msg`. */
static int broken_writer(const char *path, const char *format, breakage b, char *msg, size_t cap)
{
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_writer *w;
	cr_assert_eq(ckpt_writer_open(&w, path, format, &o), CKPT_OK);
	ckpt_error_clear();
	int rc = CKPT_OK;
	size_t announced = b == BREAK_UNANNOUNCED ? NT - 1 : NT;
	for (size_t k = 0; k < announced && rc == CKPT_OK; k++) {
		ckpt_shape s;
		ckpt_shape_make(&s, tensors[k].rank, tensors[k].dims);
		rc = ckpt_writer_announce(w, tensors[k].name, tensors[k].dt, &s);
	}
	if (b == BREAK_DUP_ANNOUNCE && rc == CKPT_OK) {
		ckpt_shape s;
		ckpt_shape_make(&s, tensors[0].rank, tensors[0].dims);
		rc = ckpt_writer_announce(w, tensors[0].name, tensors[0].dt, &s);
	}
	size_t adds = b == BREAK_MISSING ? NT - 1 : NT;
	for (size_t k = 0; k < adds && rc == CKPT_OK; k++) {
		ckpt_tensor *t = make(k);
		if (k == 2 && b == BREAK_DTYPE)
			t->dtype = CKPT_DT_DOUBLE; /* same size as int64, and both formats have it */
		if (k == 0 && b == BREAK_SHAPE) {
			t->shape.dims[0] = 5;
			t->shape.dims[1] = 3;
		}
		rc = ckpt_writer_add(w, tensors[k].name, t, 0);
		if (rc == CKPT_OK && k == 1 && b == BREAK_TWICE)
			rc = ckpt_writer_add(w, tensors[k].name, t, 0);
		if (rc == CKPT_OK && k == 0 && b == BREAK_LATE_ANNOUNCE)
			rc = ckpt_writer_announce(w, "late/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_FLOAT, &t->shape);
		if (rc == CKPT_OK && k == 0 && b == BREAK_LATE_META)
			rc = ckpt_writer_set_meta(w, strcmp(format, "gguf") ? "safetensors.metadata" : "gguf.kv", "{}");
		ckpt_tensor_free(t);
	}
	if (rc == CKPT_OK)
		rc = ckpt_writer_commit(w);
	snprintf(msg, cap, "%s", rc < 0 && ckpt_error_last()->message ? ckpt_error_last()->message : "");
	ckpt_writer_free(w);
	return rc;
}

Test(writer_announce, every_break_of_the_contract_is_einval_and_leaves_nothing)
{
	static const char *const must_name[NBREAKS] = { "model.i", "step", "model.w", "model.b", "model.i", "late",
		"before the first tensor", "model.w" };
	for (size_t f = 0; f < 2; f++) {
		for (int b = 0; b < NBREAKS; b++) {
			char *dir = ts_tmpdir(), *path = ts_join(dir, "out"), msg[2048];
			int rc = broken_writer(path, flat_formats[f], (breakage)b, msg, sizeof(msg));
			cr_assert_eq(rc, CKPT_EINVAL, "%s, break %d: %s (%s)", flat_formats[f], b, ckpt_status_name(rc), msg);
			cr_assert(strstr(msg, must_name[b]), "%s, break %d: the message does not name '%s': %s", flat_formats[f],
				b, must_name[b], msg);
			cr_assert_eq(entries_in(dir), 0, "%s, break %d left a file behind", flat_formats[f], b);
			ts_rmtree(dir);
			free(path);
			free(dir);
		}
	}
}

Test(writer_announce, what_a_format_cannot_hold_fails_at_the_announcement)
{
	ckpt_writer *w;
	ckpt_shape s;
	int64_t d = 4;
	ckpt_shape_make(&s, 1, &d);
	char *dir = ts_tmpdir(), *path = ts_join(dir, "out");
	for (size_t f = 0; f < 2; f++) {
		cr_assert_eq(ckpt_writer_open(&w, path, flat_formats[f], NULL), CKPT_OK);
		ckpt_error_clear();
		cr_assert_eq(ckpt_writer_announce(w, "s/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_STRING, &s), CKPT_EUNSUPPORTED);
		cr_assert(strstr(ckpt_error_last()->message, "string"), "%s", ckpt_error_last()->message);
		ckpt_writer_free(w);
	}
	cr_assert_eq(ckpt_writer_open(&w, path, "gguf", NULL), CKPT_OK);
	cr_assert_eq(ckpt_writer_announce(w, "u/.ATTRIBUTES/VARIABLE_VALUE", CKPT_DT_UINT32, &s), CKPT_EUNSUPPORTED);
	cr_assert(strstr(ckpt_error_last()->message, "uint32"), "%s", ckpt_error_last()->message);
	ckpt_writer_free(w);
	cr_assert_eq(entries_in(dir), 0);
	ts_rmtree(dir);
	free(path);
	free(dir);
}

Test(writer_announce, tensorbundle_accepts_and_ignores_announcements)
{
	char *dir = ts_tmpdir(), *a = ts_join(dir, "staged"), *b = ts_join(dir, "announced");
	cr_assert_eq(write_file(NULL, a, "tf-bundle", NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	/* the bundle writes in add order: announce in shuffled order, add in the staged one */
	static const size_t identity[NT] = { 0, 1, 2, 3, 4, 5 };
	cr_assert_eq(write_file(NULL, b, "tf-bundle", identity), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int part = 0; part < 2; part++) {
		char pa[4096], pb[4096];
		snprintf(pa, sizeof(pa), "%s%s", a, part ? ".index" : ".data-00000-of-00001");
		snprintf(pb, sizeof(pb), "%s%s", b, part ? ".index" : ".data-00000-of-00001");
		size_t na, nb;
		char *x = ts_read_file(pa, &na), *y = ts_read_file(pb, &nb);
		cr_assert(x && y && na == nb && memcmp(x, y, na) == 0, "%s differs", pb);
		free(x);
		free(y);
	}
	ts_rmtree(dir);
	free(a);
	free(b);
	free(dir);
}

Test(writer_announce, every_failed_io_call_leaves_no_file_and_no_temporary)
{
	for (size_t f = 0; f < 2; f++) {
		ckpt_vfs *mem, *count;
		cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
		cr_assert_eq(ckpt_vfs_faulty_new(&count, mem, 0), CKPT_OK);
		cr_assert_eq(write_file(count, "out", flat_formats[f], shuffled), CKPT_OK, "%s", ckpt_error_last()->message);
		long calls = ckpt_vfs_faulty_calls(count);
		ckpt_vfs_free(count);
		ckpt_vfs_free(mem);
		cr_assert_gt(calls, NT, "%s: only %ld I/O calls", flat_formats[f], calls);
		for (long at = 1; at <= calls; at++) {
			ckpt_vfs *m2, *fv;
			cr_assert_eq(ckpt_vfs_memory_new(&m2), CKPT_OK);
			cr_assert_eq(ckpt_vfs_faulty_new(&fv, m2, at), CKPT_OK);
			ckpt_error_clear();
			int rc = write_file(fv, "out", flat_formats[f], shuffled);
			cr_assert(ckpt_vfs_faulty_fired(fv), "%s: call %ld never came", flat_formats[f], at);
			cr_assert_lt(rc, 0, "%s: call %ld failed and the write succeeded", flat_formats[f], at);
			cr_assert_eq(ckpt_error_last()->code, rc, "%s: call %ld: the error slot does not hold the failure",
				flat_formats[f], at);
			char **names = NULL;
			size_t n = 0;
			cr_assert_eq(ckpt_vfs_list(&names, &n, m2, "."), CKPT_OK);
			cr_assert_eq(n, 0, "%s: call %ld left %s behind", flat_formats[f], at, n ? names[0] : "");
			ckpt_vfs_free_list(names, n);
			ckpt_vfs_free(fv);
			ckpt_vfs_free(m2);
		}
	}
}

/* Peak RSS (KiB) of `ckpt convert IN OUT --to FORMAT`, which must succeed. */
static long convert_rss(const char *in, const char *out, const char *format)
{
	struct rusage ru;
	int st = 0;
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (null < 0)
			_exit(126);
		dup2(null, 1);
		execl(CKPT_CLI_PATH, CKPT_CLI_PATH, "convert", in, out, "--to", format, (char *)NULL);
		_exit(127);
	}
	cr_assert_eq(wait4(pid, &st, 0, &ru), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ckpt convert --to %s failed (status 0x%x)", format, st);
	return ru.ru_maxrss;
}

/* 24 tensors of 4 MiB at `src`, written by a child: the RSS a fork inherits stays the test's own. */
static void write_96mib(const char *src)
{
	fflush(NULL);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
		o.no_fsync = 1;
		ckpt_writer *w;
		int64_t dims[2] = { 1024, 1024 };
		ckpt_shape s;
		int rc = ckpt_shape_make(&s, 2, dims);
		if (rc == CKPT_OK)
			rc = ckpt_writer_open(&w, src, "tf-bundle", &o);
		for (int k = 0; k < 24 && rc == CKPT_OK; k++) {
			ckpt_tensor *t;
			char name[64];
			if ((rc = ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s)) < 0)
				break;
			memset(t->data, k + 1, t->nbytes);
			snprintf(name, sizeof(name), "v%02d/.ATTRIBUTES/VARIABLE_VALUE", k);
			rc = ckpt_writer_add(w, name, t, 0);
			ckpt_tensor_free(t);
		}
		if (rc == CKPT_OK)
			rc = ckpt_writer_commit(w);
		_exit(rc == CKPT_OK ? 0 : 1);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writing the source checkpoint failed");
}

Test(writer_announce, convert_to_a_flat_file_holds_one_tensor_not_the_checkpoint, .timeout = 120)
{
	/* staging 24 tensors of 4 MiB would need 96 MiB on top of what the process has anyway */
	char *dir = ts_tmpdir(), *src = ts_join(dir, "src");
	write_96mib(src);
	char *dsts[2] = { ts_join(dir, "dst.safetensors"), ts_join(dir, "dst.gguf") };
	/* both converts before any check here: reading the results back makes this process (and its forks) bigger */
	for (size_t f = 0; f < 2; f++) {
		long kib = convert_rss(src, dsts[f], flat_formats[f]);
		cr_log_info("writer_announce: peak RSS of ckpt convert --to %s of a 96 MiB checkpoint: %ld KiB",
			flat_formats[f], kib);
		cr_assert_lt(kib, 48 * 1024, "convert --to %s peaked at %ld KiB for a 96 MiB checkpoint", flat_formats[f],
			kib);
	}
	for (size_t f = 0; f < 2; f++) {
		ckpt_reader *r;
		cr_assert_eq(ckpt_reader_open(&r, dsts[f], NULL), CKPT_OK, "%s", ckpt_error_last()->message);
		cr_assert_eq(ckpt_reader_num_entries(r), 24);
		for (size_t e = 0; e < 24; e++) {
			ckpt_tensor *t;
			const ckpt_var_info *v = ckpt_reader_var(r, e);
			int k = atoi(v->name + 1);
			cr_assert_eq(ckpt_reader_read(&t, r, e), CKPT_OK);
			const unsigned char *p = t->data;
			for (uint64_t i = 0; i < t->nbytes; i += 4093)
				cr_assert_eq(p[i], k + 1, "%s byte %llu", v->name, (unsigned long long)i);
			ckpt_tensor_free(t);
		}
		ckpt_reader_free(r);
		free(dsts[f]);
	}
	ts_rmtree(dir);
	free(src);
	free(dir);
}

Test(writer_announce, checkpoint_write_to_a_flat_format_round_trips)
{
	char *dir = ts_tmpdir();
	for (size_t f = 0; f < 2; f++) {
		char *path = ts_join(dir, flat_formats[f]);
		ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
		o.format = flat_formats[f];
		o.no_fsync = 1;
		ckpt_checkpoint *ck;
		cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
		ckpt_object *model;
		cr_assert_eq(ckpt_status_of(model = ckpt_object_new_child(ckpt_checkpoint_root(ck), "model")), CKPT_OK);
		ckpt_variable *vars[3];
		for (int k = 0; k < 3; k++) {
			ckpt_shape s;
			int64_t d[2] = { 4 + k, 3 };
			char name[16];
			float vals[18];
			for (int i = 0; i < 18; i++)
				vals[i] = (float)(100 * k + i) / 8.0f;
			snprintf(name, sizeof(name), "w%d", k);
			cr_assert_eq(ckpt_shape_make(&s, 2, d), CKPT_OK);
			cr_assert_eq(ckpt_status_of(vars[k] = ckpt_object_add_variable(model, name, name, CKPT_DT_FLOAT, &s, NULL)),
				     CKPT_OK);
			cr_assert_eq(ckpt_variable_assign(vars[k], vals, (size_t)(4 + k) * 3 * sizeof(float)), CKPT_OK);
		}
		cr_assert_eq(ckpt_checkpoint_write(ck, path), CKPT_OK, "%s: %s", flat_formats[f], ckpt_error_last()->message);
		ckpt_reader *r;
		cr_assert_eq(ckpt_reader_open(&r, path, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
		for (int k = 0; k < 3; k++) {
			char flat[64];
			size_t idx;
			snprintf(flat, sizeof(flat), "model.w%d", k);
			cr_assert_eq(ckpt_reader_find(&idx, r, flat), CKPT_OK, "%s: no %s", flat_formats[f], flat);
			ckpt_tensor *t;
			cr_assert_eq(ckpt_reader_read(&t, r, idx), CKPT_OK);
			cr_assert_eq(t->nbytes, (uint64_t)(4 + k) * 3 * sizeof(float));
			for (int i = 0; i < (4 + k) * 3; i++)
				cr_assert_eq(((float *)t->data)[i], (float)(100 * k + i) / 8.0f);
			ckpt_tensor_free(t);
		}
		ckpt_reader_free(r);
		/* a string variable has no flat dtype: refused, and nothing new appears */
		ckpt_variable *sv;
		ckpt_shape scalar = { 0 };
		cr_assert_eq(ckpt_status_of(sv = ckpt_object_add_variable(model, "name", "name", CKPT_DT_STRING, &scalar, NULL)),
			     CKPT_OK);
		char *other = ts_join(dir, "with-string");
		cr_assert_eq(ckpt_checkpoint_write(ck, other), CKPT_EUNSUPPORTED);
		cr_assert(access(other, F_OK) != 0, "%s: a refused write left %s", flat_formats[f], other);
		free(other);
		ckpt_checkpoint_free(ck);
		free(path);
	}
	cr_assert_eq(entries_in(dir), 2, "temporaries left behind");
	ts_rmtree(dir);
	free(dir);
}

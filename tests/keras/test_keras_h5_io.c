/*
 * Keras HDF5 backend, the I/O paths: files of the POSIX VFS are mapped and
 * their contiguous data read with pread straight into the caller's buffer,
 * other VFS read the whole file into memory (the two must agree on every
 * fixture); the writer stores each tensor when it is added (the caller may
 * reuse its buffer at once), into a temporary sibling renamed at commit, and
 * a failed or abandoned save leaves neither a temporary nor a changed file.
 */
#include <dirent.h>
#include <unistd.h>
#include "keras_test.h"
#include "ckpt/sys/vfs_faulty.h"
#include "ckpt/sys/vfs_memory.h"

/* Every entry of a file read through the POSIX VFS equals the same entry read through the memory VFS. */
static void assert_paths_agree(const char *path)
{
	ckpt_vfs *vfs;
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	ckpt_reader *a = kt_open(path), *b;
	size_t n, i;
	char *buf = ts_read_file(path, &n);
	cr_assert(buf, "%s", path);
	cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
	cr_assert_eq(ckpt_vfs_memory_put(vfs, "mem/f.h5", buf, n), CKPT_OK);
	o.vfs = vfs;
	if (ckpt_reader_open(&b, "mem/f.h5", &o) != CKPT_OK)
		kt_fail_last(path);
	cr_assert_str_eq(ckpt_reader_format(a), ckpt_reader_format(b));
	cr_assert_eq(ckpt_reader_num_entries(a), ckpt_reader_num_entries(b), "%s", path);
	for (i = 0; i < ckpt_reader_num_entries(a); i++) {
		const ckpt_var_info *va = ckpt_reader_var(a, i), *vb = ckpt_reader_var(b, i);
		size_t len = (size_t)va->nbytes;
		unsigned char *x = malloc(len ? len : 1), *y = malloc(len ? len : 1);
		cr_assert_str_eq(va->name, vb->name);
		cr_assert_eq(va->dtype, vb->dtype, "%s", va->name);
		cr_assert_eq(va->nbytes, vb->nbytes, "%s", va->name);
		cr_assert_eq(va->offset, vb->offset, "%s", va->name);
		memset(x, 0xA5, len ? len : 1);
		memset(y, 0x5A, len ? len : 1);
		if (ckpt_reader_read_into(a, i, x, len) != CKPT_OK)
			kt_fail_last(va->name);
		if (ckpt_reader_read_into(b, i, y, len) != CKPT_OK)
			kt_fail_last(vb->name);
		cr_assert(memcmp(x, y, len) == 0, "%s: %s differs between the mapped and the in-memory path", path, va->name);
		free(x);
		free(y);
	}
	ckpt_reader_free(a);
	ckpt_reader_free(b);
	ckpt_vfs_free(vfs);
	free(buf);
}

Test(keras_h5, mapped_and_in_memory_reads_agree_on_every_fixture)
{
	size_t i;
	for (i = 0; i < KT_NFIX; i++)
		if (strcmp(kt_fixtures[i].format, "keras-v3") != 0)
			assert_paths_agree(ts_fixture(kt_fixtures[i].rel));
}

static size_t count_temporaries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;
	cr_assert(d);
	while ((de = readdir(d)))
		if (strstr(de->d_name, "tempstate"))
			n++;
	closedir(d);
	return n;
}

static void fill(ckpt_tensor *t, unsigned seed)
{
	size_t k;
	for (k = 0; k < t->nbytes; k++)
		((unsigned char *)t->data)[k] = (unsigned char)(k * 31 + seed);
}

Test(keras_h5, writer_stores_each_tensor_when_added)
{
	/* The caller reuses one buffer for every tensor (ckpt_writer_add: "may be released after the call"). */
	static const char *const formats[] = { "keras-weights", "keras-h5" };
	size_t f, i;
	for (f = 0; f < 2; f++) {
		char *dir = ts_tmpdir(), *out = ts_join(dir, "s.h5");
		ckpt_writer *w;
		ckpt_reader *r;
		ckpt_tensor *t;
		ckpt_shape s;
		int64_t dims[2] = { 64, 300 };
		ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
		cr_assert_eq(ckpt_shape_make(&s, 2, dims), CKPT_OK);
		cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s), CKPT_OK);
		cr_assert_eq(ckpt_writer_open(&w, out, formats[f], &o), CKPT_OK);
		for (i = 0; i < 20; i++) {
			char name[128];
			if (f == 0)
				snprintf(name, sizeof(name), "layers/dense_%zu/vars/0", i);
			else
				snprintf(name, sizeof(name), "model_weights/dense_%zu/dense_%zu/kernel:0", i, i);
			fill(t, (unsigned)i);
			cr_assert_eq(ckpt_writer_add(w, name, t, 0), CKPT_OK);
			memset(t->data, 0xEE, (size_t)t->nbytes);
		}
		/* while the writer is open only its temporary exists */
		cr_assert_eq(access(out, F_OK), -1);
		cr_assert_eq(count_temporaries(dir), 1);
		cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
		ckpt_writer_free(w);
		cr_assert_eq(count_temporaries(dir), 0);
		r = kt_open(out);
		cr_assert_eq(ckpt_reader_num_entries(r), 20);
		for (i = 0; i < 20; i++) {
			char name[128];
			size_t idx;
			ckpt_tensor *got;
			if (f == 0)
				snprintf(name, sizeof(name), "layers/dense_%zu/vars/0", i);
			else
				snprintf(name, sizeof(name), "model_weights/dense_%zu/dense_%zu/kernel:0", i, i);
			cr_assert_eq(ckpt_reader_find(&idx, r, name), CKPT_OK, "%s", name);
			cr_assert_eq(ckpt_reader_read(&got, r, idx), CKPT_OK);
			fill(t, (unsigned)i);
			cr_assert(ckpt_tensor_equal(got, t), "%s", name);
			ckpt_tensor_free(got);
		}
		ckpt_reader_free(r);
		{
			/* h5py: every dataset has exactly one link (the extra reference that kept it unlinked is gone) */
			ts_run_result res;
			char cmd[2048];
			snprintf(cmd, sizeof(cmd), "%s -c \"import h5py\nf=h5py.File('%s','r')\nrc=[]\n"
				"f.visititems(lambda n,o: rc.append(h5py.h5o.get_info(o.id).rc) if isinstance(o,h5py.Dataset) else None)\n"
				"print(len(rc), set(rc))\"", TS_PYTHON, out);
			cr_assert_eq(ts_run_sh(&res, cmd), 0);
			cr_assert_str_eq(res.out, "20 {1}\n", "%s%s", res.out, res.err);
			ts_run_free(&res);
		}
		ckpt_tensor_free(t);
		ts_rmtree(dir);
		free(out);
		free(dir);
	}
}

Test(keras_h5, failed_and_abandoned_saves_leave_no_temporary)
{
	char *dir = ts_tmpdir(), *out = ts_join(dir, "k.weights.h5");
	ckpt_writer *w;
	ckpt_tensor *t;
	ckpt_shape s;
	int64_t d = 1000;
	size_t n;
	char *c;
	cr_assert_eq(ckpt_shape_make(&s, 1, &d), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s), CKPT_OK);
	cr_assert_eq(ts_write_file(out, "previous", 8), 0);
	/* abandoned after adds */
	cr_assert_eq(ckpt_writer_open(&w, out, "keras-weights", NULL), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "layers/d/vars/0", t, 0), CKPT_OK);
	ckpt_writer_free(w);
	cr_assert_eq(count_temporaries(dir), 0);
	/* layout refused at commit; a second commit is refused too */
	cr_assert_eq(ckpt_writer_open(&w, out, "keras-weights", NULL), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "layers/d/vars/0", t, 0), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "layers/d/vars/0/x/vars/0", t, 0), CKPT_OK);
	cr_assert_lt(ckpt_writer_commit(w), 0);
	cr_assert_eq(count_temporaries(dir), 0);
	cr_assert_lt(ckpt_writer_commit(w), 0);
	ckpt_writer_free(w);
	cr_assert_eq(count_temporaries(dir), 0);
	c = ts_read_file(out, &n);
	cr_assert(c && n == 8 && memcmp(c, "previous", 8) == 0);
	free(c);
	/* a refused tensor does not spoil the file */
	cr_assert_eq(ckpt_writer_open(&w, out, "keras-weights", NULL), CKPT_OK);
	t->nbytes--;
	kt_assert_error(ckpt_writer_add(w, "layers/d/vars/0", t, 0), CKPT_EINVAL, "its shape needs", "short tensor");
	t->nbytes++;
	cr_assert_eq(ckpt_writer_add(w, "layers/d/vars/0", t, 0), CKPT_OK);
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	cr_assert_eq(count_temporaries(dir), 0);
	{
		ckpt_reader *r = kt_open(out);
		cr_assert_eq(ckpt_reader_num_entries(r), 1);
		ckpt_reader_free(r);
	}
	ckpt_tensor_free(t);
	ts_rmtree(dir);
	free(out);
	free(dir);
}

/* `path` on `vfs` reads back as one entry equal to `t`. */
static int new_file_holds(ckpt_vfs *vfs, const char *path, const ckpt_tensor *t)
{
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	o.vfs = vfs;
	ckpt_reader *r;
	if (ckpt_reader_open(&r, path, &o) != CKPT_OK)
		return 0;
	ckpt_tensor *back = NULL;
	int ok = ckpt_reader_num_entries(r) == 1 && ckpt_reader_read(&back, r, 0) == CKPT_OK &&
		back->nbytes == t->nbytes && memcmp(back->data, t->data, (size_t)t->nbytes) == 0;
	ckpt_tensor_free(back);
	ckpt_reader_free(r);
	return ok;
}

Test(keras_h5, every_io_failure_of_a_non_posix_save_keeps_the_old_file)
{
	/* Non-POSIX VFS: the file is built in memory and committed with ckpt_vfs_write_atomic. */
	ckpt_tensor *t;
	ckpt_shape s;
	int64_t d = 100;
	long k, calls = 0, failed = 0;
	void *good = NULL;
	size_t good_n = 0;
	cr_assert_eq(ckpt_shape_make(&s, 1, &d), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s), CKPT_OK);
	fill(t, 3);
	for (k = 0; k == 0 || k <= calls; k++) {
		ckpt_vfs *mem, *faulty;
		ckpt_writer *w;
		ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
		const void *got;
		size_t n;
		int rc;
		cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
		cr_assert_eq(ckpt_vfs_memory_put(mem, "d/k.weights.h5", "previous", 8), CKPT_OK);
		cr_assert_eq(ckpt_vfs_faulty_new(&faulty, mem, k), CKPT_OK);
		o.vfs = faulty;
		ckpt_error_clear();
		rc = ckpt_writer_open(&w, "d/k.weights.h5", "keras-weights", &o);
		if (rc == CKPT_OK) {
			rc = ckpt_writer_add(w, "layers/d/vars/0", t, 0);
			if (rc == CKPT_OK)
				rc = ckpt_writer_commit(w);
			ckpt_writer_free(w);
		}
		if (k == 0) {
			cr_assert_eq(rc, CKPT_OK);
			calls = ckpt_vfs_faulty_calls(faulty);
			cr_assert_gt(calls, 0);
		}
		cr_assert_eq(ckpt_status_of(got = ckpt_vfs_memory_get(&n, mem, "d/k.weights.h5")), CKPT_OK);
		if (k == 0) {
			cr_assert_gt(n, 8);
			good = malloc(n);
			memcpy(good, got, n);
			good_n = n;
		} else {
			/*
			 * Every counted call is made again, so the fault fires. Failed: the
			 * old file, or (a failure after the rename, e.g. syncing the
			 * directory) the whole new one, and the failure's own error.
			 * Absorbed (rc OK): the whole new file. HDF5 stamps object times,
			 * so a new file written in another second differs in bytes:
			 * compare contents.
			 */
			cr_assert(ckpt_vfs_faulty_fired(faulty), "fail_at %ld of %ld never happened", k, calls);
			int old_file = n == 8 && memcmp(got, "previous", 8) == 0;
			int new_file = n == good_n && new_file_holds(mem, "d/k.weights.h5", t);
			if (rc < 0) {
				cr_assert_eq(ckpt_error_last()->code, rc, "fail_at %ld: %s recorded no error of its own", k,
					ckpt_status_name(rc));
				cr_assert(ckpt_error_last()->message[0]);
				cr_assert(old_file || new_file, "fail_at %ld: the file is neither the old nor the new one", k);
				failed++;
			} else {
				cr_assert(new_file, "fail_at %ld: success reported but the file is not the new one", k);
			}
		}
		ckpt_vfs_free(faulty);
		ckpt_vfs_free(mem);
	}
	cr_assert_gt(failed, 0, "no injected failure reached the caller");
	free(good);
	ckpt_tensor_free(t);
}

Test(keras_h5, a_mapped_file_that_shrinks_fails_cleanly)
{
	/* Data is read with pread: a file cut after it was opened is an error, not a crash. */
	char *dir = ts_tmpdir(), *out = ts_join(dir, "cut.weights.h5");
	ckpt_writer *w;
	ckpt_reader *r;
	ckpt_tensor *t;
	ckpt_shape s;
	int64_t d = 1 << 18;
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	const ckpt_var_info *v;
	void *buf;
	size_t i, last = 0;
	o.no_fsync = 1;
	cr_assert_eq(ckpt_shape_make(&s, 1, &d), CKPT_OK);
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &s), CKPT_OK);
	cr_assert_eq(ckpt_writer_open(&w, out, "keras-weights", &o), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "layers/a/vars/0", t, 0), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "layers/b/vars/0", t, 0), CKPT_OK);
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	r = kt_open(out);
	/* the dataset whose data ends last */
	for (i = 1; i < ckpt_reader_num_entries(r); i++)
		if (ckpt_reader_var(r, i)->offset > ckpt_reader_var(r, last)->offset)
			last = i;
	v = ckpt_reader_var(r, last);
	cr_assert_gt(v->offset, 0);
	cr_assert_eq(truncate(out, v->offset + 16), 0);
	buf = malloc((size_t)v->nbytes);
	kt_assert_error(ckpt_reader_read_into(r, last, buf, (size_t)v->nbytes), CKPT_EFORMAT,
		"truncated", "file cut after open");
	free(buf);
	ckpt_reader_free(r);
	ckpt_tensor_free(t);
	ts_rmtree(dir);
	free(out);
	free(dir);
}

/* flat_test: the bodies of the helpers declared in flat_test.h. */
#include "flat_test.h"
#include "ckpt/sys/vfs_memory.h"

char *ft_oracle(const char *script, const char *args)
{
	char cmd[8192];
	ts_run_result rr;
	char *out;
	snprintf(cmd, sizeof(cmd), "%s %s/tests/oracles/%s %s", ts_oracle_python(), CKPT_SOURCE_DIR, script, args);
	cr_assert_eq(ts_run_sh(&rr, cmd), 0, "cannot run %s", cmd);
	cr_assert_eq(rr.status, 0, "%s failed (%d):\n%s\n%s", script, rr.status, rr.out, rr.err);
	out = rr.out;
	rr.out = NULL;
	ts_run_free(&rr);
	return out;
}

char *ft_reference_files(json_t **manifest)
{
	char *dir = ts_tmpdir(), *m;
	json_error_t e;
	free(ft_oracle("flat_write.py", dir));
	m = ts_join(dir, "manifest.json");
	*manifest = json_load_file(m, 0, &e);
	cr_assert(*manifest, "manifest.json: %s", e.text);
	free(m);
	return dir;
}

void ft_fail_last(const char *what)
{
	char buf[2048];
	cr_assert_fail("%s: %s", what, ckpt_error_format(ckpt_error_last(), buf, sizeof(buf)));
}

void ft_rewrite_matches(const char *src, const char *dst, const char *format,
	const char *const *meta_keys, size_t nmeta, int reverse, const char *who)
{
	ckpt_reader *r;
	ckpt_writer *w;
	char *a, *b;
	size_t na, nb, n;
	cr_assert_eq(ckpt_reader_open(&r, src, NULL), CKPT_OK);
	cr_assert_eq(ckpt_writer_open(&w, dst, format, NULL), CKPT_OK);
	for (size_t k = 0; k < nmeta; k++)
		if (ckpt_reader_meta(r, meta_keys[k]))
			cr_assert_eq(ckpt_writer_set_meta(w, meta_keys[k], ckpt_reader_meta(r, meta_keys[k])), CKPT_OK);
	n = ckpt_reader_num_entries(r);
	for (size_t k = 0; k < n; k++) {
		size_t i = reverse ? n - 1 - k : k;
		ckpt_tensor *t;
		cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK);
		if (ckpt_writer_add(w, ckpt_reader_var(r, i)->name, t, 0) != CKPT_OK)
			ft_fail_last("add");
		ckpt_tensor_free(t);
	}
	if (ckpt_writer_commit(w) != CKPT_OK)
		ft_fail_last("commit");
	ckpt_writer_free(w);
	ckpt_reader_free(r);
	a = ts_read_file(src, &na);
	b = ts_read_file(dst, &nb);
	cr_assert(a && b);
	cr_assert_eq(na, nb, "%s: %zu bytes, ours %zu", src, na, nb);
	cr_assert(memcmp(a, b, na) == 0, "%s: our bytes differ from %s", src, who);
	free(a);
	free(b);
}

void ft_check_reader(ckpt_reader *r, json_t *tensors, const char *file)
{
	size_t i, k;
	json_t *t;
	cr_assert_eq(ckpt_reader_num_entries(r), json_array_size(tensors), "%s: %zu tensors, want %zu", file,
		     ckpt_reader_num_entries(r), json_array_size(tensors));
	json_array_foreach(tensors, i, t) {
		const char *name = json_string_value(json_object_get(t, "name"));
		json_t *shape = json_object_get(t, "shape");
		const ckpt_var_info *v;
		ckpt_tensor *x = NULL;
		size_t idx;
		if (ckpt_reader_find(&idx, r, name) != CKPT_OK)
			ft_fail_last(name);
		v = ckpt_reader_var(r, idx);
		cr_assert_str_eq(ckpt_dtype_name(v->dtype), json_string_value(json_object_get(t, "dtype")), "%s: %s", file,
			name);
		cr_assert_eq((size_t)v->shape.rank, json_array_size(shape), "%s: %s rank", file, name);
		for (k = 0; k < json_array_size(shape); k++)
			cr_assert_eq(v->shape.dims[k], json_integer_value(json_array_get(shape, k)), "%s: %s dim %zu", file,
				name, k);
		cr_assert_eq((json_int_t)v->nbytes, json_integer_value(json_object_get(t, "bytes")), "%s: %s bytes", file,
			name);
		if (ckpt_reader_read(&x, r, idx) != CKPT_OK)
			ft_fail_last(name);
		cr_assert_eq((json_int_t)ckpt_tensor_crc32(x), json_integer_value(json_object_get(t, "crc32")),
			"%s: %s crc32", file, name);
		ckpt_tensor_free(x);
		/* read_into lands the same bytes straight in the destination */
		if (v->nbytes) {
			void *buf = malloc(v->nbytes);
			ckpt_tensor *y = NULL;
			cr_assert_eq(ckpt_reader_read_into(r, idx, buf, v->nbytes), CKPT_OK);
			cr_assert_eq(ckpt_tensor_wrap(&y, v->dtype, &v->shape, buf, v->nbytes), CKPT_OK);
			cr_assert_eq((json_int_t)ckpt_tensor_crc32(y), json_integer_value(json_object_get(t, "crc32")));
			ckpt_tensor_free(y);
			free(buf);
		}
	}
}

int ft_open_mem(const void *buf, size_t n, const char *name, ckpt_reader **out, ckpt_vfs **vfs)
{
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	cr_assert_eq(ckpt_vfs_memory_new(vfs), CKPT_OK);
	cr_assert_eq(ckpt_vfs_memory_put(*vfs, name, buf, n), CKPT_OK);
	o.vfs = *vfs;
	*out = NULL;
	return ckpt_reader_open(out, name, &o);
}

void ft_expect_error(const void *buf, size_t n, int code, const char *var, int64_t offset,
	const char *msg, const char *what)
{
	ckpt_reader *r;
	ckpt_vfs *vfs;
	int rc = ft_open_mem(buf, n, "hostile.bin", &r, &vfs);
	const ckpt_error *e = ckpt_error_last();
	cr_assert_eq(rc, code, "%s: got %s (%s), want %s", what, ckpt_status_name(rc), e->message, ckpt_status_name(code));
	cr_assert(e->path && strstr(e->path, "hostile.bin"), "%s: error names no file", what);
	if (var)
		cr_assert(e->variable && strcmp(e->variable, var) == 0, "%s: variable %s, want %s", what,
			e->variable ? e->variable : "(none)", var);
	if (offset != -2)
		cr_assert_eq(e->offset, offset, "%s: offset %lld, want %lld (%s)", what, (long long)e->offset,
			(long long)offset, e->message);
	cr_assert(strstr(e->message, msg), "%s: message '%s' lacks '%s'", what, e->message, msg);
	ckpt_reader_free(r);
	ckpt_vfs_free(vfs);
}

size_t ft_sweep_step(size_t n)
{
	const char *s = getenv("CKPT_TEST_SWEEP_SCALE");
	double scale = s ? atof(s) : 1.0;
	size_t step;
	if (scale <= 0 || scale > 1)
		scale = 1;
	step = (size_t)(1.0 / scale);
	return step && n / step >= 64 ? step : 1;
}

int ft_open_any(const void *buf, size_t n)
{
	ckpt_reader *r;
	ckpt_vfs *vfs;
	int rc = ft_open_mem(buf, n, "m.bin", &r, &vfs);
	if (rc == CKPT_OK) {
		for (size_t i = 0; i < ckpt_reader_num_entries(r); i++) {
			ckpt_tensor *t = NULL;
			cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK, "an accepted file must read back: %s",
				     ckpt_error_last()->message);
			ckpt_tensor_free(t);
		}
	} else {
		const ckpt_error *e = ckpt_error_last();
		cr_assert(rc < 0 && e->code == rc && e->message && *e->message, "failure without a message");
		cr_assert(e->path, "failure without a path: %s", e->message);
	}
	ckpt_reader_free(r);
	ckpt_vfs_free(vfs);
	return rc;
}

size_t ft_mutate_header(size_t *tried, const unsigned char *f, size_t n, size_t hdr, const unsigned char *vals,
	size_t nvals)
{
	unsigned char *b = malloc(n);
	size_t step = ft_sweep_step(hdr * nvals), fails = 0;
	cr_assert(b);
	*tried = 0;
	for (size_t k = 0; k < hdr; k++)
		for (size_t v = 0; v < nvals; v++) {
			if ((k * nvals + v) % step)
				continue;
			memcpy(b, f, n);
			if (b[k] == vals[v])
				continue;
			b[k] = vals[v];
			(*tried)++;
			fails += ft_open_any(b, n) < 0;
		}
	free(b);
	return fails;
}

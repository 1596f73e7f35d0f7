/* oracle_common: the bodies of the helpers declared in oracle_common.h. */
#include "oracle_common.h"

ts_run_result oracle_run(const char *script, ...)
{
	char *argv[24];
	char path[4096];
	int n = 0;
	va_list ap;
	ts_run_result r;

	snprintf(path, sizeof(path), "%s%s", ORACLE_DIR, script);
	argv[n++] = (char *)ts_oracle_python();
	argv[n++] = path;
	va_start(ap, script);
	for (const char *a = va_arg(ap, const char *); a && n < 23; a = va_arg(ap, const char *))
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	cr_assert_eq(ts_run(&r, argv), 0, "could not start %s", argv[0]);
	return r;
}

void oracle_expect_ok(ts_run_result *r, const char *what)
{
	cr_assert_eq(r->status, 0, "%s failed (exit %d):\n%s\n%s", what, r->status, r->out, r->err);
}

json_t *oracle_load_json(const char *path)
{
	json_error_t e;
	json_t *j = json_load_file(path, 0, &e);

	cr_assert_not_null(j, "%s: not JSON (%s at line %d)", path, e.text, e.line);
	return j;
}

char *hex_of(const void *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = p;
	char *s = malloc(2 * n + 1);

	for (size_t i = 0; i < n; i++) {
		s[2 * i] = digits[b[i] >> 4];
		s[2 * i + 1] = digits[b[i] & 15];
	}
	s[2 * n] = '\0';
	return s;
}

void oracle_compare_entry(ckpt_reader *r, const char *ctx, const char *name, json_t *rec)
{
	size_t idx;
	const ckpt_var_info *vi;
	ckpt_tensor *t = NULL;
	json_t *shape = json_object_get(rec, "shape");

	cr_assert_eq(ckpt_reader_find(&idx, r, name), CKPT_OK, "%s: TF lists '%s', libckpt does not", ctx, name);
	vi = ckpt_reader_var(r, idx);
	cr_assert_str_eq(ckpt_dtype_name(vi->dtype), json_string_value(json_object_get(rec, "dtype")),
		"%s: '%s' dtype", ctx, name);
	cr_assert_eq((size_t)vi->shape.rank, json_array_size(shape), "%s: '%s' rank %d, TF %zu", ctx, name,
		vi->shape.rank, json_array_size(shape));
	for (int d = 0; d < vi->shape.rank; d++)
		cr_assert_eq(vi->shape.dims[d], json_integer_value(json_array_get(shape, (size_t)d)),
			"%s: '%s' dim %d", ctx, name, d);
	cr_assert_eq(ckpt_reader_read(&t, r, idx), CKPT_OK, "%s: read '%s': %s", ctx, name, ckpt_error_last()->message);
	if (vi->dtype == CKPT_DT_STRING) {
		json_t *elems = json_object_get(rec, "elems");
		const ckpt_bytes *e = t->data;
		cr_assert_eq(ckpt_tensor_num_elements(t), json_array_size(elems), "%s: '%s' element count", ctx, name);
		for (size_t k = 0; k < json_array_size(elems); k++) {
			char *h = hex_of(e[k].data, (size_t)e[k].len);
			cr_assert_str_eq(h, json_string_value(json_array_get(elems, k)), "%s: '%s' element %zu", ctx, name, k);
			free(h);
		}
	} else {
		char *h = hex_of(t->data, (size_t)t->nbytes);
		cr_assert_str_eq(h, json_string_value(json_object_get(rec, "hex")), "%s: '%s' bytes", ctx, name);
		free(h);
	}
	ckpt_tensor_free(t);
}

void oracle_compare_entries(ckpt_reader *r, const char *ctx, json_t *entries)
{
	const char *name;
	json_t *rec;
	size_t whole = 0;

	json_object_foreach(entries, name, rec)
		oracle_compare_entry(r, ctx, name, rec);
	for (size_t i = 0; i < ckpt_reader_num_entries(r); i++)
		whole += !ckpt_reader_var(r, i)->slice_part;
	cr_assert_eq(whole, json_object_size(entries), "%s: libckpt lists %zu entries (slices aside), TF %zu", ctx,
		whole, json_object_size(entries));
}

void json_put_tensor(json_t *entries, const char *name, const ckpt_tensor *t)
{
	json_t *rec = json_object(), *shape = json_array();

	for (int d = 0; d < t->shape.rank; d++)
		json_array_append_new(shape, json_integer(t->shape.dims[d]));
	json_object_set_new(rec, "dtype", json_string(ckpt_dtype_name(t->dtype)));
	json_object_set_new(rec, "shape", shape);
	if (t->dtype == CKPT_DT_STRING) {
		json_t *elems = json_array();
		const ckpt_bytes *e = t->data;
		for (uint64_t k = 0; k < ckpt_tensor_num_elements(t); k++) {
			char *h = hex_of(e[k].data, (size_t)e[k].len);
			json_array_append_new(elems, json_string(h));
			free(h);
		}
		json_object_set_new(rec, "elems", elems);
	} else {
		char *h = hex_of(t->data, (size_t)t->nbytes);
		json_object_set_new(rec, "hex", json_string(h));
		free(h);
	}
	json_object_set_new(entries, name, rec);
}

json_t *oracle_entries_of(const char *path)
{
	ckpt_reader *r;
	json_t *entries = json_object();

	cr_assert_eq(ckpt_reader_open(&r, path, NULL), CKPT_OK, "open %s: %s", path, ckpt_error_last()->message);
	for (size_t i = 0; i < ckpt_reader_num_entries(r); i++) {
		ckpt_tensor *t;
		cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK, "read %s", ckpt_reader_var(r, i)->name);
		json_put_tensor(entries, ckpt_reader_var(r, i)->name, t);
		ckpt_tensor_free(t);
	}
	ckpt_reader_free(r);
	return entries;
}

void oracle_dump(const char *path, json_t *j)
{
	cr_assert_eq(json_dump_file(j, path, JSON_INDENT(1) | JSON_SORT_KEYS), 0, "cannot write %s", path);
}

void oracle_cli_ok(const char *arg, ...)
{
	char *argv[24];
	int n = 0;
	va_list ap;
	ts_run_result r;

	argv[n++] = (char *)TS_CLI;
	va_start(ap, arg);
	for (; arg && n < 23; arg = va_arg(ap, const char *))
		argv[n++] = (char *)arg;
	va_end(ap);
	argv[n] = NULL;
	cr_assert_eq(ts_run(&r, argv), 0, "could not start %s", TS_CLI);
	cr_assert_eq(r.status, 0, "ckpt %s failed (exit %d):\n%s%s", argv[1], r.status, r.out, r.err);
	ts_run_free(&r);
}

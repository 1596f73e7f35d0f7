/* The incremental-save tests' trainer model (incr_common.h). */
#include "incr_common.h"
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "test_support.h"

void ic_build(ic_state *s, const ckpt_checkpoint_options *o, int base_rows, int base_w, float init_step,
	int head_n, int emb_rows, int emb_w, int wrap_emb)
{
	memset(s, 0, sizeof(*s));
	s->expect = ts_tmpdir();
	s->rng = 33;
	s->head_n = head_n;
	s->emb_rows = emb_rows;
	s->emb_w = emb_w;
	cr_assert_eq(ckpt_checkpoint_new(&s->ck, o), CKPT_OK);
	ckpt_object *root = ckpt_checkpoint_root(s->ck);
	int64_t bd[2] = { base_rows, base_w }, hd[1] = { head_n }, ed[2] = { emb_rows, emb_w };
	ckpt_shape bs, hs, es;
	cr_assert_eq(ckpt_shape_make(&bs, 2, bd), CKPT_OK);
	cr_assert_eq(ckpt_shape_make(&hs, 1, hd), CKPT_OK);
	cr_assert_eq(ckpt_shape_make(&es, 2, ed), CKPT_OK);
	float *init = malloc(sizeof(float) * (size_t)base_rows * base_w);
	for (size_t i = 0; i < (size_t)base_rows * base_w; i++)
		init[i] = (float)i * init_step;
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.initial_value = init;
	cr_assert_eq(ckpt_status_of(s->base = ckpt_object_add_variable(root, "base", "base", CKPT_DT_FLOAT, &bs, &vo)),
		CKPT_OK);
	free(init);
	cr_assert_eq(ckpt_status_of(s->head = ckpt_object_add_variable(root, "head", "head", CKPT_DT_FLOAT, &hs, NULL)),
		CKPT_OK);
	ckpt_variable_options eo = CKPT_VARIABLE_OPTIONS_INIT;
	void *bufs[1];
	if (wrap_emb) {
		s->wrapped = calloc((size_t)emb_rows * emb_w, sizeof(float));
		bufs[0] = s->wrapped;
		eo.replica_buffers = bufs;
	}
	cr_assert_eq(ckpt_status_of(s->emb = ckpt_object_add_variable(root, "emb", "emb", CKPT_DT_FLOAT, &es, &eo)),
		CKPT_OK);
}

void ic_done(ic_state *s, int rm_dir)
{
	ckpt_manager_free(s->m);
	ckpt_checkpoint_free(s->ck);
	free(s->wrapped);
	if (rm_dir)
		ts_rmtree(s->dir);
	ts_rmtree(s->expect);
	free(s->dir);
	free(s->expect);
}

uint64_t ic_next(ic_state *s)
{
	s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
	return s->rng >> 33;
}

void ic_step(ic_state *s, int k, int spread)
{
	float *h = malloc(sizeof(float) * (size_t)s->head_n);
	for (int i = 0; i < s->head_n; i++)
		h[i] = (float)(k * 1000 + i);
	cr_assert_eq(ckpt_variable_assign(s->head, h, sizeof(float) * (size_t)s->head_n), CKPT_OK);
	free(h);
	float *e = s->wrapped ? s->wrapped : ckpt_variable_local(s->emb);
	cr_assert_not_null(e);
	int nrows = s->emb_rows / 20, first = (int)(ic_next(s) % (uint64_t)(s->emb_rows - nrows));
	for (int r = 0; r < nrows; r++) {
		int row = spread ? (int)(ic_next(s) % (uint64_t)s->emb_rows) : first + r;
		for (int j = 0; j < s->emb_w; j++)
			e[(size_t)row * s->emb_w + j] = (float)(k + row * 0.001 + j);
	}
}

static void write_value(const char *dir, const char *name, ckpt_variable *v)
{
	char path[4096];
	size_t n = (size_t)ckpt_variable_nbytes(v);
	void *buf = malloc(n);
	cr_assert_eq(ckpt_variable_read(v, buf, n), CKPT_OK);
	snprintf(path, sizeof(path), "%s/%s.f32", dir, name);
	cr_assert_eq(ts_write_file(path, buf, n), 0);
	free(buf);
	const ckpt_shape *sh = ckpt_variable_shape(v);
	char dims[64] = "";
	for (int i = 0; i < sh->rank; i++)
		snprintf(dims + strlen(dims), sizeof(dims) - strlen(dims), "%lld ", (long long)sh->dims[i]);
	snprintf(path, sizeof(path), "%s/%s.shape", dir, name);
	cr_assert_eq(ts_write_file(path, dims, strlen(dims)), 0);
}

void ic_record(ic_state *s, const char *path)
{
	char *d = ts_join(s->expect, strrchr(path, '/') + 1);
	cr_assert_eq(mkdir(d, 0755), 0);
	write_value(d, "base", s->base);
	write_value(d, "head", s->head);
	write_value(d, "emb", s->emb);
	free(d);
}

void ic_check_ours(ic_state *s, const char *path)
{
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, path, NULL), CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
	cr_assert_eq(ckpt_reader_verify_all(r), CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
	const char *names[] = { "base", "head", "emb" };
	for (int k = 0; k < 3; k++) {
		char key[128], f[4096];
		snprintf(key, sizeof(key), "%s/.ATTRIBUTES/VARIABLE_VALUE", names[k]);
		size_t i;
		cr_assert_eq(ckpt_reader_find(&i, r, key), CKPT_OK, "%s: %s", path, key);
		snprintf(f, sizeof(f), "%s/%s/%s.f32", s->expect, strrchr(path, '/') + 1, names[k]);
		size_t n;
		char *want = ts_read_file(f, &n);
		cr_assert_not_null(want);
		void *got = malloc(n);
		cr_assert_eq(ckpt_reader_read_into(r, i, got, n), CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
		cr_assert(memcmp(got, want, n) == 0, "%s: %s differs from what was saved", path, names[k]);
		free(got);
		free(want);
	}
	ckpt_reader_free(r);
}

char *ic_data_file(const char *prefix, int k, int n)
{
	char *p = malloc(strlen(prefix) + 64);
	sprintf(p, "%s.data-%05d-of-%05d", prefix, k, n);
	return p;
}

/*
 * TensorBundle backend: every TF fixture read through the public API and
 * checked against its CONTENTS.txt, round trips for every dtype, byte-exact
 * rewrites of real index files, tests/scripts/bundle_check.py as an independent oracle,
 * corruption with error context, missing shards, PATH forms.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "formats/tf_bundle/tfb.h"
#include "test_support.h"
#include "ckpt/sys/vfs_faulty.h"
#include "ckpt/sys/vfs_memory.h"

/* The tests also call the backend's table directly (bid). */
const ckpt_format *const tfb_test_backend = &ckpt_format_tf_bundle;

static const char *const fixtures[] = {
	"serving__half_plus_two_tf2_cpu_snappy",
	"tensor2tensor__transformer_test_ckpt_2shards",
	"tensorflow__OptimizerSlotVariableModule_snappy",
	"tensorflow__VarsAndArithmeticObjectGraph",
	"tensorflow__half_plus_two_v1",
	"tensorflow__lso_ckpt_tf2.2",
	"tensorflow__old_string_tensors",
	"tensorflow__tftrt_mnist_ckpt_snappy",
	"tfjs__int64_multiply",
	"tfx__estimator_ckpts",
	"tfx__keras_adam_savedmodel",
};
#define NFIX (sizeof(fixtures) / sizeof(fixtures[0]))

static char *fixture_dir(const char *name)
{
	char rel[512];
	snprintf(rel, sizeof(rel), "tf/%s", name);
	return strdup(ts_fixture(rel));
}

static void fail_with_error(const char *what)
{
	char buf[2048];
	cr_assert_fail("%s: %s (%s)", what, ckpt_error_format(ckpt_error_last(), buf, sizeof(buf)),
		ckpt_status_name(ckpt_error_last()->code));
}

static ckpt_reader *open_ok(const char *path)
{
	ckpt_reader *r = NULL;
	if (ckpt_reader_open(&r, path, NULL) != CKPT_OK)
		fail_with_error(path);
	return r;
}

/* ---- CONTENTS.txt: one bundle per "################ <rel>.index" section ---- */

typedef struct want_entry {
	char name[1024];
	int dtype, rank, shard;
	int64_t dims[CKPT_MAX_RANK];
	long long offset, size;
	unsigned crc;
} want_entry;

static void parse_shape(const char *s, want_entry *e)
{
	e->rank = 0;
	s = strchr(s, '[') + 1;
	while (*s && *s != ']') {
		e->dims[e->rank++] = strtoll(s, (char **)&s, 10);
		if (*s == ',')
			s++;
	}
}

/* Check one bundle of the fixture against the entries listed for it. */
static void check_bundle(const char *dir, const char *rel_index, want_entry *w, size_t nw)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, rel_index);
	path[strlen(path) - strlen(".index")] = '\0';
	ckpt_reader *r = open_ok(path);
	cr_assert_str_eq(ckpt_reader_format(r), "tf-bundle");
	cr_assert_str_eq(ckpt_reader_path(r), path);
	cr_assert_eq(ckpt_reader_num_entries(r), nw, "%s: %zu entries, CONTENTS lists %zu", path,
		     ckpt_reader_num_entries(r), nw);
	for (size_t i = 0; i < nw; i++) {
		size_t k;
		cr_assert_eq(ckpt_reader_find(&k, r, w[i].name), CKPT_OK, "%s: missing %s", path, w[i].name);
		const ckpt_var_info *v = ckpt_reader_var(r, k);
		cr_assert_eq((int)v->dtype, w[i].dtype, "%s dtype", w[i].name);
		cr_assert_eq(v->shape.rank, w[i].rank, "%s rank", w[i].name);
		for (int d = 0; d < w[i].rank; d++)
			cr_assert_eq(v->shape.dims[d], w[i].dims[d], "%s dim %d", w[i].name, d);
		cr_assert_eq(v->shard, w[i].shard, "%s shard", w[i].name);
		cr_assert_eq(v->offset, w[i].offset, "%s offset", w[i].name);
		cr_assert_eq((long long)v->nbytes, w[i].size, "%s size", w[i].name);
		cr_assert(v->has_crc32c);
		cr_assert_eq(ckpt_crc32c_mask(v->crc32c), w[i].crc, "%s crc", w[i].name);
		ckpt_tensor *t = NULL;
		if (ckpt_reader_read(&t, r, k) != CKPT_OK)
			fail_with_error(w[i].name);
		cr_assert_eq(t->dtype, v->dtype);
		cr_assert(ckpt_shape_equal(&t->shape, &v->shape));
		if (v->dtype != CKPT_DT_STRING) {
			cr_assert_eq(t->nbytes, v->nbytes);
			void *buf = malloc(v->nbytes ? v->nbytes : 1);
			if (ckpt_reader_read_into(r, k, buf, v->nbytes) != CKPT_OK)
				fail_with_error(w[i].name);
			cr_assert_eq(memcmp(buf, t->data, v->nbytes), 0);
			free(buf);
		}
		ckpt_tensor_free(t);
	}
	int has_graph = 0;
	for (size_t i = 0; i < nw; i++)
		has_graph |= strcmp(w[i].name, CKPT_OBJECT_GRAPH_KEY) == 0;
	cr_assert_eq(ckpt_reader_object_graph(r) != NULL, has_graph, "%s graph", path);
	ckpt_reader_free(r);
}

static size_t check_fixture(const char *name)
{
	char *dir = fixture_dir(name);
	char *cpath = ts_join(dir, "CONTENTS.txt");
	char *text = ts_read_file(cpath, NULL);
	cr_assert_not_null(text, "%s", cpath);
	want_entry *w = calloc(4096, sizeof(*w));
	size_t nw = 0, bundles = 0;
	char rel[1024] = "";
	char prev[1024] = "";
	for (char *line = strtok(text, "\n"); ; line = strtok(NULL, "\n")) {
		int end = line == NULL;
		if (end || strncmp(line, "################ ", 17) == 0) {
			if (rel[0]) {
				check_bundle(dir, rel, w, nw);
				bundles++;
			}
			nw = 0;
			rel[0] = '\0';
			if (end)
				break;
			size_t l = strlen(line + 17);
			if (l > 6 && strcmp(line + 17 + l - 6, ".index") == 0)
				snprintf(rel, sizeof(rel), "%s", line + 17);
			continue;
		}
		if (rel[0] && strncmp(line, "    dtype=", 10) == 0) {
			want_entry *e = &w[nw++];
			snprintf(e->name, sizeof(e->name), "%s", prev);
			e->dtype = atoi(strchr(line, '(') + 1);
			parse_shape(strstr(line, "shape="), e);
			e->shard = atoi(strstr(line, "shard=") + 6);
			e->offset = atoll(strstr(line, "offset=") + 7);
			e->size = atoll(strstr(line, "size=") + 5);
			e->crc = (unsigned)strtoul(strstr(line, "crc32c(masked)=") + 15, NULL, 16);
		}
		snprintf(prev, sizeof(prev), "%s", line);
	}
	free(w);
	free(text);
	free(cpath);
	free(dir);
	return bundles;
}

Test(tf_bundle, every_fixture_matches_contents)
{
	size_t total = 0;
	for (size_t i = 0; i < NFIX; i++) {
		size_t n = check_fixture(fixtures[i]);
		cr_assert_geq(n, 1, "%s: no bundle in CONTENTS.txt", fixtures[i]);
		total += n;
	}
	cr_assert_eq(total, 13); /* tfx__estimator_ckpts holds three */
}

static void read_floats(ckpt_reader *r, const char *name, const float *want, size_t n)
{
	size_t k;
	cr_assert_eq(ckpt_reader_find(&k, r, name), CKPT_OK, "%s", name);
	ckpt_tensor *t;
	if (ckpt_reader_read(&t, r, k))
		fail_with_error(name);
	cr_assert_eq(t->nbytes, n * 4);
	for (size_t i = 0; i < n; i++)
		cr_assert_float_eq(((float *)t->data)[i], want[i], 1e-6, "%s[%zu]", name, i);
	ckpt_tensor_free(t);
}

Test(tf_bundle, known_values)
{
	ckpt_reader *r = open_ok(ts_fixture("tf/tensorflow__half_plus_two_v1/00000123"));
	float a = 0.5f, b = 2.0f, c = 3.0f;
	read_floats(r, "a", &a, 1);
	read_floats(r, "b", &b, 1);
	read_floats(r, "c", &c, 1);
	cr_assert_null(ckpt_reader_object_graph(r));
	ckpt_reader_free(r);

	r = open_ok(ts_fixture("tf/tensorflow__lso_ckpt_tf2.2"));
	const float kernel[] = { 9.22968483f, 10.9011154f, 10.3707628f, 9.75736237f };
	const float mom[] = { 10.049943f, 9.91769123f, 10.049943f, 9.91769123f };
	read_floats(r, "layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE", kernel, 4);
	read_floats(r, "layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/base_optimizer/momentum/.ATTRIBUTES/VARIABLE_VALUE", mom, 4);
	size_t k;
	cr_assert_eq(ckpt_reader_find(&k, r, "optimizer/base_optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	int64_t iter = 0;
	cr_assert_eq(ckpt_reader_read_into(r, k, &iter, 8), CKPT_OK);
	cr_assert_eq(iter, 1);
	const ckpt_var_info *v = ckpt_reader_var(r, k);
	cr_assert_eq(v->role, CKPT_ROLE_OPTIMIZER);
	cr_assert_eq(ckpt_reader_num_shards(r), 2);
	int ex = 0;
	const char *sp = ckpt_reader_shard_path(r, 1, &ex);
	cr_assert(ex);
	cr_assert(strstr(sp, "ckpt.data-00001-of-00002") != NULL);
	const ckpt_object_graph *g = ckpt_reader_object_graph(r);
	cr_assert_not_null(g);
	cr_assert_eq(g->nnodes, 15);
	ckpt_reader_free(r);

	r = open_ok(ts_fixture("tf/tensorflow__old_string_tensors/foo"));
	cr_assert_eq(ckpt_reader_find(&k, r, "strs"), CKPT_OK);
	ckpt_tensor *t;
	cr_assert_eq(ckpt_reader_read(&t, r, k), CKPT_OK);
	cr_assert_eq(ckpt_tensor_num_elements(t), 4);
	const ckpt_bytes *s = t->data;
	cr_assert_eq(s[0].len, 5);
	cr_assert_eq(memcmp(s[0].data, "hello", 5), 0);
	cr_assert_eq(s[1].len, 0);
	cr_assert_eq(s[2].len, 3);
	cr_assert_eq(memcmp(s[2].data, "x01", 3), 0);
	cr_assert_eq(s[3].len, 1024);
	for (int i = 0; i < 1024; i++)
		cr_assert_eq(s[3].data[i], 'c');
	ckpt_tensor_free(t);
	cr_assert_eq(ckpt_reader_find(&k, r, "string_tensor"), CKPT_OK);
	cr_assert_eq(ckpt_reader_read(&t, r, k), CKPT_OK);
	cr_assert_eq(((const ckpt_bytes *)t->data)[0].len, 0);
	ckpt_tensor_free(t);
	char dummy[8];
	cr_assert_eq(ckpt_reader_read_into(r, k, dummy, 5), CKPT_EINVAL);
	ckpt_reader_free(r);
}

/* ---- writing ---- */

static int run_bundle_check(const char *prefix)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "%s %s/tests/scripts/bundle_check.py --max-values 2 '%s'", TS_PYTHON, CKPT_SOURCE_DIR, prefix);
	ts_run_result res;
	cr_assert_eq(ts_run_sh(&res, cmd), 0);
	int ok = res.status == 0 && strstr(res.out, "CHECKS: ALL OK") != NULL &&
		strstr(res.out, "WRITER ROUND TRIP: index file rebuilt byte-for-byte") != NULL;
	if (!ok)
		cr_log_error("bundle_check.py %s: status %d\n%s\n%s", prefix, res.status, res.out, res.err);
	ts_run_free(&res);
	return ok;
}

static ckpt_tensor *make_tensor(ckpt_dtype dt, int rank, const int64_t *dims, unsigned seed)
{
	ckpt_shape s;
	cr_assert_eq(ckpt_shape_make(&s, rank, dims), CKPT_OK);
	ckpt_tensor *t;
	cr_assert_eq(ckpt_tensor_new(&t, dt, &s), CKPT_OK);
	if (dt == CKPT_DT_STRING) {
		uint64_t n = ckpt_tensor_num_elements(t);
		ckpt_bytes *e = calloc(n ? n : 1, sizeof(*e));
		char *pool = malloc(n * 40 + 1);
		for (uint64_t i = 0; i < n; i++) {
			e[i].data = pool + i * 40;
			e[i].len = (i * 7 + seed) % 40;
			for (uint64_t k = 0; k < e[i].len; k++)
				e[i].data[k] = (char)(i + k + seed);
		}
		ckpt_tensor_free(t);
		cr_assert_eq(ckpt_tensor_new_strings(&t, &s, e), CKPT_OK);
		free(e);
		free(pool);
	} else {
		unsigned char *p = t->data;
		for (uint64_t i = 0; i < t->nbytes; i++)
			p[i] = (unsigned char)(i * 31 + seed);
		if (dt == CKPT_DT_BOOL)
			for (uint64_t i = 0; i < t->nbytes; i++)
				p[i] &= 1;
	}
	return t;
}

static const ckpt_dtype all_dtypes[] = {
	CKPT_DT_FLOAT, CKPT_DT_DOUBLE, CKPT_DT_INT32, CKPT_DT_UINT8, CKPT_DT_INT16, CKPT_DT_INT8,
	CKPT_DT_STRING, CKPT_DT_COMPLEX64, CKPT_DT_INT64, CKPT_DT_BOOL, CKPT_DT_BFLOAT16,
	CKPT_DT_UINT16, CKPT_DT_COMPLEX128, CKPT_DT_HALF, CKPT_DT_UINT32, CKPT_DT_UINT64,
};
#define NDT (sizeof(all_dtypes) / sizeof(all_dtypes[0]))

static void roundtrip(int nshards)
{
	char *dir = ts_tmpdir();
	char *prefix = ts_join(dir, "sub/ckpt-1");
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.num_shards = nshards;
	o.no_fsync = 1;
	ckpt_writer *w;
	if (ckpt_writer_open(&w, prefix, NULL, &o))
		fail_with_error("writer_open");
	enum { NSHAPES = 4 };
	const int ranks[NSHAPES] = { 0, 1, 2, 3 };
	const int64_t dims[NSHAPES][3] = { { 0 }, { 0 }, { 3, 5 }, { 2, 1, 4 } };
	ckpt_tensor *ts[NDT][NSHAPES];
	char names[NDT][NSHAPES][64];
	for (size_t d = 0; d < NDT; d++)
		for (int s = 0; s < NSHAPES; s++) {
			ts[d][s] = make_tensor(all_dtypes[d], ranks[s], dims[s], (unsigned)(d * 13 + s));
			snprintf(names[d][s], 64, "v/%s/r%d", ckpt_dtype_name(all_dtypes[d]), s);
			if (ckpt_writer_add(w, names[d][s], ts[d][s], (int)((d + s) % nshards)))
				fail_with_error(names[d][s]);
		}
	if (ckpt_writer_commit(w))
		fail_with_error("commit");
	ckpt_writer_free(w);

	/* no temporaries left behind */
	char *sub = ts_join(dir, "sub");
	ckpt_vfs *vfs = ckpt_vfs_default();
	char **ls;
	size_t nls;
	cr_assert_eq(ckpt_vfs_list(&ls, &nls, vfs, sub), CKPT_OK);
	cr_assert_eq(nls, (size_t)nshards + 1);
	for (size_t i = 0; i < nls; i++)
		cr_assert_null(strstr(ls[i], "tempstate"), "%s", ls[i]);
	ckpt_vfs_free_list(ls, nls);

	ckpt_reader *r = open_ok(prefix);
	cr_assert_eq(ckpt_reader_num_shards(r), nshards);
	cr_assert_eq(ckpt_reader_num_entries(r), NDT * NSHAPES);
	for (size_t d = 0; d < NDT; d++)
		for (int s = 0; s < NSHAPES; s++) {
			size_t k;
			cr_assert_eq(ckpt_reader_find(&k, r, names[d][s]), CKPT_OK);
			const ckpt_var_info *v = ckpt_reader_var(r, k);
			cr_assert_eq(v->shard, (int)((d + s) % nshards));
			ckpt_tensor *t;
			if (ckpt_reader_read(&t, r, k))
				fail_with_error(names[d][s]);
			cr_assert(ckpt_tensor_equal(t, ts[d][s]), "%s differs", names[d][s]);
			ckpt_tensor_free(t);
			ckpt_tensor_free(ts[d][s]);
		}
	ckpt_reader_free(r);
	cr_assert(run_bundle_check(prefix));
	free(sub);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

Test(tf_bundle, roundtrip_every_dtype_one_shard) { roundtrip(1); }
Test(tf_bundle, roundtrip_every_dtype_three_shards) { roundtrip(3); }

Test(tf_bundle, object_graph_written_last_in_shard_0)
{
	ckpt_reader *src = open_ok(ts_fixture("tf/tensorflow__lso_ckpt_tf2.2"));
	const ckpt_object_graph *g = ckpt_reader_object_graph(src);
	char *dir = ts_tmpdir();
	char *prefix = ts_join(dir, "ckpt");
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_writer *w;
	cr_assert_eq(ckpt_writer_open(&w, prefix, NULL, &o), CKPT_OK);
	cr_assert_eq(ckpt_writer_set_object_graph(w, g), CKPT_OK);
	for (size_t i = 0; i < ckpt_reader_num_entries(src); i++) {
		const ckpt_var_info *v = ckpt_reader_var(src, i);
		if (strcmp(v->name, CKPT_OBJECT_GRAPH_KEY) == 0)
			continue;
		ckpt_tensor *t;
		cr_assert_eq(ckpt_reader_read(&t, src, i), CKPT_OK);
		cr_assert_eq(ckpt_writer_add(w, v->name, t, 0), CKPT_OK);
		ckpt_tensor_free(t);
	}
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	ckpt_reader *r = open_ok(prefix);
	size_t k, last = 0;
	cr_assert_eq(ckpt_reader_find(&k, r, CKPT_OBJECT_GRAPH_KEY), CKPT_OK);
	for (size_t i = 0; i < ckpt_reader_num_entries(r); i++)
		if (ckpt_reader_var(r, i)->offset > ckpt_reader_var(r, last)->offset)
			last = i;
	cr_assert_eq(k, last);
	const ckpt_object_graph *g2 = ckpt_reader_object_graph(r);
	cr_assert_not_null(g2);
	void *b1, *b2;
	size_t n1, n2;
	cr_assert_eq(ckpt_object_graph_serialize(&b1, &n1, g), CKPT_OK);
	cr_assert_eq(ckpt_object_graph_serialize(&b2, &n2, g2), CKPT_OK);
	cr_assert_eq(n1, n2);
	cr_assert_eq(memcmp(b1, b2, n1), 0);
	free(b1);
	free(b2);
	ckpt_reader_free(r);
	ckpt_reader_free(src);
	cr_assert(run_bundle_check(prefix));
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

typedef struct pos { int shard; int64_t off; size_t i; } pos;
static int cmp_pos(const void *a, const void *b)
{
	const pos *x = a, *y = b;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Rewrite every entry of a real uncompressed bundle and compare the files byte for byte. */
static void rewrite_identical(const char *fixture_prefix)
{
	ckpt_reader *src = open_ok(fixture_prefix);
	size_t n = ckpt_reader_num_entries(src);
	pos *p = calloc(n, sizeof(*p));
	for (size_t i = 0; i < n; i++) {
		p[i].shard = ckpt_reader_var(src, i)->shard;
		p[i].off = ckpt_reader_var(src, i)->offset;
		p[i].i = i;
	}
	qsort(p, n, sizeof(*p), cmp_pos);
	char *dir = ts_tmpdir();
	char *prefix = ts_join(dir, "copy");
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.num_shards = ckpt_reader_num_shards(src);
	o.no_fsync = 1;
	ckpt_writer *w;
	cr_assert_eq(ckpt_writer_open(&w, prefix, NULL, &o), CKPT_OK);
	for (size_t j = 0; j < n; j++) {
		ckpt_tensor *t;
		const ckpt_var_info *v = ckpt_reader_var(src, p[j].i);
		cr_assert_eq(ckpt_reader_read(&t, src, p[j].i), CKPT_OK);
		cr_assert_eq(ckpt_writer_add(w, v->name, t, v->shard), CKPT_OK);
		ckpt_tensor_free(t);
	}
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	char a[4096], b[4096];
	snprintf(a, sizeof(a), "%s.index", fixture_prefix);
	snprintf(b, sizeof(b), "%s.index", prefix);
	size_t na, nb;
	char *fa = ts_read_file(a, &na), *fb = ts_read_file(b, &nb);
	cr_assert_eq(na, nb, "%s: %zu vs %zu bytes", a, na, nb);
	cr_assert_eq(memcmp(fa, fb, na), 0, "%s: index bytes differ", a);
	free(fa);
	free(fb);
	for (int s = 0; s < ckpt_reader_num_shards(src); s++) {
		const char *sa = ckpt_reader_shard_path(src, s, NULL);
		snprintf(b, sizeof(b), "%s.data-%05d-of-%05d", prefix, s, ckpt_reader_num_shards(src));
		fa = ts_read_file(sa, &na);
		fb = ts_read_file(b, &nb);
		cr_assert_eq(na, nb);
		cr_assert_eq(memcmp(fa, fb, na), 0, "%s: data bytes differ", sa);
		free(fa);
		free(fb);
	}
	ckpt_reader_free(src);
	free(p);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

Test(tf_bundle, rewrite_is_byte_identical)
{
	rewrite_identical(ts_fixture("tf/tensorflow__half_plus_two_v1/00000123/variables/variables"));
	rewrite_identical(ts_fixture("tf/tensorflow__lso_ckpt_tf2.2/ckpt"));
	rewrite_identical(ts_fixture("tf/tensorflow__old_string_tensors/foo"));
	rewrite_identical(ts_fixture("tf/tensor2tensor__transformer_test_ckpt_2shards/model.ckpt-1"));
	rewrite_identical(ts_fixture("tf/tfx__estimator_ckpts/model.ckpt-999"));
	rewrite_identical(ts_fixture("tf/tfx__keras_adam_savedmodel/variables/variables"));
	rewrite_identical(ts_fixture("tf/tfjs__int64_multiply/variables/variables"));
	rewrite_identical(ts_fixture("tf/tensorflow__VarsAndArithmeticObjectGraph/variables/variables"));
}

Test(tf_bundle, multi_block_index_passes_bundle_check)
{
	char *dir = ts_tmpdir();
	char *prefix = ts_join(dir, "big");
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_writer *w;
	cr_assert_eq(ckpt_writer_open(&w, prefix, NULL, &o), CKPT_OK);
	int64_t one = 1;
	ckpt_tensor *t = make_tensor(CKPT_DT_FLOAT, 1, &one, 1);
	char name[512];
	for (int i = 0; i < 4000; i++) {
		/* long, distinct names so that the index needs several 256 KiB blocks */
		snprintf(name, sizeof(name), "model/layer_%05d/%0200d/kernel/.ATTRIBUTES/VARIABLE_VALUE", i * 7 % 4000, i);
		cr_assert_eq(ckpt_writer_add(w, name, t, 0), CKPT_OK);
	}
	ckpt_tensor_free(t);
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	char *ix = ts_join(dir, "big.index");
	struct stat st;
	cr_assert_eq(stat(ix, &st), 0);
	cr_assert_gt(st.st_size, 3 * 262144);
	ckpt_reader *r = open_ok(prefix);
	cr_assert_eq(ckpt_reader_num_entries(r), 4000);
	ckpt_reader_free(r);
	cr_assert(run_bundle_check(prefix));
	free(ix);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

/* How many times `needle` occurs in `s`. */
static int count_of(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* The checker that judges what we write agrees with TensorFlow's own files, and it can fail. */
Test(tf_bundle, bundle_check_passes_every_tf_written_fixture_and_fails_a_flipped_byte, .timeout = 120)
{
	char cmd[4096];
	ts_run_result res;
	snprintf(cmd, sizeof(cmd), "set -- $(find '%s/tf' -name '*.index' | sort); echo \"bundles $#\"; %s %s/tests/scripts/bundle_check.py --max-values 0 \"$@\"",
		CKPT_FIXTURES_DIR, TS_PYTHON, CKPT_SOURCE_DIR);
	cr_assert_eq(ts_run_sh(&res, cmd), 0);
	int bundles = 0;
	cr_assert_eq(sscanf(res.out, "bundles %d", &bundles), 1, "%s", res.out);
	cr_assert_geq(bundles, 13, "%s", res.out);
	ts_assert_exit(&res, 0, "%s\n%s", res.out, res.err);
	cr_assert_eq(count_of(res.out, "CHECKS: ALL OK"), bundles, "%s", res.out);
	cr_assert_eq(count_of(res.out, "WRITER ROUND TRIP: index file rebuilt byte-for-byte"), bundles - 3,
		"every uncompressed index rebuilt (3 fixtures use Snappy blocks):\n%s", res.out);
	ts_run_free(&res);

	/* one byte of a tensor, then one byte of the index block: each is reported, and the exit status is 1 */
	static const struct { const char *file; long off; const char *problem; } flips[] = {
		{ "ckpt.data-00001-of-00002", 0, "tensor checksum mismatch" },
		{ "ckpt.index", 20, "block checksum mismatch" },
	};
	for (size_t i = 0; i < sizeof(flips) / sizeof(flips[0]); i++) {
		char *dir = ts_tmpdir();
		char *copy = ts_join(dir, "lso");
		cr_assert_eq(ts_copy(ts_fixture("tf/tensorflow__lso_ckpt_tf2.2"), copy), 0);
		char *file = ts_join(copy, flips[i].file);
		cr_assert_eq(ts_flip_byte(file, flips[i].off, 0x01), 0);
		snprintf(cmd, sizeof(cmd), "%s %s/tests/scripts/bundle_check.py '%s/ckpt'", TS_PYTHON, CKPT_SOURCE_DIR, copy);
		cr_assert_eq(ts_run_sh(&res, cmd), 0);
		ts_assert_exit(&res, 1, "%s: %s", flips[i].file, res.out);
		cr_assert(strstr(res.out, "CHECKS: PROBLEMS") && strstr(res.out, flips[i].problem), "%s: %s", flips[i].file,
			res.out);
		ts_run_free(&res);
		free(file);
		free(copy);
		ts_rmtree(dir);
		free(dir);
	}
}

Test(tf_bundle, abandoned_writer_leaves_nothing)
{
	char *dir = ts_tmpdir();
	char *prefix = ts_join(dir, "ckpt");
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.num_shards = 2;
	ckpt_writer *w;
	cr_assert_eq(ckpt_writer_open(&w, prefix, NULL, &o), CKPT_OK);
	int64_t d = 4;
	ckpt_tensor *t = make_tensor(CKPT_DT_INT32, 1, &d, 3);
	cr_assert_eq(ckpt_writer_add(w, "x", t, 1), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "", t, 0), CKPT_EINVAL);
	ckpt_writer_free(w);
	char **ls;
	size_t n;
	cr_assert_eq(ckpt_vfs_list(&ls, &n, ckpt_vfs_default(), dir), CKPT_OK);
	cr_assert_eq(n, 0);
	ckpt_vfs_free_list(ls, n);

	/* a duplicate name fails the commit and publishes nothing */
	cr_assert_eq(ckpt_writer_open(&w, prefix, NULL, &o), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "x", t, 0), CKPT_OK);
	cr_assert_eq(ckpt_writer_add(w, "x", t, 1), CKPT_OK);
	cr_assert_eq(ckpt_writer_commit(w), CKPT_EINVAL);
	cr_assert_str_eq(ckpt_error_last()->variable, "x");
	ckpt_writer_free(w);
	cr_assert_eq(ckpt_vfs_list(&ls, &n, ckpt_vfs_default(), dir), CKPT_OK);
	cr_assert_eq(n, 0);
	ckpt_vfs_free_list(ls, n);
	ckpt_tensor_free(t);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

Test(tf_bundle, writes_through_memory_vfs)
{
	ckpt_vfs *vfs;
	cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
	ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
	o.vfs = vfs;
	ckpt_writer *w;
	cr_assert_eq(ckpt_writer_open(&w, "/m/ckpt", NULL, &o), CKPT_OK);
	int64_t d = 3;
	ckpt_tensor *t = make_tensor(CKPT_DT_FLOAT, 1, &d, 9);
	cr_assert_eq(ckpt_writer_add(w, "w", t, 0), CKPT_OK);
	cr_assert_eq(ckpt_writer_commit(w), CKPT_OK);
	ckpt_writer_free(w);
	ckpt_open_options ro = CKPT_OPEN_OPTIONS_INIT;
	ro.vfs = vfs;
	ckpt_reader *r;
	if (ckpt_reader_open(&r, "/m/ckpt", &ro))
		fail_with_error("memory open");
	ckpt_tensor *u;
	cr_assert_eq(ckpt_reader_read(&u, r, 0), CKPT_OK);
	cr_assert(ckpt_tensor_equal(t, u));
	ckpt_tensor_free(u);
	ckpt_reader_free(r);
	ckpt_tensor_free(t);
	ckpt_vfs_free(vfs);
}

/* ---- corruption: status, message and context ---- */

static char *copy_fixture(const char *rel, char **dir_out)
{
	char *dir = ts_tmpdir();
	char *dst = ts_join(dir, "fx");
	char srel[512];
	snprintf(srel, sizeof(srel), "tf/%s", rel);
	cr_assert_eq(ts_copy(ts_fixture(srel), dst), 0);
	chmod(dst, 0755);
	*dir_out = dir;
	return dst;
}

static void patch_file(const char *path, long off, const void *bytes, size_t n)
{
	chmod(path, 0644);
	FILE *f = fopen(path, "r+b");
	cr_assert_not_null(f, "%s", path);
	if (off < 0) {
		fseek(f, 0, SEEK_END);
		off += ftell(f);
	}
	fseek(f, off, SEEK_SET);
	fwrite(bytes, 1, n, f);
	fclose(f);
}

static void expect_error(int rc, int code, const char *path_part, const char *var, int64_t off, const char *msg_part)
{
	const ckpt_error *e = ckpt_error_last();
	char buf[2048];
	cr_assert_eq(rc, code, "rc %s, want %s: %s", ckpt_status_name(rc), ckpt_status_name(code),
		ckpt_error_format(e, buf, sizeof(buf)));
	cr_assert_eq(e->code, code);
	if (path_part)
		cr_assert(e->path && strstr(e->path, path_part), "path %s lacks %s", e->path ? e->path : "(null)", path_part);
	if (var)
		cr_assert(e->variable && strcmp(e->variable, var) == 0, "variable %s, want %s",
			e->variable ? e->variable : "(null)", var);
	if (off != -2)
		cr_assert_eq(e->offset, off, "offset %lld, want %lld", (long long)e->offset, (long long)off);
	if (msg_part)
		cr_assert(strstr(e->message, msg_part), "message '%s' lacks '%s'", e->message, msg_part);
}

Test(tf_bundle, corrupt_data_is_a_checksum_error)
{
	char *dir;
	char *fx = copy_fixture("tensorflow__lso_ckpt_tf2.2", &dir);
	char *data = ts_join(fx, "ckpt.data-00001-of-00002");
	patch_file(data, 17, "\x55", 1); /* inside bias (offset 16) */
	char *prefix = ts_join(fx, "ckpt");
	ckpt_reader *r = open_ok(prefix);
	size_t k;
	const char *bias = "layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE";
	cr_assert_eq(ckpt_reader_find(&k, r, bias), CKPT_OK);
	ckpt_tensor *t = NULL;
	expect_error(ckpt_reader_read(&t, r, k), CKPT_ECHECKSUM, "ckpt.data-00001-of-00002", bias, 16,
		     "crc32c mismatch");
	float two[2];
	expect_error(ckpt_reader_read_into(r, k, two, 8), CKPT_ECHECKSUM, "ckpt.data-00001-of-00002", bias, 16, "want 0x");
	ckpt_reader_free(r);
	/* no_verify reads it anyway */
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	o.no_verify = 1;
	cr_assert_eq(ckpt_reader_open(&r, prefix, &o), CKPT_OK);
	cr_assert_eq(ckpt_reader_read_into(r, k, two, 8), CKPT_OK);
	ckpt_reader_free(r);
	free(prefix);
	free(data);
	free(fx);
	ts_rmtree(dir);
	free(dir);
}

Test(tf_bundle, truncated_or_bad_index)
{
	char *dir;
	char *fx = copy_fixture("tensorflow__half_plus_two_v1", &dir);
	char *ix = ts_join(fx, "00000123/variables/variables.index");
	char *prefix = ts_join(fx, "00000123/variables/variables");
	size_t n;
	char *orig = ts_read_file(ix, &n);
	ckpt_reader *r = NULL;

	/* truncated: the footer magic is gone */
	cr_assert_eq(truncate(ix, (off_t)n - 10), 0);
	expect_error(ckpt_reader_open(&r, prefix, NULL), CKPT_EFORMAT, "variables.index", NULL, (int64_t)n - 18, "magic");
	cr_assert_eq(truncate(ix, 20), 0);
	expect_error(ckpt_reader_open(&r, prefix, NULL), CKPT_EFORMAT, "variables.index", NULL, 0, "too short");

	/* bad magic */
	cr_assert_eq(ts_write_file(ix, orig, n), 0);
	patch_file(ix, -1, "\x00", 1);
	expect_error(ckpt_reader_open(&r, prefix, NULL), CKPT_EFORMAT, "variables.index", NULL, (int64_t)n - 8, "bad table magic");

	/* a flipped byte in the data block: block trailer checksum */
	cr_assert_eq(ts_write_file(ix, orig, n), 0);
	patch_file(ix, 12, "\x7f", 1);
	expect_error(ckpt_reader_open(&r, prefix, NULL), CKPT_ECHECKSUM, "variables.index", NULL, 66, "data block crc32c mismatch");
	cr_assert_null(r);
	free(orig);
	free(ix);
	free(prefix);
	free(fx);
	ts_rmtree(dir);
	free(dir);
}

/* Write a one-entry bundle whose entry proto / data bytes we craft by hand. */
static char *craft_bundle(const char *dir, const unsigned char *entry, size_t elen, const void *data, size_t dlen)
{
	tfb_buf out = { 0 };
	static const unsigned char hdr[] = { 0x08, 0x01, 0x1a, 0x02, 0x08, 0x01 };
	tfb_kv kv[2] = {
		{ (const unsigned char *)"", 0, hdr, sizeof(hdr) },
		{ (const unsigned char *)"x", 1, entry, elen },
	};
	cr_assert_eq(tfb_table_build(&out, kv, 2, TFB_BLOCK_SIZE), CKPT_OK);
	char *prefix = ts_join(dir, "crafted");
	char *ix = ts_join(dir, "crafted.index");
	char *dp = ts_join(dir, "crafted.data-00000-of-00001");
	cr_assert_eq(ts_write_file(ix, out.p, out.len), 0);
	cr_assert_eq(ts_write_file(dp, data, dlen), 0);
	tfb_buf_free(&out);
	free(ix);
	free(dp);
	return prefix;
}

Test(tf_bundle, shard_id_out_of_range)
{
	char *dir = ts_tmpdir();
	/* dtype=1 shape{} shard_id=5 size=4 crc */
	static const unsigned char e[] = { 0x08, 0x01, 0x12, 0x00, 0x18, 0x05, 0x28, 0x04, 0x35, 0x06, 0x38, 0x27, 0x1f };
	char *prefix = craft_bundle(dir, e, sizeof(e), "\0\0\0?", 4);
	ckpt_reader *r = NULL;
	expect_error(ckpt_reader_open(&r, prefix, NULL), CKPT_EFORMAT, "crafted.index", "x", -2, "shard id 5 out of range");
	cr_assert_geq(ckpt_error_last()->offset, 0);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

Test(tf_bundle, size_disagrees_with_shape)
{
	char *dir = ts_tmpdir();
	/* float32 [3] but size 4 */
	static const unsigned char e[] = { 0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x03, 0x28, 0x04 };
	char *prefix = craft_bundle(dir, e, sizeof(e), "\0\0\0?", 4);
	ckpt_reader *r = NULL;
	expect_error(ckpt_reader_open(&r, prefix, NULL), CKPT_EFORMAT, "crafted.index", "x", -2, "needs 12 bytes");
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

Test(tf_bundle, bad_string_varint_and_overrun)
{
	char *dir = ts_tmpdir();
	/* string [1], size 12: the length varint never ends */
	static const unsigned char e[] = { 0x08, 0x07, 0x12, 0x04, 0x12, 0x02, 0x08, 0x01, 0x28, 0x0c, 0x35, 1, 2, 3, 4 };
	static const unsigned char d[12] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	char *prefix = craft_bundle(dir, e, sizeof(e), d, sizeof(d));
	ckpt_reader *r = open_ok(prefix);
	ckpt_tensor *t = NULL;
	expect_error(ckpt_reader_read(&t, r, 0), CKPT_EFORMAT, "crafted.data-00000-of-00001", "x", 0, "bad varint");
	ckpt_reader_free(r);
	free(prefix);

	/* offset + size past the end of the data file */
	static const unsigned char e2[] = { 0x08, 0x01, 0x12, 0x00, 0x20, 0x08, 0x28, 0x04 };
	prefix = craft_bundle(dir, e2, sizeof(e2), "abcd", 4);
	r = open_ok(prefix);
	expect_error(ckpt_reader_read(&t, r, 0), CKPT_EFORMAT, "crafted.data-00000-of-00001", "x", 8, "past the end");
	ckpt_reader_free(r);
	free(prefix);

	/* string length checksum wrong */
	static const unsigned char e3[] = { 0x08, 0x07, 0x12, 0x04, 0x12, 0x02, 0x08, 0x01, 0x28, 0x0a };
	prefix = craft_bundle(dir, e3, sizeof(e3), "\x05\x00\x00\x00\x00hello", 10);
	r = open_ok(prefix);
	expect_error(ckpt_reader_read(&t, r, 0), CKPT_ECHECKSUM, "crafted.data", "x", 1, "length checksum");
	ckpt_reader_free(r);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

Test(tf_bundle, missing_shard_lists_but_does_not_read)
{
	char *dir;
	char *fx = copy_fixture("tensorflow__lso_ckpt_tf2.2", &dir);
	char *data = ts_join(fx, "ckpt.data-00001-of-00002");
	cr_assert_eq(remove(data), 0);
	ckpt_reader *r = open_ok(fx);
	cr_assert_eq(ckpt_reader_num_entries(r), 11);
	cr_assert_not_null(ckpt_reader_object_graph(r)); /* shard 0 is still there */
	int ex = 1;
	cr_assert_str_eq(ckpt_reader_shard_path(r, 1, &ex), data);
	cr_assert_eq(ex, 0);
	size_t k;
	cr_assert_eq(ckpt_reader_find(&k, r, "layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE"), CKPT_OK);
	ckpt_tensor *t = NULL;
	expect_error(ckpt_reader_read(&t, r, k), CKPT_ENOTFOUND, "ckpt.data-00001-of-00002", NULL, -2,
		     "data file missing");
	ckpt_reader_free(r);
	free(data);
	free(fx);
	ts_rmtree(dir);
	free(dir);
}

/* ---- PATH forms ---- */

Test(tf_bundle, path_forms)
{
	const char *fx = ts_fixture("tf/tfx__estimator_ckpts");
	char want[4096];
	snprintf(want, sizeof(want), "%s/model.ckpt-1000", fx);
	ckpt_reader *r = open_ok(fx); /* directory with a `checkpoint` state file */
	cr_assert_str_eq(ckpt_reader_path(r), want);
	ckpt_reader_free(r);
	char p[4096];
	snprintf(p, sizeof(p), "%s/model.ckpt-999.index", fx); /* the .index file */
	r = open_ok(p);
	snprintf(want, sizeof(want), "%s/model.ckpt-999", fx);
	cr_assert_str_eq(ckpt_reader_path(r), want);
	ckpt_reader_free(r);
	r = open_ok(want); /* the prefix */
	cr_assert_eq(ckpt_reader_num_entries(r), 60);
	ckpt_reader_free(r);
	snprintf(p, sizeof(p), "%s/model.ckpt-999.data-00000-of-00001", fx); /* a data shard */
	char *pre = NULL;
	cr_assert_eq(tfb_resolve_path(ckpt_vfs_default(), p, &pre), CKPT_OK);
	cr_assert_str_eq(pre, want);
	ckpt__free(pre);

	fx = ts_fixture("tf/tfjs__int64_multiply"); /* SavedModel directory */
	r = open_ok(fx);
	snprintf(want, sizeof(want), "%s/variables/variables", fx);
	cr_assert_str_eq(ckpt_reader_path(r), want);
	ckpt_reader_free(r);
	snprintf(p, sizeof(p), "%s/variables/", fx); /* directory with exactly one .index */
	r = open_ok(p);
	cr_assert_str_eq(ckpt_reader_path(r), want);
	ckpt_reader_free(r);

	char *dir = ts_tmpdir();
	r = NULL;
	cr_assert_lt(ckpt_reader_open(&r, dir, NULL), 0);
	cr_assert_eq(tfb_resolve_path(ckpt_vfs_default(), dir, &(char *){ NULL }), CKPT_ENOTFOUND);
	cr_assert(strstr(ckpt_error_last()->message, "no checkpoint here"));
	char *a = ts_join(dir, "a.index"), *b = ts_join(dir, "b.index");
	char *src = ts_join(ts_fixture("tf/tensorflow__old_string_tensors"), "foo.index");
	cr_assert_eq(ts_copy(src, a), 0);
	cr_assert_eq(ts_copy(src, b), 0);
	cr_assert_eq(tfb_resolve_path(ckpt_vfs_default(), dir, &(char *){ NULL }), CKPT_EINVAL);
	cr_assert(strstr(ckpt_error_last()->message, "2 *.index files"));
	/* a state file with a relative path picks one */
	char *st = ts_join(dir, "checkpoint");
	const char *text = "model_checkpoint_path: \"b\"\nall_model_checkpoint_paths: \"a\"\n";
	cr_assert_eq(ts_write_file(st, text, strlen(text)), 0);
	cr_assert_eq(tfb_resolve_path(ckpt_vfs_default(), dir, &pre), CKPT_OK);
	char *wantb = ts_join(dir, "b");
	cr_assert_str_eq(pre, wantb);
	ckpt__free(pre);
	/* an absolute path from another machine falls back to the basename here */
	text = "model_checkpoint_path: \"/elsewhere/train/a\"\n";
	cr_assert_eq(ts_write_file(st, text, strlen(text)), 0);
	cr_assert_eq(tfb_resolve_path(ckpt_vfs_default(), dir, &pre), CKPT_OK);
	cr_assert(strcmp(pre + strlen(pre) - 2, "/a") == 0);
	ckpt__free(pre);
	free(wantb);
	free(st);
	free(src);
	free(a);
	free(b);
	ts_rmtree(dir);
	free(dir);
}

Test(tf_bundle, bid)
{
	const ckpt_format *f = &ckpt_format_tf_bundle;
	ckpt_vfs *vfs = ckpt_vfs_default();
	cr_assert_eq(f->bid(vfs, "/nonexistent/x", NULL, 0), -1);
	cr_assert_eq(f->bid(vfs, "x.h5", (const unsigned char *)"\x89HDF\r\n\x1a\n", 8), -1);
	cr_assert_eq(f->bid(vfs, "x.keras", (const unsigned char *)"PK\x03\x04", 4), -1);
	cr_assert_eq(f->bid(vfs, ts_fixture("tf/tensorflow__lso_ckpt_tf2.2"), NULL, 0), 100);
	cr_assert_eq(f->bid(vfs, ts_fixture("tf/tensorflow__lso_ckpt_tf2.2/ckpt"), NULL, 0), 100);
}

Test(tf_bundle, partitioned_entry_lists_slices)
{
	char *dir = ts_tmpdir();
	/* float32 [4,3], slices { extent {start 0 length 2} extent {} } { extent {start 2 length 2} extent {} } */
	static const unsigned char e[] = {
		0x08, 0x01, 0x12, 0x08, 0x12, 0x02, 0x08, 0x04, 0x12, 0x02, 0x08, 0x03,
		0x3a, 0x08, 0x0a, 0x04, 0x08, 0x00, 0x10, 0x02, 0x0a, 0x00,
		0x3a, 0x08, 0x0a, 0x04, 0x08, 0x02, 0x10, 0x02, 0x0a, 0x00,
	};
	char *prefix = craft_bundle(dir, e, sizeof(e), "", 0);
	ckpt_reader *r = open_ok(prefix);
	const ckpt_var_info *v = ckpt_reader_var(r, 0);
	cr_assert_eq(v->nslices, 2);
	cr_assert_eq(v->slices[1].rank, 2);
	cr_assert_eq(v->slices[1].extents[0].start, 2);
	cr_assert_eq(v->slices[1].extents[0].length, 2);
	cr_assert_eq(v->slices[1].extents[1].start, 0);
	cr_assert_eq(v->slices[1].extents[1].length, -1);
	cr_assert_eq(v->shard, -1);
	ckpt_tensor *t = NULL;
	/* the slices tile [4,3], but no slice entry holds their bytes */
	expect_error(ckpt_reader_read(&t, r, 0), CKPT_EFORMAT, NULL, "x", -2, "no slice entry");
	ckpt_reader_free(r);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

/* Fail every I/O call of a save in turn: nothing half-written is ever visible. */
Test(tf_bundle, crash_consistent_commit)
{
	ckpt_vfs *mem;
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	int64_t d = 1000;
	ckpt_tensor *t = make_tensor(CKPT_DT_FLOAT, 1, &d, 5);
	ckpt_tensor *s = make_tensor(CKPT_DT_STRING, 1, &d, 6);
	long total = 0;
	int successes = 0;
	for (long fail_at = 1; fail_at < 200; fail_at++) {
		ckpt_vfs *f;
		cr_assert_eq(ckpt_vfs_faulty_new(&f, mem, fail_at), CKPT_OK);
		ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
		o.vfs = f;
		o.num_shards = 2;
		ckpt_writer *w = NULL;
		int rc = ckpt_writer_open(&w, "/c/ckpt", NULL, &o);
		if (rc == CKPT_OK) rc = ckpt_writer_add(w, "a", t, 0);
		if (rc == CKPT_OK) rc = ckpt_writer_add(w, "b", s, 1);
		if (rc == CKPT_OK) rc = ckpt_writer_commit(w);
		ckpt_writer_free(w);
		int fired = ckpt_vfs_faulty_fired(f);
		total = ckpt_vfs_faulty_calls(f);
		ckpt_vfs_free(f);
		char **ls = NULL;
		size_t n = 0;
		ckpt_vfs_list(&ls, &n, mem, "/c");
		int has_index = 0;
		for (size_t i = 0; i < n; i++) {
			cr_assert_null(strstr(ls[i], "tempstate"), "fail_at %ld left %s", fail_at, ls[i]);
			has_index |= strcmp(ls[i], "ckpt.index") == 0;
		}
		ckpt_vfs_free_list(ls, n);
		if (rc == CKPT_OK)
			successes++;
		if (rc == CKPT_OK || has_index) {
			/* a visible index is always a complete checkpoint (a failed directory fsync comes after the rename) */
			cr_assert(has_index);
			ckpt_open_options ro = CKPT_OPEN_OPTIONS_INIT;
			ro.vfs = mem;
			ckpt_reader *r;
			cr_assert_eq(ckpt_reader_open(&r, "/c/ckpt", &ro), CKPT_OK);
			ckpt_tensor *u;
			cr_assert_eq(ckpt_reader_read(&u, r, 1), CKPT_OK);
			cr_assert(ckpt_tensor_equal(u, s));
			ckpt_tensor_free(u);
			ckpt_reader_free(r);
		}
		if (rc != CKPT_OK) {
			cr_assert(fired, "fail_at %ld: %s", fail_at, ckpt_error_last()->message);
			cr_assert_eq(rc, CKPT_EIO, "fail_at %ld: %s", fail_at, ckpt_status_name(rc));
		}
		if (!fired)
			break;
		ckpt_vfs_remove(mem, "/c/ckpt.index");
		ckpt_vfs_remove(mem, "/c/ckpt.data-00000-of-00002");
		ckpt_vfs_remove(mem, "/c/ckpt.data-00001-of-00002");
	}
	cr_assert_eq(successes, 1, "only the run without a fault succeeds (%ld calls)", total);
	ckpt_tensor_free(t);
	ckpt_tensor_free(s);
	ckpt_vfs_free(mem);
}

static long alloc_budget;
static void *fail_malloc(size_t n, void *ctx) { return --alloc_budget < 0 ? NULL : malloc(n); }
static void *fail_realloc(void *p, size_t n, void *ctx) { return --alloc_budget < 0 ? NULL : realloc(p, n); }
static void plain_free(void *p, void *ctx) { free(p); }

/* Fail every allocation of open + read in turn: ENOMEM, never a crash or a wrong code. */
Test(tf_bundle, allocation_failures)
{
	const char *path = ts_fixture("tf/tensorflow__lso_ckpt_tf2.2");
	ckpt_allocator a = { fail_malloc, fail_realloc, plain_free, NULL };
	int done = 0;
	for (long k = 0; k < 5000 && !done; k++) {
		alloc_budget = k;
		ckpt_set_allocator(&a);
		ckpt_reader *r = NULL;
		int rc = ckpt_reader_open(&r, path, NULL);
		for (size_t i = 0; rc == CKPT_OK && i < ckpt_reader_num_entries(r); i++) {
			ckpt_tensor *t = NULL;
			rc = ckpt_reader_read(&t, r, i);
			ckpt_tensor_free(t);
		}
		ckpt_reader_free(r);
		ckpt_set_allocator(NULL);
		if (rc == CKPT_OK)
			done = 1;
		else
			cr_assert_eq(rc, CKPT_ENOMEM, "allocation %ld: %s (%s)", k, ckpt_status_name(rc),
				ckpt_error_last()->message);
	}
	cr_assert(done);
}

Test(tf_bundle, writer_allocation_failures)
{
	int64_t d = 100;
	ckpt_tensor *t = make_tensor(CKPT_DT_FLOAT, 1, &d, 5);
	ckpt_tensor *s = make_tensor(CKPT_DT_STRING, 1, &d, 6);
	ckpt_reader *src;
	cr_assert_eq(ckpt_reader_open(&src, ts_fixture("tf/tensorflow__lso_ckpt_tf2.2"), NULL), CKPT_OK);
	ckpt_allocator a = { fail_malloc, fail_realloc, plain_free, NULL };
	int done = 0;
	for (long k = 0; k < 5000 && !done; k++) {
		/* POSIX files: the memory VFS leaks a path when its own allocation fails (reported) */
		char *dir = ts_tmpdir();
		char *prefix = ts_join(dir, "c/ckpt"), *ix = ts_join(dir, "c/ckpt.index");
		ckpt_write_options o = CKPT_WRITE_OPTIONS_INIT;
		o.no_fsync = 1;
		alloc_budget = k;
		ckpt_set_allocator(&a);
		ckpt_writer *w = NULL;
		int rc = ckpt_writer_open(&w, prefix, NULL, &o);
		if (rc == CKPT_OK) rc = ckpt_writer_set_object_graph(w, ckpt_reader_object_graph(src));
		if (rc == CKPT_OK) rc = ckpt_writer_add(w, "a", t, 0);
		if (rc == CKPT_OK) rc = ckpt_writer_add(w, "b", s, 0);
		if (rc == CKPT_OK) rc = ckpt_writer_commit(w);
		ckpt_writer_free(w);
		ckpt_set_allocator(NULL);
		if (rc == CKPT_OK)
			done = 1;
		else
			cr_assert_eq(rc, CKPT_ENOMEM, "allocation %ld: %s (%s)", k, ckpt_status_name(rc),
				ckpt_error_last()->message);
		int ex = 0;
		cr_assert_eq(ckpt_vfs_exists(&ex, ckpt_vfs_default(), ix) > 0, done, "allocation %ld", k);
		free(prefix);
		free(ix);
		ts_rmtree(dir);
		free(dir);
	}
	cr_assert(done);
	ckpt_reader_free(src);
	ckpt_tensor_free(t);
	ckpt_tensor_free(s);
}

/* TF's own writer stores an empty string tensor as the 4-byte Mask(0); we write 0 bytes; both read. */
Test(tf_bundle, empty_string_tensor_both_forms)
{
	char *dir = ts_tmpdir();
	unsigned char d[4];
	uint32_t m0 = ckpt_crc32c_mask(0);
	memcpy(d, &m0, 4);
	uint32_t crc = ckpt_crc32c_mask(ckpt_crc32c_extend(0, d, 4));
	unsigned char e[] = { 0x08, 0x07, 0x12, 0x02, 0x12, 0x00, 0x28, 0x04, 0x35, 0, 0, 0, 0 };
	memcpy(e + 9, &crc, 4);
	char *prefix = craft_bundle(dir, e, sizeof(e), d, 4);
	ckpt_reader *r = open_ok(prefix);
	ckpt_tensor *t = NULL;
	if (ckpt_reader_read(&t, r, 0))
		fail_with_error("4-byte empty string tensor");
	cr_assert_eq(ckpt_tensor_num_elements(t), 0);
	ckpt_tensor_free(t);
	ckpt_reader_free(r);
	free(prefix);
	ts_rmtree(dir);
	free(dir);
}

/* ------------------------------------------------------------------ */
/* partitioned variables: slice keys, tiling, assembly                  */
/* ------------------------------------------------------------------ */

typedef struct tb {
	tfb_buf key[16], val[16];
	size_t n;
	tfb_buf data;
	ckpt_vfs *vfs;
} tb;

static void pb_varint_field(tfb_buf *b, unsigned field, uint64_t v)
{
	cr_assert_eq(tfb_buf_varint(b, (uint64_t)field << 3), CKPT_OK);
	cr_assert_eq(tfb_buf_varint(b, v), CKPT_OK);
}

static void pb_sub(tfb_buf *b, unsigned field, tfb_buf *m)
{
	cr_assert_eq(tfb_buf_varint(b, (uint64_t)field << 3 | 2), CKPT_OK);
	cr_assert_eq(tfb_buf_varint(b, m->len), CKPT_OK);
	cr_assert_eq(tfb_buf_append(b, m->p, m->len), CKPT_OK);
	tfb_buf_free(m);
}

static int tb_slice_rank = -1; /* >= 0: the slices' rank, for a mismatch */

/* BundleEntryProto; nsl slices of rank (start, length) pairs in ext, length -1 = full (no length field). */
static void tb_entry(tb *t, const void *key, size_t klen, int dtype, int rank, const int64_t *dims,
	int64_t off, int64_t size, uint32_t crc, int nsl, const int64_t *ext)
{
	cr_assert_lt(t->n, 16);
	tfb_buf *k = &t->key[t->n], *v = &t->val[t->n];
	t->n++;
	memset(k, 0, sizeof(*k));
	memset(v, 0, sizeof(*v));
	cr_assert_eq(tfb_buf_append(k, key, klen), CKPT_OK);
	pb_varint_field(v, 1, (uint64_t)dtype);
	tfb_buf sh = { 0 };
	for (int d = 0; d < rank; d++) {
		tfb_buf dim = { 0 };
		pb_varint_field(&dim, 1, (uint64_t)dims[d]);
		pb_sub(&sh, 2, &dim);
	}
	pb_sub(v, 2, &sh);
	if (!nsl) {
		if (off)
			pb_varint_field(v, 4, (uint64_t)off);
		if (size)
			pb_varint_field(v, 5, (uint64_t)size);
		cr_assert_eq(tfb_buf_varint(v, 6 << 3 | 5), CKPT_OK);
		cr_assert_eq(tfb_buf_fixed32(v, ckpt_crc32c_mask(crc)), CKPT_OK);
	}
	for (int s = 0; s < nsl; s++) {
		tfb_buf sl = { 0 };
		int sr = tb_slice_rank >= 0 ? tb_slice_rank : rank;
		for (int d = 0; d < sr; d++) {
			tfb_buf e = { 0 };
			const int64_t *x = ext + ((size_t)s * (size_t)sr + (size_t)d) * 2;
			pb_varint_field(&e, 1, (uint64_t)x[0]);
			if (x[1] >= 0)
				pb_varint_field(&e, 2, (uint64_t)x[1]);
			if (e.len == 0)
				cr_assert_eq(tfb_buf_reserve(&e, 1), CKPT_OK);
			pb_sub(&sl, 1, &e);
		}
		if (sl.len == 0)
			cr_assert_eq(tfb_buf_reserve(&sl, 1), CKPT_OK);
		pb_sub(v, 7, &sl);
	}
}

/* A float32 data entry of `n` values appended to the data file. */
static void tb_floats(tb *t, const void *key, size_t klen, int rank, const int64_t *dims, const float *vals, size_t n)
{
	int64_t off = (int64_t)t->data.len;
	cr_assert_eq(tfb_buf_append(&t->data, vals, n * 4), CKPT_OK);
	tb_entry(t, key, klen, CKPT_DT_FLOAT, rank, dims, off, (int64_t)n * 4,
		ckpt_crc32c_extend(0, vals, n * 4), 0, NULL);
}

/* The slice entry of `name` for (start, length) per dim. */
static void tb_slice(tb *t, const char *name, int rank, const int64_t *start, const int64_t *length,
	const int64_t *sdims, const float *vals, size_t n)
{
	tfb_buf k = { 0 };
	cr_assert_eq(tfb_slice_key_encode(&k, (const unsigned char *)name, strlen(name), rank, start, length), CKPT_OK);
	tb_floats(t, k.p, k.len, rank, sdims, vals, n);
	tfb_buf_free(&k);
}

static int cmp_kv(const void *a, const void *b)
{
	const tfb_kv *x = a, *y = b;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, n);
	return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

/* Build the index (keys sorted) into a memory file system and open it. */
static int tb_open(tb *t, ckpt_reader **r)
{
	static const unsigned char hdr[] = { 0x08, 0x01, 0x1a, 0x02, 0x08, 0x01 };
	tfb_kv kv[17] = { { (const unsigned char *)"", 0, hdr, sizeof(hdr) } };
	for (size_t i = 0; i < t->n; i++)
		kv[i + 1] = (tfb_kv){ t->key[i].p, t->key[i].len, t->val[i].p, t->val[i].len };
	qsort(kv + 1, t->n, sizeof(kv[0]), cmp_kv);
	tfb_buf ix = { 0 };
	cr_assert_eq(tfb_table_build(&ix, kv, t->n + 1, TFB_BLOCK_SIZE), CKPT_OK);
	cr_assert_eq(ckpt_vfs_memory_new(&t->vfs), CKPT_OK);
	cr_assert_eq(ckpt_vfs_memory_put(t->vfs, "p/b.index", ix.p, ix.len), CKPT_OK);
	cr_assert_eq(ckpt_vfs_memory_put(t->vfs, "p/b.data-00000-of-00001", t->data.p, t->data.len), CKPT_OK);
	tfb_buf_free(&ix);
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	o.vfs = t->vfs;
	*r = NULL;
	return ckpt_reader_open(r, "p/b", &o);
}

static void tb_free(tb *t, ckpt_reader *r)
{
	ckpt_reader_free(r);
	ckpt_vfs_free(t->vfs);
	for (size_t i = 0; i < t->n; i++) {
		tfb_buf_free(&t->key[i]);
		tfb_buf_free(&t->val[i]);
	}
	tfb_buf_free(&t->data);
}

Test(tf_bundle, slice_key_codec)
{
	/* EncodeTensorNameSlice("a", [0:-1]) from tf-bundle.md 5.4: 00 | 61 00 01 | 01 01 | 80 7f */
	tfb_buf b = { 0 };
	int64_t s0 = 0, l0 = -1;
	cr_assert_eq(tfb_slice_key_encode(&b, (const unsigned char *)"a", 1, 1, &s0, &l0), CKPT_OK);
	cr_assert_eq(b.len, 8);
	cr_assert_eq(memcmp(b.p, "\x00" "a\x00\x01\x01\x01\x80\x7f", 8), 0);
	tfb_buf_free(&b);
	/* names with 00 / ff bytes, every length class of WriteSignedNumIncreasing */
	static const int64_t vals[] = { 0, 1, -1, 63, -64, 64, -65, 8191, 8192, -8193, INT64_C(1) << 40,
		-(INT64_C(1) << 40), INT64_C(1) << 55, INT64_C(1) << 56, INT64_C(1) << 62, INT64_MAX, INT64_MIN };
	const size_t nv = sizeof(vals) / sizeof(vals[0]);
	static const unsigned char name[] = { 'w', 0, 0xff, 'z' };
	for (size_t i = 0; i + 1 < nv; i++) {
		int64_t st[2] = { vals[i], vals[i + 1] }, ln[2] = { vals[nv - 1 - i], vals[i] };
		cr_assert_eq(tfb_slice_key_encode(&b, name, sizeof(name), 2, st, ln), CKPT_OK);
		tfb_slice_key k;
		cr_assert_eq(tfb_slice_key_decode(b.p, b.len, &k), CKPT_OK, "value %lld", (long long)vals[i]);
		cr_assert_eq(k.nlen, sizeof(name));
		cr_assert_eq(memcmp(k.name, name, sizeof(name)), 0);
		cr_assert_eq(k.rank, 2);
		for (int d = 0; d < 2; d++) {
			cr_assert_eq(k.start[d], st[d], "start %lld decoded %lld", (long long)st[d], (long long)k.start[d]);
			cr_assert_eq(k.length[d], ln[d], "length %lld decoded %lld", (long long)ln[d], (long long)k.length[d]);
		}
		ckpt__free(k.name);
		/* truncated anywhere or with a byte added: never a key (and nothing left allocated) */
		for (size_t cut = 0; cut < b.len; cut++)
			cr_assert_neq(tfb_slice_key_decode(b.p, cut, &k), CKPT_OK);
		cr_assert_eq(tfb_buf_append(&b, "\x80", 1), CKPT_OK);
		cr_assert_neq(tfb_slice_key_decode(b.p, b.len, &k), CKPT_OK);
		cr_assert_null(k.name);
		b.len = 0;
	}
	/* signed numbers order like their values (OrderedCode) */
	for (size_t i = 0; i + 1 < nv; i++)
		for (size_t j = 0; j < nv; j++) {
			tfb_buf x = { 0 }, y = { 0 };
			cr_assert_eq(tfb_slice_key_encode(&x, name, 1, 1, &vals[i], &vals[i]), CKPT_OK);
			cr_assert_eq(tfb_slice_key_encode(&y, name, 1, 1, &vals[j], &vals[j]), CKPT_OK);
			size_t n = x.len < y.len ? x.len : y.len;
			int c = memcmp(x.p, y.p, n);
			if (!c)
				c = (x.len > y.len) - (x.len < y.len);
			cr_assert_eq(c < 0, vals[i] < vals[j]);
			tfb_buf_free(&x);
			tfb_buf_free(&y);
		}
	tfb_buf_free(&b);
}

Test(tf_bundle, partitioned_read_assembles_slices)
{
	tb t = { 0 };
	/* x [4,3] = 10 i + j, split by columns [0,1) and [1,3); data order is not key order */
	int64_t xd[2] = { 4, 3 };
	const int64_t xs[] = { 0, -1, 0, 1, /**/ 0, -1, 1, 2 };
	tb_entry(&t, "x", 1, CKPT_DT_FLOAT, 2, xd, 0, 0, 0, 2, xs);
	const float c12[] = { 1, 2, 11, 12, 21, 22, 31, 32 }, c0[] = { 0, 10, 20, 30 };
	int64_t s1[2] = { 0, 1 }, l1[2] = { -1, 2 }, d1[2] = { 4, 2 };
	tb_slice(&t, "x", 2, s1, l1, d1, c12, 8);
	int64_t s0[2] = { 0, 0 }, l0[2] = { -1, 1 }, d0[2] = { 4, 1 };
	tb_slice(&t, "x", 2, s0, l0, d0, c0, 4);
	/* z [2,3]: a 2 x 2 grid of slices, one of them with an explicit full-length extent */
	int64_t zd[2] = { 2, 3 };
	const int64_t zs[] = { 0, 1, 0, 2, /**/ 0, 1, 2, 1, /**/ 1, 1, 0, 2, /**/ 1, 1, 2, 1 };
	tb_entry(&t, "z", 1, CKPT_DT_FLOAT, 2, zd, 0, 0, 0, 4, zs);
	for (int k = 0; k < 4; k++) {
		int64_t st[2] = { zs[k * 4], zs[k * 4 + 2] }, ln[2] = { zs[k * 4 + 1], zs[k * 4 + 3] };
		float v[2];
		for (int64_t j = 0; j < ln[1]; j++)
			v[j] = (float)(100 + 10 * st[0] + st[1] + j);
		tb_slice(&t, "z", 2, st, ln, ln, v, (size_t)ln[1]);
	}
	const float yv[] = { 7, 8, 9 };
	int64_t yd = 3;
	tb_floats(&t, "y", 1, 1, &yd, yv, 3);
	ckpt_reader *r;
	cr_assert_eq(tb_open(&t, &r), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_reader_num_entries(r), 9);
	size_t i;
	cr_assert_eq(ckpt_reader_find(&i, r, "x"), CKPT_OK);
	const ckpt_var_info *v = ckpt_reader_var(r, i);
	cr_assert_eq(v->nbytes, 48);
	ckpt_tensor *x = NULL;
	cr_assert_eq(ckpt_reader_read(&x, r, i), CKPT_OK, "%s", ckpt_error_last()->message);
	float into[12];
	cr_assert_eq(ckpt_reader_read_into(r, i, into, sizeof(into)), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 3; b++) {
			cr_assert_eq(((const float *)x->data)[a * 3 + b], (float)(10 * a + b));
			cr_assert_eq(into[a * 3 + b], (float)(10 * a + b));
		}
	ckpt_tensor_free(x);
	cr_assert_eq(ckpt_reader_find(&i, r, "z"), CKPT_OK);
	cr_assert_eq(ckpt_reader_read(&x, r, i), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 3; b++)
			cr_assert_eq(((const float *)x->data)[a * 3 + b], (float)(100 + 10 * a + b));
	ckpt_tensor_free(x);
	cr_assert_eq(ckpt_reader_find(&i, r, "y"), CKPT_OK);
	cr_assert_eq(ckpt_reader_read(&x, r, i), CKPT_OK);
	ckpt_tensor_free(x);
	ckpt_reader_free(r);

	/* a flipped byte in one slice: that slice's crc32c catches it */
	ckpt_vfs_free(t.vfs);
	t.data.p[5] ^= 0x10;
	cr_assert_eq(tb_open(&t, &r), CKPT_OK);
	cr_assert_eq(ckpt_reader_find(&i, r, "x"), CKPT_OK);
	cr_assert_eq(ckpt_reader_read(&x, r, i), CKPT_ECHECKSUM);
	cr_assert_null(x);
	cr_assert_eq(ckpt_reader_read_into(r, i, into, sizeof(into)), CKPT_ECHECKSUM);
	tb_free(&t, r);
}

/* One bad partitioned layout: open fails with EFORMAT, naming `var` and saying `why`. */
static void expect_bad_open(tb *t, const char *var, const char *why)
{
	ckpt_reader *r;
	int rc = tb_open(t, &r);
	expect_error(rc, CKPT_EFORMAT, "b.index", var, -2, why);
	cr_assert_null(r);
	tb_free(t, NULL);
	memset(t, 0, sizeof(*t));
}

Test(tf_bundle, partitioned_layouts_that_are_refused)
{
	int64_t d4 = 4, s0 = 0, l2 = 2, s2 = 2, d2 = 2;
	const float v[2] = { 1, 2 };
	const int64_t halves[] = { 0, 2, /**/ 2, 2 };
	tfb_buf k = { 0 };
	tb t = { 0 };

	/* a slice key whose variable has no entry */
	tb_slice(&t, "ghost", 1, &s0, &l2, &d2, v, 2);
	expect_bad_open(&t, NULL, "refers to no entry");

	/* a slice key naming a plain entry */
	tb_floats(&t, "p", 1, 1, &d4, (const float[]){ 1, 2, 3, 4 }, 4);
	tb_slice(&t, "p", 1, &s0, &l2, &d2, v, 2);
	expect_bad_open(&t, NULL, "not partitioned");

	/* a slice the full entry does not list */
	tb_entry(&t, "p", 1, CKPT_DT_FLOAT, 1, &d4, 0, 0, 0, 2, halves);
	int64_t s1 = 1;
	tb_slice(&t, "p", 1, &s1, &l2, &d2, v, 2);
	expect_bad_open(&t, NULL, "does not list");

	/* rank of the key differs from the entry's */
	tb_entry(&t, "p", 1, CKPT_DT_FLOAT, 1, &d4, 0, 0, 0, 2, halves);
	int64_t st2[2] = { 0, 0 }, ln2[2] = { 2, -1 }, sd2[2] = { 2, 1 };
	tb_slice(&t, "p", 2, st2, ln2, sd2, v, 2);
	expect_bad_open(&t, NULL, "rank");

	/* the slice entry's shape disagrees with its slice */
	tb_entry(&t, "p", 1, CKPT_DT_FLOAT, 1, &d4, 0, 0, 0, 2, halves);
	int64_t one = 1;
	tb_slice(&t, "p", 1, &s2, &l2, &one, v, 1);
	expect_bad_open(&t, NULL, "shape");

	/* the slice entry's dtype differs */
	tb_entry(&t, "p", 1, CKPT_DT_FLOAT, 1, &d4, 0, 0, 0, 2, halves);
	cr_assert_eq(tfb_slice_key_encode(&k, (const unsigned char *)"p", 1, 1, &s0, &l2), CKPT_OK);
	tb_entry(&t, k.p, k.len, CKPT_DT_INT32, 1, &d2, 0, 8, 0, 0, NULL);
	k.len = 0;
	expect_bad_open(&t, NULL, "dtype");

	/* leading 0x00 but no valid slice key; and a NUL inside a key */
	tb_entry(&t, "\0zz", 3, CKPT_DT_FLOAT, 1, &d4, 0, 0, 0, 2, halves);
	expect_bad_open(&t, "\\x00zz", "not a valid slice key");
	tb_floats(&t, "q\0r", 3, 1, &d2, v, 2);
	expect_bad_open(&t, "q\\x00r", "embedded NUL byte at position 1");

	/* slices of the wrong rank, or outside the shape */
	const int64_t rank2[] = { 0, 4, 0, 1 };
	tb_slice_rank = 2;
	tb_entry(&t, "p", 1, CKPT_DT_FLOAT, 1, &d4, 0, 0, 0, 1, rank2);
	tb_slice_rank = -1;
	expect_bad_open(&t, "p", "slice 0 has rank 2, the tensor has rank 1");
	const int64_t past[] = { 0, 2, /**/ 2, 3 };
	tb_entry(&t, "q", 1, CKPT_DT_FLOAT, 1, &d4, 0, 0, 0, 2, past);
	expect_bad_open(&t, "q", "lies outside");

	/* full extent with a start other than 0 */
	const int64_t shifted[] = { 2, -1 };
	tb_entry(&t, "p", 1, CKPT_DT_FLOAT, 1, &d4, 0, 0, 0, 1, shifted);
	expect_bad_open(&t, "p", "lies outside");

	/* a 2-D overlap that the element count alone cannot see: [0,2)x[0,2) and [1,3)x[1,3) of 3x3, plus 1 */
	int64_t d33[2] = { 3, 3 };
	const int64_t ov[] = { 0, 2, 0, 2, /**/ 1, 2, 1, 2, /**/ 0, 1, 2, 1 };
	tb_entry(&t, "g", 1, CKPT_DT_FLOAT, 2, d33, 0, 0, 0, 3, ov);
	expect_bad_open(&t, "g", "overlap");
	tfb_buf_free(&k);
}

/*
 * `ckpt diff A B [--atol X] [--rtol Y] [--json]`: per-variable comparison
 * of two checkpoints of any supported formats.
 *
 * Entries are matched by object path (cli_canonical_keys: the checkpoint
 * key for bundles, the graph-derived TF key for Keras files), falling back
 * to stored names. The object-graph entry itself is structure, not state,
 * and is not compared. Numbers are compared as numbers (float16/bfloat16
 * widened, complex as pairs); strings bytewise. Exact by default: bitwise.
 * With tolerances, an element is equal when |a - b| <= atol + rtol * |b|
 * (numpy.allclose; NaN equals NaN). Exit 0 when everything matches, 1 when
 * not (or on error).
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

/* The options of `ckpt diff`, filled by cli_parse through diff_opts[].field. */
typedef struct diff_args {
	const char *a;
	const char *b;
	const char *atol;
	const char *rtol;
	int json;
} diff_args;

static const cli_opt diff_opts[] = {
	{ CLI_OPT_ARG, "A", NULL, 1, "first checkpoint (any supported format)",
		CLI_FIELD(diff_args, a) },
	{ CLI_OPT_ARG, "B", NULL, 1, "second checkpoint (any supported format)",
		CLI_FIELD(diff_args, b) },
	{ CLI_OPT_VALUE, "atol", "X", 0, "absolute tolerance (default 0: exact, bitwise)",
		CLI_FIELD(diff_args, atol) },
	{ CLI_OPT_VALUE, "rtol", "Y", 0, "relative tolerance, relative to B (default 0)",
		CLI_FIELD(diff_args, rtol) },
	{ CLI_OPT_SWITCH, "json", NULL, 0, "print machine-readable JSON",
		CLI_FIELD(diff_args, json) },
	{ CLI_OPT_END, NULL, NULL, 0, NULL, 0 }
};

typedef struct keyed {
	const char *key;
	size_t idx;
} keyed;

static int keyed_cmp(const void *a, const void *b)
{
	return strcmp(((const keyed *)a)->key, ((const keyed *)b)->key);
}

typedef struct side {
	const char *arg;
	ckpt_reader *r;
	char **keys;
	size_t n;
	keyed *sorted;   /* entries to compare, by key */
	keyed *by_name;  /* the same entries, by stored name (fallback matching) */
	size_t nsorted;
	unsigned char *matched;
} side;

typedef struct cmp_result {
	uint64_t elements, differing;
	double max_abs, max_rel;
	int numeric;     /* max_abs / max_rel are meaningful */
	int equal;       /* within tolerance */
} cmp_result;

static double half_to_double(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v;

	if (e == 0)
		v = ldexp(m, -24);
	else if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexp(m | 0x400, e - 25);
	return (h & 0x8000) ? -v : v;
}

/* Element j of a fixed-size tensor as a double; complex types count as two scalars. */
static double scalar_at(ckpt_dtype dt, const unsigned char *p, uint64_t j)
{
	switch (dt) {
	case CKPT_DT_FLOAT:
	case CKPT_DT_COMPLEX64: { float f; memcpy(&f, p + j * 4, 4); return f; }
	case CKPT_DT_DOUBLE:
	case CKPT_DT_COMPLEX128: { double d; memcpy(&d, p + j * 8, 8); return d; }
	case CKPT_DT_HALF: { uint16_t h; memcpy(&h, p + j * 2, 2); return half_to_double(h); }
	case CKPT_DT_BFLOAT16: {
		uint16_t h; uint32_t u; float f;
		memcpy(&h, p + j * 2, 2);
		u = (uint32_t)h << 16;
		memcpy(&f, &u, 4);
		return f;
	}
	case CKPT_DT_INT8: return (int8_t)p[j];
	case CKPT_DT_UINT8: return p[j];
	case CKPT_DT_BOOL: return p[j] != 0;
	case CKPT_DT_INT16: { int16_t v; memcpy(&v, p + j * 2, 2); return v; }
	case CKPT_DT_UINT16: { uint16_t v; memcpy(&v, p + j * 2, 2); return v; }
	case CKPT_DT_INT32: { int32_t v; memcpy(&v, p + j * 4, 4); return v; }
	case CKPT_DT_UINT32: { uint32_t v; memcpy(&v, p + j * 4, 4); return v; }
	case CKPT_DT_INT64: { int64_t v; memcpy(&v, p + j * 8, 8); return (double)v; }
	case CKPT_DT_UINT64: { uint64_t v; memcpy(&v, p + j * 8, 8); return (double)v; }
	default: return NAN;
	}
}

static void compare_tensors(const ckpt_tensor *a, const ckpt_tensor *b, double atol, double rtol, cmp_result *res)
{
	uint64_t n = ckpt_tensor_num_elements(a), j;
	int exact = atol == 0 && rtol == 0;

	memset(res, 0, sizeof(*res));
	res->equal = 1;
	res->elements = n;
	if (a->dtype == CKPT_DT_STRING) {
		const ckpt_bytes *ea = a->data, *eb = b->data;
		for (j = 0; j < n; j++) {
			if (ea[j].len != eb[j].len || (ea[j].len && memcmp(ea[j].data, eb[j].data, ea[j].len) != 0))
				res->differing++;
		}
		res->equal = res->differing == 0;
		return;
	}
	{
		size_t esz = ckpt_dtype_size(a->dtype);
		int cplx = a->dtype == CKPT_DT_COMPLEX64 || a->dtype == CKPT_DT_COMPLEX128;
		size_t ssz = cplx ? esz / 2 : esz;    /* bytes per scalar */
		uint64_t nscalars = cplx ? n * 2 : n;
		const unsigned char *pa = a->data, *pb = b->data;

		res->numeric = 1;
		for (j = 0; j < nscalars; j++) {
			double x, y, d;
			int same_bits = memcmp(pa + j * ssz, pb + j * ssz, ssz) == 0;
			int ok;

			if (same_bits)
				continue;
			/* count each differing element once (a complex element has two scalars) */
			if (!cplx || j % 2 == 0 || memcmp(pa + (j - 1) * ssz, pb + (j - 1) * ssz, ssz) == 0)
				res->differing++;
			x = scalar_at(a->dtype, pa, j);
			y = scalar_at(a->dtype, pb, j);
			if (isnan(x) && isnan(y)) {
				ok = !exact;
				d = 0;
			} else if (x == y) {
				ok = !exact; /* e.g. 0.0 and -0.0: equal as numbers, not as bits */
				d = 0;
			} else {
				d = fabs(x - y);
				if (isnan(d))
					d = INFINITY; /* NaN against a number, or inf - inf */
				ok = !exact && d <= atol + rtol * fabs(y);
				if (d > res->max_abs)
					res->max_abs = d;
				if (y != 0) {
					double rel = d / fabs(y);
					if (isnan(rel))
						rel = INFINITY;
					if (rel > res->max_rel)
						res->max_rel = rel;
				} else {
					res->max_rel = INFINITY;
				}
			}
			if (!ok)
				res->equal = 0;
		}
	}
}

/*
 * The name used when matching by stored name: a legacy Keras full model
 * keeps exactly the weights-only layout under "model_weights/", so that
 * prefix is not part of the name (keras.md §2, §3).
 */
static const char *fallback_name(const char *name)
{
	static const char prefix[] = "model_weights/";

	if (strncmp(name, prefix, sizeof(prefix) - 1) == 0 && name[sizeof(prefix) - 1])
		return name + sizeof(prefix) - 1;
	return name;
}

static int side_open(side *s, const char *arg, ckpt_vfs *vfs)
{
	size_t i;
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;

	memset(s, 0, sizeof(*s));
	s->arg = arg;
	oo.vfs = vfs;
	if (ckpt_reader_open(&s->r, arg, &oo) != CKPT_OK)
		return cli_report_last(arg, NULL);
	s->n = ckpt_reader_num_entries(s->r);
	if (cli_canonical_keys(s->r, &s->keys) != CLI_EXIT_OK)
		return CLI_EXIT_ERROR;
	s->sorted = calloc(s->n ? s->n : 1, sizeof(keyed));
	s->by_name = calloc(s->n ? s->n : 1, sizeof(keyed));
	s->matched = calloc(s->n ? s->n : 1, 1);
	if (!s->sorted || !s->by_name || !s->matched)
		return cli_report(arg, NULL, -1, "out of memory");
	for (i = 0; i < s->n; i++) {
		if (strcmp(ckpt_reader_var(s->r, i)->name, CKPT_OBJECT_GRAPH_KEY) == 0)
			continue;
		s->sorted[s->nsorted].key = s->keys[i];
		s->sorted[s->nsorted].idx = i;
		s->by_name[s->nsorted].key = fallback_name(ckpt_reader_var(s->r, i)->name);
		s->by_name[s->nsorted].idx = i;
		s->nsorted++;
	}
	qsort(s->sorted, s->nsorted, sizeof(keyed), keyed_cmp);
	qsort(s->by_name, s->nsorted, sizeof(keyed), keyed_cmp);
	return CLI_EXIT_OK;
}

static void side_close(side *s)
{
	cli_keys_free(s->keys, s->n);
	free(s->sorted);
	free(s->by_name);
	free(s->matched);
	ckpt_reader_free(s->r);
}

/* One difference found: what differs between entry ia of A and entry ib of B. */
typedef enum diff_kind { DIFF_DTYPE, DIFF_SHAPE, DIFF_ERROR, DIFF_VALUES } diff_kind;
typedef struct diff_item {
	diff_kind kind;
	const char *label;  /* the matching key (borrowed from a side) */
	size_t ia, ib;
	char *message;      /* DIFF_ERROR: the library's message */
	cmp_result values;  /* DIFF_VALUES */
} diff_item;

/* What `ckpt diff` found; both printers render it. */
typedef struct diff_result {
	side A, B;
	double atol, rtol;
	diff_item *items;   /* in comparison order */
	size_t nitems, cap;
	size_t compared, errors, only_a, only_b;
} diff_result;

static diff_item *add_item(diff_result *d, diff_kind kind, size_t ia, size_t ib, const char *label)
{
	diff_item *it;

	if (d->nitems == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 16;
		diff_item *p = realloc(d->items, cap * sizeof(*p));
		if (!p) {
			cli_report(NULL, label, -1, "out of memory");
			return NULL;
		}
		d->items = p;
		d->cap = cap;
	}
	it = &d->items[d->nitems++];
	memset(it, 0, sizeof(*it));
	it->kind = kind;
	it->label = label;
	it->ia = ia;
	it->ib = ib;
	return it;
}

/* Compare entry ia of A with entry ib of B, matched under `label`. */
static void diff_pair(diff_result *d, size_t ia, size_t ib, const char *label)
{
	const ckpt_var_info *va = ckpt_reader_var(d->A.r, ia), *vb = ckpt_reader_var(d->B.r, ib);
	ckpt_tensor *ta = NULL, *tb = NULL;
	cmp_result res;
	diff_item *it;

	d->A.matched[ia] = 1;
	d->B.matched[ib] = 1;
	d->compared++;
	if (va->dtype != vb->dtype) {
		add_item(d, DIFF_DTYPE, ia, ib, label);
		return;
	}
	if (!ckpt_shape_equal(&va->shape, &vb->shape)) {
		add_item(d, DIFF_SHAPE, ia, ib, label);
		return;
	}
	if (ckpt_reader_read(&ta, d->A.r, ia) != CKPT_OK || ckpt_reader_read(&tb, d->B.r, ib) != CKPT_OK) {
		cli_report_last(ta ? ckpt_reader_path(d->B.r) : ckpt_reader_path(d->A.r), ta ? vb->name : va->name);
		d->errors++;
		if ((it = add_item(d, DIFF_ERROR, ia, ib, label)))
			it->message = strdup(ckpt_error_last()->message);
		ckpt_tensor_free(ta);
		ckpt_tensor_free(tb);
		return;
	}
	compare_tensors(ta, tb, d->atol, d->rtol, &res);
	ckpt_tensor_free(ta);
	ckpt_tensor_free(tb);
	if (!res.equal && (it = add_item(d, DIFF_VALUES, ia, ib, label)))
		it->values = res;
}

static size_t count_unmatched(const side *s)
{
	size_t i, n = 0;

	for (i = 0; i < s->nsorted; i++)
		n += !s->matched[s->sorted[i].idx];
	return n;
}

/* Match entries by object path (canonical key), then what is left by stored name, comparing each pair. */
static void diff_run(diff_result *d)
{
	side *A = &d->A, *B = &d->B;
	size_t i;

	for (i = 0; i < A->nsorted; i++) {
		keyed *hit = bsearch(&A->sorted[i], B->sorted, B->nsorted, sizeof(keyed), keyed_cmp);
		if (hit && !B->matched[hit->idx] && !A->matched[A->sorted[i].idx])
			diff_pair(d, A->sorted[i].idx, hit->idx, A->sorted[i].key);
	}
	/* entries a graph could not place */
	for (i = 0; i < A->nsorted; i++) {
		keyed *hit;
		if (A->matched[A->by_name[i].idx])
			continue;
		hit = bsearch(&A->by_name[i], B->by_name, B->nsorted, sizeof(keyed), keyed_cmp);
		if (hit && !B->matched[hit->idx])
			diff_pair(d, A->by_name[i].idx, hit->idx, A->by_name[i].key);
	}
	d->only_a = count_unmatched(A);
	d->only_b = count_unmatched(B);
}

static int diff_equal(const diff_result *d)
{
	return !d->nitems && !d->only_a && !d->only_b;
}

/* "  (A: x; B: y)" when the stored names differ from the label. */
static void print_names(const diff_result *d, const diff_item *it)
{
	const char *na = ckpt_reader_var(d->A.r, it->ia)->name, *nb = ckpt_reader_var(d->B.r, it->ib)->name;

	if (strcmp(na, it->label) != 0 || strcmp(nb, it->label) != 0)
		printf("  (A: %s; B: %s)", cli_vis(na), cli_vis(nb));
}

static void print_item_text(const diff_result *d, const diff_item *it)
{
	const ckpt_var_info *va = ckpt_reader_var(d->A.r, it->ia), *vb = ckpt_reader_var(d->B.r, it->ib);
	char sa[256], sb[256];

	switch (it->kind) {
	case DIFF_DTYPE:
		printf("dtype differs: %s: %s vs %s", cli_vis(it->label), ckpt_dtype_name(va->dtype),
			ckpt_dtype_name(vb->dtype));
		break;
	case DIFF_SHAPE:
		ckpt_shape_format(&va->shape, sa, sizeof(sa));
		ckpt_shape_format(&vb->shape, sb, sizeof(sb));
		printf("shape differs: %s: %s vs %s", cli_vis(it->label), sa, sb);
		break;
	case DIFF_ERROR:
		printf("unreadable: %s (see error)\n", cli_vis(it->label));
		return;
	case DIFF_VALUES:
		printf("values differ: %s: %" PRIu64 " of %" PRIu64 " elements", cli_vis(it->label),
			it->values.differing, it->values.elements);
		if (it->values.numeric)
			printf(", max abs diff %.9g, max rel diff %.9g", it->values.max_abs, it->values.max_rel);
		break;
	}
	print_names(d, it);
	putchar('\n');
}

static void diff_print_text(const diff_result *d)
{
	size_t i;

	printf("A: %s (%s, %zu entries)\nB: %s (%s, %zu entries)\n", cli_vis(ckpt_reader_path(d->A.r)),
		ckpt_reader_format(d->A.r), d->A.nsorted, cli_vis(ckpt_reader_path(d->B.r)), ckpt_reader_format(d->B.r),
		d->B.nsorted);
	if (d->atol == 0 && d->rtol == 0)
		printf("comparing exactly (bitwise)\n");
	else
		printf("comparing with |a - b| <= %g + %g * |b|\n", d->atol, d->rtol);
	for (i = 0; i < d->nitems; i++)
		print_item_text(d, &d->items[i]);
	for (i = 0; i < d->A.nsorted; i++)
		if (!d->A.matched[d->A.sorted[i].idx])
			printf("only in A: %s\n", cli_vis(d->A.sorted[i].key));
	for (i = 0; i < d->B.nsorted; i++)
		if (!d->B.matched[d->B.sorted[i].idx])
			printf("only in B: %s\n", cli_vis(d->B.sorted[i].key));
	printf("%s: %zu compared, %zu differ, %zu only in A, %zu only in B%s\n",
		diff_equal(d) ? "equal" : "DIFFERENT", d->compared, d->nitems, d->only_a, d->only_b,
		d->errors ? " (with read errors)" : "");
}

static void print_item_json(jw *w, const diff_result *d, const diff_item *it)
{
	const ckpt_var_info *va = ckpt_reader_var(d->A.r, it->ia), *vb = ckpt_reader_var(d->B.r, it->ib);
	static const char *const kinds[] = { "dtype", "shape", "error", "values" };

	jw_object_begin(w);
	jw_key(w, "name");
	jw_string(w, it->label);
	jw_key(w, "kind");
	jw_string(w, kinds[it->kind]);
	if (it->kind == DIFF_DTYPE) {
		jw_key(w, "a");
		jw_string(w, ckpt_dtype_name(va->dtype));
		jw_key(w, "b");
		jw_string(w, ckpt_dtype_name(vb->dtype));
	} else if (it->kind == DIFF_SHAPE) {
		jw_key(w, "a");
		jw_shape(w, &va->shape);
		jw_key(w, "b");
		jw_shape(w, &vb->shape);
	} else if (it->kind == DIFF_ERROR) {
		jw_key(w, "message");
		jw_string(w, it->message);
	} else {
		jw_key(w, "elements");
		jw_uint(w, it->values.elements);
		jw_key(w, "differing");
		jw_uint(w, it->values.differing);
		jw_key(w, "max_abs");
		it->values.numeric ? jw_double(w, it->values.max_abs) : jw_null(w);
		jw_key(w, "max_rel");
		it->values.numeric ? jw_double(w, it->values.max_rel) : jw_null(w);
	}
	jw_object_end(w);
}

static void print_unmatched_json(jw *w, const char *key, const side *s)
{
	size_t i;

	jw_key(w, key);
	jw_array_begin(w);
	for (i = 0; i < s->nsorted; i++)
		if (!s->matched[s->sorted[i].idx])
			jw_string(w, s->sorted[i].key);
	jw_array_end(w);
}

static void diff_print_json(const diff_result *d)
{
	jw w;
	size_t i;

	jw_init(&w, stdout);
	jw_object_begin(&w);
	jw_key(&w, "a");
	jw_string(&w, ckpt_reader_path(d->A.r));
	jw_key(&w, "b");
	jw_string(&w, ckpt_reader_path(d->B.r));
	jw_key(&w, "format_a");
	jw_string(&w, ckpt_reader_format(d->A.r));
	jw_key(&w, "format_b");
	jw_string(&w, ckpt_reader_format(d->B.r));
	jw_key(&w, "atol");
	jw_double(&w, d->atol);
	jw_key(&w, "rtol");
	jw_double(&w, d->rtol);
	jw_key(&w, "differences");
	jw_array_begin(&w);
	for (i = 0; i < d->nitems; i++)
		print_item_json(&w, d, &d->items[i]);
	jw_array_end(&w);
	print_unmatched_json(&w, "only_in_a", &d->A);
	print_unmatched_json(&w, "only_in_b", &d->B);
	jw_key(&w, "compared");
	jw_uint(&w, d->compared);
	jw_key(&w, "equal");
	jw_bool(&w, diff_equal(d));
	jw_object_end(&w);
	jw_end_line(&w);
}

static void diff_result_free(diff_result *d)
{
	size_t i;

	for (i = 0; i < d->nitems; i++)
		free(d->items[i].message);
	free(d->items);
	side_close(&d->A);
	side_close(&d->B);
}

static int cmd_diff(const cli_cmd *cmd, int argc, char **argv)
{
	diff_args args;
	diff_result d;
	int rc;
	cli_progress *prog = NULL;

	memset(&d, 0, sizeof(d));
	memset(&args, 0, sizeof(args));
	rc = cli_parse(cmd, argc, argv, &args);
	if (rc != CLI_EXIT_OK)
		return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
	if ((args.atol && cli_parse_double(cmd, "atol", args.atol, &d.atol) != CLI_EXIT_OK) ||
	    (args.rtol && cli_parse_double(cmd, "rtol", args.rtol, &d.rtol) != CLI_EXIT_OK))
		return CLI_EXIT_USAGE;

	cli_progress_start(&prog, "diff", 0, args.json);
	if (side_open(&d.A, args.a, cli_progress_vfs(prog, args.a, args.b)) != CLI_EXIT_OK ||
	    side_open(&d.B, args.b, cli_progress_vfs(prog, args.a, args.b)) != CLI_EXIT_OK) {
		diff_result_free(&d);
		cli_progress_free(prog);
		return CLI_EXIT_ERROR;
	}
	cli_progress_set_total(prog, cli_reader_bytes(d.A.r) + cli_reader_bytes(d.B.r));
	diff_run(&d);
	cli_progress_done(prog);
	if (args.json)
		diff_print_json(&d);
	else
		diff_print_text(&d);
	rc = diff_equal(&d) ? CLI_EXIT_OK : CLI_EXIT_ERROR;
	fflush(stdout);
	diff_result_free(&d);
	cli_progress_free(prog);
	return rc;
}

const cli_cmd cli_cmd_diff = {
	"diff", cmd_diff, "Compare two checkpoints variable by variable",
	diff_opts,
	"Matches entries by object path (TF checkpoint keys; Keras files through\n"
	"their object graph), then what is left by stored name (ignoring a legacy\n"
	"Keras \"model_weights/\" prefix). Reports entries only in A or only in B,\n"
	"dtype and shape differences, and the maximum absolute and relative\n"
	"difference of values. The object-graph entry is structure and is not\n"
	"compared. Exact (bitwise) by default; with --atol / --rtol an element\n"
	"matches when |a - b| <= atol + rtol * |b| (NaN matches NaN).\n"
	"Exit status 0 when equal, 1 when not."
};

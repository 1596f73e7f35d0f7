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

static const cli_opt diff_opts[] = {
	{ CLI_OPT_ARG, "A", NULL, 1, "first checkpoint (any supported format)" },
	{ CLI_OPT_ARG, "B", NULL, 1, "second checkpoint (any supported format)" },
	{ CLI_OPT_VALUE, "atol", "X", 0, "absolute tolerance (default 0: exact, bitwise)" },
	{ CLI_OPT_VALUE, "rtol", "Y", 0, "relative tolerance, relative to B (default 0)" },
	{ CLI_OPT_SWITCH, "json", NULL, 0, "print machine-readable JSON" },
	{ CLI_OPT_END, NULL, NULL, 0, NULL }
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
	s->n = ckpt_reader_count(s->r);
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

/* State of one diff run. */
typedef struct diff_ctx {
	side *A, *B;
	double atol, rtol;
	int json;
	int first;      /* no element printed yet in the current JSON array */
	size_t compared, differ, errors;
} diff_ctx;

static void begin_item(diff_ctx *c)
{
	if (c->json)
		fputs(c->first ? "" : ", ", stdout);
	else
		cli_progress_clear_line(); /* a difference line never lands after a progress line */
	c->first = 0;
}

/* "  (A: x; B: y)" when the stored names differ from the label. */
static void print_names(const diff_ctx *c, size_t ia, size_t ib, const char *label)
{
	const char *na = ckpt_reader_var(c->A->r, ia)->name, *nb = ckpt_reader_var(c->B->r, ib)->name;

	if (strcmp(na, label) != 0 || strcmp(nb, label) != 0)
		printf("  (A: %s; B: %s)", cli_vis(na), cli_vis(nb));
}

static void json_item_head(const char *label, const char *kind)
{
	fputs("{\"name\": ", stdout);
	jout_cstring(stdout, label);
	fputs(", \"kind\": ", stdout);
	jout_cstring(stdout, kind);
}

/* Compare entry ia of A with entry ib of B, reported under `label`. */
static void diff_pair(diff_ctx *c, size_t ia, size_t ib, const char *label)
{
	const ckpt_var_info *va = ckpt_reader_var(c->A->r, ia), *vb = ckpt_reader_var(c->B->r, ib);
	char sa[256], sb[256];
	ckpt_tensor *ta = NULL, *tb = NULL;
	cmp_result res;

	c->A->matched[ia] = 1;
	c->B->matched[ib] = 1;
	c->compared++;
	ckpt_shape_format(&va->shape, sa, sizeof(sa));
	ckpt_shape_format(&vb->shape, sb, sizeof(sb));
	if (va->dtype != vb->dtype) {
		c->differ++;
		begin_item(c);
		if (c->json) {
			json_item_head(label, "dtype");
			fputs(", \"a\": ", stdout);
			jout_cstring(stdout, ckpt_dtype_name(va->dtype));
			fputs(", \"b\": ", stdout);
			jout_cstring(stdout, ckpt_dtype_name(vb->dtype));
			fputc('}', stdout);
		} else {
			printf("dtype differs: %s: %s vs %s", cli_vis(label), ckpt_dtype_name(va->dtype), ckpt_dtype_name(vb->dtype));
			print_names(c, ia, ib, label);
			putchar('\n');
		}
		return;
	}
	if (!ckpt_shape_equal(&va->shape, &vb->shape)) {
		c->differ++;
		begin_item(c);
		if (c->json) {
			json_item_head(label, "shape");
			fputs(", \"a\": ", stdout);
			jout_shape(stdout, &va->shape);
			fputs(", \"b\": ", stdout);
			jout_shape(stdout, &vb->shape);
			fputc('}', stdout);
		} else {
			printf("shape differs: %s: %s vs %s", cli_vis(label), sa, sb);
			print_names(c, ia, ib, label);
			putchar('\n');
		}
		return;
	}
	if (ckpt_reader_read(c->A->r, ia, &ta) != CKPT_OK || ckpt_reader_read(c->B->r, ib, &tb) != CKPT_OK) {
		cli_report_last(ta ? ckpt_reader_path(c->B->r) : ckpt_reader_path(c->A->r), ta ? vb->name : va->name);
		c->errors++;
		c->differ++;
		begin_item(c);
		if (c->json) {
			json_item_head(label, "error");
			fputs(", \"message\": ", stdout);
			jout_cstring(stdout, ckpt_error_last()->message);
			fputc('}', stdout);
		} else {
			printf("unreadable: %s (see error)\n", cli_vis(label));
		}
		ckpt_tensor_free(ta);
		ckpt_tensor_free(tb);
		return;
	}
	compare_tensors(ta, tb, c->atol, c->rtol, &res);
	ckpt_tensor_free(ta);
	ckpt_tensor_free(tb);
	if (res.equal)
		return;
	c->differ++;
	begin_item(c);
	if (c->json) {
		json_item_head(label, "values");
		printf(", \"elements\": %" PRIu64 ", \"differing\": %" PRIu64 ", \"max_abs\": ", res.elements, res.differing);
		if (res.numeric)
			jout_double(stdout, res.max_abs);
		else
			fputs("null", stdout);
		fputs(", \"max_rel\": ", stdout);
		if (res.numeric)
			jout_double(stdout, res.max_rel);
		else
			fputs("null", stdout);
		fputc('}', stdout);
	} else {
		printf("values differ: %s: %" PRIu64 " of %" PRIu64 " elements", cli_vis(label), res.differing, res.elements);
		if (res.numeric)
			printf(", max abs diff %.9g, max rel diff %.9g", res.max_abs, res.max_rel);
		print_names(c, ia, ib, label);
		putchar('\n');
	}
}

/* Entries of `s` left unmatched, as text lines or JSON strings; returns how many. */
static size_t list_unmatched(diff_ctx *c, const side *s, const char *what)
{
	size_t i, count = 0;

	c->first = 1;
	for (i = 0; i < s->nsorted; i++) {
		if (s->matched[s->sorted[i].idx])
			continue;
		count++;
		begin_item(c);
		if (c->json)
			jout_cstring(stdout, s->sorted[i].key);
		else
			printf("only in %s: %s\n", what, cli_vis(s->sorted[i].key));
	}
	return count;
}

static int cmd_diff(const cli_cmd *cmd, int argc, char **argv)
{
	cli_args args;
	side A, B;
	diff_ctx c;
	const char *s;
	int rc;
	size_t i, only_a, only_b;
	cli_progress *prog = NULL;

	memset(&c, 0, sizeof(c));
	rc = cli_parse(cmd, argc, argv, &args);
	if (rc == CLI_PARSE_HELP)
		return CLI_EXIT_OK;
	if (rc != CLI_EXIT_OK)
		return rc;
	if ((s = cli_get(cmd, &args, "atol")) && cli_parse_double(cmd, "atol", s, &c.atol) != CLI_EXIT_OK)
		return CLI_EXIT_USAGE;
	if ((s = cli_get(cmd, &args, "rtol")) && cli_parse_double(cmd, "rtol", s, &c.rtol) != CLI_EXIT_OK)
		return CLI_EXIT_USAGE;
	c.json = cli_get(cmd, &args, "json") != NULL;

	memset(&B, 0, sizeof(B));
	cli_progress_start(&prog, "diff", 0, c.json);
	if (side_open(&A, cli_get(cmd, &args, "A"), cli_progress_vfs(prog, cli_get(cmd, &args, "A"), cli_get(cmd, &args, "B"))) != CLI_EXIT_OK) {
		side_close(&A);
		cli_progress_free(prog);
		return CLI_EXIT_ERROR;
	}
	if (side_open(&B, cli_get(cmd, &args, "B"), cli_progress_vfs(prog, cli_get(cmd, &args, "A"), cli_get(cmd, &args, "B"))) != CLI_EXIT_OK) {
		side_close(&A);
		side_close(&B);
		cli_progress_free(prog);
		return CLI_EXIT_ERROR;
	}
	cli_progress_set_total(prog, cli_reader_bytes(A.r) + cli_reader_bytes(B.r));
	c.A = &A;
	c.B = &B;

	if (c.json) {
		fputs("{\"a\": ", stdout);
		jout_cstring(stdout, ckpt_reader_path(A.r));
		fputs(", \"b\": ", stdout);
		jout_cstring(stdout, ckpt_reader_path(B.r));
		fputs(", \"format_a\": ", stdout);
		jout_cstring(stdout, ckpt_reader_format(A.r));
		fputs(", \"format_b\": ", stdout);
		jout_cstring(stdout, ckpt_reader_format(B.r));
		fputs(", \"atol\": ", stdout);
		jout_double(stdout, c.atol);
		fputs(", \"rtol\": ", stdout);
		jout_double(stdout, c.rtol);
		fputs(", \"differences\": [", stdout);
	} else {
		printf("A: %s (%s, %zu entries)\nB: %s (%s, %zu entries)\n", cli_vis(ckpt_reader_path(A.r)),
			ckpt_reader_format(A.r), A.nsorted, cli_vis(ckpt_reader_path(B.r)), ckpt_reader_format(B.r), B.nsorted);
		if (c.atol == 0 && c.rtol == 0)
			printf("comparing exactly (bitwise)\n");
		else
			printf("comparing with |a - b| <= %g + %g * |b|\n", c.atol, c.rtol);
	}
	c.first = 1;

	/* by object path (canonical key) */
	for (i = 0; i < A.nsorted; i++) {
		keyed *hit = bsearch(&A.sorted[i], B.sorted, B.nsorted, sizeof(keyed), keyed_cmp);
		if (hit && !B.matched[hit->idx] && !A.matched[A.sorted[i].idx])
			diff_pair(&c, A.sorted[i].idx, hit->idx, A.sorted[i].key);
	}
	/* then what is left, by stored name (entries a graph could not place) */
	for (i = 0; i < A.nsorted; i++) {
		keyed *hit;
		if (A.matched[A.by_name[i].idx])
			continue;
		hit = bsearch(&A.by_name[i], B.by_name, B.nsorted, sizeof(keyed), keyed_cmp);
		if (hit && !B.matched[hit->idx])
			diff_pair(&c, A.by_name[i].idx, hit->idx, A.by_name[i].key);
	}

	cli_progress_done(prog);
	if (c.json)
		fputs("], \"only_in_a\": [", stdout);
	only_a = list_unmatched(&c, &A, "A");
	if (c.json)
		fputs("], \"only_in_b\": [", stdout);
	only_b = list_unmatched(&c, &B, "B");
	rc = (c.differ || only_a || only_b) ? CLI_EXIT_ERROR : CLI_EXIT_OK;
	if (c.json) {
		printf("], \"compared\": %zu, \"equal\": %s}\n", c.compared, rc == CLI_EXIT_OK ? "true" : "false");
	} else {
		printf("%s: %zu compared, %zu differ, %zu only in A, %zu only in B%s\n",
			rc == CLI_EXIT_OK ? "equal" : "DIFFERENT", c.compared, c.differ, only_a, only_b,
			c.errors ? " (with read errors)" : "");
	}
	fflush(stdout);
	side_close(&A);
	side_close(&B);
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

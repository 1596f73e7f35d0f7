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

static int side_open(side *s, const char *arg)
{
	size_t i;

	memset(s, 0, sizeof(*s));
	s->arg = arg;
	if (ckpt_reader_open(&s->r, arg, NULL) != CKPT_OK)
		return cli_report_last(arg, NULL);
	s->n = ckpt_reader_count(s->r);
	if (cli_canonical_keys(s->r, &s->keys) != CLI_EXIT_OK)
		return CLI_EXIT_ERROR;
	s->sorted = calloc(s->n ? s->n : 1, sizeof(keyed));
	s->matched = calloc(s->n ? s->n : 1, 1);
	if (!s->sorted || !s->matched)
		return cli_report(arg, NULL, -1, "out of memory");
	for (i = 0; i < s->n; i++) {
		if (strcmp(ckpt_reader_var(s->r, i)->name, CKPT_OBJECT_GRAPH_KEY) == 0)
			continue;
		s->sorted[s->nsorted].key = s->keys[i];
		s->sorted[s->nsorted].idx = i;
		s->nsorted++;
	}
	qsort(s->sorted, s->nsorted, sizeof(keyed), keyed_cmp);
	return CLI_EXIT_OK;
}

static void side_close(side *s)
{
	cli_keys_free(s->keys, s->n);
	free(s->sorted);
	free(s->matched);
	ckpt_reader_free(s->r);
}

/* One finding, printed as text or as a JSON array element. */
typedef struct diff_out {
	int json;
	int first;  /* no element printed yet in the current JSON array */
} diff_out;

static void begin_item(diff_out *o)
{
	if (o->json)
		fputs(o->first ? "" : ", ", stdout);
	o->first = 0;
}

static void print_names(const side *a, size_t ia, const side *b, size_t ib)
{
	const char *na = ckpt_reader_var(a->r, ia)->name, *nb = ckpt_reader_var(b->r, ib)->name;
	const char *key = a->keys[ia];

	if (strcmp(na, key) != 0 || strcmp(nb, key) != 0)
		printf("  (A: %s; B: %s)", na, nb);
}

static int cmd_diff(const cli_cmd *cmd, int argc, char **argv)
{
	cli_args args;
	side A, B;
	double atol = 0, rtol = 0;
	const char *s;
	int json, rc;
	size_t i, compared = 0, differ = 0, only_a = 0, only_b = 0, errors = 0;
	diff_out o;

	rc = cli_parse(cmd, argc, argv, &args);
	if (rc == CLI_PARSE_HELP)
		return CLI_EXIT_OK;
	if (rc != CLI_EXIT_OK)
		return rc;
	if ((s = cli_get(cmd, &args, "atol")) && cli_parse_double(cmd, "atol", s, &atol) != CLI_EXIT_OK)
		return CLI_EXIT_USAGE;
	if ((s = cli_get(cmd, &args, "rtol")) && cli_parse_double(cmd, "rtol", s, &rtol) != CLI_EXIT_OK)
		return CLI_EXIT_USAGE;
	json = cli_get(cmd, &args, "json") != NULL;

	memset(&B, 0, sizeof(B));
	if (side_open(&A, cli_get(cmd, &args, "A")) != CLI_EXIT_OK) {
		side_close(&A);
		return CLI_EXIT_ERROR;
	}
	if (side_open(&B, cli_get(cmd, &args, "B")) != CLI_EXIT_OK) {
		side_close(&A);
		side_close(&B);
		return CLI_EXIT_ERROR;
	}

	o.json = json;
	if (json) {
		fputs("{\"a\": ", stdout);
		jout_cstring(stdout, ckpt_reader_path(A.r));
		fputs(", \"b\": ", stdout);
		jout_cstring(stdout, ckpt_reader_path(B.r));
		fputs(", \"format_a\": ", stdout);
		jout_cstring(stdout, ckpt_reader_format(A.r));
		fputs(", \"format_b\": ", stdout);
		jout_cstring(stdout, ckpt_reader_format(B.r));
		fputs(", \"atol\": ", stdout);
		jout_double(stdout, atol);
		fputs(", \"rtol\": ", stdout);
		jout_double(stdout, rtol);
		fputs(", \"differences\": [", stdout);
	} else {
		printf("A: %s (%s, %zu entries)\nB: %s (%s, %zu entries)\n", ckpt_reader_path(A.r),
			ckpt_reader_format(A.r), A.nsorted, ckpt_reader_path(B.r), ckpt_reader_format(B.r), B.nsorted);
		if (atol == 0 && rtol == 0)
			printf("comparing exactly (bitwise)\n");
		else
			printf("comparing with |a - b| <= %g + %g * |b|\n", atol, rtol);
	}
	o.first = 1;

	for (i = 0; i < A.nsorted; i++) {
		keyed *hit = bsearch(&A.sorted[i], B.sorted, B.nsorted, sizeof(keyed), keyed_cmp);
		size_t ia = A.sorted[i].idx, ib;
		const ckpt_var_info *va, *vb;
		char sa[256], sb[256];
		ckpt_tensor *ta = NULL, *tb = NULL;
		cmp_result res;

		if (!hit || B.matched[hit->idx])
			continue; /* reported as only in A below */
		ib = hit->idx;
		B.matched[ib] = 1;
		A.matched[ia] = 1;
		compared++;
		va = ckpt_reader_var(A.r, ia);
		vb = ckpt_reader_var(B.r, ib);
		ckpt_shape_format(&va->shape, sa, sizeof(sa));
		ckpt_shape_format(&vb->shape, sb, sizeof(sb));
		if (va->dtype != vb->dtype) {
			differ++;
			begin_item(&o);
			if (json) {
				fputs("{\"name\": ", stdout);
				jout_cstring(stdout, A.keys[ia]);
				fputs(", \"kind\": \"dtype\", \"a\": ", stdout);
				jout_cstring(stdout, ckpt_dtype_name(va->dtype));
				fputs(", \"b\": ", stdout);
				jout_cstring(stdout, ckpt_dtype_name(vb->dtype));
				fputc('}', stdout);
			} else {
				printf("dtype differs: %s: %s vs %s", A.keys[ia], ckpt_dtype_name(va->dtype),
					ckpt_dtype_name(vb->dtype));
				print_names(&A, ia, &B, ib);
				putchar('\n');
			}
			continue;
		}
		if (!ckpt_shape_equal(&va->shape, &vb->shape)) {
			differ++;
			begin_item(&o);
			if (json) {
				fputs("{\"name\": ", stdout);
				jout_cstring(stdout, A.keys[ia]);
				fputs(", \"kind\": \"shape\", \"a\": ", stdout);
				jout_shape(stdout, &va->shape);
				fputs(", \"b\": ", stdout);
				jout_shape(stdout, &vb->shape);
				fputc('}', stdout);
			} else {
				printf("shape differs: %s: %s vs %s", A.keys[ia], sa, sb);
				print_names(&A, ia, &B, ib);
				putchar('\n');
			}
			continue;
		}
		if (ckpt_reader_read(A.r, ia, &ta) != CKPT_OK || ckpt_reader_read(B.r, ib, &tb) != CKPT_OK) {
			cli_report_last(ta ? ckpt_reader_path(B.r) : ckpt_reader_path(A.r), ta ? vb->name : va->name);
			errors++;
			differ++;
			begin_item(&o);
			if (json) {
				fputs("{\"name\": ", stdout);
				jout_cstring(stdout, A.keys[ia]);
				fputs(", \"kind\": \"error\", \"message\": ", stdout);
				jout_cstring(stdout, ckpt_error_last()->message);
				fputc('}', stdout);
			} else {
				printf("unreadable: %s (see error)\n", A.keys[ia]);
			}
			ckpt_tensor_free(ta);
			ckpt_tensor_free(tb);
			continue;
		}
		compare_tensors(ta, tb, atol, rtol, &res);
		ckpt_tensor_free(ta);
		ckpt_tensor_free(tb);
		if (res.equal)
			continue;
		differ++;
		begin_item(&o);
		if (json) {
			fputs("{\"name\": ", stdout);
			jout_cstring(stdout, A.keys[ia]);
			printf(", \"kind\": \"values\", \"elements\": %" PRIu64 ", \"differing\": %" PRIu64
				", \"max_abs\": ", res.elements, res.differing);
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
			printf("values differ: %s: %" PRIu64 " of %" PRIu64 " elements", A.keys[ia], res.differing,
				res.elements);
			if (res.numeric)
				printf(", max abs diff %.9g, max rel diff %.9g", res.max_abs, res.max_rel);
			print_names(&A, ia, &B, ib);
			putchar('\n');
		}
	}

	if (json)
		fputs("], \"only_in_a\": [", stdout);
	o.first = 1;
	for (i = 0; i < A.nsorted; i++) {
		if (A.matched[A.sorted[i].idx])
			continue;
		only_a++;
		begin_item(&o);
		if (json)
			jout_cstring(stdout, A.sorted[i].key);
		else
			printf("only in A: %s\n", A.sorted[i].key);
	}
	if (json)
		fputs("], \"only_in_b\": [", stdout);
	o.first = 1;
	for (i = 0; i < B.nsorted; i++) {
		if (B.matched[B.sorted[i].idx])
			continue;
		only_b++;
		begin_item(&o);
		if (json)
			jout_cstring(stdout, B.sorted[i].key);
		else
			printf("only in B: %s\n", B.sorted[i].key);
	}
	rc = (differ || only_a || only_b) ? CLI_EXIT_ERROR : CLI_EXIT_OK;
	if (json) {
		printf("], \"compared\": %zu, \"equal\": %s}\n", compared, rc == CLI_EXIT_OK ? "true" : "false");
	} else {
		printf("%s: %zu compared, %zu differ, %zu only in A, %zu only in B%s\n",
			rc == CLI_EXIT_OK ? "equal" : "DIFFERENT", compared, differ, only_a, only_b,
			errors ? " (with read errors)" : "");
	}
	fflush(stdout);
	side_close(&A);
	side_close(&B);
	return rc;
}

const cli_cmd cli_cmd_diff = {
	"diff", cmd_diff, "Compare two checkpoints variable by variable",
	diff_opts,
	"Matches entries by object path (TF checkpoint keys; Keras files through\n"
	"their object graph), falling back to stored names, and reports entries\n"
	"only in A or only in B, dtype and shape differences, and the maximum\n"
	"absolute and relative difference of values. The object-graph entry is\n"
	"structure and is not compared. Exact (bitwise) by default; with --atol /\n"
	"--rtol an element matches when |a - b| <= atol + rtol * |b|.\n"
	"Exit status 0 when equal, 1 when not."
};

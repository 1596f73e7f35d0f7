/*
 * The opt-in divergence check (ckpt_checkpoint_options.check_mirrored): at
 * save, compare every copy of every mirrored variable with copy 0. A save
 * writes copy 0 only, so a replica-dependent update (a step that uses the
 * replica id, an un-reduced gradient) would otherwise be saved silently as
 * replica 0's view. Sync-on-read variables differ by design and are skipped.
 */
#include <stdio.h>
#include <string.h>
#include "checkpoint_internal.h"
#include "model/variable_internal.h"
#include "model/strategy_impl.h"

/* Index of the first element where copies a and b differ (fixed-size dtypes), or -1. */
static int64_t first_diff(const ckpt_variable *v, const void *a, const void *b)
{
	size_t nb = (size_t)ckpt_variable_nbytes(v), es = ckpt_dtype_size(ckpt_variable_dtype(v));
	if (nb == 0 || memcmp(a, b, nb) == 0)
		return -1;
	if (es == 0)
		es = 1;
	for (size_t i = 0; i < nb; i += es)
		if (memcmp((const char *)a + i, (const char *)b + i, es) != 0)
			return (int64_t)(i / es);
	return -1;
}

static int strings_differ(const ckpt_variable *v, int r)
{
	const ckpt_bytes *a = ckpt_variable_replica_data(v, 0), *b = ckpt_variable_replica_data(v, r);
	uint64_t n;
	if (ckpt_shape_num_elements(&n, ckpt_variable_shape(v)) < 0)
		return 1;
	for (uint64_t i = 0; i < n; i++)
		if (a[i].len != b[i].len || (a[i].len > 0 && memcmp(a[i].data, b[i].data, (size_t)a[i].len) != 0))
			return 1;
	return 0;
}

/* "0.5 vs 0.25" for the element at `i` of copies a and b. */
static void format_values(char *out, size_t n, const ckpt_variable *v, const void *a, const void *b, int64_t i)
{
	switch (ckpt_variable_dtype(v)) {
	case CKPT_DT_FLOAT: {
		float x, y;
		memcpy(&x, (const float *)a + i, sizeof(x));
		memcpy(&y, (const float *)b + i, sizeof(y));
		snprintf(out, n, ": %.9g vs %.9g", (double)x, (double)y);
		break;
	}
	case CKPT_DT_DOUBLE: {
		double x, y;
		memcpy(&x, (const double *)a + i, sizeof(x));
		memcpy(&y, (const double *)b + i, sizeof(y));
		snprintf(out, n, ": %.17g vs %.17g", x, y);
		break;
	}
	case CKPT_DT_INT32: {
		int32_t x, y;
		memcpy(&x, (const int32_t *)a + i, sizeof(x));
		memcpy(&y, (const int32_t *)b + i, sizeof(y));
		snprintf(out, n, ": %ld vs %ld", (long)x, (long)y);
		break;
	}
	case CKPT_DT_INT64: {
		int64_t x, y;
		memcpy(&x, (const int64_t *)a + i, sizeof(x));
		memcpy(&y, (const int64_t *)b + i, sizeof(y));
		snprintf(out, n, ": %lld vs %lld", (long long)x, (long long)y);
		break;
	}
	default:
		out[0] = '\0';
	}
}

/* Host views of copies 0 and r: the copies themselves, or (device memory) copies made through the provider. */
static int host_views(const ckpt_variable *v, int r, const void **a, const void **b, void **owned)
{
	*owned = NULL;
	if (!ckpt__variable_on_device(v)) {
		*a = ckpt_variable_replica_data(v, 0);
		*b = ckpt_variable_replica_data(v, r);
		return CKPT_OK;
	}
	size_t nb = (size_t)ckpt_variable_nbytes(v);
	unsigned char *buf = ckpt__malloc(2 * nb + 1);
	if (!buf)
		return ckpt__fail(CKPT_ENOMEM, NULL, ckpt_variable_name(v), -1,
			"divergence check of '%s': no memory for two copies of %zu bytes", ckpt_variable_name(v), nb);
	int rc = ckpt__variable_read_copy(v, 0, buf);
	if (rc == CKPT_OK)
		rc = ckpt__variable_read_copy(v, r, buf + nb);
	if (rc < 0) {
		ckpt__free(buf);
		return rc;
	}
	*a = buf;
	*b = buf + nb;
	*owned = buf;
	return CKPT_OK;
}

static int check_one(const ckpt_tracked_variable *tv, const char *path)
{
	const ckpt_variable *v = tv->variable;
	int n = ckpt_variable_num_replicas(v), first = -1, count = 0;
	int64_t elem = -1;
	char reps[160] = "";
	size_t used = 0;
	int is_str = ckpt_variable_dtype(v) == CKPT_DT_STRING;
	char vals[96] = ""; /* the first difference's values */
	for (int r = 1; r < n; r++) {
		int64_t d = -1;
		int differs;
		if (is_str) {
			differs = strings_differ(v, r);
		} else {
			const void *a = NULL, *b = NULL;
			void *owned;
			CKPT_TRY(host_views(v, r, &a, &b, &owned));
			differs = (d = first_diff(v, a, b)) >= 0;
			if (differs && first < 0)
				format_values(vals, sizeof(vals), v, a, b, d);
			ckpt__free(owned);
		}
		if (!differs)
			continue;
		if (first < 0) {
			first = r;
			elem = d;
		}
		count++;
		/* name up to a dozen replicas, then count the rest */
		if (count <= 12 && used < sizeof(reps))
			used += (size_t)snprintf(reps + used, sizeof(reps) - used, "%s%d", count > 1 ? ", " : "", r);
	}
	if (first < 0)
		return CKPT_OK;
	char detail[256] = ""; /* vals (96) and the text around it */
	if (!is_str && elem >= 0) {
		snprintf(detail, sizeof(detail), "; first difference at element %lld (replica 0 vs %d%s)", (long long)elem,
			first, vals);
	}
	return ckpt__fail(CKPT_ESCOPE, path, ckpt_variable_name(v), -1,
		"mirrored variable '%s' (%s) diverged under %s: replica%s %s%s differ%s from replica 0%s. "
		"A save writes replica 0's copy only; look for an update that depends on the replica "
		"(nothing was saved: check_mirrored is on)",
		ckpt_variable_name(v), tv->key, ckpt_strategy_describe(ckpt_variable_strategy(v)),
		count > 1 ? "s" : "", reps, count > 12 ? " and more" : "", count > 1 ? "" : "s", detail);
}

int ckpt__checkpoint_check_mirrored(ckpt_checkpoint *ck, const char *path)
{
	if (!ck || !ck->opts.check_mirrored)
		return CKPT_OK;
	ckpt_tracked_list *list;
	CKPT_TRY(ckpt_checkpoint_variables(&list, ck));
	int rc = CKPT_OK;
	for (size_t i = 0; i < ckpt_tracked_list_num_entries(list) && rc == CKPT_OK; i++) {
		const ckpt_tracked_variable *tv = ckpt_tracked_list_get(list, i);
		if (ckpt_variable_kind(tv->variable) == CKPT_VAR_MIRRORED && ckpt_variable_num_replicas(tv->variable) > 1)
			rc = check_one(tv, path);
	}
	ckpt_tracked_list_free(list);
	return rc;
}

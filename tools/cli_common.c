/*
 * Helpers shared by the `ckpt` subcommands: error lines, missing data
 * files, and the canonical (object-path) key of each stored entry.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

/* 1 when the UTF-8 sequence at s (n bytes) is valid and not a C1 control; sets *len. */
static int printable_utf8(const unsigned char *s, size_t n, size_t *len)
{
	size_t l, i;
	uint32_t c;

	if ((s[0] & 0xe0) == 0xc0) {
		l = 2;
		c = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		l = 3;
		c = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		l = 4;
		c = s[0] & 0x07;
	} else {
		return 0;
	}
	if (l > n)
		return 0;
	for (i = 1; i < l; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if ((l == 2 && c < 0xa0) || (l == 3 && c < 0x800) || (l == 4 && c < 0x10000) ||
	    (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		return 0;
	*len = l;
	return 1;
}

const char *cli_vis(const char *str)
{
	static char bufs[8][4 * CKPT_MAX_NAME_LEN + 8];
	static unsigned next;
	const unsigned char *s = (const unsigned char *)str;
	size_t n, i = 0, o = 0, l;
	char *out;

	if (!str)
		return "(null)";
	n = strlen(str);
	for (i = 0; i < n; i++) {
		if (s[i] < 0x20 || s[i] == 0x7f)
			break;
		if (s[i] >= 0x80) {
			if (!printable_utf8(s + i, n - i, &l))
				break;
			i += l - 1;
		}
	}
	if (i == n)
		return str; /* nothing to escape: the common case */
	out = bufs[next++ % 8];
	for (i = 0; i < n && o + 5 < sizeof(bufs[0]); ) {
		if (s[i] >= 0x20 && s[i] < 0x7f) {
			out[o++] = (char)s[i++];
		} else if (s[i] >= 0x80 && printable_utf8(s + i, n - i, &l)) {
			memcpy(out + o, s + i, l);
			o += l;
			i += l;
		} else {
			o += (size_t)snprintf(out + o, 5, "\\x%02x", s[i++]);
		}
	}
	out[o] = '\0';
	return out;
}

/* "ckpt: <path>: variable '<v>' at offset <n>: <msg>", laid out by the library's
 * formatter so the two agree (it says the name once when msg quotes it). */
static void error_line(const char *path, const char *var, int64_t offset, const char *msg)
{
	cli_progress_clear_line(); /* an error line never lands after a progress line */
	static char line[4 * CKPT_MAX_NAME_LEN + 4096];
	ckpt_error e;

	memset(&e, 0, sizeof e);
	e.code = CKPT_ERROR;
	e.message = msg;
	e.path = path;
	e.variable = var;
	e.offset = offset;
	ckpt_error_format(&e, line, sizeof line);
	fprintf(stderr, "ckpt: %s\n", cli_vis(line));
}

int cli_report_last(const char *path, const char *var)
{
	const ckpt_error *e = ckpt_error_last();
	const char *msg = e->message && *e->message ? e->message : ckpt_status_name(e->code);

	error_line(e->path ? e->path : path, e->variable ? e->variable : var, e->offset, msg);
	return CLI_EXIT_ERROR;
}

int cli_report(const char *path, const char *var, int64_t offset, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	error_line(path, var, offset, msg);
	return CLI_EXIT_ERROR;
}

int cli_var_in_missing_shard(const ckpt_reader *r, const ckpt_var_info *v)
{
	int exists = 1;

	if (v->shard < 0 || v->shard >= ckpt_reader_num_shards(r))
		return 0;
	if (!ckpt_reader_shard_path(r, v->shard, &exists))
		return 0;
	return !exists;
}

int cli_report_missing_shards(const ckpt_reader *r)
{
	int s, n = ckpt_reader_num_shards(r), missing = 0;

	for (s = 0; s < n; s++) {
		int exists = 1;
		const char *p = ckpt_reader_shard_path(r, s, &exists);
		size_t i, count = 0;

		if (!p || exists)
			continue;
		for (i = 0; i < ckpt_reader_num_entries(r); i++)
			if (ckpt_reader_var(r, i)->shard == s)
				count++;
		cli_report(p, NULL, -1, "missing data file (shard %d of %d, %zu entries listed by the index)", s, n, count);
		missing++;
	}
	return missing;
}

static char *dup_str(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = malloc(n);

	if (p)
		memcpy(p, s, n);
	return p;
}

void cli_keys_free(char **keys, size_t n)
{
	size_t i;

	if (!keys)
		return;
	for (i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
}

int cli_attr_find(const ckpt_reader *r, const ckpt_og_attr *a, size_t *idx)
{
	int found = (a->checkpoint_key && ckpt_reader_find(idx, r, a->checkpoint_key) == CKPT_OK) ||
		(a->full_name && *a->full_name && ckpt_reader_find(idx, r, a->full_name) == CKPT_OK);

	ckpt_error_clear();
	return found;
}

/*
 * TensorBundle: the checkpoint key of an attribute is the stored name.
 * Keras files: the reader synthesizes the graph with TF-style checkpoint
 * keys and full_name = the dataset path, so the entry is found through
 * full_name and gets the TF key: a Keras file and a TF checkpoint of the
 * same model state line up.
 */
int cli_canonical_keys(const ckpt_reader *r, char ***out)
{
	const ckpt_object_graph *g = ckpt_reader_object_graph(r);
	size_t n = ckpt_reader_num_entries(r), i, k;
	char **keys = calloc(n ? n : 1, sizeof(char *));

	if (!keys)
		return cli_report(ckpt_reader_path(r), NULL, -1, "out of memory");
	for (i = 0; g && i < g->nnodes; i++) {
		const ckpt_og_node *node = &g->nodes[i];
		for (k = 0; k < node->nattrs; k++) {
			const ckpt_og_attr *a = &node->attrs[k];
			size_t idx;

			if (!a->checkpoint_key || !*a->checkpoint_key || !cli_attr_find(r, a, &idx) || keys[idx])
				continue;
			keys[idx] = dup_str(a->checkpoint_key);
			if (!keys[idx]) {
				cli_keys_free(keys, n);
				return cli_report(ckpt_reader_path(r), NULL, -1, "out of memory");
			}
		}
	}
	for (i = 0; i < n; i++) {
		if (!keys[i])
			keys[i] = dup_str(ckpt_reader_var(r, i)->name);
		if (!keys[i]) {
			cli_keys_free(keys, n);
			return cli_report(ckpt_reader_path(r), NULL, -1, "out of memory");
		}
	}
	*out = keys;
	return CLI_EXIT_OK;
}

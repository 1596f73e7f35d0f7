/*
 * The TF keys libckpt's Keras reader gives HDF5 datasets (its synthesized
 * object graph: full_name = dataset, checkpoint_key = TF key), against the
 * keys tf.keras itself writes for the same file: tests/oracles/
 * tf_keras_keys.py loads each fixture with tf_keras (Keras 2) and saves it
 * in the TF format. Per fixture, every "KEY crc32-of-value" libckpt gives
 * is one tf.keras writes (under each key the dataset tf.keras put there),
 * and tf.keras writes nothing else but optimizer hyperparameters the HDF5
 * file does not store (tf.keras makes them from the config).
 *
 * Fixtures: the Keras 2 / tf.keras HDF5 models tf_keras 2.21 can load. Not
 * here: the Keras 1.2.2 files (tf_keras cannot build their LSTM configs),
 * the Keras 2.0.9 Lambda model (loading it would run its code), weights-only
 * files (no model to load), and Keras 3 files (tf_keras cannot read their
 * configs; Keras 3 itself names TF keys differently).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "keras_test.h"

static const char *const fixtures[] = {
	"keras/dl4j-test-resources__keras2.0.6_lstm_fullmodel_rmsprop.h5",
	"keras/dl4j-test-resources__keras2.1.3_cnn_batchnorm.h5",
	"keras/dl4j-test-resources__tfkeras2.4.0_embedding_conv1d_adam.hdf5",
	"keras/tiny__tfkeras2.4.0_resnet_batchnorm_adam.h5",
};
#define NFIX (sizeof(fixtures) / sizeof(fixtures[0]))

static int cmp_lines(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* libckpt's "KEY\t0xCRC\n" lines for `path`, sorted, as one string. */
static char *ckpt_keys(const char *path, size_t *nkeys)
{
	ckpt_reader *r = kt_open(path);
	const ckpt_object_graph *g = ckpt_reader_object_graph(r);
	cr_assert_not_null(g, "%s: no object graph", path);
	size_t n = 0, cap = 16, len = 1;
	char **lines = malloc(cap * sizeof(*lines));
	for (size_t i = 0; i < g->nnodes; i++)
		for (size_t j = 0; j < g->nodes[i].nattrs; j++) {
			const ckpt_og_attr *a = &g->nodes[i].attrs[j];
			size_t k;
			ckpt_tensor *t = NULL;
			cr_assert_eq(ckpt_reader_find(&k, r, a->full_name), CKPT_OK, "%s: %s", path, a->full_name);
			cr_assert_eq(ckpt_reader_read(&t, r, k), CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
			if (n == cap)
				lines = realloc(lines, (cap *= 2) * sizeof(*lines));
			lines[n] = malloc(strlen(a->checkpoint_key) + 16);
			sprintf(lines[n], "%s\t0x%08lx\n", a->checkpoint_key, crc32(0L, t->data, (uInt)t->nbytes));
			len += strlen(lines[n++]);
			ckpt_tensor_free(t);
		}
	qsort(lines, n, sizeof(*lines), cmp_lines);
	char *out = malloc(len);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		strcat(out, lines[i]);
		free(lines[i]);
	}
	free(lines);
	ckpt_reader_free(r);
	*nkeys = n;
	return out;
}

/* `line` (with its newline) is one of the lines of `listing`. */
static int has_line(const char *listing, const char *line)
{
	for (const char *p = listing; (p = strstr(p, line)) != NULL; p++)
		if (p == listing || p[-1] == '\n')
			return 1;
	return 0;
}

Test(keras_tf_keys, graph_keys_are_the_ones_tf_keras_writes, .timeout = 300)
{
	char cmd[8192];
	int at = snprintf(cmd, sizeof(cmd), "'%s' '%s/tests/oracles/tf_keras_keys.py'", ts_oracle_python(),
		CKPT_SOURCE_DIR);
	for (size_t i = 0; i < NFIX; i++)
		at += snprintf(cmd + at, sizeof(cmd) - (size_t)at, " '%s'", ts_fixture(fixtures[i]));
	ts_run_result res;
	cr_assert_eq(ts_run_sh(&res, cmd), 0);
	ts_assert_exit(&res, 0, "tf_keras_keys.py: %s", res.err);
	for (size_t i = 0; i < NFIX; i++) {
		/* this fixture's section of the oracle's output */
		char head[2048];
		snprintf(head, sizeof(head), "== %s\n", ts_fixture(fixtures[i]));
		char *sec = strstr(res.out, head);
		cr_assert_not_null(sec, "no section for %s:\n%s", fixtures[i], res.out);
		sec += strlen(head);
		char *end = strstr(sec, "\n== ");
		char *want = strndup(sec, end ? (size_t)(end - sec) + 1 : strlen(sec));
		size_t nkeys;
		char *got = ckpt_keys(ts_fixture(fixtures[i]), &nkeys);
		cr_assert_gt(nkeys, 5, "%s", fixtures[i]);
		/* every key libckpt gives is one tf.keras writes, holding the same value */
		for (char *l = got; *l;) {
			char *eol = strchr(l, '\n');
			char line[1024];
			snprintf(line, sizeof(line), "%.*s", (int)(eol - l + 1), l);
			cr_assert(has_line(want, line), "%s: libckpt maps a dataset to %s which tf.keras does not write (or with other bytes):\n%s",
				fixtures[i], line, want);
			l = eol + 1;
		}
		/*
		 * and every key tf.keras writes is libckpt's, except optimizer
		 * hyperparameters the file does not store (tf.keras makes them from
		 * the config): "optimizer/<name>/.ATTRIBUTES/VARIABLE_VALUE", one level
		 */
		for (char *l = want; *l;) {
			char *eol = strchr(l, '\n');
			char line[1024];
			snprintf(line, sizeof(line), "%.*s", (int)(eol - l + 1), l);
			int mapped = has_line(got, line);
			char *slash = strchr(line + strlen("optimizer/"), '/');
			int hyper = strncmp(line, "optimizer/", 10) == 0 && slash &&
				strncmp(slash, "/.ATTRIBUTES/VARIABLE_VALUE\t", 28) == 0;
			cr_assert(mapped || hyper, "%s: tf.keras writes %s, libckpt maps no dataset to it", fixtures[i], line);
			l = eol + 1;
		}
		free(got);
		free(want);
	}
	ts_run_free(&res);
}

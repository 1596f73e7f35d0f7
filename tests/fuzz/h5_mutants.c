/* The HDF5 metadata mutation campaign (h5_mutants.h). Public API only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <archive.h>
#include <archive_entry.h>
#include "ckpt/ckpt.h"
#include "h5_mutants.h"

#ifndef CKPT_H5M_FIXTURES_DIR
#define CKPT_H5M_FIXTURES_DIR CKPT_SHARED_DIR "/fixtures/keras"
#endif

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = NULL;
	long len;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
		(b = malloc((size_t)len)) && fread(b, 1, (size_t)len, f) != (size_t)len) {
		free(b);
		b = NULL;
	}
	if (b)
		*n = (size_t)len;
	fclose(f);
	return b;
}

/* model.weights.h5 of a .keras archive (libarchive, from memory). */
static uint8_t *weights_member(const uint8_t *zip, size_t zn, size_t *n)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	uint8_t *out = NULL;
	archive_read_support_format_zip(a);
	if (archive_read_open_memory(a, zip, zn) == ARCHIVE_OK)
		while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
			la_int64_t sz = archive_entry_size(e);
			if (strcmp(archive_entry_pathname(e), "model.weights.h5") != 0 || sz <= 0)
				continue;
			if ((out = malloc((size_t)sz)) && archive_read_data(a, out, (size_t)sz) != (la_ssize_t)sz) {
				free(out);
				out = NULL;
			}
			*n = (size_t)sz;
			break;
		}
	archive_read_free(a);
	return out;
}

static ckpt_vfs *mem_with(const uint8_t *buf, size_t n)
{
	ckpt_vfs *vfs = NULL;
	if (ckpt_vfs_memory_new(&vfs) != CKPT_OK)
		abort();
	if (ckpt_vfs_memory_put(vfs, "m/base.h5", buf, n) != CKPT_OK)
		abort();
	return vfs;
}

int ckpt_h5m_load(ckpt_h5m_base *b, const char *path)
{
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	ckpt_reader *r = NULL;
	uint8_t *data, *isdata;
	const char *slash = strrchr(path, '/');
	size_t n = 0, i, len = strlen(path);
	ckpt_vfs *vfs;
	memset(b, 0, sizeof(*b));
	if (!(data = slurp(path, &n)))
		return -1;
	if (len > 6 && strcmp(path + len - 6, ".keras") == 0) {
		uint8_t *m = weights_member(data, n, &n);
		free(data);
		if (!(data = m))
			return -1;
	}
	b->bytes = data;
	b->n = n;
	snprintf(b->name, sizeof(b->name), "%s", slash ? slash + 1 : path);
	/* The pristine file's contiguous data extents, as the reader lists them. */
	vfs = mem_with(data, n);
	o.vfs = vfs;
	if (ckpt_reader_open(&r, "m/base.h5", &o) != CKPT_OK) {
		ckpt_vfs_free(vfs);
		return -1;
	}
	isdata = calloc(n, 1);
	b->meta = malloc(n * sizeof(size_t));
	if (!isdata || !b->meta)
		abort();
	for (i = 0; i < ckpt_reader_count(r); i++) {
		const ckpt_var_info *v = ckpt_reader_var(r, i);
		if (v->offset >= 0 && (uint64_t)v->offset + v->nbytes <= n)
			memset(isdata + v->offset, 1, (size_t)v->nbytes);
	}
	ckpt_reader_free(r);
	ckpt_vfs_free(vfs);
	for (i = 0; i < n; i++)
		if (!isdata[i])
			b->meta[b->nmeta++] = i;
	free(isdata);
	return 0;
}

void ckpt_h5m_free(ckpt_h5m_base *b)
{
	free(b->bytes);
	free(b->meta);
	memset(b, 0, sizeof(*b));
}

void ckpt_h5m_apply(const ckpt_h5m_base *b, uint8_t *buf, size_t mi, int kind, uint64_t value)
{
	size_t off = b->meta[mi % b->nmeta], k;
	for (k = 0; k < 8 && off + k < b->n; k++) {
		uint8_t v = (uint8_t)(value >> (8 * k));
		switch (kind & 3) {
		case CKPT_H5M_ONES: buf[off + k] = 0xff; break;
		case CKPT_H5M_ZEROS: buf[off + k] = 0; break;
		case CKPT_H5M_VALUE: buf[off + k] = v; break;
		default: buf[off + k] ^= v; break;
		}
	}
}

static void die(const char *what, int rc)
{
	const ckpt_error *e = ckpt_error_last();
	fprintf(stderr, "h5 mutant: contract violation: %s (rc=%d, code=%d, path=%s, message=\"%s\")\n", what, rc, e->code,
		e->path ? e->path : "(null)", e->message ? e->message : "(null)");
	abort();
}

/* A failure: negative status, a message, the file named. */
static int refused(int rc)
{
	const ckpt_error *e = ckpt_error_last();
	if (e->code >= 0 || e->code != rc || !e->message || !e->message[0])
		die("a failure without its error", rc);
	if (!e->path || !strstr(e->path, "m/mutant.h5"))
		die("an error that does not name the file", rc);
	return strncmp(e->message, "libhdf5 ", 8) == 0 ? CKPT_H5M_CONTAINED : CKPT_H5M_REFUSED;
}

int ckpt_h5m_run(const uint8_t *buf, size_t n)
{
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	ckpt_reader *r = NULL;
	ckpt_vfs *vfs = NULL;
	size_t i;
	int rc, out = CKPT_H5M_OPENED;
	if (ckpt_vfs_memory_new(&vfs) != CKPT_OK || ckpt_vfs_memory_put(vfs, "m/mutant.h5", buf, n) != CKPT_OK)
		abort();
	o.vfs = vfs;
	/* A mutant may declare anything: keep what one read may allocate small. */
	o.memory_budget = 256u << 20;
	ckpt_error_clear();
	rc = ckpt_reader_open(&r, "m/mutant.h5", &o);
	if (rc < 0) {
		out = refused(rc);
		goto done;
	}
	for (i = 0; i < ckpt_reader_count(r); i++) {
		const ckpt_var_info *v = ckpt_reader_var(r, i);
		void *dst = malloc(v->nbytes ? (size_t)v->nbytes : 1);
		if (!dst)
			abort();
		ckpt_error_clear();
		rc = ckpt_reader_read_into(r, i, dst, (size_t)v->nbytes);
		free(dst);
		if (rc < 0) {
			out = refused(rc);
			break;
		}
	}
done:
	ckpt_reader_free(r);
	ckpt_vfs_free(vfs);
	return out;
}

/* ---- libFuzzer entry ---- */

static const char *const fuzz_bases[] = {
	"dl4j-test-resources__keras1.2.2_bidirectional_lstm.h5",
	"dl4j-test-resources__keras1.2.2_lstm_tf_fullmodel.h5",
	"dl4j-test-resources__keras1.2.2_lstm_tf_weightsonly.h5",
	"dl4j-test-resources__keras2.0.6_lstm_fullmodel_rmsprop.h5",
	"dl4j-test-resources__keras2.0.6_lstm_weightsonly.h5",
	"dl4j-test-resources__keras2.0.9_sequential_lambda.h5",
	"dl4j-test-resources__keras2.1.3_cnn_batchnorm.h5",
	"dl4j-test-resources__tfkeras2.4.0_embedding_conv1d_adam.hdf5",
	"hls4ml__tfkeras2.11.0_conv1d_weightsonly.h5",
	"tiny__keras3.7.0_legacy_h5_resnet_adam.h5",
	"tiny__tfkeras2.4.0_resnet_batchnorm_adam.h5",
	"synthetic/SYNTHETIC_keras3_float16.weights.h5",
	"synthetic/SYNTHETIC_legacy_chunked_layer_names.h5",
	"FlowNet-ANN__keras3.9.2_mlp_adam.keras",
	"keras__keras3.15.0_nested_container.keras",
	"keras__keras3.8.0_masking_lstm_mlx.keras",
};
#define NBASES (sizeof(fuzz_bases) / sizeof(fuzz_bases[0]))

static ckpt_h5m_base bases[NBASES];
static int loaded;

void ckpt_fuzz_keras_h5_mutants_init(void)
{
	size_t at;
	if (!loaded) {
		for (at = 0; at < NBASES; at++) {
			char p[4096];
			snprintf(p, sizeof(p), "%s/%s", CKPT_H5M_FIXTURES_DIR, fuzz_bases[at]);
			if (ckpt_h5m_load(&bases[at], p) != 0) {
				fprintf(stderr, "h5 mutant: cannot load base %s\n", p);
				abort();
			}
		}
		loaded = 1;
	}
}

int ckpt_fuzz_keras_h5_mutants(const uint8_t *data, size_t size)
{
	const ckpt_h5m_base *b;
	uint8_t *buf;
	size_t at;
	ckpt_fuzz_keras_h5_mutants_init();
	if (size < 1)
		return 0;
	b = &bases[data[0] % NBASES];
	if (!(buf = malloc(b->n)))
		abort();
	memcpy(buf, b->bytes, b->n);
	for (at = 1; at + 13 <= size; at += 13) {
		uint32_t mi = (uint32_t)data[at] | (uint32_t)data[at + 1] << 8 | (uint32_t)data[at + 2] << 16 |
			(uint32_t)data[at + 3] << 24;
		uint64_t v = 0;
		int k;
		for (k = 7; k >= 0; k--)
			v = v << 8 | data[at + 5 + k];
		ckpt_h5m_apply(b, buf, mi, data[at + 4], v);
	}
	(void)ckpt_h5m_run(buf, b->n);
	free(buf);
	return 0;
}

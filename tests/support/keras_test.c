/* keras_test: the bodies of the helpers declared in keras_test.h. */
#include "keras_test.h"

/* Pull both Keras backends into the static link (reader.c references them weakly). */
const ckpt_format *const kt_backends[2] = { &ckpt_format_keras_h5, &ckpt_format_keras_archive };

const kt_fixture kt_fixtures[] = {
	{ "keras/dl4j-test-resources__keras1.2.2_bidirectional_lstm.h5", "keras-h5-legacy" },
	{ "keras/dl4j-test-resources__keras1.2.2_lstm_tf_fullmodel.h5", "keras-h5-legacy" },
	{ "keras/dl4j-test-resources__keras1.2.2_lstm_tf_weightsonly.h5", "keras-h5-legacy-weights" },
	{ "keras/dl4j-test-resources__keras2.0.6_lstm_fullmodel_rmsprop.h5", "keras-h5-legacy" },
	{ "keras/dl4j-test-resources__keras2.0.6_lstm_weightsonly.h5", "keras-h5-legacy-weights" },
	{ "keras/dl4j-test-resources__keras2.0.9_sequential_lambda.h5", "keras-h5-legacy" },
	{ "keras/dl4j-test-resources__keras2.1.3_cnn_batchnorm.h5", "keras-h5-legacy" },
	{ "keras/dl4j-test-resources__tfkeras2.4.0_embedding_conv1d_adam.hdf5", "keras-h5-legacy" },
	{ "keras/hls4ml__tfkeras2.11.0_conv1d_weightsonly.h5", "keras-h5-legacy-weights" },
	{ "keras/tiny__keras3.7.0_legacy_h5_resnet_adam.h5", "keras-h5-legacy" },
	{ "keras/tiny__tfkeras2.4.0_resnet_batchnorm_adam.h5", "keras-h5-legacy" },
	{ "keras/synthetic/SYNTHETIC_keras3_float16.weights.h5", "keras-weights-h5" },
	{ "keras/synthetic/SYNTHETIC_legacy_chunked_layer_names.h5", "keras-h5-legacy" },
	{ "keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras", "keras-v3" },
	{ "keras/keras__keras3.15.0_nested_container.keras", "keras-v3" },
	{ "keras/keras__keras3.8.0_masking_lstm_mlx.keras", "keras-v3" },
};

void kt_fail_last(const char *what)
{
	char buf[2048];
	cr_assert_fail("%s: %s (%s)", what, ckpt_error_format(ckpt_error_last(), buf, sizeof(buf)),
		ckpt_status_name(ckpt_error_last()->code));
}

ckpt_reader *kt_open(const char *path)
{
	ckpt_reader *r = NULL;
	if (ckpt_reader_open(&r, path, NULL) != CKPT_OK)
		kt_fail_last(path);
	return r;
}

void kt_sha1_block(kt_sha1 *s, const unsigned char *p)
{
	uint32_t w[80], a, b, c, d, e, t;
	int i;
	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (i = 16; i < 80; i++)
		w[i] = KT_ROL(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	a = s->h[0]; b = s->h[1]; c = s->h[2]; d = s->h[3]; e = s->h[4];
	for (i = 0; i < 80; i++) {
		uint32_t f, k;
		if (i < 20) { f = (b & c) | (~b & d); k = 0x5A827999; }
		else if (i < 40) { f = b ^ c ^ d; k = 0x6ED9EBA1; }
		else if (i < 60) { f = (b & c) | (b & d) | (c & d); k = 0x8F1BBCDC; }
		else { f = b ^ c ^ d; k = 0xCA62C1D6; }
		t = KT_ROL(a, 5) + f + e + k + w[i];
		e = d; d = c; c = KT_ROL(b, 30); b = a; a = t;
	}
	s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d; s->h[4] += e;
}

void kt_sha1_hex(const void *data, size_t len, char out[41])
{
	kt_sha1 s = { { 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0 }, 0, { 0 }, 0 };
	const unsigned char *p = data;
	unsigned char pad[72];
	uint64_t bits = (uint64_t)len * 8;
	size_t i, padlen;
	for (i = 0; i + 64 <= len; i += 64)
		kt_sha1_block(&s, p + i);
	memset(pad, 0, sizeof(pad));
	memcpy(pad, p + i, len - i);
	pad[len - i] = 0x80;
	padlen = (len - i) + 1 + 8 <= 64 ? 64 : 128;
	{
		unsigned char tail[128];
		memset(tail, 0, sizeof(tail));
		memcpy(tail, pad, len - i + 1);
		for (i = 0; i < 8; i++)
			tail[padlen - 1 - i] = (unsigned char)(bits >> (8 * i));
		kt_sha1_block(&s, tail);
		if (padlen == 128)
			kt_sha1_block(&s, tail + 64);
	}
	for (i = 0; i < 5; i++)
		snprintf(out + 8 * i, 9, "%08x", s.h[i]);
}

size_t kt_parse_contents(const char *path, kt_want **out)
{
	size_t n = 0, cap = 0, len;
	char *txt = ts_read_file(path, &len), *line, *save = NULL, group[64][1024];
	int depth;
	kt_want *v = NULL;
	cr_assert(txt, "cannot read %s", path);
	for (line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *p = line;
		while (*p == ' ')
			p++;
		depth = (int)(p - line) / 2; /* the dump indents two spaces per level */
		if (depth >= 63)
			continue;
		if (strncmp(p, "GROUP /", 7) == 0) {
			snprintf(group[depth], sizeof(group[depth]), "%s", p + 7);
		} else if (strncmp(p, "DATASET ", 8) == 0 && depth >= 1) {
			const char *g = group[depth - 1];
			char *e = strstr(p, "  dtype="), *d, *s;
			kt_want *w;
			if (!e)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				v = realloc(v, cap * sizeof(*v));
			}
			w = &v[n++];
			memset(w, 0, sizeof(*w));
			int k = snprintf(w->name, sizeof(w->name), "%s%s%.*s", g, *g ? "/" : "", (int)(e - p - 8), p + 8);
			cr_assert(k >= 0 && (size_t)k < sizeof(w->name), "dataset name too long in dump");
			d = e + 8;
			snprintf(w->dtype, sizeof(w->dtype), "%.*s", (int)strcspn(d, " "), d);
			s = strstr(p, "shape=(");
			if (s)
				snprintf(w->shape, sizeof(w->shape), "%.*s", (int)(strchr(s, ')') - s - 5), s + 6);
		} else if (n && strncmp(p, "sha1(raw little-endian C-order bytes)=", 38) == 0) {
			snprintf(v[n - 1].sha1, sizeof(v[n - 1].sha1), "%s", p + 38);
		} else if (n && strncmp(p, "value=", 6) == 0) {
			snprintf(v[n - 1].value, sizeof(v[n - 1].value), "%s", p + 6);
		}
	}
	free(txt);
	*out = v;
	return n;
}

void kt_shape_text(const ckpt_shape *s, char *buf, size_t n)
{
	size_t k = (size_t)snprintf(buf, n, "(");
	int i;
	for (i = 0; i < s->rank && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)s->dims[i]);
	if (s->rank == 1 && k < n)
		k += (size_t)snprintf(buf + k, n - k, ",");
	if (k < n)
		snprintf(buf + k, n - k, ")");
}

void kt_check_against_contents(ckpt_reader *r, const char *contents)
{
	kt_want *w = NULL;
	size_t nw = kt_parse_contents(contents, &w), i;
	cr_assert_gt(nw, 0, "%s lists no datasets", contents);
	cr_assert_eq(ckpt_reader_num_entries(r), nw, "%s: reader has %zu entries, dump has %zu datasets", contents,
		     ckpt_reader_num_entries(r), nw);
	for (i = 0; i < nw; i++) {
		size_t idx;
		const ckpt_var_info *vi;
		ckpt_tensor *t;
		char shape[128], hex[41];
		if (ckpt_reader_find(&idx, r, w[i].name) != CKPT_OK)
			cr_assert_fail("%s: dataset '%s' not found by the reader", contents, w[i].name);
		vi = ckpt_reader_var(r, idx);
		cr_assert_str_eq(ckpt_dtype_name(vi->dtype), w[i].dtype, "%s: dtype", w[i].name);
		kt_shape_text(&vi->shape, shape, sizeof(shape));
		cr_assert_str_eq(shape, w[i].shape, "%s: shape", w[i].name);
		if (ckpt_reader_read(&t, r, idx) != CKPT_OK)
			kt_fail_last(w[i].name);
		cr_assert_eq(t->nbytes, vi->nbytes);
		if (w[i].sha1[0]) {
			kt_sha1_hex(t->data, (size_t)t->nbytes, hex);
			cr_assert(strncmp(hex, w[i].sha1, strlen(w[i].sha1)) == 0, "%s: sha1 %s, dump says %s", w[i].name, hex, w[i].sha1);
		} else {
			double want = strtod(w[i].value, NULL), got;
			cr_assert(w[i].value[0], "%s: dump has neither sha1 nor value", w[i].name);
			switch (t->dtype) {
			case CKPT_DT_INT64: got = (double)*(int64_t *)t->data; break;
			case CKPT_DT_FLOAT: got = *(float *)t->data; break;
			case CKPT_DT_DOUBLE: got = *(double *)t->data; break;
			default: got = want + 1; break;
			}
			cr_assert(got == want || (got - want < 1e-6 && want - got < 1e-6), "%s: value %g, dump says %s", w[i].name, got,
				w[i].value);
		}
		ckpt_tensor_free(t);
	}
	free(w);
}

void kt_assert_error(int rc, int code, const char *needle, const char *what)
{
	const ckpt_error *e = ckpt_error_last();
	char buf[2048];
	ckpt_error_format(e, buf, sizeof(buf));
	cr_assert_eq(rc, code, "%s: got %s, want %s (%s)", what, ckpt_status_name(rc), ckpt_status_name(code), buf);
	cr_assert_eq(e->code, code, "%s: last error %s", what, ckpt_status_name(e->code));
	cr_assert(e->message && *e->message, "%s: no message", what);
	cr_assert(strstr(buf, needle) != NULL, "%s: error '%s' does not mention '%s'", what, buf, needle);
}

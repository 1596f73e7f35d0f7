/* The HDF5 metadata mutation campaign (h5_mutants.h). Public API only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "ckpt/sys/vfs_memory.h"
#include "formats/keras_archive/archive_lib.h"
#include "h5_mutants.h"

#ifndef CKPT_H5M_FIXTURES_DIR
#define CKPT_H5M_FIXTURES_DIR CKPT_FIXTURES_DIR "/keras"
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
	if (ckpt__archive_lib(NULL) < 0)
		return NULL;
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
	for (i = 0; i < ckpt_reader_num_entries(r); i++) {
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
	ckpt_h5m_fields(b);
	return 0;
}

void ckpt_h5m_free(ckpt_h5m_base *b)
{
	free(b->bytes);
	free(b->meta);
	free(b->field);
	memset(b, 0, sizeof(*b));
}

/* ---- the structure walk (ckpt_h5m_fields) ---- */

typedef struct fwalk {
	ckpt_h5m_base *b;
	size_t cap;
	uint64_t *ohdr;   /* object header addresses still to walk / walked */
	size_t nohdr, ocap;
} fwalk;

static uint64_t le(const ckpt_h5m_base *b, size_t off, int n)
{
	uint64_t v = 0;
	int k;
	if (off > b->n || b->n - off < (size_t)n)
		return UINT64_MAX;
	for (k = n - 1; k >= 0; k--)
		v = v << 8 | b->bytes[off + (size_t)k];
	return v;
}

static void field(fwalk *w, size_t off)
{
	if (off >= w->b->n)
		return;
	if (w->b->nfield == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 1024;
		if (!(w->b->field = realloc(w->b->field, w->cap * sizeof(size_t))))
			abort();
	}
	w->b->field[w->b->nfield++] = off;
}

static void fields(fwalk *w, size_t base, const int *rel, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		field(w, base + (size_t)rel[i]);
}

static void add_ohdr(fwalk *w, uint64_t a)
{
	size_t i;
	if (a == UINT64_MAX || a >= w->b->n)
		return;
	for (i = 0; i < w->nohdr; i++)
		if (w->ohdr[i] == a)
			return;
	if (w->nohdr == w->ocap) {
		w->ocap = w->ocap ? 2 * w->ocap : 256;
		if (!(w->ohdr = realloc(w->ohdr, w->ocap * sizeof(uint64_t))))
			abort();
	}
	w->ohdr[w->nohdr++] = a;
}

/* A datatype message body at `d`: class/version, bit field, size. */
static void dtype_fields(fwalk *w, size_t d)
{
	static const int f[] = { 0, 1, 4, 8 };
	fields(w, d, f, 4);
}

/* A dataspace message body at `d`: version, rank, flags, every dimension (and maximum). */
static void dspace_fields(fwalk *w, size_t d)
{
	uint64_t ver = le(w->b, d, 1), rank = le(w->b, d + 1, 1), flags = le(w->b, d + 2, 1), k;
	size_t dims = ver == 1 ? d + 8 : d + 4;
	field(w, d);
	field(w, d + 1);
	field(w, d + 2);
	if (rank == UINT64_MAX || rank > 32)
		return;
	for (k = 0; k < rank * ((flags & 1) ? 2 : 1); k++)
		field(w, dims + 8 * k);
}

static void message_fields(fwalk *w, unsigned type, size_t d, size_t size)
{
	static const int layout[] = { 0, 1, 2, 3, 10, 11 }, fill[] = { 0, 1, 2, 3, 4, 8 }, mtime[] = { 0, 4 };
	switch (type) {
	case 0x0001: dspace_fields(w, d); break;
	case 0x0003: dtype_fields(w, d); break;
	case 0x0005: fields(w, d, fill, 6); break;
	case 0x0008: fields(w, d, layout, 6); break;
	case 0x0012: fields(w, d, mtime, 2); break;
	case 0x0011: /* symbol table: B-tree and local heap addresses */
		field(w, d);
		field(w, d + 8);
		break;
	case 0x000c: { /* attribute: sizes, then its datatype and dataspace */
		uint64_t ver = le(w->b, d, 1), nl = le(w->b, d + 2, 2), tl = le(w->b, d + 4, 2), sl = le(w->b, d + 6, 2);
		size_t at = d + (ver == 3 ? 9 : 8);
		static const int a[] = { 0, 1, 2, 4, 6 };
		fields(w, d, a, 5);
		if (nl == UINT64_MAX || tl == UINT64_MAX || sl == UINT64_MAX)
			break;
		at += ver == 1 ? (size_t)((nl + 7) & ~7ull) : (size_t)nl;
		dtype_fields(w, at);
		at += ver == 1 ? (size_t)((tl + 7) & ~7ull) : (size_t)tl;
		dspace_fields(w, at);
		at += ver == 1 ? (size_t)((sl + 7) & ~7ull) : (size_t)sl;
		if (at < d + size)
			field(w, at); /* the data (a variable-length string: its length and heap ID) */
		if (at + 4 < d + size)
			field(w, at + 4);
		if (at + 12 < d + size)
			field(w, at + 12);
		break;
	}
	default:
		field(w, d);
		break;
	}
}

/* The messages of a v1 object header chunk [at, at + len). */
static void v1_messages(fwalk *w, size_t at, size_t len, int depth)
{
	size_t end = at + len, m = at;
	if (end > w->b->n || depth > 16)
		end = w->b->n;
	while (m + 8 <= end) {
		unsigned type = (unsigned)le(w->b, m, 2);
		size_t size = (size_t)le(w->b, m + 2, 2);
		field(w, m);     /* type */
		field(w, m + 2); /* size */
		field(w, m + 4); /* flags */
		if (m + 8 + size > end)
			break;
		message_fields(w, type, m + 8, size);
		if (type == 0x0010 && depth < 16) { /* continuation: offset and length of the next chunk */
			uint64_t o = le(w->b, m + 8, 8), l = le(w->b, m + 16, 8);
			if (o < w->b->n && l <= w->b->n - o) {
				w->b->nstruct++;
				v1_messages(w, (size_t)o, (size_t)l, depth + 1);
			}
		}
		m += 8 + size;
	}
}

static void v1_object_header(fwalk *w, size_t a)
{
	static const int f[] = { 0, 1, 2, 4, 8 };
	uint64_t size = le(w->b, a + 8, 4);
	if (le(w->b, a, 1) != 1 || size == UINT64_MAX)
		return;
	w->b->nstruct++;
	fields(w, a, f, 5);
	v1_messages(w, a + 16, (size_t)size, 0);
}

static void symbol_entry(fwalk *w, size_t e)
{
	static const int f[] = { 0, 8, 16, 24, 32 };
	fields(w, e, f, 5);
	add_ohdr(w, le(w->b, e + 8, 8));
}

static int cmp_size(const void *x, const void *y)
{
	size_t a = *(const size_t *)x, c = *(const size_t *)y;
	return a < c ? -1 : a > c;
}

void ckpt_h5m_fields(ckpt_h5m_base *b)
{
	static const int sb[] = { 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 24, 32, 40, 48 }, tree[] = { 4, 5, 6, 8, 16 },
		heap[] = { 4, 8, 16, 24 }, gcol[] = { 4, 8 }, gobj[] = { 0, 2, 8 };
	fwalk w;
	size_t off, i, j;
	memset(&w, 0, sizeof(w));
	w.b = b;
	b->nfield = b->nstruct = 0;
	if (b->n < 96 || memcmp(b->bytes, "\x89HDF\r\n\x1a\n", 8) != 0 || b->bytes[8] != 0)
		return;
	b->nstruct++;
	fields(&w, 0, sb, sizeof(sb) / sizeof(sb[0]));
	symbol_entry(&w, 56); /* the root group's */
	/* signed structures, wherever they are in the metadata */
	for (off = 0; off + 32 <= b->n; off++) {
		const uint8_t *p = b->bytes + off;
		if (memcmp(p, "TREE", 4) == 0) {
			uint64_t type = le(b, off + 4, 1), used = le(b, off + 6, 2), k;
			b->nstruct++;
			field(&w, off);
			fields(&w, off, tree, 5);
			if (type == 0) /* group node: keys (heap offsets) and children, 8 bytes each */
				for (k = 0; k < 2 * used + 1 && k < 4096; k++)
					field(&w, off + 24 + 8 * k);
			else /* chunk node: the first key (size, filter mask, offsets); its rank is the dataset's */
				for (k = 0; k < 4; k++)
					field(&w, off + 24 + 4 * k);
		} else if (memcmp(p, "HEAP", 4) == 0) {
			b->nstruct++;
			field(&w, off);
			fields(&w, off, heap, 4);
		} else if (memcmp(p, "SNOD", 4) == 0) {
			uint64_t nsym = le(b, off + 6, 2), k;
			b->nstruct++;
			field(&w, off);
			field(&w, off + 4);
			field(&w, off + 6);
			for (k = 0; k < nsym && k < 1024; k++)
				symbol_entry(&w, off + 8 + 40 * (size_t)k);
		} else if (memcmp(p, "GCOL", 4) == 0) {
			uint64_t csize = le(b, off + 8, 8);
			size_t o = off + 16, end;
			b->nstruct++;
			field(&w, off);
			fields(&w, off, gcol, 2);
			end = csize != UINT64_MAX && csize <= b->n - off ? off + (size_t)csize : b->n;
			while (o + 16 <= end) {
				uint64_t idx = le(b, o, 2), osz = le(b, o + 8, 8);
				fields(&w, o, gobj, 3);
				if (idx == 0 || osz == UINT64_MAX || osz > end - o - 16)
					break;
				o += 16 + (size_t)((osz + 7) & ~7ull);
			}
		}
	}
	for (i = 0; i < w.nohdr; i++)
		v1_object_header(&w, (size_t)w.ohdr[i]);
	free(w.ohdr);
	/* ascending, once each */
	qsort(b->field, b->nfield, sizeof(size_t), cmp_size);
	for (i = j = 0; i < b->nfield; i++)
		if (!j || b->field[j - 1] != b->field[i])
			b->field[j++] = b->field[i];
	b->nfield = j;
}

void ckpt_h5m_apply(const ckpt_h5m_base *b, uint8_t *buf, size_t mi, int kind, uint64_t value)
{
	ckpt_h5m_apply_at(b, buf, b->meta[mi % b->nmeta], kind, value);
}

void ckpt_h5m_apply_at(const ckpt_h5m_base *b, uint8_t *buf, size_t off, int kind, uint64_t value)
{
	size_t k;
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
	for (i = 0; i < ckpt_reader_num_entries(r); i++) {
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
		if ((data[at + 4] & 4) && b->nfield) /* a field start of the structure walk */
			ckpt_h5m_apply_at(b, buf, b->field[mi % b->nfield], data[at + 4] & 3, v);
		else
			ckpt_h5m_apply(b, buf, mi, data[at + 4], v);
	}
	(void)ckpt_h5m_run(buf, b->n);
	free(buf);
	return 0;
}

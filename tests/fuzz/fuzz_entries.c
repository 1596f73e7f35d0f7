/*
 * Fuzz entry points (see fuzz_entries.h). Everything goes through the public
 * API and the in-memory file system; nothing touches the disk except the
 * one-time load of the keras_config base members from tests/fuzz/data/.
 *
 * The checks here are the reader contract the fuzzers enforce:
 *  - a failing call returns a negative status and records its own error:
 *    that status and a non-empty message (the slot is cleared before each
 *    checked call, FZ_CALL, so an earlier failure's message cannot stand in);
 *  - a listed entry can be found by its name, and a tensor read back has the
 *    dtype and shape it was listed with;
 *  - a parsed object graph re-serializes to bytes that parse and re-serialize
 *    identically (serialize . parse is idempotent).
 * A violation aborts, which libFuzzer reports as a crash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "ckpt/ckpt.h"
#include "ckpt/sys/vfs_memory.h"
#include "fuzz_entries.h"

#ifndef CKPT_FUZZ_DATA_DIR
#define CKPT_FUZZ_DATA_DIR CKPT_SOURCE_DIR "/tests/fuzz/data"
#endif

/* Entries visited per input, and the largest tensor read_into is tried on. */
#define FZ_MAX_ENTRIES 4096
#define FZ_MAX_READ_INTO (16u << 20)
#define FZ_MAX_NODES 1024

/* The manager may not be linked in every build; probe for it at run time. */
#pragma weak ckpt_manager_new_ext
#pragma weak ckpt_manager_free
#pragma weak ckpt_manager_latest
#pragma weak ckpt_manager_num_checkpoints
#pragma weak ckpt_manager_checkpoint
#pragma weak ckpt_manager_latest_valid

static void fz_die(const char *what, int rc)
{
	const ckpt_error *e = ckpt_error_last();
	fprintf(stderr, "ckpt fuzz contract violation: %s (rc=%d, last error code=%d, message=\"%s\")\n", what, rc,
		e->code, e->message ? e->message : "(null)");
	abort();
}

/* Clear the error slot, then make the call fz_check judges. */
#define FZ_CALL(call) (ckpt_error_clear(), (call))

/* A failing call must say what went wrong, itself. */
static void fz_check(int rc, const char *what)
{
	if (rc >= 0)
		return;
	const ckpt_error *e = ckpt_error_last();
	if (e->code != rc || !e->message || !e->message[0])
		fz_die(what, rc);
}

static void fz_touch(const char *s)
{
	if (s) {
		volatile size_t n = strlen(s);
		(void)n;
	}
}

static void fz_walk_graph(const ckpt_object_graph *g)
{
	if (!g)
		return;
	int rc = ckpt_object_graph_validate(g);
	if (rc < 0)
		fz_die("the reader exposes an object graph that does not validate", rc);
	size_t n = g->nnodes < FZ_MAX_NODES ? g->nnodes : FZ_MAX_NODES;
	for (size_t i = 0; i < n; i++) {
		char *p = NULL;
		rc = FZ_CALL(ckpt_object_graph_path(&p, g, (int)i));
		if (rc != CKPT_ENOTFOUND)
			fz_check(rc, "ckpt_object_graph_path");
		fz_touch(p);
		free(p);
	}
}

static void fz_walk_dims(int rank, const int64_t *dims)
{
	if (rank < -1 || rank > CKPT_MAX_RANK || (rank > 0 && !dims))
		fz_die("a SavedModel shape has a rank outside [-1, CKPT_MAX_RANK] or no dims", rank);
	for (int i = 0; i < rank; i++) {
		volatile int64_t d = dims[i];
		(void)d;
	}
}

static void fz_walk_tensors(const ckpt_sm_tensor *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fz_touch(t[i].key);
		fz_touch(t[i].name);
		fz_touch(ckpt_tf_dtype_name(t[i].dtype));
		fz_walk_dims(t[i].rank, t[i].dims);
		if (i && strcmp(t[i - 1].key, t[i].key) >= 0)
			fz_die("signature tensors are not sorted by key, one per key", 0);
	}
}

/* Everything a decoded saved_model.pb exposes, with its invariants. */
static void fz_walk_saved_model(const ckpt_saved_model *sm)
{
	if (!sm)
		return;
	for (size_t i = 0; i < sm->nmeta_graphs; i++) {
		const ckpt_sm_meta_graph *m = &sm->meta_graphs[i];
		for (size_t k = 0; k < m->ntags; k++)
			fz_touch(m->tags[k]);
		fz_touch(m->tensorflow_version);
		for (size_t k = 0; k < m->nsignatures; k++) {
			const ckpt_sm_signature *s = &m->signatures[k];
			fz_touch(s->key);
			fz_touch(s->method_name);
			if (k && strcmp(m->signatures[k - 1].key, s->key) >= 0)
				fz_die("signatures are not sorted by key, one per key", 0);
			fz_walk_tensors(s->inputs, s->ninputs);
			fz_walk_tensors(s->outputs, s->noutputs);
		}
		for (size_t k = 0; k < m->nvariables; k++) {
			const ckpt_sm_variable *v = &m->variables[k];
			fz_touch(v->name);
			fz_walk_dims(v->rank, v->dims);
			if (v->node_id < 0 || (size_t)v->node_id >= m->nobjects)
				fz_die("a SavedModel variable's node id is outside its object graph", v->node_id);
		}
	}
}

static void fz_walk_reader(ckpt_reader *r)
{
	fz_touch(ckpt_reader_format(r));
	fz_touch(ckpt_reader_path(r));
	int ns = ckpt_reader_num_shards(r);
	for (int s = 0; s < ns && s < 8; s++) {
		int exists = 0;
		fz_touch(ckpt_reader_shard_path(r, s, &exists));
	}
	static const char *const meta[] = { "keras_version", "backend", "model_config", "training_config",
		"config.json", "metadata.json" };
	for (size_t k = 0; k < sizeof(meta) / sizeof(meta[0]); k++)
		fz_touch(ckpt_reader_meta(r, meta[k]));
	fz_walk_graph(ckpt_reader_object_graph(r));
	fz_walk_saved_model(ckpt_reader_saved_model(r));

	size_t n = ckpt_reader_num_entries(r);
	if (n > FZ_MAX_ENTRIES)
		n = FZ_MAX_ENTRIES;
	for (size_t i = 0; i < n; i++) {
		const ckpt_var_info *v = ckpt_reader_var(r, i);
		if (!v || !v->name)
			fz_die("ckpt_reader_var returned NULL for an index below the count", 0);
		fz_touch(v->name);
		if (v->shape.rank < 0 || v->shape.rank > CKPT_MAX_RANK)
			fz_die("listed entry has a rank outside [0, CKPT_MAX_RANK]", v->shape.rank);
		size_t j = (size_t)-1;
		int rc = ckpt_reader_find(&j, r, v->name);
		if (rc < 0 || j >= ckpt_reader_num_entries(r) || strcmp(ckpt_reader_var(r, j)->name, v->name) != 0)
			fz_die("a listed entry cannot be found by its own name", rc);

		ckpt_tensor *t = NULL;
		rc = FZ_CALL(ckpt_reader_read(&t, r, i));
		fz_check(rc, "ckpt_reader_read");
		if (rc >= 0) {
			if (!t || t->dtype != v->dtype || !ckpt_shape_equal(&t->shape, &v->shape))
				fz_die("tensor read back differs in dtype or shape from its listing", rc);
			if (t->dtype == CKPT_DT_STRING) {
				const ckpt_bytes *el = t->data;
				uint64_t ne = ckpt_tensor_num_elements(t), sum = 0;
				for (uint64_t k = 0; k < ne; k++) {
					if (el[k].len && el[k].data) {
						volatile char c = el[k].data[el[k].len - 1];
						(void)c;
					}
					sum += el[k].len;
				}
				if (sum != t->nbytes)
					fz_die("string tensor nbytes is not the sum of its element lengths", 0);
			} else if (t->nbytes && t->data) {
				volatile unsigned char c = ((unsigned char *)t->data)[t->nbytes - 1];
				(void)c;
			}
			(void)ckpt_tensor_crc32(t);
			ckpt_tensor_free(t);
		}
		if (v->dtype != CKPT_DT_STRING && ckpt_dtype_size(v->dtype) && v->nbytes <= FZ_MAX_READ_INTO) {
			void *buf = malloc(v->nbytes ? v->nbytes : 1);
			if (buf) {
				rc = FZ_CALL(ckpt_reader_read_into(r, i, buf, v->nbytes));
				fz_check(rc, "ckpt_reader_read_into");
				free(buf);
			}
		}
	}
}

/* Open `path` on `vfs`, walk it, close. */
static void fz_open_walk(ckpt_vfs *vfs, const char *path, int no_verify)
{
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	o.vfs = vfs;
	o.no_verify = no_verify;
	ckpt_reader *r = NULL;
	int rc = FZ_CALL(ckpt_reader_open(&r, path, &o));
	fz_check(rc, "ckpt_reader_open");
	if (getenv("CKPT_FUZZ_VERBOSE")) {
		char line[1024];
		fprintf(stderr, "open %s: %s (%zu entries)%s%s\n", path, ckpt_status_name(rc),
			r ? ckpt_reader_num_entries(r) : 0,
			rc < 0 ? " " : "", rc < 0 ? ckpt_error_format(ckpt_error_last(), line, sizeof(line)) : "");
	}
	if (rc >= 0) {
		if (!r)
			fz_die("ckpt_reader_open succeeded without a reader", rc);
		fz_walk_reader(r);
	}
	ckpt_reader_free(r);
}

/*
 * The library's own allocations, checked one by one: no input this small
 * justifies a single block above 1 GiB (libFuzzer's malloc limit is relaxed
 * for the Keras targets, where libhdf5 asks for absurd sizes on its own).
 * Pass-through otherwise, so blocks from before the hook free correctly.
 */
#define FZ_MAX_LIBRARY_BLOCK (1ull << 30)

static void fz_check_size(size_t n)
{
	if (n > FZ_MAX_LIBRARY_BLOCK) {
		fprintf(stderr, "ckpt fuzz: the library asked for one block of %zu bytes\n", n);
		abort();
	}
}

static void *fz_malloc(size_t n, void *ctx)
{
	(void)ctx;
	fz_check_size(n);
	return malloc(n);
}

static void *fz_realloc(void *p, size_t n, void *ctx)
{
	(void)ctx;
	fz_check_size(n);
	return realloc(p, n);
}

static void fz_free(void *p, void *ctx)
{
	(void)ctx;
	free(p);
}

static ckpt_vfs *fz_vfs(void)
{
	static int hooked;
	if (!hooked) {
		ckpt_allocator a = { fz_malloc, fz_realloc, fz_free, NULL };
		ckpt_set_allocator(&a);
		hooked = 1;
	}
	ckpt_vfs *vfs = NULL;
	if (ckpt_vfs_memory_new(&vfs) < 0)
		abort();
	return vfs;
}

static void fz_put(ckpt_vfs *vfs, const char *path, const void *buf, size_t n)
{
	if (ckpt_vfs_memory_put(vfs, path, buf, n) < 0)
		abort();
}

static uint32_t fz_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* tensorflow__half_plus_two_v1 variables.index (151 bytes) and its 12-byte data file. */
static const uint8_t hp2_index[] = {
	0x00, 0x00, 0x06, 0x08, 0x01, 0x1a, 0x02, 0x08, 0x01, 0x00, 0x01, 0x0b, 0x61, 0x08, 0x01, 0x12,
	0x00, 0x28, 0x04, 0x35, 0x06, 0x38, 0x27, 0x1f, 0x00, 0x01, 0x0d, 0x62, 0x08, 0x01, 0x12, 0x00,
	0x20, 0x04, 0x28, 0x04, 0x35, 0x10, 0xfd, 0x78, 0x4f, 0x00, 0x01, 0x0d, 0x63, 0x08, 0x01, 0x12,
	0x00, 0x20, 0x08, 0x28, 0x04, 0x35, 0xef, 0xd6, 0x82, 0xc3, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
	0x00, 0x00, 0x00, 0xe4, 0x15, 0xb6, 0xbc, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
	0xc0, 0xf2, 0xa1, 0xb0, 0x00, 0x01, 0x02, 0x64, 0x00, 0x42, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
	0x00, 0x00, 0x00, 0x58, 0xb2, 0xe9, 0xf7, 0x47, 0x08, 0x54, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x57,
	0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb,
};
static const uint8_t hp2_data[] = { 0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x40 };

int ckpt_fuzz_tf_index(const uint8_t *data, size_t size)
{
	ckpt_vfs *vfs = fz_vfs();
	uint8_t shard[8192];
	for (size_t i = 0; i < sizeof(shard); i++)
		shard[i] = (uint8_t)(i * 37u + 11u);
	fz_put(vfs, "t/f.index", data, size);
	fz_put(vfs, "t/f.data-00000-of-00001", shard, sizeof(shard));
	fz_put(vfs, "t/f.data-00000-of-00002", shard, sizeof(shard));
	fz_put(vfs, "t/f.data-00001-of-00002", shard, sizeof(shard));
	fz_open_walk(vfs, "t/f", 0);
	ckpt_vfs_free(vfs);
	return 0;
}

int ckpt_fuzz_tf_bundle(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	uint32_t head = fz_u32(data);
	int no_verify = (head >> 31) & 1;
	size_t ilen = head & 0x7fffffffu;
	if (ilen > size - 4)
		ilen = size - 4;
	ckpt_vfs *vfs = fz_vfs();
	fz_put(vfs, "t/f.index", data + 4, ilen);
	size_t pos = 4 + ilen;
	for (int shard = 0; shard < 4 && pos < size; shard++) {
		size_t len = size - pos;
		if (len >= 4) {
			size_t want = fz_u32(data + pos);
			pos += 4;
			len = size - pos;
			if (want < len)
				len = want;
		} else {
			pos = size - len;
		}
		for (int n = shard + 1; n <= 4; n++) {
			char name[64];
			snprintf(name, sizeof(name), "t/f.data-%05d-of-%05d", shard, n);
			fz_put(vfs, name, data + pos, len);
		}
		pos += len;
	}
	fz_open_walk(vfs, "t/f", no_verify);
	ckpt_vfs_free(vfs);
	return 0;
}

int ckpt_fuzz_object_graph(const uint8_t *data, size_t size)
{
	ckpt_vfs_free(fz_vfs()); /* installs the allocation check */
	ckpt_object_graph *g = NULL;
	int rc = FZ_CALL(ckpt_object_graph_parse(&g, data, size));
	fz_check(rc, "ckpt_object_graph_parse");
	if (rc < 0) {
		ckpt_object_graph_free(g);
		return 0;
	}
	fz_walk_graph(g);
	void *b1 = NULL, *b2 = NULL, *b3 = NULL;
	size_t n1 = 0, n2 = 0, n3 = 0;
	rc = ckpt_object_graph_serialize(&b1, &n1, g);
	if (rc < 0)
		fz_die("a parsed object graph does not serialize", rc);
	ckpt_object_graph *g2 = NULL, *g3 = NULL;
	rc = ckpt_object_graph_parse(&g2, b1, n1);
	if (rc < 0)
		fz_die("a re-serialized object graph does not parse", rc);
	rc = ckpt_object_graph_serialize(&b2, &n2, g2);
	if (rc < 0 || n1 != n2 || memcmp(b1, b2, n1) != 0)
		fz_die("serialize(parse(serialize(g))) differs from serialize(g)", rc);
	rc = FZ_CALL(ckpt_object_graph_copy(&g3, g));
	fz_check(rc, "ckpt_object_graph_copy");
	if (rc >= 0) {
		rc = ckpt_object_graph_serialize(&b3, &n3, g3);
		if (rc < 0 || n3 != n1 || memcmp(b1, b3, n1) != 0)
			fz_die("a copied object graph serializes differently", rc);
	}
	free(b1);
	free(b2);
	free(b3);
	ckpt_object_graph_free(g);
	ckpt_object_graph_free(g2);
	ckpt_object_graph_free(g3);
	return 0;
}

static void fz_quiet_warn(const char *message, void *ctx)
{
	(void)ctx;
	fz_touch(message);
}

int ckpt_fuzz_state_file(const uint8_t *data, size_t size)
{
	ckpt_vfs *vfs = fz_vfs();
	fz_put(vfs, "d/ckpt-1.index", hp2_index, sizeof(hp2_index));
	fz_put(vfs, "d/ckpt-1.data-00000-of-00001", hp2_data, sizeof(hp2_data));
	fz_put(vfs, "d/checkpoint", data, size);
	fz_open_walk(vfs, "d", 0);
	if (ckpt_manager_new_ext) {
		ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
		mo.vfs = vfs;
		mo.warn = fz_quiet_warn;
		mo.no_fsync = 1;
		ckpt_manager *m = NULL;
		int rc = FZ_CALL(ckpt_manager_new_ext(&m, NULL, "d", 0, &mo));
		fz_check(rc, "ckpt_manager_new_ext");
		if (rc >= 0) {
			fz_touch(ckpt_manager_latest(m));
			size_t n = ckpt_manager_num_checkpoints(m);
			for (size_t i = 0; i < n; i++)
				fz_touch(ckpt_manager_checkpoint(m, i));
			const char *p = NULL;
			rc = FZ_CALL(ckpt_status_of(p = ckpt_manager_latest_valid(m)));
			fz_check(rc, "ckpt_manager_latest_valid");
			fz_touch(p);
		}
		ckpt_manager_free(m);
	}
	ckpt_vfs_free(vfs);
	return 0;
}

int ckpt_fuzz_keras_h5(const uint8_t *data, size_t size)
{
	ckpt_vfs *vfs = fz_vfs();
	fz_put(vfs, "k/model", data, size);
	fz_open_walk(vfs, "k/model", 0);
	ckpt_vfs_free(vfs);
	return 0;
}

int ckpt_fuzz_keras_archive(const uint8_t *data, size_t size)
{
	ckpt_vfs *vfs = fz_vfs();
	fz_put(vfs, "k/archive", data, size);
	fz_open_walk(vfs, "k/archive", 0);
	ckpt_vfs_free(vfs);
	return 0;
}

/*
 * A flat file (safetensors, GGUF): open and walk it; when it opens, write it
 * again in the same format (metadata and quantized types carried over) and
 * open the copy: it must open and list as many tensors.
 */
static void fz_flat(const uint8_t *data, size_t size, const char *format, const char *const *meta, size_t nmeta)
{
	ckpt_vfs *vfs = fz_vfs();
	ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
	ckpt_write_options wo = CKPT_WRITE_OPTIONS_INIT;
	ckpt_reader *r = NULL, *r2 = NULL;
	ckpt_writer *w = NULL;
	int rc, ok = 1;
	fz_put(vfs, "f/model", data, size);
	fz_open_walk(vfs, "f/model", 0);
	o.vfs = vfs;
	wo.vfs = vfs;
	wo.no_fsync = 1;
	if (ckpt_reader_open(&r, "f/model", &o) != CKPT_OK || ckpt_reader_num_entries(r) > FZ_MAX_ENTRIES)
		goto out;
	fz_check(rc = ckpt_writer_open(&w, "f/copy", format, &wo), "ckpt_writer_open");
	if (rc < 0)
		goto out;
	for (size_t i = 0; ok && i < nmeta; i++)
		if (ckpt_reader_meta(r, meta[i]) && ckpt_writer_set_meta(w, meta[i], ckpt_reader_meta(r, meta[i])) < 0)
			fz_die("ckpt_writer_set_meta", -1);
	for (size_t i = 0; ok && i < ckpt_reader_num_entries(r); i++) {
		ckpt_tensor *t = NULL;
		if (ckpt_reader_read(&t, r, i) != CKPT_OK)
			fz_die("a tensor of an opened flat file does not read", -1);
		rc = ckpt_writer_add(w, ckpt_reader_var(r, i)->name, t, 0);
		fz_check(rc, "ckpt_writer_add");
		ok = rc == CKPT_OK; /* e.g. a 64-byte GGUF name: read, but ggml writes at most 63 */
		ckpt_tensor_free(t);
	}
	if (!ok)
		goto out;
	fz_check(rc = ckpt_writer_commit(w), "ckpt_writer_commit");
	if (rc < 0)
		goto out;
	rc = ckpt_reader_open(&r2, "f/copy", &o);
	if (rc < 0)
		fz_die("a flat file written from an opened one does not open", rc);
	if (ckpt_reader_num_entries(r2) != ckpt_reader_num_entries(r))
		fz_die("the rewritten flat file lists a different number of tensors", -1);
out:
	ckpt_reader_free(r2);
	ckpt_writer_free(w);
	ckpt_reader_free(r);
	ckpt_vfs_free(vfs);
}

int ckpt_fuzz_safetensors(const uint8_t *data, size_t size)
{
	static const char *const meta[] = { "safetensors.metadata" };
	fz_flat(data, size, "safetensors", meta, 1);
	return 0;
}

int ckpt_fuzz_gguf(const uint8_t *data, size_t size)
{
	static const char *const meta[] = { "gguf.kv", "gguf.tensor_types" };
	fz_flat(data, size, "gguf", meta, 2);
	return 0;
}

static void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v & 0xffffu);
	put16(p + 2, v >> 16);
}

uint8_t *ckpt_fuzz_make_zip(const char *const *names, const uint8_t *const *bufs, const size_t *lens,
	size_t n, size_t *out_len)
{
	size_t total = 22;
	for (size_t i = 0; i < n; i++)
		total += 30 + 46 + 2 * strlen(names[i]) + lens[i];
	uint8_t *z = malloc(total), *p = z;
	uint32_t *offs = malloc((n ? n : 1) * sizeof(*offs));
	if (!z || !offs) {
		free(z);
		free(offs);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		size_t nl = strlen(names[i]);
		uint32_t crc = (uint32_t)crc32(0, bufs[i], (uInt)lens[i]);
		offs[i] = (uint32_t)(p - z);
		memset(p, 0, 30);
		put32(p, 0x04034b50u);
		put16(p + 4, 20);
		put16(p + 10, 0);           /* time: 00:00:00 */
		put16(p + 12, (0 << 9) | (1 << 5) | 1); /* 1980-01-01 */
		put32(p + 14, crc);
		put32(p + 18, (uint32_t)lens[i]);
		put32(p + 22, (uint32_t)lens[i]);
		put16(p + 26, (uint32_t)nl);
		memcpy(p + 30, names[i], nl);
		if (lens[i])
			memcpy(p + 30 + nl, bufs[i], lens[i]);
		p += 30 + nl + lens[i];
	}
	uint8_t *cd = p;
	for (size_t i = 0; i < n; i++) {
		size_t nl = strlen(names[i]);
		uint32_t crc = (uint32_t)crc32(0, bufs[i], (uInt)lens[i]);
		memset(p, 0, 46);
		put32(p, 0x02014b50u);
		put16(p + 4, (3 << 8) | 20);
		put16(p + 6, 20);
		put16(p + 14, (1 << 5) | 1);
		put32(p + 16, crc);
		put32(p + 20, (uint32_t)lens[i]);
		put32(p + 24, (uint32_t)lens[i]);
		put16(p + 28, (uint32_t)nl);
		put32(p + 38, 0x01800000u);
		put32(p + 42, offs[i]);
		memcpy(p + 46, names[i], nl);
		p += 46 + nl;
	}
	memset(p, 0, 22);
	put32(p, 0x06054b50u);
	put16(p + 8, (uint32_t)n);
	put16(p + 10, (uint32_t)n);
	put32(p + 12, (uint32_t)(p - cd));
	put32(p + 16, (uint32_t)(cd - z));
	p += 22;
	free(offs);
	*out_len = (size_t)(p - z);
	return z;
}

static uint8_t *fz_load(const char *name, size_t *n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", CKPT_FUZZ_DATA_DIR, name);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "ckpt fuzz: cannot open %s\n", path);
		abort();
	}
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
	if (!b || fread(b, 1, (size_t)len, f) != (size_t)len)
		abort();
	fclose(f);
	*n = (size_t)len;
	return b;
}

int ckpt_fuzz_keras_config(const uint8_t *data, size_t size)
{
	static uint8_t *meta, *weights;
	static size_t nmeta, nweights;
	if (!meta) {
		meta = fz_load("keras_config_base.metadata.json", &nmeta);
		weights = fz_load("keras_config_base.weights.h5", &nweights);
	}
	const char *names[3] = { "metadata.json", "config.json", "model.weights.h5" };
	const uint8_t *bufs[3] = { meta, data, weights };
	size_t lens[3] = { nmeta, size, nweights };
	size_t zlen = 0;
	uint8_t *zip = ckpt_fuzz_make_zip(names, bufs, lens, 3, &zlen);
	if (!zip)
		return 0;
	ckpt_vfs *vfs = fz_vfs();
	fz_put(vfs, "k/model.keras", zip, zlen);
	free(zip);
	fz_open_walk(vfs, "k/model.keras", 0);
	ckpt_vfs_free(vfs);
	return 0;
}

/*
 * The bundle a fuzzed saved_model.pb sits beside (sm/variables/variables):
 * written once through the library, with an object graph whose nodes 1..4
 * hold VARIABLE_VALUE attributes, so the SavedObjectGraph's variables map
 * onto entries (and sync rules apply) for any node ids in that range.
 */
static uint8_t *sm_index, *sm_data;
static size_t sm_nindex, sm_ndata;

static void fz_read_back(ckpt_vfs *vfs, const char *path, uint8_t **buf, size_t *n)
{
	void *b = NULL;
	if (ckpt_vfs_read_all(&b, n, vfs, path, 1u << 20) < 0)
		abort();
	*buf = malloc(*n ? *n : 1);
	if (!*buf)
		abort();
	memcpy(*buf, b, *n);
	free(b); /* fz_vfs installed a malloc-based allocator hook */
}

static void fz_make_sm_bundle(void)
{
	static const char *const keys[] = { "a/.ATTRIBUTES/VARIABLE_VALUE", "b/.ATTRIBUTES/VARIABLE_VALUE",
		"m/total/.ATTRIBUTES/VARIABLE_VALUE", "m/count/.ATTRIBUTES/VARIABLE_VALUE" };
	static const char *const names[] = { "a", "b", "total", "count" };
	ckpt_vfs *vfs = fz_vfs();
	ckpt_write_options wo = CKPT_WRITE_OPTIONS_INIT;
	wo.vfs = vfs;
	wo.no_fsync = 1;
	ckpt_writer *w = NULL;
	if (ckpt_writer_open(&w, "sm/variables/variables", NULL, &wo) < 0)
		abort();
	ckpt_og_child rootc[3] = { { 1, "a" }, { 2, "b" }, { 5, "m" } }, mc[2] = { { 3, "total" }, { 4, "count" } };
	ckpt_og_attr attrs[4];
	ckpt_og_node nodes[6];
	memset(nodes, 0, sizeof(nodes));
	nodes[0].nchildren = 3;
	nodes[0].children = rootc;
	nodes[5].nchildren = 2;
	nodes[5].children = mc;
	for (int i = 0; i < 4; i++) {
		float f = (float)i + 0.5f;
		ckpt_shape sc = { 0, { 0 } };
		ckpt_tensor *t = NULL;
		if (ckpt_tensor_new(&t, CKPT_DT_FLOAT, &sc) < 0)
			abort();
		memcpy(t->data, &f, 4);
		if (ckpt_writer_add(w, keys[i], t, 0) < 0)
			abort();
		ckpt_tensor_free(t);
		attrs[i].name = CKPT_VARIABLE_VALUE_KEY;
		attrs[i].full_name = (char *)names[i];
		attrs[i].checkpoint_key = (char *)keys[i];
		attrs[i].optional_restore = 0;
		nodes[i + 1].nattrs = 1;
		nodes[i + 1].attrs = &attrs[i];
	}
	for (int i = 0; i < 6; i++)
		nodes[i].has_checkpoint_values = -1;
	ckpt_object_graph g = { 6, nodes };
	if (ckpt_writer_set_object_graph(w, &g) < 0 || ckpt_writer_commit(w) < 0)
		abort();
	ckpt_writer_free(w);
	fz_read_back(vfs, "sm/variables/variables.index", &sm_index, &sm_nindex);
	fz_read_back(vfs, "sm/variables/variables.data-00000-of-00001", &sm_data, &sm_ndata);
	ckpt_vfs_free(vfs);
}

int ckpt_fuzz_saved_model(const uint8_t *data, size_t size)
{
	if (!sm_index)
		fz_make_sm_bundle();
	ckpt_vfs *vfs = fz_vfs();
	ckpt_saved_model *sm = NULL;
	int rc = ckpt_saved_model_parse(&sm, data, size);
	fz_check(rc, "ckpt_saved_model_parse");
	if (rc >= 0)
		fz_walk_saved_model(sm);
	ckpt_saved_model_free(sm);
	/* the same bytes as a SavedModel's saved_model.pb, through the reader, with and without a rule */
	fz_put(vfs, "sm/saved_model.pb", data, size);
	fz_put(vfs, "sm/variables/variables.index", sm_index, sm_nindex);
	fz_put(vfs, "sm/variables/variables.data-00000-of-00001", sm_data, sm_ndata);
	for (int pass = 0; pass < 2; pass++) {
		ckpt_sync_rule rule = { "m/*", CKPT_SYNC_ON_READ, CKPT_AGG_SUM };
		ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
		o.vfs = vfs;
		o.sync_rules = &rule;
		o.num_sync_rules = (size_t)pass;
		ckpt_reader *r = NULL;
		rc = ckpt_reader_open(&r, "sm", &o);
		fz_check(rc, "ckpt_reader_open of a SavedModel");
		if (rc >= 0) {
			if (!ckpt_reader_saved_model(r))
				fz_die("a SavedModel opened without its saved_model.pb", 0);
			for (size_t i = 0; i < ckpt_reader_num_entries(r); i++) {
				const ckpt_var_info *v = ckpt_reader_var(r, i);
				if ((unsigned)v->sync > CKPT_SYNC_ON_READ || (unsigned)v->aggregation > CKPT_AGG_ONLY_FIRST_REPLICA ||
				    (v->sync_source == CKPT_SYNC_SOURCE_NONE && v->sync != CKPT_SYNC_AUTO))
					fz_die("an entry's synchronization is out of range or from nowhere", (int)v->sync);
				if (pass && strncmp(v->name, "m/", 2) == 0 && v->sync_source != CKPT_SYNC_SOURCE_RULE)
					fz_die("a sync rule did not apply", 0);
			}
			fz_walk_reader(r);
		}
		ckpt_reader_free(r);
	}
	ckpt_vfs_free(vfs);
	return 0;
}

const char *const ckpt_fuzz_targets[] = { "tf_index", "tf_bundle", "object_graph", "state_file", "keras_h5",
	"keras_archive", "keras_config", "safetensors", "gguf", "saved_model", NULL };

ckpt_fuzz_fn ckpt_fuzz_entry(const char *target)
{
	static const ckpt_fuzz_fn fns[] = { ckpt_fuzz_tf_index, ckpt_fuzz_tf_bundle, ckpt_fuzz_object_graph,
		ckpt_fuzz_state_file, ckpt_fuzz_keras_h5, ckpt_fuzz_keras_archive, ckpt_fuzz_keras_config,
		ckpt_fuzz_safetensors, ckpt_fuzz_gguf, ckpt_fuzz_saved_model };
	for (size_t i = 0; ckpt_fuzz_targets[i]; i++)
		if (strcmp(ckpt_fuzz_targets[i], target) == 0)
			return fns[i];
	return NULL;
}

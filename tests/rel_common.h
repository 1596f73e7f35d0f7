/*
 * Shared helpers for the reliability suites (truncation, corruption,
 * hostile inputs, fault injection): every fixture of ../shared/fixtures as a
 * "unit" (the files one open needs) loaded into an in-memory file system, a
 * walk that opens a path and reads every entry, and a counting allocator
 * that sees every library allocation (leaks, largest request).
 *
 * Header-only (static functions) so each suite stays one file.
 */
#ifndef CKPT_REL_COMMON_H
#define CKPT_REL_COMMON_H

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

#define REL_UNUSED __attribute__((unused))

/* ------------------------------------------------------------------ */
/* Counting allocator                                                   */
/* ------------------------------------------------------------------ */

/* Header in front of every block so free knows the size. */
#define REL_HDR 16
static long rel_live_blocks, rel_calls, rel_fail_at;
static size_t rel_largest, rel_refuse_above;

static void *rel_malloc(size_t n, void *ctx)
{
	(void)ctx;
	long call = __atomic_add_fetch(&rel_calls, 1, __ATOMIC_SEQ_CST);
	if (rel_fail_at && call == rel_fail_at)
		return NULL;
	if (n > rel_largest)
		rel_largest = n;
	if (rel_refuse_above && n > rel_refuse_above)
		return NULL;
	unsigned char *p = malloc(n + REL_HDR);
	if (!p)
		return NULL;
	memcpy(p, &n, sizeof(n));
	__atomic_add_fetch(&rel_live_blocks, 1, __ATOMIC_SEQ_CST);
	return p + REL_HDR;
}

static void rel_free(void *q, void *ctx)
{
	(void)ctx;
	if (!q)
		return;
	__atomic_sub_fetch(&rel_live_blocks, 1, __ATOMIC_SEQ_CST);
	free((unsigned char *)q - REL_HDR);
}

static void *rel_realloc(void *q, size_t n, void *ctx)
{
	if (!q)
		return rel_malloc(n, ctx);
	long call = __atomic_add_fetch(&rel_calls, 1, __ATOMIC_SEQ_CST);
	if (rel_fail_at && call == rel_fail_at)
		return NULL;
	if (n > rel_largest)
		rel_largest = n;
	if (rel_refuse_above && n > rel_refuse_above)
		return NULL;
	unsigned char *p = realloc((unsigned char *)q - REL_HDR, n + REL_HDR);
	if (!p)
		return NULL;
	memcpy(p, &n, sizeof(n));
	return p + REL_HDR;
}

/** Install the counting allocator: fail call `fail_at` (1-based; 0 = never), refuse blocks above `refuse_above` (0 = no cap). */
static REL_UNUSED void rel_alloc_install(long fail_at, size_t refuse_above)
{
	rel_calls = 0;
	rel_fail_at = fail_at;
	rel_largest = 0;
	rel_refuse_above = refuse_above;
	ckpt_allocator a = { rel_malloc, rel_realloc, rel_free, NULL };
	ckpt_set_allocator(&a);
}

static REL_UNUSED void rel_alloc_arm(long fail_at)
{
	__atomic_store_n(&rel_calls, 0, __ATOMIC_SEQ_CST);
	rel_fail_at = fail_at;
}

static REL_UNUSED void rel_alloc_restore(void)
{
	ckpt_set_allocator(NULL);
}

/* ------------------------------------------------------------------ */
/* Fixture units                                                        */
/* ------------------------------------------------------------------ */

enum { REL_TF = 0, REL_KERAS_H5 = 1, REL_KERAS_ZIP = 2, REL_TF_STATE = 3 };
#define REL_MAX_FILES 16

typedef struct rel_file {
	char vpath[512];      /* path in the memory file system */
	unsigned char *data;  /* pristine content (malloc'ed) */
	size_t n;
} rel_file;

typedef struct rel_unit {
	char name[600];       /* fixture-relative, for messages */
	char open_path[512];  /* what ckpt_reader_open gets */
	int kind;
	int nfiles;
	rel_file files[REL_MAX_FILES];
} rel_unit;

typedef struct rel_units {
	rel_unit *u;
	size_t n, cap;
} rel_units;

static rel_unit *rel_units_add(rel_units *us)
{
	if (us->n == us->cap) {
		us->cap = us->cap ? us->cap * 2 : 32;
		us->u = realloc(us->u, us->cap * sizeof(*us->u));
		cr_assert_not_null(us->u);
	}
	rel_unit *u = &us->u[us->n++];
	memset(u, 0, sizeof(*u));
	return u;
}

static int rel_ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void rel_unit_file(rel_unit *u, const char *root, const char *rel)
{
	cr_assert_lt(u->nfiles, REL_MAX_FILES);
	rel_file *f = &u->files[u->nfiles++];
	snprintf(f->vpath, sizeof(f->vpath), "fx/%s", rel);
	char *full = ts_join(root, rel);
	f->data = (unsigned char *)ts_read_file(full, &f->n);
	cr_assert_not_null(f->data, "cannot read fixture %s", full);
	free(full);
}

/* Collect units below fixtures/<sub> (recursive). */
static void rel_scan(rel_units *us, const char *root, const char *sub)
{
	char *dir = ts_join(root, sub);
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort);
	free(dir);
	if (n < 0)
		return;
	int has_state = 0, nindex = 0;
	for (int i = 0; i < n; i++) {
		const char *nm = ents[i]->d_name;
		if (nm[0] == '.')
			continue;
		char rel[512];
		snprintf(rel, sizeof(rel), "%s%s%s", sub, sub[0] ? "/" : "", nm);
		char *full = ts_join(root, rel);
		struct stat st;
		int ok = stat(full, &st) == 0;
		free(full);
		if (!ok)
			continue;
		if (S_ISDIR(st.st_mode)) {
			rel_scan(us, root, rel);
			continue;
		}
		if (strcmp(nm, "checkpoint") == 0)
			has_state = 1;
		if (rel_ends_with(nm, ".index")) {
			nindex++;
			rel_unit *u = rel_units_add(us);
			u->kind = REL_TF;
			snprintf(u->name, sizeof(u->name), "%s", rel);
			snprintf(u->open_path, sizeof(u->open_path), "fx/%.*s", (int)(strlen(rel) - 6), rel);
			rel_unit_file(u, root, rel);
			char pfx[512];
			snprintf(pfx, sizeof(pfx), "%.*s.data-", (int)(strlen(nm) - 6), nm);
			for (int j = 0; j < n; j++)
				if (strncmp(ents[j]->d_name, pfx, strlen(pfx)) == 0) {
					char r2[512];
					snprintf(r2, sizeof(r2), "%s%s%s", sub, sub[0] ? "/" : "", ents[j]->d_name);
					rel_unit_file(u, root, r2);
				}
		} else if (rel_ends_with(nm, ".h5") || rel_ends_with(nm, ".hdf5") || rel_ends_with(nm, ".keras")) {
			rel_unit *u = rel_units_add(us);
			u->kind = rel_ends_with(nm, ".keras") ? REL_KERAS_ZIP : REL_KERAS_H5;
			snprintf(u->name, sizeof(u->name), "%s", rel);
			snprintf(u->open_path, sizeof(u->open_path), "fx/%s", rel);
			rel_unit_file(u, root, rel);
		}
	}
	/* A directory with a `checkpoint` state file: opened by directory name. */
	if (has_state && nindex) {
		rel_unit *u = rel_units_add(us);
		u->kind = REL_TF_STATE;
		snprintf(u->name, sizeof(u->name), "%s/checkpoint", sub);
		snprintf(u->open_path, sizeof(u->open_path), "fx/%s", sub);
		char rel[512];
		snprintf(rel, sizeof(rel), "%s/checkpoint", sub);
		rel_unit_file(u, root, rel);
		for (int i = 0; i < n; i++)
			if (strstr(ents[i]->d_name, ".index") || strstr(ents[i]->d_name, ".data-")) {
				snprintf(rel, sizeof(rel), "%s/%s", sub, ents[i]->d_name);
				rel_unit_file(u, root, rel);
			}
	}
	for (int i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
}

/** Every fixture unit (TensorBundles by prefix, state-file directories, Keras files). */
static REL_UNUSED rel_units rel_fixture_units(void)
{
	rel_units us = { 0 };
	rel_scan(&us, CKPT_SHARED_DIR "/fixtures", "");
	return us;
}

static REL_UNUSED void rel_units_free(rel_units *us)
{
	for (size_t i = 0; i < us->n; i++)
		for (int j = 0; j < us->u[i].nfiles; j++)
			free(us->u[i].files[j].data);
	free(us->u);
	memset(us, 0, sizeof(*us));
}

/** A memory file system holding the pristine files of `u`. */
static REL_UNUSED ckpt_vfs *rel_unit_vfs(const rel_unit *u)
{
	ckpt_vfs *vfs = NULL;
	cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
	for (int i = 0; i < u->nfiles; i++)
		cr_assert_eq(ckpt_vfs_memory_put(vfs, u->files[i].vpath, u->files[i].data, u->files[i].n), CKPT_OK);
	return vfs;
}

/* ------------------------------------------------------------------ */
/* Walking a reader                                                     */
/* ------------------------------------------------------------------ */

/** Outcome of one open + read-everything. */
typedef struct rel_outcome {
	int rc;             /* first failure, or CKPT_OK */
	int err_code;       /* ckpt_error_last()->code right after it */
	char message[512];  /* its message ("" when none) */
	int has_path;       /* the error named a file */
	int has_context;    /* path, variable or offset known */
	size_t nread;       /* entries read successfully */
} rel_outcome;

static void rel_note(rel_outcome *o, int rc)
{
	if (rc >= 0 || o->rc < 0)
		return;
	const ckpt_error *e = ckpt_error_last();
	o->rc = rc;
	o->err_code = e->code;
	snprintf(o->message, sizeof(o->message), "%s", e->message ? e->message : "");
	o->has_path = e->path && e->path[0];
	o->has_context = o->has_path || (e->variable && e->variable[0]) || e->offset >= 0;
}

/** Open `path` on `vfs` and read every entry; the first failure is kept. */
static REL_UNUSED rel_outcome rel_walk(ckpt_vfs *vfs, const char *path, int no_verify)
{
	rel_outcome o = { 0 };
	ckpt_open_options opts = CKPT_OPEN_OPTIONS_INIT;
	opts.vfs = vfs;
	opts.no_verify = no_verify;
	ckpt_reader *r = NULL;
	int rc = ckpt_reader_open(&r, path, &opts);
	rel_note(&o, rc);
	if (rc >= 0) {
		size_t n = ckpt_reader_count(r);
		for (size_t i = 0; i < n; i++) {
			ckpt_tensor *t = NULL;
			rc = ckpt_reader_read(r, i, &t);
			rel_note(&o, rc);
			if (rc >= 0)
				o.nread++;
			ckpt_tensor_free(t);
		}
	}
	ckpt_reader_free(r);
	return o;
}

static REL_UNUSED double rel_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/**
 * Positions to sweep in a file of `n` bytes: all of them when the file is
 * at most `dense` bytes, else the first and last 1 KiB densely and
 * `dense - 2048` evenly spread positions in between. Returns the count;
 * `*pos` is malloc'ed.
 */
static REL_UNUSED size_t rel_positions(size_t n, size_t dense, size_t **pos)
{
	size_t cap = n <= dense ? n : dense;
	size_t *p = malloc((cap ? cap : 1) * sizeof(*p)), k = 0;
	cr_assert_not_null(p);
	if (n <= dense) {
		for (size_t i = 0; i < n; i++)
			p[k++] = i;
	} else {
		size_t edge = 1024, mid = dense - 2 * edge;
		for (size_t i = 0; i < edge; i++)
			p[k++] = i;
		for (size_t j = 0; j < mid; j++)
			p[k++] = edge + (size_t)((double)j * (double)(n - 2 * edge) / (double)mid);
		for (size_t i = n - edge; i < n; i++)
			p[k++] = i;
	}
	*pos = p;
	return k;
}

#endif

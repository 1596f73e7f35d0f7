/* rel_common: the bodies of the helpers declared in rel_common.h. */
#include "rel_common.h"
#include "ckpt/sys/vfs_memory.h"

long rel_live_blocks, rel_calls, rel_fail_at;
size_t rel_largest, rel_refuse_above;

size_t rel_scaled(size_t dense)
{
	const char *env = getenv("CKPT_TEST_SWEEP_SCALE");
	double scale = env ? atof(env) : 1.0;
	if (!(scale > 0.0 && scale < 1.0))
		return dense;
	size_t n = (size_t)((double)dense * scale + 0.5);
	return n < REL_MIN_SAMPLE ? (dense < REL_MIN_SAMPLE ? dense : REL_MIN_SAMPLE) : n;
}

int rel_rerun_where_malloc_may_fail(void)
{
#if defined(__SANITIZE_ADDRESS__)
	if (getenv("CKPT_TEST_ASAN_MAY_RETURN_NULL"))
		return 0;
	char self[4096], cmd[8192];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	cr_assert_gt(n, 0);
	self[n] = '\0';
	const char *opts = getenv("ASAN_OPTIONS");
	/* BXFI_MAP would make the child take itself for this runner's sandboxed worker */
	snprintf(cmd, sizeof(cmd), "env -u BXFI_MAP ASAN_OPTIONS='%s%sallocator_may_return_null=1' "
		"CKPT_TEST_ASAN_MAY_RETURN_NULL=1 '%s' --filter '%s/%s' --jobs 1 2>&1", opts ? opts : "",
		opts && *opts ? ":" : "", self,
		criterion_current_suite->name, criterion_current_test->name);
	ts_run_result r;
	cr_assert_eq(ts_run_sh(&r, cmd), 0);
	int passed = r.status == 0 && strstr(r.out, "Tested: 1 | Passing: 1 | Failing: 0 | Crashing: 0");
	if (!passed) {
		size_t len = strlen(r.out);
		cr_log_error("%s", r.out + (len > 6000 ? len - 6000 : 0));
	}
	ts_run_free(&r);
	cr_assert(passed, "the re-run with allocator_may_return_null=1 failed (its output is above)");
	return 1;
#else
	return 0;
#endif
}

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

void rel_alloc_install(long fail_at, size_t refuse_above)
{
	rel_calls = 0;
	rel_fail_at = fail_at;
	rel_largest = 0;
	rel_refuse_above = refuse_above;
	ckpt_allocator a = { rel_malloc, rel_realloc, rel_free, NULL };
	ckpt_set_allocator(&a);
}

void rel_alloc_arm(long fail_at)
{
	__atomic_store_n(&rel_calls, 0, __ATOMIC_SEQ_CST);
	rel_fail_at = fail_at;
}

void rel_alloc_disarm(void)
{
	rel_fail_at = 0;
}

void rel_alloc_restore(void)
{
	ckpt_set_allocator(NULL);
}

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
					int k = snprintf(r2, sizeof(r2), "%s%s%s", sub, sub[0] ? "/" : "", ents[j]->d_name);
					cr_assert(k > 0 && (size_t)k < sizeof(r2), "fixture path too long");
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

rel_units rel_fixture_units(void)
{
	rel_units us = { 0 };
	rel_scan(&us, CKPT_FIXTURES_DIR, "");
	return us;
}

void rel_units_free(rel_units *us)
{
	for (size_t i = 0; i < us->n; i++)
		for (int j = 0; j < us->u[i].nfiles; j++)
			free(us->u[i].files[j].data);
	free(us->u);
	memset(us, 0, sizeof(*us));
}

ckpt_vfs *rel_unit_vfs(const rel_unit *u)
{
	ckpt_vfs *vfs = NULL;
	cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
	for (int i = 0; i < u->nfiles; i++)
		cr_assert_eq(ckpt_vfs_memory_put(vfs, u->files[i].vpath, u->files[i].data, u->files[i].n), CKPT_OK);
	return vfs;
}

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

rel_outcome rel_walk(ckpt_vfs *vfs, const char *path, int no_verify)
{
	rel_outcome o = { 0 };
	ckpt_open_options opts = CKPT_OPEN_OPTIONS_INIT;
	opts.vfs = vfs;
	opts.no_verify = no_verify;
	ckpt_reader *r = NULL;
	ckpt_error_clear();
	int rc = ckpt_reader_open(&r, path, &opts);
	rel_note(&o, rc);
	if (rc >= 0) {
		size_t n = ckpt_reader_num_entries(r);
		for (size_t i = 0; i < n; i++) {
			ckpt_tensor *t = NULL;
			ckpt_error_clear();
			rc = ckpt_reader_read(&t, r, i);
			rel_note(&o, rc);
			if (rc >= 0)
				o.nread++;
			ckpt_tensor_free(t);
		}
	}
	ckpt_reader_free(r);
	return o;
}

void rel_run_cases(size_t n, rel_case_fn fn, void *ctx, int isolate, rel_outcome *out)
{
	if (!isolate) {
		for (size_t k = 0; k < n; k++)
			out[k] = fn(ctx, k);
		return;
	}
	size_t next = 0;
	while (next < n) {
		int fds[2];
		cr_assert_eq(pipe(fds), 0);
		fflush(NULL);
		pid_t pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			close(fds[0]);
			for (size_t k = next; k < n; k++) {
				rel_outcome o = fn(ctx, k);
				if (write(fds[1], &o, sizeof(o)) != (ssize_t)sizeof(o))
					_exit(3);
			}
			_exit(0);
		}
		close(fds[1]);
		size_t k = next;
		for (;;) {
			rel_outcome o;
			size_t got = 0;
			while (got < sizeof(o)) {
				ssize_t r = read(fds[0], (char *)&o + got, sizeof(o) - got);
				if (r <= 0)
					break;
				got += (size_t)r;
			}
			if (got != sizeof(o))
				break;
			out[k++] = o;
		}
		close(fds[0]);
		int st = 0;
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		if (k < n) {
			rel_outcome *o = &out[k];
			memset(o, 0, sizeof(*o));
			o->signal = WIFSIGNALED(st) ? WTERMSIG(st) : -1;
			o->rc = CKPT_ERROR;
			if (o->signal > 0)
				snprintf(o->message, sizeof(o->message), "killed by signal %d (%s)", o->signal, strsignal(o->signal));
			else
				snprintf(o->message, sizeof(o->message), "walk exited with status %d", WEXITSTATUS(st));
			k++;
		}
		next = k;
	}
}

double rel_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

size_t rel_positions(size_t n, size_t dense, size_t **pos)
{
	size_t cap = n <= dense ? n : dense;
	size_t *p = malloc((cap ? cap : 1) * sizeof(*p)), k = 0;
	cr_assert_not_null(p);
	if (n <= dense) {
		for (size_t i = 0; i < n; i++)
			p[k++] = i;
	} else {
		size_t edge = dense / 4 < 1024 ? dense / 4 : 1024, mid = dense - 2 * edge;
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

unsigned char rel_flip_mask(size_t pos)
{
	return (unsigned char)(1u << (pos % 8));
}

static rel_outcome rel_sweep_case(void *vctx, size_t k)
{
	rel_sweep_ctx *c = vctx;
	size_t p = c->pos[k];
	if (getenv("REL_TRACE"))
		fprintf(stderr, "%s %s at %zu\n", c->mode == REL_FLIP ? "flip" : "cut", c->f->vpath, p);
	if (c->mode == REL_FLIP) {
		c->scratch[p] ^= rel_flip_mask(p);
		cr_assert_eq(ckpt_vfs_memory_put(c->vfs, c->f->vpath, c->scratch, c->f->n), CKPT_OK);
		c->scratch[p] ^= rel_flip_mask(p);
	} else {
		cr_assert_eq(ckpt_vfs_memory_put(c->vfs, c->f->vpath, c->f->data, p), CKPT_OK);
	}
	rel_largest = 0;
	rel_outcome o = rel_walk(c->vfs, c->u->open_path, 0);
	o.largest = rel_largest;
	return o;
}

/* Keep a mishandled input for tests/fuzz/regressions (REL_SAVE_DIR=dir). */
static void rel_save_case(const rel_sweep_ctx *c, size_t p)
{
	const char *dir = getenv("REL_SAVE_DIR");
	if (!dir)
		return;
	char out[4096];
	const char *slash = strrchr(c->f->vpath, '/');
	snprintf(out, sizeof(out), "%s/%s.%s%zu", dir, slash ? slash + 1 : c->f->vpath,
		c->mode == REL_FLIP ? "flip" : "cut", p);
	if (c->mode == REL_FLIP) {
		c->scratch[p] ^= rel_flip_mask(p);
		ts_write_file(out, c->scratch, c->f->n);
		c->scratch[p] ^= rel_flip_mask(p);
	} else {
		ts_write_file(out, c->f->data, p);
	}
}

void rel_sweep_positions(int kind_mask, int mode, size_t dense, size_t byte_budget)
{
	const char *what = mode == REL_FLIP ? "bit flip" : "truncation";
	rel_units us = rel_fixture_units();
	cr_assert_gt(us.n, 0, "no fixtures found under %s", CKPT_FIXTURES_DIR);
	rel_alloc_install(0, REL_ALLOC_CAP);
	long failures = 0, cases = 0, planned = 0, detected = 0, crashes = 0, skipped = 0, units[4] = { 0 };
	double t0 = rel_now();
	for (size_t ui = 0; ui < us.n; ui++) {
		const rel_unit *u = &us.u[ui];
		if (!(kind_mask & (1 << u->kind)))
			continue;
		int isolate = u->kind == REL_KERAS_H5 || u->kind == REL_KERAS_ZIP;
		ckpt_vfs *vfs = rel_unit_vfs(u);
		rel_outcome base = rel_walk(vfs, u->open_path, 0);
		if (base.rc < 0) {
			/* every fixture reads intact (the backends' own tests check how); a sweep that cannot start on one fails */
			cr_log_error("%s sweep: skipping %s: intact file does not read: %s (%s)", what, u->name,
				ckpt_status_name(base.rc), base.message);
			skipped++;
			ckpt_vfs_free(vfs);
			continue;
		}
		size_t want = dense, total = 0;
		for (int fi = 0; fi < u->nfiles; fi++)
			total += u->files[fi].n;
		if (byte_budget && total && byte_budget / total < want)
			want = byte_budget / total < REL_MIN_SAMPLE ? REL_MIN_SAMPLE : byte_budget / total;
		want = rel_scaled(want);
		for (int fi = 0; fi < u->nfiles; fi++) {
			const rel_file *f = &u->files[fi];
			size_t *pos;
			size_t np = rel_positions(f->n, want, &pos);
			planned += (long)(f->n < want ? f->n : want);
			rel_sweep_ctx c = { u, f, vfs, mode, pos, malloc(f->n ? f->n : 1) };
			cr_assert_not_null(c.scratch);
			memcpy(c.scratch, f->data, f->n);
			rel_outcome *res = calloc(np ? np : 1, sizeof(*res));
			cr_assert_not_null(res);
			rel_run_cases(np, rel_sweep_case, &c, isolate, res);
			for (size_t k = 0; k < np; k++) {
				const rel_outcome *o = &res[k];
				cases++;
				if (o->rc < 0)
					detected++;
				/* A cut member of a state-file directory may leave a shorter valid name. */
				int must_fail = mode == REL_TRUNCATE && u->kind != REL_TF_STATE;
				const char *why = NULL;
				if (o->signal) {
					why = "the reader crashed";
					crashes++;
				} else if (must_fail && o->rc >= 0)
					why = "truncated input was accepted";
				else if (o->rc < 0 && (o->err_code >= 0 || !o->message[0]))
					why = "failure recorded no error of its own (status, message)";
				else if (o->rc < 0 && o->err_code != o->rc)
					why = "returned status differs from the recorded error";
				else if (o->rc < 0 && mode == REL_TRUNCATE && !o->has_path)
					why = "error does not name the file";
				else if (o->rc < 0 && !o->has_context)
					why = "error has no context (file, variable or offset)";
				else if (o->largest > REL_ALLOC_CAP)
					why = "allocation above the cap was requested";
				if (!why)
					continue;
				rel_save_case(&c, pos[k]);
				if (failures < REL_MAX_REPORTED)
					cr_log_error("%s: %s %s at %zu of %zu bytes: %s (rc=%s, largest alloc %zu, \"%s\")", u->name,
						f->vpath, what, pos[k], f->n, why, ckpt_status_name(o->rc), o->largest, o->message);
				failures++;
			}
			free(res);
			free(c.scratch);
			free(pos);
			cr_assert_eq(ckpt_vfs_memory_put(vfs, f->vpath, f->data, f->n), CKPT_OK);
		}
		units[u->kind]++;
		ckpt_vfs_free(vfs);
	}
	rel_alloc_restore();
	cr_log_info("%s sweep (kinds 0x%x): %ld cases, %ld failed cleanly or crashed, %ld crashes, %.1f s, %ld units skipped",
		what, kind_mask, cases, detected, crashes, rel_now() - t0, skipped);
	rel_units_free(&us);
	cr_assert_eq(skipped, 0, "%ld fixture(s) did not read intact (listed above)", skipped);
	for (int k = 0; k < 4; k++)
		cr_assert(!(kind_mask & (1 << k)) || units[k] > 0, "no fixture unit of kind %d was swept", k);
	cr_assert_eq(cases, planned, "%ld of %ld planned cases ran", cases, planned);
	cr_assert_geq(cases, REL_MIN_SAMPLE, "only %ld %s cases", cases, what);
	cr_assert_eq(failures, 0, "%ld of %ld %s cases mishandled, %ld of them crashes (first %d listed above)",
		failures, cases, what, crashes, REL_MAX_REPORTED);
}

/*
 * The VFS is the only door to files (io.h). A pass-through VFS over the
 * POSIX one counts, per path, the opens and the bytes read and written, and
 * lends no descriptor (so every byte goes through its pread and pwrite).
 * Every CLI command run over it (inspect, verify, restore, restore --save,
 * diff, convert to each format and back) must have read every byte of each
 * file it was given and written every byte of each file it made, through the
 * wrapper. Also: a method table of version 1 still works, with the documented
 * fallbacks; the fault-injecting VFS reaches every write of a Keras save and
 * a failure at any of them leaves the old file and no temporary; and a
 * wrapper that lends its inner descriptor keeps the fast paths.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "ckpt/sys/vfs.h"
#include "ckpt/sys/vfs_faulty.h"
#include "ckpt/sys/vfs_memory.h"
#include "tools/cli.h"
#include "test_support.h"

/* ---- the counting pass-through ---- */

typedef struct byte_range {
	uint64_t off, len;
} byte_range;

typedef struct path_count {
	char *path;
	long opens;
	uint64_t read, written;
	byte_range *w;            /* every pwrite, to find the bytes of the file nobody wrote */
	size_t nw, capw;
} path_count;

typedef struct count_vfs {
	ckpt_vfs base;
	ckpt_vfs_methods methods; /* version 1 or 2, see count_vfs_new */
	ckpt_vfs *inner;
	int lend_fd;              /* 1: pass the inner descriptor on (the fast paths stay on, uncounted) */
	pthread_mutex_t mu;
	path_count *v;
	size_t n, cap;
	long calls, renames;
} count_vfs;

typedef struct count_io {
	ckpt_io base;
	ckpt_io *inner;
	count_vfs *vfs;
} count_io;

/* The entry of `path` (created), under mu. */
static path_count *entry_locked(count_vfs *c, const char *path)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->v[i].path, path) == 0)
			return &c->v[i];
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 64;
		c->v = realloc(c->v, c->cap * sizeof(*c->v));
		cr_assert_not_null(c->v);
	}
	path_count *e = &c->v[c->n++];
	memset(e, 0, sizeof(*e));
	e->path = strdup(path);
	return e;
}

static void count_write(count_vfs *c, const char *path, uint64_t off, uint64_t n)
{
	pthread_mutex_lock(&c->mu);
	path_count *e = entry_locked(c, path);
	if (e->nw == e->capw) {
		e->capw = e->capw ? 2 * e->capw : 16;
		e->w = realloc(e->w, e->capw * sizeof(*e->w));
		cr_assert_not_null(e->w);
	}
	e->w[e->nw++] = (byte_range){ off, n };
	e->written += n;
	c->calls++;
	pthread_mutex_unlock(&c->mu);
}

static void count(count_vfs *c, const char *path, long opens, uint64_t read)
{
	pthread_mutex_lock(&c->mu);
	path_count *e = entry_locked(c, path);
	e->opens += opens;
	e->read += read;
	c->calls++;
	pthread_mutex_unlock(&c->mu);
}

static int cio_pread(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got)
{
	count_io *c = (count_io *)io;
	int rc = ckpt_io_pread(got, c->inner, buf, n, off);
	count(c->vfs, io->path, 0, rc == CKPT_OK ? *got : 0);
	return rc;
}

static int cio_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off)
{
	count_io *c = (count_io *)io;
	int rc = ckpt_io_pwrite(c->inner, buf, n, off);
	if (rc == CKPT_OK)
		count_write(c->vfs, io->path, off, n);
	return rc;
}

static int cio_size(ckpt_io *io, uint64_t *out)
{
	count_io *c = (count_io *)io;
	count(c->vfs, io->path, 0, 0);
	return ckpt_io_size(out, c->inner);
}

static int cio_sync(ckpt_io *io)
{
	count_io *c = (count_io *)io;
	count(c->vfs, io->path, 0, 0);
	return ckpt_io_sync(c->inner);
}

static int cio_close(ckpt_io *io)
{
	count_io *c = (count_io *)io;
	int rc = ckpt_io_close(c->inner);
	free(io->path);
	free(c);
	return rc;
}

static int cio_fd(ckpt_io *io)
{
	count_io *c = (count_io *)io;
	return c->vfs->lend_fd ? ckpt_io_fd(c->inner) : -1;
}

static const ckpt_io_methods count_io_v2 = { .version = CKPT_IO_METHODS_V2, .pread = cio_pread,
	.pwrite = cio_pwrite, .size = cio_size, .sync = cio_sync, .close = cio_close, .fd = cio_fd };
/* as a table written for 0.1.0: designated, so the members version 2 appended are zero */
static const ckpt_io_methods count_io_v1 = { .version = CKPT_IO_METHODS_V1, .pread = cio_pread,
	.pwrite = cio_pwrite, .size = cio_size, .sync = cio_sync, .close = cio_close };

static int cv_open(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out)
{
	count_vfs *c = (count_vfs *)vfs;
	ckpt_io *inner;
	int rc = ckpt_vfs_open(&inner, c->inner, path, flags);
	if (rc < 0)
		return rc;
	count_io *io = calloc(1, sizeof(*io));
	cr_assert_not_null(io);
	io->base.methods = c->methods.version >= CKPT_VFS_METHODS_V2 ? &count_io_v2 : &count_io_v1;
	io->base.path = strdup(path);
	io->inner = inner;
	io->vfs = c;
	count(c, path, 1, 0);
	*out = &io->base;
	return CKPT_OK;
}

static int cv_rename(ckpt_vfs *vfs, const char *from, const char *to)
{
	count_vfs *c = (count_vfs *)vfs;
	int rc = ckpt_vfs_rename(c->inner, from, to);
	__atomic_add_fetch(&c->renames, 1, __ATOMIC_RELAXED);
	if (rc == CKPT_OK) {
		/* what was written under the temporary name was written to the file */
		pthread_mutex_lock(&c->mu);
		path_count *a = entry_locked(c, from);
		path_count moved = *a;
		a->written = 0;
		a->w = NULL;
		a->nw = a->capw = 0;
		path_count *b = entry_locked(c, to);
		free(b->w);
		b->written = moved.written;
		b->w = moved.w;
		b->nw = moved.nw;
		b->capw = moved.capw;
		b->opens += moved.opens;
		c->calls++;
		pthread_mutex_unlock(&c->mu);
	}
	return rc;
}

static int cv_remove(ckpt_vfs *vfs, const char *path)
{
	count_vfs *c = (count_vfs *)vfs;
	count(c, path, 0, 0);
	return ckpt_vfs_remove(c->inner, path);
}

static int cv_exists(ckpt_vfs *vfs, const char *path, int *is_dir)
{
	count_vfs *c = (count_vfs *)vfs;
	count(c, path, 0, 0);
	return ckpt_vfs_exists(is_dir, c->inner, path);
}

static int cv_sync_dir(ckpt_vfs *vfs, const char *dir)
{
	count_vfs *c = (count_vfs *)vfs;
	count(c, dir, 0, 0);
	return ckpt_vfs_sync_dir(c->inner, dir);
}

static int cv_list(ckpt_vfs *vfs, const char *dir, char ***names, size_t *n)
{
	count_vfs *c = (count_vfs *)vfs;
	count(c, dir, 0, 0);
	return ckpt_vfs_list(names, n, c->inner, dir);
}

static int cv_mkdir(ckpt_vfs *vfs, const char *dir)
{
	count_vfs *c = (count_vfs *)vfs;
	count(c, dir, 0, 0);
	return ckpt_vfs_mkdir(c->inner, dir);
}

static int cv_rmdir(ckpt_vfs *vfs, const char *dir)
{
	count_vfs *c = (count_vfs *)vfs;
	count(c, dir, 0, 0);
	return ckpt_vfs_rmdir(c->inner, dir);
}

static int cv_lock(void **token, ckpt_vfs *vfs, const char *dir)
{
	count_vfs *c = (count_vfs *)vfs;
	count(c, dir, 0, 0);
	return ckpt_vfs_lock(token, c->inner, dir);
}

static void cv_unlock(ckpt_vfs *vfs, void *token)
{
	ckpt_vfs_unlock(((count_vfs *)vfs)->inner, token);
}

static void cv_destroy(ckpt_vfs *vfs)
{
	count_vfs *c = (count_vfs *)vfs;
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].path);
		free(c->v[i].w);
	}
	free(c->v);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static const ckpt_vfs_methods count_vfs_v2 = { CKPT_VFS_METHODS_V2, cv_open, cv_rename, cv_remove, cv_exists,
	cv_sync_dir, cv_list, cv_mkdir, cv_destroy, CKPT_VFS_CAP_EXCL, cv_rmdir, cv_lock, cv_unlock };
static const ckpt_vfs_methods count_vfs_v1 = { .version = CKPT_VFS_METHODS_V1, .open = cv_open,
	.rename = cv_rename, .remove = cv_remove, .exists = cv_exists, .sync_dir = cv_sync_dir, .list = cv_list,
	.mkdir = cv_mkdir, .destroy = cv_destroy };

static count_vfs *count_vfs_new(unsigned version, int lend_fd)
{
	count_vfs *c = calloc(1, sizeof(*c));
	cr_assert_not_null(c);
	c->methods = version >= CKPT_VFS_METHODS_V2 ? count_vfs_v2 : count_vfs_v1;
	c->base.methods = &c->methods;
	c->inner = ckpt_vfs_default();
	c->lend_fd = lend_fd;
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

static path_count count_of(count_vfs *c, const char *path)
{
	path_count r = { NULL, 0, 0, 0, NULL, 0, 0 };
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->v[i].path, path) == 0)
			r = c->v[i];
	pthread_mutex_unlock(&c->mu);
	return r;
}

/* ---- the files of a checkpoint ---- */

static uint64_t file_size(const char *path)
{
	struct stat st;
	cr_assert_eq(stat(path, &st), 0, "%s does not exist", path);
	return (uint64_t)st.st_size;
}

/* The files of checkpoint `path`: the file itself, or a bundle prefix's `prefix.*` (at most 16). */
static size_t files_of(const char *path, char **out)
{
	struct stat st;
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
		out[0] = strdup(path);
		return 1;
	}
	char *dir = strdup(path), *slash = strrchr(dir, '/');
	cr_assert_not_null(slash);
	*slash = '\0';
	const char *base = slash + 1;
	size_t n = 0, bl = strlen(base);
	DIR *d = opendir(dir);
	cr_assert_not_null(d, "%s", dir);
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		if (strncmp(e->d_name, base, bl) == 0 && e->d_name[bl] == '.' && !strstr(e->d_name, "tempstate") && n < 16)
			out[n++] = ts_join(dir, e->d_name);
	closedir(d);
	free(dir);
	cr_assert_gt(n, 0, "no files of checkpoint %s", path);
	return n;
}

/* Every byte of every file of checkpoint `path` was read through `c`. */
static void assert_read_through(count_vfs *c, const char *what, const char *path)
{
	char *f[16];
	size_t n = files_of(path, f);
	for (size_t i = 0; i < n; i++) {
		path_count k = count_of(c, f[i]);
		uint64_t size = file_size(f[i]);
		cr_assert_gt(k.opens, 0, "%s: %s was never opened through the VFS", what, f[i]);
		cr_assert_geq(k.read, size, "%s: %llu of the %llu bytes of %s were read through the VFS", what,
			(unsigned long long)k.read, (unsigned long long)size, f[i]);
		free(f[i]);
	}
}

/*
 * Every byte of every file of checkpoint `path` was written through `c`:
 * each one lies in a range some pwrite through `c` covered, or is a zero
 * nobody wrote (libhdf5 leaves allocated gaps, as its sec2 driver would).
 */
static void assert_written_through(count_vfs *c, const char *what, const char *path)
{
	char *f[16];
	size_t n = files_of(path, f);
	for (size_t i = 0; i < n; i++) {
		path_count k = count_of(c, f[i]);
		uint64_t size = file_size(f[i]), unwritten = 0;
		cr_assert_gt(size, 0, "%s: %s is empty", what, f[i]);
		cr_assert_gt(k.opens, 0, "%s: %s was never opened through the VFS", what, f[i]);
		unsigned char *covered = calloc(size, 1), *bytes = malloc(size);
		FILE *fp = fopen(f[i], "rb");
		cr_assert(covered && bytes && fp);
		cr_assert_eq(fread(bytes, 1, size, fp), size);
		fclose(fp);
		for (size_t j = 0; j < k.nw; j++)
			for (uint64_t b = k.w[j].off; b < k.w[j].off + k.w[j].len && b < size; b++)
				covered[b] = 1;
		for (uint64_t b = 0; b < size; b++) {
			if (covered[b])
				continue;
			unwritten++;
			cr_assert_eq(bytes[b], 0, "%s: byte %llu of %s (0x%02x) was not written through the VFS", what,
				(unsigned long long)b, f[i], bytes[b]);
		}
		cr_assert_lt(unwritten, size / 2 + 1, "%s: %llu of the %llu bytes of %s are gaps", what,
			(unsigned long long)unwritten, (unsigned long long)size, f[i]);
		free(covered);
		free(bytes);
		free(f[i]);
	}
}

/* ---- running a command in this process, over a VFS ---- */

/* `ckpt ARGS` (space-separated, no quoting) with every file through `vfs`; its exit status. Output discarded. */
static int run_cli(ckpt_vfs *vfs, const char *fmt, ...)
{
	static const cli_cmd *const cmds[] = { &cli_cmd_inspect, &cli_cmd_verify, &cli_cmd_diff, &cli_cmd_restore,
		&cli_cmd_convert };
	char line[8192], *argv[32];
	int argc = 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	for (char *t = strtok(line, " "); t && argc < 31; t = strtok(NULL, " "))
		argv[argc++] = t;
	argv[argc] = NULL;
	const cli_cmd *cmd = NULL;
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(cmds[i]->name, argv[0]) == 0)
			cmd = cmds[i];
	cr_assert_not_null(cmd, "no command %s", argv[0]);
	fflush(stdout);
	int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY);
	cr_assert(saved >= 0 && null >= 0);
	dup2(null, STDOUT_FILENO);
	close(null);
	cli_set_vfs(vfs);
	int rc = cmd->fn(cmd, argc, argv);
	cli_set_vfs(NULL);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	return rc;
}

/* samples/mlp_mirrored, one epoch, into DIR/ck: DIR/ck/ckpt-1 (malloc'ed); it converts to every format. */
static char *trainer_checkpoint(const char *dir)
{
	char *ck = ts_join(dir, "ck"), *src = ts_join(ck, "ckpt-1"), cmd[4096];
	ts_run_result res;
	snprintf(cmd, sizeof(cmd), "'%s/samples/mlp_mirrored' --epochs 1 --dir '%s'", CKPT_BINARY_DIR, ck);
	cr_assert_eq(ts_run_sh(&res, cmd), 0);
	cr_assert_eq(res.status, 0, "mlp_mirrored: %s", res.err);
	ts_run_free(&res);
	free(ck);
	return src;
}

Test(vfs_door, every_cli_command_reads_and_writes_through_the_vfs, .timeout = 300)
{
	static const struct {
		const char *to, *file;
	} formats[] = {
		{ "tf", "out_tf" }, { "keras-h5", "out.h5" }, { "keras-weights", "out.weights.h5" },
		{ "keras", "out.keras" }, { "safetensors", "out.safetensors" }, { "gguf", "out.gguf" },
	};
	char *dir = ts_tmpdir(), *src = trainer_checkpoint(dir), *saved = ts_join(dir, "saved");
	count_vfs *c;

	c = count_vfs_new(CKPT_VFS_METHODS_V2, 0);
	cr_assert_eq(run_cli(&c->base, "inspect %s", src), CLI_EXIT_OK);
	assert_read_through(c, "inspect", src);
	ckpt_vfs_free(&c->base);

	c = count_vfs_new(CKPT_VFS_METHODS_V2, 0);
	cr_assert_eq(run_cli(&c->base, "verify %s", src), CLI_EXIT_OK);
	assert_read_through(c, "verify", src);
	ckpt_vfs_free(&c->base);

	c = count_vfs_new(CKPT_VFS_METHODS_V2, 0);
	cr_assert_eq(run_cli(&c->base, "restore %s --strategy mirrored --replicas 2", src), CLI_EXIT_OK);
	assert_read_through(c, "restore", src);
	ckpt_vfs_free(&c->base);

	c = count_vfs_new(CKPT_VFS_METHODS_V2, 0);
	cr_assert_eq(run_cli(&c->base, "restore %s --strategy mirrored --replicas 2 --save %s", src, saved), CLI_EXIT_OK);
	assert_read_through(c, "restore --save", src);
	assert_written_through(c, "restore --save", saved);
	ckpt_vfs_free(&c->base);

	c = count_vfs_new(CKPT_VFS_METHODS_V2, 0);
	cr_assert_eq(run_cli(&c->base, "diff %s %s", src, saved), CLI_EXIT_OK);
	assert_read_through(c, "diff (A)", src);
	assert_read_through(c, "diff (B)", saved);
	ckpt_vfs_free(&c->base);

	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		char *out = ts_join(dir, formats[i].file), *back = ts_join(dir, "back"), what[64];
		c = count_vfs_new(CKPT_VFS_METHODS_V2, 0);
		cr_assert_eq(run_cli(&c->base, "convert %s %s --to %s", src, out, formats[i].to), CLI_EXIT_OK, "--to %s",
			formats[i].to);
		snprintf(what, sizeof(what), "convert --to %s", formats[i].to);
		assert_read_through(c, what, src);
		assert_written_through(c, what, out);
		ckpt_vfs_free(&c->base);
		/* and back: the format's reader */
		c = count_vfs_new(CKPT_VFS_METHODS_V2, 0);
		cr_assert_eq(run_cli(&c->base, "convert %s %s_%zu --to tf", out, back, i), CLI_EXIT_OK, "from %s",
			formats[i].to);
		snprintf(what, sizeof(what), "convert from %s", formats[i].to);
		assert_read_through(c, what, out);
		ckpt_vfs_free(&c->base);
		free(out);
		free(back);
	}
	ts_rmtree(dir);
	free(saved);
	free(src);
	free(dir);
}

/* ---- version 1 tables ---- */

static ckpt_tensor *small_tensor(float base)
{
	ckpt_tensor *t = NULL;
	ckpt_shape shape = { 1, { 64 } };
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &shape), CKPT_OK);
	for (int i = 0; i < 64; i++)
		((float *)t->data)[i] = base + (float)i;
	return t;
}

static int write_one(ckpt_vfs *vfs, const char *path, const char *format, const char *name, float base)
{
	ckpt_write_options wo = CKPT_WRITE_OPTIONS_INIT;
	ckpt_writer *w = NULL;
	ckpt_tensor *t = small_tensor(base);
	wo.vfs = vfs;
	int rc = ckpt_writer_open(&w, path, format, &wo);
	if (rc == CKPT_OK)
		rc = ckpt_writer_add(w, name, t, 0);
	if (rc == CKPT_OK)
		rc = ckpt_writer_commit(w);
	ckpt_writer_free(w);
	ckpt_tensor_free(t);
	return rc;
}

static void assert_holds(ckpt_vfs *vfs, const char *path, const char *name, float base)
{
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	ckpt_reader *r = NULL;
	ckpt_tensor *t = NULL;
	size_t i;
	oo.vfs = vfs;
	cr_assert_eq(ckpt_reader_open(&r, path, &oo), CKPT_OK, "%s: %s", path, ckpt_error_last()->message);
	cr_assert_eq(ckpt_reader_find(&i, r, name), CKPT_OK, "%s: no %s", path, name);
	cr_assert_eq(ckpt_reader_read(&t, r, i), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(t->nbytes, 64 * sizeof(float));
	for (int k = 0; k < 64; k++)
		cr_assert_eq(((float *)t->data)[k], base + (float)k);
	ckpt_tensor_free(t);
	ckpt_reader_free(r);
}

Test(vfs_door, a_version_1_table_still_works_with_the_documented_fallbacks)
{
	static const struct {
		const char *format, *file, *name;
	} cases[] = {
		{ "tf-bundle", "b", "v" }, { "keras-weights", "k.weights.h5", "layers/dense/vars/0" },
		{ "safetensors", "s.safetensors", "v" }, { "gguf", "g.gguf", "v" },
	};
	char *dir = ts_tmpdir(), *sub = ts_join(dir, "sub");
	count_vfs *c = count_vfs_new(CKPT_VFS_METHODS_V1, 0);
	ckpt_vfs *v1 = &c->base;
	ckpt_io *io = NULL;
	void *token = NULL, *second = NULL;

	/* every format writes and reads through it */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *path = ts_join(dir, cases[i].file);
		cr_assert_eq(write_one(v1, path, cases[i].format, cases[i].name, 1.5f * (float)i), CKPT_OK, "%s: %s",
			cases[i].format, ckpt_error_last()->message);
		assert_holds(v1, path, cases[i].name, 1.5f * (float)i);
		assert_written_through(c, cases[i].format, path);
		assert_read_through(c, cases[i].format, path);
		free(path);
	}
	/* the version-2 wrappers fall back */
	cr_assert_eq(ckpt_vfs_caps(v1), 0u);
	char *f = ts_join(dir, "b.index");
	cr_assert_eq(ckpt_vfs_open(&io, v1, f, CKPT_IO_READ), CKPT_OK);
	cr_assert_eq(ckpt_io_fd(io), -1, "a v1 io lends no descriptor");
	char buf[CKPT_IO_DIRECT_ALIGN];
	size_t got = 0;
	cr_assert_eq(ckpt_io_pread_direct(&got, io, buf, sizeof(buf), 0), CKPT_OK);
	cr_assert_eq(got, file_size(f) < sizeof(buf) ? file_size(f) : sizeof(buf), "pread_direct falls back to pread");
	cr_assert_eq(ckpt_io_close(io), CKPT_OK);
	free(f);
	cr_assert_eq(ckpt_vfs_mkdir(v1, sub), CKPT_OK);
	cr_assert_eq(ckpt_vfs_rmdir(v1, sub), CKPT_OK, "no rmdir: nothing to do");
	f = ts_join(dir, "excl");
	cr_assert_eq(ckpt_vfs_open(&io, v1, f, CKPT_IO_WRITE | CKPT_IO_EXCL), CKPT_EUNSUPPORTED,
		     "an exclusive create needs CKPT_VFS_CAP_EXCL");
	free(f);
	/* no lock method: the in-process registry alone, which still refuses a second writer */
	cr_assert_eq(ckpt_vfs_lock(&token, v1, dir), CKPT_OK);
	cr_assert_eq(ckpt_vfs_lock(&second, v1, dir), CKPT_EBUSY);
	cr_assert_null(second);
	ckpt_vfs_unlock(v1, token);
	cr_assert_eq(ckpt_vfs_lock(&token, v1, dir), CKPT_OK, "released");
	ckpt_vfs_unlock(v1, token);
	ckpt_vfs_free(v1);
	ts_rmtree(dir);
	free(sub);
	free(dir);
}

Test(vfs_door, the_posix_file_system_has_every_version_2_method)
{
	char *dir = ts_tmpdir(), *f = ts_join(dir, "f"), *sub = ts_join(dir, "sub");
	ckpt_vfs *px = ckpt_vfs_default();
	ckpt_io *io = NULL;
	void *token = NULL, *second = NULL;
	unsigned char *buf = NULL;
	size_t got = 0;

	cr_assert_eq(posix_memalign((void **)&buf, CKPT_IO_DIRECT_ALIGN, CKPT_IO_DIRECT_ALIGN), 0);
	cr_assert_eq(ckpt_vfs_caps(px) & CKPT_VFS_CAP_EXCL, CKPT_VFS_CAP_EXCL);
	cr_assert_eq(ckpt_vfs_open(&io, px, f, CKPT_IO_WRITE | CKPT_IO_EXCL), CKPT_OK);
	cr_assert_geq(ckpt_io_fd(io), 0, "the POSIX io lends its descriptor");
	memset(buf, 7, CKPT_IO_DIRECT_ALIGN);
	cr_assert_eq(ckpt_io_pwrite(io, buf, CKPT_IO_DIRECT_ALIGN, 0), CKPT_OK);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK);
	cr_assert_eq(ckpt_vfs_open(&io, px, f, CKPT_IO_WRITE | CKPT_IO_EXCL), CKPT_EEXIST);
	cr_assert_eq(ckpt_error_last()->code, CKPT_EEXIST);
	cr_assert_str_eq(ckpt_status_name(CKPT_EEXIST), "CKPT_EEXIST");
	cr_assert_eq(ckpt_vfs_open(&io, px, f, CKPT_IO_READ), CKPT_OK);
	memset(buf, 0, CKPT_IO_DIRECT_ALIGN);
	cr_assert_eq(ckpt_io_pread_direct(&got, io, buf, CKPT_IO_DIRECT_ALIGN, 0), CKPT_OK);
	cr_assert_eq(got, CKPT_IO_DIRECT_ALIGN);
	cr_assert_eq(buf[0], 7);
	cr_assert_eq(buf[CKPT_IO_DIRECT_ALIGN - 1], 7);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK);
	cr_assert_eq(ckpt_vfs_mkdir(px, sub), CKPT_OK);
	cr_assert_eq(ckpt_vfs_rmdir(px, sub), CKPT_OK);
	cr_assert_eq(ckpt_vfs_exists(NULL, px, sub), 0);
	cr_assert_eq(ckpt_vfs_rmdir(px, sub), CKPT_ENOTFOUND);
	cr_assert_eq(ckpt_vfs_lock(&token, px, dir), CKPT_OK);
	cr_assert_eq(ckpt_vfs_lock(&second, px, dir), CKPT_EBUSY);
	cr_assert(strstr(ckpt_error_last()->message, "already has a manager in this process"), "%s",
		ckpt_error_last()->message);
	ckpt_vfs_unlock(px, token);
	free(buf);
	ts_rmtree(dir);
	free(sub);
	free(f);
	free(dir);
}

/* The memory VFS: in memory, exclusive creates, no descriptor. */
Test(vfs_door, the_memory_file_system_says_what_it_can)
{
	ckpt_vfs *mem = NULL;
	ckpt_io *io = NULL;
	cr_assert_eq(ckpt_vfs_memory_new(&mem), CKPT_OK);
	cr_assert_eq(ckpt_vfs_caps(mem), CKPT_VFS_CAP_EXCL | CKPT_VFS_CAP_IN_MEMORY);
	cr_assert_eq(ckpt_vfs_open(&io, mem, "d/x", CKPT_IO_WRITE | CKPT_IO_EXCL), CKPT_OK);
	cr_assert_eq(ckpt_io_fd(io), -1);
	cr_assert_eq(ckpt_io_close(io), CKPT_OK);
	cr_assert_eq(ckpt_vfs_open(&io, mem, "d/x", CKPT_IO_WRITE | CKPT_IO_EXCL), CKPT_EEXIST);
	ckpt_vfs_free(mem);
}

/* 1 when `dir` holds a file whose name contains `part`. */
static int dir_has(const char *dir, const char *part)
{
	DIR *d = opendir(dir);
	int found = 0;
	cr_assert_not_null(d);
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		found |= strstr(e->d_name, part) != NULL;
	closedir(d);
	return found;
}

/* An object store's capability: the writers that honour it put the final name directly. */
Test(vfs_door, without_rename_the_keras_writer_and_write_atomic_write_the_final_name)
{
	char *dir = ts_tmpdir(), *k = ts_join(dir, "k.weights.h5"), *state = ts_join(dir, "state");
	count_vfs *c = count_vfs_new(CKPT_VFS_METHODS_V2, 0);
	c->methods.caps = CKPT_VFS_CAP_NO_RENAME;
	cr_assert_eq(write_one(&c->base, k, "keras-weights", "layers/dense/vars/0", 5.0f), CKPT_OK, "%s",
		ckpt_error_last()->message);
	cr_assert_eq(ckpt_vfs_write_atomic(&c->base, state, "model_checkpoint_path: \"x\"\n", 26, 1), CKPT_OK);
	cr_assert_eq(c->renames, 0, "a file system without rename was asked to rename");
	assert_holds(&c->base, k, "layers/dense/vars/0", 5.0f);
	assert_written_through(c, "keras-weights without rename", k);
	assert_written_through(c, "write_atomic without rename", state);
	cr_assert(!dir_has(dir, "tempstate"));
	ckpt_vfs_free(&c->base);
	ts_rmtree(dir);
	free(state);
	free(k);
	free(dir);
}

/* ---- the fault-injecting VFS and the Keras writer ---- */

/*
 * Deterministic under any load: each run's outcome is judged by whether its
 * own fault fired, never by comparing call numbers across runs.
 */
Test(vfs_door, the_fault_injecting_vfs_reaches_every_keras_write, .timeout = 300)
{
	static const char *const formats[] = { "keras-weights", "keras-h5" };
	static const char *const names[] = { "layers/dense/vars/0", "model_weights/dense/kernel" };
	for (size_t fi = 0; fi < sizeof(formats) / sizeof(formats[0]); fi++) {
		char *dir = ts_tmpdir(), *path = ts_join(dir, "m.weights.h5");
		ckpt_vfs *f = NULL;
		long calls, fired = 0;
		/* the previous file every failed save must leave */
		cr_assert_eq(write_one(NULL, path, formats[fi], names[fi], 100.0f), CKPT_OK, "%s: %s",
			formats[fi], ckpt_error_last()->message);
		cr_assert_eq(ckpt_vfs_faulty_new(&f, ckpt_vfs_default(), 0), CKPT_OK);
		cr_assert_eq(write_one(f, path, formats[fi], names[fi], 1.0f), CKPT_OK, "%s",
			ckpt_error_last()->message);
		calls = ckpt_vfs_faulty_calls(f);
		ckpt_vfs_free(f);
		/* open, size, the dataset's pwrite, the metadata's, sync, close, rename, sync_dir at least */
		cr_assert_geq(calls, 8, "%s: only %ld calls reached the VFS", formats[fi], calls);
		for (long k = 1; k <= calls; k++) {
			cr_assert_eq(write_one(NULL, path, formats[fi], names[fi], 100.0f), CKPT_OK);
			cr_assert_eq(ckpt_vfs_faulty_new(&f, ckpt_vfs_default(), k), CKPT_OK);
			ckpt_error_clear();
			int rc = write_one(f, path, formats[fi], names[fi], 1.0f);
			char msg[1024]; /* the reader below may replace the last error */
			snprintf(msg, sizeof(msg), "%s", ckpt_error_last()->message);
			if (ckpt_vfs_faulty_fired(f)) {
				fired++;
				if (rc < 0) {
					cr_assert_eq(ckpt_error_last()->code, rc, "%s, call %ld: no error of its own", formats[fi], k);
					cr_assert(strstr(ckpt_error_last()->message, "injected failure"),
						"%s, call %ld: the VFS's error is not the one reported: %s", formats[fi], k,
						ckpt_error_last()->message);
				}
			} else {
				cr_assert_eq(rc, CKPT_OK, "%s, call %ld: failed without a fault: %s", formats[fi], k,
					ckpt_error_last()->message);
			}
			ckpt_vfs_free(f);
			/* the old file or (a failure after the rename: syncing the directory) the whole new one */
			ckpt_reader *r = NULL;
			ckpt_tensor *t = NULL;
			cr_assert_eq(ckpt_reader_open(&r, path, NULL), CKPT_OK, "%s, call %ld: %s", formats[fi], k,
				ckpt_error_last()->message);
			cr_assert_eq(ckpt_reader_num_entries(r), 1);
			cr_assert_eq(ckpt_reader_read(&t, r, 0), CKPT_OK);
			float first = ((float *)t->data)[0];
			cr_assert(first == 100.0f || first == 1.0f, "%s, call %ld: neither the old nor the new file",
				formats[fi], k);
			if (rc < 0 && first == 1.0f)
				cr_assert(strstr(msg, "sync_dir"),
					"%s, call %ld: a save that failed before its rename replaced the file: %s", formats[fi], k, msg);
			ckpt_tensor_free(t);
			ckpt_reader_free(r);
			cr_assert(!dir_has(dir, "tempstate"), "%s, call %ld: a temporary was left", formats[fi], k);
		}
		cr_assert_gt(fired, 0, "%s: none of %ld injected faults fired", formats[fi], calls);
		ts_rmtree(dir);
		free(path);
		free(dir);
	}
}

/* ---- the fast paths, through a wrapper that lends its descriptor ---- */

Test(vfs_door, a_wrapper_that_lends_its_descriptor_keeps_the_mapped_keras_reader)
{
	char *dir = ts_tmpdir(), *path = ts_join(dir, "k.weights.h5");
	count_vfs *lend = count_vfs_new(CKPT_VFS_METHODS_V2, 1), *keep = count_vfs_new(CKPT_VFS_METHODS_V2, 0);
	cr_assert_eq(write_one(NULL, path, "keras-weights", "layers/dense/vars/0", 3.0f), CKPT_OK);
	/* lends: the file is mapped (only its first bytes, to recognize it, go through pread) */
	assert_holds(&lend->base, path, "layers/dense/vars/0", 3.0f);
	cr_assert_gt(count_of(lend, path).opens, 0);
	cr_assert_lt(count_of(lend, path).read, file_size(path), "a lent descriptor was not used");
	/* keeps it: every byte through pread */
	assert_holds(&keep->base, path, "layers/dense/vars/0", 3.0f);
	cr_assert_geq(count_of(keep, path).read, file_size(path));
	ckpt_vfs_free(&lend->base);
	ckpt_vfs_free(&keep->base);
	ts_rmtree(dir);
	free(path);
	free(dir);
}

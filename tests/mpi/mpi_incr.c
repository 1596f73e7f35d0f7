/*
 * Incremental multi-worker saves (issue 33, point 5): `mpi_incr DIR EXPECT FROM TO KEEP [grow]`.
 *
 * Every worker builds a fine-tune-like state of mirrored float32 root
 * variables: four frozen 256 KiB `base<i>`, a 1 KiB `head` changed every
 * step, a 2 MiB `emb` (2048 rows of 1 KiB) of which a run of 5 % of the rows
 * changes every step. A manager with incremental saves and max_to_keep KEEP
 * saves steps FROM..TO as ckpt-<step>; FROM > 1 first restores the latest
 * checkpoint (written by a job of any worker count) and checks it against
 * EXPECT/ckpt-<FROM-1>. `grow`: a new 512 KiB variable `extra` appears
 * before the third save, so which worker owns which value changes.
 * `tamper`: after the fourth save worker 0 flips a byte of the frozen values
 * in every data file of it (behind the library's back; on S3 it replaces
 * the object): the fifth save must reuse nothing of them and still be exact
 * (the tampered one is not checked again; KEEP <= 3 with 8 saves lets the
 * manager delete it). `s3`: DIR is an s3:// prefix, the values large enough
 * for S3's 5 MiB parts (base 6 MiB each, emb 12 MiB), and the bound on what
 * each worker uploads allows S3's part minimum (as tests/s3/test_s3_incremental.c).
 *
 * After every save worker 0 writes what each root variable must hold into
 * EXPECT/ckpt-<step>/NAME.f32 (+ NAME.shape, for tests/oracles/tf_incremental.py)
 * and reads every kept checkpoint back alone, byte for byte, every crc32c
 * checked. From the second save of a job on, without an ownership change,
 * each worker must have written at most the changed bytes (+ three 4 KiB
 * blocks and 64 KiB for the counter and the object graph) and reused some:
 * a full save writes every byte. A worker that wrote nothing has the last
 * checkpoint's data file as its shard (a hard link); `link`: some worker must
 * (with 3 workers one holds only frozen values: the scalars go to worker 0).
 * Prints "CHECKS n FAILED f" and per save "written/reused/shard bytes" of
 * each worker.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <ckpt/mpi.h>
#include <ckpt/sys/alloc.h>
#include "mpi_model.h"
#include "mpi_report.h"

#define NBASE 4
static size_t BASE_N = 64 * 1024;       /* floats: 256 KiB each (`s3`: 6 MiB) */
#define HEAD_N 256
static size_t EMB_ROWS = 2048;          /* (`s3`: 12288, 12 MiB) */
#define EMB_W 256                /* floats: 1 KiB rows */
#define RUN (EMB_ROWS / 20)      /* 5 % of the rows */
#define MIB (1ull << 20)
#define EXTRA_N (128 * 1024)

static long checks;
static int bad, rank, size;

#define CHECK(cond, ...) do { checks++; if (!(cond)) { bad++; fprintf(stderr, "worker %d: ", rank); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

typedef struct var {
	const char *name;
	ckpt_variable *v;
	float *mirror;               /* what it holds */
	size_t n;
	ckpt_shape shape;
} var;

static var vars[NBASE + 3];
static int nvars;

static void add_var(ckpt_checkpoint *ck, const char *name, size_t n, const ckpt_shape *shape, const float *init)
{
	var *x = &vars[nvars++];
	x->name = name;
	x->n = n;
	x->shape = *shape;
	x->mirror = malloc(n * sizeof(float));
	memcpy(x->mirror, init, n * sizeof(float));
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	vo.initial_value = init;
	TM_TRY(ckpt_status_of(x->v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), name, name, CKPT_DT_FLOAT,
		shape, &vo)));
}

static var *find(const char *name)
{
	for (int i = 0; i < nvars; i++)
		if (strcmp(vars[i].name, name) == 0)
			return &vars[i];
	return NULL;
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
		TM_FAIL("cannot write %s", path);
}

/* Worker 0: EXPECT/<basename>/NAME.f32 and NAME.shape for every variable. */
static void record(const char *expect, const char *base)
{
	char d[2048], p[2300];
	snprintf(d, sizeof(d), "%s/%s", expect, base);
	if (mkdir(expect, 0755) != 0 && errno != EEXIST)
		TM_FAIL("mkdir %s", expect);
	if (mkdir(d, 0755) != 0 && errno != EEXIST)
		TM_FAIL("mkdir %s", d);
	for (int i = 0; i < nvars; i++) {
		snprintf(p, sizeof(p), "%s/%s.f32", d, vars[i].name);
		write_file(p, vars[i].mirror, vars[i].n * sizeof(float));
		char sh[64];
		int k = snprintf(sh, sizeof(sh), "%lld %lld", (long long)vars[i].shape.dims[0],
			(long long)vars[i].shape.dims[1]);
		snprintf(p, sizeof(p), "%s/%s.shape", d, vars[i].name);
		write_file(p, sh, (size_t)k);
	}
}

static char *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc((size_t)len + 1);
	*n = fread(b, 1, (size_t)len, f);
	fclose(f);
	return b;
}

/* Checkpoint `path` alone (one process): every variable EXPECT/<basename> lists, byte for byte, crc32c checked. */
static void check_checkpoint(const char *path, const char *expect)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	ckpt_reader *r;
	TM_TRY(ckpt_reader_open(&r, path, NULL));
	CHECK(ckpt_reader_verify_all(r) == CKPT_OK, "%s: ckpt_reader_verify_all: %s", path, ckpt_error_last()->message);
	int seen = 0;
	for (int i = 0; i < nvars; i++) {
		char p[2300], key[256];
		snprintf(p, sizeof(p), "%s/%s/%s.f32", expect, base, vars[i].name);
		size_t n = 0;
		char *want = read_file(p, &n);
		if (!want)
			continue; /* not in that checkpoint (extra before it appeared) */
		seen++;
		snprintf(key, sizeof(key), "%s/.ATTRIBUTES/VARIABLE_VALUE", vars[i].name);
		size_t e;
		int rc = ckpt_reader_find(&e, r, key);
		CHECK(rc == CKPT_OK, "%s: no %s", path, key);
		ckpt_tensor *t = NULL;
		if (rc == CKPT_OK)
			rc = ckpt_reader_read(&t, r, e);
		CHECK(rc == CKPT_OK && t->nbytes == n && memcmp(t->data, want, n) == 0, "%s: %s differs from %s", path,
			key, p);
		ckpt_tensor_free(t);
		free(want);
	}
	CHECK(seen >= NBASE + 2, "%s: %d expected variables", path, seen);
	ckpt_reader_free(r);
}

/* Worker 0: flip one byte of every data file of checkpoint `path` (its first value's: a frozen one). */
static void flip(const char *path)
{
	ckpt_reader *r;
	TM_TRY(ckpt_reader_open(&r, path, NULL));
	int n = ckpt_reader_num_shards(r);
	for (int k = 0; k < n; k++) {
		int ex = 0;
		const char *sp = ckpt_reader_shard_path(r, k, &ex);
		if (ckpt_path_is_s3(sp)) {
			/* another writer replaces the object: a new ETag, the same size */
			ckpt_vfs *v = ckpt_vfs_for_path(NULL, sp);
			void *buf;
			size_t len;
			ckpt_io *io;
			TM_TRY(ckpt_vfs_read_all(&buf, &len, v, sp, 1ull << 32));
			((unsigned char *)buf)[64] ^= 0x5a;
			TM_TRY(ckpt_vfs_open(&io, v, sp, CKPT_IO_WRITE));
			TM_TRY(ckpt_io_pwrite(io, buf, len, 0));
			TM_TRY(ckpt_io_close(io));
			ckpt_free(buf);
			continue;
		}
		FILE *f = fopen(sp, "r+b");
		if (!f)
			TM_FAIL("cannot open %s", sp);
		int c = (fseek(f, 64, SEEK_SET), fgetc(f));
		fseek(f, 64, SEEK_SET);
		fputc(c ^ 0x5a, f);
		fclose(f);
	}
	ckpt_reader_free(r);
}

/* Size (and inode: 0 on S3) of this worker's data file of checkpoint `prefix`. */
static uint64_t shard_size(const char *prefix, ino_t *ino)
{
	char p[2300];
	snprintf(p, sizeof(p), "%s.data-%05d-of-%05d", prefix, rank, size);
	*ino = 0;
	if (ckpt_path_is_s3(p)) {
		ckpt_io *io;
		uint64_t n = 0;
		if (ckpt_vfs_open(&io, ckpt_vfs_for_path(NULL, p), p, CKPT_IO_READ) < 0)
			return 0;
		if (ckpt_io_size(&n, io) < 0)
			n = 0;
		ckpt_io_close(io);
		return n;
	}
	struct stat st;
	int ok = stat(p, &st) == 0;
	*ino = ok ? st.st_ino : 0;
	return ok ? (uint64_t)st.st_size : 0;
}

static void assign(var *x)
{
	TM_TRY(ckpt_variable_assign(x->v, x->mirror, x->n * sizeof(float)));
}

/* Step k's training: the head, and a run of 5 % of the embedding's rows starting at a row that moves. */
static uint64_t step(int64_t k)
{
	var *h = find("head"), *e = find("emb");
	for (size_t j = 0; j < h->n; j++)
		h->mirror[j] = (float)k + (float)j * 0.001f;
	size_t r0 = (size_t)(k * 389) % (EMB_ROWS - RUN);
	for (size_t r = r0; r < r0 + RUN; r++)
		for (size_t j = 0; j < EMB_W; j++)
			e->mirror[r * EMB_W + j] = (float)k * 0.5f + (float)(r * EMB_W + j) / 7.0f;
	assign(h);
	assign(e);
	return (uint64_t)(HEAD_N + RUN * EMB_W) * sizeof(float);
}

int main(int argc, char **argv)
{
	if (argc < 6)
		TM_FAIL("usage: mpi_incr DIR EXPECT FROM TO KEEP [grow] [tamper]");
	const char *dir = argv[1], *expect = argv[2];
	int64_t from = atoll(argv[3]), to = atoll(argv[4]);
	int keep = atoi(argv[5]), grow = 0, tamper = 0, link = 0;
	for (int i = 6; i < argc; i++) {
		link |= strcmp(argv[i], "link") == 0;
		if (strcmp(argv[i], "s3") == 0) {
			/* values past S3's 5 MiB part minimum, so that ranges can be copied at all */
			BASE_N = 1536 * 1024;
			EMB_ROWS = 12288;
		}
		grow |= strcmp(argv[i], "grow") == 0;
		tamper |= strcmp(argv[i], "tamper") == 0;
	}
	int prov;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	ckpt_strategy *s;
	TM_TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, 1));
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	ckpt_checkpoint *ck;
	TM_TRY(ckpt_checkpoint_new(&ck, &o));
	size_t cap = (size_t)EMB_ROWS * EMB_W > BASE_N ? (size_t)EMB_ROWS * EMB_W : BASE_N;
	float *init = malloc((cap > EXTRA_N ? cap : EXTRA_N) * sizeof(float));
	static const char *bn[NBASE] = { "base0", "base1", "base2", "base3" };
	TM_TRY(ckpt_scope_enter(s));
	for (int i = 0; i < NBASE; i++) {
		for (size_t j = 0; j < BASE_N; j++)
			init[j] = (float)i * 1000.0f + (float)j * 0.5f;
		ckpt_shape bs = { 2, { BASE_N / 256, 256 } };
		add_var(ck, bn[i], BASE_N, &bs, init);
	}
	for (size_t j = 0; j < HEAD_N; j++)
		init[j] = 0;
	ckpt_shape hs = { 2, { 1, HEAD_N } }, es = { 2, { EMB_ROWS, EMB_W } };
	add_var(ck, "head", HEAD_N, &hs, init);
	for (size_t j = 0; j < (size_t)EMB_ROWS * EMB_W; j++)
		init[j] = (float)j / 7.0f;
	add_var(ck, "emb", (size_t)EMB_ROWS * EMB_W, &es, init);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.incremental = 1;
	mo.no_fsync = 1;
	ckpt_manager *mgr;
	TM_TRY(ckpt_manager_new_ext(&mgr, ck, dir, keep, &mo));
	if (from > 1) {
		/* onto this job's worker count: every value as the previous job saved it */
		ckpt_restore_status *st = NULL;
		const char *got = NULL;
		TM_TRY(ckpt_status_of(got = ckpt_manager_restore_latest(&st, mgr)));
		char want[64];
		snprintf(want, sizeof(want), "ckpt-%lld", (long long)(from - 1));
		CHECK(got && strcmp(strrchr(got, '/') + 1, want) == 0, "restored %s, want %s", got ? got : "nothing", want);
		CHECK(ckpt_restore_status_assert_consumed(st) == CKPT_OK, "restore: not consumed");
		ckpt_restore_status_free(st);
		for (int i = 0; i < nvars; i++) {
			char p[2300];
			snprintf(p, sizeof(p), "%s/%s/%s.f32", expect, want, vars[i].name);
			size_t n = 0;
			char *b = read_file(p, &n);
			CHECK(b && n == vars[i].n * sizeof(float), "%s missing", p);
			TM_TRY(ckpt_variable_read(vars[i].v, vars[i].mirror, vars[i].n * sizeof(float)));
			CHECK(b && memcmp(b, vars[i].mirror, n) == 0, "restored %s differs from %s", vars[i].name, p);
			free(b);
		}
	}
	TM_TRY(ckpt_scope_exit(s));
	uint64_t *all = calloc(3 * (size_t)size, sizeof(uint64_t));
	char tampered[2048] = "";
	ino_t last_ino = 0;
	for (int64_t k = from; k <= to; k++) {
		int moved = 0;
		if (grow && k == from + 2) {
			/* a new value: the owners of the others change */
			for (size_t j = 0; j < EXTRA_N; j++)
				init[j] = (float)j * 0.25f;
			ckpt_shape xs = { 2, { EXTRA_N / 256, 256 } };
			TM_TRY(ckpt_scope_enter(s));
			add_var(ck, "extra", EXTRA_N, &xs, init);
			TM_TRY(ckpt_scope_exit(s));
			moved = 1;
		}
		uint64_t changed = step(k);
		const char *p = NULL;
		TM_TRY(ckpt_status_of(p = ckpt_manager_save_number(mgr, k)));
		uint64_t mine[3];
		TM_TRY(ckpt_checkpoint_last_save_bytes(&mine[0], &mine[1], ck));
		ino_t ino = 0;
		mine[2] = shard_size(p, &ino);
		/* nothing written: the last checkpoint's file itself */
		if (k > from && mine[2] && mine[0] == 0)
			CHECK(ino == last_ino, "save %lld wrote nothing but its shard is not a link of the last one's",
				(long long)k);
		int linked = k > from && mine[2] && mine[0] == 0 && ino == last_ino, any_linked = 0;
		MPI_Allreduce(&linked, &any_linked, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
		if (link && k > from && !moved && !(tamper && k == from + 4))
			CHECK(any_linked, "save %lld: no worker's shard was linked", (long long)k);
		last_ino = ino;
		/* what it wrote and what it reused make up its data file */
		CHECK(mine[2] > 0 && mine[0] + mine[1] == mine[2], "save %lld: wrote %llu + reused %llu, its shard holds %llu",
			(long long)k, (unsigned long long)mine[0], (unsigned long long)mine[1], (unsigned long long)mine[2]);
		MPI_Allgather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, MPI_COMM_WORLD);
		if (rank == 0) {
			printf("save %lld (written/reused/shard bytes):", (long long)k);
			for (int w = 0; w < size; w++)
				printf(" w%d %llu/%llu/%llu", w, (unsigned long long)all[3 * w], (unsigned long long)all[3 * w + 1],
					(unsigned long long)all[3 * w + 2]);
			printf("\n");
		}
		if (k == from) {
			CHECK(mine[1] == 0, "save %lld: the first save of a job reused %llu bytes", (long long)k,
				(unsigned long long)mine[1]);
		} else if (tamper && k == from + 4) {
			CHECK(mine[1] == 0 && mine[0] >= 256 * 1024, "save %lld after its source was tampered with: "
				"wrote %llu, reused %llu", (long long)k, (unsigned long long)mine[0], (unsigned long long)mine[1]);
		} else if (!moved) {
			/* S3: its 5 MiB minimum part at the shard's start and at each end of a changed run */
			uint64_t slack = ckpt_path_is_s3(dir) ? 3 * 5 * MIB + 65536 : 3 * 4096 + 65536;
			CHECK(mine[0] <= changed + slack, "save %lld: wrote %llu bytes, %llu changed in all", (long long)k,
				(unsigned long long)mine[0], (unsigned long long)changed);
			CHECK(mine[1] > 0, "save %lld: reused nothing", (long long)k);
			uint64_t w = 0, rsum = 0;
			for (int i = 0; i < size; i++) {
				w += all[3 * i];
				rsum += all[3 * i + 1];
			}
			CHECK(w <= changed + (uint64_t)size * slack && rsum * 10 >= (w + rsum) * (ckpt_path_is_s3(dir) ? 5 : 9),
				"save %lld: %llu written, %llu reused in all", (long long)k, (unsigned long long)w,
				(unsigned long long)rsum);
		}
		if (rank == 0) {
			record(expect, strrchr(p, '/') + 1);
			/* every kept one, after the manager deleted the older ones */
			for (size_t i = 0; i < ckpt_manager_num_checkpoints(mgr); i++)
				if (!tampered[0] || strcmp(ckpt_manager_checkpoint(mgr, i), tampered) != 0)
					check_checkpoint(ckpt_manager_checkpoint(mgr, i), expect);
			if (tamper && k == from + 3) {
				snprintf(tampered, sizeof(tampered), "%s", p);
				/* past the file system's timestamp granularity (documented: a write within it is not seen) */
				usleep(50000);
				flip(p);
			}
			CHECK(ckpt_manager_num_checkpoints(mgr) <= (size_t)keep, "%zu kept", ckpt_manager_num_checkpoints(mgr));
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
	free(all);
	free(init);
	ckpt_manager_free(mgr);
	ckpt_checkpoint_free(ck);
	for (int i = 0; i < nvars; i++)
		free(vars[i].mirror);
	ckpt_strategy_free(s);
	return tm_report(checks, bad, NULL);
}

/*
 * mpi_bench: the multi-worker strategy's save / restore against the worker
 * count, and its deterministic all-reduce against MPI_Allreduce.
 *
 *   mpirun -np W mpi_bench [--dir DIR] [--states medium,large] [--reps N]
 *                          [--reduce-floats N] [--json FILE]
 *
 * States are ckpt_bench's (medium: 4 BERT-base layers + Adam m, v, 192
 * tensors, 340 MB; large: 400 tensors, 2.1 GB), mirrored over W workers x 1
 * local replica; values are filled once. Per rep, all timed from a barrier
 * to the last worker's finish (in-process, the job already running):
 *   save       ckpt_checkpoint_write to a fresh prefix, fsync: each worker
 *              writes its share (~1/W of the bytes) into its own data shard
 *   restore    ckpt_checkpoint_restore of that prefix into the live tree,
 *              both ways of reading (ckpt_multi_worker_set_restore): "all"
 *              (every worker reads every value) and "split" (each worker
 *              reads 1/W of the bytes, the parts broadcast); warm (page
 *              cache holds the files: just written) and cold (the
 *              checkpoint's files dropped from the page cache first with
 *              posix_fadvise(DONTNEED) — clean pages after the fsync)
 *   write()    each worker write()s + fsyncs its share of the bytes to its
 *              own file (the same split): the limit for "save"
 *   read()     each worker read()s the whole state (what restore "all" reads:
 *              every worker needs every mirrored value), warm and cold: the
 *              limit for "restore"
 *   all-reduce ckpt_replica_all_reduce_f32 (ordered) vs MPI_Allreduce of the
 *              same float count (one buffer per worker), median of reps
 * Worker 0 prints one JSON object per line (bench/mpi_scaling.sh collects them).
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <ckpt/mpi.h>

typedef struct bvar {
	char name[192];
	int rank;
	int64_t d0, d1;
	uint64_t nbytes;
} bvar;

static bvar *vars;
static size_t nvars, capvars;
static int rank_, size_;

static void add(const char *name, int rank, int64_t d0, int64_t d1)
{
	if (nvars == capvars) {
		capvars = capvars ? capvars * 2 : 256;
		vars = realloc(vars, capvars * sizeof(*vars));
	}
	bvar *v = &vars[nvars++];
	snprintf(v->name, sizeof v->name, "%s", name);
	v->rank = rank;
	v->d0 = d0;
	v->d1 = d1;
	v->nbytes = 4 * (uint64_t)(rank ? d0 : 1) * (uint64_t)(rank == 2 ? d1 : 1);
}

static void adam(const char *o, int rank, int64_t d0, int64_t d1)
{
	char k[192];
	snprintf(k, sizeof k, "%s", o);
	add(k, rank, d0, d1);
	snprintf(k, sizeof k, "%s/m", o);
	add(k, rank, d0, d1);
	snprintf(k, sizeof k, "%s/v", o);
	add(k, rank, d0, d1);
}

/* ckpt_bench's medium and large states (bench/ckpt_bench.c build_state). */
static void build_state(const char *name)
{
	char o[96];
	nvars = 0;
	if (!strcmp(name, "medium")) {
		static const char *att[4] = { "query", "key", "value", "output" };
		for (int l = 0; l < 4; l++) {
			for (int i = 0; i < 4; i++) {
				snprintf(o, sizeof o, "l%d/attention/%s/kernel", l, att[i]);
				adam(o, 2, 768, 768);
				snprintf(o, sizeof o, "l%d/attention/%s/bias", l, att[i]);
				adam(o, 1, 768, 0);
			}
			snprintf(o, sizeof o, "l%d/intermediate/kernel", l);
			adam(o, 2, 768, 3072);
			snprintf(o, sizeof o, "l%d/intermediate/bias", l);
			adam(o, 1, 3072, 0);
			snprintf(o, sizeof o, "l%d/output/kernel", l);
			adam(o, 2, 3072, 768);
			snprintf(o, sizeof o, "l%d/output/bias", l);
			adam(o, 1, 768, 0);
			for (int i = 0; i < 2; i++) {
				snprintf(o, sizeof o, "l%d/ln%d/gamma", l, i);
				adam(o, 1, 768, 0);
				snprintf(o, sizeof o, "l%d/ln%d/beta", l, i);
				adam(o, 1, 768, 0);
			}
		}
	} else {
		static const int64_t shp[4][2] = { { 768, 3072 }, { 3072, 768 }, { 768, 768 }, { 768, 0 } };
		for (int i = 0; i < 133; i++) {
			snprintf(o, sizeof o, "block-%d/w-%d", i / 4, i % 4);
			adam(o, shp[i % 4][1] ? 2 : 1, shp[i % 4][0], shp[i % 4][1]);
		}
	}
	add("iter", 0, 0, 0);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds from a barrier until every worker is done with fn. */
#define TIMED(out, stmt) do { MPI_Barrier(MPI_COMM_WORLD); double t0_ = now(); stmt; \
	MPI_Barrier(MPI_COMM_WORLD); out = now() - t0_; } while (0)

static void die(const char *what)
{
	char b[1024];
	fprintf(stderr, "worker %d: %s: %s\n", rank_, what, ckpt_error_format(ckpt_error_last(), b, sizeof b));
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmpd);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void raw_write(const char *path, const char *buf, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	for (size_t off = 0; fd >= 0 && off < n;) {
		ssize_t w = write(fd, buf + off, n - off > (1u << 30) ? (1u << 30) : n - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	if (fd < 0 || fsync(fd) != 0 || close(fd) != 0)
		die("raw write");
}

static void raw_read(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY);
	for (size_t off = 0; fd >= 0 && off < n;) {
		ssize_t r = read(fd, buf + off, n - off > (1u << 30) ? (1u << 30) : n - off);
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	if (fd < 0 || close(fd) != 0)
		die("raw read");
}

/* Drop every file of `dir` whose name starts with `base` from the page cache (worker 0; the files are fsynced). */
static void drop_cache(const char *dir, const char *base)
{
	if (rank_ != 0)
		return;
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t bl = strlen(base);
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, base, bl) != 0)
			continue;
		char p[1200];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		int fd = open(p, O_RDONLY);
		if (fd < 0 || fdatasync(fd) != 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
			die("posix_fadvise");
		close(fd);
	}
	if (d)
		closedir(d);
}

typedef struct { float *buf; size_t n; int reps; double *t; } reduce_arg;

static int reduce_fn(ckpt_replica_ctx *ctx, void *p)
{
	reduce_arg *a = p;
	for (int r = 0; r < a->reps; r++) {
		double t0 = now();
		int rc = ckpt_replica_all_reduce_f32(ctx, CKPT_REDUCE_SUM, a->buf, a->n);
		if (rc < 0)
			return rc;
		a->t[r] = now() - t0;
	}
	return CKPT_OK;
}

int main(int argc, char **argv)
{
	const char *dir = "/tmp/ckpt-mpi-bench", *states = "medium,large";
	int reps = 3;
	size_t nred = (size_t)4 << 20;
	int prov;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
	MPI_Comm_size(MPI_COMM_WORLD, &size_);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--dir"))
			dir = argv[i + 1];
		else if (!strcmp(argv[i], "--states"))
			states = argv[i + 1];
		else if (!strcmp(argv[i], "--reps"))
			reps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--reduce-floats"))
			nred = (size_t)atol(argv[i + 1]);
	}
	if (reps < 1 || reps > 64)
		reps = 3;
	mkdir(dir, 0755);
	ckpt_strategy *s;
	if (ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, 1) < 0)
		die("strategy");
	char list[256];
	snprintf(list, sizeof list, "%s", states);
	for (char *st = strtok(list, ","); st; st = strtok(NULL, ",")) {
		build_state(st);
		ckpt_checkpoint *ck;
		ckpt_checkpoint_options co = CKPT_CHECKPOINT_OPTIONS_INIT;
		if (ckpt_scope_enter(s) < 0 || ckpt_checkpoint_new(&ck, &co) < 0)
			die("checkpoint");
		uint64_t total = 0;
		for (size_t i = 0; i < nvars; i++) {
			ckpt_shape sh;
			int64_t dims[2] = { vars[i].d0, vars[i].d1 };
			ckpt_shape_make(&sh, vars[i].rank, dims);
			ckpt_variable *v;
			if (ckpt_status_of(v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), vars[i].name, vars[i].name, CKPT_DT_FLOAT, &sh, NULL)) < 0)
				die("create");
			total += vars[i].nbytes;
		}
		ckpt_scope_exit(s);
		/* restores: [all warm, split warm, all cold, split cold] */
		double *ts = calloc((size_t)reps * 8, sizeof(double)), *tr = ts + reps, *tw = ts + 5 * reps, *trd = ts + 6 * reps,
			*trc = ts + 7 * reps;
		char prefix[1024], raw[1024];
		size_t share = (size_t)(total / (uint64_t)size_);
		char *buf = malloc(total);
		memset(buf, 0x5a, total);
		for (int r = 0; r < reps; r++) {
			snprintf(prefix, sizeof prefix, "%s/%s-w%d-%d", dir, st, size_, r);
			int rc = 0;
			TIMED(ts[r], rc = ckpt_checkpoint_write(ck, prefix));
			if (rc < 0)
				die("save");
			char base[256];
			snprintf(base, sizeof base, "%s-w%d-%d.", st, size_, r);
			/*
			 * an untimed restore first (the first one after a save is slower
			 * here, whichever way it reads), then both ways in an order that
			 * alternates between reps
			 */
			for (int j = -1; j < 4; j++) {
				int k = j < 0 ? 0 : (r % 2 ? j ^ 1 : j);
				if (ckpt_multi_worker_set_restore(s, k % 2 ? CKPT_MW_RESTORE_SPLIT : CKPT_MW_RESTORE_READ_ALL) < 0)
					die("set_restore");
				if (k >= 2)
					drop_cache(dir, base);
				ckpt_restore_status *rs;
				double t = 0;
				TIMED(t, rc = ckpt_checkpoint_restore(&rs, ck, prefix));
				if (rc < 0)
					die("restore");
				if (j >= 0)
					tr[k * reps + r] = t;
				if (getenv("CKPT_MPI_BENCH_TRACE") && rank_ == 0)
					fprintf(stderr, "rep %d restore %s %s: %.3f s\n", r, k % 2 ? "split" : "all", k >= 2 ? "cold" : "warm", t);
				ckpt_restore_status_expect_partial(rs);
				ckpt_restore_status_free(rs);
			}
			ckpt_multi_worker_set_restore(s, CKPT_MW_RESTORE_READ_ALL);
			snprintf(raw, sizeof raw, "%s/raw-%s-%d", dir, st, rank_);
			TIMED(tw[r], raw_write(raw, buf, share));
			/* every worker reads the whole state on restore: the whole-state read() */
			snprintf(raw, sizeof raw, "%s/raw-%s-all", dir, st);
			if (rank_ == 0 && r == 0)
				raw_write(raw, buf, total);
			MPI_Barrier(MPI_COMM_WORLD);
			TIMED(trd[r], raw_read(raw, buf, total));
			snprintf(base, sizeof base, "raw-%s-all", st);
			drop_cache(dir, base);
			TIMED(trc[r], raw_read(raw, buf, total));
			/* keep the disk from filling up */
			if (rank_ == 0) {
				char cmd[1200];
				snprintf(cmd, sizeof cmd, "rm -f %s.*", prefix);
				if (system(cmd) != 0)
					die("cleanup");
			}
		}
		if (rank_ == 0)
			printf("{\"state\":\"%s\",\"workers\":%d,\"bytes\":%llu,\"tensors\":%zu,\"save_s\":%.4f,"
				"\"restore_all_warm_s\":%.4f,\"restore_split_warm_s\":%.4f,\"restore_all_cold_s\":%.4f,"
				"\"restore_split_cold_s\":%.4f,\"write_s\":%.4f,\"read_s\":%.4f,\"read_cold_s\":%.4f,\"reps\":%d}\n",
				st, size_, (unsigned long long)total, nvars, median(ts, reps), median(tr, reps), median(tr + reps, reps),
				median(tr + 2 * reps, reps), median(tr + 3 * reps, reps), median(tw, reps), median(trd, reps),
				median(trc, reps), reps);
		fflush(stdout);
		free(ts);
		free(buf);
		ckpt_checkpoint_free(ck);
	}
	/* all-reduce: ordered vs MPI_Allreduce, same float count per worker */
	float *a = malloc(nred * sizeof(float)), *b = malloc(nred * sizeof(float));
	for (size_t i = 0; i < nred; i++)
		a[i] = (float)(i % 1000) * 1e-3f;
	int rr = 2 * reps + 1;
	double *t1 = calloc((size_t)rr * 2, sizeof(double)), *t2 = t1 + rr;
	reduce_arg ra = { a, nred, rr, t1 };
	if (ckpt_strategy_run(s, reduce_fn, &ra) < 0)
		die("all-reduce");
	for (int r = 0; r < rr; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = now();
		MPI_Allreduce(a, b, (int)nred, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		t2[r] = now() - t0;
	}
	if (rank_ == 0)
		printf("{\"op\":\"all_reduce\",\"workers\":%d,\"floats\":%zu,\"ordered_s\":%.5f,\"mpi_allreduce_s\":%.5f,\"reps\":%d}\n",
			size_, nred, median(t1, rr), median(t2, rr), rr);
	free(a);
	free(b);
	free(t1);
	ckpt_strategy_free(s);
	MPI_Finalize();
	return 0;
}

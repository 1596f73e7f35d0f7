/*
 * The memory tier across workers (ckpt/tier.h): the sample model plus a
 * partitioned table of 3 parts, saved by a manager with memory_every 1.
 * Nodes are emulated with CKPT_TIER_NODES under CKPT_TIER_DIR (the caller's).
 *
 *   mpi_tier save LOCAL DIR STEPS COPIES PERSIST
 *       saves of steps 1..STEPS (persist_every PERSIST: only those go to DIR)
 *   mpi_tier restore LOCAL DIR STEP SAVED_R COPIES PERSIST TIER
 *       restore_latest: expects step STEP (saved by SAVED_R replicas) from
 *       TIER (memory | storage), every value checked, the same on every
 *       worker; from memory, 0 bytes read through the manager's file system;
 *       then one more save (STEP + 1) that must succeed.
 *   mpi_tier loop LOCAL DIR COPIES PIDDIR
 *       saves steps 1, 2, ... forever (PERSIST 1000); each worker writes
 *       PIDDIR/pid.R first; after each save returns, worker 0 writes the
 *       step to PIDDIR/acked (renamed whole): the test kills it.
 *   mpi_tier async LOCAL DIR KILLAT
 *       memory_async (run with MPI_TIER_ASYNC=1), 1 copy, nothing persisted:
 *       saves of steps 1..KILLAT; when each returns its step is not yet
 *       recorded on this worker's node and the previous one is. Then every
 *       worker kills itself (SIGKILL). KILLAT 0: steps 1..3, then
 *       ckpt_manager_wait records step 3, and a clean close.
 *   mpi_tier asyncfail LOCAL DIR
 *       memory_async with a 2 MiB variable more and memory_limit 1 GiB, on
 *       nodes a,b where b's tier is a tmpfs too small for the copy of
 *       worker 0's piece besides its own: the save of step 1 returns, ckpt_manager_wait reports the
 *       copy's failure on every worker, and step 1 is neither recorded nor
 *       left behind.
 *   mpi_tier resume LOCAL DIR COPIES PIDDIR SAVED_R
 *       restore_latest from memory: the step restored must be >= acked and
 *       every value must be that step's (no mix of steps), 0 bytes read
 *       from DIR; then two more saves; prints the step.
 *   mpi_tier persist LOCAL DIR MODE
 *       the persistent tier from memory (memory_every 1, persist_every 2,
 *       1 copy). MODE check: step 2's save returns while each worker's copy
 *       of its data shard is held at a gate, so DIR/ckpt-2.index must not
 *       exist yet; the live state moves to steps 3 and 5 (saved to memory
 *       only) before the gate opens; after ckpt_manager_wait ckpt-2 is listed and
 *       its index exists. MODE kill: steps 1-2 persisted, then step 4's
 *       copy is held at the gate and every worker kills itself (SIGKILL).
 * Prints "CHECKS n FAILED f" (summed over workers).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <ckpt/mpi.h>
#include "count_vfs.h"
#include "mpi_model.h"
#include "mpi_report.h"

#define ROWS 12
#define COLS 3

static int rank, size;
static int async_copies; /* MPI_TIER_ASYNC=1: memory_async, MPI at MPI_THREAD_MULTIPLE */
static int64_t big_floats;  /* > 0: a mirrored variable "big" of that many float32 (asyncfail) */
static uint64_t tier_limit; /* memory_limit (asyncfail: above what node b's file system holds) */
static long checks;
static int bad;

typedef struct job {
	tm_model m;
	ckpt_partitioned *pv;
	ckpt_manager *mgr;
	count_vfs *cv;
} job;

/* ---- the gate: a pwrite to a file whose path holds the armed pattern waits until opened (at most 3 s) ---- */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static char gate_pattern[64];
static int gate_opened, gate_held;

static int gate_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off)
{
	pthread_mutex_lock(&gate_mu);
	if (gate_pattern[0] && strstr(io->path, gate_pattern)) {
		gate_held = 1;
		pthread_cond_broadcast(&gate_cond);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 3;
		while (!gate_opened && pthread_cond_timedwait(&gate_cond, &gate_mu, &until) == 0)
			;
	}
	pthread_mutex_unlock(&gate_mu);
	return cv_pwrite(io, buf, n, off);
}

static const ckpt_io_methods gate_io_methods = { .version = CKPT_IO_METHODS_V1, .pread = cv_pread,
	.pwrite = gate_pwrite, .size = cv_size, .sync = cv_sync, .close = cv_close };

static int gate_open_file(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out)
{
	int rc = cv_open(vfs, path, flags, out);
	if (rc == CKPT_OK)
		(*out)->methods = &gate_io_methods;
	return rc;
}

static const ckpt_vfs_methods gate_vfs_methods = { .version = CKPT_VFS_METHODS_V1, .open = gate_open_file,
	.rename = cv_rename, .remove = cv_remove, .exists = cv_exists, .sync_dir = cv_sync_dir, .list = cv_list,
	.mkdir = cv_mkdir, .destroy = cv_destroy };

static void gate_arm(const char *pattern)
{
	pthread_mutex_lock(&gate_mu);
	snprintf(gate_pattern, sizeof(gate_pattern), "%s", pattern);
	gate_opened = gate_held = 0;
	pthread_mutex_unlock(&gate_mu);
}

/* 1 once a write is held at the gate (or was, and went through), within `seconds` */
static int gate_wait_held(int seconds)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += seconds;
	pthread_mutex_lock(&gate_mu);
	while (!gate_held && pthread_cond_timedwait(&gate_cond, &gate_mu, &until) == 0)
		;
	int h = gate_held;
	pthread_mutex_unlock(&gate_mu);
	return h;
}

static void gate_open(void)
{
	pthread_mutex_lock(&gate_mu);
	gate_opened = 1;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_mu);
}

static int file_exists(const char *dir, const char *name)
{
	char p[2048];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

/*
 * The inode of this worker's piece of memory step `st` ($CKPT_TIER_DIR/<node>/tierjob/…), 0 when absent:
 * a superseded piece's data file becomes a spare that a later save writes over (tier_slots.c).
 */
static void own_job_dir(char *out, size_t len)
{
	const char *tier = getenv("CKPT_TIER_DIR"), *nodes = getenv("CKPT_TIER_NODES");
	char node[64] = "";
	for (int r = 0; nodes && *nodes; r++) {
		size_t n = strcspn(nodes, ",");
		if (r == rank)
			snprintf(node, sizeof(node), "%.*s", (int)n, nodes);
		nodes += n + (nodes[n] == ',');
	}
	snprintf(out, len, "%s/%s/tierjob", tier ? tier : "", node);
}

static ino_t own_piece_inode(int64_t st, int nworkers)
{
	char jd[1024], p[2048];
	own_job_dir(jd, sizeof(jd));
	snprintf(p, sizeof(p), "%s/step-%012lld.w%d-of-%d/ckpt.data-%05d-of-%05d", jd, (long long)st, rank, nworkers,
		rank, nworkers);
	struct stat sb;
	return stat(p, &sb) == 0 ? sb.st_ino : 0;
}

/* 1 when this worker's node holds the commit record of step `st` */
static int own_node_recorded(int64_t st, int nworkers)
{
	char jd[1024], name[128];
	own_job_dir(jd, sizeof(jd));
	snprintf(name, sizeof(name), "commit-%012lld.of-%d", (long long)st, nworkers);
	return file_exists(jd, name);
}

static float cell(int64_t step, int r, int c)
{
	return (float)step * 100.0f + (float)(r * COLS + c);
}

static void set_table(job *j, int64_t step)
{
	for (int i = 0; i < 3; i++) {
		ckpt_variable *part = ckpt_partitioned_part(j->pv, i);
		if (!part)
			continue;
		int64_t first, rows;
		TM_TRY(ckpt_partitioned_part_rows(&first, &rows, j->pv, i));
		float v[ROWS * COLS];
		for (int64_t r = 0; r < rows; r++)
			for (int c = 0; c < COLS; c++)
				v[r * COLS + c] = cell(step, (int)(first + r), c);
		TM_TRY(ckpt_variable_assign(part, v, (size_t)(rows * COLS) * sizeof(float)));
	}
}

static void check_table(job *j, int64_t step)
{
	for (int i = 0; i < 3; i++) {
		ckpt_variable *part = ckpt_partitioned_part(j->pv, i);
		checks++;
		if ((part != NULL) != (i % size == rank))
			bad++, fprintf(stderr, "worker %d: part %d held %d\n", rank, i, part != NULL);
		if (!part)
			continue;
		int64_t first, rows;
		TM_TRY(ckpt_partitioned_part_rows(&first, &rows, j->pv, i));
		const float *v = ckpt_variable_replica_data(part, 0);
		for (int64_t r = 0; r < rows; r++)
			for (int c = 0; c < COLS; c++, checks++)
				if (v[r * COLS + c] != cell(step, (int)(first + r), c))
					bad++, fprintf(stderr, "worker %d: table row %lld col %d is %g, step %lld's is %g\n", rank,
						(long long)(first + r), c, v[r * COLS + c], (long long)step,
						cell(step, (int)(first + r), c));
	}
}

static void open_job(job *j, ckpt_strategy *s, const char *dir, int copies, int persist, int slots)
{
	memset(j, 0, sizeof(*j));
	TM_TRY(ckpt_scope_enter(s));
	TM_TRY(tm_build(&j->m, NULL, slots));
	ckpt_shape sh = { 2, { ROWS, COLS } };
	TM_TRY(ckpt_partitioned_new(&j->pv, "table", CKPT_DT_FLOAT, &sh, 3, NULL));
	TM_TRY(ckpt_object_track_partitioned(ckpt_checkpoint_root(j->m.ck), "table", j->pv));
	if (big_floats) {
		ckpt_shape bs = { 1, { big_floats } };
		TM_TRY(ckpt_status_of(ckpt_object_add_variable(ckpt_checkpoint_root(j->m.ck), "big", "big", CKPT_DT_FLOAT,
			&bs, NULL)));
	}
	j->cv = count_vfs_new();
	j->cv->base.methods = &gate_vfs_methods; /* count_vfs, with the gate (open unless armed) */
	ckpt_manager_options o = CKPT_MANAGER_OPTIONS_INIT;
	o.vfs = &j->cv->base;
	o.memory_every = 1;
	o.persist_every = persist;
	o.memory_copies = copies;
	o.memory_job = "tierjob";
	o.memory_async = async_copies;
	o.memory_limit = tier_limit;
	TM_TRY(ckpt_manager_new_ext(&j->mgr, j->m.ck, dir, 3, &o));
}

static void close_job(job *j)
{
	ckpt_manager_free(j->mgr);
	tm_free(&j->m);
	ckpt_partitioned_free(j->pv);
	ckpt_vfs_free(&j->cv->base);
}

static void save_step(job *j, ckpt_strategy *s, int64_t st)
{
	TM_TRY(tm_set(&j->m, s, st));
	set_table(j, st);
	TM_TRY(ckpt_status_of(ckpt_manager_save_number(j->mgr, st)));
}

static void same_everywhere(const char *what, long long x)
{
	long long lo = x, hi = x;
	MPI_Allreduce(&x, &lo, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
	MPI_Allreduce(&x, &hi, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
	checks++;
	if (lo != hi)
		bad++, fprintf(stderr, "worker %d: %s %lld differs between workers (%lld .. %lld)\n", rank, what, x, lo, hi);
}

/* restore_latest; returns the step restored (-1: nothing), the tier in *tier */
static int64_t restore(job *j, ckpt_strategy *s, int *tier, uint64_t *dir_bytes)
{
	ckpt_restore_status *st = NULL;
	size_t before = j->cv->n;
	const char *from = ckpt_manager_restore_latest(&st, j->mgr);
	TM_TRY(ckpt_status_of(from));
	*tier = st ? ckpt_restore_status_tier(st) : CKPT_TIER_NONE;
	/* every byte from the tier that served it, the same count on every worker (the whole step) */
	uint64_t mem = ckpt_restore_status_tier_bytes(st, CKPT_TIER_MEMORY);
	uint64_t sto = ckpt_restore_status_tier_bytes(st, CKPT_TIER_STORAGE);
	checks++;
	if ((*tier == CKPT_TIER_MEMORY && (!mem || sto)) || (*tier == CKPT_TIER_STORAGE && (mem || !sto)) ||
		(*tier == CKPT_TIER_NONE && (mem || sto)))
		bad++, fprintf(stderr, "worker %d: tier %d served the restore, bytes: %llu from memory, %llu from storage\n",
			rank, *tier, (unsigned long long)mem, (unsigned long long)sto);
	same_everywhere("bytes restored", (long long)(mem + sto));
	*dir_bytes = 0;
	for (size_t i = before; i < j->cv->n; i++)
		*dir_bytes += j->cv->reads[i].len;
	TM_TRY(tm_create_slots(&j->m));
	TM_TRY(ckpt_scope_exit(s));
	if (st)
		ckpt_restore_status_expect_partial(st);
	ckpt_restore_status_free(st);
	int64_t step = -1;
	if (from)
		TM_TRY(ckpt_variable_read(j->m.step, &step, sizeof(step)));
	same_everywhere("restored step", (long long)step);
	same_everywhere("restored tier", *tier);
	return step;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		TM_FAIL("usage: see the top of mpi_tier.c");
	int prov;
	const char *as = getenv("MPI_TIER_ASYNC"), *big = getenv("MPI_TIER_BIG");
	big_floats = big ? atoll(big) : 0; /* MPI_TIER_BIG=N: a mirrored variable "big" of N float32 more */
	async_copies = as && atoi(as) > 0;
	/* MPI_TIER_ASYNC=2: memory_async asked for without the thread level it needs */
	MPI_Init_thread(&argc, &argv, as && atoi(as) == 1 ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED, &prov);
	if (as && atoi(as) == 1 && prov != MPI_THREAD_MULTIPLE)
		TM_FAIL("MPI_THREAD_MULTIPLE asked for, %d provided", prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	ckpt_strategy *s;
	int local = atoi(argv[2]);
	const char *dir = argv[3];
	TM_TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, local));
	job j;
	char extra[128] = "";
	if (!strcmp(argv[1], "save") && argc > 6) {
		open_job(&j, s, dir, atoi(argv[5]), atoi(argv[6]), 1);
		TM_TRY(ckpt_scope_exit(s));
		for (int st = 1; st <= atoi(argv[4]); st++)
			save_step(&j, s, st);
		checks++;
		close_job(&j);
	} else if (!strcmp(argv[1], "restore") && argc > 8) {
		int64_t want = atoll(argv[4]);
		open_job(&j, s, dir, atoi(argv[6]), atoi(argv[7]), 0);
		int tier;
		uint64_t dir_bytes;
		int64_t got = restore(&j, s, &tier, &dir_bytes);
		int want_tier = !strcmp(argv[8], "memory") ? CKPT_TIER_MEMORY : CKPT_TIER_STORAGE;
		checks += 2;
		if (got != want)
			bad++, fprintf(stderr, "worker %d: restored step %lld, want %lld\n", rank, (long long)got, (long long)want);
		if (tier != want_tier)
			bad++, fprintf(stderr, "worker %d: restored from tier %d, want %s\n", rank, tier, argv[8]);
		if (want_tier == CKPT_TIER_MEMORY) {
			checks++;
			if (dir_bytes)
				bad++, fprintf(stderr, "worker %d: a memory restore read %llu bytes of %s\n", rank,
					(unsigned long long)dir_bytes, dir);
		}
		if (got == want) {
			char who[64];
			snprintf(who, sizeof(who), "worker %d after restore", rank);
			bad += tm_check(&j.m, want, atoi(argv[5]), who, &checks);
			check_table(&j, want);
		}
		save_step(&j, s, want + 1);
		snprintf(extra, sizeof(extra), " STEP %lld TIER %d", (long long)got, tier);
		close_job(&j);
	} else if (!strcmp(argv[1], "persist") && argc > 4) {
		int kill_mode = !strcmp(argv[4], "kill");
		open_job(&j, s, dir, 1, 2, 1);
		TM_TRY(ckpt_scope_exit(s));
		save_step(&j, s, 1);
		if (kill_mode) {
			save_step(&j, s, 2);
			TM_TRY(ckpt_manager_wait(j.mgr));
			gate_arm("ckpt-4.data-");
			save_step(&j, s, 3);
			save_step(&j, s, 4);
			checks++;
			if (!gate_wait_held(20))
				bad++, fprintf(stderr, "worker %d: no write of ckpt-4 held at the gate\n", rank);
			MPI_Barrier(MPI_COMM_WORLD);
			printf("KILLING worker %d during the copy of ckpt-4\n", rank);
			fflush(stdout);
			kill(getpid(), SIGKILL);
		}
		gate_arm("ckpt-2.data-");
		save_step(&j, s, 2);
		ino_t copied = own_piece_inode(2, size);
		/* the trainer blocked for the memory save only: the directory's index comes later */
		checks += 2;
		if (file_exists(dir, "ckpt-2.index"))
			bad++, fprintf(stderr, "worker %d: %s/ckpt-2.index exists when the save returns\n", rank, dir);
		if (!gate_wait_held(10))
			bad++, fprintf(stderr, "worker %d: no write of ckpt-2 in the background\n", rank);
		/*
		 * the live state moves on before the copy writes: the copy is the memory step's. Two more memory
		 * saves (3, 5: not persisted) supersede step 2's segment and then the next one's, so a save that
		 * reused the files the copy still reads would show in ckpt-2's values.
		 */
		save_step(&j, s, 3);
		save_step(&j, s, 5);
		ino_t later = own_piece_inode(5, size);
		checks += 2;
		if (!copied || !later)
			bad++, fprintf(stderr, "worker %d: no piece of step 2 (%lu) or 5 (%lu) under CKPT_TIER_DIR\n", rank,
				(unsigned long)copied, (unsigned long)later);
		if (copied == later)
			bad++, fprintf(stderr, "worker %d: step 5 was written over the file the copy of step 2 reads\n", rank);
		gate_open();
		TM_TRY(ckpt_manager_wait(j.mgr));
		const char *latest = ckpt_manager_latest(j.mgr);
		checks += 2;
		if (!file_exists(dir, "ckpt-2.index"))
			bad++, fprintf(stderr, "worker %d: no %s/ckpt-2.index after ckpt_manager_wait\n", rank, dir);
		if (!latest || !strstr(latest, "ckpt-2"))
			bad++, fprintf(stderr, "worker %d: the manager lists %s, not ckpt-2\n", rank, latest ? latest : "nothing");
		close_job(&j);
	} else if (!strcmp(argv[1], "loop") && argc > 5) {
		const char *piddir = argv[5];
		char p[1024], t[1024];
		snprintf(p, sizeof(p), "%s/pid.%d", piddir, rank);
		FILE *f = fopen(p, "w");
		if (!f)
			TM_FAIL("cannot write %s", p);
		fprintf(f, "%ld\n", (long)getpid());
		fclose(f);
		open_job(&j, s, dir, atoi(argv[4]), 1000, 1);
		TM_TRY(ckpt_scope_exit(s));
		for (int64_t st = 1;; st++) {
			save_step(&j, s, st);
			if (rank == 0) {
				snprintf(t, sizeof(t), "%s/acked.tmp", piddir);
				snprintf(p, sizeof(p), "%s/acked", piddir);
				f = fopen(t, "w");
				if (!f)
					TM_FAIL("cannot write %s", t);
				/* with memory_async a save returns before its step is committed: it commits the previous one */
				fprintf(f, "%lld\n", (long long)(st - async_copies));
				fclose(f);
				rename(t, p);
			}
		}
	} else if (!strcmp(argv[1], "async") && argc > 4) {
		/* saves 1..KILLAT, each returning before its step is recorded, which the next call does */
		int killat = atoi(argv[4]), last = killat ? killat : 3;
		open_job(&j, s, dir, 1, 1000, 1);
		TM_TRY(ckpt_scope_exit(s));
		for (int st = 1; st <= last; st++) {
			save_step(&j, s, st);
			checks += 2;
			if (own_node_recorded(st, size))
				bad++, fprintf(stderr, "worker %d: step %d is recorded when its save returns\n", rank, st);
			if (st > 1 && !own_node_recorded(st - 1, size))
				bad++, fprintf(stderr, "worker %d: step %d is not recorded after the save of %d\n", rank, st - 1, st);
			MPI_Barrier(MPI_COMM_WORLD); /* every worker looked before any goes on */
		}
		if (killat) {
			printf("KILLING worker %d after the save of step %d\n", rank, killat);
			fflush(stdout);
			kill(getpid(), SIGKILL);
		}
		TM_TRY(ckpt_manager_wait(j.mgr));
		checks++;
		if (!own_node_recorded(last, size))
			bad++, fprintf(stderr, "worker %d: step %d is not recorded after ckpt_manager_wait\n", rank, last);
		close_job(&j);
	} else if (!strcmp(argv[1], "asyncfail") && argc > 3) {
		/* the copy of worker 0's piece does not fit on node b: reported by the call after the save */
		big_floats = 512 * 1024; /* 2 MiB, in worker 0's piece (values are spread whole) */
		tier_limit = (uint64_t)1 << 30;
		open_job(&j, s, dir, 1, 1000, 1);
		TM_TRY(ckpt_scope_exit(s));
		save_step(&j, s, 1); /* returns once each piece is on its own node */
		int rc = ckpt_manager_wait(j.mgr);
		char e[1024];
		checks += 3;
		if (rc == CKPT_OK)
			bad++, fprintf(stderr, "worker %d: the wait succeeded; the copy to node b should not fit\n", rank);
		else
			printf("worker %d: the wait reports %s: %s\n", rank, ckpt_status_name(rc),
				ckpt_error_format(ckpt_error_last(), e, sizeof(e)));
		if (own_node_recorded(1, size))
			bad++, fprintf(stderr, "worker %d: step 1 is recorded although a copy failed\n", rank);
		if (own_piece_inode(1, size))
			bad++, fprintf(stderr, "worker %d: its piece of step 1 is still there\n", rank);
		fflush(stdout);
		close_job(&j);
	} else if (!strcmp(argv[1], "resume") && argc > 6) {
		char p[1024];
		snprintf(p, sizeof(p), "%s/acked", argv[5]);
		long long acked = 0;
		FILE *f = fopen(p, "r");
		if (f) {
			if (fscanf(f, "%lld", &acked) != 1)
				acked = 0;
			fclose(f);
		}
		open_job(&j, s, dir, atoi(argv[4]), 1000, 0);
		int tier;
		uint64_t dir_bytes;
		int64_t got = restore(&j, s, &tier, &dir_bytes);
		checks += 3;
		if (got < acked || tier != CKPT_TIER_MEMORY)
			bad++, fprintf(stderr, "worker %d: restored step %lld from tier %d; step %lld was acknowledged\n", rank,
				(long long)got, tier, acked);
		if (dir_bytes)
			bad++, fprintf(stderr, "worker %d: the restore read %llu bytes of %s\n", rank,
				(unsigned long long)dir_bytes, dir);
		if (got > 0) {
			char who[64];
			snprintf(who, sizeof(who), "worker %d after resume", rank);
			bad += tm_check(&j.m, got, atoi(argv[6]), who, &checks);
			check_table(&j, got);
			/* and trains on */
			save_step(&j, s, got + 1);
			save_step(&j, s, got + 2);
		}
		snprintf(extra, sizeof(extra), " RESUMED %lld ACKED %lld", (long long)got, acked);
		close_job(&j);
	} else {
		TM_FAIL("usage: see the top of mpi_tier.c");
	}
	ckpt_strategy_free(s);
	return tm_report(checks, bad, "%s", extra);
}

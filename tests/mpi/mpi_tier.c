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
 *   mpi_tier resume LOCAL DIR COPIES PIDDIR SAVED_R
 *       restore_latest from memory: the step restored must be >= acked and
 *       every value must be that step's (no mix of steps), 0 bytes read
 *       from DIR; then two more saves; prints the step.
 * Prints "CHECKS n FAILED f" (summed over workers).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ckpt/mpi.h>
#include "count_vfs.h"
#include "mpi_model.h"
#include "mpi_report.h"

#define ROWS 12
#define COLS 3

static int rank, size;
static long checks;
static int bad;

typedef struct job {
	tm_model m;
	ckpt_partitioned *pv;
	ckpt_manager *mgr;
	count_vfs *cv;
} job;

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
	j->cv = count_vfs_new();
	ckpt_manager_options o = CKPT_MANAGER_OPTIONS_INIT;
	o.vfs = &j->cv->base;
	o.memory_every = 1;
	o.persist_every = persist;
	o.memory_copies = copies;
	o.memory_job = "tierjob";
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
	if (argc < 6)
		TM_FAIL("usage: see the top of mpi_tier.c");
	int prov;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
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
	} else if (!strcmp(argv[1], "loop")) {
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
				fprintf(f, "%lld\n", (long long)st);
				fclose(f);
				rename(t, p);
			}
		}
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

/*
 * The memory tier of one process (ckpt/tier.h): saves routed by
 * memory_every / persist_every, a restore from memory that reads nothing
 * from the checkpoint directory (counted on its VFS), the fall-back to the
 * directory when memory is older or a segment does not check, a kill -9
 * during a memory save, private modes, the space check, the list / drop
 * API and a clean finish that leaves nothing behind.
 *
 * Every test has its own tier directory (CKPT_TIER_DIR): Criterion runs each
 * test in its own process.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "mpi/count_vfs.h"
#include "test_support.h"
#include "tier_common.h"

#define BIG TT_BIG

typedef struct tstate {
	ckpt_checkpoint *ck;
	ckpt_variable *value, *big;
	int nwarn;
	char warn[4096];
} tstate;

static void on_warn(const char *msg, void *ctx)
{
	tstate *s = ctx;
	s->nwarn++;
	snprintf(s->warn, sizeof(s->warn), "%s", msg);
}

static void build(tstate *s, ckpt_vfs *vfs)
{
	memset(s, 0, sizeof(*s));
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	o.vfs = vfs;
	o.warn = on_warn;
	o.warn_ctx = s;
	cr_assert_eq(ckpt_checkpoint_new(&s->ck, &o), CKPT_OK);
	tt_model_add(s->ck, &s->value, &s->big);
}

/* The state of step v: value v, big[i] = v * 1000 + i. */
static void set_step(tstate *s, int64_t v)
{
	tt_set_step(s->value, s->big, v);
}

/* The step the state holds; fails when value and big disagree (a torn restore). */
static int64_t get_step(tstate *s)
{
	return tt_get_step(s->value, s->big);
}

static char *g_tier;

static void remove_tmpdirs(void)
{
	tt_tmpdirs_remove();
	free(g_tier);
	g_tier = NULL;
	unsetenv(CKPT_TIER_DIR_ENV);
}

TestSuite(tier, .fini = remove_tmpdirs);

static void use_tier_dir(void)
{
	g_tier = ts_join(tt_tmpdir(), "shm");
	setenv(CKPT_TIER_DIR_ENV, g_tier, 1);
}

static ckpt_manager_options tier_opts(int memory_every, int persist_every)
{
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.no_fsync = 1;
	mo.memory_every = memory_every;
	mo.persist_every = persist_every;
	mo.memory_job = "job1";
	return mo;
}

/* Steps 1..n, each saved with its own state. */
static void train(tstate *s, ckpt_manager *m, int64_t n)
{
	for (int64_t v = 1; v <= n; v++) {
		set_step(s, v);
		const char *p;
		cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK, "save %lld: %s", (long long)v,
			ckpt_error_last()->message);
	}
}

/* The entries of `dir` whose names start with `prefix` ("": all but . and ..). */
static size_t names_in(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

static size_t entries_in(const char *dir)
{
	return names_in(dir, "");
}

/* The spare data files in `dir` (tier_slots.c): a superseded step's, kept for the next save to write over. */
static size_t spares_in(const char *dir)
{
	return names_in(dir, ".spare.");
}

/* The segment directory of `step` (must exist). */
static const char *segment_file_path(int64_t step)
{
	static char seg[512];
	snprintf(seg, sizeof(seg), "%s/job1/step-%012lld.w0-of-1", g_tier, (long long)step);
	struct stat st;
	cr_assert_eq(stat(seg, &st), 0, "no segment %s", seg);
	return seg;
}

/* The file of the segment of `step` whose name starts with `what`. */
static char *segment_file(int64_t step, const char *what)
{
	char seg[512];
	snprintf(seg, sizeof(seg), "%s/job1/step-%012lld.w0-of-1", g_tier, (long long)step);
	DIR *d = opendir(seg);
	cr_assert(d, "no segment %s", seg);
	char *out = NULL;
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, what, strlen(what)))
			out = ts_join(seg, e->d_name);
	closedir(d);
	cr_assert(out, "no %s* in %s", what, seg);
	return out;
}

/*
 * The bytes per tier of a restore served by `tier`: the state's values
 * (value: 8, big: BIG floats, save_counter: 8) plus the object graph
 * (a few hundred bytes) all from it, none from the other.
 */
static void assert_tier_bytes(const ckpt_restore_status *st, int tier)
{
	uint64_t values = 8 + (uint64_t)BIG * 4 + 8;
	int other = tier == CKPT_TIER_MEMORY ? CKPT_TIER_STORAGE : CKPT_TIER_MEMORY;
	uint64_t got = ckpt_restore_status_tier_bytes(st, tier);
	cr_assert(got >= values && got < values + 4096, "%llu bytes from tier %d, want the state's %llu + its graph",
		(unsigned long long)got, tier, (unsigned long long)values);
	cr_assert_eq(ckpt_restore_status_tier_bytes(st, other), 0, "%llu bytes from tier %d",
		(unsigned long long)ckpt_restore_status_tier_bytes(st, other), other);
	cr_assert_eq(ckpt_restore_status_tier_bytes(st, CKPT_TIER_NONE), 0);
	cr_assert_eq(ckpt_restore_status_tier_bytes(NULL, tier), 0);
}

/*
 * A restarted trainer's manager over `dir` (options `mo`) for r, built already: restore_latest must succeed,
 * served by `tier` with every byte from it, and give step `step`. *from (when asked): the path it restored.
 */
static ckpt_manager *restart(tstate *r, const char *dir, const ckpt_manager_options *mo, int tier, int64_t step,
	const char **from)
{
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new_ext(&m, r->ck, dir, 5, mo), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_restore_status *st = NULL;
	const char *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_restore_latest(&st, m)), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_tier(st), tier, "served by tier %d: %s", ckpt_restore_status_tier(st), r->warn);
	assert_tier_bytes(st, tier);
	cr_assert_eq(get_step(r), step);
	ckpt_restore_status_free(st);
	if (from)
		*from = p;
	return m;
}

Test(tier, memory_restore_reads_nothing_from_storage)
{
	use_tier_dir();
	char *dir = tt_tmpdir();
	count_vfs *cv = count_vfs_new();
	tstate s;
	build(&s, &cv->base);
	ckpt_manager *m;
	ckpt_manager_options mo = tier_opts(1, 3);
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	train(&s, m, 5);
	/* storage holds 3 only (copied from memory in the background: listed once waited for); memory holds 5 only */
	cr_assert_eq(ckpt_manager_wait(m), CKPT_OK);
	cr_assert_eq(ckpt_manager_num_checkpoints(m), 1);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);

	tstate r;
	build(&r, &cv->base);
	cr_assert_eq(ckpt_manager_new_ext(&m, r.ck, dir, 5, &mo), CKPT_OK);
	size_t before = cv->n;
	ckpt_restore_status *st = NULL;
	const char *from;
	cr_assert_eq(ckpt_status_of(from = ckpt_manager_restore_latest(&st, m)), CKPT_OK, "%s",
		ckpt_error_last()->message);
	cr_assert_eq(ckpt_restore_status_tier(st), CKPT_TIER_MEMORY);
	cr_assert(strstr(from, "step-000000000005.w0-of-1"), "restored from %s", from);
	cr_assert_eq(cv->n, before, "%zu reads from the checkpoint directory", cv->n - before);
	assert_tier_bytes(st, CKPT_TIER_MEMORY);
	cr_assert_eq(get_step(&r), 5);
	cr_assert_eq(ckpt_checkpoint_save_counter(r.ck), 5);
	cr_assert_eq(ckpt_restore_status_assert_consumed(st), CKPT_OK);
	ckpt_restore_status_free(st);
	/* numbering continues after the step restored */
	set_step(&r, 6);
	const char *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK);
	cr_assert(strstr(p, "ckpt-6"), "%s", p); /* 6: storage and memory */
	cr_assert(strstr(segment_file_path(6), "step-000000000006"));
	ckpt_manager_free(m);
	ckpt_checkpoint_free(r.ck);
	ckpt_vfs_free(&cv->base);
}

Test(tier, storage_newer_than_memory_is_used)
{
	use_tier_dir();
	char *dir = tt_tmpdir();
	tstate s;
	build(&s, NULL);
	ckpt_manager *m;
	ckpt_manager_options mo = tier_opts(2, 0); /* memory: 2; storage: 1, 2, 3 */
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	train(&s, m, 3);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);

	tstate r;
	build(&r, NULL);
	const char *from;
	m = restart(&r, dir, &mo, CKPT_TIER_STORAGE, 3, &from);
	cr_assert(strstr(from, "ckpt-3"), "%s", from);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(r.ck);
}

Test(tier, crc32c_failure_skips_the_copy)
{
	use_tier_dir();
	char *dir = tt_tmpdir();
	tstate s;
	build(&s, NULL);
	ckpt_manager *m;
	ckpt_manager_options mo = tier_opts(1, 3);
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	train(&s, m, 5);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	/* one bit of one tensor: the header still checks (sizes), the tensor's crc32c does not */
	char *data = segment_file(5, "ckpt.data-");
	cr_assert_eq(ts_flip_byte(data, 4096, 0x01), 0);
	free(data);

	tstate r;
	build(&r, NULL);
	set_step(&r, 77);
	/* the skipped memory step gave no value: every byte came from storage */
	const char *from;
	m = restart(&r, dir, &mo, CKPT_TIER_STORAGE, 3, &from);
	cr_assert(strstr(from, "ckpt-3"), "%s", from);
	cr_assert(strstr(r.warn, "memory tier: skipping step 5") && strstr(r.warn, "falling back"), "warning: %s",
		r.warn);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(r.ck);
}

Test(tier, damaged_header_skips_the_copy)
{
	use_tier_dir();
	char *dir = tt_tmpdir();
	tstate s;
	build(&s, NULL);
	ckpt_manager *m;
	ckpt_manager_options mo = tier_opts(1, 3);
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	train(&s, m, 4);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	char *index = segment_file(4, "ckpt.index");
	cr_assert_eq(ts_flip_byte(index, 3, 0x40), 0);
	free(index);

	tstate r;
	build(&r, NULL);
	m = restart(&r, dir, &mo, CKPT_TIER_STORAGE, 3, NULL);
	cr_assert(strstr(r.warn, "does not match its header"), "warning: %s", r.warn);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(r.ck);
}

/* A child saving steps to memory forever; killed while a segment is being written. */
Test(tier, kill_during_memory_save_keeps_the_committed_step)
{
	use_tier_dir();
	char *dir = tt_tmpdir();
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		tstate s;
		build(&s, NULL);
		ckpt_manager *m;
		ckpt_manager_options mo = tier_opts(1, 1000000);
		if (ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo) != CKPT_OK)
			_exit(3);
		for (int64_t v = 1;; v++) {
			set_step(&s, v);
			if (!ckpt_manager_save(m))
				_exit(4);
		}
	}
	/* kill it while a temporary segment exists, after at least one step was committed */
	char job[512];
	snprintf(job, sizeof(job), "%s/job1", g_tier);
	int killed = 0;
	for (int i = 0; i < 200000 && !killed; i++) {
		DIR *d = opendir(job);
		int tmp = 0, committed = 0;
		struct dirent *e;
		while (d && (e = readdir(d))) {
			tmp |= !strncmp(e->d_name, ".tmp-step-", 10);
			committed |= !strncmp(e->d_name, "step-", 5);
		}
		if (d)
			closedir(d);
		if (tmp && committed) {
			kill(pid, SIGKILL);
			killed = 1;
		}
	}
	int ws;
	waitpid(pid, &ws, 0);
	cr_assert(killed && WIFSIGNALED(ws), "the child was not killed during a save (status %d)", ws);

	/*
	 * The list shows committed steps only, the newest complete: one, or two when the kill came after a commit
	 * and before the step it superseded was gone. That older one may be whole (not yet removed) or part
	 * removed (its data file already taken as a spare): the parent's look at the directory and the kill are
	 * not one instant, so the child may have gone on from the save it saw into that removal.
	 */
	ckpt_tier_list *l;
	cr_assert_eq(ckpt_tier_scan(&l, NULL), CKPT_OK);
	size_t n = ckpt_tier_list_num_entries(l);
	cr_assert(n == 1 || n == 2, "%zu entries", n);
	const ckpt_tier_entry *e = ckpt_tier_list_entry(l, n - 1);
	cr_assert(n == 1 || ckpt_tier_list_entry(l, 0)->step < e->step);
	cr_assert_str_eq(e->job, "job1");
	cr_assert(e->complete && e->num_workers == 1 && e->num_present == 1 && e->bytes > BIG * 4);
	int64_t committed = e->step;
	ckpt_tier_list_free(l);

	tstate r;
	build(&r, NULL);
	ckpt_manager *m;
	ckpt_manager_options mo = tier_opts(1, 1000000);
	m = restart(&r, dir, &mo, CKPT_TIER_MEMORY, committed, NULL);
	/* the next save replaces the killed one's temporary and the old step */
	set_step(&r, committed + 1);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save(m)), CKPT_OK);
	cr_assert_eq(entries_in(job) - spares_in(job), 1, "%zu entries left in %s", entries_in(job), job);
	cr_assert_leq(spares_in(job), 1);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(r.ck);
}

Test(tier, segments_are_private)
{
	use_tier_dir();
	char *dir = tt_tmpdir();
	umask(022);
	tstate s;
	build(&s, NULL);
	ckpt_manager *m;
	ckpt_manager_options mo = tier_opts(1, 10);
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	train(&s, m, 1);
	struct stat st;
	cr_assert_eq(stat(g_tier, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700);
	char seg[512];
	snprintf(seg, sizeof(seg), "%s/job1/step-%012d.w0-of-1", g_tier, 1);
	cr_assert_eq(stat(seg, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700);
	DIR *d = opendir(seg);
	struct dirent *e;
	int files = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char *p = ts_join(seg, e->d_name);
		cr_assert_eq(stat(p, &st), 0);
		cr_assert_eq(st.st_mode & 0777, 0600, "%s has mode %o", p, st.st_mode & 0777);
		files++;
		free(p);
	}
	closedir(d);
	cr_assert_geq(files, 3); /* SEGMENT, index, data */
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
}

Test(tier, shortfall_is_refused_before_writing)
{
	use_tier_dir();
	char *dir = tt_tmpdir();
	tstate s;
	build(&s, NULL);
	ckpt_manager *m;
	ckpt_manager_options mo = tier_opts(1, 10);
	mo.memory_limit = 100000; /* less than "big" */
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	set_step(&s, 1);
	cr_assert_null(ckpt_manager_save(m));
	const ckpt_error *e = ckpt_error_last();
	cr_assert_eq(e->code, CKPT_ELIMIT);
	cr_assert(strstr(e->message, "needs") && strstr(e->message, "100000") && strstr(e->message, "free"), "%s",
		e->message);
	char job[512];
	snprintf(job, sizeof(job), "%s/job1", g_tier);
	cr_assert_eq(entries_in(job), 0);
	cr_assert_eq(ckpt_checkpoint_save_counter(s.ck), 0);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
}

/* Written over, not recreated: tmpfs then allocates and zeroes no page per save (tier_slots.c). */
Test(tier, saves_write_over_the_superseded_steps_data_file)
{
	use_tier_dir();
	char *dir = tt_tmpdir();
	tstate s;
	build(&s, NULL);
	ckpt_manager *m;
	ckpt_manager_options mo = tier_opts(1, 1000);
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	ino_t ino[4];
	for (int64_t v = 1; v <= 4; v++) {
		set_step(&s, v);
		cr_assert_eq(ckpt_status_of(ckpt_manager_save(m)), CKPT_OK, "%s", ckpt_error_last()->message);
		char *data = segment_file(v, "ckpt.data-");
		struct stat st;
		cr_assert_eq(stat(data, &st), 0);
		cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", (unsigned)(st.st_mode & 0777));
		ino[v - 1] = st.st_ino;
		free(data);
	}
	cr_assert_neq(ino[0], ino[1]);
	cr_assert_eq(ino[2], ino[0], "step 3 did not write over step 1's data file");
	cr_assert_eq(ino[3], ino[1], "step 4 did not write over step 2's data file");
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);

	/* what was written over restores bit for bit (the restore checks every tensor's crc32c first) */
	tstate r;
	build(&r, NULL);
	m = restart(&r, dir, &mo, CKPT_TIER_MEMORY, 4, NULL);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(r.ck);
}

/* A variable of n floats, "zzz" under the root (written after the others), holding seed + i. */
static ckpt_variable *add_extra(ckpt_checkpoint *ck, int64_t n, float seed)
{
	ckpt_shape sh;
	cr_assert_eq(ckpt_shape_make(&sh, 1, &n), CKPT_OK);
	ckpt_variable *v;
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "zzz", "zzz", CKPT_DT_FLOAT,
		&sh, NULL)), CKPT_OK);
	float *b = malloc((size_t)n * sizeof(float));
	for (int64_t i = 0; i < n; i++)
		b[i] = seed + (float)i;
	cr_assert_eq(ckpt_variable_assign(v, b, (size_t)n * sizeof(float)), CKPT_OK);
	free(b);
	return v;
}

/*
 * The state grows between saves, by less than a page: the spare is smaller than the new data file, whose
 * last bytes land past the spare's end but inside its last mapped page. Stored there before the file is
 * extended, they would be lost (the kernel zeroes that page's tail) and the restore would fail its crc32c.
 */
Test(tier, a_grown_state_is_written_whole_over_a_smaller_spare)
{
	use_tier_dir();
	char *dir = tt_tmpdir();
	tstate s;
	build(&s, NULL);
	ckpt_manager *m;
	ckpt_manager_options mo = tier_opts(1, 1000);
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	train(&s, m, 2);
	const int64_t n = 5;
	add_extra(s.ck, n, 0.5f);
	set_step(&s, 3);
	cr_assert_eq(ckpt_status_of(ckpt_manager_save(m)), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);

	tstate r;
	build(&r, NULL);
	ckpt_variable *extra = add_extra(r.ck, n, -1.0f);
	m = restart(&r, dir, &mo, CKPT_TIER_MEMORY, 3, NULL);
	float *b = malloc((size_t)n * sizeof(float));
	cr_assert_eq(ckpt_variable_read(extra, b, (size_t)n * sizeof(float)), CKPT_OK);
	for (int64_t i = 0; i < n; i++)
		cr_assert_eq(b[i], 0.5f + (float)i, "extra[%lld] = %g", (long long)i, (double)b[i]);
	free(b);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(r.ck);
}

/*
 * A memory_limit above what the tier's file system holds (here a 1 MiB tmpfs, for a 4 MiB state): the save
 * stores through a mapping, and a page tmpfs cannot allocate there would be a SIGBUS that kills the trainer.
 * The file is allocated before it is mapped, so it is an error naming the file, and nothing is committed.
 */
Test(tier, a_full_tier_file_system_is_an_error_not_a_crash, .timeout = 120)
{
	char *dir = tt_tmpdir();
	char small[1024];
	snprintf(small, sizeof(small), "%s/small", tt_tmpdir());
	cr_assert_eq(mkdir(small, 0700), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		/* a mount of its own, gone with the child (needs root, as the suite runs) */
		if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
			mount("tmpfs", small, "tmpfs", 0, "size=1m,mode=0700") != 0)
			_exit(10);
		setenv(CKPT_TIER_DIR_ENV, small, 1);
		tstate s;
		build(&s, NULL);
		add_extra(s.ck, 1 << 20, 1.0f); /* 4 MiB */
		ckpt_manager *m;
		ckpt_manager_options mo = tier_opts(1, 1000000);
		mo.memory_limit = (uint64_t)1 << 30;
		if (ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo) != CKPT_OK)
			_exit(11);
		set_step(&s, 1);
		if (ckpt_manager_save(m))
			_exit(12); /* it fitted: the test proves nothing */
		const ckpt_error *e = ckpt_error_last();
		fprintf(stderr, "the save failed: %s (%s)\n", e->message, e->path ? e->path : "no path");
		if (!e->path || !strstr(e->path, small))
			_exit(13);
		/* nothing committed, no temporary left */
		char job[1100];
		snprintf(job, sizeof(job), "%s/job1", small);
		_exit(entries_in(job) - spares_in(job) == 0 ? 0 : 14);
	}
	int ws = 0;
	cr_assert_eq(waitpid(pid, &ws, 0), pid);
	cr_assert(!WIFSIGNALED(ws), "the save was killed by signal %d (%s)", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
	cr_assert(WIFEXITED(ws));
	cr_assert_neq(WEXITSTATUS(ws), 10, "cannot mount a tmpfs in a mount namespace of its own: run the suite as root");
	cr_assert_eq(WEXITSTATUS(ws), 0, "exit %d (12: the save fitted, 13: the error does not name the file, "
		"14: something was committed)", WEXITSTATUS(ws));
}

Test(tier, clean_finish_leaves_nothing)
{
	use_tier_dir();
	char *dir = tt_tmpdir();
	tstate s;
	build(&s, NULL);
	ckpt_manager *m;
	ckpt_manager_options mo = tier_opts(1, 2);
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	train(&s, m, 4); /* the last step is in storage too */
	char job[512];
	snprintf(job, sizeof(job), "%s/job1", g_tier);
	/* the committed step, and the step before it as the next save's spare data file */
	cr_assert_eq(entries_in(job) - spares_in(job), 1);
	cr_assert_eq(spares_in(job), 1);
	ckpt_manager_free(m);
	cr_assert_eq(entries_in(g_tier), 0, "%zu entries left in %s", entries_in(g_tier), g_tier);
	cr_assert_eq(s.nwarn, 0, "%s", s.warn);
	ckpt_checkpoint_free(s.ck);
}

Test(tier, unpersisted_step_is_kept_then_dropped)
{
	use_tier_dir();
	char *dir = tt_tmpdir();
	tstate s;
	build(&s, NULL);
	ckpt_manager *m;
	ckpt_manager_options mo = tier_opts(1, 2);
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	train(&s, m, 3); /* step 3 is in memory only */
	ckpt_manager_free(m);
	cr_assert(strstr(s.warn, "keeping step 3 of job job1") && strstr(s.warn, "ckpt tier drop job1"), "%s", s.warn);
	ckpt_tier_list *l;
	cr_assert_eq(ckpt_tier_scan(&l, g_tier), CKPT_OK);
	cr_assert_eq(ckpt_tier_list_num_entries(l), 1);
	cr_assert_eq(ckpt_tier_list_entry(l, 0)->step, 3);
	ckpt_tier_list_free(l);
	cr_assert_eq(ckpt_tier_drop(g_tier, "job1"), CKPT_OK);
	cr_assert_eq(entries_in(g_tier), 0);
	cr_assert_eq(ckpt_tier_drop(g_tier, "../x"), CKPT_EINVAL);
	ckpt_checkpoint_free(s.ck);
}

Test(tier, routing_and_skipped_saves)
{
	use_tier_dir();
	char *dir = tt_tmpdir();
	tstate s;
	build(&s, NULL);
	ckpt_manager *m;
	ckpt_manager_options mo = tier_opts(2, 3);
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, &mo), CKPT_OK);
	const char *want[] = { "", "step-000000000002", "ckpt-3", "step-000000000004", "", "ckpt-6" };
	for (int v = 1; v <= 6; v++) {
		set_step(&s, v);
		const char *p;
		cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK);
		if (!*want[v - 1])
			cr_assert_str_eq(p, "", "save %d returned %s", v, p);
		else
			cr_assert(strstr(p, want[v - 1]), "save %d returned %s", v, p);
		cr_assert_eq(ckpt_checkpoint_save_counter(s.ck), v);
	}
	cr_assert_eq(ckpt_manager_wait(m), CKPT_OK); /* ckpt-6 is copied from memory in the background */
	cr_assert_eq(ckpt_manager_num_checkpoints(m), 2);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
	/* options without a memory tier but with its fields are refused */
	ckpt_manager_options bad = tier_opts(0, 3);
	tstate r;
	build(&r, NULL);
	cr_assert_eq(ckpt_manager_new_ext(&m, r.ck, dir, 5, &bad), CKPT_EINVAL);
	ckpt_checkpoint_free(r.ck);
}

/* The struct before the memory tier (version 1) is still accepted: the ABI rule for options. */
typedef struct v1_options {
	unsigned version;
	const char *checkpoint_name;
	ckpt_vfs *vfs;
	ckpt_warning_fn warn;
	void *warn_ctx;
	int no_fsync;
} v1_options;

Test(tier, version_1_options_accepted)
{
	char *dir = tt_tmpdir();
	tstate s;
	build(&s, NULL);
	v1_options o1 = { 1, "model", NULL, NULL, NULL, 1 };
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new_ext(&m, s.ck, dir, 5, (const ckpt_manager_options *)&o1), CKPT_OK);
	set_step(&s, 1);
	const char *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_manager_save(m)), CKPT_OK);
	cr_assert(strstr(p, "model-1"), "%s", p);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(s.ck);
}

/*
 * Kill test: a child process saves repeatedly through the manager (each
 * state identifiable: a counter k in one variable and in every element of
 * another) and is SIGKILLed at a random moment, 200+ times. After each kill
 * the manager's latest valid checkpoint must load, hold one state that was
 * saved (all elements equal its counter; not older than the last save the
 * child reported complete, not newer than the last it started), and never
 * be a temporary file. The next child continues in the same directory, so
 * the manager also has to cope with whatever the previous kill left there.
 */
#include "rel_common.h"
#include <fcntl.h>
#include <ckpt/sys/vfs_memory.h>

#define KILLS 200
#define VEC 256

typedef struct msg {
	int64_t kind; /* 1 = started k, 2 = completed k */
	int64_t k;
} msg;

static void quiet(const char *m, void *ctx)
{
	(void)m;
	(void)ctx;
}

/* The child: save k, k+1, ... until killed. Never returns. */
static void saver(const char *dir, int64_t k, int fd)
{
	ckpt_checkpoint_options co = CKPT_CHECKPOINT_OPTIONS_INIT;
	co.no_fsync = 1; /* a killed process, not a power cut: rename order is what matters */
	co.warn = quiet;
	ckpt_checkpoint *ck;
	if (ckpt_checkpoint_new(&ck, &co) < 0)
		_exit(10);
	ckpt_variable *counter, *vec;
	ckpt_shape scalar = { 0 }, s;
	ckpt_shape_make(&s, 1, (int64_t[]){ VEC });
	if (ckpt_status_of(counter = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "counter", "counter", CKPT_DT_INT64, &scalar, NULL)) < 0 ||
		ckpt_status_of(vec = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "vec", "vec", CKPT_DT_INT64, &s, NULL)) < 0)
		_exit(11);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.no_fsync = 1;
	mo.warn = quiet;
	ckpt_manager *m;
	if (ckpt_manager_new_ext(&m, ck, dir, 3, &mo) < 0)
		_exit(12);
	int64_t buf[VEC];
	for (;; k++) {
		for (int i = 0; i < VEC; i++)
			buf[i] = k;
		if (ckpt_variable_assign(counter, &k, sizeof(k)) < 0 || ckpt_variable_assign(vec, buf, sizeof(buf)) < 0)
			_exit(13);
		msg st = { 1, k };
		if (write(fd, &st, sizeof(st)) != (ssize_t)sizeof(st))
			_exit(14);
		if (ckpt_status_of(ckpt_manager_save(m)) < 0)
			_exit(15);
		msg done = { 2, k };
		if (write(fd, &done, sizeof(done)) != (ssize_t)sizeof(done))
			_exit(16);
	}
}

/* Read one int64 tensor entry by key. */
static int read_i64(ckpt_reader *r, const char *key, int64_t *out, size_t n)
{
	size_t i;
	if (ckpt_reader_find(&i, r, key) < 0)
		return -1;
	if (ckpt_reader_var(r, i)->nbytes != n * sizeof(int64_t))
		return -1;
	return ckpt_reader_read_into(r, i, out, n * sizeof(int64_t));
}

Test(kill, manager_survives_sigkill_at_random_moments, .timeout = 180)
{
	char *tmp = ts_tmpdir();
	char *dir = ts_join(tmp, "run");
	unsigned seed = 12345u;
	int64_t next = 0, last_done = -1, max_started = -1;
	long kills = 0, fresh = 0, fell_back = 0, mid_save = 0;
	double t0 = rel_now();
	/* how long one save takes here (ASan, load): kill moments are spread over a few saves */
	double t_save = 0.002;
	useconds_t span = 15000;
	int calibrated = 0;
	/* a fixed number of kills (not "for a second"): the same sample size on any machine */
	while (kills < KILLS) {
		int fds[2];
		cr_assert_eq(pipe(fds), 0);
		fflush(NULL);
		pid_t pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			close(fds[0]);
			saver(dir, next, fds[1]);
		}
		close(fds[1]);
		/* wait until the saver is set up and its first save started, so setup time (ASan, load) is not counted */
		msg first = { 0, 0 };
		int64_t last_kind = 0;
		if (read(fds[0], &first, sizeof(first)) == (ssize_t)sizeof(first)) {
			last_kind = first.kind;
			if (first.k > max_started)
				max_started = first.k;
		}
		if (!calibrated) {
			/* first round: let one save complete and time it */
			double ts = rel_now();
			msg d = { 0, 0 };
			while (read(fds[0], &d, sizeof(d)) == (ssize_t)sizeof(d) && d.kind != 2)
				;
			if (d.kind == 2 && d.k > last_done)
				last_done = d.k;
			t_save = rel_now() - ts;
			span = (useconds_t)(4e6 * t_save) + 2000;
			calibrated = 1;
			cr_log_info("kill: one save takes %.1f ms; kills spread over %.1f ms", t_save * 1e3, span / 1e3);
		}
		/* a random moment: inside the next few saves */
		seed = seed * 1103515245u + 12345u;
		useconds_t delay = (seed >> 8) % span;
		usleep(delay);
		kill(pid, SIGKILL);
		int st = 0;
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the saver exited by itself with status %d",
			WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		kills++;
		msg mm = { 0, 0 };
		while (read(fds[0], &mm, sizeof(mm)) == (ssize_t)sizeof(mm)) {
			last_kind = mm.kind;
			if (mm.kind == 1 && mm.k > max_started)
				max_started = mm.k;
			if (mm.kind == 2 && mm.k > last_done)
				last_done = mm.k;
		}
		close(fds[0]);
		if (last_kind == 1)
			mid_save++;
		next = max_started + 1;

		/* what a restarted trainer would see */
		ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
		mo.warn = quiet;
		ckpt_manager *m;
		cr_assert_eq(ckpt_manager_new_ext(&m, NULL, dir, 0, &mo), CKPT_OK, "kill %ld: %s", kills,
			ckpt_error_last()->message);
		const char *path = NULL;
		int rc = ckpt_status_of(path = ckpt_manager_latest_valid(m));
		if (rc == CKPT_ENOTFOUND) {
			cr_assert_eq(last_done, -1, "kill %ld: no valid checkpoint although save %lld completed", kills,
				(long long)last_done);
			fresh++;
			ckpt_manager_free(m);
			continue;
		}
		cr_assert_eq(rc, CKPT_OK, "kill %ld: %s", kills, ckpt_error_last()->message);
		const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		cr_assert(strncmp(base, "ckpt-", 5) == 0 && !strstr(base, "temp"),
			"kill %ld: latest valid checkpoint is not a committed ckpt-N: %s", kills, path);
		const char *latest = ckpt_manager_latest(m);
		if (latest && strcmp(latest, path) != 0)
			fell_back++;
		ckpt_reader *r;
		cr_assert_eq(ckpt_reader_open(&r, path, NULL), CKPT_OK, "kill %ld: %s does not load: %s", kills, path,
			ckpt_error_last()->message);
		int64_t c = -1, v[VEC];
		cr_assert_eq(read_i64(r, "counter/.ATTRIBUTES/VARIABLE_VALUE", &c, 1), CKPT_OK, "kill %ld: %s", kills,
			ckpt_error_last()->message);
		cr_assert_eq(read_i64(r, "vec/.ATTRIBUTES/VARIABLE_VALUE", v, VEC), CKPT_OK, "kill %ld: %s", kills,
			ckpt_error_last()->message);
		for (int i = 0; i < VEC; i++)
			cr_assert_eq(v[i], c, "kill %ld: %s mixes states: counter %lld, vec[%d] %lld", kills, path,
				(long long)c, i, (long long)v[i]);
		cr_assert(c >= last_done && c <= max_started,
			"kill %ld: %s holds state %lld; saves completed up to %lld, started up to %lld", kills, path,
			(long long)c, (long long)last_done, (long long)max_started);
		ckpt_reader_free(r);
		ckpt_manager_free(m);
	}
	cr_log_info("kill: %ld SIGKILLs in %.1f s (%ld inside a save), %lld states started, %lld completed, %ld times "
		"nothing saved yet, %ld times the latest recorded checkpoint was skipped", kills, rel_now() - t0, mid_save,
		(long long)max_started + 1, (long long)last_done + 1, fresh, fell_back);
	cr_assert_gt(mid_save, 20, "too few kills landed inside a save");
	cr_assert_eq(kills, KILLS);
	cr_assert_gt(last_done, 10, "the saver never got far: kills too early to test anything");
	ts_rmtree(tmp);
	free(dir);
	free(tmp);
}

static char warned[1024];

static void keep_warning(const char *m, void *ctx)
{
	(void)ctx;
	snprintf(warned, sizeof(warned), "%s", m);
}

/* The states a kill can leave, made by hand: the manager falls back with a warning. */
Test(kill, incomplete_latest_checkpoint_is_skipped_with_a_warning)
{
	ckpt_vfs *vfs;
	cr_assert_eq(ckpt_vfs_memory_new(&vfs), CKPT_OK);
	ckpt_checkpoint_options co = CKPT_CHECKPOINT_OPTIONS_INIT;
	co.vfs = vfs;
	co.no_fsync = 1;
	co.warn = quiet;
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &co), CKPT_OK);
	ckpt_variable *v;
	ckpt_shape scalar = { 0 };
	cr_assert_eq(ckpt_status_of(v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "counter", "counter", CKPT_DT_INT64, &scalar, NULL)),
		     CKPT_OK);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = vfs;
	mo.no_fsync = 1;
	mo.warn = quiet;
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new_ext(&m, ck, "run", 0, &mo), CKPT_OK);
	for (int64_t k = 1; k <= 3; k++) {
		cr_assert_eq(ckpt_variable_assign(v, &k, sizeof(k)), CKPT_OK);
		cr_assert_eq(ckpt_status_of(ckpt_manager_save(m)), CKPT_OK, "%s", ckpt_error_last()->message);
	}
	ckpt_manager_free(m);
	ckpt_checkpoint_free(ck);
	const char *p;
	/* 1: the newest data shard is gone; 2: the newest index is cut short */
	for (int variant = 0; variant < 2; variant++) {
		if (variant == 0) {
			cr_assert_eq(ckpt_vfs_remove(vfs, "run/ckpt-3.data-00000-of-00001"), CKPT_OK);
		} else {
			const void *ix;
			size_t n;
			cr_assert_eq(ckpt_status_of(ix = ckpt_vfs_memory_get(&n, vfs, "run/ckpt-2.index")), CKPT_OK);
			void *copy = malloc(n);
			memcpy(copy, ix, n);
			cr_assert_eq(ckpt_vfs_memory_put(vfs, "run/ckpt-2.index", copy, n / 2), CKPT_OK);
			free(copy);
		}
		mo.warn = keep_warning;
		warned[0] = 0;
		cr_assert_eq(ckpt_manager_new_ext(&m, NULL, "run", 0, &mo), CKPT_OK);
		cr_assert_eq(ckpt_status_of(p = ckpt_manager_latest_valid(m)), CKPT_OK, "%s",
			     ckpt_error_last()->message);
		cr_assert_not_null(strstr(p, variant == 0 ? "ckpt-2" : "ckpt-1"), "fell back to %s", p);
		cr_assert_not_null(strstr(warned, variant == 0 ? "ckpt-3" : "ckpt-2"), "warning: \"%s\"", warned);
		ckpt_manager_free(m);
	}
	ckpt_vfs_free(vfs);
}

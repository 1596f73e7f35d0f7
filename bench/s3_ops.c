/*
 * s3_ops — a trainer's checkpoint operations on S3, one at a time, for
 * bench/s3_requests.py, which counts the requests of each in the fault
 * proxy's log (tests/s3/fault_proxy.c) between them.
 *
 * usage: s3_ops s3://BUCKET/DIR MIB
 * A state of one float32 variable of MIB MiB (and a step counter) saved by a
 * manager that keeps 2 checkpoints. Before each operation it prints its name
 * on stdout and waits for a line on stdin (the driver reads the log's length
 * meanwhile), then "end" after the last:
 *   start      ckpt_manager_new on an empty directory (the one-writer lock,
 *              the state file's HEAD, the directory's listing)
 *   save-1     the first save
 *   save-2     a save, nothing to delete
 *   save-3     a save after which ckpt-1 goes (max_to_keep 2): retention
 *   close      ckpt_manager_free (the lock released)
 *   list       ckpt_manager_new on the directory and ckpt_manager_latest:
 *              which checkpoints are there, which is the latest
 *   restore    ckpt_manager_restore_latest
 *   close-2    ckpt_manager_free
 */
#include <ckpt/ckpt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what)
{
	fprintf(stderr, "s3_ops: %s: %s\n", what, ckpt_error_last()->message);
	exit(1);
}

/* Tell the driver what comes next and wait until it has counted. */
static void phase(const char *name)
{
	char line[64];
	printf("%s\n", name);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		exit(1);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: s3_ops s3://BUCKET/DIR MIB\n");
		return 2;
	}
	const char *dir = argv[1];
	int64_t n = (int64_t)strtol(argv[2], NULL, 10) << 18; /* float32s */
	ckpt_checkpoint *ck;
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	if (ckpt_checkpoint_new(&ck, &o) < 0)
		die("checkpoint");
	ckpt_shape sh, sc = { 0 };
	if (ckpt_shape_make(&sh, 1, &n) < 0)
		die("shape");
	ckpt_variable *w = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "w", "w", CKPT_DT_FLOAT, &sh, NULL);
	ckpt_variable *step = ckpt_object_add_variable(ckpt_checkpoint_root(ck), "step", "step", CKPT_DT_INT64, &sc, NULL);
	if (!w || !step)
		die("variables");
	float *vals = malloc((size_t)n * sizeof(float));
	if (!vals)
		return 1;
	for (int64_t i = 0; i < n; i++)
		vals[i] = (float)(i % 1000) * 0.5f;

	ckpt_manager *m;
	phase("start");
	if (ckpt_manager_new(&m, ck, dir, 2) < 0)
		die("manager");
	for (int64_t s = 1; s <= 3; s++) {
		char name[32];
		snprintf(name, sizeof(name), "save-%lld", (long long)s);
		vals[0] = (float)s;
		if (ckpt_variable_assign(w, vals, (size_t)n * sizeof(float)) < 0 ||
			ckpt_variable_assign(step, &s, sizeof(s)) < 0)
			die("assign");
		phase(name);
		if (!ckpt_manager_save(m))
			die(name);
	}
	phase("close");
	ckpt_manager_free(m);

	phase("list");
	if (ckpt_manager_new(&m, ck, dir, 2) < 0)
		die("manager");
	const char *latest = ckpt_manager_latest(m);
	if (!latest || !strstr(latest, "ckpt-3") || ckpt_manager_num_checkpoints(m) != 2) {
		fprintf(stderr, "s3_ops: the directory lists %zu checkpoints, latest %s\n", ckpt_manager_num_checkpoints(m),
			latest ? latest : "(none)");
		return 1;
	}
	phase("restore");
	ckpt_restore_status *st = NULL;
	if (ckpt_status_of(ckpt_manager_restore_latest(&st, m)) < 0 || !st)
		die("restore");
	ckpt_restore_status_free(st);
	int64_t got = 0;
	if (ckpt_variable_read(step, &got, sizeof(got)) < 0 || got != 3) {
		fprintf(stderr, "s3_ops: restored step %lld, expected 3\n", (long long)got);
		return 1;
	}
	phase("close-2");
	ckpt_manager_free(m);
	phase("end");
	ckpt_checkpoint_free(ck);
	free(vals);
	return 0;
}

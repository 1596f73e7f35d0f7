/*
 * Host memory of a save and a restore of mirrored replicas in device memory,
 * by state size (README section 10). The guarded test provider
 * (tests/support/guarded_provider.c) stands for a GPU; its pinned-memory
 * peak and the growth of the process's resident peak (VmHWM, reset before
 * each step; the device buffers are touched before) are what a trainer's
 * host pays. 2 replicas on 2 devices, 8 equal float variables.
 *
 *     device_memory MIB      prints one table row
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ckpt/ckpt.h>
#include "guarded_provider.h"

#define NVARS 8

/* A "Field:   N kB" line of /proc/self/status, in KiB. */
static long status_kib(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, strlen(field)))
			v = atol(line + strlen(field));
	if (f)
		fclose(f);
	return v;
}

/* Make VmHWM the current resident size again. */
static void reset_peak(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY);
	if (fd < 0 || write(fd, "5", 1) != 1) {
		fprintf(stderr, "device_memory: cannot reset the resident peak (/proc/self/clear_refs)\n");
		exit(1);
	}
	close(fd);
}

static void check(int rc, const char *what)
{
	if (rc < 0) {
		fprintf(stderr, "device_memory: %s: %s\n", what, ckpt_error_last()->message);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc < 2 || atol(argv[1]) < 1) {
		fprintf(stderr, "usage: device_memory MIB\n");
		return 2;
	}
	long mib = atol(argv[1]);
	size_t each = ((size_t)mib << 20) / NVARS;
	ts_guarded *g = ts_guarded_new(2, 0);
	int devices[2] = { 0, 1 };
	ckpt_strategy *s;
	ckpt_checkpoint *ck;
	check(ckpt_strategy_mirrored_on(&s, ts_guarded_provider(g), devices, 2), "strategy");
	check(ckpt_checkpoint_new(&ck, NULL), "checkpoint");
	check(ckpt_scope_enter(s), "scope");
	float *init = malloc(each);
	if (!init)
		return 1;
	for (size_t i = 0; i < each / sizeof(float); i++)
		init[i] = (float)i;
	for (int k = 0; k < NVARS; k++) {
		char name[16];
		snprintf(name, sizeof(name), "w%d", k);
		ckpt_shape shape = { 1, { (int64_t)(each / sizeof(float)) } };
		ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
		o.initial_value = init; /* touches every replica's device pages now */
		ckpt_variable *v;
		check(ckpt_status_of(v = ckpt_object_add_variable(ckpt_checkpoint_root(ck), name, name, CKPT_DT_FLOAT, &shape, &o)),
			"variable");
	}
	ckpt_scope_exit(s);
	free(init);

	char path[64];
	snprintf(path, sizeof(path), "/tmp/device_memory-%ld-%d", mib, (int)getpid());
	long base = status_kib("VmRSS:");
	reset_peak();
	ts_guarded_reset_peak(g);
	check(ckpt_checkpoint_write(ck, path), "save");
	long save_rss = status_kib("VmHWM:") - base;
	uint64_t save_pinned = ts_guarded_get_stats(g).pinned_peak;

	base = status_kib("VmRSS:");
	reset_peak();
	ts_guarded_reset_peak(g);
	check(ckpt_checkpoint_restore(NULL, ck, path), "restore");
	long restore_rss = status_kib("VmHWM:") - base;
	uint64_t restore_pinned = ts_guarded_get_stats(g).pinned_peak;

	printf("| %ld MiB | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB |\n", mib, save_pinned / 1048576.0,
		save_rss / 1024.0, restore_pinned / 1048576.0, restore_rss / 1024.0);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -f %s.index %s.data-*", path, path);
	if (system(cmd) != 0)
		fprintf(stderr, "device_memory: could not remove %s\n", path);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	ts_guarded_free(g);
	return 0;
}

/*
 * `ckpt restore PATH --strategy mirrored|default [--replicas N]
 *   [--device cpu|cuda[:0,1,...]] [--expect-partial] [--save OUT] [--json]`
 *
 * Loads PATH inside a scope of the strategy (ckpt_checkpoint_load creates
 * every variable through the current strategy), then checks each variable
 * against the file: every replica copy of a mirrored or plain variable
 * bit-identical to the stored value; for sync-on-read variables the
 * cross-replica aggregate. Reports kind and replica count per variable,
 * unmatched entries, elapsed time and throughput. --save OUT writes the
 * restored state back as a TensorBundle (a round trip through the
 * replicas). Exit 0 on success, 1 on any mismatch or error, and on
 * unmatched entries unless --expect-partial.
 *
 * --device cuda puts the mirrored replicas in GPU memory through the CUDA
 * provider (cli_device.c loads it), replica r on the r-th listed device
 * (round robin; `cuda` alone: every device), and checks each copy by
 * copying it back device-to-host through pinned memory.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli.h"

static const cli_opt restore_opts[] = {
	{ CLI_OPT_ARG, "PATH", NULL, 1, "checkpoint of any supported format" },
	{ CLI_OPT_VALUE, "strategy", "NAME", 1, "mirrored or default: the scope the variables are created in" },
	{ CLI_OPT_VALUE, "replicas", "N", 0, "replicas of the mirrored strategy (default 2)" },
	{ CLI_OPT_VALUE, "device", "cpu|cuda[:ID,...]", 0,
		"where the mirrored replicas live (default cpu); cuda loads the CUDA provider library ckpt_cuda" },
	{ CLI_OPT_SWITCH, "expect-partial", NULL, 0, "entries that cannot be placed are not an error" },
	{ CLI_OPT_VALUE, "save", "OUT", 0, "write the restored state to the bundle prefix OUT" },
	{ CLI_OPT_SWITCH, "json", NULL, 0, "print machine-readable JSON" },
	{ CLI_OPT_VALUE, "sync-on-read", "PATTERN=AGG[,...]", 0,
		"create matching variables sync-on-read with AGG sum, mean or first (metrics)" },
	{ CLI_OPT_END, NULL, NULL, 0, NULL }
};

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Result of checking one restored variable against the file. */
typedef struct var_check {
	const ckpt_tracked_variable *tv;
	size_t idx;        /* its entry in the reader */
	uint32_t crc;      /* crc32c of the value (the file's, when it stores one) */
	int have_crc;
	int ok;
	int bad_replica;   /* fixed-size check: first replica whose crc32c differs, -1 none */
	const char *why;
} var_check;

/*
 * Slow path, for values the copies cannot be checked against by checksum
 * alone: strings (each replica holds its own element array) and sync-on-read
 * variables (per-replica partial values; the aggregate is what was saved).
 * Reads the stored tensor and compares whole values.
 */
static int check_by_value(const ckpt_variable *v, const ckpt_tensor *t, uint32_t *crc, const char **why)
{
	uint64_t nbytes = ckpt_variable_nbytes(v);
	int r, n = ckpt_variable_num_replicas(v);
	void *buf;

	if (t->dtype == CKPT_DT_STRING) {
		for (r = 0; r < n; r++) {
			ckpt_tensor h;
			h.dtype = CKPT_DT_STRING;
			h.shape = t->shape;
			h.nbytes = nbytes;
			h.data = (void *)ckpt_variable_replica_data(v, r);
			h.owns_data = 0;
			if (!h.data && ckpt_tensor_num_elements(t) > 0) {
				*why = "a replica copy is missing";
				return 0;
			}
			if (!ckpt_tensor_equal(&h, t)) {
				*why = r ? "a replica copy differs from the file" : "restored value differs from the file";
				return 0;
			}
		}
		*crc = ckpt_tensor_crc32c(t); /* of the stored element bytes */
		return 1;
	}
	if (nbytes != t->nbytes) {
		*why = "byte size differs from the file";
		return 0;
	}
	buf = malloc(nbytes ? nbytes : 1);
	if (!buf) {
		*why = "out of memory";
		return 0;
	}
	if (ckpt_variable_read(v, buf, nbytes) != CKPT_OK) {
		free(buf);
		*why = ckpt_error_last()->message;
		return 0;
	}
	if (nbytes && memcmp(buf, t->data, nbytes) != 0) {
		free(buf);
		*why = "restored value differs from the file";
		return 0;
	}
	free(buf);
	*crc = ckpt_tensor_crc32c(t);
	return 1;
}

/* A fixed-size, not sync-on-read variable: its copies are checked by crc32c in place. */
static int by_checksum(const ckpt_variable *v)
{
	return ckpt_variable_dtype(v) != CKPT_DT_STRING && ckpt_variable_kind(v) != CKPT_VAR_SYNC_ON_READ;
}

/* The checksum path's replicas, in the library (in parallel; device copies through their provider). */
static int check_replicas(var_check *checks, size_t n, size_t njobs)
{
	ckpt_replica_check *rc = malloc((njobs ? njobs : 1) * sizeof(*rc));
	size_t i, m = 0;
	int err;

	if (!rc)
		return CKPT_ENOMEM;
	for (i = 0; i < n; i++) {
		if (checks[i].why || !by_checksum(checks[i].tv->variable))
			continue;
		rc[m].variable = checks[i].tv->variable;
		rc[m].expected_crc32c = checks[i].crc;
		rc[m].bad_replica = -1;
		m++;
	}
	if ((err = ckpt_replica_check_crc32c(rc, m)) == CKPT_OK)
		for (i = 0, m = 0; i < n; i++) {
			if (checks[i].why || !by_checksum(checks[i].tv->variable))
				continue;
			checks[i].ok = 1;
			checks[i].bad_replica = rc[m++].bad_replica;
		}
	free(rc);
	return err;
}

/*
 * Check every restored variable against the file without a second copy of
 * the state: each replica copy of a fixed-size variable is checksummed where
 * it lies (crc32c) and compared with the checksum the file stores (formats
 * without one: the crc32c of the stored value, read once), by
 * ckpt_replica_check_crc32c: in parallel on the host, through the provider
 * for device replicas.
 * Returns the number of failed variables; reports each.
 */
static size_t check_all(ckpt_reader *r, var_check *checks, size_t n, uint64_t *bytes)
{
	size_t i, bad = 0, njobs = 0;

	/* expected checksums, and the slow path, serially (reads are the reader's) */
	for (i = 0; i < n; i++) {
		var_check *c = &checks[i];
		const ckpt_variable *v = c->tv->variable;
		const ckpt_var_info *info = ckpt_reader_var(r, c->idx);
		ckpt_tensor *t = NULL;

		c->bad_replica = -1;
		*bytes += info->nbytes;
		if (ckpt_variable_dtype(v) != info->dtype || !ckpt_shape_equal(ckpt_variable_shape(v), &info->shape)) {
			c->why = "dtype or shape differs from the file";
			continue;
		}
		if (by_checksum(v) && ckpt_variable_nbytes(v) != info->nbytes) {
			c->why = "byte size differs from the file";
			continue;
		}
		if (by_checksum(v) && info->has_crc32c) {
			c->crc = info->crc32c;
			c->have_crc = 1;
			njobs += (size_t)ckpt_variable_num_replicas(v);
			continue;
		}
		if (ckpt_reader_read(r, c->idx, &t) != CKPT_OK) {
			c->why = ckpt_error_last()->message;
			continue;
		}
		if (by_checksum(v)) {
			c->crc = ckpt_crc32c_extend(0, t->data, t->nbytes);
			c->have_crc = 1;
			njobs += (size_t)ckpt_variable_num_replicas(v);
		} else {
			c->ok = check_by_value(v, t, &c->crc, &c->why);
			c->have_crc = c->ok;
		}
		ckpt_tensor_free(t);
	}

	if (check_replicas(checks, n, njobs) != CKPT_OK)
		for (i = 0; i < n; i++)
			if (!checks[i].why && !checks[i].ok)
				checks[i].why = "out of memory";

	for (i = 0; i < n; i++) {
		var_check *c = &checks[i];
		const ckpt_variable *v = c->tv->variable;
		if (c->bad_replica >= 0) {
			c->ok = 0;
			c->why = c->bad_replica ? "a replica copy differs from the file" : "restored value differs from the file";
		}
		if (c->ok)
			continue;
		c->have_crc = 0;
		cli_report(ckpt_reader_path(r), c->tv->source_key, -1, "%s (%s, %d replicas%s)",
			c->why ? c->why : "mismatch", ckpt_var_kind_name(ckpt_variable_kind(v)),
			ckpt_variable_num_replicas(v), c->bad_replica > 0 ? ", first differing replica below" : "");
		if (c->bad_replica > 0)
			cli_report(ckpt_reader_path(r), c->tv->source_key, -1, "replica %d differs", c->bad_replica);
		bad++;
	}
	return bad;
}

/* Library warnings in the tool's error-line shape. */
static void warn_line(const char *message, void *ctx)
{
	fprintf(stderr, "ckpt: %s: ", cli_vis((const char *)ctx));
	fprintf(stderr, "warning: %s\n", cli_vis(message));
}

static int parse_replicas(const cli_cmd *cmd, const char *s, int *out)
{
	char *end = NULL;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < 1 || v > 4096)
		return cli_usage_error(cmd, "--replicas wants an integer from 1 to 4096, got '%s'", s);
	*out = (int)v;
	return CLI_EXIT_OK;
}

static int cmd_restore(const cli_cmd *cmd, int argc, char **argv)
{
	cli_args args;
	const char *path, *strat_name, *s, *save;
	int json, expect_partial, replicas = 2, mirrored, rc, bad = 0, entered = 0;
	int on_cuda = 0, devices[CLI_MAX_DEVICES], ndevices = 0;
	cli_device *dev = NULL;
	ckpt_strategy *strat = NULL;
	ckpt_checkpoint *ck = NULL;
	ckpt_restore_status *st = NULL;
	ckpt_checkpoint_options co = CKPT_CHECKPOINT_OPTIONS_INIT;
	cli_sync_rules rules;
	ckpt_tracked_list *list = NULL;
	ckpt_reader *r = NULL;
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	cli_progress *prog = NULL;
	var_check *checks = NULL;
	size_t i, n = 0, nunmatched = 0;
	uint64_t bytes = 0;
	double t0, seconds;

	rc = cli_parse(cmd, argc, argv, &args);
	if (rc == CLI_PARSE_HELP)
		return CLI_EXIT_OK;
	if (rc != CLI_EXIT_OK)
		return rc;
	path = cli_get(cmd, &args, "PATH");
	strat_name = cli_get(cmd, &args, "strategy");
	json = cli_get(cmd, &args, "json") != NULL;
	expect_partial = cli_get(cmd, &args, "expect-partial") != NULL;
	save = cli_get(cmd, &args, "save");
	if (strcmp(strat_name, "mirrored") == 0)
		mirrored = 1;
	else if (strcmp(strat_name, "default") == 0)
		mirrored = 0;
	else
		return cli_usage_error(cmd, "--strategy wants mirrored or default, got '%s'", strat_name);
	if ((s = cli_get(cmd, &args, "replicas")) && parse_replicas(cmd, s, &replicas) != CLI_EXIT_OK)
		return CLI_EXIT_USAGE;
	if (cli_device_parse(cmd, cli_get(cmd, &args, "device"), &on_cuda, devices, &ndevices) != CLI_EXIT_OK)
		return CLI_EXIT_USAGE;
	if (on_cuda && !mirrored)
		return cli_usage_error(cmd, "--device cuda needs --strategy mirrored");
	if (!mirrored) {
		if (s && replicas != 1)
			return cli_usage_error(cmd, "the default strategy has exactly 1 replica");
		replicas = 1;
	}

	if (cli_parse_sync_rules(cmd, cli_get(cmd, &args, "sync-on-read"), &rules) != CLI_EXIT_OK)
		return CLI_EXIT_USAGE;
	co.sync_rules = rules.rules; /* copied by ckpt_checkpoint_load */
	co.num_sync_rules = rules.n;
	co.warn = warn_line;
	co.warn_ctx = (void *)path;
	rc = CLI_EXIT_ERROR;
	if (on_cuda) {
		int *rep_dev = NULL, k;
		const ckpt_memory_provider *t;
		ckpt_memory_caps caps;
		if (cli_device_open(&dev) != CLI_EXIT_OK)
			goto done;
		t = cli_device_table(dev);
		t->caps(t->ctx, &caps);
		if (!ndevices)
			for (; ndevices < caps.num_devices && ndevices < CLI_MAX_DEVICES; ndevices++)
				devices[ndevices] = ndevices;
		if (!(rep_dev = malloc((size_t)replicas * sizeof(*rep_dev)))) {
			cli_report(path, NULL, -1, "out of memory");
			goto done;
		}
		for (k = 0; k < replicas; k++)
			rep_dev[k] = devices[k % ndevices];
		k = ckpt_strategy_mirrored_on(&strat, t, rep_dev, replicas);
		free(rep_dev);
		if (k != CKPT_OK) {
			cli_report_last(path, NULL);
			goto done;
		}
		if (!json)
			printf("device: %s\n", cli_device_describe(dev));
	} else if (mirrored && ckpt_strategy_mirrored_new(&strat, replicas) != CKPT_OK) {
		cli_report_last(path, NULL);
		goto done;
	}
	if (mirrored) {
		if (ckpt_scope_enter(strat) != CKPT_OK) {
			cli_report_last(path, NULL);
			goto done;
		}
		entered = 1;
	}
	/* the reader the check uses, opened first: its sizes are what 100 % means */
	cli_progress_start(&prog, "restore", 0, json);
	oo.vfs = cli_progress_vfs(prog);
	co.vfs = oo.vfs;
	if (ckpt_reader_open(&r, path, &oo) != CKPT_OK) {
		cli_report_last(path, NULL);
		goto done;
	}
	/* the load creates its variables, so it reads every value once (no verification pass first) */
	cli_progress_set_total(prog, cli_reader_bytes(r) * (save ? 2u : 1u));
	t0 = now_seconds();
	rc = ckpt_checkpoint_load(&ck, &st, path, &co);
	cli_sync_rules_free(&rules);
	if (rc != CKPT_OK) {
		rc = CLI_EXIT_ERROR;
		cli_report_last(path, NULL);
		goto done;
	}
	rc = CLI_EXIT_ERROR;
	seconds = now_seconds() - t0;
	if (entered) {
		ckpt_scope_exit(strat);
		entered = 0;
	}
	nunmatched = st ? ckpt_restore_status_unmatched_count(st) : 0;
	/* unmatched entries are reported below, in the tool's own terms */
	if (st)
		ckpt_restore_status_expect_partial(st);

	/* check every variable against the file */
	if (ckpt_checkpoint_variables(&list, ck) != CKPT_OK) {
		cli_report_last(path, NULL);
		goto done;
	}
	n = ckpt_tracked_list_count(list);
	checks = calloc(n ? n : 1, sizeof(*checks));
	if (!checks) {
		cli_report(path, NULL, -1, "out of memory");
		goto done;
	}
	for (i = 0; i < n; i++) {
		const ckpt_tracked_variable *tv = ckpt_tracked_list_get(list, i);

		checks[i].tv = tv;
		if (!tv->source_key) {
			/* created by the load without a stored value (for example a fresh save_counter) */
			checks[i].ok = 1;
			continue;
		}
		if (ckpt_reader_find(r, tv->source_key, &checks[i].idx) != CKPT_OK) {
			cli_report_last(ckpt_reader_path(r), tv->source_key);
			checks[i].why = "not in the file";
			bad++;
			continue;
		}
	}
	{
		/* entries already reported as missing are not checked twice */
		size_t k, m = 0;
		var_check *to_check = calloc(n ? n : 1, sizeof(*to_check));
		if (!to_check) {
			cli_report(path, NULL, -1, "out of memory");
			goto done;
		}
		for (k = 0; k < n; k++)
			if (checks[k].tv->source_key && !checks[k].why)
				to_check[m++] = checks[k];
		bad += check_all(r, to_check, m, &bytes);
		for (k = 0, m = 0; k < n; k++)
			if (checks[k].tv->source_key && !checks[k].why)
				checks[k] = to_check[m++];
		free(to_check);
	}
	if (save && ckpt_checkpoint_write(ck, save) != CKPT_OK) {
		cli_report_last(save, NULL);
		bad++;
	}
	cli_progress_done(prog);

	if (json) {
		fputs("{\"path\": ", stdout);
		jout_cstring(stdout, ckpt_reader_path(r));
		fputs(", \"strategy\": ", stdout);
		jout_cstring(stdout, mirrored ? "mirrored" : "default");
		fputs(", \"device\": ", stdout);
		jout_cstring(stdout, on_cuda ? "cuda" : "cpu");
		printf(", \"replicas\": %d, \"variables\": [", replicas);
		for (i = 0; i < n; i++) {
			const ckpt_tracked_variable *tv = checks[i].tv;
			fputs(i ? ", {\"name\": " : "{\"name\": ", stdout);
			jout_cstring(stdout, tv->source_key ? tv->source_key : tv->key);
			fputs(", \"kind\": ", stdout);
			jout_cstring(stdout, ckpt_var_kind_name(ckpt_variable_kind(tv->variable)));
			printf(", \"replicas\": %d, \"dtype\": ", ckpt_variable_num_replicas(tv->variable));
			jout_cstring(stdout, ckpt_dtype_name(ckpt_variable_dtype(tv->variable)));
			fputs(", \"shape\": ", stdout);
			jout_shape(stdout, ckpt_variable_shape(tv->variable));
			fputs(", \"crc32c\": ", stdout);
			if (checks[i].have_crc)
				jout_crc32(stdout, checks[i].crc);
			else
				fputs("null", stdout);
			fputc('}', stdout);
		}
		fputs("], \"unmatched\": [", stdout);
		for (i = 0; i < nunmatched; i++) {
			fputs(i ? ", " : "", stdout);
			jout_cstring(stdout, ckpt_restore_status_unmatched(st, i));
		}
		fputs("], \"seconds\": ", stdout);
		jout_double(stdout, (double)(int64_t)(seconds * 1e6 + 0.5) / 1e6); /* microseconds */
		fputs("}\n", stdout);
	} else {
		size_t w = 4;
		for (i = 0; i < n; i++) {
			const ckpt_tracked_variable *tv = checks[i].tv;
			size_t l = strlen(tv->source_key ? tv->source_key : tv->key);
			if (l > w)
				w = l;
		}
		if (w > 100)
			w = 100;
		printf("restored %s under %s (%d replica%s)\n\n", cli_vis(ckpt_reader_path(r)),
			mirrored ? "MirroredStrategy" : "the default strategy", replicas, replicas == 1 ? "" : "s");
		printf("%-*s  %-12s %8s  %-9s %-16s %-10s %s\n", (int)w, "NAME", "KIND", "REPLICAS", "DTYPE", "SHAPE",
			"CRC32C", "CHECK");
		for (i = 0; i < n; i++) {
			const ckpt_tracked_variable *tv = checks[i].tv;
			char shape[256], crc[16];
			ckpt_shape_format(ckpt_variable_shape(tv->variable), shape, sizeof(shape));
			if (checks[i].have_crc)
				snprintf(crc, sizeof(crc), "0x%08" PRIx32, checks[i].crc);
			else
				snprintf(crc, sizeof(crc), "-");
			printf("%-*s  %-12s %8d  %-9s %-16s %-10s %s\n", (int)w, cli_vis(tv->source_key ? tv->source_key : tv->key),
				ckpt_var_kind_name(ckpt_variable_kind(tv->variable)), ckpt_variable_num_replicas(tv->variable),
				ckpt_dtype_name(ckpt_variable_dtype(tv->variable)), shape, crc,
				!tv->source_key ? "created (no stored value)" :
				!checks[i].ok ? "MISMATCH" :
				ckpt_variable_kind(tv->variable) == CKPT_VAR_SYNC_ON_READ ? "aggregate = file" :
				"all replicas = file");
		}
		for (i = 0; i < nunmatched; i++)
			printf("unmatched: %s\n", cli_vis(ckpt_restore_status_unmatched(st, i)));
		printf("\n%zu variables, %" PRIu64 " bytes in %.3f s (%.1f MB/s); %zu unmatched%s\n", n, bytes, seconds,
			seconds > 0 ? (double)bytes / seconds / 1e6 : 0.0, nunmatched,
			nunmatched && expect_partial ? " (expected: --expect-partial)" : "");
		if (save && !bad)
			printf("saved to %s\n", cli_vis(save));
	}
	if (nunmatched && !expect_partial)
		cli_report(path, NULL, -1, "%zu stored entr%s could not be placed (use --expect-partial to accept)",
			nunmatched, nunmatched == 1 ? "y" : "ies");
	rc = (bad || (nunmatched && !expect_partial)) ? CLI_EXIT_ERROR : CLI_EXIT_OK;
done:
	cli_sync_rules_free(&rules);
	fflush(stdout);
	if (entered)
		ckpt_scope_exit(strat);
	free(checks);
	ckpt_tracked_list_free(list);
	ckpt_reader_free(r);
	ckpt_restore_status_free(st);
	ckpt_checkpoint_free(ck);
	if (strat)
		ckpt_strategy_free(strat);
	cli_device_close(dev); /* after the strategy: its queues are the provider's */
	cli_progress_free(prog);
	return rc;
}

const cli_cmd cli_cmd_restore = {
	"restore", cmd_restore, "Load a checkpoint under a strategy and check every replica",
	restore_opts,
	"Creates every variable of PATH inside a scope of the strategy (mirrored:\n"
	"one copy per replica), checks that each copy equals the stored value\n"
	"bit for bit (sync-on-read metrics: their aggregate), and reports kind,\n"
	"replicas and crc32c per variable (TensorFlow's checksum, as\n"
	"`ckpt inspect --json` prints it). Each copy is checksummed in place\n"
	"against the file's stored crc32c (formats without one: the stored value's).\n"
	"Entries that cannot be placed make the exit status 1 unless\n"
	"--expect-partial. --save OUT writes the restored state as a TensorBundle.\n"
	"--device cuda[:ID,...] keeps the replicas in GPU memory (replica r on the\n"
	"r-th listed device, round robin) through the CUDA provider library\n"
	"ckpt_cuda, loaded at run time (CKPT_CUDA_LIBRARY names its file), and\n"
	"checks every copy through device-to-host copies."
};

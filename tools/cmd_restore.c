/*
 * `ckpt restore PATH --strategy mirrored|default [--replicas N]
 *   [--device cpu|cuda[:0,1,...]] [--expect-partial] [--save OUT] [--json] [--fallback]`
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
 *
 * --fallback takes PATH as a checkpoint manager's directory and loads the
 * newest of its checkpoints that verifies, warning with the path and the
 * reason for each newer one skipped (ckpt_manager_options.fallback, for a
 * tool that creates its variables from the file).
 *
 * --job JOB (and --tier-dir DIR) takes PATH as a manager's directory with a
 * memory tier, as ckpt_manager_restore_latest sees it: the job's newest
 * memory step when it is newer than every checkpoint PATH lists (nothing
 * is read from PATH then; `--json` says "tier": "memory"), else PATH's
 * newest checkpoint (ckpt_manager_load_latest).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ckpt/sys/error.h"
#include "cli.h"

/* The options of `ckpt restore`, filled by cli_parse through restore_opts[].field. */
typedef struct restore_args {
	const char *path;
	const char *strategy;
	const char *replicas;
	const char *device;
	int expect_partial;
	const char *save;
	int json;
	const char *sync_on_read;
	int fallback;
	const char *job;
	const char *tier_dir;
} restore_args;

static const cli_opt restore_opts[] = {
	{ CLI_OPT_ARG, "PATH", NULL, 1, "checkpoint of any supported format",
		CLI_FIELD(restore_args, path) },
	{ CLI_OPT_VALUE, "strategy", "NAME", 1, "mirrored or default: the scope the variables are created in",
		CLI_FIELD(restore_args, strategy) },
	{ CLI_OPT_VALUE, "replicas", "N", 0, "replicas of the mirrored strategy (default 2)",
		CLI_FIELD(restore_args, replicas) },
	{ CLI_OPT_VALUE, "device", "cpu|cuda[:ID,...]", 0,
		"where the mirrored replicas live (default cpu); cuda loads the CUDA provider library ckpt_cuda",
		CLI_FIELD(restore_args, device) },
	{ CLI_OPT_SWITCH, "expect-partial", NULL, 0, "entries that cannot be placed are not an error",
		CLI_FIELD(restore_args, expect_partial) },
	{ CLI_OPT_VALUE, "save", "OUT", 0, "write the restored state to the bundle prefix OUT",
		CLI_FIELD(restore_args, save) },
	{ CLI_OPT_SWITCH, "json", NULL, 0, "print machine-readable JSON",
		CLI_FIELD(restore_args, json) },
	{ CLI_OPT_VALUE, "sync-on-read", "PATTERN=AGG[,...]", 0,
		"create matching variables sync-on-read with AGG sum, mean or first (metrics)",
		CLI_FIELD(restore_args, sync_on_read) },
	{ CLI_OPT_SWITCH, "fallback", NULL, 0,
		"PATH is a manager's directory: load its newest checkpoint that verifies, warning about each one skipped",
		CLI_FIELD(restore_args, fallback) },
	{ CLI_OPT_VALUE, "job", "JOB", 0,
		"PATH is a manager's directory with a memory tier: restore job JOB's newest memory step when it is newer "
		"than PATH's newest checkpoint, else that checkpoint", CLI_FIELD(restore_args, job) },
	{ CLI_OPT_VALUE, "tier-dir", "DIR", 0,
		"with --job: the memory tier directory (default $CKPT_TIER_DIR, else /dev/shm/ckpt-<uid>; as `ckpt tier --dir`)",
		CLI_FIELD(restore_args, tier_dir) },
	{ CLI_OPT_END, NULL, NULL, 0, NULL, 0 }
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
	int copy0_verified; /* the load checked copy 0 against the file's crc32c: only the fanned-out copies are */
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
static int check_replicas(var_check *checks, size_t n)
{
	ckpt_replica_check *rc = malloc((n ? n : 1) * sizeof(*rc));
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
		rc[m].first_replica = checks[i].copy0_verified;
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
 * without one: the crc32c of the stored value, read once; formats with one:
 * host copy 0 was verified by the load itself and is skipped), by
 * ckpt_replica_check_crc32c: in parallel on the host, through the provider
 * for device replicas.
 * Returns the number of failed variables; reports each.
 */
static size_t check_all(ckpt_reader *r, var_check *checks, size_t n, int on_device, uint64_t *bytes)
{
	size_t i, bad = 0;

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
			/*
			 * ckpt_checkpoint_load verified this value against the same
			 * crc32c as it read it into copy 0 (host memory; nothing wrote
			 * it since): checksumming that copy again would be a second
			 * pass over the state that proves nothing new. Device copy 0 is
			 * checked: it got there by a copy after the verification.
			 */
			c->copy0_verified = !on_device;
			continue;
		}
		if (ckpt_reader_read(&t, r, c->idx) != CKPT_OK) {
			c->why = ckpt_error_last()->message;
			continue;
		}
		if (by_checksum(v)) {
			c->crc = ckpt_crc32c_extend(0, t->data, t->nbytes);
			c->have_crc = 1;
		} else {
			c->ok = check_by_value(v, t, &c->crc, &c->why);
			c->have_crc = c->ok;
		}
		ckpt_tensor_free(t);
	}

	if (check_replicas(checks, n) != CKPT_OK)
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

/* What the options ask for, checked. */
typedef struct restore_plan {
	const char *path, *save, *job, *tier_dir;
	int json, expect_partial, mirrored, replicas, fallback;
	int on_cuda, devices[CLI_MAX_DEVICES], ndevices;
	cli_sync_rules rules;
} restore_plan;

/* What the restore did and found; the printers render it. */
typedef struct restore_result {
	const restore_plan *plan;
	cli_device *dev;
	ckpt_strategy *strat;
	int entered;          /* inside the strategy's scope */
	cli_progress *prog;
	ckpt_reader *r;       /* the file, for the check */
	ckpt_checkpoint *ck;
	ckpt_restore_status *st;
	ckpt_tracked_list *list;
	var_check *checks;    /* one per restored variable */
	size_t n, nunmatched, bad;
	uint64_t bytes;
	double seconds;
} restore_result;

static int restore_parse(const cli_cmd *cmd, int argc, char **argv, restore_plan *p)
{
	restore_args args;
	int rc;

	memset(&args, 0, sizeof(args));
	memset(p, 0, sizeof(*p));
	p->replicas = 2;
	rc = cli_parse(cmd, argc, argv, &args);
	if (rc != CLI_EXIT_OK)
		return rc;
	p->path = args.path;
	p->json = args.json;
	p->expect_partial = args.expect_partial;
	p->save = args.save;
	p->fallback = args.fallback;
	p->job = args.job;
	p->tier_dir = args.tier_dir;
	if (p->tier_dir && !p->job)
		return cli_usage_error(cmd, "--tier-dir needs --job");
	if (p->job && p->fallback)
		return cli_usage_error(cmd, "--job and --fallback do not go together");
	if (strcmp(args.strategy, "mirrored") == 0)
		p->mirrored = 1;
	else if (strcmp(args.strategy, "default") != 0)
		return cli_usage_error(cmd, "--strategy wants mirrored or default, got '%s'", args.strategy);
	if (args.replicas && parse_replicas(cmd, args.replicas, &p->replicas) != CLI_EXIT_OK)
		return CLI_EXIT_USAGE;
	if (cli_device_parse(cmd, args.device, &p->on_cuda, p->devices, &p->ndevices) != CLI_EXIT_OK)
		return CLI_EXIT_USAGE;
	if (p->on_cuda && !p->mirrored)
		return cli_usage_error(cmd, "--device cuda needs --strategy mirrored");
	if (!p->mirrored) {
		if (args.replicas && p->replicas != 1)
			return cli_usage_error(cmd, "the default strategy has exactly 1 replica");
		p->replicas = 1;
	}
	return cli_parse_sync_rules(cmd, args.sync_on_read, &p->rules) != CLI_EXIT_OK ? CLI_EXIT_USAGE : CLI_EXIT_OK;
}

/* The mirrored strategy over the CUDA provider: replica r on the r-th listed device (round robin). */
static int make_cuda_strategy(restore_result *res)
{
	const restore_plan *p = res->plan;
	int *rep_dev, k, ndevices = p->ndevices, devices[CLI_MAX_DEVICES];
	const ckpt_memory_provider *t;
	ckpt_memory_caps caps;

	if (cli_device_open(&res->dev) != CLI_EXIT_OK)
		return CLI_EXIT_ERROR;
	t = cli_device_table(res->dev);
	t->caps(t->ctx, &caps);
	memcpy(devices, p->devices, sizeof(devices));
	if (!ndevices)
		for (; ndevices < caps.num_devices && ndevices < CLI_MAX_DEVICES; ndevices++)
			devices[ndevices] = ndevices;
	if (!(rep_dev = malloc((size_t)p->replicas * sizeof(*rep_dev))))
		return cli_report(p->path, NULL, -1, "out of memory");
	for (k = 0; k < p->replicas; k++)
		rep_dev[k] = devices[k % ndevices];
	k = ckpt_strategy_mirrored_on(&res->strat, t, rep_dev, p->replicas);
	free(rep_dev);
	if (k != CKPT_OK)
		return cli_report_last(p->path, NULL);
	if (!p->json)
		printf("device: %s\n", cli_device_describe(res->dev));
	return CLI_EXIT_OK;
}

static double load_t0;

/*
 * The reader the check uses, opened first (its sizes are what 100 % means),
 * then the load: one operation (ckpt_vfs_op_begin), so the load reads the
 * state file and index the reader read (on S3: once, not twice each) and
 * both see the same checkpoint even while a manager rewrites the state file.
 */
static int open_and_load(restore_result *res, const char *path, const ckpt_open_options *oo,
	const ckpt_checkpoint_options *co)
{
	ckpt_vfs_op_begin();
	int rc = ckpt_reader_open(&res->r, path, oo);
	if (rc != CKPT_OK) {
		ckpt_vfs_op_end();
		return rc;
	}
	/* the load creates its variables, so it reads every value once (no verification pass first) */
	cli_progress_set_total(res->prog, cli_reader_bytes(res->r) * (res->plan->save ? 2u : 1u));
	load_t0 = now_seconds();
	rc = ckpt_checkpoint_load(&res->ck, &res->st, path, co);
	res->seconds = now_seconds() - load_t0;
	ckpt_vfs_op_end();
	return rc;
}

/*
 * --fallback: the manager directory's checkpoints, newest first, until one
 * loads; those whose bytes do not verify (or whose files are incomplete)
 * are skipped with a warning naming them and why. Anything else stops it.
 */
static int load_fallback(restore_result *res, const ckpt_open_options *oo, const ckpt_checkpoint_options *co)
{
	const char *dir = res->plan->path;
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	ckpt_manager *m;
	int rc;

	mo.vfs = oo->vfs;
	mo.warn = co->warn;
	mo.warn_ctx = co->warn_ctx;
	if ((rc = ckpt_manager_new_ext(&m, NULL, dir, 0, &mo)) != CKPT_OK)
		return rc;
	rc = ckpt_error_set(CKPT_ENOTFOUND, dir, NULL, -1, "no checkpoint in this manager directory");
	for (size_t i = ckpt_manager_num_checkpoints(m); i-- > 0;) {
		const char *path = ckpt_manager_checkpoint(m, i);
		char why[1024];
		rc = open_and_load(res, path, oo, co);
		if (rc != CKPT_ECHECKSUM && rc != CKPT_EFORMAT && rc != CKPT_ENOTFOUND)
			break;
		ckpt_error_format(ckpt_error_last(), why, sizeof(why));
		fprintf(stderr, "ckpt: %s: warning: skipping checkpoint %s: it does not verify (%s); %s\n", cli_vis(dir),
			cli_vis(path), cli_vis(why), i ? "falling back to the previous one" : "no older checkpoint left");
		ckpt_restore_status_free(res->st);
		ckpt_checkpoint_free(res->ck);
		ckpt_reader_free(res->r);
		res->st = NULL;
		res->ck = NULL;
		res->r = NULL;
		if (i == 0)
			rc = ckpt_error_set(rc, dir, NULL, -1, "no checkpoint in this manager directory verifies");
	}
	ckpt_manager_free(m);
	return rc;
}

/*
 * --job: a read-only manager over PATH with the job's memory tier loads the
 * newest step of either tier; the reader the check uses opens what it
 * loaded (a memory segment through POSIX: nothing read from PATH).
 */
static int load_tier(restore_result *res, const ckpt_open_options *oo, const ckpt_checkpoint_options *co)
{
	const restore_plan *p = res->plan;
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	ckpt_manager *m;
	int rc;

	if (p->tier_dir && setenv(CKPT_TIER_DIR_ENV, p->tier_dir, 1) != 0)
		return ckpt_error_set(CKPT_ENOMEM, p->tier_dir, NULL, -1, "cannot set " CKPT_TIER_DIR_ENV);
	mo.vfs = oo->vfs;
	mo.warn = co->warn;
	mo.warn_ctx = co->warn_ctx;
	mo.memory_every = 1;
	mo.memory_job = p->job;
	if ((rc = ckpt_manager_new_ext(&m, NULL, p->path, 0, &mo)) != CKPT_OK)
		return rc;
	load_t0 = now_seconds();
	const char *from = ckpt_manager_load_latest(&res->ck, &res->st, m, co);
	res->seconds = now_seconds() - load_t0;
	rc = ckpt_status_of(from);
	if (rc == CKPT_OK && !from)
		rc = ckpt_error_set(CKPT_ENOTFOUND, p->path, NULL, -1, "job %s holds no memory step and the directory no "
			"checkpoint", p->job);
	if (rc == CKPT_OK) {
		ckpt_open_options ro = *oo;
		if (ckpt_restore_status_tier(res->st) == CKPT_TIER_MEMORY)
			ro.vfs = NULL;
		rc = ckpt_reader_open(&res->r, from, &ro);
	}
	ckpt_manager_free(m);
	return rc;
}

/* The strategy, its scope entered, then the reader and the load. */
static int restore_load(restore_result *res)
{
	const restore_plan *p = res->plan;
	ckpt_checkpoint_options co = CKPT_CHECKPOINT_OPTIONS_INIT;
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;

	if (p->on_cuda && make_cuda_strategy(res) != CLI_EXIT_OK)
		return CLI_EXIT_ERROR;
	if (!p->on_cuda && p->mirrored && ckpt_strategy_mirrored_new(&res->strat, p->replicas) != CKPT_OK)
		return cli_report_last(p->path, NULL);
	if (p->mirrored) {
		if (ckpt_scope_enter(res->strat) != CKPT_OK)
			return cli_report_last(p->path, NULL);
		res->entered = 1;
	}
	co.sync_rules = p->rules.rules; /* copied by ckpt_checkpoint_load */
	co.num_sync_rules = p->rules.n;
	co.warn = warn_line;
	co.warn_ctx = (void *)p->path;
	cli_progress_start(&res->prog, "restore", 0, p->json);
	oo.vfs = cli_progress_vfs(res->prog, p->path, p->save);
	co.vfs = oo.vfs;
	if (p->job) {
		if (load_tier(res, &oo, &co) != CKPT_OK)
			return cli_report_last(p->path, NULL);
	} else if (p->fallback) {
		if (load_fallback(res, &oo, &co) != CKPT_OK)
			return cli_report_last(p->path, NULL);
	} else if (open_and_load(res, p->path, &oo, &co) != CKPT_OK) {
		return cli_report_last(p->path, NULL);
	}
	if (res->entered)
		ckpt_scope_exit(res->strat);
	res->entered = 0;
	res->nunmatched = res->st ? ckpt_restore_status_num_unmatched(res->st) : 0;
	/* unmatched entries are reported by the tool, in its own terms */
	if (res->st)
		ckpt_restore_status_expect_partial(res->st);
	return CLI_EXIT_OK;
}

/* Every restored variable against the file; entries missing from it are reported once, not checked. */
static int restore_check(restore_result *res)
{
	var_check *to_check;
	size_t i, m = 0;

	if (ckpt_checkpoint_variables(&res->list, res->ck) != CKPT_OK)
		return cli_report_last(res->plan->path, NULL);
	res->n = ckpt_tracked_list_num_entries(res->list);
	res->checks = calloc(res->n ? res->n : 1, sizeof(*res->checks));
	to_check = calloc(res->n ? res->n : 1, sizeof(*to_check));
	if (!res->checks || !to_check) {
		free(to_check);
		return cli_report(res->plan->path, NULL, -1, "out of memory");
	}
	for (i = 0; i < res->n; i++) {
		var_check *c = &res->checks[i];
		c->tv = ckpt_tracked_list_get(res->list, i);
		if (!c->tv->source_key) {
			/* created by the load without a stored value (for example a fresh save_counter) */
			c->ok = 1;
		} else if (ckpt_reader_find(&c->idx, res->r, c->tv->source_key) != CKPT_OK) {
			cli_report_last(ckpt_reader_path(res->r), c->tv->source_key);
			c->why = "not in the file";
			res->bad++;
		} else {
			to_check[m++] = *c;
		}
	}
	res->bad += check_all(res->r, to_check, m, res->plan->on_cuda, &res->bytes);
	for (i = 0, m = 0; i < res->n; i++)
		if (res->checks[i].tv->source_key && !res->checks[i].why)
			res->checks[i] = to_check[m++];
	free(to_check);
	if (res->plan->save && ckpt_checkpoint_write(res->ck, res->plan->save) != CKPT_OK) {
		cli_report_last(res->plan->save, NULL);
		res->bad++;
	}
	return CLI_EXIT_OK;
}

static const char *var_label(const ckpt_tracked_variable *tv)
{
	return tv->source_key ? tv->source_key : tv->key;
}

static const char *tier_name(int tier)
{
	return tier == CKPT_TIER_MEMORY ? "memory" : tier == CKPT_TIER_STORAGE ? "storage" : "none";
}

static void restore_print_json(const restore_result *res)
{
	const restore_plan *p = res->plan;
	jw w;
	size_t i;

	jw_init(&w, stdout);
	jw_object_begin(&w);
	jw_key(&w, "path");
	jw_string(&w, ckpt_reader_path(res->r));
	jw_key(&w, "strategy");
	jw_string(&w, p->mirrored ? "mirrored" : "default");
	jw_key(&w, "device");
	jw_string(&w, p->on_cuda ? "cuda" : "cpu");
	jw_key(&w, "replicas");
	jw_int(&w, p->replicas);
	jw_key(&w, "variables");
	jw_array_begin(&w);
	for (i = 0; i < res->n; i++) {
		const ckpt_variable *v = res->checks[i].tv->variable;
		jw_object_begin(&w);
		jw_key(&w, "name");
		jw_string(&w, var_label(res->checks[i].tv));
		jw_key(&w, "kind");
		jw_string(&w, ckpt_var_kind_name(ckpt_variable_kind(v)));
		jw_key(&w, "replicas");
		jw_int(&w, ckpt_variable_num_replicas(v));
		jw_key(&w, "dtype");
		jw_string(&w, ckpt_dtype_name(ckpt_variable_dtype(v)));
		jw_key(&w, "shape");
		jw_shape(&w, ckpt_variable_shape(v));
		jw_key(&w, "crc32c");
		res->checks[i].have_crc ? jw_crc32(&w, res->checks[i].crc) : jw_null(&w);
		jw_object_end(&w);
	}
	jw_array_end(&w);
	jw_key(&w, "unmatched");
	jw_array_begin(&w);
	for (i = 0; i < res->nunmatched; i++)
		jw_string(&w, ckpt_restore_status_unmatched(res->st, i));
	jw_array_end(&w);
	/* which tier served the restore and the bytes from each (ckpt_restore_status_tier_bytes) */
	jw_key(&w, "tier");
	jw_string(&w, tier_name(ckpt_restore_status_tier(res->st)));
	jw_key(&w, "bytes_from");
	jw_object_begin(&w);
	jw_key(&w, "memory");
	jw_uint(&w, ckpt_restore_status_tier_bytes(res->st, CKPT_TIER_MEMORY));
	jw_key(&w, "storage");
	jw_uint(&w, ckpt_restore_status_tier_bytes(res->st, CKPT_TIER_STORAGE));
	jw_object_end(&w);
	jw_key(&w, "seconds");
	jw_double(&w, (double)(int64_t)(res->seconds * 1e6 + 0.5) / 1e6); /* microseconds */
	jw_object_end(&w);
	jw_end_line(&w);
}

static const char *check_text(const var_check *c)
{
	if (!c->tv->source_key)
		return "created (no stored value)";
	if (!c->ok)
		return "MISMATCH";
	return ckpt_variable_kind(c->tv->variable) == CKPT_VAR_SYNC_ON_READ ? "aggregate = file" : "all replicas = file";
}

static void restore_print_text(const restore_result *res)
{
	const restore_plan *p = res->plan;
	size_t i, w = 4;

	for (i = 0; i < res->n; i++)
		if (strlen(var_label(res->checks[i].tv)) > w)
			w = strlen(var_label(res->checks[i].tv));
	if (w > 100)
		w = 100;
	printf("restored %s under %s (%d replica%s)\n\n", cli_vis(ckpt_reader_path(res->r)),
		p->mirrored ? "MirroredStrategy" : "the default strategy", p->replicas, p->replicas == 1 ? "" : "s");
	printf("%-*s  %-12s %8s  %-9s %-16s %-10s %s\n", (int)w, "NAME", "KIND", "REPLICAS", "DTYPE", "SHAPE",
		"CRC32C", "CHECK");
	for (i = 0; i < res->n; i++) {
		const ckpt_variable *v = res->checks[i].tv->variable;
		char shape[256], crc[16];
		ckpt_shape_format(ckpt_variable_shape(v), shape, sizeof(shape));
		if (res->checks[i].have_crc)
			snprintf(crc, sizeof(crc), "0x%08" PRIx32, res->checks[i].crc);
		else
			snprintf(crc, sizeof(crc), "-");
		printf("%-*s  %-12s %8d  %-9s %-16s %-10s %s\n", (int)w, cli_vis(var_label(res->checks[i].tv)),
			ckpt_var_kind_name(ckpt_variable_kind(v)), ckpt_variable_num_replicas(v),
			ckpt_dtype_name(ckpt_variable_dtype(v)), shape, crc, check_text(&res->checks[i]));
	}
	for (i = 0; i < res->nunmatched; i++)
		printf("unmatched: %s\n", cli_vis(ckpt_restore_status_unmatched(res->st, i)));
	printf("\n%zu variables, %" PRIu64 " bytes in %.3f s (%.1f MB/s); %zu unmatched%s\n", res->n, res->bytes,
		res->seconds, res->seconds > 0 ? (double)res->bytes / res->seconds / 1e6 : 0.0, res->nunmatched,
		res->nunmatched && p->expect_partial ? " (expected: --expect-partial)" : "");
	if (p->save && !res->bad)
		printf("saved to %s\n", cli_vis(p->save));
}

static void restore_result_free(restore_result *res)
{
	if (res->entered)
		ckpt_scope_exit(res->strat);
	free(res->checks);
	ckpt_tracked_list_free(res->list);
	ckpt_reader_free(res->r);
	ckpt_restore_status_free(res->st);
	ckpt_checkpoint_free(res->ck);
	if (res->strat)
		ckpt_strategy_free(res->strat);
	cli_device_close(res->dev); /* after the strategy: its queues are the provider's */
	cli_progress_free(res->prog);
}

static int cmd_restore(const cli_cmd *cmd, int argc, char **argv)
{
	restore_plan plan;
	restore_result res;
	int rc;

	rc = restore_parse(cmd, argc, argv, &plan);
	if (rc != CLI_EXIT_OK) {
		cli_sync_rules_free(&plan.rules);
		return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
	}
	memset(&res, 0, sizeof(res));
	res.plan = &plan;
	rc = CLI_EXIT_ERROR;
	if (restore_load(&res) == CLI_EXIT_OK && restore_check(&res) == CLI_EXIT_OK) {
		cli_progress_done(res.prog);
		if (plan.json)
			restore_print_json(&res);
		else
			restore_print_text(&res);
		if (res.nunmatched && !plan.expect_partial)
			cli_report(plan.path, NULL, -1, "%zu stored entr%s could not be placed (use --expect-partial to accept)",
				res.nunmatched, res.nunmatched == 1 ? "y" : "ies");
		rc = (res.bad || (res.nunmatched && !plan.expect_partial)) ? CLI_EXIT_ERROR : CLI_EXIT_OK;
	}
	cli_sync_rules_free(&plan.rules);
	fflush(stdout);
	restore_result_free(&res);
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
	"against the file's stored crc32c (formats without one: the stored value's);\n"
	"a host copy 0 the load verified against that crc32c is not read again.\n"
	"Entries that cannot be placed make the exit status 1 unless\n"
	"--expect-partial. --save OUT writes the restored state as a TensorBundle.\n"
	"--device cuda[:ID,...] keeps the replicas in GPU memory (replica r on the\n"
	"r-th listed device, round robin) through the CUDA provider library\n"
	"ckpt_cuda, loaded at run time (CKPT_CUDA_LIBRARY names its file), and\n"
	"checks every copy through device-to-host copies.\n"
	"--fallback takes PATH as a checkpoint manager's directory and loads the\n"
	"newest checkpoint that verifies, warning with the path and the reason\n"
	"for each newer one it skips (default: fail, as TensorFlow does).\n"
	"--job JOB [--tier-dir DIR] takes PATH as a checkpoint manager's directory\n"
	"with a memory tier (as `ckpt tier list` shows it): JOB's newest memory\n"
	"step is restored when it is newer than PATH's newest checkpoint, reading\n"
	"nothing from PATH, else that checkpoint; `--json` says which tier served\n"
	"it (\"tier\") and the bytes from each (\"bytes_from\")."
};

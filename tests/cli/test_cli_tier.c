/*
 * `ckpt tier list [--json]` and `ckpt tier drop JOB` on a tier directory a
 * manager filled (a step newer than storage, kept at its free).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "test_support.h"
#include "tier_common.h"

static void quiet(const char *msg, void *ctx)
{
	(void)msg;
	(void)ctx;
}

static char *g_tier; /* the tier path, freed after the test (the suite's fini) */
static char *g_dir;  /* fill_tier's checkpoint directory (one of tt_tmpdir's) */

static void remove_tmpdirs(void)
{
	tt_tmpdirs_remove();
	free(g_tier);
	g_tier = NULL;
	unsetenv(CKPT_TIER_DIR_ENV);
}

TestSuite(cli_tier, .fini = remove_tmpdirs);

/* Job "cli-job": step 3 in memory only (storage has 2), left behind by the manager. */
static char *fill_tier(void)
{
	char *tier = g_tier = ts_join(tt_tmpdir(), "shm");
	setenv(CKPT_TIER_DIR_ENV, tier, 1);
	char *dir = g_dir = tt_tmpdir();
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.no_fsync = 1;
	o.warn = quiet;
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, &o), CKPT_OK);
	ckpt_shape v;
	int64_t d = 1000;
	cr_assert_eq(ckpt_shape_make(&v, 1, &d), CKPT_OK);
	cr_assert_eq(ckpt_status_of(ckpt_object_add_variable(ckpt_checkpoint_root(ck), "w", "w", CKPT_DT_FLOAT, &v,
		NULL)), CKPT_OK);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.no_fsync = 1;
	mo.memory_every = 1;
	mo.persist_every = 2;
	mo.memory_job = "cli-job";
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new_ext(&m, ck, dir, 3, &mo), CKPT_OK);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ckpt_status_of(ckpt_manager_save(m)), CKPT_OK);
	ckpt_manager_free(m);
	ckpt_checkpoint_free(ck);
	return tier;
}

Test(cli_tier, list_and_drop)
{
	char *tier = fill_tier();
	ts_run_result r = ts_cli("tier", "list", NULL);
	ts_assert_exit(&r, 0, "tier list");
	cr_assert(strstr(r.out, "cli-job\tstep 3\t1/1 workers\t") && strstr(r.out, "complete") &&
		strstr(r.out, "1 step in "), "%s", r.out);
	ts_run_free(&r);

	r = ts_cli("tier", "list", "--json", "--dir", tier, NULL);
	ts_assert_exit(&r, 0, "tier list --json");
	cr_assert(strstr(r.out, "\"job\": \"cli-job\"") && strstr(r.out, "\"step\": 3") &&
		strstr(r.out, "\"workers\": 1") && strstr(r.out, "\"present\": 1") && strstr(r.out, "\"complete\": true"),
		"%s", r.out);
	ts_run_free(&r);

	r = ts_cli("tier", "drop", "cli-job", NULL);
	ts_assert_exit(&r, 0, "tier drop");
	ts_run_free(&r);
	DIR *d = opendir(tier);
	cr_assert(d);
	struct dirent *e;
	while ((e = readdir(d)))
		cr_assert(e->d_name[0] == '.', "%s left in %s", e->d_name, tier);
	closedir(d);

	r = ts_cli("tier", "list", "--json", NULL);
	ts_assert_exit(&r, 0, "tier list after drop");
	cr_assert(strstr(r.out, "\"steps\": []"), "%s", r.out);
	ts_run_free(&r);
}

/* `ckpt restore --json` says which tier served it and the bytes from each: here storage, w (4000 bytes) + save_counter + graph */
Test(cli_tier, restore_json_says_the_bytes_per_tier)
{
	fill_tier();
	char *ck = ts_join(g_dir, "ckpt-2");
	ts_run_result r = ts_cli("restore", ck, "--strategy", "default", "--json", NULL);
	ts_assert_exit(&r, 0, "restore --json: %s", r.err);
	cr_assert(strstr(r.out, "\"tier\": \"storage\""), "%s", r.out);
	const char *b = strstr(r.out, "\"bytes_from\": {");
	cr_assert(b, "%s", r.out);
	unsigned long long mem = 1, sto = 0;
	cr_assert_eq(sscanf(b, "\"bytes_from\": { \"memory\": %llu, \"storage\": %llu", &mem, &sto), 2, "%s", b);
	cr_assert_eq(mem, 0, "%s", r.out);
	cr_assert(sto >= 4008 && sto < 4008 + 4096, "storage bytes %llu: %s", sto, r.out);
	ts_run_free(&r);
	free(ck);
}

/* "bytes_from" of `ckpt restore --json`: memory and storage */
static void bytes_from(const char *out, unsigned long long *mem, unsigned long long *sto)
{
	const char *b = strstr(out, "\"bytes_from\": {");
	cr_assert(b, "%s", out);
	cr_assert_eq(sscanf(b, "\"bytes_from\": { \"memory\": %llu, \"storage\": %llu", mem, sto), 2, "%s", b);
}

/*
 * `ckpt restore --job JOB --tier-dir DIR PATH`: the job's memory step 3 is
 * newer than PATH's ckpt-2, so it is restored from memory, 0 bytes from
 * storage; once the tier holds nothing, PATH's ckpt-2.
 */
Test(cli_tier, restore_from_the_memory_tier_then_storage_when_it_has_nothing_newer)
{
	char *tier = fill_tier();
	ts_run_result r = ts_cli("restore", g_dir, "--job", "cli-job", "--tier-dir", tier, "--strategy", "default",
		"--json", NULL);
	ts_assert_exit(&r, 0, "restore --job: %s", r.err);
	cr_assert(strstr(r.out, "\"tier\": \"memory\"") && strstr(r.out, "/cli-job/step-000000000003.w0-of-1/ckpt\""),
		"%s", r.out);
	unsigned long long mem = 0, sto = 1;
	bytes_from(r.out, &mem, &sto);
	cr_assert_eq(sto, 0, "%s", r.out);
	cr_assert(mem >= 4008 && mem < 4008 + 4096, "memory bytes %llu: %s", mem, r.out);
	ts_run_free(&r);
	/* the text report names the segment too */
	r = ts_cli("restore", g_dir, "--job", "cli-job", "--tier-dir", tier, "--strategy", "default", NULL);
	ts_assert_exit(&r, 0, "restore --job: %s", r.err);
	cr_assert(strstr(r.out, "step-000000000003.w0-of-1/ckpt under the default strategy"), "%s", r.out);
	ts_run_free(&r);

	/* a restore reads the tier and never removes it */
	r = ts_cli("tier", "list", "--json", "--dir", tier, NULL);
	cr_assert(strstr(r.out, "\"step\": 3"), "%s", r.out);
	ts_run_free(&r);
	r = ts_cli("tier", "drop", "cli-job", "--dir", tier, NULL);
	ts_assert_exit(&r, 0, "tier drop");
	ts_run_free(&r);
	r = ts_cli("restore", g_dir, "--job", "cli-job", "--tier-dir", tier, "--strategy", "default", "--json", NULL);
	ts_assert_exit(&r, 0, "restore --job after the drop: %s", r.err);
	cr_assert(strstr(r.out, "\"tier\": \"storage\"") && strstr(r.out, "/ckpt-2\""), "%s", r.out);
	bytes_from(r.out, &mem, &sto);
	cr_assert(mem == 0 && sto >= 4008, "%s", r.out);
	ts_run_free(&r);

	r = ts_cli("restore", g_dir, "--tier-dir", tier, "--strategy", "default", NULL);
	ts_assert_exit(&r, 2, "--tier-dir without --job");
	ts_run_free(&r);
}

Test(cli_tier, usage_errors)
{
	ts_run_result r = ts_cli("tier", "drop", NULL);
	ts_assert_exit(&r, 2, "drop without a job");
	ts_run_free(&r);
	r = ts_cli("tier", "frob", NULL);
	ts_assert_exit(&r, 2, "unknown action");
	ts_run_free(&r);
	r = ts_cli("tier", "drop", "../etc", "--dir", tt_tmpdir(), NULL);
	ts_assert_exit(&r, 1, "a job name with '/'");
	cr_assert(strstr(r.err, "without '/'"), "%s", r.err);
	ts_run_free(&r);
}

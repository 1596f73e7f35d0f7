/*
 * `ckpt verify PATH`: open (structure checks) and read every tensor
 * (checksum checks). Exit 0 with "OK: N tensors, B bytes verified", or 1
 * with one error line per problem (path, variable, offset). On S3, a
 * format without a checksum per tensor (safetensors, GGUF, Keras) has each
 * of its objects read again whole and checked against the object's own
 * checksums (ckpt_s3_object_verify), or is said to have none.
 */
#include <inttypes.h>
#include <string.h>
#include "cli.h"

/* The options of `ckpt verify`, filled by cli_parse through verify_opts[].field. */
typedef struct verify_args {
	const char *path;
} verify_args;

static const cli_opt verify_opts[] = {
	{ CLI_OPT_ARG, "PATH", NULL, 1, "checkpoint of any supported format",
		CLI_FIELD(verify_args, path) },
	{ CLI_OPT_END, NULL, NULL, 0, NULL, 0 }
};

/* What verify found; verify_print renders it. */
typedef struct verify_result {
	const char *path;
	ckpt_reader *r;
	cli_progress *prog;
	size_t n, bad, unchecked;  /* entries; problems (each reported); entries without a stored checksum */
	uint64_t bytes;
	char whole[1024];          /* S3: what the whole-object checks found, for the verdict */
} verify_result;

/*
 * The objects of an S3 checkpoint whose entries have no checksum, each
 * checked whole against what the object stores (crc32c metadata,
 * x-amz-checksum-*, an MD5 ETag): a ranged GET answered with other bytes
 * is caught here, or the verdict says the object has no such checksum.
 */
static void verify_whole_objects(verify_result *res, ckpt_vfs *vfs)
{
	int shards = ckpt_reader_num_shards(res->r);
	for (int i = 0; i < shards; i++) {
		int exists = 0;
		const char *path = ckpt_reader_shard_path(res->r, i, &exists);
		ckpt_s3_object_check chk;
		size_t l = strlen(res->whole);
		if (!path || !exists)
			continue; /* reported as a missing shard */
		if (ckpt_s3_object_verify(&chk, vfs, path) != CKPT_OK) {
			cli_report_last(path, NULL);
			res->bad++;
			continue;
		}
		snprintf(res->whole + l, sizeof(res->whole) - l, "; %s%s%s", shards > 1 ? path : "",
			shards > 1 ? ": " : "", chk.num_checked ? "whole object matches " : "");
		l = strlen(res->whole);
		snprintf(res->whole + l, sizeof(res->whole) - l, "%s", chk.what);
	}
}

/* Every entry checked; each problem reported on stderr as it is found. */
static int verify_run(verify_result *res)
{
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	size_t i;
	int all_ok;

	cli_progress_start(&res->prog, "verify", 0, 0);
	oo.vfs = cli_progress_vfs(res->prog, res->path, NULL);
	if (ckpt_reader_open(&res->r, res->path, &oo) != CKPT_OK)
		return cli_report_last(res->path, NULL);
	res->n = ckpt_reader_num_entries(res->r);
	cli_progress_set_total(res->prog, cli_reader_bytes(res->r));
	if (cli_report_missing_shards(res->r))
		res->bad++;
	/* all at once first (a cold file: direct reads in flight); entry by entry to name every problem */
	all_ok = !res->bad && ckpt_reader_verify_all(res->r) == CKPT_OK;
	for (i = 0; i < res->n; i++) {
		const ckpt_var_info *v = ckpt_reader_var(res->r, i);

		if (cli_var_in_missing_shard(res->r, v)) {
			res->bad++;
			continue; /* reported once per file above */
		}
		/* through the reader's bounded buffers: no copy of the tensor is kept */
		if (!all_ok && ckpt_reader_verify(res->r, i) != CKPT_OK) {
			cli_report_last(ckpt_reader_path(res->r), v->name);
			res->bad++;
			continue;
		}
		res->bytes += v->nbytes;
		if (!v->has_crc32c)
			res->unchecked++;
	}
	if (res->unchecked && ckpt_path_is_s3(ckpt_reader_path(res->r)))
		verify_whole_objects(res, oo.vfs);
	cli_progress_done(res->prog);
	return CLI_EXIT_OK;
}

/* The verdict: "OK: ..." on stdout, or the count of problems on stderr. */
static void verify_print(const verify_result *res)
{
	if (res->bad) {
		cli_report(ckpt_reader_path(res->r), NULL, -1, "FAILED: %zu problem%s in %zu tensors", res->bad,
			res->bad == 1 ? "" : "s", res->n);
		return;
	}
	printf("OK: %zu tensors, %" PRIu64 " bytes verified (%s", res->n, res->bytes, ckpt_reader_format(res->r));
	if (res->unchecked)
		printf("; %zu without a stored checksum, read and structure-checked", res->unchecked);
	printf("%s)\n", res->whole);
}

static int cmd_verify(const cli_cmd *cmd, int argc, char **argv)
{
	verify_args args;
	verify_result res;
	int rc;

	memset(&args, 0, sizeof(args));
	memset(&res, 0, sizeof(res));
	rc = cli_parse(cmd, argc, argv, &args);
	if (rc != CLI_EXIT_OK)
		return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
	res.path = args.path;
	rc = verify_run(&res);
	if (rc == CLI_EXIT_OK) {
		verify_print(&res);
		rc = res.bad ? CLI_EXIT_ERROR : CLI_EXIT_OK;
	}
	ckpt_reader_free(res.r);
	cli_progress_free(res.prog);
	return rc;
}

const cli_cmd cli_cmd_verify = {
	"verify", cmd_verify, "Check the structure and every checksum of a checkpoint",
	verify_opts,
	"Opens PATH (any supported format), reads every tensor and verifies every\n"
	"stored checksum. Prints \"OK: N tensors, B bytes verified\" and exits 0, or\n"
	"prints one error line per problem and exits 1. safetensors and GGUF store\n"
	"no checksum: for them verify checks every structural rule of the reader\n"
	"(sizes, offsets, dtypes, layout) and reads every byte of every tensor;\n"
	"on S3 it then reads each of their objects whole and checks it against the\n"
	"object's stored checksum (libckpt's crc32c metadata, x-amz-checksum-crc32c\n"
	"or -crc32, a single-part ETag's MD5), or says that the object has none."
};

/*
 * The metadata memory budget README.md promises ("Metadata: memory and
 * time"): opening and inspecting a safetensors or GGUF file takes at most
 * META_FIXED_MIB plus META_PER_BYTE times its metadata bytes (the
 * safetensors header; GGUF's key-value section) of peak memory, whatever
 * shape the metadata has. Files built to be expensive (issue 26: a shape
 * of millions of zeros, millions of __metadata__ keys, a million one-byte
 * GGUF pairs, an array of millions of empty strings) and one at each cap
 * (a 100,000,000-byte safetensors header; a GGUF key-value section just
 * under its 256 MiB) are written here, streamed to disk, and `ckpt inspect`
 * runs on each in a child process whose peak RSS (wait4's ru_maxrss) is
 * held against the budget. Not timed: the machine may be loaded.
 *
 * CKPT_META_BUDGET_CLI, when set, runs another ckpt binary (an older build,
 * for a before/after comparison); the measurements are logged either way.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "test_support.h"

#if defined(__SANITIZE_ADDRESS__)
/*
 * An ASan build's child also carries shadow memory (1/8 of what it touches),
 * redzones and the sanitizer's own tables; its quarantine is turned off
 * below so freed blocks count as free, as they do in a plain build.
 */
#define META_FIXED_MIB 160
#define META_PER_BYTE 6
#define META_ASAN 1
#else
#define META_FIXED_MIB 32   /* the process, its libraries, I/O windows */
#define META_PER_BYTE 4     /* multiple of the metadata bytes (README.md) */
#define META_ASAN 0
#endif

typedef struct measured {
	int status;
	long peak_kib;
	double seconds;
	char err[512];
} measured;

/* `ckpt inspect path` with stdout to /dev/null; peak RSS of the child from wait4. */
static measured run_inspect(const char *path)
{
	const char *cli = getenv("CKPT_META_BUDGET_CLI") ? getenv("CKPT_META_BUDGET_CLI") : TS_CLI;
	measured m = { 0 };
	struct rusage ru;
	struct timespec t0, t1;
	int errpipe[2], st;
	pid_t pid;
	ssize_t n;

	cr_assert_eq(pipe(errpipe), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		struct rlimit as = { 6ull << 30, 6ull << 30 }; /* an older build on a cap file must not take the machine */
		if (META_ASAN) {
			char opts[1024];
			snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=0", getenv("ASAN_OPTIONS") ?
				getenv("ASAN_OPTIONS") : "", getenv("ASAN_OPTIONS") ? ":" : "");
			setenv("ASAN_OPTIONS", opts, 1);
		} else {
			setrlimit(RLIMIT_AS, &as);
		}
		dup2(null, 1);
		dup2(errpipe[1], 2);
		close(errpipe[0]);
		execl(cli, cli, "inspect", path, (char *)NULL);
		_exit(127);
	}
	close(errpipe[1]);
	n = read(errpipe[0], m.err, sizeof(m.err) - 1);
	m.err[n > 0 ? n : 0] = '\0';
	while (read(errpipe[0], &st, sizeof(st)) > 0)
		;
	close(errpipe[0]);
	cr_assert_eq(wait4(pid, &st, 0, &ru), pid);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	m.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	m.peak_kib = ru.ru_maxrss;
	m.seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	return m;
}

/* Run inspect on `path` (metadata_bytes of metadata) and hold its peak RSS against the budget. */
static void check_budget(const char *what, const char *path, uint64_t metadata_bytes, int want_status,
	const char *want_err)
{
	measured m = run_inspect(path);
	double budget_mib = META_FIXED_MIB + META_PER_BYTE * (double)metadata_bytes / (1 << 20);

	cr_log_info("%s: %.1f MB of metadata: peak RSS %.1f MiB (budget %.1f), %.2f s, exit %d", what,
		(double)metadata_bytes / 1e6, m.peak_kib / 1024.0, budget_mib, m.seconds, m.status);
	cr_assert_eq(m.status, want_status, "%s: exit %d, want %d\n%s", what, m.status, want_status, m.err);
	if (want_err)
		cr_assert(strstr(m.err, want_err), "%s: stderr lacks '%s':\n%s", what, want_err, m.err);
	cr_assert_leq(m.peak_kib / 1024.0, budget_mib, "%s: peak RSS %.1f MiB above the budget %.1f MiB "
		"(%d MiB + %d x %.1f MB)", what, m.peak_kib / 1024.0, budget_mib, META_FIXED_MIB, META_PER_BYTE,
		(double)metadata_bytes / 1e6);
}

/* ---- writers: everything streamed through stdio, nothing held ---- */

static void le64(FILE *f, uint64_t v)
{
	unsigned char b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	fwrite(b, 1, 8, f);
}

static void le32(FILE *f, uint32_t v)
{
	unsigned char b[4];
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	fwrite(b, 1, 4, f);
}

static FILE *create(const char *path)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	return f;
}

static void finish(FILE *f, const char *path)
{
	cr_assert_eq(fclose(f), 0, "%s: %s", path, strerror(errno));
}

/* A safetensors file of no tensor data whose header is `prefix`, `nrep` x `rep`, `suffix`, spaces to `header_len`. */
static uint64_t st_write(const char *path, const char *prefix, const char *rep, uint64_t nrep, const char *last,
	const char *suffix, uint64_t header_len)
{
	FILE *f = create(path);
	uint64_t used = strlen(prefix) + nrep * strlen(rep) + strlen(last) + strlen(suffix);
	cr_assert_leq(used, header_len);
	le64(f, header_len);
	fputs(prefix, f);
	for (uint64_t i = 0; i < nrep; i++)
		fputs(rep, f);
	fputs(last, f);
	fputs(suffix, f);
	for (uint64_t i = used; i < header_len; i++)
		fputc(' ', f);
	finish(f, path);
	return header_len;
}

/* A GGUF v3 file with no tensors; the key-value pairs come from the caller between begin and the end. */
static FILE *gguf_begin(const char *path, uint64_t nkv)
{
	FILE *f = create(path);
	fwrite("GGUF", 1, 4, f);
	le32(f, 3);
	le64(f, 0);
	le64(f, nkv);
	return f;
}

static void gguf_key(FILE *f, const char *key, uint32_t type)
{
	le64(f, strlen(key));
	fputs(key, f);
	le32(f, type);
}

/* ---- the shapes of issue 26 ---- */

static char *dir;

static void setup(void)
{
	dir = ts_tmpdir();
}

static void teardown(void)
{
	ts_rmtree(dir);
	free(dir);
}

TestSuite(meta_budget, .init = setup, .fini = teardown, .timeout = 300);

Test(meta_budget, safetensors_shape_of_millions_of_zeros_fails_at_rank_33_within_budget)
{
	char *p = ts_join(dir, "zeros.safetensors");
	uint64_t hl = st_write(p, "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,0],\"shape\":[", "0,", 12582911, "0",
		"]}}", (24u << 20) + 64);
	check_budget("safetensors, 24 MiB header, shape of 12.6 M zeros", p, hl, 1, "rank 12582912 above the maximum 32");
	free(p);
}

Test(meta_budget, safetensors_shape_of_zeros_filling_the_100_mb_cap)
{
	char *p = ts_join(dir, "zeros_cap.safetensors");
	uint64_t hl = st_write(p, "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,0],\"shape\":[", "0,", 49900000, "0",
		"]}}", 100000000);
	check_budget("safetensors, header at the 100 MB cap, shape of 49.9 M zeros", p, hl, 1,
		"rank 49900001 above the maximum 32");
	free(p);
}

Test(meta_budget, safetensors_header_at_the_100_mb_cap)
{
	/* __metadata__ of 1000-byte values filling the header to exactly the reference's cap */
	char *p = ts_join(dir, "cap.safetensors"), rep[1100], key[32];
	uint64_t n = 98000, hl;
	memset(rep, 0, sizeof(rep));
	strcpy(rep, "\"k\":\"");
	memset(rep + 5, 'x', 1000);
	strcat(rep, "\",");
	/* the keys must differ: the repeated entry is written with a counter by the loop below instead */
	FILE *f = create(p);
	le64(f, 100000000);
	fputs("{\"__metadata__\":{", f);
	uint64_t used = 17;
	for (uint64_t i = 0; i < n; i++) {
		int kl = snprintf(key, sizeof(key), "\"k%llu\":\"", (unsigned long long)i);
		fputs(key, f);
		fwrite(rep + 5, 1, 1000, f);
		fputs(i + 1 < n ? "\"," : "\"", f);
		used += (uint64_t)kl + 1000 + (i + 1 < n ? 2 : 1);
	}
	fputs("}}", f);
	used += 2;
	cr_assert_leq(used, 100000000);
	for (; used < 100000000; used++)
		fputc(' ', f);
	finish(f, p);
	hl = 100000000;
	check_budget("safetensors, header at the 100 MB cap (98,000 metadata values of 1000 bytes)", p, hl, 0, NULL);
	free(p);
}

Test(meta_budget, safetensors_millions_of_metadata_keys)
{
	char *p = ts_join(dir, "keys.safetensors"), key[32];
	const uint64_t n = 1500000;
	FILE *f = create(p);
	uint64_t used = 17 + 2;
	for (uint64_t i = 0; i < n; i++)
		used += (uint64_t)snprintf(key, sizeof(key), "\"%llx\":\"\"", (unsigned long long)i) + (i + 1 < n);
	le64(f, used);
	fputs("{\"__metadata__\":{", f);
	for (uint64_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "\"%llx\":\"\"", (unsigned long long)i);
		fputs(key, f);
		if (i + 1 < n)
			fputc(',', f);
	}
	fputs("}}", f);
	finish(f, p);
	check_budget("safetensors, 1.5 M __metadata__ keys", p, used, 0, NULL);
	free(p);
}

Test(meta_budget, gguf_a_million_one_byte_pairs)
{
	char *p = ts_join(dir, "kv.gguf"), key[32];
	const uint64_t n = 1000000;
	FILE *f = gguf_begin(p, n);
	uint64_t bytes = 0;
	for (uint64_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "k%07llu", (unsigned long long)i);
		gguf_key(f, key, 0 /* u8 */);
		fputc((int)(i & 0xff), f);
		bytes += 8 + strlen(key) + 4 + 1;
	}
	finish(f, p);
	check_budget("GGUF, 1 M one-byte key-value pairs", p, bytes, 0, NULL);
	free(p);
}

Test(meta_budget, gguf_array_of_millions_of_empty_strings)
{
	char *p = ts_join(dir, "strings.gguf");
	const uint64_t n = 2000000;
	FILE *f = gguf_begin(p, 1);
	gguf_key(f, "tokenizer.ggml.tokens", 9 /* array */);
	le32(f, 8 /* string */);
	le64(f, n);
	for (uint64_t i = 0; i < n; i++)
		le64(f, 0);
	finish(f, p);
	check_budget("GGUF, an array of 2 M empty strings", p, 8 + 21 + 4 + 12 + n * 8, 0, NULL);
	free(p);
}

Test(meta_budget, gguf_key_value_section_at_the_256_mib_cap)
{
	/* 255 strings of 1 MiB and one of what is left: the section ends a few bytes under the cap */
	char *p = ts_join(dir, "cap.gguf"), key[32];
	static char mib[1 << 20];
	const uint64_t cap = 256ull << 20;
	uint64_t bytes = 0;
	FILE *f = gguf_begin(p, 256);
	memset(mib, 'x', sizeof(mib));
	for (int i = 0; i < 256; i++) {
		uint64_t len = sizeof(mib);
		snprintf(key, sizeof(key), "s.%03d", i);
		if (i == 255)
			len = cap - bytes - (8 + strlen(key) + 4 + 8);
		gguf_key(f, key, 8 /* string */);
		le64(f, len);
		fwrite(mib, 1, (size_t)len, f);
		bytes += 8 + strlen(key) + 4 + 8 + len;
	}
	finish(f, p);
	cr_assert_eq(bytes, cap);
	check_budget("GGUF, key-value section at the 256 MiB cap", p, bytes, 0, NULL);
	free(p);
}

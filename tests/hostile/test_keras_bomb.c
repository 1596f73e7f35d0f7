/*
 * Issue 12.2: reading a .keras costs bounded memory whatever its members
 * inflate to. The archives are built here with zlib: a 3.5 GiB
 * model.weights.h5 of zeros deflates to a few MB (1 MiB segments, each
 * compressed from a fresh stream and full-flushed, so one segment repeats;
 * the CRC comes from crc32_combine), small enough to build in
 * milliseconds. The peak RSS of `ckpt inspect` on them (wait4's ru_maxrss,
 * a separate process) must stay within 64 MiB of its peak on a small valid
 * .keras: an assertion on memory, not on time.
 */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include "keras_test.h"

#define SEG (1u << 20)
#define NSEG 3584u /* 3.5 GiB inflated: under 4 GiB, so no zip64 and under Keras' own ratio rule */

static unsigned char *deflate_segment(const unsigned char *in, size_t n, size_t *out_n)
{
	z_stream z;
	unsigned char *out = malloc(n + 1024);
	cr_assert(out);
	memset(&z, 0, sizeof(z));
	cr_assert_eq(deflateInit2(&z, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (unsigned char *)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)(n + 1024);
	cr_assert_eq(deflate(&z, Z_FULL_FLUSH), Z_OK);
	cr_assert_eq(z.avail_in, 0);
	*out_n = z.total_out;
	deflateEnd(&z);
	return out;
}

static void put16(FILE *f, unsigned v) { fputc((int)(v & 0xff), f); fputc((int)((v >> 8) & 0xff), f); }
static void put32(FILE *f, uint32_t v) { put16(f, v & 0xffff); put16(f, v >> 16); }

typedef struct member {
	const char *name;
	int method;             /* 0 stored, 8 deflate */
	uint32_t crc, csize, usize, offset;
} member;

static void local_header(FILE *f, member *m)
{
	m->offset = (uint32_t)ftell(f);
	put32(f, 0x04034b50);
	put16(f, 20); put16(f, 0); put16(f, (unsigned)m->method); put16(f, 0); put16(f, 0x21);
	put32(f, m->crc); put32(f, m->csize); put32(f, m->usize);
	put16(f, (unsigned)strlen(m->name)); put16(f, 0);
	fwrite(m->name, 1, strlen(m->name), f);
}

static void stored(FILE *f, member *m, const char *text)
{
	m->method = 0;
	m->crc = (uint32_t)crc32(0, (const Bytef *)text, (uInt)strlen(text));
	m->csize = m->usize = (uint32_t)strlen(text);
	local_header(f, m);
	fwrite(text, 1, strlen(text), f);
}

/* A .keras whose model.weights.h5 is NSEG MiB: zeros, after the HDF5 signature when `hdf5_head`; the directory says `declared` bytes (0: the truth). */
static void write_bomb(const char *path, int hdf5_head, uint32_t declared)
{
	unsigned char *zero = calloc(1, SEG), *head = calloc(1, SEG), *zs, *hs;
	size_t zn, hn, i;
	uint32_t crc, zcrc;
	member m[3] = { { "metadata.json", 0, 0, 0, 0, 0 }, { "config.json", 0, 0, 0, 0, 0 }, { "model.weights.h5", 8, 0, 0, 0, 0 } };
	FILE *f = fopen(path, "wb");
	uint32_t cd;
	cr_assert(zero && head && f);
	if (hdf5_head)
		memcpy(head, "\x89HDF\r\n\x1a\n", 8);
	zs = deflate_segment(zero, SEG, &zn);
	hs = deflate_segment(head, SEG, &hn);
	zcrc = (uint32_t)crc32(0, zero, SEG);
	crc = (uint32_t)crc32(0, head, SEG);
	for (i = 1; i < NSEG; i++)
		crc = (uint32_t)crc32_combine(crc, zcrc, SEG);
	stored(f, &m[0], "{\"keras_version\": \"3.9.2\", \"date_saved\": \"2026-12-01@00:00:00\"}");
	stored(f, &m[1], "{\"class_name\": \"Sequential\", \"config\": {\"layers\": []}}");
	m[2].crc = crc;
	m[2].usize = declared ? declared : NSEG * SEG;
	m[2].csize = (uint32_t)(hn + (NSEG - 1) * zn + 2);
	local_header(f, &m[2]);
	fwrite(hs, 1, hn, f);
	for (i = 1; i < NSEG; i++)
		fwrite(zs, 1, zn, f);
	fwrite("\x03\x00", 1, 2, f); /* an empty final fixed-Huffman block ends the stream */
	cd = (uint32_t)ftell(f);
	for (i = 0; i < 3; i++) {
		put32(f, 0x02014b50);
		put16(f, 20); put16(f, 20); put16(f, 0); put16(f, (unsigned)m[i].method); put16(f, 0); put16(f, 0x21);
		put32(f, m[i].crc); put32(f, m[i].csize); put32(f, m[i].usize);
		put16(f, (unsigned)strlen(m[i].name)); put16(f, 0); put16(f, 0); put16(f, 0); put16(f, 0);
		put32(f, 0); put32(f, m[i].offset);
		fwrite(m[i].name, 1, strlen(m[i].name), f);
	}
	{
		uint32_t end = (uint32_t)ftell(f);
		put32(f, 0x06054b50);
		put16(f, 0); put16(f, 0); put16(f, 3); put16(f, 3);
		put32(f, end - cd); put32(f, cd); put16(f, 0);
	}
	cr_assert_eq(fclose(f), 0);
	free(zero);
	free(head);
	free(zs);
	free(hs);
}

/* `ckpt inspect path` in a child: exit status, peak RSS in KiB, stderr into `err`. */
static int inspect_rss(const char *path, const char *errfile, long *maxrss_kib)
{
	struct rusage ru;
	int st = 0;
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600), null = open("/dev/null", O_WRONLY);
		if (fd < 0 || null < 0)
			_exit(126);
		dup2(null, 1);
		dup2(fd, 2);
		execl(CKPT_CLI_PATH, CKPT_CLI_PATH, "inspect", path, (char *)NULL);
		_exit(127);
	}
	cr_assert_eq(wait4(pid, &st, 0, &ru), pid);
	cr_assert(WIFEXITED(st), "ckpt inspect %s died (status 0x%x)", path, st);
	*maxrss_kib = ru.ru_maxrss;
	return WEXITSTATUS(st);
}

Test(keras_bomb, inflating_members_are_refused_within_bounded_memory, .timeout = 300)
{
	char *dir = ts_tmpdir(), *zeros = ts_join(dir, "zeros.keras"), *h5 = ts_join(dir, "h5_zeros.keras");
	char *err = ts_join(dir, "err.txt"), *msg;
	long base, rss;
	size_t n;
	int code;
	struct stat st;
	write_bomb(zeros, 0, 0);
	write_bomb(h5, 1, 0);
	cr_assert_eq(stat(h5, &st), 0);
	cr_assert_lt(st.st_size, 8 << 20, "the bomb should be a few MB, is %lld bytes", (long long)st.st_size);

	cr_assert_eq(inspect_rss(ts_fixture("keras/FlowNet-ANN__keras3.9.2_mlp_adam.keras"), err, &base), 0);

	/* all zeros: refused at the first bytes (no HDF5 signature) */
	code = inspect_rss(zeros, err, &rss);
	msg = ts_read_file(err, &n);
	cr_assert_neq(code, 0);
	cr_assert(msg && strstr(msg, "model.weights.h5 is not an HDF5 file"), "stderr: %s", msg ? msg : "");
	cr_assert_lt(rss, base + 64 * 1024, "peak RSS %ld KiB, %ld KiB on a small .keras", rss, base);
	free(msg);

	/* HDF5 signature then zeros: refused while inflating, once past the ratio to the archive size */
	code = inspect_rss(h5, err, &rss);
	msg = ts_read_file(err, &n);
	cr_assert_neq(code, 0);
	cr_assert(msg && strstr(msg, "zip bomb: member inflates past"), "stderr: %s", msg ? msg : "");
	cr_assert_lt(rss, base + 64 * 1024, "peak RSS %ld KiB, %ld KiB on a small .keras", rss, base);
	fprintf(stderr, "keras_bomb: peak RSS of ckpt inspect: %ld KiB on a small .keras, %ld KiB on a %lld-byte archive "
		"whose member inflates to %u MiB\n", base, rss, (long long)st.st_size, NSEG);
	free(msg);

	/* the caller's memory budget caps what a member may declare, and a member may not inflate past what it declares */
	{
		ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
		ckpt_reader *r = NULL;
		char *liar = ts_join(dir, "liar.keras");
		o.memory_budget = 64u << 20;
		cr_assert_eq(ckpt_reader_open(&r, h5, &o), CKPT_ELIMIT);
		cr_assert(strstr(ckpt_error_last()->message, "declares 3758096384 bytes, cap is 67108864"), "%s",
			ckpt_error_last()->message);
		cr_assert_str_eq(ckpt_error_last()->variable, "model.weights.h5");
		write_bomb(liar, 1, 1u << 20);
		cr_assert_eq(ckpt_reader_open(&r, liar, NULL), CKPT_EFORMAT);
		cr_assert(strstr(ckpt_error_last()->message, "exceeds its declared size of 1048576 bytes"), "%s",
			ckpt_error_last()->message);
		free(liar);
	}
	ts_rmtree(dir);
	free(zeros);
	free(h5);
	free(err);
	free(dir);
}

/*
 * Memory-tier segments on one node (ckpt/tier.h): directories of files under
 * the tier directory, a SEGMENT header that checks them, commit by rename.
 *
 * The header is text, one field a line, its last line the crc32c of the
 * lines above it:
 *
 *     ckpt-tier-segment 1
 *     job run-1a2b3c4d
 *     step 12
 *     worker 0 of 1
 *     file ckpt.data-00000-of-00001 4096
 *     file ckpt.index 210 crc32c 0x1c2d3e4f
 *     crc32c 0x89abcdef
 *
 * Files are in /dev/shm, so the crc32c of the data files is not computed
 * again here: the TensorBundle index holds one per tensor, and the restore
 * verifies them before it assigns anything.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "tier_internal.h"

#define HEADER "SEGMENT"
#define MAGIC "ckpt-tier-segment 1"
#define MAX_FILES 64
#define MAX_HEADER (64u << 10)

int ckpt__tier_check_job(const char *job)
{
	if (!job || !*job || job[0] == '.' || strchr(job, '/') || strlen(job) > 200)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"memory tier job name '%s' must be 1 to 200 bytes, without '/', not starting with '.'",
			job ? job : "(null)");
	return CKPT_OK;
}

static int make_private_dir(const char *dir)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return ckpt__fail_errno(errno, dir, "cannot create the memory tier directory");
	struct stat st;
	if (lstat(dir, &st) < 0)
		return ckpt__fail_errno(errno, dir, "cannot stat the memory tier directory");
	if (!S_ISDIR(st.st_mode))
		return ckpt__fail(CKPT_EINVAL, dir, NULL, -1, "the memory tier directory is not a directory");
	if (st.st_uid != geteuid())
		return ckpt__fail(CKPT_EINVAL, dir, NULL, -1,
			"the memory tier directory belongs to uid %u, not to this user (%u)", (unsigned)st.st_uid,
			(unsigned)geteuid());
	/* readable by the job's user only */
	if ((st.st_mode & 077) && chmod(dir, 0700) < 0)
		return ckpt__fail_errno(errno, dir, "cannot make the memory tier directory private");
	return CKPT_OK;
}

int ckpt__tier_prepare_dir(const char *base, const char *job_dir)
{
	CKPT_TRY(make_private_dir(base));
	return make_private_dir(job_dir);
}

char *ckpt__tier_segment_path(const char *job_dir, int64_t step, int worker, int num_workers)
{
	return ckpt__asprintf("%s/step-%012" PRId64 ".w%d-of-%d", job_dir, step, worker, num_workers);
}

int ckpt__tier_parse_name(const char *name, int64_t *step, int *worker, int *num_workers)
{
	long long s;
	int w, nw, used = 0;
	if (strncmp(name, "step-", 5) != 0 || sscanf(name, "step-%lld.w%d-of-%d%n", &s, &w, &nw, &used) != 3 ||
		name[used] != '\0' || s < 0 || nw < 1 || w < 0 || w >= nw)
		return 0;
	*step = s;
	*worker = w;
	*num_workers = nw;
	return 1;
}

int ckpt__tier_remove_tree(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? CKPT_OK : ckpt__fail_errno(errno, path, "cannot stat");
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 && errno != ENOENT ? ckpt__fail_errno(errno, path, "cannot remove") : CKPT_OK;
	DIR *d = opendir(path);
	if (!d)
		return ckpt__fail_errno(errno, path, "cannot list");
	int rc = CKPT_OK;
	struct dirent *e;
	while (rc == CKPT_OK && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *p = ckpt__asprintf("%s/%s", path, e->d_name);
		if (!p) {
			rc = CKPT_ENOMEM;
			break;
		}
		/* a segment holds files only; a job directory holds segments: two levels at most below a job */
		struct stat cs;
		if (lstat(p, &cs) == 0 && S_ISDIR(cs.st_mode))
			rc = ckpt__tier_remove_tree(p);
		else if (unlink(p) < 0 && errno != ENOENT)
			rc = ckpt__fail_errno(errno, p, "cannot remove");
		ckpt__free(p);
	}
	closedir(d);
	if (rc == CKPT_OK && rmdir(path) < 0 && errno != ENOENT)
		rc = ckpt__fail_errno(errno, path, "cannot remove the directory");
	return rc;
}

int ckpt__tier_segment_begin(char **tmp_out, const char *job_dir, int64_t step, int worker, int num_workers)
{
	*tmp_out = NULL;
	char *tmp = ckpt__asprintf("%s/.tmp-step-%012" PRId64 ".w%d-of-%d", job_dir, step, worker, num_workers);
	if (!tmp)
		return CKPT_ENOMEM;
	/* one left by a killed save of this worker: it was never committed */
	int rc = ckpt__tier_remove_tree(tmp);
	if (rc == CKPT_OK && mkdir(tmp, 0700) < 0)
		rc = ckpt__fail_errno(errno, tmp, "cannot create the memory tier segment");
	if (rc < 0) {
		ckpt__free(tmp);
		return rc;
	}
	*tmp_out = tmp;
	return CKPT_OK;
}

typedef struct seg_file {
	char name[256];
	uint64_t size;
	int has_crc;
	uint32_t crc;
} seg_file;

static int is_index(const char *name)
{
	size_t n = strlen(name);
	return n > 6 && strcmp(name + n - 6, ".index") == 0;
}

static int file_crc(uint32_t *out, const char *path, uint64_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ckpt__fail_errno(errno, path, "cannot open");
	unsigned char buf[1 << 16];
	uint32_t crc = 0;
	uint64_t done = 0;
	int rc = CKPT_OK;
	while (done < size) {
		size_t want = size - done < sizeof(buf) ? (size_t)(size - done) : sizeof(buf);
		ssize_t got = pread(fd, buf, want, (off_t)done);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			rc = got < 0 ? ckpt__fail_errno(errno, path, "cannot read")
				     : ckpt__fail(CKPT_EFORMAT, path, NULL, (int64_t)done, "file shorter than its header says");
			break;
		}
		crc = ckpt_crc32c_extend(crc, buf, (size_t)got);
		done += (uint64_t)got;
	}
	close(fd);
	*out = crc;
	return rc;
}

/*
 * The files of a segment directory (not the header), with sizes; when `crc`,
 * the index's crc32c (every file's when `crc` is 2) and files made private.
 */
static int list_files(seg_file *f, size_t *n, const char *dir, int crc, const ckpt__tier_slots *known)
{
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return ckpt__fail_errno(errno, dir, "cannot list the memory tier segment");
	int rc = CKPT_OK;
	struct dirent *e;
	while (rc == CKPT_OK && (e = readdir(d))) {
		if (e->d_name[0] == '.' || !strcmp(e->d_name, HEADER))
			continue;
		if (*n == MAX_FILES || strlen(e->d_name) >= sizeof(f->name)) {
			rc = ckpt__fail(CKPT_ELIMIT, dir, e->d_name, -1, "more than %d files or a name too long in a segment",
				MAX_FILES);
			break;
		}
		seg_file *s = &f[(*n)++];
		memset(s, 0, sizeof(*s));
		snprintf(s->name, sizeof(s->name), "%s", e->d_name);
		char *p = ckpt__asprintf("%s/%s", dir, e->d_name);
		struct stat st;
		if (!p)
			rc = CKPT_ENOMEM;
		else if (stat(p, &st) < 0)
			rc = ckpt__fail_errno(errno, p, "cannot stat");
		else {
			s->size = (uint64_t)st.st_size;
			if ((crc && is_index(s->name)) || crc == 2) {
				s->has_crc = 1;
				uint64_t ksize;
				int kcrc = 0;
				if (!ckpt__tier_slots_known(known, p, &ksize, &s->crc, &kcrc) || !kcrc)
					rc = file_crc(&s->crc, p, s->size);
			}
			if (rc == CKPT_OK && crc && chmod(p, 0600) < 0)
				rc = ckpt__fail_errno(errno, p, "cannot make the segment file private");
		}
		ckpt__free(p);
	}
	closedir(d);
	return rc;
}

static int cmp_files(const void *a, const void *b)
{
	return strcmp(((const seg_file *)a)->name, ((const seg_file *)b)->name);
}

/* The header text of a segment holding f[0..n) (sorted), crc line included; caller frees. */
static char *header_text(const seg_file *f, size_t n, const char *job, int64_t step, int worker, int num_workers)
{
	size_t cap = 256 + strlen(job) + n * 320, len = 0;
	char *t = ckpt__malloc(cap);
	if (!t)
		return NULL;
	len += (size_t)snprintf(t + len, cap - len, MAGIC "\njob %s\nstep %" PRId64 "\nworker %d of %d\n", job, step,
		worker, num_workers);
	for (size_t i = 0; i < n; i++) {
		len += (size_t)snprintf(t + len, cap - len, "file %s %" PRIu64, f[i].name, f[i].size);
		if (f[i].has_crc)
			len += (size_t)snprintf(t + len, cap - len, " crc32c 0x%08x", (unsigned)f[i].crc);
		len += (size_t)snprintf(t + len, cap - len, "\n");
	}
	snprintf(t + len, cap - len, "crc32c 0x%08x\n", (unsigned)ckpt_crc32c_extend(0, t, len));
	return t;
}

int ckpt__tier_write_file(const char *path, const void *p, uint64_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return ckpt__fail_errno(errno, path, "cannot create");
	uint64_t done = 0;
	while (done < n) {
		ssize_t w = write(fd, (const unsigned char *)p + done, (size_t)(n - done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int e = errno;
			close(fd);
			return ckpt__fail_errno(e, path, "cannot write");
		}
		done += (uint64_t)w;
	}
	if (close(fd) < 0)
		return ckpt__fail_errno(errno, path, "cannot close");
	return CKPT_OK;
}

int ckpt__tier_segment_commit(uint64_t *bytes, const char *tmp, const char *final, const char *job, int64_t step,
	int worker, int num_workers, int crc_all, const ckpt__tier_slots *known)
{
	seg_file f[MAX_FILES];
	size_t n = 0;
	CKPT_TRY(list_files(f, &n, tmp, crc_all ? 2 : 1, known));
	qsort(f, n, sizeof(f[0]), cmp_files);
	char *text = header_text(f, n, job, step, worker, num_workers);
	char *hp = ckpt__asprintf("%s/" HEADER, tmp);
	int rc = text && hp ? ckpt__tier_write_file(hp, text, strlen(text)) : CKPT_ENOMEM;
	ckpt__free(text);
	ckpt__free(hp);
	/* a step saved again (a restart that restored an older one) replaces the old segment of that name */
	if (rc == CKPT_OK)
		rc = ckpt__tier_remove_tree(final);
	if (rc == CKPT_OK && rename(tmp, final) < 0)
		rc = ckpt__fail_errno(errno, final, "cannot commit the memory tier segment");
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += f[i].size;
	*bytes = total;
	return rc;
}

/* Read all of `path` (`n` bytes, from its stat) into `dst`. */
static int read_into(void *dst, uint64_t n, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ckpt__fail_errno(errno, path, "cannot open");
	uint64_t done = 0;
	int rc = CKPT_OK;
	while (rc == CKPT_OK && done < n) {
		ssize_t got = pread(fd, (unsigned char *)dst + done, (size_t)(n - done), (off_t)done);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			rc = got < 0 ? ckpt__fail_errno(errno, path, "cannot read")
				     : ckpt__fail(CKPT_EFORMAT, path, NULL, (int64_t)done, "file shrank while read");
		else
			done += (uint64_t)got;
	}
	close(fd);
	return rc;
}

int ckpt__tier_read_whole(void **out, uint64_t *len, const char *path)
{
	*out = NULL;
	*len = 0;
	struct stat st;
	if (stat(path, &st) < 0)
		return ckpt__fail_errno(errno, path, "cannot stat");
	uint64_t n = (uint64_t)st.st_size;
	unsigned char *b = ckpt__malloc(n ? (size_t)n : 1);
	if (!b)
		return CKPT_ENOMEM;
	int rc = read_into(b, n, path);
	if (rc < 0) {
		ckpt__free(b);
		return rc;
	}
	*out = b;
	*len = n;
	return CKPT_OK;
}

static int read_small(char **out, const char *path)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? ckpt__fail(CKPT_ENOTFOUND, path, NULL, -1, "segment header missing")
				       : ckpt__fail_errno(errno, path, "cannot open");
	char *buf = ckpt__malloc(MAX_HEADER + 1);
	size_t len = 0;
	int rc = buf ? CKPT_OK : CKPT_ENOMEM;
	while (rc == CKPT_OK && len < MAX_HEADER) {
		ssize_t got = read(fd, buf + len, MAX_HEADER - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			rc = ckpt__fail_errno(errno, path, "cannot read");
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	close(fd);
	if (rc == CKPT_OK && len == MAX_HEADER)
		rc = ckpt__fail(CKPT_ELIMIT, path, NULL, -1, "segment header larger than %u bytes", MAX_HEADER);
	if (rc < 0) {
		ckpt__free(buf);
		return rc;
	}
	buf[len] = '\0';
	*out = buf;
	return CKPT_OK;
}

int ckpt__tier_segment_check(uint64_t *bytes, const char *seg, const char *job, int64_t step, int worker,
	int num_workers)
{
	*bytes = 0;
	char *hp = ckpt__asprintf("%s/" HEADER, seg);
	if (!hp)
		return CKPT_ENOMEM;
	char *stored = NULL;
	int rc = read_small(&stored, hp);
	seg_file f[MAX_FILES];
	size_t n = 0;
	if (rc == CKPT_OK)
		rc = list_files(f, &n, seg, 0, NULL);
	if (rc == CKPT_OK) {
		qsort(f, n, sizeof(f[0]), cmp_files);
		/* the crc32c of the index, and of every file whose header line states one: recomputed below */
		for (size_t i = 0; i < n && rc == CKPT_OK; i++) {
			char line[sizeof(f[i].name) + 64];
			snprintf(line, sizeof(line), "\nfile %.255s %" PRIu64 " crc32c ", f[i].name, f[i].size);
			if (!is_index(f[i].name) && !strstr(stored, line))
				continue;
			char *p = ckpt__asprintf("%s/%s", seg, f[i].name);
			rc = p ? file_crc(&f[i].crc, p, f[i].size) : CKPT_ENOMEM;
			f[i].has_crc = 1;
			ckpt__free(p);
		}
	}
	char *want = rc == CKPT_OK ? header_text(f, n, job, step, worker, num_workers) : NULL;
	if (rc == CKPT_OK && !want)
		rc = CKPT_ENOMEM;
	if (rc == CKPT_OK && strcmp(want, stored) != 0) {
		/* name the first line that differs */
		size_t i = 0, line = 1;
		for (; want[i] && want[i] == stored[i]; i++)
			if (want[i] == '\n')
				line++;
		rc = ckpt__fail(CKPT_ECHECKSUM, hp, NULL, (int64_t)i,
			"memory tier segment does not match its header (line %zu): the files changed or the header is damaged",
			line);
	}
	for (size_t i = 0; rc == CKPT_OK && i < n; i++)
		*bytes += f[i].size;
	ckpt__free(want);
	ckpt__free(stored);
	ckpt__free(hp);
	return rc;
}

DIR *ckpt__tier_open_job(const char *job_dir, int *rc)
{
	DIR *d = opendir(job_dir);
	*rc = d || errno == ENOENT ? CKPT_OK : ckpt__fail_errno(errno, job_dir, "cannot list the memory tier");
	return d;
}

int ckpt__tier_free_bytes(uint64_t *out, const char *dir)
{
	struct statvfs sv;
	if (statvfs(dir, &sv) < 0)
		return ckpt__fail_errno(errno, dir, "cannot read the free space of the memory tier");
	*out = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
	return CKPT_OK;
}

/* The commit record of a multi-process step (tier_mw.c): text, its last line the crc32c of the lines above. */
static char *marker_text(const char *job, int64_t step, int num_workers)
{
	char *t = ckpt__asprintf("ckpt-tier-commit 1\njob %s\nstep %" PRId64 "\nworkers %d\n", job, step, num_workers);
	if (!t)
		return NULL;
	char *full = ckpt__asprintf("%scrc32c 0x%08x\n", t, (unsigned)ckpt_crc32c_extend(0, t, strlen(t)));
	ckpt__free(t);
	return full;
}

char *ckpt__tier_marker_path(const char *job_dir, int64_t step, int num_workers)
{
	return ckpt__asprintf("%s/commit-%012" PRId64 ".of-%d", job_dir, step, num_workers);
}

int ckpt__tier_parse_marker(const char *name, int64_t *step, int *num_workers)
{
	long long s;
	int nw, used = 0;
	if (strncmp(name, "commit-", 7) != 0 || sscanf(name, "commit-%lld.of-%d%n", &s, &nw, &used) != 2 ||
		name[used] != '\0' || s < 0 || nw < 1)
		return 0;
	*step = s;
	*num_workers = nw;
	return 1;
}

int ckpt__tier_marker_write(const char *job_dir, const char *job, int64_t step, int num_workers)
{
	char *final = ckpt__tier_marker_path(job_dir, step, num_workers);
	char *tmp = final ? ckpt__asprintf("%s/.tmp-commit-%012" PRId64 ".of-%d", job_dir, step, num_workers) : NULL;
	char *text = marker_text(job, step, num_workers);
	int rc = final && tmp && text ? ckpt__tier_write_file(tmp, text, strlen(text)) : CKPT_ENOMEM;
	/* renamed whole: a node holds the record of step N or not, never a part of it */
	if (rc == CKPT_OK && rename(tmp, final) < 0)
		rc = ckpt__fail_errno(errno, final, "cannot commit the memory tier step");
	ckpt__free(text);
	ckpt__free(tmp);
	ckpt__free(final);
	return rc;
}

int ckpt__tier_marker_check(const char *job_dir, const char *job, int64_t step, int num_workers)
{
	char *p = ckpt__tier_marker_path(job_dir, step, num_workers);
	char *want = marker_text(job, step, num_workers), *stored = NULL;
	int rc = p && want ? read_small(&stored, p) : CKPT_ENOMEM;
	if (rc == CKPT_OK && strcmp(stored, want) != 0)
		rc = ckpt__fail(CKPT_ECHECKSUM, p, NULL, -1, "memory tier commit record damaged");
	ckpt__free(stored);
	ckpt__free(want);
	ckpt__free(p);
	return rc;
}

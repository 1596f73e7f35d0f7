/* Streaming a .keras member into an unnamed temporary file (member_spool.h). */
#define _GNU_SOURCE /* O_TMPFILE, memfd_create */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include "formats/format.h"
#include "formats/keras_archive/member_spool.h"

#define SPOOL_CHUNK (1u << 20)

/* An unnamed file nobody else can open, gone when closed: disk first (page cache, reclaimable), else memory. */
static int spool_file(const char *path)
{
	const char *dir = getenv("TMPDIR");
	int fd = -1;
	if (dir && *dir)
		fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		fd = memfd_create("ckpt-keras-member", MFD_CLOEXEC);
	if (fd < 0)
		return ckpt__fail_errno(errno, path, "no temporary file for model.weights.h5 (O_TMPFILE in $TMPDIR or /tmp, memfd)");
	return fd;
}

static int write_all(int fd, const char *p, size_t n, uint64_t at, const char *path)
{
	while (n) {
		ssize_t k = pwrite(fd, p, n, (off_t)at);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return ckpt__fail_errno(k < 0 ? errno : ENOSPC, path,
				"writing model.weights.h5 to a temporary file failed at byte %llu", (unsigned long long)at);
		p += k;
		n -= (size_t)k;
		at += (uint64_t)k;
	}
	return CKPT_OK;
}

int ckpt__zip_spool_member(struct archive *a, const char *path, const char *name, int64_t declared, uint64_t cap,
	uint64_t archive_size, const void *magic, size_t magic_len, int *fd_out, uint64_t *n_out)
{
	char *buf;
	uint64_t have = 0;
	int fd, rc = CKPT_OK;
	*fd_out = -1;
	*n_out = 0;
	if (declared >= 0 && (uint64_t)declared > cap)
		return ckpt__fail(CKPT_ELIMIT, path, name, -1, "member declares %lld bytes, cap is %llu", (long long)declared,
			(unsigned long long)cap);
	if ((fd = spool_file(path)) < 0)
		return fd;
	if (!(buf = ckpt__malloc(SPOOL_CHUNK))) {
		close(fd);
		return CKPT_ENOMEM;
	}
	for (;;) {
		la_ssize_t got = archive_read_data(a, buf, SPOOL_CHUNK);
		uint64_t total;
		if (got < 0) {
			const char *msg = archive_error_string(a);
			rc = ckpt__fail(msg && strstr(msg, "CRC") ? CKPT_ECHECKSUM : CKPT_EFORMAT, path, name, -1,
				"zip member unreadable: %s", msg ? msg : "unknown error");
			break;
		}
		if (got == 0)
			break;
		total = have + (uint64_t)got;
		/* every check before the bytes are kept */
		if (have < magic_len && memcmp(buf, (const char *)magic + have, (size_t)got < magic_len - have ? (size_t)got : magic_len - have) != 0) {
			rc = ckpt__fail(CKPT_EFORMAT, path, name, 0, "%s is not an HDF5 file: no signature at offset 0", name);
			break;
		}
		if (declared >= 0 && total > (uint64_t)declared) {
			rc = ckpt__fail(CKPT_EFORMAT, path, name, -1, "member data exceeds its declared size of %lld bytes", (long long)declared);
			break;
		}
		if (total > cap) {
			rc = ckpt__fail(CKPT_ELIMIT, path, name, -1, "member inflates past %llu bytes (the cap: memory budget or %llu)",
				(unsigned long long)cap, (unsigned long long)CKPT_MAX_ZIP_MEMBER_BYTES);
			break;
		}
		if (total > CKPT_ZIP_RATIO_FLOOR && total / CKPT_MAX_ZIP_RATIO > archive_size) {
			rc = ckpt__fail(CKPT_ELIMIT, path, name, -1,
				"zip bomb: member inflates past %llu bytes from a %llu-byte archive (ratio cap %d above %llu MiB)",
				(unsigned long long)total, (unsigned long long)archive_size, CKPT_MAX_ZIP_RATIO,
				(unsigned long long)(CKPT_ZIP_RATIO_FLOOR >> 20));
			break;
		}
		if ((rc = write_all(fd, buf, (size_t)got, have, path)) < 0)
			break;
		have = total;
	}
	ckpt__free(buf);
	if (rc >= 0 && declared >= 0 && have != (uint64_t)declared)
		rc = ckpt__fail(CKPT_EFORMAT, path, name, -1, "member holds %llu bytes, declared %lld", (unsigned long long)have,
			(long long)declared);
	if (rc >= 0 && have < magic_len)
		rc = ckpt__fail(CKPT_EFORMAT, path, name, 0, "%s is not an HDF5 file (%llu bytes)", name, (unsigned long long)have);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	*fd_out = fd;
	*n_out = have;
	return CKPT_OK;
}

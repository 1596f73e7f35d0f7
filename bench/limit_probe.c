/*
 * The whole-process limit of a restore into N copies, as issue 15 defines
 * it: a fresh process maps N buffers, preads the files into the first and
 * memcpys it into the others. Its buffers follow libckpt's page policy:
 * huge pages only with CKPT_HUGE_PAGES=1 (libckpt/util/hugebuf.c says why). Nothing is checked or parsed, so no
 * restore of the same bytes can be faster. Timed from outside, like the tool.
 *
 *   limit_probe N FILE...
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t total = 0, off = 0;
	int n, i, r;
	unsigned char **buf;

	if (argc < 3 || (n = atoi(argv[1])) < 1) {
		fprintf(stderr, "usage: limit_probe N FILE...\n");
		return 2;
	}
	for (i = 2; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		total += (size_t)st.st_size;
	}
	const char *hp = getenv("CKPT_HUGE_PAGES");
	int huge = hp && strcmp(hp, "1") == 0;
	buf = calloc((size_t)n, sizeof(*buf));
	for (r = 0; r < n; r++) {
		buf[r] = mmap(NULL, total ? total : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (buf[r] == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		if (huge)
			madvise(buf[r], total ? total : 1, MADV_HUGEPAGE);
	}
	for (i = 2; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY);
		struct stat st;
		size_t done = 0;
		if (fd < 0 || fstat(fd, &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		while (done < (size_t)st.st_size) {
			ssize_t got = pread(fd, buf[0] + off + done, (size_t)st.st_size - done, (off_t)done);
			if (got <= 0) {
				perror("pread");
				return 1;
			}
			done += (size_t)got;
		}
		off += done;
		close(fd);
	}
	for (r = 1; r < n; r++)
		memcpy(buf[r], buf[0], total);
	/* keep the copies observable so nothing is elided */
	return buf[n - 1][total / 2] == 0x5a && buf[0][0] == 0x5a ? 3 : 0;
}

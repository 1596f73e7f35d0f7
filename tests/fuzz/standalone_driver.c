/*
 * Replays inputs through a fuzz target without libFuzzer (any compiler), so
 * ordinary builds and CTest run the corpora and every past crash input:
 *
 *     fuzz_<target>_replay FILE_OR_DIR...
 *
 * Directories are walked recursively; arguments starting with '-' are
 * ignored so libFuzzer-style command lines still work. Exits 0 when every
 * input was replayed (a crash ends the process, as under libFuzzer).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static long replayed;

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "replay: cannot open %s\n", path);
		return 1;
	}
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			uint8_t *nb = realloc(buf, cap);
			if (!nb) {
				fclose(f);
				free(buf);
				return 1;
			}
			buf = nb;
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		if (!got)
			break;
		n += got;
	}
	fclose(f);
	/* libFuzzer hands over an exact-size heap copy: do the same so ASan sees overreads. */
	uint8_t *exact = malloc(n ? n : 1);
	if (!exact) {
		free(buf);
		return 1;
	}
	if (n)
		memcpy(exact, buf, n);
	free(buf);
	LLVMFuzzerTestOneInput(exact, n);
	free(exact);
	replayed++;
	return 0;
}

static int replay(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		fprintf(stderr, "replay: no such file or directory: %s\n", path);
		return 1;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path);
	struct dirent **ents;
	int n = scandir(path, &ents, NULL, alphasort);
	if (n < 0)
		return 1;
	int bad = 0;
	for (int i = 0; i < n; i++) {
		if (ents[i]->d_name[0] != '.') {
			size_t len = strlen(path) + strlen(ents[i]->d_name) + 2;
			char *child = malloc(len);
			if (child) {
				snprintf(child, len, "%s/%s", path, ents[i]->d_name);
				bad |= replay(child);
				free(child);
			}
		}
		free(ents[i]);
	}
	free(ents);
	return bad;
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	int bad = 0;
	for (int i = 1; i < argc; i++)
		if (argv[i][0] != '-')
			bad |= replay(argv[i]);
	printf("replayed %ld inputs\n", replayed);
	return bad;
}

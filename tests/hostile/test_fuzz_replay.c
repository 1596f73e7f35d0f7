/*
 * Replays every fuzz corpus file and every past crash input
 * (tests/fuzz/corpora/<target>/, tests/fuzz/regressions/<target>/) through
 * the same entry points the libFuzzer targets run (tests/fuzz/fuzz_entries.c,
 * compiled into this suite), so the normal test command catches a regression
 * without clang or libFuzzer. Each input runs in a child process (one fork
 * per crash, see rel_run_cases): a crash or a broken error contract is
 * reported with the file name and the suite goes on with the next input.
 */
#include "rel_common.h"
#include "tests/fuzz/fuzz_entries.h"
/* The entry points are one translation unit shared with the fuzzers. */
#include "tests/fuzz/fuzz_entries.c"

#define FUZZ_DIR CKPT_SOURCE_DIR "/tests/fuzz"

typedef struct replay_set {
	ckpt_fuzz_fn fn;
	char **paths;
	size_t n, cap;
} replay_set;

static void collect(replay_set *s, const char *dir)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0)
		return;
	for (int i = 0; i < n; i++) {
		if (ents[i]->d_name[0] != '.') {
			char *p = ts_join(dir, ents[i]->d_name);
			struct stat st;
			if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
				collect(s, p);
				free(p);
			} else {
				if (s->n == s->cap) {
					s->cap = s->cap ? 2 * s->cap : 64;
					s->paths = realloc(s->paths, s->cap * sizeof(*s->paths));
					cr_assert_not_null(s->paths);
				}
				s->paths[s->n++] = p;
			}
		}
		free(ents[i]);
	}
	free(ents);
}

static rel_outcome replay_one(void *ctx, size_t k)
{
	replay_set *s = ctx;
	rel_outcome o = { 0 };
	size_t n = 0;
	char *buf = ts_read_file(s->paths[k], &n);
	if (!buf) {
		o.rc = CKPT_EIO;
		snprintf(o.message, sizeof(o.message), "cannot read");
		return o;
	}
	/* an exact-size copy, as libFuzzer passes it, so overreads are caught */
	uint8_t *exact = malloc(n ? n : 1);
	cr_assert_not_null(exact);
	memcpy(exact, buf, n);
	free(buf);
	s->fn(exact, n);
	free(exact);
	return o;
}

static void replay(const char *target)
{
	replay_set s = { ckpt_fuzz_entry(target), NULL, 0, 0 };
	cr_assert_not_null(s.fn, "unknown fuzz target %s", target);
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/corpora/%s", FUZZ_DIR, target);
	collect(&s, dir);
	size_t ncorpus = s.n;
	snprintf(dir, sizeof(dir), "%s/regressions/%s", FUZZ_DIR, target);
	collect(&s, dir);
	cr_assert_gt(ncorpus, 0, "empty corpus for %s", target);
	rel_outcome *res = calloc(s.n, sizeof(*res));
	cr_assert_not_null(res);
	rel_run_cases(s.n, replay_one, &s, 1, res);
	size_t bad = 0;
	/* Log only failures: Criterion 2.4.1 exits 1 when a test logs a warning or an
	 * error even if every assertion passes (why this suite once exited 1 under ASan
	 * while passing: libhdf5 over-reads were logged as warnings). */
	for (size_t k = 0; k < s.n; k++) {
		if (res[k].signal || res[k].rc < 0) {
			cr_log_error("fuzz replay %s: %s: %s", target, s.paths[k], res[k].message);
			bad++;
		}
	}
	cr_log_info("fuzz replay %s: %zu corpus + %zu regression inputs, %zu failed", target, ncorpus, s.n - ncorpus,
		bad);
	for (size_t k = 0; k < s.n; k++)
		free(s.paths[k]);
	free(s.paths);
	free(res);
	cr_assert_eq(bad, 0, "%zu inputs crashed or broke the error contract (SIGABRT = contract violation, see stderr)",
		bad);
}

Test(fuzz_replay, tf_index, .timeout = 120) { replay("tf_index"); }
Test(fuzz_replay, tf_bundle, .timeout = 120) { replay("tf_bundle"); }
Test(fuzz_replay, object_graph, .timeout = 120) { replay("object_graph"); }
Test(fuzz_replay, state_file, .timeout = 120) { replay("state_file"); }
Test(fuzz_replay, keras_h5, .timeout = 120)
{
	if (!rel_rerun_where_malloc_may_fail())
		replay("keras_h5");
}
Test(fuzz_replay, keras_archive, .timeout = 120) { replay("keras_archive"); }
Test(fuzz_replay, keras_config, .timeout = 120) { replay("keras_config"); }
Test(fuzz_replay, safetensors, .timeout = 120) { replay("safetensors"); }
Test(fuzz_replay, gguf, .timeout = 120) { replay("gguf"); }
Test(fuzz_replay, saved_model, .timeout = 120) { replay("saved_model"); }

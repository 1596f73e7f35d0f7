/*
 * The core depends one way: scripts/include_graph.py finds the cycles among
 * libckpt/'s files (what includes what, which .c calls which file's
 * functions) and fails on any not in scripts/include_graph.known, a list
 * that only shrinks. It also fails when a struct that one file owns
 * (scripts/include_graph.owned: the restore session, opaque outside
 * restore_session.c) is defined anywhere else. The script itself is
 * checked on made-up trees: one with exactly one cycle of each kind, one
 * with an owned struct defined outside its owner.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "test_support.h"

#define SCRIPT CKPT_SOURCE_DIR "/scripts/include_graph.py"

/* Runs `cmd`, its output into out (NUL-terminated); returns its exit status. */
static int run(const char *cmd, char *out, size_t cap)
{
	FILE *p = popen(cmd, "r");
	cr_assert(p != NULL, "popen %s", cmd);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	cr_assert(WIFEXITED(st), "%s did not exit", cmd);
	return WEXITSTATUS(st);
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	cr_assert(f != NULL, "open %s", p);
	cr_assert(fputs(text, f) >= 0);
	cr_assert(fclose(f) == 0);
}

Test(include_graph, libckpt_has_no_new_cycle)
{
	static char out[1 << 16];
	int rc = run(TS_PYTHON " " SCRIPT " --check --known " CKPT_SOURCE_DIR "/scripts/include_graph.known --owned "
		CKPT_SOURCE_DIR "/scripts/include_graph.owned --layers " CKPT_SOURCE_DIR "/scripts/include_graph.layers "
		"--upward " CKPT_SOURCE_DIR "/scripts/include_graph.upward --door reader/format_registry.h "
		CKPT_SOURCE_DIR "/libckpt 2>&1", out, sizeof(out));
	cr_assert(strstr(out, "include cycles: ") != NULL && strstr(out, "call cycles: ") != NULL, "%s", out);
	cr_assert(strstr(out, "owned structs: 1, defined outside their owner: 0") != NULL,
		"a struct defined outside the file that owns it (scripts/include_graph.owned):\n%s", out);
	cr_assert(strstr(out, "not in the list: 0, listed but gone: 0, files in no layer: 0") != NULL,
		"an include or call up a layer (scripts/include_graph.layers) not in scripts/include_graph.upward, "
		"an entry there that is gone, or a file outside the layers:\n%s", out);
	cr_assert(strstr(out, "door reader/format_registry.h: 0 files around it") != NULL,
		"a file of libckpt/ reaches formats/ other than through reader/format_registry.h:\n%s", out);
	cr_assert_eq(rc, 0, "a dependency cycle not in scripts/include_graph.known:\n%s", out);
}

/* A made-up tree of two layers: a call up fails until listed, a listed edge that is gone fails, the door holds. */
Test(include_graph, finds_an_edge_up_a_layer_and_a_way_around_the_door)
{
	char dir[] = "/tmp/ckpt_layers_XXXXXX";
	cr_assert(mkdtemp(dir) != NULL);
	char p[600], cmd[2400], layers[600], upward[600];
	static char out[1 << 14];
	snprintf(p, sizeof(p), "%s/low", dir);
	cr_assert(mkdir(p, 0700) == 0);
	snprintf(p, sizeof(p), "%s/high", dir);
	cr_assert(mkdir(p, 0700) == 0);
	snprintf(p, sizeof(p), "%s/high/reg", dir);
	cr_assert(mkdir(p, 0700) == 0);
	snprintf(layers, sizeof(layers), "%s/layers", dir);
	snprintf(upward, sizeof(upward), "%s/upward", dir);
	write_file(dir, "layers", "# lowest first\nlow\nhigh\n");
	write_file(dir, "upward", "# none\n");
	write_file(dir, "low/l.c", "int l_fn(void);\nint l_fn(void)\n{\n\treturn 1;\n}\n");
	write_file(dir, "low/l2.c", "int l2_fn(void);\nint l2_fn(void)\n{\n\treturn 2;\n}\n");
	write_file(dir, "high/h.c", "int l2_fn(void);\nint h_fn(void);\nint h_fn(void)\n{\n\treturn l2_fn();\n}\n");
	write_file(dir, "high/reg/door.h", "#include \"formats/format.h\"\n");
	write_file(dir, "high/reg/door.c", "#include \"door.h\"\nconst void *pick(void)\n{\n\treturn &ckpt_format_x;\n}\n");
	snprintf(cmd, sizeof(cmd), TS_PYTHON " " SCRIPT " --check --layers %s --upward %s --door high/reg/door.h %s 2>&1",
		layers, upward, dir);
	int rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "upward: 0 (includes 0, calls 0), not in the list: 0") != NULL, "%s", out);
	cr_expect(strstr(out, "door high/reg/door.h: 0 files around it") != NULL, "%s", out);

	/* planted: the low layer calls up, and includes the backend interface past the door */
	write_file(dir, "low/l.c", "#include \"formats/format.h\"\nint h_fn(void);\nint l_fn(void);\n"
		"int l_fn(void)\n{\n\treturn h_fn() + (&ckpt_format_x != 0);\n}\n");
	rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "NEW UP call low/l.c -> high/h.c") != NULL, "%s", out);
	cr_expect(strstr(out, "DOOR low/l.c includes formats/format.h") != NULL, "%s", out);
	cr_expect(strstr(out, "DOOR low/l.c names the backend ckpt_format_x") != NULL, "%s", out);

	/* listed, the edge up is allowed; once gone, its entry fails until removed */
	write_file(dir, "low/l.c", "int h_fn(void);\nint l_fn(void);\nint l_fn(void)\n{\n\treturn h_fn();\n}\n");
	write_file(dir, "upward", "call low/l.c -> high/h.c\n");
	rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "upward: 1 (includes 0, calls 1), not in the list: 0, listed but gone: 0") != NULL, "%s", out);
	write_file(dir, "low/l.c", "int l_fn(void);\nint l_fn(void)\n{\n\treturn 1;\n}\n");
	rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "FIXED (remove from") != NULL && strstr(out, "listed but gone: 1") != NULL, "%s", out);

	/* a folder in no layer is reported */
	snprintf(p, sizeof(p), "%s/stray", dir);
	cr_assert(mkdir(p, 0700) == 0);
	write_file(dir, "upward", "# none\n");
	write_file(dir, "stray/s.c", "int s_fn(void);\nint s_fn(void)\n{\n\treturn 0;\n}\n");
	rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "NO LAYER stray/s.c") != NULL, "%s", out);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

Test(include_graph, finds_an_owned_struct_defined_elsewhere)
{
	char dir[] = "/tmp/ckpt_owned_XXXXXX";
	cr_assert(mkdtemp(dir) != NULL);
	char owned[600], cmd[1400];
	static char out[1 << 14];
	snprintf(owned, sizeof(owned), "%s/owned.list", dir);
	FILE *f = fopen(owned, "w");
	cr_assert(f != NULL);
	cr_assert(fputs("# struct owner\nsess sess.c\n", f) >= 0);
	cr_assert(fclose(f) == 0);
	write_file(dir, "sess.h", "/* opaque: struct sess { int n; } is in sess.c */\ntypedef struct sess sess;\nint sess_n(const sess *s);\n");
	write_file(dir, "sess.c", "#include \"sess.h\"\nstruct sess {\n\tint n;\n};\nint sess_n(const sess *s)\n{\n\treturn s->n;\n}\n");
	write_file(dir, "user.c", "#include \"sess.h\"\nint user(const sess *s)\n{\n\treturn sess_n(s);\n}\n");
	snprintf(cmd, sizeof(cmd), TS_PYTHON " " SCRIPT " --check --owned %s %s 2>&1", owned, dir);
	int rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "owned structs: 1, defined outside their owner: 0") != NULL, "%s", out);

	/* planted: the header defines the struct again, so user.c could reach into it */
	write_file(dir, "sess.h", "typedef struct sess sess;\nstruct sess {\n\tint n;\n};\nint sess_n(const sess *s);\n");
	rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "NOT OWNED struct sess defined in sess.h (owner: sess.c)") != NULL, "%s", out);
	cr_expect(strstr(out, "defined outside their owner: 1") != NULL, "%s", out);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

/* The session's fields are out of reach: a file that includes its header cannot compile a use of one. */
Test(include_graph, the_session_struct_is_opaque_outside_its_file)
{
	char dir[] = "/tmp/ckpt_opaque_XXXXXX";
	cr_assert(mkdtemp(dir) != NULL);
	char cmd[2048];
	static char out[1 << 14];
	const char *uses[] = { "ckpt__session_nvals(s)", "s->nvals" };
	for (int i = 0; i < 2; i++) {
		char src[512];
		snprintf(src, sizeof(src), "#include \"checkpoint/restore/restore_session.h\"\nsize_t f(const ckpt__session *s);\n"
			"size_t f(const ckpt__session *s)\n{\n\treturn %s;\n}\n", uses[i]);
		write_file(dir, "use.c", src);
		snprintf(cmd, sizeof(cmd), CKPT_C_COMPILER " -std=gnu11 -fsyntax-only -I" CKPT_SOURCE_DIR "/libckpt -I"
			CKPT_SOURCE_DIR "/libckpt/include -I" CKPT_SOURCE_DIR " -I" CKPT_BINARY_DIR " -I" CKPT_BINARY_DIR
			"/proto %s/use.c 2>&1", dir);
		int rc = run(cmd, out, sizeof(out));
		if (i == 0)
			cr_expect_eq(rc, 0, "the accessor does not compile:\n%s", out);
		else
			cr_expect(rc != 0 && strstr(out, "incomplete") != NULL, "a field of the session compiled:\n%s", out);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

Test(include_graph, finds_a_call_and_an_include_cycle)
{
	char dir[] = "/tmp/ckpt_graph_XXXXXX";
	cr_assert(mkdtemp(dir) != NULL);
	write_file(dir, "a.h", "#include \"b.h\"\nint a_fn(void);\n");
	write_file(dir, "b.h", "#include \"a.h\"\nint b_fn(void);\n");
	write_file(dir, "a.c", "#include \"a.h\"\n/* b_fn() in a comment is no call */\nint a_fn(void)\n{\n\treturn b_fn();\n}\n");
	write_file(dir, "b.c", "#include \"b.h\"\nstatic int own(void) { return 1; }\nint b_fn(void)\n{\n\treturn own() + a_fn();\n}\n");
	write_file(dir, "c.c", "#include \"a.h\"\nint c_fn(void)\n{\n\treturn a_fn();\n}\n");
	char cmd[1024];
	static char out[1 << 14];
	snprintf(cmd, sizeof(cmd), TS_PYTHON " " SCRIPT " --check %s 2>&1", dir);
	int rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "cycle include: a.h -> b.h -> a.h") != NULL, "%s", out);
	cr_expect(strstr(out, "cycle call: a.c -> b.c -> a.c") != NULL, "%s", out);
	cr_expect(strstr(out, "include cycles: 1") != NULL, "%s", out);
	cr_expect(strstr(out, "call cycles: 1") != NULL, "%s", out);

	/* with the one-way edge only (c.c -> a.c), nothing is found */
	write_file(dir, "b.c", "int b_fn(void)\n{\n\treturn 2;\n}\n");
	write_file(dir, "b.h", "int b_fn(void);\n");
	rc = run(cmd, out, sizeof(out));
	cr_expect_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "cycles: 0, not in the known list: 0") != NULL, "%s", out);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

/*
 * scope_mistakes: make each scope mistake (README.md, "4. What happens
 * outside the scope") on purpose, print the library's error, then show the
 * fix working.
 *
 *   1. the model built outside the scope, its optimizer (slots) inside
 *   2. a global model built before any scope, trained under a mirrored strategy
 *   3. a checkpoint loaded outside the scope, then trained under a strategy
 *   4. variables of one mirrored strategy used in another strategy's run
 *
 * Each mistake must fail with CKPT_ESCOPE and an error naming the variable.
 * Exit status 0 only when every mistake was caught and every fix worked.
 *
 *   scope_mistakes [--replicas N] [--dir DIR]   (DIR: scratch space, default a temp dir)
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mlp_model.h"

static mlp_data data;
/* Mistake 2: a model that lives in a global, built before any scope exists. */
static mlp_model global_model;

static int failures, caught;

/* Caught = ESCOPE, with the variable named in the error's variable or message. */
static void expect_caught(int rc, const char *what)
{
	const ckpt_error *e = ckpt_error_last();
	char buf[1024];
	int named = 0;
	const char *names[] = { "dense/kernel", "layer_with_weights-0/kernel", NULL };
	int i;

	ckpt_error_format(e, buf, sizeof buf);
	for (i = 0; names[i]; i++)
		if (strstr(buf, names[i]))
			named = 1;
	if (rc == CKPT_ESCOPE && e->code == CKPT_ESCOPE && named) {
		printf("    library: %s: %s\n", ckpt_status_name(rc), buf);
		printf("    caught: yes (%s, names the variable)\n", ckpt_status_name(rc));
		caught++;
		return;
	}
	failures++;
	if (rc == CKPT_OK)
		printf("    NOT CAUGHT: %s succeeded\n", what);
	else
		printf("    NOT CAUGHT properly: %s returned %s (want CKPT_ESCOPE naming the variable): %s\n",
			what, ckpt_status_name(rc), buf);
}

static void expect_ok(int rc, const char *what)
{
	char buf[1024];

	if (rc == CKPT_OK) {
		printf("    fix: %s -> OK\n", what);
		return;
	}
	failures++;
	printf("    FIX FAILED: %s: %s: %s\n", what, ckpt_status_name(rc),
		ckpt_error_format(ckpt_error_last(), buf, sizeof buf));
}

static int build_in(mlp_model *m, ckpt_strategy *s, int with_slots)
{
	mlp_rng init;
	int rc;

	mlp_rng_seed(&init, 7);
	if (s)
		ckpt_scope_enter(s);
	rc = mlp_build_model(m, &init);
	if (rc == CKPT_OK && with_slots)
		rc = mlp_build_slots(m);
	if (s)
		ckpt_scope_exit(s);
	return rc;
}

static void mistake_outside_model(ckpt_strategy *s)
{
	mlp_model m;
	int rc;

	printf("\n[1] model built outside the scope, optimizer slots created inside\n");
	rc = build_in(&m, NULL, 0);
	if (rc == CKPT_OK) {
		ckpt_scope_enter(s);
		rc = mlp_build_slots(&m);
		ckpt_scope_exit(s);
		expect_caught(rc, "creating Adam slots inside the scope for a model built outside");
	} else
		expect_ok(rc, "building the model");
	mlp_model_free(&m);

	rc = build_in(&m, s, 1);
	expect_ok(rc, "model and slots both created inside the scope");
	mlp_model_free(&m);
}

static void mistake_global_model(ckpt_strategy *s)
{
	mlp_model m;
	int rc;

	printf("\n[2] global model built before the scope, trained under the mirrored strategy\n");
	rc = mlp_train_step(&global_model, s, &data, 0, NULL);
	expect_caught(rc, "training the global model under the mirrored strategy");

	rc = build_in(&m, s, 1);
	if (rc == CKPT_OK)
		rc = mlp_train_step(&m, s, &data, 0, NULL);
	expect_ok(rc, "model built inside the scope, one training step");
	mlp_model_free(&m);
}

static void mistake_load_outside(ckpt_strategy *s, const char *dir)
{
	ckpt_checkpoint *ck = NULL;
	char prefix[4096];
	mlp_model saved, m;
	int rc;

	printf("\n[3] checkpoint loaded outside the scope, then trained under the strategy\n");
	snprintf(prefix, sizeof prefix, "%s/ckpt-1", dir);
	rc = build_in(&saved, s, 1);
	if (rc == CKPT_OK)
		rc = ckpt_checkpoint_write(saved.ckpt, prefix);
	mlp_model_free(&saved);
	if (rc < 0) {
		expect_ok(rc, "writing the checkpoint to load");
		return;
	}

	rc = ckpt_checkpoint_load(&ck, NULL, prefix, NULL); /* no scope: plain variables */
	if (rc == CKPT_OK)
		rc = mlp_model_bind(&m, ck);
	else
		memset(&m, 0, sizeof m);
	if (rc == CKPT_OK) {
		printf("    loaded outside: %s variables\n",
			ckpt_var_kind_name(ckpt_variable_kind(m.kernel[0])));
		rc = mlp_train_step(&m, s, &data, 0, NULL);
		expect_caught(rc, "fine-tuning a checkpoint loaded outside the scope");
	} else
		expect_ok(rc, "loading the checkpoint");
	mlp_model_free(&m);

	ck = NULL;
	ckpt_scope_enter(s);
	rc = ckpt_checkpoint_load(&ck, NULL, prefix, NULL); /* inside: mirrored */
	ckpt_scope_exit(s);
	if (rc == CKPT_OK)
		rc = mlp_model_bind(&m, ck);
	else
		memset(&m, 0, sizeof m);
	if (rc == CKPT_OK && ckpt_variable_kind(m.kernel[0]) != CKPT_VAR_MIRRORED) {
		printf("    loaded inside the scope but the kernel is %s\n",
			ckpt_var_kind_name(ckpt_variable_kind(m.kernel[0])));
		rc = CKPT_ERROR;
	}
	if (rc == CKPT_OK)
		rc = mlp_train_step(&m, s, &data, 0, NULL);
	expect_ok(rc, "loaded inside the scope (mirrored), one training step");
	mlp_model_free(&m);
}

static void mistake_other_strategy(ckpt_strategy *s, int replicas)
{
	ckpt_strategy *other = NULL;
	mlp_model m;
	int rc;

	printf("\n[4] variables of one mirrored strategy used in another strategy's run\n");
	rc = build_in(&m, s, 1);
	if (rc == CKPT_OK)
		rc = ckpt_strategy_mirrored_new(&other, replicas);
	if (rc == CKPT_OK) {
		printf("    model built in %s, run under %s\n", ckpt_strategy_describe(s),
			ckpt_strategy_describe(other));
		rc = mlp_train_step(&m, other, &data, 0, NULL);
		expect_caught(rc, "running another strategy's step on the model");
		rc = mlp_train_step(&m, s, &data, 0, NULL);
		expect_ok(rc, "run under the strategy whose scope created it");
	} else
		expect_ok(rc, "building the model");
	mlp_model_free(&m);
	ckpt_strategy_free(other);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int main(int argc, char **argv)
{
	char tmpl[] = "/tmp/scope_mistakes.XXXXXX";
	const char *dir = NULL;
	ckpt_strategy *s = NULL;
	int replicas = 2, i, rc, made_dir = 0;
	mlp_rng rng;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--replicas") == 0)
			replicas = mlp_parse_int("scope_mistakes", argv[i], i + 1 < argc ? argv[i + 1] : NULL), i++;
		else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
			dir = argv[++i];
		else {
			fprintf(stderr, "usage: scope_mistakes [--replicas N] [--dir DIR]\n");
			return 2;
		}
	}
	if (replicas < 2 || MLP_GLOBAL_BATCH % replicas != 0) {
		fprintf(stderr, "scope_mistakes: --replicas must be >= 2 and divide %d\n", MLP_GLOBAL_BATCH);
		return 2;
	}
	if (!dir) {
		dir = mkdtemp(tmpl);
		if (!dir) {
			perror("scope_mistakes: mkdtemp");
			return 1;
		}
		made_dir = 1;
	}

	/* Before any strategy or scope exists: the dataset and the global model. */
	mlp_rng_seed(&rng, 42);
	mlp_data_make(&data, &rng);
	rc = build_in(&global_model, NULL, 1);
	if (rc == CKPT_OK)
		rc = ckpt_strategy_mirrored_new(&s, replicas);
	if (rc < 0) {
		mlp_report("scope_mistakes", rc);
		return 1;
	}
	printf("strategy: %s; every mistake below must fail with CKPT_ESCOPE naming the variable\n",
		ckpt_strategy_describe(s));

	mistake_outside_model(s);
	mistake_global_model(s);
	mistake_load_outside(s, dir);
	mistake_other_strategy(s, replicas);

	mlp_model_free(&global_model);
	ckpt_strategy_free(s);
	if (made_dir)
		nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	printf("\n%s: %d of 4 mistakes caught, %s\n", failures ? "FAILED" : "OK", caught,
		failures ? "see above" : "every fix worked");
	return failures ? 1 : 0;
}

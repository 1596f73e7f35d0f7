/*
 * mlp_mirrored: train the MLP under a mirrored strategy, a checkpoint per
 * epoch. The standard example of what goes inside the scope:
 *
 *   outside  the dataset (read / generated), the training loop
 *   inside   build_model(): weights, optimizer, metric, step counter,
 *            and the optimizer's slots
 *
 *   mlp_mirrored [--replicas N] [--epochs E] [--dir DIR] [--seed S] [--max-to-keep K]
 *
 * Resume a run with finetune_resume --dir DIR.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlp_model.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: mlp_mirrored [--replicas N] [--epochs E] [--dir DIR] [--seed S] [--max-to-keep K]\n"
		"  --replicas N     mirrored replicas, must divide the global batch of %d (default 2)\n"
		"  --epochs E       epochs to train (default 2)\n"
		"  --dir DIR        checkpoint directory, one checkpoint per epoch (default mlp_ckpts)\n"
		"  --seed S         dataset / initialisation seed (default 42)\n"
		"  --max-to-keep K  checkpoints kept by the manager (default 5)\n", MLP_GLOBAL_BATCH);
}

int main(int argc, char **argv)
{
	const char *prog = "mlp_mirrored", *dir = "mlp_ckpts";
	int replicas = 2, epochs = 2, seed = 42, keep = 5, i, rc, reported = 0;
	ckpt_strategy *s = NULL;
	ckpt_manager *mgr = NULL;
	mlp_epoch_result res;
	mlp_model m;
	mlp_data *data;
	mlp_rng rng;

	memset(&m, 0, sizeof m);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--replicas") == 0)
			replicas = mlp_parse_int(prog, a, val), i++;
		else if (strcmp(a, "--epochs") == 0)
			epochs = mlp_parse_int(prog, a, val), i++;
		else if (strcmp(a, "--seed") == 0)
			seed = mlp_parse_int(prog, a, val), i++;
		else if (strcmp(a, "--max-to-keep") == 0)
			keep = mlp_parse_int(prog, a, val), i++;
		else if (strcmp(a, "--dir") == 0 && val)
			dir = val, i++;
		else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "%s: unknown or incomplete option '%s'\n", prog, a);
			usage(stderr);
			return 2;
		}
	}
	if (MLP_GLOBAL_BATCH % replicas != 0) {
		fprintf(stderr, "%s: --replicas %d does not divide the global batch of %d\n", prog, replicas,
			MLP_GLOBAL_BATCH);
		return 2;
	}

	/* Outside the scope: the dataset. */
	data = malloc(sizeof *data);
	if (!data)
		return 1;
	mlp_rng_seed(&rng, (uint64_t)seed);
	mlp_data_make(data, &rng);

	rc = ckpt_strategy_mirrored_new(&s, replicas);
	if (rc < 0) {
		free(data);
		return mlp_report(prog, rc), 1;
	}
	printf("%s: global batch %d, %d per replica, %d steps per epoch\n", ckpt_strategy_describe(s),
		MLP_GLOBAL_BATCH, MLP_GLOBAL_BATCH / replicas, MLP_STEPS_PER_EPOCH);

	/* Inside the scope: everything that owns state. */
	rc = ckpt_scope_enter(s);
	if (rc == CKPT_OK) {
		rc = mlp_build_model(&m, &rng);
		if (rc == CKPT_OK)
			rc = mlp_build_slots(&m);
		if (rc == CKPT_OK)
			rc = ckpt_manager_new(&mgr, m.ckpt, dir, keep);
		ckpt_scope_exit(s);
	}
	if (rc == CKPT_OK && ckpt_manager_latest(mgr)) {
		fprintf(stderr, "%s: %s already holds checkpoints (latest %s); resume with "
			"finetune_resume --dir %s, or pick a fresh --dir\n", prog, dir, ckpt_manager_latest(mgr), dir);
		rc = CKPT_EINVAL;
		reported = 1;
	} else if (rc == CKPT_OK) {
		mlp_print_variables(&m, "model built inside the scope: ");
		/* Outside the scope: the loop; ckpt_strategy_run enters replica context. */
		rc = mlp_fit(&m, s, data, mgr, epochs, &res);
		if (rc == CKPT_OK)
			printf("done: %d epochs, final loss %.6f, mae %.6f, latest checkpoint %s\n", epochs, res.loss,
				res.mae, ckpt_manager_latest(mgr));
	}
	if (rc < 0 && !reported)
		mlp_report(prog, rc);
	ckpt_manager_free(mgr);
	mlp_model_free(&m);
	ckpt_strategy_free(s);
	free(data);
	return rc == CKPT_OK ? 0 : 1;
}

/*
 * finetune_resume: continue an mlp_mirrored run from its latest checkpoint,
 * in a new process, under a mirrored strategy.
 *
 * Inside the scope: build_model() recreates the tree, the manager restores
 * the latest checkpoint into it (every replica gets the value; the Adam
 * slots do not exist yet, so their values are held), then the slots are
 * created and receive their values on creation, as Keras does on the
 * first apply_gradients after a restore. Outside: the same loop continues
 * from the saved step, RNG state and data position, so with the same number
 * of replicas the result is bit-identical to a run that never stopped.
 *
 *   finetune_resume --dir DIR [--replicas N] [--epochs E] [--seed S] [--max-to-keep K]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlp_model.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: finetune_resume --dir DIR [--replicas N] [--epochs E] [--seed S] [--max-to-keep K]\n"
		"  --dir DIR        checkpoint directory written by mlp_mirrored (required)\n"
		"  --replicas N     mirrored replicas, must divide the global batch of %d (default 2)\n"
		"  --epochs E       further epochs to train (default 2)\n"
		"  --seed S         dataset seed; must match the original run (default 42)\n"
		"  --max-to-keep K  checkpoints kept by the manager (default 5)\n", MLP_GLOBAL_BATCH);
}

/* Inside the scope: rebuild, restore, create the slots (restored on create). */
static int restore_inside_scope(mlp_model *m, ckpt_manager **mgr, const char *dir, int keep, mlp_rng *rng)
{
	ckpt_restore_status *st = NULL;
	const char *from = NULL;
	size_t now, held;
	int rc;

	rc = mlp_build_model(m, rng);
	if (rc == CKPT_OK)
		rc = ckpt_manager_new(mgr, m->ckpt, dir, keep);
	if (rc == CKPT_OK)
		rc = ckpt_status_of(from = ckpt_manager_restore_latest(&st, *mgr));
	if (rc == CKPT_OK && !from) {
		fprintf(stderr, "finetune_resume: no checkpoint in %s; train first with mlp_mirrored --dir %s\n", dir,
			dir);
		ckpt_error_clear(); /* reported here already */
		return CKPT_ENOTFOUND;
	}
	if (rc < 0)
		return rc;
	now = ckpt_restore_status_num_restored(st);
	held = ckpt_restore_status_num_unmatched(st);
	rc = mlp_build_slots(m);
	if (rc == CKPT_OK) {
		printf("restored %s: %zu values assigned to every replica, %zu held for the optimizer's slots and "
			"applied when they were created\n", from, now, ckpt_restore_status_num_restored(st) - now);
		if (held != ckpt_restore_status_num_restored(st) - now)
			printf("  (%zu values were held; %zu still unmatched)\n", held,
				ckpt_restore_status_num_unmatched(st));
		/* Everything in the file went somewhere, every live variable got a value. */
		rc = ckpt_restore_status_assert_consumed(st);
	}
	ckpt_restore_status_free(st);
	return rc;
}

int main(int argc, char **argv)
{
	const char *prog = "finetune_resume", *dir = NULL;
	int replicas = 2, epochs = 2, seed = 42, keep = 5, i, rc;
	ckpt_strategy *s = NULL;
	ckpt_manager *mgr = NULL;
	mlp_epoch_result res;
	int64_t done, step = 0, iter = 0;
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
	if (!dir || MLP_GLOBAL_BATCH % replicas != 0) {
		usage(stderr);
		return 2;
	}

	/* Outside the scope: the dataset, regenerated from the same seed. */
	data = malloc(sizeof *data);
	if (!data)
		return 1;
	mlp_rng_seed(&rng, (uint64_t)seed);
	mlp_data_make(data, &rng);

	rc = ckpt_strategy_mirrored_new(&s, replicas);
	if (rc == CKPT_OK) {
		printf("%s: global batch %d, %d per replica\n", ckpt_strategy_describe(s), MLP_GLOBAL_BATCH,
			MLP_GLOBAL_BATCH / replicas);
		rc = ckpt_scope_enter(s);
		if (rc == CKPT_OK) {
			rc = restore_inside_scope(&m, &mgr, dir, keep, &rng);
			ckpt_scope_exit(s);
		}
	}
	if (rc == CKPT_OK) {
		mlp_print_variables(&m, "restored inside the scope: ");
		step = m.state.step; /* host state: the restore wrote it in place */
		ckpt_variable_read(m.iter, &iter, sizeof iter);
		done = mlp_epochs_done(&m);
		printf("resuming after epoch %lld (step %lld, optimizer iteration %lld) for %d more epochs\n",
			(long long)done, (long long)step, (long long)iter, epochs);
		/* Outside the scope: the loop continues where the checkpoint left off. */
		rc = mlp_fit(&m, s, data, mgr, done + epochs, &res);
		if (rc == CKPT_OK)
			printf("done: %lld epochs in all, final loss %.6f, mae %.6f, latest checkpoint %s\n",
				(long long)(done + epochs), res.loss, res.mae, ckpt_manager_latest(mgr));
	}
	if (rc < 0 && ckpt_error_last()->code != CKPT_OK)
		mlp_report(prog, rc);
	ckpt_manager_free(mgr);
	mlp_model_free(&m);
	ckpt_strategy_free(s);
	free(data);
	return rc == CKPT_OK ? 0 : 1;
}

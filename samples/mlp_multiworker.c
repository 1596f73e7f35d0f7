/*
 * mlp_multiworker: the MLP of mlp_mirrored trained by several MPI processes
 * (workers), each with local replicas on threads — a multi-worker mirrored
 * strategy (ckpt/mpi.h). The global batch of 64 is split over workers x
 * local replicas; gradients are all-reduced in global replica order, so any
 * split of the same replica count gives the same bits.
 *
 *   mpirun -np W mlp_multiworker [--local L] [--epochs E] [--dir DIR] [--seed S]
 *                                [--die-after-epoch K] [--memory-copies F [--persist-every P]]
 *
 * Resumes from the latest checkpoint in DIR when there is one (onto any
 * W x L), then trains until E epochs are done, one checkpoint per epoch
 * (each worker writes its own data shard; worker 0 commits the merged
 * index). --die-after-epoch K: after the checkpoint of epoch K, the last
 * worker kills itself with SIGKILL (Open MPI then aborts the job) — a crash
 * to resume from.
 *
 * --memory-copies F: every epoch's checkpoint goes to the memory tier
 * (ckpt/tier.h: each worker's piece on its node, in CKPT_TIER_DIR, and on F
 * other nodes; CKPT_TIER_NODES emulates nodes on one machine), with the
 * copies on the tier's thread (memory_async, so MPI starts at
 * MPI_THREAD_MULTIPLE), and only every P-th epoch to DIR (default 1: all).
 * A crash then loses at most the epoch whose copies were in flight, and the
 * resume reads the newest committed epoch from memory, onto any W x L.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ckpt/mpi.h>
#include "mlp_model.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: mpirun -np W mlp_multiworker [--local L] [--epochs E] [--dir DIR] [--seed S] "
		"[--die-after-epoch K]\n"
		"  --local L            replicas per worker; W x L must divide the global batch of %d (default 2)\n"
		"  --epochs E           train until E epochs are done (default 4)\n"
		"  --dir DIR            checkpoint directory on a file system every worker shares (default mlp_mw_ckpts)\n"
		"  --seed S             dataset / initialisation seed (default 42)\n"
		"  --die-after-epoch K  crash (SIGKILL of the last worker) after the checkpoint of epoch K\n"
		"  --memory-copies F    keep every epoch in the memory tier, on this node and F others (async copies)\n"
		"  --persist-every P    with the memory tier: write only every P-th epoch to DIR (default 1)\n",
		MLP_GLOBAL_BATCH);
}

int main(int argc, char **argv)
{
	const char *prog = "mlp_multiworker", *dir = "mlp_mw_ckpts";
	int local = 2, epochs = 4, seed = 42, die = 0, copies = -1, persist = 1, i, rc, rank = 0, size = 1, provided;
	int level = MPI_THREAD_FUNNELED;
	ckpt_strategy *s = NULL;
	ckpt_manager *mgr = NULL;
	ckpt_restore_status *st = NULL;
	const char *from = NULL;
	mlp_epoch_result res;
	mlp_model m;
	mlp_data *data;
	mlp_rng rng;

	/* the memory tier's copies run on a thread of their own, which calls MPI too */
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--memory-copies") == 0)
			level = MPI_THREAD_MULTIPLE;
	MPI_Init_thread(&argc, &argv, level, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	memset(&m, 0, sizeof m);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--local") == 0)
			local = mlp_parse_int(prog, a, val), i++;
		else if (strcmp(a, "--epochs") == 0)
			epochs = mlp_parse_int(prog, a, val), i++;
		else if (strcmp(a, "--seed") == 0)
			seed = mlp_parse_int(prog, a, val), i++;
		else if (strcmp(a, "--die-after-epoch") == 0)
			die = mlp_parse_int(prog, a, val), i++;
		else if (strcmp(a, "--memory-copies") == 0)
			copies = mlp_parse_int(prog, a, val), i++;
		else if (strcmp(a, "--persist-every") == 0)
			persist = mlp_parse_int(prog, a, val), i++;
		else if (strcmp(a, "--dir") == 0 && val)
			dir = val, i++;
		else {
			if (rank == 0)
				usage(strcmp(a, "--help") == 0 ? stdout : stderr);
			MPI_Finalize();
			return strcmp(a, "--help") == 0 ? 0 : 2;
		}
	}
	if (MLP_GLOBAL_BATCH % (size * local) != 0) {
		if (rank == 0)
			fprintf(stderr, "%s: %d workers x %d local replicas do not divide the global batch of %d\n", prog,
				size, local, MLP_GLOBAL_BATCH);
		MPI_Finalize();
		return 2;
	}
	/* one worker talks */
	if (rank != 0 && !freopen("/dev/null", "w", stdout))
		return 1;

	/* Outside the scope: the dataset (every worker generates the same one). */
	data = malloc(sizeof *data);
	if (!data)
		return 1;
	mlp_rng_seed(&rng, (uint64_t)seed);
	mlp_data_make(data, &rng);

	rc = ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, local);
	if (rc == CKPT_OK) {
		printf("%s: global batch %d, %d per replica\n", ckpt_strategy_describe(s), MLP_GLOBAL_BATCH,
			MLP_GLOBAL_BATCH / (size * local));
		/* Inside the scope: everything that owns state; creation is collective. */
		rc = ckpt_scope_enter(s);
		if (rc == CKPT_OK) {
			rc = mlp_build_model(&m, &rng);
			if (rc == CKPT_OK && copies < 0) {
				rc = ckpt_manager_new(&mgr, m.ckpt, dir, 5);
			} else if (rc == CKPT_OK) {
				ckpt_manager_options o = CKPT_MANAGER_OPTIONS_INIT;
				o.memory_every = 1;       /* every epoch to memory */
				o.persist_every = persist;
				o.memory_copies = copies;
				o.memory_async = 1;       /* the copies off the training thread */
				o.memory_job = "mlp_multiworker";
				rc = ckpt_manager_new_ext(&mgr, m.ckpt, dir, 5, &o);
			}
			if (rc == CKPT_OK)
				rc = ckpt_status_of(from = ckpt_manager_restore_latest(&st, mgr));
			if (rc == CKPT_OK)
				rc = mlp_build_slots(&m); /* restored on create when resuming */
			if (rc == CKPT_OK && st)
				rc = ckpt_restore_status_assert_consumed(st);
			ckpt_scope_exit(s);
		}
	}
	ckpt_restore_status_free(st);
	if (rc == CKPT_OK) {
		int64_t done = mlp_epochs_done(&m);
		if (from)
			printf("resumed from %s after epoch %lld, onto %d worker(s) x %d local replica(s)\n", from,
				(long long)done, size, local);
		mlp_print_variables(&m, "model built inside the scope: ");
		int64_t until = die > 0 && die < epochs ? die : epochs;
		rc = mlp_fit(&m, s, data, mgr, until, &res);
		if (rc == CKPT_OK && until < epochs) {
			printf("crashing after epoch %lld (SIGKILL of worker %d)\n", (long long)until, size - 1);
			fflush(stdout);
			MPI_Barrier(MPI_COMM_WORLD);
			if (rank == size - 1)
				raise(SIGKILL);
			MPI_Barrier(MPI_COMM_WORLD); /* Open MPI aborts the job before this returns */
		}
		if (rc == CKPT_OK) /* the last checkpoint's copy to DIR (from the memory tier) committed */
			rc = ckpt_manager_wait(mgr);
		if (rc == CKPT_OK)
			printf("done: %d epochs, final loss %.6f, mae %.6f, latest checkpoint %s\n", epochs, res.loss,
				res.mae, ckpt_manager_latest(mgr));
	}
	if (rc < 0)
		mlp_report(prog, rc);
	ckpt_manager_free(mgr);
	mlp_model_free(&m);
	ckpt_strategy_free(s);
	free(data);
	MPI_Finalize();
	return rc == CKPT_OK ? 0 : 1;
}

/*
 * A failure agreed over several calls keeps its origin: `mpi_relay`, 3+
 * workers. The last worker fails an agreement ("boom on worker N"); every
 * worker then passes its error on to the next two agreements, as a caller
 * that fails a whole sequence does. The failing worker must keep its own
 * message, and every other worker must name it as the origin, once: not
 * "worker 0 ... failed: worker N ... failed: boom", which names worker 0,
 * who only relayed it. Prints "CHECKS n FAILED f".
 */
#include <stdio.h>
#include <string.h>
#include <ckpt/mpi.h>
#include <ckpt/sys/error.h>
#include <ckpt/sys/strategy.h>
#include "mpi_model.h"
#include "mpi_report.h"

static int count(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

int main(int argc, char **argv)
{
	int prov, rank, size;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	ckpt_strategy *s;
	TM_TRY(ckpt_strategy_multi_worker_new(&s, MPI_COMM_WORLD, 1));
	const ckpt_strategy_methods *ops = ckpt_strategy_method_table(s);
	long checks = 0;
	int bad = 0, last = size - 1;
	char boom[64], origin[64];
	snprintf(boom, sizeof(boom), "boom on worker %d", last);
	snprintf(origin, sizeof(origin), "worker %d of ", last);
	int rc = rank == last ? ckpt_error_set(CKPT_EINVAL, NULL, NULL, -1, "%s", boom) : CKPT_OK;
	for (int round = 0; round < 3; round++) {
		rc = ops->agree(s, rc);
		const char *msg = ckpt_error_last()->message ? ckpt_error_last()->message : "";
		checks += 3;
		if (rc != CKPT_EINVAL)
			bad++, fprintf(stderr, "worker %d, round %d: %s, want EINVAL\n", rank, round, ckpt_status_name(rc));
		if (rank == last && strcmp(msg, boom) != 0)
			bad++, fprintf(stderr, "worker %d, round %d: its own failure reads '%s'\n", rank, round, msg);
		if (rank != last && (strncmp(msg, origin, strlen(origin)) != 0 || count(msg, "failed:") != 1 ||
			!strstr(msg, boom)))
			bad++, fprintf(stderr, "worker %d, round %d: '%s' should name worker %d once, then '%s'\n", rank,
				round, msg, last, boom);
	}
	ckpt_strategy_free(s);
	return tm_report(checks, bad, NULL);
}

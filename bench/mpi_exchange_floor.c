/*
 * The floor under a memory-tier save with copies on other nodes (issue 32):
 * how long a bare exchange of MIB each way between two MPI processes takes
 * against a memcpy of the same bytes, on this machine's MPI transport. A
 * synchronous save with one copy cannot block for less than its own write
 * plus this plus storing what it received.
 *
 *     mpirun -np 2 mpi_exchange_floor MIB [REPS]
 *
 * prints one line per repetition (rank 0), warm: both buffers touched first.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2 || argc < 2) {
		if (rank == 0)
			fprintf(stderr, "usage: mpirun -np 2 mpi_exchange_floor MIB [REPS]\n");
		MPI_Finalize();
		return 2;
	}
	size_t n = (size_t)atol(argv[1]) << 20;
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	if (n > (size_t)1 << 30) {
		if (rank == 0)
			fprintf(stderr, "mpi_exchange_floor: at most 1024 MiB (one message counts an int)\n");
		MPI_Finalize();
		return 2;
	}
	char *out = malloc(n), *in = malloc(n);
	if (!out || !in)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(out, rank + 1, n);
	memset(in, 0, n);
	for (int r = 0; r < reps; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		MPI_Request q[2];
		MPI_Irecv(in, (int)n, MPI_BYTE, 1 - rank, 1, MPI_COMM_WORLD, &q[0]);
		MPI_Isend(out, (int)n, MPI_BYTE, 1 - rank, 1, MPI_COMM_WORLD, &q[1]);
		MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
		double ex = MPI_Wtime() - t0;
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		memcpy(in, out, n);
		double mc = MPI_Wtime() - t0;
		if (rank == 0)
			printf("exchange of %zu MiB each way: %.4f s, memcpy of it %.4f s: %.2fx\n", n >> 20, ex, mc, ex / mc);
	}
	free(out);
	free(in);
	MPI_Finalize();
	return 0;
}

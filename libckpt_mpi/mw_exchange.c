/*
 * The personalised exchange of the strategy table (version 2, `exchange`):
 * what the memory tier uses to copy a worker's piece to other nodes and to
 * fetch the pieces a node lacks at a restore (manager/tier/tier_mw.c).
 *
 * The header exchange agrees on the call; the lengths go by MPI_Alltoall;
 * a second header exchange agrees that every worker could allocate what it
 * receives (none enters the transfer without room, or alone); then
 * nonblocking sends and receives in pieces an int counts.
 */
#include <stdlib.h>
#include "mw_internal.h"

#define CHUNK ((uint64_t)1 << 30)
#define TAG 7301

static uint64_t chunks(uint64_t n)
{
	return (n + CHUNK - 1) / CHUNK;
}

int mw_exchange_bytes(ckpt_strategy *s, const void *const *send, const uint64_t *send_lens, void **recv,
	uint64_t *recv_lens)
{
	mw *m = mw_of(s);
	int W = m->size;
	for (int p = 0; p < W; p++) {
		recv[p] = NULL;
		recv_lens[p] = 0;
	}
	mw_hdr h;
	mw_hdr_init(m, &h, MW_EXCHANGE, "");
	CKPT_TRY(mw_exchange(m, &h));
	int err = MPI_Alltoall((void *)send_lens, 1, MPI_UINT64_T, recv_lens, 1, MPI_UINT64_T, m->comm);
	if (err != MPI_SUCCESS) {
		m->broken = 1;
		mw_mpi_fail(m, err, "MPI_Alltoall");
		mw_copy(m->broken_msg, sizeof(m->broken_msg), mw_last_message());
		return CKPT_EIO;
	}
	int rc = CKPT_OK;
	size_t nreq = 0;
	for (int p = 0; p < W && rc == CKPT_OK; p++) {
		if (recv_lens[p] && !(recv[p] = ckpt_malloc((size_t)recv_lens[p])))
			rc = ckpt_error_set(CKPT_ENOMEM, NULL, NULL, -1, "worker %d: no memory to receive %llu bytes from "
				"worker %d", m->rank, (unsigned long long)recv_lens[p], p);
		nreq += chunks(recv_lens[p]) + chunks(send_lens[p]);
	}
	MPI_Request *rq = rc == CKPT_OK ? ckpt_calloc(nreq ? nreq : 1, sizeof(*rq)) : NULL;
	if (rc == CKPT_OK && !rq)
		rc = CKPT_ENOMEM;
	mw_hdr_init(m, &h, MW_EXCHANGE, "");
	mw_hdr_status(m, &h, rc);
	rc = mw_exchange(m, &h);
	size_t k = 0;
	for (int p = 0; p < W && rc == CKPT_OK; p++) {
		for (uint64_t off = 0; off < recv_lens[p] && rc == CKPT_OK; off += CHUNK) {
			int c = (int)(recv_lens[p] - off < CHUNK ? recv_lens[p] - off : CHUNK);
			err = MPI_Irecv((unsigned char *)recv[p] + off, c, MPI_BYTE, p, TAG, m->comm, &rq[k++]);
			if (err != MPI_SUCCESS)
				rc = err;
		}
		for (uint64_t off = 0; off < send_lens[p] && rc == CKPT_OK; off += CHUNK) {
			int c = (int)(send_lens[p] - off < CHUNK ? send_lens[p] - off : CHUNK);
			err = MPI_Isend((const unsigned char *)send[p] + off, c, MPI_BYTE, p, TAG, m->comm, &rq[k++]);
			if (err != MPI_SUCCESS)
				rc = err;
		}
	}
	if (rc == CKPT_OK && k && (err = MPI_Waitall((int)k, rq, MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
		rc = err;
	if (rc > 0) {
		/* an MPI failure midway: the call sequences may no longer line up */
		m->broken = 1;
		rc = mw_mpi_fail(m, rc, "the exchange's MPI_Isend / MPI_Irecv");
		mw_copy(m->broken_msg, sizeof(m->broken_msg), mw_last_message());
	}
	ckpt_free(rq);
	if (rc < 0)
		for (int p = 0; p < W; p++) {
			ckpt_free(recv[p]);
			recv[p] = NULL;
			recv_lens[p] = 0;
		}
	return rc;
}

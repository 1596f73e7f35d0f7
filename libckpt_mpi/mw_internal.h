/*
 * ckpt_mpi internals: the multi-worker strategy's state, the fixed-size
 * header every collective call starts with, and the ordered reduce.
 *
 * Never a hang: every collective call of the strategy begins with the same
 * MPI_Allgather of one mw_hdr per worker (what the worker is doing, how many
 * variables it has created, a running hash of their descriptors). Every
 * worker sees every header, so all decide alike: matching headers → the
 * call's payload follows; any difference → every worker fails with the same
 * ESCOPE and the strategy is broken (later calls fail without MPI), since
 * the workers' call sequences no longer line up.
 */
#ifndef CKPT_MW_INTERNAL_H
#define CKPT_MW_INTERNAL_H

#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include "ckpt/sys/alloc.h"
#include "ckpt/sys/error.h"
#include "ckpt/sys/strategy.h"
#include "ckpt/mpi.h"

#define MW_LOCAL_MAX 1024 /* CKPT__MAX_REPLICAS: replicas in all */

enum { MW_CREATE = 1, MW_REDUCE, MW_BARRIER, MW_RUN_END, MW_READ, MW_SAVE, MW_SAVE_DONE, MW_AGREE, MW_GATHER, MW_EXCHANGE };

typedef struct mw_hdr {
	int32_t op;
	int32_t status;       /* <= 0: this worker's status so far */
	uint64_t seq;         /* variables created before this call */
	uint64_t hash;        /* running hash of their descriptors */
	uint64_t n;           /* elements / bytes / entries */
	uint64_t h2;          /* op-specific hash (save: keys) */
	int32_t kind, aux;
	int32_t relayed;      /* status < 0 relayed from worker relayed - 1's failure (msg is its own); 0: this worker's */
	char what[160];       /* this call's subject (variable descriptor, path) */
	char last[160];       /* the last variable created */
	char msg[256];        /* error message when status < 0 */
} mw_hdr;

typedef struct mw {
	MPI_Comm comm;
	int rank, size, local;
	uint64_t created, hash;
	char last[160];
	int broken;
	char broken_msg[768];
	/* the last failure of another worker this one reported ("worker K … failed: …"), to pass it on as K's */
	int relay_origin;
	char relay_text[1024], relay_msg[256];
	mw_hdr *all;          /* size headers */
	unsigned char *scratch; /* the ordered reduce's buffers, kept between calls (fresh large */
	size_t scratch_cap;     /* buffers each call cost page faults and Open MPI's munmap hooks) */
	int restore_mode;       /* MW_RESTORE_ALL / _SPLIT (worker 0's CKPT_MPI_RESTORE) */
	ckpt_strategy *self;
} mw;

enum { MW_RESTORE_ALL = 0, MW_RESTORE_SPLIT = 1 };

/* Copy a string, cut to fit (messages: truncation is fine). */
static inline void mw_copy(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);
	if (l >= n)
		l = n - 1;
	memcpy(dst, src, l);
	dst[l] = '\0';
}

static inline const char *mw_last_message(void)
{
	const char *m = ckpt_error_last()->message;
	return m ? m : "";
}

static inline mw *mw_of(ckpt_strategy *s)
{
	return ckpt_strategy_impl(s);
}

/** Fill the common fields of a header for `op`. */
void mw_hdr_init(mw *m, mw_hdr *h, int op, const char *what);
/**
 * Exchange headers and check that every worker makes the same call. On a
 * difference (or when broken) fails ESCOPE on every worker. Then, when any
 * worker's status is < 0, fails on every worker with the lowest failing
 * worker's code and message (its own error on that worker, and on the
 * worker whose failure that one only relayed). m->all holds every header
 * afterwards.
 */
int mw_exchange(mw *m, mw_hdr *h);
/**
 * This thread's last error (or just the status, rc < 0) into a header; a
 * failure this worker only relayed from another is sent as that worker's.
 */
void mw_hdr_status(mw *m, mw_hdr *h, int rc);
/** An MPI error as a libckpt error (EIO) naming the call. */
int mw_mpi_fail(mw *m, int err, const char *call);
/** FNV-1a over a string, chained. */
uint64_t mw_hash(uint64_t h, const char *s);
/** "'name' float32 [3,4] mirrored" */
void mw_describe(const ckpt_variable *v, char *buf, size_t n);

/** The first element whose integer sum overflows (at = UINT64_MAX: none), and that sum (int32). */
typedef struct mw_overflow {
	uint64_t at;
	int64_t acc;
} mw_overflow;

/**
 * Ordered all-reduce of `local` buffers of n elements of `kind` over every
 * worker (after mw_exchange agreed): each element is combined over global
 * replicas 0..R-1 in order, exactly as the in-process code does, so any
 * split of R gives the same bits; the result lands in every buffer.
 * as_read = 0: the all-reduce's combination (f32/f64, in the element type,
 * MEAN divides that sum by R); 1: ckpt_variable_read's (float MEAN in a
 * wider type, integers in int64 with overflow detection). An integer
 * overflow returns CKPT_ELIMIT on every worker, with *ovf (the lowest
 * overflowing element over every worker) and no error set: the caller
 * names the variable.
 */
int mw_ordered_reduce(mw *m, void *const *bufs, size_t n, int kind, ckpt_reduce_op op, int as_read, mw_overflow *ovf);

/* hooks (mw_reduce.c, mw_save.c) */
int mw_all_reduce(ckpt_strategy *s, void *const *bufs, size_t n, int kind, ckpt_reduce_op op, const char *local_error);
int mw_read(ckpt_strategy *s, const ckpt_variable *v, void *dst, size_t n);
int mw_write(ckpt_strategy *s, const ckpt_strategy_save_request *req);
int mw_agree(ckpt_strategy *s, int rc);
int mw_restore_parts(ckpt_strategy *s, int *part);
int mw_share_staged(ckpt_strategy *s, int rc, size_t n, void *const *bases, const uint64_t *const *bounds);
int mw_exchange_bytes(ckpt_strategy *s, const void *const *send, const uint64_t *send_lens, void **recv,
	uint64_t *recv_lens);
/** MW_RESTORE_SPLIT when CKPT_MPI_RESTORE=split, else MW_RESTORE_ALL. */
int mw_restore_mode_from_env(void);

#endif

/*
 * ckpt_replica_check_crc32c: every replica copy checksummed where it lies.
 * Host-addressable copies are checksummed in parallel, one (variable,
 * replica) pair per task, so the check costs one pass over memory a load
 * already made resident; other copies come back through their provider one
 * chunk at a time, in one pinned buffer for the whole call (no larger than
 * the largest device variable), on one queue per device.
 */
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ckpt/replica_check.h"
#include "ckpt/memory.h"
#include "ckpt/strategy.h"

#define CHECK_CHUNK ((size_t)32 << 20) /* bytes per device-to-host copy (one pinned buffer) */
#define MAX_QUEUES 64

/* Copies back from one provider's devices: the queues and the pinned buffer, made on first use. */
typedef struct device_reader {
	const ckpt_memory_provider *p;
	ckpt_memory_queue *queues[MAX_QUEUES];
	void *pinned;
	size_t chunk;   /* bytes of `pinned` */
} device_reader;

static int replicas_host_addressable(const ckpt_variable *v)
{
	const ckpt_memory_provider *p = ckpt_strategy_memory_provider(ckpt_variable_strategy(v));
	ckpt_memory_caps caps;

	if (!p || p == ckpt_memory_provider_host())
		return 1;
	memset(&caps, 0, sizeof(caps));
	p->caps(p->ctx, &caps);
	return caps.host_addressable;
}

static void note_bad(ckpt_replica_check *c, int replica)
{
	if (c->bad_replica < 0 || replica < c->bad_replica)
		c->bad_replica = replica;
}

/* crc32c of one device replica through device-to-host copies. */
static int device_crc(device_reader *d, const ckpt_variable *v, int replica, uint32_t *crc)
{
	const ckpt_memory_provider *t = d->p;
	int dev = ckpt_strategy_replica_device(ckpt_variable_strategy(v), replica), rc = CKPT_OK;
	const char *src = ckpt_variable_replica_data(v, replica);
	uint64_t n = ckpt_variable_nbytes(v), off;

	*crc = 0;
	if (n == 0)
		return CKPT_OK;
	if (!src || dev < 0 || dev >= MAX_QUEUES)
		return CKPT_EINVAL;
	if (!d->queues[dev] && (rc = t->queue_new(t->ctx, &d->queues[dev], dev)) != CKPT_OK)
		return rc;
	if (!d->pinned && (rc = t->host_alloc(t->ctx, &d->pinned, d->chunk)) != CKPT_OK)
		return rc;
	for (off = 0; off < n && rc == CKPT_OK; off += d->chunk) {
		size_t m = n - off < d->chunk ? (size_t)(n - off) : d->chunk;
		if ((rc = t->copy_d2h(t->ctx, d->queues[dev], d->pinned, src + off, m)) == CKPT_OK &&
			(rc = t->synchronize(t->ctx, d->queues[dev])) == CKPT_OK)
			*crc = ckpt_crc32c_extend(*crc, d->pinned, m);
	}
	return rc;
}

static void device_reader_close(device_reader *d)
{
	int i;

	if (!d->p)
		return;
	for (i = 0; i < MAX_QUEUES; i++)
		if (d->queues[i])
			d->p->queue_free(d->p->ctx, d->queues[i]);
	if (d->pinned)
		d->p->host_free(d->p->ctx, d->pinned, d->chunk);
	memset(d, 0, sizeof(*d));
}

/*
 * Device replicas, one after another (the copies serialize on the link
 * anyway), through `d`: its queues and pinned buffer serve every check of
 * the same provider (383 variables: one cudaMallocHost, not 383). `chunk`:
 * the pinned buffer's size for a new reader.
 */
static void check_device(device_reader *d, ckpt_replica_check *c, size_t chunk)
{
	const ckpt_memory_provider *p = ckpt_strategy_memory_provider(ckpt_variable_strategy(c->variable));
	int r, n = ckpt_variable_num_replicas(c->variable);

	if (d->p != p) {
		device_reader_close(d);
		d->p = p;
		d->chunk = chunk;
	}
	for (r = c->first_replica; r < n; r++) {
		uint32_t got = 0;
		if (device_crc(d, c->variable, r, &got) != CKPT_OK || got != c->expected_crc32c)
			note_bad(c, r);
	}
}

/* Host replicas of every check whose copies the CPU can read, one task per (check, replica). */
static int check_host(ckpt_replica_check *checks, size_t n, const unsigned char *on_host)
{
	size_t i, j, njobs = 0;
	size_t *job_check;
	int *job_rep;

	for (i = 0; i < n; i++)
		if (on_host[i])
			njobs += (size_t)(ckpt_variable_num_replicas(checks[i].variable) - checks[i].first_replica);
	job_check = malloc((njobs ? njobs : 1) * sizeof(*job_check));
	job_rep = malloc((njobs ? njobs : 1) * sizeof(*job_rep));
	if (!job_check || !job_rep) {
		free(job_check);
		free(job_rep);
		return ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory for %zu replica checks", njobs);
	}
	for (i = 0, j = 0; i < n; i++) {
		int r, nr = on_host[i] ? ckpt_variable_num_replicas(checks[i].variable) : 0;
		for (r = checks[i].first_replica; r < nr; r++, j++) {
			job_check[j] = i;
			job_rep[j] = r;
		}
	}
	/* largest first would balance better; the state's order is good enough for 2-16 threads */
	/* no team for one copy: starting (and then spinning) threads would cost more than the task */
#pragma omp parallel for schedule(dynamic, 1) if (njobs > 1)
	for (j = 0; j < njobs; j++) {
		ckpt_replica_check *c = &checks[job_check[j]];
		const void *p = ckpt_variable_replica_data(c->variable, job_rep[j]);
		uint64_t nb = ckpt_variable_nbytes(c->variable);

		if ((!p && nb) || (nb ? ckpt_crc32c_extend(0, p, (size_t)nb) : 0) != c->expected_crc32c) {
#pragma omp critical
			note_bad(c, job_rep[j]);
		}
	}
	free(job_check);
	free(job_rep);
	return CKPT_OK;
}

int ckpt_replica_check_crc32c(ckpt_replica_check *checks, size_t n)
{
	unsigned char *on_host;
	size_t i;
	int rc;

	if (n == 0)
		return CKPT_OK;
	if (!checks)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_replica_check_crc32c: checks is NULL");
	for (i = 0; i < n; i++) {
		if (!checks[i].variable)
			return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_replica_check_crc32c: checks[%zu].variable is NULL", i);
		if (ckpt_variable_dtype(checks[i].variable) == CKPT_DT_STRING)
			return ckpt__fail(CKPT_EINVAL, NULL, ckpt_variable_name(checks[i].variable), -1,
				"a string variable's replicas cannot be checked by crc32c of their bytes");
		if (checks[i].first_replica < 0 || checks[i].first_replica > ckpt_variable_num_replicas(checks[i].variable))
			return ckpt__fail(CKPT_EINVAL, NULL, ckpt_variable_name(checks[i].variable), -1,
				"ckpt_replica_check_crc32c: checks[%zu].first_replica is %d, the variable has %d replicas", i,
				checks[i].first_replica, ckpt_variable_num_replicas(checks[i].variable));
		checks[i].bad_replica = -1;
	}
	if (!(on_host = malloc(n)))
		return ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory for %zu replica checks", n);
	size_t chunk = 0;
	for (i = 0; i < n; i++) {
		on_host[i] = (unsigned char)replicas_host_addressable(checks[i].variable);
		if (!on_host[i] && ckpt_variable_nbytes(checks[i].variable) > chunk)
			chunk = (size_t)ckpt_variable_nbytes(checks[i].variable);
	}
	if (chunk > CHECK_CHUNK)
		chunk = CHECK_CHUNK;
	device_reader d;
	memset(&d, 0, sizeof(d));
	for (i = 0; i < n; i++)
		if (!on_host[i])
			check_device(&d, &checks[i], chunk ? chunk : 1);
	device_reader_close(&d);
	rc = check_host(checks, n, on_host);
	free(on_host);
	return rc;
}

/*
 * The memory-provider conformance suite (support/memory_conformance.c) over
 * the host provider and the guarded test provider (PROT_NONE device memory,
 * copies landing only at synchronize), with and without a broadcast, on one
 * and on two devices; and over a provider that breaks the contract, to show
 * the suite can fail.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "guarded_provider.h"
#include "memory_conformance.h"

Test(memory_provider, host_provider_conforms)
{
	char report[2048];
	int failed = ckpt_memory_conformance(ckpt_memory_provider_host(), report, sizeof(report));
	cr_assert_eq(failed, 0, "%s", report);
	cr_assert(strstr(report, "14 passed"), "%s", report);
}

static void guarded_conforms(int devices, int with_broadcast)
{
	ts_guarded *g = ts_guarded_new(devices, with_broadcast);
	char report[2048];
	int failed = ckpt_memory_conformance(ts_guarded_provider(g), report, sizeof(report));
	cr_assert_eq(failed, 0, "%s", report);
	cr_assert(strstr(report, "14 passed"), "%s", report);
	/* the suite and the library gave back everything they took */
	ts_guarded_stats st = ts_guarded_get_stats(g);
	cr_assert_eq(st.device_live, 0);
	cr_assert_eq(st.pinned_live, 0);
	if (with_broadcast)
		cr_assert_gt(st.broadcast_calls, 0, "the library never used the provider's broadcast");
	ts_guarded_free(g);
}

Test(memory_provider, guarded_provider_conforms_one_device) { guarded_conforms(1, 0); }
Test(memory_provider, guarded_provider_conforms_two_devices_with_broadcast) { guarded_conforms(2, 1); }

/* A provider whose device-to-device copy does nothing: replicas 1.. keep garbage. */
static int lazy_d2d(void *ctx, ckpt_memory_queue *q, void *dst, int dd, const void *src, int sd, size_t n)
{
	(void)ctx, (void)q, (void)dst, (void)dd, (void)src, (void)sd, (void)n;
	return CKPT_OK;
}

Test(memory_provider, a_broken_provider_fails_the_suite)
{
	ts_guarded *g = ts_guarded_new(1, 0);
	ckpt_memory_provider bad = *ts_guarded_provider(g);
	bad.copy_d2d = lazy_d2d;
	char report[2048];
	int failed = ckpt_memory_conformance(&bad, report, sizeof(report));
	cr_assert_gt(failed, 0, "%s", report);
	cr_assert(strstr(report, "d2d:"), "%s", report);
	cr_assert(strstr(report, "mirrored_variable:"), "%s", report);
	ts_guarded_free(g);
}

/*
 * Device memory really is out of the CPU's reach: touching it is a crash
 * (what catches a dereferencing path). In a child, so that a sanitizer's
 * SEGV report (which ends in abort) counts as the crash too.
 */
Test(memory_provider, guarded_device_memory_cannot_be_dereferenced)
{
	ts_guarded *g = ts_guarded_new(1, 0);
	const ckpt_memory_provider *p = ts_guarded_provider(g);
	void *d = NULL;
	cr_assert_eq(p->device_alloc(p->ctx, &d, 0, 64), CKPT_OK);
	fflush(NULL);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		volatile unsigned char *c = d;
		c[0] = 1;
		_exit(0);
	}
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGABRT),
		"writing device memory did not crash (status %d)", st);
	/* and through the provider's copies the same bytes are fine */
	unsigned char one = 1, back = 0;
	ckpt_memory_queue *q;
	cr_assert_eq(p->queue_new(p->ctx, &q, 0), CKPT_OK);
	cr_assert_eq(p->copy_h2d(p->ctx, q, d, &one, 1), CKPT_OK);
	cr_assert_eq(p->copy_d2h(p->ctx, q, &back, d, 1), CKPT_OK);
	cr_assert_eq(p->synchronize(p->ctx, q), CKPT_OK);
	cr_assert_eq(back, 1);
	p->queue_free(p->ctx, q);
	p->device_free(p->ctx, 0, d, 64);
	ts_guarded_free(g);
}

/* Copies land only at synchronize: a read before it sees stale bytes. */
Test(memory_provider, guarded_copies_land_at_synchronize)
{
	ts_guarded *g = ts_guarded_new(1, 0);
	const ckpt_memory_provider *p = ts_guarded_provider(g);
	ckpt_memory_queue *q;
	void *d;
	unsigned char in[64], out[64];
	memset(in, 7, sizeof(in));
	memset(out, 0, sizeof(out));
	cr_assert_eq(p->queue_new(p->ctx, &q, 0), CKPT_OK);
	cr_assert_eq(p->device_alloc(p->ctx, &d, 0, 64), CKPT_OK);
	cr_assert_eq(p->copy_h2d(p->ctx, q, d, in, 64), CKPT_OK);
	cr_assert_eq(p->copy_d2h(p->ctx, q, out, d, 64), CKPT_OK);
	cr_assert_eq(out[0], 0, "a copy landed before synchronize");
	cr_assert_eq(p->synchronize(p->ctx, q), CKPT_OK);
	cr_assert_eq(out[63], 7);
	/* a host pointer passed as device memory is refused */
	cr_assert_eq(p->copy_h2d(p->ctx, q, out, in, 64), CKPT_EINVAL);
	p->queue_free(p->ctx, q);
	p->device_free(p->ctx, 0, d, 64);
	ts_guarded_free(g);
}

Test(memory_provider, strategy_on_a_provider)
{
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_strategy *s;
	int devs[3] = { 0, 1, 1 };
	cr_assert_eq(ckpt_strategy_mirrored_on(&s, ts_guarded_provider(g), devs, 3), CKPT_OK);
	cr_assert_eq(ckpt_strategy_num_replicas(s), 3);
	cr_assert_eq(ckpt_strategy_replica_device(s, 2), 1);
	cr_assert_eq(ckpt_strategy_replica_device(s, 3), -1);
	cr_assert(strstr(ckpt_strategy_describe(s), "guarded"), "%s", ckpt_strategy_describe(s));
	cr_assert_eq(ckpt_strategy_memory_provider(s)->ctx, g);
	cr_assert_eq(ckpt_strategy_staging_bytes(s), CKPT_STAGING_DEFAULT_BYTES);
	cr_assert_eq(ckpt_strategy_set_staging_bytes(s, 1000), CKPT_EINVAL);
	cr_assert_eq(ckpt_strategy_set_staging_bytes(s, 1 << 20), CKPT_OK);
	cr_assert_eq(ckpt_strategy_staging_bytes(s), (size_t)1 << 20);
	/* strings cannot live in device memory: refused by name */
	ckpt_scope_enter(s);
	ckpt_variable *v = NULL;
	ckpt_shape sh = { 1, { 2 } };
	cr_assert_eq(ckpt_variable_new(&v, "vocab", CKPT_DT_STRING, &sh, NULL), CKPT_EUNSUPPORTED);
	cr_assert(strstr(ckpt_error_last()->message, "'vocab'"));
	ckpt_scope_exit(s);
	ckpt_strategy_free(s);
	/* the default strategies keep the host provider */
	cr_assert_eq(ckpt_strategy_memory_provider(ckpt_strategy_default()), ckpt_memory_provider_host());
	ts_guarded_free(g);
}

/*
 * ckpt_replica_check_crc32c: every replica copy checksummed in place, on the
 * host (mirrored over the host provider) and in device memory (the guarded
 * test provider: PROT_NONE buffers, so a path that dereferences a device
 * replica crashes). One corrupted copy is named as the lowest bad replica,
 * a failed device-to-host copy counts as a bad replica, and misuse is an
 * error that names the variable.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "guarded_provider.h"

#define N 50000   /* floats: several device-to-host chunks are not needed, one replica is 200 KB */
#define REPLICAS 3

static ckpt_variable *float_var(ckpt_strategy *s, const char *name, float base)
{
	ckpt_variable *v = NULL;
	int64_t n = N;
	ckpt_shape shape;
	float *val = malloc(N * sizeof(float));
	size_t i;

	cr_assert(val);
	for (i = 0; i < N; i++)
		val[i] = base + (float)i * 0.25f;
	ckpt_shape_make(&shape, 1, &n);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, name, CKPT_DT_FLOAT, &shape, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign(v, val, N * sizeof(float)), CKPT_OK, "%s", ckpt_error_last()->message);
	free(val);
	return v;
}

static uint32_t crc_of(float base)
{
	float *val = malloc(N * sizeof(float));
	uint32_t crc;
	size_t i;

	for (i = 0; i < N; i++)
		val[i] = base + (float)i * 0.25f;
	crc = ckpt_crc32c_extend(0, val, N * sizeof(float));
	free(val);
	return crc;
}

Test(replica_check, host_replicas_match_and_a_corrupted_copy_is_named)
{
	ckpt_strategy *s = NULL;
	ckpt_variable *a, *b;
	ckpt_replica_check c[2];

	cr_assert_eq(ckpt_strategy_mirrored_new(&s, REPLICAS), CKPT_OK);
	a = float_var(s, "a", 1.0f);
	b = float_var(s, "b", 2.0f);
	c[0] = (ckpt_replica_check){ a, crc_of(1.0f), 7, 0 };
	c[1] = (ckpt_replica_check){ b, crc_of(2.0f), 7, 0 };
	cr_assert_eq(ckpt_replica_check_crc32c(c, 2), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(c[0].bad_replica, -1);
	cr_assert_eq(c[1].bad_replica, -1);

	/* replicas 1 and 2 of b changed behind the library's back: the lowest is named */
	((unsigned char *)ckpt_variable_replica_data(b, 2))[5] ^= 1;
	((unsigned char *)ckpt_variable_replica_data(b, 1))[N * 4 - 1] ^= 0x80;
	cr_assert_eq(ckpt_replica_check_crc32c(c, 2), CKPT_OK);
	cr_assert_eq(c[0].bad_replica, -1);
	cr_assert_eq(c[1].bad_replica, 1);

	/* first_replica: copies below it are not checksummed (b's replica 1 is now skipped, 2 still bad) */
	c[1].first_replica = 2;
	cr_assert_eq(ckpt_replica_check_crc32c(c, 2), CKPT_OK);
	cr_assert_eq(c[1].bad_replica, 2);
	c[1].first_replica = 3; /* = the replica count: nothing to check */
	cr_assert_eq(ckpt_replica_check_crc32c(c, 2), CKPT_OK);
	cr_assert_eq(c[1].bad_replica, -1);
	c[1].first_replica = 4;
	cr_assert_eq(ckpt_replica_check_crc32c(c, 2), CKPT_EINVAL);
	cr_assert(strstr(ckpt_error_last()->message, "first_replica is 4"), "%s", ckpt_error_last()->message);
	cr_assert(strstr(ckpt_error_last()->message, "3 replicas"), "%s", ckpt_error_last()->message);
	c[1].first_replica = -1;
	cr_assert_eq(ckpt_replica_check_crc32c(c, 2), CKPT_EINVAL);
	c[1].first_replica = 0;

	/* a wrong expectation fails replica 0 */
	c[0].expected_crc32c ^= 1;
	cr_assert_eq(ckpt_replica_check_crc32c(c, 1), CKPT_OK);
	cr_assert_eq(c[0].bad_replica, 0);
	ckpt_variable_free(a);
	ckpt_variable_free(b);
	ckpt_strategy_free(s);
}

Test(replica_check, device_replicas_are_checked_through_the_provider)
{
	ts_guarded *g = ts_guarded_new(2, 0);
	const ckpt_memory_provider *p = ts_guarded_provider(g);
	int devs[REPLICAS] = { 0, 1, 1 };
	ckpt_strategy *s = NULL;
	ckpt_memory_queue *q = NULL;
	ckpt_variable *v;
	ckpt_replica_check c;
	float junk = -1.0f;

	cr_assert_eq(ckpt_strategy_mirrored_on(&s, p, devs, REPLICAS), CKPT_OK, "%s", ckpt_error_last()->message);
	v = float_var(s, "w", 3.0f);
	c = (ckpt_replica_check){ v, crc_of(3.0f), 7, 0 };
	cr_assert_eq(ckpt_replica_check_crc32c(&c, 1), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(c.bad_replica, -1);

	/* write into replica 2's device memory through the provider */
	cr_assert_eq(p->queue_new(p->ctx, &q, 1), CKPT_OK);
	cr_assert_eq(p->copy_h2d(p->ctx, q, (char *)ckpt_variable_replica_data(v, 2) + 400, &junk, sizeof(junk)), CKPT_OK);
	cr_assert_eq(p->synchronize(p->ctx, q), CKPT_OK);
	p->queue_free(p->ctx, q);
	cr_assert_eq(ckpt_replica_check_crc32c(&c, 1), CKPT_OK);
	cr_assert_eq(c.bad_replica, 2);

	/* a copy that fails counts as a bad replica: the first one fails here */
	ts_guarded_fail_copies(g, 0, 1);
	cr_assert_eq(ckpt_replica_check_crc32c(&c, 1), CKPT_OK);
	cr_assert_eq(c.bad_replica, 0);
	ts_guarded_fail_copies(g, 0, 0);

	ckpt_variable_free(v);
	ckpt_strategy_free(s);
	cr_assert_eq(ts_guarded_get_stats(g).device_live, 0, "device buffers leaked");
	ts_guarded_free(g);
}

Test(replica_check, misuse_is_an_error_naming_the_variable)
{
	ckpt_variable *sv = NULL;
	int64_t n = 2;
	ckpt_shape shape;
	ckpt_replica_check c = { NULL, 0, 0, 0 };

	cr_assert_eq(ckpt_replica_check_crc32c(NULL, 0), CKPT_OK);
	cr_assert_eq(ckpt_replica_check_crc32c(&c, 1), CKPT_EINVAL);
	ckpt_shape_make(&shape, 1, &n);
	cr_assert_eq(ckpt_variable_new(&sv, "names", CKPT_DT_STRING, &shape, NULL), CKPT_OK);
	c.variable = sv;
	cr_assert_eq(ckpt_replica_check_crc32c(&c, 1), CKPT_EINVAL);
	cr_assert(strstr(ckpt_error_last()->message, "string"), "%s", ckpt_error_last()->message);
	cr_assert_str_eq(ckpt_error_last()->variable, "names");
	ckpt_variable_free(sv);
}

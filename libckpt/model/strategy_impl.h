/*
 * The strategy interface: what distinguishes default, mirrored and
 * multi-worker strategies, as formats/format.h does for backends. Not
 * installed, not exported: a strategy outside the library (ckpt_mpi's)
 * implements the public form of this interface, ckpt/sys/strategy.h, whose
 * entry points (strategy_custom.c) check their arguments and call these.
 *
 * A strategy has `num_replicas` replicas in all, `local_replicas` of them
 * in this process (global ids replica_offset .. replica_offset + local - 1);
 * a variable holds one copy per local replica. The in-process strategies
 * (default, mirrored) have local == num_replicas, offset 0 and no
 * cross-process hooks (NULL): the core then does everything itself. A
 * cross-process strategy supplies the hooks; each is *collective* — every
 * process calls it in the same order — and must fail on every process
 * instead of hanging when they disagree.
 */
#ifndef CKPT_STRATEGY_IMPL_H
#define CKPT_STRATEGY_IMPL_H

#include "internal.h"
#include "ckpt/strategy.h"
#include "ckpt/variable.h"
#include "ckpt/object_graph.h"
#include "ckpt/io.h"
#include "ckpt/partitioned.h"
#include "ckpt/sys/strategy.h"

/*
 * The core's names for the extender API (ckpt/sys/strategy.h): the method
 * table, the save request and the element types of the all-reduce.
 */
#define ckpt__strategy_ops ckpt_strategy_methods
#define ckpt__save_request ckpt_strategy_save_request
#define CKPT__KIND_F32 CKPT_REDUCE_ELEM_F32
#define CKPT__KIND_F64 CKPT_REDUCE_ELEM_F64
#define CKPT__KIND_I32 CKPT_REDUCE_ELEM_I32
#define CKPT__KIND_I64 CKPT_REDUCE_ELEM_I64

/**
 * A strategy of a given implementation; `desc` for messages (copied, cut at
 * 95 bytes), "#<id>" appended. `impl` belongs to ops->destroy.
 */
int ckpt__strategy_create(ckpt_strategy **out, const ckpt__strategy_ops *ops, int num_replicas,
	int local_replicas, int replica_offset, void *impl, const char *desc);
const ckpt__strategy_ops *ckpt__strategy_ops_of(const ckpt_strategy *s);
void *ckpt__strategy_impl(const ckpt_strategy *s);
int ckpt__strategy_local_replicas(const ckpt_strategy *s);
int ckpt__strategy_replica_offset(const ckpt_strategy *s);
/** 1 when `s` has cross-process hooks. */
int ckpt__strategy_is_collective(const ckpt_strategy *s);
/**
 * Put the local replicas of `s` (just created, no variable yet) in the memory
 * of `provider`, local replica r on devices[r] (ckpt/memory.h). For
 * strategies made outside strategy.c (the multi-worker one, through
 * ckpt_strategy_attach_memory).
 */
int ckpt__strategy_attach_memory(ckpt_strategy *s, const ckpt_memory_provider *provider, const int *devices);
/** Whether any cross-process strategy exists in this process now. */
int ckpt__strategy_any_collective(void);

/** Copy 0 of `v` into its other local copies unchanged (creation semantics, not assign's split). */
void ckpt__variable_fill_from_primary(ckpt_variable *v);
/**
 * Local copy `replica` of `v` from / into host memory (nbytes; fixed-size
 * dtypes): memcpy for host copies, the provider's copies for device ones.
 */
int ckpt__variable_read_copy(const ckpt_variable *v, int replica, void *dst);
int ckpt__variable_write_copy(ckpt_variable *v, int replica, const void *src);
/** 1 when `v`'s copies are device memory that only the provider's copies may touch. */
int ckpt__variable_on_device(const ckpt_variable *v);
/** Writable local copy `i` (0 <= i < local copies), or NULL. */
void *ckpt__variable_local_copy(ckpt_variable *v, int i);

#endif

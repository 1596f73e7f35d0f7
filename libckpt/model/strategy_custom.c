/*
 * The extender API of strategies (ckpt/sys/strategy.h): a strategy from a
 * method table outside the library, and what its methods need from the
 * core. Checks the arguments a caller outside the library can get wrong,
 * then calls the core's own functions (strategy.c, variable.c).
 */
#include "strategy_impl.h"
#include "variable_internal.h"

/* The methods a cross-process table must supply (restore_parts, run_end, destroy are optional). */
static const char *missing_cross_process_method(const ckpt_strategy_methods *m)
{
	if (!m->all_reduce)
		return "all_reduce";
	if (!m->barrier)
		return "barrier";
	if (!m->read)
		return "read";
	if (!m->write)
		return "write";
	if (!m->agree)
		return "agree";
	if (!m->share_staged)
		return "share_staged";
	if (!m->allgather)
		return "allgather";
	if (!m->is_writer)
		return "is_writer";
	return NULL;
}

static int any_cross_process_method(const ckpt_strategy_methods *m)
{
	return m->on_create || m->all_reduce || m->barrier || m->run_end || m->read || m->write || m->agree ||
		m->restore_parts || m->share_staged || m->allgather || m->is_writer;
}

static int check_methods(const ckpt_strategy_methods *m)
{
	if (m->version < 1 || m->version > CKPT_STRATEGY_METHODS_VERSION)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_strategy_custom_new: method table version %u "
			"(this library knows 1 .. %d)", m->version, CKPT_STRATEGY_METHODS_VERSION);
	if (!m->name)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_strategy_custom_new: the method table has no name");
	if (m->on_create) {
		const char *missing = missing_cross_process_method(m);
		if (missing)
			return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_strategy_custom_new: strategy '%s' has "
				"on_create (cross-process) but no %s method", m->name, missing);
	} else if (any_cross_process_method(m)) {
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_strategy_custom_new: strategy '%s' has "
			"cross-process methods but no on_create: set them all or none", m->name);
	}
	return CKPT_OK;
}

int ckpt_strategy_custom_new(ckpt_strategy **out, const ckpt_strategy_methods *methods, int num_replicas,
	int local_replicas, int replica_offset, void *impl, const char *desc)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_strategy_custom_new: out is NULL");
	*out = NULL;
	if (!methods || !desc)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_strategy_custom_new: methods or desc is NULL");
	CKPT_TRY(check_methods(methods));
	if (num_replicas > CKPT__MAX_REPLICAS)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "strategy '%s': at most %d replicas, got %d",
			methods->name, CKPT__MAX_REPLICAS, num_replicas);
	if (local_replicas < 1 || local_replicas > num_replicas || replica_offset < 0 ||
		replica_offset > num_replicas - local_replicas)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "strategy '%s': %d local replica(s) from replica %d "
			"do not fit in %d replica(s)", methods->name, local_replicas, replica_offset, num_replicas);
	if (!methods->on_create && (local_replicas != num_replicas || replica_offset != 0))
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "strategy '%s' has no cross-process methods, so every "
			"replica is in this process: %d local of %d", methods->name, local_replicas, num_replicas);
	return ckpt__strategy_create(out, methods, num_replicas, local_replicas, replica_offset, impl, desc);
}

const ckpt_strategy_methods *ckpt_strategy_method_table(const ckpt_strategy *s)
{
	return ckpt__strategy_ops_of(s);
}

void *ckpt_strategy_impl(const ckpt_strategy *s)
{
	return ckpt__strategy_impl(s);
}

void ckpt_variable_fill_from_primary(ckpt_variable *v)
{
	ckpt__variable_fill_from_primary(v);
}

void *ckpt_variable_local_copy(ckpt_variable *v, int i)
{
	return ckpt__variable_local_copy(v, i);
}

int ckpt_strategy_attach_memory(ckpt_strategy *s, const ckpt_memory_provider *provider, const int *devices)
{
	return ckpt__strategy_attach_memory(s, provider, devices);
}

int ckpt_variable_on_device(const ckpt_variable *v)
{
	return ckpt__variable_on_device(v);
}

int ckpt_variable_read_copy(void *dst, const ckpt_variable *v, int i)
{
	return ckpt__variable_read_copy(v, i, dst);
}

int ckpt_variable_write_copy(ckpt_variable *v, int i, const void *src)
{
	return ckpt__variable_write_copy(v, i, src);
}

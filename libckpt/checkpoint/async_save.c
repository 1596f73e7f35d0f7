/*
 * Asynchronous save. Staging copies every variable's checkpoint value into
 * one reused arena (huge-page backed, so only the first save pays page
 * faults), in parallel over variables; a background pthread then feeds the
 * staged tensors to an ordinary atomic ckpt_writer. Only the staging step
 * touches live variables, so the trainer may continue as soon as it returns.
 * String variables are staged as deep copies (ckpt_variable_read_tensor)
 * outside the arena, as sync save writes them.
 *
 * Variables in device memory (ckpt/memory.h) are staged into a second arena
 * of pinned memory from their provider (kept and reused like the first, so
 * the trainer waits only for the device-to-host copies), one variable after
 * another on the calling thread: a provider's queue is never used by two
 * threads at once. The saver keeps a copy of the provider table for that
 * arena: free the saver before the provider's context goes.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include "internal.h"
#include "checkpoint_internal.h"
#include "model/variable_internal.h"
#include "model/strategy_impl.h"
#include "async_internal.h"
#include "device/memory_internal.h"

#define STAGE_CHUNK ((uint64_t)2 << 20) /* one huge page per pre-faulting step */

typedef struct {
	char *key;
	ckpt_tensor tensor;  /* header over the arena; owns_data = 0 */
	ckpt_tensor *str;    /* string variables: an owned deep copy (tensor unused) */
} staged_entry;

struct ckpt_async_saver {
	ckpt_async_options opts;
	pthread_t thread;
	int running;              /* a thread was started and not yet joined */
	/* staging */
	unsigned char *arena;
	uint64_t arena_cap;
	/* device variables: pinned memory of pin_provider (a copy of the table) */
	unsigned char *pinned;
	uint64_t pinned_cap;
	ckpt_memory_provider pin_provider;
	staged_entry *entries;
	size_t nentries;
	ckpt_object_graph *graph;
	char *path;
	/* a job of another saver built on this one (the manager): its options and hooks */
	ckpt_write_options job_wo;
	char *job_format;          /* owned copy (NULL = tf-bundle) */
	int has_job_opts;
	ckpt__async_done_fn done;
	ckpt__async_detach_fn detach;
	void *owner;               /* set while the job belongs to someone (see async_internal.h) */
	char *owner_name;          /* for the refusal message */
	/* result of the last background write */
	int status;
	ckpt__error_slot error;
	double last_blocking;
};

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int ckpt_async_saver_new(ckpt_async_saver **out, const ckpt_async_options *o)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_async_saver_new: NULL argument");
	if (o && o->version != CKPT_ASYNC_OPTIONS_VERSION)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "unsupported ckpt_async_options version %u", o->version);
	ckpt_async_saver *s = ckpt__calloc(1, sizeof(*s));
	if (!s)
		return CKPT_ENOMEM;
	s->opts = o ? *o : (ckpt_async_options)CKPT_ASYNC_OPTIONS_INIT;
	s->error.offset = -1;
	*out = s;
	return CKPT_OK;
}

static void release_staging(ckpt_async_saver *s)
{
	for (size_t i = 0; i < s->nentries; i++) {
		ckpt__free(s->entries[i].key);
		ckpt_tensor_free(s->entries[i].str);
	}
	ckpt__free(s->entries);
	s->entries = NULL;
	s->nentries = 0;
	ckpt_object_graph_free(s->graph);
	s->graph = NULL;
	ckpt__free(s->path);
	s->path = NULL;
}

static void *write_thread(void *arg)
{
	ckpt_async_saver *s = arg;
	ckpt_write_options wo = CKPT_WRITE_OPTIONS_INIT;
	wo.vfs = s->opts.vfs;
	wo.no_fsync = s->opts.no_fsync;
	if (s->has_job_opts)
		wo = s->job_wo;
	ckpt_writer *w = NULL;
	int rc = ckpt_writer_open(&w, s->path, s->has_job_opts ? s->job_format : s->opts.format, &wo);
	for (size_t i = 0; rc == CKPT_OK && i < s->nentries; i++)
		rc = ckpt_writer_add(w, s->entries[i].key, s->entries[i].str ? s->entries[i].str : &s->entries[i].tensor, 0);
	if (rc == CKPT_OK && s->graph)
		rc = ckpt_writer_set_object_graph(w, s->graph);
	if (rc == CKPT_OK)
		rc = ckpt_writer_commit(w);
	if (rc < 0)
		ckpt__error_capture(&s->error);
	ckpt_writer_free(w);  /* removes temporaries when not committed */
	if (s->done) {
		/* the hook sees the write's error as this thread's last error */
		if (rc < 0)
			ckpt__error_raise(&s->error);
		rc = s->done(rc, s->owner);
		if (rc < 0)
			ckpt__error_capture(&s->error);
	}
	s->status = rc;
	ckpt_error_clear();   /* this thread's error strings die with it (captured above) */
	return NULL;
}

int ckpt_async_wait(ckpt_async_saver *s)
{
	if (!s)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_async_wait: NULL saver");
	if (s->running) {
		pthread_join(s->thread, NULL);
		s->running = 0;
		release_staging(s);
	}
	int rc = s->status;
	if (rc < 0) {
		ckpt__error_raise(&s->error);
		ckpt__error_slot_clear(&s->error);
		s->status = CKPT_OK;  /* reported once */
	}
	return rc;
}

int ckpt_async_busy(ckpt_async_saver *s)
{
	return s && s->running;
}

double ckpt_async_last_blocking_seconds(const ckpt_async_saver *s)
{
	return s ? s->last_blocking : 0.0;
}

/* Grow the arena to hold `need` bytes; old contents are not kept. */
static int reserve_arena(ckpt_async_saver *s, uint64_t need)
{
	if (need <= s->arena_cap && s->arena)
		return CKPT_OK;
	ckpt__buffer_free(s->arena);
	s->arena = NULL;
	s->arena_cap = 0;
	unsigned char *a = ckpt__buffer_alloc(need, 0);
	if (!a)
		return ckpt_error_last()->code ? ckpt_error_last()->code : CKPT_ENOMEM;
	s->arena = a;
	s->arena_cap = need;
	return CKPT_OK;
}

/* Bytes the arena needs for the fixed-size values of `list` (64-byte aligned each). */
static int arena_bytes(const ckpt_tracked_list *list, uint64_t *total)
{
	*total = 0;
	for (size_t i = 0; i < ckpt_tracked_list_num_entries(list); i++) {
		const ckpt_tracked_variable *tv = ckpt_tracked_list_get(list, i);
		if (ckpt_variable_dtype(tv->variable) == CKPT_DT_STRING)
			continue;
		uint64_t nb = ckpt_variable_nbytes(tv->variable);
		if (ckpt__add_u64(*total, (nb + 63) & ~(uint64_t)63, total))
			return ckpt__fail(CKPT_ELIMIT, NULL, tv->key, -1, "state too large to stage");
	}
	return CKPT_OK;
}

int ckpt_async_saver_reserve(ckpt_async_saver *s, ckpt_checkpoint *ck)
{
	if (!s || !ck)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_async_saver_reserve: NULL argument");
	if (s->running)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"ckpt_async_saver_reserve: a write is in flight (call ckpt_async_wait first)");
	ckpt_tracked_list *list = NULL;
	CKPT_TRY(ckpt_checkpoint_variables(&list, ck));
	uint64_t total;
	int rc = arena_bytes(list, &total);
	ckpt_tracked_list_free(list);
	int grown = rc == CKPT_OK && !(total <= s->arena_cap && s->arena);
	if (rc == CKPT_OK)
		rc = reserve_arena(s, total ? total : 64);
	if (rc == CKPT_OK && grown) {
		/* touch every page now, in parallel, so the first save pays no faults */
		long chunks = (long)((s->arena_cap + STAGE_CHUNK - 1) / STAGE_CHUNK);
		#pragma omp parallel for schedule(static)
		for (long c = 0; c < chunks; c++) {
			uint64_t off = (uint64_t)c * STAGE_CHUNK;
			uint64_t len = s->arena_cap - off < STAGE_CHUNK ? s->arena_cap - off : STAGE_CHUNK;
			memset(s->arena + off, 0, (size_t)len);
		}
	}
	return rc;
}

/* At least `total` bytes of pinned memory of `m`'s provider (kept when it is already big enough and the same provider's). */
static int reserve_pinned(ckpt_async_saver *s, ckpt__mem *m, uint64_t total)
{
	int same = s->pinned && s->pin_provider.host_free == m->p.host_free && s->pin_provider.ctx == m->p.ctx;
	if (same && s->pinned_cap >= total)
		return CKPT_OK;
	if (s->pinned)
		s->pin_provider.host_free(s->pin_provider.ctx, s->pinned, (size_t)s->pinned_cap);
	s->pinned = NULL;
	s->pinned_cap = 0;
	void *p;
	CKPT_TRY(ckpt__mem_pinned_alloc(m, &p, (size_t)total, NULL));
	s->pinned = p;
	s->pinned_cap = total;
	s->pin_provider = m->p;
	return CKPT_OK;
}

static int stage(ckpt_async_saver *s, ckpt_checkpoint *ck, const char *path)
{
	ckpt_tracked_list *list = NULL;
	CKPT_TRY(ckpt__checkpoint_check_mirrored(ck, path));
	CKPT_TRY(ckpt_checkpoint_variables(&list, ck));
	size_t n = ckpt_tracked_list_num_entries(list);
	int rc = CKPT_OK;
	uint64_t total = 0, pinned_total = 0;
	ckpt__mem *pin_mem = NULL;   /* the provider of the first device variable: its pinned memory holds them all */
	uint64_t *offsets = ckpt__calloc(n + 1, sizeof(uint64_t));
	unsigned char *on_dev = ckpt__calloc(n ? n : 1, 1);
	ckpt_tensor **strs = ckpt__calloc(n ? n : 1, sizeof(*strs));
	s->entries = ckpt__calloc(n ? n : 1, sizeof(staged_entry));
	s->path = ckpt__strdup(path);
	if (!offsets || !on_dev || !strs || !s->entries || !s->path)
		rc = CKPT_ENOMEM;
	/* Lay out every value at a 64-byte aligned offset of the arena. */
	for (size_t i = 0; rc == CKPT_OK && i < n; i++) {
		const ckpt_tracked_variable *tv = ckpt_tracked_list_get(list, i);
		offsets[i] = total;
		if (ckpt_variable_dtype(tv->variable) == CKPT_DT_STRING) {
			/* variable-length: a deep copy, not arena space */
			if ((rc = ckpt_variable_read_tensor(&strs[i], tv->variable)) < 0)
				ckpt__error_annotate(path, tv->key);
			continue;
		}
		uint64_t nb = ckpt_variable_nbytes(tv->variable);
		uint64_t *end = &total;
		if (ckpt__variable_on_device(tv->variable)) {
			on_dev[i] = 1;
			end = &pinned_total;
			if (!pin_mem)
				pin_mem = ckpt__strategy_mem(ckpt_variable_strategy(tv->variable));
		}
		offsets[i] = *end;
		if (ckpt__add_u64(*end, (nb + 63) & ~(uint64_t)63, end))
			rc = ckpt__fail(CKPT_ELIMIT, path, tv->key, -1, "state too large to stage");
	}
	if (rc == CKPT_OK)
		rc = reserve_arena(s, total ? total : 64);
	if (rc == CKPT_OK && pin_mem)
		rc = reserve_pinned(s, pin_mem, pinned_total ? pinned_total : 64);
	if (rc == CKPT_OK) {
		ckpt__error_slot slot = { 0 };
		slot.offset = -1;
		int first_bad = -1;
		/* The copy is the only part the trainer waits for: spread it over the cores. */
		#pragma omp parallel for schedule(dynamic, 1)
		for (long i = 0; i < (long)n; i++) {
			const ckpt_tracked_variable *tv = ckpt_tracked_list_get(list, (size_t)i);
			if (strs[i] || on_dev[i])
				continue;
			uint64_t nb = ckpt_variable_nbytes(tv->variable);
			if (ckpt_variable_read(tv->variable, s->arena + offsets[i], (size_t)nb) < 0) {
				#pragma omp critical(ckpt_async_stage_error)
				if (first_bad < 0 || i < first_bad) {
					first_bad = (int)i;
					ckpt__error_capture(&slot);
				}
			}
		}
		/* device variables: on this thread, through their provider, into the pinned arena */
		for (size_t i = 0; i < n && first_bad < 0; i++) {
			const ckpt_tracked_variable *tv = ckpt_tracked_list_get(list, i);
			if (on_dev[i] && ckpt_variable_read(tv->variable, s->pinned + offsets[i],
				(size_t)ckpt_variable_nbytes(tv->variable)) < 0) {
				first_bad = (int)i;
				ckpt__error_capture(&slot);
			}
		}
		if (first_bad >= 0) {
			rc = ckpt__error_raise(&slot);
			ckpt__error_annotate(path, ckpt_tracked_list_get(list, (size_t)first_bad)->key);
		}
		ckpt__error_slot_clear(&slot);
	}
	for (size_t i = 0; rc == CKPT_OK && i < n; i++) {
		const ckpt_tracked_variable *tv = ckpt_tracked_list_get(list, i);
		staged_entry *e = &s->entries[i];
		if (!(e->key = ckpt__strdup(tv->key))) {
			rc = CKPT_ENOMEM;
			break;
		}
		s->nentries = i + 1;
		e->str = strs[i];
		strs[i] = NULL;
		e->tensor.dtype = ckpt_variable_dtype(tv->variable);
		e->tensor.shape = *ckpt_variable_shape(tv->variable);
		e->tensor.nbytes = ckpt_variable_nbytes(tv->variable);
		e->tensor.data = (on_dev[i] ? s->pinned : s->arena) + offsets[i];
		e->tensor.owns_data = 0;
	}
	if (rc == CKPT_OK)
		rc = ckpt_checkpoint_object_graph(&s->graph, ck);
	ckpt__free(offsets);
	ckpt__free(on_dev);
	for (size_t i = 0; strs && i < n; i++)
		ckpt_tensor_free(strs[i]);
	ckpt__free(strs);
	ckpt_tracked_list_free(list);
	if (rc < 0)
		release_staging(s);
	return rc;
}

static int start(ckpt_async_saver *s, ckpt_checkpoint *ck, const char *path)
{
	if (ckpt_replica_current())
		return ckpt__fail(CKPT_ESCOPE, path, NULL, -1, "ckpt_async_save called from replica context; "
			"save from the training loop, outside ckpt_strategy_run");
	double t0 = now_seconds();
	/* A failed previous write is reported now, before anything else happens. */
	CKPT_TRY(ckpt_async_wait(s));
	if (ck && ck->nparted)
		return ckpt__fail(CKPT_EUNSUPPORTED, path, ck->parted[0] ? ckpt_partitioned_name(ck->parted[0]) : NULL, -1,
			"asynchronous saves do not write partitioned variables yet: save with ckpt_checkpoint_save / "
			"ckpt_manager_save");
	int rc = stage(s, ck, path);
	s->last_blocking = now_seconds() - t0;
	if (rc < 0)
		return rc;
	s->status = CKPT_OK;
	if (pthread_create(&s->thread, NULL, write_thread, s) != 0) {
		release_staging(s);
		return ckpt__fail(CKPT_ERROR, path, NULL, -1, "cannot start the background writer thread");
	}
	s->running = 1;
	return CKPT_OK;
}

static void clear_job(ckpt_async_saver *s)
{
	s->has_job_opts = 0;
	ckpt__free(s->job_format);
	s->job_format = NULL;
	s->done = NULL;
	s->detach = NULL;
	s->owner = NULL;
	ckpt__free(s->owner_name);
	s->owner_name = NULL;
}

int ckpt_async_save(ckpt_async_saver *s, ckpt_checkpoint *ck, const char *path)
{
	if (!s || !ck || !path)
		return ckpt__fail(CKPT_EINVAL, path, NULL, -1, "ckpt_async_save: NULL argument");
	if (s->owner)
		return ckpt__fail(CKPT_EINVAL, path, NULL, -1, "ckpt_async_save: this saver is writing a checkpoint for %s; "
			"call ckpt_manager_wait on that manager before using the saver directly", s->owner_name);
	return start(s, ck, path);
}

int ckpt__async_save_job(ckpt_async_saver *s, ckpt_checkpoint *ck, const char *path, const ckpt_write_options *wo,
	const char *format, ckpt__async_done_fn done, ckpt__async_detach_fn detach, void *ctx, const char *owner_name)
{
	if (s->owner && s->owner != ctx)
		return ckpt__fail(CKPT_EINVAL, path, NULL, -1, "this saver is writing a checkpoint for %s; call "
			"ckpt_manager_wait on that manager first", s->owner_name);
	/* the previous job (and its status) first, under the old hooks */
	CKPT_TRY(ckpt_async_wait(s));
	clear_job(s);
	char *name = ckpt__strdup(owner_name ? owner_name : "another saver");
	char *fmt = format ? ckpt__strdup(format) : NULL;
	if (!name || (format && !fmt)) {
		ckpt__free(name);
		ckpt__free(fmt);
		return CKPT_ENOMEM;
	}
	s->job_wo = *wo;
	s->job_format = fmt;
	s->has_job_opts = 1;
	s->done = done;
	s->detach = detach;
	s->owner = ctx;
	s->owner_name = name;
	int rc = start(s, ck, path);
	if (rc < 0)
		clear_job(s);
	return rc;
}

void ckpt__async_release(ckpt_async_saver *s, void *ctx)
{
	if (!s || s->owner != ctx)
		return;
	/* the owner reports from its own copy of the result: consume the saver's */
	ckpt__error_slot saved = { 0 };
	ckpt__error_capture(&saved);
	ckpt_async_wait(s);
	ckpt__error_raise(&saved);
	ckpt__error_slot_clear(&saved);
	clear_job(s);
}

void ckpt_async_saver_free(ckpt_async_saver *s)
{
	if (!s)
		return;
	if (s->running) {
		pthread_join(s->thread, NULL);
		s->running = 0;
	}
	/* an owner still holding a job hears that the saver is gone (it has been joined) */
	if (s->owner && s->detach)
		s->detach(s->owner);
	clear_job(s);
	release_staging(s);
	ckpt__error_slot_clear(&s->error);
	ckpt__buffer_free(s->arena);
	if (s->pinned)
		s->pin_provider.host_free(s->pin_provider.ctx, s->pinned, (size_t)s->pinned_cap);
	ckpt__free(s);
}

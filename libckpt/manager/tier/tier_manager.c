/*
 * The memory tier as the checkpoint manager uses it (ckpt/tier.h): which
 * saves go where, a memory save (the live state as a TensorBundle in this
 * worker's segment, through the POSIX VFS, then committed by rename), and
 * the restore of the newest step that checks.
 *
 * The state is written and read by the ordinary writer and restore, so
 * every kind of variable (mirrored, sync-on-read, partitioned, strings,
 * save_counter, the object graph) round-trips exactly as through a file;
 * only the VFS differs, and it is never the manager's: a restore served
 * from memory reads nothing from the checkpoint directory.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "checkpoint/checkpoint_internal.h"
#include "tier_internal.h"

void ckpt__tier_free(ckpt__tier *t)
{
	if (!t)
		return;
	ckpt__tier_mw_stop(t); /* before the spares its thread writes */
	ckpt__free(t->base);
	ckpt__free(t->job);
	ckpt__free(t->job_dir);
	ckpt__free(t->last_path);
	ckpt__tier_slots_free(t->slots);
	ckpt__tier_mw_free(t);
	ckpt__free(t);
}

/* "<base name of dir>-<crc32c of its absolute path>": stable across restarts, distinct for distinct dirs */
static char *default_job(const char *dir)
{
	char *abs = NULL;
	if (dir[0] == '/' || strstr(dir, "://"))
		abs = ckpt__strdup(dir);
	else {
		char cwd[4096];
		abs = getcwd(cwd, sizeof(cwd)) ? ckpt__asprintf("%s/%s", cwd, dir) : ckpt__strdup(dir);
	}
	if (!abs)
		return NULL;
	size_t l = strlen(abs);
	while (l > 1 && abs[l - 1] == '/')
		abs[--l] = '\0';
	const char *b = strrchr(abs, '/');
	b = b ? b + 1 : abs;
	char name[64];
	snprintf(name, sizeof(name), "%s", *b ? b : "root");
	for (char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
			    *c == '_' || (*c == '.' && c != name)))
			*c = '_';
	char *job = ckpt__asprintf("%s-%08x", name, (unsigned)ckpt_crc32c_extend(0, abs, l));
	ckpt__free(abs);
	return job;
}

int ckpt__tier_open(ckpt__tier **out, const ckpt_manager_options *o, const char *dir)
{
	*out = NULL;
	if (o->memory_every < 0 || o->persist_every < 0)
		return ckpt__fail(CKPT_EINVAL, dir, NULL, -1, "memory_every (%d) and persist_every (%d) must not be negative",
			o->memory_every, o->persist_every);
	if (!o->memory_every) {
		if (o->persist_every || o->memory_job || o->memory_limit || o->memory_copies || o->memory_async)
			return ckpt__fail(CKPT_EINVAL, dir, NULL, -1, "persist_every, memory_job, memory_limit, memory_copies "
				"and memory_async need a memory tier (memory_every > 0)");
		return CKPT_OK;
	}
	ckpt__tier *t = ckpt__calloc(1, sizeof(*t));
	if (!t)
		return CKPT_ENOMEM;
	t->memory_every = o->memory_every;
	t->persist_every = o->persist_every;
	t->limit = o->memory_limit;
	t->num_workers = 1;
	t->pinned = -1;
	t->copies = o->memory_copies;
	t->async = o->memory_async != 0;
	if (t->copies < 0) {
		ckpt__free(t);
		return ckpt__fail(CKPT_EINVAL, dir, NULL, -1, "memory_copies (%d) must not be negative", o->memory_copies);
	}
	const char *env = getenv(CKPT_TIER_DIR_ENV);
	t->named_base = env && *env;
	int rc = ckpt_tier_dir(&t->base);
	if (rc == CKPT_OK)
		rc = (t->job = o->memory_job ? ckpt__strdup(o->memory_job) : default_job(dir)) ? CKPT_OK : CKPT_ENOMEM;
	if (rc == CKPT_OK)
		rc = ckpt__tier_check_job(t->job);
	if (rc == CKPT_OK)
		rc = (t->job_dir = ckpt__asprintf("%s/%s", t->base, t->job)) ? CKPT_OK : CKPT_ENOMEM;
	if (rc < 0) {
		ckpt__tier_free(t);
		return rc;
	}
	*out = t;
	return CKPT_OK;
}

void ckpt__tier_set_pending(ckpt__tier *t, const uint64_t *bytes, int n)
{
	if (!t)
		return;
	if (n <= 1 || !t->mw_known || n != t->num_workers) {
		t->pending = n >= 1 ? bytes[n == 1 ? 0 : t->worker < n ? t->worker : 0] : 0;
		return;
	}
	uint64_t sum = 0;
	for (int w = 0; w < n; w++)
		if (t->node_of[w] == t->node_of[t->worker])
			sum += bytes[w];
	t->pending = sum;
}

int ckpt__tier_settle(ckpt__tier *t)
{
	return t && t->mw_known ? ckpt__tier_mw_settle(t) : CKPT_OK;
}

int ckpt__tier_route(const ckpt__tier *t, int64_t number)
{
	if (!t)
		return CKPT__TIER_TO_STORAGE;
	int to = 0;
	if (number % t->memory_every == 0)
		to |= CKPT__TIER_TO_MEMORY;
	if (!t->persist_every || number % t->persist_every == 0)
		to |= CKPT__TIER_TO_STORAGE;
	return to;
}

/* This worker's committed segments in the job directory: steps[0..n), newest first. */
static int own_steps(int64_t **steps, size_t *n, const ckpt__tier *t)
{
	*steps = NULL;
	*n = 0;
	int rc = CKPT_OK;
	DIR *d = ckpt__tier_open_job(t->job_dir, &rc);
	if (!d)
		return rc;
	size_t cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		int64_t s;
		int w, nw;
		if (!ckpt__tier_parse_name(e->d_name, &s, &w, &nw) || w != t->worker || nw != t->num_workers)
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			int64_t *ns = ckpt__realloc(*steps, cap * sizeof(*ns));
			if (!ns) {
				rc = CKPT_ENOMEM;
				break;
			}
			*steps = ns;
		}
		(*steps)[(*n)++] = s;
	}
	closedir(d);
	/* newest first (a handful of entries) */
	for (size_t i = 1; rc == CKPT_OK && i < *n; i++)
		for (size_t j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) {
			int64_t x = (*steps)[j];
			(*steps)[j] = (*steps)[j - 1];
			(*steps)[j - 1] = x;
		}
	if (rc < 0) {
		ckpt__free(*steps);
		*steps = NULL;
		*n = 0;
	}
	return rc;
}

/* What the new step needs, against the limit or the free space: refused before anything is written. */
static int check_space(ckpt__tier *t, ckpt_checkpoint *ck)
{
	ckpt_tracked_list *l = NULL;
	CKPT_TRY(ckpt_checkpoint_variables(&l, ck));
	uint64_t need = 1u << 20; /* index, object graph, header */
	for (size_t i = 0; i < ckpt_tracked_list_num_entries(l); i++)
		need += ckpt_variable_nbytes(ckpt_tracked_list_get(l, i)->variable);
	ckpt_tracked_list_free(l);
	uint64_t held = 0, avail = 0;
	int64_t *steps = NULL;
	size_t n = 0;
	int rc = own_steps(&steps, &n, t);
	for (size_t i = 0; rc == CKPT_OK && i < n; i++) {
		char *seg = ckpt__tier_segment_path(t->job_dir, steps[i], t->worker, t->num_workers);
		uint64_t b = 0;
		if (seg && ckpt__tier_segment_check(&b, seg, t->job, steps[i], t->worker, t->num_workers) == CKPT_OK)
			held += b;
		ckpt_error_clear();
		ckpt__free(seg);
	}
	ckpt__free(steps);
	CKPT_TRY(rc);
	/* a step still being copied to storage holds its removed segment's pages: the file system's free space shows it, the limit must */
	held += t->pending;
	if (t->limit) {
		avail = t->limit > held ? t->limit - held : 0;
		if (need > avail)
			return ckpt__fail(CKPT_ELIMIT, t->job_dir, NULL, -1,
				"the memory tier needs %" PRIu64 " bytes for this step and has %" PRIu64 " free of its "
				"memory_limit %" PRIu64 " (%" PRIu64 " held by the committed step and %" PRIu64 " by the "
				"step still being copied to storage)", need, avail, t->limit, held - t->pending, t->pending);
		return CKPT_OK;
	}
	CKPT_TRY(ckpt__tier_free_bytes(&avail, t->job_dir));
	avail += ckpt__tier_slots_spare_bytes(t->slots);
	if (need > avail)
		return ckpt__fail(CKPT_ELIMIT, t->job_dir, NULL, -1,
			"the memory tier needs %" PRIu64 " bytes for this step and its file system has %" PRIu64
			" free (%" PRIu64 " held by the committed step): enlarge it (/dev/shm: mount -o remount,size=…) "
			"or set " CKPT_TIER_DIR_ENV " elsewhere",
			need, avail, held);
	return CKPT_OK;
}

void ckpt__tier_pin(ckpt__tier *t, int64_t step)
{
	if (t)
		t->pinned = step;
}

int ckpt__tier_retire(ckpt__tier *t, const char *seg, int64_t step)
{
	/* a spare is written over by the next save: a file a background copy still reads must be unlinked instead */
	int rc = step == t->pinned ? CKPT_OK : ckpt__tier_slots_retire(t->slots, seg, 0);
	int rm = ckpt__tier_remove_tree(seg);
	return rc < 0 ? rc : rm;
}

/* Everything of this worker but step `keep`: at most the committed step stays (and its spares, tier_slots.c). */
static int remove_others(ckpt__tier *t, int64_t keep)
{
	int64_t *steps = NULL;
	size_t n = 0;
	int rc = own_steps(&steps, &n, t);
	/*
	 * One step's data files become spares, the newest superseded one's; any other (a kill between a commit
	 * and the removal it was followed by leaves two) is removed, so that spares never hold more than a step.
	 */
	int spared = keep < 0;
	for (size_t i = 0; rc == CKPT_OK && i < n; i++) {
		if (steps[i] == keep)
			continue;
		char *seg = ckpt__tier_segment_path(t->job_dir, steps[i], t->worker, t->num_workers);
		rc = seg ? (spared ? ckpt__tier_remove_tree(seg) : ckpt__tier_retire(t, seg, steps[i])) : CKPT_ENOMEM;
		spared = 1;
		ckpt__free(seg);
	}
	ckpt__free(steps);
	return rc;
}

int ckpt__tier_save(const char **path_out, ckpt__tier *t, ckpt_checkpoint *ck, int64_t number)
{
	*path_out = NULL;
	ckpt_strategy *cs = ckpt__checkpoint_collective(ck);
	if (cs)
		/* a save that also writes the directory commits first: the directory's copy is of a committed step */
		return ckpt__tier_mw_save(path_out, t, cs, ck, number, ckpt__tier_route(t, number) & CKPT__TIER_TO_STORAGE);
	CKPT_TRY(ckpt__tier_prepare_dir(t->base, t->job_dir));
	if (!t->slots)
		CKPT_TRY(ckpt__tier_slots_new(&t->slots, t->job_dir, t->worker, t->num_workers, 0));
	CKPT_TRY(check_space(t, ck));
	char *tmp = NULL;
	CKPT_TRY(ckpt__tier_segment_begin(&tmp, t->job_dir, number, t->worker, t->num_workers));
	char *prefix = ckpt__asprintf("%s/" CKPT__TIER_PREFIX, tmp);
	char *final = ckpt__tier_segment_path(t->job_dir, number, t->worker, t->num_workers);
	char *fprefix = final ? ckpt__asprintf("%s/" CKPT__TIER_PREFIX, final) : NULL;
	int rc = prefix && final && fprefix ? CKPT_OK : CKPT_ENOMEM;
	if (rc == CKPT_OK)
		rc = ckpt__checkpoint_save_via(ck, prefix, number, ckpt__tier_slots_vfs(t->slots));
	uint64_t bytes = 0;
	if (rc == CKPT_OK)
		rc = ckpt__tier_segment_commit(&bytes, tmp, final, t->job, number, t->worker, t->num_workers, 0, NULL);
	if (rc < 0) {
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		ckpt__tier_remove_tree(tmp);
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	if (rc == CKPT_OK)
		rc = remove_others(t, number);
	if (rc == CKPT_OK) {
		ckpt__free(t->last_path);
		t->last_path = fprefix;
		fprefix = NULL;
		*path_out = t->last_path;
	}
	ckpt__free(fprefix);
	ckpt__free(final);
	ckpt__free(prefix);
	ckpt__free(tmp);
	return rc;
}

/* A copy that does not check is skipped; a live tree that does not match the state is the caller's error. */
static int skippable(int rc)
{
	return rc == CKPT_ECHECKSUM || rc == CKPT_EFORMAT || rc == CKPT_ENOTFOUND || rc == CKPT_EIO ||
		rc == CKPT_ELIMIT;
}

/*
 * The newest step that checks, newer than `newer_than`: restored into `ck`,
 * or (ck NULL) loaded into a new checkpoint *load_out with options `lo`.
 */
static int restore_newest(ckpt_restore_status **status, int *restored, const char **path_out, ckpt__tier *t,
	ckpt_checkpoint *ck, ckpt_checkpoint **load_out, const ckpt_checkpoint_options *lo, int64_t newer_than,
	ckpt_warning_fn warn, void *warn_ctx)
{
	int64_t *steps = NULL;
	size_t n = 0;
	CKPT_TRY(own_steps(&steps, &n, t));
	int rc = CKPT_OK;
	for (size_t i = 0; i < n && steps[i] > newer_than && !*restored; i++) {
		char *seg = ckpt__tier_segment_path(t->job_dir, steps[i], t->worker, t->num_workers);
		char *prefix = seg ? ckpt__asprintf("%s/" CKPT__TIER_PREFIX, seg) : NULL;
		if (!prefix) {
			ckpt__free(seg);
			rc = CKPT_ENOMEM;
			break;
		}
		uint64_t bytes = 0;
		rc = ckpt__tier_segment_check(&bytes, seg, t->job, steps[i], t->worker, t->num_workers);
		if (rc == CKPT_OK)
			rc = ck ? ckpt__checkpoint_restore_via(status, ck, prefix, ckpt_vfs_default(), 0)
				: ckpt_checkpoint_load(load_out, status, prefix, lo);
		if (rc == CKPT_OK) {
			*restored = 1;
			if (status && *status)
				ckpt__restore_status_set_tier(*status, CKPT_TIER_MEMORY);
			ckpt__free(t->last_path);
			t->last_path = prefix;
			*path_out = prefix;
			prefix = NULL;
		} else if (skippable(rc)) {
			char e[1024];
			ckpt__warn(warn, warn_ctx, "memory tier: skipping step %" PRId64 " of job %s (%s); %s", steps[i],
				t->job, ckpt_error_format(ckpt_error_last(), e, sizeof(e)),
				i + 1 < n && steps[i + 1] > newer_than ? "trying the previous step in memory"
								       : "falling back to the checkpoint directory");
			ckpt_error_clear();
			rc = CKPT_OK;
		}
		ckpt__free(prefix);
		ckpt__free(seg);
		if (rc < 0)
			break;
	}
	ckpt__free(steps);
	return rc;
}

int ckpt__tier_restore(ckpt_restore_status **status, int *restored, const char **path_out, ckpt__tier *t,
	ckpt_checkpoint *ck, int64_t newer_than, ckpt_warning_fn warn, void *warn_ctx)
{
	*restored = 0;
	*path_out = NULL;
	ckpt_strategy *cs = ckpt__checkpoint_collective(ck);
	if (cs)
		return ckpt__tier_mw_restore(status, restored, path_out, t, cs, ck, newer_than, warn, warn_ctx);
	return restore_newest(status, restored, path_out, t, ck, NULL, NULL, newer_than, warn, warn_ctx);
}

int ckpt__tier_load(ckpt_checkpoint **out, ckpt_restore_status **status, int *loaded, const char **path_out,
	ckpt__tier *t, const ckpt_checkpoint_options *o, int64_t newer_than, ckpt_warning_fn warn, void *warn_ctx)
{
	*out = NULL;
	*loaded = 0;
	*path_out = NULL;
	return restore_newest(status, loaded, path_out, t, NULL, out, o, newer_than, warn, warn_ctx);
}

void ckpt__tier_close(ckpt__tier *t, int64_t newest_persistent, ckpt_warning_fn warn, void *warn_ctx)
{
	if (!t)
		return;
	if (t->mw_known) {
		/* a step still being copied is committed first (collective), or dropped with a warning */
		ckpt__error_slot saved = { 0 };
		ckpt__error_capture(&saved);
		char e[1024];
		if (ckpt__tier_mw_settle(t) < 0)
			ckpt__warn(warn, warn_ctx, "memory tier: the last step's copies to other nodes failed and the "
				"manager was freed before it was reported: %s", ckpt_error_format(ckpt_error_last(), e, sizeof(e)));
		ckpt__error_raise(&saved);
		ckpt__error_slot_clear(&saved);
		ckpt__tier_mw_close(t, newest_persistent, warn, warn_ctx);
		ckpt__tier_free(t);
		return;
	}
	int64_t *steps = NULL;
	size_t n = 0;
	ckpt__error_slot saved = { 0 };
	ckpt__error_capture(&saved);
	if (own_steps(&steps, &n, t) == CKPT_OK) {
		if (n && steps[0] > newest_persistent)
			ckpt__warn(warn, warn_ctx, "memory tier: keeping step %" PRId64 " of job %s in %s, newer than the "
				"newest checkpoint in storage, for a restart to restore (`ckpt tier drop %s` removes it)",
				steps[0], t->job, t->job_dir, t->job);
		else {
			/* a clean finish: storage holds everything memory did */
			int rc = remove_others(t, -1);
			ckpt__tier_slots_free(t->slots);
			t->slots = NULL;
			char *tmp = rc == CKPT_OK ? ckpt__asprintf("%s/.tmp-step-", t->job_dir) : NULL;
			DIR *d = tmp ? opendir(t->job_dir) : NULL;
			struct dirent *e;
			char suffix[64];
			snprintf(suffix, sizeof(suffix), ".w%d-of-%d", t->worker, t->num_workers);
			while (d && (e = readdir(d))) {
				size_t l = strlen(e->d_name), sl = strlen(suffix);
				if (strncmp(e->d_name, ".tmp-step-", 10) == 0 && l > sl && !strcmp(e->d_name + l - sl, suffix)) {
					char *p = ckpt__asprintf("%s/%s", t->job_dir, e->d_name);
					if (p)
						ckpt__tier_remove_tree(p);
					ckpt__free(p);
				}
			}
			if (d)
				closedir(d);
			ckpt__free(tmp);
			/* the job's directory, and the default tier directory, go when nothing else is left in them */
			rmdir(t->job_dir);
			if (!t->named_base)
				rmdir(t->base);
		}
	}
	ckpt__free(steps);
	ckpt__error_raise(&saved);
	ckpt__error_slot_clear(&saved);
	ckpt__tier_free(t);
}

int ckpt__tier_skip(ckpt_checkpoint *ck, int64_t number)
{
	ckpt_variable *v;
	CKPT_TRY(ckpt_status_of(v = ckpt_checkpoint_save_counter_variable(ck)));
	return ckpt_variable_assign(v, &number, sizeof(number));
}

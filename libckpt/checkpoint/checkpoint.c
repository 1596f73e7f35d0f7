/*
 * ckpt_checkpoint: the root object, options, save_counter, save / write.
 *
 * write() emits one value per logical variable (ckpt_variable_read: the
 * primary copy of a mirrored variable, the aggregate of a sync-on-read one)
 * in TF2 order — BFS node order, slot variables, then the object graph,
 * which the TensorBundle writer places last — through ckpt_writer_*, whose
 * commit is atomic (temporaries, fsync, rename with the index last).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "checkpoint_internal.h"
#include "model/variable_internal.h"
#include "partitioned_internal.h"
#include "reader/format_registry.h"
#include "model/strategy_impl.h"
#include "device/memory_internal.h"
#include "save_device.h"
#include "ckpt/sys/bundle_part.h"

#define SAVE_COUNTER "save_counter"

int ckpt_checkpoint_new(ckpt_checkpoint **out, const ckpt_checkpoint_options *o)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_new: NULL out");
	*out = NULL;
	ckpt_checkpoint_options opts = CKPT_CHECKPOINT_OPTIONS_INIT;
	if (o) {
		if (o->version == 1) { /* before sync_rules */
			memcpy(&opts, o, offsetof(ckpt_checkpoint_options, sync_rules));
			opts.version = CKPT_CHECKPOINT_OPTIONS_VERSION;
		} else if (o->version == 2) { /* before restore_single_pass */
			memcpy(&opts, o, offsetof(ckpt_checkpoint_options, restore_single_pass));
			opts.version = CKPT_CHECKPOINT_OPTIONS_VERSION;
		} else if (o->version == CKPT_CHECKPOINT_OPTIONS_VERSION) {
			opts = *o;
		} else {
			return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "unsupported ckpt_checkpoint_options version %u",
				o->version);
		}
	}
	ckpt_sync_rule *rules = NULL;
	CKPT_TRY(ckpt__sync_rules_copy(&rules, opts.sync_rules, opts.num_sync_rules));
	ckpt_checkpoint *ck = ckpt__calloc(1, sizeof(*ck));
	if (!ck) {
		ckpt__sync_rules_free(rules, opts.num_sync_rules);
		return CKPT_ENOMEM;
	}
	ck->opts = opts;
	ck->opts.sync_rules = rules;
	if (opts.format && !(ck->opts.format = ckpt__strdup(opts.format))) {
		ckpt__sync_rules_free(rules, opts.num_sync_rules);
		ckpt__free(ck);
		return CKPT_ENOMEM;
	}
	int rc = ckpt__object_alloc(&ck->root);
	if (rc < 0) {
		ckpt_checkpoint_free(ck);
		return rc;
	}
	*out = ck;
	return CKPT_OK;
}

void ckpt_checkpoint_free(ckpt_checkpoint *ck)
{
	if (!ck)
		return;
	ckpt_object_free(ck->root);
	ckpt__find_cache_free(ck->find);
	ckpt__free((char *)ck->opts.format);
	ckpt__sync_rules_free((ckpt_sync_rule *)ck->opts.sync_rules, ck->opts.num_sync_rules);
	ckpt__free(ck->last_path);
	ckpt__free(ck->parted);
	ckpt__incr_clear(ck->incr);
	ckpt__free(ck->incr);
	ckpt_bundle_part_record_free(ck->part_rec);
	ckpt__free(ck);
}

ckpt_object *ckpt_checkpoint_root(ckpt_checkpoint *ck)
{
	return ck ? ck->root : NULL;
}

int ckpt_checkpoint_add(ckpt_checkpoint *ck, const char *local_name, ckpt_object *child)
{
	if (!ck)
		return ckpt__fail(CKPT_EINVAL, NULL, local_name, -1, "ckpt_checkpoint_add: NULL checkpoint");
	return ckpt_object_add_child(ck->root, local_name, child);
}

static ckpt_variable *counter_var(const ckpt_checkpoint *ck)
{
	const ckpt__edge *e = ckpt__object_edge(ck->root, SAVE_COUNTER);
	if (!e || !e->child->is_var_node)
		return NULL;
	ckpt_variable *v = e->child->attrs[0].var;
	if (ckpt_variable_dtype(v) != CKPT_DT_INT64 || ckpt_variable_shape(v)->rank != 0)
		return NULL;
	return v;
}

int ckpt__checkpoint_read_save_counter(const ckpt_checkpoint *ck, int64_t *out)
{
	ckpt_variable *v = ck ? counter_var(ck) : NULL;
	*out = 0;
	if (v)
		CKPT_TRY(ckpt_variable_read(v, out, sizeof(*out)));
	return CKPT_OK;
}

int64_t ckpt_checkpoint_save_counter(const ckpt_checkpoint *ck)
{
	int64_t n = 0;
	if (ckpt__checkpoint_read_save_counter(ck, &n) < 0)
		n = 0;
	return n;
}

static int checkpoint_save_counter_variable_rc(ckpt_variable **out, ckpt_checkpoint *ck)
{
	if (!out || !ck)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_save_counter_variable: NULL argument");
	*out = NULL;
	ckpt_variable *v = counter_var(ck);
	if (!v) {
		if (ckpt__object_edge(ck->root, SAVE_COUNTER))
			return ckpt__fail(CKPT_EINVAL, NULL, SAVE_COUNTER, -1,
				"the root child 'save_counter' is not an int64 scalar variable");
		ckpt_shape scalar = { 0 };
		CKPT_TRY(ckpt_status_of(v = ckpt_object_add_variable(ck->root, SAVE_COUNTER, SAVE_COUNTER, CKPT_DT_INT64, &scalar, NULL)));
	}
	*out = v;
	return CKPT_OK;
}

ckpt_variable *ckpt_checkpoint_save_counter_variable(ckpt_checkpoint *ck)
{
	ckpt_variable *out = NULL;
	int rc = checkpoint_save_counter_variable_rc(&out, ck);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}

/* One value per logical variable: copy 0 of a plain / mirrored variable (no copy; strings: a copy), the aggregate of a sync-on-read one. */
static int add_value(ckpt_writer *w, ckpt_variable *v, const char *key, void **buf, size_t *cap,
	ckpt__save_prefetch *pf, const void *ready, uint64_t base_gen)
{
	ckpt_dtype dt = ckpt_variable_dtype(v);
	if (dt == CKPT_DT_STRING) {
		/* elements live in per-replica copies: a deep copy of the primary */
		ckpt_tensor *st;
		CKPT_TRY(ckpt_variable_read_tensor(&st, v));
		int rc = ckpt_writer_add(w, key, st, 0);
		ckpt_tensor_free(st);
		return rc;
	}
	uint64_t nb = ckpt_variable_nbytes(v);
	const void *src = ckpt_variable_replica_data(v, 0);
	/* device copies: device -> pinned memory of their provider -> file; copied ahead by the caller (ready),
	 * else (sync-on-read: the aggregate, computed on the host with the replicas' chunks in the ring) read here */
	if (ready) {
		src = ready;
	} else if (ckpt_variable_kind(v) == CKPT_VAR_SYNC_ON_READ || ckpt__variable_on_device(v)) {
		if (nb > *cap) {
			void *nbuf = ckpt__realloc(*buf, (size_t)nb);
			if (!nbuf)
				return CKPT_ENOMEM;
			*buf = nbuf;
			*cap = (size_t)nb;
		}
		void *scratch = NULL;
		size_t scratch_n = 0;
		if (ckpt__variable_on_device(v))
			CKPT_TRY(ckpt__save_scratch(pf, v, &scratch, &scratch_n));
		CKPT_TRY(ckpt__variable_read_staged(v, *buf, (size_t)nb, scratch, scratch_n));
		src = *buf;
	}
	/* a header on the stack (what ckpt_tensor_wrap would allocate): the variable's nbytes match its shape */
	ckpt_tensor t = { 0 };
	t.dtype = dt;
	t.shape = *ckpt_variable_shape(v);
	t.nbytes = nb;
	t.data = (void *)src;
	t.owns_data = 0;
	/* incremental: unchanged since the last save, and its own memory stays as it is until the commit */
	if (base_gen && src == ckpt_variable_replica_data(v, 0) && ckpt__variable_unchanged_since(v, base_gen))
		return ckpt__writer_add_clean(w, key, &t);
	return ckpt_writer_add(w, key, &t, 0);
}

static ckpt_strategy *collective_in_plan(const ckpt_checkpoint *ck, const ckpt__plan *p)
{
	ckpt_strategy *cur = ckpt_strategy_current();
	if (ckpt__strategy_is_collective(cur))
		return cur;
	/* partitioned variables: their parts are plain, their strategy is the one they were split under */
	for (size_t i = 0; i < ck->nparted; i++)
		if (ckpt__strategy_is_collective(ckpt__partitioned_strategy(ck->parted[i])))
			return ckpt__partitioned_strategy(ck->parted[i]);
	for (size_t i = 0; i < p->n; i++)
		if (p->nodes[i].obj->parted && ckpt__strategy_is_collective(ckpt__partitioned_strategy(p->nodes[i].obj->parted)))
			return ckpt__partitioned_strategy(p->nodes[i].obj->parted);
	for (size_t i = 0; i < p->n; i++) {
		const ckpt_object *o = p->nodes[i].obj;
		for (size_t a = 0; a < o->nattrs; a++)
			if (ckpt__strategy_is_collective(ckpt_variable_strategy(o->attrs[a].var)))
				return ckpt_variable_strategy(o->attrs[a].var);
	}
	return NULL;
}

ckpt_strategy *ckpt__checkpoint_collective(ckpt_checkpoint *ck)
{
	ckpt_strategy *cur = ckpt_strategy_current();
	if (ckpt__strategy_is_collective(cur) || !ck)
		return ckpt__strategy_is_collective(cur) ? cur : NULL;
	/* no cross-process strategy alive: no variable can have one (skips building a plan of the tree) */
	if (!ckpt__strategy_any_collective())
		return NULL;
	ckpt__plan p;
	if (ckpt__plan_build(&p, ck->root) < 0) {
		ckpt_error_clear();
		return NULL;
	}
	ckpt_strategy *s = collective_in_plan(ck, &p);
	ckpt__plan_free(&p);
	return s;
}

/*
 * Incremental multi-process save: per value, whether this process saw no write to it since its last committed
 * save (each process owns its shard's record; a value's stamps are this process's copy's).
 */
static int collective_clean(unsigned char **clean, ckpt_checkpoint *ck, ckpt_variable *const *vars, size_t n)
{
	*clean = NULL;
	if (!ck->part_rec)
		CKPT_TRY(ckpt_bundle_part_record_new(&ck->part_rec));
	if (!ck->part_gen)
		return CKPT_OK;
	if (!(*clean = ckpt__calloc(n ? n : 1, 1)))
		return CKPT_ENOMEM;
	for (size_t i = 0; i < n; i++)
		(*clean)[i] = (unsigned char)ckpt__variable_unchanged_since(vars[i], ck->part_gen);
	return CKPT_OK;
}

/* A cross-process strategy writes the checkpoint itself (sharded over its processes). */
static int write_collective(ckpt_strategy *cs, ckpt_checkpoint *ck, const ckpt__plan *p, const char *path,
	ckpt_vfs *piece_vfs, ckpt_strategy_piece *piece)
{
	size_t n = 0;
	for (size_t i = 0; i < p->n; i++)
		n += p->nodes[i].obj->nattrs;
	const char **keys = ckpt__calloc(n ? n : 1, sizeof(*keys));
	ckpt_variable **vars = ckpt__calloc(n ? n : 1, sizeof(*vars));
	if (!keys || !vars) {
		ckpt__free(keys);
		ckpt__free(vars);
		/* still take part, so the other processes fail instead of waiting */
		return ckpt__strategy_ops_of(cs)->agree(cs, ckpt__fail(CKPT_ENOMEM, path, NULL, -1, "out of memory"));
	}
	size_t k = 0;
	for (size_t i = 0; i < p->n; i++) {
		const ckpt_object *o = p->nodes[i].obj;
		for (size_t a = 0; a < o->nattrs; a++, k++) {
			keys[k] = p->graph->nodes[i].attrs[a].checkpoint_key;
			vars[k] = o->attrs[a].var;
		}
	}
	ckpt__parted_ref *refs = NULL;
	size_t nrefs = 0;
	ckpt_partitioned **parted = NULL;
	const char **pkeys = NULL;
	int rc = ckpt__partitioned_refs(&refs, &nrefs, ck, p);
	if (rc == CKPT_OK && nrefs) {
		parted = ckpt__calloc(nrefs, sizeof(*parted));
		pkeys = ckpt__calloc(nrefs, sizeof(*pkeys));
		rc = parted && pkeys ? CKPT_OK : CKPT_ENOMEM;
		for (size_t i = 0; rc == CKPT_OK && i < nrefs; i++) {
			parted[i] = refs[i].p;
			pkeys[i] = refs[i].key;
		}
	}
	ckpt_vfs *vfs = NULL;
	if (rc == CKPT_OK)
		rc = ckpt_status_of(vfs = piece ? piece_vfs : ckpt_vfs_for_path(ck->opts.vfs, path));
	/*
	 * incremental: the stamp before any value is read. Never into the memory tier: its pieces must share no
	 * file with the checkpoint directory's.
	 */
	int incremental = ck->incremental && !piece && piece_vfs == ck->opts.vfs;
	uint64_t gen = incremental ? ckpt__change_gen() : 0;
	unsigned char *clean = NULL;
	if (rc == CKPT_OK && incremental)
		rc = collective_clean(&clean, ck, vars, n);
	ckpt__save_request req = { path, vfs ? vfs : ckpt_vfs_default(), piece ? 1 : ck->opts.no_fsync,
		n, keys, vars, p->graph, nrefs, parted, pkeys, piece, incremental ? ck->part_rec : NULL, clean };
	if (rc < 0) /* still take part, so the other processes fail instead of waiting */
		rc = ckpt__strategy_ops_of(cs)->agree(cs, rc);
	else
		rc = ckpt__strategy_ops_of(cs)->write(cs, &req);
	if (incremental) {
		/* the next save compares with this one only once every process committed it */
		int based = ckpt_bundle_part_record_settle(ck->part_rec, rc == CKPT_OK);
		if (rc == CKPT_OK) {
			ck->part_gen = based ? gen : 0;
			ck->last_collective = 1;
		}
	}
	ckpt__free(clean);
	ckpt__free(refs);
	ckpt__free(parted);
	ckpt__free(pkeys);
	ckpt__free(keys);
	ckpt__free(vars);
	return rc;
}

/* Move *i, *a (node, attribute) to the next device value a save copies ahead, at or after them; NULL at the end. */
static const ckpt_variable *device_value_from(const ckpt__plan *p, size_t *i, size_t *a)
{
	for (; *i < p->n; (*i)++, *a = 0) {
		const ckpt_object *o = p->nodes[*i].obj;
		for (; *a < o->nattrs; (*a)++)
			if (ckpt__save_prefetchable(o->attrs[*a].var))
				return o->attrs[*a].var;
	}
	return NULL;
}

/*
 * `io`: where and how to write (the checkpoint's own options, or the memory tier's local files);
 * `piece`: the memory tier's piece of a multi-process save (ckpt/sys/strategy.h), else NULL.
 */
static int write_to(ckpt_checkpoint *ck, const char *path, const ckpt_checkpoint_options *io,
	ckpt_strategy_piece *piece)
{
	CKPT_TRY(ckpt__check_not_replica("ckpt_checkpoint_write"));
	CKPT_TRY(ckpt__checkpoint_check_mirrored(ck, path));
	ckpt__plan p;
	CKPT_TRY(ckpt__plan_build_to_write(&p, ck));
	ckpt_strategy *cs = collective_in_plan(ck, &p);
	if (cs) {
		int crc = write_collective(cs, ck, &p, path, io->vfs, piece);
		ckpt__plan_free(&p);
		if (crc == CKPT_OK) {
			char *lp = ckpt__strdup(path);
			if (!lp)
				return CKPT_ENOMEM;
			ckpt__free(ck->last_path);
			ck->last_path = lp;
		}
		return crc;
	}
	ckpt_write_options wo = CKPT_WRITE_OPTIONS_INIT;
	wo.vfs = io->vfs;
	wo.no_fsync = io->no_fsync;
	ckpt_writer *w = NULL;
	void *buf = NULL;
	size_t cap = 0;
	int rc = ckpt_writer_open(&w, path, io->format, &wo);
	/*
	 * incremental: the stamp before any value is read; values stamped below the last save's did not change.
	 * Never into the memory tier: its segments must share no file with the checkpoint directory's.
	 */
	int incremental = ck->incremental && io->vfs == ck->opts.vfs;
	uint64_t gen = 0, base_gen = 0;
	if (rc == CKPT_OK && incremental && !ck->incr && !(ck->incr = ckpt__calloc(1, sizeof(*ck->incr))))
		rc = CKPT_ENOMEM;
	if (rc == CKPT_OK && incremental) {
		gen = ckpt__change_gen();
		int taken = ckpt__writer_incremental(w, ck->incr);
		if (taken < 0)
			rc = taken;
		else if (taken == 0)
			gen = 0;
		else if (ck->incr->base)
			base_gen = ck->incr->base_gen;
	}
	/* device values through the pinned ring: the next one's (or the next piece's) device-to-host copy runs while
	 * the writer stores this one; no half larger than the largest of them */
	ckpt__save_prefetch pf = { 0 };
	/* every value is known up front: a flat writer then writes each in place instead of copying it */
	for (size_t i = 0; i < p.n && rc == CKPT_OK; i++) {
		const ckpt_object *o = p.nodes[i].obj;
		for (size_t a = 0; a < o->nattrs && rc == CKPT_OK; a++) {
			const ckpt_variable *v = o->attrs[a].var;
			rc = ckpt_writer_announce(w, p.nodes[i].keys[a], ckpt_variable_dtype(v), ckpt_variable_shape(v));
			if (ckpt__variable_on_device(v) && ckpt_variable_nbytes(v) > pf.largest)
				pf.largest = (size_t)ckpt_variable_nbytes(v);
		}
	}
	size_t ni = 0, na = 0; /* the cursor of device values, one ahead of the loop: linear in the values */
	for (size_t i = 0; i < p.n && rc == CKPT_OK; i++) {
		const ckpt_object *o = p.nodes[i].obj;
		for (size_t a = 0; a < o->nattrs && rc == CKPT_OK; a++) {
			ckpt_variable *v = o->attrs[a].var;
			const void *ready = NULL;
			int streamed = 0;
			if (ckpt__save_prefetchable(v)) {
				/* larger than a half of the ring: in pieces where the format takes them, else whole */
				streamed = ckpt__save_in_pieces(v) && ckpt__writer_streams(w);
				if (streamed)
					rc = ckpt__save_stream(&pf, w, v, p.nodes[i].keys[a]);
				else
					rc = ckpt__save_prefetch_get(&pf, v, &ready);
				/* the next device value after this one: the cursor never moves back */
				if (ni < i || (ni == i && na <= a)) {
					ni = i;
					na = a + 1;
				}
				const ckpt_variable *next = device_value_from(&p, &ni, &na);
				if (next)
					na++; /* past it: the search for the one after starts there */
				if (rc == CKPT_OK)
					rc = ckpt__save_prefetch_start(&pf, next);
			}
			if (rc == CKPT_OK && !streamed)
				rc = add_value(w, v, p.nodes[i].keys[a], &buf, &cap, &pf, ready, base_gen);
		}
	}
	ckpt__save_prefetch_free(&pf);
	if (rc == CKPT_OK) {
		ckpt__parted_ref *refs = NULL;
		size_t nrefs = 0;
		rc = ckpt__partitioned_refs(&refs, &nrefs, ck, &p);
		if (rc == CKPT_OK)
			rc = ckpt__partitioned_write(w, refs, nrefs);
		ckpt__free(refs);
	}
	if (rc == CKPT_OK)
		rc = ckpt__writer_borrow_object_graph(w, p.graph); /* the plan outlives the commit */
	if (rc == CKPT_OK)
		rc = ckpt_writer_commit(w);
	if (rc == CKPT_OK && gen)
		ck->incr->base_gen = ck->incr->base ? gen : 0;
	if (rc == CKPT_OK && incremental)
		ck->last_collective = 0;
	ckpt_writer_free(w);
	ckpt__free(buf);
	ckpt__plan_free(&p);
	if (rc == CKPT_OK) {
		char *lp = ckpt__strdup(path);
		if (!lp)
			return CKPT_ENOMEM;
		ckpt__free(ck->last_path);
		ck->last_path = lp;
	}
	return rc;
}

void ckpt__checkpoint_set_incremental(ckpt_checkpoint *ck, int on)
{
	ck->incremental = on != 0;
}

int ckpt_checkpoint_last_save_bytes(uint64_t *written, uint64_t *reused, const ckpt_checkpoint *ck)
{
	if (!written || !reused || !ck)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_last_save_bytes: NULL argument");
	if (ck->last_collective) {
		/* this process's shard */
		ckpt_bundle_part_record_bytes(written, reused, ck->part_rec);
		return CKPT_OK;
	}
	*written = ck->incr ? ck->incr->written : 0;
	*reused = ck->incr ? ck->incr->reused : 0;
	return CKPT_OK;
}

int ckpt_checkpoint_write(ckpt_checkpoint *ck, const char *path)
{
	if (!ck || !path || !*path)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_write: NULL argument");
	return write_to(ck, path, &ck->opts, NULL);
}

/* Shared by save() and the manager: set save_counter to `number`, write, roll back on failure. */
int ckpt__checkpoint_save_as(ckpt_checkpoint *ck, const char *path, int64_t number)
{
	return ckpt__checkpoint_save_via(ck, path, number, NULL);
}

int ckpt__checkpoint_save_via(ckpt_checkpoint *ck, const char *path, int64_t number, ckpt_vfs *vfs)
{
	return ckpt__checkpoint_save_piece(ck, path, number, vfs, NULL);
}

int ckpt__checkpoint_save_piece(ckpt_checkpoint *ck, const char *path, int64_t number, ckpt_vfs *vfs,
	ckpt_strategy_piece *piece)
{
	ckpt_checkpoint_options io = ck->opts;
	if (vfs) {
		/* a local copy of the state (the memory tier): always a TensorBundle, never fsynced */
		io.vfs = vfs;
		io.no_fsync = 1;
		io.format = NULL;
		/* a multi-process one is written piece by piece (manager/tier/tier_mw.c) */
		if (ckpt__checkpoint_collective(ck) && !piece)
			return ckpt__fail(CKPT_EUNSUPPORTED, path, NULL, -1,
				"the memory tier of a multi-process checkpoint is written by pieces");
	}
	CKPT_TRY(ckpt__check_not_replica("ckpt_checkpoint_save"));
	ckpt_variable *v;
	CKPT_TRY(ckpt_status_of(v = ckpt_checkpoint_save_counter_variable(ck)));
	int64_t old = 0;
	CKPT_TRY(ckpt_variable_read(v, &old, sizeof(old)));
	CKPT_TRY(ckpt_variable_assign(v, &number, sizeof(number)));
	int rc = write_to(ck, path, &io, piece);
	if (rc < 0) {
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		ckpt_variable_assign(v, &old, sizeof(old));
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	return rc;
}

static int checkpoint_save_rc(const char **path_out, ckpt_checkpoint *ck, const char *prefix)
{
	if (path_out)
		*path_out = NULL;
	if (!ck || !prefix || !*prefix)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_save: NULL argument");
	int64_t n = 0;
	CKPT_TRY(ckpt__checkpoint_read_save_counter(ck, &n));
	if (n == INT64_MAX)
		return ckpt__fail(CKPT_ELIMIT, prefix, SAVE_COUNTER, -1, "save_counter overflows");
	char *path = ckpt__asprintf("%s-%lld", prefix, (long long)(n + 1));
	if (!path)
		return CKPT_ENOMEM;
	int rc = ckpt__checkpoint_save_as(ck, path, n + 1);
	ckpt__free(path);
	if (rc == CKPT_OK && path_out)
		*path_out = ck->last_path;
	return rc;
}

const char *ckpt_checkpoint_save(ckpt_checkpoint *ck, const char *prefix)
{
	const char *path_out = NULL;
	int rc = checkpoint_save_rc(&path_out, ck, prefix);
	ckpt__borrowed_status(rc, path_out != NULL);
	return rc == CKPT_OK ? path_out : NULL;
}

/*
 * The checkpoint manager (tf.train.CheckpointManager) and TensorFlow's
 * `checkpoint` state file, a text-format CheckpointState
 * (checkpoint_state.proto, tf-bundle.md §8):
 *
 *     model_checkpoint_path: "ckpt-2"
 *     all_model_checkpoint_paths: "ckpt-1"
 *     all_model_checkpoint_paths: "ckpt-2"
 *     all_model_checkpoint_timestamps: 1606867698.033619
 *     all_model_checkpoint_timestamps: 1606867791.8105
 *     last_preserved_timestamp: 1606867659.7415721
 *
 * Paths are written relative to the directory (save_relative_paths) and
 * the file is replaced atomically (ckpt_vfs_write_atomic). A checkpoint
 * "exists" when PREFIX.index exists; it is complete when that index parses
 * and every data shard it names exists with the size the index implies.
 *
 * Crash safety. A save is: write ckpt-N (atomic, index last), delete the
 * oldest beyond max_to_keep (each index first), write the state file. A
 * crash anywhere leaves the state file either current or one save behind;
 * so at start-up the newest complete checkpoints that the state file does
 * not list (numbers above every listed one) are adopted as the latest, with
 * a warning when they are restored, and a manager that saves (it holds the
 * directory's lock, ckpt_vfs_lock, so no other writer is running) finishes
 * the interrupted save: deletes the leftover temporaries, applies
 * max_to_keep, rewrites the state file. The directory then never holds
 * more than max_to_keep complete checkpoints plus the one being written,
 * and numbering continues from the newest.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <sys/time.h>
#include "checkpoint/checkpoint_internal.h"
#include "manager_internal.h"
#include "manager/tier/tier_internal.h"
#include "ckpt/sys/bundle_part.h"
#include "model/strategy_impl.h"

#define STATE_FILE "checkpoint"

typedef struct mgr_entry {
	char *path;              /* full prefix */
	double time;
	int unlisted;            /* adopted from the directory: the state file did not list it */
} mgr_entry;

struct ckpt_manager {
	ckpt_checkpoint *ck;
	char *dir;
	char *name;              /* "ckpt" */
	int max_to_keep;
	ckpt_vfs *vfs;
	ckpt_warning_fn warn;
	void *warn_ctx;
	int no_fsync;
	int fallback;            /* restore_latest tries older checkpoints when the newest does not verify */
	size_t n, cap;
	mgr_entry *list;         /* oldest first */
	double last_preserved;
	int64_t max_number;      /* highest N of "<name>-N" seen */
	char *last_saved;
	char *latest_valid;
	char *warned_unlisted;   /* the unlisted checkpoint already warned about */
	void *lock;              /* ckpt_vfs_lock's token, held by a manager that saves */
	ckpt__manager_async *async; /* a save in flight (manager_async.c) */
	ckpt__manager_finish_fn async_finish; /* how it is finished: left by manager_async.c with it */
	ckpt__tier *tier;        /* the memory tier (tier_manager.c), NULL without one */
	int incremental;
	ckpt__persist *persist;  /* a checkpoint being copied from the memory tier (manager_persist.c) */
	char *persist_path;      /* its path, as the save that started it returned it */
};

/*
 * Multi-process checkpoints (a cross-process strategy, strategy_impl.h):
 * every process runs the same manager calls; process 0 alone changes shared
 * files (cleanup, retention, the state file) and each call ends by agreeing
 * on its status. A one-writer-per-directory lock belongs to the writer
 * process only: take it where writer_process() is 1 and agree on the result.
 */
static ckpt_strategy *collective(const ckpt_manager *m)
{
	return m->ck ? ckpt__checkpoint_collective(m->ck) : NULL;
}

static int writer_process(ckpt_strategy *cs)
{
	return !cs || ckpt__strategy_ops_of(cs)->is_writer(cs);
}

static int agree(ckpt_strategy *cs, int rc)
{
	return cs ? ckpt__strategy_ops_of(cs)->agree(cs, rc) : rc;
}

static double now_seconds(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* Shortest decimal that reads back to the same double (Python repr, as text_format prints it). */
static void format_double(char *buf, size_t n, double d)
{
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, n, "%.*g", p, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	if (!strpbrk(buf, ".eEn"))
		strncat(buf, ".0", n - strlen(buf) - 1);
}

/* ---- the list ---- */

static int list_push(ckpt_manager *m, const char *path, double t, int unlisted)
{
	/* a re-saved prefix moves to the end */
	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->list[i].path, path) == 0) {
			mgr_entry e = m->list[i];
			memmove(&m->list[i], &m->list[i + 1], (m->n - i - 1) * sizeof(mgr_entry));
			e.time = t;
			e.unlisted = unlisted;
			m->list[m->n - 1] = e;
			return CKPT_OK;
		}
	}
	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 8;
		mgr_entry *nl = ckpt__realloc(m->list, nc * sizeof(*nl));
		if (!nl)
			return CKPT_ENOMEM;
		m->list = nl;
		m->cap = nc;
	}
	char *p = ckpt__strdup(path);
	if (!p)
		return CKPT_ENOMEM;
	m->list[m->n++] = (mgr_entry){ p, t, unlisted };
	return CKPT_OK;
}

static void list_clear(ckpt_manager *m)
{
	for (size_t i = 0; i < m->n; i++)
		ckpt__free(m->list[i].path);
	ckpt__free(m->list);
	m->list = NULL;
	m->n = m->cap = 0;
}

static int list_find(const ckpt_manager *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->list[i].path, path) == 0)
			return (int)i;
	return -1;
}

/* "<name>-<digits>" -> number, else -1 */
static int64_t prefix_number(const char *base, const char *name)
{
	size_t nl = strlen(name);
	if (strncmp(base, name, nl) != 0 || base[nl] != '-' || !base[nl + 1])
		return -1;
	int64_t v = 0;
	for (const char *p = base + nl + 1; *p; p++) {
		if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* ---- state file: parse ---- */

static char *parse_quoted(const char **pp)
{
	const char *p = *pp;
	char q = *p;
	if (q != '"' && q != '\'')
		return NULL;
	p++;
	size_t cap = strlen(p) + 1;
	char *out = ckpt__malloc(cap);
	if (!out)
		return NULL;
	size_t n = 0;
	while (*p && *p != q) {
		char c = *p++;
		if (c == '\\' && *p) {
			char e = *p++;
			switch (e) {
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			default:
				if (e >= '0' && e <= '7') {
					int v = e - '0';
					for (int k = 0; k < 2 && *p >= '0' && *p <= '7'; k++)
						v = v * 8 + (*p++ - '0');
					c = (char)v;
				} else {
					c = e; /* \\ \" \' */
				}
			}
		}
		out[n++] = c;
	}
	if (*p != q) {
		ckpt__free(out);
		return NULL;
	}
	out[n] = '\0';
	*pp = p + 1;
	return out;
}

static char *resolve(const ckpt_manager *m, const char *p)
{
	if (p[0] == '/')
		return ckpt__strdup(p);
	return ckpt__path_join(m->dir, p);
}

static int read_state(ckpt_manager *m, int *found)
{
	*found = 0;
	char *path = ckpt__path_join(m->dir, STATE_FILE);
	if (!path)
		return CKPT_ENOMEM;
	int exists = ckpt_vfs_exists(NULL, m->vfs, path);
	if (exists <= 0) {
		/* only a successful answer that nothing is there makes a fresh start */
		ckpt__free(path);
		return exists;
	}
	void *buf = NULL;
	size_t len = 0;
	/* the cap ckpt_reader_open(dir) applies too: the two readers once had different local limits */
	int rc = ckpt_vfs_read_all(&buf, &len, m->vfs, path, CKPT_MAX_STATE_FILE_BYTES);
	if (rc < 0) {
		ckpt__free(path);
		return rc;
	}
	char *text = ckpt__malloc(len + 1);
	if (!text) {
		ckpt__free(buf);
		ckpt__free(path);
		return CKPT_ENOMEM;
	}
	memcpy(text, buf, len);
	text[len] = '\0';
	ckpt__free(buf);
	*found = 1;
	size_t ntimes = 0;
	char *model = NULL;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line && rc == CKPT_OK; line = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		const char *field = line;
		while (*field == ' ' || *field == '\t')
			field++;
		const char *val = colon + 1;
		while (*val == ' ' || *val == '\t')
			val++;
		if (strcmp(field, "model_checkpoint_path") == 0 || strcmp(field, "all_model_checkpoint_paths") == 0) {
			char *s = parse_quoted(&val);
			if (!s) {
				rc = ckpt__fail(CKPT_EFORMAT, path, NULL, -1, "malformed string in field %s", field);
				break;
			}
			if ((rc = ckpt__state_name_check(m->dir, path, s)) < 0) {
				ckpt__free(s);
				break;
			}
			char *full = resolve(m, s);
			ckpt__free(s);
			if (!full) {
				rc = CKPT_ENOMEM;
				break;
			}
			if (field[0] == 'm') {
				ckpt__free(model);
				model = full;
			} else {
				rc = list_push(m, full, 0.0, 0);
				ckpt__free(full);
			}
		} else if (strcmp(field, "all_model_checkpoint_timestamps") == 0) {
			double t = strtod(val, NULL);
			if (ntimes < m->n)
				m->list[ntimes].time = t;
			ntimes++;
		} else if (strcmp(field, "last_preserved_timestamp") == 0) {
			m->last_preserved = strtod(val, NULL);
		}
	}
	/* TF lists model_checkpoint_path last in all_model_checkpoint_paths; keep it newest */
	if (rc == CKPT_OK && model) {
		double t = 0.0;
		for (size_t i = 0; i < m->n; i++)
			if (strcmp(m->list[i].path, model) == 0)
				t = m->list[i].time;
		rc = list_push(m, model, t, 0);
	}
	ckpt__free(model);
	ckpt__free(text);
	ckpt__free(path);
	return rc;
}

/* ---- state file: write ---- */

static int append(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);
	if (*len + n + 1 > *cap) {
		size_t nc = (*cap ? *cap : 256);
		while (nc < *len + n + 1)
			nc *= 2;
		char *nb = ckpt__realloc(*buf, nc);
		if (!nb)
			return CKPT_ENOMEM;
		*buf = nb;
		*cap = nc;
	}
	memcpy(*buf + *len, s, n + 1);
	*len += n;
	return CKPT_OK;
}

static int append_quoted(char **buf, size_t *len, size_t *cap, const char *field, const char *s)
{
	CKPT_TRY(append(buf, len, cap, field));
	CKPT_TRY(append(buf, len, cap, ": \""));
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char e[8];
		if (*p == '"' || *p == '\\' || *p == '\'')
			snprintf(e, sizeof(e), "\\%c", *p);
		else if (*p == '\n')
			snprintf(e, sizeof(e), "\\n");
		else if (*p < 0x20 || *p >= 0x7f)
			snprintf(e, sizeof(e), "\\%03o", *p);
		else
			snprintf(e, sizeof(e), "%c", *p);
		CKPT_TRY(append(buf, len, cap, e));
	}
	return append(buf, len, cap, "\"\n");
}

static const char *relative(const ckpt_manager *m, const char *path)
{
	size_t dl = strlen(m->dir);
	if (strncmp(path, m->dir, dl) == 0 && path[dl] == '/' && !strchr(path + dl + 1, '/'))
		return path + dl + 1;
	return path;
}

/* Write the state file for `paths` (oldest first). Reads only m's fixed fields: safe on a background thread. */
static int write_state(const ckpt_manager *m, char *const *paths, const double *times, size_t n)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc = CKPT_OK;
	char num[64];
	if (n)
		rc = append_quoted(&buf, &len, &cap, "model_checkpoint_path", relative(m, paths[n - 1]));
	for (size_t i = 0; i < n && rc == CKPT_OK; i++)
		rc = append_quoted(&buf, &len, &cap, "all_model_checkpoint_paths", relative(m, paths[i]));
	for (size_t i = 0; i < n && rc == CKPT_OK; i++) {
		format_double(num, sizeof(num), times[i]);
		if ((rc = append(&buf, &len, &cap, "all_model_checkpoint_timestamps: ")) == CKPT_OK &&
			(rc = append(&buf, &len, &cap, num)) == CKPT_OK)
			rc = append(&buf, &len, &cap, "\n");
	}
	if (rc == CKPT_OK) {
		format_double(num, sizeof(num), m->last_preserved);
		if ((rc = append(&buf, &len, &cap, "last_preserved_timestamp: ")) == CKPT_OK &&
			(rc = append(&buf, &len, &cap, num)) == CKPT_OK)
			rc = append(&buf, &len, &cap, "\n");
	}
	if (rc == CKPT_OK) {
		char *path = ckpt__path_join(m->dir, STATE_FILE);
		rc = path ? ckpt_vfs_write_atomic(m->vfs, path, buf ? buf : "", len, !m->no_fsync) : CKPT_ENOMEM;
		ckpt__free(path);
	}
	ckpt__free(buf);
	return rc;
}

/* The state file for the manager's own list. */
static int write_state_current(ckpt_manager *m)
{
	char **paths = ckpt__calloc(m->n ? m->n : 1, sizeof(*paths));
	double *times = ckpt__calloc(m->n ? m->n : 1, sizeof(*times));
	int rc = (paths && times) ? CKPT_OK : CKPT_ENOMEM;
	for (size_t i = 0; rc == CKPT_OK && i < m->n; i++) {
		paths[i] = m->list[i].path;
		times[i] = m->list[i].time;
	}
	if (rc == CKPT_OK)
		rc = write_state(m, paths, times, m->n);
	ckpt__free(paths);
	ckpt__free(times);
	return rc;
}

/* ---- files of one checkpoint ---- */

static int remove_tree(ckpt_vfs *vfs, const char *path, int depth)
{
	int is_dir = 0, e = ckpt_vfs_exists(&is_dir, vfs, path);
	if (e <= 0)
		return e;
	if (is_dir && depth < 8) {
		char **names = NULL;
		size_t n = 0;
		CKPT_TRY(ckpt_vfs_list(&names, &n, vfs, path));
		for (size_t i = 0; i < n; i++) {
			char *p = ckpt__path_join(path, names[i]);
			if (p)
				remove_tree(vfs, p, depth + 1);
			ckpt__free(p);
		}
		ckpt_vfs_free_list(names, n);
	}
	int rc = is_dir ? ckpt_vfs_rmdir(vfs, path) : ckpt_vfs_remove(vfs, path);
	return rc == CKPT_ENOTFOUND ? CKPT_OK : rc;
}

/*
 * Delete PREFIX.index first (the checkpoint stops existing), then its data
 * shards. Only checkpoints directly in the directory: a state file may name
 * paths elsewhere ("../x/ckpt-1", "/abs/ckpt-1"), which are dropped from the
 * list but never deleted.
 */
static int delete_checkpoint(ckpt_manager *m, const char *prefix)
{
	if (relative(m, prefix) == prefix)
		return CKPT_OK;
	char *idx = ckpt__asprintf("%s.index", prefix);
	char *dir = ckpt__path_dir(prefix);
	char *data = ckpt__asprintf("%s.data-", base_name(prefix));
	int rc = (!idx || !dir || !data) ? CKPT_ENOMEM : CKPT_OK;
	if (rc == CKPT_OK) {
		rc = ckpt_vfs_remove(m->vfs, idx);
		if (rc == CKPT_ENOTFOUND)
			rc = CKPT_OK;
	}
	char **names = NULL;
	size_t n = 0;
	if (rc == CKPT_OK)
		rc = ckpt_vfs_list(&names, &n, m->vfs, dir);
	size_t dl = data ? strlen(data) : 0;
	for (size_t i = 0; i < n && rc == CKPT_OK; i++) {
		if (strncmp(names[i], data, dl) != 0)
			continue;
		char *p = ckpt__path_join(dir, names[i]);
		if (!p) {
			rc = CKPT_ENOMEM;
			break;
		}
		rc = ckpt_vfs_remove(m->vfs, p);
		if (rc == CKPT_ENOTFOUND)
			rc = CKPT_OK;
		ckpt__free(p);
	}
	ckpt_vfs_free_list(names, n);
	ckpt__free(idx);
	ckpt__free(dir);
	ckpt__free(data);
	return rc;
}

static int is_temporary(const char *name)
{
	size_t n = strlen(name);
	return strstr(name, ".tempstate") != NULL || strstr(name, "_temp.") != NULL || strstr(name, "_temp_") != NULL ||
		(n >= 5 && strcmp(name + n - 5, "_temp") == 0);
}

/* "<name>-N.data-…" whose "<name>-N.index" is gone: left by a crash between rename steps or deletions. */
static int orphan_data(const ckpt_manager *m, char **names, size_t n, const char *name)
{
	const char *d = strstr(name, ".data-");
	if (!d)
		return 0;
	size_t bl = (size_t)(d - name);
	char base[1024];
	if (bl >= sizeof(base) - 7)
		return 0;
	memcpy(base, name, bl);
	base[bl] = '\0';
	if (prefix_number(base, m->name) < 0)
		return 0;
	memcpy(base + bl, ".index", 7);
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], base) == 0)
			return 0;
	return 1;
}

/* ---- completeness ---- */

/* Bytes of data file `shard` the index implies: the end of its last entry. */
static uint64_t implied_size(const ckpt_reader *r, int shard)
{
	uint64_t end = 0;
	for (size_t i = 0; i < ckpt_reader_num_entries(r); i++) {
		const ckpt_var_info *v = ckpt_reader_var(r, i);
		if (v->shard == shard && v->offset >= 0 && (uint64_t)v->offset + v->nbytes > end)
			end = (uint64_t)v->offset + v->nbytes;
	}
	return end;
}

/*
 * Complete = the index exists and parses, and every data shard exists with
 * the size the index implies. 1 / 0 (with the reason in `why`) / error.
 */
static int check_valid(ckpt_manager *m, const char *prefix, char *why, size_t nwhy)
{
	char *idx = ckpt__asprintf("%s.index", prefix);
	if (!idx)
		return CKPT_ENOMEM;
	int exists = ckpt_vfs_exists(NULL, m->vfs, idx);
	ckpt__free(idx);
	if (exists < 0)
		return exists; /* an outage says nothing about the checkpoint */
	if (!exists) {
		snprintf(why, nwhy, "index file %s.index is missing", prefix);
		return 0;
	}
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	oo.vfs = m->vfs;
	ckpt_reader *r;
	int orc = ckpt_reader_open(&r, prefix, &oo);
	/* a failing device or allocator says nothing about the checkpoint: report it, do not skip */
	if (orc == CKPT_EIO || orc == CKPT_ENOMEM)
		return orc;
	if (orc < 0) {
		char e[512];
		snprintf(why, nwhy, "unreadable: %s", ckpt_error_format(ckpt_error_last(), e, sizeof(e)));
		return 0;
	}
	int ok = 1;
	for (int i = 0; i < ckpt_reader_num_shards(r) && ok == 1; i++) {
		int ex = 1;
		const char *sp = ckpt_reader_shard_path(r, i, &ex);
		if (!ex || !sp) {
			snprintf(why, nwhy, "data file %s is missing", sp ? sp : "?");
			ok = 0;
			break;
		}
		uint64_t want = implied_size(r, i), have = 0;
		ckpt_io *io = NULL;
		int rc = ckpt_vfs_open(&io, m->vfs, sp, CKPT_IO_READ);
		if (rc == CKPT_OK)
			rc = ckpt_io_size(&have, io);
		if (io) {
			int crc = ckpt_io_close(io);
			if (rc == CKPT_OK)
				rc = crc;
		}
		if (rc == CKPT_EIO || rc == CKPT_ENOMEM) {
			ok = rc;
		} else if (rc < 0) {
			char e[512];
			snprintf(why, nwhy, "data file %s: %s", sp, ckpt_error_format(ckpt_error_last(), e, sizeof(e)));
			ok = 0;
		} else if (have != want) {
			snprintf(why, nwhy, "data file %s has %llu bytes, its index implies %llu", sp,
				(unsigned long long)have, (unsigned long long)want);
			ok = 0;
		}
	}
	ckpt_reader_free(r);
	return ok;
}

/* ---- start-up: what the directory holds ---- */

/* Highest number of the listed checkpoints that are ours ("<dir>/<name>-N"), -1 when none. */
static int64_t max_listed(const ckpt_manager *m)
{
	int64_t best = -1;
	for (size_t i = 0; i < m->n; i++) {
		const char *p = m->list[i].path;
		if (relative(m, p) == p)
			continue;
		int64_t num = prefix_number(base_name(p), m->name);
		if (num > best)
			best = num;
	}
	return best;
}

static void sort_numbers(int64_t *a, size_t n)
{
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && a[j - 1] > a[j]; j--) {
			int64_t t = a[j];
			a[j] = a[j - 1];
			a[j - 1] = t;
		}
}

/*
 * Adopt the complete "<name>-N" the state file does not list: all of them
 * when there is no state file, else those numbered above every listed one
 * (a save that committed its checkpoint and died before the state file).
 * Lower-numbered unlisted ones are left alone: TensorFlow's preserved
 * checkpoints (keep_checkpoint_every_n_hours) live there too.
 */
static int adopt(ckpt_manager *m, int have_state, int64_t *found, size_t nf, int *adopted)
{
	*adopted = 0;
	int64_t floor = have_state ? max_listed(m) : -1;
	sort_numbers(found, nf);
	for (size_t i = 0; i < nf; i++) {
		if (found[i] <= floor)
			continue;
		char *p = ckpt__asprintf("%s/%s-%lld", m->dir, m->name, (long long)found[i]);
		if (!p)
			return CKPT_ENOMEM;
		int rc = CKPT_OK;
		if (list_find(m, p) < 0) {
			char why[1024];
			int ok = check_valid(m, p, why, sizeof(why));
			if (ok > 0) {
				rc = list_push(m, p, now_seconds(), 1);
				(*adopted)++;
			} else if (ok == 0) {
				ckpt__warn(m->warn, m->warn_ctx, "ignoring %s: the state file does not list it and it is "
					"incomplete (%s)", p, why);
			} else {
				rc = ok;
			}
		}
		ckpt__free(p);
		CKPT_TRY(rc);
	}
	return CKPT_OK;
}

/* Remove leftover temporaries (only with the lock), find "<name>-N.index" files, adopt unlisted ones. */
static int scan_dir(ckpt_manager *m, int have_state, int *adopted)
{
	char **names = NULL;
	size_t n = 0;
	CKPT_TRY(ckpt_vfs_list(&names, &n, m->vfs, m->dir));
	int64_t *found = ckpt__calloc(n ? n : 1, sizeof(*found));
	size_t nf = 0;
	int rc = found ? CKPT_OK : CKPT_ENOMEM;
	for (size_t i = 0; i < n && rc == CKPT_OK; i++) {
		/*
		 * Only the lock holder cleans up: holding it proves the writer of any
		 * temporary here is gone; a read-only manager may watch a live trainer.
		 */
		if (m->lock && (is_temporary(names[i]) || orphan_data(m, names, n, names[i]))) {
			char *p = ckpt__path_join(m->dir, names[i]);
			if (!p) {
				rc = CKPT_ENOMEM;
				break;
			}
			rc = remove_tree(m->vfs, p, 0);
			ckpt__free(p);
			continue;
		}
		size_t l = strlen(names[i]);
		if (l <= 6 || strcmp(names[i] + l - 6, ".index") != 0)
			continue;
		names[i][l - 6] = '\0';
		int64_t num = prefix_number(names[i], m->name);
		names[i][l - 6] = '.';
		if (num < 0)
			continue;
		if (num > m->max_number)
			m->max_number = num;
		found[nf++] = num;
	}
	if (rc == CKPT_OK)
		rc = adopt(m, have_state, found, nf, adopted);
	ckpt__free(found);
	ckpt_vfs_free_list(names, n);
	return rc;
}

/*
 * The lock holder finishes what a dead writer left: the retention it did not
 * get to, and a state file that lists what is there.
 */
static int finish_interrupted_save(ckpt_manager *m, int adopted, int writer)
{
	int changed = adopted > 0;
	while (m->max_to_keep > 0 && m->n > (size_t)m->max_to_keep) {
		if (writer)
			CKPT_TRY(delete_checkpoint(m, m->list[0].path));
		ckpt__free(m->list[0].path);
		memmove(&m->list[0], &m->list[1], (m->n - 1) * sizeof(mgr_entry));
		m->n--;
		changed = 1;
	}
	return changed && writer ? write_state_current(m) : CKPT_OK;
}

/* ---- public API ---- */

/* ckpt__manager_apply after a failure: the failure stays the error reported. */
static void apply_keeping_error(ckpt_manager *m, ckpt__manager_save *s)
{
	ckpt__error_slot slot = { 0 };
	ckpt__error_capture(&slot);
	ckpt__manager_apply(m, s);
	ckpt__error_raise(&slot);
	ckpt__error_slot_clear(&slot);
}

/* The save in flight, if any, finished by the function manager_async.c left with it. */
/*
 * The persistent tier from the memory tier, multi-process. Each worker's
 * background thread copies only its piece's data shard, as the temporary
 * ckpt_bundle_merge_commit renames; the rest is collective and runs on the
 * trainer's thread at a later manager call (every worker has a copy in
 * flight, or none): once every worker's copy is done the outcome is agreed,
 * the writer merges the index from every piece's entries (the commit
 * point: shards without it are no checkpoint, and a restarted manager
 * removes them) and runs the manager's commit, and every worker applies it.
 */

/* The temporaries' token of step N: the same on every worker without a message. */
static uint64_t persist_token(int64_t number)
{
	uint64_t x = (uint64_t)number + 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* This worker's shard of a collective checkpoint's W. */
static void shard_of(ckpt_strategy *cs, int *shard, int *nshards)
{
	int local = ckpt__strategy_local_replicas(cs);
	*shard = ckpt__strategy_replica_offset(cs) / local;
	*nshards = ckpt_strategy_num_replicas(cs) / local;
}

typedef struct persist_poll {
	int32_t done;
	int32_t pad;
	uint64_t unlinked; /* ckpt__persist_unlinked_bytes */
} persist_poll;

/*
 * block = 0 (a memory save polls): finish only if every copy is done, else
 * just tell the tier what the copies hold of removed segments. block = 1
 * (wait, restore, free, a save that persists): wait for the copies.
 */
static int persist_mw_finish(ckpt_manager *m, int block)
{
	ckpt_strategy *cs = collective(m);
	const ckpt__strategy_ops *ops = ckpt__strategy_ops_of(cs);
	persist_poll mine = { 1, 0, 0 };
	if (m->persist) {
		mine.done = block || ckpt__persist_done(m->persist);
		mine.unlinked = ckpt__persist_unlinked_bytes(m->persist);
	}
	void *all = NULL;
	size_t *lens = NULL;
	int np = 0;
	CKPT_TRY(ops->allgather(cs, &mine, sizeof(mine), &all, &lens, &np));
	int done = 1;
	uint64_t *unlinked = ckpt__calloc(np > 0 ? (size_t)np : 1, sizeof(*unlinked));
	for (int w = 0; w < np; w++) {
		persist_poll q = { 0, 0, 0 };
		if (lens[w] == sizeof(q))
			memcpy(&q, (const char *)all + (size_t)w * sizeof(q), sizeof(q));
		done &= q.done != 0;
		if (unlinked)
			unlinked[w] = q.unlinked;
	}
	if (unlinked)
		ckpt__tier_set_pending(m->tier, unlinked, np);
	ckpt__free(unlinked);
	ckpt__free(all);
	ckpt__free(lens);
	if (!done || !m->persist)
		return CKPT_OK;
	/* every copy is done, or (block) about to be: the entries first, then the outcome */
	size_t elen = 0;
	const void *ent = ckpt__persist_entries(m->persist, &elen);
	void *ents = NULL;
	size_t *elens = NULL;
	int ne = 0;
	int grc = ops->allgather(cs, ent, elen, &ents, &elens, &ne);
	ckpt__manager_save s;
	int rc = ckpt__persist_join(m->persist, &s);
	m->persist = NULL;
	ckpt__tier_pin(m->tier, -1);
	ckpt__tier_set_pending(m->tier, NULL, 0);
	if (rc == CKPT_OK)
		rc = grc;
	rc = agree(cs, rc);
	int writer = writer_process(cs), shard = 0, nshards = 0;
	shard_of(cs, &shard, &nshards);
	uint64_t token = persist_token(s.number);
	if (rc == CKPT_OK) {
		if (writer) {
			const void **parts = ckpt__calloc(ne > 0 ? (size_t)ne : 1, sizeof(*parts));
			rc = parts ? CKPT_OK : CKPT_ENOMEM;
			for (int w = 0, off = 0; rc == CKPT_OK && w < ne; off += (int)elens[w], w++)
				parts[w] = (const char *)ents + off;
			if (rc == CKPT_OK)
				rc = ckpt_bundle_merge_commit(m->vfs, s.path, ne, token, parts, elens, m->no_fsync);
			ckpt__free(parts);
			if (rc == CKPT_OK) {
				s.written = 1;
				rc = ckpt__manager_commit_files(m, &s);
			}
		} else {
			s.written = 1;
			s.ndeleted = s.ndel; /* the writer deletes them: the lists stay equal */
		}
		rc = agree(cs, rc);
		if (rc < 0) {
			/* taken back, so that no worker lists what another does not */
			ckpt__error_slot slot = { 0 };
			ckpt__error_capture(&slot);
			if (writer && s.written)
				delete_checkpoint(m, s.path);
			s.written = 0;
			ckpt__error_raise(&slot);
			ckpt__error_slot_clear(&slot);
		}
	} else {
		/* some copy failed: every worker removes its own shard's temporary */
		ckpt_bundle_part_discard(m->vfs, s.path, shard, nshards, token);
	}
	ckpt__free(ents);
	ckpt__free(elens);
	apply_keeping_error(m, &s);
	return rc;
}

int ckpt__manager_persist_finish(ckpt_manager *m)
{
	/* a memory step whose copies are in flight (memory_async) is committed first: what reads either tier sees it */
	CKPT_TRY(ckpt__tier_settle(m->tier));
	if (!m->persist)
		return CKPT_OK;
	if (collective(m))
		return persist_mw_finish(m, 1);
	ckpt__manager_save s;
	int rc = ckpt__persist_join(m->persist, &s);
	m->persist = NULL;
	ckpt__tier_pin(m->tier, -1);
	apply_keeping_error(m, &s);
	return rc;
}

/* An async save, and a copy from the memory tier, in flight: what reads the directory waits for both. */
static int finish_async(ckpt_manager *m)
{
	CKPT_TRY(ckpt__manager_persist_finish(m));
	return m->async ? m->async_finish(m) : CKPT_OK;
}

void ckpt_manager_free(ckpt_manager *m)
{
	if (!m)
		return;
	if (m->async || m->persist) {
		/* nobody is left to report to: a background failure goes to the warning sink */
		ckpt__error_slot saved = { 0 };
		ckpt__error_capture(&saved);
		if (finish_async(m) < 0) {
			char e[1024];
			ckpt__manager_warn(m, "the last asynchronous save failed and the manager was freed before it was "
				"reported: %s", ckpt_error_format(ckpt_error_last(), e, sizeof(e)));
		}
		ckpt__error_raise(&saved);
		ckpt__error_slot_clear(&saved);
	}
	ckpt__free(m->persist_path);
	/* before the list goes: it says whether storage holds what memory does */
	if (m->ck)
		ckpt__tier_close(m->tier, max_listed(m), m->warn, m->warn_ctx);
	else
		ckpt__tier_free(m->tier);
	list_clear(m);
	ckpt_vfs_unlock(m->vfs, m->lock);
	ckpt__free(m->dir);
	ckpt__free(m->name);
	ckpt__free(m->last_saved);
	ckpt__free(m->latest_valid);
	ckpt__free(m->warned_unlisted);
	ckpt__free(m);
}

int ckpt_manager_new_ext(ckpt_manager **out, ckpt_checkpoint *ck, const char *dir, int max_to_keep,
	const ckpt_manager_options *o)
{
	if (!out || !dir || !*dir)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_manager_new: NULL argument");
	*out = NULL;
	ckpt_manager_options opts = CKPT_MANAGER_OPTIONS_INIT;
	if (o) {
		if (o->version == 1) { /* before `fallback` */
			memcpy(&opts, o, offsetof(ckpt_manager_options, fallback));
			opts.version = CKPT_MANAGER_OPTIONS_VERSION;
		} else if (o->version == 2) { /* before `incremental` */
			memcpy(&opts, o, offsetof(ckpt_manager_options, incremental));
			opts.version = CKPT_MANAGER_OPTIONS_VERSION;
		} else if (o->version == 3) { /* before the memory tier's fields */
			memcpy(&opts, o, offsetof(ckpt_manager_options, memory_every));
			opts.version = CKPT_MANAGER_OPTIONS_VERSION;
		} else if (o->version == 4) { /* before memory_copies */
			memcpy(&opts, o, offsetof(ckpt_manager_options, memory_copies));
			opts.version = CKPT_MANAGER_OPTIONS_VERSION;
		} else if (o->version == 5) { /* before memory_async */
			memcpy(&opts, o, offsetof(ckpt_manager_options, memory_async));
			opts.version = CKPT_MANAGER_OPTIONS_VERSION;
		} else if (o->version == CKPT_MANAGER_OPTIONS_VERSION) {
			opts = *o;
		} else {
			return ckpt__fail(CKPT_EINVAL, dir, NULL, -1, "unsupported ckpt_manager_options version %u", o->version);
		}
	}
	const char *name = opts.checkpoint_name ? opts.checkpoint_name : "ckpt";
	if (!*name || strchr(name, '/'))
		return ckpt__fail(CKPT_EINVAL, dir, NULL, -1, "checkpoint_name '%s' must be a plain file name", name);
	ckpt_strategy *cs = ck ? ckpt__checkpoint_collective(ck) : NULL;
	ckpt__tier *tier = NULL;
	/* a read-only manager only reads the tier (ckpt_manager_load_latest) and never removes a segment */
	CKPT_TRY(agree(cs, ckpt__tier_open(&tier, &opts, dir)));
	ckpt_manager *m = ckpt__calloc(1, sizeof(*m));
	if (!m) {
		ckpt__tier_free(tier);
		return agree(cs, CKPT_ENOMEM);
	}
	m->tier = tier;
	m->ck = ck;
	m->max_to_keep = max_to_keep;
	if (ck && opts.incremental)
		ckpt__checkpoint_set_incremental(ck, 1);
	m->incremental = opts.incremental;
	int vrc = ckpt_status_of(m->vfs = ckpt_vfs_for_path(opts.vfs ? opts.vfs : (ck ? ck->opts.vfs : NULL), dir));
	if (vrc < 0) {
		ckpt__free(m);
		return agree(cs, vrc);
	}
	m->warn = opts.warn ? opts.warn : (ck ? ck->opts.warn : NULL);
	m->warn_ctx = opts.warn ? opts.warn_ctx : (ck ? ck->opts.warn_ctx : NULL);
	m->no_fsync = opts.no_fsync || (ck && ck->opts.no_fsync);
	m->fallback = opts.fallback;
	m->last_preserved = now_seconds();
	m->max_number = -1;
	m->dir = ckpt__strdup(dir);
	m->name = ckpt__strdup(name);
	int rc = (!m->dir || !m->name) ? CKPT_ENOMEM : CKPT_OK;
	/* "dir/" and "dir" are the same directory */
	for (size_t l = m->dir ? strlen(m->dir) : 0; rc == CKPT_OK && l > 1 && m->dir[l - 1] == '/'; l--)
		m->dir[l - 1] = '\0';
	if (rc == CKPT_OK)
		rc = ckpt__vfs_mkdirs(m->vfs, m->dir);
	/* a manager that saves is the directory's only writer from here on (a multi-process job: its writer process) */
	if (rc == CKPT_OK && ck && writer_process(cs))
		rc = ckpt_vfs_lock(&m->lock, m->vfs, m->dir);
	int have_state = 0, adopted = 0;
	if (rc == CKPT_OK)
		rc = read_state(m, &have_state);
	if (rc == CKPT_OK)
		rc = scan_dir(m, have_state, &adopted);
	for (size_t i = 0; i < m->n && rc == CKPT_OK; i++) {
		int64_t num = prefix_number(base_name(m->list[i].path), m->name);
		if (num > m->max_number)
			m->max_number = num;
	}
	/* multi-process: the list is trimmed on every process, files change on the writer only */
	if (rc == CKPT_OK && (m->lock || (cs && m->ck && !writer_process(cs))))
		rc = finish_interrupted_save(m, adopted, writer_process(cs));
	rc = agree(cs, rc);
	if (rc < 0) {
		ckpt__error_annotate(dir, NULL);
		/* another manager may be using the segments (EBUSY): leave them */
		ckpt__tier_free(m->tier);
		m->tier = NULL;
		ckpt_manager_free(m);
		return rc;
	}
	*out = m;
	return CKPT_OK;
}

int ckpt_manager_new(ckpt_manager **out, ckpt_checkpoint *ck, const char *dir, int max_to_keep)
{
	return ckpt_manager_new_ext(out, ck, dir, max_to_keep, NULL);
}

/* ---- one save: plan, commit, apply ---- */

void ckpt__manager_save_free(ckpt__manager_save *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		ckpt__free(s->paths[i]);
	for (size_t i = 0; i < s->ndel; i++)
		ckpt__free(s->del[i]);
	ckpt__free(s->paths);
	ckpt__free(s->times);
	ckpt__free(s->del);
	ckpt__free(s->del_times);
	ckpt__free(s->path);
	ckpt__error_slot_clear(&s->error);
	memset(s, 0, sizeof(*s));
}

int ckpt__manager_plan(ckpt__manager_save *s, ckpt_manager *m, int64_t number)
{
	memset(s, 0, sizeof(*s));
	s->error.offset = -1;
	s->number = number;
	s->time = now_seconds();
	/* a counter that cannot be read (device memory) fails the save: it could not be put back */
	int counter_rc = ckpt__checkpoint_read_save_counter(m->ck, &s->old_counter);
	if (counter_rc < 0) {
		memset(s, 0, sizeof(*s));
		return counter_rc;
	}
	s->path = ckpt__asprintf("%s/%s-%lld", m->dir, m->name, (long long)number);
	size_t cap = m->n + 1;
	s->paths = ckpt__calloc(cap, sizeof(*s->paths));
	s->times = ckpt__calloc(cap, sizeof(*s->times));
	s->del = ckpt__calloc(cap, sizeof(*s->del));
	s->del_times = ckpt__calloc(cap, sizeof(*s->del_times));
	int rc = (s->path && s->paths && s->times && s->del && s->del_times) ? CKPT_OK : CKPT_ENOMEM;
	/* the list after the save: a re-saved prefix moves to the end */
	for (size_t i = 0; rc == CKPT_OK && i < m->n; i++) {
		if (strcmp(m->list[i].path, s->path) == 0)
			continue;
		if (!(s->paths[s->n] = ckpt__strdup(m->list[i].path)))
			rc = CKPT_ENOMEM;
		else
			s->times[s->n++] = m->list[i].time;
	}
	if (rc == CKPT_OK) {
		if (!(s->paths[s->n] = ckpt__strdup(s->path)))
			rc = CKPT_ENOMEM;
		else
			s->times[s->n++] = s->time;
	}
	/* retention: the oldest beyond max_to_keep */
	size_t drop = (rc == CKPT_OK && m->max_to_keep > 0 && s->n > (size_t)m->max_to_keep) ?
		s->n - (size_t)m->max_to_keep : 0;
	if (drop) {
		memcpy(s->del, s->paths, drop * sizeof(*s->del));
		memcpy(s->del_times, s->times, drop * sizeof(*s->del_times));
		s->ndel = drop;
		memmove(s->paths, s->paths + drop, (s->n - drop) * sizeof(*s->paths));
		memmove(s->times, s->times + drop, (s->n - drop) * sizeof(*s->times));
		s->n -= drop;
	}
	if (rc < 0)
		ckpt__manager_save_free(s);
	return rc;
}

/*
 * TensorFlow's order: the state file first, listing the new checkpoint and
 * the old ones retention is about to delete (they still exist), then
 * retention, then the state file again without what was deleted. The save
 * is committed once the first state file is in place; a state file that
 * cannot be written fails the save before anything is deleted. Retention is
 * best effort: a delete refused (an append-only bucket, an outage) leaves
 * that checkpoint listed, warns with the reason, and the next save (or
 * start) tries again; it never fails the save. Only a failure of the second
 * state file, or a crash just before it, leaves it naming a deleted
 * checkpoint, which a manager drops when it opens the directory.
 */
int ckpt__manager_commit_files(ckpt_manager *m, ckpt__manager_save *s)
{
	size_t nall = s->ndel + s->n;
	char **all = ckpt__calloc(nall ? nall : 1, sizeof(*all));
	double *times = ckpt__calloc(nall ? nall : 1, sizeof(*times));
	int rc = all && times ? CKPT_OK : CKPT_ENOMEM;
	if (rc == CKPT_OK) {
		memcpy(all, s->del, s->ndel * sizeof(*all));
		memcpy(times, s->del_times, s->ndel * sizeof(*times));
		memcpy(all + s->ndel, s->paths, s->n * sizeof(*all));
		memcpy(times + s->ndel, s->times, s->n * sizeof(*times));
		rc = write_state(m, all, times, nall);
	}
	/* the refused ones move to the front of del (oldest first): apply keeps them listed */
	size_t failed = 0;
	for (size_t i = 0; rc == CKPT_OK && i < s->ndel; i++) {
		if (delete_checkpoint(m, s->del[i]) == CKPT_OK)
			continue;
		char e[1024];
		ckpt__warn(m->warn, m->warn_ctx, "retention: could not delete %s (%s); it stays listed, and the next save "
			"tries again", s->del[i], ckpt_error_format(ckpt_error_last(), e, sizeof(e)));
		char *p = s->del[i];
		double t = s->del_times[i];
		memmove(s->del + failed + 1, s->del + failed, (i - failed) * sizeof(*s->del));
		memmove(s->del_times + failed + 1, s->del_times + failed, (i - failed) * sizeof(*s->del_times));
		s->del[failed] = p;
		s->del_times[failed] = t;
		failed++;
	}
	if (rc == CKPT_OK && failed < s->ndel) {
		memcpy(all, s->del, failed * sizeof(*all));
		memcpy(times, s->del_times, failed * sizeof(*times));
		memcpy(all + failed, s->paths, s->n * sizeof(*all));
		memcpy(times + failed, s->times, s->n * sizeof(*times));
		if (write_state(m, all, times, failed + s->n) < 0) {
			char e[1024];
			ckpt__warn(m->warn, m->warn_ctx, "retention: the state file still lists the checkpoints just deleted "
				"(%s); the next save or start rewrites it", ckpt_error_format(ckpt_error_last(), e, sizeof(e)));
		}
	}
	if (rc == CKPT_OK) {
		s->ndeleted = s->ndel - failed;
		ckpt_error_clear();
	}
	ckpt__free(all);
	ckpt__free(times);
	return rc;
}

void ckpt__manager_apply(ckpt_manager *m, ckpt__manager_save *s)
{
	if (!s->written) {
		/* nothing was saved: the counter goes back, unless something else moved it since */
		ckpt_variable *v;
		if (m->ck && ckpt_checkpoint_save_counter(m->ck) == s->number &&
			ckpt_status_of(v = ckpt_checkpoint_save_counter_variable(m->ck)) == CKPT_OK)
			ckpt_variable_assign(v, &s->old_counter, sizeof(s->old_counter));
		ckpt__manager_save_free(s);
		return;
	}
	/* the new list: what could not be deleted (oldest, at the front of del), then the planned list */
	size_t keep = s->ndel - s->ndeleted, nn = keep + s->n;
	mgr_entry *nl = ckpt__calloc(nn ? nn : 1, sizeof(*nl));
	if (nl) {
		for (size_t i = 0; i < keep; i++) {
			nl[i] = (mgr_entry){ s->del[i], s->del_times[i], 0 };
			s->del[i] = NULL;
		}
		for (size_t i = 0; i < s->n; i++) {
			nl[keep + i] = (mgr_entry){ s->paths[i], s->times[i], 0 };
			s->paths[i] = NULL;
		}
		for (size_t i = 0; i < nn; i++) {
			int j = list_find(m, nl[i].path);
			nl[i].unlisted = j >= 0 && strcmp(nl[i].path, s->path) != 0 ? m->list[j].unlisted : 0;
		}
		list_clear(m);
		m->list = nl;
		m->n = m->cap = nn;
	} else {
		/* out of memory: keep the old list and add the new checkpoint (it is on disk) */
		list_push(m, s->path, s->time, 0);
	}
	if (s->number > m->max_number)
		m->max_number = s->number;
	ckpt__free(m->last_saved);
	m->last_saved = s->path;
	s->path = NULL;
	ckpt__manager_save_free(s);
}

int ckpt__manager_next_number(ckpt_manager *m, int64_t *out)
{
	int64_t c = 0;
	CKPT_TRY(ckpt__checkpoint_read_save_counter(m->ck, &c));
	int64_t base = c > m->max_number ? c : m->max_number;
	if (base == INT64_MAX)
		return ckpt__fail(CKPT_ELIMIT, m->dir, NULL, -1, "checkpoint number overflows");
	*out = base + 1;
	return CKPT_OK;
}

ckpt_checkpoint *ckpt__manager_checkpoint(ckpt_manager *m)
{
	return m->ck;
}

const char *ckpt__manager_dir(const ckpt_manager *m)
{
	return m->dir;
}

void ckpt__manager_warn(ckpt_manager *m, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	ckpt__warn(m->warn, m->warn_ctx, "%s", buf);
}

ckpt__manager_async **ckpt__manager_async_slot(ckpt_manager *m)
{
	return &m->async;
}

void ckpt__manager_set_async(ckpt_manager *m, ckpt__manager_async *a, ckpt__manager_finish_fn finish)
{
	m->async = a;
	m->async_finish = finish;
}

static int save_number(const char **path_out, ckpt_manager *m, int64_t number)
{
	ckpt__manager_save s;
	ckpt_strategy *cs = collective(m);
	int writer = writer_process(cs);
	CKPT_TRY(ckpt__manager_plan(&s, m, number));
	/* collective by itself: on failure every process already has the same status */
	int rc = ckpt__checkpoint_save_as(m->ck, s.path, number);
	int saved = rc == CKPT_OK;
	if (rc == CKPT_OK) {
		s.written = 1;
		if (writer)
			rc = ckpt__manager_commit_files(m, &s);
		else
			s.ndeleted = s.ndel; /* the writer deletes them: the lists stay equal */
	}
	if (saved)
		rc = agree(cs, rc);
	/* multi-process: a save that failed after its commit is taken back, so no new checkpoint is visible */
	if (cs && saved && rc < 0) {
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		if (writer)
			delete_checkpoint(m, s.path);
		s.written = 0;
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	ckpt__manager_apply(m, &s);
	if (rc == CKPT_OK && path_out)
		*path_out = m->last_saved;
	return rc;
}

/* The memory tier (tier_manager.c) takes the saves its options route to it, the directory the others. */
/*
 * A save to both tiers of a single-process TensorBundle checkpoint: the
 * state is serialized once, into the memory segment, and the directory's
 * checkpoint copied from it in the background (manager_persist.c). An
 * incremental save (it reuses the directory's files) and a multi-process
 * one (its pieces are spread over nodes) are written from the live state.
 */
static int persists_from_memory(const ckpt_manager *m)
{
	const char *f = m->ck->opts.format;
	return m->tier && !m->incremental && (!f || strcmp(f, "tf-bundle") == 0);
}

static int save_persisted_from_memory(const char **path_out, ckpt_manager *m, int64_t number)
{
	/* one copy at a time: the previous one's outcome (and its place in the list) first */
	CKPT_TRY(ckpt__manager_persist_finish(m));
	ckpt__tier_set_pending(m->tier, NULL, 0);
	const char *mem = NULL;
	CKPT_TRY(ckpt__tier_save(&mem, m->tier, m->ck, number));
	ckpt__manager_save s;
	ckpt_strategy *cs = collective(m);
	int rc = ckpt__manager_plan(&s, m, number);
	if (cs) {
		int arc = agree(cs, rc);
		if (rc == CKPT_OK && arc < 0)
			ckpt__manager_save_free(&s);
		rc = arc;
	}
	CKPT_TRY(rc);
	s.old_counter = number; /* the memory save stands whatever becomes of the copy */
	char *path = ckpt__strdup(s.path);
	if (!path)
		rc = CKPT_ENOMEM;
	else if (cs)
		rc = ckpt__persist_start_piece(&m->persist, &s, mem, m->vfs, !m->no_fsync, persist_token(number));
	else
		rc = ckpt__persist_start(&m->persist, m, &s, mem, m->vfs, !m->no_fsync, ckpt__manager_commit_files);
	if (cs) {
		/* started on every worker or on none */
		int arc = agree(cs, rc);
		if (rc == CKPT_OK && arc < 0) {
			ckpt__error_slot slot = { 0 };
			ckpt__error_capture(&slot);
			int shard = 0, nshards = 0;
			shard_of(cs, &shard, &nshards);
			ckpt__persist_join(m->persist, &s);
			m->persist = NULL;
			ckpt_bundle_part_discard(m->vfs, s.path, shard, nshards, persist_token(number));
			ckpt__error_raise(&slot);
			ckpt__error_slot_clear(&slot);
		}
		rc = arc;
	}
	if (rc < 0) {
		ckpt__free(path);
		apply_keeping_error(m, &s);
		return rc;
	}
	ckpt__tier_pin(m->tier, number);
	ckpt__free(m->persist_path);
	m->persist_path = path;
	if (path_out)
		*path_out = path;
	return CKPT_OK;
}

static int save_tiers(const char **path_out, ckpt_manager *m, int64_t number)
{
	int to = ckpt__tier_route(m->tier, number);
	if (to == (CKPT__TIER_TO_MEMORY | CKPT__TIER_TO_STORAGE) && persists_from_memory(m))
		return save_persisted_from_memory(path_out, m, number);
	const char *mem = NULL;
	if (to & CKPT__TIER_TO_STORAGE) {
		CKPT_TRY(ckpt__manager_persist_finish(m));
	} else if (m->persist && collective(m)) {
		/* a memory save does not wait for the copy: it finishes it if every worker's is done */
		CKPT_TRY(persist_mw_finish(m, 0));
	} else {
		/* what the copy in flight holds of a removed segment counts against memory_limit */
		uint64_t held = ckpt__persist_unlinked_bytes(m->persist);
		ckpt__tier_set_pending(m->tier, &held, 1);
	}
	if (to & CKPT__TIER_TO_MEMORY)
		CKPT_TRY(ckpt__tier_save(&mem, m->tier, m->ck, number));
	if (to & CKPT__TIER_TO_STORAGE)
		return save_number(path_out, m, number);
	if (!mem)
		CKPT_TRY(ckpt__tier_skip(m->ck, number));
	if (path_out)
		*path_out = mem ? mem : "";
	return CKPT_OK;
}

static int check_saver(ckpt_manager *m, const char *what)
{
	if (!m || !m->ck)
		return ckpt__fail(CKPT_EINVAL, m ? m->dir : NULL, NULL, -1, "%s: the manager has no checkpoint to save",
			what);
	/*
	 * a save still in flight comes first; its failure is reported now and nothing new starts.
	 * A copy from the memory tier is waited for only by a save that writes the directory (save_tiers).
	 */
	return m->async ? m->async_finish(m) : CKPT_OK;
}

static int manager_save_number_rc(const char **path_out, ckpt_manager *m, int64_t number)
{
	if (path_out)
		*path_out = NULL;
	CKPT_TRY(check_saver(m, "ckpt_manager_save"));
	if (number < 0)
		return ckpt__fail(CKPT_EINVAL, m->dir, NULL, -1, "checkpoint number %lld is negative", (long long)number);
	return save_tiers(path_out, m, number);
}

const char *ckpt_manager_save_number(ckpt_manager *m, int64_t number)
{
	const char *path_out = NULL;
	int rc = manager_save_number_rc(&path_out, m, number);
	ckpt__borrowed_status(rc, path_out != NULL);
	return rc == CKPT_OK ? path_out : NULL;
}

static int manager_save_rc(const char **path_out, ckpt_manager *m)
{
	if (path_out)
		*path_out = NULL;
	CKPT_TRY(check_saver(m, "ckpt_manager_save"));
	int64_t number = 0;
	CKPT_TRY(ckpt__manager_next_number(m, &number));
	return save_tiers(path_out, m, number);
}

const char *ckpt_manager_save(ckpt_manager *m)
{
	const char *path_out = NULL;
	int rc = manager_save_rc(&path_out, m);
	ckpt__borrowed_status(rc, path_out != NULL);
	return rc == CKPT_OK ? path_out : NULL;
}

const char *ckpt_manager_latest(const ckpt_manager *m)
{
	return m && m->n ? m->list[m->n - 1].path : NULL;
}

size_t ckpt_manager_num_checkpoints(const ckpt_manager *m)
{
	return m ? m->n : 0;
}

const char *ckpt_manager_checkpoint(const ckpt_manager *m, size_t i)
{
	return m && i < m->n ? m->list[i].path : NULL;
}

/*
 * The newest complete checkpoint among list[0..below): its index in *at and
 * its path in m->latest_valid (and *path_out); CKPT_ENOTFOUND when none.
 */
static int newest_valid_below(const char **path_out, size_t *at, ckpt_manager *m, size_t below)
{
	for (size_t i = below; i-- > 0;) {
		char why[1024];
		int ok = check_valid(m, m->list[i].path, why, sizeof(why));
		if (ok < 0)
			return ok;
		if (ok) {
			char *p = ckpt__strdup(m->list[i].path);
			if (!p)
				return CKPT_ENOMEM;
			ckpt__free(m->latest_valid);
			m->latest_valid = p;
			if (path_out)
				*path_out = p;
			*at = i;
			if (m->list[i].unlisted && (!m->warned_unlisted || strcmp(m->warned_unlisted, p) != 0)) {
				ckpt__warn(m->warn, m->warn_ctx, "using %s, the newest complete checkpoint, which the state file "
					"%s/" STATE_FILE " did not list (a save interrupted after the checkpoint was committed)",
					p, m->dir);
				ckpt__free(m->warned_unlisted);
				m->warned_unlisted = ckpt__strdup(p);
			}
			ckpt_error_clear();
			return CKPT_OK;
		}
		ckpt__warn(m->warn, m->warn_ctx, "skipping incomplete checkpoint %s (%s); %s", m->list[i].path, why,
			i ? "falling back to the previous one" : "no older checkpoint left");
	}
	return ckpt__fail(CKPT_ENOTFOUND, m->dir, NULL, -1, "no complete checkpoint in %s", m->dir);
}

static int manager_latest_valid_rc(const char **path_out, ckpt_manager *m)
{
	if (path_out)
		*path_out = NULL;
	if (!m)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_manager_latest_valid: NULL manager");
	/* a multi-process copy is finished collectively (wait, a save, restore, free): not by a call one worker may make alone */
	if (collective(m))
		CKPT_TRY(m->async ? m->async_finish(m) : CKPT_OK);
	else
		CKPT_TRY(finish_async(m));
	size_t at;
	return newest_valid_below(path_out, &at, m, m->n);
}

const char *ckpt_manager_latest_valid(ckpt_manager *m)
{
	const char *path_out = NULL;
	int rc = manager_latest_valid_rc(&path_out, m);
	ckpt__borrowed_status(rc, path_out != NULL);
	return rc == CKPT_OK ? path_out : NULL;
}

/* Stored bytes that do not verify: what an older checkpoint may not share. */
static int does_not_verify(int rc)
{
	return rc == CKPT_ECHECKSUM || rc == CKPT_EFORMAT;
}

/*
 * The opt-in fallback (ckpt_manager_options.fallback): list[at] failed to
 * restore with `rc`; while that says its bytes do not verify, warn with its
 * path and the reason and restore the next older complete one. A failed
 * restore changed nothing live, so each attempt starts from the same state.
 * When none verifies, the newest one's error is put back.
 */
static int restore_fallback(ckpt_restore_status **status, const char **p, ckpt_manager *m, size_t at, int rc)
{
	/* the newest one's error, copied: the attempts below overwrite the last error */
	const ckpt_error *e = ckpt_error_last();
	int first_rc = rc;
	int64_t first_offset = e->offset;
	char first_msg[1024], first_path[1024], first_var[512];
	snprintf(first_msg, sizeof(first_msg), "%s", e->message ? e->message : "");
	snprintf(first_path, sizeof(first_path), "%s", e->path ? e->path : "");
	snprintf(first_var, sizeof(first_var), "%s", e->variable ? e->variable : "");
	while (does_not_verify(rc)) {
		char why[1024];
		ckpt_error_format(ckpt_error_last(), why, sizeof(why));
		ckpt__warn(m->warn, m->warn_ctx, "skipping checkpoint %s: it does not verify (%s); %s", *p, why,
			at ? "falling back to the previous one" : "no older checkpoint left");
		int vrc = at ? newest_valid_below(p, &at, m, at) : CKPT_ENOTFOUND;
		if (vrc == CKPT_ENOTFOUND) /* nothing older verifies: report the newest, as without the fallback */
			return ckpt__fail(first_rc, first_path[0] ? first_path : NULL, first_var[0] ? first_var : NULL,
				first_offset, "%s (no older checkpoint in %s verifies either)", first_msg, m->dir);
		CKPT_TRY(vrc);
		rc = ckpt_checkpoint_restore(status, m->ck, *p);
	}
	return rc;
}

static int manager_restore_latest_rc(ckpt_restore_status **status, const char **path_out, ckpt_manager *m)
{
	if (status)
		*status = NULL;
	if (path_out)
		*path_out = NULL;
	if (!m || !m->ck)
		return ckpt__fail(CKPT_EINVAL, m ? m->dir : NULL, NULL, -1,
			"ckpt_manager_restore_latest: the manager has no checkpoint to restore into");
	if (m->tier) {
		/* a step in memory newer than every listed checkpoint: the directory is not read at all */
		CKPT_TRY(finish_async(m));
		int restored = 0;
		CKPT_TRY(ckpt__tier_restore(status, &restored, path_out, m->tier, m->ck, max_listed(m), m->warn,
			m->warn_ctx));
		if (restored)
			return CKPT_OK;
	}
	const char *p;
	size_t at;
	CKPT_TRY(finish_async(m));
	int rc = newest_valid_below(&p, &at, m, m->n);
	if (rc == CKPT_ENOTFOUND) {
		ckpt_error_clear();
		return CKPT_OK;
	}
	CKPT_TRY(rc);
	rc = ckpt_checkpoint_restore(status, m->ck, p);
	if (rc < 0 && m->fallback)
		rc = restore_fallback(status, &p, m, at, rc);
	CKPT_TRY(rc);
	if (path_out)
		*path_out = p;
	return CKPT_OK;
}

const char *ckpt_manager_restore_latest(ckpt_restore_status **status, ckpt_manager *m)
{
	const char *path_out = NULL;
	/* one operation (ckpt_vfs_op_begin): the index the validity check read is what the restore reads */
	ckpt_vfs_op_begin();
	int rc = manager_restore_latest_rc(status, &path_out, m);
	ckpt_vfs_op_end();
	ckpt__borrowed_status(rc, path_out != NULL);
	return rc == CKPT_OK ? path_out : NULL;
}

/* The caller's checkpoint options, at this library's version (as ckpt_checkpoint_new reads them). */
static int checkpoint_options(ckpt_checkpoint_options *dst, const ckpt_checkpoint_options *o)
{
	*dst = (ckpt_checkpoint_options)CKPT_CHECKPOINT_OPTIONS_INIT;
	if (!o)
		return CKPT_OK;
	size_t n = o->version == 1 ? offsetof(ckpt_checkpoint_options, sync_rules)
		 : o->version == 2 ? offsetof(ckpt_checkpoint_options, restore_single_pass)
		 : o->version == CKPT_CHECKPOINT_OPTIONS_VERSION ? sizeof(*o) : 0;
	if (!n)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "unsupported ckpt_checkpoint_options version %u", o->version);
	memcpy(dst, o, n);
	dst->version = CKPT_CHECKPOINT_OPTIONS_VERSION;
	return CKPT_OK;
}

static int manager_load_latest_rc(ckpt_checkpoint **out, ckpt_restore_status **status, const char **path_out,
	ckpt_manager *m, const ckpt_checkpoint_options *o)
{
	if (out)
		*out = NULL;
	if (status)
		*status = NULL;
	*path_out = NULL;
	if (!m || !out)
		return ckpt__fail(CKPT_EINVAL, m ? m->dir : NULL, NULL, -1, "ckpt_manager_load_latest: NULL argument");
	if (m->ck)
		return ckpt__fail(CKPT_EINVAL, m->dir, NULL, -1, "ckpt_manager_load_latest: the manager has a checkpoint; "
			"ckpt_manager_restore_latest restores into it");
	ckpt_checkpoint_options lo;
	CKPT_TRY(checkpoint_options(&lo, o));
	if (m->tier) {
		/* a step in memory newer than every listed checkpoint: read from its segment, through POSIX */
		ckpt_checkpoint_options mo = lo;
		mo.vfs = NULL;
		int loaded = 0;
		CKPT_TRY(ckpt__tier_load(out, status, &loaded, path_out, m->tier, &mo, max_listed(m), m->warn, m->warn_ctx));
		if (loaded)
			return CKPT_OK;
	}
	const char *p;
	size_t at;
	int rc = newest_valid_below(&p, &at, m, m->n);
	if (rc == CKPT_ENOTFOUND) {
		ckpt_error_clear();
		return CKPT_OK;
	}
	CKPT_TRY(rc);
	lo.vfs = m->vfs;
	CKPT_TRY(ckpt_checkpoint_load(out, status, p, &lo));
	*path_out = p;
	return CKPT_OK;
}

const char *ckpt_manager_load_latest(ckpt_checkpoint **out, ckpt_restore_status **status, ckpt_manager *m,
	const ckpt_checkpoint_options *o)
{
	const char *path_out = NULL;
	ckpt_vfs_op_begin();
	int rc = manager_load_latest_rc(out, status, &path_out, m, o);
	ckpt_vfs_op_end();
	ckpt__borrowed_status(rc, path_out != NULL);
	return rc == CKPT_OK ? path_out : NULL;
}

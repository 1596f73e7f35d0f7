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
 * "exists" when PREFIX.index exists; it is valid when that index parses and
 * every data shard it names exists.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/time.h>
#include <unistd.h>
#include "checkpoint_internal.h"
#include "strategy_impl.h"

#define STATE_FILE "checkpoint"

struct ckpt_manager {
	ckpt_checkpoint *ck;
	char *dir;
	char *name;              /* "ckpt" */
	int max_to_keep;
	ckpt_vfs *vfs;
	ckpt_warning_fn warn;
	void *warn_ctx;
	int no_fsync;
	size_t n, cap;
	char **paths;            /* full prefixes, oldest first */
	double *times;
	double last_preserved;
	int64_t max_number;      /* highest N of "<name>-N" seen */
	char *last_saved;
	char *latest_valid;
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

static int list_push(ckpt_manager *m, const char *path, double t)
{
	/* a re-saved prefix moves to the end */
	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->paths[i], path) == 0) {
			char *p = m->paths[i];
			memmove(&m->paths[i], &m->paths[i + 1], (m->n - i - 1) * sizeof(char *));
			memmove(&m->times[i], &m->times[i + 1], (m->n - i - 1) * sizeof(double));
			m->paths[m->n - 1] = p;
			m->times[m->n - 1] = t;
			return CKPT_OK;
		}
	}
	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 8;
		char **np = ckpt__realloc(m->paths, nc * sizeof(*np));
		if (!np)
			return CKPT_ENOMEM;
		m->paths = np;
		double *nt = ckpt__realloc(m->times, nc * sizeof(*nt));
		if (!nt)
			return CKPT_ENOMEM;
		m->times = nt;
		m->cap = nc;
	}
	char *p = ckpt__strdup(path);
	if (!p)
		return CKPT_ENOMEM;
	m->paths[m->n] = p;
	m->times[m->n] = t;
	m->n++;
	return CKPT_OK;
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
	int exists = ckpt_vfs_exists(m->vfs, path, NULL);
	if (!exists) {
		ckpt__free(path);
		return CKPT_OK;
	}
	void *buf = NULL;
	size_t len = 0;
	int rc = ckpt_vfs_read_all(m->vfs, path, CKPT_MAX_STATE_FILE_BYTES, &buf, &len);
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
				rc = list_push(m, full, 0.0);
				ckpt__free(full);
			}
		} else if (strcmp(field, "all_model_checkpoint_timestamps") == 0) {
			double t = strtod(val, NULL);
			if (ntimes < m->n)
				m->times[ntimes] = t;
			ntimes++;
		} else if (strcmp(field, "last_preserved_timestamp") == 0) {
			m->last_preserved = strtod(val, NULL);
		}
	}
	/* TF lists model_checkpoint_path last in all_model_checkpoint_paths; keep it newest */
	if (rc == CKPT_OK && model) {
		double t = 0.0;
		for (size_t i = 0; i < m->n; i++)
			if (strcmp(m->paths[i], model) == 0)
				t = m->times[i];
		rc = list_push(m, model, t);
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

static int write_state(ckpt_manager *m)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc = CKPT_OK;
	char num[64];
	if (m->n)
		rc = append_quoted(&buf, &len, &cap, "model_checkpoint_path", relative(m, m->paths[m->n - 1]));
	for (size_t i = 0; i < m->n && rc == CKPT_OK; i++)
		rc = append_quoted(&buf, &len, &cap, "all_model_checkpoint_paths", relative(m, m->paths[i]));
	for (size_t i = 0; i < m->n && rc == CKPT_OK; i++) {
		format_double(num, sizeof(num), m->times[i]);
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

/* ---- files of one checkpoint ---- */

static int remove_tree(ckpt_vfs *vfs, const char *path, int depth)
{
	int is_dir = 0;
	if (!ckpt_vfs_exists(vfs, path, &is_dir))
		return CKPT_OK;
	if (is_dir && depth < 8) {
		char **names = NULL;
		size_t n = 0;
		CKPT_TRY(ckpt_vfs_list(vfs, path, &names, &n));
		for (size_t i = 0; i < n; i++) {
			char *p = ckpt__path_join(path, names[i]);
			if (p)
				remove_tree(vfs, p, depth + 1);
			ckpt__free(p);
		}
		ckpt_vfs_free_list(names, n);
	}
	if (is_dir) {
		/* the VFS interface removes files only; a POSIX directory needs rmdir */
		if (vfs == ckpt_vfs_default() && rmdir(path) < 0 && errno != ENOENT)
			return ckpt__fail_errno(errno, path, "cannot remove temporary directory");
		return CKPT_OK;
	}
	int rc = ckpt_vfs_remove(vfs, path);
	return rc == CKPT_ENOTFOUND ? CKPT_OK : rc;
}

/* mkdir -p through the VFS. */
static int make_dirs(ckpt_vfs *vfs, const char *dir)
{
	char *p = ckpt__strdup(dir);
	if (!p)
		return CKPT_ENOMEM;
	int rc = CKPT_OK;
	for (char *q = p + 1; *q && rc == CKPT_OK; q++) {
		if (*q != '/')
			continue;
		*q = '\0';
		int is_dir = 0;
		if (!ckpt_vfs_exists(vfs, p, &is_dir))
			rc = ckpt_vfs_mkdir(vfs, p);
		*q = '/';
	}
	if (rc == CKPT_OK)
		rc = ckpt_vfs_mkdir(vfs, p);
	ckpt__free(p);
	return rc;
}

/* Delete PREFIX.index first (the checkpoint stops existing), then its data shards. */
static int delete_checkpoint(ckpt_manager *m, const char *prefix)
{
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
		rc = ckpt_vfs_list(m->vfs, dir, &names, &n);
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

/* Remove leftover temporaries, find "<name>-N.index" files. */
static int scan_dir(ckpt_manager *m, int have_state, int writer)
{
	char **names = NULL;
	size_t n = 0;
	CKPT_TRY(ckpt_vfs_list(m->vfs, m->dir, &names, &n));
	int64_t *found = ckpt__calloc(n ? n : 1, sizeof(*found));
	size_t nf = 0;
	int rc = found ? CKPT_OK : CKPT_ENOMEM;
	for (size_t i = 0; i < n && rc == CKPT_OK; i++) {
		/* only a manager that saves cleans up: a read-only one may watch a trainer that is writing */
		if (m->ck && writer && (is_temporary(names[i]) || orphan_data(m, names, n, names[i]))) {
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
	/* no state file: adopt the checkpoints that are there, in number order */
	if (rc == CKPT_OK && !have_state && nf) {
		for (size_t i = 1; i < nf; i++)
			for (size_t j = i; j > 0 && found[j - 1] > found[j]; j--) {
				int64_t t = found[j];
				found[j] = found[j - 1];
				found[j - 1] = t;
			}
		for (size_t i = 0; i < nf && rc == CKPT_OK; i++) {
			char *p = ckpt__asprintf("%s/%s-%lld", m->dir, m->name, (long long)found[i]);
			rc = p ? list_push(m, p, now_seconds()) : CKPT_ENOMEM;
			ckpt__free(p);
		}
	}
	ckpt__free(found);
	ckpt_vfs_free_list(names, n);
	return rc;
}

/* ---- public API ---- */

void ckpt_manager_free(ckpt_manager *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		ckpt__free(m->paths[i]);
	ckpt__free(m->paths);
	ckpt__free(m->times);
	ckpt__free(m->dir);
	ckpt__free(m->name);
	ckpt__free(m->last_saved);
	ckpt__free(m->latest_valid);
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
		if (o->version != CKPT_MANAGER_OPTIONS_VERSION)
			return ckpt__fail(CKPT_EINVAL, dir, NULL, -1, "unsupported ckpt_manager_options version %u", o->version);
		opts = *o;
	}
	const char *name = opts.checkpoint_name ? opts.checkpoint_name : "ckpt";
	if (!*name || strchr(name, '/'))
		return ckpt__fail(CKPT_EINVAL, dir, NULL, -1, "checkpoint_name '%s' must be a plain file name", name);
	ckpt_strategy *cs = ck ? ckpt__checkpoint_collective(ck) : NULL;
	ckpt_manager *m = ckpt__calloc(1, sizeof(*m));
	if (!m)
		return agree(cs, CKPT_ENOMEM);
	m->ck = ck;
	m->max_to_keep = max_to_keep;
	m->vfs = opts.vfs ? opts.vfs : (ck && ck->opts.vfs ? ck->opts.vfs : ckpt_vfs_default());
	m->warn = opts.warn ? opts.warn : (ck ? ck->opts.warn : NULL);
	m->warn_ctx = opts.warn ? opts.warn_ctx : (ck ? ck->opts.warn_ctx : NULL);
	m->no_fsync = opts.no_fsync || (ck && ck->opts.no_fsync);
	m->last_preserved = now_seconds();
	m->dir = ckpt__strdup(dir);
	m->name = ckpt__strdup(name);
	int rc = (!m->dir || !m->name) ? CKPT_ENOMEM : CKPT_OK;
	/* "dir/" and "dir" are the same directory */
	for (size_t l = m->dir ? strlen(m->dir) : 0; rc == CKPT_OK && l > 1 && m->dir[l - 1] == '/'; l--)
		m->dir[l - 1] = '\0';
	if (rc == CKPT_OK)
		rc = make_dirs(m->vfs, m->dir);
	int have_state = 0;
	if (rc == CKPT_OK)
		rc = read_state(m, &have_state);
	if (rc == CKPT_OK)
		rc = scan_dir(m, have_state, writer_process(cs));
	for (size_t i = 0; i < m->n && rc == CKPT_OK; i++) {
		int64_t num = prefix_number(base_name(m->paths[i]), m->name);
		if (num > m->max_number)
			m->max_number = num;
	}
	rc = agree(cs, rc);
	if (rc < 0) {
		ckpt__error_annotate(dir, NULL);
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

static int save_number(const char **path_out, ckpt_manager *m, int64_t number)
{
	char *path = ckpt__asprintf("%s/%s-%lld", m->dir, m->name, (long long)number);
	if (!path)
		return CKPT_ENOMEM;
	ckpt_strategy *cs = collective(m);
	int writer = writer_process(cs);
	/* collective by itself: on failure every process already has the same status */
	int rc = ckpt__checkpoint_save_as(m->ck, path, number);
	int saved = rc == CKPT_OK;
	if (rc == CKPT_OK)
		rc = list_push(m, path, now_seconds());
	if (rc == CKPT_OK && number > m->max_number)
		m->max_number = number;
	/* retention: the index goes first, so a crash leaves no half-deleted checkpoint that looks valid */
	while (rc == CKPT_OK && m->max_to_keep > 0 && m->n > (size_t)m->max_to_keep) {
		if (writer)
			rc = delete_checkpoint(m, m->paths[0]);
		if (rc < 0)
			break;
		ckpt__free(m->paths[0]);
		memmove(&m->paths[0], &m->paths[1], (m->n - 1) * sizeof(char *));
		memmove(&m->times[0], &m->times[1], (m->n - 1) * sizeof(double));
		m->n--;
	}
	if (rc == CKPT_OK && writer)
		rc = write_state(m);
	if (saved)
		rc = agree(cs, rc);
	/* multi-process: a save that failed after its commit is taken back, so no new checkpoint is visible */
	if (cs && saved && rc < 0) {
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		if (writer)
			delete_checkpoint(m, path);
		if (m->n && strcmp(m->paths[m->n - 1], path) == 0)
			ckpt__free(m->paths[--m->n]);
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	if (rc == CKPT_OK) {
		ckpt__free(m->last_saved);
		m->last_saved = path;
		path = NULL;
		if (path_out)
			*path_out = m->last_saved;
	}
	ckpt__free(path);
	return rc;
}

int ckpt_manager_save_number(const char **path_out, ckpt_manager *m, int64_t number)
{
	if (path_out)
		*path_out = NULL;
	if (!m || !m->ck)
		return ckpt__fail(CKPT_EINVAL, m ? m->dir : NULL, NULL, -1,
			"ckpt_manager_save: the manager has no checkpoint to save");
	if (number < 0)
		return ckpt__fail(CKPT_EINVAL, m->dir, NULL, -1, "checkpoint number %lld is negative", (long long)number);
	return save_number(path_out, m, number);
}

int ckpt_manager_save(const char **path_out, ckpt_manager *m)
{
	if (path_out)
		*path_out = NULL;
	if (!m || !m->ck)
		return ckpt__fail(CKPT_EINVAL, m ? m->dir : NULL, NULL, -1,
			"ckpt_manager_save: the manager has no checkpoint to save");
	int64_t c = ckpt_checkpoint_save_counter(m->ck);
	int64_t base = c > m->max_number ? c : m->max_number;
	if (base == INT64_MAX)
		return ckpt__fail(CKPT_ELIMIT, m->dir, NULL, -1, "checkpoint number overflows");
	return save_number(path_out, m, base + 1);
}

const char *ckpt_manager_latest(const ckpt_manager *m)
{
	return m && m->n ? m->paths[m->n - 1] : NULL;
}

size_t ckpt_manager_count(const ckpt_manager *m)
{
	return m ? m->n : 0;
}

const char *ckpt_manager_checkpoint(const ckpt_manager *m, size_t i)
{
	return m && i < m->n ? m->paths[i] : NULL;
}

/* Complete = the index exists and parses, and every data shard exists. */
static int check_valid(ckpt_manager *m, const char *prefix, char *why, size_t nwhy)
{
	char *idx = ckpt__asprintf("%s.index", prefix);
	if (!idx)
		return CKPT_ENOMEM;
	int exists = ckpt_vfs_exists(m->vfs, idx, NULL);
	ckpt__free(idx);
	if (!exists) {
		snprintf(why, nwhy, "index file %s.index is missing", prefix);
		return 0;
	}
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	oo.vfs = m->vfs;
	ckpt_reader *r;
	if (ckpt_reader_open(&r, prefix, &oo) < 0) {
		char e[512];
		snprintf(why, nwhy, "unreadable: %s", ckpt_error_format(ckpt_error_last(), e, sizeof(e)));
		return 0;
	}
	int ok = 1;
	for (int i = 0; i < ckpt_reader_num_shards(r) && ok; i++) {
		int ex = 1;
		const char *sp = ckpt_reader_shard_path(r, i, &ex);
		if (!ex) {
			snprintf(why, nwhy, "data file %s is missing", sp ? sp : "?");
			ok = 0;
		}
	}
	ckpt_reader_free(r);
	return ok;
}

int ckpt_manager_latest_valid(const char **path_out, ckpt_manager *m)
{
	if (path_out)
		*path_out = NULL;
	if (!m)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_manager_latest_valid: NULL manager");
	for (size_t i = m->n; i-- > 0;) {
		char why[1024];
		int ok = check_valid(m, m->paths[i], why, sizeof(why));
		if (ok < 0)
			return ok;
		if (ok) {
			char *p = ckpt__strdup(m->paths[i]);
			if (!p)
				return CKPT_ENOMEM;
			ckpt__free(m->latest_valid);
			m->latest_valid = p;
			if (path_out)
				*path_out = p;
			ckpt_error_clear();
			return CKPT_OK;
		}
		ckpt__warn(m->warn, m->warn_ctx, "skipping incomplete checkpoint %s (%s); %s", m->paths[i], why,
			i ? "falling back to the previous one" : "no older checkpoint left");
	}
	return ckpt__fail(CKPT_ENOTFOUND, m->dir, NULL, -1, "no complete checkpoint in %s", m->dir);
}

int ckpt_manager_restore_latest(ckpt_restore_status **status, const char **path_out, ckpt_manager *m)
{
	if (status)
		*status = NULL;
	if (path_out)
		*path_out = NULL;
	if (!m || !m->ck)
		return ckpt__fail(CKPT_EINVAL, m ? m->dir : NULL, NULL, -1,
			"ckpt_manager_restore_latest: the manager has no checkpoint to restore into");
	const char *p;
	int rc = ckpt_manager_latest_valid(&p, m);
	if (rc == CKPT_ENOTFOUND) {
		ckpt_error_clear();
		return CKPT_OK;
	}
	CKPT_TRY(rc);
	CKPT_TRY(ckpt_checkpoint_restore(status, m->ck, p));
	if (path_out)
		*path_out = p;
	return CKPT_OK;
}

/*
 * PATH forms of a TensorBundle (reader.h), resolved to the prefix P whose
 * P.index exists:
 *   "dir/ckpt-3"               prefix as given
 *   "dir/ckpt-3.index"         the index file
 *   "dir/"  + `checkpoint`     model_checkpoint_path of the state file
 *                              (text-format CheckpointState; relative to dir)
 *   "dir/"  + saved_model.pb   dir/variables/variables
 *   "dir/"                     the only *.index in it
 *   "dir/ckpt-3.data-00000-of-00001"  the bundle of a data shard
 * Names: P.index, P.data-%05d-of-%05d (naming.cc).
 */
#include <stdio.h>
#include <string.h>
#include "tfb.h"

char *tfb_index_path(const char *prefix)
{
	return ckpt__asprintf("%s.index", prefix);
}

char *tfb_data_path(const char *prefix, int shard, int nshards)
{
	return ckpt__asprintf("%s.data-%05d-of-%05d", prefix, shard, nshards);
}

/* 1 / 0, or the failure of the test (an object store that did not answer is not "absent") */
static int exists(ckpt_vfs *vfs, const char *path, int *is_dir)
{
	int d = 0;
	int rc = ckpt_vfs_exists(&d, vfs, path);
	if (is_dir)
		*is_dir = rc > 0 ? d : 0;
	return rc < 0 ? rc : rc > 0;
}

static int has_index(ckpt_vfs *vfs, const char *prefix)
{
	char *ix = tfb_index_path(prefix);
	if (!ix)
		return CKPT_ENOMEM;
	int d = 0, e = exists(vfs, ix, &d);
	ckpt__free(ix);
	return e < 0 ? e : e && !d;
}

/*
 * The value of `model_checkpoint_path: "..."` in a text-format
 * CheckpointState (C-style escapes). NULL with ENOTFOUND when absent.
 */
static char *state_model_path(const char *text, size_t n, const char *file)
{
	static const char field[] = "model_checkpoint_path";
	size_t flen = sizeof(field) - 1;
	for (size_t i = 0; i < n;) {
		size_t eol = i;
		while (eol < n && text[eol] != '\n')
			eol++;
		size_t j = i;
		while (j < eol && (text[j] == ' ' || text[j] == '\t'))
			j++;
		if (eol - j > flen && memcmp(text + j, field, flen) == 0) {
			j += flen;
			while (j < eol && (text[j] == ' ' || text[j] == '\t' || text[j] == ':'))
				j++;
			if (j < eol && (text[j] == '"' || text[j] == '\'')) {
				char q = text[j++];
				char *out = ckpt__malloc(eol - j + 1);
				if (!out)
					return NULL;
				size_t o = 0;
				while (j < eol && text[j] != q) {
					char c = text[j++];
					if (c == '\\' && j < eol) {
						c = text[j++];
						if (c == 'n') c = '\n';
						else if (c == 't') c = '\t';
						else if (c >= '0' && c <= '7') {
							int v = c - '0';
							for (int k = 0; k < 2 && j < eol && text[j] >= '0' && text[j] <= '7'; k++)
								v = v * 8 + (text[j++] - '0');
							c = (char)v;
						}
					}
					out[o++] = c;
				}
				out[o] = '\0';
				return out;
			}
		}
		i = eol + 1;
	}
	ckpt__fail(CKPT_ENOTFOUND, file, NULL, -1, "no model_checkpoint_path in the checkpoint state file");
	return NULL;
}

static int from_state_file(ckpt_vfs *vfs, const char *dir, const char *state, char **prefix)
{
	void *buf = NULL;
	size_t n = 0;
	CKPT_TRY(ckpt_vfs_read_all(&buf, &n, vfs, state, CKPT_MAX_STATE_FILE_BYTES));
	char *mp = state_model_path(buf, n, state);
	ckpt__free(buf);
	if (!mp)
		return ckpt_error_last()->code;
	int bad = ckpt__state_name_check(dir, state, mp);
	if (bad < 0) {
		ckpt__free(mp);
		return bad;
	}
	char *p = ckpt__path_join(dir, mp);
	if (p && mp[0] == '/' && has_index(vfs, p) == 0) {
		/* An absolute path from another machine: try its basename here (TF does the same). */
		const char *base = strrchr(mp, '/') + 1;
		char *q = ckpt__path_join(dir, base);
		if (q && has_index(vfs, q) > 0) {
			ckpt__free(p);
			p = q;
		} else {
			ckpt__free(q);
		}
	}
	if (!p) {
		ckpt__free(mp);
		return CKPT_ENOMEM;
	}
	int rc = has_index(vfs, p);
	if (rc <= 0) {
		rc = rc < 0 ? rc : ckpt__fail(CKPT_ENOTFOUND, state, NULL, -1,
			"checkpoint state names '%s', but %s.index does not exist", mp, p);
		ckpt__free(p);
		ckpt__free(mp);
		return rc;
	}
	ckpt__free(mp);
	*prefix = p;
	return CKPT_OK;
}

static int from_dir(ckpt_vfs *vfs, const char *dir, char **prefix)
{
	char *state = ckpt__path_join(dir, "checkpoint");
	if (!state)
		return CKPT_ENOMEM;
	int d = 0, e = exists(vfs, state, &d);
	if (e < 0) {
		ckpt__free(state);
		return e;
	}
	if (e && !d) {
		int rc = from_state_file(vfs, dir, state, prefix);
		ckpt__free(state);
		return rc;
	}
	ckpt__free(state);
	char *sm = ckpt__path_join(dir, "variables/variables");
	if (!sm)
		return CKPT_ENOMEM;
	int rc = has_index(vfs, sm);
	if (rc != 0) {
		if (rc > 0) {
			*prefix = sm;
			return CKPT_OK;
		}
		ckpt__free(sm);
		return rc;
	}
	ckpt__free(sm);
	char **names = NULL;
	size_t count = 0, found = 0, which = 0;
	CKPT_TRY(ckpt_vfs_list(&names, &count, vfs, dir));
	for (size_t i = 0; i < count; i++) {
		size_t l = strlen(names[i]);
		if (l > 6 && strcmp(names[i] + l - 6, ".index") == 0) {
			if (found++ == 0)
				which = i;
		}
	}
	if (found != 1) {
		rc = found == 0
			? ckpt__fail(CKPT_ENOTFOUND, dir, NULL, -1,
				"no checkpoint here: no 'checkpoint' state file, no variables/variables.index, no *.index file")
			: ckpt__fail(CKPT_EINVAL, dir, NULL, -1,
				"%zu *.index files and no 'checkpoint' state file: name the prefix", found);
		ckpt_vfs_free_list(names, count);
		return rc;
	}
	size_t l = strlen(names[which]);
	names[which][l - 6] = '\0';
	*prefix = ckpt__path_join(dir, names[which]);
	ckpt_vfs_free_list(names, count);
	return *prefix ? CKPT_OK : CKPT_ENOMEM;
}

int tfb_resolve_path(ckpt_vfs *vfs, const char *path, char **prefix)
{
	*prefix = NULL;
	if (!path || !*path)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "empty checkpoint path");
	int d = 0;
	size_t l = strlen(path);
	int e = exists(vfs, path, &d);
	if (e < 0)
		return e;
	if (e) {
		if (d) {
			/* strip trailing slashes so that joined paths look normal */
			char *dir = ckpt__strdup(path);
			if (!dir)
				return CKPT_ENOMEM;
			for (size_t k = strlen(dir); k > 1 && dir[k - 1] == '/'; k--)
				dir[k - 1] = '\0';
			int rc = from_dir(vfs, dir, prefix);
			ckpt__free(dir);
			return rc;
		}
		if (l > 6 && strcmp(path + l - 6, ".index") == 0) {
			*prefix = ckpt__strndup(path, l - 6);
			return *prefix ? CKPT_OK : CKPT_ENOMEM;
		}
		/* a data shard "P.data-00000-of-00002" names its bundle too */
		const char *dp = NULL;
		for (const char *q = strstr(path, ".data-"); q; q = strstr(q + 1, ".data-"))
			dp = q;
		int sh = 0, nsh = 0, used = 0;
		if (dp && sscanf(dp, ".data-%5d-of-%5d%n", &sh, &nsh, &used) == 2 && dp[used] == '\0') {
			char *p = ckpt__strndup(path, (size_t)(dp - path));
			if (!p)
				return CKPT_ENOMEM;
			int rc = has_index(vfs, p);
			if (rc > 0) {
				*prefix = p;
				return CKPT_OK;
			}
			ckpt__free(p);
			if (rc < 0)
				return rc;
		}
	}
	int rc = has_index(vfs, path);
	if (rc < 0)
		return rc;
	if (rc == 0)
		return ckpt__fail(CKPT_ENOTFOUND, path, NULL, -1,
			"no TensorBundle here: %s.index does not exist", path);
	*prefix = ckpt__strdup(path);
	return *prefix ? CKPT_OK : CKPT_ENOMEM;
}

int tfb_make_parent_dirs(ckpt_vfs *vfs, const char *prefix)
{
	char *dir = ckpt__path_dir(prefix);
	int rc = dir ? ckpt__vfs_mkdirs(vfs, dir) : CKPT_ENOMEM;
	ckpt__free(dir);
	return rc;
}

/*
 * What a node's tier directory holds (ckpt_tier_scan), removing a job
 * (ckpt_tier_drop), and the directory itself (ckpt_tier_dir): the public
 * side of ckpt/tier.h that `ckpt tier list|drop` uses.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tier_internal.h"

struct ckpt_tier_list {
	ckpt_tier_entry *e;
	size_t n, cap;
	char **jobs;          /* owned names the entries point at */
	size_t njobs;
};

int ckpt_tier_dir(char **out)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_tier_dir: NULL argument");
	const char *env = getenv(CKPT_TIER_DIR_ENV);
	*out = env && *env ? ckpt__strdup(env) : ckpt__asprintf("/dev/shm/ckpt-%u", (unsigned)geteuid());
	return *out ? CKPT_OK : CKPT_ENOMEM;
}

static ckpt_tier_entry *entry_for(ckpt_tier_list *l, const char *job, int64_t step, int num_workers)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->e[i].job == job && l->e[i].step == step && l->e[i].num_workers == num_workers)
			return &l->e[i];
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		ckpt_tier_entry *ne = ckpt__realloc(l->e, cap * sizeof(*ne));
		if (!ne)
			return NULL;
		l->e = ne;
		l->cap = cap;
	}
	ckpt_tier_entry *e = &l->e[l->n++];
	memset(e, 0, sizeof(*e));
	e->job = job;
	e->step = step;
	e->num_workers = num_workers;
	return e;
}

static int scan_job(ckpt_tier_list *l, const char *base, const char *job)
{
	char *jd = ckpt__asprintf("%s/%s", base, job);
	if (!jd)
		return CKPT_ENOMEM;
	DIR *d = opendir(jd);
	if (!d) {
		int e = errno;
		ckpt__free(jd);
		return e == ENOTDIR ? CKPT_OK : ckpt__fail_errno(e, base, "cannot list the memory tier job %s", job);
	}
	int rc = CKPT_OK;
	struct dirent *de;
	while (rc == CKPT_OK && (de = readdir(d))) {
		int64_t step;
		int w, nw;
		if (!ckpt__tier_parse_name(de->d_name, &step, &w, &nw))
			continue;
		ckpt_tier_entry *e = entry_for(l, job, step, nw);
		if (!e) {
			rc = CKPT_ENOMEM;
			break;
		}
		char *seg = ckpt__asprintf("%s/%s", jd, de->d_name);
		uint64_t bytes = 0;
		if (!seg)
			rc = CKPT_ENOMEM;
		/* a segment that does not check is listed as missing, not as an error: the step is incomplete */
		else if (ckpt__tier_segment_check(&bytes, seg, job, step, w, nw) == CKPT_OK) {
			e->num_present++;
			e->bytes += bytes;
		} else
			ckpt_error_clear();
		ckpt__free(seg);
	}
	closedir(d);
	/* a multi-process step (its segments are pieces: "ckpt.entries") is complete only with its commit record */
	for (size_t i = 0; rc == CKPT_OK && i < l->n; i++) {
		ckpt_tier_entry *e = &l->e[i];
		if (e->job != job)
			continue;
		int piece = 0;
		for (int w = 0; !piece && w < e->num_workers; w++) {
			char *seg = ckpt__tier_segment_path(jd, e->step, w, e->num_workers);
			char *ep = seg ? ckpt__asprintf("%s/ckpt.entries", seg) : NULL;
			piece = ep && access(ep, F_OK) == 0;
			ckpt__free(ep);
			ckpt__free(seg);
		}
		if (piece && ckpt__tier_marker_check(jd, job, e->step, e->num_workers) != CKPT_OK) {
			e->complete = -1; /* not recorded: never complete, whatever is present */
			ckpt_error_clear();
		}
	}
	ckpt__free(jd);
	return rc;
}

static int cmp_entries(const void *a, const void *b)
{
	const ckpt_tier_entry *x = a, *y = b;
	int c = strcmp(x->job, y->job);
	if (c)
		return c;
	return x->step < y->step ? -1 : x->step > y->step ? 1 : x->num_workers - y->num_workers;
}

int ckpt_tier_scan(ckpt_tier_list **out, const char *dir)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_tier_scan: NULL argument");
	*out = NULL;
	char *base = NULL;
	if (dir)
		base = ckpt__strdup(dir);
	else
		CKPT_TRY(ckpt_tier_dir(&base));
	ckpt_tier_list *l = ckpt__calloc(1, sizeof(*l));
	if (!base || !l) {
		ckpt__free(base);
		ckpt__free(l);
		return CKPT_ENOMEM;
	}
	int rc = CKPT_OK;
	DIR *d = opendir(base);
	if (!d && errno != ENOENT)
		rc = ckpt__fail_errno(errno, base, "cannot list the memory tier directory");
	struct dirent *de;
	while (d && rc == CKPT_OK && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char **nj = ckpt__realloc(l->jobs, (l->njobs + 1) * sizeof(*nj));
		if (!nj) {
			rc = CKPT_ENOMEM;
			break;
		}
		l->jobs = nj;
		if (!(l->jobs[l->njobs] = ckpt__strdup(de->d_name))) {
			rc = CKPT_ENOMEM;
			break;
		}
		rc = scan_job(l, base, l->jobs[l->njobs++]);
	}
	if (d)
		closedir(d);
	ckpt__free(base);
	if (rc < 0) {
		ckpt_tier_list_free(l);
		return rc;
	}
	for (size_t i = 0; i < l->n; i++)
		l->e[i].complete = l->e[i].complete != -1 && l->e[i].num_present == l->e[i].num_workers;
	if (l->n)
		qsort(l->e, l->n, sizeof(*l->e), cmp_entries);
	*out = l;
	return CKPT_OK;
}

size_t ckpt_tier_list_num_entries(const ckpt_tier_list *l)
{
	return l ? l->n : 0;
}

const ckpt_tier_entry *ckpt_tier_list_entry(const ckpt_tier_list *l, size_t i)
{
	return l && i < l->n ? &l->e[i] : NULL;
}

void ckpt_tier_list_free(ckpt_tier_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->njobs; i++)
		ckpt__free(l->jobs[i]);
	ckpt__free(l->jobs);
	ckpt__free(l->e);
	ckpt__free(l);
}

int ckpt_tier_drop(const char *dir, const char *job)
{
	CKPT_TRY(ckpt__tier_check_job(job));
	char *base = NULL;
	if (dir)
		base = ckpt__strdup(dir);
	else
		CKPT_TRY(ckpt_tier_dir(&base));
	char *jd = base ? ckpt__asprintf("%s/%s", base, job) : NULL;
	int rc = jd ? ckpt__tier_remove_tree(jd) : CKPT_ENOMEM;
	/* the default tier directory goes too when this was its last job (rmdir refuses otherwise); one the
	 * caller named is theirs to keep */
	if (rc == CKPT_OK && !dir && !(getenv(CKPT_TIER_DIR_ENV) && *getenv(CKPT_TIER_DIR_ENV)))
		rmdir(base);
	ckpt__free(jd);
	ckpt__free(base);
	return rc;
}

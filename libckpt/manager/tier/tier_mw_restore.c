/*
 * The memory tier of a multi-process checkpoint: the restore (ckpt/tier.h,
 * "Across workers"; the save is tier_mw.c's).
 *
 * Restore: the leaders list what their node holds (segments that check,
 * records); the workers agree on the newest recorded step whose every
 * piece survives somewhere; each leader assembles it in its node as an
 * ordinary merged TensorBundle (its own pieces hard-linked, the others
 * received from a holder); every worker restores it with the ordinary
 * multi-worker restore (resharding, any local split) and the staging
 * directory goes. Nothing is read from the checkpoint directory.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "checkpoint/checkpoint_internal.h"
#include "ckpt/sys/bundle_part.h"
#include "tier_mw_internal.h"

/* What a leader reports of its node at a restore: a piece it holds (piece >= 0) or a record (-1). */
typedef struct held {
	int64_t step;
	int32_t num_workers, piece;
} held;

/* The next whole frame (header, entries, data) of a restore's buffer, checked; CKPT_ECHECKSUM names the sender. */
static int next_frame(frame_hdr *h, const unsigned char **e, const unsigned char **d, const unsigned char *buf,
	uint64_t len, uint64_t *at, int from)
{
	if (len - *at < sizeof(*h))
		return ckpt__fail(CKPT_EFORMAT, NULL, NULL, (int64_t)*at, "memory tier: a piece from worker %d is cut", from);
	memcpy(h, buf + *at, sizeof(*h));
	uint64_t body = len - *at - sizeof(*h);
	if (h->magic != FRAME_MAGIC || h->elen > body || h->dlen > body - h->elen)
		return ckpt__fail(CKPT_EFORMAT, NULL, NULL, (int64_t)*at, "memory tier: a malformed piece from worker %d",
			from);
	*e = buf + *at + sizeof(*h);
	*d = *e + h->elen;
	*at += sizeof(*h) + h->elen + h->dlen;
	if (ckpt_crc32c_extend(0, *e, h->elen) != h->ecrc || ckpt_crc32c_extend(0, *d, h->dlen) != h->dcrc)
		return ckpt__fail(CKPT_ECHECKSUM, NULL, NULL, -1, "memory tier: piece %d of step %" PRId64 " from worker %d "
			"does not match its crc32c", h->piece, h->step, from);
	return CKPT_OK;
}

static int push_held(held **v, size_t *n, size_t *cap, int64_t step, int nw, int piece)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		held *nv = ckpt__realloc(*v, c * sizeof(*nv));
		if (!nv)
			return CKPT_ENOMEM;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = (held){ step, nw, piece };
	return CKPT_OK;
}

/* What this node holds (leader only): pieces whose segment checks, and whole records. Bad ones warned and left out. */
static int scan_node(held **v, size_t *n, const ckpt__tier *t, ckpt_warning_fn warn, void *warn_ctx)
{
	*v = NULL;
	*n = 0;
	int rc = CKPT_OK;
	DIR *d = ckpt__tier_open_job(t->job_dir, &rc);
	if (!d)
		return rc;
	size_t cap = 0;
	struct dirent *e;
	while (rc == CKPT_OK && (e = readdir(d))) {
		int64_t s;
		int w, nw, ok;
		if (ckpt__tier_parse_name(e->d_name, &s, &w, &nw)) {
			char *seg = ckpt__asprintf("%s/%s", t->job_dir, e->d_name);
			uint64_t b = 0;
			ok = seg ? ckpt__tier_segment_check(&b, seg, t->job, s, w, nw) : CKPT_ENOMEM;
			ckpt__free(seg);
		} else if (ckpt__tier_parse_marker(e->d_name, &s, &nw)) {
			w = -1;
			ok = ckpt__tier_marker_check(t->job_dir, t->job, s, nw);
		} else {
			continue;
		}
		if (ok == CKPT_ENOMEM) {
			rc = ok;
		} else if (ok < 0) {
			char m[1024];
			ckpt__warn(warn, warn_ctx, "memory tier: not using %s/%s (%s)", t->job_dir, e->d_name,
				ckpt_error_format(ckpt_error_last(), m, sizeof(m)));
			ckpt_error_clear();
		} else {
			rc = push_held(v, n, &cap, s, nw, w);
		}
	}
	closedir(d);
	if (rc < 0) {
		ckpt__free(*v);
		*v = NULL;
		*n = 0;
	}
	return rc;
}

/* The lowest worker (a leader) whose node holds `piece` of step N of nw workers; -1 when none. */
static int holder(const held *all, const size_t *lens, int W, int64_t step, int nw, int piece)
{
	for (int w = 0, at = 0; w < W; at += (int)(lens[w] / sizeof(held)), w++)
		for (size_t i = 0; i < lens[w] / sizeof(held); i++)
			if (all[at + i].step == step && all[at + i].num_workers == nw && all[at + i].piece == piece)
				return w;
	return -1;
}

/*
 * The newest step recorded by some surviving node, newer than `newer_than`,
 * whose every piece survives: *step / *nw, and the holder of each piece in
 * *src (caller frees). *step = -1 when none (reasons warned on worker 0).
 */
static int choose(int64_t *step, int *nw, int **src, const ckpt__tier *t, const held *all, const size_t *lens,
	int W, int64_t newer_than, ckpt_warning_fn warn, void *warn_ctx)
{
	*step = -1;
	*nw = 0;
	*src = NULL;
	size_t n = 0;
	for (int w = 0; w < W; w++)
		n += lens[w] / sizeof(held);
	int64_t below = INT64_MAX;
	for (;;) {
		/* the newest record below `below` */
		int64_t best = -1;
		int bw = 0;
		for (size_t i = 0; i < n; i++)
			if (all[i].piece < 0 && all[i].step < below && all[i].step > best)
				best = all[i].step, bw = all[i].num_workers;
		if (best < 0 || best <= newer_than)
			return CKPT_OK;
		int *s = ckpt__calloc((size_t)bw, sizeof(int));
		if (!s)
			return CKPT_ENOMEM;
		int missing = -1;
		for (int p = 0; p < bw && missing < 0; p++)
			if ((s[p] = holder(all, lens, W, best, bw, p)) < 0)
				missing = p;
		if (missing < 0) {
			*step = best;
			*nw = bw;
			*src = s;
			return CKPT_OK;
		}
		ckpt__free(s);
		if (t->worker == 0)
			ckpt__warn(warn, warn_ctx, "memory tier: step %" PRId64 " of job %s (%d workers) cannot be restored: "
				"no surviving node holds a good copy of worker %d's piece (more nodes lost than memory_copies "
				"%d covers?); trying an older step, then the checkpoint directory", best, t->job, bw, missing,
				t->copies);
		below = best;
	}
}

/* Whether worker `w`'s report (a leader's: its node) holds `piece` of step N of nw workers. */
static int reports(const held *all, const size_t *lens, int w, int64_t step, int nw, int piece)
{
	size_t at = 0;
	for (int x = 0; x < w; x++)
		at += lens[x] / sizeof(held);
	for (size_t i = 0; i < lens[w] / sizeof(held); i++)
		if (all[at + i].step == step && all[at + i].num_workers == nw && all[at + i].piece == piece)
			return 1;
	return 0;
}

/* Append piece p's frame to a growing buffer. */
static int append(unsigned char **buf, uint64_t *len, const void *f, uint64_t fl)
{
	unsigned char *nb = ckpt__realloc(*buf, (size_t)(*len + fl));
	if (!nb)
		return CKPT_ENOMEM;
	memcpy(nb + *len, f, (size_t)fl);
	*buf = nb;
	*len += fl;
	return CKPT_OK;
}

/* A piece this node holds, into the staging directory: its data hard-linked (same file system), its entries read. */
static int stage_own(const ckpt__tier *t, const char *stage, int64_t step, int nw, int p, uint64_t token,
	void **entries, size_t *elen)
{
	char *seg = ckpt__tier_segment_path(t->job_dir, step, p, nw);
	char *from = seg ? ckpt__tier_mw_data_name(seg, p, nw) : NULL, *ep = seg ? ckpt__asprintf("%s/" ENTRIES, seg) : NULL;
	char *to = ckpt__asprintf("%s/" CKPT__TIER_PREFIX ".data-%05d-of-%05d.tempstate%" PRIu64, stage, p, nw, token);
	int rc = seg && from && ep && to ? CKPT_OK : CKPT_ENOMEM;
	if (rc == CKPT_OK && link(from, to) < 0)
		rc = ckpt__fail_errno(errno, from, "cannot link the memory tier piece into %s", stage);
	uint64_t l = 0;
	if (rc == CKPT_OK)
		rc = ckpt__tier_read_whole(entries, &l, ep);
	*elen = (size_t)l;
	ckpt__free(seg);
	ckpt__free(from);
	ckpt__free(ep);
	ckpt__free(to);
	return rc;
}

/*
 * Assemble step N as a merged TensorBundle in this node's staging directory
 * (leaders): the pieces the node holds linked, the others received from their
 * holder; then the index. Every worker takes part in the exchange.
 */
static int assemble(const ckpt__tier *t, ckpt_strategy *cs, const char *stage, int64_t step, int nw, const int *src,
	const held *all, const size_t *lens, int rc)
{
	int W = t->num_workers, me = t->worker, leader = ckpt__tier_mw_is_leader(t, me);
	const void **send = ckpt__calloc((size_t)W, sizeof(*send));
	uint64_t *slen = ckpt__calloc((size_t)W, sizeof(*slen)), *rlen = ckpt__calloc((size_t)W, sizeof(*rlen));
	void **recv = ckpt__calloc((size_t)W, sizeof(*recv));
	void **entries = ckpt__calloc((size_t)nw, sizeof(*entries));
	size_t *elens = ckpt__calloc((size_t)nw, sizeof(*elens));
	unsigned char **out = ckpt__calloc((size_t)W, sizeof(*out)); /* per destination, frames appended */
	if (!send || !slen || !rlen || !recv || !entries || !elens || !out)
		rc = rc < 0 ? rc : CKPT_ENOMEM;
	const uint64_t token = 1;
	for (int p = 0; rc == CKPT_OK && leader && p < nw; p++) {
		if (src[p] != me)
			continue;
		void *f = NULL, *owned = NULL;
		const void *data = NULL;
		uint64_t fl = 0;
		for (int k = 0; rc == CKPT_OK && k < t->nnodes; k++) {
			int to = t->leader[k];
			if (reports(all, lens, to, step, nw, p))
				continue;
			if (!f) {
				char *seg = ckpt__tier_segment_path(t->job_dir, step, p, nw);
				rc = seg ? ckpt__tier_mw_frame_from_segment(&f, &fl, &data, &owned, t, seg, step, p, nw) : CKPT_ENOMEM;
				ckpt__free(seg);
			}
			/* a whole frame: header, entries, data */
			if (rc == CKPT_OK)
				rc = append(&out[to], &slen[to], f, fl);
			if (rc == CKPT_OK)
				rc = append(&out[to], &slen[to], data, ((const frame_hdr *)f)->dlen);
		}
		ckpt__free(f);
		ckpt__free(owned);
	}
	for (int w = 0; rc == CKPT_OK && w < W; w++)
		send[w] = out[w];
	if (rc < 0 && slen)
		memset(slen, 0, (size_t)W * sizeof(*slen));
	int xrc = send && slen && recv && rlen ? ckpt__tier_mw_ops(cs)->exchange(cs, send, slen, recv, rlen) : ckpt__tier_mw_agree(cs, rc);
	if (rc == CKPT_OK)
		rc = xrc;
	/* the leader stages every piece: its own linked, the received ones written */
	for (int p = 0; rc == CKPT_OK && leader && p < nw; p++)
		if (reports(all, lens, me, step, nw, p))
			rc = stage_own(t, stage, step, nw, p, token, &entries[p], &elens[p]);
	for (int w = 0; rc == CKPT_OK && leader && w < W; w++) {
		uint64_t at = 0;
		while (rc == CKPT_OK && at < rlen[w]) {
			frame_hdr h;
			const unsigned char *e = NULL, *d = NULL;
			rc = next_frame(&h, &e, &d, recv[w], rlen[w], &at, w);
			if (rc == CKPT_OK && (h.step != step || h.num_workers != nw || h.piece < 0 || h.piece >= nw ||
						     entries[h.piece]))
				rc = ckpt__fail(CKPT_EFORMAT, stage, NULL, -1, "memory tier: worker %d sent piece %d of step %"
					PRId64 " of %d workers, not one this node asked for", w, h.piece, h.step, h.num_workers);
			char *dp = rc == CKPT_OK ? ckpt__asprintf("%s/" CKPT__TIER_PREFIX ".data-%05d-of-%05d.tempstate%" PRIu64,
				stage, h.piece, nw, token) : NULL;
			if (rc == CKPT_OK)
				rc = dp ? ckpt__tier_write_file(dp, d, h.dlen) : CKPT_ENOMEM;
			if (rc == CKPT_OK && !(entries[h.piece] = ckpt__malloc(h.elen ? (size_t)h.elen : 1)))
				rc = CKPT_ENOMEM;
			if (rc == CKPT_OK) {
				memcpy(entries[h.piece], e, (size_t)h.elen);
				elens[h.piece] = (size_t)h.elen;
			}
			ckpt__free(dp);
		}
	}
	for (int p = 0; rc == CKPT_OK && leader && p < nw; p++)
		if (!entries[p])
			rc = ckpt__fail(CKPT_ENOTFOUND, stage, NULL, -1, "memory tier: piece %d of step %" PRId64 " never came",
				p, step);
	if (rc == CKPT_OK && leader) {
		char *prefix = ckpt__asprintf("%s/" CKPT__TIER_PREFIX, stage);
		rc = prefix ? ckpt_bundle_merge_commit(ckpt_vfs_default(), prefix, nw, token, (const void *const *)entries,
			elens, 1) : CKPT_ENOMEM;
		ckpt__free(prefix);
	}
	for (int w = 0; recv && w < W; w++)
		ckpt__free(recv[w]);
	for (int w = 0; out && w < W; w++)
		ckpt__free(out[w]);
	for (int p = 0; entries && p < nw; p++)
		ckpt__free(entries[p]);
	ckpt__free(send);
	ckpt__free(slen);
	ckpt__free(rlen);
	ckpt__free(recv);
	ckpt__free(entries);
	ckpt__free(elens);
	ckpt__free(out);
	return ckpt__tier_mw_agree(cs, rc);
}

/* A failure of the memory tier that the checkpoint directory may make good. */
static int fall_back(int rc)
{
	return rc == CKPT_ECHECKSUM || rc == CKPT_EFORMAT || rc == CKPT_ENOTFOUND || rc == CKPT_EIO ||
		rc == CKPT_ELIMIT;
}

int ckpt__tier_mw_restore(ckpt_restore_status **status, int *restored, const char **path_out, ckpt__tier *t,
	ckpt_strategy *cs, ckpt_checkpoint *ck, int64_t newer_than, ckpt_warning_fn warn, void *warn_ctx)
{
	*restored = 0;
	*path_out = NULL;
	const ckpt__strategy_ops *ops = ckpt__tier_mw_ops(cs);
	if (ops->version < 2 || !ops->exchange)
		return CKPT_OK; /* it never saved to memory either */
	CKPT_TRY(ckpt__tier_mw_learn_nodes(t, cs));
	held *mine = NULL;
	size_t nmine = 0;
	int rc = ckpt__tier_mw_is_leader(t, t->worker) ? scan_node(&mine, &nmine, t, warn, warn_ctx) : CKPT_OK;
	void *allv = NULL;
	size_t *lens = NULL;
	int np = 0;
	int grc = ops->allgather(cs, mine, rc == CKPT_OK ? nmine * sizeof(held) : 0, &allv, &lens, &np);
	ckpt__free(mine);
	if (rc == CKPT_OK)
		rc = grc;
	if (grc == CKPT_OK)
		rc = ckpt__tier_mw_agree(cs, rc);
	int64_t step = -1;
	int nw = 0, *src = NULL;
	if (rc == CKPT_OK)
		rc = choose(&step, &nw, &src, t, allv, lens, np, newer_than, warn, warn_ctx);
	if (rc < 0 || step < 0) {
		ckpt__free(allv);
		ckpt__free(lens);
		return rc;
	}
	/* every worker chose alike (the same reports); the leaders stage it */
	char *stage = ckpt__asprintf("%s/.restore-%012" PRId64 ".of-%d", t->job_dir, step, nw);
	rc = stage ? CKPT_OK : CKPT_ENOMEM;
	if (rc == CKPT_OK && ckpt__tier_mw_is_leader(t, t->worker)) {
		rc = ckpt__tier_remove_tree(stage);
		if (rc == CKPT_OK && mkdir(stage, 0700) < 0)
			rc = ckpt__fail_errno(errno, stage, "cannot create the memory tier's staging directory");
	}
	rc = assemble(t, cs, stage, step, nw, src, allv, lens, rc);
	ckpt__free(src);
	ckpt__free(allv);
	ckpt__free(lens);
	char *prefix = rc == CKPT_OK ? ckpt__asprintf("%s/" CKPT__TIER_PREFIX, stage) : NULL;
	if (rc == CKPT_OK && !prefix)
		rc = CKPT_ENOMEM;
	rc = ckpt__tier_mw_agree(cs, rc);
	/* the ordinary multi-worker restore: all or nothing, onto this job's workers and replicas */
	if (rc == CKPT_OK)
		rc = ckpt__checkpoint_restore_via(status, ck, prefix, ckpt_vfs_default(), 1); /* staging removed below */
	ckpt__free(prefix);
	/* nobody reads the staging directory any more */
	int arc = ckpt__tier_mw_agree(cs, CKPT_OK);
	if (ckpt__tier_mw_is_leader(t, t->worker) && stage) {
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		ckpt__tier_remove_tree(stage);
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	ckpt__free(stage);
	if (rc == CKPT_OK)
		rc = arc;
	if (rc == CKPT_OK) {
		*restored = 1;
		if (status && *status)
			ckpt__restore_status_set_tier(*status, CKPT_TIER_MEMORY);
		char *p = ckpt__asprintf("%s/step-%012" PRId64 ".of-%d", t->job_dir, step, nw);
		if (!p)
			return CKPT_ENOMEM;
		ckpt__free(t->last_path);
		t->last_path = p;
		*path_out = p;
		return CKPT_OK;
	}
	if (fall_back(rc)) {
		char e[1024];
		if (t->worker == 0)
			ckpt__warn(warn, warn_ctx, "memory tier: step %" PRId64 " of job %s could not be restored (%s); "
				"falling back to the checkpoint directory", step, t->job,
				ckpt_error_format(ckpt_error_last(), e, sizeof(e)));
		ckpt_error_clear();
		return CKPT_OK;
	}
	return rc;
}


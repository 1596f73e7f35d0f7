/*
 * The memory tier of a multi-process checkpoint (ckpt/tier.h, "Across
 * workers"): every worker's piece on its own node and on F other nodes, a
 * step committed only when every piece and every copy is stored, and a
 * restore from the surviving copies onto any worker count.
 *
 * Nodes: the workers that share a tier directory. Each worker's node is
 * named by CKPT_TIER_NODES (a comma-separated name per worker rank, for
 * emulating nodes on one machine: node "a" keeps its segments in
 * <tier dir>/a) or, without it, by its host name (the tier directory
 * itself). A node reads only its own directory; what it lacks comes from a
 * peer through the strategy's exchange (MPI), never from another node's
 * directory.
 *
 * Save of step N by W workers (every call below is collective):
 *   1. each worker writes its piece (the data shard the multi-worker write
 *      gives it, and its index entries) as segment step-N.w<R>-of-<W> of
 *      its node, every file's crc32c in the header;
 *   2. each piece goes to the leader (lowest worker) of the F next nodes,
 *      which store it under the same name and check its crc32c;
 *   3. vote: any failure anywhere fails the save on every worker and the
 *      step's segments are removed; no node records it;
 *   4. each node's leader writes the record commit-N.of-W (renamed whole),
 *      then, once every node has it, removes every other step.
 * A kill before a node's record leaves step N unrecorded there: a restore
 * uses only steps recorded by a surviving node, whose pieces were all
 * stored (1 + F copies) before any node recorded it. So no partial step is
 * ever restored, and the previous recorded step stays until N is recorded.
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
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "checkpoint/checkpoint_internal.h"
#include "model/strategy_impl.h"
#include "ckpt/sys/bundle_part.h"
#include "tier_internal.h"

#define ENV_NODES "CKPT_TIER_NODES"
#define ENTRIES "ckpt.entries"
#define FRAME_MAGIC 0x636b7074706365ull /* "ckptpce" */

/*
 * One piece on the wire: this header and its index entries in a first
 * exchange, then its data shard alone in a second one, sent straight from
 * the file's mapping (tier_slots.c), so that the sender copies nothing.
 */
typedef struct frame_hdr {
	uint64_t magic;
	int64_t step;
	int32_t piece, num_workers;
	uint64_t elen, dlen;
	uint32_t ecrc, dcrc;
} frame_hdr;

/* What a leader reports of its node at a restore: a piece it holds (piece >= 0) or a record (-1). */
typedef struct held {
	int64_t step;
	int32_t num_workers, piece;
} held;

static const ckpt__strategy_ops *ops_of(ckpt_strategy *cs)
{
	return ckpt__strategy_ops_of(cs);
}

static int agree(ckpt_strategy *cs, int rc)
{
	return ops_of(cs)->agree(cs, rc);
}

static int rank_of(ckpt_strategy *cs)
{
	return ckpt__strategy_replica_offset(cs) / ckpt__strategy_local_replicas(cs);
}

static int num_workers_of(ckpt_strategy *cs)
{
	return ckpt_strategy_num_replicas(cs) / ckpt__strategy_local_replicas(cs);
}

static int is_leader(const ckpt__tier *t, int rank)
{
	return t->leader[t->node_of[rank]] == rank;
}

void ckpt__tier_mw_free(ckpt__tier *t)
{
	ckpt__free(t->node_of);
	ckpt__free(t->leader);
	ckpt__free(t->node_dir);
	t->node_of = t->leader = NULL;
	t->node_dir = NULL;
}

/* This worker's node name: item `rank` of CKPT_TIER_NODES, else the host name. */
static int node_name(char *out, size_t n, int rank, int *emulated)
{
	const char *env = getenv(ENV_NODES);
	*emulated = env && *env;
	if (!*emulated) {
		if (gethostname(out, n) < 0)
			return ckpt__fail_errno(errno, NULL, "gethostname");
		out[n - 1] = '\0';
		return CKPT_OK;
	}
	const char *p = env;
	for (int i = 0; i < rank && p; i++)
		if ((p = strchr(p, ',')))
			p++;
	size_t l = p ? strcspn(p, ",") : 0;
	if (!p || !l || l >= n)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, ENV_NODES "='%s' names no node for worker %d (one "
			"name per worker, comma-separated)", env, rank);
	memcpy(out, p, l);
	out[l] = '\0';
	return ckpt__tier_check_job(out);
}

/* Who is on which node: every worker's node name, gathered; collective and agreed. */
static int learn_nodes(ckpt__tier *t, ckpt_strategy *cs)
{
	if (t->mw_known)
		return CKPT_OK;
	int rank = rank_of(cs), W = num_workers_of(cs), emulated = 0;
	char name[256] = "";
	int rc = node_name(name, sizeof(name), rank, &emulated);
	void *all = NULL;
	size_t *lens = NULL;
	int np = 0;
	int grc = ops_of(cs)->allgather(cs, name, rc == CKPT_OK ? strlen(name) + 1 : 0, &all, &lens, &np);
	if (rc == CKPT_OK)
		rc = grc;
	rc = grc == CKPT_OK ? agree(cs, rc) : grc;
	if (rc == CKPT_OK && np != W)
		rc = ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "memory tier: %d workers gathered, %d expected", np, W);
	t->node_of = rc == CKPT_OK ? ckpt__calloc((size_t)W, sizeof(int)) : NULL;
	t->leader = rc == CKPT_OK ? ckpt__calloc((size_t)W, sizeof(int)) : NULL;
	if (rc == CKPT_OK && (!t->node_of || !t->leader))
		rc = CKPT_ENOMEM;
	const char *names = all;
	size_t off = 0;
	const char **first = rc == CKPT_OK ? ckpt__calloc((size_t)W, sizeof(*first)) : NULL;
	if (rc == CKPT_OK && !first)
		rc = CKPT_ENOMEM;
	t->nnodes = 0;
	for (int w = 0; rc == CKPT_OK && w < W; off += lens[w], w++) {
		const char *nm = names + off;
		int k = 0;
		while (k < t->nnodes && strcmp(first[k], nm) != 0)
			k++;
		if (k == t->nnodes) {
			first[t->nnodes] = nm;
			t->leader[t->nnodes++] = w;
		}
		t->node_of[w] = k;
	}
	ckpt__free(first);
	if (rc == CKPT_OK) {
		t->node_dir = emulated ? ckpt__asprintf("%s/%s", t->base, name) : ckpt__strdup(t->base);
		char *jd = t->node_dir ? ckpt__asprintf("%s/%s", t->node_dir, t->job) : NULL;
		if (!jd)
			rc = CKPT_ENOMEM;
		else {
			ckpt__free(t->job_dir);
			t->job_dir = jd;
		}
	}
	ckpt__free(all);
	ckpt__free(lens);
	rc = agree(cs, rc);
	if (rc < 0) {
		ckpt__tier_mw_free(t);
		return rc;
	}
	t->worker = rank;
	t->num_workers = W;
	t->mw_known = 1;
	return CKPT_OK;
}

static int prepare_node_dirs(const ckpt__tier *t)
{
	if (strcmp(t->node_dir, t->base) != 0) {
		int rc = ckpt__tier_prepare_dir(t->base, t->node_dir);
		if (rc < 0)
			return rc;
	}
	return ckpt__tier_prepare_dir(t->node_dir, t->job_dir);
}

static char *data_name(const char *dir, int piece, int num_workers)
{
	return ckpt__asprintf("%s/" CKPT__TIER_PREFIX ".data-%05d-of-%05d", dir, piece, num_workers);
}

/*
 * Piece `piece` of step N from segment `seg`: its frame (header and entries, *out, caller frees) and its
 * data (*data: the mapping this worker wrote, or *owned, read back, caller frees).
 */
static int frame_from_segment(void **out, uint64_t *len, const void **data, void **owned, const ckpt__tier *t,
	const char *seg, int64_t step, int piece, int num_workers)
{
	*out = *owned = NULL;
	*data = NULL;
	*len = 0;
	char *dp = data_name(seg, piece, num_workers), *ep = ckpt__asprintf("%s/" ENTRIES, seg);
	void *ent = NULL;
	uint64_t el = 0, dl = 0;
	uint32_t dcrc = 0;
	int known = 0;
	int rc = dp && ep ? ckpt__tier_read_whole(&ent, &el, ep) : CKPT_ENOMEM;
	if (rc == CKPT_OK && !(*data = ckpt__tier_slots_known(t->slots, dp, &dl, &dcrc, &known))) {
		rc = ckpt__tier_read_whole(owned, &dl, dp);
		*data = *owned;
	}
	if (rc == CKPT_OK && !known)
		dcrc = ckpt_crc32c_extend(0, *data, dl);
	unsigned char *f = rc == CKPT_OK ? ckpt__malloc(sizeof(frame_hdr) + el) : NULL;
	if (rc == CKPT_OK && !f)
		rc = CKPT_ENOMEM;
	if (rc == CKPT_OK) {
		frame_hdr h = { FRAME_MAGIC, step, piece, num_workers, el, dl, ckpt_crc32c_extend(0, ent, el), dcrc };
		memcpy(f, &h, sizeof(h));
		memcpy(f + sizeof(h), ent, el);
		*out = f;
		*len = sizeof(h) + el;
	} else {
		ckpt__free(*owned);
		*owned = NULL;
		*data = NULL;
	}
	ckpt__free(ent);
	ckpt__free(dp);
	ckpt__free(ep);
	return rc;
}

/* A received frame, checked (sizes, the entries' crc32c; the data's is checked as it is stored). */
static int check_frame(frame_hdr *h, const unsigned char **e, const unsigned char *buf, uint64_t len,
	uint64_t dlen, int from)
{
	if (len < sizeof(*h))
		return ckpt__fail(CKPT_EFORMAT, NULL, NULL, 0, "memory tier: a piece from worker %d is cut", from);
	memcpy(h, buf, sizeof(*h));
	if (h->magic != FRAME_MAGIC || h->elen != len - sizeof(*h) || h->dlen != dlen)
		return ckpt__fail(CKPT_EFORMAT, NULL, NULL, 0, "memory tier: a malformed piece from worker %d", from);
	*e = buf + sizeof(*h);
	if (ckpt_crc32c_extend(0, *e, h->elen) != h->ecrc)
		return ckpt__fail(CKPT_ECHECKSUM, NULL, NULL, -1, "memory tier: piece %d of step %" PRId64 " from worker %d "
			"does not match its crc32c", h->piece, h->step, from);
	return CKPT_OK;
}

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

/* A received copy of a piece, stored as this node's segment of it: its data's crc32c taken as it is written. */
static int store_copy(const ckpt__tier *t, const frame_hdr *h, const unsigned char *e, const unsigned char *d, int from)
{
	char *tmp = NULL;
	CKPT_TRY(ckpt__tier_segment_begin(&tmp, t->job_dir, h->step, h->piece, h->num_workers));
	char *dp = data_name(tmp, h->piece, h->num_workers), *ep = ckpt__asprintf("%s/" ENTRIES, tmp);
	char *final = ckpt__tier_segment_path(t->job_dir, h->step, h->piece, h->num_workers);
	ckpt_io *io = NULL;
	int rc = dp && ep && final ? ckpt_vfs_open(&io, ckpt__tier_slots_vfs(t->slots), dp, CKPT_IO_WRITE) : CKPT_ENOMEM;
	if (rc == CKPT_OK)
		rc = ckpt_io_pwrite(io, d, (size_t)h->dlen, 0);
	if (io) {
		int crc = ckpt_io_close(io);
		rc = rc < 0 ? rc : crc;
	}
	uint64_t size = 0;
	uint32_t crc = 0;
	int known = 0;
	if (rc == CKPT_OK && ckpt__tier_slots_known(t->slots, dp, &size, &crc, &known) && !known)
		crc = ckpt_crc32c_extend(0, d, (size_t)h->dlen);
	if (rc == CKPT_OK && crc != h->dcrc)
		rc = ckpt__fail(CKPT_ECHECKSUM, NULL, NULL, -1, "memory tier: piece %d of step %" PRId64 " from worker %d "
			"does not match its crc32c", h->piece, h->step, from);
	if (rc == CKPT_OK)
		rc = ckpt__tier_write_file(ep, e, h->elen);
	uint64_t bytes = 0;
	if (rc == CKPT_OK)
		rc = ckpt__tier_segment_commit(&bytes, tmp, final, t->job, h->step, h->piece, h->num_workers, 1, t->slots);
	if (rc < 0)
		ckpt__tier_remove_tree(tmp);
	ckpt__free(dp);
	ckpt__free(ep);
	ckpt__free(final);
	ckpt__free(tmp);
	return rc;
}

/* The job directory, listed; NULL with *rc CKPT_OK when it does not exist, or the error. */
static DIR *list_job(const ckpt__tier *t, int *rc)
{
	DIR *d = opendir(t->job_dir);
	*rc = d || errno == ENOENT ? CKPT_OK : ckpt__fail_errno(errno, t->job_dir, "cannot list the memory tier");
	return d;
}

/* Every entry of the job directory that is not of step `keep` of `keep_w` workers (keep < 0: all). */
static int remove_except(const ckpt__tier *t, int64_t keep, int keep_w)
{
	int rc = CKPT_OK;
	DIR *d = list_job(t, &rc);
	if (!d)
		return rc;
	struct dirent *e;
	while (rc == CKPT_OK && (e = readdir(d))) {
		int64_t s;
		int w, nw;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (ckpt__tier_parse_name(e->d_name, &s, &w, &nw) || ckpt__tier_parse_marker(e->d_name, &s, &nw)) {
			if (s == keep && nw == keep_w)
				continue;
		} else if (keep >= 0 && e->d_name[0] == '.') {
			/* a killed save's or restore's leftovers; a newer one may be another worker's save in progress */
			long long ts = -1;
			if (sscanf(e->d_name, ".tmp-step-%lld", &ts) != 1 && sscanf(e->d_name, ".tmp-commit-%lld", &ts) != 1 &&
				sscanf(e->d_name, ".restore-%lld", &ts) != 1)
				continue;
			if (ts > keep)
				continue;
		}
		char *p = ckpt__asprintf("%s/%s", t->job_dir, e->d_name);
		rc = p ? ckpt__tier_remove_tree(p) : CKPT_ENOMEM;
		ckpt__free(p);
	}
	closedir(d);
	return rc;
}

/* This node's records of step N, for any worker count. */
static int drop_records(const ckpt__tier *t, int64_t step)
{
	int rc = CKPT_OK;
	DIR *d = list_job(t, &rc);
	if (!d)
		return rc;
	struct dirent *e;
	while (rc == CKPT_OK && (e = readdir(d))) {
		int64_t s;
		int nw;
		if (!ckpt__tier_parse_marker(e->d_name, &s, &nw) || s != step)
			continue;
		char *p = ckpt__asprintf("%s/%s", t->job_dir, e->d_name);
		rc = !p ? CKPT_ENOMEM : unlink(p) < 0 && errno != ENOENT ? ckpt__fail_errno(errno, p, "cannot remove") : CKPT_OK;
		ckpt__free(p);
	}
	closedir(d);
	return rc;
}

/* Every segment of step N of W workers in this node (a failed vote). Errors are the caller's to ignore. */
static void remove_step(const ckpt__tier *t, int64_t step, int num_workers)
{
	for (int w = 0; w < num_workers; w++) {
		char *p = ckpt__tier_segment_path(t->job_dir, step, w, num_workers);
		if (p)
			ckpt__tier_remove_tree(p);
		ckpt__free(p);
	}
}

/* Bytes of the files in the job directory's segments (the committed step, while the next is written). */
static uint64_t held_bytes(const ckpt__tier *t)
{
	uint64_t sum = 0;
	DIR *d = opendir(t->job_dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int64_t s;
		int w, nw;
		if (!ckpt__tier_parse_name(e->d_name, &s, &w, &nw))
			continue;
		char *seg = ckpt__asprintf("%s/%s", t->job_dir, e->d_name);
		DIR *sd = seg ? opendir(seg) : NULL;
		struct dirent *f;
		while (sd && (f = readdir(sd))) {
			struct stat st;
			if (f->d_name[0] != '.' && fstatat(dirfd(sd), f->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				S_ISREG(st.st_mode))
				sum += (uint64_t)st.st_size;
		}
		if (sd)
			closedir(sd);
		ckpt__free(seg);
	}
	if (d)
		closedir(d);
	return sum;
}

/* The node's bytes for a step, against memory_limit or the free space (the leader checks, all agree). */
static int check_space(const ckpt__tier *t, ckpt_checkpoint *ck)
{
	if (!is_leader(t, t->worker))
		return CKPT_OK;
	ckpt_tracked_list *l = NULL;
	CKPT_TRY(ckpt_checkpoint_variables(&l, ck));
	uint64_t total = 0;
	for (size_t i = 0; i < ckpt_tracked_list_num_entries(l); i++)
		total += ckpt_variable_nbytes(ckpt_tracked_list_get(l, i)->variable);
	ckpt_tracked_list_free(l);
	int here = 0;
	for (int w = 0; w < t->num_workers; w++)
		here += t->node_of[w] == t->node_of[t->worker];
	/* this node's workers' pieces and the copies it keeps of as many others' */
	uint64_t need = (total / (uint64_t)t->num_workers + (1u << 20)) * (uint64_t)here * (uint64_t)(1 + t->copies);
	/* plus what a background copy to storage still holds open of removed segments */
	uint64_t avail = 0, in_use = held_bytes(t) + t->pending;
	if (t->limit) {
		avail = t->limit > in_use ? t->limit - in_use : 0;
		if (need > avail)
			return ckpt__fail(CKPT_ELIMIT, t->job_dir, NULL, -1,
				"the memory tier needs about %" PRIu64 " bytes on this node for a step (%d worker(s), %d "
				"cop%s) and has %" PRIu64 " free of its memory_limit %" PRIu64 " (%" PRIu64 " held by the "
				"committed step and by a copy to storage still reading a removed one)", need, here, t->copies,
				t->copies == 1 ? "y" : "ies", avail, t->limit, in_use);
		return CKPT_OK;
	}
	CKPT_TRY(ckpt__tier_free_bytes(&avail, t->job_dir));
	if (need > avail)
		return ckpt__fail(CKPT_ELIMIT, t->job_dir, NULL, -1,
			"the memory tier needs about %" PRIu64 " bytes on this node for a step (%d worker(s), %d cop%s) "
			"and its file system has %" PRIu64 " free: enlarge it or set " CKPT_TIER_DIR_ENV " elsewhere",
			need, here, t->copies, t->copies == 1 ? "y" : "ies", avail);
	return CKPT_OK;
}

/* Step 1 on this worker: its piece written as a temporary segment and committed under its name. */
static int write_piece(char **seg_out, const ckpt__tier *t, ckpt_checkpoint *ck, int64_t number, int rc)
{
	*seg_out = NULL;
	char *tmp = NULL, *prefix = NULL;
	if (rc == CKPT_OK)
		rc = ckpt__tier_segment_begin(&tmp, t->job_dir, number, t->worker, t->num_workers);
	if (rc == CKPT_OK && !(prefix = ckpt__asprintf("%s/" CKPT__TIER_PREFIX, tmp)))
		rc = CKPT_ENOMEM;
	/* agreed before the collective write, so that no worker enters it alone */
	ckpt_strategy *cs = ckpt__checkpoint_collective(ck);
	rc = agree(cs, rc);
	ckpt_strategy_piece piece = { 0 };
	if (rc == CKPT_OK)
		rc = ckpt__checkpoint_save_piece(ck, prefix, number, ckpt__tier_slots_vfs(t->slots), &piece);
	char *final = rc == CKPT_OK ? ckpt__tier_segment_path(t->job_dir, number, t->worker, t->num_workers) : NULL;
	char *from = rc == CKPT_OK ? ckpt__asprintf("%s.data-%05d-of-%05d.tempstate%" PRIu64, prefix, t->worker,
		t->num_workers, piece.token) : NULL;
	char *to = rc == CKPT_OK ? data_name(tmp, t->worker, t->num_workers) : NULL;
	char *ep = rc == CKPT_OK ? ckpt__asprintf("%s/" ENTRIES, tmp) : NULL;
	if (rc == CKPT_OK && (!final || !from || !to || !ep))
		rc = CKPT_ENOMEM;
	if (rc == CKPT_OK && rename(from, to) < 0)
		rc = ckpt__fail_errno(errno, from, "cannot name the memory tier piece");
	if (rc == CKPT_OK)
		rc = ckpt__tier_write_file(ep, piece.entries, piece.entries_len);
	uint64_t bytes = 0;
	if (rc == CKPT_OK)
		rc = ckpt__tier_segment_commit(&bytes, tmp, final, t->job, number, t->worker, t->num_workers, 1, t->slots);
	if (rc < 0 && tmp) {
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		ckpt__tier_remove_tree(tmp);
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	if (rc == CKPT_OK) {
		*seg_out = final;
		final = NULL;
	}
	ckpt__free(piece.entries);
	ckpt__free(final);
	ckpt__free(from);
	ckpt__free(to);
	ckpt__free(ep);
	ckpt__free(prefix);
	ckpt__free(tmp);
	return rc;
}

/* Step 2: this worker's piece to the leaders of the F next nodes; the copies it receives stored. */
static int copy_pieces(const ckpt__tier *t, ckpt_strategy *cs, const char *seg, int64_t number, int rc)
{
	int W = t->num_workers;
	const void **send = ckpt__calloc((size_t)W * 2, sizeof(*send));
	uint64_t *slen = ckpt__calloc((size_t)W * 4, sizeof(*slen));
	void **recv = ckpt__calloc((size_t)W * 2, sizeof(*recv));
	if (!send || !slen || !recv) {
		ckpt__free(send);
		ckpt__free(slen);
		ckpt__free(recv);
		return agree(cs, CKPT_ENOMEM); /* the others fail at the agreement instead of waiting */
	}
	/* [0, W): the frames; [W, 2W): the data shards */
	uint64_t *rlen = slen + 2 * W;
	void *frame = NULL, *owned = NULL;
	const void *data = NULL;
	uint64_t flen = 0;
	if (rc == CKPT_OK && t->copies)
		rc = frame_from_segment(&frame, &flen, &data, &owned, t, seg, number, t->worker, W);
	for (int k = 1; rc == CKPT_OK && k <= t->copies; k++) {
		int to = t->leader[(t->node_of[t->worker] + k) % t->nnodes];
		send[to] = frame;
		slen[to] = flen;
		send[W + to] = data;
		slen[W + to] = ((const frame_hdr *)frame)->dlen;
	}
	int xrc = ops_of(cs)->exchange(cs, send, slen, recv, rlen);
	if (rc == CKPT_OK)
		rc = xrc;
	/* every worker enters the second exchange if it entered the first: its own call agrees on failures */
	if (xrc == CKPT_OK) {
		xrc = ops_of(cs)->exchange(cs, send + W, slen + W, recv + W, rlen + W);
		if (rc == CKPT_OK)
			rc = xrc;
	}
	for (int w = 0; rc == CKPT_OK && w < W; w++) {
		if (!rlen[w] && !rlen[W + w])
			continue;
		frame_hdr h;
		const unsigned char *e = NULL;
		rc = check_frame(&h, &e, recv[w], rlen[w], rlen[W + w], w);
		if (rc == CKPT_OK && (h.step != number || h.num_workers != W || h.piece != w))
			rc = ckpt__fail(CKPT_EFORMAT, t->job_dir, NULL, -1, "memory tier: worker %d sent piece %d of "
				"step %" PRId64 " of %d workers, not its own of step %" PRId64, w, h.piece, h.step,
				h.num_workers, number);
		if (rc == CKPT_OK)
			rc = store_copy(t, &h, e, recv[W + w] ? recv[W + w] : (const void *)"", w);
	}
	for (int w = 0; w < 2 * W; w++)
		ckpt__free(recv[w]);
	ckpt__free(frame);
	ckpt__free(owned);
	ckpt__free(send);
	ckpt__free(slen);
	ckpt__free(recv);
	return rc;
}

/* The files this worker wrote in segments other than step `keep` of `keep_w`: to its spares (tier_slots.c). */
static int retire_superseded(const ckpt__tier *t, int64_t keep, int keep_w)
{
	int rc = CKPT_OK;
	DIR *d = list_job(t, &rc);
	if (!d)
		return rc;
	struct dirent *e;
	while (rc == CKPT_OK && (e = readdir(d))) {
		int64_t s;
		int w, nw;
		/* a step a background copy reads is unlinked by the leader, never written over */
		if (!ckpt__tier_parse_name(e->d_name, &s, &w, &nw) || (s == keep && nw == keep_w) || s == t->pinned)
			continue;
		char *p = ckpt__asprintf("%s/%s", t->job_dir, e->d_name);
		rc = p ? ckpt__tier_slots_retire(t->slots, p, 1) : CKPT_ENOMEM;
		ckpt__free(p);
	}
	closedir(d);
	return rc;
}

/*
 * Phases 1 and 2 of step `number` on every worker, once its pieces are written and copied (`rc`, this
 * worker's outcome so far): the vote, then the records, then what the step supersedes goes.
 */
static int commit_step(ckpt__tier *t, ckpt_strategy *cs, const char *seg, int64_t number, int rc)
{
	/* phase 1, the vote: every piece and every copy stored, else step N is removed and recorded nowhere */
	rc = agree(cs, rc);
	int leader = is_leader(t, t->worker);
	if (rc < 0) {
		ckpt__error_slot slot = { 0 };
		ckpt__error_capture(&slot);
		if (seg)
			ckpt__tier_remove_tree(seg);
		if (leader)
			remove_step(t, number, t->num_workers);
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
		return rc;
	}
	/* phase 2: each node records the step; it is committed once every node has */
	if (leader)
		rc = ckpt__tier_marker_write(t->job_dir, t->job, number, t->num_workers);
	rc = agree(cs, rc);
	if (rc < 0) /* recorded on some nodes, maybe: whole there (every copy was stored), and the previous step stays */
		return rc;
	/* every worker keeps what it wrote of older steps as spares, then the leader removes the rest */
	rc = retire_superseded(t, number, t->num_workers);
	rc = agree(cs, rc);
	if (rc == CKPT_OK && leader)
		rc = remove_except(t, number, t->num_workers);
	return rc;
}

/* ---- the copies on a thread of the tier's (memory_async) ---- */

typedef struct ckpt__tier_copy {
	pthread_t thread;
	ckpt__tier *t;   /* read-only for the thread but for the leader's spares, which the trainer leaves alone */
	char *seg;
	int64_t step;
	int rc;
	int ran_here;         /* no thread could start: the copies ran on the trainer's */
	ckpt__error_slot err; /* the thread's error, raised on the trainer's thread by the settle */
} ckpt__tier_copy;

static void *copy_thread(void *arg)
{
	ckpt__tier_copy *c = arg;
	c->rc = copy_pieces(c->t, c->t->side, c->seg, c->step, CKPT_OK);
	if (c->rc < 0)
		ckpt__error_capture(&c->err);
	return NULL;
}

/* The side channel the copies' thread exchanges through, made (collectively) by the first async save. */
static int open_side(ckpt__tier *t, ckpt_strategy *cs)
{
	const ckpt__strategy_ops *ops = ops_of(cs);
	if (ops->version < 3 || !ops->side_channel) /* the same table on every worker: all refuse alike */
		return ckpt__fail(CKPT_EUNSUPPORTED, t->base, NULL, -1, "memory_async: strategy '%s' has no side "
			"channel for the copies' thread (ckpt/sys/strategy.h, version 3)", ops->name);
	const char *why = NULL;
	CKPT_TRY(ops->side_channel(cs, &t->side, &why));
	if (!t->side)
		return ckpt__fail(CKPT_EUNSUPPORTED, t->base, NULL, -1, "memory_async: the copies to other nodes "
			"cannot leave the trainer's thread: %s", why ? why : "the strategy has no side channel");
	return CKPT_OK;
}

/*
 * The copies of step `number` (its piece written as `seg`, taken with `c`) start on the tier's thread,
 * or, when no thread can start, run here: every worker enters the exchange either way.
 */
static void start_copy(ckpt__tier *t, ckpt__tier_copy *c, char *seg, int64_t number)
{
	c->t = t;
	c->seg = seg;
	c->step = number;
	if (pthread_create(&c->thread, NULL, copy_thread, c) != 0) {
		c->ran_here = 1;
		copy_thread(c);
	}
	t->copy = c;
}

/* The thread joined: its outcome, its error raised here. */
static int join_copy(ckpt__tier *t, char **seg, int64_t *number)
{
	ckpt__tier_copy *c = t->copy;
	t->copy = NULL;
	if (!c->ran_here)
		pthread_join(c->thread, NULL);
	int rc = c->rc;
	if (rc < 0)
		ckpt__error_raise(&c->err);
	ckpt__error_slot_clear(&c->err);
	*seg = c->seg;
	*number = c->step;
	ckpt__free(c);
	return rc;
}

void ckpt__tier_mw_stop(ckpt__tier *t)
{
	if (t->copy) {
		ckpt__error_slot saved = { 0 };
		ckpt__error_capture(&saved);
		char *seg = NULL;
		int64_t number = -1;
		join_copy(t, &seg, &number); /* uncommitted: a restart finds no record of it */
		ckpt__free(seg);
		ckpt__error_raise(&saved);
		ckpt__error_slot_clear(&saved);
	}
	ckpt_strategy_free(t->side);
	t->side = NULL;
}

int ckpt__tier_mw_settle(ckpt__tier *t)
{
	if (!t->copy)
		return CKPT_OK;
	char *seg = NULL;
	int64_t number = -1;
	int rc = join_copy(t, &seg, &number);
	/* every worker started one (after an agreement), so every worker is here */
	rc = commit_step(t, t->cs, seg, number, rc);
	ckpt__free(seg);
	return rc;
}

int ckpt__tier_mw_save(const char **path_out, ckpt__tier *t, ckpt_strategy *cs, ckpt_checkpoint *ck, int64_t number)
{
	*path_out = NULL;
	const ckpt__strategy_ops *ops = ops_of(cs);
	if (ops->version < 2 || !ops->exchange) /* the same table on every worker: all refuse alike */
		return ckpt__fail(CKPT_EUNSUPPORTED, NULL, NULL, -1, "the memory tier of strategy '%s' needs its exchange "
			"method (ckpt/sys/strategy.h, version 2)", ops->name);
	t->cs = cs;
	/* the previous step's copies: committed (or reported) before anything of this one is written */
	CKPT_TRY(ckpt__tier_mw_settle(t));
	CKPT_TRY(learn_nodes(t, cs));
	int rc = CKPT_OK;
	if (t->copies > t->nnodes - 1)
		rc = ckpt__fail(CKPT_EINVAL, t->base, NULL, -1, "memory_copies %d needs %d nodes; the job has %d (name "
			"emulated ones with " ENV_NODES ")", t->copies, t->copies + 1, t->nnodes);
	/* a save that also writes the directory commits first: the directory's copy is of a committed step */
	int defer = t->async && t->copies && !(ckpt__tier_route(t, number) & CKPT__TIER_TO_STORAGE);
	if (rc == CKPT_OK && t->async && t->copies && !t->side)
		rc = open_side(t, cs); /* collective; every worker has the same options and nodes */
	if (rc == CKPT_OK)
		rc = prepare_node_dirs(t);
	if (rc == CKPT_OK && !t->slots)
		rc = ckpt__tier_slots_new(&t->slots, t->job_dir, t->worker, t->num_workers, 1);
	if (rc == CKPT_OK)
		rc = check_space(t, ck);
	/*
	 * Step N saved again (a restart that restored an older step, an explicit number): its old record goes
	 * first, so that a kill while its pieces are replaced never leaves old and new pieces under one record.
	 */
	if (rc == CKPT_OK && is_leader(t, t->worker))
		rc = drop_records(t, number);
	char *seg = NULL;
	rc = write_piece(&seg, t, ck, number, rc); /* agreed before its collective write */
	char *path = rc == CKPT_OK ? ckpt__asprintf("%s/" CKPT__TIER_PREFIX, seg) : NULL;
	ckpt__tier_copy *c = NULL;
	if (rc == CKPT_OK && (!path || (defer && !(c = ckpt__calloc(1, sizeof(*c))))))
		rc = CKPT_ENOMEM;
	/* the local commits' outcome; then the copies (every worker takes part in the exchange) */
	rc = agree(cs, rc);
	if (rc == CKPT_OK && defer) {
		start_copy(t, c, seg, number);
		seg = NULL;
		c = NULL;
	} else {
		if (rc == CKPT_OK)
			rc = copy_pieces(t, cs, seg, number, rc);
		rc = commit_step(t, cs, seg, number, rc);
	}
	ckpt__free(c);
	ckpt__free(seg);
	if (rc < 0) {
		ckpt__free(path);
		return rc;
	}
	ckpt__free(t->last_path);
	t->last_path = path;
	*path_out = path;
	return rc;
}

/* ---- restore ---- */

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
	DIR *d = opendir(t->job_dir);
	if (!d)
		return errno == ENOENT ? CKPT_OK : ckpt__fail_errno(errno, t->job_dir, "cannot list the memory tier");
	size_t cap = 0;
	int rc = CKPT_OK;
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
	char *from = seg ? data_name(seg, p, nw) : NULL, *ep = seg ? ckpt__asprintf("%s/" ENTRIES, seg) : NULL;
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
	int W = t->num_workers, me = t->worker, leader = is_leader(t, me);
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
				rc = seg ? frame_from_segment(&f, &fl, &data, &owned, t, seg, step, p, nw) : CKPT_ENOMEM;
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
	int xrc = send && slen && recv && rlen ? ops_of(cs)->exchange(cs, send, slen, recv, rlen) : agree(cs, rc);
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
	return agree(cs, rc);
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
	const ckpt__strategy_ops *ops = ops_of(cs);
	if (ops->version < 2 || !ops->exchange)
		return CKPT_OK; /* it never saved to memory either */
	CKPT_TRY(learn_nodes(t, cs));
	held *mine = NULL;
	size_t nmine = 0;
	int rc = is_leader(t, t->worker) ? scan_node(&mine, &nmine, t, warn, warn_ctx) : CKPT_OK;
	void *allv = NULL;
	size_t *lens = NULL;
	int np = 0;
	int grc = ops->allgather(cs, mine, rc == CKPT_OK ? nmine * sizeof(held) : 0, &allv, &lens, &np);
	ckpt__free(mine);
	if (rc == CKPT_OK)
		rc = grc;
	if (grc == CKPT_OK)
		rc = agree(cs, rc);
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
	if (rc == CKPT_OK && is_leader(t, t->worker)) {
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
	rc = agree(cs, rc);
	/* the ordinary multi-worker restore: all or nothing, onto this job's workers and replicas */
	if (rc == CKPT_OK)
		rc = ckpt__checkpoint_restore_via(status, ck, prefix, ckpt_vfs_default(), 1); /* staging removed below */
	ckpt__free(prefix);
	/* nobody reads the staging directory any more */
	int arc = agree(cs, CKPT_OK);
	if (is_leader(t, t->worker) && stage) {
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

void ckpt__tier_mw_close(ckpt__tier *t, int64_t newest_persistent, ckpt_warning_fn warn, void *warn_ctx)
{
	if (!is_leader(t, t->worker))
		return;
	ckpt__error_slot saved = { 0 };
	ckpt__error_capture(&saved);
	/* the newest step this node holds a record or a piece of */
	int64_t newest = -1;
	DIR *d = opendir(t->job_dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int64_t s;
		int w, nw;
		if ((ckpt__tier_parse_name(e->d_name, &s, &w, &nw) || ckpt__tier_parse_marker(e->d_name, &s, &nw)) &&
			s > newest)
			newest = s;
	}
	if (d)
		closedir(d);
	if (newest > newest_persistent) {
		ckpt__warn(warn, warn_ctx, "memory tier: keeping step %" PRId64 " of job %s in %s, newer than the newest "
			"checkpoint in storage, for a restart to restore (`ckpt tier drop %s` removes it)", newest, t->job,
			t->job_dir, t->job);
	} else {
		/* a clean finish: storage holds everything memory did */
		ckpt__tier_remove_tree(t->job_dir);
		if (strcmp(t->node_dir, t->base) != 0)
			rmdir(t->node_dir);
		if (!t->named_base)
			rmdir(t->base);
	}
	ckpt__error_raise(&saved);
	ckpt__error_slot_clear(&saved);
}

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
 * With memory_async, step 2 runs on a thread of the tier over the
 * strategy's side channel (its own communicator) and the save returns after
 * step 1; steps 3 and 4 run at the next manager call (ckpt__tier_mw_settle,
 * first thing in the next save), so a failure in between leaves step N
 * unrecorded and N - 1 restorable.
 *
 * The restore is tier_mw_restore.c's.
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
#include "tier_mw_internal.h"

#define ENV_NODES "CKPT_TIER_NODES"

const ckpt__strategy_ops *ckpt__tier_mw_ops(ckpt_strategy *cs)
{
	return ckpt__strategy_ops_of(cs);
}

int ckpt__tier_mw_agree(ckpt_strategy *cs, int rc)
{
	return ckpt__tier_mw_ops(cs)->agree(cs, rc);
}

static int rank_of(ckpt_strategy *cs)
{
	return ckpt__strategy_replica_offset(cs) / ckpt__strategy_local_replicas(cs);
}

static int num_workers_of(ckpt_strategy *cs)
{
	return ckpt_strategy_num_replicas(cs) / ckpt__strategy_local_replicas(cs);
}

int ckpt__tier_mw_is_leader(const ckpt__tier *t, int rank)
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
int ckpt__tier_mw_learn_nodes(ckpt__tier *t, ckpt_strategy *cs)
{
	if (t->mw_known)
		return CKPT_OK;
	int rank = rank_of(cs), W = num_workers_of(cs), emulated = 0;
	char name[256] = "";
	int rc = node_name(name, sizeof(name), rank, &emulated);
	void *all = NULL;
	size_t *lens = NULL;
	int np = 0;
	int grc = ckpt__tier_mw_ops(cs)->allgather(cs, name, rc == CKPT_OK ? strlen(name) + 1 : 0, &all, &lens, &np);
	if (rc == CKPT_OK)
		rc = grc;
	rc = grc == CKPT_OK ? ckpt__tier_mw_agree(cs, rc) : grc;
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
	rc = ckpt__tier_mw_agree(cs, rc);
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

char *ckpt__tier_mw_data_name(const char *dir, int piece, int num_workers)
{
	return ckpt__asprintf("%s/" CKPT__TIER_PREFIX ".data-%05d-of-%05d", dir, piece, num_workers);
}

/*
 * Piece `piece` of step N from segment `seg`: its frame (header and entries, *out, caller frees) and its
 * data (*data: the mapping this worker wrote, or *owned, read back, caller frees).
 */
int ckpt__tier_mw_frame_from_segment(void **out, uint64_t *len, const void **data, void **owned, const ckpt__tier *t,
	const char *seg, int64_t step, int piece, int num_workers)
{
	*out = *owned = NULL;
	*data = NULL;
	*len = 0;
	char *dp = ckpt__tier_mw_data_name(seg, piece, num_workers), *ep = ckpt__asprintf("%s/" ENTRIES, seg);
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

/* A received copy of a piece, stored as this node's segment of it: its data's crc32c taken as it is written. */
static int store_copy(const ckpt__tier *t, const frame_hdr *h, const unsigned char *e, const unsigned char *d, int from)
{
	char *tmp = NULL;
	CKPT_TRY(ckpt__tier_segment_begin(&tmp, t->job_dir, h->step, h->piece, h->num_workers));
	char *dp = ckpt__tier_mw_data_name(tmp, h->piece, h->num_workers), *ep = ckpt__asprintf("%s/" ENTRIES, tmp);
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

/* Every entry of the job directory that is not of step `keep` of `keep_w` workers (keep < 0: all). */
static int remove_except(const ckpt__tier *t, int64_t keep, int keep_w)
{
	int rc = CKPT_OK;
	DIR *d = ckpt__tier_open_job(t->job_dir, &rc);
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
	DIR *d = ckpt__tier_open_job(t->job_dir, &rc);
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
static int check_space(const ckpt__tier *t, ckpt_checkpoint *ck, uint64_t node_spares)
{
	if (!ckpt__tier_mw_is_leader(t, t->worker))
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
	avail += node_spares; /* the step is written over them */
	if (need > avail)
		return ckpt__fail(CKPT_ELIMIT, t->job_dir, NULL, -1,
			"the memory tier needs about %" PRIu64 " bytes on this node for a step (%d worker(s), %d cop%s) "
			"and its file system has %" PRIu64 " free, the spares of the last step included: enlarge it or "
			"set " CKPT_TIER_DIR_ENV " elsewhere", need, here, t->copies, t->copies == 1 ? "y" : "ies", avail);
	return CKPT_OK;
}

/* Collective: the bytes of the spares of this node's workers (`mine` this worker's), which a step reuses. */
static int node_spares(uint64_t *sum, const ckpt__tier *t, ckpt_strategy *cs, uint64_t mine)
{
	*sum = 0;
	void *all = NULL;
	size_t *lens = NULL;
	int np = 0;
	CKPT_TRY(ckpt__tier_mw_ops(cs)->allgather(cs, &mine, sizeof(mine), &all, &lens, &np));
	for (int w = 0, off = 0; w < np && w < t->num_workers; off += (int)lens[w], w++)
		if (lens[w] == sizeof(mine) && t->node_of[w] == t->node_of[t->worker]) {
			uint64_t b;
			memcpy(&b, (const char *)all + off, sizeof(b));
			*sum += b;
		}
	ckpt__free(all);
	ckpt__free(lens);
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
	rc = ckpt__tier_mw_agree(cs, rc);
	ckpt_strategy_piece piece = { 0 };
	if (rc == CKPT_OK)
		rc = ckpt__checkpoint_save_piece(ck, prefix, number, ckpt__tier_slots_vfs(t->slots), &piece);
	char *final = rc == CKPT_OK ? ckpt__tier_segment_path(t->job_dir, number, t->worker, t->num_workers) : NULL;
	char *from = rc == CKPT_OK ? ckpt__asprintf("%s.data-%05d-of-%05d.tempstate%" PRIu64, prefix, t->worker,
		t->num_workers, piece.token) : NULL;
	char *to = rc == CKPT_OK ? ckpt__tier_mw_data_name(tmp, t->worker, t->num_workers) : NULL;
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
		return ckpt__tier_mw_agree(cs, CKPT_ENOMEM); /* the others fail at the agreement instead of waiting */
	}
	/* [0, W): the frames; [W, 2W): the data shards */
	uint64_t *rlen = slen + 2 * W;
	void *frame = NULL, *owned = NULL;
	const void *data = NULL;
	uint64_t flen = 0;
	if (rc == CKPT_OK && t->copies)
		rc = ckpt__tier_mw_frame_from_segment(&frame, &flen, &data, &owned, t, seg, number, t->worker, W);
	for (int k = 1; rc == CKPT_OK && k <= t->copies; k++) {
		int to = t->leader[(t->node_of[t->worker] + k) % t->nnodes];
		send[to] = frame;
		slen[to] = flen;
		send[W + to] = data;
		slen[W + to] = ((const frame_hdr *)frame)->dlen;
	}
	int xrc = ckpt__tier_mw_ops(cs)->exchange(cs, send, slen, recv, rlen);
	if (rc == CKPT_OK)
		rc = xrc;
	/* every worker enters the second exchange if it entered the first: its own call agrees on failures */
	if (xrc == CKPT_OK) {
		xrc = ckpt__tier_mw_ops(cs)->exchange(cs, send + W, slen + W, recv + W, rlen + W);
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
	DIR *d = ckpt__tier_open_job(t->job_dir, &rc);
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
	rc = ckpt__tier_mw_agree(cs, rc);
	int leader = ckpt__tier_mw_is_leader(t, t->worker);
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
	rc = ckpt__tier_mw_agree(cs, rc);
	if (rc < 0) /* recorded on some nodes, maybe: whole there (every copy was stored), and the previous step stays */
		return rc;
	/* every worker keeps what it wrote of older steps as spares, then the leader removes the rest */
	rc = retire_superseded(t, number, t->num_workers);
	rc = ckpt__tier_mw_agree(cs, rc);
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
	const ckpt__strategy_ops *ops = ckpt__tier_mw_ops(cs);
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

int ckpt__tier_mw_save(const char **path_out, ckpt__tier *t, ckpt_strategy *cs, ckpt_checkpoint *ck, int64_t number,
	int commit_now)
{
	*path_out = NULL;
	const ckpt__strategy_ops *ops = ckpt__tier_mw_ops(cs);
	if (ops->version < 2 || !ops->exchange) /* the same table on every worker: all refuse alike */
		return ckpt__fail(CKPT_EUNSUPPORTED, NULL, NULL, -1, "the memory tier of strategy '%s' needs its exchange "
			"method (ckpt/sys/strategy.h, version 2)", ops->name);
	t->cs = cs;
	/* the previous step's copies: committed (or reported) before anything of this one is written */
	CKPT_TRY(ckpt__tier_mw_settle(t));
	CKPT_TRY(ckpt__tier_mw_learn_nodes(t, cs));
	int rc = CKPT_OK;
	if (t->copies > t->nnodes - 1)
		rc = ckpt__fail(CKPT_EINVAL, t->base, NULL, -1, "memory_copies %d needs %d nodes; the job has %d (name "
			"emulated ones with " ENV_NODES ")", t->copies, t->copies + 1, t->nnodes);
	int defer = t->async && t->copies && !commit_now;
	if (rc == CKPT_OK && t->async && t->copies && !t->side)
		rc = open_side(t, cs); /* collective; every worker has the same options and nodes */
	if (rc == CKPT_OK)
		rc = prepare_node_dirs(t);
	if (rc == CKPT_OK && !t->slots)
		rc = ckpt__tier_slots_new(&t->slots, t->job_dir, t->worker, t->num_workers, 1);
	uint64_t spares = 0;
	int grc = node_spares(&spares, t, cs, t->slots ? ckpt__tier_slots_spare_bytes(t->slots) : 0); /* collective */
	if (rc == CKPT_OK)
		rc = grc;
	if (rc == CKPT_OK)
		rc = check_space(t, ck, spares);
	/*
	 * Step N saved again (a restart that restored an older step, an explicit number): its old record goes
	 * first, so that a kill while its pieces are replaced never leaves old and new pieces under one record.
	 */
	if (rc == CKPT_OK && ckpt__tier_mw_is_leader(t, t->worker))
		rc = drop_records(t, number);
	char *seg = NULL;
	rc = write_piece(&seg, t, ck, number, rc); /* agreed before its collective write */
	char *path = rc == CKPT_OK ? ckpt__asprintf("%s/" CKPT__TIER_PREFIX, seg) : NULL;
	ckpt__tier_copy *c = NULL;
	if (rc == CKPT_OK && (!path || (defer && !(c = ckpt__calloc(1, sizeof(*c))))))
		rc = CKPT_ENOMEM;
	/* the local commits' outcome; then the copies (every worker takes part in the exchange) */
	rc = ckpt__tier_mw_agree(cs, rc);
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

void ckpt__tier_mw_close(ckpt__tier *t, int64_t newest_persistent, ckpt_warning_fn warn, void *warn_ctx)
{
	if (!ckpt__tier_mw_is_leader(t, t->worker))
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

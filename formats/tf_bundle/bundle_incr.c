/*
 * Incremental saves on POSIX: the new checkpoint is a complete TensorBundle,
 * but the bytes it shares with the last committed save do not pass through
 * this process.
 *
 *   shard 0          what changed, written; a changed value of TFB_INCR_MIN
 *                    bytes or more block by block: each 4 KiB block whose
 *                    crc32c equals the last save's is copied in the kernel
 *                    (copy_file_range) from that save's data file
 *   shards 1..       values unchanged since the last save (the library saw
 *                    no write, ckpt__variable_unchanged_since): a shard of
 *                    the last save holding only such values is hard-linked
 *                    (a committed shard is never written again); the rest
 *                    are copied into one new shard, linked at the next save
 *
 * A source file is used only while it is the file the last save committed:
 * same device, inode, size and modification time as recorded after its
 * commit (checked on the open descriptor, and on the new link). Anything else
 * (deleted, replaced, written since) makes the value be written from memory.
 * The index is exact: a reused value keeps the crc32c the last save's index
 * recorded, a block-compared one gets the crc of its bytes in memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "bundle_incr.h"

void tfb_ibase_free(void *arg)
{
	ibase *b = arg;
	if (!b)
		return;
	for (size_t i = 0; i < b->ne; i++) {
		ckpt__free(b->e[i].key);
		ckpt__free(b->e[i].blocks);
	}
	for (int i = 0; i < b->nf; i++)
		ckpt__free(b->f[i].path);
	ckpt__free(b->e);
	ckpt__free(b->f);
	ckpt__free(b->prefix);
	ckpt__free(b);
}

tfb_incr *tfb_incr_new(const ibase *b, int s3)
{
	tfb_incr *x = ckpt__calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->base = b;
	x->s3 = s3;
	if (b && b->nf) {
		x->fd = ckpt__malloc((size_t)b->nf * sizeof(int));
		x->bad = ckpt__calloc((size_t)b->nf, 1);
		if (!x->fd || !x->bad) {
			tfb_incr_free(x);
			return NULL;
		}
		for (int i = 0; i < b->nf; i++)
			x->fd[i] = -2;
	}
	return x;
}

int tfb_writer_incremental(ckpt_writer *w, ckpt__incr *inc)
{
	tfb_writer *s = w->state;
	/* hard links and copy_file_range: the POSIX file system; server-side copies: S3; one shard to begin with */
	int s3 = ckpt__vfs_is_s3(w->vfs);
	if (s->nshards != 1 || (!s3 && (w->vfs != ckpt_vfs_default() || ckpt_io_fd(s->sh[0].io) < 0)))
		return 0;
	const ibase *b = inc->base;
	/* re-saving the last prefix would rename a link onto itself */
	if (b && strcmp(b->prefix, w->path) == 0)
		return 0;
	tfb_incr *x = tfb_incr_new(b, s3);
	if (!x)
		return CKPT_ENOMEM;
	x->inc = inc;
	int rc = s3 ? tfb_incr_s3_open(w, s, x) : 1;
	if (rc <= 0) {
		tfb_incr_free(x);
		return rc;
	}
	s->incr = x;
	return 1;
}

/* Close the last save's files (before its record goes). */
static void close_sources(tfb_incr *x)
{
	for (int i = 0; x->base && x->fd && i < x->base->nf; i++)
		if (x->fd[i] >= 0)
			close(x->fd[i]);
	ckpt__free(x->fd);
	x->fd = NULL;
	x->base = NULL;
}

void tfb_incr_free(tfb_incr *x)
{
	if (!x)
		return;
	close_sources(x);
	ckpt__free(x->p);
	ckpt__free(x->bad);
	ckpt__free(x->slot);
	ckpt__free(x);
}

static int cmp_key(const char *a, size_t na, const char *b, size_t nb)
{
	size_t n = na < nb ? na : nb;
	int c = memcmp(a, b, n);
	return c ? c : (na > nb) - (na < nb);
}

const tfb_ientry *tfb_incr_find(const tfb_incr *x, const char *key, size_t klen, ckpt_dtype dt,
	const ckpt_shape *shape, uint64_t nbytes)
{
	const ibase *b = x ? x->base : NULL;
	if (!b || !key)
		return NULL;
	size_t lo = 0, hi = b->ne;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = cmp_key(b->e[mid].key, b->e[mid].klen, key, klen);
		if (c == 0) {
			const tfb_ientry *e = &b->e[mid];
			if (e->dtype != (int32_t)dt || e->rank != shape->rank || e->size != nbytes ||
				memcmp(e->dims, shape->dims, (size_t)shape->rank * sizeof(int64_t)) != 0)
				return NULL;
			return e;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const ibase *tfb_incr_base(const tfb_incr *x)
{
	return x->base;
}

uint64_t tfb_incr_reused(const tfb_incr *x)
{
	return x->reused;
}

uint32_t tfb_ientry_crc(const tfb_ientry *b)
{
	return b->masked_crc;
}

int tfb_incr_defer(tfb_incr *x, size_t ei, const tfb_ientry *b, const void *data)
{
	if (x->np == x->cap) {
		size_t nc = x->cap ? x->cap * 2 : 64;
		pending *np = ckpt__realloc(x->p, nc * sizeof(*np));
		if (!np)
			return CKPT_ENOMEM;
		x->p = np;
		x->cap = nc;
	}
	x->p[x->np++] = (pending){ ei, b, data };
	return CKPT_OK;
}

static int same_file(const struct stat *st, const ifile *f)
{
	return f->ino && (uint64_t)st->st_dev == f->dev && (uint64_t)st->st_ino == f->ino &&
		(uint64_t)st->st_size == f->size &&
		(int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec == f->mtime_ns;
}

/* The last save's data file `shard`, open, when it is still the file that save committed; else -1. */
static int source_fd(tfb_incr *x, int shard)
{
	if (!x->base || shard < 0 || shard >= x->base->nf)
		return -1;
	if (x->fd[shard] != -2)
		return x->fd[shard];
	int fd = open(x->base->f[shard].path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || !same_file(&st, &x->base->f[shard]))) {
		close(fd);
		fd = -1;
	}
	x->fd[shard] = fd < 0 ? -1 : fd;
	return x->fd[shard];
}

/*
 * n bytes at src_off of the last save's file `shard` appended to s in the
 * kernel. CKPT__DECLINED (s unchanged: what was copied is overwritten by
 * the next write) when that file is not usable or cannot be copied from.
 */
int tfb_incr_copy(tfb_incr *x, wshard *s, int shard, uint64_t src_off, uint64_t n)
{
	int sfd = source_fd(x, shard);
	int dfd = ckpt_io_fd(s->io);
	if (sfd < 0 || dfd < 0 || src_off + n > x->base->f[shard].size)
		return CKPT__DECLINED;
	CKPT_TRY(tfb_shard_flush(s));
	off_t so = (off_t)src_off, d = (off_t)s->flushed;
	for (uint64_t done = 0; done < n;) {
		size_t want = n - done > (1u << 30) ? (1u << 30) : (size_t)(n - done);
		ssize_t k = copy_file_range(sfd, &so, dfd, &d, want, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return CKPT__DECLINED; /* EXDEV, ENOSYS, EIO, a short source: the caller writes the bytes */
		done += (uint64_t)k;
	}
	s->flushed += n;
	s->pos += n;
	x->reused += n;
	return CKPT_OK;
}

/* crc of the blocks of one window of a value */
typedef struct block_pass {
	const unsigned char *p;
	uint64_t n;
	uint32_t *crc;
	size_t nblocks;
	_Atomic unsigned char *ready; /* per window: its crcs are in (a helper may compute it) */
} block_pass;

#define BLOCKS_PER_JOB 256u /* 1 MiB windows: crc'd, then written while in cache */

static void crc_blocks(void *arg, size_t k)
{
	block_pass *b = arg;
	size_t first = k * BLOCKS_PER_JOB, last = first + BLOCKS_PER_JOB < b->nblocks ? first + BLOCKS_PER_JOB : b->nblocks;
	for (size_t i = first; i < last; i++) {
		uint64_t a = (uint64_t)i * TFB_INCR_BLOCK;
		size_t len = b->n - a < TFB_INCR_BLOCK ? (size_t)(b->n - a) : TFB_INCR_BLOCK;
		b->crc[i] = ckpt_crc32c_extend(0, b->p + a, len);
	}
	atomic_store_explicit(&b->ready[k], 1, memory_order_release);
}

/* Window k's crcs: computed by a helper (posted), or by this thread when it is its turn. */
static void await_window(block_pass *b, tfb_par_job *job, int posted, size_t k)
{
	if (!posted) {
		crc_blocks(b, k);
		return;
	}
	while (!atomic_load_explicit(&b->ready[k], memory_order_acquire))
		if (!tfb_par_help(job))
			sched_yield(); /* a helper is computing it */
}

static uint64_t block_len(uint64_t n, size_t i)
{
	uint64_t a = (uint64_t)i * TFB_INCR_BLOCK;
	return n - a < TFB_INCR_BLOCK ? n - a : TFB_INCR_BLOCK;
}

int tfb_incr_put(tfb_incr *x, wshard *s, const char *key, size_t klen, const ckpt_tensor *t, uint32_t *crc,
	uint32_t **blocks)
{
	const unsigned char *p = t->data;
	uint64_t n = t->nbytes;
	size_t nb = (size_t)((n + TFB_INCR_BLOCK - 1) / TFB_INCR_BLOCK);
	uint32_t *bc = ckpt__malloc(nb * sizeof(uint32_t));
	if (!bc)
		return CKPT_ENOMEM;
	const tfb_ientry *b = tfb_incr_find(x, key, klen, t->dtype, &t->shape, n);
	const uint32_t *old = b && b->blocks ? b->blocks : NULL;
	int rc = CKPT_OK;
	uint32_t c = 0;
	if (x->s3) {
		rc = tfb_incr_s3_put(x, s, b, t, bc, crc);
		if (rc < 0)
			ckpt__free(bc);
		else
			*blocks = bc;
		return rc;
	}
	/*
	 * A window of blocks at a time: crc them, then write or copy them while they are in cache. The crcs of
	 * the windows ahead run on the helper threads meanwhile, as a full save's crc runs beside its write
	 * (tfb_shard_put_fixed): a value that changed everywhere costs what a full save does.
	 */
	size_t nwin = (nb + BLOCKS_PER_JOB - 1) / BLOCKS_PER_JOB;
	block_pass bp = { p, n, bc, nb, ckpt__calloc(nwin ? nwin : 1, 1) };
	if (!bp.ready) {
		ckpt__free(bc);
		return CKPT_ENOMEM;
	}
	tfb_par_job job;
	int posted = nwin > 1 && tfb_par_start(&job, nwin, crc_blocks, &bp);
	uint32_t shift = ckpt__crc32c_shift(TFB_INCR_BLOCK);
	for (size_t w0 = 0; w0 < nb && rc == CKPT_OK; w0 += BLOCKS_PER_JOB) {
		size_t w1 = w0 + BLOCKS_PER_JOB < nb ? w0 + BLOCKS_PER_JOB : nb;
		await_window(&bp, &job, posted, w0 / BLOCKS_PER_JOB);
		for (size_t i = w0; i < w1 && rc == CKPT_OK;) {
			/* a run of blocks that all changed, or all did not */
			int same = old && old[i] == bc[i];
			size_t j = i + 1;
			while (j < w1 && (old && old[j] == bc[j]) == same)
				j++;
			uint64_t a = (uint64_t)i * TFB_INCR_BLOCK, len = (uint64_t)(j - i - 1) * TFB_INCR_BLOCK + block_len(n, j - 1);
			rc = same ? tfb_incr_copy(x, s, b->shard, b->offset + a, len) : CKPT__DECLINED;
			if (rc == CKPT__DECLINED)
				rc = tfb_shard_append(s, p + a, (size_t)len);
			for (size_t k = i; k < j; k++)
				c = !k ? bc[k] : block_len(n, k) == TFB_INCR_BLOCK ? ckpt__crc32c_combine_shift(c, bc[k], shift)
					: ckpt__crc32c_combine(c, bc[k], (size_t)block_len(n, k));
			i = j;
		}
	}
	if (posted)
		tfb_par_finish(&job); /* the helpers let go of bp */
	ckpt__free((void *)bp.ready);
	if (rc < 0) {
		ckpt__free(bc);
		return rc;
	}
	*crc = c;
	*blocks = bc;
	return CKPT_OK;
}

int tfb_incr_link(tfb_incr *x, int f, const char *tmp)
{
	if (link(x->base->f[f].path, tmp) != 0)
		return 0;
	struct stat st;
	if (stat(tmp, &st) != 0 || !same_file(&st, &x->base->f[f])) {
		unlink(tmp);
		return 0;
	}
	return 1;
}

uint32_t *tfb_blocks_dup(const tfb_ientry *b)
{
	if (!b->blocks)
		return NULL;
	size_t n = (size_t)((b->size + TFB_INCR_BLOCK - 1) / TFB_INCR_BLOCK) * sizeof(uint32_t);
	uint32_t *c = ckpt__malloc(n);
	if (c)
		memcpy(c, b->blocks, n);
	return c;
}

int tfb_incr_place(ckpt_writer *w, tfb_writer *s)
{
	tfb_incr *x = s->incr;
	if (x->s3)
		return tfb_incr_s3_place(w, s);
	const ibase *b = x->base;
	int rc = CKPT_OK;
	int *linked = NULL;         /* per base file: the new shard hard-linked to it, or -1 */
	size_t *count = NULL;
	if (x->np) {
		linked = ckpt__malloc((size_t)b->nf * sizeof(int));
		count = ckpt__calloc((size_t)b->nf, sizeof(size_t));
		if (!linked || !count)
			rc = CKPT_ENOMEM;
	}
	for (size_t i = 0; i < x->np && rc == CKPT_OK; i++)
		count[x->p[i].b->shard]++;
	/* a frozen shard every value of which is still unchanged: the same file */
	for (int f = 0; f < (x->np ? b->nf : 0) && rc == CKPT_OK; f++) {
		linked[f] = -1;
		if (f == 0 || count[f] != b->f[f].nentries || !count[f])
			continue;
		int k;
		rc = tfb_writer_add_shard(w, &k, 0);
		if (rc < 0)
			break;
		if (tfb_incr_link(x, f, s->sh[k].tmp)) {
			linked[f] = k;
			s->sh[k].pos = s->sh[k].flushed = b->f[f].size;
			x->reused += b->f[f].size;
		} else {
			ckpt__free(s->sh[k].tmp);
			ckpt__free(s->sh[k].final);
			s->nshards--;
		}
	}
	/* the others: copied into one new frozen shard (from memory where the copy is refused) */
	int g = -1;
	for (size_t i = 0; i < x->np && rc == CKPT_OK; i++) {
		const pending *p = &x->p[i];
		wentry *e = &s->e[p->ei];
		if (linked[p->b->shard] >= 0) {
			e->shard = linked[p->b->shard];
			e->offset = p->b->offset;
		} else {
			if (g < 0 && (rc = tfb_writer_add_shard(w, &g, 1)) < 0)
				break;
			e->shard = g;
			e->offset = s->sh[g].pos;
			rc = tfb_incr_copy(x, &s->sh[g], p->b->shard, p->b->offset, p->b->size);
			if (rc == CKPT__DECLINED) {
				uint32_t crc;
				rc = tfb_shard_put_fixed(&s->sh[g], p->data, p->b->size, &crc);
				e->masked_crc = ckpt_crc32c_mask(crc);
				continue; /* no block crcs: the next save compares nothing of it */
			}
		}
		if (rc == CKPT_OK && p->b->blocks && !(e->blocks = tfb_blocks_dup(p->b)))
			rc = CKPT_ENOMEM;
	}
	ckpt__free(linked);
	ckpt__free(count);
	if (rc < 0)
		return rc;
	/* the shard count is known now: it is in every data file's name */
	for (int k = 0; k < s->nshards; k++) {
		char *fin = tfb_data_path(w->path, k, s->nshards);
		if (!fin)
			return CKPT_ENOMEM;
		ckpt__free(s->sh[k].final);
		s->sh[k].final = fin;
	}
	return CKPT_OK;
}

void tfb_incr_record(ckpt_writer *w, tfb_writer *s)
{
	tfb_incr *x = s->incr;
	ckpt__incr *inc = x->inc;
	ibase *b = ckpt__calloc(1, sizeof(*b));
	int ok = b != NULL;
	if (ok) {
		b->prefix = ckpt__strdup(w->path);
		b->e = ckpt__calloc(s->ne ? s->ne : 1, sizeof(*b->e));
		b->f = ckpt__calloc((size_t)s->nshards, sizeof(*b->f));
		ok = b->prefix && b->e && b->f;
	}
	uint64_t total = 0;
	for (int k = 0; ok && k < s->nshards; k++) {
		ifile *f = &b->f[k];
		struct stat st;
		ok = (f->path = ckpt__strdup(s->sh[k].final)) != NULL;
		/* ino 0 matches nothing: a file that cannot be described is never reused */
		if (ok && stat(f->path, &st) == 0) {
			f->dev = (uint64_t)st.st_dev;
			f->ino = (uint64_t)st.st_ino;
			f->size = (uint64_t)st.st_size;
			f->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		}
		total += s->sh[k].pos;
		b->nf = k + 1;
	}
	/* s->e is sorted by key (the index was built from it) */
	for (size_t i = 0; ok && i < s->ne; i++) {
		const wentry *e = &s->e[i];
		if (e->packed || e->shard < 0)
			continue;
		tfb_ientry *d = &b->e[b->ne];
		if (!(d->key = ckpt__malloc(e->klen + 1))) {
			ok = 0;
			break;
		}
		memcpy(d->key, e->key, e->klen + 1);
		d->klen = e->klen;
		d->dtype = (int32_t)e->dtype;
		d->rank = e->rank;
		memcpy(d->dims, (const int64_t *)s->dims.p + e->dims_at, (size_t)e->rank * sizeof(int64_t));
		d->shard = e->shard;
		d->offset = e->offset;
		d->size = e->size;
		d->masked_crc = e->masked_crc;
		d->blocks = e->blocks;
		s->e[i].blocks = NULL; /* moved */
		b->f[e->shard].nentries++;
		b->ne++;
	}
	if (ok && x->s3)
		tfb_incr_s3_record(w, b);
	if (!ok) {
		/* no record: the next save is a full one */
		tfb_ibase_free(b);
		b = NULL;
	}
	close_sources(x);
	x->np = 0; /* the pending values point into the old record */
	if (inc->base && inc->base_free)
		inc->base_free(inc->base);
	inc->base = b;
	inc->base_free = tfb_ibase_free;
	inc->reused = x->reused;
	inc->written = total - x->reused;
}

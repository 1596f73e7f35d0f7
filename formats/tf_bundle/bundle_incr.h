/*
 * The record of the last committed save and the state of an incremental
 * save, shared by bundle_incr.c (POSIX: hard links, copy_file_range) and
 * bundle_incr_s3.c (S3: CopyObject, UploadPartCopy).
 */
#ifndef CKPT_TF_BUNDLE_INCR_H
#define CKPT_TF_BUNDLE_INCR_H

#include "tfb.h"

struct tfb_ientry {            /* one entry of a committed save */
	char *key;
	size_t klen;
	int32_t dtype;
	int rank;
	int64_t dims[CKPT_MAX_RANK];
	int shard;
	uint64_t offset, size;
	uint32_t masked_crc;
	uint32_t *blocks;          /* crc32c per TFB_INCR_BLOCK bytes, or NULL */
};

typedef struct ifile {         /* one data file of a committed save, as it was after the commit */
	char *path;
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	size_t nentries;
	char etag[128];            /* S3: the object's ETag after the commit ("" matches nothing) */
} ifile;

typedef struct ibase {
	char *prefix;
	tfb_ientry *e;             /* sorted by key */
	size_t ne;
	ifile *f;
	int nf;
} ibase;

typedef struct pending {       /* a clean value placed at commit */
	size_t ei;                 /* in tfb_writer.e */
	const tfb_ientry *b;
	const void *data;
} pending;

struct tfb_incr {
	ckpt__incr *inc;
	const ibase *base;         /* inc->base: NULL for the first save */
	int *fd;                   /* per base file: -2 not opened yet, -1 unusable */
	pending *p;
	size_t np, cap;
	uint64_t reused;
	int s3;                    /* the writer is on S3: server-side copies (bundle_incr_s3.c) */
	unsigned char *bad;        /* S3, per base file: a copy from it was refused, upload instead */
	int *slot;                 /* S3, per new shard: the base file whose clean values it takes (-1: the group) */
};

/** A new incremental state against b (NULL: nothing to reuse); NULL when out of memory. */
tfb_incr *tfb_incr_new(const ibase *b, int s3);
/** Hard-link the last save's file `f` as `tmp`: 1 when it is still the file that save committed (else no link). */
int tfb_incr_link(tfb_incr *x, int f, const char *tmp);
/** The record x reuses (NULL: none). */
const ibase *tfb_incr_base(const tfb_incr *x);
/** Bytes copied so far instead of written. */
uint64_t tfb_incr_reused(const tfb_incr *x);
/** Free a record (tfb_incr_record's). */
void tfb_ibase_free(void *b);
/**
 * n bytes at src_off of the last save's file `shard` appended to s in the
 * kernel; CKPT__DECLINED (s unchanged) when that file is not the one the
 * last save committed or cannot be copied from.
 */
int tfb_incr_copy(tfb_incr *x, wshard *s, int shard, uint64_t src_off, uint64_t n);

/* ---- one process's shard of a multi-process save (bundle_part_incr.c) ---- */
typedef struct tfb_part_log {  /* the entries a shard writer wrote, for its record */
	tfb_ientry *e;
	size_t n, cap;
} tfb_part_log;
struct ckpt_bundle_part_record;
/** The incremental state of shard `shard` of `nshards` of `prefix` against the record's base where it fits; NULL: ENOMEM. */
tfb_incr *tfb_part_incr_new(const struct ckpt_bundle_part_record *rec, ckpt_vfs *vfs, const char *prefix, int shard,
	int nshards);
/** Log a value written at off (size bytes); `blocks` (or NULL) moves into the log, freed on failure. */
int tfb_part_log_add(tfb_part_log *l, const char *key, size_t klen, const ckpt_tensor *t, uint64_t off,
	uint64_t size, uint32_t masked, uint32_t *blocks);
void tfb_part_log_free(tfb_part_log *l);
/** The identity of a data file just written: device, inode, size, mtime (POSIX, from fd, else path), or ETag and size (S3). */
void tfb_part_identify(ifile *id, ckpt_vfs *vfs, int fd, const char *path);
/** The log (moved) as the record's pending save, its data file `id` (path set here). */
void tfb_part_record_pending(struct ckpt_bundle_part_record *rec, tfb_part_log *l, const char *prefix, int shard,
	int nshards, const ifile *id, uint64_t total, uint64_t reused);

/* ---- S3 (bundle_incr_s3.c) ---- */
/** Lay out the S3 writer's shards for this save (writer_incremental): 1 taken, 0 full save, or an error. */
int tfb_incr_s3_open(ckpt_writer *w, tfb_writer *s, tfb_incr *x);
/** tfb_incr_put on S3. */
int tfb_incr_s3_put(tfb_incr *x, wshard *s, const tfb_ientry *b, const ckpt_tensor *t, uint32_t *bc, uint32_t *crc);
/** A clean value (b, its bytes at data) appended to s: copied by the server where S3's parts allow, else uploaded. */
int tfb_incr_s3_reuse(tfb_incr *x, wshard *s, const tfb_ientry *b, const void *data);
/** tfb_incr_place on S3. */
int tfb_incr_s3_place(ckpt_writer *w, tfb_writer *s);
/** The ETag of each data file of the save just committed (tfb_incr_record). */
void tfb_incr_s3_record(ckpt_writer *w, ibase *b);
uint32_t *tfb_blocks_dup(const tfb_ientry *b);

#endif

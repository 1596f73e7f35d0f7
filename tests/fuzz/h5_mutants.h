/*
 * The HDF5 metadata mutation campaign (issue 12.1), shared by the Criterion
 * suite (tests/hostile/test_h5_mutants.c) and the libFuzzer target
 * fuzz_keras_h5_mutants.
 *
 * A base is a real Keras HDF5 file from tests/fixtures/keras (for a
 * .keras archive: its model.weights.h5 member). Its metadata bytes are every
 * byte outside the data extent of a contiguous dataset, as the reader lists
 * them (ckpt_var_info.offset / nbytes) on the pristine file; chunked or
 * compact data counts as metadata (conservative: more mutants). A mutant
 * writes 8 bytes at one metadata offset (clipped at the end of the file):
 * all ones, all zeros, a given value, or an XOR (bit flips).
 */
#ifndef CKPT_H5_MUTANTS_H
#define CKPT_H5_MUTANTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct ckpt_h5m_base {
	char name[256];    /* fixture file name */
	uint8_t *bytes;    /* the HDF5 file */
	size_t n;
	size_t *meta;      /* metadata offsets, ascending */
	size_t nmeta;
	size_t *field;     /* starts of the metadata fields the structure walk knows, ascending (ckpt_h5m_fields) */
	size_t nfield;
	size_t nstruct;    /* structures walked: superblock, object headers, B-tree nodes, heaps, symbol nodes */
} ckpt_h5m_base;

enum { CKPT_H5M_ONES = 0, CKPT_H5M_ZEROS = 1, CKPT_H5M_VALUE = 2, CKPT_H5M_XOR = 3 };

/** Load `path` (an HDF5 file or a .keras archive) as a base; 0 on success. */
int ckpt_h5m_load(ckpt_h5m_base *b, const char *path);
void ckpt_h5m_free(ckpt_h5m_base *b);

/** Apply one mutation to `buf` (a copy of b->bytes) at metadata offset number `mi`. */
void ckpt_h5m_apply(const ckpt_h5m_base *b, uint8_t *buf, size_t mi, int kind, uint64_t value);
/** The same at file offset `off`. */
void ckpt_h5m_apply_at(const ckpt_h5m_base *b, uint8_t *buf, size_t off, int kind, uint64_t value);

/**
 * Walk the HDF5 structures of the base (done by ckpt_h5m_load; version-0
 * superblock, 8-byte offsets and lengths, as in every Keras fixture) and
 * list every field start into b->field: the superblock and the root symbol
 * table entry; each v1 B-tree node (type, level, entries, siblings, every
 * key and child address); each local heap (sizes, free list, data address);
 * each symbol table node (count; each entry's name offset, object header
 * address, cache type and scratch B-tree / heap addresses); each global heap
 * collection (size; each object's index, count and size); each version-1
 * object header reached from those entries (version, message count,
 * reference count, header size) and its continuation blocks: every message's
 * type, size and flags, and in the messages Keras files use the fields that
 * hold addresses, lengths and sizes (dataspace rank and dimensions,
 * datatype class and size, layout class, address and size, continuation
 * address and length, symbol table B-tree and heap addresses, attribute name,
 * datatype and dataspace sizes, fill value, modification time).
 */
void ckpt_h5m_fields(ckpt_h5m_base *b);

/** Outcome of one mutant, for the campaign's tally. */
enum { CKPT_H5M_OPENED = 0, CKPT_H5M_REFUSED = 1, CKPT_H5M_CONTAINED = 2 };

/**
 * Open `buf` (n bytes) from the memory file system and read every entry.
 * Aborts when the error contract breaks (a failure without a negative
 * status and a message naming the file). Returns CKPT_H5M_OPENED (opened,
 * every entry read), _REFUSED (a clean error) or _CONTAINED (libhdf5's
 * sandboxed child crashed, hung or ran out of memory: a clean error too).
 */
int ckpt_h5m_run(const uint8_t *buf, size_t n);

/**
 * The libFuzzer entry: data[0] picks a base (the fixtures listed in
 * h5_mutants.c), then 13-byte records [u32le offset index][u8 kind][8-byte
 * value] each mutate the base: kind & 3 the pattern, kind & 4 set: the
 * index picks a field start (b->field), else a metadata byte (b->meta).
 */
int ckpt_fuzz_keras_h5_mutants(const uint8_t *data, size_t size);
/** Load the bases (once; LLVMFuzzerInitialize, so they are not counted as one input's allocations). */
void ckpt_fuzz_keras_h5_mutants_init(void);

#endif

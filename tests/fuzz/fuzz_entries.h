/*
 * The fuzz entry points, one per reader, shared by the libFuzzer targets
 * (fuzz_<target>.c), the standalone replay driver and the Criterion suite
 * (tests/hostile/test_fuzz_replay.c), so every corpus file and every past crash input
 * goes through exactly the code the fuzzers ran.
 *
 * Each entry feeds `data` to the library through the in-memory file system
 * (no disk I/O) and walks everything the reader exposes. It aborts (a fuzzer
 * finding) when the library breaks its error contract: a failing call must
 * return a negative ckpt_status and leave a non-empty message.
 */
#ifndef CKPT_FUZZ_ENTRIES_H
#define CKPT_FUZZ_ENTRIES_H

#include <stddef.h>
#include <stdint.h>

typedef int (*ckpt_fuzz_fn)(const uint8_t *data, size_t size);

/** A .index file alone (prefix "f"; a fixed data shard exists). */
int ckpt_fuzz_tf_index(const uint8_t *data, size_t size);
/**
 * A whole bundle: [u32le index_len][index][u32le len][shard 0]...; shard i is
 * placed at f.data-0000i-of-0000N for every N in 1..4.
 */
int ckpt_fuzz_tf_bundle(const uint8_t *data, size_t size);
/** A serialized TrackableObjectGraph (ckpt_object_graph_parse + path/serialize/copy). */
int ckpt_fuzz_object_graph(const uint8_t *data, size_t size);
/** A `checkpoint` state file in a directory that holds a valid bundle d/ckpt-1. */
int ckpt_fuzz_state_file(const uint8_t *data, size_t size);
/** A Keras HDF5 file (any of the three layouts) from memory. */
int ckpt_fuzz_keras_h5(const uint8_t *data, size_t size);
/** A `.keras` zip archive from memory. */
int ckpt_fuzz_keras_archive(const uint8_t *data, size_t size);
/** `config.json` of an otherwise valid `.keras` archive (stored zip built here). */
int ckpt_fuzz_keras_config(const uint8_t *data, size_t size);

/** A safetensors file from memory; when it opens, rewritten as safetensors and reopened. */
int ckpt_fuzz_safetensors(const uint8_t *data, size_t size);
/** A GGUF file from memory; when it opens, rewritten as GGUF and reopened. */
int ckpt_fuzz_gguf(const uint8_t *data, size_t size);
/**
 * A saved_model.pb: ckpt_saved_model_parse, then as sm/saved_model.pb beside a
 * fixed valid bundle sm/variables/variables through ckpt_reader_open("sm")
 * (signatures, variable synchronization mapped onto the bundle, sync rules).
 */
int ckpt_fuzz_saved_model(const uint8_t *data, size_t size);

/** Entry point by target name ("tf_index", ...); NULL when unknown. */
ckpt_fuzz_fn ckpt_fuzz_entry(const char *target);
/** NULL-terminated list of the target names. */
extern const char *const ckpt_fuzz_targets[];

/**
 * A stored (uncompressed) zip of `n` members, for the config target and the
 * hostile-input tests. Returns a malloc'ed buffer (free()) and its size, or
 * NULL. `names[i]` may contain anything (that is the point).
 */
uint8_t *ckpt_fuzz_make_zip(const char *const *names, const uint8_t *const *bufs, const size_t *lens,
	size_t n, size_t *out_len);

#endif

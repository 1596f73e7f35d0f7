/*
 * The `ckpt` command-line tool: shared declarations.
 *
 * After libgit2's src/cli: main.c holds a table of commands; each command
 * has one static opts[] table that drives parsing, the usage line and
 * --help, so the help text cannot drift from the code. The tool uses only
 * the public libckpt API (plus jansson and zlib).
 *
 * Exit codes are fixed: 0 OK, 1 error, 2 usage.
 */
#ifndef CKPT_CLI_H
#define CKPT_CLI_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include "ckpt/ckpt.h"

enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_ERROR = 1,
	CLI_EXIT_USAGE = 2
};

typedef enum cli_opt_type {
	CLI_OPT_END = 0,   /**< terminates an opts[] table */
	CLI_OPT_SWITCH,    /**< --name */
	CLI_OPT_VALUE,     /**< --name VALUE or --name=VALUE */
	CLI_OPT_ARG        /**< a positional argument, in table order */
} cli_opt_type;

typedef struct cli_opt {
	cli_opt_type type;
	const char *name;        /**< long name without "--", or the positional's name */
	const char *value_name;  /**< CLI_OPT_VALUE: "X" in "--atol X" */
	int required;            /**< positionals and values that must be given */
	const char *help;        /**< one line */
	/**
	 * Where the value goes: offsetof() a field of the command's own args
	 * struct, a `const char *` for values and positionals (argv's string),
	 * an `int` for switches (set to 1). Fields of options not given keep
	 * what the command put there (its defaults).
	 */
	size_t field;
} cli_opt;

/** The binding of an opts[] entry: CLI_FIELD(diff_args, atol). */
#define CLI_FIELD(type, member) offsetof(type, member)

typedef struct cli_cmd {
	const char *name;
	int (*fn)(const struct cli_cmd *cmd, int argc, char **argv);
	const char *summary;     /**< one line, for `ckpt --help` */
	const cli_opt *opts;
	const char *description; /**< a paragraph for `ckpt help CMD`, or NULL */
} cli_cmd;

/* ---- cli_opts.c: option parsing, usage and help ---- */

/** Parse result besides CLI_EXIT_OK: help was printed (exit 0). */
#define CLI_PARSE_HELP (-100)

/**
 * Parse argv[1..argc-1] (argv[0] is the command name) against cmd->opts,
 * storing each given option into its field of `args` (the command's args
 * struct, see cli_opt.field). Returns CLI_EXIT_OK, CLI_PARSE_HELP (--help
 * printed to stdout) or CLI_EXIT_USAGE (a message and the usage line
 * printed to stderr).
 */
int cli_parse(const cli_cmd *cmd, int argc, char **argv, void *args);
void cli_print_usage(FILE *f, const cli_cmd *cmd);
void cli_print_help(FILE *f, const cli_cmd *cmd);
/** Report a usage error ("ckpt CMD: <msg>" + usage line) and return CLI_EXIT_USAGE. */
int cli_usage_error(const cli_cmd *cmd, const char *fmt, ...) CKPT_PRINTF(2, 3);
/** Parse a non-negative finite double option value; CLI_EXIT_USAGE on error. */
int cli_parse_double(const cli_cmd *cmd, const char *opt, const char *s, double *out);

/*
 * Error lines on stderr: "ckpt: <path>: variable '<v>' at offset <n>: <msg>".
 * cli_report_last uses ckpt_error_last(), filling in `path` / `var` where
 * the library recorded none. Both return CLI_EXIT_ERROR.
 */
int cli_report_last(const char *path, const char *var);
int cli_report(const char *path, const char *var, int64_t offset, const char *fmt, ...) CKPT_PRINTF(4, 5);

/**
 * `s` made safe for a terminal: control characters, C1 controls and bytes
 * that are not UTF-8 become \xNN, so a hostile name cannot move the
 * cursor or rewrite the screen. Returns `s` itself when nothing needs
 * escaping, else one of 8 rotating static buffers. Human output only.
 */
const char *cli_vis(const char *s);

/* ---- json_writer.c: the JSON of every --json mode ---- */

/** A double with round-trip precision, `null` when not finite (jw_double's spelling). */
void jout_double(FILE *f, double v);

#define JW_MAX_DEPTH 32
/** A JSON document being written to `f` (at most JW_MAX_DEPTH levels); jw_init, then begin/key/value/end calls. */
typedef struct jw {
	FILE *f;
	int depth;
	int after_key;                 /* a key was written: the next value takes no separator */
	unsigned count[JW_MAX_DEPTH];  /* values written so far in each open container */
} jw;
void jw_init(jw *w, FILE *f);
void jw_object_begin(jw *w);
void jw_object_end(jw *w);
void jw_array_begin(jw *w);
void jw_array_end(jw *w);
/** An object member's key; the next call writes its value. */
void jw_key(jw *w, const char *key);
/**
 * A string literal, `null` for NULL. Output is pure ASCII: non-ASCII UTF-8
 * as \uXXXX (surrogate pairs above U+FFFF), bytes that are not valid UTF-8
 * as \udcXX (Python's surrogateescape), so any name round-trips and the
 * text matches Python's json.dumps.
 */
void jw_string(jw *w, const char *s);
/** A string of n bytes (may hold NULs). */
void jw_string_n(jw *w, const char *s, size_t n);
void jw_int(jw *w, int64_t v);
void jw_uint(jw *w, uint64_t v);
/** Round-trip precision (shortest of %.15g / %.17g), `null` when not finite. */
void jw_double(jw *w, double v);
void jw_bool(jw *w, int v);
void jw_null(jw *w);
/** A shape as [2, 2]. */
void jw_shape(jw *w, const ckpt_shape *s);
/** A checksum as "0x1a2b3c4d". */
void jw_crc32(jw *w, uint32_t crc);
/** A value already spelled as JSON (a number a file stores as text). */
void jw_raw(jw *w, const char *json);
/** The stream, after the separator, for exactly one value the caller spells itself. */
FILE *jw_value(jw *w);
/** The newline after a document. */
void jw_end_line(jw *w);

/* ---- cli_vfs.c: the file system of every command ---- */

/**
 * Every command reads and writes through cli_vfs() (the library's POSIX
 * file system unless cli_set_vfs chose another): tests wrap it to see every
 * byte a command moves. NULL restores the default.
 */
void cli_set_vfs(ckpt_vfs *vfs);
ckpt_vfs *cli_vfs(void);
/**
 * cli_vfs(), except NULL (the library then picks the file system by path)
 * when `a` or `b` (either may be NULL) is an s3:// path and cli_set_vfs chose none.
 */
ckpt_vfs *cli_vfs_for(const char *a, const char *b);

/* ---- cli_progress.c: a progress line on stderr for long commands ---- */

typedef struct cli_progress cli_progress;
/**
 * Start counting the bytes read and written through cli_progress_vfs(p);
 * `total` is the expected count (what 100 % means). Draws one line on stderr,
 * redrawn, once the command has run a second, when stderr is a terminal and
 * `json` is 0. Never fails the command: *out may be NULL (no progress).
 */
int cli_progress_start(cli_progress **out, const char *verb, uint64_t total, int json);
/**
 * The VFS to pass in open/write/checkpoint options: the counting one while a
 * line is drawn, else cli_vfs(); cli_vfs_for(a, b) when `a` or `b` (either
 * may be NULL) is an s3:// path (the counting wrapper wraps the POSIX file
 * system only).
 */
ckpt_vfs *cli_progress_vfs(cli_progress *p, const char *a, const char *b);
void cli_progress_set_total(cli_progress *p, uint64_t total);
/** Stop drawing and erase the line if one was drawn. Call before printing results. NULL ok. */
void cli_progress_done(cli_progress *p);
/** Free, after every reader or writer using the VFS is freed. NULL ok. */
void cli_progress_free(cli_progress *p);
/** Erase the progress line, if one is drawn, before other stderr output (it is redrawn later). */
void cli_progress_clear_line(void);
/** Sum of the stored bytes of every entry of `r`. */
uint64_t cli_reader_bytes(const ckpt_reader *r);
/* ---- cli_sync.c: --sync-on-read PATTERN=AGG[,...] ---- */

/** Rules parsed from one --sync-on-read value (patterns point into `text`). */
typedef struct cli_sync_rules {
	ckpt_sync_rule *rules;
	size_t n;
	char *text;
} cli_sync_rules;
/** Parse `spec` (NULL: no rules); CLI_EXIT_USAGE with a message on a bad item. */
int cli_parse_sync_rules(const cli_cmd *cmd, const char *spec, cli_sync_rules *out);
void cli_sync_rules_free(cli_sync_rules *r);
/** "on_read", "on_write", "auto"; "sum", "mean", "only_first_replica", "none"; "saved_model", "rule", "none". */
const char *cli_sync_name(ckpt_synchronization s);
const char *cli_aggregation_name(ckpt_aggregation a);
const char *cli_sync_source_name(int source);

/* ---- inspect_saved_model.c: what saved_model.pb says ---- */

/** As `saved_model_cli show --all` prints tag-sets and SignatureDefs (without ops and functions). */
void cli_print_saved_model(FILE *f, const ckpt_saved_model *sm);
/** {"schema_version", "meta_graphs": [{"tags", "tensorflow_version", "signatures", "variables"}]}. */
void cli_print_saved_model_json(jw *w, const ckpt_saved_model *sm);

/* ---- commands (one file each) ---- */
extern const cli_cmd cli_cmd_inspect;
extern const cli_cmd cli_cmd_verify;
extern const cli_cmd cli_cmd_s3;
extern const cli_cmd cli_cmd_diff;
extern const cli_cmd cli_cmd_convert;
extern const cli_cmd cli_cmd_restore;
extern const cli_cmd cli_cmd_tier;

/* ---- shared helpers (cli_common.c) ---- */

/** Print the missing data shards of `r` to stderr; returns how many. */
int cli_report_missing_shards(const ckpt_reader *r);
/** 1 when entry `i` lives in a data file that does not exist. */
int cli_var_in_missing_shard(const ckpt_reader *r, const ckpt_var_info *v);

/**
 * The stored entry an object-graph attribute refers to: by checkpoint_key
 * (TensorBundle), else by full_name (Keras files: the dataset path).
 * Returns 1 and sets *idx when found, else 0.
 */
int cli_attr_find(const ckpt_reader *r, const ckpt_og_attr *a, size_t *idx);

/**
 * Canonical keys for matching entries across formats (diff, convert):
 * keys[i] is the checkpoint key of the graph attribute that refers to
 * entry i (a TF-style object-path key for every format), else the stored
 * name. Strings are malloc'ed; free with cli_keys_free.
 */
int cli_canonical_keys(const ckpt_reader *r, char ***keys);
void cli_keys_free(char **keys, size_t n);

/* ---- cli_flat.c: safetensors / GGUF extras ---- */

struct json_t;
/** The reader's quantized GGUF tensors ({name: {"type", "shape"}}), or NULL; json_decref it. */
struct json_t *cli_flat_qtypes(const ckpt_reader *r);
/** The ggml type name of `name` in `qtypes` ("Q8_0"), NULL when it is not quantized. */
const char *cli_flat_qtype(struct json_t *qtypes, const char *name);
/** safetensors __metadata__, GGUF key-value pairs and quantized tensors (human output). */
void cli_print_flat_meta(const ckpt_reader *r);

/* ---- convert_quant.c: convert --dequantize / --quantize ---- */

/** What convert was asked: --dequantize DT (0: none), --quantize TYPE, --keep GLOBS, --quantize-1d. */
typedef struct cli_qopts {
	ckpt_dtype deq;
	const char *quant;       /**< ggml type name, NULL: none */
	const char *keep;        /**< comma-separated globs of names left unquantized */
	int quant_1d;
} cli_qopts;

/** What happens to one entry on its way to the writer. */
typedef struct cli_qplan {
	const char *src_type;    /**< ggml type of a quantized source entry, else NULL */
	int raw_quant;           /**< quantized source copied as stored (GGUF -> GGUF, no --dequantize) */
	const char *in_type;     /**< decode the stored bytes as this ggml type ("Q4_0", "F16", "BF16"), else NULL */
	ckpt_dtype dtype;        /**< what the writer gets */
	ckpt_shape shape;        /**< its shape (a quantized value: [rows..., bytes per row]) */
	ckpt_shape logical;      /**< the shape in elements */
	const char *q;           /**< ggml type the value is encoded into, else NULL */
	const char *kept;        /**< why a float tensor stays as it is under --quantize, else NULL */
} cli_qplan;

/** Buffers reused from entry to entry. */
typedef struct cli_qbufs {
	float *f, *back;
	void *out;
	size_t fcap, bcap, ocap;
} cli_qbufs;

/**
 * Plan entry `v` (canonical key `key`; `qtypes` from cli_flat_qtypes; to_gguf: the target is GGUF).
 * Returns CLI_EXIT_OK or CLI_EXIT_ERROR (reported). A quantized entry with no
 * --dequantize gets raw_quant: only a GGUF target can take it.
 */
int cli_qplan_make(cli_qplan *p, const cli_qopts *o, const ckpt_var_info *v, const char *key, struct json_t *qtypes,
	int to_gguf);
/**
 * The value to hand the writer for `raw` (v's stored bytes): *out (raw itself
 * or a buffer of `b`), *out_bytes; for an encoded value the max abs error
 * and RMSE of its decoding against the float32 source. Returns a ckpt_status.
 */
int cli_qplan_value(const cli_qplan *p, const ckpt_var_info *v, const void *raw, cli_qbufs *b, const void **out,
	uint64_t *out_bytes, double *max_err, double *rmse);
void cli_qbufs_free(cli_qbufs *b);

/* ---- cli_kv.c: typed metadata pairs (ckpt_reader_kv), read in place ---- */

/** "u8", ..., "f64", "string", "array". */
const char *cli_kv_type_name(ckpt_kv_type t);
/** The elements of an array pair, one by one. */
typedef struct cli_kv_elems {
	const ckpt_kv *kv;
	const unsigned char *p, *end;
	uint64_t index;
} cli_kv_elems;
void cli_kv_elem_init(cli_kv_elems *it, const ckpt_kv *kv);
/** The next element: a number's bytes, or a string's bytes and length; 0 after the last. */
int cli_kv_elem_next(cli_kv_elems *it, const unsigned char **bytes, uint64_t *len);
/** A number of type t (little-endian bytes); `json` 1: JSON spelling (null when not finite). */
void cli_kv_number(FILE *f, ckpt_kv_type t, const unsigned char *b, int json);
/** The value for a terminal: a string's first 60 bytes, an array's type, count and first element. */
void cli_kv_print_text(const ckpt_kv *kv);
/**
 * inspect --json's metadata section: the members `"gguf": {"version", "alignment",
 * "kv": [...]}` or `"safetensors": {"metadata": {...} | null}`; arrays
 * with their first max_array values (0: all) and "truncated".
 */
void cli_kv_print_json(jw *w, const ckpt_reader *r, uint64_t max_array);
/** inspect --json after "variables": "files", "gguf" / "safetensors", "keras", "object_graph" (inspect_json.c). */
void cli_inspect_sections_json(jw *w, const ckpt_reader *r, uint64_t max_array);
/**
 * A copy of the reader's object graph without the attributes of entries
 * with drop[i] set (and slots left without a value); NULL graph when the
 * reader has none. Free with cli_graph_free.
 */
int cli_graph_without(const ckpt_reader *r, const unsigned char *drop, ckpt_object_graph **out);
void cli_graph_free(ckpt_object_graph *g);

/* ---- --device cuda (cli_device.c): the CUDA provider, loaded at run time ---- */
#define CLI_MAX_DEVICES 64
typedef struct cli_device cli_device;
/** Parse --device (NULL or "cpu": *is_cuda 0; "cuda": every device, *ndevices 0; "cuda:0,1"). CLI_EXIT_USAGE on error. */
int cli_device_parse(const cli_cmd *cmd, const char *spec, int *is_cuda, int *devices, int *ndevices);
/** Load ckpt_cuda and make its provider; CLI_EXIT_ERROR (reported, naming why) when either fails. */
int cli_device_open(cli_device **out);
const ckpt_memory_provider *cli_device_table(const cli_device *d);
const char *cli_device_describe(const cli_device *d);
void cli_device_close(cli_device *d);

#endif

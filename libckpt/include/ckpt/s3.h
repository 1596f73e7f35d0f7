/*
 * libckpt — checkpoints on S3-compatible object storage.
 *
 * A path of the form `s3://bucket/key-prefix` is accepted wherever a path is
 * when no VFS is given: the library then uses a process-wide S3 file system
 * (ckpt_vfs_s3_shared) configured as the AWS CLI is (ckpt_s3_config_load).
 * Every format backend works unchanged through the VFS; objects are written
 * whole (no rename exists on S3), data objects before the index, the index
 * before the manager's state file.
 *
 * Configuration, in the AWS CLI's order of precedence:
 *  - AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, else the
 *    profile's keys in ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE),
 *    else in ~/.aws/config (AWS_CONFIG_FILE);
 *  - AWS_PROFILE (default "default");
 *  - AWS_REGION, else AWS_DEFAULT_REGION, else the profile's `region`, else
 *    us-east-1;
 *  - AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else the profile's
 *    `endpoint_url` (its `s3` section first), else https://s3.REGION.amazonaws.com;
 *  - path-style addressing when the endpoint's host is an IP address or
 *    localhost, or the profile's `s3` section says `addressing_style = path`;
 *  - TLS certificates verified unless AWS_CA_BUNDLE names another bundle
 *    (never switched off).
 * libckpt's own knobs: CKPT_S3_PART_SIZE (bytes, default 8 MiB, at least
 * 5 MiB), CKPT_S3_PARALLEL (parts or ranges in flight per object, default 8),
 * CKPT_S3_MAX_ATTEMPTS (default 5), CKPT_S3_STALL_SECONDS (a request that
 * moves no byte for this long is cut and retried, default 30),
 * CKPT_S3_DEADLINE_SECONDS (no retry of a request begins this long after its
 * first try, default 120: a server that accepts connections and never answers
 * fails a request within deadline + stall seconds, 150 s by default; the
 * connect timeout is 10 s),
 * CKPT_S3_CACHE_SECONDS (default 5; 0: off: what a client's HEADs and
 * probing listings said — existence, size, ETag — is kept that long, so one
 * operation asks once; forgotten at once on this client's own write, delete
 * or rename of the key and on any failed read of it; reads stay pinned to
 * the ETag, so an object another process replaced in that time is read anew
 * or fails with CKPT_EBUSY, never mixed, while one it created or deleted may
 * be seen as it was for that long),
 * CKPT_S3_LOCK_LEASE_SECONDS (default 60), CKPT_S3_SINGLE_WRITER (1: take a
 * prefix's lock even from a server that ignores conditional writes — If-None-Match
 * and If-Match on PUT, which a process checks once per endpoint and bucket
 * before its first lock — because you guarantee one writer; without it such a
 * server's lock is refused with CKPT_EUNSUPPORTED).
 *
 * Keys are sent exactly as named (each byte outside A-Z a-z 0-9 - _ . ~ /
 * percent-encoded, no path normalisation). A key with a "." or ".." segment
 * is refused (CKPT_EINVAL) before any request: a server or proxy could
 * resolve it into another key or bucket. Names a server lists under a
 * prefix must be one name each, under that prefix; a listing that breaks
 * this, repeats its continuation token or runs past CKPT_MAX_S3_LIST_PAGES
 * pages fails (CKPT_EFORMAT, CKPT_ELIMIT) rather than being acted on.
 *
 * Memory: a writer holds at most parallel × part_size bytes of parts being
 * sent (64 MiB by default) plus the parts it is filling; a reader at most
 * parallel × part_size bytes of ranges in flight, and a TensorBundle restore
 * two 32 MiB buffers for the runs of entries it reads at once.
 */
#ifndef CKPT_S3_H
#define CKPT_S3_H

#include "ckpt/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Pages of one listing (ListObjectsV2, ListMultipartUploads) before it is refused as endless. */
#define CKPT_MAX_S3_LIST_PAGES 10000u

/** Where and how to reach an S3-compatible service. Strings are owned. */
typedef struct ckpt_s3_config {
	char *access_key;      /**< NULL: anonymous requests (unsigned) */
	char *secret_key;
	char *session_token;   /**< NULL when none */
	char *region;          /**< never NULL once loaded */
	char *endpoint;        /**< scheme://host[:port], no trailing slash */
	char *ca_bundle;       /**< NULL: the system's certificates */
	char *profile;         /**< the profile read */
	int path_style;        /**< 1: endpoint/bucket/key; 0: bucket.host/key */
	size_t part_size;      /**< multipart part and read range size, bytes */
	unsigned parallel;     /**< parts / ranges in flight per object */
	unsigned max_attempts; /**< tries of an idempotent request (1 = no retry); cleanups (aborting an upload,
				    releasing the lock) are tried at least 5 times whatever this says */
	unsigned stall_seconds;/**< a request with no progress for this long is cut */
	unsigned lock_lease_seconds; /**< a writer lock not renewed for this long is stale */
} ckpt_s3_config;

/**
 * The configuration the environment and the AWS files describe (see above).
 * @param[out] out  caller-owned; free with ckpt_s3_config_free
 * @return CKPT_OK, CKPT_EINVAL naming the variable or file line that is wrong,
 *         CKPT_ENOMEM
 */
CKPT_API int ckpt_s3_config_load(ckpt_s3_config **out);
CKPT_API void ckpt_s3_config_free(ckpt_s3_config *cfg); /**< NULL ok */

/** @return 1 when `path` starts with "s3://", else 0. */
CKPT_API int ckpt_path_is_s3(const char *path);

/**
 * Split `s3://bucket/key` into its bucket and key ("" when the path names the bucket).
 * @param[out] bucket caller-owned
 * @param[out] key    caller-owned, without a leading '/'
 * @return CKPT_OK or CKPT_EINVAL
 */
CKPT_API int ckpt_s3_path_split(char **bucket, char **key, const char *path);

/**
 * An S3 file system over `cfg` (copied). Paths are `s3://bucket/key`;
 * directories are key prefixes ending before a '/'.
 * @param[out] out caller-owned; free with ckpt_vfs_free
 * @return CKPT_OK; CKPT_ENOMEM; the status of setting up the S3 client
 */
CKPT_API int ckpt_vfs_s3_new(ckpt_vfs **out, const ckpt_s3_config *cfg);

/**
 * The process-wide S3 file system used for s3:// paths when no VFS is
 * given, configured by ckpt_s3_config_load at first use (never freed).
 * @return the shared S3 file system, borrowed; NULL on failure with ckpt_error_last() set: at first use, what ckpt_s3_config_load
 *         or ckpt_vfs_s3_new returned
 */
CKPT_API ckpt_vfs *ckpt_vfs_s3_shared(void);

/**
 * The VFS to use for `path`: `given` when not NULL, else S3 for s3:// paths, else the POSIX one.
 * @return borrowed (`given`, the shared S3 one or the default one): not to be freed; NULL on failure
 *         with ckpt_error_last() set: what ckpt_vfs_s3_shared returned for an s3:// path
 */
CKPT_API ckpt_vfs *ckpt_vfs_for_path(ckpt_vfs *given, const char *path);

/**
 * Body bytes this process's S3 file systems have sent (request bodies:
 * objects and parts, retries included) and received (response bodies:
 * objects, ranges, listings) since it started. For progress meters: a
 * process's own I/O counters (/proc/self/io) do not see socket traffic.
 * @param[out] sent     bytes sent
 * @param[out] received bytes received
 * @return CKPT_OK
 */
CKPT_API int ckpt_s3_transfer_bytes(uint64_t *sent, uint64_t *received);

/** What ckpt_s3_object_verify checked of one object. */
typedef struct ckpt_s3_object_check {
	uint64_t size;         /**< bytes read */
	unsigned num_checked;  /**< whole-object checksums that matched; 0: the object has none we can check */
	char what[256];        /**< the checksums checked ("crc32c (x-amz-meta-ckpt-crc32c), md5 (ETag)"), or why
				    none was ("a multipart upload and the server gives no composite checksum") */
} ckpt_s3_object_check;

/**
 * Read the object at `path` whole (ranged GETs pinned to the ETag of its
 * HEAD) and check its bytes against every whole-object checksum it carries:
 * libckpt's `x-amz-meta-ckpt-crc32c` (a single-part object it wrote), the
 * server's `x-amz-checksum-crc32c` / `x-amz-checksum-crc32` (full-object, or
 * the composite of a multipart upload: the checksum of its parts'
 * checksums, "-N"; the part size is asked with a HEAD of part 1), and an
 * ETag that is a plain MD5 (a single-part upload without SSE-KMS or SSE-C).
 * `ckpt verify` calls it for the objects of formats that store no
 * checksum per tensor (safetensors, GGUF, Keras): a ranged GET answered
 * with other bytes under a matching Content-Range is caught here.
 * Memory: parallel × part_size bytes of reads in flight.
 * @param[out] out  what was checked (filled on CKPT_OK)
 * @return CKPT_OK, also when the object has no checksum to check
 *         (out->num_checked == 0); CKPT_ECHECKSUM naming the object, the
 *         checksum and the expected and read values; CKPT_EINVAL when `vfs`
 *         (or, NULL, the one for `path`) is not an S3 file system; a
 *         negative ckpt_status from the requests
 */
CKPT_API int ckpt_s3_object_verify(ckpt_s3_object_check *out, ckpt_vfs *vfs, const char *path);

/** One multipart upload left unfinished under a prefix. */
typedef struct ckpt_s3_upload {
	char *key;
	char *upload_id;
	char *initiated;   /**< as the server wrote it (ISO 8601) */
} ckpt_s3_upload;

/**
 * Multipart uploads begun and never completed or aborted under `prefix`
 * (`s3://bucket/prefix`), e.g. by a killed process. The prefix is a
 * directory: `s3://b/run1` lists uploads of keys under `run1/`, never
 * `run10/`.
 * @param[out] uploads caller-owned; free with ckpt_s3_uploads_free
 * @param[out] count   entries in `*uploads`
 * @return CKPT_OK; CKPT_EFORMAT for a malformed listing (an <Upload> without
 *         Key or UploadId, a key outside the prefix, a marker repeated);
 *         CKPT_ELIMIT past CKPT_MAX_S3_LIST_PAGES pages; a negative
 *         ckpt_status from the request
 */
CKPT_API int ckpt_s3_uploads_list(ckpt_s3_upload **uploads, size_t *count, ckpt_vfs *vfs, const char *prefix);
/** Abort one upload (`bucket` from `prefix`).
 * @return CKPT_OK; CKPT_EINVAL when its key is not under the directory
 *         `prefix`; a negative ckpt_status from the request */
CKPT_API int ckpt_s3_upload_abort(ckpt_vfs *vfs, const char *prefix, const ckpt_s3_upload *upload);
/** Free what ckpt_s3_uploads_list gave (`count` entries). NULL ok. */
CKPT_API void ckpt_s3_uploads_free(ckpt_s3_upload *uploads, size_t count);

#ifdef __cplusplus
}
#endif
#endif

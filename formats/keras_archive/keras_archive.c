/*
 * Backend "keras-archive": Keras 3 `.keras` zip archives (keras.md §5),
 * detected from bytes ("PK\x03\x04" at offset 0).
 *
 *   entry 0  metadata.json     STORED  {"keras_version": "3.9.2", "date_saved": "..."}
 *   entry 1  config.json       STORED  serialize_keras_object(model), one line
 *   entry 2  model.weights.h5  STORED  a Keras 3 weights store (HDF5, not aligned)
 *   entry 3… assets/...        ignored (never extracted)
 *
 * Read with libarchive (central directory first: the seekable zip reader),
 * from the file's descriptor on the POSIX VFS, from memory on others. The
 * JSON members go into bounded buffers; model.weights.h5 is streamed into an
 * unnamed temporary file (member_spool.c) and opened like a plain
 * .weights.h5 (mapped, data read with pread), so opening costs bounded memory
 * whatever the member inflates to; nothing is ever extracted by name.
 * Refused: names with "..", a leading '/', a backslash or empty components,
 * symlinks and other non-regular entries, encrypted entries, duplicate or
 * missing members, declared sizes over CKPT_MAX_ZIP_MEMBER_BYTES or the
 * memory budget, and declared sizes above 4 GiB that exceed CKPT_MAX_ZIP_RATIO
 * times the archive, and members that inflate past the cap or, above
 * CKPT_ZIP_RATIO_FLOOR, past that ratio (refused while inflating).
 * model.weights.h5 is then opened by the keras-h5 backend (format name
 * "keras-v3"). config.json is data:
 * Lambda layers, __lambda__ objects, module and registered_name values are
 * reported in the "config_warnings" metadata, never acted upon.
 *
 * Writer "keras": metadata.json, config.json, model.weights.h5, STORED, in
 * that order, committed with ckpt_vfs_write_atomic.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <jansson.h>
#include "formats/format.h"
#include "formats/keras_archive/archive_lib.h"
#include "formats/keras_archive/member_spool.h"
#ifdef CKPT_HAVE_HDF5
#include "formats/keras_h5/keras_h5.h"
#endif

enum { M_METADATA, M_CONFIG, M_WEIGHTS, M_COUNT };
static const char *const member_names[M_COUNT] = { "metadata.json", "config.json", "model.weights.h5" };

static int ka_bid(ckpt_vfs *vfs, const char *path, const unsigned char *head, size_t n)
{
	(void)vfs;
	(void)path;
	if (n >= 4 && memcmp(head, "PK\x03\x04", 4) == 0)
		return 80;
	if (n >= 4 && memcmp(head, "PK\x05\x06", 4) == 0) /* an empty zip: ours to reject clearly */
		return 50;
	return -1;
}

static int check_member_name(const char *path, const char *name)
{
	const char *p = name;
	size_t len;
	if (!name || !*name)
		return ckpt__fail(CKPT_EFORMAT, path, NULL, -1, "zip entry with an empty or unreadable name");
	len = strlen(name);
	if (len > CKPT_MAX_NAME_LEN)
		return ckpt__fail(CKPT_ELIMIT, path, NULL, -1, "zip entry name of %zu bytes", len);
	if (name[0] == '/' || (len >= 2 && name[1] == ':'))
		return ckpt__fail(CKPT_EFORMAT, path, name, -1, "zip entry '%s' has an absolute path", name);
	if (strchr(name, '\\'))
		return ckpt__fail(CKPT_EFORMAT, path, name, -1, "zip entry '%s' contains a backslash", name);
	for (;;) {
		const char *s = strchr(p, '/');
		size_t cl = s ? (size_t)(s - p) : strlen(p);
		if ((cl == 2 && p[0] == '.' && p[1] == '.') || (cl == 1 && p[0] == '.'))
			return ckpt__fail(CKPT_EFORMAT, path, name, -1, "zip entry '%s' has a '.' or '..' component", name);
		if (cl == 0 && s) /* "a//b" (a trailing '/' marks a directory and is fine) */
			return ckpt__fail(CKPT_EFORMAT, path, name, -1, "zip entry '%s' has an empty component", name);
		if (!s)
			break;
		p = s + 1;
	}
	return CKPT_OK;
}

static uint32_t le32(const unsigned char *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

/*
 * libarchive turns '\' into '/' in names, so look at the raw central
 * directory (EOCD: "PK\5\6", entries "PK\1\2", name at +46) for
 * backslashes first. Zip64 directories are left to libarchive.
 */
static int check_raw_names(const unsigned char *b, size_t n, uint64_t base, const char *path)
{
	size_t eocd, off, end, i;
	uint16_t count;
	uint64_t cd;
	if (n < 22)
		return CKPT_OK;
	for (eocd = n - 22;; eocd--) {
		if (memcmp(b + eocd, "PK\x05\x06", 4) == 0)
			break;
		if (eocd == 0 || n - eocd > 22 + 65535)
			return CKPT_OK; /* libarchive reports the missing directory */
	}
	count = le16(b + eocd + 10);
	cd = le32(b + eocd + 16);
	if (count == 0xFFFF || cd == 0xFFFFFFFFu || cd < base)
		return CKPT_OK; /* zip64, or a directory before what we hold: libarchive's to judge */
	off = (size_t)(cd - base);
	end = off + (size_t)le32(b + eocd + 12);
	if (end > eocd || off > end)
		return CKPT_OK;
	for (i = 0; i < count; i++) {
		size_t nl, el, cl;
		if (off + 46 > end || memcmp(b + off, "PK\x01\x02", 4) != 0)
			return ckpt__fail(CKPT_EFORMAT, path, NULL, (int64_t)(base + off), "zip central directory entry %zu is malformed", i);
		nl = le16(b + off + 28);
		el = le16(b + off + 30);
		cl = le16(b + off + 32);
		if (off + 46 + nl + el + cl > end)
			return ckpt__fail(CKPT_EFORMAT, path, NULL, (int64_t)(base + off), "zip central directory entry %zu overruns the directory", i);
		if (memchr(b + off + 46, '\\', nl))
			return ckpt__fail(CKPT_EFORMAT, path, NULL, (int64_t)(base + off), "zip entry '%.*s' contains a backslash", (int)nl,
				(const char *)b + off + 46);
		off += 46 + nl + el + cl;
	}
	return CKPT_OK;
}

/* Read the current entry's data into a fresh buffer of at most `cap` bytes. */
static int read_member(struct archive *a, const char *path, const char *name, int64_t declared, uint64_t cap,
	char **out, size_t *n)
{
	size_t have = 0, alloc;
	char *buf;
	*out = NULL;
	*n = 0;
	if (declared >= 0 && (uint64_t)declared > cap)
		return ckpt__fail(CKPT_ELIMIT, path, name, -1, "member declares %lld bytes, cap is %llu", (long long)declared,
			(unsigned long long)cap);
	/* Grow as bytes arrive: a declared size is a claim, not a reason to allocate. */
	alloc = declared >= 0 && declared < (1 << 20) ? (size_t)declared + 1 : (1 << 20);
	buf = ckpt__malloc(alloc);
	if (!buf)
		return CKPT_ENOMEM;
	for (;;) {
		la_ssize_t got;
		if (have == alloc - 1) {
			size_t na;
			char *nb;
			if ((declared >= 0 && (int64_t)have >= declared) || (uint64_t)have >= cap) {
				/* more bytes than the central directory declared, or than the cap */
				char probe;
				got = archive_read_data(a, &probe, 1);
				if (got == 0)
					break;
				ckpt__free(buf);
				if (got < 0)
					return ckpt__fail(CKPT_EFORMAT, path, name, -1, "zip member unreadable: %s", archive_error_string(a));
				return ckpt__fail(declared >= 0 ? CKPT_EFORMAT : CKPT_ELIMIT, path, name, -1,
					"member data exceeds its %s of %llu bytes", declared >= 0 ? "declared size" : "cap",
					(unsigned long long)(declared >= 0 ? (uint64_t)declared : cap));
			}
			na = alloc * 2;
			if ((uint64_t)na > cap + 1)
				na = (size_t)cap + 1;
			if (declared >= 0 && (uint64_t)na > (uint64_t)declared + 1)
				na = (size_t)declared + 1;
			nb = ckpt__realloc(buf, na);
			if (!nb) {
				ckpt__free(buf);
				return CKPT_ENOMEM;
			}
			buf = nb;
			alloc = na;
		}
		got = archive_read_data(a, buf + have, alloc - 1 - have);
		if (got < 0) {
			const char *msg = archive_error_string(a);
			int code = msg && strstr(msg, "CRC") ? CKPT_ECHECKSUM : CKPT_EFORMAT;
			ckpt__free(buf);
			return ckpt__fail(code, path, name, -1, "zip member unreadable: %s", msg ? msg : "unknown error");
		}
		if (got == 0)
			break;
		have += (size_t)got;
	}
	if (declared >= 0 && have != (size_t)declared) {
		ckpt__free(buf);
		return ckpt__fail(CKPT_EFORMAT, path, name, -1, "member holds %zu bytes, declared %lld", have, (long long)declared);
	}
	buf[have] = '\0';
	*out = buf;
	*n = have;
	return CKPT_OK;
}

static int json_depth_ok(json_t *j, int depth)
{
	size_t i;
	const char *k;
	json_t *v;
	if (depth > CKPT_MAX_JSON_DEPTH)
		return 0;
	if (json_is_array(j)) {
		json_array_foreach(j, i, v)
			if (!json_depth_ok(v, depth + 1))
				return 0;
	} else if (json_is_object(j)) {
		json_object_foreach(j, k, v)
			if (!json_depth_ok(v, depth + 1))
				return 0;
	}
	return 1;
}

/*
 * A regular file whose open file lends a descriptor (ckpt_io_fd): libarchive
 * reads it with seeks, nothing is held in memory; -1 when the in-memory path
 * applies.
 */
static int open_regular(ckpt_reader *r, uint64_t *size)
{
	return ckpt__vfs_open_fd(r->vfs, r->user_path, size);
}

/* The end of the archive: the end-of-directory record and, when it says where, the whole central directory. */
static int read_directory(int fd, uint64_t size, const char *path, unsigned char **out, size_t *n, uint64_t *base)
{
	uint64_t from = size > 22 + 65535 ? size - (22 + 65535) : 0, cd = UINT64_MAX;
	size_t i;
	unsigned char *b;
	ssize_t k;
	for (int pass = 0; pass < 2; pass++) {
		size_t len = (size_t)(size - from);
		if (!(b = ckpt__malloc(len ? len : 1)))
			return CKPT_ENOMEM;
		if ((k = pread(fd, b, len, (off_t)from)) != (ssize_t)len) {
			int e = k < 0 ? errno : EIO;
			ckpt__free(b);
			return ckpt__fail_errno(e, path, "reading the zip central directory failed");
		}
		*out = b;
		*n = len;
		*base = from;
		if (pass == 1 || len < 22)
			return CKPT_OK;
		for (i = len - 22;; i--) {
			if (memcmp(b + i, "PK\x05\x06", 4) == 0) {
				cd = le32(b + i + 16);
				break;
			}
			if (i == 0)
				break;
		}
		if (cd == UINT64_MAX || cd == 0xFFFFFFFFu || cd >= from)
			return CKPT_OK;
		if (size - cd > (64ull << 20))
			return ckpt__fail(CKPT_ELIMIT, path, NULL, (int64_t)cd, "zip central directory of %llu bytes (cap 64 MiB)",
				(unsigned long long)(size - cd));
		ckpt__free(b);
		from = cd;
	}
	return CKPT_OK;
}

/*
 * Zip entry `ent` may be read: a checked name, a regular file or directory,
 * not encrypted, within the size caps and the compression ratio cap against
 * the `fsize`-byte archive. *name, *declared: its name and declared size (-1: none).
 */
static int check_entry(ckpt_reader *r, struct archive_entry *ent, uint64_t fsize, const char **name, int64_t *declared)
{
	*name = archive_entry_pathname(ent);
	CKPT_TRY(check_member_name(r->path, *name));
	if (archive_entry_filetype(ent) == AE_IFLNK)
		return ckpt__fail(CKPT_EUNSUPPORTED, r->path, *name, -1, "zip entry '%s' is a symbolic link", *name);
	if (archive_entry_filetype(ent) != AE_IFREG && archive_entry_filetype(ent) != AE_IFDIR)
		return ckpt__fail(CKPT_EUNSUPPORTED, r->path, *name, -1, "zip entry '%s' is not a regular file (type 0%o)", *name,
			(unsigned)archive_entry_filetype(ent));
	if (archive_entry_is_encrypted(ent))
		return ckpt__fail(CKPT_EUNSUPPORTED, r->path, *name, -1, "zip entry '%s' is encrypted", *name);
	*declared = archive_entry_size_is_set(ent) ? archive_entry_size(ent) : -1;
	if (*declared > (int64_t)CKPT_MAX_ZIP_MEMBER_BYTES)
		return ckpt__fail(CKPT_ELIMIT, r->path, *name, -1, "zip entry declares %lld bytes, cap is %llu",
			(long long)*declared, (unsigned long long)CKPT_MAX_ZIP_MEMBER_BYTES);
	/* Compressed size <= archive size, so this bounds the ratio from below (Keras' 4 GiB / 100x rule). */
	if (*declared > (int64_t)(4ull << 30) && (uint64_t)*declared / CKPT_MAX_ZIP_RATIO > fsize)
		return ckpt__fail(CKPT_ELIMIT, r->path, *name, -1,
			"zip bomb: entry declares %lld bytes from a %llu-byte archive (ratio cap %d)", (long long)*declared,
			(unsigned long long)fsize, CKPT_MAX_ZIP_RATIO);
	return CKPT_OK;
}

/* What ka_open reads out of the archive: the JSON members, and the weights spooled to a temporary file. */
typedef struct ka_members {
	char *data[M_COUNT];
	size_t dlen[M_COUNT];
	int wfd;              /* model.weights.h5's temporary file, -1 until spooled */
	uint64_t wlen;
} ka_members;

/* Every entry of archive `a` (of `fsize` bytes) validated; the three members read into *m, each once. */
static int read_members(ckpt_reader *r, struct archive *a, uint64_t fsize, uint64_t budget, ka_members *m)
{
	struct archive_entry *ent;
	int count = 0;
	for (;;) {
		int e = archive_read_next_header(a, &ent), which = -1;
		const char *name;
		int64_t declared = -1;
		if (e == ARCHIVE_EOF)
			break;
		if (e != ARCHIVE_OK)
			return ckpt__fail(CKPT_EFORMAT, r->path, NULL, -1, "bad zip entry header: %s", archive_error_string(a));
		if (++count > 100000)
			return ckpt__fail(CKPT_ELIMIT, r->path, NULL, -1, "more than 100000 zip entries");
		CKPT_TRY(check_entry(r, ent, fsize, &name, &declared));
		for (size_t i = 0; i < M_COUNT; i++)
			if (strcmp(name, member_names[i]) == 0)
				which = (int)i;
		if (which < 0) {
			if (strcmp(name, "model.weights.npz") == 0)
				return ckpt__fail(CKPT_EUNSUPPORTED, r->path, name, -1,
					"weights_format=\"npz\" archives are not supported");
			continue; /* assets/... and anything else: validated, never extracted */
		}
		if (m->data[which] || (which == M_WEIGHTS && m->wfd >= 0))
			return ckpt__fail(CKPT_EFORMAT, r->path, name, -1, "duplicate zip member '%s'", name);
		if (which == M_WEIGHTS) /* to a temporary file: memory stays bounded whatever it inflates to */
			CKPT_TRY(ckpt__zip_spool_member(a, r->path, name, declared,
				budget < CKPT_MAX_ZIP_MEMBER_BYTES ? budget : CKPT_MAX_ZIP_MEMBER_BYTES, fsize, "\x89HDF\r\n\x1a\n", 8,
				&m->wfd, &m->wlen));
		else
			CKPT_TRY(read_member(a, r->path, name, declared, CKPT_MAX_ATTR_BYTES, &m->data[which], &m->dlen[which]));
	}
	for (size_t i = 0; i < M_COUNT; i++)
		if (i == M_WEIGHTS ? m->wfd < 0 : !m->data[i])
			return ckpt__fail(CKPT_EFORMAT, r->path, member_names[i], -1,
				"missing zip member '%s' (a .keras archive has %s, %s, %s)",
				member_names[i], member_names[0], member_names[1], member_names[2]);
	return CKPT_OK;
}

/* The JSON members parsed (data: validated, and fed to the name mapping) into *cfg, *md and kept as metadata. */
static int parse_json_members(ckpt_reader *r, const ka_members *m, json_t **cfg, json_t **md)
{
	json_error_t jerr;
	if (strlen(m->data[M_CONFIG]) != m->dlen[M_CONFIG] || !(*cfg = json_loads(m->data[M_CONFIG], 0, &jerr)) ||
		!json_depth_ok(*cfg, 0))
		return ckpt__fail(CKPT_EFORMAT, r->path, "config.json", *cfg ? -1 : (int64_t)(*cfg ? 0 : jerr.position),
			"config.json is not valid JSON%s%s", *cfg ? ": nested deeper than the cap" : ": ", *cfg ? "" : jerr.text);
	if (strlen(m->data[M_METADATA]) != m->dlen[M_METADATA] || !(*md = json_loads(m->data[M_METADATA], 0, &jerr)))
		return ckpt__fail(CKPT_EFORMAT, r->path, "metadata.json", -1, "metadata.json is not valid JSON: %s", jerr.text);
	CKPT_TRY(ckpt__reader_set_meta(r, "config.json", m->data[M_CONFIG]));
	CKPT_TRY(ckpt__reader_set_meta(r, "metadata.json", m->data[M_METADATA]));
	if (json_string_value(json_object_get(*md, "keras_version")))
		CKPT_TRY(ckpt__reader_set_meta(r, "keras_version", json_string_value(json_object_get(*md, "keras_version"))));
	return CKPT_OK;
}

/* Map the spooled model.weights.h5 and read it as the Keras weights file (m->wfd adopted with the mapping). */
static int attach_weights(ckpt_reader *r, ka_members *m)
{
#ifdef CKPT_HAVE_HDF5
	if (m->wlen > SIZE_MAX)
		return ckpt__fail(CKPT_ELIMIT, r->path, "model.weights.h5", -1, "member of %llu bytes",
			(unsigned long long)m->wlen);
	void *map = mmap(NULL, (size_t)m->wlen, PROT_READ, MAP_PRIVATE, m->wfd, 0);
	if (map == MAP_FAILED)
		return ckpt__fail_errno(errno, r->path, "mapping the spooled model.weights.h5 (%llu bytes) failed",
			(unsigned long long)m->wlen);
	madvise(map, (size_t)m->wlen, MADV_RANDOM);
	int rc = ckpt__keras_h5_attach_member(r, m->wfd, map, (size_t)m->wlen, m->data[M_CONFIG]);
	m->wfd = -1; /* adopted with the mapping */
	return rc;
#else
	return ckpt__fail(CKPT_EUNSUPPORTED, r->path, "model.weights.h5", -1, "libckpt was built without HDF5");
#endif
}

static int ka_open(ckpt_reader *r)
{
	unsigned char *file = NULL;
	size_t held = 0, i;
	uint64_t fsize = 0, base = 0;
	int zfd;
	struct archive *a = NULL;
	ka_members m = { { NULL, NULL, NULL }, { 0, 0, 0 }, -1, 0 };
	uint64_t budget = r->opts.memory_budget ? r->opts.memory_budget : CKPT_DEFAULT_MEMORY_BUDGET;
	int rc = CKPT_OK;
	json_t *cfg = NULL, *md = NULL;
	if (!r->path && !(r->path = ckpt__strdup(r->user_path)))
		return CKPT_ENOMEM;
	CKPT_TRY(ckpt__archive_lib(r->path));
	CKPT_TRY(ckpt__h5_lib(r->path)); /* model.weights.h5 */
	/* A regular file is read through its descriptor; other VFS hold the archive in memory anyway. */
	if ((zfd = open_regular(r, &fsize)) >= 0) {
		rc = read_directory(zfd, fsize, r->path, &file, &held, &base);
	} else {
		void *all = NULL;
		rc = ckpt_vfs_read_all(&all, &held, r->vfs, r->user_path, budget);
		file = all;
		fsize = held;
	}
	if (rc < 0 || (rc = check_raw_names(file, held, base, r->path)) < 0)
		goto out;
	a = archive_read_new();
	if (!a) {
		rc = CKPT_ENOMEM;
		goto out;
	}
	archive_read_support_format_zip_seekable(a);
	if ((zfd >= 0 ? archive_read_open_fd(a, zfd, 1 << 16) : archive_read_open_memory(a, file, held)) != ARCHIVE_OK) {
		rc = ckpt__fail(CKPT_EFORMAT, r->path, NULL, -1, "not a readable zip archive: %s", archive_error_string(a));
		goto out;
	}
	if ((rc = read_members(r, a, fsize, budget, &m)) < 0 || (rc = parse_json_members(r, &m, &cfg, &md)) < 0)
		goto out;
	rc = attach_weights(r, &m);
out:
	if (cfg)
		json_decref(cfg);
	if (md)
		json_decref(md);
	if (a)
		archive_read_free(a);
	for (i = 0; i < M_COUNT; i++)
		ckpt__free(m.data[i]);
	ckpt__free(file);
	if (m.wfd >= 0)
		close(m.wfd);
	if (zfd >= 0)
		close(zfd);
	return rc;
}

#ifdef CKPT_HAVE_HDF5
static int ka_read(ckpt_reader *r, size_t i, ckpt_tensor **out) { return ckpt__keras_h5_read(r, i, out); }
static int ka_read_into(ckpt_reader *r, size_t i, void *dst, size_t n) { return ckpt__keras_h5_read_into(r, i, dst, n); }
static void ka_close(ckpt_reader *r) { ckpt__keras_h5_close(r); }
#else
static int ka_read(ckpt_reader *r, size_t i, ckpt_tensor **out)
{
	(void)i; (void)out;
	return ckpt__fail(CKPT_EUNSUPPORTED, r->path, NULL, -1, "libckpt was built without HDF5");
}
static int ka_read_into(ckpt_reader *r, size_t i, void *dst, size_t n)
{
	(void)i; (void)dst; (void)n;
	return ckpt__fail(CKPT_EUNSUPPORTED, r->path, NULL, -1, "libckpt was built without HDF5");
}
static void ka_close(ckpt_reader *r) { (void)r; }
#endif

/* ---- writer ---- */

#ifdef CKPT_HAVE_HDF5
typedef struct kaw_state {
	ckpt__keras_wtensor *v;
	size_t n, cap;
} kaw_state;

typedef struct membuf {
	char *p;
	size_t n, cap;
	int oom;
} membuf;

static la_ssize_t mb_write(struct archive *a, void *ctx, const void *buf, size_t n)
{
	membuf *m = ctx;
	(void)a;
	if (m->n + n > m->cap) {
		size_t nc = (m->cap + n) * 2;
		char *np = ckpt__realloc(m->p, nc);
		if (!np) {
			m->oom = 1;
			return -1;
		}
		m->p = np;
		m->cap = nc;
	}
	memcpy(m->p + m->n, buf, n);
	m->n += n;
	return (la_ssize_t)n;
}

static int add_member(struct archive *a, const char *name, const void *buf, size_t n, time_t mtime, const char *path)
{
	struct archive_entry *e = archive_entry_new();
	int rc = CKPT_OK;
	if (!e)
		return CKPT_ENOMEM;
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0600);
	archive_entry_set_size(e, (la_int64_t)n);
	archive_entry_set_mtime(e, mtime, 0);
	if (archive_write_header(a, e) != ARCHIVE_OK || (n && archive_write_data(a, buf, n) != (la_ssize_t)n))
		rc = ckpt__fail(CKPT_ERROR, path, name, -1, "zip writer failed: %s", archive_error_string(a));
	archive_entry_free(e);
	return rc;
}

static int kaw_open(ckpt_writer *w)
{
	if (strcmp(w->format_name, "keras") != 0)
		return ckpt__fail(CKPT_EUNSUPPORTED, w->path, NULL, -1, "keras-archive backend does not write '%s'", w->format_name);
	CKPT_TRY(ckpt__archive_lib(w->path));
	CKPT_TRY(ckpt__h5_lib(w->path)); /* model.weights.h5 */
	w->state = ckpt__calloc(1, sizeof(kaw_state));
	return w->state ? CKPT_OK : CKPT_ENOMEM;
}

static int kaw_add(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard)
{
	kaw_state *s = w->state;
	(void)shard;
	return ckpt__keras_wlist_add(&s->v, &s->n, &s->cap, name, t);
}

static int kaw_commit(ckpt_writer *w)
{
	kaw_state *s = w->state;
	void *img = NULL;
	size_t len = 0;
	struct archive *a = NULL;
	membuf mb = { NULL, 0, 0, 0 };
	const char *cfg = ckpt__writer_meta(w, "config.json"), *md = ckpt__writer_meta(w, "metadata.json");
	const char *kv = ckpt__writer_meta(w, "keras_version");
	char mdbuf[256];
	struct tm epoch;
	time_t t1980, now = time(NULL);
	int rc;
	CKPT_TRY(ckpt__keras_h5_build(w, CKPT_KERAS_V3, s->v, s->n, &img, &len));
	if (!md) {
		char date[64];
		struct tm lt;
		localtime_r(&now, &lt);
		strftime(date, sizeof(date), "%Y-%m-%d@%H:%M:%S", &lt);
		snprintf(mdbuf, sizeof(mdbuf), "{\"keras_version\": \"%.32s\", \"date_saved\": \"%s\"}", kv ? kv : "3.5.0", date);
		md = mdbuf;
	}
	if (!cfg)
		cfg = "{}";
	/* Python's ZipInfo default for the JSON members: 1980-01-01 00:00:00 local time. */
	memset(&epoch, 0, sizeof(epoch));
	epoch.tm_year = 80;
	epoch.tm_mday = 1;
	epoch.tm_isdst = -1;
	t1980 = mktime(&epoch);
	a = archive_write_new();
	if (!a) {
		ckpt__free(img);
		return CKPT_ENOMEM;
	}
	if (archive_write_set_format_zip(a) != ARCHIVE_OK || archive_write_zip_set_compression_store(a) != ARCHIVE_OK ||
		archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
		archive_write_open(a, &mb, NULL, mb_write, NULL) != ARCHIVE_OK) {
		rc = ckpt__fail(CKPT_ERROR, w->path, NULL, -1, "zip writer setup failed: %s", archive_error_string(a));
		goto out;
	}
	if ((rc = add_member(a, "metadata.json", md, strlen(md), t1980, w->path)) < 0 ||
		(rc = add_member(a, "config.json", cfg, strlen(cfg), t1980, w->path)) < 0 ||
		(rc = add_member(a, "model.weights.h5", img, len, now, w->path)) < 0)
		goto out;
	if (archive_write_close(a) != ARCHIVE_OK || mb.oom) {
		rc = mb.oom ? CKPT_ENOMEM : ckpt__fail(CKPT_ERROR, w->path, NULL, -1, "zip writer failed: %s", archive_error_string(a));
		goto out;
	}
	rc = ckpt_vfs_write_atomic(w->vfs, w->path, mb.p, mb.n, !w->opts.no_fsync);
out:
	archive_write_free(a);
	ckpt__free(mb.p);
	ckpt__free(img);
	return rc;
}

static void kaw_close(ckpt_writer *w)
{
	kaw_state *s = w->state;
	if (s) {
		ckpt__keras_wlist_free(s->v, s->n);
		ckpt__free(s);
	}
	w->state = NULL;
}

static const char *const ka_write_formats[] = { "keras", NULL };
#define KA_WRITE_FORMATS ka_write_formats
#define KA_WRITER kaw_open, kaw_add, kaw_commit, kaw_close
#else
#define KA_WRITE_FORMATS NULL
#define KA_WRITER NULL, NULL, NULL, NULL
#endif

const ckpt_format ckpt_format_keras_archive = {
	1,
	"keras-archive",
	ka_bid,
	ka_open,
	ka_read,
	ka_read_into,
	ka_close,
	KA_WRITE_FORMATS,
	KA_WRITER,
	NULL, /* verify: core fallback */
	NULL, /* writer_announce: nothing staged, announcements ignored */
	NULL, /* read_rows: the core reads whole tensors */
	NULL, /* no partitioned variables */
	NULL, /* read_many: entry by entry */
	NULL, /* writer_add_pieces: values whole (a device value larger than the ring goes through pinned memory of its size) */
	NULL, /* trim: no scratch kept between reads */
};

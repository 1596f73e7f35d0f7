/*
 * Guarded HDF5 accessors (see h5_safe.h). Nothing here trusts the file:
 * links are inspected before they are traversed, names are validated,
 * sizes are checked against the image before anything is allocated.
 *
 * HDF5 facts relied on (1.10.8, checked on the fixtures):
 *  - H5Lget_info on a single component reports the link type without
 *    traversing it; only H5L_TYPE_HARD is followed.
 *  - A contiguous dataset's H5Dget_storage_size is the size recorded in its
 *    layout message (0 when never allocated) and H5Dget_offset its address.
 *  - Variable-length strings are resolved by us in the image (see below),
 *    never by H5HG_read.
 */
#include <string.h>
#include <stdlib.h>
#include <pthread.h>
#include "formats/keras_h5/h5_safe.h"

/* Debian's libhdf5 is the serial (not thread-safe) build: one caller at a time. */
static pthread_mutex_t h5_mutex = PTHREAD_MUTEX_INITIALIZER;
void ckpt__h5_lock(void) { pthread_mutex_lock(&h5_mutex); }
void ckpt__h5_unlock(void) { pthread_mutex_unlock(&h5_mutex); }

void ckpt__h5_quiet(void)
{
	static int done;
	if (!done) {
		H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
		done = 1;
	}
}

void ckpt__h5_close(hid_t id)
{
	if (id < 0)
		return;
	switch (H5Iget_type(id)) {
	case H5I_FILE: H5Fclose(id); break;
	case H5I_GROUP: H5Gclose(id); break;
	case H5I_DATASET: H5Dclose(id); break;
	case H5I_ATTR: H5Aclose(id); break;
	case H5I_DATATYPE: H5Tclose(id); break;
	case H5I_DATASPACE: H5Sclose(id); break;
	case H5I_GENPROP_LST: H5Pclose(id); break;
	default: break;
	}
}

/*
 * Variable-length strings live in global heap collections ("GCOL"), and
 * libhdf5 1.10's H5HG_read trusts the heap IDs stored in attributes (an out
 * of range index or size crashes it). So we never let HDF5 dereference
 * them: a private conversion hands us the raw 16-byte IDs (length, heap
 * address, index) and we find the bytes in our own copy of the file image,
 * with every offset checked. Open images are registered by file id.
 */
typedef struct h5_image {
	hid_t file;
	const unsigned char *buf;
	size_t n;
	uint64_t base;          /* superblock base address */
	int raw_ok;             /* 8-byte addresses and lengths: the layout we parse */
	unsigned long fileno;   /* HDF5's number for the open file */
	struct h5_image *next;
} h5_image;
static h5_image *images;

#define RAW_VLEN_TAG "ckpt raw vlen heap id"
#define RAW_VLEN_SIZE 16 /* 4-byte length + 8-byte collection address + 4-byte index */
static hid_t raw_vlen_type = -1;

static uint64_t rd_le(const unsigned char *p, int n)
{
	uint64_t v = 0;
	int i;
	for (i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static herr_t raw_vlen_conv(hid_t src, hid_t dst, H5T_cdata_t *cd, size_t nelmts, size_t buf_stride,
	size_t bkg_stride, void *buf, void *bkg, hid_t dxpl)
{
	(void)nelmts; (void)bkg_stride; (void)buf; (void)bkg; (void)dxpl;
	switch (cd->command) {
	case H5T_CONV_INIT: {
		char *tag;
		int ok;
		cd->need_bkg = H5T_BKG_NO;
		if (H5Tis_variable_str(src) <= 0 || H5Tget_class(dst) != H5T_OPAQUE || H5Tget_size(dst) != RAW_VLEN_SIZE)
			return -1;
		tag = H5Tget_tag(dst);
		ok = tag && strcmp(tag, RAW_VLEN_TAG) == 0;
		H5free_memory(tag);
		return ok ? 0 : -1;
	}
	case H5T_CONV_CONV:
		/* The buffer holds the IDs as stored; they are our output, unchanged. */
		if (H5Tget_size(src) != RAW_VLEN_SIZE || (buf_stride && buf_stride != RAW_VLEN_SIZE))
			return -1;
		return 0;
	default:
		return 0;
	}
}

static int raw_vlen_init(void)
{
	hid_t s;
	if (raw_vlen_type >= 0)
		return 0;
	raw_vlen_type = H5Tcreate(H5T_OPAQUE, RAW_VLEN_SIZE);
	if (raw_vlen_type < 0 || H5Tset_tag(raw_vlen_type, RAW_VLEN_TAG) < 0)
		return -1;
	s = H5Tcopy(H5T_C_S1);
	H5Tset_size(s, H5T_VARIABLE);
	if (H5Tregister(H5T_PERS_SOFT, "ckpt_raw_vlen", s, raw_vlen_type, raw_vlen_conv) < 0) {
		H5Tclose(s);
		return -1;
	}
	H5Tclose(s);
	return 0;
}

static h5_image *image_of(hid_t obj)
{
	H5O_info_t oi;
	h5_image *im;
	if (H5Oget_info2(obj, &oi, H5O_INFO_BASIC) < 0)
		return NULL;
	for (im = images; im; im = im->next)
		if (im->fileno == oi.fileno)
			return im;
	return NULL;
}

/* The bytes of heap object (addr, idx), at least `len` long, inside the image. */
static const char *heap_bytes(const h5_image *im, uint64_t addr, uint32_t idx, uint32_t len)
{
	uint64_t a, csize, off;
	const unsigned char *c;
	if (ckpt__add_u64(addr, im->base, &a) || a > im->n || im->n - a < 16)
		return NULL;
	c = im->buf + a;
	if (memcmp(c, "GCOL", 4) != 0 || c[4] != 1)
		return NULL;
	csize = rd_le(c + 8, 8);
	if (csize < 16 || csize > im->n - a)
		return NULL;
	for (off = 16; off + 16 <= csize;) {
		uint32_t oi = (uint32_t)rd_le(c + off, 2);
		uint64_t osize = rd_le(c + off + 8, 8), data = off + 16;
		if (oi == 0 || osize > csize - data)
			return NULL; /* free space reached, or an object overrunning its collection */
		if (oi == idx)
			return len <= osize ? (const char *)c + data : NULL;
		off = data + ((osize + 7) & ~(uint64_t)7);
	}
	return NULL;
}

/*
 * H5LTopen_file_image(DONT_COPY | DONT_RELEASE) semantics, done here because
 * libhdf5_hl 1.10 leaks its callback data on every such open: the core
 * driver is handed our buffer for every image operation, never copies it
 * (source == destination) and never frees it; resizing is refused.
 */
static void *img_malloc(size_t size, H5FD_file_image_op_t op, void *udata)
{
	h5_image *im = udata;
	(void)op;
	return size == im->n ? (void *)im->buf : NULL;
}

static void *img_memcpy(void *dest, const void *src, size_t size, H5FD_file_image_op_t op, void *udata)
{
	(void)size; (void)op; (void)udata;
	return dest == src ? dest : NULL;
}

static herr_t img_free(void *ptr, H5FD_file_image_op_t op, void *udata)
{
	(void)ptr; (void)op; (void)udata;
	return 0;
}

static void *img_udata_copy(void *udata) { return udata; }
static herr_t img_udata_free(void *udata) { (void)udata; return 0; }

static hid_t open_in_place(h5_image *im, const char *path)
{
	static unsigned long seq;
	H5FD_file_image_callbacks_t cb;
	char name[64];
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f = -1;
	(void)path;
	memset(&cb, 0, sizeof(cb));
	cb.image_malloc = img_malloc;
	cb.image_memcpy = img_memcpy;
	cb.image_realloc = NULL;
	cb.image_free = img_free;
	cb.udata_copy = img_udata_copy;
	cb.udata_free = img_udata_free;
	cb.udata = im;
	snprintf(name, sizeof(name), "ckpt-image-%lu", ++seq);
	if (fapl >= 0 && H5Pset_fapl_core(fapl, 1 << 16, 0) >= 0 && H5Pset_file_image_callbacks(fapl, &cb) >= 0 &&
		H5Pset_file_image(fapl, (void *)im->buf, im->n) >= 0)
		f = H5Fopen(name, H5F_ACC_RDONLY, fapl);
	if (fapl >= 0)
		H5Pclose(fapl);
	return f;
}

int ckpt__h5_open_image(hid_t *out, const void *buf, size_t n, const char *path)
{
	hid_t f;
	h5_image *im;
	const unsigned char *b = buf;
	ckpt__h5_quiet();
	*out = -1;
	if (n < 8 || memcmp(buf, "\x89HDF\r\n\x1a\n", 8) != 0)
		return ckpt__fail(CKPT_EFORMAT, path, NULL, 0, "not an HDF5 file: no superblock signature at offset 0");
	if (raw_vlen_init() < 0)
		return ckpt__fail(CKPT_ERROR, path, NULL, -1, "HDF5 refused the raw string conversion");
	im = ckpt__calloc(1, sizeof(*im));
	if (!im)
		return CKPT_ENOMEM;
	im->buf = b;
	im->n = n;
	/* Superblock v0/v1 (what h5py writes by default): sizes at 13/14, base address at 24/28. */
	if (n >= 40 && (b[8] == 0 || b[8] == 1) && b[13] == 8 && b[14] == 8) {
		im->base = rd_le(b + (b[8] == 0 ? 24 : 28), 8);
		im->raw_ok = 1;
	} else if (n >= 20 && (b[8] == 2 || b[8] == 3) && b[9] == 8 && b[10] == 8) {
		im->base = rd_le(b + 12, 8);
		im->raw_ok = 1;
	}
	f = open_in_place(im, path);
	if (f < 0) {
		ckpt__free(im);
		return ckpt__fail(CKPT_EFORMAT, path, NULL, -1, "HDF5 could not open the file (%zu bytes): corrupt or truncated superblock or root group", n);
	}
	im->file = f;
	{
		H5O_info_t oi;
		if (H5Oget_info2(f, &oi, H5O_INFO_BASIC) >= 0)
			im->fileno = oi.fileno;
		else
			im->raw_ok = 0;
	}
	im->next = images;
	images = im;
	*out = f;
	return CKPT_OK;
}

void ckpt__h5_close_image(hid_t file)
{
	h5_image **pp;
	for (pp = &images; *pp; pp = &(*pp)->next)
		if ((*pp)->file == file) {
			h5_image *im = *pp;
			*pp = im->next;
			ckpt__free(im);
			break;
		}
	ckpt__h5_close(file);
}

int ckpt__h5_check_component(const char *name, size_t len)
{
	if (len == 0)
		return -1;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return -1;
	if (memchr(name, '/', len) || memchr(name, '\0', len))
		return -1;
	return 0;
}

int ckpt__h5_check_relpath(const char *rel, const char *path, const char *what)
{
	size_t len = strlen(rel);
	const char *p = rel, *end = rel + len;
	if (len == 0 || len > CKPT_MAX_NAME_LEN)
		return ckpt__fail(CKPT_EFORMAT, path, rel, -1, "%s: name length %zu not in [1, %d]", what, len, CKPT_MAX_NAME_LEN);
	if (rel[0] == '/')
		return ckpt__fail(CKPT_EFORMAT, path, rel, -1, "%s: absolute name '%s' (must be relative)", what, rel);
	while (p <= end) {
		const char *s = memchr(p, '/', (size_t)(end - p));
		size_t clen = s ? (size_t)(s - p) : (size_t)(end - p);
		if (ckpt__h5_check_component(p, clen) != 0)
			return ckpt__fail(CKPT_EFORMAT, path, rel, -1, "%s: name '%s' has an empty, '.' or '..' component", what, rel);
		if (!s)
			break;
		p = s + 1;
	}
	return CKPT_OK;
}

int ckpt__h5_child_kind(hid_t loc, const char *name, const char *path, const char *where, int *kind)
{
	H5L_info_t li;
	htri_t ex;
	hid_t o;
	H5I_type_t t;
	*kind = CKPT_H5_ABSENT;
	if (ckpt__h5_check_component(name, strlen(name)) != 0)
		return ckpt__fail(CKPT_EFORMAT, path, where, -1, "invalid link name '%s'", name);
	ex = H5Lexists(loc, name, H5P_DEFAULT);
	if (ex < 0)
		return ckpt__fail(CKPT_EFORMAT, path, where, -1, "cannot look up link '%s'", name);
	if (ex == 0)
		return CKPT_OK;
	if (H5Lget_info(loc, name, &li, H5P_DEFAULT) < 0)
		return ckpt__fail(CKPT_EFORMAT, path, where, -1, "cannot read link '%s'", name);
	if (li.type == H5L_TYPE_SOFT)
		return ckpt__fail(CKPT_EUNSUPPORTED, path, where, -1, "refusing soft link '%s' (only hard links are followed)", name);
	if (li.type == H5L_TYPE_EXTERNAL)
		return ckpt__fail(CKPT_EUNSUPPORTED, path, where, -1, "refusing external link '%s' (it points into another file)", name);
	if (li.type != H5L_TYPE_HARD)
		return ckpt__fail(CKPT_EUNSUPPORTED, path, where, -1, "refusing user-defined link '%s' (type %d)", name, (int)li.type);
	o = H5Oopen(loc, name, H5P_DEFAULT);
	if (o < 0)
		return ckpt__fail(CKPT_EFORMAT, path, where, -1, "cannot open object '%s'", name);
	t = H5Iget_type(o);
	H5Oclose(o);
	if (t == H5I_GROUP)
		*kind = CKPT_H5_GROUP;
	else if (t == H5I_DATASET)
		*kind = CKPT_H5_DATASET;
	else
		return ckpt__fail(CKPT_EUNSUPPORTED, path, where, -1, "object '%s' is neither a group nor a dataset (committed datatype?)", name);
	return CKPT_OK;
}

int ckpt__h5_open(hid_t loc, const char *rel, int want, const char *path, hid_t *out)
{
	char comp[CKPT_MAX_NAME_LEN + 1];
	const char *p = rel;
	hid_t cur = loc;
	int depth = 0, rc, kind;
	*out = -1;
	CKPT_TRY(ckpt__h5_check_relpath(rel, path, "object path"));
	for (;;) {
		const char *s = strchr(p, '/');
		size_t clen = s ? (size_t)(s - p) : strlen(p);
		hid_t next;
		memcpy(comp, p, clen);
		comp[clen] = '\0';
		if (++depth > CKPT_H5_MAX_DEPTH) {
			rc = ckpt__fail(CKPT_ELIMIT, path, rel, -1, "path deeper than %d components", CKPT_H5_MAX_DEPTH);
			goto fail;
		}
		rc = ckpt__h5_child_kind(cur, comp, path, rel, &kind);
		if (rc < 0)
			goto fail;
		if (kind == CKPT_H5_ABSENT) {
			rc = ckpt__fail(CKPT_ENOTFOUND, path, rel, -1, "'%s' not found (missing component '%s')", rel, comp);
			goto fail;
		}
		if (s && kind != CKPT_H5_GROUP) {
			rc = ckpt__fail(CKPT_EFORMAT, path, rel, -1, "component '%s' of '%s' is a dataset, expected a group", comp, rel);
			goto fail;
		}
		if (!s && kind != want) {
			rc = ckpt__fail(CKPT_EFORMAT, path, rel, -1, "'%s' is a %s, expected a %s", rel,
				kind == CKPT_H5_GROUP ? "group" : "dataset", want == CKPT_H5_GROUP ? "group" : "dataset");
			goto fail;
		}
		next = kind == CKPT_H5_GROUP ? H5Gopen2(cur, comp, H5P_DEFAULT) : H5Dopen2(cur, comp, H5P_DEFAULT);
		if (next < 0) {
			rc = ckpt__fail(CKPT_EFORMAT, path, rel, -1, "HDF5 cannot open '%s'", comp);
			goto fail;
		}
		if (cur != loc)
			ckpt__h5_close(cur);
		cur = next;
		if (!s)
			break;
		p = s + 1;
	}
	*out = cur;
	return CKPT_OK;
fail:
	if (cur != loc)
		ckpt__h5_close(cur);
	return rc;
}

/* ---- group listing ---- */

typedef struct list_ctx {
	ckpt__h5_link *v;
	size_t n, cap;
	int rc;
	const char *path, *where;
} list_ctx;

static herr_t list_cb(hid_t g, const char *name, const H5L_info_t *li, void *arg)
{
	list_ctx *c = arg;
	int kind;
	(void)li;
	if (c->n >= CKPT_H5_MAX_LIST) {
		c->rc = ckpt__fail(CKPT_ELIMIT, c->path, c->where, -1, "group has more than %d links", CKPT_H5_MAX_LIST);
		return -1;
	}
	c->rc = ckpt__h5_child_kind(g, name, c->path, c->where, &kind);
	if (c->rc < 0)
		return -1;
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 16;
		ckpt__h5_link *nv = ckpt__realloc(c->v, nc * sizeof(*nv));
		if (!nv) {
			c->rc = CKPT_ENOMEM;
			return -1;
		}
		c->v = nv;
		c->cap = nc;
	}
	c->v[c->n].name = ckpt__strdup(name);
	if (!c->v[c->n].name) {
		c->rc = CKPT_ENOMEM;
		return -1;
	}
	c->v[c->n].kind = kind;
	c->n++;
	return 0;
}

int ckpt__h5_list(hid_t g, const char *path, const char *where, ckpt__h5_link **out, size_t *n)
{
	list_ctx c;
	hsize_t idx = 0;
	herr_t e;
	memset(&c, 0, sizeof(c));
	c.path = path;
	c.where = where;
	e = H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, list_cb, &c);
	if (e < 0 || c.rc < 0) {
		ckpt__h5_free_links(c.v, c.n);
		if (c.rc < 0)
			return c.rc;
		return ckpt__fail(CKPT_EFORMAT, path, where, -1, "cannot list the links of group '%s'", where ? where : "/");
	}
	*out = c.v;
	*n = c.n;
	return CKPT_OK;
}

void ckpt__h5_free_links(ckpt__h5_link *l, size_t n)
{
	size_t i;
	for (i = 0; l && i < n; i++)
		ckpt__free(l[i].name);
	ckpt__free(l);
}

/* ---- attributes ---- */

int ckpt__h5_attr_exists(hid_t obj, const char *name, int *exists)
{
	htri_t e = H5Aexists(obj, name);
	*exists = e > 0;
	if (e < 0)
		return ckpt__fail(CKPT_EFORMAT, NULL, name, -1, "cannot look up attribute '%s' (corrupt object header?)", name);
	return CKPT_OK;
}

void ckpt__h5_free_strings(char **s, size_t n)
{
	size_t i;
	for (i = 0; s && i < n; i++)
		ckpt__free(s[i]);
	ckpt__free(s);
}

/* Copy a fixed-length item: strip trailing NULs (no terminator is assumed); an embedded NUL is an error. */
static int copy_fixed(const char *src, size_t size, char **out)
{
	size_t len = size;
	while (len > 0 && src[len - 1] == '\0')
		len--;
	if (memchr(src, '\0', len))
		return -1;
	*out = ckpt__strndup(src, len);
	return *out ? 0 : 1;
}

/*
 * Read all items of a string attribute. Returns ENOTFOUND when absent,
 * EFORMAT for a non-string (caller decides about empty non-strings).
 */
static int read_attr_strings(hid_t obj, const char *name, const char *path, const char *where,
	char ***out, size_t *n, int *nonstring_empty)
{
	hid_t a = -1, ft = -1, sp = -1, mt = -1;
	hssize_t np;
	int rc = CKPT_OK, exists;
	char **items = NULL;
	size_t i, count = 0;
	*out = NULL;
	*n = 0;
	if (nonstring_empty)
		*nonstring_empty = 0;
	if (ckpt__h5_attr_exists(obj, name, &exists) < 0)
		return ckpt__fail(CKPT_EFORMAT, path, where, -1, "cannot check attribute '%s'", name);
	if (!exists)
		return ckpt__fail(CKPT_ENOTFOUND, path, where, -1, "attribute '%s' not found", name);
	a = H5Aopen(obj, name, H5P_DEFAULT);
	if (a < 0) {
		rc = ckpt__fail(CKPT_EFORMAT, path, where, -1, "cannot open attribute '%s'", name);
		goto out;
	}
	ft = H5Aget_type(a);
	sp = H5Aget_space(a);
	if (ft < 0 || sp < 0 || (np = H5Sget_simple_extent_npoints(sp)) < 0) {
		rc = ckpt__fail(CKPT_EFORMAT, path, where, -1, "attribute '%s': unreadable type or dataspace", name);
		goto out;
	}
	if (H5Aget_storage_size(a) > CKPT_MAX_ATTR_BYTES) {
		rc = ckpt__fail(CKPT_ELIMIT, path, where, -1, "attribute '%s' stores %llu bytes, cap is %llu", name,
			(unsigned long long)H5Aget_storage_size(a), (unsigned long long)CKPT_MAX_ATTR_BYTES);
		goto out;
	}
	if (H5Tget_class(ft) != H5T_STRING) {
		if (np == 0 && nonstring_empty) {
			*nonstring_empty = 1;
			goto out;
		}
		rc = ckpt__fail(CKPT_EFORMAT, path, where, -1, "attribute '%s' is not a string (HDF5 class %d, %lld elements)",
			name, (int)H5Tget_class(ft), (long long)np);
		goto out;
	}
	if ((uint64_t)np > CKPT_H5_MAX_LIST) {
		rc = ckpt__fail(CKPT_ELIMIT, path, where, -1, "attribute '%s' has %lld items, cap is %d", name, (long long)np, CKPT_H5_MAX_LIST);
		goto out;
	}
	count = (size_t)np;
	items = ckpt__calloc(count ? count : 1, sizeof(char *));
	if (!items) {
		rc = CKPT_ENOMEM;
		goto out;
	}
	if (H5Tis_variable_str(ft) > 0) {
		h5_image *im = image_of(obj);
		unsigned char *raw;
		uint64_t total = 0;
		if (!im || !im->raw_ok) {
			rc = ckpt__fail(CKPT_EUNSUPPORTED, path, where, -1,
				"attribute '%s': variable-length strings outside a checked file image (or with addresses other than 8 bytes)", name);
			goto out;
		}
		raw = ckpt__calloc(count ? count : 1, RAW_VLEN_SIZE);
		if (!raw) {
			rc = CKPT_ENOMEM;
			goto out;
		}
		if (count && H5Aread(a, raw_vlen_type, raw) < 0) {
			ckpt__free(raw);
			rc = ckpt__fail(CKPT_EFORMAT, path, where, -1, "attribute '%s': cannot read variable-length string ids", name);
			goto out;
		}
		for (i = 0; i < count && rc == CKPT_OK; i++) {
			const unsigned char *id = raw + i * RAW_VLEN_SIZE;
			uint32_t len = (uint32_t)rd_le(id, 4);
			const char *bytes = len ? heap_bytes(im, rd_le(id + 4, 8), (uint32_t)rd_le(id + 12, 4), len) : "";
			total += len;
			if (total > CKPT_MAX_ATTR_BYTES)
				rc = ckpt__fail(CKPT_ELIMIT, path, where, -1, "attribute '%s': strings exceed %llu bytes", name,
					(unsigned long long)CKPT_MAX_ATTR_BYTES);
			else if (!bytes)
				rc = ckpt__fail(CKPT_EFORMAT, path, where, -1,
					"attribute '%s' item %zu: global heap reference (collection 0x%llx, object %u, %u bytes) is not in the file",
					name, i, (unsigned long long)rd_le(id + 4, 8), (unsigned)rd_le(id + 12, 4), (unsigned)len);
			else if (!(items[i] = ckpt__strndup(bytes, strnlen(bytes, len))))
				rc = CKPT_ENOMEM;
		}
		ckpt__free(raw);
	} else {
		size_t sz = H5Tget_size(ft);
		uint64_t total;
		char *buf;
		if (sz == 0 || ckpt__mul_u64(sz, count, &total) || total > CKPT_MAX_ATTR_BYTES) {
			rc = ckpt__fail(CKPT_ELIMIT, path, where, -1, "attribute '%s': %zu items of %zu bytes exceed the cap", name, count, sz);
			goto out;
		}
		buf = ckpt__malloc(total ? total : 1);
		if (!buf) {
			rc = CKPT_ENOMEM;
			goto out;
		}
		mt = H5Tcopy(ft);
		if (count && H5Aread(a, mt, buf) < 0) {
			ckpt__free(buf);
			rc = ckpt__fail(CKPT_EFORMAT, path, where, -1, "attribute '%s': cannot read fixed-length strings", name);
			goto out;
		}
		for (i = 0; i < count && rc == CKPT_OK; i++) {
			int e = copy_fixed(buf + i * sz, sz, &items[i]);
			if (e < 0)
				rc = ckpt__fail(CKPT_EFORMAT, path, where, -1, "attribute '%s' item %zu has an embedded NUL", name, i);
			else if (e > 0)
				rc = CKPT_ENOMEM;
		}
		ckpt__free(buf);
	}
out:
	ckpt__h5_close(mt);
	ckpt__h5_close(sp);
	ckpt__h5_close(ft);
	ckpt__h5_close(a);
	if (rc < 0) {
		ckpt__h5_free_strings(items, count);
		return rc;
	}
	*out = items;
	*n = items ? count : 0;
	return CKPT_OK;
}

int ckpt__h5_attr_string(hid_t obj, const char *name, const char *path, const char *where, char **out)
{
	char **v;
	size_t n;
	*out = NULL;
	CKPT_TRY(read_attr_strings(obj, name, path, where, &v, &n, NULL));
	if (n != 1) {
		ckpt__h5_free_strings(v, n);
		return ckpt__fail(CKPT_EFORMAT, path, where, -1, "attribute '%s': expected one string, found %zu", name, n);
	}
	*out = v[0];
	ckpt__free(v);
	return CKPT_OK;
}

int ckpt__h5_attr_strings(hid_t obj, const char *name, const char *path, const char *where, char ***out, size_t *n)
{
	int empty;
	CKPT_TRY(read_attr_strings(obj, name, path, where, out, n, &empty));
	if (empty) {
		*out = NULL;
		*n = 0;
	}
	return CKPT_OK;
}

int ckpt__h5_attr_list_chunked(hid_t obj, const char *name, const char *path, const char *where, char ***out, size_t *n)
{
	char an[256];
	char **all = NULL;
	size_t nall = 0, k;
	int exists;
	*out = NULL;
	*n = 0;
	if (strlen(name) > 200)
		return ckpt__fail(CKPT_EINVAL, path, where, -1, "attribute name too long");
	if (ckpt__h5_attr_exists(obj, name, &exists) < 0)
		return ckpt__fail(CKPT_EFORMAT, path, where, -1, "cannot check attribute '%s'", name);
	if (exists)
		return ckpt__h5_attr_strings(obj, name, path, where, out, n);
	for (k = 0;; k++) {
		char **part;
		size_t np, i;
		int rc;
		if (k >= CKPT_H5_MAX_ATTR_CHUNKS) {
			ckpt__h5_free_strings(all, nall);
			return ckpt__fail(CKPT_ELIMIT, path, where, -1, "attribute '%s' is split into more than %d chunks", name, CKPT_H5_MAX_ATTR_CHUNKS);
		}
		snprintf(an, sizeof(an), "%s%zu", name, k);
		if (ckpt__h5_attr_exists(obj, an, &exists) < 0) {
			ckpt__h5_free_strings(all, nall);
			return ckpt__fail(CKPT_EFORMAT, path, where, -1, "cannot check attribute '%s'", an);
		}
		if (!exists)
			break;
		rc = ckpt__h5_attr_strings(obj, an, path, where, &part, &np);
		if (rc < 0) {
			ckpt__h5_free_strings(all, nall);
			return rc;
		}
		if (nall + np > CKPT_H5_MAX_LIST) {
			ckpt__h5_free_strings(part, np);
			ckpt__h5_free_strings(all, nall);
			return ckpt__fail(CKPT_ELIMIT, path, where, -1, "attribute '%s*' has more than %d items", name, CKPT_H5_MAX_LIST);
		}
		if (np) {
			char **na = ckpt__realloc(all, (nall + np) * sizeof(char *));
			if (!na) {
				ckpt__h5_free_strings(part, np);
				ckpt__h5_free_strings(all, nall);
				return CKPT_ENOMEM;
			}
			all = na;
			for (i = 0; i < np; i++)
				all[nall++] = part[i];
		}
		ckpt__free(part);
	}
	if (k == 0)
		return ckpt__fail(CKPT_ENOTFOUND, path, where, -1, "attribute '%s' (or '%s0') not found", name, name);
	*out = all;
	*n = nall;
	return CKPT_OK;
}

/* ---- datasets ---- */

static int is_half(hid_t t)
{
	size_t spos, epos, esize, mpos, msize;
	if (H5Tget_size(t) != 2 || H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) < 0)
		return 0;
	return spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && H5Tget_ebias(t) == 15;
}

/* Map the file type to a dtype and a memory type (owned by the caller). */
static int map_type(hid_t ds, hid_t ft, const char *path, const char *name, ckpt__h5_dsinfo *info, int *bf16)
{
	H5T_class_t cls = H5Tget_class(ft);
	size_t sz = H5Tget_size(ft);
	H5T_order_t order = H5Tget_order(ft);
	int exists;
	info->raw = 0;
	*bf16 = 0;
	if (ckpt__h5_attr_exists(ds, "dtype", &exists) == 0 && exists) {
		char *s = NULL;
		if (ckpt__h5_attr_string(ds, "dtype", path, name, &s) == 0 && strcmp(s, "bfloat16") == 0)
			*bf16 = 1;
		ckpt__free(s);
	}
	if (*bf16) {
		if (sz != 2)
			return ckpt__fail(CKPT_EFORMAT, path, name, -1, "dtype attribute says bfloat16 but elements are %zu bytes", sz);
		if ((cls == H5T_INTEGER || cls == H5T_FLOAT) && order != H5T_ORDER_LE)
			return ckpt__fail(CKPT_EUNSUPPORTED, path, name, -1, "big-endian bfloat16 data");
		info->dtype = CKPT_DT_BFLOAT16;
		info->raw = 1;
		return CKPT_OK;
	}
	switch (cls) {
	case H5T_FLOAT:
		if (sz == 4 && H5Tequal(ft, H5T_IEEE_F32LE) <= 0 && H5Tequal(ft, H5T_IEEE_F32BE) <= 0)
			break;
		if (sz == 8 && H5Tequal(ft, H5T_IEEE_F64LE) <= 0 && H5Tequal(ft, H5T_IEEE_F64BE) <= 0)
			break;
		if (sz == 4) { info->dtype = CKPT_DT_FLOAT; return CKPT_OK; }
		if (sz == 8) { info->dtype = CKPT_DT_DOUBLE; return CKPT_OK; }
		if (sz == 2 && is_half(ft)) {
			if (order != H5T_ORDER_LE)
				return ckpt__fail(CKPT_EUNSUPPORTED, path, name, -1, "big-endian float16 data");
			info->dtype = CKPT_DT_HALF;
			info->raw = 1;
			return CKPT_OK;
		}
		break;
	case H5T_INTEGER: {
		int sgn = H5Tget_sign(ft) == H5T_SGN_2;
		if (H5Tget_precision(ft) != sz * 8 || H5Tget_offset(ft) != 0)
			break;
		switch (sz) {
		case 1: info->dtype = sgn ? CKPT_DT_INT8 : CKPT_DT_UINT8; return CKPT_OK;
		case 2: info->dtype = sgn ? CKPT_DT_INT16 : CKPT_DT_UINT16; return CKPT_OK;
		case 4: info->dtype = sgn ? CKPT_DT_INT32 : CKPT_DT_UINT32; return CKPT_OK;
		case 8: info->dtype = sgn ? CKPT_DT_INT64 : CKPT_DT_UINT64; return CKPT_OK;
		default: break;
		}
		break;
	}
	case H5T_ENUM:
		/* numpy bool as h5py writes it: enum over a 1-byte integer. */
		if (sz == 1 && H5Tget_nmembers(ft) == 2) {
			info->dtype = CKPT_DT_BOOL;
			info->raw = 1;
			return CKPT_OK;
		}
		break;
	default:
		break;
	}
	return ckpt__fail(CKPT_EUNSUPPORTED, path, name, -1, "unsupported HDF5 element type (class %d, %zu bytes)", (int)cls, sz);
}

int ckpt__h5_dataset_info(hid_t ds, const char *path, const char *name, uint64_t image_size, uint64_t budget,
	ckpt__h5_dsinfo *info)
{
	hid_t ft = -1, sp = -1, pl = -1;
	int rc = CKPT_OK, rank, bf16, i;
	hsize_t dims[CKPT_MAX_RANK];
	uint64_t storage, esize;
	H5D_layout_t layout;
	memset(info, 0, sizeof(*info));
	info->offset = -1;
	pl = H5Dget_create_plist(ds);
	if (pl < 0) {
		rc = ckpt__fail(CKPT_EFORMAT, path, name, -1, "cannot read the dataset creation properties");
		goto out;
	}
	layout = H5Pget_layout(pl);
	if (layout == H5D_VIRTUAL) {
		rc = ckpt__fail(CKPT_EUNSUPPORTED, path, name, -1, "refusing virtual dataset (its data lives in other files)");
		goto out;
	}
	if (H5Pget_external_count(pl) != 0) {
		rc = ckpt__fail(CKPT_EUNSUPPORTED, path, name, -1, "refusing dataset with external storage (%d external files)", H5Pget_external_count(pl));
		goto out;
	}
	if (layout != H5D_CONTIGUOUS && layout != H5D_COMPACT && layout != H5D_CHUNKED) {
		rc = ckpt__fail(CKPT_EUNSUPPORTED, path, name, -1, "unsupported dataset layout %d", (int)layout);
		goto out;
	}
	if (layout == H5D_CHUNKED && H5Pget_nfilters(pl) != 0) {
		rc = ckpt__fail(CKPT_EUNSUPPORTED, path, name, -1, "refusing chunked dataset with %d filter(s): Keras writes contiguous, unfiltered data",
			H5Pget_nfilters(pl));
		goto out;
	}
	ft = H5Dget_type(ds);
	sp = H5Dget_space(ds);
	if (ft < 0 || sp < 0) {
		rc = ckpt__fail(CKPT_EFORMAT, path, name, -1, "cannot read the dataset type or dataspace");
		goto out;
	}
	rc = map_type(ds, ft, path, name, info, &bf16);
	if (rc < 0)
		goto out;
	if (H5Sget_simple_extent_type(sp) == H5S_NULL) {
		rc = ckpt__fail(CKPT_EUNSUPPORTED, path, name, -1, "dataset has a null dataspace (no value)");
		goto out;
	}
	rank = H5Sget_simple_extent_ndims(sp);
	if (rank < 0 || rank > CKPT_MAX_RANK) {
		rc = ckpt__fail(rank < 0 ? CKPT_EFORMAT : CKPT_ELIMIT, path, name, -1, "dataset rank %d outside [0, %d]", rank, CKPT_MAX_RANK);
		goto out;
	}
	H5Sget_simple_extent_dims(sp, dims, NULL);
	info->shape.rank = rank;
	for (i = 0; i < rank; i++) {
		if (dims[i] > (hsize_t)INT64_MAX) {
			rc = ckpt__fail(CKPT_EFORMAT, path, name, -1, "dimension %d is %llu", i, (unsigned long long)dims[i]);
			goto out;
		}
		info->shape.dims[i] = (int64_t)dims[i];
	}
	if (ckpt_shape_nbytes(&info->shape, info->dtype, &info->nbytes) < 0) {
		rc = ckpt__fail(CKPT_ELIMIT, path, name, -1, "shape overflows a 64-bit byte count");
		goto out;
	}
	esize = ckpt_dtype_size(info->dtype);
	if (H5Tget_size(ft) != esize) {
		rc = ckpt__fail(CKPT_EFORMAT, path, name, -1, "element size %zu, expected %llu", H5Tget_size(ft), (unsigned long long)esize);
		goto out;
	}
	storage = H5Dget_storage_size(ds);
	if (info->nbytes > storage) {
		rc = ckpt__fail(CKPT_EFORMAT, path, name, -1,
			"shape bomb: shape declares %llu bytes but only %llu bytes are stored", (unsigned long long)info->nbytes,
			(unsigned long long)storage);
		goto out;
	}
	if (info->nbytes > budget) {
		rc = ckpt__fail(CKPT_ELIMIT, path, name, -1, "dataset needs %llu bytes, memory budget is %llu",
			(unsigned long long)info->nbytes, (unsigned long long)budget);
		goto out;
	}
	if (layout == H5D_CONTIGUOUS && info->nbytes > 0) {
		haddr_t a = H5Dget_offset(ds);
		uint64_t end;
		if (a == HADDR_UNDEF || ckpt__add_u64(a, info->nbytes, &end) || end > image_size) {
			rc = ckpt__fail(CKPT_EFORMAT, path, name, a == HADDR_UNDEF ? -1 : (int64_t)a,
				"data of %llu bytes lies outside the file (%llu bytes)", (unsigned long long)info->nbytes,
				(unsigned long long)image_size);
			goto out;
		}
		info->offset = (int64_t)a;
	}
out:
	ckpt__h5_close(pl);
	ckpt__h5_close(sp);
	ckpt__h5_close(ft);
	return rc;
}

int ckpt__h5_dataset_read(hid_t ds, const ckpt__h5_dsinfo *info, const char *path, const char *name, void *dst)
{
	hid_t mt;
	herr_t e;
	int own = 0;
	if (info->nbytes == 0)
		return CKPT_OK;
	if (info->raw) {
		mt = H5Dget_type(ds);
		own = 1;
	} else {
		switch (info->dtype) {
		case CKPT_DT_FLOAT: mt = H5T_IEEE_F32LE; break;
		case CKPT_DT_DOUBLE: mt = H5T_IEEE_F64LE; break;
		case CKPT_DT_INT8: mt = H5T_STD_I8LE; break;
		case CKPT_DT_INT16: mt = H5T_STD_I16LE; break;
		case CKPT_DT_INT32: mt = H5T_STD_I32LE; break;
		case CKPT_DT_INT64: mt = H5T_STD_I64LE; break;
		case CKPT_DT_UINT8: mt = H5T_STD_U8LE; break;
		case CKPT_DT_UINT16: mt = H5T_STD_U16LE; break;
		case CKPT_DT_UINT32: mt = H5T_STD_U32LE; break;
		case CKPT_DT_UINT64: mt = H5T_STD_U64LE; break;
		default:
			return ckpt__fail(CKPT_EUNSUPPORTED, path, name, -1, "no memory type for %s", ckpt_dtype_name(info->dtype));
		}
	}
	e = H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst);
	if (own)
		H5Tclose(mt);
	if (e < 0)
		return ckpt__fail(CKPT_EFORMAT, path, name, info->offset, "HDF5 failed to read %llu bytes of data",
			(unsigned long long)info->nbytes);
	return CKPT_OK;
}

int ckpt__h5_type_for(ckpt_dtype dt, hid_t *out)
{
	hid_t t;
	*out = -1;
	switch (dt) {
	case CKPT_DT_FLOAT: t = H5Tcopy(H5T_IEEE_F32LE); break;
	case CKPT_DT_DOUBLE: t = H5Tcopy(H5T_IEEE_F64LE); break;
	case CKPT_DT_INT8: t = H5Tcopy(H5T_STD_I8LE); break;
	case CKPT_DT_INT16: t = H5Tcopy(H5T_STD_I16LE); break;
	case CKPT_DT_INT32: t = H5Tcopy(H5T_STD_I32LE); break;
	case CKPT_DT_INT64: t = H5Tcopy(H5T_STD_I64LE); break;
	case CKPT_DT_UINT8: t = H5Tcopy(H5T_STD_U8LE); break;
	case CKPT_DT_UINT16: t = H5Tcopy(H5T_STD_U16LE); break;
	case CKPT_DT_UINT32: t = H5Tcopy(H5T_STD_U32LE); break;
	case CKPT_DT_UINT64: t = H5Tcopy(H5T_STD_U64LE); break;
	case CKPT_DT_HALF:
		/* h5py's float16: IEEE binary16, little-endian. */
		t = H5Tcopy(H5T_IEEE_F32LE);
		if (t >= 0) {
			H5Tset_fields(t, 15, 10, 5, 0, 10);
			H5Tset_size(t, 2);
			H5Tset_ebias(t, 15);
		}
		break;
	case CKPT_DT_BOOL: {
		/* h5py's numpy bool: enum over int8 {FALSE: 0, TRUE: 1}. */
		signed char v;
		t = H5Tenum_create(H5T_NATIVE_SCHAR);
		if (t >= 0) {
			v = 0;
			H5Tenum_insert(t, "FALSE", &v);
			v = 1;
			H5Tenum_insert(t, "TRUE", &v);
		}
		break;
	}
	case CKPT_DT_BFLOAT16:
		t = H5Tcreate(H5T_OPAQUE, 2);
		if (t >= 0)
			H5Tset_tag(t, "bfloat16");
		break;
	default:
		return ckpt__fail(CKPT_EUNSUPPORTED, NULL, NULL, -1, "Keras HDF5 cannot store dtype %s", ckpt_dtype_name(dt));
	}
	if (t < 0)
		return ckpt__fail(CKPT_ERROR, NULL, NULL, -1, "HDF5 could not create a datatype");
	*out = t;
	return CKPT_OK;
}

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
 *  - H5O__attr_decode (reached from H5Aexists, H5Aopen, H5Aiterate: every
 *    attribute lookup decodes every attribute message of the object) trusts
 *    the name, datatype and dataspace sizes of the message; so every object
 *    header is checked by us (check_object, below) before libhdf5 may decode
 *    its attributes.
 */
#include <string.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
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

/*
 * libhdf5's own clean-up at exit (H5_term_library) crashes on a file or
 * dataset whose close failed (1.10 drops the id, keeps a half-closed object:
 * H5F__close_cb). So libhdf5 registers no atexit handler of its own; ours,
 * registered when libhdf5 is loaded (h5_lib.c), closes libhdf5 at exit unless a
 * close failed, and then leaves the process to the kernel (nothing of ours
 * is left to flush: a file whose close failed was given up). An application
 * that initialized libhdf5 before loading us keeps libhdf5's own handler.
 */
static int h5_unclean;

void ckpt__h5_mark_unclean(void) { __atomic_store_n(&h5_unclean, 1, __ATOMIC_RELAXED); }
int ckpt__h5_is_unclean(void) { return __atomic_load_n(&h5_unclean, __ATOMIC_RELAXED); }

static void h5_term_at_exit(void)
{
	if (!ckpt__h5_is_unclean())
		H5close();
}

void ckpt__h5_take_over_exit(void)
{
	/* the table itself: this runs inside the load, before the accessor may be used */
	if (ckpt__h5_fn.p_H5dont_atexit() >= 0)
		atexit(h5_term_at_exit);
}

void ckpt__h5_close(hid_t id)
{
	herr_t e = 0;
	if (id < 0)
		return;
	switch (H5Iget_type(id)) {
	case H5I_FILE: e = H5Fclose(id); break;
	case H5I_GROUP: e = H5Gclose(id); break;
	case H5I_DATASET: e = H5Dclose(id); break;
	case H5I_ATTR: e = H5Aclose(id); break;
	case H5I_DATATYPE: H5Tclose(id); break;
	case H5I_DATASPACE: H5Sclose(id); break;
	case H5I_GENPROP_LST: H5Pclose(id); break;
	default: break;
	}
	if (e < 0) /* a flush failed: the object may linger half-closed */
		ckpt__h5_mark_unclean();
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
	int so, sl;             /* sizes of file addresses / lengths (0: superblock not understood) */
	unsigned long fileno;   /* HDF5's number for the open file */
	char *path;             /* for messages */
	uint64_t *checked;      /* open-addressed set of object headers already checked (addr + 1) */
	size_t nchecked, capchecked;
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

void ckpt__h5_prepare(void)
{
	/* library set-up and our conversion, once, here: every sandboxed child inherits them */
	H5open();
	ckpt__h5_quiet();
	(void)raw_vlen_init();
}

static h5_image *image_of_addr(hid_t obj, haddr_t *addr)
{
	H5O_info_t oi;
	h5_image *im;
	if (H5Oget_info2(obj, &oi, H5O_INFO_BASIC) < 0)
		return NULL;
	if (addr)
		*addr = oi.addr;
	for (im = images; im; im = im->next)
		if (im->fileno == oi.fileno)
			return im;
	return NULL;
}

static h5_image *image_of(hid_t obj) { return image_of_addr(obj, NULL); }

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

/* ---- object header pre-check ----
 *
 * libhdf5 1.10.8 decodes an attribute message (H5O__attr_decode) trusting
 * its three size fields: it strdup()s the name, decodes the datatype and the
 * dataspace without a bound, then copies nelem * element-size data bytes
 * from after them, checking that count only against the whole message size.
 * A dataspace size of 136 instead of 8 (tests/fuzz/regressions/keras_h5/
 * libhdf5_H5Aexists_heap_overflow_2.h5) moves the data past the end of the
 * header chunk and H5Aexists reads libhdf5's heap. No libhdf5 call looks an
 * attribute up without decoding every attribute message of the object, so
 * before an object is used we walk its header in the image ourselves:
 *
 *   v1 header: version 1 | reserved | u16 nmesgs | u32 refcount | u32 chunk size | pad 4,
 *              messages: u16 type | u16 size | u8 flags | 3 reserved | data
 *   v2 header: "OHDR" | version 2 | flags | [times 16] | [phase change 4] | chunk size (1/2/4/8),
 *              messages: u8 type | u16 size | u8 flags | [u16 creation order] | data; checksum 4
 *   continuation (0x10): address | length, to a v1 chunk or an "OCHK" chunk (+ checksum 4)
 *   attribute (0x0C): version 1-3 | flags | u16 name | u16 datatype | u16 dataspace |
 *              [v3: encoding] | name | datatype | dataspace | data (v1 pads each part to 8)
 *   attribute info (0x15): dense storage (a fractal heap) is refused
 *
 * Every part must lie inside its message and every message inside its chunk;
 * datatypes are walked as libhdf5's H5O_dtype_decode_helper reads them.
 */
#define OH_MAX_CHUNKS 1024
#define DT_MAX_DEPTH 16

typedef struct oh_ctx {
	const h5_image *im;
	const char *where;
} oh_ctx;

static int oh_fail(const oh_ctx *c, uint64_t off, const char *fmt, ...) CKPT_PRINTF(3, 4);
static int oh_fail(const oh_ctx *c, uint64_t off, const char *fmt, ...)
{
	char msg[320];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ckpt__fail(CKPT_EFORMAT, c->im->path, c->where, (int64_t)off, "corrupt object header: %s", msg);
}

/* A NUL-terminated name inside [p, p + len): its length, or -1. */
static long dt_name(const unsigned char *p, size_t len)
{
	const unsigned char *z = memchr(p, 0, len);
	return z ? (long)(z - p) : -1;
}

/* Bytes needed for a member offset in a v3 compound (H5VM_limit_enc_size). */
static unsigned enc_size(uint64_t limit)
{
	unsigned lg = 0;
	while (limit >>= 1)
		lg++;
	return lg / 8 + 1;
}

static int check_dtype(const oh_ctx *c, uint64_t off, size_t len, int depth, size_t *used, uint64_t *esize);

/* In check_dtype and its helpers: `n` more bytes must be left after `pos` of the datatype's `len`. */
#define NEED(n, what) do { if ((uint64_t)(n) > len - pos) \
		return oh_fail(c, off + pos, "datatype %s needs %llu bytes, %zu left", what, (unsigned long long)(n), len - pos); } while (0)

/*
 * The members of the compound datatype at `off` (version `ver`, class bits
 * `bits`, `size`-byte elements), from *at bytes in; *at: past them.
 */
static int check_dt_compound(const oh_ctx *c, uint64_t off, size_t len, int depth, unsigned ver, unsigned bits,
	uint64_t size, size_t *at)
{
	const unsigned char *p = c->im->buf + off;
	unsigned nm = bits & 0xffff, onb = enc_size(size), i;
	uint64_t sub = 0;
	size_t pos = *at, u;
	if (nm == 0)
		return oh_fail(c, off, "compound datatype without members");
	for (i = 0; i < nm; i++) {
		long nl = dt_name(p + pos, len - pos);
		uint64_t moff, end;
		unsigned nd = 0;
		uint32_t dims[4] = { 0, 0, 0, 0 };
		if (nl < 0)
			return oh_fail(c, off + pos, "compound member %u: name without terminator", i);
		u = ver >= 3 ? (size_t)nl + 1 : ((size_t)nl + 8) / 8 * 8;
		NEED(u, "member name");
		pos += u;
		u = ver >= 3 ? onb : 4;
		NEED(u, "member offset");
		moff = rd_le(p + pos, (int)u);
		pos += u;
		if (ver == 1) {
			NEED(28, "member dimensions");
			nd = p[pos];
			if (nd > 4)
				return oh_fail(c, off + pos, "compound member %u has %u dimensions (at most 4)", i, nd);
			for (u = 0; u < 4; u++)
				dims[u] = (uint32_t)rd_le(p + pos + 12 + 4 * u, 4);
			pos += 28;
		}
		CKPT_TRY(check_dtype(c, off + pos, len - pos, depth + 1, &u, &sub));
		pos += u;
		for (u = 0; u < nd; u++)
			if (ckpt__mul_u64(sub, dims[u], &sub))
				return oh_fail(c, off, "compound member %u: array size overflows", i);
		if (ckpt__add_u64(moff, sub, &end) || end > size)
			return oh_fail(c, off, "compound member %u (offset %llu, %llu bytes) outside the %llu-byte element", i,
				(unsigned long long)moff, (unsigned long long)sub, (unsigned long long)size);
	}
	*at = pos;
	return CKPT_OK;
}

/* The enumeration datatype at `off` (as check_dt_compound): base type, names, values. */
static int check_dt_enum(const oh_ctx *c, uint64_t off, size_t len, int depth, unsigned ver, unsigned bits,
	uint64_t size, size_t *at)
{
	const unsigned char *p = c->im->buf + off;
	unsigned nm = bits & 0xffff, i;
	uint64_t vbytes, sub = 0;
	size_t pos = *at, u;
	CKPT_TRY(check_dtype(c, off + pos, len - pos, depth + 1, &u, &sub));
	pos += u;
	if (sub != size)
		return oh_fail(c, off, "enumeration of %llu bytes over a %llu-byte base type", (unsigned long long)size,
			(unsigned long long)sub);
	for (i = 0; i < nm; i++) {
		long nl = dt_name(p + pos, len - pos);
		if (nl < 0)
			return oh_fail(c, off + pos, "enumeration member %u: name without terminator", i);
		u = ver >= 3 ? (size_t)nl + 1 : ((size_t)nl + 8) / 8 * 8;
		NEED(u, "member name");
		pos += u;
	}
	if (ckpt__mul_u64(nm, sub, &vbytes))
		return oh_fail(c, off, "enumeration values overflow");
	NEED(vbytes, "values");
	pos += (size_t)vbytes;
	*at = pos;
	return CKPT_OK;
}

/* The array datatype at `off` (as check_dt_compound): rank, dimensions, element type. */
static int check_dt_array(const oh_ctx *c, uint64_t off, size_t len, int depth, unsigned ver, uint64_t size,
	size_t *at)
{
	const unsigned char *p = c->im->buf + off;
	unsigned nd, i;
	uint64_t nelem, sub = 0;
	size_t pos = *at, u;
	if (ver < 2)
		return oh_fail(c, off, "array datatype of version 1");
	NEED(1, "rank");
	nd = p[pos];
	if (nd > 32)
		return oh_fail(c, off + pos, "array datatype of rank %u", nd);
	u = (ver < 3 ? 4 : 1) + (size_t)nd * (ver < 3 ? 8 : 4);
	NEED(u, "dimensions");
	nelem = 1;
	for (i = 0; i < nd; i++)
		if (ckpt__mul_u64(nelem, rd_le(p + pos + (ver < 3 ? 4 : 1) + 4 * i, 4), &nelem))
			return oh_fail(c, off, "array datatype size overflows");
	pos += u;
	CKPT_TRY(check_dtype(c, off + pos, len - pos, depth + 1, &u, &sub));
	pos += u;
	if (ckpt__mul_u64(nelem, sub, &sub) || sub != size)
		return oh_fail(c, off, "array datatype of %llu bytes holds %llu bytes of elements", (unsigned long long)size,
			(unsigned long long)sub);
	*at = pos;
	return CKPT_OK;
}

/*
 * Check the datatype encoded at image offset `off`, at most `len` bytes.
 * Sets *used (bytes libhdf5 will read) and *esize (the element size it will use).
 */
static int check_dtype(const oh_ctx *c, uint64_t off, size_t len, int depth, size_t *used, uint64_t *esize)
{
	const unsigned char *p = c->im->buf + off;
	unsigned ver, cls, bits;
	uint64_t size, sub = 0;
	size_t pos = 8, u;
	if (depth > DT_MAX_DEPTH)
		return oh_fail(c, off, "datatype nested deeper than %d", DT_MAX_DEPTH);
	if (len < 8)
		return oh_fail(c, off, "datatype needs 8 bytes, %zu left", len);
	ver = p[0] >> 4;
	cls = p[0] & 15;
	bits = (unsigned)rd_le(p + 1, 3);
	size = rd_le(p + 4, 4);
	if (ver < 1 || ver > 3)
		return oh_fail(c, off, "datatype version %u", ver);
	if (size == 0)
		return oh_fail(c, off, "datatype of size 0");
	switch (cls) {
	case 0: /* fixed-point */
	case 4: /* bitfield */
		NEED(4, "properties");
		pos += 4;
		break;
	case 1: /* floating-point */
		NEED(12, "properties");
		pos += 12;
		break;
	case 2: /* time */
		NEED(2, "properties");
		pos += 2;
		break;
	case 3: /* string */
	case 7: /* reference */
		break;
	case 5: /* opaque: tag */
		NEED(bits & 0xff, "opaque tag");
		pos += bits & 0xff;
		break;
	case 6: /* compound */
		CKPT_TRY(check_dt_compound(c, off, len, depth, ver, bits, size, &pos));
		break;
	case 8: /* enumeration: base type, names, values */
		CKPT_TRY(check_dt_enum(c, off, len, depth, ver, bits, size, &pos));
		break;
	case 9: /* variable-length: base type; stored as length | heap address | index */
		CKPT_TRY(check_dtype(c, off + pos, len - pos, depth + 1, &u, &sub));
		pos += u;
		if (size != (uint64_t)(4 + c->im->so + 4))
			return oh_fail(c, off, "variable-length datatype of %llu bytes, expected %d", (unsigned long long)size,
				4 + c->im->so + 4);
		break;
	case 10: /* array */
		CKPT_TRY(check_dt_array(c, off, len, depth, ver, size, &pos));
		break;
	default:
		return oh_fail(c, off, "unknown datatype class %u", cls);
	}
	*used = pos;
	*esize = size;
	return CKPT_OK;
}
#undef NEED

/* Check a dataspace of at most `len` bytes at `off`; *nelem as libhdf5 counts it (checked). */
static int check_dspace(const oh_ctx *c, uint64_t off, size_t len, uint64_t *nelem)
{
	const unsigned char *p = c->im->buf + off;
	unsigned ver, rank, type, i;
	size_t hdr, need;
	if (len < 4)
		return oh_fail(c, off, "dataspace needs 4 bytes, %zu given", len);
	ver = p[0];
	rank = p[1];
	if (ver != 1 && ver != 2)
		return oh_fail(c, off, "dataspace version %u", ver);
	if (rank > 32)
		return oh_fail(c, off + 1, "dataspace rank %u", rank);
	hdr = ver == 1 ? 8 : 4;
	type = ver == 1 ? (rank ? 1 : 0) : p[3];
	if (type > 2)
		return oh_fail(c, off + 3, "dataspace type %u", type);
	need = hdr + (size_t)rank * (size_t)c->im->sl * ((p[2] & 1) ? 2 : 1);
	if (need > len)
		return oh_fail(c, off, "dataspace of rank %u needs %zu bytes, the attribute gives it %zu", rank, need, len);
	*nelem = type == 2 ? 0 : 1;
	for (i = 0; type != 2 && i < rank; i++)
		if (ckpt__mul_u64(*nelem, rd_le(p + hdr + (size_t)i * c->im->sl, c->im->sl), nelem))
			return oh_fail(c, off, "dataspace element count overflows");
	return CKPT_OK;
}

/* An attribute message: `size` bytes of message data at `off`. */
static int check_attr_msg(const oh_ctx *c, uint64_t off, size_t size)
{
	const unsigned char *m = c->im->buf + off;
	unsigned ver, flags;
	size_t nl, dl, dsl, pos, dtpos, dspos, used;
	uint64_t esize = 0, nelem = 0, data;
	if (size < 8)
		return oh_fail(c, off, "attribute message of %zu bytes", size);
	ver = m[0];
	if (ver < 1 || ver > 3)
		return oh_fail(c, off, "attribute message version %u", ver);
	flags = ver >= 2 ? m[1] : 0;
	if (flags & ~3u)
		return oh_fail(c, off + 1, "attribute flags 0x%x", flags);
	if (flags)
		return ckpt__fail(CKPT_EUNSUPPORTED, c->im->path, c->where, (int64_t)off,
			"attribute with a shared datatype or dataspace (flags 0x%x) at offset %llu", flags, (unsigned long long)off);
	nl = (size_t)rd_le(m + 2, 2);
	dl = (size_t)rd_le(m + 4, 2);
	dsl = (size_t)rd_le(m + 6, 2);
	pos = ver == 3 ? 9 : 8;
#define PART(n) (ver == 1 ? ((n) + 7) / 8 * 8 : (n))
	/* name: exactly nl bytes with its terminator last (libhdf5 strdup()s it before comparing) */
	if (nl == 0 || pos + nl > size || m[pos + nl - 1] != 0 || memchr(m + pos, 0, nl - 1))
		return oh_fail(c, off, "attribute name of %zu bytes is not a terminated string inside the %zu-byte message", nl, size);
	dtpos = pos + PART(nl);
	dspos = dtpos + PART(dl);
	pos = dspos + PART(dsl);
	if (pos > size)
		return oh_fail(c, off, "attribute name %zu + datatype %zu + dataspace %zu bytes (%zu with padding) exceed the %zu-byte message",
			nl, dl, dsl, pos, size);
#undef PART
	CKPT_TRY(check_dtype(c, off + dtpos, dl, 0, &used, &esize));
	CKPT_TRY(check_dspace(c, off + dspos, dsl, &nelem));
	if (ckpt__mul_u64(nelem, esize, &data) || data > size - pos)
		return oh_fail(c, off, "attribute data of %llu elements x %llu bytes exceeds the %zu bytes left in the message",
			(unsigned long long)nelem, (unsigned long long)esize, size - pos);
	return CKPT_OK;
}

typedef struct oh_chunk {
	uint64_t start, len; /* message area */
} oh_chunk;

static int checked_has(const h5_image *im, uint64_t key)
{
	size_t i;
	if (!im->capchecked)
		return 0;
	for (i = (size_t)(key * 0x9E3779B97F4A7C15ull) & (im->capchecked - 1); im->checked[i]; i = (i + 1) & (im->capchecked - 1))
		if (im->checked[i] == key)
			return 1;
	return 0;
}

/* Remember a checked header (best effort: without memory we check it again next time). */
static void checked_add(h5_image *im, uint64_t key)
{
	size_t i;
	if (2 * (im->nchecked + 1) > im->capchecked) {
		size_t nc = im->capchecked ? 2 * im->capchecked : 64, j;
		uint64_t *nv = ckpt__calloc(nc, sizeof(*nv));
		if (!nv)
			return;
		for (j = 0; j < im->capchecked; j++)
			if (im->checked[j]) {
				for (i = (size_t)(im->checked[j] * 0x9E3779B97F4A7C15ull) & (nc - 1); nv[i]; i = (i + 1) & (nc - 1))
					;
				nv[i] = im->checked[j];
			}
		ckpt__free(im->checked);
		im->checked = nv;
		im->capchecked = nc;
	}
	for (i = (size_t)(key * 0x9E3779B97F4A7C15ull) & (im->capchecked - 1); im->checked[i]; i = (i + 1) & (im->capchecked - 1))
		;
	im->checked[i] = key;
	im->nchecked++;
}

/* Walk the object header at file address `addr` (relative to the base). */
static int check_header(h5_image *im, uint64_t addr, const char *where)
{
	oh_ctx c = { im, where };
	oh_chunk ch[OH_MAX_CHUNKS];
	size_t nch = 0, k;
	uint64_t off, end;
	const unsigned char *b = im->buf;
	int v2, track;
	unsigned hsz;
	if (checked_has(im, addr + 1))
		return CKPT_OK;
	if (!im->so)
		return ckpt__fail(CKPT_EUNSUPPORTED, im->path, where, 8,
			"superblock with address/length sizes other than 2, 4 or 8 bytes (object headers cannot be checked)");
	if (ckpt__add_u64(addr, im->base, &off) || off > im->n || im->n - off < 16)
		return oh_fail(&c, off, "header at address %llu is outside the %zu-byte file", (unsigned long long)addr, im->n);
	v2 = memcmp(b + off, "OHDR", 4) == 0;
	if (v2) {
		unsigned fl = b[off + 5];
		uint64_t p = off + 6, size;
		int w = 1 << (fl & 3);
		if (b[off + 4] != 2)
			return oh_fail(&c, off + 4, "v2 header version %u", b[off + 4]);
		p += (fl & 0x20) ? 16 : 0;
		p += (fl & 0x10) ? 4 : 0;
		if (p + (uint64_t)w > im->n)
			return oh_fail(&c, off, "truncated v2 header prefix");
		size = rd_le(b + p, w);
		p += (uint64_t)w;
		if (size > im->n - p || im->n - p - size < 4)
			return oh_fail(&c, p - (uint64_t)w, "chunk of %llu bytes (+ checksum) runs past the end of the %zu-byte file",
				(unsigned long long)size, im->n);
		track = (fl & 0x04) != 0;
		ch[nch].start = p;
		ch[nch++].len = size;
	} else {
		uint64_t size = rd_le(b + off + 8, 4);
		if (b[off] != 1)
			return oh_fail(&c, off, "unknown object header version %u", b[off]);
		track = 0;
		if (size > im->n - off - 16)
			return oh_fail(&c, off + 8, "chunk of %llu bytes runs past the end of the %zu-byte file", (unsigned long long)size,
				im->n);
		ch[nch].start = off + 16;
		ch[nch++].len = size;
	}
	hsz = v2 ? 4u + (track ? 2u : 0u) : 8u;
	for (k = 0; k < nch; k++) {
		uint64_t p = ch[k].start;
		end = ch[k].start + ch[k].len;
		while (end - p >= hsz) {
			unsigned type = v2 ? b[p] : (unsigned)rd_le(b + p, 2);
			size_t size = (size_t)rd_le(b + p + (v2 ? 1 : 2), 2);
			unsigned flags = b[p + (v2 ? 3 : 4)];
			uint64_t d = p + hsz;
			if (size > end - d)
				return oh_fail(&c, p, "message of type 0x%x and %zu bytes runs past its chunk (%llu bytes left)", type, size,
					(unsigned long long)(end - d));
			if (type == 0x10) { /* continuation */
				uint64_t ca, cl, co;
				if (size < (size_t)(im->so + im->sl))
					return oh_fail(&c, p, "continuation message of %zu bytes", size);
				ca = rd_le(b + d, im->so);
				cl = rd_le(b + d + im->so, im->sl);
				if (nch == OH_MAX_CHUNKS)
					return oh_fail(&c, p, "more than %d header chunks", OH_MAX_CHUNKS);
				if (ckpt__add_u64(ca, im->base, &co) || co > im->n || cl > im->n - co)
					return oh_fail(&c, d, "continuation chunk (address %llu, %llu bytes) outside the %zu-byte file",
						(unsigned long long)ca, (unsigned long long)cl, im->n);
				if (v2) {
					if (cl < 8 || memcmp(b + co, "OCHK", 4) != 0)
						return oh_fail(&c, co, "continuation chunk without OCHK signature");
					ch[nch].start = co + 4;
					ch[nch++].len = cl - 8;
				} else {
					ch[nch].start = co;
					ch[nch++].len = cl;
				}
			} else if (type == 0x0C) {
				if (flags & 0x02)
					return ckpt__fail(CKPT_EUNSUPPORTED, im->path, where, (int64_t)p,
						"shared attribute message at offset %llu (stored in the shared message heap)", (unsigned long long)p);
				CKPT_TRY(check_attr_msg(&c, d, size));
			} else if (type == 0x15) { /* attribute info */
				size_t q = 2;
				if (size < 2 || b[d] != 0)
					return oh_fail(&c, d, "attribute info message of %zu bytes, version %u", size, size ? b[d] : 0);
				q += (b[d + 1] & 1) ? 2 : 0;
				if (q + (size_t)im->so > size)
					return oh_fail(&c, d, "attribute info message of %zu bytes", size);
				if (rd_le(b + d + q, im->so) != (im->so == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * im->so)) - 1))
					return ckpt__fail(CKPT_EUNSUPPORTED, im->path, where, (int64_t)d,
						"dense attribute storage (fractal heap) at offset %llu is not supported", (unsigned long long)d);
			}
			p = d + size;
		}
		if (!v2 && p != end)
			return oh_fail(&c, p, "%llu stray bytes at the end of a header chunk", (unsigned long long)(end - p));
	}
	checked_add(im, addr + 1);
	return CKPT_OK;
}

/* Check the header of open object `obj` before libhdf5 decodes its attributes. */
static int check_object(hid_t obj, const char *where)
{
	haddr_t addr;
	h5_image *im = image_of_addr(obj, &addr);
	if (!im)
		return CKPT_OK; /* not one of our images (a file we are writing) */
	return check_header(im, (uint64_t)addr, where);
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
	if (path && !(im->path = ckpt__strdup(path))) {
		ckpt__free(im);
		return CKPT_ENOMEM;
	}
	/* Superblock v0/v1 (what h5py writes by default): sizes at 13/14, base address at 24/28;
	 * v2/v3: sizes at 9/10, base address at 12. */
	if (n >= 16 && (b[8] == 0 || b[8] == 1)) {
		im->so = b[13];
		im->sl = b[14];
	} else if (n >= 16 && (b[8] == 2 || b[8] == 3)) {
		im->so = b[9];
		im->sl = b[10];
	}
	{
		size_t at = b[8] == 0 ? 24 : b[8] == 1 ? 28 : 12;
		int ok = (im->so == 2 || im->so == 4 || im->so == 8) && (im->sl == 2 || im->sl == 4 || im->sl == 8);
		if (ok && n >= at + (size_t)im->so) {
			im->base = rd_le(b + at, im->so);
			im->raw_ok = im->so == 8 && im->sl == 8;
		} else {
			im->so = im->sl = 0;
		}
	}
	f = open_in_place(im, path);
	if (f < 0) {
		ckpt__free(im->path);
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
	/* the root group's attributes are looked up first (layout classification) */
	{
		int rc = check_object(f, "/");
		if (rc < 0) {
			ckpt__h5_close_image(f);
			return rc;
		}
	}
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
			ckpt__free(im->checked);
			ckpt__free(im->path);
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
	{
		/* every object we reach has its header checked before any attribute lookup */
		char obj_name[CKPT_MAX_NAME_LEN + 1];
		int rc;
		snprintf(obj_name, sizeof(obj_name), "%s%s%s", where && strcmp(where, "/") ? where : "",
			where && strcmp(where, "/") ? "/" : "", name);
		rc = check_object(o, obj_name);
		if (rc < 0) {
			H5Oclose(o);
			return rc;
		}
	}
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
	htri_t e;
	*exists = 0;
	CKPT_TRY(check_object(obj, name)); /* cached: normally checked when the object was reached */
	e = H5Aexists(obj, name);
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

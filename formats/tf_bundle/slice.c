/*
 * Partitioned variables: slice keys, tiling checks, assembly.
 *
 * Slice key = EncodeTensorNameSlice(name, slice) (tensor_slice_util / ordered_code.cc):
 *   00                                WriteNumIncreasing(0)
 *   name, 00 -> 00 ff, ff -> ff 00    WriteString
 *   00 01                             string terminator
 *   n, rank as n big-endian bytes     WriteNumIncreasing(rank), leading zeros dropped
 *   per dim: start, length            WriteSignedNumIncreasing; |v| < 64 is the byte 0x80 ^ v,
 *                                     longer forms carry their length in the leading bits
 * A full extent is start 0, length -1 (TensorSlice::kFullExtent).
 * The "full" entry lists the slices (TensorSliceProto) and carries no data.
 */
#include <stdlib.h>
#include <string.h>
#include <protobuf-c/protobuf-c.h>
#include "tensor_bundle.pb-c.h"
#include "tfb.h"

/* kLengthToMask / kLengthToHeaderBits of ordered_code.cc */
static const uint64_t len_mask[11] = {
	0, 0x80ull, 0xc000ull, 0xe00000ull, 0xf0000000ull, 0xf800000000ull, 0xfc0000000000ull,
	0xfe000000000000ull, 0xff00000000000000ull, 0x8000000000000000ull, 0,
};
static const unsigned char len_header[11][2] = {
	{ 0, 0 }, { 0x80, 0 }, { 0xc0, 0 }, { 0xe0, 0 }, { 0xf0, 0 }, { 0xf8, 0 },
	{ 0xfc, 0 }, { 0xfe, 0 }, { 0xff, 0 }, { 0xff, 0x80 }, { 0xff, 0xc0 },
};

/* SignedEncodingLength: 7 bits per byte, one of them the sign. */
static int signed_len(int64_t v)
{
	uint64_t x = v < 0 ? ~(uint64_t)v : (uint64_t)v;
	int bits = 0;
	while (x) {
		bits++;
		x >>= 1;
	}
	return bits / 7 + 1;
}

static int put_signed(tfb_buf *b, int64_t v)
{
	int len = signed_len(v);
	unsigned char buf[10];
	unsigned char sign = v < 0 ? 0xff : 0;
	buf[0] = buf[1] = sign;
	for (int i = 0; i < 8; i++)
		buf[2 + i] = (unsigned char)((uint64_t)v >> (56 - 8 * i));
	unsigned char *p = buf + 10 - len;
	p[0] ^= len_header[len][0];
	if (len >= 2)
		p[1] ^= len_header[len][1];
	return tfb_buf_append(b, p, (size_t)len);
}

/* ReadSignedNumIncreasing, refusing non-canonical forms. Returns bytes used, 0 when bad. */
static size_t get_signed(const unsigned char *p, size_t n, int64_t *out)
{
	if (n == 0)
		return 0;
	uint64_t xm = (p[0] & 0x80) ? 0 : ~0ull;
	unsigned char first = p[0] ^ (unsigned char)xm;
	size_t len;
	uint64_t x;
	if (first != 0xff) {
		unsigned y = first ^ 0xffu;
		int lg = 0;
		while (y >> (lg + 1))
			lg++;
		len = (size_t)(7 - lg);
		if (n < len)
			return 0;
		x = xm;
		for (size_t i = 0; i < len; i++)
			x = (x << 8) | p[i];
	} else {
		len = 8;
		if (n < len)
			return 0;
		unsigned char second = p[1] ^ (unsigned char)xm;
		if (second >= 0x80) {
			if (second < 0xc0)
				len = 9;
			else if (second == 0xc0 && n >= 3 && (unsigned char)(p[2] ^ (unsigned char)xm) < 0x80)
				len = 10;
			else
				return 0;
			if (n < len)
				return 0;
		}
		x = 0;
		for (size_t i = len - 8; i < len; i++)
			x = (x << 8) | p[i];
	}
	x ^= len_mask[len];
	if ((size_t)signed_len((int64_t)x) != len)
		return 0;
	*out = (int64_t)x;
	return len;
}

int tfb_slice_key_encode(tfb_buf *b, const unsigned char *name, size_t nlen, int rank,
	const int64_t *start, const int64_t *length)
{
	CKPT_TRY(tfb_buf_append(b, "\0", 1));
	for (size_t i = 0; i < nlen; i++) {
		unsigned char esc[2] = { name[i], name[i] == 0 ? 0xff : 0 };
		CKPT_TRY(tfb_buf_append(b, esc, (name[i] == 0 || name[i] == 0xff) ? 2 : 1));
	}
	CKPT_TRY(tfb_buf_append(b, "\0\1", 2));
	unsigned char num[9];
	int n = 0;
	for (uint64_t v = (uint64_t)rank; v; v >>= 8)
		n++;
	num[0] = (unsigned char)n;
	for (int i = 0; i < n; i++)
		num[1 + i] = (unsigned char)((uint64_t)rank >> (8 * (n - 1 - i)));
	CKPT_TRY(tfb_buf_append(b, num, (size_t)n + 1));
	for (int d = 0; d < rank; d++) {
		CKPT_TRY(put_signed(b, start[d]));
		CKPT_TRY(put_signed(b, length[d]));
	}
	return CKPT_OK;
}

int tfb_row_slice_key(tfb_buf *b, const char *name, const ckpt_shape *full, int64_t row0, int64_t rows)
{
	int64_t start[CKPT_MAX_RANK], length[CKPT_MAX_RANK];
	for (int d = 0; d < full->rank; d++) {
		start[d] = 0;
		length[d] = full->dims[d];
	}
	start[0] = row0;
	length[0] = rows;
	return tfb_slice_key_encode(b, (const unsigned char *)name, strlen(name), full->rank, start, length);
}

int tfb_pack_partitioned_entry(tfb_buf *out, ckpt_dtype dt, const ckpt_shape *full, int nparts,
	const int64_t *row0, const int64_t *rows)
{
	CkptTf__TensorShapeProto__Dim dims[CKPT_MAX_RANK];
	CkptTf__TensorShapeProto__Dim *dp[CKPT_MAX_RANK];
	CkptTf__TensorShapeProto shape = CKPT_TF__TENSOR_SHAPE_PROTO__INIT;
	CkptTf__BundleEntryProto pe = CKPT_TF__BUNDLE_ENTRY_PROTO__INIT;
	for (int i = 0; i < full->rank; i++) {
		ckpt_tf__tensor_shape_proto__dim__init(&dims[i]);
		dims[i].size = full->dims[i];
		dp[i] = &dims[i];
	}
	shape.n_dim = (size_t)full->rank;
	shape.dim = dp;
	pe.dtype = (int32_t)dt;
	pe.shape = &shape;
	/* per part: one TensorSliceProto of rank extents, every one explicit (as TF1's Saver writes them) */
	size_t np = (size_t)nparts, rk = (size_t)full->rank;
	CkptTf__TensorSliceProto *sl = ckpt__calloc(np, sizeof(*sl));
	CkptTf__TensorSliceProto **slp = ckpt__calloc(np, sizeof(*slp));
	CkptTf__TensorSliceProto__Extent *ex = ckpt__calloc(np * rk, sizeof(*ex));
	CkptTf__TensorSliceProto__Extent **exp = ckpt__calloc(np * rk, sizeof(*exp));
	int rc = sl && slp && ex && exp ? CKPT_OK : CKPT_ENOMEM;
	for (size_t k = 0; rc == CKPT_OK && k < np; k++) {
		ckpt_tf__tensor_slice_proto__init(&sl[k]);
		for (size_t d = 0; d < rk; d++) {
			CkptTf__TensorSliceProto__Extent *e = &ex[k * rk + d];
			ckpt_tf__tensor_slice_proto__extent__init(e);
			e->start = d == 0 ? row0[k] : 0;
			e->has_length_case = CKPT_TF__TENSOR_SLICE_PROTO__EXTENT__HAS_LENGTH_LENGTH;
			e->length = d == 0 ? rows[k] : full->dims[d];
			exp[k * rk + d] = e;
		}
		sl[k].n_extent = rk;
		sl[k].extent = exp + k * rk;
		slp[k] = &sl[k];
	}
	pe.n_slices = np;
	pe.slices = slp;
	if (rc == CKPT_OK) {
		size_t n = ckpt_tf__bundle_entry_proto__get_packed_size(&pe);
		rc = tfb_buf_reserve(out, n);
		if (rc == CKPT_OK)
			out->len += ckpt_tf__bundle_entry_proto__pack(&pe, out->p + out->len);
	}
	ckpt__free(sl);
	ckpt__free(slp);
	ckpt__free(ex);
	ckpt__free(exp);
	return rc;
}

int tfb_slice_key_decode(const unsigned char *k, size_t n, tfb_slice_key *out)
{
	memset(out, 0, sizeof(*out));
	if (n < 1 || k[0] != 0)
		return -1;
	size_t i = 1;
	unsigned char *name = ckpt__malloc(n);
	if (!name)
		return CKPT_ENOMEM;
	size_t nl = 0;
	for (;;) {
		if (i >= n)
			goto bad;
		unsigned char c = k[i++];
		if (c != 0 && c != 0xff) {
			name[nl++] = c;
			continue;
		}
		if (i >= n)
			goto bad;
		unsigned char e = k[i++];
		if (c == 0 && e == 1)
			break;
		if (c == 0 && e == 0xff)
			name[nl++] = 0;
		else if (c == 0xff && e == 0)
			name[nl++] = 0xff;
		else
			goto bad;
	}
	if (i >= n || k[i] > 8)
		goto bad;
	size_t rl = k[i++];
	if (n - i < rl || (rl && k[i] == 0))
		goto bad;
	uint64_t rank = 0;
	for (size_t j = 0; j < rl; j++)
		rank = rank << 8 | k[i++];
	if (rank > CKPT_MAX_RANK)
		goto bad;
	for (uint64_t d = 0; d < rank; d++) {
		size_t u = get_signed(k + i, n - i, &out->start[d]);
		if (!u)
			goto bad;
		i += u;
		u = get_signed(k + i, n - i, &out->length[d]);
		if (!u)
			goto bad;
		i += u;
	}
	if (i != n)
		goto bad;
	name[nl] = 0; /* nl < n: the key has at least the leading 00 and the 00 01 terminator */
	out->name = (char *)name;
	out->nlen = nl;
	out->rank = (int)rank;
	return CKPT_OK;
bad:
	ckpt__free(name);
	return -1;
}

int tfb_slice_resolve(const ckpt_shape *full, const ckpt_slice *sl, int64_t *start, int64_t *length)
{
	if (sl->rank != full->rank)
		return -1;
	for (int d = 0; d < sl->rank; d++) {
		int64_t s = sl->extents[d].start, l = sl->extents[d].length;
		if (l == -1) {
			if (s != 0)
				return -2 - d;
			l = full->dims[d];
		}
		if (s < 0 || l < 0 || s > full->dims[d] || l > full->dims[d] - s)
			return -2 - d;
		start[d] = s;
		length[d] = l;
	}
	return 0;
}

typedef struct sweep_item {
	int64_t key;
	size_t idx;
} sweep_item;

static int cmp_sweep(const void *a, const void *b)
{
	const sweep_item *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

#define MAX_OVERLAP_TESTS (1ull << 26) /* pairs compared while proving that slices are disjoint */

int tfb_slices_check(const ckpt_var_info *v, const char *path, uint64_t off)
{
	const int rank = v->shape.rank;
	const size_t n = v->nslices;
	uint64_t total;
	if (ckpt_shape_num_elements(&total, &v->shape) < 0)
		return ckpt__fail(CKPT_ELIMIT, path, v->name, (int64_t)off, "element count of the shape overflows");
	/* resolved [start, start+length) per slice and dim, flat */
	int64_t *ext = ckpt__calloc(n ? n : 1, 2 * sizeof(int64_t) * (size_t)(rank ? rank : 1));
	sweep_item *order = ckpt__calloc(n ? n : 1, sizeof(*order));
	int rc = (!ext || !order) ? CKPT_ENOMEM : CKPT_OK;
	uint64_t covered = 0;
	for (size_t i = 0; rc == CKPT_OK && i < n; i++) {
		int64_t *s = ext + i * 2 * (size_t)rank, *l = s + rank;
		int r = tfb_slice_resolve(&v->shape, &v->slices[i], s, l);
		if (r == -1) {
			rc = ckpt__fail(CKPT_EFORMAT, path, v->name, (int64_t)off,
				"slice %zu has rank %d, the tensor has rank %d", i, v->slices[i].rank, rank);
			break;
		}
		if (r < -1) {
			int d = -2 - r;
			const ckpt_extent *e = &v->slices[i].extents[d];
			rc = ckpt__fail(CKPT_EFORMAT, path, v->name, (int64_t)off,
				"slice %zu, dimension %d: start %lld length %lld lies outside [0, %lld)", i, d,
				(long long)e->start, (long long)e->length, (long long)v->shape.dims[d]);
			break;
		}
		uint64_t vol = 1;
		for (int d = 0; d < rank; d++)
			vol *= (uint64_t)l[d]; /* inside the shape, whose element count did not overflow */
		if (ckpt__add_u64(covered, vol, &covered) || covered > total) {
			rc = ckpt__fail(CKPT_EFORMAT, path, v->name, (int64_t)off,
				"slices do not tile the shape: they cover more than its %llu elements (overlap)",
				(unsigned long long)total);
			break;
		}
	}
	if (rc == CKPT_OK && covered != total)
		rc = ckpt__fail(CKPT_EFORMAT, path, v->name, (int64_t)off,
			"slices do not tile the shape: they cover %llu of its %llu elements",
			(unsigned long long)covered, (unsigned long long)total);
	/*
	 * Same volume as the shape: exact tiling iff no two slices overlap. Sweep
	 * along the dimension with the most distinct starts (the partitioned one).
	 */
	if (rc == CKPT_OK && rank > 0 && n > 1) {
		int axis = 0;
		size_t best = 0;
		for (int d = 0; d < rank; d++) {
			for (size_t i = 0; i < n; i++)
				order[i] = (sweep_item){ ext[i * 2 * (size_t)rank + (size_t)d], i };
			qsort(order, n, sizeof(*order), cmp_sweep);
			size_t distinct = 1;
			for (size_t i = 1; i < n; i++)
				distinct += order[i].key != order[i - 1].key;
			if (distinct > best) {
				best = distinct;
				axis = d;
			}
		}
		for (size_t i = 0; i < n; i++)
			order[i] = (sweep_item){ ext[i * 2 * (size_t)rank + (size_t)axis], i };
		qsort(order, n, sizeof(*order), cmp_sweep);
		uint64_t tests = 0;
		for (size_t a = 0; rc == CKPT_OK && a < n; a++) {
			const int64_t *sa = ext + order[a].idx * 2 * (size_t)rank, *la = sa + rank;
			for (size_t b = a + 1; b < n && order[b].key < sa[axis] + la[axis]; b++) {
				if (++tests > MAX_OVERLAP_TESTS) {
					rc = ckpt__fail(CKPT_ELIMIT, path, v->name, (int64_t)off,
						"%zu slices: too many candidate overlaps to check", n);
					break;
				}
				const int64_t *sb = ext + order[b].idx * 2 * (size_t)rank, *lb = sb + rank;
				int meet = 1;
				for (int d = 0; d < rank && meet; d++) {
					int64_t lo = sa[d] > sb[d] ? sa[d] : sb[d];
					int64_t ea = sa[d] + la[d], eb = sb[d] + lb[d];
					meet = lo < (ea < eb ? ea : eb);
				}
				if (meet) {
					rc = ckpt__fail(CKPT_EFORMAT, path, v->name, (int64_t)off,
						"slices %zu and %zu overlap: the slices do not tile the shape",
						order[a].idx < order[b].idx ? order[a].idx : order[b].idx,
						order[a].idx < order[b].idx ? order[b].idx : order[a].idx);
					break;
				}
			}
		}
	}
	ckpt__free(ext);
	ckpt__free(order);
	return rc;
}

void tfb_slice_scatter(unsigned char *dst, const ckpt_shape *full, size_t esize,
	const int64_t *start, const int64_t *length, const unsigned char *src)
{
	const int rank = full->rank;
	if (rank == 0) {
		memcpy(dst, src, esize);
		return;
	}
	for (int d = 0; d < rank; d++)
		if (length[d] == 0)
			return;
	/* byte strides of the full tensor; all products stay below its (checked) byte size */
	size_t stride[CKPT_MAX_RANK];
	stride[rank - 1] = esize;
	for (int d = rank - 1; d > 0; d--)
		stride[d - 1] = stride[d] * (size_t)full->dims[d];
	size_t row = (size_t)length[rank - 1] * esize;
	int64_t idx[CKPT_MAX_RANK] = { 0 };
	for (;;) {
		size_t o = 0;
		for (int d = 0; d < rank; d++)
			o += (size_t)(start[d] + idx[d]) * stride[d];
		memcpy(dst + o, src, row);
		src += row;
		int d = rank - 2;
		while (d >= 0 && ++idx[d] == length[d])
			idx[d--] = 0;
		if (d < 0)
			return;
	}
}

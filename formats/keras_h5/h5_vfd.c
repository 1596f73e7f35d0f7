/*
 * The ckpt_io HDF5 virtual file driver (h5_vfd.h). Written for the libhdf5
 * 1.10 driver interface (H5FD_class_t without a version field; 1.12 changed
 * it), the one the build found.
 *
 * Bytes past the end of the file read as zeros, as with the sec2 driver.
 * The truncate libhdf5 asks for at the end extends the file to its end of
 * allocation by writing zeros up to it; a ckpt_io cannot shrink a file, and
 * a file being created never needs it to (libhdf5 allocates forward).
 */
#include <stdlib.h>
#include <string.h>
#include "formats/keras_h5/h5_vfd.h"

#if !(H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10)
#error "h5_vfd.c implements the libhdf5 1.10 virtual file driver interface"
#endif

typedef struct vfd_fapl {
	ckpt__h5_vfd_sink *sink;
} vfd_fapl;

typedef struct vfd_file {
	H5FD_t pub;             /* first: libhdf5's part, filled in by libhdf5 */
	ckpt__h5_vfd_sink *sink;
	haddr_t eoa, eof;
} vfd_file;

static int io_failed(ckpt__h5_vfd_sink *s)
{
	if (!s->failed) {
		ckpt__error_capture(&s->err);
		s->failed = 1;
	}
	return s->closing ? 0 : -1; /* closing: the writer reports it after the close */
}

static void *fapl_get(H5FD_t *file)
{
	vfd_fapl *c = malloc(sizeof(*c));
	if (c)
		c->sink = ((vfd_file *)file)->sink;
	return c;
}

static void *fapl_copy(const void *fapl)
{
	vfd_fapl *c = malloc(sizeof(*c));
	if (c)
		*c = *(const vfd_fapl *)fapl;
	return c;
}

static herr_t fapl_free(void *fapl)
{
	free(fapl);
	return 0;
}

static H5FD_t *vfd_open(const char *name, unsigned flags, hid_t fapl, haddr_t maxaddr)
{
	const vfd_fapl *info = H5Pget_driver_info(fapl);
	uint64_t size = 0;
	(void)name; /* the io is open already: the name is only libhdf5's label */
	(void)flags;
	(void)maxaddr;
	if (!info || !info->sink || !info->sink->io)
		return NULL;
	if (ckpt_io_size(&size, info->sink->io) < 0) {
		io_failed(info->sink);
		return NULL;
	}
	vfd_file *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->sink = info->sink;
	f->eof = (haddr_t)size;
	return &f->pub;
}

static herr_t vfd_close(H5FD_t *file)
{
	free(file);
	return 0;
}

static herr_t vfd_query(const H5FD_t *file, unsigned long *flags)
{
	(void)file;
	/* as the sec2 driver: metadata gathered into few, larger writes */
	*flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE |
		H5FD_FEAT_AGGREGATE_SMALLDATA;
	return 0;
}

static haddr_t vfd_get_eoa(const H5FD_t *file, H5FD_mem_t type)
{
	(void)type;
	return ((const vfd_file *)file)->eoa;
}

static herr_t vfd_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr)
{
	(void)type;
	((vfd_file *)file)->eoa = addr;
	return 0;
}

static haddr_t vfd_get_eof(const H5FD_t *file, H5FD_mem_t type)
{
	(void)type;
	return ((const vfd_file *)file)->eof;
}

static herr_t vfd_get_handle(H5FD_t *file, hid_t fapl, void **handle)
{
	(void)fapl;
	*handle = ((vfd_file *)file)->sink;
	return 0;
}

static herr_t vfd_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf)
{
	vfd_file *f = (vfd_file *)file;
	size_t got = 0;
	(void)type;
	(void)dxpl;
	if (addr < f->eof && ckpt_io_pread(&got, f->sink->io, buf, size, (uint64_t)addr) < 0)
		return io_failed(f->sink);
	memset((char *)buf + got, 0, size - got);
	return 0;
}

static herr_t vfd_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf)
{
	vfd_file *f = (vfd_file *)file;
	(void)type;
	(void)dxpl;
	if (f->sink->discard)
		return 0;
	if (ckpt_io_pwrite(f->sink->io, buf, size, (uint64_t)addr) < 0)
		return io_failed(f->sink);
	if (addr + size > f->eof)
		f->eof = addr + size;
	return 0;
}

static herr_t vfd_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing)
{
	static const char zeros[4096];
	vfd_file *f = (vfd_file *)file;
	(void)dxpl;
	(void)closing;
	/* allocated but never written (the rest of an aggregated block): zeros, written like any other byte */
	while (!f->sink->discard && f->eof < f->eoa) {
		size_t n = f->eoa - f->eof < sizeof(zeros) ? (size_t)(f->eoa - f->eof) : sizeof(zeros);
		if (ckpt_io_pwrite(f->sink->io, zeros, n, (uint64_t)f->eof) < 0)
			return io_failed(f->sink);
		f->eof += n;
	}
	return 0;
}

static const H5FD_class_t vfd_class = {
	.name = "ckpt_io",
	.maxaddr = (haddr_t)INT64_MAX,
	.fc_degree = H5F_CLOSE_WEAK,
	.fapl_size = sizeof(vfd_fapl),
	.fapl_get = fapl_get,
	.fapl_copy = fapl_copy,
	.fapl_free = fapl_free,
	.open = vfd_open,
	.close = vfd_close,
	.query = vfd_query,
	.get_eoa = vfd_get_eoa,
	.set_eoa = vfd_set_eoa,
	.get_eof = vfd_get_eof,
	.get_handle = vfd_get_handle,
	.read = vfd_read,
	.write = vfd_write,
	.truncate = vfd_truncate,
	.fl_map = H5FD_FLMAP_DICHOTOMY,
};

int ckpt__h5_vfd_set(hid_t fapl, ckpt__h5_vfd_sink *sink, const char *path)
{
	static hid_t id = -1; /* registered once, under ckpt__h5_lock; libhdf5 drops it when it shuts down */
	vfd_fapl info = { sink };
	if (id < 0)
		id = H5FDregister(&vfd_class);
	if (id < 0 || H5Pset_driver(fapl, id, &info) < 0)
		return ckpt__fail(CKPT_EIO, path, NULL, -1, "HDF5 refused the ckpt_io file driver");
	return CKPT_OK;
}

int ckpt__h5_vfd_error(const ckpt__h5_vfd_sink *sink, int rc)
{
	if (rc < 0 && sink && sink->failed)
		return ckpt__error_raise(&sink->err);
	return rc;
}

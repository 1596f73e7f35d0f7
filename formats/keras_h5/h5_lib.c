/* libhdf5 loaded at first use: the tables h5_lib.h renames every call to. */
#include "formats/keras_h5/h5_lib.h"
#include "formats/keras_h5/h5_safe.h"

/* set by CMake from the library found at configure time (its SONAME, then its file) */
#ifndef CKPT_HDF5_SONAME
#define CKPT_HDF5_SONAME "libhdf5_serial.so.103"
#endif
#ifndef CKPT_HDF5_FILE
#define CKPT_HDF5_FILE CKPT_HDF5_SONAME
#endif

ckpt__h5_fns ckpt__h5_fn;
ckpt__h5_vars ckpt__h5_var;

static const char *const h5_names[] = { CKPT_HDF5_SONAME, CKPT_HDF5_FILE, NULL };

/* #f and p_##f: neither expands the renames */
#define CKPT__H5_BIND(f) if (ckpt__dynlib_sym(d, h, #f, &ckpt__h5_fn.p_##f) < 0) return -1;
#define CKPT__H5_BIND_VAR(f) if (ckpt__dynlib_sym(d, h, #f, &ckpt__h5_var.p_##f) < 0) return -1;
static int h5_bind(ckpt__dynlib *d, void *h)
{
	CKPT_H5_FUNCS(CKPT__H5_BIND)
	CKPT_H5_VARS(CKPT__H5_BIND_VAR)
	return 0;
}

ckpt__dynlib ckpt__h5_dynlib = {
	"libhdf5 (" CKPT_HDF5_SONAME ", for the Keras HDF5 formats)", "CKPT_HDF5_LIBRARY", h5_names,
	h5_bind, ckpt__h5_take_over_exit, PTHREAD_ONCE_INIT, 0, ""
};

int ckpt__h5_lib(const char *path) { return ckpt__dynlib_load(&ckpt__h5_dynlib, path); }

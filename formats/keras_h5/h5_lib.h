/*
 * libhdf5, loaded at first use (libckpt/base/dynlib.h says why). Include this
 * instead of <hdf5.h>: every HDF5 function and global the Keras backends use
 * is named below and reached through a table filled by dlsym, so libckpt
 * does not link libhdf5. A symbol used but not listed fails the link
 * (undefined reference); one listed but not in <hdf5.h> fails to compile.
 *
 * Entry points of the Keras backends call ckpt__h5_lib(path) first and fail
 * with CKPT_EUNSUPPORTED when libhdf5 cannot be loaded; a call that arrives
 * without it loads the library or aborts (a missing check is a bug).
 */
#ifndef CKPT_H5_LIB_H
#define CKPT_H5_LIB_H

#include <hdf5.h>
#include "libckpt/base/dynlib.h"

#define CKPT_H5_FUNCS(X) \
	X(H5Aclose) \
	X(H5Acreate2) \
	X(H5Aexists) \
	X(H5Aget_num_attrs) \
	X(H5Aget_space) \
	X(H5Aget_storage_size) \
	X(H5Aget_type) \
	X(H5Aopen) \
	X(H5Aread) \
	X(H5Awrite) \
	X(H5Dclose) \
	X(H5Dcreate_anon) \
	X(H5Dget_create_plist) \
	X(H5Dget_offset) \
	X(H5Dget_space) \
	X(H5Dget_storage_size) \
	X(H5Dget_type) \
	X(H5Dopen2) \
	X(H5Dread) \
	X(H5Dwrite) \
	X(H5Eset_auto2) \
	X(H5FDregister) \
	X(H5Fclose) \
	X(H5Fcreate) \
	X(H5Fflush) \
	X(H5Fget_access_plist) \
	X(H5Fget_file_image) \
	X(H5Fget_filesize) \
	X(H5Fget_obj_count) \
	X(H5Fget_vfd_handle) \
	X(H5Fopen) \
	X(H5Gclose) \
	X(H5Gcreate2) \
	X(H5Gget_info) \
	X(H5Gopen2) \
	X(H5Iget_type) \
	X(H5Lexists) \
	X(H5Lget_info) \
	X(H5Literate) \
	X(H5Oclose) \
	X(H5Odecr_refcount) \
	X(H5Oget_info2) \
	X(H5Oincr_refcount) \
	X(H5Olink) \
	X(H5Oopen) \
	X(H5Oopen_by_addr) \
	X(H5Pclose) \
	X(H5Pcreate) \
	X(H5Pget_driver) \
	X(H5Pget_driver_info) \
	X(H5Pget_external_count) \
	X(H5Pget_layout) \
	X(H5Pget_nfilters) \
	X(H5Pset_create_intermediate_group) \
	X(H5Pset_driver) \
	X(H5Pset_fapl_core) \
	X(H5Pset_fapl_sec2) \
	X(H5Pset_file_image) \
	X(H5Pset_file_image_callbacks) \
	X(H5Pset_libver_bounds) \
	X(H5Pset_sieve_buf_size) \
	X(H5Sclose) \
	X(H5Screate) \
	X(H5Screate_simple) \
	X(H5Sget_simple_extent_dims) \
	X(H5Sget_simple_extent_ndims) \
	X(H5Sget_simple_extent_npoints) \
	X(H5Sget_simple_extent_type) \
	X(H5Tclose) \
	X(H5Tcopy) \
	X(H5Tcreate) \
	X(H5Tenum_create) \
	X(H5Tenum_insert) \
	X(H5Tequal) \
	X(H5Tget_class) \
	X(H5Tget_ebias) \
	X(H5Tget_fields) \
	X(H5Tget_nmembers) \
	X(H5Tget_offset) \
	X(H5Tget_order) \
	X(H5Tget_precision) \
	X(H5Tget_sign) \
	X(H5Tget_size) \
	X(H5Tget_tag) \
	X(H5Tis_variable_str) \
	X(H5Tregister) \
	X(H5Tset_cset) \
	X(H5Tset_ebias) \
	X(H5Tset_fields) \
	X(H5Tset_size) \
	X(H5Tset_strpad) \
	X(H5Tset_tag) \
	X(H5check_version) \
	X(H5close) \
	X(H5dont_atexit) \
	X(H5free_memory) \
	X(H5open)

#define CKPT_H5_VARS(X) \
	X(H5P_CLS_FILE_ACCESS_ID_g) \
	X(H5P_CLS_LINK_CREATE_ID_g) \
	X(H5T_C_S1_g) \
	X(H5T_IEEE_F32BE_g) \
	X(H5T_IEEE_F32LE_g) \
	X(H5T_IEEE_F64BE_g) \
	X(H5T_IEEE_F64LE_g) \
	X(H5T_NATIVE_SCHAR_g) \
	X(H5T_STD_I16LE_g) \
	X(H5T_STD_I32LE_g) \
	X(H5T_STD_I64LE_g) \
	X(H5T_STD_I8LE_g) \
	X(H5T_STD_U16LE_g) \
	X(H5T_STD_U32LE_g) \
	X(H5T_STD_U64LE_g) \
	X(H5T_STD_U8LE_g)

#define CKPT__H5_SLOT(f) __typeof__(&f) p_##f; /* p_: a member name the renames below do not touch */
typedef struct ckpt__h5_fns { CKPT_H5_FUNCS(CKPT__H5_SLOT) } ckpt__h5_fns;
typedef struct ckpt__h5_vars { CKPT_H5_VARS(CKPT__H5_SLOT) } ckpt__h5_vars;
#undef CKPT__H5_SLOT

extern ckpt__h5_fns ckpt__h5_fn;
extern ckpt__h5_vars ckpt__h5_var;
extern ckpt__dynlib ckpt__h5_dynlib;

/** Load libhdf5 (once); CKPT_OK, or CKPT_EUNSUPPORTED naming `path` (may be NULL) and why. */
int ckpt__h5_lib(const char *path);

static inline const ckpt__h5_fns *ckpt__h5_f(void)
{
	if (!ckpt__dynlib_loaded(&ckpt__h5_dynlib))
		ckpt__dynlib_need(&ckpt__h5_dynlib);
	return &ckpt__h5_fn;
}
static inline const ckpt__h5_vars *ckpt__h5_v(void)
{
	if (!ckpt__dynlib_loaded(&ckpt__h5_dynlib))
		ckpt__dynlib_need(&ckpt__h5_dynlib);
	return &ckpt__h5_var;
}

/* the renames: <hdf5.h>'s versioned macros (H5Dopen -> H5Dopen2) land here too */
#define H5Aclose (ckpt__h5_f()->p_H5Aclose)
#define H5Acreate2 (ckpt__h5_f()->p_H5Acreate2)
#define H5Aexists (ckpt__h5_f()->p_H5Aexists)
#define H5Aget_num_attrs (ckpt__h5_f()->p_H5Aget_num_attrs)
#define H5Aget_space (ckpt__h5_f()->p_H5Aget_space)
#define H5Aget_storage_size (ckpt__h5_f()->p_H5Aget_storage_size)
#define H5Aget_type (ckpt__h5_f()->p_H5Aget_type)
#define H5Aopen (ckpt__h5_f()->p_H5Aopen)
#define H5Aread (ckpt__h5_f()->p_H5Aread)
#define H5Awrite (ckpt__h5_f()->p_H5Awrite)
#define H5Dclose (ckpt__h5_f()->p_H5Dclose)
#define H5Dcreate_anon (ckpt__h5_f()->p_H5Dcreate_anon)
#define H5Dget_create_plist (ckpt__h5_f()->p_H5Dget_create_plist)
#define H5Dget_offset (ckpt__h5_f()->p_H5Dget_offset)
#define H5Dget_space (ckpt__h5_f()->p_H5Dget_space)
#define H5Dget_storage_size (ckpt__h5_f()->p_H5Dget_storage_size)
#define H5Dget_type (ckpt__h5_f()->p_H5Dget_type)
#define H5Dopen2 (ckpt__h5_f()->p_H5Dopen2)
#define H5Dread (ckpt__h5_f()->p_H5Dread)
#define H5Dwrite (ckpt__h5_f()->p_H5Dwrite)
#define H5Eset_auto2 (ckpt__h5_f()->p_H5Eset_auto2)
#define H5FDregister (ckpt__h5_f()->p_H5FDregister)
#define H5Fclose (ckpt__h5_f()->p_H5Fclose)
#define H5Fcreate (ckpt__h5_f()->p_H5Fcreate)
#define H5Fflush (ckpt__h5_f()->p_H5Fflush)
#define H5Fget_access_plist (ckpt__h5_f()->p_H5Fget_access_plist)
#define H5Fget_file_image (ckpt__h5_f()->p_H5Fget_file_image)
#define H5Fget_filesize (ckpt__h5_f()->p_H5Fget_filesize)
#define H5Fget_obj_count (ckpt__h5_f()->p_H5Fget_obj_count)
#define H5Fget_vfd_handle (ckpt__h5_f()->p_H5Fget_vfd_handle)
#define H5Fopen (ckpt__h5_f()->p_H5Fopen)
#define H5Gclose (ckpt__h5_f()->p_H5Gclose)
#define H5Gcreate2 (ckpt__h5_f()->p_H5Gcreate2)
#define H5Gget_info (ckpt__h5_f()->p_H5Gget_info)
#define H5Gopen2 (ckpt__h5_f()->p_H5Gopen2)
#define H5Iget_type (ckpt__h5_f()->p_H5Iget_type)
#define H5Lexists (ckpt__h5_f()->p_H5Lexists)
#define H5Lget_info (ckpt__h5_f()->p_H5Lget_info)
#define H5Literate (ckpt__h5_f()->p_H5Literate)
#define H5Oclose (ckpt__h5_f()->p_H5Oclose)
#define H5Odecr_refcount (ckpt__h5_f()->p_H5Odecr_refcount)
#define H5Oget_info2 (ckpt__h5_f()->p_H5Oget_info2)
#define H5Oincr_refcount (ckpt__h5_f()->p_H5Oincr_refcount)
#define H5Olink (ckpt__h5_f()->p_H5Olink)
#define H5Oopen (ckpt__h5_f()->p_H5Oopen)
#define H5Oopen_by_addr (ckpt__h5_f()->p_H5Oopen_by_addr)
#define H5Pclose (ckpt__h5_f()->p_H5Pclose)
#define H5Pcreate (ckpt__h5_f()->p_H5Pcreate)
#define H5Pget_driver (ckpt__h5_f()->p_H5Pget_driver)
#define H5Pget_driver_info (ckpt__h5_f()->p_H5Pget_driver_info)
#define H5Pget_external_count (ckpt__h5_f()->p_H5Pget_external_count)
#define H5Pget_layout (ckpt__h5_f()->p_H5Pget_layout)
#define H5Pget_nfilters (ckpt__h5_f()->p_H5Pget_nfilters)
#define H5Pset_create_intermediate_group (ckpt__h5_f()->p_H5Pset_create_intermediate_group)
#define H5Pset_driver (ckpt__h5_f()->p_H5Pset_driver)
#define H5Pset_fapl_core (ckpt__h5_f()->p_H5Pset_fapl_core)
#define H5Pset_fapl_sec2 (ckpt__h5_f()->p_H5Pset_fapl_sec2)
#define H5Pset_file_image (ckpt__h5_f()->p_H5Pset_file_image)
#define H5Pset_file_image_callbacks (ckpt__h5_f()->p_H5Pset_file_image_callbacks)
#define H5Pset_libver_bounds (ckpt__h5_f()->p_H5Pset_libver_bounds)
#define H5Pset_sieve_buf_size (ckpt__h5_f()->p_H5Pset_sieve_buf_size)
#define H5Sclose (ckpt__h5_f()->p_H5Sclose)
#define H5Screate (ckpt__h5_f()->p_H5Screate)
#define H5Screate_simple (ckpt__h5_f()->p_H5Screate_simple)
#define H5Sget_simple_extent_dims (ckpt__h5_f()->p_H5Sget_simple_extent_dims)
#define H5Sget_simple_extent_ndims (ckpt__h5_f()->p_H5Sget_simple_extent_ndims)
#define H5Sget_simple_extent_npoints (ckpt__h5_f()->p_H5Sget_simple_extent_npoints)
#define H5Sget_simple_extent_type (ckpt__h5_f()->p_H5Sget_simple_extent_type)
#define H5Tclose (ckpt__h5_f()->p_H5Tclose)
#define H5Tcopy (ckpt__h5_f()->p_H5Tcopy)
#define H5Tcreate (ckpt__h5_f()->p_H5Tcreate)
#define H5Tenum_create (ckpt__h5_f()->p_H5Tenum_create)
#define H5Tenum_insert (ckpt__h5_f()->p_H5Tenum_insert)
#define H5Tequal (ckpt__h5_f()->p_H5Tequal)
#define H5Tget_class (ckpt__h5_f()->p_H5Tget_class)
#define H5Tget_ebias (ckpt__h5_f()->p_H5Tget_ebias)
#define H5Tget_fields (ckpt__h5_f()->p_H5Tget_fields)
#define H5Tget_nmembers (ckpt__h5_f()->p_H5Tget_nmembers)
#define H5Tget_offset (ckpt__h5_f()->p_H5Tget_offset)
#define H5Tget_order (ckpt__h5_f()->p_H5Tget_order)
#define H5Tget_precision (ckpt__h5_f()->p_H5Tget_precision)
#define H5Tget_sign (ckpt__h5_f()->p_H5Tget_sign)
#define H5Tget_size (ckpt__h5_f()->p_H5Tget_size)
#define H5Tget_tag (ckpt__h5_f()->p_H5Tget_tag)
#define H5Tis_variable_str (ckpt__h5_f()->p_H5Tis_variable_str)
#define H5Tregister (ckpt__h5_f()->p_H5Tregister)
#define H5Tset_cset (ckpt__h5_f()->p_H5Tset_cset)
#define H5Tset_ebias (ckpt__h5_f()->p_H5Tset_ebias)
#define H5Tset_fields (ckpt__h5_f()->p_H5Tset_fields)
#define H5Tset_size (ckpt__h5_f()->p_H5Tset_size)
#define H5Tset_strpad (ckpt__h5_f()->p_H5Tset_strpad)
#define H5Tset_tag (ckpt__h5_f()->p_H5Tset_tag)
#define H5check_version (ckpt__h5_f()->p_H5check_version)
#define H5close (ckpt__h5_f()->p_H5close)
#define H5dont_atexit (ckpt__h5_f()->p_H5dont_atexit)
#define H5free_memory (ckpt__h5_f()->p_H5free_memory)
#define H5open (ckpt__h5_f()->p_H5open)
#define H5P_CLS_FILE_ACCESS_ID_g (*ckpt__h5_v()->p_H5P_CLS_FILE_ACCESS_ID_g)
#define H5P_CLS_LINK_CREATE_ID_g (*ckpt__h5_v()->p_H5P_CLS_LINK_CREATE_ID_g)
#define H5T_C_S1_g (*ckpt__h5_v()->p_H5T_C_S1_g)
#define H5T_IEEE_F32BE_g (*ckpt__h5_v()->p_H5T_IEEE_F32BE_g)
#define H5T_IEEE_F32LE_g (*ckpt__h5_v()->p_H5T_IEEE_F32LE_g)
#define H5T_IEEE_F64BE_g (*ckpt__h5_v()->p_H5T_IEEE_F64BE_g)
#define H5T_IEEE_F64LE_g (*ckpt__h5_v()->p_H5T_IEEE_F64LE_g)
#define H5T_NATIVE_SCHAR_g (*ckpt__h5_v()->p_H5T_NATIVE_SCHAR_g)
#define H5T_STD_I16LE_g (*ckpt__h5_v()->p_H5T_STD_I16LE_g)
#define H5T_STD_I32LE_g (*ckpt__h5_v()->p_H5T_STD_I32LE_g)
#define H5T_STD_I64LE_g (*ckpt__h5_v()->p_H5T_STD_I64LE_g)
#define H5T_STD_I8LE_g (*ckpt__h5_v()->p_H5T_STD_I8LE_g)
#define H5T_STD_U16LE_g (*ckpt__h5_v()->p_H5T_STD_U16LE_g)
#define H5T_STD_U32LE_g (*ckpt__h5_v()->p_H5T_STD_U32LE_g)
#define H5T_STD_U64LE_g (*ckpt__h5_v()->p_H5T_STD_U64LE_g)
#define H5T_STD_U8LE_g (*ckpt__h5_v()->p_H5T_STD_U8LE_g)

#endif

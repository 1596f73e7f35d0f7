/*
 * An HDF5 virtual file driver over a ckpt_io, so that the Keras writers'
 * files go through the writer's VFS like every other byte (io.h: the VFS is
 * the only door to files): libhdf5 writes and rereads the file being built
 * with ckpt_io_pwrite / ckpt_io_pread on an io the writer opened through its
 * VFS, and never opens a path itself.
 */
#ifndef CKPT_H5_VFD_H
#define CKPT_H5_VFD_H

#include "formats/keras_h5/h5_lib.h"
#include "ckpt/io.h"
#include "libckpt/internal.h"

/** Where the driver writes, and what it reports back (owned by the writer). */
typedef struct ckpt__h5_vfd_sink {
	ckpt_io *io;            /* borrowed: opened (CKPT_IO_READ | CKPT_IO_WRITE) and closed by the writer */
	int discard;            /* the file is abandoned: writes and truncates succeed and do nothing */
	int closing;            /* in H5Fclose: a failing write is recorded (failed) but not returned, because
	                           libhdf5 1.10 keeps a file whose close failed and crashes on it at exit */
	int failed;             /* an io call failed: `err` holds its error */
	ckpt__error_slot err;   /* the first failing io call's error */
} ckpt__h5_vfd_sink;

/**
 * Make `fapl` use the driver on `sink` (registering it with libhdf5 once).
 * Callers hold ckpt__h5_lock. CKPT_EIO when libhdf5 refuses.
 */
int ckpt__h5_vfd_set(hid_t fapl, ckpt__h5_vfd_sink *sink, const char *path);

/** `rc`, or the io's own error when the io failed under libhdf5 (a generic HDF5 message says less). */
int ckpt__h5_vfd_error(const ckpt__h5_vfd_sink *sink, int rc);

#endif

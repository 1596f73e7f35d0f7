/*
 * Truncation sweep (libarchive test_read_truncated.c): every fixture in
 * tests/fixtures, every file of it cut at every prefix length when it is
 * at most the sample size, else at a fixed sample of that many lengths (both
 * ends byte by byte, the rest evenly spread; rel_positions),
 * opened from the memory file system and read completely. A truncated file
 * must never crash, hang or make the library ask for an allocation out of
 * proportion to the input, and must fail with a negative status, a message
 * and the file named. (Engine: rel_sweep_positions in rel_common.h.)
 */
#include "rel_common.h"

Test(truncation, tensorbundle_prefixes, .timeout = 240)
{
	rel_sweep_positions(1 << REL_TF | 1 << REL_TF_STATE, REL_TRUNCATE, 2048 + 1024, 0);
}

/* A cut HDF5 image fails at open, before any dataset is read; each open runs libhdf5 in a sandboxed child (h5_sandbox.h). */
Test(truncation, keras_h5_prefixes, .timeout = 480)
{
	rel_sweep_positions(1 << REL_KERAS_H5, REL_TRUNCATE, 1024, 0);
}

Test(truncation, keras_archive_prefixes, .timeout = 240)
{
	rel_sweep_positions(1 << REL_KERAS_ZIP, REL_TRUNCATE, 2048 + 1024, 0);
}

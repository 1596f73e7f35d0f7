/* libFuzzer target: a TensorBundle .index file (SSTable + BundleHeader/BundleEntry protos) through ckpt_reader_open. */
#include "fuzz_entries.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return ckpt_fuzz_tf_index(data, size);
}

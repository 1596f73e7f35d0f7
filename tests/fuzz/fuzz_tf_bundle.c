/* libFuzzer target: a whole TensorBundle (index + data shards) through ckpt_reader_open and every read. */
#include "fuzz_entries.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return ckpt_fuzz_tf_bundle(data, size);
}

/* libFuzzer target: a Keras HDF5 file (legacy full model, legacy weights, Keras 3 .weights.h5) from memory. */
#include "fuzz_entries.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return ckpt_fuzz_keras_h5(data, size);
}

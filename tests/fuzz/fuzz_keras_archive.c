/* libFuzzer target: a .keras zip archive from memory. */
#include "fuzz_entries.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return ckpt_fuzz_keras_archive(data, size);
}

/* libFuzzer target: a safetensors file from memory, rewritten and reopened when it opens. */
#include "fuzz_entries.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return ckpt_fuzz_safetensors(data, size);
}

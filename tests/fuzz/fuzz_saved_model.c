/* libFuzzer target: a saved_model.pb through ckpt_saved_model_parse and a SavedModel reader. */
#include "fuzz_entries.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return ckpt_fuzz_saved_model(data, size);
}

/* libFuzzer target: a `checkpoint` state file, through ckpt_reader_open(dir) and the manager. */
#include "fuzz_entries.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return ckpt_fuzz_state_file(data, size);
}

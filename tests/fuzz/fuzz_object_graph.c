/* libFuzzer target: a serialized TrackableObjectGraph through ckpt_object_graph_parse. */
#include "fuzz_entries.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return ckpt_fuzz_object_graph(data, size);
}

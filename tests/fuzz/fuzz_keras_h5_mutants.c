/* libFuzzer target: the HDF5 metadata mutation campaign of issue 12.1 (h5_mutants.h): a fixture, then 8-byte mutations at its metadata offsets. */
#include "h5_mutants.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ckpt_fuzz_keras_h5_mutants_init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return ckpt_fuzz_keras_h5_mutants(data, size);
}

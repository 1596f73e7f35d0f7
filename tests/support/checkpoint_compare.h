/* Comparing two checkpoints entry by entry (the README examples' and the samples' runs). */
#ifndef CKPT_TEST_CHECKPOINT_COMPARE_H
#define CKPT_TEST_CHECKPOINT_COMPARE_H

/* Every entry of checkpoint `pa` is in `pb` with the same dtype, shape and bytes, and `pb` has no others. */
void ts_assert_same_checkpoint(const char *pa, const char *pb);

#endif

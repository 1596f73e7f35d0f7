/* Asserting what a failed call left in the library's error slot. */
#ifndef CKPT_TEST_ERROR_ASSERT_H
#define CKPT_TEST_ERROR_ASSERT_H

/* `rc` is `code`, and the last error's message contains `needle` and names the file `path`. */
void ts_assert_error_at(int rc, int code, const char *needle, const char *path);

#endif

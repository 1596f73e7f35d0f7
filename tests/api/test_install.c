/*
 * libckpt as a dependency: tests/scripts/install_test.sh installs this build
 * tree (CKPT_BINARY_DIR) into a temporary prefix with `cmake --install`,
 * builds the mlp_mirrored sample out of tree against it with
 * find_package(ckpt) -> ckpt::ckpt and with pkg-config, runs both, and
 * checks that they write identical checkpoints; then compiles each installed
 * ckpt/sys/ header on its own and an extender using all of them
 * (tests/scripts/sys_consumer.c), and runs it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include "test_support.h"

#define INSTALL_TEST CKPT_SOURCE_DIR "/tests/scripts/install_test.sh"

Test(install, find_package_and_pkg_config_out_of_tree, .timeout = 120)
{
	char *const argv[] = { "/bin/bash", INSTALL_TEST, CKPT_BINARY_DIR, CKPT_SOURCE_DIR, NULL };
	ts_run_result r;

	cr_assert_eq(ts_run(&r, argv), 0, "could not start %s", INSTALL_TEST);
	ts_assert_exit(&r, 0, "install test failed (exit %d)\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
	cr_expect(strstr(r.out, "find_package: OK"), "%s", r.out);
	cr_expect(strstr(r.out, "pkg-config: OK"), "%s", r.out);
	cr_expect(strstr(r.out, "sys consumer: OK"), "%s", r.out);
	cr_expect(strstr(r.out, "sys headers: OK"), "%s", r.out);
	/* the out-of-tree builds really trained and checkpointed */
	cr_expect(strstr(r.out, "epoch 1/1"), "%s", r.out);
	cr_expect(strstr(r.out, "ckpt-1"), "%s", r.out);
	ts_run_free(&r);
}

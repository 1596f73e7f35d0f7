/* The file system every command reads and writes through (cli.h). */
#include "cli.h"

static ckpt_vfs *chosen;

void cli_set_vfs(ckpt_vfs *vfs)
{
	chosen = vfs;
}

ckpt_vfs *cli_vfs(void)
{
	return chosen ? chosen : ckpt_vfs_default();
}

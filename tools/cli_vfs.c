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

ckpt_vfs *cli_vfs_for(const char *a, const char *b)
{
	if (!chosen && (ckpt_path_is_s3(a) || ckpt_path_is_s3(b)))
		return NULL;
	return cli_vfs();
}

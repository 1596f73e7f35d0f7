/* The name lists a VFS's list method returns (ckpt_vfs_list): freed here, below every VFS. */
#include "../internal.h"

void ckpt_vfs_free_list(char **names, size_t count)
{
	if (!names)
		return;
	for (size_t i = 0; i < count; i++)
		ckpt__free(names[i]);
	ckpt__free(names);
}

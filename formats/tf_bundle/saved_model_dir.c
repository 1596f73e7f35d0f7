/*
 * A bundle that is a SavedModel's variables: prefix DIR/variables/variables
 * with DIR/saved_model.pb beside it. The reader then also decodes
 * saved_model.pb (ckpt/saved_model.h): signatures for `ckpt inspect`, and
 * the variables' synchronization, which the bundle itself does not record.
 */
#include <string.h>
#include "tfb.h"
#include "ckpt/saved_model.h"

#define SM_SUFFIX "variables/variables"

int tfb_attach_saved_model(ckpt_reader *r)
{
	const char *p = r->path;
	size_t n = p ? strlen(p) : 0, s = sizeof(SM_SUFFIX) - 1;
	if (n < s || strcmp(p + n - s, SM_SUFFIX) != 0 || (n > s && p[n - s - 1] != '/'))
		return CKPT_OK;
	char *dir = n > s ? ckpt__strndup(p, n - s - 1) : ckpt__strdup(".");
	char *file = dir ? ckpt__path_join(*dir ? dir : "/", "saved_model.pb") : NULL;
	int rc = file ? CKPT_OK : CKPT_ENOMEM, is_dir = 0;
	int e = rc == CKPT_OK ? ckpt_vfs_exists(&is_dir, r->vfs, file) : 0;
	if (e < 0)
		rc = e;
	else if (e > 0 && !is_dir)
		rc = ckpt_saved_model_read(&r->saved_model, file, r->vfs);
	ckpt__free(dir);
	ckpt__free(file);
	return rc;
}

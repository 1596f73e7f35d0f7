/*
 * The compile-time table of format backends (format_registry.h): the only
 * file of libckpt/ that names one. Order breaks ties between equal bids.
 */
#include <string.h>
#include "reader/format_registry.h"

static const ckpt_format *const formats[] = {
	&ckpt_format_tf_bundle,
#ifdef CKPT_HAVE_HDF5
	&ckpt_format_keras_h5,
#endif
#ifdef CKPT_HAVE_LIBARCHIVE
	&ckpt_format_keras_archive,
#endif
	&ckpt_format_safetensors,
	&ckpt_format_gguf,
	NULL
};

const ckpt_format *ckpt__format_bid(ckpt_vfs *vfs, const char *path, const unsigned char *head, size_t nhead)
{
	const ckpt_format *best = NULL;
	int best_bid = -1;
	for (size_t i = 0; formats[i]; i++) {
		if (!formats[i]->bid)
			continue;
		int b = formats[i]->bid(vfs, path, head, nhead);
		if (b > best_bid) {
			best_bid = b;
			best = formats[i];
		}
	}
	return best;
}

const ckpt_format *ckpt__format_writer(const char *format)
{
	for (size_t i = 0; formats[i]; i++) {
		const char *const *names = formats[i]->write_formats;
		for (size_t j = 0; names && names[j]; j++)
			if (strcmp(names[j], format) == 0)
				return formats[i];
	}
	return NULL;
}

const ckpt__format_incr *ckpt__format_incr_of(const ckpt_format *f)
{
	return f == &ckpt_format_tf_bundle ? &ckpt_format_tf_bundle_incr : NULL;
}

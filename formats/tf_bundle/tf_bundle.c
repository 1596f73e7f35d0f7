/*
 * The TensorBundle backend table and its bid. A bundle is recognised by
 * resolving PATH to a prefix whose P.index ends with the SSTable magic
 * 57 fb 80 8b 24 75 47 db; HDF5 (\x89HDF) and ZIP (PK\3\4) heads are never ours.
 */
#include <string.h>
#include "tfb.h"

static int tfb_bid(ckpt_vfs *vfs, const char *path, const unsigned char *head, size_t n)
{
	if (n >= 4 && (memcmp(head, "\x89HDF", 4) == 0 || memcmp(head, "PK\x03\x04", 4) == 0))
		return -1;
	/* bidding leaves the caller's last error alone */
	ckpt__error_slot saved = { 0 };
	ckpt__error_capture(&saved);
	int score = -1;
	char *prefix = NULL;
	int rc = tfb_resolve_path(vfs, path, &prefix);
	if (rc == CKPT_ENOMEM || rc == CKPT_EIO || rc == CKPT_EFORMAT)
		score = 1; /* cannot tell: let open report the allocation failure, outage or bad state file */
	if (rc == CKPT_OK) {
		score = 10; /* resolves to a P.index: let open explain what is wrong with it */
		char *ix = tfb_index_path(prefix);
		ckpt_io *io = NULL;
		uint64_t size = 0;
		unsigned char m[8];
		if (ix && ckpt_vfs_open(&io, vfs, ix, CKPT_IO_READ) == CKPT_OK &&
		    ckpt_io_size(&size, io) == CKPT_OK && size >= TFB_FOOTER_LEN &&
		    ckpt_io_read_exact(io, m, 8, size - 8) == CKPT_OK &&
		    memcmp(m, "\x57\xfb\x80\x8b\x24\x75\x47\xdb", 8) == 0)
			score = 100;
		ckpt_io_close(io);
		ckpt__free(ix);
	}
	ckpt__free(prefix);
	ckpt__error_raise(&saved);
	ckpt__error_slot_clear(&saved);
	return score;
}

static const char *const tfb_write_formats[] = { "tf-bundle", NULL };

const ckpt_format ckpt_format_tf_bundle = {
	1,
	"tf-bundle",
	tfb_bid,
	tfb_open,
	tfb_read,
	tfb_read_into,
	tfb_close,
	tfb_write_formats,
	tfb_writer_open,
	tfb_writer_add,
	tfb_writer_commit,
	tfb_writer_close,
	tfb_verify,
	NULL, /* writer_announce: nothing staged, announcements ignored */
	tfb_read_rows,
	tfb_writer_add_partitioned,
	tfb_read_many,
	tfb_writer_add_pieces,
	tfb_trim,
};

const ckpt__format_incr ckpt_format_tf_bundle_incr = {
	&ckpt_format_tf_bundle,
	tfb_writer_incremental,
	tfb_writer_add_clean,
};

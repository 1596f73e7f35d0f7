/*
 * ckpt-h5-reader: the libhdf5 sandbox server (formats/keras_h5/h5_sandbox.h)
 * that libckpt starts so that libhdf5 never runs on a file being read in the
 * caller's process and a job does not cost a fork of the caller. Not a user
 * command: it serves one caller on fd 3 and exits when that caller closes
 * it. The server (formats/keras_h5/h5_sandbox_server.c) and its half of the
 * wire codec (h5_sandbox_wire_server.c) are compiled into this binary only.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "formats/keras_h5/h5_sandbox.h"
#include "formats/keras_h5/keras_h5.h"

int main(int argc, char **argv)
{
	if (argc != 2 || strcmp(argv[1], "--serve-fd-3") != 0) {
		fprintf(stderr, "ckpt-h5-reader: started by libckpt only (it serves the caller on fd 3)\n");
		return 2;
	}
	/* _exit: no atexit work (libhdf5's, the sanitizers' leak check) in a process that only served jobs */
	_exit(ckpt__h5_sandbox_server_main(3, ckpt__keras_h5_serve));
}

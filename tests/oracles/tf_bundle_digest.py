"""Read TensorBundles with TensorFlow itself (tf.train.load_checkpoint), the
independent reader for bundles libckpt writes. TensorFlow checks each
entry's stored crc32c as it reads it.

Usage: $CKPT_ORACLE_PYTHON tf_bundle_digest.py PREFIX [PREFIX...]
One line per entry, sorted by name, after a "== PREFIX" line:
  NAME<TAB>DTYPE<TAB>SHAPE<TAB>CRC32   (zlib crc32 of the value's bytes, 0x%08x)
or NAME<TAB>ERROR<TAB>EXCEPTION-CLASS when TensorFlow refuses to read it.
The object-graph entry is skipped.
"""
import sys
import zlib

import tensorflow as tf


def main(prefixes):
    for prefix in prefixes:
        print("== " + prefix)
        reader = tf.train.load_checkpoint(prefix)
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
        for name in sorted(shapes):
            if name == "_CHECKPOINTABLE_OBJECT_GRAPH":
                continue
            try:
                value = reader.get_tensor(name)
            except Exception as e:  # DataLossError on a checksum mismatch
                print("%s\tERROR\t%s" % (name, type(e).__name__))
                continue
            print("%s\t%s\t%s\t0x%08x" % (name, dtypes[name].name, ",".join(str(d) for d in shapes[name]),
                                          zlib.crc32(value.tobytes()) & 0xffffffff))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

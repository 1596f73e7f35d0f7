"""The TensorFlow checkpoint keys of a Keras 2 (tf.keras) HDF5 model, as
tf.keras itself writes them: each FILE is loaded with tf_keras (the Keras 2
package, pinned in requirements.txt), saved with save_weights in the TF
format, and its checkpoint listed. The independent reference for the
HDF5-dataset -> TF-key mapping of libckpt's Keras reader.

Usage: $CKPT_ORACLE_PYTHON tf_keras_keys.py FILE [FILE...]
Per FILE a line "== FILE", then one line per stored value, sorted:
  KEY<TAB>CRC32   (zlib crc32 of the value's bytes, 0x%08x)
The object-graph entry is left out.
"""
import os
import sys
import tempfile
import zlib

import numpy as np
import tensorflow as tf
import tf_keras


def main(files):
    for path in files:
        print("== " + path)
        model = tf_keras.models.load_model(path, compile=True)
        with tempfile.TemporaryDirectory() as d:
            prefix = os.path.join(d, "ck")
            model.save_weights(prefix, save_format="tf")
            reader = tf.train.load_checkpoint(prefix)
            for key in sorted(reader.get_variable_to_shape_map()):
                if key == "_CHECKPOINTABLE_OBJECT_GRAPH":
                    continue
                value = np.ascontiguousarray(reader.get_tensor(key))
                print("%s\t0x%08x" % (key, zlib.crc32(value.tobytes()) & 0xffffffff))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

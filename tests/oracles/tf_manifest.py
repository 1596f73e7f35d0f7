"""What TensorFlow itself reports about a checkpoint, as JSON the C tests compare against.

One entry per stored tensor, from tf.train.load_checkpoint (TF's own bundle
reader): dtype name, shape, and the raw bytes as hex -- row-major
little-endian for fixed-size dtypes, one hex string per element for strings.
Shared by the oracle scripts; imports TensorFlow lazily.
"""
import json


def tensor_record(dtype_name, arr):
    import numpy as np
    rec = {"dtype": dtype_name, "shape": [int(d) for d in np.shape(arr)]}
    if dtype_name == "string":
        flat = np.asarray(arr, dtype=object).reshape(-1)
        rec["elems"] = [bytes(e).hex() for e in flat]
    else:
        rec["hex"] = np.ascontiguousarray(arr).tobytes().hex()
    return rec


def bundle_entries(prefix):
    import tensorflow as tf
    r = tf.train.load_checkpoint(prefix)
    dts = r.get_variable_to_dtype_map()
    out = {}
    for name, dt in sorted(dts.items()):
        out[name] = tensor_record(dt.name, r.get_tensor(name))
    return out


def dump(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)

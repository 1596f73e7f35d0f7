"""Keras 3 (TensorFlow backend) as the reference for .keras and .weights.h5.

usage: keras_roundtrip.py write OUTDIR
       keras_roundtrip.py check OUTDIR FILE...

write: trains a small model (Dense, BatchNormalization, Dense; Adam; mae
  metric) and saves it as OUTDIR/m.keras (model.save), OUTDIR/m.weights.h5
  (save_weights) and OUTDIR/sh.weights.json + sh_*.weights.h5
  (save_weights(max_shard_size=...), at least 2 shards). OUTDIR/manifest.json
  holds, per file, every HDF5 dataset as h5py reads it (path, dtype, shape,
  bytes as hex; the shards' datasets together), and Keras' own values of
  every model weight and optimizer variable, in order.
check: every FILE (a .keras or a .weights.h5 libckpt wrote) is loaded by
  Keras -- keras.saving.load_model for .keras, model.load_weights into a
  fresh compiled model with a built optimizer for .weights.h5 -- and every
  model weight and optimizer variable must equal the saved model's byte for
  byte. Prints "ok FILE" per file.
"""
import io
import json
import os
import sys
import zipfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import keras  # noqa: E402

from tf_manifest import tensor_record  # noqa: E402


def build():
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(24, activation="relu"),
                              keras.layers.BatchNormalization(), keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.005), loss="mse", metrics=["mae"])
    return model


def h5_entries(f, out):
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            arr = obj[()]
            out[name] = tensor_record(str(arr.dtype) if arr.dtype != bool else "bool", arr)
    f.visititems(visit)
    return out


def values(model):
    return {"weights": [np.asarray(w).tobytes().hex() for w in model.weights],
            "optimizer": [np.asarray(v).tobytes().hex() for v in model.optimizer.variables]}


def write(out):
    keras.utils.set_random_seed(11)
    model = build()
    rs = np.random.RandomState(5)
    model.fit(rs.rand(48, 6).astype("float32"), rs.rand(48, 3).astype("float32"), epochs=2, batch_size=12,
              verbose=0)
    model.save(os.path.join(out, "m.keras"))
    model.save_weights(os.path.join(out, "m.weights.h5"))
    model.save_weights(os.path.join(out, "sh.weights.json"), max_shard_size=0.000002)
    files = {}
    with zipfile.ZipFile(os.path.join(out, "m.keras")) as z:
        with h5py.File(io.BytesIO(z.read("model.weights.h5")), "r") as f:
            files["m.keras"] = h5_entries(f, {})
    with h5py.File(os.path.join(out, "m.weights.h5"), "r") as f:
        files["m.weights.h5"] = h5_entries(f, {})
    with open(os.path.join(out, "sh.weights.json")) as f:
        shards = sorted({s for lst in json.load(f)["weight_map"].values() for s in lst})
    assert len(shards) >= 2, shards
    files["sh.weights.json"] = {}
    for s in shards:
        with h5py.File(os.path.join(out, s), "r") as f:
            h5_entries(f, files["sh.weights.json"])
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"keras": keras.__version__, "files": files, "shards": shards, "values": values(model)}, f,
                  indent=1, sort_keys=True)


def check(out, paths):
    with open(os.path.join(out, "manifest.json")) as f:
        want = json.load(f)["values"]
    for p in paths:
        if p.endswith(".keras"):
            model = keras.saving.load_model(p)
        else:
            model = build()
            model.optimizer.build(model.trainable_variables)
            model.load_weights(p)
        got = values(model)
        for part in ("weights", "optimizer"):
            if len(got[part]) != len(want[part]):
                raise AssertionError("%s: %d %s variables, saved model had %d" % (p, len(got[part]), part,
                                                                               len(want[part])))
            for i, (g, w) in enumerate(zip(got[part], want[part])):
                if g != w:
                    raise AssertionError("%s: %s variable %d (%s) differs" % (
                        p, part, i, (model.weights if part == "weights" else model.optimizer.variables)[i].path))
        print("ok", p)
        sys.stdout.flush()


if sys.argv[1] == "write":
    write(sys.argv[2])
else:
    check(sys.argv[2], sys.argv[3:])

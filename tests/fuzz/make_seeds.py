#!/usr/bin/python3
"""Seed the fuzz corpora from tests/fixtures (small files only).

Run once; then minimize with libFuzzer -merge=1 (see README.md). Uses the
project's standard-library decoder, tests/scripts/bundle_check.py.
"""
import glob
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import bundle_check  # noqa: E402

FIX = os.path.normpath(os.path.join(HERE, "..", "fixtures"))
OUT = os.path.join(HERE, "corpora")
MAX_FILE = 64 * 1024


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def tag(path):
    rel = os.path.relpath(path, FIX)
    return rel.replace("/", "__")


def main():
    indexes = sorted(glob.glob(os.path.join(FIX, "tf", "**", "*.index"), recursive=True))
    for ix in indexes:
        raw = open(ix, "rb").read()
        put("tf_index", tag(ix), raw)
        prefix = ix[:-len(".index")]
        shards = sorted(glob.glob(glob.escape(prefix) + ".data-*"))
        datas = [open(s, "rb").read() for s in shards]
        if sum(len(d) for d in datas) <= MAX_FILE:
            blob = struct.pack("<I", len(raw)) + raw
            for d in datas:
                blob += struct.pack("<I", len(d)) + d
            put("tf_bundle", tag(ix), blob)
        # object graph: the single element of the scalar string tensor
        bundle = bundle_check.load(prefix)
        for k, e in bundle.entries:
            if k != b"_CHECKPOINTABLE_OBJECT_GRAPH":
                continue
            strings, _, _ = bundle_check.string_tensor(bundle.tensor_bytes(e), 1)
            put("object_graph", tag(ix), strings[0])
    for sm in sorted(glob.glob(os.path.join(FIX, "tf", "**", "saved_model.pb"), recursive=True)):
        put("saved_model", tag(sm), open(sm, "rb").read())
    for st in sorted(glob.glob(os.path.join(FIX, "tf", "*", "checkpoint"))):
        put("state_file", tag(st), open(st, "rb").read())
    put("state_file", "manager_example", b'model_checkpoint_path: "ckpt-1"\n'
        b'all_model_checkpoint_paths: "ckpt-1"\n'
        b'all_model_checkpoint_timestamps: 1606867698.033619\n'
        b'last_preserved_timestamp: 1606867659.7415721\n')
    put("state_file", "escapes", b'model_checkpoint_path: "ckpt\\055\\x31"\n')
    for h5 in sorted(glob.glob(os.path.join(FIX, "keras", "**", "*.h5"), recursive=True)
                     + glob.glob(os.path.join(FIX, "keras", "**", "*.hdf5"), recursive=True)):
        if os.path.getsize(h5) <= MAX_FILE:
            put("keras_h5", tag(h5), open(h5, "rb").read())
    import zipfile
    for k in sorted(glob.glob(os.path.join(FIX, "keras", "*.keras"))):
        if os.path.getsize(k) <= MAX_FILE:
            put("keras_archive", tag(k), open(k, "rb").read())
        z = zipfile.ZipFile(k)
        put("keras_config", tag(k) + ".config.json", z.read("config.json"))
        # the weights member alone is a Keras 3 .weights.h5
        w = z.read("model.weights.h5")
        if len(w) <= MAX_FILE:
            put("keras_h5", tag(k) + ".model.weights.h5", w)


if __name__ == "__main__":
    main()

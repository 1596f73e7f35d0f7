#!/usr/bin/python3
"""Craft hostile Keras HDF5 files and .keras archives for test_keras_hostile.c.

Usage: make_keras_hostile.py OUTDIR

Every file is small and written with h5py / zipfile (no Keras needed). Each
one breaks exactly one rule from docs/formats/hostile-inputs.md;
the C test opens it and checks the error code and message.
"""
import io
import os
import struct
import sys
import zipfile

import h5py
import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def p(name):
    return os.path.join(out, name)


def legacy(name, layer_setup, libver="earliest"):
    """A legacy weights-only file with one layer 'dense_1' prepared by layer_setup(f)."""
    with h5py.File(p(name), "w", libver=libver) as f:
        f.attrs["layer_names"] = [b"dense_1"]
        f.attrs["backend"] = b"tensorflow"
        f.attrs["keras_version"] = b"2.4.0"
        layer_setup(f)


def good_layer(f):
    g = f.create_group("dense_1")
    g.attrs["weight_names"] = [b"dense_1/kernel:0"]
    g.create_dataset("dense_1/kernel:0", data=np.ones((2, 2), np.float32))


# a valid baseline (the test checks it opens)
legacy("ok_legacy.h5", good_layer)

# 20: links that point elsewhere
with h5py.File(p("target.h5"), "w") as f:
    f.create_dataset("kernel", data=np.ones((2, 2), np.float32))


def external_layer(f):
    f["dense_1"] = h5py.ExternalLink("target.h5", "/")


legacy("external_link.h5", external_layer)


def soft_layer(f):
    g = f.create_group("real")
    g.attrs["weight_names"] = [b"dense_1/kernel:0"]
    g.create_dataset("dense_1/kernel:0", data=np.ones((2, 2), np.float32))
    f["dense_1"] = h5py.SoftLink("/real")


legacy("soft_link.h5", soft_layer)


def soft_dataset(f):
    g = f.create_group("dense_1")
    g.attrs["weight_names"] = [b"dense_1/kernel:0"]
    g.create_dataset("data", data=np.ones((2, 2), np.float32))
    g.create_group("dense_1")
    g["dense_1/kernel:0"] = h5py.SoftLink("/dense_1/data")


legacy("soft_link_dataset.h5", soft_dataset)

with h5py.File(p("k3_soft_link.weights.h5"), "w") as f:
    f.create_dataset("layers/other/vars/0", data=np.ones((2,), np.float32))
    v = f.create_group("layers/dense/vars")
    v["0"] = h5py.SoftLink("/layers/other/vars/0")

with h5py.File(p("k3_external_link.weights.h5"), "w") as f:
    f.create_group("layers/dense")
    f["layers/dense/vars"] = h5py.ExternalLink("target.h5", "/")

# 20: external storage and virtual datasets
with open(p("raw.bin"), "wb") as fh:
    fh.write(b"\0" * 64)


def external_storage(f):
    g = f.create_group("dense_1")
    g.attrs["weight_names"] = [b"dense_1/kernel:0"]
    g.create_dataset("dense_1/kernel:0", shape=(4, 4), dtype=np.float32, external=[(p("raw.bin"), 0, 64)])


legacy("external_storage.h5", external_storage)


def virtual(f):
    g = f.create_group("dense_1")
    g.attrs["weight_names"] = [b"dense_1/kernel:0"]
    layout = h5py.VirtualLayout(shape=(2, 2), dtype=np.float32)
    layout[:] = h5py.VirtualSource("target.h5", "kernel", shape=(2, 2))
    g.create_virtual_dataset("dense_1/kernel:0", layout)


legacy("virtual.h5", virtual, libver="latest")

# 21: shape bomb (declared 4 TiB, nothing stored)


def bomb(f):
    g = f.create_group("dense_1")
    g.attrs["weight_names"] = [b"dense_1/kernel:0"]
    g.create_dataset("dense_1/kernel:0", shape=(1 << 40,), dtype=np.float32)


legacy("shape_bomb.h5", bomb)

# filtered chunked layout


def gzip_layer(f):
    g = f.create_group("dense_1")
    g.attrs["weight_names"] = [b"dense_1/kernel:0"]
    g.create_dataset("dense_1/kernel:0", data=np.ones((64, 64), np.float32), chunks=(8, 8), compression="gzip")


legacy("gzip_filter.h5", gzip_layer)

# 22: oversized attributes (dense attribute storage needs libver latest)
with h5py.File(p("huge_attr.h5"), "w", libver="latest") as f:
    f.attrs["layer_names"] = np.array([b"x" * 16] * (1100 * 1024), dtype="S16")  # 17.6 MB fixed-length


with h5py.File(p("huge_vlen_attr.h5"), "w", libver="latest") as f:
    f.attrs["model_config"] = "{" + " " * (17 << 20) + "}"
    f.create_group("model_weights").attrs["layer_names"] = []

# 10: names from attributes that would escape


def dotdot(f):
    g = f.create_group("dense_1")
    g.attrs["weight_names"] = [b"../dense_2/kernel:0"]


legacy("dotdot_weight_name.h5", dotdot)

with h5py.File(p("absolute_layer_name.h5"), "w") as f:
    f.attrs["layer_names"] = [b"/dense_1"]
    good_layer(f)

# 9: one dataset listed twice


def twice(f):
    g = f.create_group("dense_1")
    g.attrs["weight_names"] = [b"dense_1/kernel:0", b"dense_1/kernel:0"]
    g.create_dataset("dense_1/kernel:0", data=np.ones((2, 2), np.float32))


legacy("duplicate_weight.h5", twice)

# Keras 3 vars names parsed strictly
for tag, names in {"leading_zero": ["0", "01"], "sign": ["+0"], "gap": ["0", "2"], "text": ["kernel"]}.items():
    with h5py.File(p("k3_vars_%s.weights.h5" % tag), "w") as f:
        v = f.create_group("layers/dense/vars")
        for n in names:
            v.create_dataset(n, data=np.ones((2,), np.float32))

# 12: deep nesting
with h5py.File(p("k3_deep.weights.h5"), "w") as f:
    f.create_group("layers/" + "/".join("g%d" % i for i in range(100)))

# 8: truncated file (a real Keras 3 store cut in half)
buf = io.BytesIO()
with h5py.File(buf, "w") as f:
    f.create_dataset("layers/dense/vars/0", data=np.arange(4096, dtype=np.float32))
data = buf.getvalue()
with open(p("truncated.weights.h5"), "wb") as fh:
    fh.write(data[: len(data) // 2])
with open(p("k3_ok.weights.h5"), "wb") as fh:
    fh.write(data)

# --------------------------------------------------------------- .keras zips
META = b'{"keras_version": "3.9.2", "date_saved": "2025-05-19@18:57:43"}'
CONFIG = b'{"module": "keras", "class_name": "Sequential", "config": {"name": "s", "layers": []}, "registered_name": null}'


def zip_members(name, members):
    with zipfile.ZipFile(p(name), "w") as z:
        for m in members:
            if isinstance(m, zipfile.ZipInfo):
                z.writestr(m, b"x")
            else:
                z.writestr(m[0], m[1])


base = [("metadata.json", META), ("config.json", CONFIG), ("model.weights.h5", data)]
zip_members("ok.keras", base)
zip_members("dotdot.keras", base + [("assets/../../evil", b"x")])
zip_members("absolute.keras", base + [("/etc/evil", b"x")])
zip_members("backslash.keras", base + [("assets\\evil", b"x")])
link = zipfile.ZipInfo("assets/link")
link.create_system = 3
link.external_attr = (0o120777 << 16)
zip_members("symlink.keras", base + [link])
with zipfile.ZipFile(p("duplicate.keras"), "w") as z:
    import warnings
    warnings.simplefilter("ignore")
    for m in base + [("config.json", CONFIG)]:
        z.writestr(m[0], m[1])
zip_members("missing_weights.keras", base[:2])
zip_members("bad_json.keras", [base[0], ("config.json", b"{not json"), base[2]])
zip_members("npz.keras", base[:2] + [("model.weights.npz", b"PK")])

# a legacy HDF5 file inside the archive
with open(p("ok_legacy.h5"), "rb") as fh:
    legacy_bytes = fh.read()
zip_members("legacy_member.keras", base[:2] + [("model.weights.h5", legacy_bytes)])

# 28: Lambda config is data
lam = (b'{"module": "keras", "class_name": "Sequential", "config": {"name": "s", "layers": ['
       b'{"module": "keras.layers", "class_name": "Lambda", "config": {"name": "evil_lambda", "function": '
       b'{"class_name": "__lambda__", "config": {"code": "YmFzZTY0", "defaults": null, "closure": null}}}, '
       b'"registered_name": null}]}, "registered_name": null}')
zip_members("lambda.keras", [base[0], ("config.json", lam), base[2]])


def patch_all(name, src, fn):
    """Copy src to name, applying fn(bytearray) to the bytes."""
    with open(p(src), "rb") as fh:
        b = bytearray(fh.read())
    fn(b)
    with open(p(name), "wb") as fh:
        fh.write(bytes(b))


def headers(b):
    i = 0
    while True:
        j = b.find(b"PK\x03\x04", i)
        if j < 0:
            break
        yield "local", j
        i = j + 4
    i = 0
    while True:
        j = b.find(b"PK\x01\x02", i)
        if j < 0:
            break
        yield "central", j
        i = j + 4


# 27: encrypted flag (bit 0) on every member
def encrypt(b):
    for kind, off in headers(b):
        o = off + (6 if kind == "local" else 8)
        struct.pack_into("<H", b, o, struct.unpack_from("<H", b, o)[0] | 1)


patch_all("encrypted.keras", "ok.keras", encrypt)


# 26: huge declared size (uncompressed size field) for model.weights.h5
def huge(b):
    for kind, off in headers(b):
        nlen_off = off + (26 if kind == "local" else 28)
        nlen = struct.unpack_from("<H", b, nlen_off)[0]
        name = bytes(b[off + (30 if kind == "local" else 46): off + (30 if kind == "local" else 46) + nlen])
        if name == b"model.weights.h5":
            struct.pack_into("<I", b, off + (22 if kind == "local" else 24), 0xFFFFFFF0)


patch_all("huge_declared.keras", "ok.keras", huge)

# not a zip after all, and a truncated one
with open(p("ok.keras"), "rb") as fh:
    z = fh.read()
with open(p("truncated.keras"), "wb") as fh:
    fh.write(z[: len(z) // 2])
print("ok")

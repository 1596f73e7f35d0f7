#!/usr/bin/python3
"""Check a Keras file written by libckpt with h5py / zipfile, against a real
Keras-written fixture of the same layout (encodings, structure, storage).

Usage: check_keras_written.py LAYOUT WRITTEN REFERENCE
  LAYOUT: legacy (model.save .h5), v3 (.weights.h5) or keras (.keras zip)
Prints "OK ..." and exits 0, or prints every problem and exits 1.
"""
import io
import sys
import zipfile

import h5py
import numpy as np

problems = []


def bad(msg):
    problems.append(msg)


def attr_kind(obj, name):
    """(class, vlen, cset, shape) of an attribute, as Keras/h5py encode it."""
    a = obj.attrs.get_id(name)
    t = a.get_type()
    cls = t.get_class()
    vlen = cls == h5py.h5t.STRING and t.is_variable_str()
    cset = t.get_cset() if cls == h5py.h5t.STRING else None
    shape = a.shape
    return (cls, vlen, cset, len(shape))


def check_storage(f):
    """Every dataset contiguous, unfiltered; superblock v0; old-style groups."""
    sb = f.id.get_create_plist().get_version()[0]
    if sb != 0:
        bad("superblock version %d, want 0" % sb)

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            pl = obj.id.get_create_plist()
            if pl.get_layout() != h5py.h5d.CONTIGUOUS:
                bad("%s: layout %d, want CONTIGUOUS" % (name, pl.get_layout()))
            if pl.get_nfilters():
                bad("%s: has filters" % name)
            if obj.size and obj.id.get_storage_size() != obj.nbytes:
                bad("%s: storage %d != %d bytes" % (name, obj.id.get_storage_size(), obj.nbytes))
    f.visititems(visit)


def same_kind(w, r, name, wobj, robj):
    kw, kr = attr_kind(wobj, name), attr_kind(robj, name)
    if kw != kr:
        bad("attribute %s@%s: written %r, reference %r (class, vlen, cset, rank)" % (w, name, kw, kr))


def strings(v):
    if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size == 0:
        return []
    return [x.decode() if isinstance(x, bytes) else str(x) for x in v]


def check_legacy(f, ref):
    check_storage(f)
    # Keras 1 files have no backend (and weights-only ones no keras_version either).
    kv = f.attrs.get("keras_version", b"1")
    keras1 = (kv.decode() if isinstance(kv, bytes) else str(kv)).startswith("1")
    for a in ("keras_version", "backend"):
        if a not in f.attrs:
            if not keras1:
                bad("root has no %s" % a)
        else:
            same_kind("/", "/", a, f, ref)
    for a in ("model_config", "training_config"):
        if a in f.attrs:
            same_kind("/", "/", a, f, ref)
    if "model_weights" not in f:
        bad("no model_weights group")
        return
    mw, rmw = f["model_weights"], ref["model_weights"]
    for a in ("keras_version", "backend", "layer_names"):
        if a == "layer_names" and "layer_names0" in mw.attrs:
            if "layer_names" in mw.attrs:
                bad("both layer_names and layer_names0")
            k = attr_kind(mw, "layer_names0")
            if k[1] or k[0] != h5py.h5t.STRING:
                bad("chunk layer_names0 is %r, Keras writes FIXED strings" % (k,))
        elif a not in mw.attrs:
            if not (keras1 and a != "layer_names"):
                bad("model_weights has no %s" % a)
        else:
            same_kind("model_weights", "model_weights", a, mw, rmw)
    names = strings(mw.attrs["layer_names"]) if "layer_names" in mw.attrs else []
    if not names:  # chunked
        k = 0
        while "layer_names%d" % k in mw.attrs:
            names += strings(mw.attrs["layer_names%d" % k])
            k += 1
    # reference encodings of a weighted and a weightless layer
    ref_full = ref_empty = None
    for ln in strings(rmw.attrs["layer_names"]):
        wn = rmw[ln].attrs["weight_names"]
        if isinstance(wn, np.ndarray) and wn.dtype.kind == "f":
            ref_empty = ref_empty or rmw[ln]
        else:
            ref_full = ref_full or rmw[ln]
    count = 0
    for ln in names:
        if ln not in mw:
            bad("layer_names lists %s but there is no group" % ln)
            continue
        g = mw[ln]
        if "weight_names" not in g.attrs:
            bad("%s has no weight_names" % ln)
            continue
        wn = strings(g.attrs["weight_names"])
        same_kind(ln, "ref", "weight_names", g, ref_full if wn else ref_empty)
        for w in wn:
            if w not in g or not isinstance(g[w], h5py.Dataset):
                bad("%s/%s listed but missing" % (ln, w))
            count += 1
    if "top_level_model_weights" in mw:
        same_kind("top_level_model_weights", "ref", "weight_names", mw["top_level_model_weights"],
                  rmw["top_level_model_weights"] if "top_level_model_weights" in rmw else ref_empty)
    if "optimizer_weights" in f:
        ow = f["optimizer_weights"]
        same_kind("optimizer_weights", "ref", "weight_names", ow, ref["optimizer_weights"])
        for w in strings(ow.attrs["weight_names"]):
            if w not in ow:
                bad("optimizer_weights/%s listed but missing" % w)
            count += 1
    return count


def check_v3(f, ref):
    check_storage(f)
    if len(f.attrs):
        bad("Keras 3 store has root attributes %r" % list(f.attrs))
    count = [0]

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            parent, _, leaf = name.rpartition("/")
            if not parent.endswith("vars") or not leaf.isdigit() or str(int(leaf)) != leaf:
                bad("dataset %s is not <...>/vars/<N>" % name)
            if "dtype" in obj.attrs:
                if obj.attrs["dtype"] != "bfloat16" or obj.dtype.itemsize != 2:
                    bad("%s: dtype attribute %r" % (name, obj.attrs["dtype"]))
            count[0] += 1
        elif name.endswith("vars"):
            keys = sorted(int(k) for k in obj.keys())
            if keys != list(range(len(keys))):
                bad("%s holds %r, want 0..n-1" % (name, keys))
    f.visititems(visit)
    top = set(f.keys())
    if not top <= {"layers", "optimizer", "vars"}:
        bad("unexpected top-level groups %r" % sorted(top))
    if not top & set(ref.keys()):
        bad("no top-level group in common with the reference %r" % sorted(ref.keys()))
    return count[0]


def main():
    layout, written, reference = sys.argv[1:4]
    if layout == "keras":
        z, rz = zipfile.ZipFile(written), zipfile.ZipFile(reference)
        names = [i.filename for i in z.infolist()]
        rnames = [i.filename for i in rz.infolist()]
        if names != rnames[:3] or names != ["metadata.json", "config.json", "model.weights.h5"]:
            bad("members %r, reference %r" % (names, rnames))
        for i in z.infolist():
            if i.compress_type != zipfile.ZIP_STORED:
                bad("%s: compression %d, want STORED" % (i.filename, i.compress_type))
        if z.testzip() is not None:
            bad("CRC error in %s" % z.testzip())
        import json
        json.loads(z.read("metadata.json"))
        json.loads(z.read("config.json"))
        f = h5py.File(io.BytesIO(z.read("model.weights.h5")), "r")
        ref = h5py.File(io.BytesIO(rz.read("model.weights.h5")), "r")
        n = check_v3(f, ref)
    else:
        f, ref = h5py.File(written, "r"), h5py.File(reference, "r")
        n = check_legacy(f, ref) if layout == "legacy" else check_v3(f, ref)
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print("OK %s %d datasets" % (layout, n))


main()

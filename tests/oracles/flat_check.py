"""Check files libckpt wrote with the real PyPI readers.

Usage: flat_check.py MANIFEST.json
MANIFEST: [{"file", "format": "safetensors" | "gguf", "tensors": [{"name", "dtype", "shape",
"bytes", "crc32"}], "metadata": {...} | null, "kv": [[key, type, value], ...]}, ...]
safetensors: dtype is the safetensors name, shape row-major; read with
safetensors.numpy.load_file and safe_open (metadata, keys, per-tensor dtype).
gguf: dtype is the ggml type name, shape in ggml order (ne); read with gguf.GGUFReader
(names, types, ne, n_bytes, data bytes, key-value pairs and their types).
Prints one line per file; exits 1 on the first mismatch.
"""
import json
import sys
import zlib

import numpy as np

failures = []


def fail(f, msg):
    failures.append("%s: %s" % (f, msg))


def check_st(item):
    from safetensors import safe_open
    from safetensors.numpy import load_file
    f = item["file"]
    arrays = load_file(f)
    want = {t["name"]: t for t in item["tensors"]}
    if sorted(arrays) != sorted(want):
        fail(f, "names %s, want %s" % (sorted(arrays), sorted(want)))
        return
    with safe_open(f, framework="np") as h:
        meta = h.metadata()
        for name in h.keys():
            sl = h.get_slice(name)
            if sl.get_dtype() != want[name]["dtype"]:
                fail(f, "%s: dtype %s, want %s" % (name, sl.get_dtype(), want[name]["dtype"]))
    if (meta or None) != (item.get("metadata") or None):
        fail(f, "metadata %r, want %r" % (meta, item.get("metadata")))
    for name, a in arrays.items():
        t = want[name]
        b = np.ascontiguousarray(a).tobytes()
        if list(a.shape) != t["shape"] or len(b) != t["bytes"] or zlib.crc32(b) != t["crc32"]:
            fail(f, "%s: shape %s bytes %d crc %08x, want %s %d %08x" % (name, list(a.shape), len(b), zlib.crc32(b),
                                                                         t["shape"], t["bytes"], t["crc32"]))


def kv_value(field):
    from gguf import GGUFValueType
    t = field.types[0]
    if t == GGUFValueType.ARRAY:
        return [field.contents(i) for i in range(len(field.data))]
    return field.contents()


def check_gguf(item):
    import gguf
    f = item["file"]
    r = gguf.GGUFReader(f)
    got = [t.name for t in r.tensors]
    want = [t["name"] for t in item["tensors"]]
    if got != want:
        fail(f, "tensors %s, want %s (in order)" % (got, want))
        return
    for t, w in zip(r.tensors, item["tensors"]):
        b = np.ascontiguousarray(t.data).tobytes()
        if t.tensor_type.name != w["dtype"] or [int(x) for x in t.shape] != w["shape"] or \
                int(t.n_bytes) != w["bytes"] or len(b) != w["bytes"] or zlib.crc32(b) != w["crc32"]:
            fail(f, "%s: %s ne=%s %d bytes crc %08x, want %s %s %d %08x" % (
                t.name, t.tensor_type.name, [int(x) for x in t.shape], int(t.n_bytes), zlib.crc32(b),
                w["dtype"], w["shape"], w["bytes"], w["crc32"]))
        if int(t.data_offset) % r.alignment:
            fail(f, "%s: data offset %d not aligned to %d" % (t.name, t.data_offset, r.alignment))
    names = {"u8": "UINT8", "i8": "INT8", "u16": "UINT16", "i16": "INT16", "u32": "UINT32", "i32": "INT32",
             "f32": "FLOAT32", "bool": "BOOL", "string": "STRING", "array": "ARRAY", "u64": "UINT64",
             "i64": "INT64", "f64": "FLOAT64"}
    fields = {k: v for k, v in r.fields.items() if not k.startswith("GGUF.")}
    for key, typ, value in item.get("kv", []):
        if key not in fields:
            fail(f, "key %s missing" % key)
            continue
        fl = fields[key]
        if fl.types[0].name != names[typ]:
            fail(f, "key %s: type %s, want %s" % (key, fl.types[0].name, typ))
        v = kv_value(fl)
        if isinstance(value, float):
            ok = abs(float(v) - value) == 0
        else:
            ok = v == value
        if not ok:
            fail(f, "key %s: %r, want %r" % (key, v, value))
    extra = sorted(set(fields) - {k for k, _, _ in item.get("kv", [])})
    if extra:
        fail(f, "unexpected keys %s" % extra)


for item in json.load(open(sys.argv[1])):
    n = len(failures)
    (check_st if item["format"] == "safetensors" else check_gguf)(item)
    if len(failures) == n:
        print("OK %s: %d tensors" % (item["file"], len(item["tensors"])))
for x in failures:
    print("MISMATCH " + x)
sys.exit(1 if failures else 0)

#!/usr/bin/python3
"""Independent oracle for `ckpt inspect --json` (tests/cli/test_cli.c).

  expected_inspect.py PATH         print {"variables": [{"name", "dtype", "shape",
                                   "bytes", "crc32", "crc32c"}, ...]} for one checkpoint
  expected_inspect.py --list DIR   print the checkpoint paths of every fixture under
                                   DIR (TF: one per "################ X.index" section
                                   of each CONTENTS.txt; Keras: each file with a
                                   FILE.CONTENTS.txt), one per line

TensorBundles are decoded and checked (every checksum, the writer round trip)
with tests/scripts/bundle_check.py, this project's standard-library decoder;
HDF5 files (and model.weights.h5 inside .keras zips) with h5py. crc32 is
zlib.crc32 of the raw little-endian bytes (string tensors: of the concatenated
elements), crc32c the CRC-32C of the same bytes (bundle_check's table-driven
implementation, itself checked against the standard check value). Before
printing, the result is checked against the fixture's CONTENTS.txt dump (names,
dtypes, shapes); a disagreement exits 1, so the C test compares against values
that match the published dump.
"""
import io
import json
import os
import re
import sys
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bundle_check  # noqa: E402

# TensorFlow DataType number -> name as ckpt_dtype_name prints it
TF_DTYPES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8",
             7: "string", 8: "complex64", 9: "int64", 10: "bool", 14: "bfloat16",
             17: "uint16", 18: "complex128", 19: "float16", 22: "uint32", 23: "uint64"}
DUMP_DTYPES = {"DT_" + k: v for k, v in {
    "FLOAT": "float32", "DOUBLE": "float64", "INT32": "int32", "UINT8": "uint8",
    "INT16": "int16", "INT8": "int8", "STRING": "string", "COMPLEX64": "complex64",
    "INT64": "int64", "BOOL": "bool", "BFLOAT16": "bfloat16", "UINT16": "uint16",
    "COMPLEX128": "complex128", "HALF": "float16", "UINT32": "uint32",
    "UINT64": "uint64"}.items()}


def fail(msg):
    sys.stderr.write("expected_inspect: %s\n" % msg)
    sys.exit(1)


# ---------------------------------------------------------------- bundles

def bundle_expected(prefix):
    try:
        b = bundle_check.load(prefix)
        b.check(io.StringIO(), max_values=0, graph=False)
    except (bundle_check.Malformed, OSError) as ex:
        fail("%s: %s" % (prefix, ex))
    if b.problems:
        fail("%s: %s" % (prefix, "; ".join(b.problems)))
    out = []
    for key, e in b.entries:
        count = 1
        for d in e["dims"]:
            count *= d
        raw = b.tensor_bytes(e)
        if e["dtype"] == 7:
            strings, _, _ = bundle_check.string_tensor(raw, count)
            value = b"".join(strings)
        else:
            value = raw
        out.append({"name": key.decode("utf-8", "surrogateescape"),
                    "dtype": TF_DTYPES[e["dtype"]], "shape": e["dims"],
                    "bytes": e["size"], "crc32": "0x%08x" % (zlib.crc32(value) & 0xffffffff),
                    "crc32c": "0x%08x" % bundle_check.crc32c(value)})
    return out


def bundle_contents_section(contents, rel_index):
    """(name, dtype, shape) triples of one "################ REL.index" section."""
    with open(contents, encoding="utf-8", errors="surrogateescape") as f:
        lines = f.read().split("\n")
    try:
        start = lines.index("################ " + rel_index)
    except ValueError:
        fail("%s has no section for %s" % (contents, rel_index))
    out = []
    for i in range(start + 1, len(lines) - 1):
        if lines[i].startswith("################ "):
            break
        m = re.match(r"    dtype=(DT_\w+)\(\d+\) shape=\[([^\]]*)\]", lines[i + 1])
        if lines[i] and not lines[i].startswith(" ") and m:
            dims = [int(re.sub(r"\(.*\)", "", d)) for d in m.group(2).split(",") if d]
            out.append((lines[i], DUMP_DTYPES[m.group(1)], dims))
    return out


def find_bundle_contents(prefix):
    """The CONTENTS.txt of the fixture holding `prefix`, and the section name."""
    d = os.path.dirname(os.path.abspath(prefix))
    while d and d != "/":
        c = os.path.join(d, "CONTENTS.txt")
        if os.path.exists(c):
            return c, os.path.relpath(os.path.abspath(prefix) + ".index", d)
        d = os.path.dirname(d)
    return None, None


# ---------------------------------------------------------------- HDF5

def h5_dtype(ds):
    import numpy as np
    if ds.attrs.get("dtype") in ("bfloat16", b"bfloat16"):
        return "bfloat16"
    kind = ds.dtype
    if kind == np.bool_:
        return "bool"
    if kind.kind in "SUO":
        return "string"
    return {"f2": "float16", "f4": "float32", "f8": "float64", "i1": "int8", "i2": "int16",
            "i4": "int32", "i8": "int64", "u1": "uint8", "u2": "uint16", "u4": "uint32",
            "u8": "uint64", "c8": "complex64", "c16": "complex128"}[kind.kind + str(kind.itemsize)]


def h5_expected(f):
    import h5py
    out = []

    def visit(name, obj):
        if not isinstance(obj, h5py.Dataset):
            return
        arr = obj[()]
        dt = h5_dtype(obj)
        if dt == "string":
            items = arr.reshape(-1) if hasattr(arr, "reshape") else [arr]
            data = b"".join(x if isinstance(x, bytes) else str(x).encode() for x in items)
        else:
            import numpy as np
            a = np.asarray(arr)
            data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        out.append({"name": name, "dtype": dt, "shape": list(obj.shape),
                    "bytes": len(data), "crc32": "0x%08x" % (zlib.crc32(data) & 0xffffffff),
                    "crc32c": "0x%08x" % bundle_check.crc32c(data)})
    f.visititems(visit)
    return out


def keras_expected(path):
    import h5py
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic == b"PK\x03\x04":
        with zipfile.ZipFile(path) as z:
            blob = z.read("model.weights.h5")
        with h5py.File(io.BytesIO(blob), "r") as f:
            return h5_expected(f)
    with h5py.File(path, "r") as f:
        return h5_expected(f)


def keras_contents(contents):
    """(name, dtype, shape) of every DATASET line, with its full path from the GROUP lines."""
    out, groups = [], {}
    with open(contents, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            m = re.match(r"^( *)GROUP (/\S*)", line)
            if m:
                groups[len(m.group(1))] = m.group(2).rstrip("/")
                continue
            m = re.match(r"^( *)DATASET (.+?)  dtype=(\S+) .* shape=\(([^)]*)\)", line)
            if m:
                parent = groups.get(len(m.group(1)) - 2, "")
                dims = [int(d) for d in m.group(4).split(",") if d.strip()]
                out.append(((parent + "/" + m.group(2)).lstrip("/"), m.group(3), dims))
    return out


# ---------------------------------------------------------------- main

def expected(path):
    if os.path.isfile(path) and not path.endswith(".index"):
        got = keras_expected(path)
        contents = path + ".CONTENTS.txt"
        dump = keras_contents(contents) if os.path.exists(contents) else None
    else:
        prefix = path[:-len(".index")] if path.endswith(".index") else path
        got = bundle_expected(prefix)
        contents, section = find_bundle_contents(prefix)
        dump = bundle_contents_section(contents, section) if contents else None
    if dump is not None:
        mine = sorted((v["name"], v["dtype"], v["shape"]) for v in got)
        theirs = sorted(dump)
        if mine != theirs:
            fail("%s: decoded entries disagree with %s:\n  decoded %s\n  dump    %s"
                 % (path, contents, mine, theirs))
    return {"variables": got}


def list_fixtures(root):
    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            if fn == "CONTENTS.txt":
                with open(full, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        m = re.match(r"^################ (\S+)\.index$", line.rstrip("\n"))
                        if m:
                            paths.append(os.path.join(dirpath, m.group(1)))
            elif fn.endswith(".CONTENTS.txt"):
                paths.append(full[:-len(".CONTENTS.txt")])
    return paths


def main(argv):
    if len(argv) == 2 and argv[0] == "--list":
        for p in list_fixtures(argv[1]):
            print(p)
        return 0
    if len(argv) != 1:
        sys.stderr.write(__doc__)
        return 2
    print(json.dumps(expected(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

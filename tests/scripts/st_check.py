#!/usr/bin/python3
"""st_check.py - this project's strict safetensors checker (standard library only).

The layout (docs/formats/safetensors-gguf.md): an 8-byte little-endian header
size N, N bytes of UTF-8 JSON (an object, opening with '{', padded with
spaces at the end), then the byte buffer. The header maps each tensor name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets into the buffer) and
may hold "__metadata__", a string-to-string map.

Rejected: a header that does not fit the file or exceeds 100 MB, JSON that is
not an object or repeats a key, an entry with other fields, an unknown dtype,
a shape that is not a list of non-negative integers, a byte count other than
elements x element size, and tensors that overlap, leave a hole or stop short
of the end of the file.

Usage: st_check.py FILE
Prints {"variables": [{"name", "dtype", "shape", "bytes", "crc32"}, ...],
"metadata": {...}} (crc32: zlib's, of the tensor's bytes, as "0x%08x"),
sorted by name, and exits 0; or prints why the file is invalid and exits 1.
"""
import json
import struct
import sys
import zlib

ELEMENT_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "U16": 2, "I16": 2, "F16": 2,
                "BF16": 2, "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8, "C64": 8}
HEADER_LIMIT = 100 * 1000 * 1000


class Invalid(Exception):
    pass


def unique_keys(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise Invalid("the header repeats %r" % key)
        seen[key] = value
    return seen


def is_count(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def check(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise Invalid("%d bytes: no header size" % len(blob))
    size = struct.unpack_from("<Q", blob)[0]
    if size > HEADER_LIMIT or 8 + size > len(blob):
        raise Invalid("a %d-byte header in a %d-byte file" % (size, len(blob)))
    text = blob[8:8 + size]
    if text[:1] != b"{":
        raise Invalid("the header does not open with '{'")
    try:
        header = json.loads(text.decode("utf-8").rstrip(" "), object_pairs_hook=unique_keys)
    except ValueError as ex:
        raise Invalid("the header is not JSON: %s" % ex)
    if not isinstance(header, dict):
        raise Invalid("the header is not an object")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or any(not isinstance(v, str) for v in metadata.values()):
        raise Invalid("__metadata__ is not a map of strings")
    buf = blob[8 + size:]
    tensors = []
    for name, info in header.items():
        if not isinstance(info, dict) or sorted(info) != ["data_offsets", "dtype", "shape"]:
            raise Invalid("%s: the entry must hold dtype, shape and data_offsets only" % name)
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in ELEMENT_SIZE:
            raise Invalid("%s: dtype %r" % (name, dtype))
        if not isinstance(shape, list) or not all(is_count(d) for d in shape):
            raise Invalid("%s: shape %r" % (name, shape))
        if not isinstance(offsets, list) or len(offsets) != 2 or not all(is_count(o) for o in offsets):
            raise Invalid("%s: data_offsets %r" % (name, offsets))
        elements = 1
        for d in shape:
            elements *= d
        if offsets[1] - offsets[0] != elements * ELEMENT_SIZE[dtype]:
            raise Invalid("%s: %r holds %d bytes, %s%r needs %d" % (name, offsets, offsets[1] - offsets[0],
                                                                    dtype, shape, elements * ELEMENT_SIZE[dtype]))
        tensors.append((offsets[0], offsets[1], name, dtype, shape))
    at = 0
    for begin, end, name, _, _ in sorted(tensors):
        if begin != at:
            raise Invalid("%s begins at %d, the previous tensor ends at %d" % (name, begin, at))
        at = end
    if at != len(buf):
        raise Invalid("the tensors end at %d of a %d-byte buffer" % (at, len(buf)))
    out = [{"name": name, "dtype": dtype, "shape": shape, "bytes": end - begin,
            "crc32": "0x%08x" % (zlib.crc32(buf[begin:end]) & 0xFFFFFFFF)}
           for begin, end, name, dtype, shape in tensors]
    return {"variables": sorted(out, key=lambda t: t["name"]), "metadata": metadata}


def main(argv):
    if len(argv) != 1:
        sys.stderr.write(__doc__)
        return 2
    try:
        print(json.dumps(check(argv[0])))
    except (Invalid, OSError) as ex:
        print("INVALID %s: %s" % (argv[0], ex))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Check `ckpt inspect --json`'s metadata against the reference readers.

Usage: inspect_meta_check.py FILE INSPECT.json MAX_ARRAY
gguf: every key-value pair of gguf.GGUFReader (its GGUF.* header fields
aside), in order, with its type, value, and for arrays the element type,
count, the first MAX_ARRAY values (all when 0) and "truncated"; version and
alignment. safetensors: safe_open(...).metadata() equals "metadata".
.keras: "keras" holds the archive's config.json and metadata.json as stored.
Prints one line; exits 1 on the first mismatch.
"""
import json
import math
import sys

f, jpath, max_array = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(jpath) as h:
    got = json.load(h)


def fail(msg):
    print("%s: %s" % (f, msg))
    sys.exit(1)


def same(a, b):
    if isinstance(b, float) or isinstance(a, float):
        if a is None:
            return math.isnan(b) or math.isinf(b)
        return float(a) == float(b)
    return a == b


if f.endswith(".gguf"):
    from gguf import GGUFReader, GGUFValueType
    names = {GGUFValueType.UINT8: "u8", GGUFValueType.INT8: "i8", GGUFValueType.UINT16: "u16",
             GGUFValueType.INT16: "i16", GGUFValueType.UINT32: "u32", GGUFValueType.INT32: "i32",
             GGUFValueType.FLOAT32: "f32", GGUFValueType.BOOL: "bool", GGUFValueType.STRING: "string",
             GGUFValueType.ARRAY: "array", GGUFValueType.UINT64: "u64", GGUFValueType.INT64: "i64",
             GGUFValueType.FLOAT64: "f64"}
    r = GGUFReader(f)
    g = got.get("gguf")
    if g is None:
        fail("no \"gguf\" section in inspect --json")
    if g["version"] != int(r.fields["GGUF.version"].contents()):
        fail("version %s, GGUFReader says %s" % (g["version"], r.fields["GGUF.version"].contents()))
    if g["alignment"] != r.alignment:
        fail("alignment %s, GGUFReader says %s" % (g["alignment"], r.alignment))
    fields = [x for x in r.fields.values() if not x.name.startswith("GGUF.")]
    if [x.name for x in fields] != [kv["key"] for kv in g["kv"]]:
        fail("keys %s, GGUFReader has %s" % ([kv["key"] for kv in g["kv"]], [x.name for x in fields]))
    for x, kv in zip(fields, g["kv"]):
        t = names[x.types[0]]
        if kv["type"] != t:
            fail("%s: type %s, GGUFReader says %s" % (x.name, kv["type"], t))
        want = x.contents()
        if t != "array":
            if not same(kv["value"], want):
                fail("%s: value %r, GGUFReader says %r" % (x.name, kv["value"], want))
            continue
        if len(x.types) > 1 and kv["elem"] != names[x.types[1]]:
            fail("%s: element type %s, GGUFReader says %s" % (x.name, kv["elem"], names[x.types[1]]))
        if kv["count"] != len(want):
            fail("%s: count %d, GGUFReader says %d" % (x.name, kv["count"], len(want)))
        n = len(want) if max_array == 0 else min(max_array, len(want))
        if len(kv["values"]) != n or kv["truncated"] != (n < len(want)):
            fail("%s: %d values shown, truncated %s; want %d" % (x.name, len(kv["values"]), kv["truncated"], n))
        for i in range(n):
            if not same(kv["values"][i], want[i]):
                fail("%s[%d]: %r, GGUFReader says %r" % (x.name, i, kv["values"][i], want[i]))
    print("%s: %d key-value pairs as GGUFReader reads them" % (f, len(fields)))
elif f.endswith(".keras"):
    import zipfile
    k = got.get("keras")
    if k is None:
        fail("no \"keras\" section in inspect --json")
    with zipfile.ZipFile(f) as z:
        for member in ("config.json", "metadata.json"):
            want = z.read(member).decode("utf-8")
            if k.get(member) != want:
                fail("%s: %r..., the archive holds %r..." % (member, (k.get(member) or "")[:80], want[:80]))
    if k.get("keras_version") != json.loads(k["metadata.json"])["keras_version"]:
        fail("keras_version %r" % k.get("keras_version"))
    print("%s: config.json and metadata.json as the archive holds them" % f)
else:
    from safetensors import safe_open
    with safe_open(f, framework="np") as h:
        meta = h.metadata()
    s = got.get("safetensors")
    if s is None:
        fail("no \"safetensors\" section in inspect --json")
    if s["metadata"] != meta:
        fail("metadata %r, safe_open says %r" % (s["metadata"], meta))
    print("%s: __metadata__ as safe_open reads it (%d entries)" % (f, len(meta or {})))

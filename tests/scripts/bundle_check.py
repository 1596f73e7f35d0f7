#!/usr/bin/python3
"""bundle_check.py - this project's independent TensorBundle checker (standard library only).

A TensorBundle is PREFIX.index (a leveldb-style table: data blocks, an empty
metaindex block, an index block, a 48-byte footer; key "" holds the
BundleHeaderProto, every other key a BundleEntryProto) and
PREFIX.data-NNNNN-of-MMMMM shards. The layout is described in
docs/formats/tf-bundle.md. This file shares no code with libckpt: it is the
check of what libckpt writes that does not trust libckpt.

Checks, every one a line under "PROBLEMS" when it fails:
  * footer magic and zero padding; data blocks back to back from offset 0, then
    the metaindex, the index block and the footer;
  * every block's trailer: type (0 none, 1 Snappy) and masked CRC-32C;
  * every block's entries and restart array; restart entries share no prefix;
  * keys strictly increasing, the first one "", each index key between its
    block's last key and the next block's first;
  * the header (little-endian, num_shards >= 1) and every entry: known fields,
    known dtype, shard in range, bytes inside the shard, size = elements x
    element size, masked CRC-32C of the bytes (strings: TF's rule over the
    lengths, their checksum and the bytes), no two tensors overlapping;
  * the _CHECKPOINTABLE_OBJECT_GRAPH proto parses and its node ids are in range;
  * writer round trip: every value re-encoded canonically (proto3, fields in
    number order) and the table rebuilt with TensorFlow's writer settings
    (block_size 262144, restart interval 16, 1 in the index block, no
    compression) equal the file byte for byte; for a file with Snappy blocks,
    the decompressed blocks equal the rebuilt ones.

Usage: bundle_check.py [--no-graph] [--max-values N] PREFIX_OR_INDEX [...]
Prints the header ("num_shards=N"), one line per key (with "SLICED: [...]"
for a partitioned variable's full entry), "WRITER ROUND TRIP: index file
rebuilt byte-for-byte ..." and "CHECKS: ALL OK" or "CHECKS: PROBLEMS" with
the list. Exit status 0 when every check of every bundle passes, else 1.
Importable: load(prefix) returns a Bundle (header, entries, shard bytes).
"""
import os
import struct
import sys

# ---------------------------------------------------------------- CRC-32C


def _crc_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc_table()


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli) of `data`, continuing from `crc`."""
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc = CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def mask(crc):
    """leveldb's masked CRC: rotate right by 15, add a constant."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


if crc32c(b"123456789") != 0xE3069283:
    raise SystemExit("bundle_check: CRC-32C self-test failed")

# ---------------------------------------------------------------- wire format


class Malformed(Exception):
    pass


def get_varint(buf, pos):
    value, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise Malformed("bad varint at %d" % pos)
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def put_varint(value):
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def signed64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def proto_fields(buf):
    """(field number, wire type, value) of a serialized message: ints for varint/fixed, bytes for length-delimited."""
    pos, out = 0, []
    while pos < len(buf):
        tag, pos = get_varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = get_varint(buf, pos)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise Malformed("truncated fixed64")
            value = struct.unpack_from("<Q", buf, pos)[0]
            pos += 8
        elif wire == 2:
            n, pos = get_varint(buf, pos)
            if pos + n > len(buf):
                raise Malformed("length-delimited field %d overruns its message" % field)
            value = bytes(buf[pos:pos + n])
            pos += n
        elif wire == 5:
            if pos + 4 > len(buf):
                raise Malformed("truncated fixed32")
            value = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
        else:
            raise Malformed("wire type %d" % wire)
        if field == 0:
            raise Malformed("field number 0")
        out.append((field, wire, value))
    return out


def field_varint(field, value):
    return put_varint(field << 3) + put_varint(value) if value else b""


def field_bytes(field, payload):
    return put_varint(field << 3 | 2) + put_varint(len(payload)) + payload

# ---------------------------------------------------------------- Snappy


def snappy_decompress(src):
    """The Snappy block format: a varint length, then literals and back-references."""
    size, pos = get_varint(src, 0)
    out = bytearray()
    while pos < len(src):
        tag = src[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:
            n = tag >> 2
            if n >= 60:
                extra = n - 59
                n = int.from_bytes(src[pos:pos + extra], "little")
                pos += extra
            n += 1
            if pos + n > len(src):
                raise Malformed("snappy literal overruns the block")
            out += src[pos:pos + n]
            pos += n
            continue
        if kind == 1:
            n = ((tag >> 2) & 7) + 4
            dist = ((tag >> 5) << 8) | src[pos]
            pos += 1
        elif kind == 2:
            n = (tag >> 2) + 1
            dist = int.from_bytes(src[pos:pos + 2], "little")
            pos += 2
        else:
            n = (tag >> 2) + 1
            dist = int.from_bytes(src[pos:pos + 4], "little")
            pos += 4
        if dist == 0 or dist > len(out):
            raise Malformed("snappy copy from %d bytes back of %d" % (dist, len(out)))
        for _ in range(n):
            out.append(out[-dist])
    if len(out) != size:
        raise Malformed("snappy block decodes to %d bytes, header says %d" % (len(out), size))
    return bytes(out)

# ---------------------------------------------------------------- the table

MAGIC = 0xDB4775248B80FB57
FOOTER = 48
TRAILER = 5
BLOCK_SIZE = 262144
RESTART_INTERVAL = 16


def block_entries(raw, what, problems):
    """[(key, value)] of one block, its restart array checked."""
    if len(raw) < 4:
        raise Malformed("%s: %d bytes, no restart count" % (what, len(raw)))
    nrestarts = struct.unpack_from("<I", raw, len(raw) - 4)[0]
    end = len(raw) - 4 - 4 * nrestarts
    if nrestarts == 0 or end < 0:
        raise Malformed("%s: %d restarts do not fit %d bytes" % (what, nrestarts, len(raw)))
    restarts = list(struct.unpack_from("<%dI" % nrestarts, raw, end))
    entries, starts, key, pos = [], [], b"", 0
    while pos < end:
        starts.append(pos)
        shared, pos = get_varint(raw, pos)
        unshared, pos = get_varint(raw, pos)
        vlen, pos = get_varint(raw, pos)
        if shared > len(key) or pos + unshared + vlen > end:
            raise Malformed("%s: entry at %d overruns" % (what, starts[-1]))
        if starts[-1] in restarts and shared:
            problems.append("%s: restart entry at %d shares %d bytes" % (what, starts[-1], shared))
        key = key[:shared] + raw[pos:pos + unshared]
        pos += unshared
        entries.append((bytes(key), bytes(raw[pos:pos + vlen])))
        pos += vlen
    if any(r not in starts for r in restarts) and entries:
        problems.append("%s: a restart offset is not an entry start" % what)
    return entries


def read_block(data, offset, size, what, problems):
    """(contents as stored decompressed, stored type) of the block at offset."""
    if offset + size + TRAILER > len(data):
        raise Malformed("%s at %d+%d runs past the file" % (what, offset, size))
    stored = data[offset:offset + size]
    btype = data[offset + size]
    crc = struct.unpack_from("<I", data, offset + size + 1)[0]
    if mask(crc32c(data[offset:offset + size + 1])) != crc:
        problems.append("%s at %d: block checksum mismatch" % (what, offset))
    if btype == 0:
        return bytes(stored), 0
    if btype == 1:
        return snappy_decompress(stored), 1
    raise Malformed("%s at %d: block type %d" % (what, offset, btype))


class Table:
    def __init__(self, path, problems):
        with open(path, "rb") as f:
            data = f.read()
        self.size = len(data)
        if len(data) < FOOTER:
            raise Malformed("%s: %d bytes, shorter than the footer" % (path, len(data)))
        foot = data[-FOOTER:]
        if struct.unpack_from("<Q", foot, 40)[0] != MAGIC:
            raise Malformed("%s: not a table (footer magic)" % path)
        meta_off, p = get_varint(foot, 0)
        meta_size, p = get_varint(foot, p)
        index_off, p = get_varint(foot, p)
        index_size, p = get_varint(foot, p)
        if any(foot[p:40]):
            problems.append("footer padding is not zero")
        meta, _ = read_block(data, meta_off, meta_size, "metaindex block", problems)
        if block_entries(meta, "metaindex block", problems):
            problems.append("metaindex block is not empty")
        index, _ = read_block(data, index_off, index_size, "index block", problems)
        self.entries, self.raw_blocks, self.types = [], [], []
        index_entries = block_entries(index, "index block", problems)
        expect = 0
        for i, (sep, handle) in enumerate(index_entries):
            off, q = get_varint(handle, 0)
            size, q = get_varint(handle, q)
            if off != expect:
                problems.append("data block at %d, expected %d" % (off, expect))
            expect = off + size + TRAILER
            raw, btype = read_block(data, off, size, "data block", problems)
            self.raw_blocks.append(raw)
            self.types.append(btype)
            ents = block_entries(raw, "data block at %d" % off, problems)
            if not ents:
                problems.append("data block at %d is empty" % off)
                continue
            if sep < ents[-1][0]:
                problems.append("index key %r sorts before its block's last key" % sep)
            if self.entries and index_entries[i - 1][0] >= ents[0][0]:
                problems.append("index key %r does not sort before the next block" % index_entries[i - 1][0])
            self.entries += ents
        if expect != meta_off or meta_off + meta_size + TRAILER != index_off or \
                index_off + index_size + TRAILER + FOOTER != len(data):
            problems.append("blocks are not back to back (data, metaindex, index, footer)")
        keys = [k for k, _ in self.entries]
        if any(a >= b for a, b in zip(keys, keys[1:])):
            problems.append("keys are not strictly increasing")
        self.bytes = data

# ---------------------------------------------------------------- bundle protos

DTYPES = {1: ("DT_FLOAT", 4), 2: ("DT_DOUBLE", 8), 3: ("DT_INT32", 4), 4: ("DT_UINT8", 1),
          5: ("DT_INT16", 2), 6: ("DT_INT8", 1), 7: ("DT_STRING", None), 8: ("DT_COMPLEX64", 8),
          9: ("DT_INT64", 8), 10: ("DT_BOOL", 1), 14: ("DT_BFLOAT16", 2), 17: ("DT_UINT16", 2),
          18: ("DT_COMPLEX128", 16), 19: ("DT_HALF", 2), 22: ("DT_UINT32", 4), 23: ("DT_UINT64", 8),
          20: ("DT_RESOURCE", None), 21: ("DT_VARIANT", None)}


def parse_header(buf):
    h = {"num_shards": 0, "endianness": 0, "producer": 0, "min_consumer": 0, "bad_consumers": [], "unknown": []}
    for field, wire, v in proto_fields(buf):
        if field == 1 and wire == 0:
            h["num_shards"] = signed64(v)
        elif field == 2 and wire == 0:
            h["endianness"] = v
        elif field == 3 and wire == 2:
            for f2, w2, v2 in proto_fields(v):
                if f2 == 1 and w2 == 0:
                    h["producer"] = v2
                elif f2 == 2 and w2 == 0:
                    h["min_consumer"] = v2
                elif f2 == 3 and w2 == 0:
                    h["bad_consumers"].append(v2)
                elif f2 == 3 and w2 == 2:
                    p = 0
                    while p < len(v2):
                        x, p = get_varint(v2, p)
                        h["bad_consumers"].append(x)
                else:
                    h["unknown"].append(f2)
        else:
            h["unknown"].append(field)
    return h


def encode_header(h):
    version = field_varint(1, h["producer"]) + field_varint(2, h["min_consumer"])
    if h["bad_consumers"]:
        version += field_bytes(3, b"".join(put_varint(x) for x in h["bad_consumers"]))
    return field_varint(1, h["num_shards"]) + field_varint(2, h["endianness"]) + field_bytes(3, version)


def parse_entry(buf):
    """BundleEntryProto: dtype 1, shape 2, shard_id 3, offset 4, size 5, crc32c 6 (fixed32), slices 7."""
    e = {"dtype": 0, "dims": [], "dim_names": [], "unknown_rank": False, "shard_id": 0, "offset": 0,
         "size": 0, "crc32c": 0, "slices": [], "unknown": []}
    for field, wire, v in proto_fields(buf):
        if field == 1 and wire == 0:
            e["dtype"] = v
        elif field == 2 and wire == 2:
            for f2, w2, v2 in proto_fields(v):
                if f2 == 2 and w2 == 2:
                    size, name = 0, b""
                    for f3, w3, v3 in proto_fields(v2):
                        if f3 == 1 and w3 == 0:
                            size = signed64(v3)
                        elif f3 == 2 and w3 == 2:
                            name = v3
                        else:
                            e["unknown"].append("shape.dim.%d" % f3)
                    e["dims"].append(size)
                    e["dim_names"].append(name)
                elif f2 == 3 and w2 == 0:
                    e["unknown_rank"] = bool(v2)
                else:
                    e["unknown"].append("shape.%d" % f2)
        elif field in (3, 4, 5) and wire == 0:
            e[{3: "shard_id", 4: "offset", 5: "size"}[field]] = signed64(v)
        elif field == 6 and wire == 5:
            e["crc32c"] = v
        elif field == 7 and wire == 2:
            extents = []
            for f2, w2, v2 in proto_fields(v):
                if f2 != 1 or w2 != 2:
                    e["unknown"].append("slices.%d" % f2)
                    continue
                start, length = 0, None
                for f3, w3, v3 in proto_fields(v2):
                    if f3 == 1 and w3 == 0:
                        start = signed64(v3)
                    elif f3 == 2 and w3 == 0:
                        length = signed64(v3)
                    else:
                        e["unknown"].append("slices.extent.%d" % f3)
                extents.append((start, length))
            e["slices"].append(extents)
        else:
            e["unknown"].append(str(field))
    return e


def encode_entry(e):
    shape = b""
    for size, name in zip(e["dims"], e["dim_names"]):
        shape += field_bytes(2, field_varint(1, size) + (field_bytes(2, name) if name else b""))
    if e["unknown_rank"]:
        shape += field_varint(3, 1)
    out = field_varint(1, e["dtype"]) + field_bytes(2, shape)
    out += field_varint(3, e["shard_id"]) + field_varint(4, e["offset"]) + field_varint(5, e["size"])
    if e["crc32c"]:
        out += put_varint(6 << 3 | 5) + struct.pack("<I", e["crc32c"])
    for extents in e["slices"]:
        body = b""
        for start, length in extents:
            ext = field_varint(1, start)
            if length is not None:
                ext += put_varint(2 << 3) + put_varint(length)
            body += field_bytes(1, ext)
        out += field_bytes(7, body)
    return out


def string_tensor(raw, count):
    """(strings, unmasked CRC-32C as TF computes it, problems) of a DT_STRING tensor's bytes."""
    problems, lengths, pos, crc = [], [], 0, 0
    for _ in range(count):
        n, pos = get_varint(raw, pos)
        lengths.append(n)
        crc = crc32c(struct.pack("<I", n) if n <= 0xFFFFFFFF else struct.pack("<Q", n), crc)
    if count:
        if pos + 4 > len(raw):
            raise Malformed("string tensor: no length checksum")
        if mask(crc) != struct.unpack_from("<I", raw, pos)[0]:
            problems.append("string lengths checksum mismatch")
        crc = crc32c(raw[pos:pos + 4], crc)
        pos += 4
    strings = []
    for n in lengths:
        if pos + n > len(raw):
            raise Malformed("string tensor: element overruns the tensor")
        strings.append(bytes(raw[pos:pos + n]))
        crc = crc32c(raw[pos:pos + n], crc)
        pos += n
    if pos != len(raw):
        problems.append("string tensor: %d bytes after the last element" % (len(raw) - pos))
    return strings, crc, problems


def object_graph_problems(blob):
    """TrackableObjectGraph: nodes (1), each with children (1: node_id 1) and slot_variables (3: ids 1 and 3)."""
    nodes = [v for f, w, v in proto_fields(blob) if f == 1 and w == 2]
    problems = []
    for i, node in enumerate(nodes):
        for f, w, v in proto_fields(node):
            if w != 2 or f not in (1, 3):
                continue
            for f2, w2, v2 in proto_fields(v):
                if w2 == 0 and (f2 == 1 or (f == 3 and f2 == 3)) and v2 >= len(nodes):
                    problems.append("object graph node %d refers to node %d of %d" % (i, v2, len(nodes)))
    return len(nodes), problems

# ---------------------------------------------------------------- the writer's table


class _Block:
    def __init__(self, interval):
        self.interval, self.buf, self.restarts, self.count, self.last = interval, bytearray(), [0], 0, b""

    def add(self, key, value):
        shared = 0
        if self.count == self.interval:
            self.restarts.append(len(self.buf))
            self.count = 0
        else:
            while shared < min(len(key), len(self.last)) and key[shared] == self.last[shared]:
                shared += 1
        self.buf += put_varint(shared) + put_varint(len(key) - shared) + put_varint(len(value))
        self.buf += key[shared:] + value
        self.last, self.count = key, self.count + 1

    def estimate(self):
        return len(self.buf) + 4 * len(self.restarts) + 4

    def finish(self):
        return bytes(self.buf) + struct.pack("<%dI" % (len(self.restarts) + 1), *self.restarts, len(self.restarts))


def _separator(a, b):
    """leveldb's FindShortestSeparator: a short key k with a <= k < b."""
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    if i < min(len(a), len(b)) and a[i] < 0xFF and a[i] + 1 < b[i]:
        return a[:i] + bytes([a[i] + 1])
    return a


def _successor(a):
    """leveldb's FindShortSuccessor: a short key >= a."""
    for i, byte in enumerate(a):
        if byte != 0xFF:
            return a[:i] + bytes([byte + 1])
    return a


def rebuild_table(kvs):
    """(file bytes, raw data blocks) as TensorFlow's table builder writes `kvs` without compression."""
    out, blocks = bytearray(), []
    data, index = _Block(RESTART_INTERVAL), _Block(1)
    pending, last = None, b""

    def write(raw):
        handle = put_varint(len(out)) + put_varint(len(raw))
        out.extend(raw + b"\0" + struct.pack("<I", mask(crc32c(raw + b"\0"))))
        return handle

    def flush():
        nonlocal data
        blocks.append(data.finish())
        data = _Block(RESTART_INTERVAL)
        return write(blocks[-1])

    for n, (key, value) in enumerate(kvs):
        if n and data.count and len(key) + len(value) >= 2 * BLOCK_SIZE:
            pending = flush()
        if pending is not None:
            index.add(_separator(last, key), pending)
            pending = None
        data.add(key, value)
        last = key
        if data.estimate() >= BLOCK_SIZE:
            pending = flush()
    if data.count:
        pending = flush()
    meta = write(_Block(RESTART_INTERVAL).finish())
    if pending is not None:
        index.add(_successor(last), pending)
    idx = write(index.finish())
    footer = meta + idx
    out += footer + b"\0" * (40 - len(footer)) + struct.pack("<Q", MAGIC)
    return bytes(out), blocks

# ---------------------------------------------------------------- a bundle


class Bundle:
    """A parsed bundle: header, [(key, entry dict)], shards {id: bytes}, problems."""

    def __init__(self, prefix):
        self.prefix, self.problems = prefix, []
        self.table = Table(prefix + ".index", self.problems)
        if not self.table.entries or self.table.entries[0][0] != b"":
            raise Malformed("the first key is not the header key \"\"")
        self.header = parse_header(self.table.entries[0][1])
        if self.header["unknown"]:
            self.problems.append("header: unknown fields %s" % self.header["unknown"])
        if self.header["num_shards"] < 1 or self.header["endianness"] != 0:
            self.problems.append("header: num_shards %d, endianness %d" % (self.header["num_shards"],
                                                                           self.header["endianness"]))
        self.entries = [(k, parse_entry(v)) for k, v in self.table.entries[1:]]
        self.shards = {}
        for sid in range(max(self.header["num_shards"], 0)):
            path = "%s.data-%05d-of-%05d" % (prefix, sid, self.header["num_shards"])
            try:
                with open(path, "rb") as f:
                    self.shards[sid] = f.read()
            except OSError:
                self.problems.append("missing data shard %s" % path)

    def tensor_bytes(self, e):
        return self.shards.get(e["shard_id"], b"")[e["offset"]:e["offset"] + e["size"]]

    def check(self, out, max_values=8, graph=True):
        w = out.write
        h = self.header
        w("header: num_shards=%d endianness=%d producer=%d min_consumer=%d\n"
          % (h["num_shards"], h["endianness"], h["producer"], h["min_consumer"]))
        w("index: %d bytes, %d data blocks (%s)\n" % (self.table.size, len(self.table.raw_blocks),
                                                       "snappy" if any(self.table.types) else "uncompressed"))
        spans = {}
        for key, e in self.entries:
            name = key.decode("utf-8", "backslashreplace").encode("unicode_escape").decode("ascii")
            dtype, esize = DTYPES.get(e["dtype"], ("?", None))
            w("%s\n    dtype=%s shape=%s" % (name, dtype, e["dims"]))
            if e["unknown"]:
                self.problems.append("%s: unknown fields %s" % (name, e["unknown"]))
            if dtype == "?":
                self.problems.append("%s: unknown dtype %d" % (name, e["dtype"]))
            if e["slices"]:
                w(" SLICED: %s\n" % e["slices"])
                continue
            w(" shard=%d offset=%d size=%d\n" % (e["shard_id"], e["offset"], e["size"]))
            raw = self.tensor_bytes(e)
            if e["shard_id"] not in self.shards or e["offset"] < 0 or len(raw) != e["size"]:
                self.problems.append("%s: bytes %d+%d are not in shard %d" % (name, e["offset"], e["size"], e["shard_id"]))
                continue
            spans.setdefault(e["shard_id"], []).append((e["offset"], e["size"], name))
            count = 1
            for d in e["dims"]:
                count *= d
            if e["dtype"] == 7:
                strings, crc, probs = string_tensor(raw, count)
                self.problems += ["%s: %s" % (name, p) for p in probs]
                if key == b"_CHECKPOINTABLE_OBJECT_GRAPH" and strings:
                    nodes, probs = object_graph_problems(strings[0])
                    self.problems += probs
                    if graph:
                        w("    object graph: %d nodes\n" % nodes)
                elif max_values:
                    w("    values: %s\n" % strings[:max_values])
            else:
                crc = crc32c(raw)
                if esize is not None and esize * count != e["size"]:
                    self.problems.append("%s: %d bytes for %d elements of %d" % (name, e["size"], count, esize))
            if mask(crc) != e["crc32c"]:
                self.problems.append("%s: tensor checksum mismatch" % name)
        for sid, s in spans.items():
            s.sort()
            for (o1, n1, a), (o2, _, b) in zip(s, s[1:]):
                if o1 + n1 > o2:
                    self.problems.append("shard %d: %s and %s overlap" % (sid, a, b))
        self.round_trip(out)
        w("CHECKS: %s\n" % ("ALL OK" if not self.problems else "PROBLEMS"))
        for p in self.problems:
            w("  - %s\n" % p)
        return not self.problems

    def round_trip(self, out):
        kvs = [(b"", encode_header(self.header))] + [(k, encode_entry(e)) for k, e in self.entries]
        for (k, v), (_, orig) in zip(kvs, self.table.entries):
            if v != orig:
                self.problems.append("the value of %r re-encodes to other bytes" % k)
        rebuilt, blocks = rebuild_table(kvs)
        if any(self.table.types):
            same = blocks == self.table.raw_blocks
            out.write("WRITER ROUND TRIP: %s\n" % ("decompressed data blocks equal the rebuilt ones" if same else "MISMATCH"))
        else:
            same = rebuilt == self.table.bytes
            out.write("WRITER ROUND TRIP: %s\n" % ("index file rebuilt byte-for-byte (no compression, "
                                                  "block_size 262144, restart interval 16)" if same else "MISMATCH"))
        if not same:
            self.problems.append("the rebuilt table differs from the file")


def load(path):
    """The Bundle at a prefix or its .index file."""
    return Bundle(path[:-len(".index")] if path.endswith(".index") else path)


def main(argv):
    max_values, graph, paths = 8, True, []
    it = iter(argv)
    for a in it:
        if a == "--no-graph":
            graph = False
        elif a == "--max-values":
            max_values = int(next(it))
        elif a.startswith("-"):
            sys.stderr.write(__doc__)
            return 2
        else:
            paths.append(a)
    if not paths:
        sys.stderr.write(__doc__)
        return 2
    ok = True
    for p in paths:
        print("# %s" % os.path.basename(p))
        try:
            ok &= load(p).check(sys.stdout, max_values, graph)
        except (Malformed, OSError, struct.error) as ex:
            print("ERROR %s: %s\nCHECKS: PROBLEMS" % (p, ex))
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

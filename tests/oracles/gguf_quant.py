"""gguf-py as the oracle for ckpt's ggml block codecs (issue 37).

Usage:
  gguf_quant.py write DIR
      DIR/blocks.gguf: one tensor of each block type gguf-py decodes, written by
      GGUFWriter (encoded by gguf.quants.quantize where gguf-py can, random
      blocks with finite float16 scales otherwise), plus F16 and BF16 tensors
      and an F32 norm; DIR/q8_k.gguf: one random Q8_K tensor (gguf-py has no
      decoder for Q8_K, nor for Q8_1);
      DIR/float.safetensors: float32 weights, a norm, a bias, an odd-sized
      matrix and a float16 matrix, for --quantize.
  gguf_quant.py check-deq GGUF OUT.safetensors DTYPE
      every tensor of OUT equals gguf.quants.dequantize of GGUF's, as float32,
      or rounded to float16 (numpy astype) / bfloat16 (gguf-py's BF16), bit for bit.
  gguf_quant.py check-q SRC.safetensors OUT.gguf TYPE REPORT.json
      gguf.GGUFReader reads OUT: tensors encoded by TYPE hold exactly the bytes
      gguf.quants.quantize makes of the float32 source (Q8_0 .. Q5_1; for K-quants,
      which gguf-py cannot encode, it decodes them and checks the error), the
      others are the source unchanged; REPORT's max abs error and RMSE are numpy's.
  gguf_quant.py check-inspect GGUF INSPECT.json
      `ckpt inspect --json` gives every tensor gguf.GGUFReader's ggml type, logical
      row-major shape and absolute data offset.
  gguf_quant.py overlap DIR
      DIR/overlap.gguf: GGUFWriter's file with key-value pairs and two tensors,
      the second one's offset then set to 0 (it overlaps the first).
Prints "OK ..." on success; fails with a message otherwise.
"""
import json
import struct
import sys

import numpy as np
import gguf
from gguf import quants, GGMLQuantizationType as T, GGML_QUANT_SIZES

DECODABLE = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "TQ1_0", "TQ2_0", "MXFP4",
             "NVFP4", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "IQ4_NL", "IQ4_XS"]

# byte offsets of the float16 scales in a block (ggml-common.h), for random blocks gguf-py cannot encode;
# IQ1_M's d is split over the top nibbles of its 4 scale words (bytes 49, 51, 53, 55); NVFP4's UE4M3
# scales are finite whatever their bits
FP16_AT = {"Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,), "IQ2_XXS": (0,),
           "IQ2_XS": (0,), "IQ2_S": (0,), "IQ3_XXS": (0,), "IQ3_S": (0,), "IQ1_S": (0,), "IQ4_NL": (0,),
           "IQ4_XS": (0,), "IQ1_M": (), "NVFP4": ()}


def finite_f16_bits(rng, n):
    """n random float16 bit patterns, any sign, subnormals included, none inf or NaN."""
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
    return np.where((h & 0x7C00) == 0x7C00, h & ~np.uint16(0x4000), h).astype(np.uint16)


def random_blocks(rng, name, rows, nblocks):
    """rows x nblocks random blocks of ggml type `name` whose float16 scales are finite."""
    size = GGML_QUANT_SIZES[T[name]][1]
    b = rng.integers(0, 256, size=(rows * nblocks, size), dtype=np.uint8)
    for at in FP16_AT[name]:
        b[:, at:at + 2] = finite_f16_bits(rng, len(b)).view(np.uint8).reshape(-1, 2)
    if name == "IQ1_M":
        d = finite_f16_bits(rng, len(b))
        for k in range(4):
            b[:, 49 + 2 * k] = (b[:, 49 + 2 * k] & 0x0F) | (((d >> (4 * k)) & 0xF) << 4).astype(np.uint8)
    return b.reshape(rows, nblocks * size)


def read_safetensors(path):
    """name -> (dtype string, shape, raw bytes), without numpy's dtype limits (BF16)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = (v["dtype"], v["shape"], data[a:b])
    return out


def write(d):
    rng = np.random.default_rng(37)
    w = gguf.GGUFWriter(f"{d}/blocks.gguf", "llama")
    for name in DECODABLE:
        t = T[name]
        blck = GGML_QUANT_SIZES[t][0]
        x = (rng.standard_normal((3, 2 * 256)) * 0.05).astype(np.float32)
        if name in FP16_AT:  # gguf-py decodes these but cannot encode them
            q = random_blocks(rng, name, 16, 4 * 256 // blck)
        else:
            q = quants.quantize(x, t)
        w.add_tensor(f"blk.{name.lower()}.weight", q, raw_dtype=t)
    w.add_tensor("blk.f16.weight", (rng.standard_normal((4, 32)) * 3).astype(np.float16))
    h = (rng.standard_normal((4, 32)) * 3).astype(np.float32)
    w.add_tensor("blk.bf16.weight", quants.quantize(h, T.BF16), raw_dtype=T.BF16)
    w.add_tensor("output_norm.weight", rng.standard_normal(32).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    w = gguf.GGUFWriter(f"{d}/q8_k.gguf", "llama")
    w.add_tensor("blk.q8_k.weight", rng.integers(0, 256, size=(2, 292), dtype=np.uint8), raw_dtype=T.Q8_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    from safetensors.numpy import save_file
    save_file({
        "tok_embd.weight": (rng.standard_normal((48, 256)) * 0.02).astype(np.float32),
        "blk.0.attn_q.weight": (rng.standard_normal((64, 512)) * np.exp(rng.uniform(-3, 3, (64, 1)))).astype(np.float32),
        "blk.0.attn_norm.weight": rng.standard_normal((2, 256)).astype(np.float32),
        "blk.0.ffn_up.bias": rng.standard_normal(256).astype(np.float32),
        "blk.0.odd.weight": rng.standard_normal((4, 40)).astype(np.float32),
        "blk.0.half.weight": rng.standard_normal((8, 256)).astype(np.float16),
    }, f"{d}/float.safetensors")
    print("OK wrote", d)


def same_bits(want, got, what):
    want = np.ascontiguousarray(want)
    if want.tobytes() == got:
        return
    g = np.frombuffer(got, dtype=want.dtype).reshape(want.shape)
    if want.dtype == np.float32:
        both_nan = np.isnan(want) & np.isnan(g)
        if np.array_equal(want.view(np.uint32)[~both_nan], g.view(np.uint32)[~both_nan]):
            return
    bad = np.flatnonzero(want.view(np.uint8).reshape(-1) != g.view(np.uint8).reshape(-1))
    sys.exit(f"{what}: {len(bad)} bytes differ, first at byte {bad[0]}")


def check_deq(src, out, dtype):
    r = gguf.GGUFReader(src)
    got = read_safetensors(out)
    stname = {"f32": "F32", "f16": "F16", "bf16": "BF16"}[dtype]
    n = 0
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape)]
        if t.tensor_type == T.F32:
            want = np.asarray(t.data, dtype=np.float32).reshape(shape)
            st = "F32"
        else:
            want = quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(shape)
            st = stname
            if dtype == "f16":
                with np.errstate(over="ignore"):  # random scales: large values round to inf, as in C
                    want = want.astype(np.float16)
            elif dtype == "bf16":
                want = quants.quantize(want, T.BF16).view(np.uint16).reshape(shape)
        if t.name not in got:
            sys.exit(f"{t.name}: missing from {out}")
        gdt, gshape, gbytes = got[t.name]
        if gdt != st or gshape != shape:
            sys.exit(f"{t.name}: {gdt} {gshape}, want {st} {shape}")
        same_bits(want, gbytes, f"{t.name} ({t.tensor_type.name} -> {dtype})")
        n += 1
    print(f"OK {n} tensors bit-identical with gguf.quants.dequantize ({dtype})")


def check_q(src, out, qtype, report):
    srcs = read_safetensors(src)
    rep = {t["name"]: t for t in json.load(open(report))["tensors"]}
    r = gguf.GGUFReader(out)
    q = T[qtype.upper()]
    n_enc = 0
    for t in r.tensors:
        dt, shape, raw = srcs[t.name]
        x = np.frombuffer(raw, dtype={"F32": np.float32, "F16": np.float16}[dt]).reshape(shape).astype(np.float32)
        got = np.asarray(t.data).tobytes()
        if t.tensor_type == q:
            n_enc += 1
            if q in (T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
                want = quants.quantize(x, q).tobytes()
                if want != got:
                    sys.exit(f"{t.name}: {qtype} bytes differ from gguf.quants.quantize")
            back = quants.dequantize(np.asarray(t.data), q).reshape(shape)
            err = np.abs(back.astype(np.float64) - x.astype(np.float64))
            mx, rmse = float(err.max()), float(np.sqrt(np.mean(err * err)))
            e = rep[t.name]
            if e.get("type") != q.name or not np.isclose(e["max_abs_error"], mx, rtol=1e-9, atol=0) \
                    or not np.isclose(e["rmse"], rmse, rtol=1e-9, atol=0):
                sys.exit(f"{t.name}: report {e}, numpy says max abs error {mx}, RMSE {rmse}")
            # a sane encoding: the error is within a fraction of each row's range
            if mx > 0.25 * float(np.abs(x).max()):
                sys.exit(f"{t.name}: max abs error {mx} is not a quantization error")
        else:
            if got != np.frombuffer(raw, dtype=np.uint8).tobytes():
                sys.exit(f"{t.name}: kept as {t.tensor_type.name} but its bytes changed")
            if "max_abs_error" in rep[t.name]:
                sys.exit(f"{t.name}: stored as {t.tensor_type.name}, reported as encoded")
    print(f"OK {n_enc} tensors encoded as {qtype}, {len(r.tensors) - n_enc} kept")


def overlap(d):
    path = f"{d}/overlap.gguf"
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("overlapping tiny")
    w.add_context_length(2048)
    w.add_tensor("a.weight", np.arange(64, dtype=np.float32).reshape(2, 32))
    w.add_tensor("b.weight", np.arange(64, dtype=np.float32).reshape(2, 32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    b = bytearray(open(path, "rb").read())
    at = b.find(b"b.weight") + len("b.weight") + 4 + 2 * 8 + 4
    if struct.unpack_from("<Q", b, at)[0] == 0:
        sys.exit("b.weight already at offset 0")
    struct.pack_into("<Q", b, at, 0)
    open(path, "wb").write(bytes(b))
    print("OK", path, "b.weight offset field at", at)


def check_inspect(src, js):
    got = {v["name"]: v for v in json.load(open(js))["variables"]}
    r = gguf.GGUFReader(src)
    for t in r.tensors:
        v = got[t.name]
        want = (t.tensor_type.name, [int(x) for x in reversed(t.shape)], int(t.data_offset))
        have = (v.get("ggml_type"), v.get("logical_shape"), v.get("data_offset"))
        if want != have:
            sys.exit(f"{t.name}: inspect says {have}, GGUFReader {want}")
    print(f"OK {len(r.tensors)} tensors: type, logical shape and offset as GGUFReader's")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "write":
        write(sys.argv[2])
    elif cmd == "check-deq":
        check_deq(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "check-q":
        check_q(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    elif cmd == "overlap":
        overlap(sys.argv[2])
    elif cmd == "check-inspect":
        check_inspect(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown command {cmd}")

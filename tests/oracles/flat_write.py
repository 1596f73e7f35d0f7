"""Write safetensors and GGUF files with the real PyPI writers, for libckpt to read.

Usage: flat_write.py OUTDIR
Writes OUTDIR/{ref.safetensors, ref_meta.safetensors, ref.gguf, vocab.gguf} and
OUTDIR/manifest.json: for each file, every tensor as libckpt must expose it
(name, libckpt dtype name, row-major shape, bytes, zlib crc32 of the bytes), the
safetensors __metadata__, and the GGUF key-value pairs (key, type, value).
One process writes everything (TensorFlow is not imported).
"""
import json
import os
import sys
import zlib

import numpy as np
import gguf
from gguf import quants
from safetensors.numpy import save, save_file

out = sys.argv[1]
rng = np.random.RandomState(7)
manifest = {}


def entry(name, dtype, shape, data):
    b = data.tobytes()
    return {"name": name, "dtype": dtype, "shape": list(shape), "bytes": len(b), "crc32": zlib.crc32(b)}


# ---- safetensors: every dtype numpy has, scalars, an empty tensor, PyTorch-style names
st = {
    "conv1.weight": rng.randn(4, 3, 3, 3).astype(np.float32),
    "conv1.bias": rng.randn(4).astype(np.float32),
    "bn1.num_batches_tracked": np.array(17, dtype=np.int64),
    "fc.weight_f64": rng.randn(2, 5),
    "fc.weight_f16": rng.randn(3, 2).astype(np.float16),
    "ids.i32": np.arange(-3, 9, dtype=np.int32).reshape(3, 4),
    "ids.i16": np.arange(-5, 5, dtype=np.int16),
    "ids.i8": np.arange(-4, 4, dtype=np.int8),
    "ids.u8": np.arange(0, 250, 25, dtype=np.uint8),
    "ids.u16": np.array([0, 65535], dtype=np.uint16),
    "ids.u32": np.array([1, 4294967295], dtype=np.uint32),
    "ids.u64": np.array([18446744073709551615], dtype=np.uint64),
    "mask": np.array([[True, False], [False, True]]),
    "cplx": (rng.randn(3) + 1j * rng.randn(3)).astype(np.complex64),
    "empty": np.zeros((0, 4), dtype=np.float32),
}
NP2CKPT = {"float32": "float32", "float64": "float64", "float16": "float16", "int64": "int64", "int32": "int32",
           "int16": "int16", "int8": "int8", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
           "uint64": "uint64", "bool": "bool", "complex64": "complex64"}
save_file(st, os.path.join(out, "ref.safetensors"))
manifest["ref.safetensors"] = {"tensors": [entry(k, NP2CKPT[str(v.dtype)], v.shape, v) for k, v in st.items()],
                               "metadata": None}
meta = {"format": "pt"}
small = {"w": rng.randn(2, 2).astype(np.float32), "b": np.array([1.5], dtype=np.float32)}
with open(os.path.join(out, "ref_meta.safetensors"), "wb") as f:
    f.write(save(small, metadata=meta))
manifest["ref_meta.safetensors"] = {"tensors": [entry(k, "float32", v.shape, v) for k, v in small.items()],
                                    "metadata": meta}

# ---- GGUF: typed key-value pairs of every type, F32/F16/BF16/F64/I8..I64 tensors, Q8_0 and Q4_0
path = os.path.join(out, "ref.gguf")
w = gguf.GGUFWriter(path, "llama")
kvs = [("general.architecture", "string", "llama")]
w.add_uint8("t.u8", 200); kvs.append(("t.u8", "u8", 200))
w.add_int8("t.i8", -100); kvs.append(("t.i8", "i8", -100))
w.add_uint16("t.u16", 60000); kvs.append(("t.u16", "u16", 60000))
w.add_int16("t.i16", -30000); kvs.append(("t.i16", "i16", -30000))
w.add_uint32("llama.context_length", 4096); kvs.append(("llama.context_length", "u32", 4096))
w.add_int32("t.i32", -2000000000); kvs.append(("t.i32", "i32", -2000000000))
w.add_float32("t.f32", 0.5); kvs.append(("t.f32", "f32", 0.5))
w.add_bool("t.bool", True); kvs.append(("t.bool", "bool", True))
w.add_uint64("t.u64", 2 ** 40); kvs.append(("t.u64", "u64", 2 ** 40))
w.add_int64("t.i64", -(2 ** 40)); kvs.append(("t.i64", "i64", -(2 ** 40)))
w.add_float64("t.f64", 0.125); kvs.append(("t.f64", "f64", 0.125))
w.add_string("general.name", "tiny"); kvs.append(("general.name", "string", "tiny"))
toks = ["<s>", "</s>", "hello", "wörld"]
w.add_array("tokenizer.ggml.tokens", toks); kvs.append(("tokenizer.ggml.tokens", "array", toks))
tensors = []


def add(name, arr, ckpt_dtype, raw=None, row_major=None, gtype=None):
    if raw is None:
        w.add_tensor(name, arr)
    else:
        w.add_tensor(name, arr, raw_shape=arr.shape, raw_dtype=raw)
    tensors.append(entry(name, ckpt_dtype, row_major if row_major is not None else arr.shape, arr))
    tensors[-1]["ggml_type"] = gtype


add("token_embd.weight", rng.randn(6, 4).astype(np.float32), "float32", gtype="F32")
add("blk.0.attn_q.weight", rng.randn(4, 4).astype(np.float16), "float16", gtype="F16")
add("blk.0.f64", rng.randn(3), "float64", gtype="F64")
add("blk.0.i8", np.arange(-8, 8, dtype=np.int8).reshape(2, 8), "int8", gtype="I8")
add("blk.0.i16", np.arange(6, dtype=np.int16), "int16", gtype="I16")
add("blk.0.i32", np.arange(6, dtype=np.int32).reshape(3, 2), "int32", gtype="I32")
add("blk.0.i64", np.arange(2, dtype=np.int64), "int64", gtype="I64")
bf = (rng.randn(2, 3).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
add("blk.0.bf16", bf, "bfloat16", raw=gguf.GGMLQuantizationType.BF16, row_major=(2, 3), gtype="BF16")
x = rng.randn(3, 64).astype(np.float32)
q8 = quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)
add("blk.0.ffn_q8.weight", q8, "uint8", raw=gguf.GGMLQuantizationType.Q8_0, gtype="Q8_0")
q4 = quants.quantize(rng.randn(2, 32).astype(np.float32), gguf.GGMLQuantizationType.Q4_0)
add("blk.0.ffn_q4.weight", q4, "uint8", raw=gguf.GGMLQuantizationType.Q4_0, gtype="Q4_0")
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
manifest["ref.gguf"] = {"tensors": tensors, "kv": kvs}

# ---- a vocabulary-only GGUF: no tensors, a large string array
path = os.path.join(out, "vocab.gguf")
w = gguf.GGUFWriter(path, "llama")
vocab = ["tok%05d" % i for i in range(20000)]
w.add_array("tokenizer.ggml.tokens", vocab)
w.add_array("tokenizer.ggml.scores", [float(i) / 4 for i in range(20000)])
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
manifest["vocab.gguf"] = {"tensors": [], "kv": [("general.architecture", "string", "llama"),
                                                 ("tokenizer.ggml.tokens", "array", vocab[:3] + ["..."])]}

with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(manifest, f)
print("wrote", len(manifest), "files")

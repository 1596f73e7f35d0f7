"""Seed corpora/safetensors and corpora/gguf with files the real writers produce.

Run with the oracle venv's python (safetensors, gguf, numpy):
  $CKPT_ORACLE_PYTHON tests/fuzz/make_flat_seeds.py
Small files only; minimize with libFuzzer -merge=1 afterwards (README.md).
"""
import os
import struct

import numpy as np
import gguf
from gguf import quants
from safetensors.numpy import save

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpora", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


rng = np.random.RandomState(3)
put("safetensors", "numpy_dtypes", save({
    "a.weight": rng.randn(2, 3).astype(np.float32), "a.bias": np.zeros(3, np.float16),
    "n": np.array(5, np.int64), "m": np.array([True, False]), "u": np.arange(4, dtype=np.uint16),
    "e": np.zeros((0, 2), np.float64), "c": np.zeros(2, np.complex64)}))
put("safetensors", "metadata", save({"w": np.ones((2, 2), np.float32)}, metadata={"format": "pt", "k": "v"}))
put("safetensors", "empty", save({}))
put("safetensors", "tf_names", save({"model.layer_with_weights-0.kernel": np.ones((2, 2), np.float32),
                                     "model.layer_with_weights-0.kernel.__slot__.optimizer.m": np.ones((2, 2), np.float32),
                                     "table.__attr__.table-keys": np.arange(3, dtype=np.int64)}))
hdr = b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}'
put("safetensors", "handmade_duplicate", struct.pack("<Q", len(hdr)) + hdr + bytes(8))


def gguf_file(name, build):
    path = os.path.join("/tmp", "seed_%d_%s" % (os.getpid(), name))
    w = gguf.GGUFWriter(path, "llama")
    build(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    put("gguf", name, open(path, "rb").read())
    os.unlink(path)


def full(w):
    w.add_uint32("llama.context_length", 64)
    w.add_float32("f", 0.5)
    w.add_bool("b", True)
    w.add_int64("i", -3)
    w.add_array("tokenizer.ggml.tokens", ["a", "b"])
    w.add_array("tokenizer.ggml.scores", [0.5, 1.0])
    w.add_tensor("t.f32", rng.randn(2, 3).astype(np.float32))
    w.add_tensor("t.f16", rng.randn(4).astype(np.float16))
    w.add_tensor("t.i32", np.arange(4, dtype=np.int32))
    q = quants.quantize(rng.randn(1, 32).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("t.q8", q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)


gguf_file("full", full)
gguf_file("vocab_only", lambda w: w.add_array("tokenizer.ggml.tokens", ["t%d" % i for i in range(64)]))
gguf_file("no_kv", lambda w: w.add_tensor("x", np.ones(8, np.float32)))
print("seeded")

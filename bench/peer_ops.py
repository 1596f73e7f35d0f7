#!/usr/bin/env python3
"""One peer operation on the tensors of a `ckpt inspect --json` listing, for
bench/whole_process.py. Prints the operation's own seconds on the last line.

  peer_ops.py prepare TOOL SPEC OUT   write OUT (untimed); prints its files as JSON
  peer_ops.py load TOOL SPEC OUT      read OUT, every page of the data touched
  peer_ops.py save TOOL SPEC OUT      write the tensors to OUT (data made first, untimed)

TOOL: tf (tf.train.Checkpoint), safetensors (safetensors.numpy), torch.
Values are seeded float32 / int64 with the listing's names and shapes, so
every peer moves the same bytes as libckpt does.
"""
import json
import os
import sys
import time

import numpy as np

PAGE_FLOATS = 1024  # one element per 4 KiB page is enough to fault it in


def tensors(spec):
    rng = np.random.default_rng(0)
    out = {}
    for v in json.load(open(spec))["variables"]:
        if v["name"] == "_CHECKPOINTABLE_OBJECT_GRAPH":
            continue
        shape = tuple(v["shape"])
        if v["dtype"] == "int64":
            out[v["name"]] = np.full(shape, 1000, dtype=np.int64)
        else:
            out[v["name"]] = rng.standard_normal(shape, dtype=np.float32)
    return out


def flat(name):
    return name.replace("/.ATTRIBUTES/VARIABLE_VALUE", "").replace("/", ".")


def touch(arr):
    a = np.asarray(arr).reshape(-1)
    return float(a[::PAGE_FLOATS].sum()) if a.size else 0.0


def tf_vars(tf, spec_t, zeros):
    return {"v%d" % i: tf.Variable(np.zeros_like(a) if zeros else a) for i, a in enumerate(spec_t.values())}


def save(tool, t, out):
    if tool == "tf":
        import tensorflow as tf
        ck = tf.train.Checkpoint(**tf_vars(tf, t, False))
        t0 = time.perf_counter()
        path = ck.write(out)
        return time.perf_counter() - t0, [path + ".index"] + [
            os.path.join(os.path.dirname(out), n) for n in os.listdir(os.path.dirname(out))
            if n.startswith(os.path.basename(out) + ".data-")]
    if tool == "safetensors":
        from safetensors.numpy import save_file
        d = {flat(k): v for k, v in t.items()}
        t0 = time.perf_counter()
        save_file(d, out)
        return time.perf_counter() - t0, [out]
    if tool == "torch":
        import torch
        d = {flat(k): torch.from_numpy(v) for k, v in t.items()}
        t0 = time.perf_counter()
        torch.save(d, out)
        return time.perf_counter() - t0, [out]
    raise SystemExit("unknown tool " + tool)


def load(tool, spec, out):
    if tool == "tf":
        import tensorflow as tf
        t = tensors(spec)
        ck = tf.train.Checkpoint(**tf_vars(tf, t, True))  # what a TF trainer has before restore
        t0 = time.perf_counter()
        ck.read(out).assert_consumed()  # read(): the counterpart of write(), no save_counter
        return time.perf_counter() - t0
    if tool == "safetensors":
        from safetensors.numpy import load_file
        t0 = time.perf_counter()
        d = load_file(out)
        for v in d.values():
            touch(v)
        return time.perf_counter() - t0
    if tool == "torch":
        import torch
        t0 = time.perf_counter()
        d = torch.load(out, mmap=True)
        for v in d.values():
            touch(v.numpy())
        return time.perf_counter() - t0
    raise SystemExit("unknown tool " + tool)


def main():
    op, tool, spec, out = sys.argv[1:5]
    if op == "prepare":
        _, files = save(tool, tensors(spec), out)
        print(json.dumps(files))
    elif op == "save":
        t = tensors(spec)
        secs, _ = save(tool, t, out)
        print(secs)
    elif op == "load":
        print(load(tool, spec, out))
    else:
        raise SystemExit("unknown op " + op)


if __name__ == "__main__":
    main()

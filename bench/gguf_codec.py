"""GGUF block codecs per core: libckpt (bench/gguf_codec) beside gguf-py's numpy, same run.

Usage: CKPT_ORACLE_PYTHON bench/gguf_codec.py BUILD/bench/gguf_codec [--elems N] [--reps R]
Both sides: one thread (taskset to one CPU, OMP/BLAS threads 1), warm (one untimed run first),
in-process, the same float32 input size; GB/s counts the float32 bytes (4 per element), median
of R runs. Prints a Markdown table for bench/RESULTS.md.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from gguf import quants, GGMLQuantizationType as T

ap = argparse.ArgumentParser()
ap.add_argument("bench")
ap.add_argument("--elems", type=int, default=1 << 22)
ap.add_argument("--reps", type=int, default=7)
a = ap.parse_args()
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
cpu = min(os.sched_getaffinity(0))
env = dict(os.environ, OMP_NUM_THREADS="1")
ours = [json.loads(line) for line in subprocess.run(
    ["taskset", "-c", str(cpu), a.bench, "--elems", str(a.elems), "--reps", str(a.reps), "Q8_0", "Q4_0"],
    check=True, capture_output=True, text=True, env=env).stdout.splitlines()]

rng = np.random.default_rng(12345)
x = ((rng.random(a.elems, dtype=np.float32) - 0.5) * (1 + (np.arange(a.elems) >> 10) % 7)).astype(np.float32)
x = x.reshape(-1, 4096)
theirs = {}
for name in ("Q8_0", "Q4_0"):
    t = T[name]
    for op in ("quantize", "dequantize"):
        q = quants.quantize(x, t)
        fn = (lambda: quants.quantize(x, t)) if op == "quantize" else (lambda: quants.dequantize(q, t))
        fn()
        ts = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        ts.sort()
        theirs[(name, op)] = a.elems * 4 / ts[len(ts) // 2] / 1e9

print(f"{a.elems} float32 elements ({a.elems * 4 / 2**20:.0f} MiB), median of {a.reps}, one core (CPU {cpu}), "
      f"warm, in-process; numpy {np.__version__}\n")
print("| type | op | libckpt GB/s | gguf-py numpy GB/s | libckpt / numpy |")
print("|---|---|---|---|---|")
for r in ours:
    n = theirs[(r["type"], r["op"])]
    print(f"| {r['type']} | {r['op']} | {r['gbps_f32']:.2f} | {n:.3f} | {r['gbps_f32'] / n:.0f}× |")

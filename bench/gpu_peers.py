#!/usr/bin/env python3
"""The peers a GPU user would pick, on a state of the same size and shapes as
gpu_bench's (float32 vectors of 64 MiB): safetensors load_file(device="cuda")
and torch.load(map_location="cuda"). Each load runs in a fresh process (its
own peak RSS), once to warm the page cache, then timed.

    gpu_peers.py DIR MIB        prints "row NAME SECONDS BYTES" and "rss_mb NAME MB"
"""
import os
import resource
import subprocess
import sys
import time

VAR_ELEMS = (64 << 20) // 4


def make(d, mib):
    import torch
    from safetensors.torch import save_file
    elems = min(VAR_ELEMS, (mib << 20) // 4)  # as gpu_bench make: 64 MiB variables, or one smaller
    state = {f"layer{i:03d}/w": torch.arange(elems, dtype=torch.float32) * (i + 1)
             for i in range((mib << 20) // 4 // elems)}
    st, pt = os.path.join(d, "state.safetensors"), os.path.join(d, "state.pt")
    if not os.path.exists(st):
        save_file(state, st)
    if not os.path.exists(pt):
        torch.save(state, pt)
    return st, pt


def load_one(kind, path):
    import torch
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the CUDA context is not the load's cost
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if kind == "safetensors":
        from safetensors.torch import load_file
        state = load_file(path, device="cuda")
    else:
        state = torch.load(path, map_location="cuda", weights_only=True)
    torch.cuda.synchronize()
    t = time.perf_counter() - t0
    nbytes = sum(v.numel() * v.element_size() for v in state.values())
    print(f"row {kind}_load_cuda {t:.4f} {nbytes}")
    print(f"rss_mb {kind} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        load_one(sys.argv[2], sys.argv[3])
        return
    d, mib = sys.argv[1], int(sys.argv[2])
    st, pt = make(d, mib)
    for kind, path in (("safetensors", st), ("torch", pt)):
        for rep in range(2):  # the first warms the page cache, as gpu_bench's limits do
            out = subprocess.run([sys.executable, __file__, "--one", kind, path], check=True,
                                 capture_output=True, text=True).stdout
            if rep:
                sys.stdout.write(out)
                sys.stdout.flush()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Peers of libckpt on the same states, measured the way bench/ckpt_bench.c
measures libckpt: h5py (one dataset per tensor), torch.save / torch.load of a
state dict, numpy.save per tensor, np.savez.

Each repetition runs in a forked child (peak RSS per operation from wait4);
the parent holds the state in one anonymous mapping marked MADV_DONTFORK while
restore children run, so their RSS does not include it. Restore inputs are
read through before every repetition and their residency is checked with
mincore-equivalent reads (we report the cached fraction as 1.0 after the
read-through; the read-through itself is untimed).

Run with the system Python (Debian packages): /usr/bin/python3 bench/peers.py
Run once plain and once with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (the
record's "hugetlb" field says which).
"""
import argparse
import json
import mmap
import os
import shutil
import sys
import time

import numpy as np

try:
    import h5py
except ImportError:  # reported, not fatal
    h5py = None
try:
    import torch
except ImportError:
    torch = None

# ---------------------------------------------------------------- states
# Same names, shapes and dtypes as build_state() in ckpt_bench.c.


def adam(out, obj, shape):
    out.append((obj + "/.ATTRIBUTES/VARIABLE_VALUE", "float32", shape))
    out.append((obj + "/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE", "float32", shape))
    out.append((obj + "/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE", "float32", shape))


def bert_layer(out, l):
    for a in ("query", "key", "value", "output"):
        adam(out, "model/layer-%d/attention/%s/kernel" % (l, a), (768, 768))
        adam(out, "model/layer-%d/attention/%s/bias" % (l, a), (768,))
    adam(out, "model/layer-%d/intermediate/kernel" % l, (768, 3072))
    adam(out, "model/layer-%d/intermediate/bias" % l, (3072,))
    adam(out, "model/layer-%d/output/kernel" % l, (3072, 768))
    adam(out, "model/layer-%d/output/bias" % l, (768,))
    for i in range(2):
        adam(out, "model/layer-%d/layer_norm-%d/gamma" % (l, i), (768,))
        adam(out, "model/layer-%d/layer_norm-%d/beta" % (l, i), (768,))


def state_spec(name):
    out = []
    it = ("optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE", "int64", ())
    if name == "small":
        adam(out, "model/layer_with_weights-0/kernel", (8, 16))
        adam(out, "model/layer_with_weights-0/bias", (16,))
        adam(out, "model/layer_with_weights-1/kernel", (16, 1))
        adam(out, "model/layer_with_weights-1/bias", (1,))
        out.append(it)
        out.append(("optimizer/learning_rate/.ATTRIBUTES/VARIABLE_VALUE", "float32", ()))
        out.append(("metrics/0/total/.ATTRIBUTES/VARIABLE_VALUE", "float32", ()))
        out.append(("metrics/0/count/.ATTRIBUTES/VARIABLE_VALUE", "float32", ()))
    elif name == "medium":
        for l in range(4):
            bert_layer(out, l)
        out.append(it)
    elif name == "large":
        shp = [(768, 3072), (3072, 768), (768, 768), (768,)]
        for i in range(133):
            adam(out, "model/block-%d/w-%d" % (i // 4, i % 4), shp[i % 4])
        out.append(it)
    elif name == "tiny":
        for i in range(10000):
            out.append(("model/tiny-%05d/.ATTRIBUTES/VARIABLE_VALUE" % i, "float32", (16,)))
    else:
        raise SystemExit("unknown state %r" % name)
    return out


class State:
    """All tensors of a state as views into one private anonymous mapping."""

    def __init__(self, name):
        self.name = name
        self.spec = state_spec(name)
        offs, off = [], 0
        for _, dt, shape in self.spec:
            n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
            offs.append((off, n))
            off += (n + 63) & ~63
        self.arena_len = max(off, mmap.PAGESIZE)
        self.mm = mmap.mmap(-1, self.arena_len, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.mm.madvise(mmap.MADV_HUGEPAGE)
        self.arrays = {}
        self.bytes = 0
        rng = np.random.default_rng(1)
        for (key, dt, shape), (o, n) in zip(self.spec, offs):
            a = np.frombuffer(self.mm, dtype=dt, count=n // np.dtype(dt).itemsize, offset=o).reshape(shape)
            if dt == "int64":
                a[...] = 1000
            else:
                rng.random(out=a.reshape(-1), dtype=np.float32)
                a -= 0.5
            self.arrays[key] = a
            self.bytes += n
        self.offs = offs

    def dontfork(self, on):
        self.mm.madvise(mmap.MADV_DONTFORK if on else mmap.MADV_DOFORK)


def prefaulted_like(state):
    """Destination arrays for restore-into: one fresh mapping, pre-faulted."""
    mm = mmap.mmap(-1, state.arena_len, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    mm.madvise(mmap.MADV_HUGEPAGE)
    buf = np.frombuffer(mm, dtype=np.uint8)
    buf[:] = 0
    out = {}
    for (key, dt, shape), (o, n) in zip(state.spec, state.offs):
        out[key] = np.frombuffer(mm, dtype=dt, count=n // np.dtype(dt).itemsize, offset=o).reshape(shape)
    return mm, out


# ---------------------------------------------------------------- peers
# Each op: fn(state, path) -> seconds (set-up outside the timed part).


def h5_save(st, p):
    t0 = time.perf_counter()
    with h5py.File(p, "w") as f:
        for k, a in st.arrays.items():
            f.create_dataset(k, data=a)
    return time.perf_counter() - t0


def h5_restore(st, p):
    t0 = time.perf_counter()
    with h5py.File(p, "r") as f:
        out = {k: f[k][()] for k in st.arrays}
    t = time.perf_counter() - t0
    check(st, out)
    return t


def h5_restore_into(st, p):
    mm, dst = prefaulted_like(st)
    t0 = time.perf_counter()
    with h5py.File(p, "r") as f:
        for k, a in dst.items():
            f[k].read_direct(a)
    t = time.perf_counter() - t0
    check(st, dst)
    return t


def torch_save(st, p):
    t0 = time.perf_counter()
    torch.save({k: torch.from_numpy(a) for k, a in st.arrays.items()}, p)
    return time.perf_counter() - t0


def torch_restore(st, p):
    t0 = time.perf_counter()
    out = torch.load(p)
    t = time.perf_counter() - t0
    check(st, {k: v.numpy() for k, v in out.items()})
    return t


def npy_save(st, p):
    os.makedirs(p, exist_ok=True)
    t0 = time.perf_counter()
    for i, a in enumerate(st.arrays.values()):
        np.save(os.path.join(p, "%d.npy" % i), a)
    return time.perf_counter() - t0


def npy_restore(st, p):
    t0 = time.perf_counter()
    out = {k: np.load(os.path.join(p, "%d.npy" % i)) for i, k in enumerate(st.arrays)}
    t = time.perf_counter() - t0
    check(st, out)
    return t


def npy_restore_into(st, p):
    mm, dst = prefaulted_like(st)
    t0 = time.perf_counter()
    for i, a in enumerate(dst.values()):
        np.copyto(a, np.load(os.path.join(p, "%d.npy" % i), mmap_mode="r"))
    t = time.perf_counter() - t0
    check(st, dst)
    return t


def npz_save(st, p):
    t0 = time.perf_counter()
    np.savez(p, **st.arrays)
    return time.perf_counter() - t0


def npz_restore(st, p):
    t0 = time.perf_counter()
    with np.load(p) as z:
        out = {k: z[k] for k in z.files}
    t = time.perf_counter() - t0
    check(st, out)
    return t


CHECK = {}


def check(st, out):
    """Untimed: restored values equal the state (a few tensors, by hash)."""
    for k in CHECK[st.name]:
        if CHECK[st.name][k] != hash(np.asarray(out[k]).tobytes()):
            raise RuntimeError("restored %s differs" % k)


PEERS = [
    # tool, file name, save, [(variant, restore fn)]
    ("h5py", "state.h5", h5_save, [("fresh", h5_restore), ("into", h5_restore_into)]),
    ("torch", "state.pt", torch_save, [("fresh", torch_restore)]),
    ("npy", "npy", npy_save, [("fresh", npy_restore), ("into", npy_restore_into)]),
    ("npz", "state.npz", npz_save, [("fresh", npz_restore)]),
]

# ---------------------------------------------------------------- harness


def warm(path):
    files = [path] if os.path.isfile(path) else [os.path.join(path, f) for f in os.listdir(path)]
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while fh.read(8 << 20):
                pass


def rm(path):
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.unlink(path)


def forked(fn, st, path, share_state):
    r, w = os.pipe()
    if not share_state:
        st.dontfork(True)
    sys.stdout.flush()
    sys.stderr.flush()
    start_kb = 0
    pid = os.fork()
    if pid == 0:
        os.close(r)
        res = {}
        try:
            with open("/proc/self/statm") as f:
                res["start_kb"] = int(f.read().split()[1]) * (mmap.PAGESIZE // 1024)
            res["t"] = fn(st, path)
        except BaseException as e:  # reported by the parent
            res["error"] = "%s: %s" % (type(e).__name__, e)
        os.write(w, json.dumps(res).encode())
        os._exit(0)
    os.close(w)
    if not share_state:
        st.dontfork(False)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, status, ru = os.wait4(pid, 0)
    try:
        res = json.loads(data.decode())
    except ValueError:
        res = {"error": "child died (status %d)" % status}
    res["peak_kb"] = ru.ru_maxrss
    start_kb = res.get("start_kb", start_kb)
    return res


def record(out, tool, st, op, variant, times, peaks, starts, note, status, hugetlb):
    ts = sorted(times)
    n = len(ts)
    med = (ts[n // 2] if n % 2 else 0.5 * (ts[n // 2 - 1] + ts[n // 2])) if n else 0
    rec = {
        "tool": tool, "kind": "peer", "state": st.name, "op": op, "variant": variant,
        "bytes": st.bytes, "ntensors": len(st.spec), "hugetlb": hugetlb, "status": status,
        "reps": n, "median": med, "min": ts[0] if n else 0, "max": ts[-1] if n else 0,
        "times": times, "rss_peak_kb": max(peaks) if peaks else 0,
        "rss_start_kb": max(starts) if starts else 0, "cached": 1.0 if op == "restore" else -1,
        "note": note,
    }
    out.append(rec)
    if status == 0:
        print("peer    %-8s %-6s %-8s %-6s %s %9.4f s [%0.4f-%0.4f] %7.2f GB/s  peak %6.0f MiB (start %6.0f)" % (
            st.name, tool, op, variant, "huge" if hugetlb else "    ", med, ts[0], ts[-1],
            st.bytes / med / 1e9 if med else 0, rec["rss_peak_kb"] / 1024, rec["rss_start_kb"] / 1024),
            file=sys.stderr)
    else:
        print("peer    %-8s %-6s %-8s %-6s %s: %s" % (st.name, tool, op, variant,
              "skipped" if status > 0 else "FAILED", note), file=sys.stderr)


def measure(out, tool, st, op, variant, fn, path, reps, share_state, hugetlb, pre=None):
    times, peaks, starts = [], [], []
    for _ in range(reps):
        if pre:
            pre()
        res = forked(fn, st, path, share_state)
        if "error" in res:
            record(out, tool, st, op, variant, times, peaks, starts, res["error"], -1, hugetlb)
            return False
        times.append(res["t"])
        peaks.append(res["peak_kb"])
        starts.append(res.get("start_kb", 0))
    record(out, tool, st, op, variant, times, peaks, starts, "", 0, hugetlb)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/ckpt-bench")
    ap.add_argument("--json", help="write the records here")
    ap.add_argument("--states", default="small,medium,large,tiny")
    ap.add_argument("--peers", default="h5py,torch,npy,npz")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--large-reps", type=int, default=5)
    args = ap.parse_args()
    hugetlb = 1 if "glibc.malloc.hugetlb=1" in os.environ.get("GLIBC_TUNABLES", "") else 0
    run_dir = os.path.join(args.dir, "peers-%d" % os.getpid())
    os.makedirs(run_dir, exist_ok=True)
    out = []
    want = args.peers.split(",")
    print("# peers: python %s numpy %s h5py %s torch %s, hugetlb=%d" % (
        sys.version.split()[0], np.__version__, h5py.version.version if h5py else "missing",
        torch.__version__ if torch else "missing", hugetlb), file=sys.stderr)
    try:
        for name in args.states.split(","):
            t0 = time.perf_counter()
            st = State(name)
            keys = list(st.arrays)[:: max(1, len(st.arrays) // 8)]
            CHECK[name] = {k: hash(st.arrays[k].tobytes()) for k in keys}
            print("# state %s: %d tensors, %d bytes, built in %.2f s" % (
                name, len(st.spec), st.bytes, time.perf_counter() - t0), file=sys.stderr)
            reps = args.large_reps if name == "large" else args.reps
            for tool, fname, save, restores in PEERS:
                if tool not in want:
                    continue
                missing = (tool == "h5py" and h5py is None) or (tool == "torch" and torch is None)
                if missing:
                    record(out, tool, st, "save", "", [], [], [], "python3-%s is not installed" % tool, 1, hugetlb)
                    continue
                path = os.path.join(run_dir, fname)
                # save: each rep writes a fresh file (removed before the next)
                ok = measure(out, tool, st, "save", "", save, path, reps, True, hugetlb, pre=lambda: rm(path))
                if not ok:
                    continue
                for variant, fn in restores:
                    measure(out, tool, st, "restore", variant, fn, path, reps, False, hugetlb,
                            pre=lambda: warm(path))
                rm(path)
            del st
            if args.json:  # after every state, so an interrupted run still reports
                with open(args.json, "w") as f:
                    json.dump(out, f, indent=0)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        try:
            os.rmdir(args.dir)
        except OSError:
            pass
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=0)


if __name__ == "__main__":
    main()

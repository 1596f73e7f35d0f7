#!/usr/bin/python3
"""Turn the JSON records of ckpt_bench and peers.py into bench/RESULTS.md
(or, with --scaling, bench/SCALING.md). Ratios are computed within one run.

  report.py --ckpt ckpt.json --peers peers.json --peers-huge peers-huge.json \
            --meta meta.txt --out bench/RESULTS.md
  report.py --scaling t1.json t2.json ... --meta meta.txt --out bench/SCALING.md
"""
import argparse
import json
import sys

MIB = 1024 * 1024
STATES = ["small", "medium", "large", "tiny"]
PEER_TOOLS = ["h5py", "torch", "npy", "npz"]


def load(path):
    if not path:
        return []
    try:
        with open(path) as f:
            text = f.read()
        try:
            return json.loads(text)
        except ValueError:
            # an interrupted ckpt_bench leaves "[ {...}, {...}" without the closing bracket
            return json.loads(text.rstrip().rstrip(",") + "\n]")
    except (OSError, ValueError) as e:
        print("report: cannot read %s: %s" % (path, e), file=sys.stderr)
        return []


class Run:
    def __init__(self, ckpt, peers, peers_huge):
        self.ck = {}
        for r in ckpt:
            self.ck[(r["state"], r["op"], r["variant"])] = r
        self.peers = {}
        for huge, recs in ((0, peers), (1, peers_huge)):
            for r in recs:
                self.peers[(r["state"], r["tool"], r["op"], r["variant"], huge)] = r

    def c(self, state, op, variant):
        r = self.ck.get((state, op, variant))
        return r if r and r.get("status") == 0 and r.get("reps") else None

    def t(self, state, op, variant):
        r = self.c(state, op, variant)
        return r["median"] if r else None

    def p(self, state, tool, op, variant, huge):
        r = self.peers.get((state, tool, op, variant, huge))
        return r if r and r.get("status") == 0 and r.get("reps") else None


def fmt_t(r):
    if not r:
        return "n/a"
    m, lo, hi = r["median"], r["min"], r["max"]
    if m < 0.01:
        return "%.2f ms (%.2f–%.2f)" % (m * 1e3, lo * 1e3, hi * 1e3)
    return "%.3f (%.3f–%.3f)" % (m, lo, hi)


def gbps(r):
    if not r or not r["median"]:
        return "n/a"
    return "%.2f" % (r["bytes"] / r["median"] / 1e9)


def ratio(a, b, digits=2):
    """a / b, both seconds (or None)."""
    if a is None or b is None or not b:
        return "n/a"
    return ("%." + str(digits) + "f×") % (a / b)


def rss(r):
    if not r or not r.get("rss_peak_kb"):
        return "n/a", "n/a"
    peak = r["rss_peak_kb"] / 1024
    over = (r["rss_peak_kb"] - r.get("rss_start_kb", 0)) / 1024
    return "%.0f" % peak, "%+.0f" % over


# our rows: (op, variant, label, limit key, peer category, replicas)
#  limit key: "write", "write-fsync", "read", "read-fresh", "memcpy", "mirror", "sync-save"
#  peer category: "save", "into", "fresh", None
ROWS = [
    ("save", "writer", "save: ckpt_writer (TensorBundle)", "write", "save"),
    ("save", "checkpoint", "save: ckpt_checkpoint_write", "write", "save"),
    ("save", "checkpoint-fsync", "save: ckpt_checkpoint_write + fsync", "write-fsync", "save"),
    ("save", "keras-weights", "save: ckpt_writer (Keras .weights.h5)", "write", "save"),
    ("async-save/blocking-first", "checkpoint", "async save: blocked, first (arena grown)", "sync-save", None),
    ("async-save/blocking-first", "checkpoint-reserved", "async save: blocked, first after ckpt_async_saver_reserve", "sync-save", None),
    ("async-save/blocking", "checkpoint", "async save: blocked (arena reused)", "sync-save", None),
    ("async-save/written", "checkpoint", "async save: until written (reused)", "sync-save", None),
    ("stage-copy", "reused-1-thread", "bench-local staging copy, 1 thread", "memcpy", None),
    ("stage-copy", "reused-all-threads", "bench-local staging copy, all threads", "memcpy", None),
    ("restore", "reader-into", "restore: read_into pre-faulted buffers", "read", "into"),
    ("restore", "reader-into-noverify", "restore: read_into, no CRC check", "read", "into"),
    ("restore", "keras-reader-into", "restore: Keras .weights.h5 read_into", "read", "into"),
    ("ckrestore/restore", "N=1-wrapped", "restore: ckpt_checkpoint_restore into trainer buffers", "read", "into"),
    ("ckrestore/create", "N=1", "create plain variables (library-allocated)", None, None),
    ("ckrestore/restore", "N=1", "restore: ckpt_checkpoint_restore, first after create", "read", "into"),
    ("ckrestore/restore-warm", "N=1", "restore: ckpt_checkpoint_restore, again", "read", "into"),
    ("restore", "reader-fresh", "restore: ckpt_reader_read into fresh tensors", "read-fresh", "fresh"),
    ("load", "N=1", "load: ckpt_checkpoint_load (creates variables)", "read-fresh", "fresh"),
]


def mirror_rows(run, state):
    rows = []
    ns = sorted({int(v.split("=")[1].split("-")[0]) for (s, op, v) in run.ck
                 if s == state and op.startswith(("ckrestore", "load", "varrestore")) and v.startswith("N=")} - {1})
    for n in ns:
        rows += [
            ("ckrestore/create", "N=%d" % n, "N=%d: create mirrored variables" % n, None, None),
            ("ckrestore/restore", "N=%d" % n, "N=%d: ckpt_checkpoint_restore, first after create" % n, "mirror", None),
            ("ckrestore/restore-warm", "N=%d" % n, "N=%d: ckpt_checkpoint_restore, again" % n, "mirror", None),
            ("ckrestore/restore", "N=%d-wrapped" % n, "N=%d: restore into trainer-owned replicas" % n, "mirror", None),
            ("load", "N=%d" % n, "N=%d: ckpt_checkpoint_load in mirrored scope" % n, "mirror-fresh", None),
            ("varrestore/restore", "N=%d" % n, "N=%d: read_into + ckpt_variable_assign" % n, "mirror", None),
        ]
    return rows


def limit_time(run, state, key, op, variant):
    lim = {
        "write": run.t(state, "write", "page-cache"),
        "write-fsync": run.t(state, "write", "fsync"),
        "read": run.t(state, "read", "cached"),
        "read-fresh": run.t(state, "read", "cached-fresh-mem"),
        "memcpy": run.t(state, "memcpy", "1-thread"),
        "sync-save": run.t(state, "save", "checkpoint"),
    }
    if key in ("mirror", "mirror-fresh"):
        n = int(variant.split("=")[1].split("-")[0])
        rd, mc = run.t(state, "read", "cached"), run.t(state, "memcpy", "1-thread")
        if rd is None or mc is None:
            return None
        return rd + n * mc
    return lim.get(key)


def peer_time(run, state, tool, cat, huge):
    if cat == "save":
        r = run.p(state, tool, "save", "", huge)
    elif cat == "into":
        r = run.p(state, tool, "restore", "into", huge) or run.p(state, tool, "restore", "fresh", huge)
    elif cat == "fresh":
        r = run.p(state, tool, "restore", "fresh", huge)
    else:
        r = None
    return r["median"] if r else None


def speedup(run, state, tool, cat, ours):
    if not cat or ours is None:
        return ""
    a = peer_time(run, state, tool, cat, 0)
    b = peer_time(run, state, tool, cat, 1)
    if a is None and b is None:
        return "n/a"
    return "%s / %s" % (ratio(a, ours, 1), ratio(b, ours, 1))


def state_tables(run, state, out):
    lim_rows = [
        ("memcpy", "1-thread", "memcpy, pre-faulted, 1 thread"),
        ("memcpy", "all-threads", "memcpy, pre-faulted, all threads"),
        ("write", "page-cache", "write() to the page cache, 8 MiB chunks"),
        ("write", "fsync", "write() + fsync"),
        ("read", "cached", "read() of a cached file into pre-faulted memory"),
        ("read", "cached-fresh-mem", "read() of a cached file into fresh malloc memory"),
        ("crc32c", "1-thread", "CRC32C (ckpt_crc32c_extend), 1 thread"),
        ("crc32c", "all-threads", "CRC32C, all threads"),
    ]
    any_state = [k for k in run.ck if k[0] == state]
    if not any_state:
        return
    r0 = run.ck[any_state[0]]
    out.append("### %s — %s tensors, %.1f MB\n" % (state, r0.get("ntensors", "?"), r0.get("bytes", 0) / 1e6))
    out.append("| limit | seconds (median, min–max) | GB/s |")
    out.append("|---|---|---|")
    for op, v, label in lim_rows:
        r = run.c(state, op, v)
        if r:
            out.append("| %s | %s | %s |" % (label, fmt_t(r), gbps(r)))
    out.append("")
    out.append("| operation | seconds (median, min–max) | GB/s | vs limit | vs h5py | vs torch | vs npy | vs npz "
               "| peak RSS MiB | RSS over start MiB |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for op, v, label, lk, cat in ROWS + mirror_rows(run, state):
        r = run.c(state, op, v)
        if not r:
            raw = run.ck.get((state, op, v))
            if raw and raw.get("status"):
                out.append("| %s | %s: %s | | | | | | | | |" % (
                    label, "skipped" if raw["status"] > 0 else "FAILED", raw.get("note", "")[:200].replace("|", "/")))
            continue
        ours = r["median"]
        lt = limit_time(run, state, lk, op, v) if lk else None
        if lk == "sync-save":
            vs_lim = ratio(ours, lt) + " of sync save" if lt else "n/a"
        else:
            vs_lim = ratio(lt, ours) if lk else ""
        peak, over = rss(r)
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, fmt_t(r), gbps(r), vs_lim,
            speedup(run, state, "h5py", cat, ours), speedup(run, state, "torch", cat, ours),
            speedup(run, state, "npy", cat, ours), speedup(run, state, "npz", cat, ours), peak, over))
    out.append("")
    # peers' own figures
    prow = []
    for tool in PEER_TOOLS:
        for op, var in (("save", ""), ("restore", "fresh"), ("restore", "into")):
            for huge in (0, 1):
                r = run.p(state, tool, op, var, huge)
                raw = run.peers.get((state, tool, op, var, huge))
                if r:
                    peak, over = rss(r)
                    prow.append("| %s | %s%s | %s | %s | %s | %s | %s |" % (
                        tool, op, " " + var if var else "", "hugetlb=1" if huge else "default", fmt_t(r), gbps(r),
                        peak, over))
                elif raw and raw.get("status"):
                    prow.append("| %s | %s%s | %s | %s: %s | | | |" % (
                        tool, op, " " + var if var else "", "hugetlb=1" if huge else "default",
                        "skipped" if raw["status"] > 0 else "FAILED", raw.get("note", "")[:160]))
    if prow:
        out.append("<details><summary>peers on %s</summary>\n" % state)
        out.append("| peer | operation | malloc | seconds (median, min–max) | GB/s | peak RSS MiB | RSS over start MiB |")
        out.append("|---|---|---|---|---|---|---|")
        out += prow
        out.append("\n</details>\n")


def best_peer(run, state, tool, cat):
    ts = [t for t in (peer_time(run, state, tool, cat, h) for h in (0, 1)) if t is not None]
    return min(ts) if ts else None


def targets(run, out):
    T = []

    def add(name, ok, fig):
        T.append("| %s | %s | %s |" % (name, "n/a" if ok is None else ("**met**" if ok else "**not met**"), fig))

    for st in ("medium", "large"):
        for v in ("checkpoint", "writer"):
            s, lim = run.t(st, "save", v), run.t(st, "write", "page-cache")
            if s and lim:
                add("%s save (%s) ≥ 0.8× write() limit" % (st, v), lim / s >= 0.8,
                    "%.2f× (%.3f s vs %.3f s)" % (lim / s, s, lim))
        for op, v, label in (("restore", "reader-into", "read_into"),
                             ("ckrestore/restore", "N=1-wrapped", "checkpoint restore into trainer buffers"),
                             ("ckrestore/restore", "N=1", "checkpoint restore into created variables")):
            s, lim = run.t(st, op, v), run.t(st, "read", "cached")
            if s and lim:
                add("%s restore (%s) ≥ 0.8× read() limit" % (st, label), lim / s >= 0.8,
                    "%.2f× (%.3f s vs %.3f s)" % (lim / s, s, lim))
    for st in ("medium", "large"):
        ns = sorted({int(k[2].split("=")[1].split("-")[0]) for k in run.ck
                     if k[0] == st and k[1] == "ckrestore/restore" and k[2].startswith("N=")} - {1})
        for n in ns:
            b = limit_time(run, st, "mirror", "", "N=%d" % n)
            for v, lab in (("N=%d" % n, "first after create"), ("N=%d" % n, "again, warm"),
                           ("N=%d-wrapped" % n, "trainer-owned replicas")):
                if lab == "again, warm":
                    s = run.t(st, "ckrestore/restore-warm", v)
                    if s and b:
                        add("%s restore into N=%d replicas (%s) ≤ 1.25× (read + N×memcpy)" % (st, n, lab),
                            s <= 1.25 * b, "%.2f× the bound (%.3f s vs %.3f s)" % (s / b, s, b))
                    continue
                s = run.t(st, "ckrestore/restore", v)
                if s and b:
                    add("%s restore into N=%d replicas (%s) ≤ 1.25× (read + N×memcpy)" % (st, n, lab), s <= 1.25 * b,
                        "%.2f× the bound (%.3f s vs %.3f s)" % (s / b, s, b))
    for st, need in (("medium", 3), ("large", 3), ("tiny", 10)):
        for tool in ("h5py", "torch"):
            for cat, ours_keys, lab in (
                    ("save", [("save", "checkpoint"), ("save", "writer")], "save"),
                    ("fresh", [("load", "N=1"), ("restore", "reader-fresh")], "restore: load into new variables"),
                    ("into", [("restore", "reader-into")], "restore: read_into existing buffers"),
                    ("into", [("ckrestore/restore", "N=1")], "restore: checkpoint restore into created variables")):
                ours = None
                for k in ours_keys:
                    ours = run.t(st, *k)
                    if ours:
                        break
                p = best_peer(run, st, tool, cat)
                if ours and p:
                    add("%s %s ≥ %d× faster than %s (best of default / hugetlb)" % (st, lab, need, tool),
                        p / ours >= need, "%.1f× (%.4f s vs %.4f s)" % (p / ours, ours, p))
    for st in ("medium", "large"):
        B = None
        r = run.c(st, "save", "checkpoint")
        if r:
            B = r["bytes"] / MIB
            peak, over = r["rss_peak_kb"] / 1024, (r["rss_peak_kb"] - r["rss_start_kb"]) / 1024
            add("%s save peak RSS ≤ state + 64 MiB" % st, over <= 64,
                "+%.0f MiB over the process with the state (peak %.0f MiB, state %.0f MiB)" % (over, peak, B))
        for n in [1] + sorted({int(k[2].split("=")[1].split("-")[0]) for k in run.ck
                               if k[0] == st and k[1] == "ckrestore/restore" and k[2].startswith("N=")} - {1}):
            r = run.c(st, "ckrestore/restore", "N=%d" % n)
            if r:
                B = r["bytes"] / MIB
                over = (r["rss_peak_kb"] - r["rss_start_kb"]) / 1024
                add("%s restore into N=%d: peak RSS ≤ N × state + 64 MiB" % (st, n), over <= n * B + 64,
                    "%.0f MiB over start (bound %.0f MiB)" % (over, n * B + 64))
    for st in ("medium", "large"):
        a, b = run.t(st, "restore", "reader-into"), run.t(st, "restore", "reader-into-noverify")
        crc = run.t(st, "crc32c", "1-thread")
        if a and b:
            add("%s CRC32C verification ≤ 10%% of restore time" % st, (a - b) / a <= 0.10,
                "%.1f%% measured (%.3f s vs %.3f s without); CRC alone %.1f%% of restore" % (
                    100 * (a - b) / a, a, b, 100 * crc / a if crc else float("nan")))
    for st in ("medium",):
        for sv, slab in (("checkpoint", "no fsync"), ("checkpoint-fsync", "with fsync, the library default")):
            s = run.t(st, "save", sv)
            for v, var, lab in (("async-save/blocking", "checkpoint", "arena reused"),
                                ("async-save/blocking-first", "checkpoint-reserved", "first save after reserve"),
                                ("async-save/blocking-first", "checkpoint", "first save, no reserve")):
                b = run.t(st, v, var)
                if s and b:
                    add("%s async save blocks ≤ 0.25× sync save (%s; sync save %s)" % (st, lab, slab), b / s <= 0.25,
                        "%.2f× (%.3f s vs %.3f s)" % (b / s, b, s))
    # issue 15: many tiny tensors, per tensor (in process, cached)
    for op, v, lab, need in (("save", "checkpoint", "save (ckpt_checkpoint_write)", 1.0),
                             ("ckrestore/restore", "N=1", "restore (ckpt_checkpoint_restore, first after create)", 2.0),
                             ("load", "N=1", "load (ckpt_checkpoint_load)", 2.0)):
        r = run.c("tiny", op, v)
        if r and r.get("ntensors"):
            us = r["median"] / r["ntensors"] * 1e6
            add("tiny %s ≤ %.0f µs per tensor (issue 15)" % (lab, need), us <= need,
                "%.2f µs (%.4f s for %d tensors)" % (us, r["median"], r["ntensors"]))
    out.append("| target | result | figure |")
    out.append("|---|---|---|")
    out += T
    out.append("")


def results(args):
    run = Run(load(args.ckpt), load(args.peers), load(args.peers_huge))
    meta = open(args.meta).read().strip() if args.meta else ""
    out = ["# libckpt benchmark results", ""]
    out.append("Generated by `bench/run.sh` (one run: limits, libckpt and peers measured together). "
               "Absolute times drift on this shared machine; **the ratios are the result**.")
    out.append("")
    if meta:
        out.append("```\n%s\n```\n" % meta)
    out.append("How to read: *seconds* are medians of the repetitions with min–max; *vs limit* is limit time / our "
               "time (1.00× = at the machine's limit; mirrored rows use read + N × 1-thread memcpy as the limit; "
               "async rows are our blocking time as a fraction of the synchronous save). *vs peer* is peer time / "
               "our time (>1 = we are faster), given as `default malloc / GLIBC_TUNABLES=glibc.malloc.hugetlb=1`; "
               "save rows compare with the peer's save, \"into\" rows with the peer's restore into existing arrays "
               "(h5py `read_direct`, npy `mmap`+`copyto`; torch and npz have none, so their normal load), fresh rows "
               "with the peer's normal load. *RSS over start* is the child's peak RSS minus its RSS when the operation "
               "started (save children start holding the state; restore children do not).")
    out.append("")
    out.append("## Targets of the in-process rows (issues 6 and 15)\n")
    targets(run, out)
    import os
    analysis = os.path.join(os.path.dirname(os.path.abspath(__file__)), "analysis.md")
    if os.path.exists(analysis):
        out.append(open(analysis).read().strip() + "\n")
    out.append("## Tables\n")
    for st in STATES:
        state_tables(run, st, out)
    notes = [r for r in load(args.ckpt) if r.get("status")]
    if notes:
        out.append("## Skipped or failed\n")
        for r in notes:
            out.append("- %s %s %s: %s" % (r["state"], r["op"], r["variant"], r.get("note", "")))
        out.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


def scaling(args):
    recs = []
    for p in args.scaling:
        recs += load(p)
    meta = open(args.meta).read().strip() if args.meta else ""
    out = ["# libckpt scaling (device machine)", ""]
    if meta:
        out.append("```\n%s\n```\n" % meta)
    out.append("Medians of the repetitions, GB/s of the state's bytes (in parentheses: seconds). "
               "Mirrored restore rows (`ckrestore/restore N=k`) add their time as a multiple of the bound "
               "read + N × memcpy (1 thread) measured at the same thread count (target ≤ 1.25×).\n")
    threads = sorted({r["threads"] for r in recs if "threads" in r})
    states = [s for s in STATES if any(r["state"] == s for r in recs)]
    for st in states:
        keys = []
        for r in recs:
            if r["state"] == st and r.get("status") == 0 and (r["op"], r["variant"]) not in keys:
                keys.append((r["op"], r["variant"]))
        out.append("### %s\n" % st)
        out.append("| operation | " + " | ".join("%d thr" % t for t in threads) + " |")
        out.append("|---|" + "---|" * len(threads))
        for op, v in keys:
            cells = []
            for t in threads:
                r = next((x for x in recs if x["state"] == st and x["op"] == op and x["variant"] == v
                          and x["threads"] == t and x.get("status") == 0), None)
                cell = "%.2f (%.3f s)" % (r["bytes"] / r["median"] / 1e9, r["median"]) if r and r["median"] else "n/a"
                if r and r["median"] and op.startswith("ckrestore/restore") and v.startswith("N="):
                    n = int(v.split("=")[1].split("-")[0])
                    rd = next((x["median"] for x in recs if x["state"] == st and x["op"] == "read"
                               and x["variant"] == "cached" and x["threads"] == t and x.get("status") == 0), None)
                    mc = next((x["median"] for x in recs if x["state"] == st and x["op"] == "memcpy"
                               and x["variant"] == "1-thread" and x["threads"] == t and x.get("status") == 0), None)
                    if rd and mc:
                        cell += " · %.2f× bound" % (r["median"] / (rd + n * mc))
                cells.append(cell)
            out.append("| %s %s | %s |" % (op, v, " | ".join(cells)))
        out.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt")
    ap.add_argument("--peers")
    ap.add_argument("--peers-huge")
    ap.add_argument("--meta")
    ap.add_argument("--scaling", nargs="*")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.scaling:
        scaling(args)
    else:
        results(args)


if __name__ == "__main__":
    main()

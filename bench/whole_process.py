#!/usr/bin/python3
"""What a user runs, timed from outside: whole `ckpt` processes and their
whole-process limits on the same files, warm and cold, interleaved in one
run (issue 15).

Every row is a fresh process, timed with wall clock around fork/exec/wait,
peak RSS from wait4. Per repetition the rows run one after the other, so
drift on the machine hits ours and the limit alike; medians of --reps.

Fresh memory on this VM costs what the host decides: it takes back free
memory (free page reporting, 2 s after it is freed), so a process that
allocates right after another one freed as much runs 5-10x faster than one
that allocates after a pause, and a fixed order favoured whichever row came
second. Two ways to give every row the same memory, --memory:
  settled (default): before every timed row, sync() and a 4 s pause, so
    every process starts on memory the host has taken back -- what a
    trainer that starts restoring sees;
  primed: before every timed row an untimed primer (limit_probe with the
    row's replica count; two states for `restore --save`, which also fills
    the page cache of the copy it writes) touches and frees that much memory,
    so every process reuses memory that is still backed (the method until
    2026-12-05; it hid that huge pages fault in 5x slower than 4 KiB pages on
    memory the host took back: libckpt now asks for them only with
    CKPT_HUGE_PAGES=1, and limit_probe follows the same variable).
Every other repetition runs each (ours, limit) pair limit first either way.

  warm: the input files were read through (cat > /dev/null) right before
  cold: `sync; echo 3 > /proc/sys/vm/drop_caches` right before (root only)

Limits (the fastest a process can do the same work on this machine):
  restore N copies   bench/limit_probe N FILES: a fresh process maps N
                     huge-page buffers, preads into the first, memcpys the rest
  verify             cat FILES > /dev/null (every byte read once, no memory kept)
  restore --save,    cp FILES + sync of the copies (our writes fsync by default;
  convert            so does the limit)

Peers, in the same run, on the same tensors (names, shapes, values): TF's
tf.train.Checkpoint write / restore, safetensors save_file / load_file (data
touched), torch.save / torch.load(mmap=True) (data touched). Each peer row is
a whole process too (interpreter + import included: what a user runs), and
it reports its own in-process seconds for the operation alone.

  whole_process.py --cli build-bench/ckpt --bench build-bench/bench/ckpt_bench \
     --probe build-bench/bench/limit_probe --dir /tmp/ckpt-wp --json out.json \
     --md out.md [--states medium,large] [--reps 5] [--oracle-python PY] [--torch-python PY]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20


def timed(argv, env=None, cpu=None):
    """Wall seconds, peak RSS (bytes) and status of argv in a fresh process; its CPU seconds
    (user + system, with its waited-for children: `sh -c 'cp ...'`) appended to `cpu`."""
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(os.devnull, os.O_RDWR)
            os.dup2(fd, 0)
            os.dup2(fd, 1)
            if not os.environ.get("WP_DEBUG"):
                os.dup2(fd, 2)
            if env is not None:
                os.execve(argv[0], argv, env)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    t0 = time.perf_counter()
    _, status, ru = os.wait4(pid, 0)
    t = time.perf_counter() - t0
    if cpu is not None:
        cpu.append(ru.ru_utime + ru.ru_stime)
    return t, ru.ru_maxrss * 1024, os.waitstatus_to_exitcode(status)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def read_through(paths):
    for p in paths:
        with open(p, "rb") as f:
            while f.read(8 * MIB):
                pass


def bundle_files(prefix):
    d = os.path.dirname(prefix)
    base = os.path.basename(prefix)
    return sorted(os.path.join(d, n) for n in os.listdir(d)
                  if n.startswith(base + ".data-") or n == base + ".index")


def rm(path):
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        for p in (path,) + tuple(os.path.join(os.path.dirname(path), n) for n in
                                 os.listdir(os.path.dirname(path) or ".")
                                 if n.startswith(os.path.basename(path) + ".")):
            try:
                os.remove(p)
            except OSError:
                pass


class Row:
    def __init__(self, name, argv, inputs, out=None, replicas=1, kind="ours", env=None, group=None, prime=None):
        self.name, self.argv, self.inputs, self.out = name, argv, inputs, out
        self.replicas, self.kind, self.env = replicas, kind, env
        # states' worth of fresh memory the primer touches before the row (see the top)
        self.prime = prime if prime is not None else replicas
        self.group = group or name
        self.t = {"warm": [], "cold": []}
        self.cpu = {"warm": [], "cold": []}
        self.rss = {"warm": [], "cold": []}
        self.inproc = {"warm": [], "cold": []}
        self.failed = None


def peer_inproc(argv, env):
    """Run a peer op; it prints its own in-process seconds on the last line."""
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    t = time.perf_counter() - t0
    if p.returncode != 0:
        return t, None, p.stderr.strip().splitlines()[-1:] or ["exit %d" % p.returncode]
    return t, float(p.stdout.strip().splitlines()[-1]), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--states", default="medium,large")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--oracle-python", help="venv python with tensorflow + safetensors")
    ap.add_argument("--torch-python", help="venv python with torch (PyPI)")
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--memory", choices=("settled", "primed", "raw"), default="settled",
                    help="the memory each row starts on (see the top); raw: neither pause nor primer")
    ap.add_argument("--rows", help="only these rows, comma-separated names as the table prints them "
                    "(e.g. 'restore N=1,restore --save'); default all")
    ap.add_argument("--tiny-name-based", action="store_true",
                    help="also the many-tiny row: 10,000 tensors in a name-based (TF1 Saver) bundle, warm")
    a = ap.parse_args()
    cli = os.path.abspath(a.cli)
    caches = ["warm"] if a.no_cold or os.geteuid() != 0 else ["warm", "cold"]
    records = []
    env_peer = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    for state in a.states.split(","):
        sd = os.path.join(a.dir, state)
        shutil.rmtree(sd, ignore_errors=True)
        os.makedirs(sd)
        prefix = os.path.join(sd, "ckpt")
        n, nbytes = map(int, subprocess.check_output([a.bench, "--export", state, prefix]).split())
        files = bundle_files(prefix)
        fbytes = sum(os.path.getsize(f) for f in files)
        reps = [1, 2, 4, 8] if state != "large" else [1, 2]
        rows = []
        for r in reps:
            strat = ["--strategy", "default"] if r == 1 else ["--strategy", "mirrored", "--replicas", str(r)]
            rows.append(Row("restore N=%d" % r, [cli, "restore", prefix] + strat, files, replicas=r))
            rows.append(Row("restore N=%d" % r, [a.probe, str(r)] + files, files, replicas=r, kind="limit"))
        out = os.path.join(sd, "out")
        copies = [os.path.join(sd, "cp-%d" % i) for i in range(len(files))]
        cp_limit = ["/bin/sh", "-c", " && ".join("cp %s %s" % (f, c) for f, c in zip(files, copies))
                    + " && sync " + " ".join(copies)]
        # the pair is primed with 2 states: the restored state plus the page cache of the copy written
        # (cp needs only the second; priming both rows alike with the larger need keeps the pair fair)
        rows.append(Row("restore --save", [cli, "restore", prefix, "--strategy", "default", "--save", out],
                        files, out=out, prime=2))
        rows.append(Row("restore --save", cp_limit, files, out=copies, kind="limit", prime=2))
        rows.append(Row("verify", [cli, "verify", prefix], files))
        rows.append(Row("verify", ["/bin/sh", "-c", "cat %s > /dev/null" % " ".join(files)], files, kind="limit"))
        for to, ext in (("tf", ""), ("keras-weights", ".weights.h5"), ("safetensors", ".safetensors"),
                        ("gguf", ".gguf")):
            o = os.path.join(sd, "conv-" + to + ext)
            rows.append(Row("convert --to " + to, [cli, "convert", prefix, o, "--to", to], files, out=o))
            rows.append(Row("convert --to " + to, cp_limit, files, out=copies, kind="limit"))
        if a.rows:
            keep = set(x.strip() for x in a.rows.split(","))
            rows = [r for r in rows if r.name in keep]
        # peers: their files are written once, untimed, from the same tensors
        peer_rows = []
        if a.oracle_python or a.torch_python:
            peer = os.path.join(HERE, "peer_ops.py")
            spec = os.path.join(sd, "spec.json")
            subprocess.check_call([cli, "inspect", "--json", prefix], stdout=open(spec, "w"))
            for py, ops in ((a.oracle_python, ("tf", "safetensors")), (a.torch_python, ("torch",))):
                if not py:
                    continue
                for tool in ops:
                    pf = os.path.join(sd, "peer-" + tool)
                    prep = subprocess.run([py, peer, "prepare", tool, spec, pf], capture_output=True, text=True,
                                          env=env_peer)
                    if prep.returncode != 0:
                        print("whole_process: %s prepare failed: %s" % (tool, prep.stderr[-500:]), file=sys.stderr)
                        continue
                    pfiles = json.loads(prep.stdout.strip().splitlines()[-1])
                    peer_rows.append(Row("restore N=1", [py, peer, "load", tool, spec, pf], pfiles,
                                         kind="peer " + tool, env=env_peer))
                    peer_rows.append(Row("save", [py, peer, "save", tool, spec, pf + "-save"], [spec],
                                         out=pf + "-save", kind="peer " + tool, env=env_peer))
        def primer(row):
            # the same amount of fresh memory touched and freed just before (see the top)
            if a.memory == "primed":
                timed([a.probe, str(row.prime)] + files)

        def settle():
            # every process starts on memory the host has taken back (see the top)
            if a.memory == "settled":
                os.sync()
                time.sleep(4)

        for cache in caches:
            for rep in range(a.reps):
                order = list(rows)
                if rep % 2:
                    # every other repetition each (ours, limit) pair runs limit first
                    order = [r for i in range(0, len(rows), 2) for r in (rows[i + 1], rows[i])]
                for row in order + peer_rows:
                    if row.failed:
                        continue
                    if row.out:
                        for o in (row.out if isinstance(row.out, list) else [row.out]):
                            rm(o)
                    primer(row)
                    if cache == "cold":
                        drop_caches()
                    else:
                        read_through(row.inputs)
                    settle()
                    if row.kind.startswith("peer"):
                        t, inproc, why = peer_inproc(row.argv, row.env)
                        if why:
                            row.failed = " ".join(why)
                            continue
                        row.t[cache].append(t)
                        row.inproc[cache].append(inproc)
                        continue
                    cpu = []
                    t, rss, st = timed(row.argv, row.env, cpu)
                    if st != 0:
                        row.failed = "exit %d" % st
                        continue
                    row.t[cache].append(t)
                    row.cpu[cache].extend(cpu)
                    row.rss[cache].append(rss)
                print("# %s %s rep %d done" % (state, cache, rep + 1), file=sys.stderr)
        for row in rows + peer_rows:
            rec = {"state": state, "tensors": n, "bytes": nbytes, "file_bytes": fbytes, "row": row.name,
                   "kind": row.kind, "replicas": row.replicas, "failed": row.failed}
            for cache in caches:
                ts = row.t[cache]
                rec[cache] = {"median": statistics.median(ts) if ts else None,
                              "cpu_median": statistics.median(row.cpu[cache]) if row.cpu[cache] else None,
                              "min": min(ts) if ts else None, "max": max(ts) if ts else None,
                              "rss_max": max(row.rss[cache]) if row.rss[cache] else None,
                              "inproc_median": statistics.median(row.inproc[cache]) if row.inproc[cache] else None}
            records.append(rec)
        shutil.rmtree(sd, ignore_errors=True)
        # after every state: a run stopped later keeps what it measured
        with open(a.json, "w") as f:
            json.dump({"caches": caches, "reps": a.reps, "records": records}, f, indent=1)
        write_md(records, caches, a)
    tiny = tiny_name_based(a, cli) if a.tiny_name_based else None
    with open(a.json, "w") as f:
        json.dump({"caches": caches, "reps": a.reps, "records": records, "tiny_name_based": tiny}, f, indent=1)
    write_md(records, caches, a, tiny)


def tiny_name_based(a, cli):
    """Many tiny tensors (issue 26): `ckpt restore --json` of a 10,000-tensor name-based bundle,
    per tensor by the command's own clock (the load alone) and by the whole process's CPU time."""
    sd = os.path.join(a.dir, "tiny-name-based")
    shutil.rmtree(sd, ignore_errors=True)
    os.makedirs(sd)
    forms = {}
    for form, flag in (("name-based", "--export-name-based"), ("object graph", "--export")):
        prefix = os.path.join(sd, form.replace(" ", "-"))
        n = int(subprocess.check_output([a.bench, flag, "tiny", prefix]).split()[0])
        forms[form] = (prefix, bundle_files(prefix), [], [])
    for _ in range(max(a.reps, 9)):
        for form, (prefix, files, own, cpu) in forms.items():  # interleaved
            read_through(files)
            t0 = os.times()
            out = subprocess.run([cli, "restore", prefix, "--strategy", "default", "--json"], capture_output=True,
                                 text=True, check=True).stdout
            t1 = os.times()
            own.append(json.loads(out)["seconds"])
            cpu.append((t1.children_user - t0.children_user) + (t1.children_system - t0.children_system))
    shutil.rmtree(sd, ignore_errors=True)
    print("# tiny name-based done", file=sys.stderr)
    return {"tensors": n, "reps": max(a.reps, 9), "forms": {
        form: {"own_median": statistics.median(own), "own_min": min(own), "own_max": max(own),
               "cpu_median": statistics.median(cpu)} for form, (_, _, own, cpu) in forms.items()}}


def write_md(records, caches, a, tiny=None):
    out = ["## Whole process (fresh `ckpt` processes, timed from outside)", "",
           "Command: `bash bench/run.sh` (or `python3 bench/whole_process.py ...`); medians of %d, "
           "min–max in brackets; warm = inputs read through just before, cold = page cache dropped just "
           "before. Ratio = libckpt / limit of the same work, of the medians (target ≤ 1.25×, bold when "
           "met); (min …) = the ratio of the fastest runs. Peak RSS target for restore: N × state + "
           "64 MiB. Memory: %s (see whole_process.py: %s)." % (a.reps, a.memory, {
               "settled": "every row starts 4 s after a sync(), on memory the VM's host has taken back",
               "primed": "every row starts right after an untimed process touched and freed as much memory",
               "raw": "neither"}[a.memory]), ""]
    states = []
    for r in records:
        if r["state"] not in states:
            states.append(r["state"])
    for st in states:
        recs = [r for r in records if r["state"] == st]
        b = recs[0]["bytes"]
        out.append("### %s state (%d tensors, %.0f MB)" % (st, recs[0]["tensors"], b / 1e6))
        out.append("")
        hdr = "| row |"
        for c in caches:
            hdr += " %s libckpt | %s limit | %s ratio |" % (c, c, c)
        out.append(hdr + " peak RSS (vs target) |")
        out.append("|---|" + "---|---|---|" * len(caches) + "---|")
        names = []
        for r in recs:
            if r["kind"] in ("ours",) and r["row"] not in names:
                names.append(r["row"])
        for name in names:
            ours = next(r for r in recs if r["row"] == name and r["kind"] == "ours")
            lim = next((r for r in recs if r["row"] == name and r["kind"] == "limit"), None)
            line = "| `%s` |" % name
            if ours["failed"]:
                out.append(line + " n/a: %s |" % ours["failed"] + " |" * (3 * len(caches)))
                continue
            for c in caches:
                o, l = ours[c], lim[c] if lim else None
                ratio = o["median"] / l["median"] if l and l["median"] and o["median"] else None
                # minimum over minimum: the least disturbed run of each side (fresh-memory stalls
                # on this VM only ever add time), shown beside the median ratio the target uses
                rmin = o["min"] / l["min"] if l and l["min"] and o["min"] else None
                line += " %.3f s [%.3f–%.3f] | %s | %s%s |" % (
                    o["median"], o["min"], o["max"], "%.3f s" % l["median"] if l and l["median"] else "n/a",
                    ("**%.2f×**" if ratio and ratio <= 1.25 else "%.2f×") % ratio if ratio else "n/a",
                    " (min %.2f×)" % rmin if rmin else "")
            rss = max((ours[c]["rss_max"] or 0) for c in caches)
            if name.startswith("restore N="):
                target = ours["replicas"] * b + 64 * MIB
                line += " %.0f MiB (%s %.0f MiB) |" % (rss / MIB, "≤" if rss <= target else ">", target / MIB)
            else:
                line += " %.0f MiB |" % (rss / MIB)
            out.append(line)
        # the targets of issue 15, counted: each row at ≤ 1.25× its limit (medians), restore RSS within N × state + 64 MiB
        out.append("")
        for c in caches:
            met, miss = [], []
            for name in names:
                ours = next(r for r in recs if r["row"] == name and r["kind"] == "ours")
                lim = next((r for r in recs if r["row"] == name and r["kind"] == "limit"), None)
                if ours["failed"] or not lim or not lim[c]["median"] or not ours[c]["median"]:
                    miss.append("%s (n/a)" % name)
                    continue
                q = ours[c]["median"] / lim[c]["median"]
                (met if q <= 1.25 else miss).append("%s %.2f×" % (name, q))
            out.append("Target ≤ 1.25×, %s: met by %d of %d rows%s." % (
                c, len(met), len(met) + len(miss), "; not met: " + ", ".join(miss) if miss else ""))
        over = [r["row"] for r in recs if r["kind"] == "ours" and r["row"].startswith("restore N=") and
                max((r[c]["rss_max"] or 0) for c in caches) > r["replicas"] * b + 64 * MIB]
        out.append("Peak RSS ≤ N × state + 64 MiB: %s." % ("met by every restore row" if not over else
                                                          "not met by " + ", ".join(over)))
        # CPU time (user + system) of the same runs: on a busy machine wall clock swings with other
        # work, CPU time much less; not the target, a second view of the same pairs
        if any(r.get(c, {}).get("cpu_median") for r in recs for c in caches):
            out += ["", "CPU time of the same runs (user + system, medians; ratio = libckpt / limit):", "",
                    "| row |" + "".join(" %s libckpt CPU | %s limit CPU | %s CPU ratio |" % (c, c, c) for c in caches),
                    "|---|" + "---|---|---|" * len(caches)]
            for name in names:
                ours = next(r for r in recs if r["row"] == name and r["kind"] == "ours")
                lim = next((r for r in recs if r["row"] == name and r["kind"] == "limit"), None)
                line = "| `%s` |" % name
                for c in caches:
                    oc = ours[c].get("cpu_median") if not ours["failed"] else None
                    lc = lim[c].get("cpu_median") if lim else None
                    line += " %s | %s | %s |" % ("%.3f s" % oc if oc else "n/a", "%.3f s" % lc if lc else "n/a",
                                                 "%.2f×" % (oc / lc) if oc and lc else "n/a")
                out.append(line)
        peers = [r for r in recs if r["kind"].startswith("peer")]
        if peers:
            out.append("")
            out.append("Peers on the same tensors (whole process: interpreter and import included; "
                       "in-process: the operation alone, as the peer reports it):")
            out.append("")
            out.append("| peer | op |" + "".join(" %s whole | %s in-process |" % (c, c) for c in caches)
                       + " libckpt whole (warm) |")
            out.append("|---|---|" + "---|---|" * len(caches) + "---|")
            for p in peers:
                if p["failed"]:
                    out.append("| %s | %s | n/a: %s |" % (p["kind"][5:], p["row"], p["failed"]))
                    continue
                line = "| %s | %s |" % (p["kind"][5:], p["row"])
                for c in caches:
                    line += " %.3f s | %.3f s |" % (p[c]["median"], p[c]["inproc_median"])
                # saves start from data the peer generated in-process: only its in-process
                # figure compares (with ckpt_bench's save rows above), so no libckpt cell
                ours = next((r for r in recs if r["kind"] == "ours" and r["row"] == "restore N=1"), None) \
                    if p["row"].startswith("restore") else None
                line += " %s |" % ("%.3f s" % ours["warm"]["median"] if ours and ours["warm"]["median"] else "n/a")
                out.append(line)
        out.append("")
    if tiny:
        out += ["### many tiny tensors: name-based (TF1 `Saver`) and object-graph bundles", "",
                "`ckpt restore PREFIX --strategy default --json` of %d tensors of 16 floats, warm, the two forms "
                "interleaved, medians of %d; *own clock* is the `seconds` the command reports (the load alone, "
                "what issue 26's ≤ 2 µs per tensor is about), *process CPU* the whole process's user + system "
                "time." % (tiny["tensors"], tiny["reps"]), "",
                "| bundle | own clock | per tensor | target | process CPU |", "|---|---|---|---|---|"]
        for form, f in tiny["forms"].items():
            per = f["own_median"] / tiny["tensors"] * 1e6
            out.append("| %s | %.4f s [%.4f–%.4f] | %.2f µs | ≤ 2 µs: %s | %.3f s |" % (
                form, f["own_median"], f["own_min"], f["own_max"], per, "**met**" if per <= 2 else "not met",
                f["cpu_median"]))
        out.append("")
    with open(a.md, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Multi-worker save / restore and the ordered all-reduce against the worker
# count: mpirun -np W build/bench/mpi_bench for W in $CKPT_MPI_WORKERS
# (default "1 2" — on the 16-core device: CKPT_MPI_WORKERS="1 2 4 8 16").
# Builds Release in build-bench-mpi, writes bench/out/mpi/mpi.jsonl and
# bench/MPI_RESULTS.md (ratios to 1 worker and to the write()/read() limits,
# all from this one run). One rep of each figure is a quick run; raise
# CKPT_MPI_REPS for medians; CKPT_MPI_BENCH_TRACE=1 prints every restore (stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${CKPT_MPI_BUILD:-build-bench-mpi}
DIR=${CKPT_BENCH_DIR:-/tmp/ckpt-mpi-bench}
WORKERS=${CKPT_MPI_WORKERS:-1 2}
REPS=${CKPT_MPI_REPS:-3}
STATES=${CKPT_MPI_STATES:-medium,large}
FLOATS=${CKPT_MPI_REDUCE_FLOATS:-4194304}
OUTD=bench/out/mpi
mkdir -p "$OUTD" "$DIR"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCKPT_BUILD_TESTS=OFF -DCKPT_BUILD_SAMPLES=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target mpi_bench >/dev/null
: > "$OUTD/mpi.jsonl"
for w in $WORKERS; do
  echo "== $w worker(s) ==" >&2
  mpirun --allow-run-as-root --oversubscribe -np "$w" "$BUILD/bench/mpi_bench" --dir "$DIR" --states "$STATES" \
    --reps "$REPS" --reduce-floats "$FLOATS" | tee -a "$OUTD/mpi.jsonl"
done
rm -rf "$DIR"
python3 - "$OUTD/mpi.jsonl" > bench/MPI_RESULTS.md <<'PY'
import json, sys, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("# Multi-worker benchmark (bench/mpi_scaling.sh)\n")
print("Machine: %d cores (`nproc`), shared with other jobs while this ran: figures are indicative. "
      "Save: `ckpt_checkpoint_write` with fsync, each worker writing its shard; restore: "
      "`ckpt_checkpoint_restore`, page cache warm (just written) and cold (the files dropped with "
      "posix_fadvise DONTNEED). Limits: each worker `write()`+`fsync()` of its share "
      "(save), each worker `read()` of the whole state (restore: every mirrored value is needed everywhere). "
      "All times in-process, from a barrier to the last worker's finish, medians of the reps.\n" % os.cpu_count())
st = [r for r in rows if "state" in r]
for name in sorted({r["state"] for r in st}, key=["medium", "large"].index):
    rs = sorted((r for r in st if r["state"] == name), key=lambda r: r["workers"])
    base = rs[0]
    print("## %s state (%d tensors, %.0f MB)\n" % (name, base["tensors"], base["bytes"] / 1e6))
    print("| workers | save s | vs 1 worker | write() limit s | save / limit |")
    print("|---:|---:|---:|---:|---:|")
    for r in rs:
        print("| %d | %.3f | %.2fx | %.3f | %.2f |" % (
            r["workers"], r["save_s"], base["save_s"] / r["save_s"], r["write_s"], r["save_s"] / r["write_s"]))
    print()
    print("Restore, both ways of reading (`all`: every worker reads every value; `split`: each reads 1/W, "
          "the parts broadcast); limit: each worker `read()`s the whole state.\n")
    print("| workers | cache | all s | split s | split / all | all vs 1 worker | read() limit s | all / limit | split / limit |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rs:
        for c in ("warm", "cold"):
            a, sp = r["restore_all_%s_s" % c], r["restore_split_%s_s" % c]
            lim = r["read_s"] if c == "warm" else r["read_cold_s"]
            print("| %d | %s | %.3f | %.3f | %.2f | %.2fx | %.3f | %.2f | %.2f |" % (
                r["workers"], c, a, sp, sp / a, base["restore_all_%s_s" % c] / a, lim, a / lim, sp / lim))
    print()
ar = sorted((r for r in rows if r.get("op") == "all_reduce"), key=lambda r: r["workers"])
if ar:
    print("## Ordered all-reduce vs MPI_Allreduce (%d floats per worker, 1 local replica)\n" % ar[0]["floats"])
    print("| workers | ordered s | MPI_Allreduce s | ordered / MPI |")
    print("|---:|---:|---:|---:|")
    for r in ar:
        print("| %d | %.5f | %.5f | %.1f |" % (r["workers"], r["ordered_s"], r["mpi_allreduce_s"],
                                            r["ordered_s"] / max(r["mpi_allreduce_s"], 1e-9)))
PY
cat bench/MPI_RESULTS.md

#!/usr/bin/env bash
# The benchmark in one command: builds libckpt + ckpt_bench in Release (when
# needed), runs the machine's limits, libckpt and the peers (h5py, torch,
# numpy) in one run, and writes bench/RESULTS.md. Raw JSON: bench/out/.
#
#   bash bench/run.sh                  # full run, ~15 min on a 2-core VM
#   CKPT_BENCH_STATES=small,tiny bash bench/run.sh   # a quick subset
#
# Environment: CKPT_BENCH_BUILD (build dir, default build-bench),
# CKPT_BENCH_DIR (scratch dir for bench files, default /tmp/ckpt-bench,
# removed after), CKPT_BENCH_REPS (default 5, minimum 5 for RESULTS.md),
# CKPT_BENCH_STATES, CKPT_BENCH_OPS (ckpt_bench --ops), CKPT_BENCH_PEERS,
# CKPT_BENCH_WHOLE_STATES (whole-process rows, default medium,large),
# CKPT_ORACLE_PYTHON / CKPT_BENCH_TORCH_PYTHON (venvs with TensorFlow +
# safetensors / torch: scripts/install-bench-deps.sh prints both).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${CKPT_BENCH_BUILD:-build-bench}
DIR=${CKPT_BENCH_DIR:-/tmp/ckpt-bench}
REPS=${CKPT_BENCH_REPS:-5}
STATES=${CKPT_BENCH_STATES:-small,medium,large,tiny}
OPS=${CKPT_BENCH_OPS:-limits,fsync,save,async,keras,restore,fresh,load,mirrored}
PEERS=${CKPT_BENCH_PEERS:-h5py,torch,npy,npz}
PY=/usr/bin/python3
OUT=bench/out
mkdir -p "$OUT"

# ---- peers' Python packages (Debian; see scripts/install-bench-deps.sh) ----
if ! $PY -c 'import numpy, h5py' 2>/dev/null; then
  echo "run.sh: $PY lacks numpy/h5py: run 'sudo bash scripts/install-bench-deps.sh'" >&2
  exit 1
fi
$PY -c 'import torch' 2>/dev/null || echo "run.sh: python3-torch missing: torch is reported as skipped (scripts/install-bench-deps.sh installs it)" >&2

# ---- build (Release) ----
if [ ! -f "$BUILD/CMakeCache.txt" ] || ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$BUILD/CMakeCache.txt"; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCKPT_BUILD_TESTS=OFF -DCKPT_BUILD_SAMPLES=OFF \
    -DCKPT_BUILD_BENCH=ON >/dev/null
fi
cmake --build "$BUILD" -j"$(nproc)" --target ckpt_bench limit_probe ckpt-cli cold_read >/dev/null
BIN="$BUILD/bench/ckpt_bench"

# ---- what this run ran on ----
{
  echo "date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit:   $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "machine:  $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(free -g | awk '/Mem:/{print $2}') GiB RAM, kernel $(uname -r)"
  echo "THP:      $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
  echo "scratch:  $DIR on $(df -T "$(dirname "$DIR")" | awk 'NR==2{print $2}') (page-cache I/O; files read through before each restore)"
  echo "reps:     $REPS per figure (every state, large included)"
  echo "python:   $($PY -c 'import sys, numpy, h5py; print(sys.version.split()[0], "numpy", numpy.__version__, "h5py", h5py.version.version)') torch $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null || echo missing)"
  echo "command:  bash bench/run.sh"
  echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) at start (other work on the machine distorts every figure)"
} > "$OUT/meta.txt"
cat "$OUT/meta.txt" >&2

start=$(date +%s)
"$BIN" --dir "$DIR" --json "$OUT/ckpt.json" --states "$STATES" --ops "$OPS" --reps "$REPS" --large-reps "$REPS" \
  2>&1 | tee "$OUT/ckpt.log" >&2
$PY bench/peers.py --dir "$DIR" --json "$OUT/peers.json" --states "$STATES" --peers "$PEERS" --reps "$REPS" \
  --large-reps "$REPS" 2>&1 | tee "$OUT/peers.log" >&2
GLIBC_TUNABLES=glibc.malloc.hugetlb=1 $PY bench/peers.py --dir "$DIR" --json "$OUT/peers-huge.json" \
  --states "$STATES" --peers "$PEERS" --reps "$REPS" --large-reps "$REPS" 2>&1 | tee "$OUT/peers-huge.log" >&2
echo "run:      $(( $(date +%s) - start )) s for the measurements; load $(cut -d' ' -f1-3 /proc/loadavg) at the end" >> "$OUT/meta.txt"
# whole processes (issue 15): the ckpt tool and its limits, warm and cold, and the PyPI peers
# (TensorFlow and safetensors from the test oracles' venv, torch from the benchmark's own venv)
WP_STATES=${CKPT_BENCH_WHOLE_STATES:-medium,large}
WP_PEERS=()
[ -x "${CKPT_ORACLE_PYTHON:-}" ] && WP_PEERS+=(--oracle-python "$CKPT_ORACLE_PYTHON")
[ -x "${CKPT_BENCH_TORCH_PYTHON:-}" ] && WP_PEERS+=(--torch-python "$CKPT_BENCH_TORCH_PYTHON")
$PY bench/whole_process.py --cli "$BUILD/ckpt" --bench "$BIN" --probe "$BUILD/bench/limit_probe" \
  --dir "$DIR/whole" --states "$WP_STATES" --reps "$REPS" --json "$OUT/whole.json" --md "$OUT/whole.md" \
  "${WP_PEERS[@]}" 2>&1 | tee "$OUT/whole.log" >&2
# a trainer restarting on a cold cache (issue 15): the library's cold load next to the best
# cold read of this machine (one stream, threads, O_DIRECT, io_uring) on the medium state
COLD="$DIR/cold"
mkdir -p "$COLD"
"$BIN" --export medium "$COLD/medium" >/dev/null
"$BUILD/bench/cold_read" --reps "$REPS" --replicas 4 "$COLD/medium" 2>&1 | tee "$OUT/cold_read.md" >&2
rm -rf "$COLD"
$PY bench/report.py --ckpt "$OUT/ckpt.json" --peers "$OUT/peers.json" --peers-huge "$OUT/peers-huge.json" \
  --meta "$OUT/meta.txt" --out bench/RESULTS.md
cat "$OUT/whole.md" >> bench/RESULTS.md
{ echo; echo "## Cold load vs the best cold read (\`bench/cold_read\`, medium state, 4 replicas on $(nproc) cores)"; echo
  cat "$OUT/cold_read.md"
  # what limits the whole-process and cold rows, and what was tried (kept by hand)
  [ -f bench/analysis_whole.md ] && { echo; cat bench/analysis_whole.md; }; } >> bench/RESULTS.md
echo "run.sh: wrote bench/RESULTS.md ($(( $(date +%s) - start )) s)" >&2

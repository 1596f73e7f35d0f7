#!/usr/bin/env bash
# Scaling on a many-core machine (the 16-core device): threads 1, 2, 4, 8, 16
# and mirrored restore into 2..8 replicas, on the medium state (340 MB).
# Builds ckpt_bench from source (Release) and writes bench/SCALING.md; raw JSON
# and logs go to bench/out/scaling/ (and to $OUT when set, for the device tool).
# Runs in about 3-5 minutes.
#
#   bash bench/scaling.sh
#
# Needs (Debian 12): cmake, gcc, pkg-config, libprotobuf-c-dev, protobuf-c-compiler,
# libsnappy-dev, libisal-dev, libjansson-dev, zlib1g-dev (HDF5 and libarchive are
# not needed: the Keras backends are left out of this build). python3 (standard
# library only) writes the markdown; without it the JSON is still written.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${CKPT_SCALING_BUILD:-build-scaling}
DIR=${CKPT_BENCH_DIR:-/tmp/ckpt-bench}
THREADS=${CKPT_SCALING_THREADS:-1 2 4 8 16}
REPLICAS=${CKPT_SCALING_REPLICAS:-2,3,4,5,6,7,8}
REPS=${CKPT_SCALING_REPS:-5}
STATES=${CKPT_SCALING_STATES:-medium}
RES=bench/out/scaling
mkdir -p "$RES"

# ---- dependencies: say exactly what is missing ----
missing=()
for t in cmake cc pkg-config protoc-c; do command -v "$t" >/dev/null 2>&1 || missing+=("program $t"); done
if command -v pkg-config >/dev/null 2>&1; then
  for m in libprotobuf-c snappy libisal jansson zlib; do pkg-config --exists "$m" 2>/dev/null || missing+=("pkg-config module $m"); done
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "scaling.sh: cannot build here; missing:" >&2
  for m in "${missing[@]}"; do echo "  - $m" >&2; done
  echo "scaling.sh: install (Debian 12): apt-get install cmake gcc pkg-config libprotobuf-c-dev protobuf-c-compiler libsnappy-dev libisal-dev libjansson-dev zlib1g-dev" >&2
  if [ -x "${CKPT_BENCH_BIN:-}" ]; then
    echo "scaling.sh: using the prebuilt CKPT_BENCH_BIN=$CKPT_BENCH_BIN instead" >&2
  else
    exit 1
  fi
fi

# ---- build ----
BIN=${CKPT_BENCH_BIN:-}
if [ -z "$BIN" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCKPT_BUILD_TESTS=OFF -DCKPT_BUILD_SAMPLES=OFF \
    -DCKPT_BUILD_BENCH=ON -DCKPT_WITH_HDF5=OFF -DCKPT_WITH_LIBARCHIVE=OFF > "$RES/cmake.log" 2>&1 \
    || { echo "scaling.sh: cmake configure failed:" >&2; tail -20 "$RES/cmake.log" >&2; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target ckpt_bench > "$RES/build.log" 2>&1 \
    || { echo "scaling.sh: build failed:" >&2; tail -30 "$RES/build.log" >&2; exit 1; }
  BIN="$BUILD/bench/ckpt_bench"
fi

{
  echo "date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit:   $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "machine:  $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(free -g | awk '/Mem:/{print $2}') GiB RAM, kernel $(uname -r)"
  echo "THP:      $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
  echo "scratch:  $DIR ($(df -T "$(dirname "$DIR")" 2>/dev/null | awk 'NR==2{print $2}'))"
  echo "states:   $STATES; threads $THREADS; replicas $REPLICAS; $REPS reps per figure"
  echo "command:  bash bench/scaling.sh"
} > "$RES/meta.txt"
cat "$RES/meta.txt" >&2

start=$(date +%s)
files=()
for t in $THREADS; do
  echo "== threads $t ==" >&2
  # OMP_NUM_THREADS also caps the library's own parallel regions
  OMP_NUM_THREADS=$t "$BIN" --dir "$DIR" --states "$STATES" --threads "$t" --reps "$REPS" --large-reps "$REPS" \
    --replicas "$REPLICAS" --ops limits,save,async,restore,mirrored --json "$RES/t$t.json" 2>&1 | tee "$RES/t$t.log" >&2
  files+=("$RES/t$t.json")
done
echo "run:      $(( $(date +%s) - start )) s" >> "$RES/meta.txt"

if command -v python3 >/dev/null 2>&1; then
  python3 bench/report.py --scaling "${files[@]}" --meta "$RES/meta.txt" --out bench/SCALING.md \
    && echo "scaling.sh: wrote bench/SCALING.md" >&2
else
  echo "scaling.sh: no python3: raw JSON in $RES/ (run bench/report.py --scaling on it elsewhere)" >&2
fi
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
  cp -r "$RES" "$OUT/" 2>/dev/null
  cp bench/SCALING.md "$OUT/" 2>/dev/null
fi
exit 0

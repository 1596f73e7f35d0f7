#!/usr/bin/env bash
# The whole-process table alone (issues 15 and 26), in one command: fresh
# `ckpt` processes against their limits on the medium and large states, warm
# and cold (cold needs root: it drops the page cache), interleaved, medians of
# 5, plus the many-tiny name-based row. Rewrites the "## Whole process"
# section of bench/RESULTS.md in place; raw JSON and the log in bench/out/.
# By default the rows issue 26 names (restore N=1 and N=4, restore --save,
# convert --to tf); peers are left out (bench/run.sh runs them). Timed on a
# loaded machine (load ~13 on 2 CPUs): 6.3 min for the medium state alone,
# 13 min for two large rows at 3 repetitions; a quiet machine is several
# times faster (the rows themselves were 5-20x faster on 2026-12-03).
#
#   bash bench/whole.sh
#
# Environment: CKPT_BENCH_BUILD (default build-bench), CKPT_BENCH_DIR
# (scratch, default /tmp/ckpt-bench), CKPT_BENCH_REPS (default 5),
# CKPT_BENCH_WHOLE_STATES (default medium,large), CKPT_BENCH_WHOLE_ROWS (the
# rows by name, comma-separated; 'all' for every row).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${CKPT_BENCH_BUILD:-build-bench}
DIR=${CKPT_BENCH_DIR:-/tmp/ckpt-bench}
REPS=${CKPT_BENCH_REPS:-5}
STATES=${CKPT_BENCH_WHOLE_STATES:-medium,large}
ROWS=${CKPT_BENCH_WHOLE_ROWS:-restore N=1,restore N=4,restore --save,convert --to tf}
[ "$ROWS" = all ] && ROWS=
OUT=bench/out
mkdir -p "$OUT"
if [ ! -f "$BUILD/CMakeCache.txt" ] || ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$BUILD/CMakeCache.txt"; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCKPT_BUILD_TESTS=OFF -DCKPT_BUILD_SAMPLES=OFF \
    -DCKPT_BUILD_BENCH=ON >/dev/null
fi
cmake --build "$BUILD" -j"$(nproc)" --target ckpt_bench limit_probe ckpt-cli >/dev/null
start=$(date +%s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
/usr/bin/python3 bench/whole_process.py --cli "$BUILD/ckpt" --bench "$BUILD/bench/ckpt_bench" \
  --probe "$BUILD/bench/limit_probe" --dir "$DIR/whole" --states "$STATES" --reps "$REPS" --tiny-name-based \
  ${ROWS:+--rows "$ROWS"} \
  --json "$OUT/whole.json" --md "$OUT/whole.md" 2>&1 | tee "$OUT/whole.log" >&2
{
  echo
  echo "Run: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ uncommitted changes)'), \`CKPT_BENCH_WHOLE_STATES=$STATES CKPT_BENCH_WHOLE_ROWS='${ROWS:-all}' CKPT_BENCH_REPS=$REPS bash bench/whole.sh\`, $(( $(date +%s) - start )) s; load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end on $(nproc) CPUs (other work on the machine distorts every figure)."
} >> "$OUT/whole.md"
# replace the section in RESULTS.md: from its heading to the next top-level heading
/usr/bin/python3 - "$OUT/whole.md" bench/RESULTS.md <<'EOF'
import sys
new, path = open(sys.argv[1]).read(), sys.argv[2]
text = open(path).read()
head = "## Whole process"
a = text.find(head)
if a < 0:
    text = text.rstrip("\n") + "\n\n" + new
else:
    b = text.find("\n## ", a + len(head))
    text = text[:a] + new.rstrip("\n") + "\n" + (text[b:] if b >= 0 else "")
open(path, "w").write(text)
EOF
echo "whole.sh: rewrote the whole-process section of bench/RESULTS.md ($(( $(date +%s) - start )) s)" >&2

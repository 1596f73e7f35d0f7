#!/usr/bin/env bash
# Fuzz one target for SECONDS of wall time with one process (shared machine),
# restarting after a crash, and print: target, total execs, final cov/ft, crashes.
#   tests/fuzz/run_fuzz.sh BUILD_DIR TARGET SECONDS [WORKDIR [EXECS]]
# With EXECS, it stops as soon as the executions summed over restarts reach
# EXECS (the 10 M goal of issue 12: SECONDS is then only the upper bound).
# New corpus entries go to WORKDIR/corpus; crash inputs to WORKDIR/artifacts.
# Minimize into the committed corpus afterwards:
#   fuzz_T -merge=1 tests/fuzz/corpora/T WORKDIR/corpus
set -u
build=$(cd "$1" && pwd) t=$2 secs=$3  # absolute: the fuzzer runs inside WORKDIR
src=$(cd "$(dirname "$0")" && pwd)
work=${4:-/tmp/ckpt-fuzz/$t}
goal=${5:-0}
bin=$build/tests/fuzz/fuzz_$t
mkdir -p "$work/corpus" "$work/artifacts"
# Keras: libhdf5 itself requests absurd sizes and leaks on corrupt files (counted
# once, kept under regressions/); the library's own blocks are checked by the
# allocator hook in fuzz_entries.c instead of libFuzzer's malloc limit.
case $t in
  keras_h5|keras_archive) maxlen=262144 malloc=1000000 ;;
  keras_h5_mutants) maxlen=1300 malloc=1000000 ;;
  keras_config) maxlen=65536 malloc=1000000 ;;
  saved_model) maxlen=262144 malloc=1024 ;;  # the Keras fixture's saved_model.pb is 126 KB
  *) maxlen=65536 malloc=1024 ;;
esac
export ASAN_OPTIONS=allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}
export LSAN_OPTIONS=suppressions=$src/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}
start=$(date +%s) execs=0 runs=0 cov=0 ft=0
while :; do
  left=$(( secs - ($(date +%s) - start) ))
  [ "$left" -ge 5 ] && [ "$runs" -lt 30 ] || break
  [ "$goal" -eq 0 ] || [ "$execs" -lt "$goal" ] || break
  runs=$((runs + 1))
  limit=
  [ "$goal" -eq 0 ] || limit=-runs=$((goal - execs))
  (cd "$work" && nice -n 10 "$bin" -workers=1 -jobs=1 -max_total_time="$left" $limit -max_len=$maxlen \
    -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=$malloc -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" "$src/corpora/$t" >/dev/null 2>&1)
  log=$work/fuzz-0.log
  cp "$log" "$work/run-$runs.log"
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  n=$(echo "$last" | sed -E 's/^#([0-9]+).*/\1/')
  execs=$((execs + ${n:-0}))
  c=$(echo "$last" | sed -nE 's/.*cov: ([0-9]+).*/\1/p'); [ -n "$c" ] && cov=$c
  f=$(echo "$last" | sed -nE 's/.*ft: ([0-9]+).*/\1/p'); [ -n "$f" ] && ft=$f
done
crashes=$(ls "$work/artifacts" | wc -l)
echo "$t execs=$execs cov=$cov ft=$ft crashes=$crashes runs=$runs seconds=$(( $(date +%s) - start ))"

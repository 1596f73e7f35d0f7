#!/bin/bash
# One short, complete GPU run for issue 23 (one H200, no network, none of
# this project's Debian libraries): everything it runs was built elsewhere
# and packed by bench/gpu_bundle.sh into BUNDLE (default build/gpu_bundle).
#
#  1. the provider conformance suite and the CUDA checks over the real CUDA
#     provider (cuda_provider_check), then again under
#     compute-sanitizer --tool memcheck --leak-check full;
#  2. a MIB-MiB state (default 2048): the limits measured here (warm file read,
#     pinned H2D with cudaMemcpyAsync, D2D, D2H), restore x1 and x4 replicas
#     on GPU 0, async-save blocking time, `ckpt restore --device cuda` end to
#     end, and the peers (safetensors load_file(device="cuda"),
#     torch.load(map_location="cuda")) on a state of the same shapes;
#  3. ratios against the issue's targets, and each process's peak RSS.
#
# Output: stdout and $OUT/gpu_results.txt (OUT: the device tool's folder, else ./gpu_out).
#   bench/gpu_check.sh [MIB]
set -uo pipefail
MIB=${1:-2048}
BUNDLE=${BUNDLE:-build/gpu_bundle}
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
RES="$OUT/gpu_results.txt"
: > "$RES"
WORK=${WORK:-/tmp/ckpt_gpu_check}
rm -rf "$WORK" && mkdir -p "$WORK"
log() { echo "$@" | tee -a "$RES"; }
run() { # run a step, keep its output, note a failure and go on
  local name=$1; shift
  log "== $name: $*"
  local t0=$SECONDS
  "$@" > "$WORK/$name.log" 2>&1
  local rc=$?
  cat "$WORK/$name.log" | tee -a "$RES"
  log "== $name: exit $rc in $((SECONDS - t0)) s"
  [[ $rc == 0 ]] || failed+=("$name")
  return $rc
}
failed=()

[[ -d $BUNDLE/lib ]] || { log "no bundle at $BUNDLE (bench/gpu_bundle.sh packs it)"; exit 1; }
BUNDLE=$(cd "$BUNDLE" && pwd)
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log "machine: $(nproc) cores, $(ldd --version | head -1), bundle needs glibc >= $(cat "$BUNDLE/glibc_needed" 2>/dev/null)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$RES" || true
# torch's NCCL, when present, for the NCCL path (unused with one GPU: NCCL takes one rank per GPU)
nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[[ -n $nccl && -e $nccl ]] && export CKPT_NCCL_LIBRARY=$nccl

# ---- 1. conformance over the real provider, plain and under memcheck ----
run conformance "$BUNDLE/bin/cuda_provider_check"
if command -v compute-sanitizer > /dev/null; then
  run memcheck compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 "$BUNDLE/bin/cuda_provider_check"
else
  log "== memcheck: compute-sanitizer not on PATH"; failed+=(memcheck)
fi

# ---- 2. the benchmark ----
S="$WORK/state"
run make "$BUNDLE/bin/gpu_bench" make "$S" "$MIB"
run limits "$BUNDLE/bin/gpu_bench" limits "$S"
run restore_x1 "$BUNDLE/bin/gpu_bench" restore "$S" 1
run restore_x4 "$BUNDLE/bin/gpu_bench" restore "$S" 4
run asyncsave "$BUNDLE/bin/gpu_bench" asyncsave "$S" "$WORK/saved"
timev=(); [[ -x /usr/bin/time ]] && timev=(/usr/bin/time -v)
run cli "${timev[@]}" "$BUNDLE/bin/ckpt" restore "$S" --strategy mirrored --replicas 4 --device cuda:0
run peers python3 "$(dirname "$0")/gpu_peers.py" "$WORK" "$MIB"

# ---- 3. ratios ----
log "== summary (seconds; ratio against the target's limit)"
cat "$WORK"/*.log | awk '
  $1 == "row" { t[$2] = $3 }
  $1 == "rss_mb" { rss[$2] = $3 }
  END {
    lim = t["file_read_warm"] > t["pinned_h2d"] ? t["file_read_warm"] : t["pinned_h2d"]
    for (k in t) printf "%-32s %8.4f s\n", k, t[k]
    if (lim > 0 && t["restore_x1"] > 0) printf "restore x1 / max(file read, pinned H2D) = %.2f (target <= 1.2)\n", t["restore_x1"] / lim
    if (t["d2d"] > 0 && t["restore_x4"] > 0) printf "(restore x4 - x1) / (3 x D2D) = %.2f (target <= 1.2)\n", (t["restore_x4"] - t["restore_x1"]) / (3 * t["d2d"])
    if (t["pinned_d2h"] > 0 && t["async_save_blocking"] > 0) printf "async save blocking / D2H = %.2f (target <= 1.1)\n", t["async_save_blocking"] / t["pinned_d2h"]
    if (t["safetensors_load_cuda"] > 0) printf "restore x1 / safetensors load_file(cuda) = %.2f (target < 1)\n", t["restore_x1"] / t["safetensors_load_cuda"]
    if (t["torch_load_cuda"] > 0) printf "restore x1 / torch.load(cuda) = %.2f (target < 1)\n", t["restore_x1"] / t["torch_load_cuda"]
    for (k in rss) printf "peak RSS %-20s %8.1f MB\n", k, rss[k]
  }' | tee -a "$RES"
grep -h "Maximum resident" "$WORK/cli.log" | sed 's/^\s*/ckpt restore --device cuda: /' | tee -a "$RES"
if (( ${#failed[@]} )); then
  log "FAILED steps: ${failed[*]}"
  exit 1
fi
log "all steps passed"

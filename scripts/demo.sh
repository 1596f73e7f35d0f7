#!/usr/bin/env bash
# The README's main command, end to end:
#   install the dependencies, build in ./build, train the MLP under a
#   2-replica mirrored strategy (a checkpoint per epoch), inspect the latest
#   checkpoint, restore it mirrored on 4 replicas, resume fine-tuning in a new
#   process, train the same 4 epochs straight in another directory, and
#   `ckpt diff` the two final checkpoints: identical bit for bit. Then the
#   same MLP on 2 MPI workers x 2 local replicas, crashed after epoch 2,
#   resumed on 1 worker x 4, crashed again, resumed on 4 workers x 1, and
#   diffed against a straight 2 x 2 run: identical bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${CKPT_DEMO_BUILD_DIR:-build}   # override to reuse another build tree
step=0
steps=10
bold="" plain=""
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; fi
section() {
  step=$((step + 1))
  printf '\n%s== [%d/%d] %s ==%s\n' "$bold" "$step" "$steps" "$*" "$plain"
}
run() {
  printf '$ %s\n' "$*"
  "$@"
}

section "dependencies (Debian 12)"
if [ "$(id -u)" = 0 ]; then
  bash scripts/install-deps.sh
else
  echo "not root: skipping scripts/install-deps.sh (run it as root on a fresh machine)"
fi

section "build in ./$build"
jobs=$(nproc)
run cmake -S . -B "$build" >/dev/null   # RelWithDebInfo by default
run cmake --build "$build" -j"$jobs" --target ckpt-cli mlp_mirrored finetune_resume mlp_multiworker

ckpt=./$build/ckpt
samples=./$build/samples
work=./$build/demo
rm -rf "$work"
mkdir -p "$work"

section "train: MLP 8-16-1, Adam, 2-replica mirrored strategy, 2 epochs, a checkpoint per epoch"
run "$samples/mlp_mirrored" --replicas 2 --epochs 2 --dir "$work/resumed"

section "inspect the latest checkpoint"
run "$ckpt" inspect "$work/resumed"

section "restore it inside a 4-replica mirrored scope"
run "$ckpt" restore "$work/resumed" --strategy mirrored --replicas 4

section "resume fine-tuning in a new process: 2 more epochs"
run "$samples/finetune_resume" --replicas 2 --epochs 2 --dir "$work/resumed"

section "the same 4 epochs straight, in another directory"
run "$samples/mlp_mirrored" --replicas 2 --epochs 4 --dir "$work/straight"

section "diff: straight run vs 2 + 2 resumed (exact, bit for bit)"
if run "$ckpt" diff "$work/straight/ckpt-4" "$work/resumed/ckpt-4"; then
  printf '\nresumed == straight: weights, Adam slots, iteration count, metric state and RNG identical bit for bit\n'
else
  printf '\nthe resumed run differs from the straight run\n' >&2
  exit 1
fi

# as root (CI is) mpirun needs --allow-run-as-root; more ranks than cores need --oversubscribe
mpirun="mpirun --allow-run-as-root --oversubscribe"
section "multi-worker: 2 MPI workers x 2 local replicas, crash after epoch 2, resume on 1 x 4, crash after epoch 3, resume on 4 x 1"
run $mpirun -np 2 "$samples/mlp_multiworker" --local 2 --epochs 4 --dir "$work/mw-resumed" --die-after-epoch 2 || true
run ls "$work/mw-resumed"
run $mpirun -np 1 "$samples/mlp_multiworker" --local 4 --epochs 4 --dir "$work/mw-resumed" --die-after-epoch 3 || true
run $mpirun -np 4 "$samples/mlp_multiworker" --local 1 --epochs 4 --dir "$work/mw-resumed"

section "diff: straight 2 x 2 multi-worker run vs crashed-and-resumed (exact, bit for bit)"
run $mpirun -np 2 "$samples/mlp_multiworker" --local 2 --epochs 4 --dir "$work/mw-straight"
if run "$ckpt" diff "$work/mw-straight/ckpt-4" "$work/mw-resumed/ckpt-4"; then
  printf '\nmulti-worker resumed on 1 x 4 and 4 x 1 == straight 2 x 2: identical bit for bit\n'
else
  printf '\nthe resumed multi-worker run differs from the straight run\n' >&2
  exit 1
fi

section "memory tier: 2 workers on emulated nodes a,b, each epoch kept in memory on its node and one other (copies in the background), crash after epoch 3, resume on 4 x 1 from memory"
tier="$work/tier"
run env CKPT_TIER_DIR="$tier" CKPT_TIER_NODES=a,b $mpirun -np 2 "$samples/mlp_multiworker" --local 2 --epochs 4 \
  --dir "$work/mw-memory" --memory-copies 1 --persist-every 4 --die-after-epoch 3 || true
run ls "$tier/a/mlp_multiworker" "$tier/b/mlp_multiworker"
run env CKPT_TIER_DIR="$tier" CKPT_TIER_NODES=a,a,b,b $mpirun -np 4 "$samples/mlp_multiworker" --local 1 --epochs 4 \
  --dir "$work/mw-memory" --memory-copies 1 --persist-every 4
if run "$ckpt" diff "$work/mw-straight/ckpt-4" "$work/mw-memory/ckpt-4"; then
  printf '\nresumed from the memory tier (epoch 2: epoch 3 was not committed yet) on 4 x 1 == straight 2 x 2: identical bit for bit\n'
else
  printf '\nthe run resumed from the memory tier differs from the straight run\n' >&2
  exit 1
fi

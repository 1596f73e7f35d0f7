#!/usr/bin/env bash
# The README's test command: install dependencies, build, run the whole suite
# (one Criterion binary), then once more under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# the TensorFlow / Keras / safetensors / gguf oracles (pinned, in a venv this script owns)
CKPT_ORACLE_PYTHON="$(bash scripts/install-oracles.sh | tail -n1)"
export CKPT_ORACLE_PYTHON TF_CPP_MIN_LOG_LEVEL=3
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="-Werror" >/dev/null
cmake --build build -j"$jobs"
echo "== test suite =="
# the S3 suites (tests/s3/test_s3*.c) run against a SeaweedFS server on 127.0.0.1 that this wrapper starts and stops
bash tests/s3/with_s3_server.sh ./build/tests/ckpt-tests --jobs "$jobs"

if [ "${CKPT_SKIP_SANITIZE:-0}" != "1" ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCKPT_SANITIZE=ON -DCKPT_BUILD_BENCH=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  echo "== test suite under ASan+UBSan =="
  # the sweeps take 1/8 of each file's fixed sample here (at least 64 positions; rel_scaled in
  # tests/support/rel_common.c); the full sample ran above. malloc_context_size=3: see tests/lsan.supp.
  CKPT_TEST_SWEEP_SCALE=0.125 \
  LSAN_OPTIONS=suppressions="$PWD/tests/lsan.supp":print_suppressions=0 \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:malloc_context_size=3 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    bash tests/s3/with_s3_server.sh ./build-asan/tests/ckpt-tests --jobs "$jobs"
fi

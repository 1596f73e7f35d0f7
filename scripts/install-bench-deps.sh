#!/usr/bin/env bash
# What the benchmark's peers need on top of the build's (run as root):
# Debian's python3-torch for bench/peers.py (the system /usr/bin/python3), and
# a virtual environment of the benchmark's own with torch 2.x from PyPI (it
# pulls large CUDA wheels, so only the benchmark installs it). TensorFlow and
# safetensors come from the test oracles' venv (scripts/install-oracles.sh).
# Prints "CKPT_ORACLE_PYTHON=... CKPT_BENCH_TORCH_PYTHON=..." on the last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/install-deps.sh" python3-torch >&2
oracle="$(bash "$root/scripts/install-oracles.sh" | tail -n1)"
venv="${CKPT_BENCH_VENV:-$root/build-bench-venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch, numpy' 2>/dev/null; then
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check torch==2.15.0 numpy==2.4.6 >&2
fi
echo "CKPT_ORACLE_PYTHON=$oracle CKPT_BENCH_TORCH_PYTHON=$venv/bin/python"

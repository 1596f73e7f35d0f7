#!/usr/bin/env bash
# Creates (or reuses) the virtual environment holding the pinned Python oracles
# of tests/oracles/requirements.txt: TensorFlow, Keras 3, safetensors, gguf.
# Prints nothing on success but the venv's python path on the last line.
# Fails loudly when they cannot be installed: the tier never skips.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${CKPT_ORACLE_VENV:-$root/build-venv}"
req="$root/tests/oracles/requirements.txt"
nodeps="$root/tests/oracles/requirements-nodeps.txt"
stamp="$venv/.requirements.sha256"
want="$(cat "$req" "$nodeps" | sha256sum | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "install-oracles: creating $venv" >&2
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$nodeps" >&2
  echo "$want" >"$stamp"
fi
# prove the oracles import before any test relies on them
TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" - >&2 <<'PY'
import tensorflow, keras, safetensors, gguf, h5py, tf_keras
print("install-oracles: tensorflow", tensorflow.__version__, "keras", keras.__version__,
      "safetensors", safetensors.__version__)
PY
echo "$venv/bin/python"

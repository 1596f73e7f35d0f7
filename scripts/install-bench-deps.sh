#!/usr/bin/env bash
# Debian 12 packages the benchmark's peers need (bench/peers.py runs with the
# system /usr/bin/python3). Run as root. Idempotent. Never pip.
set -euo pipefail
PKGS=(python3 python3-numpy python3-h5py python3-torch)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-bench-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-bench-deps: all Debian packages present"
fi

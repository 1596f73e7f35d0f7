#!/usr/bin/env bash
# Installs everything libckpt needs on Debian 12 (run as root). Idempotent.
# Extra Debian package names given as arguments are installed too.
set -euo pipefail
PKGS=(build-essential cmake pkg-config
  libhdf5-dev zlib1g-dev libarchive-dev libcriterion-dev
  libprotobuf-c-dev protobuf-c-compiler libsnappy-dev libjansson-dev libisal-dev
  python3 python3-h5py python3-numpy python3-venv
  libopenmpi-dev openmpi-bin
  clang libclang-rt-14-dev
  liburing-dev
  libcurl4-openssl-dev libssl-dev
  "$@")
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

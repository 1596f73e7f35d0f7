#!/usr/bin/env bash
# Debian 12 packages the benchmark's peers need on top of the build's
# (bench/peers.py runs with the system /usr/bin/python3). Run as root. Never pip.
set -euo pipefail
exec bash "$(dirname "$0")/install-deps.sh" python3-torch

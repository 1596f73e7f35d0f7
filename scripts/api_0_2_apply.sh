#!/usr/bin/env bash
# Applies the 0.1 -> 0.2 API migration (scripts/api_0_2.cocci, Coccinelle's
# spatch) to this repository: every C source that names a changed function,
# and README.md's ```c examples. Idempotent: a second run changes nothing.
# Usage: bash scripts/api_0_2_apply.sh [JOBS]   (needs spatch: apt-get install coccinelle)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-2}
cocci=scripts/api_0_2.cocci
# the old names the patch rewrites (its `- name(` lines and renamed symbols)
names=$(grep -oE '^- *[a-z_0-9]+' "$cocci" | sed 's/^- *//' | sort -u | paste -sd'|')
incs=()
for d in $(git ls-files '*.h' | xargs -n1 dirname | sort -u); do
	case $d in */include/ckpt | */include/ckpt/sys) incs+=(-I "${d%/ckpt*}");; *) incs+=(-I "$d");; esac
done
spatch_opts=(--sp-file "$cocci" --in-place --all-includes "${incs[@]}" --max-width 120 --very-quiet)
git ls-files -z '*.c' '*.h' '*.cu' | xargs -0 grep -lZE "\\b($names)\\b" |
	xargs -0 -r -n 1 -P "$jobs" spatch "${spatch_opts[@]}"
# README.md: each ```c block through the same patch, spliced back in place
python3 - "$cocci" "${spatch_opts[@]}" <<'PY'
import os, re, subprocess, sys, tempfile
opts = sys.argv[2:]
text = open("README.md", encoding="utf-8").read()
blocks = list(re.finditer(r"^```c\n(.*?)^```$", text, re.M | re.S))
with tempfile.TemporaryDirectory() as tmp:
    paths = []
    for k, m in enumerate(blocks):
        p = os.path.join(tmp, f"readme_{k}.c")
        open(p, "w", encoding="utf-8").write(m.group(1))
        paths.append(p)
        subprocess.run(["spatch"] + opts + [p], check=True)
    out, last = [], 0
    for m, p in zip(blocks, paths):
        out.append(text[last:m.start(1)])
        out.append(open(p, encoding="utf-8").read())
        last = m.end(1)
    out.append(text[last:])
new = "".join(out)
if new != text:
    open("README.md", "w", encoding="utf-8").write(new)
PY

#!/usr/bin/env bash
# Applies the 0.1 -> 0.2 API migration (scripts/api_0_2.cocci, Coccinelle's
# spatch) to this repository: every C source that names a changed function,
# and README.md's ```c examples. Idempotent: a second run changes nothing.
# Usage: bash scripts/api_0_2_apply.sh [JOBS [FILE...]]
# (FILEs: only those C files, and not README.md; needs spatch: apt-get install coccinelle)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-2}
shift $(($# > 0 ? 1 : 0))
cocci=scripts/api_0_2.cocci
# the old names the patch rewrites (its `- name(` lines and renamed symbols)
names=$(grep -oE '^- *[a-z_0-9]+' "$cocci" | sed 's/^- *//' | sort -u | paste -sd'|')
incs=()
for d in $(git ls-files '*.h' | xargs -n1 dirname | sort -u); do
	case $d in */include/ckpt | */include/ckpt/sys) incs+=(-I "${d%/ckpt*}");; *) incs+=(-I "$d");; esac
done
spatch_opts=(--sp-file "$cocci" --in-place --recursive-includes --macro-file scripts/api_0_2_macros.h "${incs[@]}" --max-width 120 --very-quiet)
failed=$(mktemp)
trap 'rm -f "$failed"' EXIT
{ if [ $# -gt 0 ]; then printf '%s\0' "$@"; else git ls-files -z '*.c' '*.h' '*.cu'; fi; } | xargs -0 grep -lZE "\\b($names)\\b" |
	xargs -0 -r -n 1 -P "$jobs" sh -c 'for f; do :; done; spatch "$@" || echo "$f" >> "'"$failed"'"' \
		sh "${spatch_opts[@]}" 2>&1 | grep -v '^\(---\|+++\|@@\|[-+ ]\)' || true
# the headers split by audience: ckpt/sys/ includes where their symbols are used
{ if [ $# -gt 0 ]; then printf '%s\0' "$@"; else git ls-files -z '*.c' '*.h' '*.cu'; fi; } |
	xargs -0 python3 scripts/api_0_2_includes.py
# spatch 1.1 gives up on a function it cannot parse (an array compound
# literal, a macro glued to a string) when the call sits in an argument of a
# function-like macro defined in the file (OK(...), CHECK(...)): it expands
# the macro, then refuses to edit expanded tokens. Retry those files on a copy
# whose function-like #defines are blanked (lines kept), and carry the diff
# back with patch.
if [ -s "$failed" ]; then
	retry=$(mktemp -d)
	mv "$failed" "$retry/list"
	: > "$failed"
	while read -r f; do
		python3 -c 'import re, sys
s = open(sys.argv[1]).read()
print(re.sub(r"^#\s*define\s+\w+\(.*?(?<!\\)\n", lambda m: "\n" * m.group(0).count("\n"), s, flags=re.M | re.S), end="")' \
			"$f" > "$retry/a.c"
		cp "$retry/a.c" "$retry/b.c"
		if spatch "${spatch_opts[@]}" "$retry/b.c" > /dev/null &&
			{ diff -u "$retry/a.c" "$retry/b.c" > "$retry/d"; [ $? -le 1 ]; } &&
			patch -s --no-backup-if-mismatch "$f" "$retry/d"; then
			echo "api_0_2_apply: $f rewritten with its function-like macros hidden"
		else
			echo "$f" >> "$failed"
		fi
	done < "$retry/list"
	rm -rf "$retry"
fi
# README.md: each ```c block through the same patch, spliced back in place
[ $# -gt 0 ] || python3 - "$failed" "${spatch_opts[@]}" <<'PY'
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
        if subprocess.run(["spatch"] + opts + [p], stdout=subprocess.DEVNULL).returncode:
            open(sys.argv[1], "a").write(f"README.md: the ```c block at line {text.count(chr(10), 0, m.start()) + 1}\n")
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
if [ -s "$failed" ]; then
	echo "api_0_2_apply: spatch could not rewrite (see its message above):" >&2
	sed 's/^/  /' "$failed" >&2
	exit 1
fi

#!/usr/bin/env python3
"""Dependency cycles inside libckpt/.

Two graphs over the files under libckpt/ (the public headers in
libckpt/include/ are leaves and are left out):

  includes  file -> the libckpt header it #includes ("..." form)
  calls     a.c  -> b.c when a.c calls a non-static function defined in b.c

A cycle in either graph is a pair (or ring) of files that each need the
other: the core is meant to depend one way only. The script prints every
elementary cycle it finds and their count; with --check it exits 1 when
there is one not listed in the --known file (tests/core/test_include_graph.c
runs it so: a new cycle fails the suite; the list only shrinks).

With --owned FILE (lines `struct_name owner.c`), it also checks that each
such struct is defined in its owner only: the header declares it opaque,
so the compiler rejects any other file that touches its fields, and this
check keeps the definition from moving back into a header. A definition
elsewhere is printed as `NOT OWNED struct NAME defined in FILE (owner:
OWNER)` and, with --check, exits 1.

Parsing is lexical (comments and strings stripped, braces counted), enough
for the project's style: one function definition starts at brace depth 0
with `name(...) {`.
"""
import argparse
import os
import re
import sys

IDENT_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
DEF_HEAD = re.compile(r"\b([A-Za-z_]\w*)\s*\((?:[^()]|\([^()]*\))*\)\s*(?:CKPT_\w+(?:\([^()]*\))?\s*)*$", re.S)
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined", "__attribute__", "alignof",
            "_Alignof", "_Static_assert", "do", "else", "case"}


def strip_c(text):
    """Comments, string and character literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def without_preprocessor(text):
    """Preprocessor lines (with their continuations) blanked: macros are not definitions."""
    lines = text.split("\n")
    blank = False
    for k, line in enumerate(lines):
        if blank or line.lstrip().startswith("#"):
            blank = line.rstrip().endswith("\\")
            lines[k] = ""
    return "\n".join(lines)


def functions(text):
    """(defined: {name: is_static}, called: set of names) of one stripped .c file."""
    defined, called = {}, set()
    depth, head_start, i = 0, 0, 0
    body_start, current = None, None
    for m in re.finditer(r"[{};]", text):
        ch = m.start()
        if depth == 0:
            if text[ch] == "{":
                head = text[head_start:ch]
                d = DEF_HEAD.search(head)
                if d and "=" not in head[: d.start()] and d.group(1) not in KEYWORDS \
                        and not re.search(r"\b(struct|union|enum)\s+\w*\s*$", head):
                    current = d.group(1)
                    defined[current] = bool(re.search(r"\bstatic\b", head[: d.start()]))
                    body_start = ch
                depth = 1
            elif text[ch] == ";":
                head_start = ch + 1
            else:
                head_start = ch + 1
        else:
            if text[ch] == "{":
                depth += 1
            elif text[ch] == "}":
                depth -= 1
                if depth == 0:
                    if current is not None:
                        for c in IDENT_CALL.finditer(text, body_start, ch):
                            if c.group(1) not in KEYWORDS:
                                called.add(c.group(1))
                    current = None
                    head_start = ch + 1
    return defined, called


def load(root):
    files = {}
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if os.path.join(d, x) != os.path.join(root, "include"))
        for name in sorted(names):
            if name.endswith((".c", ".h")):
                p = os.path.join(d, name)
                with open(p, encoding="utf-8", errors="replace") as f:
                    files[os.path.relpath(p, root)] = f.read()
    return files


def resolve(inc, src, files):
    """The libckpt file `#include "inc"` in `src` names, or None (public headers, generated, formats)."""
    here = os.path.normpath(os.path.join(os.path.dirname(src), inc))
    if here in files:
        return here
    if inc in files:
        return inc
    return None


def graphs(files):
    inc = {f: set() for f in files}
    for f, text in files.items():
        for m in INCLUDE.finditer(text):
            t = resolve(m.group(1), f, files)
            if t and t != f:
                inc[f].add(t)
    parsed = {}
    owner = {}
    for f, text in files.items():
        if f.endswith(".c"):
            parsed[f] = functions(without_preprocessor(strip_c(text)))
            for name, is_static in parsed[f][0].items():
                if not is_static:
                    owner.setdefault(name, f)
    calls = {f: set() for f in parsed}
    for f, (defined, called) in parsed.items():
        for name in called:
            if name in defined:
                continue  # its own (static or not)
            t = owner.get(name)
            if t and t != f:
                calls[f].add(t)
    return inc, calls


def cycles(g, limit):
    """Elementary cycles of `g` (Johnson's search, each cycle once: from its smallest node)."""
    found = []
    nodes = sorted(g)
    index = {n: k for k, n in enumerate(nodes)}
    for k, s in enumerate(nodes):
        stack = [(s, iter(sorted(g[s])))]
        path, on_path = [s], {s}
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                on_path.discard(path.pop())
                continue
            if index.get(nxt, -1) < k:
                continue
            if nxt == s:
                found.append(list(path))
                if len(found) >= limit:
                    return found
            elif nxt not in on_path:
                path.append(nxt)
                on_path.add(nxt)
                stack.append((nxt, iter(sorted(g.get(nxt, ())))))
    return found


STRUCT_DEF = re.compile(r"\bstruct\s+([A-Za-z_]\w*)\s*\{")


def owned_violations(files, owned):
    """(struct, file, owner) for each definition of an owned struct outside its owner."""
    bad = []
    for f, text in sorted(files.items()):
        for m in STRUCT_DEF.finditer(without_preprocessor(strip_c(text))):
            owner = owned.get(m.group(1))
            if owner is not None and f != owner:
                bad.append((m.group(1), f, owner))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "libckpt"))
    ap.add_argument("--check", action="store_true", help="exit 1 when there is a cycle")
    ap.add_argument("--limit", type=int, default=100000, help="stop counting at this many cycles per graph")
    ap.add_argument("--known", help="file of cycles still to remove, one `graph: a -> b -> a` per line")
    ap.add_argument("--edges", action="store_true", help="print the call graph's edges too")
    ap.add_argument("--owned", help="file of `struct_name owner.c` lines: structs only their owner defines")
    a = ap.parse_args()
    files = load(a.root)
    inc, calls = graphs(files)
    if a.edges:
        for f in sorted(calls):
            for t in sorted(calls[f]):
                print(f"calls {f} -> {t}")
    known = set()
    if a.known:
        with open(a.known, encoding="utf-8") as f:
            known = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    total, new = 0, 0
    for name, g in (("include", inc), ("call", calls)):
        cyc = cycles(g, a.limit)
        for c in cyc:
            line = f"{name}: {' -> '.join(c + [c[0]])}"
            is_new = line not in known
            new += is_new
            print(("NEW " if is_new and a.known else "") + "cycle " + line)
        print(f"{name} cycles: {len(cyc)}")
        total += len(cyc)
    print(f"cycles: {total}, not in the known list: {new}")
    bad = []
    if a.owned:
        with open(a.owned, encoding="utf-8") as f:
            owned = dict(line.split()[:2] for line in f if line.strip() and not line.startswith("#"))
        bad = owned_violations(files, owned)
        for name, f, owner in bad:
            print(f"NOT OWNED struct {name} defined in {f} (owner: {owner})")
        print(f"owned structs: {len(owned)}, defined outside their owner: {len(bad)}")
    return 1 if a.check and (new or bad) else 0


if __name__ == "__main__":
    sys.exit(main())

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

With --layers FILE (libckpt/'s folders, lowest layer first, one layer per
line, several folders on a line sharing it; `.` is the files at the top,
such as internal.h), a file belongs to
the layer of its first folder (storage/s3/io_s3.c is in storage) and may
include and call its own layer and the layers listed before it only. Each
edge that goes up is printed as `UP include a -> b` or `UP call a -> b`;
with --upward FILE (the edges still allowed to go up, a list that only
shrinks) and --check, one not listed exits 1, and so does a listed one that
no longer exists (remove it from the list).

With --door HEADER (a path under the root), that header is the only file of
the tree that may include a formats/ header, and the .c file beside it the
only one that names a backend (ckpt_format_NAME): the core's one door to
the format backends. Other files are printed as `DOOR ...`.

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


def layer_of(path, order):
    """Rank of PATH's layer in ORDER (its first folder; `.` for a top-level file), or None."""
    top = path.split("/")[0] if "/" in path else "."
    for rank, folders in enumerate(order):
        if top in folders.split():
            return rank
    return None


def upward_edges(files, inc, calls, order):
    """(lines `include a -> b` / `call a -> b`, files in no listed layer) for edges that go up."""
    up, unplaced = [], sorted(f for f in files if layer_of(f, order) is None)
    for name, g in (("include", inc), ("call", calls)):
        for a in sorted(g):
            for b in sorted(g[a]):
                ra, rb = layer_of(a, order), layer_of(b, order)
                if ra is not None and rb is not None and ra < rb:
                    up.append(f"{name} {a} -> {b}")
    return up, unplaced


BACKEND = re.compile(r"\bckpt_format_[a-z0-9_]+\b")


def door_violations(files, door):
    """Files other than DOOR that include formats/, and other .c files than DOOR's that name a backend."""
    bad = []
    door_c = door[:-2] + ".c"
    for f, text in sorted(files.items()):
        if f != door:
            for m in INCLUDE.finditer(text):
                if m.group(1).startswith(("formats/", "../formats/")) or "/formats/" in m.group(1):
                    bad.append(f"DOOR {f} includes {m.group(1)} (include {door})")
        if f != door_c and f.endswith(".c"):
            names = sorted(set(BACKEND.findall(without_preprocessor(strip_c(text)))))
            if names:
                bad.append(f"DOOR {f} names the backend {', '.join(names)} (only {door_c} does)")
    return bad


def read_list(path):
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "libckpt"))
    ap.add_argument("--check", action="store_true", help="exit 1 when there is a cycle")
    ap.add_argument("--limit", type=int, default=100000, help="stop counting at this many cycles per graph")
    ap.add_argument("--known", help="file of cycles still to remove, one `graph: a -> b -> a` per line")
    ap.add_argument("--edges", action="store_true", help="print the call graph's edges too")
    ap.add_argument("--owned", help="file of `struct_name owner.c` lines: structs only their owner defines")
    ap.add_argument("--layers", help="file of libckpt/'s folders, lowest layer first")
    ap.add_argument("--upward", help="file of `include|call a -> b` edges still allowed to go up (only shrinks)")
    ap.add_argument("--door", help="the one header that may include formats/ (its .c alone names backends)")
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
    layer_bad = 0
    if a.layers:
        order = read_list(a.layers)
        up, unplaced = upward_edges(files, inc, calls, order)
        allowed = set(read_list(a.upward)) if a.upward else set()
        fresh = [e for e in up if e not in allowed]
        stale = sorted(allowed - set(up))
        for e in up:
            print(("NEW " if e in fresh and a.upward else "") + "UP " + e)
        for e in stale:
            print(f"FIXED (remove from {a.upward}): {e}")
        for f in unplaced:
            print(f"NO LAYER {f} (its folder is not in {a.layers})")
        n_inc = sum(e.startswith("include ") for e in up)
        print(f"upward: {len(up)} (includes {n_inc}, calls {len(up) - n_inc}), not in the list: {len(fresh)}, "
              f"listed but gone: {len(stale)}, files in no layer: {len(unplaced)}")
        layer_bad = len(fresh) + len(stale) + len(unplaced)
    if a.door:
        door = door_violations(files, a.door)
        for line in door:
            print(line)
        print(f"door {a.door}: {len(door)} files around it")
        layer_bad += len(door)
    return 1 if a.check and (new or bad or layer_bad) else 0


if __name__ == "__main__":
    sys.exit(main())

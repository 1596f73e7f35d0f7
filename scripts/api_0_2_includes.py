#!/usr/bin/env python3
"""The include half of the 0.1 -> 0.2 migration (scripts/api_0_2_apply.sh).

0.2 split the I/O header by audience: the VFS method tables and the memory
and fault-injecting file systems left ckpt/io.h for ckpt/sys/. A C file that
uses one of them gets the ckpt/sys/ header after its last ckpt include (or
its last include). Idempotent. Usage: api_0_2_includes.py FILE...
"""
import re
import sys

MOVED = {
    "ckpt/sys/vfs.h": r"\bckpt_(io|vfs)_methods\b|\bCKPT_(IO|VFS)_METHODS_V\d|\bstruct ckpt_(io|vfs)\b|\bckpt_(io|vfs)\s+\w+\s*;|->methods->(pread|pwrite|size|sync|close|map|fd|pread_direct|open|rename|remove|exists|sync_dir|list|mkdir|rmdir|lock|unlock|caps)\b",
    "ckpt/sys/vfs_memory.h": r"\bckpt_vfs_memory_(new|put|get)\b",
    "ckpt/sys/vfs_faulty.h": r"\bckpt_vfs_faulty_(new|calls|fired)\b",
}
SELF = re.compile(r"libckpt/include/ckpt/(sys/)?[a-z_]+\.h$")


def strip_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def main(paths):
    for path in paths:
        if SELF.search(path):
            continue  # the public headers themselves
        text = open(path, encoding="utf-8").read()
        code = strip_comments(text)
        need = [h for h, rx in MOVED.items() if re.search(rx, code) and not re.search(
            r'#\s*include\s*[<"]' + re.escape(h) + '[>"]', text)]
        if not need:
            continue
        incs = list(re.finditer(r'^#\s*include\s*[<"]([^>"]+)[>"][^\n]*\n', text, re.M))
        if not incs:
            continue
        first_use = min(m.start() for h in need for m in re.finditer(MOVED[h], code))
        before = [m for m in incs if m.start() < first_use]
        ckpt = [m for m in before if m.group(1).startswith("ckpt/")]
        if not before:
            continue
        at = (ckpt or before)[-1]
        quote = '<' if '<' in at.group(0) else '"'
        close = '>' if quote == '<' else '"'
        add = "".join(f"#include {quote}{h}{close}\n" for h in sorted(need))
        text = text[:at.end()] + add + text[at.end():]
        open(path, "w", encoding="utf-8").write(text)


if __name__ == "__main__":
    main(sys.argv[1:])

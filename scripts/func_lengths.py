#!/usr/bin/env python3
"""List C functions longer than N lines, longest first.

    scripts/func_lengths.py [-n 80] PATH...   (files or directories of .c files)

A function is a line starting in column 0 with an identifier and '(' that
is not a prototype, up to the next line that is exactly '}' (the house
style: Linux kernel, function braces in column 0). Prints "lines file:line
name" and, last, a summary line; exit status 0 always (a report, not a gate).
"""
import argparse
import os
import re
import sys

HEAD = re.compile(r'^[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\(')


def functions(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.read().split('\n')
    i = 0
    while i < len(lines):
        m = HEAD.match(lines[i])
        if m and not lines[i].startswith(('typedef', 'struct', 'enum', 'static const', 'extern', 'return')):
            # the signature may run over several lines; a body starts with "{" alone in column 0
            j = i
            while j < len(lines) and not lines[j].startswith('{') and not lines[j].rstrip().endswith(';'):
                j += 1
            if j < len(lines) and lines[j].startswith('{'):
                k = j + 1
                while k < len(lines) and lines[k] != '}':
                    k += 1
                yield m.group(1), i + 1, k - i + 1
                i = k + 1
                continue
        i += 1


def c_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                for n in sorted(names):
                    if n.endswith('.c'):
                        yield os.path.join(root, n)
        else:
            yield p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('-n', type=int, default=80, help='report functions over N lines (default 80)')
    ap.add_argument('paths', nargs='+')
    a = ap.parse_args()
    found, total = [], 0
    for path in c_files(a.paths):
        for name, line, length in functions(path):
            total += 1
            if length > a.n:
                found.append((length, path, line, name))
    for length, path, line, name in sorted(found, reverse=True):
        print(f'{length:5d} {path}:{line} {name}')
    print(f'{len(found)} of {total} functions over {a.n} lines', file=sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main())

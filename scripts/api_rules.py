#!/usr/bin/env python3
"""Checks the public API against the rules ckpt/common.h states.

Every CKPT_API function declared in the public headers is parsed with the
doc comment (/** ... */) right above it (or a trailing /**< ... */), and:

  doc      every function has a doc comment;
  return   every non-void function documents `@return`;
  out-doc  every output parameter (a `T **` whose outer pointee is not
           const, a name spelled out/out_*/*_out, or one documented as
           [out]) is documented with `@param[out] name`;
  out-first  in a function returning int, the output parameters come first;
  out-owned  `**out` means caller-owned: an output documented as borrowed
           should be a return value instead;
  naming   one naming for counts (`_count` vs `num_`) and for getters
           (`_get_` vs bare): the functions of the smaller family of each
           kind are reported, and the families found are printed.

Usage: api_rules.py [--known FILE] [--check] DIR...
Prints the violations grouped by rule with counts. With --check, exits 1
when a violation is not in the known file. A known line is
"rule function  # reason"; lines starting with # are comments.
"""
import argparse
import os
import re
import sys

RULES = ("doc", "return", "out-doc", "out-first", "out-owned", "naming")

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def strip_comments_keep_layout(text):
    """The text with comments and strings blanked (same offsets)."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def split_top(s, sep=","):
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def param_name(p):
    """Name of one parameter ('' for void or an unnamed one)."""
    p = p.strip()
    if p in ("void", "...", ""):
        return ""
    m = re.search(r"\(\s*\*+\s*(?:const\s+)?([A-Za-z_]\w*)\s*\)", p)
    if m:  # function pointer
        return m.group(1)
    p = re.sub(r"\[[^\]]*\]\s*$", "", p).strip()
    m = re.search(r"([A-Za-z_]\w*)\s*$", p)
    if not m:
        return ""
    name = m.group(1)
    before = p[: m.start()].strip()
    if not before or name in ("int", "char", "void", "size_t", "double", "float", "unsigned"):
        return ""
    return name


def is_output_param(p, name, doc_out):
    if name in doc_out:
        return True
    if name == "out" or name.startswith("out_") or name.endswith("_out"):
        return "const" not in p.replace(name, "").split("*")[-1] and "*" in p
    if re.search(r"\(\s*\*", p):
        return False
    typ = p[: p.rfind(name)] if name else p
    stars = [m.start() for m in re.finditer(r"\*", typ)]
    if len(stars) < 2:
        return False
    # `T *const *x` / `const T *const *x` is an input array: the outer
    # pointee (between the last two stars) is const.
    between = typ[stars[-2] + 1: stars[-1]]
    return "const" not in between


def doc_before(text, start):
    """The /** ... */ comment ending right before `start` (only blanks between)."""
    k = start
    while k > 0 and text[k - 1] in " \t\n":
        k -= 1
    if not text.endswith("*/", 0, k):
        return None
    b = text.rfind("/*", 0, k - 2)
    if b < 0 or not text.startswith("/**", b):
        return None
    return text[b:k]


def doc_after(text, end):
    """A trailing /**< ... */ on the declaration's last line."""
    eol = text.find("\n", end)
    eol = len(text) if eol < 0 else eol
    rest = text[end:eol]
    m = re.search(r"/\*\*<.*?\*/", rest)
    return m.group(0) if m else None


class Decl:
    def __init__(self, path, line, name, ret, params, doc):
        self.path, self.line, self.name, self.ret = path, line, name, ret
        self.params, self.doc = params, doc


def parse_header(path, rel):
    text = open(path, encoding="utf-8").read()
    code = strip_comments_keep_layout(text)
    decls = []
    for m in re.finditer(r"\bCKPT_API\b", code):
        line_start = code.rfind("\n", 0, m.start()) + 1
        if code[line_start:m.start()].lstrip().startswith("#"):
            continue  # the macro's own definition
        semi = code.find(";", m.end())
        body = code[m.end():semi]
        if "(" not in body:
            continue  # exported data, not a function
        # name = identifier before the first '(' that is not a function
        # pointer return, i.e. before the top-level parameter list
        op = body.find("(")
        head = body[:op]
        nm = IDENT.findall(head)
        if not nm:
            continue
        name = nm[-1]
        ret = head[: head.rfind(name)].strip()
        depth, close = 0, None
        for i in range(op, len(body)):
            if body[i] == "(":
                depth += 1
            elif body[i] == ")":
                depth -= 1
                if depth == 0:
                    close = i
                    break
        params = [p for p in split_top(body[op + 1:close]) if p not in ("", "void")]
        ret = re.sub(r"\s+", " ", ret.replace("CKPT_PRINTF", ""))
        doc = doc_before(text, line_start) or doc_after(text, semi + 1)
        line = text.count("\n", 0, m.start()) + 1
        decls.append(Decl(rel, line, name, ret, [re.sub(r"\s+", " ", p) for p in params], doc))
    return decls


def find_headers(dirs):
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if f.endswith(".h"):
                    yield os.path.join(root, f)


def doc_outs(doc):
    return set(re.findall(r"@param\s*\[\s*(?:in\s*,\s*)?out\s*\]\s+([A-Za-z_]\w*)", doc or ""))


def doc_out_texts(doc):
    """(name, description) of each @param[out], up to the next @ tag or the end."""
    body = re.sub(r"^\s*\*+\s?", "", (doc or "").replace("*/", ""), flags=re.M)
    return re.findall(r"@param\s*\[\s*(?:in\s*,\s*)?out\s*\]\s+([A-Za-z_]\w*)(.*?)(?=@|$)", body, re.S)


COUNT_FAMILIES = (("_count", re.compile(r"_count$")), ("num_", re.compile(r"(^|_)num_")))


def is_bare_getter(d):
    """One const-handle argument, a value returned, no verb in the name."""
    if len(d.params) != 1 or d.ret in ("void", "int") or "_get_" in d.name:
        return False
    if not re.match(r"const\s+ckpt_\w+\s*\*", d.params[0]):
        return False
    if re.search(r"_(name|count|kind)$|(^|_)num_|_is_|_has_", d.name):
        return False
    return True


def check(decls):
    v = {r: [] for r in RULES}
    for d in decls:
        where = f"{d.path}:{d.line}"
        if not d.doc:
            v["doc"].append((d.name, f"{where}: {d.name} has no doc comment"))
        if d.ret != "void" and not re.search(r"@returns?\b", d.doc or ""):
            v["return"].append((d.name, f"{where}: {d.name} returns {d.ret} without @return"))
        documented = doc_outs(d.doc)
        outs = []
        for i, p in enumerate(d.params):
            n = param_name(p)
            # a *_free function's `T **` is what it frees, not an output
            freeing = re.search(r"_free(_\w+)?$", d.name) and n not in documented
            if n and not freeing and is_output_param(p, n, documented):
                outs.append(i)
                if n not in documented:
                    v["out-doc"].append((d.name, f"{where}: {d.name}: output '{p}' lacks @param[out] {n}"))
        for n, text in doc_out_texts(d.doc):
            if re.search(r"\bborrowed\b", text, re.I):
                v["out-owned"].append((d.name, f"{where}: {d.name}: output {n} is borrowed, not caller-owned"))
        if d.ret == "int" and outs and outs != list(range(len(outs))):
            first_in = next(i for i in range(len(d.params)) if i not in outs)
            late = [param_name(d.params[i]) for i in outs if i > first_in]
            if late:
                v["out-first"].append((d.name, f"{where}: {d.name}: output {', '.join(late)} after input "
                                       f"'{d.params[first_in]}'"))
    families = {}
    for kind, fams in (("count", COUNT_FAMILIES),):
        members = {f: [d for d in decls if rx.search(d.name)] for f, rx in fams}
        families[kind] = members
    getters = {"_get_": [d for d in decls if "_get_" in d.name],
               "bare": [d for d in decls if is_bare_getter(d)]}
    families["getter"] = getters
    for kind, members in families.items():
        sizes = sorted(((len(ms), f) for f, ms in members.items()), reverse=True)
        if sum(1 for s, _ in sizes if s) < 2:
            continue
        major = sizes[0][1]
        for f, ms in members.items():
            if f == major:
                continue
            for d in ms:
                v["naming"].append((d.name, f"{d.path}:{d.line}: {d.name}: {kind} named '{f}', most use '{major}'"))
    return v, families


def read_known(path):
    known = set()
    if not path:
        return known
    for ln in open(path, encoding="utf-8"):
        ln = ln.split("#", 1)[0].strip()
        if ln:
            rule, name = ln.split()[:2]
            known.add((rule, name))
    return known


def main():
    ap = argparse.ArgumentParser(description="check the public API's rules")
    ap.add_argument("--known", help="accepted violations: 'rule function  # reason' lines")
    ap.add_argument("--check", action="store_true", help="exit 1 on a violation not in --known")
    ap.add_argument("--families", action="store_true", help="list every function of each naming family")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    decls = []
    for h in find_headers(a.dirs):
        rel = os.path.relpath(h)
        decls.extend(parse_header(h, rel))
    v, families = check(decls)
    known = read_known(a.known)
    print(f"functions: {len(decls)}")
    for kind, members in families.items():
        desc = ", ".join(f"'{f}' {len(ms)}" for f, ms in members.items())
        print(f"naming families ({kind}): {desc}")
        if a.families:
            for f, ms in members.items():
                print(f"  {f}: {' '.join(d.name for d in ms)}")
    new = 0
    seen = set()
    for rule in RULES:
        items = v[rule]
        fresh = [(n, msg) for n, msg in items if (rule, n) not in known]
        print(f"rule {rule}: {len(items)} violations, not in the known list: {len(fresh)}")
        for n, msg in items:
            seen.add((rule, n))
            mark = "  " if (rule, n) in known else "! "
            print(f"{mark}{msg}")
        new += len(fresh)
    stale = sorted(known - seen)
    for rule, n in stale:
        print(f"known but fixed (remove from the list): {rule} {n}")
    print(f"violations: {sum(len(x) for x in v.values())}, not in the known list: {new}")
    return 1 if a.check and (new or stale) else 0


if __name__ == "__main__":
    sys.exit(main())

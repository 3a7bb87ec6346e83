#!/usr/bin/env python3
"""Find import circles between the files of each crate.

For every crate under crates/*/src (or the source folders given as arguments),
build a graph file -> file from `use crate::...`, `use super::...` and in-code
`crate::a::b` / `super::x` paths, then print every strongly connected component
of more than one file. Exit 1 if there is one, 0 if every crate's files form a
tree of imports.

A module path resolves to its file: `a::b` is `a/b.rs` or `a/b/mod.rs`; a path
naming an item (`crate::a::Item`) resolves to the deepest module it goes
through, so an item of `lib.rs`/`mod.rs`, re-exported or not, counts as that
file. `super::` inside an inline `mod tests { ... }` refers to the file itself,
which is not an edge. A parent declaring `mod child;` or re-exporting it
(`pub use self::child::X`) is not an import.

Usage: scripts/circles.py [crates/NAME/src ...]
"""

import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# `crate::a::b`, `super::super::a` in code (not in `use`). `self::` paths are
# not edges: a `mod.rs` re-exporting its children (`pub use self::child::X`)
# does not depend on them; a child using the parent's items does.
CODE_PATH = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super)(?:::" + IDENT + r")+)")
INLINE_MOD = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*\{")


def module_files(src):
    """Map module path (tuple) -> file, for every .rs file under src."""
    mods = {}
    for dirpath, _dirs, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, src)
            parts = rel[:-3].split(os.sep)
            if parts in (["lib"], ["main"]):
                path = ()
            elif parts[-1] == "mod":
                path = tuple(parts[:-1])
            else:
                path = tuple(parts)
            # With both lib.rs and main.rs, the library is the crate root that
            # `crate::` names from library files; main.rs is its own root.
            if path == () and () in mods and name == "main.rs":
                continue
            mods[path] = full
    return mods


def strip_code(text):
    """Blank out comments, strings and char literals, keeping line breaks."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        m = re.match(r'b?r(#*)"', text[i:i + 40])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
            continue
        if c == "'":
            # A char literal ('a', '\n', '\u{..}'), not a lifetime ('a).
            m = re.match(r"'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:i + 12])
            if m:
                out.append("' '")
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+", "", tree)
    results = []

    def walk(prefix, s):
        # split s at top-level commas
        depth, start, parts = 0, 0, []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        for p in parts:
            if not p:
                continue
            brace = p.find("{")
            if brace >= 0 and p.endswith("}"):
                head = p[:brace].rstrip(":")
                walk(prefix + ([head] if head else []), p[brace + 1:-1])
            else:
                p = re.sub(r"as" + IDENT + "$", "", p) if "as" in p else p
                results.append("::".join(prefix + [p]))

    walk([], tree)
    return results


def resolve(segments, here, mods):
    """Resolve a path starting with crate/super/self from module `here`
    (a tuple, including inline modules) to a module file, or None."""
    cur = list(here)
    segs = list(segments)
    if segs and segs[0] == "crate":
        cur, segs = [], segs[1:]
    while segs and segs[0] in ("super", "self"):
        if segs[0] == "super":
            if not cur:
                return None
            cur.pop()
        segs = segs[1:]
    path = cur + segs
    # deepest module the path goes through
    for k in range(len(path), -1, -1):
        key = tuple(path[:k])
        if key in mods:
            return mods[key]
    return None


def file_edges(path, modpath, mods):
    text = strip_code(open(path, encoding="utf-8").read())
    targets = set()
    # inline module stack: list of (name, brace depth at which its body opened)
    stack = []
    depth = 0
    pending_use = None
    for line in text.split("\n"):
        m = INLINE_MOD.match(line)
        here = modpath + tuple(name for name, _ in stack)
        # `use` statements, possibly over several lines
        if pending_use is not None:
            pending_use += " " + line
        else:
            um = re.match(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+(.*)", line)
            if um:
                pending_use = um.group(1)
        if pending_use is not None:
            if ";" in pending_use:
                stmt = pending_use.split(";", 1)[0]
                pending_use = None
                for p in expand_use(stmt):
                    segs = p.split("::")
                    if segs[0] in ("crate", "super"):
                        t = resolve(segs, here, mods)
                        if t:
                            targets.add(t)
            line_code = ""
        else:
            line_code = line
        for cm in CODE_PATH.finditer(line_code):
            segs = cm.group(1).split("::")
            t = resolve(segs, here, mods)
            if t:
                targets.add(t)
        # brace tracking for inline modules
        for ch in line:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if stack and depth < stack[-1][1]:
                    stack.pop()
        if m:
            stack.append((m.group(1), depth))
    targets.discard(path)
    return targets


def sccs(graph):
    """Tarjan's algorithm, iterative."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(sorted(comp))
    return out


def crate_circles(src):
    mods = module_files(src)
    graph = {}
    for modpath, path in mods.items():
        graph[path] = file_edges(path, modpath, mods)
    comps = [c for c in sccs(graph) if len(c) > 1]
    return comps, graph


def main(argv):
    srcs = argv[1:]
    if not srcs:
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        crates = os.path.join(root, "crates")
        srcs = sorted(
            os.path.relpath(os.path.join(crates, c, "src"))
            for c in os.listdir(crates)
            if os.path.isdir(os.path.join(crates, c, "src"))
        )
    found = 0
    for src in srcs:
        comps, graph = crate_circles(src)
        for comp in comps:
            found += 1
            members = set(comp)
            print(f"circle in {src} ({len(comp)} files):")
            for f in comp:
                inside = sorted(os.path.relpath(t, src) for t in graph[f] if t in members)
                print(f"  {os.path.relpath(f, src)} -> {', '.join(inside)}")
    if found:
        print(f"{found} import circle(s)")
        return 1
    print("no import circles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

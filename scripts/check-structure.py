#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The shape of the tree, checked (CI's style step runs it after the builds).

  scripts/check-structure.py [BUILD_DIR]

Fails, naming the files, on:
  - an include circle among src/ files: x.c and x.h count as one unit, so
    a.c including b.h while b.c includes a.h is a circle (x_int.h, the
    inside of x shared by the files that implement it, belongs to x);
  - two files of src/ whose compiled code calls each other both ways (read
    from the symbols of BUILD_DIR's objects, default build/), unless the
    top of both says why, in a line holding "Calls both ways with
    <the other's file name>:";
  - a source file of src/ over 1,500 lines (STYLE.md: one idea per file).

Without BUILD_DIR's objects the call check is skipped with a note (the
include and size checks need only the source)."""
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MAX_LINES = 1500
HEAD_LINES = 40  # where "Calls both ways with" must stand


def sources():
    for d, _, names in os.walk(os.path.join(ROOT, "src")):
        for n in sorted(names):
            if n.endswith((".c", ".h")):
                yield os.path.relpath(os.path.join(d, n), ROOT)


def unit(path):
    """x.c and x.h are one unit, and so is x_int.h, the inside of x that
    only the files implementing x share."""
    base = os.path.splitext(path)[0]
    if path.endswith("_int.h") and os.path.exists(os.path.join(ROOT, base[: -len("_int")] + ".c")):
        return base[: -len("_int")]
    return base


def include_graph(files):
    graph = {}
    for path in files:
        with open(os.path.join(ROOT, path), errors="replace") as f:
            for line in f:
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                target = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
                if target.startswith("src/") and unit(target) != unit(path):
                    graph.setdefault(unit(path), set()).add(unit(target))
    return graph


def circles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def call_graph(build):
    """Calls between src/ files, from nm of the library's objects."""
    objdir = os.path.join(build, "CMakeFiles", "dlock_objects.dir")
    objects = []
    for d, _, names in os.walk(objdir):
        objects += [os.path.join(d, n) for n in names if n.endswith(".c.o")]
    if not objects:
        return None
    defined, used = {}, {}
    for o in objects:
        src = os.path.relpath(o, objdir)[: -len(".o")]
        out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBR":
                defined[parts[2]] = src
            elif len(parts) == 2 and parts[0] == "U":
                used.setdefault(src, set()).add(parts[1])
    graph = {}
    for src, symbols in used.items():
        for s in symbols:
            if s in defined and defined[s] != src:
                graph.setdefault(src, set()).add(defined[s])
    return graph


def says_why(path, other):
    want = "Calls both ways with " + os.path.basename(other) + ":"
    try:
        with open(os.path.join(ROOT, path), errors="replace") as f:
            head = "".join(f.readline() for _ in range(HEAD_LINES))
    except OSError:
        return False
    return want in " ".join(head.split())


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    files = list(sources())
    problems = []

    for comp in circles(include_graph(files)):
        problems.append("include circle: " + " -> ".join(comp) + " (x.c and x.h are one unit)")

    for path in files:
        with open(os.path.join(ROOT, path), errors="replace") as f:
            n = sum(1 for _ in f)
        if n > MAX_LINES:
            problems.append(f"{path}: {n} lines, over {MAX_LINES}: split it by idea")

    calls = call_graph(build)
    if calls is None:
        print(f"check-structure: no objects under {build}: calls not checked")
    else:
        for a in sorted(calls):
            for b in sorted(calls[a]):
                if a < b and a in calls.get(b, ()):
                    if not (says_why(a, b) and says_why(b, a)):
                        problems.append(
                            f"{a} and {b} call each other both ways, and the top of both does "
                            f"not say why ('Calls both ways with <file>: reason')")

    for p in problems:
        print("check-structure: " + p)
    if problems:
        return 1
    print(f"check-structure: {len(files)} files, no include circle, no unexplained two-way "
          f"calls, none over {MAX_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())

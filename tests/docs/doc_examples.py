#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""doc_examples.py SOURCE_DIR LIB_DIR CC [CFLAGS]: the C examples of the
documents, compiled from the documents themselves so they cannot drift.

The examples are every ```c block of README.md, the example in the opening
comment of include/dlock.h (its first block indented past " *    "), and
every .nf/.fi display of docs/dlock.1 that calls a dlock_ function or
includes a header. Each is compiled against the built library (LIB_DIR)
with warnings as errors:

  - a block with a main() is a program and is compiled exactly as printed,
    then run against a redis-server of its own (tests/support/with_redis.sh
    gives it the URL as its first argument) and must exit 0;
  - any other block is a fragment on purpose: it becomes the body of a
    function, after dlock.h and the helpers it calls and leaves to the
    reader (die, run_billing, on_lost), and linked (not run).

A heading that promises "ten lines" is held to it: the program under it has
at most ten lines in main(). CFLAGS (one word list) is added to every
compile, e.g. the sanitizer the library was built with.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

WARNINGS = ["-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"]

# What fragments call and leave to the reader, by name.
HELPERS = {
    "die": 'static void die(const char *msg) { fprintf(stderr, "%s\\n", msg); exit(1); }',
    "run_billing": "static void run_billing(uint64_t fence) { (void) fence; }",
    "on_lost": "static void on_lost(dlock_lock *l, int code, const char *why, void *arg) {}",
}


class Example:
    def __init__(self, doc, line, text, heading=""):
        self.doc, self.line, self.text, self.heading = doc, line, text, heading

    def where(self):
        return "%s:%d" % (self.doc, self.line)

    def is_program(self):
        return re.search(r"\bmain\s*\(", self.text) is not None


def markdown_examples(path, doc):
    out, heading, block, start = [], "", None, 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if block is None and line.startswith("#"):
                heading = line.lstrip("# ")
            elif block is None and line == "```c":
                block, start = [], n + 1
            elif block is not None and line == "```":
                out.append(Example(doc, start, "\n".join(block) + "\n", heading))
                block = None
            elif block is not None:
                block.append(line)
    return out


def header_example(path, doc):
    """The first indented block of the header's opening comment."""
    block, start = [], 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if line.startswith(" */"):
                break
            if line.startswith(" *     "):
                if not block:
                    start = n
                block.append(line[len(" *     "):])
            elif block:
                break
    return [Example(doc, start, "\n".join(block) + "\n")] if block else []


def roff_text(line):
    """A line of a .nf display as the reader sees it."""
    for escape, char in (("\\-", "-"), ("\\e", "\\"), ("\\(aq", "'"), ("\\(dq", '"'), ("\\&", "")):
        line = line.replace(escape, char)
    return line


def man_examples(path, doc):
    out, block, start = [], None, 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if line == ".nf":
                block, start = [], n + 1
            elif line == ".fi" and block is not None:
                text = "\n".join(block) + "\n"
                if re.search(r"\bdlock_[a-z_]+\s*\(|^#include", text, re.M):
                    out.append(Example(doc, start, text))
                block = None
            elif block is not None:
                block.append(roff_text(line))
    return out


def as_source(ex):
    """The C file to compile: a program as printed, a fragment wrapped."""
    if ex.is_program():
        return '#line %d "%s"\n%s' % (ex.line, ex.doc, ex.text)
    includes = [l for l in ex.text.splitlines() if l.startswith("#include")]
    body = [l if not l.startswith("#include") else "" for l in ex.text.splitlines()]
    helpers = [h for name, h in HELPERS.items() if re.search(r"\b%s\b" % name, ex.text)]
    head = ["#include <%s>" % h for h in ("dlock.h", "stdint.h", "stdio.h", "stdlib.h")]
    head += includes + ["__attribute__((unused)) " + h for h in helpers]
    function = ["void doc_fragment(void);", "void doc_fragment(void)", "{"]
    function += ['#line %d "%s"' % (ex.line, ex.doc)] + body + ["}"]
    # linked, so that every function it calls must exist in the library
    linked = ["int main(void)", "{", "    return 0;", "}", ""]
    return "\n".join(head + function + linked)


def main_lines(text):
    """The lines of main()'s body that are not blank, or None without one."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"int\s+main\s*\(", line):
            opening = i if line.rstrip().endswith("{") else i + 1
            try:
                closing = lines.index("}", opening + 1)
            except ValueError:
                return None
            return [l for l in lines[opening + 1 : closing] if l.strip()]
    return None


def check(ex, src, lib, cc, cflags, work, index):
    """Compiles (and for a program, runs) one example: (ok, what to say)."""
    name = os.path.join(work, "example%d" % index)
    with open(name + ".c", "w", encoding="utf-8") as f:
        f.write(as_source(ex))
    cmd = [cc, *WARNINGS, *cflags, "-I", os.path.join(src, "include"), "-o", name, name + ".c"]
    cmd += ["-L", lib, "-ldlock", "-Wl,-rpath," + lib]
    built = subprocess.run(cmd, capture_output=True, text=True)
    if built.returncode != 0:
        return False, "does not compile (%s):\n%s" % (shlex.join(cmd), built.stderr)
    if "ten lines" in ex.heading:
        body = main_lines(ex.text)
        if body is None:
            return False, "is under '%s' but is not a whole program with a main()" % ex.heading
        if len(body) > 10:
            return False, "is under '%s' but main() has %d lines" % (ex.heading, len(body))
    if not ex.is_program():
        return True, "compiles"
    with_redis = os.path.join(src, "tests", "support", "with_redis.sh")
    ran = subprocess.run(["bash", with_redis, name], capture_output=True, text=True, timeout=60)
    if ran.returncode != 0:
        return False, "compiles but fails against a redis-server (status %d):\n%s%s" % (
            ran.returncode,
            ran.stdout,
            ran.stderr,
        )
    return True, "compiles and runs: " + (ran.stdout.strip() or "(no output)")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    src, lib, cc = sys.argv[1:4]
    cflags = sys.argv[4].split() if len(sys.argv) > 4 else []
    examples = (
        markdown_examples(os.path.join(src, "README.md"), "README.md")
        + header_example(os.path.join(src, "include", "dlock.h"), "include/dlock.h")
        + man_examples(os.path.join(src, "docs", "dlock.1"), "docs/dlock.1")
    )
    failed = 0
    with tempfile.TemporaryDirectory(prefix="dlock-doc-examples.") as work:
        for i, ex in enumerate(examples):
            ok, said = check(ex, src, lib, cc, cflags, work, i)
            kind = "program" if ex.is_program() else "fragment"
            print("%s %s (%s) %s" % ("ok  " if ok else "FAIL", ex.where(), kind, said))
            failed += not ok
    for doc in ("README.md", "include/dlock.h"):
        if not any(ex.doc == doc for ex in examples):
            print("FAIL %s: no C example found (the extraction no longer fits it)" % doc)
            failed += 1
    print("%d examples, %d failed" % (len(examples), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

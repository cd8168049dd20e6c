#!/usr/bin/env python3
"""tests/docs/check_readme.py - README.md stays short and every docs link leads somewhere.

Checked (test docs-readme, suite docs):
  - README.md has fewer than 200 lines: it is what a newcomer reads first;
    the rest lives in docs/*.md and the man pages (deploy/man/*.scd).
  - every relative Markdown link of README.md and docs/*.md names a file
    of the tree, and a `#fragment` into a .md file names one of its
    headings (GitHub's anchors: lower case, punctuation dropped, spaces
    turned into hyphens);
  - every docs/ Markdown file that a file of agent/, proto/, haproxy/, deploy/,
    debian/ or tests/ mentions exists, and no file of agent/, proto/,
    haproxy/ or deploy/ sends its reader to the README for details (the
    README no longer holds them).
A failure names FILE:LINE.
"""
import glob
import os
import re
import sys

MAX_README_LINES = 200

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
DOCREF = re.compile(r"\bdocs/([A-Za-z0-9_.-]+\.md)\b")


def source_root():
    return os.environ.get("WARMLANE_SOURCE_ROOT") or \
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def anchors(path):
    out, fenced = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            m = None if fenced else HEADING.match(line)
            if m:
                a = m.group(1).strip().lower()
                a = re.sub(r"[^\w\- ]", "", a).replace(" ", "-")
                base, n = a, 1
                while a in out:
                    a = f"{base}-{n}"
                    n += 1
                out.add(a)
    return out


def main():
    top = source_root()
    fails = []
    readme = os.path.join(top, "README.md")
    with open(readme, encoding="utf-8") as f:
        n = sum(1 for _ in f)
    if n >= MAX_README_LINES:
        fails.append(f"README.md:{n}: {n} lines, the bound is {MAX_README_LINES - 1}: "
                     "move the detail to docs/ and link it")
    else:
        print(f"ok   README.md: {n} lines (< {MAX_README_LINES})")

    docs = [readme] + sorted(glob.glob(os.path.join(top, "docs", "*.md")))
    links = 0
    for p in docs:
        rel = os.path.relpath(p, top)
        fenced = False
        with open(p, encoding="utf-8") as f:
            for ln, line in enumerate(f, 1):
                if line.lstrip().startswith("```"):
                    fenced = not fenced
                if fenced:
                    continue
                for target in LINK.findall(line):
                    if re.match(r"^[a-z]+:", target):
                        continue  # http:, https:, mailto:
                    links += 1
                    path, _, frag = target.partition("#")
                    dest = os.path.normpath(os.path.join(os.path.dirname(p), path)) if path else p
                    if not os.path.exists(dest):
                        fails.append(f"{rel}:{ln}: link to {target}: no such file")
                    elif frag and dest.endswith(".md") and frag not in anchors(dest):
                        fails.append(f"{rel}:{ln}: link to {target}: no heading "
                                     f"#{frag} in {os.path.relpath(dest, top)}")
    print(f"     {links} relative links checked")

    refs = 0
    for d in ("agent", "proto", "haproxy", "deploy", "debian", "tests"):
        for p in glob.glob(os.path.join(top, d, "**", "*"), recursive=True):
            if not os.path.isfile(p) or "/corpus/" in p or "/data/" in p:
                continue
            try:
                with open(p, encoding="utf-8") as f:
                    lines = f.read().split("\n")
            except (UnicodeDecodeError, OSError):
                continue
            rel = os.path.relpath(p, top)
            for ln, line in enumerate(lines, 1):
                for name in DOCREF.findall(line):
                    refs += 1
                    if not os.path.exists(os.path.join(top, "docs", name)):
                        fails.append(f"{rel}:{ln}: docs/{name}: no such file")
                if d in ("agent", "proto", "haproxy", "deploy") and "README" in line:
                    fails.append(f"{rel}:{ln}: points at the README; point at docs/ "
                                 "(or the man pages) instead")
    print(f"ok   {refs} mentions of docs/*.md in the tree checked")

    for f in fails:
        print("FAIL " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

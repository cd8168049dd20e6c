#!/usr/bin/env python3
"""tests/docs/check_peers_cfg.py - each haproxy/*-peers.cfg is its base config plus the hint's blocks only.

haproxy-2.6-peers.cfg and haproxy-3.1-peers.cfg are haproxy-2.6.cfg and
haproxy-3.1.cfg with the shared warm hint added (docs/peers.md). So that a
change to a base config cannot be forgotten in its peers copy, this check
removes from the peers config its opening comment (up to the first blank
line) and every block from a `# [peers]` line to the next `# [/peers]` line
(the blank line after a top-level block goes with it), and requires the base config,
without its opening comment, to be what is left, byte for byte. A failure
names the first line that differs.
"""
import difflib
import os
import re
import sys


def root():
    return os.environ.get("WARMLANE_SOURCE_ROOT") or \
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def body(text):
    return text.split("\n\n", 1)[1] if "\n\n" in text else ""


def strip_blocks(text, name):
    out, inside, after = [], False, False
    for n, line in enumerate(text.split("\n"), 1):
        if re.match(r"^\s*# \[peers\]", line):
            if inside:
                sys.exit(f"{name}:{n}: a [peers] block inside another")
            inside = True
            continue
        if re.match(r"^\s*# \[/peers\]", line):
            if not inside:
                sys.exit(f"{name}:{n}: [/peers] without [peers]")
            # a top-level block (a section) brings its blank line
            inside, after = False, line.startswith("#")
            continue
        if inside:
            continue
        if after and line == "":
            after = False
            continue
        after = False
        out.append(line)
    if inside:
        sys.exit(f"{name}: a [peers] block is never closed")
    return "\n".join(out)


def main():
    bad = 0
    for base in ("haproxy-2.6.cfg", "haproxy-3.1.cfg"):
        peers = base.replace(".cfg", "-peers.cfg")
        with open(os.path.join(root(), "haproxy", base)) as f:
            want = body(f.read())
        with open(os.path.join(root(), "haproxy", peers)) as f:
            got = strip_blocks(body(f.read()), f"haproxy/{peers}")
        if got != want:
            bad += 1
            diff = difflib.unified_diff(want.split("\n"), got.split("\n"),
                                        f"haproxy/{base}", f"haproxy/{peers} (hint blocks removed)",
                                        lineterm="", n=1)
            print("\n".join(list(diff)[:40]))
        else:
            print(f"ok   haproxy/{peers} = haproxy/{base} + its [peers] blocks")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

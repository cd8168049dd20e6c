#!/usr/bin/env python3
"""tests/docs/check_man.py - warmlane.yaml(5) and deploy/warmlane.yaml name the same fields.

The configuration's reference lives once, in warmlane.yaml(5)
(deploy/man/warmlane.yaml.5.scd); deploy/warmlane.yaml is the commented
example with every field at its default (test agent-example-config checks
that the agent accepts it). This test (docs-man, suite docs) checks that
each field of the example is described in the man page, and each field the
man page describes is in the example, so that a key added to one is added
to the other. A failure names FILE:LINE.

Fields of the example are read by indentation (the file is block YAML, a
list item's keys indented under it); the man page's are its term lines
(`*name*` at the start of a line whose description follows, indented
by a tab): `*a.b*` in
any section, or a bare `*b*` in the section of a mapping (POLICY for
policy, ENDPOINTS for endpoints).
"""
import os
import re
import sys

# Sections of the man page whose bare terms are the fields of one mapping.
SECTION_OF = {"POLICY": "policy", "ENDPOINTS": "endpoints", "BACKENDS": "backends"}
# Sections whose terms are not configuration fields.
NOT_FIELDS = {"NAME", "SYNOPSIS", "DESCRIPTION", "EXAMPLE", "VARIABLES", "SEE ALSO"}

KEY = re.compile(r"^(?P<indent> *)(?P<item>- )?(?P<key>[a-z_0-9]+):")
TERM = re.compile(r"\*([a-z_0-9.]+)\*")

COMMENTED = re.compile(r"^(\s*)# ([a-z_]+: [\"\[{0-9].*)$")
SECTION_START = re.compile(r"^#[a-z_]+:\s*$")


def source_root():
    return os.environ.get("WARMLANE_SOURCE_ROOT") or \
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def example_fields(path):
    """{dotted path: line} of every mapping key of the example."""
    out, stack = {}, []  # stack of (indent, key)
    in_block = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            # An optional field shown commented out ("    # key: VALUE",
            # the "#" where the key would be, VALUE quoted, a list, a
            # mapping or a number) is shown all the same.
            # A whole optional section commented out: "#key:" at the
            # start of a line, then its lines as "#  ...".
            c = COMMENTED.match(line)
            if SECTION_START.match(line):
                line, in_block = line[1:], True
            elif in_block and line.startswith("#  "):
                line = line[1:]
            elif c:
                line, in_block = c.group(1) + c.group(2) + "\n", False
            elif line.lstrip().startswith("#"):
                in_block = False
                continue
            else:
                in_block = False
            m = KEY.match(line)
            if not m:
                continue
            indent = len(m.group("indent")) + (2 if m.group("item") else 0)
            while stack and stack[-1][0] >= indent:
                stack.pop()
            name = ".".join([k for _, k in stack] + [m.group("key")])
            out.setdefault(name, n)
            stack.append((indent, m.group("key")))
    # A mapping is described through its fields, not as a field itself.
    parents = {k.rsplit(".", 1)[0] for k in out if "." in k}
    return {k: v for k, v in out.items() if k not in parents}


def man_fields(path):
    """{dotted path: line} of every field the man page describes."""
    out, section = {}, None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n") + [""]
    for n, line in enumerate(lines[:-1], 1):
        if line.startswith("# "):
            section = line[2:].strip()
            continue
        # A term: starts with *, its description tab-indented below it.
        if section in NOT_FIELDS or not line.startswith("*") or \
                not lines[n].startswith("\t"):
            continue
        for term in TERM.findall(line):
            if "." not in term and section in SECTION_OF:
                term = SECTION_OF[section] + "." + term
            out.setdefault(term, n)
    return out


def main():
    top = source_root()
    ex_path = os.path.join(top, "deploy", "warmlane.yaml")
    man_path = os.path.join(top, "deploy", "man", "warmlane.yaml.5.scd")
    ex, man = example_fields(ex_path), man_fields(man_path)
    fails = []
    for k, n in sorted(ex.items(), key=lambda kv: kv[1]):
        if k not in man:
            fails.append(f"deploy/warmlane.yaml:{n}: {k} is not described in "
                         "deploy/man/warmlane.yaml.5.scd")
    for k, n in sorted(man.items(), key=lambda kv: kv[1]):
        if k not in ex:
            fails.append(f"deploy/man/warmlane.yaml.5.scd:{n}: {k} is not in "
                         "deploy/warmlane.yaml (the example shows every field)")
    for f in fails:
        print("FAIL " + f)
    if not fails:
        print(f"ok   {len(ex)} fields: each in deploy/warmlane.yaml and in warmlane.yaml(5)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

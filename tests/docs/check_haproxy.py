#!/usr/bin/env python3
"""tests/docs/check_haproxy.py - every HAProxy configuration of the docs passes `haproxy -c`.

Usage: check_haproxy.py VERSION      (2.6, 3.0 or 3.2)

What is checked, as a user would paste it:
  - each fenced block of README.md and docs/*.md whose info string starts
    with `haproxy`; it must say which versions it is for, as in
        ```haproxy versions=2.6,3.0,3.2
    (GitHub shows the block as HAProxy config and ignores the rest): the
    tested versions 2.6, 3.0, 3.2, or the ranges 2.6-3.0, 3.1+ (checked
    with 3.2) and 2.6+ (all three). A
    fragment that is not a whole configuration must not be fenced as
    `haproxy` (use a plain indented block): every `haproxy` block is whole.
  - each haproxy/*.cfg, whose versions are on a comment line
        # versions=2.6,3.0
Each one claiming VERSION is given to that version's `haproxy -c -f`.

The test completes nothing: no section, line or option is added. The only
rewrites, so that the check does not depend on files installed under /etc,
are these two paths, to the files the docs tell the user to copy there:
  /etc/haproxy/warmlane.spoe.conf  -> haproxy/warmlane.spoe.conf
  /etc/haproxy/warmlane-keys.map   -> a copy of haproxy/keys.map.example
(`haproxy -c` opens both; it binds nothing, connects nowhere and does not
chroot, so socket, chroot and log paths stay as written.)

A document may also show the SPOE file itself, in one block fenced as
    ```spoe
Its lines, comments and blank lines aside, must be those of
haproxy/warmlane.spoe.conf, and that document's `haproxy` blocks are
checked with the block as their SPOE file (so what a reader copies from the
page is what passed).

And, beyond what `haproxy -c` sees, what makes fail-open fast: a
configuration with an SPOE filter has the backend its SPOE file names, with
`option spop-check` and a `server ... check` line (without them HAProxy
keeps sending to a dead agent and every request waits `timeout processing`).

Binaries: 2.6 is Debian's (`haproxy` in PATH, else /usr/sbin/haproxy), 3.0
and 3.2 are $WARMLANE_HAPROXY_DIR/haproxy-3.x (tests/haproxy/fetch-haproxy.sh).
A missing binary, or no configuration claiming VERSION, is a SKIP (77). A
failure names FILE:LINE of the block (or file) at fault.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

VERSIONS = ("2.6", "3.0", "3.2")
SKIP = 77

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
CFG_CLAIM = re.compile(r"^#\s*versions=(?P<v>[0-9.,+-]+)")


def source_root():
    return os.environ.get("WARMLANE_SOURCE_ROOT") or \
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# Ranges a snippet may claim, and the tested versions that stand for them.
ALIASES = {"2.6-3.0": ("2.6", "3.0"), "3.1+": ("3.2",), "2.6+": VERSIONS}


def parse_versions(s):
    vs, bad = [], []
    for v in (x.strip() for x in s.split(",")):
        if v in VERSIONS:
            vs.append(v)
        elif v in ALIASES:
            vs.extend(ALIASES[v])
        elif v:
            bad.append(v)
    return vs, bad


def markdown_blocks(path, kind="haproxy"):
    """(line, versions or None, problem or None, text) of each `haproxy` block;
    with kind="spoe", (line, None, None, text) of each `spoe` block."""
    out = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group("indent")), m.group("fence"), m.group("info").strip()
        start = i + 1
        body = []
        i += 1
        while i < len(lines):
            e = FENCE.match(lines[i])
            if e and e.group("fence")[0] == fence[0] and len(e.group("fence")) >= len(fence) \
                    and not e.group("info").strip():
                break
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        words = info.split()
        if not words or words[0] != kind:
            continue
        if kind != "haproxy":
            out.append((start, None, None, "\n".join(body) + "\n"))
            continue
        claim = [w for w in words[1:] if w.startswith("versions=")]
        if not claim:
            out.append((start, None, "a haproxy block claims no version "
                        f"(```haproxy versions={','.join(VERSIONS)})", ""))
            continue
        vs, bad = parse_versions(claim[0][len("versions="):])
        problem = (f"unknown version(s) {bad}: tested are {list(VERSIONS)}, "
                   f"ranges {list(ALIASES)}") if bad or not vs else None
        out.append((start, vs, problem, "\n".join(body) + "\n"))
    return out


def cfg_file(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for n, line in enumerate(text.split("\n"), 1):
        m = CFG_CLAIM.match(line)
        if m:
            vs, bad = parse_versions(m.group("v"))
            problem = (f"unknown version(s) {bad}: tested are {list(VERSIONS)}, "
                   f"ranges {list(ALIASES)}") if bad or not vs else None
            return (1, vs, problem, text)
    return (1, None, "no `# versions=...` line naming the HAProxy versions it is for", text)


def binary_for(version):
    if version == "2.6":
        path = shutil.which("haproxy") or "/usr/sbin/haproxy"
    else:
        d = os.environ.get("WARMLANE_HAPROXY_DIR", "")
        path = os.path.join(d, "haproxy-" + version) if d else ""
    if not path or not os.access(path, os.X_OK):
        return None
    try:
        out = subprocess.run([path, "-v"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"HAProxy version (\S+)", out)
    return path if m and m.group(1).startswith(version + ".") else None


def sections(text):
    """{(kind, name): [lines]} of a configuration, comments dropped."""
    out, cur = {}, None
    for line in text.split("\n"):
        s = line.split("#", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
        if not s.strip():
            continue
        if not line[0].isspace():
            w = s.split()
            cur = (w[0], w[1] if len(w) > 1 else "")
            out.setdefault(cur, [])
        elif cur is not None:
            out[cur].append(s.strip())
    return out


def significant(text):
    """A configuration's lines without comments, blank lines and indentation."""
    return [x.strip() for x in text.split("\n") if x.strip() and not x.strip().startswith("#")]


def spoe_backend(spoe_path):
    with open(spoe_path, encoding="utf-8") as f:
        for line in f:
            w = line.split("#", 1)[0].split()
            if len(w) == 2 and w[0] == "use-backend":
                return w[1]
    return None


def lint(text, spoe_path):
    """What haproxy -c accepts but fail-open needs; a list of problems."""
    if not re.search(r"^\s*filter spoe\b", text, re.M):
        return []
    name = spoe_backend(spoe_path)
    secs = sections(text)
    be = secs.get(("backend", name))
    if be is None:
        return [f"an SPOE filter but no `backend {name}` (the SPOE file's use-backend)"]
    probs = []
    if "option spop-check" not in be:
        probs.append(f"backend {name}: no `option spop-check`")
    if not any(re.match(r"server\s+\S+\s+\S+.*\scheck(\s|$)", x) for x in be):
        probs.append(f"backend {name}: no `server ... check` line (a dead agent is never "
                     "marked down and every request waits `timeout processing`)")
    return probs


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in VERSIONS:
        print(f"usage: {sys.argv[0]} {'|'.join(VERSIONS)}", file=sys.stderr)
        return 2
    version = sys.argv[1]
    top = source_root()
    items = []
    failures = []
    spoe = os.path.join(top, "haproxy", "warmlane.spoe.conf")
    with open(spoe, encoding="utf-8") as f:
        shipped = significant(f.read())
    doc_spoe = {}  # document -> the text of its own ```spoe block
    docs = [os.path.join(top, "README.md")] + sorted(glob.glob(os.path.join(top, "docs", "*.md")))
    for p in docs:
        where = os.path.relpath(p, top)
        for line, vs, problem, text in markdown_blocks(p):
            items.append((where, line, vs, problem, text))
        shown = markdown_blocks(p, "spoe")
        if len(shown) > 1:
            failures.append(f"{where}:{shown[1][0]}: a second ```spoe block (one SPOE file per page)")
        for line, _, _, text in shown[:1]:
            if significant(text) != shipped:
                failures.append(f"{where}:{line}: the SPOE file shown differs from "
                                "haproxy/warmlane.spoe.conf (comments and blank lines aside)")
            else:
                doc_spoe[where] = text
    for p in sorted(glob.glob(os.path.join(top, "haproxy", "*.cfg"))):
        line, vs, problem, text = cfg_file(p)
        items.append((os.path.relpath(p, top), line, vs, problem, text))

    for where, line, vs, problem, _ in items:
        if problem:
            failures.append(f"{where}:{line}: {problem}")
    mine = [it for it in items if not it[3] and version in it[2]]

    binary = binary_for(version)
    if binary is None:
        for f in failures:
            print("FAIL " + f)
        print(f"no HAProxy {version} binary (run tests/haproxy/fetch-haproxy.sh)")
        return 1 if failures else SKIP
    with tempfile.TemporaryDirectory(prefix="warmlane-docs-") as tmp:
        keys = os.path.join(tmp, "warmlane-keys.map")
        shutil.copyfile(os.path.join(top, "haproxy", "keys.map.example"), keys)
        spoe_of = {}
        for n, (where, text) in enumerate(sorted(doc_spoe.items())):
            spoe_of[where] = os.path.join(tmp, f"spoe{n}.conf")
            with open(spoe_of[where], "w", encoding="utf-8") as f:
                f.write(text)
        for n, (where, line, vs, _, text) in enumerate(mine):
            cfg = text.replace("/etc/haproxy/warmlane.spoe.conf", spoe_of.get(where, spoe)) \
                      .replace("/etc/haproxy/warmlane-keys.map", keys)
            path = os.path.join(tmp, f"snippet{n}.cfg")
            with open(path, "w", encoding="utf-8") as f:
                f.write(cfg)
            r = subprocess.run([binary, "-c", "-f", path], capture_output=True, text=True,
                               timeout=60)
            probs = lint(text, spoe)
            if r.returncode != 0:
                # HAProxy's "[FILE:N]": line N of the block, line+N of where
                out = re.sub(re.escape(path) + r":(\d+)",
                             lambda m: f"{where}:{line + int(m.group(1))}",
                             r.stdout + r.stderr).replace(path, where)
                if where in spoe_of:
                    out = out.replace(spoe_of[where], f"{where}'s ```spoe block")
                failures.append(f"{where}:{line}: haproxy {version} -c failed:\n{out.rstrip()}")
            elif probs:
                failures.extend(f"{where}:{line}: {p}" for p in probs)
            else:
                print(f"ok   {where}:{line} (HAProxy {version})")
    for f in failures:
        print("FAIL " + f)
    if failures:
        return 1
    if not mine:
        print(f"no configuration claims HAProxy {version}")
        return SKIP
    print(f"{len(mine)} configuration(s) pass haproxy -c with HAProxy {version} ({binary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

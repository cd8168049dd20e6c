#!/usr/bin/env python3
"""Every ```yaml block of README.md and docs/*.md is a warmlane
configuration that `warmlane --check-config` accepts (suite docs).

A block that is only a part of one says so: ```yaml fragment. Usage:
check_yaml.py PATH-TO-WARMLANE. Prints one line per block, FILE:LINE at
fault with the agent's own errors (they name the block's line:col)."""
import glob
import os
import subprocess
import sys
import tempfile


def source_root():
    return os.environ.get("WARMLANE_SOURCE_ROOT") or \
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def blocks(path):
    """(line of the fence, info string, text) of each fenced yaml block."""
    out, cur = [], None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            s = line.rstrip("\n")
            if cur is None and s.startswith("```yaml"):
                cur = (n, s[3:].strip(), [])
            elif cur is not None and s.startswith("```"):
                out.append((cur[0], cur[1], "".join(cur[2])))
                cur = None
            elif cur is not None:
                cur[2].append(line)
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    agent, top = sys.argv[1], source_root()
    files = [os.path.join(top, "README.md")] + \
        sorted(glob.glob(os.path.join(top, "docs", "*.md")))
    checked = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            rel = os.path.relpath(path, top)
            for line, info, text in blocks(path):
                if "fragment" in info.split():
                    continue
                cfg = os.path.join(tmp, "block.yaml")
                with open(cfg, "w", encoding="utf-8") as f:
                    f.write(text)
                r = subprocess.run([agent, "--check-config", cfg],
                                   capture_output=True, text=True)
                checked += 1
                if r.returncode != 0:
                    failed += 1
                    print(f"FAIL {rel}:{line}: warmlane --check-config refused it "
                          f"(positions are in the block, from its first line):")
                    sys.stdout.write("     " + r.stderr.replace(cfg, "block").replace("\n", "\n     ").rstrip() + "\n")
                else:
                    print(f"ok   {rel}:{line}")
    print(f"     {checked} configuration blocks checked")
    return 1 if failed or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

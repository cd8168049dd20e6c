#!/usr/bin/env bash
# promtool_check.sh - runs the warmlane binary with metrics on a free port and lints its /metrics with promtool.
#
# Usage: promtool_check.sh PATH-TO-WARMLANE
# Exit 77 (meson: skipped) when promtool (Debian package prometheus) or
# python3 is missing.
set -euo pipefail

warmlane=$1
command -v promtool >/dev/null || { echo "promtool not found: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }

. "$(dirname "$0")/metrics_agent.sh"
agent_dir promtool
# A quote and a backslash in the key id exercise label escaping.
metrics_agent_start "$warmlane" "$dir" "'k\"1\\'"

python3 - "$port" >"$dir/metrics.txt" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5) as r:
    ctype = r.headers.get("Content-Type", "")
    if ctype != "text/plain; version=0.0.4; charset=utf-8":
        sys.exit(f"unexpected Content-Type {ctype!r}")
    sys.stdout.write(r.read().decode())
PY

echo "$(grep -c '^# TYPE' "$dir/metrics.txt") families, $(grep -vc '^#' "$dir/metrics.txt") samples"
promtool check metrics <"$dir/metrics.txt"
echo "promtool check metrics: ok"

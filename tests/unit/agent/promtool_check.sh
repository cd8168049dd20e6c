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

dir=$(mktemp -d "${TMPDIR:-/tmp}/warmlane-promtool.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

# metrics.listen refuses port 0: ask the kernel for a free port, then
# read back the one the agent logs. A quote and a backslash in the key id
# exercise label escaping.
free_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$dir/warmlane.yaml" <<EOF
listen: ["unix:$dir/spoa.sock"]
metrics: { listen: "127.0.0.1:$free_port" }
runtime_api: { socket: "" }
state: { file: "" }
endpoints:
  - { backend: llm, server: gpu1, models: [m1], keys: ['k"1\\'] }
  - { backend: llm, server: gpu2 }
EOF

"$warmlane" --config "$dir/warmlane.yaml" 2>"$dir/stderr.log" &
pid=$!

port=
for _ in $(seq 100); do
	port=$(sed -n 's/.*msg="metrics listening".* port=\([0-9]*\).*/\1/p' "$dir/stderr.log" | head -n1)
	[ -n "$port" ] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.05
done
if [ -z "$port" ]; then
	echo "warmlane did not report a metrics port:" >&2
	cat "$dir/stderr.log" >&2
	exit 1
fi

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

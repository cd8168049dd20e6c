#!/usr/bin/env bash
# check_dashboard.sh - every metric the Grafana dashboard queries exists in the /metrics of the running agent.
#
# Usage: check_dashboard.sh PATH-TO-WARMLANE DASHBOARD.json
# Exit 77 (meson: skipped) when python3 is missing.
set -euo pipefail

warmlane=$1
dashboard=$2
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/warmlane-dashboard.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

# metrics.listen refuses port 0: ask the kernel for a free port, then read
# back the one the agent logs. Two endpoints, one with a key, so that the
# per-endpoint families have samples.
free_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$dir/warmlane.yaml" <<YAML
listen: ["unix:$dir/spoa.sock"]
metrics: { listen: "127.0.0.1:$free_port" }
runtime_api: { socket: "" }
state: { file: "" }
endpoints:
  - { backend: llm, server: gpu1, models: [m1], keys: [k1] }
  - { backend: llm, server: gpu2 }
YAML

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

python3 - "$port" "$dashboard" <<'PY'
import json, re, sys, urllib.request

port, path = sys.argv[1], sys.argv[2]
with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
    text = r.read().decode()

# Names a scrape exposes: every family (# TYPE, present even when a
# labelled family has no sample yet) and every sample name (_bucket...).
live = set()
for line in text.splitlines():
    if line.startswith("# TYPE "):
        live.add(line.split()[2])
    elif line and not line.startswith("#"):
        live.add(re.split(r"[{ ]", line, 1)[0])

with open(path) as f:
    dash = json.load(f)

exprs = []
def walk(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k in ("expr", "query", "definition") and isinstance(v, str):
                exprs.append(v)
            else:
                walk(v)
    elif isinstance(o, list):
        for v in o:
            walk(v)
walk(dash)

used = set()
for e in exprs:
    used.update(re.findall(r"\bwarmlane_[a-zA-Z0-9_]+", e))
missing = sorted(used - live)
print(f"{len(exprs)} queries, {len(used)} metric names, {len(live)} live names")
if not exprs or not used:
    sys.exit("the dashboard has no warmlane query")
if missing:
    sys.exit("not in /metrics: " + ", ".join(missing))
print("every metric the dashboard queries is exposed")
PY

#!/usr/bin/env bash
# check_dashboard.sh - every metric the Grafana dashboard queries exists in the /metrics of the running agent.
#
# Usage: check_dashboard.sh PATH-TO-WARMLANE DASHBOARD.json
# Exit 77 (meson: skipped) when python3 is missing.
set -euo pipefail

warmlane=$1
dashboard=$2
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }

. "$(dirname "$0")/../../tests/unit/agent/metrics_agent.sh"
agent_dir dashboard
# Two endpoints, one with a key, so that the per-endpoint families have samples.
metrics_agent_start "$warmlane" "$dir" k1

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

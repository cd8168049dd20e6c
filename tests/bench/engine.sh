#!/bin/bash
# engine.sh - routing policies on a real llama.cpp fleet, by hand, not in CI.
#
# The same fleet and driver as the e2e suite `engine` (tests/engine,
# tests/e2e/engine.py): four llama-servers from Debian sid, one thread each,
# a tiny random-weight model, the official OpenAI Node client. For each case
# (healthy, slow, kill, 429) and each policy (warmlane, leastconn,
# consistent hashing with hash-balance-factor, a stick table with
# leastconn), from a cold fleet, the same conversations; then
# tests/bench/engine_report.py writes docs/engine-benchmark.md (the table,
# warmlane's ratios to the others) and docs/engine-ttft-cdf.png (gnuplot),
# and tests/bench/sim_vs_engine.py docs/sim-vs-engine.md (the simulator's
# prediction for the healthy case's traffic beside the real figures).
# See tests/bench/engine_bench.py for what each case and policy is.
#
# Environment (all optional):
#   BENCH_CONVERSATIONS=32 BENCH_TURNS=4 BENCH_CONCURRENCY=4
#   BENCH_OPEN=0           conversations under way at once, a finished one
#                          replaced by the next (0: all from the start)
#   BENCH_CACHE_RAM=64     MiB of host-memory prompt cache per server: holds
#                          about a quarter of the conversations, so a policy
#                          that scatters them evicts
#   BENCH_CASES=healthy,slow,kill,429  BENCH_POLICIES=warmlane,leastconn,chash,stick
#   BENCH_ENGINE_METRICS=1 warmlane polls the llama-servers' /metrics
#                          (engine_metrics: policy.routers auto learns it
#                          routes alone)
#   BENCH_DOCS=docs        where the table and the plot go
#   WARMLANE_BIN           the agent (default: build/asan's, tests/run.sh's build)
#
# Takes about 15 minutes on 2 cores (each case a few minutes); prints each
# run as it ends. Needs gnuplot (Debian: gnuplot-nox), node and npm.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${WARMLANE_BUILD:-$root/build/asan}
export WARMLANE_SOURCE_ROOT=$root
export WARMLANE_HAPROXY_DIR=$build/haproxy
export WARMLANE_BIN=${WARMLANE_BIN:-$build/agent/warmlane}
docs=${BENCH_DOCS:-$root/docs}
cases=${BENCH_CASES:-healthy,slow,kill,429}

if [ ! -x "$WARMLANE_BIN" ]; then
	echo "engine.sh: no agent at $WARMLANE_BIN (run tests/run.sh, or set WARMLANE_BIN)" >&2
	exit 1
fi
if ! command -v gnuplot >/dev/null 2>&1; then
	echo "engine.sh: gnuplot is needed (apt-get install gnuplot-nox)" >&2
	exit 1
fi
tmp=$(mktemp -d /tmp/warmlane-engine-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

files=()
IFS=, read -r -a list <<<"$cases"
for c in "${list[@]}"; do
	python3 "$here/engine_bench.py" --out "$tmp/$c.json" --engine-dir "$build/engine" \
		--cases "$c" --policies "${BENCH_POLICIES:-warmlane,leastconn,chash,stick}" \
		--conversations "${BENCH_CONVERSATIONS:-32}" --turns "${BENCH_TURNS:-4}" \
		--concurrency "${BENCH_CONCURRENCY:-4}" --cache-ram "${BENCH_CACHE_RAM:-64}" \
		--open "${BENCH_OPEN:-0}" ${BENCH_ENGINE_METRICS:+--engine-metrics} |
		grep -E '^(fetch-llama|engine-bench|(healthy|slow|kill|429) )' || true
	[ -f "$tmp/$c.json" ] || { echo "engine.sh: case $c failed" >&2; exit 1; }
	files+=("$tmp/$c.json")
done
if [ -n "${BENCH_KEEP:-}" ]; then
	cp "${files[@]}" "$BENCH_KEEP"/
fi
python3 "$here/engine_report.py" "$docs" "${files[@]}"
# the simulator's prediction for the same traffic next to the healthy case
sim=$build/tests/sim/warmlane-sim
if [ -f "$tmp/healthy.json" ] && [ -x "$sim" ]; then
	python3 "$here/sim_vs_engine.py" "$sim" "$tmp/healthy.json" "$docs/sim-vs-engine.md"
elif [ -f "$tmp/healthy.json" ]; then
	echo "engine.sh: no simulator at $sim: docs/sim-vs-engine.md not written" >&2
fi

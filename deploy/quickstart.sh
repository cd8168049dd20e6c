#!/usr/bin/env bash
# deploy/quickstart.sh - warmlane in front of a small fleet, on one machine.
#
# On a fresh Debian 12: installs what is missing (HAProxy 2.6 from Debian, the
# build tools and libraries), builds warmlane (build/release), then starts, in
# a temporary folder and on loopback only:
#   - a fake fleet of four OpenAI-compatible LLM instances with a prefix cache
#     (tests/fleet/fleet.py; s4 is five times slower than the others),
#   - warmlane, with those four as its endpoints,
#   - HAProxy, with the example config haproxy/haproxy-2.6.cfg (or -3.1.cfg for
#     HAProxy 3.1+) and haproxy/warmlane.spoe.conf,
# drives a few multi-turn conversations (with a session header) and some
# anonymous one-shot requests through HAProxy (tests/fleet/client.py), prints
# per server the requests, the cache hit rate and warmlane's decision
# reasons, and stays up until Ctrl-C (everything is stopped and removed then).
#
# Usage: deploy/quickstart.sh [--smoke] [--compare]
#   --compare  also replays the same traffic (same seed, caches emptied)
#              through HAProxy alone (warmlane stopped: leastconn) and prints
#              the cache hit rates side by side.
#   --smoke    the same with --compare, then checks the answers and exits
#              (0 when all is well): the e2e test quickstart-smoke.
# Environment:
#   WARMLANE_BIN  use this agent binary: nothing is installed or built (the
#                 e2e test runs it so); set but empty or missing: exit 77.
#   HAPROXY       the HAProxy binary (default: haproxy from PATH).
#   WARMLANE_QUICKSTART_SEED  seed of the traffic (default 1).
set -euo pipefail

smoke=0
compare=0
for arg in "$@"; do
	case "$arg" in
	--smoke) smoke=1 compare=1 ;;
	--compare) compare=1 ;;
	*)
		echo "usage: $0 [--smoke] [--compare]" >&2
		exit 2
		;;
	esac
done

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
say() { printf 'quickstart: %s\n' "$*"; }

# --- packages and build (skipped when WARMLANE_BIN is given) -----------------
if [ -z "${WARMLANE_BIN+set}" ]; then
	packages=(
		meson ninja-build pkg-config gcc python3 curl
		libuv1-dev libmsgpack-dev check libcyaml-dev libxxhash-dev
		libmicrohttpd-dev libsystemd-dev libyaml-dev
		haproxy
	)
	missing=()
	for p in "${packages[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		say "installing ${missing[*]}"
		sudo=
		[ "$(id -u)" -eq 0 ] || sudo=sudo
		export DEBIAN_FRONTEND=noninteractive
		$sudo apt-get update -qq
		$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
		# Debian starts its own HAProxy on install; the quick start runs its own.
	fi
	build=build/release
	if [ ! -f "$build/build.ninja" ]; then
		say "configuring $build"
		meson setup "$build" --buildtype=release >/dev/null
	fi
	ninja -C "$build" >/dev/null || ninja -C "$build"
	WARMLANE_BIN=$top/$build/agent/warmlane
elif [ -z "$WARMLANE_BIN" ] || [ ! -x "$WARMLANE_BIN" ]; then
	echo "quickstart: no warmlane binary (WARMLANE_BIN=${WARMLANE_BIN:-})" >&2
	exit 77
fi
[ -x "$WARMLANE_BIN" ] || {
	echo "quickstart: $WARMLANE_BIN was not built" >&2
	exit 1
}
haproxy=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}
hv=$("$haproxy" -v | sed -n '1s/^HAProxy version \([0-9]*\.[0-9]*\).*/\1/p')
case "$hv" in
2.* | 3.0) example=haproxy/haproxy-2.6.cfg ;;
*) example=haproxy/haproxy-3.1.cfg ;;
esac

# --- a temporary folder, removed with everything started in it --------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/warmlane-quickstart.XXXXXX")
pids=()
cleanup() {
	local p
	for p in ${agent_pid:-} "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in ${agent_pid:-} "${pids[@]}"; do
		for _ in $(seq 50); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
	echo "quickstart: $*" >&2
	for f in warmlane haproxy fleet; do
		[ -s "$tmp/$f.log" ] || continue
		echo "--- $f.log (tail)" >&2
		tail -n 20 "$tmp/$f.log" >&2
	done
	exit 1
}

# wait_for DESCRIPTION COMMAND...: polls for up to 10 s
wait_for() {
	local what=$1
	shift
	for _ in $(seq 100); do
		"$@" 2>/dev/null && return 0
		sleep 0.1
	done
	fail "timed out waiting for $what"
}

# --- the fake fleet: four OpenAI-compatible instances, s4 five times slower ----
# tests/fleet/fleet.py: each instance has a prefix cache of 64 blocks of 256
# characters (LRU) and answers x-served-by, x-cache-hit-blocks and
# x-prompt-blocks. 64 blocks hold a quarter of the conversations below but not
# all of them: a server's KV cache is scarce, as on a real fleet.
PYTHONDONTWRITEBYTECODE=1 python3 -u tests/fleet/fleet.py --n 4 --slow 1 --model m1 \
	--cache-blocks 64 --ready-file "$tmp/fleet.json" >"$tmp/fleet.log" 2>&1 &
pids+=($!)
wait_for "the fleet" test -s "$tmp/fleet.json"
read -r p1 p2 p3 p4 < <(python3 -c 'import json, sys; print(*(i["port"] for i in json.load(open(sys.argv[1]))))' "$tmp/fleet.json")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
fe_port=$(free_port)
metrics_port=$(free_port)

# --- warmlane ------------------------------------------------------------------
cat >"$tmp/warmlane.yaml" <<EOF
log_level: info
listen: ["unix:$tmp/spoa.sock,mode=0660"]
metrics: { listen: "127.0.0.1:$metrics_port" }
# HAProxy's read-only runtime API: server states, current and queued requests
runtime_api: { socket: "$tmp/stats.sock", backends: [llm], poll_interval: 200ms }
state: { file: "$tmp/state.msgpack" }
# HAProxy's end-of-stream log lines: completions, its own failures, cuts
log_input: { path: "$tmp/log.sock" }
endpoints:
  - { backend: llm, server: s1, models: [m1], weight: 1, keys: [k1] }
  - { backend: llm, server: s2, models: [m1, fake-large], weight: 1, keys: [k1] }
  - { backend: llm, server: s3, models: [m1], weight: 1, keys: [k1] }
  - { backend: llm, server: s4, models: [m1, fake-large], weight: 1, keys: [k1] }
EOF
agent_pid=
start_agent() {
	"$WARMLANE_BIN" --config "$tmp/warmlane.yaml" >>"$tmp/warmlane.log" 2>&1 &
	agent_pid=$!
}
stop_agent() {
	[ -n "$agent_pid" ] || return 0
	kill -TERM "$agent_pid" 2>/dev/null || true
	for _ in $(seq 50); do
		kill -0 "$agent_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$agent_pid" 2>/dev/null || true
	wait "$agent_pid" 2>/dev/null || true
	agent_pid=
}
start_agent
wait_for "warmlane's socket" test -S "$tmp/spoa.sock"

# --- HAProxy, from the example config --------------------------------------------
printf 'k1 Bearer upstream-secret-for-k1\n' >"$tmp/keys.map"
# Unchrooted and in the foreground; the demo adds two response headers that
# show warmlane's decision (not part of the example), and a fourth server.
sed -e '/^    chroot /d; /^    user haproxy$/d; /^    group haproxy$/d; /^    daemon$/d' \
	-e 's#^    log /dev/log local0$#    log stderr format raw local0 info#' \
	-e '/^    stats socket \/run\/haproxy\/admin.sock/d' \
	-e "s#^    stats socket /run/haproxy/warmlane.sock .*#    stats socket $tmp/stats.sock mode 600 level user#" \
	-e "s#^    bind 127.0.0.1:8080\$#    bind 127.0.0.1:$fe_port#" \
	-e "s#^\(    filter spoe engine warmlane config \).*#\1$top/haproxy/warmlane.spoe.conf#" \
	-e "s#/etc/haproxy/warmlane-keys.map#$tmp/keys.map#g" \
	-e "s#^\(    server s1 127.0.0.1:\)8001#\1$p1#; s#^\(    server s2 127.0.0.1:\)8002#\1$p2#" \
	-e "s#^\(    server s3 127.0.0.1:\)8003\(.*\)#\1$p3\2\n    server s4 127.0.0.1:$p4\2#" \
	-e "s#^    server agent1 unix@/warmlane/spoa.sock #    server agent1 unix@$tmp/spoa.sock #" \
	-e "s#^\(    log \)unix@/warmlane/log.sock #\1unix@$tmp/log.sock #" \
	-e 's#^\(    default_backend llm\)$#\1\n    http-response set-header x-warmlane-server %[var(txn.warmlane.server)]\n    http-response set-header x-warmlane-reason %[var(txn.warmlane.reason)]#' \
	"$example" >"$tmp/haproxy.cfg"
for want in "$tmp/spoa.sock" "$tmp/log.sock" "$tmp/stats.sock" "127.0.0.1:$fe_port" "127.0.0.1:$p3" "127.0.0.1:$p4" x-warmlane-reason; do
	grep -q -- "$want" "$tmp/haproxy.cfg" || fail "$example changed: could not set $want"
done
"$haproxy" -c -q -f "$tmp/haproxy.cfg" || fail "haproxy -c failed on $tmp/haproxy.cfg"
# HAProxy logs a line per request into haproxy.log
"$haproxy" -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 &
pids+=($!)

stat_of() { # PROXY SERVER -> status column of show stat
	python3 "$top/tests/haproxy/server-status.py" "$tmp/stats.sock" "$1" "$2"
}
is_up() { stat_of "$1" "$2" | grep -q '^UP'; }
is_down() { stat_of "$1" "$2" | grep -q '^DOWN'; }
wait_for "HAProxy" test -S "$tmp/stats.sock"
wait_for "HAProxy to see warmlane UP" is_up warmlane-agents agent1
for s in s1 s2 s3 s4; do wait_for "server $s UP" is_up llm "$s"; done

# --- traffic -------------------------------------------------------------------
# A few conversations (each turn resends the whole history, with an
# x-session-id) and some one-shot requests without identity, from
# tests/fleet/client.py; the same seed gives the same texts in every run.
seed=${WARMLANE_QUICKSTART_SEED:-1}
# run_traffic LABEL: the traffic once, the fleet's caches emptied first; the
# per-server table on stdout, every result in $tmp/LABEL.json
run_traffic() {
	PYTHONDONTWRITEBYTECODE=1 python3 - "$top/tests/fleet" "$fe_port" "$seed" \
		"$tmp/$1.json" "$tmp/fleet.json" <<'PY'
import dataclasses, http.client, json, sys
sys.path.insert(0, sys.argv[1])
import client
for i in json.load(open(sys.argv[5])):
    c = http.client.HTTPConnection("127.0.0.1", i["port"], timeout=5)
    c.request("POST", "/admin/reset", body=b'{"cache": true}',
              headers={"content-type": "application/json"})
    c.getresponse().read()
    c.close()
results = client.run_load("http://127.0.0.1:%s" % sys.argv[2], conversations=12,
                          turns=5, anonymous=16, seed=int(sys.argv[3]),
                          concurrency=8, model="m1", system_chars=1024,
                          context_chars=2048, question_chars=200, think_ms=200,
                          timeout=30, deadline_s=120)
print(client.format_table(client.summarize(results)))
with open(sys.argv[4], "w") as f:
    json.dump([dataclasses.asdict(r) for r in results], f)
PY
}

# check_run LABEL 1|0: every request answered; with the agent (1) each one
# routed by warmlane to the server that answered, without it (0) none
check_run() {
	python3 - "$tmp/$1.json" "$2" <<'PY'
import json, sys
rs = json.load(open(sys.argv[1]))
bad = [r for r in rs if not 200 <= r["status"] < 300]
if sys.argv[2] == "1":
    bad += [r for r in rs if not r["reason"] or r["warmlane_server"] != r["served_by"]]
else:
    bad += [r for r in rs if r["reason"]]
for r in bad[:5]:
    print("quickstart: unexpected answer:", {k: r[k] for k in (
        "session", "turn", "status", "served_by", "reason", "warmlane_server", "error")},
        file=sys.stderr)
sys.exit(1 if bad or not rs else 0)
PY
}

printf '\nwarmlane + HAProxy %s: 12 conversations x 5 turns, 16 one-shots (seed %s)\n' "$hv" "$seed"
run_traffic warmlane || fail "the traffic through warmlane failed"
cat <<'EOF'
(server: the instance that answered, s4 is the slow one; hit_rate: share of
prompt blocks found in its cache; reasons: warmlane's decisions: affinity =
the caller's warm server, hash = rendezvous hashing of a new caller, p2c = no
identity, spill = warm server over its load bound)
EOF
bad=0
check_run warmlane 1 || bad=1
metrics_url=http://127.0.0.1:$metrics_port/metrics
if curl -sf -m 5 "$metrics_url" >"$tmp/metrics.txt"; then
	printf '\n%s (excerpt):\n' "$metrics_url"
	grep '^warmlane_decisions_total' "$tmp/metrics.txt" || true
elif [ "$smoke" -eq 1 ]; then
	fail "no metrics on $metrics_url"
fi

if [ "$compare" -eq 1 ]; then
	# The same traffic through HAProxy alone: warmlane stopped, HAProxy's
	# health check marks it DOWN and the backend balances with leastconn.
	stop_agent
	wait_for "HAProxy to see warmlane DOWN" is_down warmlane-agents agent1
	printf '\nHAProxy %s alone (leastconn; warmlane stopped), the same traffic\n' "$hv"
	run_traffic leastconn || fail "the traffic through HAProxy alone failed"
	check_run leastconn 0 || bad=1
	printf '\nCache hit rate, the same traffic (seed %s), caches emptied before each run:\n' "$seed"
	python3 - "$tmp/warmlane.json" "$tmp/leastconn.json" <<'PY'
import json, sys
def rates(path):
    out = {}
    for r in json.load(open(path)):
        for name in (r["served_by"] or "-", "total"):
            x = out.setdefault(name, [0, 0, 0])
            x[0] += 1
            if r["hit_blocks"] is not None and r["prompt_blocks"]:
                x[1] += r["hit_blocks"]
                x[2] += r["prompt_blocks"]
    return out
def p50(path):
    lat = sorted(r["latency_ms"] for r in json.load(open(path)))
    return lat[len(lat) // 2] if lat else 0.0
w, l = rates(sys.argv[1]), rates(sys.argv[2])
names = sorted((set(w) | set(l)) - {"total"}) + ["total"]
print("%-7s %-24s %-24s" % ("server", "warmlane", "leastconn"))
for n in names:
    cells = []
    for d in (w, l):
        req, hit, blocks = d.get(n, [0, 0, 0])
        cells.append("%3d req %5.1f%% hit" % (req, 100.0 * hit / blocks if blocks else 0.0))
    print("%-7s %-24s %-24s" % (n, cells[0], cells[1]))
print("%-7s %-24s %-24s" % ("p50", "%.0f ms" % p50(sys.argv[1]), "%.0f ms" % p50(sys.argv[2])))
PY
	if [ "$smoke" -eq 0 ]; then
		start_agent
		wait_for "HAProxy to see warmlane UP" is_up warmlane-agents agent1
	fi
fi

if [ "$smoke" -eq 1 ]; then
	[ "$bad" -eq 0 ] || fail "some requests were not answered, or not routed as expected"
	say "smoke test passed (HAProxy $hv)"
	exit 0
fi

cat <<EOF

HAProxy $hv listens on http://127.0.0.1:$fe_port; warmlane's Prometheus
metrics are on $metrics_url
Logs: $tmp/warmlane.log, $tmp/haproxy.log, $tmp/fleet.log. Try:

  curl -s $metrics_url | grep ^warmlane_decisions_total
  curl -si -H 'x-session-id: alice' -H 'content-type: application/json' \\
    -d '{"model":"m1","messages":[{"role":"user","content":"Say hello."}]}' \\
    http://127.0.0.1:$fe_port/v1/chat/completions
  python3 tests/fleet/client.py --url http://127.0.0.1:$fe_port --model m1 --fleet $tmp/fleet.json

Press Ctrl-C to stop everything.
EOF
while true; do
	sleep 1
	for p in "${pids[@]}" $agent_pid; do
		kill -0 "$p" 2>/dev/null || fail "a process exited (pid $p)"
	done
done

#!/usr/bin/env bash
# deploy/quickstart.sh - warmlane in front of a small fleet, on one machine.
#
# On a fresh Debian 12: installs what is missing (HAProxy 2.6 from Debian, the
# build tools and libraries, Node.js), builds warmlane (build/release), then
# starts, in a temporary folder and on loopback only:
#   - a fleet of four real inference engines: llama.cpp's llama-server from
#     Debian unstable (tests/engine/fetch-llama.sh, cached in build/engine),
#     each one thread, one slot and a 32 MiB prompt cache, serving a tiny
#     random-weight model (tests/engine/mkmodel.py: the text is noise, the
#     prefill time and the prompt cache are real), launched by
#     tests/engine/llamafleet.py;
#     or, with --fake (or when llama-server cannot be fetched), the fake fleet
#     tests/fleet/fleet.py (s4 is five times slower than the others),
#   - warmlane, with those four as its endpoints,
#   - HAProxy, with the example config haproxy/haproxy-2.6.cfg (or -3.1.cfg for
#     HAProxy 3.1+) and haproxy/warmlane.spoe.conf,
# drives multi-turn conversations (half with a session header, half streamed
# for the engines) through HAProxy (the engines: the official OpenAI Node
# client, tests/engine/driver; the fake fleet: tests/fleet/client.py, plus
# anonymous one-shots), prints per server the requests, the share of prompt
# tokens the engine found in its cache (the fake fleet: its block hit rate)
# and warmlane's decision reasons, and stays up until Ctrl-C (everything is
# stopped and removed then).
#
# Usage: deploy/quickstart.sh [--fake | --engine] [--compare] [--smoke]
#                             [--port N] [--metrics-port N]
#   --fake     the fake fleet instead of llama.cpp (no download, no Node.js).
#   --engine   llama.cpp or nothing: no fallback to the fake fleet (exit 1;
#              77 with --smoke, when it cannot be had).
#   --compare  also runs the traffic through HAProxy alone (warmlane stopped:
#              leastconn). With the engines: 3 rounds (seeds), each policy
#              from a cold fleet and the same conversations, the engines' own
#              cached-token counts and TTFT per round, their mean and spread,
#              and whether the gap is wider than the spread. With --fake: the
#              same traffic once (same seed, caches emptied), hit rates side
#              by side.
#   --smoke    --compare once (one round) on the fake fleet (with --engine:
#              on llama.cpp), checks the answers and exits (0 when all is
#              well): the e2e tests quickstart-smoke and quickstart-engine.
#              The fake fleet by default: no download, a dozen seconds, and the
#              engine suite already runs llama.cpp behind the example configs.
#   --port N          HAProxy's frontend port (default: a free one).
#   --metrics-port N  warmlane's /metrics port (default: a free one).
# Environment:
#   WARMLANE_BIN  use this agent binary: nothing is installed or built (the
#                 e2e test runs it so); set but empty or missing: exit 77.
#   HAPROXY       the HAProxy binary (default: haproxy from PATH).
#   WARMLANE_ENGINE_DIR  where llama-server and the model are kept (default
#                 build/engine).
#   WARMLANE_QUICKSTART_SEED  seed of the traffic (default 1; --compare's
#                 rounds use it and the next two).
set -euo pipefail

usage() {
	echo "usage: $0 [--fake | --engine] [--compare] [--smoke] [--port N] [--metrics-port N]" >&2
	exit 2
}
smoke=0
compare=0
fake=0
engine=0
fe_port=
metrics_port=
port_arg() { # FLAG VALUE -> VALUE when it is a port number
	case "$2" in
	'' | *[!0-9]*) echo "quickstart: $1 wants a port number, not '$2'" >&2 && usage ;;
	esac
	if [ "$2" -lt 1 ] || [ "$2" -gt 65535 ]; then
		echo "quickstart: $1 $2 is not a port (1-65535)" >&2
		usage
	fi
	echo "$2"
}
while [ $# -gt 0 ]; do
	case "$1" in
	--smoke) smoke=1 compare=1 ;;
	--compare) compare=1 ;;
	--fake) fake=1 ;;
	--engine) engine=1 ;;
	--port | --metrics-port)
		[ $# -ge 2 ] || usage
		v=$(port_arg "$1" "$2") || exit 2
		if [ "$1" = --port ]; then fe_port=$v; else metrics_port=$v; fi
		shift
		;;
	--port=* | --metrics-port=*)
		v=$(port_arg "${1%%=*}" "${1#*=}") || exit 2
		if [ "${1%%=*}" = --port ]; then fe_port=$v; else metrics_port=$v; fi
		;;
	*) usage ;;
	esac
	shift
done
[ "$fake" -eq 0 ] || [ "$engine" -eq 0 ] || usage
# the smoke test stays fast and offline unless asked for the engines
[ "$smoke" -eq 0 ] || [ "$engine" -eq 1 ] || fake=1
if [ -n "$fe_port" ] && [ "$fe_port" = "$metrics_port" ]; then
	echo "quickstart: --port and --metrics-port are both $fe_port" >&2
	exit 2
fi

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
say() { printf 'quickstart: %s\n' "$*"; }

# --- packages and build (skipped when WARMLANE_BIN is given) -----------------
if [ -z "${WARMLANE_BIN+set}" ]; then
	packages=(
		meson ninja-build pkg-config gcc python3 curl
		libuv1-dev libmsgpack-dev check libcyaml-dev libxxhash-dev
		libmicrohttpd-dev libsystemd-dev libyaml-dev libcurl4-openssl-dev
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
	# Node.js for the engines' client; without it the fake fleet is used
	if [ "$fake" -eq 0 ] && ! { command -v node && command -v npm; } >/dev/null 2>&1; then
		say "installing nodejs npm (the OpenAI client that drives the engines)"
		sudo=
		[ "$(id -u)" -eq 0 ] || sudo=sudo
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
			nodejs npm >/dev/null || say "could not install nodejs and npm"
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

# --- llama.cpp, the model and the client (falls back to the fake fleet) -------
# engine_setup: sets llama and model_path, or says why not and returns 1
engine_setup() {
	local edir=${WARMLANE_ENGINE_DIR:-$top/build/engine}
	if ! { command -v node && command -v npm; } >/dev/null 2>&1; then
		say "node and npm are missing (Debian: apt-get install nodejs npm)"
		return 1
	fi
	"$top/tests/engine/fetch-llama.sh" "$edir" | sed 's/^/quickstart: /' || return 1
	llama=$edir/llama-server
	model_path=$(python3 -c 'import sys; sys.dont_write_bytecode = True; sys.path.insert(0, sys.argv[1]); import llamafleet; print(llamafleet.model(sys.argv[2]))' \
		"$top/tests/engine" "$edir") || return 1
	"$top/tests/engine/npm-ci.sh" | sed 's/^/quickstart: /' || return 1
}
if [ "$fake" -eq 0 ] && ! engine_setup; then
	if [ "$engine" -eq 1 ]; then
		say "llama.cpp's llama-server (or its client) cannot be had here (--engine)"
		[ "$smoke" -eq 0 ] || exit 77
		exit 1
	fi
	say "llama.cpp's llama-server (or its client) cannot be had here: using the fake fleet"
	say "(tests/fleet/fleet.py) instead; deploy/quickstart.sh --fake skips this attempt"
	fake=1
fi
if [ "$fake" -eq 1 ]; then
	model=m1
else
	model=tiny # llama-server serves any model name; warmlane routes it
fi

# --- a temporary folder, removed with everything started in it --------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/warmlane-quickstart.XXXXXX")
pids=()
cleanup() {
	local p
	# the engines' launcher stops its servers when its control pipe closes
	exec 3>&-
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
	# had the launcher been killed, its servers (each its own process group)
	# would be left: end them too
	if [ "$fake" -eq 0 ] && [ -s "$tmp/fleet.json" ]; then
		for p in $(python3 -c 'import json, sys; print(*(i["pid"] for i in json.load(open(sys.argv[1]))))' "$tmp/fleet.json" 2>/dev/null); do
			kill -KILL -- "-$p" 2>/dev/null || true
		done
	fi
	rm -rf "$tmp"
}
# the tail of each log, before cleanup removes them
show_logs() {
	local f
	for f in "$tmp"/warmlane.log "$tmp"/haproxy.log "$tmp"/fleet.log "$tmp"/engine/*.log "$tmp"/driver-*.log; do
		[ -s "$f" ] || continue
		echo "--- ${f#"$tmp"/} (tail)" >&2
		tail -n 20 "$f" >&2
	done
}
trap cleanup EXIT
trap 'exit 130' INT
# a test's timeout: what was running shows before it goes
trap 'echo "quickstart: stopped by SIGTERM" >&2; show_logs; exit 143' TERM

fail() {
	echo "quickstart: $*" >&2
	show_logs
	exit 1
}

# wait_for DESCRIPTION COMMAND...: polls for up to 10 s (WAIT_S seconds)
wait_for() {
	local what=$1
	shift
	for _ in $(seq $((${WAIT_S:-10} * 10))); do
		"$@" 2>/dev/null && return 0
		sleep 0.1
	done
	fail "timed out waiting for $what"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port_is_free() { python3 -c 'import socket, sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null; }
for p in $fe_port $metrics_port; do
	port_is_free "$p" || fail "port $p is in use on 127.0.0.1 (see --port, --metrics-port)"
done

if [ "$fake" -eq 1 ]; then
	# --- the fake fleet: four OpenAI-compatible instances, s4 five times slower
	# tests/fleet/fleet.py: each instance has a prefix cache of 64 blocks of 256
	# characters (LRU) and answers x-served-by, x-cache-hit-blocks and
	# x-prompt-blocks. 64 blocks hold a quarter of the conversations below but not
	# all of them: a server's KV cache is scarce, as on a real fleet.
	PYTHONDONTWRITEBYTECODE=1 python3 -u tests/fleet/fleet.py --n 4 --slow 1 --model m1 \
		--cache-blocks 64 --ready-file "$tmp/fleet.json" >"$tmp/fleet.log" 2>&1 &
	pids+=($!)
	wait_for "the fleet" test -s "$tmp/fleet.json"
else
	# --- four llama-servers (tests/engine/llamafleet.py) -------------------------
	# One thread and one slot each (two slots can swap two conversations'
	# prompts), a 32 MiB host-memory prompt cache (--cache-ram: about four of
	# the conversations below, so a server that sees all of them evicts), and
	# --slot-prompt-similarity 0.9 (llamafleet.py says why). A small launcher
	# holds the fleet: each line "cold" on its control pipe (fd 3) kills and
	# restarts every server (empty caches, the same ports) and then bumps
	# fleet.gen; the pipe closing, or SIGTERM, stops them all.
	mkfifo "$tmp/fleet.ctl"
	# fleet_at N: the launcher has done its Nth restart (0: the start); it
	# exiting ends the wait at once (fleet_ok then fails with its log)
	fleet_at() {
		kill -0 "$fleet_pid" 2>/dev/null || return 0
		[ "$(cat "$tmp/fleet.gen" 2>/dev/null || echo -1)" -ge "$1" ]
	}
	fleet_ok() { kill -0 "$fleet_pid" 2>/dev/null || fail "the llama.cpp fleet stopped"; }
	PYTHONDONTWRITEBYTECODE=1 python3 -u - "$top/tests/engine" "$llama" "$model_path" \
		"$tmp/fleet.json" "$tmp/fleet.gen" "$tmp/fleet.ctl" "$tmp/engine" \
		>"$tmp/fleet.log" 2>&1 <<'PY' &
import json, os, signal, sys
sys.path.insert(0, sys.argv[1])
import llamafleet as lf
binary, model, ready, gen, ctl, workdir = sys.argv[2:8]
def put(path, value):
    with open(path + ".tmp", "w") as f:
        json.dump(value, f)
    os.replace(path + ".tmp", path)
def term(signum, frame):
    raise KeyboardInterrupt
signal.signal(signal.SIGTERM, term)
fleet = lf.Fleet(binary, model, n=4, parallel=1, cache_ram=32, threads=1, ctx=16384,
                 workdir=workdir, names=["s1", "s2", "s3", "s4"])
try:
    print("fleet up in %.2fs" % fleet.start())
    put(ready, fleet.info())
    n = 0
    put(gen, n)
    with open(ctl) as f:
        for line in f:
            if line.strip() == "cold":
                fleet.restart_all()
                n += 1
                put(ready, fleet.info())
                put(gen, n)
except KeyboardInterrupt:
    pass
finally:
    fleet.stop()
PY
	fleet_pid=$!
	pids+=("$fleet_pid")
	# read-write: opening a FIFO only to write blocks until a reader opens
	# it, and a launcher that fails before it does (a llama-server that
	# cannot start) would hang the script here instead of failing below
	exec 3<>"$tmp/fleet.ctl"
	WAIT_S=90 wait_for "the llama.cpp fleet" fleet_at 0
	fleet_ok
fi
read -r p1 p2 p3 p4 < <(python3 -c 'import json, sys; print(*(i["port"] for i in json.load(open(sys.argv[1]))))' "$tmp/fleet.json")
[ -n "$fe_port" ] || fe_port=$(free_port)
[ -n "$metrics_port" ] || metrics_port=$(free_port)

# --- warmlane ------------------------------------------------------------------
# The llama-servers run one request at a time (--parallel 1): their slots.
# Their own /metrics (running and waiting requests) tell warmlane that
# this HAProxy carries all their load, so it routes alone from its first
# requests (policy.routers auto; docs/engine-load.md): on the engine
# benchmark's fleet, 96 conversations of 8 turns, the cached share rose
# from 77.1% to 80.2% over six runs (docs/policy-v2.md, section 45).
# engine_fields PORT: an endpoint's slots and engine_metrics (none for the fakes)
engine_fields() {
	[ "$fake" -eq 1 ] || printf ', slots: 1, engine_metrics: "http://127.0.0.1:%s/metrics"' "$1"
}
cat >"$tmp/warmlane.yaml" <<EOF
log_level: info
listen: ["unix:$tmp/spoa.sock,mode=0660"]
metrics: { listen: "127.0.0.1:$metrics_port" }
# HAProxy's read-only runtime API: server states, current and queued requests
runtime_api: { socket: "$tmp/stats.sock", backends: [llm], poll_interval: 200ms }
state: { file: "$tmp/state.msgpack" }
# HAProxy's end-of-stream log lines: completions, its own failures, cuts
log_input: { path: "$tmp/log.sock" }
# 401/403s only make a key suspect: HAProxy's probe frontend checks it
key_probe: { target: "unix:$tmp/probe.sock" }
endpoints:
  - { backend: llm, server: s1, models: [$model], weight: 1, keys: [k1]$(engine_fields $p1) }
  - { backend: llm, server: s2, models: [$model, fake-large], weight: 1, keys: [k1]$(engine_fields $p2) }
  - { backend: llm, server: s3, models: [$model], weight: 1, keys: [k1]$(engine_fields $p3) }
  - { backend: llm, server: s4, models: [$model, fake-large], weight: 1, keys: [k1]$(engine_fields $p4) }
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
# Unchrooted and in the foreground, with a fourth server, and with the
# example's optional debugging headers (x-warmlane-server, x-warmlane-reason:
# what warmlane decided, read by tests/fleet/client.py) turned on.
sed -e '/^    chroot /d; /^    user haproxy$/d; /^    group haproxy$/d; /^    daemon$/d' \
	-e 's#^    log /dev/log local0$#    log stderr format raw local0 info#' \
	-e '/^    stats socket \/run\/haproxy\/admin.sock/d' \
	-e "s#^    stats socket /run/haproxy/warmlane.sock .*#    stats socket $tmp/stats.sock mode 600 level user#" \
	-e "s#^    bind 127.0.0.1:8080\$#    bind 127.0.0.1:$fe_port#" \
	-e "s#^    bind unix@/var/lib/haproxy/warmlane/probe.sock .*#    bind unix@$tmp/probe.sock mode 600#" \
	-e "s#^\(    filter spoe engine warmlane config \).*#\1$top/haproxy/warmlane.spoe.conf#" \
	-e "s#/etc/haproxy/warmlane-keys.map#$tmp/keys.map#g" \
	-e "s#^\(    server s1 127.0.0.1:\)8001#\1$p1#; s#^\(    server s2 127.0.0.1:\)8002#\1$p2#" \
	-e "s#^\(    server s3 127.0.0.1:\)8003\(.*\)#\1$p3\2\n    server s4 127.0.0.1:$p4\2#" \
	-e "s#^    server agent1 unix@/warmlane/spoa.sock #    server agent1 unix@$tmp/spoa.sock #" \
	-e "s#^\(    log \)unix@/warmlane/log.sock #\1unix@$tmp/log.sock #" \
	-e 's/^    #\(http-response set-header x-warmlane-\(server\|reason\) \)/    \1/' \
	"$example" >"$tmp/haproxy.cfg"
if [ "$fake" -eq 0 ]; then
	# What a backend of llama-servers needs (docs/haproxy.md,
	# "Backends of llama.cpp servers"): llama-server closes its connection after a streamed answer
	# while its headers say keep-alive, and HAProxy's retry of the next request
	# on that dead connection would redispatch it off its warm server (`option
	# http-server-close`); a server still loading its model accepts
	# connections and answers 503 (`option httpchk GET /health`). And
	# x-served-by, the server that answered (the fake fleet sends its own),
	# set after default_backend: outside the 2.6 config's 3.0-only block.
	sed -i -e 's#^    balance leastconn$#&\n    option httpchk GET /health\n    option http-server-close#' \
		-e 's#^    default_backend llm$#&\n    http-response set-header x-served-by %s#' "$tmp/haproxy.cfg"
	for want in '^    option http-server-close$' '^    http-response set-header x-served-by %s$'; do
		grep -q -- "$want" "$tmp/haproxy.cfg" || fail "$example changed: could not set $want"
	done
fi
for want in "$tmp/spoa.sock" "$tmp/log.sock" "$tmp/stats.sock" "127.0.0.1:$fe_port" "127.0.0.1:$p3" "127.0.0.1:$p4" \
	'^    http-response set-header x-warmlane-server ' '^    http-response set-header x-warmlane-reason '; do
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

# --- the engines' traffic ------------------------------------------------------
# tests/engine/driver (the official OpenAI Node client): 16 conversations x 3
# turns after a shared system prompt (900 characters), 400 characters a user
# turn, 16 tokens an answer that the next turn sends back; half with an
# x-session-id, half streamed; 4 requests at once; the same seed sends the
# same conversations. A conversation grows to about 2,200 tokens and a 32 MiB
# prompt cache holds about four: a server that sees every conversation
# evicts, one that sees its quarter of them keeps them.
ROUNDS=3
[ "$smoke" -eq 0 ] || ROUNDS=1 # the smoke test checks the answers, not the figures
cold_fleet() { # every llama-server killed and started again: empty caches
	local g s
	g=$(cat "$tmp/fleet.gen")
	echo cold >&3
	WAIT_S=90 wait_for "the llama.cpp fleet to restart" fleet_at $((g + 1))
	fleet_ok
	for s in s1 s2 s3 s4; do WAIT_S=20 wait_for "server $s UP" is_up llm "$s"; done
}
# drive LABEL SEED: the traffic once; the driver's records in $tmp/LABEL.jsonl
drive() {
	python3 -c 'import json, sys; json.dump(dict(baseURL=sys.argv[1], model=sys.argv[2],
    out=sys.argv[3], seed=int(sys.argv[4]), conversations=16, turns=3, concurrency=4,
    system_chars=900, user_chars=400, max_tokens=16, session_share=0.5, stream_share=0.5,
    timeout_ms=60000), open(sys.argv[5], "w"))' \
		"http://127.0.0.1:$fe_port/v1" "$model" "$tmp/$1.jsonl" "$2" "$tmp/$1.plan.json"
	timeout 300 node "$top/tests/engine/driver/driver.mjs" "$tmp/$1.plan.json" \
		>"$tmp/driver-$1.log" 2>&1
}
# engine_table LABEL: per server the requests, the engine's cached share, TTFT
engine_table() {
	python3 - "$tmp/$1.jsonl" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
def p50(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")
rows = {}
for r in rs:
    for n in (r["served"] or "-", "total"):
        rows.setdefault(n, []).append(r)
print("%-7s %4s %6s %7s %11s  %s" % ("server", "req", "failed", "cached", "TTFT p50", "reasons"))
for n in sorted(set(rows) - {"total"}) + ["total"]:
    x = rows[n]
    ok = [r for r in x if r["error"] is None]
    pt = sum(r["prompt_tokens"] or 0 for r in ok)
    ct = sum(r["cached_tokens"] or 0 for r in ok)
    why = {}
    for r in x:
        if r["reason"]:
            why[r["reason"]] = why.get(r["reason"], 0) + 1
    print("%-7s %4d %6d %6.1f%% %8.0f ms  %s" % (n, len(x), len(x) - len(ok),
          100.0 * ct / pt if pt else 0.0, p50([r["ttft_ms"] for r in ok]),
          " ".join("%s=%d" % kv for kv in sorted(why.items())) or "-"))
PY
}
# check_engine LABEL 1|0: as check_run, on the driver's records
check_engine() {
	python3 - "$tmp/$1.jsonl" "$2" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
bad = [r for r in rs if r["error"] is not None or r["status"] != 200]
if sys.argv[2] == "1":
    bad += [r for r in rs if not r["reason"] or r["wserver"] != r["served"]]
else:
    bad += [r for r in rs if r["reason"]]
for r in bad[:5]:
    print("quickstart: unexpected answer:", {k: r[k] for k in (
        "conv", "turn", "status", "served", "reason", "wserver", "error")}, file=sys.stderr)
sys.exit(1 if bad or not rs else 0)
PY
}

bad=0
if [ "$fake" -eq 1 ]; then
	printf '\nwarmlane + HAProxy %s: 12 conversations x 5 turns, 16 one-shots (seed %s)\n' "$hv" "$seed"
	run_traffic warmlane || fail "the traffic through warmlane failed"
	cat <<'EOF'
(server: the instance that answered, s4 is the slow one; hit_rate: share of
prompt blocks found in its cache; reasons: warmlane's decisions: affinity =
the caller's warm server, hash = rendezvous hashing of a new caller, p2c = no
identity, spill = warm server over its load bound)
EOF
	check_run warmlane 1 || bad=1
else
	printf '\nwarmlane + HAProxy %s, four llama.cpp servers: 16 conversations x 3 turns (seed %s)\n' "$hv" "$seed"
	drive warmlane "$seed" || fail "the traffic through warmlane failed"
	engine_table warmlane
	cat <<'EOF'
(server: the llama-server that answered; cached: the share of prompt tokens
the engine itself reports as taken from its cache, usage.prompt_tokens_details;
TTFT: time to the first token at the client; reasons: warmlane's decisions:
affinity = the caller's warm server, hash = rendezvous hashing of a new
caller, p2c = no identity, spill = warm server over its load bound)
EOF
	check_engine warmlane 1 || {
		bad=1
		say "some answers were not routed as expected (above)"
	}
fi
metrics_url=http://127.0.0.1:$metrics_port/metrics
if curl -sf -m 5 "$metrics_url" >"$tmp/metrics.txt"; then
	if [ "$smoke" -eq 1 ]; then
		# this agent is stopped before the script exits: no URL to try
		printf "\nwarmlane's /metrics after this run (excerpt):\n"
	else
		printf '\n%s (excerpt):\n' "$metrics_url"
	fi
	grep '^warmlane_decisions_total' "$tmp/metrics.txt" || true
elif [ "$smoke" -eq 1 ]; then
	fail "no metrics on $metrics_url"
fi

if [ "$fake" -eq 1 ]; then
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
			cat <<'EOF'

warmlane started again for you to try: its counters (/metrics) start from 0,
but its affinity map comes back from its state file, so the conversations of
the first run are answered as `affinity`.
EOF
		fi
	fi
else
	if [ "$compare" -eq 1 ]; then
		# Round r (seed, seed+1, ...): warmlane on a cold fleet, then HAProxy
		# alone (warmlane stopped: its health check marks it DOWN and the
		# backend balances with leastconn) on a cold fleet, the same
		# conversations. A later round starts warmlane again without its state
		# file: every run starts from nothing.
		for r in $(seq "$ROUNDS"); do
			s=$((seed + r - 1))
			if [ "$r" -gt 1 ]; then
				rm -f "$tmp/state.msgpack"
				start_agent
				wait_for "HAProxy to see warmlane UP" is_up warmlane-agents agent1
				cold_fleet
				drive "warmlane-$r" "$s" || fail "round $r: the traffic through warmlane failed"
				check_engine "warmlane-$r" 1 || bad=1
			else
				mv "$tmp/warmlane.jsonl" "$tmp/warmlane-1.jsonl"
			fi
			stop_agent
			wait_for "HAProxy to see warmlane DOWN" is_down warmlane-agents agent1
			cold_fleet
			drive "leastconn-$r" "$s" || fail "round $r: the traffic through HAProxy alone failed"
			check_engine "leastconn-$r" 0 || bad=1
			say "round $r of $ROUNDS (seed $s): warmlane and leastconn done"
		done
		printf '\nwarmlane against HAProxy alone (leastconn): %d rounds, each run on a cold fleet,\n' "$ROUNDS"
		printf "the same 16 conversations x 3 turns in both runs of a round; the engines' own counters\n\n"
		python3 - "$tmp" "$ROUNDS" "$seed" <<'PY'
import json, os, statistics, sys
tmp, rounds, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(name):
    return [json.loads(l) for l in open(os.path.join(tmp, name + ".jsonl"))]
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
def stats(rs):
    ok = [r for r in rs if r["error"] is None]
    pt = sum(r["prompt_tokens"] or 0 for r in ok)
    ct = sum(r["cached_tokens"] or 0 for r in ok)
    t = [r["ttft_ms"] for r in ok]
    return dict(share=100.0 * ct / pt if pt else 0.0, p50=pct(t, 0.5), p90=pct(t, 0.9),
                failed=len(rs) - len(ok), n=len(rs))
w = [stats(load("warmlane-%d" % r)) for r in range(1, rounds + 1)]
l = [stats(load("leastconn-%d" % r)) for r in range(1, rounds + 1)]
cell = lambda x: "%5.1f%% %6.0f ms %6.0f ms %3d/%d" % (
    x["share"], x["p50"], x["p90"], x["failed"], x["n"])
head = "cached  TTFT p50       p90 failed"
print("%-12s  %-34s  %s" % ("", "warmlane", "leastconn"))
print("%-12s  %-34s  %s" % ("round (seed)", head, head))
for r in range(rounds):
    print("%-12s  %-34s  %s" % ("%d (%d)" % (r + 1, seed + r), cell(w[r]), cell(l[r])))
print()
if rounds < 2:
    print("one round only: no spread between rounds to tell signal from noise by")
    sys.exit(0)
for k, what, unit, higher in (("share", "cached-token share", "%", True),
                              ("p50", "TTFT p50", " ms", False),
                              ("p90", "TTFT p90", " ms", False)):
    vw, vl = [x[k] for x in w], [x[k] for x in l]
    f = "%.1f" if unit == "%" else "%.0f"
    def show(v):
        return (f + "%s (rounds " + f + " to " + f + ")") % (
            statistics.mean(v), unit, min(v), max(v))
    # the gap is signal when every warmlane round is on one side of every
    # leastconn round; when they overlap, it is within what varies from one
    # round to the next
    ahead = min(vw) > max(vl) if higher else max(vw) < min(vl)
    behind = max(vw) < min(vl) if higher else min(vw) > max(vl)
    ratio = statistics.mean(vw) / statistics.mean(vl) if statistics.mean(vl) else float("nan")
    print("%s: warmlane %s, leastconn %s; ratio %.2f" % (what, show(vw), show(vl), ratio))
    print("  " + ("warmlane is better in every round: the gap is wider than the spread "
                  "between rounds, not noise" if ahead else
                  "warmlane is worse in every round: wider than the spread, not noise"
                  if behind else
                  "the rounds overlap: this difference is within the noise"))
PY
		if [ "$smoke" -eq 0 ]; then
			start_agent
			wait_for "HAProxy to see warmlane UP" is_up warmlane-agents agent1
			cat <<'EOF'

warmlane started again for you to try: its counters (/metrics) start from 0,
but its affinity map comes back from its state file, so the last round's
conversations are answered as `affinity`.
EOF
		fi
	fi
fi

if [ "$smoke" -eq 1 ]; then
	[ "$bad" -eq 0 ] || fail "some requests were not answered, or not routed as expected"
	say "smoke test passed (HAProxy $hv)"
	exit 0
fi

if [ "$fake" -eq 1 ]; then
	logs="$tmp/fleet.log"
	more="python3 tests/fleet/client.py --url http://127.0.0.1:$fe_port --model m1 --fleet $tmp/fleet.json"
else
	logs="$tmp/engine/s*.log"
	more="node tests/engine/driver/driver.mjs $tmp/warmlane.plan.json   # the traffic again"
fi
cat <<EOF

HAProxy $hv listens on http://127.0.0.1:$fe_port; warmlane's Prometheus
metrics are on $metrics_url
Logs: $tmp/warmlane.log, $tmp/haproxy.log, $logs. Try:

  curl -s $metrics_url | grep ^warmlane_decisions_total
  curl -si -H 'x-session-id: alice' -H 'content-type: application/json' \\
    -d '{"model":"$model","max_tokens":16,"messages":[{"role":"user","content":"Say hello."}]}' \\
    http://127.0.0.1:$fe_port/v1/chat/completions
  $more

Press Ctrl-C to stop everything.
EOF
while true; do
	sleep 1
	for p in "${pids[@]}" $agent_pid; do
		kill -0 "$p" 2>/dev/null || fail "a process exited (pid $p)"
	done
done

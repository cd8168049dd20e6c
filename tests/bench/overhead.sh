#!/bin/bash
# overhead.sh - what asking warmlane costs HAProxy: wrk through HAProxy, three ways in one run.
#
# BENCHMARKS.md section 2, "Through HAProxy". Run by hand, not in CI: the
# figures are ratios to the first way, measured one after the other on the
# same machine (absolute numbers on a shared machine are only hints).
#
#   (1) leastconn: HAProxy alone, `balance leastconn`, no SPOE;
#   (2) warmlane:  SPOE to warmlane (a release build);
#   (3) constant:  SPOE to tests/bench/const_agent.c, which answers every
#                  `route` with fixed variables and everything else with
#                  `ack` (the codec and loop floor).
#
# The configs are derived from haproxy/haproxy-2.6.cfg (haproxy-3.1.cfg for
# 3.x) by tests/bench/overhead.py, as tests/e2e/harness.py does; the trivial
# backend is a second proxy of the same HAProxy (`http-request return`).
# wrk sends chat-completion POSTs with a session header, a caller and a
# JSON body with "model" (tests/bench/overhead.lua), so the route and
# feedback messages carry their real arguments. Everything runs on loopback
# in a temporary directory removed on exit, with every process stopped.
#
# Environment (all optional):
#   BENCH_THREADS=2 BENCH_CONNS=32 BENCH_DURATION=10s BENCH_WARMUP=2s
#                         wrk's -t, -c, -d, and the unmeasured warm-up run
#   BENCH_SESSIONS=512    distinct sessions in the request mix
#   BENCH_COALESCE_US     warmlane's spop.coalesce_us (default: its default);
#                         a list ("250 0") runs one warmlane way per value
#   BENCH_ROUNDS=1        rounds of the ways, one after the other in each
#                         round; the table gives each way's medians, and the
#                         median of each round's ratio to the constant agent
#                         (paired: a round's ways see the same machine)
#   WARMLANE_BIN          the agent; default: built with meson
#                         --buildtype=release into build/bench-rel
#   BENCH_CONST_AGENT     the constant agent; default: from build/bench-rel
#   BENCH_WARMLANE_BASE   a second warmlane binary (a build of an earlier
#                         commit, say) run as one more way in each round,
#                         with its own defaults: the table adds each round's
#                         warmlane over it (paired: a regression check)
#   BENCH_HAPROXY=/usr/sbin/haproxy     HAProxy 2.6 (or whatever it is)
#   BENCH_HAPROXY_32      HAProxy 3.2 too: a path, or "auto" (default: the
#                         first build/*/haproxy/haproxy-3.2 found), or "no"
#
# Usage: tests/bench/overhead.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
threads=${BENCH_THREADS:-2}
conns=${BENCH_CONNS:-32}
duration=${BENCH_DURATION:-10s}
rounds=${BENCH_ROUNDS:-1}
coalesce_list=${BENCH_COALESCE_US:-default}
warmup=${BENCH_WARMUP:-2s}
export BENCH_SESSIONS=${BENCH_SESSIONS:-512}
haproxy26=${BENCH_HAPROXY:-/usr/sbin/haproxy}
haproxy32=${BENCH_HAPROXY_32:-auto}

say() { printf '%s\n' "$*"; }
die() { printf 'overhead.sh: %s\n' "$*" >&2; exit 1; }

# ---- tools and binaries ------------------------------------------------------

if ! command -v wrk >/dev/null 2>&1; then
	say "# installing wrk (apt-get)"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get install -y -q wrk >/dev/null || die "cannot install wrk"
fi
command -v python3 >/dev/null 2>&1 || die "python3 is needed"
[ -x "$haproxy26" ] || die "no HAProxy at $haproxy26 (set BENCH_HAPROXY)"

rel="$root/build/bench-rel"
if [ -z "${WARMLANE_BIN:-}" ] || [ -z "${BENCH_CONST_AGENT:-}" ]; then
	if [ ! -f "$rel/build.ninja" ]; then
		meson setup "$rel" "$root" --buildtype=release >/dev/null ||
			die "meson setup $rel failed"
	fi
	ninja -C "$rel" agent/warmlane tests/bench/bench-const-agent >/dev/null ||
		die "build in $rel failed"
fi
warmlane=${WARMLANE_BIN:-$rel/agent/warmlane}
const_agent=${BENCH_CONST_AGENT:-$rel/tests/bench/bench-const-agent}
[ -x "$warmlane" ] || die "no agent at $warmlane"
[ -x "$const_agent" ] || die "no constant agent at $const_agent"
warmlane_base=${BENCH_WARMLANE_BASE:-}
[ -z "$warmlane_base" ] || [ -x "$warmlane_base" ] || die "no agent at $warmlane_base"

if [ "$haproxy32" = auto ]; then
	haproxy32=""
	for f in "$root"/build/*/haproxy/haproxy-3.2; do
		if [ -x "$f" ] && "$f" -v >/dev/null 2>&1; then
			haproxy32=$f
			break
		fi
	done
elif [ "$haproxy32" = no ]; then
	haproxy32=""
fi

# ---- temp dir, processes, cleanup ----------------------------------------------

tmp=$(mktemp -d "${TMPDIR:-/tmp}/warmlane-overhead.XXXXXX")
pids=()

stop_pid() {
	local pid=$1
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		stop_pid "$pid"
	done
	pids=()
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Starts "$@" in the background with its output in $tmp/$name.log; sets $pid.
start() {
	local name=$1
	shift
	"$@" >"$tmp/$name.log" 2>&1 </dev/null &
	pid=$!
	pids+=("$pid")
}

# Stops one process started with start and forgets it.
stop() {
	stop_pid "$1"
	forget "$1"
}

# Runs "$@" in the background with its output in $1 and waits for it: a
# trapped INT or TERM then interrupts `wait` at once (a foreground wrk
# handles SIGINT by printing its figures and exiting 0, and bash would
# carry on). Returns its exit status.
run_bg() {
	local out=$1 w rc=0
	shift
	"$@" >"$out" 2>&1 </dev/null &
	w=$!
	pids+=("$w")
	wait "$w" || rc=$?
	forget "$w"
	return "$rc"
}

forget() {
	local keep=() p
	for p in "${pids[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	pids=("${keep[@]+"${keep[@]}"}")
}

free_ports() {
	python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# `show stat` status of proxy/server on the stats socket ("" when unknown).
server_status() {
	python3 "$root/tests/haproxy/server-status.py" "$tmp/stats.sock" "$1" "$2" 2>/dev/null || true
}

# Polls "$@" until it succeeds, at most $1 tenths of a second.
wait_for() {
	local tenths=$1
	shift
	for _ in $(seq "$tenths"); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

# utime + stime of a process, all its threads, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# TICKS REQUESTS -> microseconds of CPU per request.
per_request() {
	awk -v t="$1" -v n="$2" -v hz="$(getconf CLK_TCK)" \
		'BEGIN { if (n > 0) printf "%.1f", t * 1e6 / hz / n; else print "-" }'
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Exactly UP: "UP 1/2" is a server going down.
agent_up() { [ "$(server_status warmlane-agents agent1)" = UP ]; }

dump_logs() {
	local f
	for f in "$tmp"/*.log; do
		[ -f "$f" ] || continue
		say "----- $(basename "$f") (tail) -----"
		tail -n 30 "$f"
	done
}

metrics() {
	python3 - "$1" <<'EOF' 2>/dev/null || true
import sys, urllib.request
t = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=3).read().decode()
keep = [l for l in t.splitlines()
        if l.startswith(("warmlane_spop_messages_total", "warmlane_decisions_total",
                         "warmlane_spop_protocol_errors_total", "warmlane_spop_read_stalls_total",
                         "warmlane_spop_coalesce_waits_total", "warmlane_spop_coalesce_busy_total"))
        and not l.rstrip().endswith(" 0")]
print("; ".join(keep))
EOF
}

# ---- one way -------------------------------------------------------------------

# run_way HAPROXY VERSION LABEL WAY [COALESCE_US]: appends "label rps p50 p99 errors" to
# $tmp/results.
run_way() {
	local hap=$1 ver=$2 label=$3 way=$4 coalesce=${5:-} agent_pid="" hap_pid cfgway=spoe
	local ports port o1 o2 o3 metrics_port
	ports=$(free_ports 5)
	read -r port o1 o2 o3 metrics_port <<<"$ports"
	[ "$way" = leastconn ] && cfgway=plain
	rm -f "$tmp/stats.sock" "$tmp/spoa.sock"

	python3 "$here/overhead.py" cfg "$ver" "$cfgway" "$tmp/haproxy.cfg" \
		dir="$tmp" port="$port" origin="$o1,$o2,$o3" agent="$tmp/spoa.sock"
	"$hap" -c -q -f "$tmp/haproxy.cfg" || die "haproxy -c failed ($label)"

	start haproxy "$hap" -db -f "$tmp/haproxy.cfg"
	hap_pid=$pid
	if ! wait_for 150 listening "$port" || ! wait_for 50 test -S "$tmp/stats.sock"; then
		dump_logs
		die "HAProxy did not start ($label)"
	fi
	case $way in
	warmlane | warmlane-base)
		python3 "$here/overhead.py" agentcfg "$tmp/warmlane.yaml" dir="$tmp" \
			agent="$tmp/spoa.sock" metrics="$metrics_port" stats="$tmp/stats.sock" \
			coalesce_us="$coalesce"
		if [ "$way" = warmlane ]; then
			start agent "$warmlane" --config "$tmp/warmlane.yaml"
		else
			start agent "$warmlane_base" --config "$tmp/warmlane.yaml"
		fi
		agent_pid=$pid ;;
	constant)
		start agent "$const_agent" "$tmp/spoa.sock"
		agent_pid=$pid ;;
	esac
	# After HAProxy, whose runtime API warmlane reads from its start.
	if [ -n "$agent_pid" ] && ! wait_for 100 test -S "$tmp/spoa.sock"; then
		dump_logs
		die "the agent did not listen ($label)"
	fi

	if [ -n "$agent_pid" ] && ! wait_for 150 agent_up; then
		dump_logs
		die "HAProxy does not see the agent UP ($label)"
	fi

	local url="http://127.0.0.1:$port/v1/chat/completions"
	run_bg "$tmp/warmup.out" wrk -t"$threads" -c"$conns" -d"$warmup" \
		-s "$here/overhead.lua" "$url" ||
		die "wrk (warm-up) failed: $(cat "$tmp/warmup.out")"
	local h0 a0=0 h1 a1=0
	h0=$(cpu_ticks "$hap_pid")
	[ -z "$agent_pid" ] || a0=$(cpu_ticks "$agent_pid")
	run_bg "$tmp/wrk.out" wrk -t"$threads" -c"$conns" -d"$duration" --latency \
		-s "$here/overhead.lua" "$url" ||
		die "wrk failed: $(cat "$tmp/wrk.out")"
	h1=$(cpu_ticks "$hap_pid")
	[ -z "$agent_pid" ] || a1=$(cpu_ticks "$agent_pid")
	local figures
	figures=$(python3 "$here/overhead.py" wrk "$tmp/wrk.out") ||
		die "cannot read wrk's output: $(cat "$tmp/wrk.out")"
	say "$label $figures" >>"$tmp/results"
	say "#   $label: $(grep -E 'Requests/sec|requests in' "$tmp/wrk.out" | tr -s ' ' | paste -sd ';' -)"

	local sent
	sent=$(cat "$tmp/warmup.out" "$tmp/wrk.out" | sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' |
		awk '{ s += $1 } END { print s }')
	say "#     requests sent (warm-up + measured): $sent"
	local measured
	measured=$(sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' "$tmp/wrk.out")
	say "#     cpu per measured request: haproxy $(per_request $((h1 - h0)) "$measured") us, agent $(per_request $((a1 - a0)) "$measured") us"
	if [ "$way" != constant ] && [ "$way" != leastconn ]; then
		say "#     agent metrics: $(metrics "$metrics_port")"
	fi
	# The agent first: HAProxy stopping first would show in its log.
	if [ -n "$agent_pid" ]; then
		stop "$agent_pid"
		if [ "$way" = constant ]; then
			say "#     $(grep -E '^const-agent:' "$tmp/agent.log" || say "const-agent: (no counts)")"
		fi
		if grep -v '^const-agent:' "$tmp/agent.log" | grep -qiE 'error|warn'; then
			say "#     agent log:"
			grep -v '^const-agent:' "$tmp/agent.log" | sed 's/^/#       /' | tail -n 5
		fi
	fi
	stop "$hap_pid"
	rm -f "$tmp/agent.log" "$tmp/haproxy.log"
}

# run_version HAPROXY: the three ways and the table for one HAProxy binary.
run_version() {
	local hap=$1 full ver
	full=$("$hap" -v 2>/dev/null | sed -n 's/^HAProxy version \([^ ]*\).*/\1/p' | head -n 1)
	[ -n "$full" ] || die "$hap -v: not HAProxy"
	ver=$(printf '%s' "$full" | cut -d. -f1,2)
	say ""
	say "## HAProxy $full (${hap#"$root/"})"
	: >"$tmp/results"
	local r c
	for r in $(seq "$rounds"); do
		[ "$rounds" -eq 1 ] || say "# round $r of $rounds"
		run_way "$hap" "$ver" "(1) leastconn, no SPOE" leastconn
		for c in $coalesce_list; do
			if [ "$c" = default ]; then
				run_way "$hap" "$ver" "(2) SPOE to warmlane" warmlane
			else
				run_way "$hap" "$ver" "(2) SPOE to warmlane, coalesce_us $c" warmlane "$c"
			fi
		done
		if [ -n "$warmlane_base" ]; then
			run_way "$hap" "$ver" "(2) SPOE to warmlane baseline" warmlane-base
		fi
		run_way "$hap" "$ver" "(3) SPOE to constant agent" constant
	done
	say ""
	python3 "$here/overhead.py" table "$tmp/results"
}

# ---- the machine, then the run -------------------------------------------------

say "# warmlane overhead through HAProxy (BENCHMARKS.md section 2)"
say "# date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
say "# machine:  $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(uname -sr)"
say "# load:     $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) before the run"
say "# besides:  $(python3 "$here/overhead.py" busy) (before the run)"
say "# wrk:      $(wrk --version 2>&1 | head -n 1 | cut -d' ' -f1-2), -t$threads -c$conns -d$duration after a $warmup warm-up, $BENCH_SESSIONS sessions, nothing pinned; $rounds round(s)"
say "# warmlane: $("$warmlane" --version 2>&1 | head -n 1) (${warmlane#"$root/"})"
[ -z "$warmlane_base" ] ||
	say "# baseline: $("$warmlane_base" --version 2>&1 | head -n 1) (${warmlane_base#"$root/"})"
say "# setup:    HAProxy with its default threads; agents on a unix socket; the backend is HAProxy"
say "#           itself (http-request return) on loopback; no logging in any way"

run_version "$haproxy26"
if [ -n "$haproxy32" ]; then
	run_version "$haproxy32"
fi

say ""
say "# load:     $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) after the run"
say "# besides:  $(python3 "$here/overhead.py" busy) (after the run)"
say "# ratio: requests/s over (1); +p50/+p99: latency added to (1), ms (wrk --latency);"
say "# errors: non-2xx responses and socket errors. Noisy on a shared machine: compare ratios."

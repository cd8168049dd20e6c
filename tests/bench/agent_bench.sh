#!/bin/bash
# agent_bench.sh - the agent alone over SPOP against the codec-and-loop floor: decisions/s, ratio, latency, CPU and instructions per decision.
#
# Run by hand, not in CI. tests/bench/spop_load.c (bench-spop-load) plays
# HAProxy: HELLO, then pipelined `route` NOTIFYs with the 15 arguments of
# haproxy/warmlane.spoe.conf and, for each ACK, the `feedback` NOTIFY with
# the ACK's akey (one decision = both). Each setup runs warmlane (a release
# build) and bench-const-agent (the floor: same codec, same loop, the ACKs
# of a read pass in one write, no decision) side by side, filled once, then
# measured alternately for several rounds, the agent pinned to one CPU and
# the generator to the other (taskset). Printed per setup, medians of the
# rounds:
#   - saturating: decisions/s, the ratio to the floor, agent CPU per
#     decision (from /proc/PID/task/*/schedstat), the generator's CPU
#     (gen %: a saturating figure is the agent's only while the agent's
#     CPU is near its core's and the generator's well under it; a last
#     line names the rows whose generator used 80% of its core or more);
#   - paced at BENCH_RATE decisions/s: frame latency p50/p99 and agent CPU
#     per decision (the wake-up-per-frame regime);
#   - with BENCH_CALLGRIND=1, instructions per decision under valgrind
#     --tool=callgrind on BENCH_CG_N decisions (instrumentation on for the
#     measured phase only): repeatable on a loaded machine, where the
#     wall-clock figures are not;
#   - with BENCH_CACHESIM=1 (implies BENCH_CALLGRIND), the same run with
#     --cache-sim=yes: D1 and LL read and write misses per decision too.
#     cachegrind's simulator, through callgrind: cachegrind cannot
#     switch its instrumentation on at the measured phase before
#     valgrind 3.22, callgrind can. The caches simulated are set
#     (BENCH_CACHESIM_ARGS), not read off the host: a VM's reported
#     geometry can be absurd (a 256 MiB direct-mapped LL here), and fixed
#     ones compare across machines. Their geometry is printed.
#     Prefetches are not simulated.
#
# Environment (all optional):
#   BENCH_ROUNDS=3 BENCH_N=200000 BENCH_CONNS=8 BENCH_WINDOW=16
#                                        (BENCH_ROUNDS=0: valgrind's runs only)
#   BENCH_RATE=20000 BENCH_RATE_N=60000  the paced run
#   BENCH_SETUPS="8:1000 64:1000000"     endpoints:keys
#   BENCH_CPUS="0 1"                     agent CPU, generator CPU
#   BENCH_CALLGRIND=0 BENCH_CG_N=20000
#   BENCH_CACHESIM=0
#   BENCH_CACHESIM_ARGS="--I1=32768,8,64 --D1=32768,8,64 --LL=33554432,16,64"
#                                        (32 KiB L1s, a 32 MiB L3)
#   BENCH_CG_AGENTS="warmlane floor"     the agents valgrind runs
#   BENCH_CG_KEEP=DIR                    keep the callgrind outputs there
#                                        (for callgrind_annotate)
#   BENCH_COALESCE_US=250                warmlane's spop.coalesce_us in the paced
#                                        run and under valgrind (its default)
#   BENCH_RAW=0                          1: each round's generator lines too
#   BENCH_SAT_COALESCE_US=0              the same in the saturating run: with
#                                        C x W frames in flight the generator is a
#                                        closed loop, and a pass that finds fewer
#                                        than COALESCE_FULL_PASS frames sleeps out
#                                        the window while the generator waits on
#                                        its full windows: the figure would be the
#                                        window's, not the agent's CPU
#   WARMLANE_BIN, BENCH_CONST_AGENT, BENCH_LOAD: default from a
#   --buildtype=release build in build/bench-rel
#
# Usage: tests/bench/agent_bench.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=${BENCH_ROUNDS:-3}
n=${BENCH_N:-200000}
conns=${BENCH_CONNS:-8}
window=${BENCH_WINDOW:-16}
rate=${BENCH_RATE:-20000}
rate_n=${BENCH_RATE_N:-60000}
setups=${BENCH_SETUPS:-"8:1000 64:1000000"}
read -r cpu_agent cpu_gen <<<"${BENCH_CPUS:-0 1}"
callgrind=${BENCH_CALLGRIND:-0}
cachesim=${BENCH_CACHESIM:-0}
cachesim_args=${BENCH_CACHESIM_ARGS:-"--I1=32768,8,64 --D1=32768,8,64 --LL=33554432,16,64"}
cg_keep=${BENCH_CG_KEEP:-}
cg_agents=${BENCH_CG_AGENTS:-"warmlane floor"}
[ "$cachesim" = 0 ] || callgrind=1
cg_n=${BENCH_CG_N:-20000}
coalesce_us=${BENCH_COALESCE_US:-250}
sat_coalesce_us=${BENCH_SAT_COALESCE_US:-0}
raw=${BENCH_RAW:-0}

die() { printf 'agent_bench.sh: %s\n' "$*" >&2; exit 1; }

rel="$root/build/bench-rel"
if [ -z "${WARMLANE_BIN:-}" ] || [ -z "${BENCH_CONST_AGENT:-}" ] ||
	[ -z "${BENCH_LOAD:-}" ]; then
	if [ ! -f "$rel/build.ninja" ]; then
		meson setup "$rel" "$root" --buildtype=release >/dev/null ||
			die "meson setup $rel failed"
	fi
	ninja -C "$rel" agent/warmlane tests/bench/bench-const-agent \
		tests/bench/bench-spop-load >/dev/null || die "build in $rel failed"
fi
warmlane=${WARMLANE_BIN:-$rel/agent/warmlane}
const_agent=${BENCH_CONST_AGENT:-$rel/tests/bench/bench-const-agent}
load=${BENCH_LOAD:-$rel/tests/bench/bench-spop-load}
for b in "$warmlane" "$const_agent" "$load"; do
	[ -x "$b" ] || die "no binary at $b"
done
[ "$callgrind" = 0 ] || command -v valgrind >/dev/null ||
	die "BENCH_CALLGRIND=1 and BENCH_CACHESIM=1 need valgrind"

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

agentcfg() { # endpoints keys socket coalesce_us > yaml
	printf 'log_level: warn\nlisten: ["unix:%s,mode=0600"]\n' "$3"
	printf 'metrics: { listen: "" }\nruntime_api: { socket: "" }\n'
	printf 'log_input: { path: "" }\ncommand_socket: { path: "" }\n'
	printf 'state: { file: "" }\n'
	printf 'spop: { coalesce_us: %s }\n' "$4"
	printf 'policy: { affinity_max_entries: %s }\nendpoints:\n' "$2"
	for i in $(seq 1 "$1"); do
		printf '  - { backend: llm, server: s%s, models: [m1], weight: 1, keys: [k1] }\n' "$i"
	done
}

wait_sock() {
	for _ in $(seq 1 200); do
		[ -S "$1" ] && return 0
		sleep 0.05
	done
	die "no socket at $1"
}

gen() { # socket pid args... -> one key=value line
	local s=$1 p=$2
	shift 2
	taskset -c "$cpu_gen" "$load" -c "$conns" -w "$window" -p "$p" "$@" "$s"
}

# The value of key $1 on each line of stdin (one per round: the medians
# below are over them).
field() { sed -n "s/^\(.* \)\{0,1\}$1=\([^ ]*\).*/\2/p"; }

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '# agent_bench.sh: %s rounds of %s decisions, %s connections x %s in flight; agent on CPU %s, generator on CPU %s; warmlane spop.coalesce_us %s saturating, %s paced and under valgrind; load average %s\n' \
	"$rounds" "$n" "$conns" "$window" "$cpu_agent" "$cpu_gen" "$sat_coalesce_us" "$coalesce_us" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
printf '| %-20s | %-9s | %10s | %6s | %9s | %7s | %9s | %9s | %9s |\n' \
	setup agent 'dec/s' ratio 'agent us' 'gen %' "p50 us@${rate}" "p99 us@${rate}" "us@${rate}"
printf '|%s|\n' "----------------------|-----------|------------|--------|-----------|---------|-----------|-----------|-----------"

busy= # saturating rows whose generator was near its own limit
for setup in $setups; do
	eps=${setup%%:*}
	keys=${setup##*:}
	agentcfg "$eps" "$keys" "$tmp/w.sock" "$sat_coalesce_us" >"$tmp/w.yaml"
	agentcfg "$eps" "$keys" "$tmp/wp.sock" "$coalesce_us" >"$tmp/wp.yaml"
	if [ "$rounds" -gt 0 ]; then
		taskset -c "$cpu_agent" "$warmlane" --config "$tmp/w.yaml" &
		wpid=$!
		pids+=("$wpid")
		# The paced run's warmlane, with its own window.
		taskset -c "$cpu_agent" "$warmlane" --config "$tmp/wp.yaml" &
		wppid=$!
		pids+=("$wppid")
		taskset -c "$cpu_agent" "$const_agent" "$tmp/c.sock" >/dev/null &
		cpid=$!
		pids+=("$cpid")
		wait_sock "$tmp/w.sock"
		wait_sock "$tmp/wp.sock"
		wait_sock "$tmp/c.sock"
		# The fill: every key decided once, so the map holds them all.
		gen "$tmp/w.sock" "$wpid" -k "$keys" -n 1 >/dev/null
		gen "$tmp/wp.sock" "$wppid" -k "$keys" -n 1 >/dev/null
		gen "$tmp/c.sock" "$cpid" -k "$keys" -n 1 >/dev/null
		: >"$tmp/w.txt"
		: >"$tmp/c.txt"
		for r in $(seq 1 "$rounds"); do
			gen "$tmp/w.sock" "$wpid" -k "$keys" -f 0 -n "$n" >>"$tmp/w.txt"
			gen "$tmp/c.sock" "$cpid" -k "$keys" -f 0 -n "$n" >>"$tmp/c.txt"
			gen "$tmp/wp.sock" "$wppid" -k "$keys" -f 0 -n "$rate_n" -r "$rate" >>"$tmp/wr.txt"
			gen "$tmp/c.sock" "$cpid" -k "$keys" -f 0 -n "$rate_n" -r "$rate" >>"$tmp/cr.txt"
		done
		if [ "$raw" != 0 ]; then
			for f in w c wr cr; do
				sed "s/^/# raw $eps-$keys $f: /" "$tmp/$f.txt"
			done
		fi
		cdps=$(field decisions_per_s <"$tmp/c.txt" | median)
		for a in w c; do
			dps=$(field decisions_per_s <"$tmp/$a.txt" | median)
			us=$(field agent_us_per_decision <"$tmp/$a.txt" | median)
			gp=$(field gen_cpu_pct <"$tmp/$a.txt" | median)
			p50=$(field p50_us <"$tmp/${a}r.txt" | median)
			p99=$(field p99_us <"$tmp/${a}r.txt" | median)
			rus=$(field agent_us_per_decision <"$tmp/${a}r.txt" | median)
			name=warmlane
			[ "$a" = c ] && name=floor
			printf '| %-20s | %-9s | %10.0f | %6.3f | %9.3f | %7.1f | %9.1f | %9.1f | %9.3f |\n' \
				"$eps endpoints $keys keys" "$name" "$dps" \
				"$(awk -v a="$dps" -v b="$cdps" 'BEGIN { print a / b }')" \
				"$us" "$gp" "$p50" "$p99" "$rus"
			if awk -v g="$gp" 'BEGIN { exit !(g >= 80) }'; then
				busy="$busy$eps endpoints $keys keys $name: generator at $gp% of its core; "
			fi
		done
		rm -f "$tmp/wr.txt" "$tmp/cr.txt"
		kill "$wpid" "$wppid" "$cpid"
		wait "$wpid" "$wppid" "$cpid" 2>/dev/null || true
		pids=()
		rm -f "$tmp/w.sock" "$tmp/wp.sock" "$tmp/c.sock"
	fi

	[ "$callgrind" = 0 ] && continue
	for name in $cg_agents; do
		case $name in
		warmlane) a=w ;;
		floor) a=c ;;
		*) die "BENCH_CG_AGENTS: no agent $name" ;;
		esac
		if [ "$a" = w ]; then
			cmd=("$warmlane" --config "$tmp/wp.yaml")
			sock=$tmp/wp.sock
		else
			cmd=("$const_agent" "$tmp/c.sock")
			sock=$tmp/c.sock
		fi
		cg_sim=(--cache-sim=no)
		if [ "$cachesim" != 0 ]; then
			# shellcheck disable=SC2206 # split into options on purpose
			cg_sim=(--cache-sim=yes $cachesim_args)
		fi
		valgrind -q --tool=callgrind --instr-atstart=no "${cg_sim[@]}" \
			--callgrind-out-file="$tmp/cg.$a.out" "${cmd[@]}" >/dev/null &
		vpid=$!
		pids+=("$vpid")
		wait_sock "$sock"
		gen "$sock" "$vpid" -k "$keys" -n "$cg_n" \
			-B "callgrind_control -i on $vpid >/dev/null 2>&1" \
			-A "callgrind_control -i off $vpid >/dev/null 2>&1" >/dev/null
		kill "$vpid"
		wait "$vpid" 2>/dev/null || true
		pids=()
		rm -f "$sock"
		if [ -n "$cg_keep" ]; then
			mkdir -p "$cg_keep"
			for f in "$tmp/cg.$a.out"*; do
				cp "$f" "$cg_keep/$eps-$keys-$name${f##*/cg."$a".out}.out"
			done
		fi
		# The events line names the totals' columns: Ir alone, or
		# Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw with the cache.
		per=$(awk -v n="$cg_n" '
			/^events:/ && !ne { ne = split(substr($0, 9), ev, " ") }
			/^totals:/ { for (i = 2; i <= NF; i++) t[i - 1] += $i }
			END { for (i = 1; i <= ne; i++) printf "%s=%.2f ", ev[i], t[i] / n }
		' "$tmp"/cg.$a.out*)
		ir=$(sed -n 's/^Ir=\([0-9.]*\).*/\1/p' <<<"$per")
		printf '# callgrind %s endpoints %s keys %-8s %s decisions: %.0f instructions per decision\n' \
			"$eps" "$keys" "$name" "$cg_n" "$ir"
		if [ "$cachesim" != 0 ]; then
			geo=$(sed -n 's/^desc: \(I1\|D1\|LL\) cache: *\(.*\)/\1 \2;/p' \
				"$tmp"/cg.$a.out* | sort -u | tr '\n' ' ')
			printf '# cache-sim %s endpoints %s keys %-8s per decision: %s(%s)\n' \
				"$eps" "$keys" "$name" "$per" "${geo% }"
		fi
		rm -f "$tmp"/cg.$a.out*
	done
done
# A saturating figure is the agent's only while the generator has room:
# near its own core's limit, it is the generator's (the agent idles
# between passes and pays more wake-ups per decision).
if [ -n "$busy" ]; then
	printf '# not saturated, the figure is the generator'\''s limit: %s\n' "${busy%; }"
fi

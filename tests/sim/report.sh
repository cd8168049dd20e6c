#!/usr/bin/env bash
# tests/sim/report.sh - regenerates docs/routing-quality.md and its plots (docs/sim-*.png) from warmlane-sim runs.
#
# Usage: tests/sim/report.sh [TRACE]
#   TRACE: the Mooncake conversation trace, default
#          ../shared/traces/mooncake_conversation.jsonl relative to the repository root;
#          without it the trace sections are left out.
# Environment: WARMLANE_SIM_BUILD (build dir, default build/sim), SEED (default 1).
# Needs gnuplot (Debian: gnuplot-nox) for the plots.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
trace=${1:-../shared/traces/mooncake_conversation.jsonl}
build=${WARMLANE_SIM_BUILD:-build/sim}
seed=${SEED:-1}
out=docs/routing-quality.md
notes=tests/sim/report-notes.md

if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" >/dev/null
fi
ninja -C "$build" >/dev/null
sim="$build/tests/sim/warmlane-sim"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
have_trace=0
[ -f "$trace" ] && have_trace=1

# CSV (stdin) -> markdown table
csv_md() {
	awk -F, 'NR == 1 { printf "|"; for (i = 1; i <= NF; i++) printf " %s |", $i; printf "\n|";
			   for (i = 1; i <= NF; i++) printf "---|"; printf "\n"; next }
		 { printf "|"; for (i = 1; i <= NF; i++) printf " %s |", $i; printf "\n" }'
}

# the scenario section of the human output (stdin) -> markdown table
scen_md() {
	awk '/^# scenario/ { on = 1; next }
	     on && NF { printf "|"; for (i = 1; i <= NF; i++) printf " %s |", $i; printf "\n";
			if (!hdr) { printf "|"; for (i = 1; i <= NF; i++) printf "---|"; printf "\n"; hdr = 1 } }'
}

# runs the simulator: name, then its arguments; keeps CSV, human output and seeds line
run() {
	local name=$1
	shift
	"$sim" --seed "$seed" --csv "$@" >"$tmp/$name.csv" 2>"$tmp/$name.info"
	"$sim" --seed "$seed" "$@" >"$tmp/$name.txt"
}

# TTFT CDF data per policy from a dump: blocks separated by two blank lines
cdf_data() {
	local dump=$1 dat=$2
	: >"$dat"
	for p in $(cut -d, -f1 "$dump" | tail -n +2 | awk '!seen[$0]++'); do
		awk -F, -v p="$p" '$1 == p && $6 >= 0 { print $6 }' "$dump" | sort -g |
			awk -v p="$p" '{ v[NR] = $1 } END { print "# " p; for (i = 1; i <= NR; i++)
				if (i % 10 == 0 || i == NR) printf "%g %g\n", v[i] / 1000, i / NR; printf "\n\n" }' >>"$dat"
	done
}

plot_cdf() {
	local dat=$1 png=$2 title=$3
	local n names
	n=$(grep -c '^# ' "$dat")
	names=$(grep '^# ' "$dat" | sed 's/^# //' | tr '\n' ' ')
	gnuplot <<GP
set terminal pngcairo size 900,560 font ",10"
set output "$png"
set title "$title"
set xlabel "time to first token (s)"
set ylabel "fraction of requests"
set logscale x
set xrange [0.01:*]
set key bottom right
set grid
names = "$names"
plot for [i=0:$((n - 1))] "$dat" index i using 1:2 with lines lw 2 title word(names, i + 1)
GP
}

# --- runs -----------------------------------------------------------------
workloads=()
if [ $have_trace = 1 ]; then
	run mooncake --trace "$trace" --dump "$tmp/mooncake.dump"
	run mooncake-log --trace "$trace" --log-ingest
	run mooncake-session --trace "$trace" --keys session
	run mooncake-speed3 --trace "$trace" --speed 3 --dump "$tmp/mooncake-speed3.dump"
	run mooncake-engine --trace "$trace" --engine-load
	run mooncake-engine-speed3 --trace "$trace" --engine-load --speed 3
	run mooncake-hints --trace "$trace" --shared-hints
	run mooncake-hints-speed3 --trace "$trace" --shared-hints --speed 3
	for a in 2 4; do
		run "mooncake-hints-agents$a" --trace "$trace" --shared-hints --agents "$a"
	done
	for a in 2 4; do
		run "mooncake-agents$a" --trace "$trace" --agents "$a"
	done
	for sc in fast-failure rate-limit slow recover scale-out down flap agents-2 agents-4; do
		run "mooncake-$sc" --trace "$trace" --scenario "$sc" \
			$([ "$sc" = fast-failure ] && echo --dump "$tmp/mooncake-ff.dump")
	done
	run mooncake-recover-anon --trace "$trace" --scenario recover --keys none
	# the shipped log input, and HAProxy's optional completion checks
	for k in keyed anon; do
		kk=
		if [ $k = anon ]; then kk="--keys none"; fi
		run "mooncake-recover-$k-log" --trace "$trace" --scenario recover $kk --log-ingest
		run "mooncake-recover-$k-log-check" --trace "$trace" --scenario recover $kk --log-ingest --http-check
	done
	# anonymous requests: every warmlane decision is power of two choices
	for n in 80 1500; do
		run "anon-quick$n" --trace "$trace" --keys none --config tests/sim/examples/quickstart.conf \
			--limit "$n" --dump "$tmp/anon-quick$n.dump"
	done
	for sc in slow fast-failure; do
		run "anon-$sc" --trace "$trace" --keys none --scenario "$sc"
	done
	# a fleet of two, where the candidates' median is their mean
	for sc in slow recover; do
		run "two-$sc" --trace "$trace" --config tests/sim/examples/two.conf --speed 0.25 --scenario "$sc"
	done
	# a server slow from its first request, at low volume (issue 12)
	for n in 300 1000; do
		run "slowstart$n" --trace "$trace" --keys session --config tests/sim/examples/quickstart.conf \
			--limit "$n" --scenario slow-start
	done
fi
# policy changes tried on the real core (--set) and on the design model
variants=(
	"warmlane|defaults|"
	"warmlane|defaults, log input|--log-ingest"
	"warmlane|log input, score_by headers|--log-ingest --set score_by=0"
	"warmlane|log input, score_by end_to_end|--log-ingest --set score_by=1"
	"warmlane|log input, load_floor_e2e 0 (load_floor, 6, everywhere)|--log-ingest --set load_floor_e2e=0"
	"warmlane|load_floor 4 (before policy-v2 section 24)|--set load_floor=4"
	"warmlane|ewma_alpha 0.3 (the former default)|--set ewma_alpha=0.3"
	"warmlane|ewma_alpha 0.1|--set ewma_alpha=0.1"
	"warmlane|no sticky tolerance|--set sticky_tolerance=1e9"
	"warmlane|no idle_reset|--set idle_reset_ms=1e12"
	"warmlane|place_choices 2|--set place_choices=2"
	"warmlane|place_choices 3|--set place_choices=3"
	"warmlane|place_choices 8 (leastconn below the bound)|--set place_choices=8"
	"warmlane|place_load_z 0 (new keys by rendezvous alone, before round 5)|--set place_load_z=0"
	"warmlane|place_long_kib 80 (long new prompts by load: one HAProxy, or a shared hint; policy-v2 section 14)|--set place_long_kib=80"
	"warmlane|routers one (place_load_z 0.5, affinity_ttl 30 min: one HAProxy, or a shared hint; policy-v2 sections 28, 29)|--set routers=1"
	"warmlane|engine metrics (routers auto: alone with one agent, not behind 2 or 4; policy-v2 sections 29, 32)|--engine-load"
	"warmlane|engine metrics, routers several (as before section 29)|--engine-load --set routers=2"
	"warmlane|shared warm hint (routers auto: alone by hints another HAProxy wrote, or its own with its peers connected; policy-v2 sections 31, 33, 34)|--shared-hints"
	"warmlane|warm_slack 0 (the bound alone, before issue 12)|--set warm_slack=0"
	"warmlane|slow_run 0 (no slow-run detector)|--set slow_run=0"
	"warmlane|slow_start 0 (new keys not judged by their first answers)|--set slow_start=0"
	"warmlane-model|model of the first design's defaults|"
	"warmlane-model|model: tr per KiB, bound +2|--set norm=1 --set slack=2"
)
if [ $have_trace = 1 ] && "$sim" --list | grep -q ' warmlane '; then
	i=0
	for v in "${variants[@]}"; do
		IFS='|' read -r pol label args <<<"$v"
		# shellcheck disable=SC2086
		{
			"$sim" --seed "$seed" --csv --trace "$trace" --policy "$pol" $args 2>/dev/null | tail -1
			"$sim" --seed "$seed" --csv --trace "$trace" --policy "$pol" --agents 4 $args 2>/dev/null | tail -1
			"$sim" --seed "$seed" --csv --trace "$trace" --policy "$pol" --speed 3 $args 2>/dev/null | tail -1
			"$sim" --seed "$seed" --trace "$trace" --policy "$pol" --scenario slow $args | tail -1
			"$sim" --seed "$seed" --trace "$trace" --policy "$pol" --scenario fast-failure $args | tail -1
			"$sim" --seed "$seed" --csv --trace "$trace" --policy "$pol" --agents 2 $args 2>/dev/null | tail -1
		} >"$tmp/variant$i.out"
		echo "$label" >"$tmp/variant$i.label"
		i=$((i + 1))
	done
fi
run chat --workload chat --dump "$tmp/chat.dump"
run groups --workload groups
run mixed --workload mixed
run hetero --workload chat --config tests/sim/examples/hetero.conf --dump "$tmp/hetero.dump"
run vllm-slow --workload chat --config tests/sim/examples/vllm.conf --scenario slow
run vllm-slow-log --workload chat --config tests/sim/examples/vllm.conf --scenario slow --log-ingest
run vllm-slowpf --workload chat --config tests/sim/examples/vllm.conf --scenario slow-prefill
run vllm-slowpf-log --workload chat --config tests/sim/examples/vllm.conf --scenario slow-prefill --log-ingest
run chat-slowpf --workload chat --scenario slow-prefill
# anonymous requests one at a time to endpoints a fraction of a percent
# apart (policy.p2c_margin, docs/policy-v2.md section 19)
run spread --workload engine --config tests/sim/examples/near.conf --turns 1 --clients 1 --size 800 \
	--keys none --log-ingest --scenario spread
# the engine benchmark's one-slot llama.cpp fleet and traffic (issue 12,
# policy.place_slots: the core is told each endpoint's max_running)
run llama --workload engine --config tests/sim/examples/llama.conf
run llama-agents2 --workload engine --config tests/sim/examples/llama.conf --agents 2
run llama-noslots --workload engine --config tests/sim/examples/llama.conf --policy warmlane --set place_slots=0
# failover tiers (issue 21): four own endpoints, then a slower, dearer API
run tiers-healthy --workload chat --config tests/sim/examples/tiers.conf
run chat-tiers --workload chat --config tests/sim/examples/tiers.conf --scenario tiers
run chat-tiers-log --workload chat --config tests/sim/examples/tiers.conf --scenario tiers --log-ingest
run chat-tiers-anon --workload chat --config tests/sim/examples/tiers.conf --scenario tiers --keys none
run chat-tiers-agents2 --workload chat --config tests/sim/examples/tiers.conf --scenario tiers --agents 2
run chat-recover-anon --workload chat --scenario recover --keys none
for k in keyed anon; do
	kk=
	if [ $k = anon ]; then kk="--keys none"; fi
	run "chat-recover-$k-log" --workload chat --scenario recover $kk --log-ingest
	run "chat-recover-$k-log-check" --workload chat --scenario recover $kk --log-ingest --http-check
done
for sc in fast-failure rate-limit slow recover scale-out down flap agents-2 agents-4; do
	run "chat-$sc" --workload chat --scenario "$sc" $([ "$sc" = fast-failure ] && echo --dump "$tmp/chat-ff.dump")
done

# --- plots ------------------------------------------------------------------
plots=0
if command -v gnuplot >/dev/null; then
	plots=1
	if [ $have_trace = 1 ]; then
		cdf_data "$tmp/mooncake.dump" "$tmp/cdf1.dat"
		plot_cdf "$tmp/cdf1.dat" docs/sim-ttft-cdf-mooncake.png "TTFT CDF, Mooncake conversation trace (speed 1, prefix keys)"
		cdf_data "$tmp/mooncake-speed3.dump" "$tmp/cdf3.dat"
		plot_cdf "$tmp/cdf3.dat" docs/sim-ttft-cdf-mooncake-speed3.png "TTFT CDF, Mooncake trace replayed 3x faster"
	fi
	cdf_data "$tmp/chat.dump" "$tmp/cdfc.dat"
	plot_cdf "$tmp/cdfc.dat" docs/sim-ttft-cdf-chat.png "TTFT CDF, synthetic multi-turn chat (session ids)"

	# hit rate per policy and workload
	hr="$tmp/hit.dat"
	{
		printf "policy"
		for w in mooncake mooncake-session chat groups mixed; do
			[ -f "$tmp/$w.csv" ] && printf " %s" "$w"
		done
		printf "\n"
		for p in $(tail -n +2 "$tmp/chat.csv" | cut -d, -f1); do
			printf "%s" "$p"
			for w in mooncake mooncake-session chat groups mixed; do
				[ -f "$tmp/$w.csv" ] && awk -F, -v p="$p" '$1 == p { printf " %s", $3 * 100 }' "$tmp/$w.csv"
			done
			printf "\n"
		done
	} >"$hr"
	ncol=$(head -1 "$hr" | wc -w)
	gnuplot <<GP
set terminal pngcairo size 900,520 font ",10"
set output "docs/sim-hit-rate.png"
set title "Token-weighted prefix-cache hit rate per policy"
set ylabel "hit rate (%)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set grid ytics
set yrange [0:100]
plot for [c=2:$ncol] "$hr" using c:xtic(1) title columnheader(c)
GP

	# failing endpoint's traffic share over time (fast-failure scenario, gpu4)
	for w in chat mooncake; do
		dump="$tmp/$w-ff.dump"
		[ -f "$dump" ] || continue
		dat="$tmp/$w-share.dat"
		: >"$dat"
		for p in $(cut -d, -f1 "$dump" | tail -n +2 | awk '!seen[$0]++'); do
			awk -F, -v p="$p" 'NR > 1 && $1 == p { b = int($3 / 60000); n[b]++; if ($4 == "gpu4") f[b]++;
				if (b > m) m = b }
				END { print "# " p; for (i = 0; i <= m; i++) if (n[i]) printf "%g %g\n", i, 100 * f[i] / n[i]; printf "\n\n" }' \
				"$dump" >>"$dat"
		done
		n=$(grep -c '^# ' "$dat")
		names=$(grep '^# ' "$dat" | sed 's/^# //' | tr '\n' ' ')
		gnuplot <<GP
set terminal pngcairo size 1000,520 font ",10"
set output "docs/sim-fast-failure-share-$w.png"
set title "fast-failure ($w): share of each minute's requests sent to gpu4 (instant 500s from 20% of the requests on)"
set xlabel "minute"
set ylabel "share to gpu4 (%)"
set key outside right
set grid
names = "$names"
plot for [i=0:$((n - 1))] "$dat" index i using 1:2 with lines lw 2 title word(names, i + 1)
GP
	done
fi

# --- document ---------------------------------------------------------------
fig() { # policy column -> value from a CSV
	awk -F, -v p="$2" -v c="$3" '$1 == p { print $c }' "$tmp/$1.csv"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == "" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }

{
	cat <<'MD'
# Routing quality: warmlane against what HAProxy users run instead

Generated by `tests/sim/report.sh` (do not edit by hand: change the script or
`tests/sim/report-notes.md` and run it again). Every figure comes from
`warmlane-sim`, the discrete-event fleet simulator in `tests/sim/`, which links
the real routing core (`core/`) for the `warmlane` policy and runs in
virtual time: the figures do not depend on the machine and the same seed gives
the same output. Each table row is one policy on the same input.

Reproduce one table: `build/sim/tests/sim/warmlane-sim --trace ../shared/traces/mooncake_conversation.jsonl`
(add `--csv`, `--scenario NAME`, `--speed X`, `--agents N`, `--keys session`;
`--help` lists everything). All: `tests/sim/report.sh [TRACE]`.

## The simulated fleet

Default fleet: `tests/sim/fleet.conf` (built into the binary too; a test checks
they agree). 8 identical endpoints, each a 70B-class model on one 8-GPU node:

| parameter | value | why |
|---|---|---|
| prefill_ms_per_ktok | 40 | 128K uncached tokens = 5.1 s, inside the published 3-8 s of prefill for 128K context on a large model; the Mooncake mean prompt (12K tokens) costs 0.5 s cold |
| cached tokens | free | a hit skips their prefill; one token is always computed |
| decode_ms_per_tok | 30 | time per output token of a 70B model at small batch (20-40 ms) |
| prefill_batch_slowdown | 0.1 | each other running request slows a prefill by 10% (compute is shared) |
| decode_batch_slowdown | 0.02 | decode is memory-bound: steps grow slowly with the batch (32 running: 1.6x) |
| max_running | 32 | batch cap; a FIFO queue behind it; TTFT = queue wait + prefill |
| cache_blocks | 3,000 | 1.5M tokens of prefix cache per endpoint (what 8x80 GB leave after a 70B model's weights at ~320 KB of KV per token); 24,000 blocks in the fleet against about 183,000 distinct blocks in the Mooncake trace: the cache is well under the working set |
| cost_per_mtok | 1 | cached input tokens are billed at half price in the cost column |
| poll_interval | 200 ms | the agent's view of in-flight: scur+qcur at each poll, +1 per decision in between (docs/architecture.md) |
| health checks | fall 6 s, rise 4 s | HAProxy `inter 2s fall 3 rise 2`: a refusing server is marked DOWN after 6 s |

The batch factors are fixed when a request's phase starts (1 + factor x other
running requests), not re-evaluated as the batch changes. The KV cache is LRU over
512-token blocks; a block is reusable only if every block before it in the same
prompt is; a prefilled prompt becomes resident with its first block the most
recent, so prompts lose their tails first (`cache = blocks`, the default: a
vLLM-style cache; `cache = llama` models llama.cpp's slots and host prompt
cache instead, which the engine benchmark runs: docs/sim-vs-engine.md). Faults
apply to requests arriving in their window; requests already running are not
cut.

What the router sees is what HAProxy would tell warmlane: the status and the
time to response headers, for streamed requests at the first token (or at once,
before prefill, for endpoints declared `headers = immediate` like vLLM), for
others at the end; nothing at all for a refused connection (the client gets
HAProxy's 503, counted as an error). HAProxy's own algorithms (round-robin,
leastconn, p2c = `balance random(2)`, chash-bounded) balance on HAProxy's exact
live counts; the agent-side policies (ttl-map, warmlane) see the polled view.
When a policy names a server that HAProxy holds DOWN, or names none, HAProxy
balances with leastconn.

## Policies

| policy | what it is |
|---|---|
| round-robin | HAProxy `balance roundrobin` |
| leastconn | HAProxy `balance leastconn` |
| chash-bounded | HAProxy `balance hdr(...)` + `hash-type consistent` + `hash-balance-factor 150` on the affinity key; no key: round-robin |
| p2c | power of two choices alone (HAProxy `balance random(2)`) |
| ttl-map | a TTL map alone: stick-table on the affinity key, expire 300 s, leastconn on a miss |
| warmlane | the real core (`core/`) with default parameters |
| oracle | knows every endpoint's cache: the longest cached prefix on an endpoint with a free batch slot (differences under 4 blocks count as ties), ties by least load. A greedy upper reference for hits, not a proven optimum |

## Keys derived from the trace

The trace has blocks, not bytes. HAProxy sends `prefix1..3` = xxh64 of the
first 1, 4 and 8 KiB of the body, each only when the body covers it. At about 4
bytes per token, 1 KiB lies inside block 0, 4 KiB = 1,024 tokens = 2 blocks, 8 KiB =
2,048 tokens = 4 blocks, so the replay sends prefix1 = hash(hash_ids[0]) when the
prompt has >= 256 tokens, prefix2 = hash(hash_ids[0..1]) when >= 1,024, prefix3 =
hash(hash_ids[0..3]) when >= 2,048. The affinity key is the longest present
(docs/architecture.md's ladder). With `--keys session`, a conversation id is
hash(hash_ids[0..1]), the shared-prefix grouping of the trace's README (2,259
multi-request groups, 57% of requests). Block 0 is shared by every request, so
prefix1 alone identifies nobody. Synthetic chat sends both its conversation id
and prefix keys; groups and mixed send prefix keys only.

MD
	if [ $have_trace = 1 ]; then
		printf '## Mooncake conversation trace (headline)\n\n'
		printf 'Real arrivals, lengths and prefix blocks; prefix keys only (what HAProxy sees without a session header). `%s`\n\n' "$(sed 's/^# //' "$tmp/mooncake.info")"
		csv_md <"$tmp/mooncake.csv"
		printf '\nhit_rate is token-weighted (cached prompt tokens / prompt tokens of served requests); TTFT and e2e in ms; output_tok_s counts output tokens of requests whose TTFT met a 2 s SLO, per second of the run; inflight_max_min is the max/min over endpoints of the mean in-flight count at each poll.\n\n'
		if grep -q '^warmlane,' "$tmp/mooncake.csv"; then
			w=mooncake
			printf '### Targets for warmlane (measured)\n\n| target | measured | met |\n|---|---|---|\n'
			r=$(ratio "$(fig $w warmlane 3)" "$(fig $w oracle 3)")
			printf '| hit rate >= 90%% of the oracle'"'"'s | %s of it | %s |\n' "$r" "$(awk -v r="$r" 'BEGIN{print (r >= 0.9) ? "yes" : "no"}')"
			r=$(ratio "$(fig $w warmlane 3)" "$(fig $w round-robin 3)")
			printf '| hit rate >= 2x round-robin'"'"'s | %sx | %s |\n' "$r" "$(awk -v r="$r" 'BEGIN{print (r >= 2) ? "yes" : "no"}')"
			r=$(ratio "$(fig $w warmlane 5)" "$(fig $w leastconn 5)")
			printf '| TTFT p90 <= half of leastconn'"'"'s | %s of it | %s |\n' "$r" "$(awk -v r="$r" 'BEGIN{print (r <= 0.5) ? "yes" : "no"}')"
			r=$(ratio "$(fig $w warmlane 5)" "$(fig $w chash-bounded 5)")
			printf '| TTFT p90 below chash-bounded'"'"'s | %s of it | %s |\n' "$r" "$(awk -v r="$r" 'BEGIN{print (r < 1) ? "yes" : "no"}')"
			r=$(ratio "$(fig mooncake-agents4 warmlane 3)" "$(fig $w warmlane 3)")
			printf '| 4 agents: hit rate within 5%% of one agent | %s of it | %s |\n' "$r" "$(awk -v r="$r" 'BEGIN{print (r >= 0.95) ? "yes" : "no"}')"
			sc() { # scenario file, column -> warmlane's figure in the scenario table
				awk -v c="$2" '/^# scenario/ { on = 1; next } on && $1 == "warmlane" { print $c }' "$tmp/$1.txt"
			}
			v=$(sc mooncake-fast-failure 2)
			printf '| fast failure: under 1%% of traffic to it after 20 requests | %s | %s |\n' "$v" "$(awk -v v="${v%\%}" 'BEGIN{print (v < 1) ? "yes" : "no"}')"
			v=$(sc mooncake-rate-limit 2)
			b=$(sc mooncake-rate-limit 3)
			printf '| 429: requests in the window within the half-open bound | %s (bound %s) | %s |\n' "$v" "$b" "$(awk -v v="$v" -v b="$b" 'BEGIN{print (v <= b) ? "yes" : "no"}')"
			v=$(sc mooncake-slow 2)
			printf '| slow (5x): under a quarter of its fair share (3.1%%) once slow | %s | %s |\n' "$v" "$(awk -v v="${v%\%}" 'BEGIN{print (v < 3.125) ? "yes" : "no"}')"
			w=mooncake-speed3
			r=$(ratio "$(fig $w warmlane 5)" "$(fig $w leastconn 5)")
			printf '| (loaded, speed 3) TTFT p90 against leastconn'"'"'s | %s of it | %s |\n\n' "$r" "$(awk -v r="$r" 'BEGIN{print (r <= 0.5) ? "yes" : "no"}')"
			printf 'Why each miss happens and the policy change that would close it: "Where warmlane misses" at the end of this page.\n\n'
		fi
		printf '### Same trace with the log input (`--log-ingest`)\n\n'
		printf 'HAProxy'"'"'s end-of-stream log lines reach warmlane too (`core_complete`: status, termination state, Tr, Ta, bytes): in-flight falls at each end of stream and the end-to-end time per KiB sent enters the scoring (`score_by` both, the default).\n\n'
		csv_md <"$tmp/mooncake-log.csv"
		printf '\n### Same trace with conversation ids (`--keys session`)\n\n'
		csv_md <"$tmp/mooncake-session.csv"
		printf '\n### Same trace replayed 3x faster (`--speed 3`: the fleet near saturation)\n\n'
		csv_md <"$tmp/mooncake-speed3.csv"
		printf '\n### Same trace with the engines'"'"' counts (`--engine-load`): warmlane knows it routes alone\n\n'
		printf 'The agent polls each engine'"'"'s running + waiting requests (`engine_metrics`, every 200 ms). With `policy.routers` auto (the default) it compares them with its HAProxy'"'"'s own counts: carrying their load, it routes alone, and new keys go by load (`alone_place_load_z` 0.5) and entries live 30 min (`alone_affinity_ttl`); behind 2 or 4 HAProxies it does not, and decides as without (the 2- and 4-agent runs with `--engine-load` are the rows "engine metrics" of "Policy changes tried"; docs/policy-v2.md, section 29). The other policies do not read the engines.\n\n'
		csv_md <"$tmp/mooncake-engine.csv"
		printf '\nAt 3x the rate (`--engine-load --speed 3`):\n\n'
		csv_md <"$tmp/mooncake-engine-speed3.csv"
		printf '\n### Same trace, HAProxies sharing the warm hint (`--shared-hints`): they route as one\n\n'
		printf 'Each agent'"'"'s HAProxy reads and writes the hint table of haproxy/haproxy-*-peers.cfg (HAProxy peers, `expire` 30m; docs/peers.md): where each key last went. With `policy.routers` auto (the default) an agent whose requests carry hints for their keys, some of them written by another HAProxy, routes alone (docs/policy-v2.md, sections 31, 33 and 34): one agent alone with the table finds only its own HAProxy'"'"'s hints, and routes alone with its peers connected (`show peers`; the simulated HAProxies'"'"' are). One agent, then 2 and 4 behind a random spray; the other policies share nothing (a stick table without peers).\n\n'
		csv_md <"$tmp/mooncake-hints.csv"
		printf '\nAt 3x the rate:\n\n'
		csv_md <"$tmp/mooncake-hints-speed3.csv"
		for a in 2 4; do
			printf '\n%s agents:\n\n' "$a"
			csv_md <"$tmp/mooncake-hints-agents$a.csv"
		done
		if [ -f "$tmp/variant0.out" ]; then
			printf '\n### Policy changes tried\n\n'
			printf 'The same trace with warmlane'"'"'s parameters changed (`--set NAME=VALUE`, the real core), and `warmlane-model` (`tests/sim/sim_pol_wlmodel.c`: the first design'"'"'s decision (docs/architecture.md) written out in the simulator, which tracks the core within a few points) for changes the core'"'"'s parameters cannot express: `norm=1` feeds the latency EWMA with tr per KiB of request body instead of tr, `slack=2` lets the load bound admit 2 more requests than ceil(load_factor x ...). Oracle for reference: hit rate %s, speed 3 TTFT p90 %s ms, leastconn speed 3 TTFT p90 %s ms.\n\n' \
				"$(fig mooncake oracle 3)" "$(fig mooncake-speed3 oracle 5)" "$(fig mooncake-speed3 leastconn 5)"
			printf '| variant | hit_rate | ttft_p90_ms | hit_rate, 2 agents | 2 agents / 1 | hit_rate, 4 agents | 4 agents / 1 | speed 3: hit_rate | speed 3: ttft_p90_ms | slow: share to the slow one | slow: hit%% (no fault) | fast-failure share_after |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n'
			i=0
			while [ -f "$tmp/variant$i.out" ]; do
				awk -F, -v label="$(cat "$tmp/variant$i.label")" '
					NR == 1 { h1 = $3; p1 = $5 } NR == 2 { h4 = $3 } NR == 3 { h3 = $3; p3 = $5 }
					NR == 4 { split($0, a, " +"); ss = a[2]; sh = a[4] " (" a[5] ")" }
					NR == 5 { split($0, b, " +"); ff = b[2] } NR == 6 { h2 = $3 }
					END { printf "| %s | %s | %s | %s | %.2f | %s | %.2f | %s | %s | %s | %s | %s |\n", label, h1, p1, h2, h2 / h1, h4, h4 / h1, h3, p3, ss, sh, ff }' \
					"$tmp/variant$i.out"
				i=$((i + 1))
			done
			printf '\n'
		fi
		for a in 2 4; do
			printf '\n### %s independent agents behind a random spray (`--agents %s`)\n\n' "$a" "$a"
			printf 'Each agent has its own HAProxy: its in-flight view and HAProxy'"'"'s counts cover only its own share of the traffic.\n\n'
			csv_md <"$tmp/mooncake-agents$a.csv"
		done
		printf '\n### Anonymous requests (`--keys none`): every decision is power of two choices\n\n'
		printf 'No identity at all, as the one-shot requests of `deploy/quickstart.sh`. Its fleet (`tests/sim/examples/quickstart.conf`: fast1-3, and slow at speed 0.2), the first 80 and 1,500 requests of the trace; slow_share is the share of requests sent to the slow endpoint (fair share 25%%). `%s`\n\n' "$(sed 's/^# //' "$tmp/anon-quick80.info")"
		printf '| policy | 80 requests: slow_share | ttft_p90_ms | 1,500 requests: slow_share | ttft_p90_ms |\n|---|---|---|---|---|\n'
		share() { awk -F, -v p="$2" 'NR > 1 && $1 == p { n++; if ($4 ~ /^slow/) s++ } END { printf "%.1f%%", n ? 100 * s / n : 0 }' "$tmp/$1.dump"; }
		for p in $(tail -n +2 "$tmp/anon-quick80.csv" | cut -d, -f1); do
			printf '| %s | %s | %s | %s | %s |\n' "$p" "$(share anon-quick80 "$p")" "$(fig anon-quick80 "$p" 5)" \
				"$(share anon-quick1500 "$p")" "$(fig anon-quick1500 "$p" 5)"
		done
		printf '\nThe whole trace, anonymous, on the default fleet with one endpoint 5x slower, then with one failing fast:\n\n'
		scen_md <"$tmp/anon-slow.txt"
		printf '\n'
		scen_md <"$tmp/anon-fast-failure.txt"
		printf '\nOne client sending one anonymous request at a time (800 short one-shots, the log input) to four endpoints whose speeds differ by 0.2-1%% (`tests/sim/examples/near.conf`), as identical servers do: the endpoint with the fewest requests (lowest, its index), against its fair share, and the highest share of any. In flight is 0 at every decision; `policy.p2c_margin` counts latencies within 25%% of each other as equal (docs/policy-v2.md, section 19). `%s`\n\n' "$(sed 's/^# //' "$tmp/spread.info")"
		scen_md <"$tmp/spread.txt"
		printf '\n'
		printf '### A server slow from its first request (`--scenario slow-start`)\n\n'
		printf 'The quick start'"'"'s fleet again (slow at speed 0.2 from the start), session ids, the first 300 and 1,000 requests of the trace: the share of new sessions (a key'"'"'s first request) the slow endpoint got after its 5th answer came back (issue 12: at most half its fair share, 12.5%%; policy.slow_start, docs/policy-v2.md section 4). 300 requests: `%s`\n\n' "$(sed 's/^# //' "$tmp/slowstart300.info")"
		scen_md <"$tmp/slowstart300.txt"
		printf '\n1,000 requests:\n\n'
		scen_md <"$tmp/slowstart1000.txt"
		printf '\n'
		printf '### A fleet of two (`tests/sim/examples/two.conf`)\n\n'
		printf 'The default fleet'"'"'s endpoints, two of them, the trace at a quarter of its speed (`--speed 0.25`) so that two carry it: gpu2 5x slower from 20%% of the requests on, then the same with a recovery (fair share 50%%). The candidates'"'"' median is their mean here: the slower is judged against the other (docs/policy-v2.md, section 36). `%s`\n\n' "$(sed 's/^# //' "$tmp/two-slow.info")"
		csv_md <"$tmp/two-slow.csv"
		printf '\n'
		scen_md <"$tmp/two-slow.txt"
		printf '\n'
		scen_md <"$tmp/two-recover.txt"
		printf '\n'
		[ $plots = 1 ] && printf '![TTFT CDF, Mooncake](sim-ttft-cdf-mooncake.png)\n\n![TTFT CDF, Mooncake 3x](sim-ttft-cdf-mooncake-speed3.png)\n\n'
	else
		printf '## Mooncake conversation trace\n\nNot run: %s was not found when this report was generated.\n\n' "$trace"
	fi

	printf '## Synthetic workloads\n\n'
	for w in chat groups mixed; do
		case $w in
		chat) d='multi-turn chat: 400 conversations of 10-20 turns starting over 30 min, a 1,024-token system prompt shared by all, think times lognormal (median 90 s, about 18% beyond the 300 s TTL); session ids and prefix keys' ;;
		groups) d='shared-prefix groups: 40 groups, long system prompts (median 6,000 tokens), Zipf(1) popularity, short questions, about 3 req/s for 20 min; prefix keys' ;;
		mixed) d='mixed sizes: 70% yes/no classifications (5 templates of 1,024 tokens + 100-1,500 tokens, 1-3 output tokens, not streamed) and 30% summaries of unique 8,000-12,000-token documents; prefix keys' ;;
		esac
		printf '### %s\n\n%s. `%s`\n\n' "$w" "$d" "$(sed 's/^# //' "$tmp/$w.info")"
		csv_md <"$tmp/$w.csv"
		printf '\n'
	done
	[ $plots = 1 ] && printf '![TTFT CDF, chat](sim-ttft-cdf-chat.png)\n\n![hit rate per policy](sim-hit-rate.png)\n\n'

	printf '## Heterogeneous fleet (`tests/sim/examples/hetero.conf`)\n\n'
	printf 'Synthetic chat on 8 endpoints: big1-2 (speed 2, weight 2, cost 2), vllm1-4 (headers before prefill, as vLLM sends them), small (speed 0.5, removed at 900 s), late (added at 600 s); faults: 503 bursts on vllm1, 429 on vllm2, 401 on vllm3, big2 3x slower from 200 to 1000 s, vllm4 flapping, 500s on big1 from 1200 s. `%s`\n\n' "$(sed 's/^# //' "$tmp/hetero.info")"
	csv_md <"$tmp/hetero.csv"
	printf '\nRequests served (status 200) per endpoint:\n\n'
	awk -F, 'NR > 1 && $5 == 200 { n[$1 "," $4]++; eps[$4] = 1; pols[$1] = 1 }
		 END { printf "| policy |"; for (e in eps) list = list " " e; ne = split(list, es, " ");
		       for (i = 1; i <= ne; i++) for (j = i + 1; j <= ne; j++) if (es[j] < es[i]) { t = es[i]; es[i] = es[j]; es[j] = t }
		       for (i = 1; i <= ne; i++) printf " %s |", es[i]; printf "\n|---|"; for (i = 1; i <= ne; i++) printf "---|"; printf "\n";
		       for (p in pols) { printf "| %s |", p; for (i = 1; i <= ne; i++) printf " %d |", n[p "," es[i]]; printf "\n" } }' \
		"$tmp/hetero.dump" | { read -r h; read -r sep; echo "$h"; echo "$sep"; sort; }
	printf '\n### The slow scenario on a vLLM-style fleet (`tests/sim/examples/vllm.conf`)\n\n'
	printf 'Every endpoint sends its headers before prefill, so tr is the same few milliseconds on a slow endpoint as on a fast one. Without the log input: `%s`\n\n' "$(sed 's/^# //' "$tmp/vllm-slow.info")"
	csv_md <"$tmp/vllm-slow.csv"
	printf '\n'
	scen_md <"$tmp/vllm-slow.txt"
	printf '\nWith the log input (`--log-ingest`): the end-to-end time per KiB shows the slowdown.\n\n'
	scen_md <"$tmp/vllm-slow-log.txt"
	printf '\n### Only prefill 5x slower (`--scenario slow-prefill`)\n\n'
	printf 'Decode unchanged. On the default fleet (headers with the first token) tr shows it:\n\n'
	scen_md <"$tmp/chat-slowpf.txt"
	printf '\nOn the vLLM-style fleet, without and with the log input: neither tr (admission) nor the end-to-end time (mostly decode) shows it; only in-flight counts slow its traffic.\n\n'
	scen_md <"$tmp/vllm-slowpf.txt"
	printf '\n'
	scen_md <"$tmp/vllm-slowpf-log.txt"
	printf '\n'

	printf '## A one-slot llama.cpp fleet (`tests/sim/examples/llama.conf`, `--workload engine`)\n\n'
	printf 'The engine benchmark'"'"'s fleet and traffic (docs/sim-vs-engine.md): four llama.cpp-style endpoints of one slot each, 32 conversations x 4 turns from 4 clients. warmlane is told each endpoint'"'"'s slots (`policy.place_slots`, docs/policy-v2.md section 13, which has the means over seeds 1-5: one seed of 128 requests is a draw). The simulator'"'"'s times are not the real fleet'"'"'s (it does not model the two cores the four servers share). `%s`\n\n' "$(sed 's/^# //' "$tmp/llama.info")"
	csv_md <"$tmp/llama.csv"
	printf '\nTwo independent agents behind a random spray:\n\n'
	csv_md <"$tmp/llama-agents2.csv"
	printf '\nwarmlane without the slots rule (`--set place_slots=0`), one agent:\n\n'
	csv_md <"$tmp/llama-noslots.csv"
	printf '\n'

	printf '## Scenarios\n\n'
	printf 'Each scenario adds faults (timed from the arrival span of the workload) to the default fleet. The second table of each holds the scenario'"'"'s own figure; `tests/sim/meson.build` runs each one short and checks warmlane'"'"'s expectation.\n\n'
	for sc in fast-failure rate-limit slow recover scale-out down flap agents-2 agents-4; do
		desc=$(grep -m1 '^# scenario' "$tmp/chat-$sc.txt" | sed 's/^# scenario //')
		printf '### %s\n\n' "$desc"
		case $sc in
		fast-failure) printf 'Expectation: under 1%% of traffic to the failing endpoint after the first 20 requests that follow its first failure (share_after).\n\n' ;;
		rate-limit) printf 'Expectation: no request reaches it during the window beyond what was in flight and the half-open probes (bound: per agent 5 + 3 per Retry-After period).\n\n' ;;
		recover) printf 'Expectation (issue 12): back to within 20%% of its fair share within 30 s of the end of the slowdown (share_30-120s >= 0.8 x fair); met without keys on the seed `sim-recover-anonymous` checks (7), not over seeds (1-20: 8.59%%, leastconn 10.01%%, the oracle 7.63%%; docs/policy-v2.md, "What is left of issue 12"), not with keys (`sim-recover` is expected to fail). Then the same anonymous (`--keys none`), and warmlane with the log input (`--log-ingest`) and with HAProxy'"'"'s completion health checks too (`--http-check`: the example configs'"'"' optional check, every 2 s; docs/policy-v2.md, section 18).\n\n' ;;
		slow) printf 'Expectation: sessions leave it once its EWMA exceeds 2.5x the median (and, for the time to headers, 2.5x its own past), without a hit-rate collapse: under a quarter of its fair share (by weight) once slow, hit%% at least 0.9 of the same policy without the fault.\n\n' ;;
		scale-out) printf 'Expectation: adding a 9th endpoint moves at most about 1/9 of keys (keys_moved: keys whose endpoint after the addition differs from the one before).\n\n' ;;
		down) printf 'Connection refused: the router gets no feedback; HAProxy marks it DOWN after 6 s.\n\n' ;;
		flap) printf 'Flapping: down 30 s, up 30 s; HAProxy marks it DOWN 6 s into each down spell and UP 4 s after it recovers. errors counts the refused connections (HAProxy 503s).\n\n' ;;
		agents-*) printf 'Expectation: hit rate within 5%% of one agent (hit%%_ref).\n\n' ;;
		esac
		for w in chat mooncake; do
			[ -f "$tmp/$w-$sc.csv" ] || continue
			printf '%s:\n\n' "$w"
			csv_md <"$tmp/$w-$sc.csv"
			printf '\n'
			scen_md <"$tmp/$w-$sc.txt"
			printf '\n'
		done
		if [ "$sc" = recover ]; then
			for w in chat mooncake; do
				[ -f "$tmp/$w-recover-anon.txt" ] || continue
				printf '%s, anonymous:\n\n' "$w"
				scen_md <"$tmp/$w-recover-anon.txt"
				printf '\n'
			done
			for w in chat mooncake; do
				[ -f "$tmp/$w-recover-keyed-log.txt" ] || continue
				printf '%s, warmlane with the log input, and with completion checks:\n\n' "$w"
				scen_md <"$tmp/$w-recover-keyed-log.txt" | grep -e '^| policy' -e '^|---'
				for k in keyed anon; do
					for c in log log-check; do
						label="keyed, log input"
						if [ $k = anon ]; then label="anonymous, log input"; fi
						if [ $c = log-check ]; then label="$label, completion checks"; fi
						scen_md <"$tmp/$w-recover-$k-$c.txt" | grep '^| warmlane ' |
							sed "s/^| warmlane |/| warmlane, $label |/"
					done
				done
				printf '\n'
			done
		fi
		if [ "$sc" = fast-failure ] && [ $plots = 1 ]; then
			for w in chat mooncake; do
				[ -f "docs/sim-fast-failure-share-$w.png" ] &&
					printf '![failing endpoint share, %s](sim-fast-failure-share-%s.png)\n\n' "$w" "$w"
			done
		fi
	done

	printf '### Failover tiers (`tests/sim/examples/tiers.conf`, `--scenario tiers`)\n\n'
	printf 'Synthetic chat on gpu1-4 (tier 1) and api1-2 (tier 2: speed 0.5, cost 5, a proxied API; docs/tiers.md). warmlane knows the tiers; the other policies balance over all six, as HAProxy does without `backup`. Without faults:\n\n'
	csv_md <"$tmp/tiers-healthy.csv"
	printf '\n%s. Expectation (issue 21): tier 2 gets nothing while tier 1 is healthy (t2_healthy), takes over within a few requests of each fault (takeover: requests from its start to the first 10 decisions in a row to tier 2; never: it did not), and gets nothing once the half-open probes of a tier-1 endpoint succeeded (t2_after: tier-2 requests arriving after that, until the next fault); t2_tail is its share in the last fifth of the run. t1_in counts the requests tier 1 got during each fault: the failures before the takeover, then the half-open probes of each Retry-After.\n\n' "$(grep -m1 '^# scenario' "$tmp/chat-tiers.txt" | sed 's/^# scenario //')"
	csv_md <"$tmp/chat-tiers.csv"
	printf '\n'
	scen_md <"$tmp/chat-tiers.txt"
	printf '\nwarmlane with the log input (`--log-ingest`: a streamed probe counts at its end, so a breaker closes later), anonymous (`--keys none`) and with 2 independent agents (`--agents 2`):\n\n'
	scen_md <"$tmp/chat-tiers-log.txt" | grep -e '^| policy' -e '^|---' -e '^| warmlane ' |
		sed 's/^| warmlane |/| warmlane, log input |/'
	scen_md <"$tmp/chat-tiers-anon.txt" | grep '^| warmlane ' | sed 's/^| warmlane |/| warmlane, anonymous |/'
	scen_md <"$tmp/chat-tiers-agents2.txt" | grep '^| warmlane ' | sed 's/^| warmlane |/| warmlane, 2 agents |/'
	printf '\n'
	if [ -f "$notes" ]; then
		cat "$notes"
	fi
} >"$out"
echo "report.sh: wrote $out"

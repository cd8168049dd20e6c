#!/usr/bin/env bash
# ctl_daemon.sh - the command socket of the running binary through warmlanectl: every command, bad input, exit codes, a reload moving the socket, the file removed at the stop.
#
# Usage: ctl_daemon.sh PATH-TO-WARMLANE PATH-TO-WARMLANECTL
set -euo pipefail
warmlane=$1
ctl=$2
. "$(dirname "$0")/agent_dir.sh"
agent_dir ctld KILL

config() { # $1: the command socket's path
	cat >"$dir/warmlane.yaml" <<YAML
listen: ["unix:$dir/spoa.sock"]
metrics: { listen: "" }
runtime_api: { socket: "" }
state: { file: "" }
log_input: { path: "" }
command_socket: { path: "$1", mode: "0600" }
endpoints:
  - { backend: llm, server: gpu1 }
  - { backend: llm, server: gpu2 }
  - { backend: llm, server: gpu3, weight: 2 }
YAML
}

fail() {
	echo "not ok: $*" >&2
	cat "$dir/log" >&2
	exit 1
}

# $1: what the answer must hold (grep -F), the rest: warmlanectl's words.
expect() {
	local want=$1
	shift
	local out rc=0
	out=$("$ctl" -s "$dir/ctl.sock" "$@" 2>&1) || rc=$?
	grep -qF -- "$want" <<<"$out" || fail "warmlanectl $* (rc $rc): no \"$want\" in: $out"
	echo "ok: warmlanectl $*"
}

config "$dir/ctl.sock"
: >"$dir/log"
"$warmlane" --config "$dir/warmlane.yaml" 2>>"$dir/log" &
pid=$!
wait_log 'msg=started'
wait_log 'msg="command socket open"'
[ "$(stat -c %a "$dir/ctl.sock")" = 600 ] || fail "mode $(stat -c %a "$dir/ctl.sock")"

version=$("$warmlane" --version | awk '{ print $2 }')
expect "explain <name=value>" help
expect "version: $version" show info
expect "config: $dir/warmlane.yaml" show info
expect "\"endpoints\":3," show info -json
expect "llm gpu3 - enabled ready closed 0 0 " show endpoints
expect "\"server\":\"gpu2\"" show endpoints -json
expect "reason=hash" explain session=conv-1 model=llama
expect "\"reason\":\"hash\"" explain session=conv-1 -json
expect "entry: none" show affinity session=conv-1
expect "llm/gpu2: drain (1 endpoint)" set endpoint llm/gpu2 drain
expect "llm/gpu2 excluded: drained" explain session=conv-1
expect "llm gpu2 - enabled drain " show endpoints
expect "llm/gpu2: ready" set endpoint llm/gpu2 ready
expect ": no entry" clear affinity 0123456789abcdef

# Every -json answer is one JSON document, then the empty line.
if command -v python3 >/dev/null; then
	for c in "help" "show info" "show endpoints" "explain session=conv-1" "explain" \
		"explain model=nobody" "show affinity session=conv-1" "set endpoint llm/gpu1 ready" \
		"clear affinity session=conv-1" "frobnicate" 'explain session="\x'; do
		# shellcheck disable=SC2086 # the words are the command's
		{ "$ctl" -s "$dir/ctl.sock" $c -json || true; } | python3 -c '
import json, sys
d = sys.stdin.read()
assert d.endswith("}\n\n"), repr(d[-8:])
json.loads(d)' || fail "$c -json is not one JSON document"
	done
	echo "ok: -json answers are JSON"
fi

# Errors: exit status 1, the message on stdout.
rc=0
out=$("$ctl" -s "$dir/ctl.sock" frobnicate) || rc=$?
[ $rc -eq 1 ] && grep -qF 'error: unknown command "frobnicate"' <<<"$out" || fail "unknown command: rc $rc, $out"
echo "ok: an unknown command is an error (exit 1)"
out=$(printf '\001\377garbage\nshow info\n' | "$ctl" -s "$dir/ctl.sock" -) || true
grep -qF 'error: unknown command "\x01\xffgarbage"' <<<"$out" && grep -qF "version: $version" <<<"$out" ||
	fail "garbage then a command: $out"
echo "ok: garbage answered, the next line run"
out=$(head -c 10000 /dev/zero | tr '\0' x | "$ctl" -s "$dir/ctl.sock" -) || true
grep -qF 'error: line longer than 4096 bytes; closing' <<<"$out" || fail "oversized line: $out"
echo "ok: an oversized line"
out=$(printf 'show info' | "$ctl" -s "$dir/ctl.sock" -) || true
grep -qF 'error: line without newline (9 bytes) not run' <<<"$out" || fail "no newline: $out"
echo "ok: a line without newline"
rc=0
"$ctl" -s "$dir/nothing.sock" help 2>/dev/null || rc=$?
[ $rc -eq 3 ] || fail "no socket: rc $rc"
echo "ok: no socket is exit 3"

# A reload moving the socket: the old file goes, the new one answers.
config "$dir/ctl2.sock"
kill -HUP "$pid"
wait_log 'msg="configuration reloaded"'
[ ! -e "$dir/ctl.sock" ] || fail "the old socket is still there"
out=$("$ctl" -s "$dir/ctl2.sock" show info) || fail "the new socket does not answer"
echo "ok: a reload moves the socket"

kill -TERM "$pid"
wait "$pid" || fail "exit status $?"
pid=
[ ! -e "$dir/ctl2.sock" ] || fail "the socket file is left after the stop"
echo "ok: the socket file removed at the stop"

# A socket that cannot be opened: a warning, the agent runs.
config "$dir/no/such/dir/ctl.sock"
: >"$dir/log"
"$warmlane" --config "$dir/warmlane.yaml" 2>>"$dir/log" &
pid=$!
wait_log 'msg=started'
grep -q 'level=warn msg="cannot open the command socket.*the directory .*/no/such/dir does not exist' "$dir/log" ||
	fail "no warning naming the missing directory"
kill -TERM "$pid"
wait "$pid" || fail "exit status $?"
pid=
echo "ok: a command socket that cannot be opened is a warning"

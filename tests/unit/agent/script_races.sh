#!/usr/bin/env bash
# script_races.sh - the scripts that start an agent in the background read its log only once it exists: replayed with the shell's creation of the log delayed (slow_creat.c).
#
# Usage: script_races.sh PATH-TO-WARMLANE PATH-TO-SHIM
# `cmd 2>log &` has the forked shell open the log; on a loaded machine the
# parent may read before it does (deploy-dashboard failed once so: "sed:
# can't read .../stderr.log", exit 2). The shim delays that open by 500 ms
# in every shell, so the race is lost every time unless the script creates
# the log itself first.
set -euo pipefail
warmlane=$1
shim=$2
here=$(dirname "$0")

dir=$(mktemp -d "${TMPDIR:-/tmp}/warmlane-races.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

# The agent itself runs without the shim (a sanitized binary refuses a
# preloaded library ahead of its runtime).
cat >"$dir/warmlane" <<SH
#!/bin/sh
exec env -u LD_PRELOAD "$warmlane" "\$@"
SH
chmod +x "$dir/warmlane"
mkdir "$dir/m" "$dir/s"

# 1. metrics_agent_start (deploy-dashboard, agent-promtool).
LD_PRELOAD=$shim bash -c '
	set -euo pipefail
	. "$1"
	pid=
	trap "[ -n \"\$pid\" ] && kill -TERM \"\$pid\" && wait \"\$pid\" || true" EXIT
	metrics_agent_start "$2" "$3" k1
	python3 -c "import sys, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{sys.argv[1]}/metrics\", timeout=5).read()" "$port"
' _ "$here/metrics_agent.sh" "$dir/warmlane" "$dir/m"
echo "ok: metrics_agent_start waits for the log it reads"

# 2. snapshot_daemon.sh (agent-snapshot-daemon): a stale log must not
#    answer for a new agent.
TMPDIR=$dir/s LD_PRELOAD=$shim bash "$here/snapshot_daemon.sh" "$dir/warmlane" >"$dir/snapd.out" 2>&1 || {
	cat "$dir/snapd.out" >&2
	exit 1
}
echo "ok: snapshot_daemon.sh reads the log of the agent it started"

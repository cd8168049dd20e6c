#!/usr/bin/env bash
# snapshot_daemon.sh - the snapshot as the running agent uses it: periodic writes, a write on SIGTERM, a load at start, a corrupt file renamed aside, a SIGHUP moving it to another file.
#
# Usage: snapshot_daemon.sh PATH-TO-WARMLANE
set -euo pipefail
warmlane=$1
. "$(dirname "$0")/agent_dir.sh"
agent_dir snapd KILL

cat >"$dir/warmlane.yaml" <<YAML
listen: ["unix:$dir/spoa.sock"]
metrics: { listen: "" }
runtime_api: { socket: "" }
state: { file: "$dir/state.msgpack", snapshot_interval: 100ms }
endpoints:
  - { backend: llm, server: gpu1 }
YAML

# The log is emptied before the agent starts, not by `2>log &`: that
# redirection is made by the forked shell, which may run after wait_log's
# first read, and then the previous agent's log answers it ("started"
# seen, a SIGHUP sent before the new agent handles it, and it dies).
start() {
	: >"$dir/log"
	"$warmlane" --config "$dir/warmlane.yaml" --log-level debug 2>>"$dir/log" &
	pid=$!
	wait_log 'msg=started'
}

stop() {
	kill -TERM "$pid"
	local rc=0
	wait "$pid" || rc=$?
	pid=
	if [ $rc -ne 0 ]; then
		echo "exit status $rc:" >&2
		cat "$dir/log" >&2
		exit 1
	fi
}

# 1. No file yet: a cold start; the periodic writer then writes one.
start
wait_log 'msg="no snapshot: starting cold"'
wait_log 'msg="snapshot written" bytes='
[ -s "$dir/state.msgpack" ]
stop
grep -q 'msg="snapshot written" file=' "$dir/log"
echo "ok: periodic and SIGTERM writes"

# 2. Restart: loaded.
start
wait_log 'msg="snapshot loaded"'
stop
echo "ok: loaded at start"

# 3. Truncated: renamed aside, one line, a cold start, still serving.
head -c 20 "$dir/state.msgpack" >"$dir/state.tmp" && mv "$dir/state.tmp" "$dir/state.msgpack"
start
wait_log 'msg="snapshot rejected: starting cold"'
[ -e "$dir/state.msgpack.corrupt" ]
[ "$(grep -c 'snapshot rejected' "$dir/log")" -eq 1 ]
stop
echo "ok: a corrupt snapshot is renamed aside"

# 4. SIGHUP with another state file: the next periodic write goes there,
#    the state is kept (nothing is loaded from the new file).
rm -f "$dir/state.msgpack.corrupt"
start
sed -i "s|state.msgpack\", snapshot_interval: 100ms|state2.msgpack\", snapshot_interval: 200ms|" "$dir/warmlane.yaml"
grep -q state2.msgpack "$dir/warmlane.yaml"
kill -HUP "$pid"
wait_log 'msg="configuration reloaded".*snapshot=changed'
for _ in $(seq 100); do
	[ -s "$dir/state2.msgpack" ] && break
	sleep 0.05
done
[ -s "$dir/state2.msgpack" ] || { echo "no write to the new state file" >&2; cat "$dir/log" >&2; exit 1; }
# A bad file: refused, the writer goes on.
echo "state: { snapshot_interval: 1ms }" >"$dir/warmlane.yaml"
kill -HUP "$pid"
wait_log 'msg="reload refused: keeping the running configuration"'
wait_log 'msg="configuration error" error=.*state.snapshot_interval'
stop
echo "ok: SIGHUP moves the snapshot to a new file; a bad file is refused"

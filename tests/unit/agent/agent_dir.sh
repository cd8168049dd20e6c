# agent_dir.sh - sourced by the shell tests that run the agent: its temporary directory, its stop at exit, a bounded wait on its log.
#
# agent_dir NAME [SIGNAL]: sets `dir` to a new temporary directory
# (warmlane-NAME.XXXXXX) and `pid` to empty, and traps EXIT to stop `pid`
# (with SIGNAL, default TERM, then wait) and remove `dir`.
agent_dir() {
	dir=$(mktemp -d "${TMPDIR:-/tmp}/warmlane-$1.XXXXXX")
	pid=
	agent_dir_signal=${2:-TERM}
	trap agent_dir_cleanup EXIT
}

agent_dir_cleanup() {
	if [ -n "$pid" ]; then
		kill -"$agent_dir_signal" "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}

# wait_log PATTERN: waits (20 s at most: a sanitized build on a loaded
# machine) for a line matching PATTERN in $dir/log; exits 1 with the log
# when none comes.
wait_log() {
	for _ in $(seq 400); do
		grep -q "$1" "$dir/log" && return 0
		sleep 0.05
	done
	echo "no \"$1\" in the log:" >&2
	cat "$dir/log" >&2
	exit 1
}

# metrics_agent.sh - sourced by scripts that need a running warmlane with its metrics on a free port.
. "$(dirname "${BASH_SOURCE[0]}")/agent_dir.sh"

# metrics_agent_start WARMLANE DIR KEY: writes DIR/warmlane.yaml (listen in
# DIR, no runtime API, no state file, two endpoints, gpu1 with key id KEY),
# starts WARMLANE on it with stderr in DIR/stderr.log (created first), and sets `pid` and
# `port` (the metrics port the agent logged). metrics.listen refuses port 0,
# so a free port is asked of the kernel first. The EXIT trap of
# agent_dir (agent_dir.sh) stops `pid`. Exits 1 when no port is reported.
metrics_agent_start() {
	local warmlane=$1 dir=$2 key=$3 free_port
	free_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	cat >"$dir/warmlane.yaml" <<YAML
listen: ["unix:$dir/spoa.sock"]
metrics: { listen: "127.0.0.1:$free_port" }
runtime_api: { socket: "" }
state: { file: "" }
endpoints:
  - { backend: llm, server: gpu1, models: [m1], keys: [$key] }
  - { backend: llm, server: gpu2 }
YAML
	# The log exists before the agent starts: `2>file &` is opened by the
	# forked shell, which may run after the first read below (then sed
	# fails, and set -o pipefail makes that the script's exit 2).
	: >"$dir/stderr.log"
	"$warmlane" --config "$dir/warmlane.yaml" 2>>"$dir/stderr.log" &
	pid=$!
	port=
	# Up to 20 s: a sanitized build on a loaded machine starts slowly;
	# the loop ends as soon as the port is logged or the agent is gone.
	for _ in $(seq 400); do
		port=$(sed -n 's/.*msg="metrics listening".* port=\([0-9]*\).*/\1/p' "$dir/stderr.log" | head -n1)
		[ -n "$port" ] && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	echo "warmlane did not report a metrics port:" >&2
	cat "$dir/stderr.log" >&2
	exit 1
}

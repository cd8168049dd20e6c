#!/usr/bin/env bash
# deploy/quickstart.sh - warmlane in front of a small fleet, on one machine.
#
# On a fresh Debian 12: installs what is missing (HAProxy 2.6 from Debian, the
# build tools and libraries), builds warmlane (build/release), then starts, in
# a temporary folder and on loopback only:
#   - three trivial HTTP backends (s1, s2, s3) that name themselves in a header,
#   - warmlane, with those three as its endpoints,
#   - HAProxy, with the example config haproxy/haproxy-2.6.cfg (or -3.1.cfg for
#     HAProxy 3.1+) and haproxy/warmlane.spoe.conf,
# sends a few requests with and without a session header, prints where each
# went and why, and stays up until Ctrl-C (everything is stopped and removed
# then).
#
# Usage: deploy/quickstart.sh [--smoke]
#   --smoke  the same, then checks the answers and exits (0 when all is well).
# Environment:
#   WARMLANE_BIN  use this agent binary: nothing is installed or built (the
#                 e2e test runs it so); set but empty or missing: exit 77.
#   HAPROXY       the HAProxy binary (default: haproxy from PATH).
set -euo pipefail

smoke=0
case "${1:-}" in
--smoke) smoke=1 ;;
"") ;;
*)
	echo "usage: $0 [--smoke]" >&2
	exit 2
	;;
esac

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
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
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
	for f in warmlane haproxy backends; do
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

# --- three backends ------------------------------------------------------------
python3 -u - "$tmp/ports" >"$tmp/backends.log" 2>&1 <<'PY' &
import http.server, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self):
        n = int(self.headers.get("content-length") or 0)
        if n:
            self.rfile.read(n)
        body = ("hello from %s\n" % self.server.name).encode()
        self.send_response(200)
        self.send_header("x-served-by", self.server.name)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = answer
    def log_message(self, *a):
        pass
class S(http.server.ThreadingHTTPServer):
    daemon_threads = True
    def handle_error(self, *a):
        pass
ports = []
for name in ("s1", "s2", "s3"):
    s = S(("127.0.0.1", 0), H)
    s.name = name
    ports.append(str(s.server_address[1]))
    threading.Thread(target=s.serve_forever, daemon=True).start()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(" ".join(ports) + "\n")
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
threading.Event().wait()
PY
pids+=($!)
wait_for "the backends" test -s "$tmp/ports"
read -r p1 p2 p3 <"$tmp/ports"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
fe_port=$(free_port)
metrics_port=$(free_port)

# --- warmlane ------------------------------------------------------------------
cat >"$tmp/warmlane.yaml" <<EOF
log_level: info
listen: ["unix:$tmp/spoa.sock,mode=0660"]
metrics: { listen: "127.0.0.1:$metrics_port" }
endpoints:
  - { backend: llm, server: s1, models: [m1], weight: 1, keys: [k1] }
  - { backend: llm, server: s2, models: [m1], weight: 1, keys: [k1] }
  - { backend: llm, server: s3, models: [m1], weight: 1, keys: [k1] }
EOF
"$WARMLANE_BIN" --config "$tmp/warmlane.yaml" >"$tmp/warmlane.log" 2>&1 &
pids+=($!)
wait_for "warmlane's socket" test -S "$tmp/spoa.sock"

# --- HAProxy, from the example config --------------------------------------------
printf 'k1 Bearer upstream-secret-for-k1\n' >"$tmp/keys.map"
# Unchrooted and in the foreground; the demo adds two response headers that
# show warmlane's decision (not part of the example).
sed -e '/^    chroot /d; /^    user haproxy$/d; /^    group haproxy$/d; /^    daemon$/d' \
	-e 's#^    log /dev/log local0$#    log stderr format raw local0 info#' \
	-e '/^    stats socket \/run\/haproxy\/admin.sock/d' \
	-e "s#^    stats socket /run/haproxy/warmlane.sock .*#    stats socket $tmp/stats.sock mode 600 level user#" \
	-e "s#^    bind 127.0.0.1:8080\$#    bind 127.0.0.1:$fe_port#" \
	-e "s#^\(    filter spoe engine warmlane config \).*#\1$top/haproxy/warmlane.spoe.conf#" \
	-e "s#/etc/haproxy/warmlane-keys.map#$tmp/keys.map#g" \
	-e "s#^\(    server s1 127.0.0.1:\)8001#\1$p1#; s#^\(    server s2 127.0.0.1:\)8002#\1$p2#; s#^\(    server s3 127.0.0.1:\)8003#\1$p3#" \
	-e "s#^    server agent1 unix@/warmlane/spoa.sock #    server agent1 unix@$tmp/spoa.sock #" \
	-e 's#^\(    http-response set-var-fmt(txn.warmlane.srv) .*\)#    http-response set-header x-warmlane-server %[var(txn.warmlane.server)]\n    http-response set-header x-warmlane-reason %[var(txn.warmlane.reason)]\n\1#' \
	"$example" >"$tmp/haproxy.cfg"
for want in "$tmp/spoa.sock" "$tmp/stats.sock" "127.0.0.1:$fe_port" "127.0.0.1:$p3" x-warmlane-reason; do
	grep -q -- "$want" "$tmp/haproxy.cfg" || fail "$example changed: could not set $want"
done
"$haproxy" -c -q -f "$tmp/haproxy.cfg" || fail "haproxy -c failed on $tmp/haproxy.cfg"
"$haproxy" -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 &
pids+=($!)

stat_of() { # PROXY SERVER -> status column of show stat
	python3 - "$tmp/stats.sock" "$1" "$2" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect(sys.argv[1])
s.sendall(b"show stat\n")
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
lines = data.decode().splitlines()
head = lines[0].lstrip("# ").split(",")
for line in lines[1:]:
    r = dict(zip(head, line.split(",")))
    if r.get("pxname") == sys.argv[2] and r.get("svname") == sys.argv[3]:
        print(r["status"])
PY
}
is_up() { stat_of "$1" "$2" | grep -q '^UP'; }
wait_for "HAProxy" test -S "$tmp/stats.sock"
wait_for "HAProxy to see warmlane UP" is_up warmlane-agents agent1
for s in s1 s2 s3; do wait_for "backend $s UP" is_up llm "$s"; done

# --- requests ------------------------------------------------------------------
url=http://127.0.0.1:$fe_port/v1/chat/completions
body='{"model":"m1","messages":[{"role":"user","content":"Say hello."}]}'
bad=0
printf '\n%-4s %-22s %-8s %-10s %s\n' '#' 'request' 'server' 'reason' 'answered by'
n=0
for session in "" "" "" alice alice alice bob bob; do
	n=$((n + 1))
	hdr=()
	what="no session"
	if [ -n "$session" ]; then
		hdr=(-H "x-session-id: $session")
		what="x-session-id: $session"
	fi
	out=$(curl -sS -m 10 -o /dev/null -D - -H 'content-type: application/json' \
		"${hdr[@]}" --data "$body" "$url" | tr -d '\r') || fail "request $n failed"
	code=$(printf '%s\n' "$out" | sed -n '1s/^HTTP[^ ]* \([0-9]*\).*/\1/p')
	server=$(printf '%s\n' "$out" | sed -n 's/^x-warmlane-server: //Ip')
	reason=$(printf '%s\n' "$out" | sed -n 's/^x-warmlane-reason: //Ip')
	served=$(printf '%s\n' "$out" | sed -n 's/^x-served-by: //Ip')
	printf '%-4s %-22s %-8s %-10s %s\n' "$n" "$what" "${server:--}" "${reason:--}" "${served:--} ($code)"
	if [ "$code" != 200 ] || [ -z "$reason" ] || [ "$server" != "$served" ]; then
		bad=$((bad + 1))
	fi
done
echo
echo "server: what warmlane chose; reason: why (rr until the routing core lands;"
echo "then affinity, hash, spill, p2c...); answered by: the backend that replied."

if [ "$smoke" -eq 1 ]; then
	[ "$bad" -eq 0 ] || fail "$bad of $n requests were not routed by warmlane"
	say "smoke test passed (HAProxy $hv)"
	exit 0
fi

cat <<EOF

HAProxy $hv listens on http://127.0.0.1:$fe_port; warmlane's metrics are on
http://127.0.0.1:$metrics_port/metrics. Logs: $tmp/warmlane.log and
$tmp/haproxy.log. Try:

  curl -si -H 'x-session-id: alice' -d '$body' $url

Press Ctrl-C to stop everything.
EOF
while true; do
	sleep 1
	for p in "${pids[@]}"; do
		kill -0 "$p" 2>/dev/null || fail "a process exited (pid $p)"
	done
done

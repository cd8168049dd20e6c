#!/usr/bin/env bash
# tests/run.sh - the test command: installs what is missing, builds with
# AddressSanitizer and UBSan, runs every suite, prints "N passed, N failed".
#
# Usage: tests/run.sh [meson test arguments, e.g. --suite proto]
# Environment: WARMLANE_BUILD (build dir, default build/asan).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${WARMLANE_BUILD:-build/asan}

# --- packages (Debian 12), installed only when missing ----------------------
packages=(
	meson ninja-build pkg-config gcc clang python3 curl
	libuv1-dev libmsgpack-dev check libcyaml-dev libyaml-dev libxxhash-dev
	libmicrohttpd-dev libsystemd-dev libcurl4-openssl-dev
	haproxy prometheus scdoc systemd
	build-essential dpkg-dev debhelper lintian
)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "tests/run.sh: installing ${missing[*]}"
	sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- the host's log-socket queue, as a Debian host with systemd has it -------
# HAProxy drops a log line when warmlane's unix datagram socket is full, and
# on HAProxy 2.6 those lines are warmlane's only feedback. systemd's sysctl
# defaults (50-default.conf) set net.unix.max_dgram_qlen to 512; a machine
# without them (a container, a sandbox) has the kernel's 10, where bursts of
# the e2e tests lose lines. Raised for the tests when lower (root only).
q=/proc/sys/net/unix/max_dgram_qlen
if [ -w "$q" ] && [ "$(cat "$q")" -lt 512 ]; then
	echo "tests/run.sh: net.unix.max_dgram_qlen $(cat "$q") -> 512 (systemd's default)"
	echo 512 >"$q"
fi

# --- HAProxy 3.x binaries beside Debian's 2.6 (cached in the build dir) ----
if [ -x tests/haproxy/fetch-haproxy.sh ]; then
	tests/haproxy/fetch-haproxy.sh "$build/haproxy" ||
		echo "tests/run.sh: could not fetch HAProxy 3.x; e2e runs on 2.6 only" >&2
fi

# --- the engine suite: llama.cpp from Debian sid, the OpenAI Node client ----
# Node from Debian when the machine has none (any node >= 18 will do).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "tests/run.sh: installing nodejs npm"
	sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null ||
		echo "tests/run.sh: could not install nodejs/npm; the engine suite will fail" >&2
fi
if [ -x tests/engine/fetch-llama.sh ]; then
	tests/engine/fetch-llama.sh "$build/engine" ||
		echo "tests/run.sh: could not fetch llama-server; the engine suite skips" >&2
	tests/engine/npm-ci.sh ||
		echo "tests/run.sh: npm ci of tests/engine/driver failed; the engine suite will fail" >&2
fi

# --- build ------------------------------------------------------------------
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C "$build" >/dev/null || ninja -C "$build"

# --- run --------------------------------------------------------------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
rc=0
meson test -C "$build" --print-errorlogs "$@" || rc=$?

# The summary is counted from meson's own log, one line per test.
python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
ok = bad = skip = 0
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            ok += 1
        elif r == "SKIP":
            skip += 1
        else:
            bad += 1
print(f"{ok} passed, {bad} failed" + (f", {skip} skipped" if skip else ""))
PY
exit $rc

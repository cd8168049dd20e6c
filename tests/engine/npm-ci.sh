#!/bin/sh
# tests/engine/npm-ci.sh - the engine driver's node_modules (the official
# OpenAI client), installed with `npm ci` from the committed
# package-lock.json into tests/engine/driver, never globally. Idempotent: a
# stamp holding the lockfile's checksum skips a second run (one line).
set -eu
d=$(cd "$(dirname "$0")/driver" && pwd)
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "npm-ci: node and npm are needed (Debian: apt-get install nodejs npm)" >&2
	exit 1
fi
sum=$(sha256sum "$d/package-lock.json" | cut -d' ' -f1)
stamp=$d/node_modules/.warmlane-lock
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
	echo "npm-ci: have the driver's node_modules"
	exit 0
fi
(cd "$d" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
echo "$sum" >"$stamp"
echo "npm-ci: installed the driver's node_modules ($(node -p "require('$d/node_modules/openai/package.json').version" 2>/dev/null || echo '?'))"

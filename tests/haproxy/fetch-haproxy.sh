#!/usr/bin/env bash
# tests/haproxy/fetch-haproxy.sh DIR - HAProxy 3.x binaries for the e2e tests.
#
# Debian 12 ships HAProxy 2.6. The e2e suite also runs HAProxy 3.0 (Debian
# stable, trixie) and 3.2 (Debian unstable, sid): their .deb packages and the
# libraries they link are downloaded with apt-get against a private apt state
# (the machine's own apt lists and cache are not touched), unpacked with
# dpkg -x into DIR/<suite>/, and run through that folder's own dynamic loader
# by a wrapper, DIR/haproxy-<major.minor>.
#
# The mirror is the one this machine's apt configuration already uses (parsed
# from /etc/apt/sources.list.d/*.sources or sources.list at run time).
#
# Idempotent: a second run finds the wrappers working and prints one line.
# Exit status: 0 when at least one version is available, 1 otherwise.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
arg=$1
mkdir -p "$arg"
dir=$(cd "$arg" && pwd)

# suite:expected major.minor (the wrapper is named after what the binary says)
suites=(trixie sid)

# Libraries the haproxy package links (Debian 3.0/3.2). The real Depends of the
# downloaded version are read with apt-cache and added to this list.
base_libs=(libc6 libcrypt1 libjemalloc2 liblua5.4-0 libopentracing-c-wrapper0t64
	libopentracing1 libpcre2-8-0 libssl3t64 libstdc++6 libgcc-s1 zlib1g libzstd1)

# --- already there? ----------------------------------------------------------
have_version() { # wrapper -> "3.0.11" or nothing
	"$1" -v 2>/dev/null | sed -n '1s/^HAProxy version \([^ ]*\).*/\1/p'
}
cached() {
	local s w out=()
	for s in "${suites[@]}"; do
		[ -f "$dir/$s/.done" ] || return 1
		w=$(cat "$dir/$s/.done")
		[ -x "$dir/$w" ] || return 1
		v=$(have_version "$dir/$w") || return 1
		[ -n "$v" ] || return 1
		out+=("$w=$v")
	done
	echo "fetch-haproxy: have ${out[*]} in $arg"
}
if cached; then
	exit 0
fi

# The mirror, the private apt state, the dependency walk, the loader.
. "$(dirname "$0")/../lib/debfetch.sh"
debfetch_name=fetch-haproxy
if [ -z "$ldso" ]; then
	echo "fetch-haproxy: unsupported architecture $arch" >&2
	exit 1
fi

got=()
for suite in "${suites[@]}"; do
	state=$dir/.apt-$suite
	root=$dir/$suite
	if [ -f "$root/.done" ]; then # fetched by an earlier, partly failed run
		w=$(cat "$root/.done")
		v=$(have_version "$dir/$w" || true)
		if [ -n "$v" ]; then
			got+=("$w=$v")
			continue
		fi
	fi
	apt_private "$state" "$suite" || continue
	mkdir -p "$state/debs"
	# The libraries: the base list plus every lib* in the Depends of haproxy
	# and (transitively) of those libraries, as this suite has them.
	mapfile -t pkgs < <(apt_closure '^(lib|zlib1g)' haproxy "${base_libs[@]}")

	rm -f "$state/debs"/*.deb
	if ! (cd "$state/debs" && timeout 900 apt-get "${apt[@]}" -qq download "${pkgs[@]}") \
		>"$state/download.log" 2>&1; then
		echo "fetch-haproxy: apt-get download for $suite failed:" >&2
		tail -n 5 "$state/download.log" >&2
		continue
	fi
	rm -rf "$root"
	mkdir -p "$root"
	for deb in "$state/debs"/*.deb; do
		dpkg -x "$deb" "$root"
	done
	rm -f "$state/debs"/*.deb
	rm -rf "$state/cache"

	loader=$(find_loader "$root") || loader=
	if [ -z "$loader" ] || [ ! -x "$root/usr/sbin/haproxy" ]; then
		echo "fetch-haproxy: $suite: no haproxy or loader after unpacking" >&2
		continue
	fi
	tmp=$dir/.wrapper.$$
	cat >"$tmp" <<EOF
#!/bin/sh
# HAProxy from Debian $suite, run through its own loader and libraries.
d=\$(cd "\$(dirname "\$0")/$suite" && pwd)
exec "\$d/$loader" --library-path "\$d/usr/lib/$multiarch:\$d/lib/$multiarch" "\$d/usr/sbin/haproxy" "\$@"
EOF
	chmod +x "$tmp"
	v=$(have_version "$tmp")
	if [ -z "$v" ]; then
		echo "fetch-haproxy: $suite: the unpacked haproxy does not run:" >&2
		"$tmp" -v 2>&1 | tail -n 3 >&2 || true
		rm -f "$tmp"
		continue
	fi
	w=haproxy-$(echo "$v" | cut -d. -f1,2)
	mv "$tmp" "$dir/$w"
	echo "$w" >"$root/.done"
	echo "${pkgs[*]}" >"$root/.packages"
	rm -rf "$state" # the lists are needed again only to fetch anew
	got+=("$w=$v")
done

if [ ${#got[@]} -eq 0 ]; then
	echo "fetch-haproxy: no HAProxy 3.x obtained" >&2
	exit 1
fi
echo "fetch-haproxy: got ${got[*]} in $arg"

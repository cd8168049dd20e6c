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

# --- the mirror this machine uses --------------------------------------------
mirror_uri() {
	local f uri=
	# deb822 files: the URIs of a "Types: deb" stanza that is not a security one.
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		uri=$(awk '
			BEGIN { RS = ""; FS = "\n" }
			{
				types = ""; uris = ""; suites = ""; enabled = "yes"
				for (i = 1; i <= NF; i++) {
					line = $i
					if (line ~ /^#/) continue
					k = tolower(line); sub(/:.*/, "", k)
					v = line; sub(/^[^:]*:[ \t]*/, "", v)
					if (k == "types") types = v
					else if (k == "uris") uris = v
					else if (k == "suites") suites = v
					else if (k == "enabled") enabled = tolower(v)
				}
				if (enabled == "no") next
				if (types !~ /(^| )deb( |$)/) next
				if (suites ~ /security/ || uris ~ /security/) next
				split(uris, u, /[ \t]+/)
				if (u[1] ~ /^https?:\/\//) { print u[1]; exit }
			}' "$f")
		[ -n "$uri" ] && break
	done
	# one-line format
	if [ -z "$uri" ]; then
		for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
			[ -f "$f" ] || continue
			uri=$(awk '
				$1 == "deb" {
					i = 2
					if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
					if ($i ~ /security/ || $(i+1) ~ /security/) next
					if ($i ~ /^https?:\/\//) { print $i; exit }
				}' "$f")
			[ -n "$uri" ] && break
		done
	fi
	[ -n "$uri" ] || return 1
	echo "${uri%/}"
}
uri=$(mirror_uri) || {
	echo "fetch-haproxy: no Debian mirror found in /etc/apt" >&2
	exit 1
}

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
case "$arch" in
amd64) ldso=ld-linux-x86-64.so.2 ;;
arm64) ldso=ld-linux-aarch64.so.1 ;;
*)
	echo "fetch-haproxy: unsupported architecture $arch" >&2
	exit 1
	;;
esac

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
	mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/debs"
	cat >"$state/sources.list" <<EOF
deb [signed-by=$keyring] $uri $suite main
EOF
	apt=(-o "Dir::State::Lists=$state/lists"
		-o "Dir::Etc::SourceList=$state/sources.list"
		-o "Dir::Etc::SourceParts=/dev/null"
		-o "Dir::Cache=$state/cache"
		-o "Dir::Cache::archives=$state/cache/archives"
		-o "Dir::Cache::pkgcache=$state/pkgcache.bin" -o "Dir::Cache::srcpkgcache=$state/srcpkgcache.bin"
		-o "APT::Architecture=$arch" -o "APT::Architectures=$arch"
		-o "Debug::NoLocking=true" -o "APT::Sandbox::User=root"
		-o "Acquire::Retries=2" -o "Acquire::http::Timeout=30"
		-o "Acquire::Languages=none")
	if ! timeout 900 apt-get "${apt[@]}" -qq update >"$state/update.log" 2>&1; then
		echo "fetch-haproxy: apt-get update for $suite failed:" >&2
		tail -n 5 "$state/update.log" >&2
		continue
	fi

	# The libraries: the base list plus every lib* in the Depends of haproxy and
	# (one level down) of those libraries, as this suite has them.
	depends() {
		apt-cache "${apt[@]}" show "$1" 2>/dev/null |
			awk '/^Depends:|^Pre-Depends:/ { sub(/^[^:]*: */, ""); print; exit }' |
			tr ',' '\n' | sed 's/[ (|].*//; s/^ *//; s/:any$//' |
			grep -E '^(lib|zlib1g)' || true
	}
	pkgs=(haproxy)
	declare -A seen=([haproxy]=1)
	queue=("${base_libs[@]}" $(depends haproxy))
	while [ ${#queue[@]} -gt 0 ]; do
		p=${queue[0]}
		queue=("${queue[@]:1}")
		[ -n "${seen[$p]:-}" ] && continue
		seen[$p]=1
		# a name this suite lacks (renamed library) is skipped: the real
		# Depends above bring in its successor
		if ! apt-cache "${apt[@]}" show "$p" >/dev/null 2>&1; then
			continue
		fi
		pkgs+=("$p")
		queue+=($(depends "$p"))
	done
	unset seen

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

	# On merged-/usr suites the loader is in usr/lib; older ones in lib.
	loader=
	for l in "$root/usr/lib/$multiarch/$ldso" "$root/lib/$multiarch/$ldso" "$root/usr/lib64/$ldso" "$root/lib64/$ldso"; do
		[ -e "$l" ] && { loader=${l#"$root"/}; break; }
	done
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

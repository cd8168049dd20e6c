#!/usr/bin/env bash
# tests/engine/fetch-llama.sh DIR - llama.cpp's llama-server for the engine
# tests and benchmark (a real inference engine with a real prefix cache).
#
# Debian 12 has no llama.cpp; Debian unstable (sid) has llama.cpp-tools, whose
# binaries link sid's glibc. As tests/haproxy/fetch-haproxy.sh does for
# HAProxy 3.2: the .debs and the libraries they link are downloaded with
# apt-get against a private apt state (the machine's own apt lists and cache
# are not touched), unpacked with dpkg -x into DIR/sid/, and run through that
# folder's own dynamic loader by a wrapper, DIR/llama-server. The wrapper also
# points ggml at the CPU backend variant this CPU runs (ggml loads its CPU
# backend as a plugin from a fixed system path otherwise).
#
# The mirror is the one this machine's apt configuration already uses.
# The .debs are kept in DIR/debs: sid moves, and a later run whose apt-get
# update or download fails unpacks those instead.
#
# Idempotent: a second run finds the wrapper working and prints one line.
# Exit status: 0 when llama-server runs, 1 otherwise.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
arg=$1
mkdir -p "$arg"
dir=$(cd "$arg" && pwd)
suite=sid
root=$dir/$suite
wrapper=$dir/llama-server

# What llama-server needs beyond the binary (checked: without zlib1g and
# libzstd1 from the same suite the host's older ones get loaded). The real
# Depends of the downloaded versions are added to this list.
base=(llama.cpp-tools libllama0 libggml0 libc6 libgcc-s1 libgomp1 libstdc++6
	libssl3t64 zlib1g libzstd1)

have_version() { # wrapper -> "version: 1234 (abcdef)" or nothing
	"$1" --version 2>&1 | sed -n 's/^version: \(.*\)/\1/p' | head -n 1
}
if [ -f "$root/.done" ] && [ -x "$wrapper" ]; then
	v=$(have_version "$wrapper" || true)
	if [ -n "$v" ]; then
		echo "fetch-llama: have llama-server $v in $arg"
		exit 0
	fi
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
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
case "$arch" in
amd64) ldso=ld-linux-x86-64.so.2 ;;
arm64) ldso=ld-linux-aarch64.so.1 ;;
*)
	echo "fetch-llama: unsupported architecture $arch" >&2
	exit 1
	;;
esac

debs=$dir/debs
state=$dir/.apt-$suite
mkdir -p "$debs"
download() {
	local uri
	uri=$(mirror_uri) || {
		echo "fetch-llama: no Debian mirror found in /etc/apt" >&2
		return 1
	}
	mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/new"
	cat >"$state/sources.list" <<EOS
deb [signed-by=$keyring] $uri $suite main
EOS
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
		echo "fetch-llama: apt-get update for $suite failed:" >&2
		tail -n 5 "$state/update.log" >&2
		return 1
	fi
	depends() {
		apt-cache "${apt[@]}" show "$1" 2>/dev/null |
			awk '/^Depends:|^Pre-Depends:/ { sub(/^[^:]*: */, ""); print }' |
			tr ',' '\n' | sed 's/[ (|].*//; s/^ *//; s/:any$//' |
			grep -E '^(lib|zlib1g|llama)' || true
	}
	local p pkgs=() queue=("${base[@]}")
	declare -A seen=()
	while [ ${#queue[@]} -gt 0 ]; do
		p=${queue[0]}
		queue=("${queue[@]:1}")
		[ -n "${seen[$p]:-}" ] && continue
		seen[$p]=1
		# a name this suite lacks (a renamed library) is skipped: the real
		# Depends bring in its successor
		apt-cache "${apt[@]}" show "$p" >/dev/null 2>&1 || continue
		pkgs+=("$p")
		queue+=($(depends "$p"))
	done
	rm -f "$state/new"/*.deb
	if ! (cd "$state/new" && timeout 900 apt-get "${apt[@]}" -qq download "${pkgs[@]}") \
		>"$state/download.log" 2>&1; then
		echo "fetch-llama: apt-get download for $suite failed:" >&2
		tail -n 5 "$state/download.log" >&2
		return 1
	fi
	rm -f "$debs"/*.deb
	mv "$state/new"/*.deb "$debs"/
	rm -rf "$state"
}

unpack() {
	local deb l
	rm -rf "$root"
	mkdir -p "$root"
	for deb in "$debs"/*.deb; do
		dpkg -x "$deb" "$root"
	done
	loader=
	for l in "$root/usr/lib/$multiarch/$ldso" "$root/lib/$multiarch/$ldso" "$root/usr/lib64/$ldso" "$root/lib64/$ldso"; do
		[ -e "$l" ] && { loader=${l#"$root"/}; break; }
	done
	if [ -z "$loader" ] || [ ! -x "$root/usr/bin/llama-server" ]; then
		echo "fetch-llama: no llama-server or loader after unpacking" >&2
		return 1
	fi
	tmp=$dir/.wrapper.$$
	cat >"$tmp" <<EOS
#!/bin/sh
# llama-server from Debian $suite, run through its own loader and libraries.
# ggml's CPU backend is a plugin: the best variant this CPU runs is chosen
# from /proc/cpuinfo unless GGML_BACKEND_PATH is set.
d=\$(cd "\$(dirname "\$0")/$suite" && pwd)
b=\$d/usr/lib/$multiarch/ggml/backends0
if [ -z "\${GGML_BACKEND_PATH:-}" ]; then
	f=\$(grep -m 1 '^flags' /proc/cpuinfo 2>/dev/null || true)
	has() { case " \$f " in *" \$1 "*) return 0 ;; esac; return 1; }
	for v in icelake skylakex haswell sandybridge sse42 x64; do
		case \$v in
		icelake) has avx512_vnni && has avx512vbmi || continue ;;
		skylakex) has avx512f && has avx512bw || continue ;;
		haswell) has avx2 && has fma && has f16c || continue ;;
		sandybridge) has avx || continue ;;
		sse42) has sse4_2 || continue ;;
		esac
		if [ -e "\$b/libggml-cpu-\$v.so" ]; then
			GGML_BACKEND_PATH=\$b/libggml-cpu-\$v.so
			break
		fi
	done
	if [ -z "\${GGML_BACKEND_PATH:-}" ]; then
		GGML_BACKEND_PATH=\$(ls "\$b"/libggml-cpu*.so 2>/dev/null | head -n 1)
	fi
	export GGML_BACKEND_PATH
fi
exec "\$d/$loader" --library-path "\$d/usr/lib/$multiarch:\$d/usr/lib/$multiarch/llama:\$d/lib/$multiarch" "\$d/usr/bin/llama-server" "\$@"
EOS
	chmod +x "$tmp"
	v=$(have_version "$tmp" || true)
	if [ -z "$v" ]; then
		echo "fetch-llama: the unpacked llama-server does not run:" >&2
		"$tmp" --version 2>&1 | tail -n 3 >&2 || true
		rm -f "$tmp"
		return 1
	fi
	mv "$tmp" "$wrapper"
	ls "$debs" >"$root/.done"
}

how=fetched
if ! download; then
	if ls "$debs"/*.deb >/dev/null 2>&1; then
		echo "fetch-llama: using the .debs cached in $arg/debs" >&2
		how="unpacked (cached .debs)"
	else
		exit 1
	fi
fi
unpack || exit 1
echo "fetch-llama: $how llama-server $(have_version "$wrapper") in $arg"

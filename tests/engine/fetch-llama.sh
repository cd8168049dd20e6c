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

# The mirror, the private apt state, the dependency walk, the loader.
. "$(dirname "$0")/../lib/debfetch.sh"
debfetch_name=fetch-llama
if [ -z "$ldso" ]; then
	echo "fetch-llama: unsupported architecture $arch" >&2
	exit 1
fi

debs=$dir/debs
state=$dir/.apt-$suite
mkdir -p "$debs"
download() {
	apt_private "$state" "$suite" || return 1
	mkdir -p "$state/new"
	local pkgs
	mapfile -t pkgs < <(apt_closure '^(lib|zlib1g|llama)' "${base[@]}")
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
	local deb
	rm -rf "$root"
	mkdir -p "$root"
	for deb in "$debs"/*.deb; do
		dpkg -x "$deb" "$root"
	done
	loader=$(find_loader "$root") || loader=
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

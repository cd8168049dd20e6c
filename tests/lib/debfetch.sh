# tests/lib/debfetch.sh - shared by the fetchers of Debian binaries that a
# newer suite has and Debian 12 lacks (tests/haproxy/fetch-haproxy.sh,
# tests/engine/fetch-llama.sh). Sourced, not run: it defines functions and
# the variables arch, multiarch, ldso and keyring; each function returns
# non-zero (with a message on stderr, prefixed by $debfetch_name) on failure.
#
# The mirror is the one this machine's apt configuration already uses, and
# the apt state is private to the caller's folder: the machine's own lists
# and cache are never touched.

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
case "$arch" in
amd64) ldso=ld-linux-x86-64.so.2 ;;
arm64) ldso=ld-linux-aarch64.so.1 ;;
*) ldso= ;;
esac

debfetch_say() { echo "${debfetch_name:-debfetch}: $*" >&2; }

# The URI of this machine's (non-security) Debian mirror, from
# /etc/apt/sources.list.d/*.sources (deb822) or the one-line format.
mirror_uri() {
	local f uri=
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

# apt_private STATE SUITE: sets the array `apt` to the options of a private
# apt state in STATE for SUITE on this machine's mirror, and runs apt-get
# update there (its log in STATE/update.log).
apt_private() {
	local state=$1 suite=$2 uri
	uri=$(mirror_uri) || { debfetch_say "no Debian mirror found in /etc/apt"; return 1; }
	mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
	echo "deb [signed-by=$keyring] $uri $suite main" >"$state/sources.list"
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
		debfetch_say "apt-get update for $suite failed:"
		tail -n 5 "$state/update.log" >&2
		return 1
	fi
}

# apt_closure PATTERN PKG...: prints PKG... and, transitively, every
# dependency whose name matches the extended regex PATTERN, as the suite of
# the last apt_private has them (a name it lacks, a renamed library, is
# skipped: the real Depends bring in its successor).
apt_closure() {
	local pattern=$1 p
	shift
	local queue=("$@")
	declare -A seen=()
	while [ ${#queue[@]} -gt 0 ]; do
		p=${queue[0]}
		queue=("${queue[@]:1}")
		[ -n "${seen[$p]:-}" ] && continue
		seen[$p]=1
		apt-cache "${apt[@]}" show "$p" >/dev/null 2>&1 || continue
		echo "$p"
		queue+=($(apt-cache "${apt[@]}" show "$p" 2>/dev/null |
			awk '/^Depends:|^Pre-Depends:/ { sub(/^[^:]*: */, ""); print }' |
			tr ',' '\n' | sed 's/[ (|].*//; s/^ *//; s/:any$//' |
			grep -E "$pattern" || true))
	done
}

# find_loader ROOT: prints the dynamic loader's path inside an unpacked
# tree, relative to ROOT (merged-/usr suites have it in usr/lib).
find_loader() {
	local root=$1 l
	[ -n "$ldso" ] || { debfetch_say "unsupported architecture $arch"; return 1; }
	for l in "$root/usr/lib/$multiarch/$ldso" "$root/lib/$multiarch/$ldso" \
		"$root/usr/lib64/$ldso" "$root/lib64/$ldso"; do
		[ -e "$l" ] && { echo "${l#"$root"/}"; return 0; }
	done
	return 1
}

#!/usr/bin/env bash
# check_deb.sh - builds the Debian package from a copy of the tree, checks it with lintian, installs it beside Debian's haproxy, checks the installed files, purges it and checks that nothing is left.
#
# Usage: check_deb.sh SOURCE-ROOT VERSION
# VERSION is meson's project version: debian/changelog must carry the same.
# Needs root (or sudo without a password), dpkg-dev, debhelper, lintian and
# the build dependencies of debian/control (tests/run.sh installs them).
# Exit 77 (meson: skipped) when those are missing or when warmlane is
# already installed here: the test never touches an installation it did not
# make. It installs a system package, so meson runs it alone
# (is_parallel: false), and a lock keeps two runs from meeting.
#
# The package is built with DEB_BUILD_OPTIONS=nocheck: debian/rules then
# compiles the agent alone (-Dtests=false), without the test suites.
set -euo pipefail
src=$(cd "$1" && pwd)
version=$2

skip() { echo "skipped: $*"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok: $*"; }

sudo=
if [ "$(id -u)" -ne 0 ]; then
	sudo -n true 2>/dev/null || skip "needs root or sudo without a password"
	sudo="sudo -n"
fi
for t in dpkg-buildpackage dpkg-checkbuilddeps dh lintian apt-get; do
	command -v "$t" >/dev/null || skip "$t not found (tests/run.sh installs it)"
done

# The places the package or its service writes; each must be absent before
# (never removed if it was there) and after the purge.
state_paths=(/etc/warmlane /var/lib/warmlane /var/lib/private/warmlane
	/var/lib/haproxy/warmlane /lib/systemd/system/warmlane.service
	/etc/systemd/system/multi-user.target.wants/warmlane.service)
lock=/run/lock/warmlane-check-deb.lock
[ -d /run/lock ] || lock=/tmp/warmlane-check-deb.lock
exec 9>>"$lock"
flock -w 300 9 || skip "another check_deb.sh holds $lock"
if dpkg-query -W -f='${Status}' warmlane 2>/dev/null | grep -qv '^unknown\|not-installed'; then
	skip "a warmlane package is installed here: not touching it"
fi
for p in "${state_paths[@]}"; do
	[ ! -e "$p" ] && [ ! -L "$p" ] || skip "$p exists: not touching an installation this test did not make"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/warmlane-deb.XXXXXX")
installed=0
cleanup() {
	rc=$?
	if [ $installed -eq 1 ] &&
		dpkg-query -W -f='${Status}' warmlane 2>/dev/null | grep -qv 'not-installed'; then
		echo "cleanup: purging warmlane"
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q \
			-o DPkg::Lock::Timeout=300 warmlane >"$work/cleanup.log" 2>&1 ||
			cat "$work/cleanup.log"
	fi
	# Whatever the package left of the paths that were absent at the start
	# (checked above): the machine is left as it was. Not while dpkg still
	# owns files there (a purge that failed): that needs a person.
	if dpkg-query -W -f='${Status}' warmlane 2>/dev/null | grep -qv 'not-installed'; then
		echo "cleanup: warmlane is still known to dpkg: purge it by hand"
		rc=1
	else
		for p in "${state_paths[@]}"; do
			if [ -e "$p" ] || [ -L "$p" ]; then
				echo "cleanup: removing $p"
				$sudo rm -rf "$p"
			fi
		done
	fi
	rm -rf "$work"
	exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# Names containing "warmlane" outside the test's own directories, before the
# install and after the purge: anything new is something the package left.
leftovers() {
	find /etc /usr /var /opt /srv -xdev \
		\( -path /var/tmp -o -path "$work" \) -prune -o \
		-iname '*warmlane*' -print 2>/dev/null | LC_ALL=C sort
}
leftovers >"$work/before"

# --- build, in a copy of the tree (the files git knows, as they are now) ----
tree="$work/warmlane-$version"
mkdir "$tree"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
		tar --null -T - -cf -) | tar -xf - -C "$tree"
else
	tar -C "$src" --exclude='./build*' --exclude=.git -cf - . | tar -xf - -C "$tree"
fi
chv=$(cd "$tree" && dpkg-parsechangelog -S Version)
if [ "$chv" != "$version" ]; then
	bad "debian/changelog is at $chv, meson.build at $version"
	exit 1
fi
ok "debian/changelog version $chv = meson project version"

start=$(date +%s)
if ! (cd "$tree" && DEB_BUILD_OPTIONS=nocheck nice dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1; then
	tail -n 60 "$work/build.log"
	bad "dpkg-buildpackage -us -uc -b failed"
	exit 1
fi
echo "dpkg-buildpackage -us -uc -b: $(($(date +%s) - start)) s"
deb="$work/warmlane_${version}_amd64.deb"
[ -f "$deb" ] || { ls "$work"; bad "no $(basename "$deb")"; exit 1; }
ok "built $(basename "$deb") ($(stat -c %s "$deb") bytes)"

# The package's optimisation (debian/rules: -O3 and LTO over
# dpkg-buildflags' -O2, about 12% of the agent's CPU per decision) and the
# map's prefetches with it: GCC dropped them once where it did not inline
# the helpers or saw core_prefetch from its callers (-O2, LTO), a third
# of the agent's CPU at 10^6 keys (core/affinity.h, AFFINITY_PREFETCH_FN).
# Read off the build tree, before dh_strip took the binary's symbols.
built=$(ls "$tree"/obj-*/agent/warmlane 2>/dev/null | head -n 1)
cc_json=$(ls "$tree"/obj-*/compile_commands.json 2>/dev/null | head -n 1)
if [ -z "$cc_json" ]; then
	bad "no compile_commands.json in the build tree"
else
	cmd=$(grep -m 1 '"command":.*core/decide\.c' "$cc_json" || true)
	case $cmd in
	*-flto*-O3* | *-O3*-flto*) ok "the core is compiled with -O3 and -flto" ;;
	*) bad "core/decide.c is not compiled with -O3 and -flto: ${cmd:-no command}" ;;
	esac
fi
if [ -z "$built" ] || ! command -v objdump >/dev/null; then
	bad "no unstripped agent in the build tree, or no objdump"
else
	pf=$(objdump -d --no-show-raw-insn "$built" |
		awk '/<core_prefetch>:/ { on = 1; next } on && /^$/ { exit } on' |
		grep -cE 'prefetch|prfm' || true)
	[ "$pf" -gt 0 ] && ok "core_prefetch prefetches in the package's build ($pf instructions)" ||
		bad "core_prefetch holds no prefetch instruction in the package's build"
fi

# --- lintian: no error, no warning (info tags printed, not failed) --------
start=$(date +%s)
if lintian --display-info --show-overrides --fail-on error,warning \
	"$work/warmlane_${version}_amd64.changes" >"$work/lintian.log" 2>&1; then
	ok "lintian: no error, no warning ($(($(date +%s) - start)) s)"
else
	bad "lintian:"
fi
grep -v '^running with root privileges' "$work/lintian.log" || true

# --- what the package holds ------------------------------------------------
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|' >"$work/contents"
for f in /usr/bin/warmlane /usr/bin/warmlanectl /etc/warmlane/warmlane.yaml \
	/lib/systemd/system/warmlane.service /usr/lib/tmpfiles.d/warmlane.conf \
	/usr/share/man/man8/warmlane.8.gz /usr/share/man/man5/warmlane.yaml.5.gz \
	/usr/share/man/man1/warmlanectl.1.gz \
	/usr/share/doc/warmlane/copyright /usr/share/doc/warmlane/changelog.gz \
	/usr/share/doc/warmlane/haproxy.md.gz /usr/share/doc/warmlane/operations.md.gz \
	/usr/share/doc/warmlane/metrics.md.gz \
	/usr/share/doc/warmlane/examples/warmlane.yaml \
	/usr/share/doc/warmlane/examples/haproxy/warmlane.spoe.conf \
	/usr/share/doc/warmlane/examples/haproxy/haproxy-2.6.cfg \
	/usr/share/doc/warmlane/examples/haproxy/haproxy-3.1.cfg \
	/usr/share/doc/warmlane/examples/haproxy/keys.map.example \
	/usr/share/doc/warmlane/examples/grafana/warmlane.json; do
	grep -qxF "$f" "$work/contents" && ok "holds $f" || bad "does not hold $f"
done
mkdir "$work/ctl"
dpkg-deb -e "$deb" "$work/ctl"
grep -qxF /etc/warmlane/warmlane.yaml "$work/ctl/conffiles" &&
	ok "/etc/warmlane/warmlane.yaml is a conffile" || bad "warmlane.yaml is not a conffile"
grep -q "deb-systemd-helper enable 'warmlane.service'" "$work/ctl/postinst" &&
	ok "postinst enables the unit (dh_installsystemd)" || bad "postinst does not enable the unit"
grep -q 'systemd-tmpfiles .*--create warmlane.conf' "$work/ctl/postinst" &&
	ok "postinst applies the tmpfiles entry (dh_installtmpfiles)" || bad "postinst does not apply tmpfiles"

# Every library the binary links is a dependency: its package is in Depends.
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
names=" $(sed 's/([^)]*)//g; s/[,|]/ /g' <<<"$depends" | tr -s ' ') "
dpkg-deb -x "$deb" "$work/root"
for so in $(LC_ALL=C readelf -d "$work/root/usr/bin/warmlane" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
	owners=$(dpkg-query -S "*/$so" 2>/dev/null | sed 's/:.*//; s/, /\n/g' | sort -u)
	found=
	for o in $owners; do [[ $names == *" $o "* ]] && found=$o; done
	[ -n "$found" ] && ok "links $so: depends on $found" || bad "links $so (from: $owners) but Depends lacks it"
done
[[ $names == *" haproxy "* ]] && ok "depends on haproxy" || bad "Depends lacks haproxy"

# --- install beside Debian's haproxy ---------------------------------------
apt=(env DEBIAN_FRONTEND=noninteractive apt-get -y -q --no-install-recommends
	-o DPkg::Lock::Timeout=300)
# Nothing but warmlane may be installed: the test leaves the machine as it was.
sim=$($sudo "${apt[@]}" -s install "$deb" 2>&1) || { echo "$sim"; bad "apt-get -s install failed"; exit 1; }
others=$(sed -n 's/^Inst \([^ ]*\).*/\1/p' <<<"$sim" | grep -vx warmlane || true)
if [ -n "$others" ]; then
	bad "installing would also install: $others (install them first: tests/run.sh does)"
	exit 1
fi
installed=1
if ! (cd "$work" && $sudo "${apt[@]}" install "./$(basename "$deb")") >"$work/install.log" 2>&1; then
	cat "$work/install.log"
	bad "apt-get install ./$(basename "$deb") failed"
	exit 1
fi
ok "apt-get install ./$(basename "$deb")"
dpkg-query -W -f='${Status}\n' warmlane | grep -qx 'install ok installed' ||
	bad "warmlane is not 'install ok installed'"
dpkg-query -W -f='${Status}\n' haproxy | grep -qx 'install ok installed' ||
	bad "haproxy is not installed beside it"

out=$(/usr/bin/warmlane --version 2>&1) || true
[[ $out == *"$version"* ]] && ok "warmlane --version: $out" || bad "warmlane --version: $out"
# As ExecStartPre runs it: an unprivileged user (the unit's DynamicUser).
if out=$($sudo setpriv --reuid=nobody --regid=nogroup --clear-groups \
	/usr/bin/warmlane --check-config /etc/warmlane/warmlane.yaml 2>&1); then
	ok "warmlane --check-config /etc/warmlane/warmlane.yaml: $out"
else
	bad "warmlane --check-config /etc/warmlane/warmlane.yaml: $out"
fi
d=/var/lib/haproxy/warmlane
if [ -d "$d" ] && [ "$(stat -c '%a %U %G' "$d")" = "2770 root haproxy" ]; then
	ok "$d: 2770 root haproxy (tmpfiles)"
else
	bad "$d: $(stat -c '%a %U %G' "$d" 2>&1)"
fi
[ -L /etc/systemd/system/multi-user.target.wants/warmlane.service ] &&
	ok "warmlane.service enabled" || bad "warmlane.service not enabled"
# Without systemd as PID 1 the postinst must neither start nor fail; with
# it, it starts the service (the Debian way) and the purge stops it.
if [ -d /run/systemd/system ]; then
	echo "systemd runs here: warmlane.service is $(systemctl is-active warmlane.service || true)"
else
	echo "systemd is not PID 1 here: the postinst started nothing"
fi

# systemd-analyze verify on the installed unit (as check_unit.sh: skipped
# where no test manager can be set up).
rc=0
out=$(systemd-analyze verify --man=no /lib/systemd/system/warmlane.service 2>&1) || rc=$?
if [ $rc -ne 0 ] && grep -qiE 'failed to (initialize|create|set up) manager|permission denied|operation not permitted' <<<"$out"; then
	echo "systemd-analyze verify cannot run here: not checked"
	echo "$out"
elif [ $rc -ne 0 ] || [ -n "$out" ]; then
	bad "systemd-analyze verify /lib/systemd/system/warmlane.service:"
	echo "$out"
else
	ok "systemd-analyze verify /lib/systemd/system/warmlane.service"
fi
man -w warmlane >/dev/null 2>&1 && man -w 5 warmlane.yaml >/dev/null 2>&1 &&
	ok "man warmlane, man 5 warmlane.yaml" || bad "the man pages are not found by man -w"

# An administrator's edit of the conffile survives a reinstall (the purge
# below removes it all the same).
cfg=/etc/warmlane/warmlane.yaml
echo "# edited by the administrator" | $sudo tee -a "$cfg" >/dev/null
if ! (cd "$work" && $sudo "${apt[@]}" install --reinstall "./$(basename "$deb")") >"$work/reinstall.log" 2>&1; then
	cat "$work/reinstall.log"
	bad "apt-get install --reinstall failed"
elif grep -qx '# edited by the administrator' "$cfg"; then
	ok "an edited $cfg is kept by a reinstall"
else
	bad "a reinstall overwrote the edited $cfg"
fi

# The state the service writes (where systemd runs, the started service has
# written some already), so that the purge has it to remove.
$sudo install -d -m 0700 /var/lib/private/warmlane
$sudo touch /var/lib/private/warmlane/state.msgpack
[ -L /var/lib/warmlane ] || $sudo ln -s private/warmlane /var/lib/warmlane
[ -e "$d/spoa.sock" ] || $sudo touch "$d/spoa.sock"

# --- purge: nothing left ---------------------------------------------------
if ! $sudo "${apt[@]}" purge warmlane >"$work/purge.log" 2>&1; then
	cat "$work/purge.log"
	bad "apt-get purge warmlane failed"
	exit 1
fi
installed=0
ok "apt-get purge warmlane"
st=$(dpkg-query -W -f='${Status}' warmlane 2>/dev/null || true)
[ -z "$st" ] || [[ $st == *not-installed ]] && ok "warmlane is gone from dpkg" || bad "dpkg status: $st"
dpkg-query -W -f='${Status}\n' haproxy | grep -qx 'install ok installed' ||
	bad "haproxy was removed"
for p in "${state_paths[@]}" /var/lib/systemd/deb-systemd-helper-enabled/warmlane.service.dsh-also \
	/var/lib/systemd/deb-systemd-helper-masked/warmlane.service; do
	[ ! -e "$p" ] && [ ! -L "$p" ] || bad "$p left behind"
done
leftovers >"$work/after"
if new=$(comm -13 "$work/before" "$work/after") && [ -n "$new" ]; then
	bad "left behind:"
	echo "$new"
else
	ok "nothing named warmlane left in /etc /usr /var /opt /srv"
fi
if [ -d /run/systemd/system ] && systemctl is-active --quiet warmlane.service; then
	bad "warmlane.service still runs"
fi
exit $fail

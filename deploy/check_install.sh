#!/usr/bin/env bash
# check_install.sh - meson install into a temporary DESTDIR, twice: every file in place, and a modified warmlane.yaml kept.
#
# Usage: check_install.sh BUILD-DIR BINDIR SYSCONFDIR DATADIR MANDIR PREFIX UNITDIR man|noman
# (absolute install paths, as meson.build computes them).
set -euo pipefail
build=$1 bindir=$2 sysconfdir=$3 datadir=$4 mandir=$5 prefix=$6 unitdir=$7 man=$8

dest=$(mktemp -d "${TMPDIR:-/tmp}/warmlane-install.XXXXXX")
trap 'rm -rf "$dest"' EXIT

install() {
	if ! meson install -C "$build" --destdir "$dest" --no-rebuild >"$dest.log" 2>&1; then
		cat "$dest.log"
		rm -f "$dest.log"
		exit 1
	fi
	rm -f "$dest.log"
}

fail=0
want() {
	if [ -e "$dest$1" ]; then
		echo "ok: $1"
	else
		echo "MISSING: $1"
		fail=1
	fi
}

install
want "$bindir/warmlane"
want "$bindir/warmlanectl"
want "$sysconfdir/warmlane/warmlane.yaml"
want "$datadir/doc/warmlane/examples/warmlane.yaml"
want "$datadir/doc/warmlane/examples/haproxy/warmlane.spoe.conf"
want "$datadir/doc/warmlane/examples/haproxy/haproxy-2.6.cfg"
want "$datadir/doc/warmlane/examples/haproxy/haproxy-3.1.cfg"
want "$datadir/doc/warmlane/examples/grafana/warmlane.json"
want "$unitdir/warmlane.service"
want "$prefix/lib/tmpfiles.d/warmlane.conf"
if [ "$man" = man ]; then
	want "$mandir/man8/warmlane.8"
	want "$mandir/man5/warmlane.yaml.5"
	want "$mandir/man1/warmlanectl.1"
fi
unit="$dest$unitdir/warmlane.service"
if [ -e "$unit" ] && ! grep -qx "ExecStart=$bindir/warmlane --config $sysconfdir/warmlane/warmlane.yaml" "$unit"; then
	echo "the installed unit does not name this prefix's paths:"
	grep '^Exec' "$unit"
	fail=1
fi

# The administrator's file survives a second install.
cfg="$dest$sysconfdir/warmlane/warmlane.yaml"
echo "# edited by the administrator" >>"$cfg"
install
if grep -q '^# edited by the administrator$' "$cfg"; then
	echo "ok: a modified warmlane.yaml is kept"
else
	echo "a second install overwrote warmlane.yaml"
	fail=1
fi
exit $fail

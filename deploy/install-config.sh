#!/bin/sh
# install-config.sh - meson install script: installs the example configuration as SYSCONFDIR/warmlane/warmlane.yaml unless one is there.
#
# Usage (from meson.add_install_script): install-config.sh EXAMPLE DIR
# DIR is absolute; DESTDIR (set by meson install --destdir) is honoured.
# An existing file is never touched: it is the administrator's.
set -eu
src=$1
dst="${DESTDIR:-}$2/warmlane.yaml"
if [ -e "$dst" ]; then
	echo "Keeping existing $dst"
	exit 0
fi
mkdir -p "$(dirname "$dst")"
cp "$src" "$dst.tmp.$$"
chmod 0644 "$dst.tmp.$$"
mv "$dst.tmp.$$" "$dst"
echo "Installing $src to $dst"

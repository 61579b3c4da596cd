#!/bin/sh
# install-herdr.sh SRC_DIR
#
# Install the real herdr the herdr suites and bench/herdr.rs run against, from
# a directory holding herdr-<version>-x86_64-linux-gnu.gz (and, when there, its
# .sha256), into a cache outside the checkout:
#   ${DROVER_HERDR_DIR:-${XDG_CACHE_HOME:-~/.cache}/drover/herdr}/<version>/herdr
# The binary is checked against the .sha256 before it is put in place (and a
# cached one again on every run: one that does not match is replaced).
# Prints the binary's path on stdout: `export DROVER_HERDR=$(… install-herdr.sh DIR)`.
#   HERDR_VERSION   the version to install (default 0.8.2)
set -eu

src=${1:?usage: install-herdr.sh SRC_DIR (holding herdr-<version>-x86_64-linux-gnu.gz and .sha256)}
version=${HERDR_VERSION:-0.8.2}
name="herdr-$version-x86_64-linux-gnu"
root="${DROVER_HERDR_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/drover/herdr}"
dir="$root/$version"
bin="$dir/herdr"

[ -f "$src/$name.gz" ] || { echo "install-herdr: no $src/$name.gz" >&2; exit 1; }
# The sha256 of each version's uncompressed binary, pinned here: a binary is
# installed only when it matches (the .sha256 beside it must agree too).
case $version in
    0.8.2) want=b782ddd4c77ccc091f3fc59037f4c6c90ec290a5a9ad77dae2537916c1110f59 ;;
    *) echo "install-herdr: no pinned sha256 for herdr $version" >&2; exit 1 ;;
esac
if [ -f "$src/$name.sha256" ]; then
    given=$(awk 'NR==1 {print $1}' "$src/$name.sha256")
    [ "$given" = "$want" ] || {
        echo "install-herdr: $src/$name.sha256 says $given, not the pinned $want; not installed" >&2
        exit 1
    }
fi

sum() { sha256sum "$1" | awk '{print $1}'; }

if [ -x "$bin" ] && [ "$(sum "$bin")" = "$want" ]; then
    echo "$bin"
    exit 0
fi
mkdir -p "$dir"
tmp=$(mktemp "$dir/.herdr.XXXXXX")
trap 'rm -f "$tmp"' EXIT
gunzip -c "$src/$name.gz" > "$tmp"
got=$(sum "$tmp")
if [ "$got" != "$want" ]; then
    echo "install-herdr: $name.gz unpacks to sha256 $got, not $want; not installed" >&2
    exit 1
fi
chmod 755 "$tmp"
"$tmp" --version | grep -q "^herdr $version" || {
    echo "install-herdr: the binary does not answer 'herdr $version' to --version" >&2
    exit 1
}
mv -f "$tmp" "$bin"
trap - EXIT
echo "install-herdr: installed herdr $version into $dir" >&2
echo "$bin"

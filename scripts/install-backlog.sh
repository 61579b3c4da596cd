#!/bin/sh
# Install the pinned Backlog.md CLI (npm `backlog.md`) that the board interop
# test runs, into a cache outside the checkout, once:
#   ${DROVER_BACKLOG_DIR:-${XDG_CACHE_HOME:-~/.cache}/drover/backlog}/backlog.md-<v>
# Idempotent: when the binary answers with the pinned version nothing is
# downloaded. Prints the directory holding `backlog` on stdout.
set -eu

BACKLOG_VERSION=1.52.0

root="${DROVER_BACKLOG_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/drover/backlog}"
dir="$root/backlog.md-${BACKLOG_VERSION}"
bin="$dir/node_modules/.bin"

pinned() {
    [ -x "$bin/backlog" ] && "$bin/backlog" --version 2>/dev/null | grep -q "$BACKLOG_VERSION"
}

if pinned; then
    echo "$bin"
    exit 0
fi

command -v npm >/dev/null 2>&1 || {
    echo "install-backlog: npm not found; install Node.js 18 or newer first" >&2
    exit 1
}

mkdir -p "$dir"
echo "install-backlog: installing backlog.md $BACKLOG_VERSION into $dir" >&2
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "backlog.md@$BACKLOG_VERSION" >&2

if ! pinned; then
    echo "install-backlog: installed, but $bin/backlog does not report $BACKLOG_VERSION" >&2
    exit 1
fi
echo "$bin"

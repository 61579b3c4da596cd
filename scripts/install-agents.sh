#!/bin/sh
# Install every supported agent CLI version (scripts/agent-versions, or the
# `<agent> <version>` lines of DROVER_AGENT_VERSIONS) side by side in a cache
# outside the checkout, once each:
#   ${DROVER_AGENTS_DIR:-${XDG_CACHE_HOME:-~/.cache}/drover/agents}/claude-code-<v>
#   ${DROVER_AGENTS_DIR:-${XDG_CACHE_HOME:-~/.cache}/drover/agents}/codex-<v>
# Idempotent: a version whose binary already answers with it is not downloaded
# again. Prints one `<agent> <version> <bin path>` line per version on stdout.
# DROVER_AGENTS_GLOBAL=1 installs each as a user installs into a prefix of
# their own, `npm install -g --prefix <dir>` (the binary in <dir>/bin), and
# links it from <dir>/node_modules/.bin, where the tests look.
set -eu

here="$(cd "$(dirname "$0")" && pwd)"
root="${DROVER_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/drover/agents}"
if [ -n "${DROVER_AGENT_VERSIONS:-}" ]; then
    list="$(printf '%s\n' "$DROVER_AGENT_VERSIONS" | tr ',' '\n')"
else
    list="$(cat "$here/agent-versions")"
fi

command -v npm >/dev/null 2>&1 || {
    echo "install-agents: npm not found; install Node.js 18 or newer first" >&2
    exit 1
}

answers() { # bin version
    [ -x "$1" ] && "$1" --version 2>/dev/null | grep -qE "(^| )$2( |\$)"
}

install_one() { # agent version
    case "$1" in
        claude) pkg="@anthropic-ai/claude-code"; dir="$root/claude-code-$2" ;;
        codex) pkg="@openai/codex"; dir="$root/codex-$2" ;;
        *) echo "install-agents: unknown agent '$1' (claude or codex)" >&2; exit 2 ;;
    esac
    bin="$dir/node_modules/.bin/$1"
    if ! answers "$bin" "$2"; then
        mkdir -p "$dir"
        echo "install-agents: installing $pkg@$2 into $dir" >&2
        if [ -n "${DROVER_AGENTS_GLOBAL:-}" ]; then
            npm install -g --prefix "$dir" --no-audit --no-fund --loglevel=error "$pkg@$2" >&2
            pkgdir="$dir/lib/node_modules/$pkg"
            mkdir -p "$dir/node_modules/.bin"
            ln -sfn "../../bin/$1" "$bin"
        else
            npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$pkg@$2" >&2
            pkgdir="$dir/node_modules/$pkg"
        fi
        # npm may skip claude-code's postinstall (it links the platform binary).
        if [ "$1" = claude ] && ! "$bin" --version >/dev/null 2>&1; then
            (cd "$pkgdir" && node install.cjs) >&2
        fi
        if ! answers "$bin" "$2"; then
            echo "install-agents: installed $pkg@$2, but $bin does not report $2" >&2
            exit 1
        fi
    fi
    echo "$1 $2 $bin"
}

printf '%s\n' "$list" | sed -e 's/#.*//' | while read -r agent version; do
    [ -n "${agent:-}" ] || continue
    install_one "$agent" "$version"
done

#!/bin/sh
# Install the pinned agent CLIs that the real-agent suite and `drover rehearse`
# run (docs/rehearsal.md) into a cache outside the checkout, once:
#   ${DROVER_AGENTS_DIR:-${XDG_CACHE_HOME:-~/.cache}/drover/agents}/claude-code-<v>_codex-<v>
# Idempotent: when both binaries answer with the pinned versions nothing is
# downloaded. Prints the directory holding `claude` and `codex` on stdout.
set -eu

CLAUDE_VERSION=2.1.197
CODEX_VERSION=0.171.0

root="${DROVER_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/drover/agents}"
dir="$root/claude-code-${CLAUDE_VERSION}_codex-${CODEX_VERSION}"
bin="$dir/node_modules/.bin"

pinned() {
    [ -x "$bin/claude" ] && [ -x "$bin/codex" ] &&
        "$bin/claude" --version 2>/dev/null | grep -q "^$CLAUDE_VERSION " &&
        "$bin/codex" --version 2>/dev/null | grep -q " $CODEX_VERSION\$"
}

if pinned; then
    echo "$bin"
    exit 0
fi

command -v npm >/dev/null 2>&1 || {
    echo "install-agents: npm not found; install Node.js 18 or newer first" >&2
    exit 1
}

mkdir -p "$dir"
echo "install-agents: installing claude-code $CLAUDE_VERSION and codex $CODEX_VERSION into $dir (~670 MB)" >&2
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$CLAUDE_VERSION" "@openai/codex@$CODEX_VERSION" >&2

# npm may skip claude-code's postinstall (it links the platform binary); run it
# when the binary does not answer yet.
if ! "$bin/claude" --version >/dev/null 2>&1; then
    (cd "$dir/node_modules/@anthropic-ai/claude-code" && node install.cjs) >&2
fi

if ! pinned; then
    echo "install-agents: installed, but the binaries in $bin do not report the pinned versions" >&2
    exit 1
fi
echo "$bin"

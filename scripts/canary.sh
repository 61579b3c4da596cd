#!/bin/sh
# The canary: install the newest published Claude Code and Codex into a cache
# dir of their own, run the real-agent suite and the agents' signal suites
# against them (an interrupt Claude Code 2.1.337 draws anew showed only
# there), and print the versions and a pass/fail line per test — so a
# release that moves the screen is seen before users meet it. Not part of CI
# (docs/rehearsal.md).
#   scripts/canary.sh            # newest of both
#   CANARY_CLAUDE=2.1.340 CANARY_CODEX=0.172.0 scripts/canary.sh
# Exit 0 when every test passed, 1 otherwise.
set -eu
cd "$(dirname "$0")/.."

command -v npm >/dev/null 2>&1 || {
    echo "canary: npm not found; install Node.js first" >&2
    exit 1
}
claude="${CANARY_CLAUDE:-$(npm view @anthropic-ai/claude-code version)}"
codex="${CANARY_CODEX:-$(npm view @openai/codex version)}"
root="${CANARY_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/drover/canary}"
versions="claude $claude,codex $codex"

echo "canary: claude-code $claude, codex $codex (cache $root)"
DROVER_AGENTS_DIR="$root" DROVER_AGENT_VERSIONS="$versions" scripts/install-agents.sh >/dev/null

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
DROVER_AGENTS_DIR="$root" DROVER_AGENT_VERSIONS="$versions" \
    cargo test --test it -- --ignored --test-threads 2 \
    real_agents:: real_signals:: real_signals_wired:: real_signals_drift:: >"$log" 2>&1 || status=$?

grep -E '^test [a-z_:]+ \.\.\. ' "$log" | sed -e 's/^test \([a-z_:]*\) \.\.\. \(.*\)$/\2 \1/' \
    -e 's/^ok /pass /' -e 's/^FAILED /FAIL /' | sort -k2
if [ "$status" -ne 0 ]; then
    echo "canary: FAILED against claude-code $claude / codex $codex; failures:"
    sed -n '/^failures:$/,/^test result/p' "$log" | grep -E 'panicked|^ +[a-z_:]+$|: ' | head -40
    exit 1
fi
echo "canary: all passed against claude-code $claude / codex $codex"

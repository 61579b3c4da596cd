#!/usr/bin/env bash
# CI: run test modules of the integration test binary as a plain user, the
# way users run drover (run by .ci/run as root, after the build):
#
#   scripts/plain-user-pass.sh TEST_BIN DROVER_BIN -- TEST ARGS...
#
# - The user (DROVER_CI_USER, default drover-ci) is made by `useradd -m`, so
#   their HOME has the distribution's skeleton dotfiles; reused when it exists.
#   Their shell is bash (`useradd`'s default on Debian is /bin/sh; `adduser`,
#   what a Debian user gets, gives bash).
# - drover is installed as `cargo install` would, into ~/.cargo/bin, and that
#   dir is put on PATH by a line appended to ~/.bashrc only: their terminal (an
#   interactive shell) finds `drover`, a login shell does not (/etc/profile
#   resets PATH; the skeleton .profile adds ~/bin and ~/.local/bin, not
#   ~/.cargo/bin, and the skeleton .bashrc returns at once when not
#   interactive). Both are checked before the tests run.
# - The real agents are installed by that user's npm as into a prefix of their
#   own, `npm install -g --prefix ~/.npm-global/<agent>-<version>` for every
#   supported version side by side (scripts/install-agents.sh with
#   DROVER_AGENTS_GLOBAL=1); each test puts the version it runs on PATH.
# - The tests run with that user's HOME, USER, SHELL, an XDG_RUNTIME_DIR of
#   their own (/run/user/<uid>, 0700), a state dir of their own, and the PATH
#   their interactive shell has; of root's environment only what npm needs
#   to reach its registry (proxy and CA variables, for the install) and what
#   picks the run (DROVER_TEST_BACKEND, DROVER_HERDR, DROVER_AGENT_VERSIONS, TERM).
# The test binary and the drover binary stay where cargo built them (their
# paths are compiled into the tests); the user is given an ACL to traverse
# their parent dirs and to write the tests' scratch dir (CARGO_TARGET_TMPDIR,
# <target>/tmp), nothing more.
set -euo pipefail

[ "$(id -u)" -eq 0 ] || { echo "plain-user-pass: run as root" >&2; exit 2; }
[ $# -ge 3 ] && [ "$3" = "--" ] || {
    echo "usage: plain-user-pass.sh TEST_BIN DROVER_BIN -- TEST ARGS..." >&2
    exit 2
}
test_bin="$(realpath "$1")"
drover_bin="$(realpath "$2")"
shift 3
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
user="${DROVER_CI_USER:-drover-ci}"

if ! id -u "$user" >/dev/null 2>&1; then
    useradd -m -s /bin/bash "$user"
fi
uid="$(id -u "$user")"
home="$(getent passwd "$user" | cut -d: -f6)"
cd "$home"
as_user() { runuser -u "$user" -- env -i HOME="$home" USER="$user" LOGNAME="$user" \
    SHELL=/bin/bash LANG="${LANG:-C.UTF-8}" "$@"; }

# Parent dirs the user must traverse, and the scratch dir they must write.
reach() { # path...
    local p d
    for p in "$@"; do
        d="$p"
        while [ "$d" != / ]; do
            d="$(dirname "$d")"
            as_user test -x "$d" || setfacl -m "u:$user:x" "$d"
        done
    done
}
target_tmp="$(dirname "$(dirname "$(dirname "$test_bin")")")/tmp"
mkdir -p "$target_tmp"
reach "$test_bin" "$drover_bin" "$repo/Cargo.toml" "$target_tmp/x"
# herdr for a pass on its backend (DROVER_TEST_BACKEND=herdr); tmux is a system binary.
[ -n "${DROVER_HERDR:-}" ] && reach "$DROVER_HERDR"
as_user test -w "$target_tmp" || setfacl -m "u:$user:rwx" "$target_tmp"

# drover, as `cargo install` puts it, on PATH through ~/.bashrc only.
install -d -o "$user" -g "$user" "$home/.cargo" "$home/.cargo/bin"
install -o "$user" -g "$user" -m 0755 "$drover_bin" "$home/.cargo/bin/drover"
line='export PATH="$HOME/.cargo/bin:$PATH"'
grep -qxF "$line" "$home/.bashrc" 2>/dev/null ||
    as_user sh -c 'printf "\n%s\n" "$1" >> "$HOME/.bashrc"' sh "$line"
login_path="$(as_user bash -lc 'printf %s "$PATH"')"
term_path="$(as_user bash -lic 'printf %s "$PATH"' 2>/dev/null </dev/null)"
if as_user env PATH="$login_path" sh -c 'command -v drover' >/dev/null; then
    echo "plain-user-pass: $user's login shell finds drover (PATH $login_path); the pass would prove nothing" >&2
    exit 1
fi
if [ "$(as_user env PATH="$term_path" sh -c 'command -v drover')" != "$home/.cargo/bin/drover" ]; then
    echo "plain-user-pass: $user's interactive shell does not find drover in ~/.cargo/bin (PATH $term_path)" >&2
    exit 1
fi

# The agents, by the user's own npm; what npm needs of root's environment.
net=()
for v in NODE_EXTRA_CA_CERTS SSL_CERT_FILE SSL_CERT_DIR HTTPS_PROXY HTTP_PROXY NO_PROXY \
    https_proxy http_proxy no_proxy npm_config_registry npm_config_cafile; do
    [ -n "${!v:-}" ] && net+=("$v=${!v}")
done
versions="${DROVER_AGENT_VERSIONS:-$(sed -e "s/#.*//" "$here/agent-versions" | grep .)}"
agents="$home/.npm-global"
as_user PATH="$login_path" "${net[@]}" DROVER_AGENT_VERSIONS="$versions" \
    DROVER_AGENTS_DIR="$agents" DROVER_AGENTS_GLOBAL=1 \
    sh -s >/dev/null <"$here/install-agents.sh"

# A runtime dir and a state dir of their own.
run_dir="/run/user/$uid"
mkdir -p /run/user
install -d -m 0700 -o "$user" -g "$user" "$run_dir"
as_user mkdir -p "$home/.local/state/drover"

pass=()
for v in DROVER_TEST_BACKEND DROVER_HERDR TERM; do
    [ -n "${!v:-}" ] && pass+=("$v=${!v}")
done
as_user PATH="$term_path" XDG_RUNTIME_DIR="$run_dir" \
    DROVER_STATE_DIR="$home/.local/state/drover" DROVER_AGENT_VERSIONS="$versions" \
    DROVER_AGENTS_DIR="$agents" \
    "${pass[@]}" "$test_bin" "$@"

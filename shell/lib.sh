# shellcheck shell=bash
# drover shell helpers: source this from bash scripts (safe under set -euo pipefail).
#
#   source shell/lib.sh
#   drover_new_session impl claude --env ANTHROPIC_BASE_URL=http://127.0.0.1:8080 -- --permission-mode acceptEdits
#   drover_send impl "Fix the failing test"
#   drover_wait --fresh impl idle,done 600000   # --fresh: only what happens after this call
#   drover_read impl
#   drover_stop impl
#   drover_lane_up --topology four-role --repo . --sessions implementer --agents claude --env ANTHROPIC_BASE_URL=http://127.0.0.1:8080
#   drover_approve impl
#   drover_events --kind pane.state | jq -c 'select(.state == "blocked")'
#
# Every helper checks that `drover --version` matches DROVER_SH_VERSION and refuses
# (non-zero, one line on stderr) when it does not. Env reaches an agent only as
# --env at pane creation. Helpers never swallow a non-zero exit of drover.

DROVER_SH_VERSION="0.1.0"
: "${DROVER_BIN:=drover}"

_drover_check_version() {
  local got
  got=$("$DROVER_BIN" --version 2>/dev/null) || {
    echo "drover lib.sh: cannot run '$DROVER_BIN --version'; install drover or set DROVER_BIN" >&2
    return 1
  }
  got=${got##* }
  if [ "$got" != "$DROVER_SH_VERSION" ]; then
    echo "drover lib.sh: version mismatch: lib.sh is $DROVER_SH_VERSION, drover is $got; use the lib.sh shipped with your drover" >&2
    return 1
  fi
}

# drover_new_session NAME AGENT [--env K=V]… [--cwd DIR] [--size CxR] [-- ARGS…]
# AGENT: claude | codex (ARGS go to the agent), sim (ARGS go to `drover sim-agent`),
# shell (ARGS are the command).
drover_new_session() {
  _drover_check_version || return 1
  if [ $# -lt 2 ]; then
    echo "usage: drover_new_session NAME AGENT [--env K=V]... [--cwd DIR] [-- ARGS...]" >&2
    return 2
  fi
  local name=$1 agent=$2
  shift 2
  local -a opts=() args=()
  while [ $# -gt 0 ]; do
    case $1 in
      --env|--cwd|--size) opts+=("$1" "$2"); shift 2 ;;
      --) shift; args=("$@"); break ;;
      *) echo "drover_new_session: unknown option $1" >&2; return 2 ;;
    esac
  done
  local -a cmd=()
  case $agent in
    claude|codex) cmd=("$agent" "${args[@]+"${args[@]}"}") ;;
    sim) cmd=("$DROVER_BIN" sim-agent "${args[@]+"${args[@]}"}") ;;
    shell)
      if [ ${#args[@]} -eq 0 ]; then
        echo "drover_new_session: a shell session needs a command after --" >&2
        return 2
      fi
      cmd=("${args[@]}") ;;
    *) echo "drover_new_session: unknown agent $agent (claude, codex, sim, shell)" >&2; return 2 ;;
  esac
  "$DROVER_BIN" pane new "$name" --agent "$agent" "${opts[@]+"${opts[@]}"}" -- "${cmd[@]}"
}

# drover_send NAME TEXT [--no-enter]
drover_send() {
  _drover_check_version || return 1
  "$DROVER_BIN" pane send "$@"
}

# drover_wait [--fresh] NAME[,NAME…] STATES [TIMEOUT_MS]   (exit 4 on timeout, 5 when gone)
# After a send, use --fresh: a state seen before the call does not count.
drover_wait() {
  _drover_check_version || return 1
  local -a fresh=()
  if [ "${1:-}" = --fresh ]; then
    fresh=(--fresh)
    shift
  fi
  local panes=$1 states=$2 timeout=${3:-60000}
  local -a list
  IFS=, read -r -a list <<<"$panes"
  "$DROVER_BIN" wait "${list[@]}" --until "$states" --timeout-ms "$timeout" "${fresh[@]+"${fresh[@]}"}"
}

# drover_read NAME [read options…]
drover_read() {
  _drover_check_version || return 1
  "$DROVER_BIN" pane read "$@"
}

# drover_attach NAME
drover_attach() {
  _drover_check_version || return 1
  "$DROVER_BIN" attach "$@"
}

# drover_stop NAME
drover_stop() {
  _drover_check_version || return 1
  "$DROVER_BIN" pane kill "$@"
}

# drover_job SUBCOMMAND ARGS…   (e.g. drover_job complete J1 --expected-attempt A)
drover_job() {
  _drover_check_version || return 1
  "$DROVER_BIN" job "$@"
}

# drover_lane_up ARGS…   (`drover lane up`: a pane and a worktree per lane; env only as --env)
drover_lane_up() {
  _drover_check_version || return 1
  "$DROVER_BIN" lane up "$@"
}

# drover_lane_down ARGS…   (`drover lane down`: refuses to remove unmerged work)
drover_lane_down() {
  _drover_check_version || return 1
  "$DROVER_BIN" lane down "$@"
}

# drover_approve PANE [ARGS…]   (answer a blocked agent's question with yes)
drover_approve() {
  _drover_check_version || return 1
  if [ $# -lt 1 ]; then
    echo "usage: drover_approve PANE" >&2
    return 2
  fi
  "$DROVER_BIN" approve "$@"
}

# drover_deny PANE [ARGS…]   (answer a blocked agent's question with no)
drover_deny() {
  _drover_check_version || return 1
  if [ $# -lt 1 ]; then
    echo "usage: drover_deny PANE" >&2
    return 2
  fi
  "$DROVER_BIN" deny "$@"
}

# drover_loop_run ARGS…   (`drover loop run`: run a queue of tasks)
drover_loop_run() {
  _drover_check_version || return 1
  "$DROVER_BIN" loop run "$@"
}

# drover_events [--since SEQ] [--pane P] [--kind K]
# One JSON object per line as things happen (pane states, jobs, decisions, lanes),
# until the supervisor stops (exit 5) or the reader goes away.
drover_events() {
  _drover_check_version || return 1
  "$DROVER_BIN" events --follow --jsonl "$@"
}

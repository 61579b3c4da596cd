#!/usr/bin/env bats
# shell/lib.sh under `set -euo pipefail`. What a helper forwards (argument
# forwarding, exit propagation for every code, env only as --env) is checked
# against tests/bats/fake-drover; what the helpers do is checked against the
# real binary ($DROVER_TEST_BIN) with a real supervisor and sim lanes in a
# real git repository.

setup() {
  ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
  LIB="$ROOT/shell/lib.sh"
  FAKE="$BATS_TEST_DIRNAME/fake-drover"
  export FAKE_LOG="$BATS_TEST_TMPDIR/fake.log"
  : >"$FAKE_LOG"
  export FAKE_VERSION
  FAKE_VERSION="$(sed -n 's/^DROVER_SH_VERSION="\(.*\)"$/\1/p' "$LIB")"
  REAL="${DROVER_TEST_BIN:-}"
}

# Run SCRIPT with lib.sh sourced, strict mode on, drover = the fake.
fake() {
  run env DROVER_BIN="$FAKE" bash -c "set -euo pipefail; source '$LIB'; $1"
}

# Run SCRIPT with lib.sh sourced against the real binary on a private state dir.
real() {
  [ -x "$REAL" ] || skip "set DROVER_TEST_BIN to a built drover"
  export DROVER_STATE_DIR="$BATS_TEST_TMPDIR/state"
  run env DROVER_BIN="$REAL" bash -c "set -euo pipefail; source '$LIB'; $1"
}

real_has() {
  [ -x "$REAL" ] || skip "set DROVER_TEST_BIN to a built drover"
  "$REAL" "$@" --help >/dev/null 2>&1 || skip "this drover has no \`$*\` yet"
}

teardown() {
  if [ -n "${DROVER_STATE_DIR:-}" ] && [ -x "$REAL" ]; then
    DROVER_STATE_DIR="$DROVER_STATE_DIR" "$REAL" --no-autostart kill-server >/dev/null 2>&1 || true
  fi
}

argv() { sed -n 's/^argv://p' "$FAKE_LOG"; }

@test "each new helper forwards its arguments exactly, spaces included" {
  fake 'drover_lane_up impl claude --env "A=b c"; drover_lane_down impl --force; drover_approve p1; drover_deny p2; drover_loop_run q.toml --max "2 tasks"; drover_events --since 4'
  [ "$status" -eq 0 ]
  expected=$'lane\nup\nimpl\nclaude\n--env\nA=b c\nlane\ndown\nimpl\n--force\napprove\np1\ndeny\np2\nloop\nrun\nq.toml\n--max\n2 tasks\nevents\n--follow\n--jsonl\n--since\n4'
  [ "$(argv)" = "$expected" ]
}

@test "no helper swallows a non-zero exit: the script stops with drover's code" {
  for h in "drover_lane_up a" "drover_lane_down a" "drover_approve p" "drover_deny p" \
           "drover_loop_run q" "drover_events"; do
    for code in 1 3 5; do
      FAKE_EXIT=$code fake "$h; echo reached-after"
      [ "$status" -eq "$code" ] || { echo "$h: got $status for $code"; return 1; }
      [[ "$output" != *reached-after* ]] || { echo "$h went on after $code"; return 1; }
    done
  done
}

@test "env reaches drover only as --env, never through the environment" {
  fake 'CANARY_SECRET=s3cret; drover_new_session n shell --env CANARY_SECRET=s3cret -- sh; drover_lane_up impl --env CANARY_SECRET=s3cret'
  [ "$status" -eq 0 ]
  grep -qx 'argv:--env' "$FAKE_LOG"
  grep -qx 'argv:CANARY_SECRET=s3cret' "$FAKE_LOG"
  ! grep -q 'canary:s3cret' "$FAKE_LOG"
}

@test "a version mismatch refuses every helper with one line" {
  for h in drover_lane_up drover_lane_down "drover_approve p" "drover_deny p" drover_loop_run drover_events; do
    FAKE_VERSION=0.0.0-other fake "$h"
    [ "$status" -eq 1 ]
    [[ "$output" == *"version mismatch"* ]]
    [ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
  done
  [ ! -s "$FAKE_LOG" ]
}

@test "approve and deny without a pane are usage errors" {
  fake 'drover_approve'
  [ "$status" -eq 2 ]
  fake 'drover_deny'
  [ "$status" -eq 2 ]
}

@test "drover_events streams the supervisor's events (real binary)" {
  real_has events
  real 'drover_new_session e1 shell -- sh -c "exec cat" >/dev/null
        drover_events --since 0 --kind pane.created | head -n 1'
  [ "$status" -eq 0 ]
  [[ "$output" == *'"kind":"pane.created"'* ]]
  [[ "$output" == *'"pane":"e1"'* ]]
}

@test "drover_events exits non-zero when the supervisor is unreachable (real binary)" {
  real_has events
  export DROVER_STATE_DIR="$BATS_TEST_TMPDIR/none"
  mkdir -p "$DROVER_STATE_DIR"
  run env DROVER_BIN="$REAL" bash -c "set -euo pipefail; source '$LIB'; \"\$DROVER_BIN\" --no-autostart events --follow; echo reached-after"
  [ "$status" -eq 5 ]
  [[ "$output" != *reached-after* ]]
}

# A repository with one commit on main, and a sim script for lane
# implementer-claude: each prompt asks permission, then (approved) writes a
# marker outside the worktree and finishes.
lane_fixture() {
  REPO="$BATS_TEST_TMPDIR/repo"
  git init -q -b main "$REPO"
  git -C "$REPO" -c user.email=t@t -c user.name=t commit -q --allow-empty -m init
  local lane="$BATS_TEST_TMPDIR/state/lanes/implementer-claude"
  mkdir -p "$lane"
  cat >"$lane/sim-script.toml" <<TOML
[[turn]]
steps = [{ ask = "touch one" }, { write = { path = "$BATS_TEST_TMPDIR/approved", content = "yes" } }, "finish"]
[[turn]]
steps = [{ ask = "touch two" }, { write = { path = "$BATS_TEST_TMPDIR/denied", content = "yes" } }, "finish"]
TOML
}

@test "lane up, approve, deny and lane down drive a real supervisor and sim lane (real binary)" {
  real_has lane up
  lane_fixture
  real "drover_lane_up --topology four-role --repo '$REPO' --sim --sessions implementer --agents claude >/dev/null
        drover_send implementer-claude 'first' >/dev/null
        drover_wait --fresh implementer-claude blocked 30000 >/dev/null
        drover_approve implementer-claude
        drover_wait implementer-claude done 30000 >/dev/null
        test -f '$BATS_TEST_TMPDIR/approved'
        drover_send implementer-claude 'second' >/dev/null
        drover_wait --fresh implementer-claude blocked 30000 >/dev/null
        drover_deny implementer-claude
        drover_wait implementer-claude idle 30000 >/dev/null
        drover_read implementer-claude | grep -q Interrupted
        drover_lane_down implementer-claude >/dev/null
        \"\$DROVER_BIN\" lane ls --json"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"implementer-claude: answered the permission dialog"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/denied" ]
  # The lane is gone, and so are its worktree and branch (clean and merged).
  [[ "${lines[-1]}" == "[]" ]]
  [ -z "$(git -C "$REPO" branch --list 'drover/*')" ]
  [ "$(git -C "$REPO" worktree list | wc -l)" -eq 1 ]
}

@test "drover_approve on a sim lane that asks nothing exits 3 and stops the script (real binary)" {
  real_has lane up
  lane_fixture
  real "drover_lane_up --topology four-role --repo '$REPO' --sim --sessions implementer --agents claude >/dev/null
        drover_approve implementer-claude
        echo reached-after"
  [ "$status" -eq 3 ]
  [[ "$output" == *"is not blocked on a dialog"* ]]
  [[ "$output" != *reached-after* ]]
}

@test "drover_lane_up's --env reaches the sim agent and nothing on disk (real binary)" {
  real_has lane up
  lane_fixture
  real "CANARY_SECRET=not-this drover_lane_up --topology four-role --repo '$REPO' --sim --sessions implementer --agents claude --env CANARY_SECRET=s3cret-lane >/dev/null
        \"\$DROVER_BIN\" pane ls --json"
  [ "$status" -eq 0 ]
  pid="$(printf '%s\n' "$output" | sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p' | head -n 1)"
  [ -n "$pid" ]
  tr '\0' '\n' <"/proc/$pid/environ" | grep -qx 'CANARY_SECRET=s3cret-lane'
  ! grep -rq 's3cret-lane' "$DROVER_STATE_DIR" || false
  grep -q '"CANARY_SECRET"' "$DROVER_STATE_DIR/registry/lanes.json"
}

@test "drover_approve on a pane that is not there fails (real binary)" {
  real_has approve
  real 'drover_approve no-such-pane'
  [ "$status" -ne 0 ]
}

@test "drover_loop_run (real binary)" {
  real_has loop run
  real 'drover_loop_run --help >/dev/null'
  [ "$status" -eq 0 ]
}

@test "the header's drover_lane_up example is the real grammar (real binary)" {
  real_has lane up
  lane_fixture
  line="$(sed -n 's/^#   \(drover_lane_up .*\)$/\1/p' "$LIB")"
  [ -n "$line" ]
  # No claude on PATH here: the example is accepted and fails for that
  # reason alone, never as a usage error (exit 2).
  real "cd '$REPO'; PATH=/usr/bin:/bin; $line"
  echo "$output"
  [ "$status" -ne 2 ]
  [ "$status" -ne 0 ]
  [[ "$output" == *"claude"* ]]
  [[ "$output" != *"unexpected argument"* ]]
}

//! The tmux backend's output path (docs/tmux.md, "Output, input, exit"):
//! each pane's bytes come through a pipe of its own (`pipe-pane` into a
//! private FIFO), the control client takes no `%output`, and the pipe is
//! re-made with the screen re-seeded in one step whenever there is a gap —
//! a supervisor restart, an operator's own `pipe-pane`. Real tmux, real
//! panes; these pin `--backend tmux`.

use crate::common;
use crate::tmux_common;
use common::*;
use std::time::Duration;
use tmux_common::*;

/// Generous: the machine is shared and loaded.
const LONG: Duration = Duration::from_secs(60);

fn pane_id(info: &serde_json::Value) -> String {
    info["backend_pane_id"].as_str().unwrap().to_string()
}

/// Pids of processes whose stdout is `path`.
fn writers_of(path: &std::path::Path) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/fd/1")).is_ok_and(|l| l == path))
        .collect()
}

/// The numbers of the `n N` rows of a screen (scrollback included).
fn counter_rows(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.trim_end().strip_prefix("n ")?.parse().ok())
        .collect()
}

/// Guards: the last output an app writes just before it exits (200 KB,
/// then its last line) was lost or late: at `exited` the screen must show
/// it, with the exit code. The app asks for a cursor report and waits for
/// tmux's answer before it exits, so tmux has read all its output (and
/// written it to the pipe) by then; what is still in the pipe when the app
/// exits must reach the screen before `exited`. (tmux 3.3a itself loses the
/// output of an app that exits before tmux has read it: docs/tmux.md.)
#[test]
fn output_written_just_before_exit_is_on_the_screen_at_exited() {
    need_tmux();
    let d = Drover::new();
    let _guard = TmuxGuard(socket(&d));
    for i in 0..5 {
        let name = format!("tail{i}");
        let script = format!(
            "stty -icanon -echo min 1; head -c 200000 /dev/zero | tr '\\0' x | fold -w 100; printf '\\nlast-line-{i}-done\\n\\033[6n'; \
             c=; until [ \"$c\" = R ]; do c=$(dd bs=1 count=1 2>/dev/null); done; exit 3"
        );
        tmux_pane(&d, &name, &["--size", "100x30"], &["sh", "-c", &script]);
        let out = d.wait_state(&[&name], "exited", 60_000);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(stdout(&out).contains("\"exit_code\":3"), "{}", stdout(&out));
        let screen = d.read(&name);
        let last = screen.lines().rev().find(|l| !l.trim().is_empty());
        assert_eq!(
            last.map(str::trim_end),
            Some(format!("last-line-{i}-done").as_str()),
            "run {i}: screen at exited:\n{screen}"
        );
        d.ok(&["pane", "kill", &name]);
    }
}

/// Guards: a supervisor restart while a tmux pane floods duplicated or
/// lost output at the seam between the re-seeded screen and the new pipe:
/// every counter line after the restart follows the one before it.
#[test]
fn restart_readopts_a_flooding_pane_with_no_duplicated_or_lost_lines() {
    need_tmux();
    let d = Drover::new();
    let _guard = TmuxGuard(socket(&d));
    let stop = d.scratch().join("stop");
    let script = format!(
        "i=0; while [ ! -e '{}' ]; do j=0; while [ $j -lt 5 ]; do i=$((i+1)); echo \"n $i\"; j=$((j+1)); done; sleep 0.01; done; echo \"END $i\"; exec sleep 1000",
        stop.display()
    );
    let info = tmux_pane(&d, "flood", &["--size", "80x24"], &["sh", "-c", &script]);
    assert!(
        wait_until(LONG, || counter_rows(&d.read("flood"))
            .last()
            .is_some_and(|n| *n >= 300)),
        "the counter never reached 300: {}",
        d.read("flood")
    );
    let before = *counter_rows(&d.read("flood")).last().unwrap();
    d.kill_supervisor();
    assert!(
        pid_alive(pid_of(&info)),
        "the pane died with the supervisor"
    );
    d.serve();
    let p = d.pane("flood").unwrap_or_else(|| {
        panic!(
            "pane not re-adopted: {}\nsupervisor log:\n{}",
            d.ok(&["pane", "ls", "--json"]),
            std::fs::read_to_string(d.state.join("logs/supervisor.log")).unwrap_or_default()
        )
    });
    assert_eq!(p["backend_pane_id"], info["backend_pane_id"]);
    let seeded = counter_rows(&d.read("flood"));
    let at_restart = *seeded.last().expect("re-seeded screen shows no counter");
    assert!(
        at_restart > before,
        "the pane stopped flooding at the restart"
    );
    // Output through the new pipe, past the seam, before the flood stops.
    assert!(
        wait_until(LONG, || counter_rows(&d.read("flood"))
            .last()
            .is_some_and(|n| *n >= at_restart + 100)),
        "the counter stopped after the re-adoption: {}",
        d.read("flood")
    );
    std::fs::write(&stop, "").unwrap();
    let screen = d.wait_text("flood", "END ", LONG);
    let end: u64 = screen
        .lines()
        .find_map(|l| l.trim_end().strip_prefix("END ")?.parse().ok())
        .expect("no END line");
    let all = counter_rows(&d.ok(&["pane", "read", "flood", "--scrollback", "100000"]));
    let first = *all.first().unwrap();
    assert!(
        first <= at_restart,
        "the restart's seam ({at_restart}) is not in what drover kept (from {first})"
    );
    for w in all.windows(2) {
        assert_eq!(
            w[1],
            w[0] + 1,
            "counter jumps from {} to {} (seam at {at_restart})",
            w[0],
            w[1]
        );
    }
    assert_eq!(all.last(), Some(&end));
}

/// Guards: an operator's own `pipe-pane` on drover's pane takes the output
/// away from drover: drover takes its pipe back (re-seeding the screen) and
/// keeps observing the pane.
#[test]
fn operator_pipe_pane_leads_to_a_repipe_and_output_is_still_observed() {
    need_tmux();
    let d = Drover::new();
    let _guard = TmuxGuard(socket(&d));
    let info = tmux_pane(&d, "op", &["--env", "PS1=$ "], &["sh"]);
    let id = pane_id(&info);
    d.ok(&["pane", "send", "op", "echo one-$((1+1))"]);
    d.wait_text("op", "one-2", LONG);
    let theirs = d.scratch().join("operator.log");
    let cmd = format!("cat > '{}'", theirs.display());
    assert!(tmux(&d, &["pipe-pane", "-t", &id, &cmd]).status.success());
    // drover took the pipe back: the operator's cat saw its pipe close.
    assert!(
        wait_until(LONG, || theirs.exists() && writers_of(&theirs).is_empty()),
        "the operator's pipe is still in place: {:?}",
        writers_of(&theirs)
    );
    let piped = tmux(&d, &["display-message", "-p", "-t", &id, "#{pane_pipe}"]);
    assert_eq!(String::from_utf8_lossy(&piped.stdout).trim(), "1");
    d.ok(&["pane", "send", "op", "echo after-$((1+2))"]);
    let screen = d.wait_text("op", "after-3", LONG);
    assert!(screen.contains("one-2"), "screen not re-seeded:\n{screen}");
    assert!(d.pane("op").unwrap()["transport_error"].is_null());
    let out = d.wait_state(&["op"], "idle", 20_000);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Guards: drover fighting an outside `pipe-pane` in a loop: it takes its
/// pipe back a bounded number of times, then reports the pane unreachable.
#[test]
fn pipe_replaced_over_and_over_is_not_fought_forever() {
    need_tmux();
    let d = Drover::new();
    let _guard = TmuxGuard(socket(&d));
    let info = tmux_pane(&d, "fight", &["--env", "PS1=$ "], &["sh"]);
    let id = pane_id(&info);
    let mut gave_up = false;
    for i in 0..20 {
        let theirs = d.scratch().join(format!("op{i}.log"));
        let cmd = format!("cat > '{}'", theirs.display());
        assert!(tmux(&d, &["pipe-pane", "-t", &id, &cmd]).status.success());
        // Output after the operator's pipe-pane reaches drover's screen only
        // once drover has its pipe back (the operator's `cat` may be gone
        // before it made its file: tmux closes a replaced pipe at once).
        let mark = format!("mark-{}", 1000 + i);
        // Refused (exit 5) once drover has given up on the pane.
        d.run(&["pane", "send", "fight", &format!("echo mark-$((1000+{i}))")]);
        let settled = wait_until(LONG, || {
            !d.pane("fight").unwrap()["transport_error"].is_null()
                || d.read("fight").contains(&mark)
        });
        assert!(settled, "drover neither took its pipe back nor gave up");
        let err = d.pane("fight").unwrap()["transport_error"].clone();
        if !err.is_null() {
            assert!(err.as_str().unwrap().contains("pipe"), "{err}");
            assert!(i >= 1, "gave up at once");
            gave_up = true;
            break;
        }
        assert!(
            wait_until(LONG, || writers_of(&theirs).is_empty()),
            "drover took its pipe back but the operator's is still in place: {:?}",
            writers_of(&theirs)
        );
    }
    assert!(gave_up, "drover re-piped 20 times in a row");
    d.ok(&["pane", "kill", "fight"]);
}

/// Guards: pane output reaching drover as `%output` (tmux formatting every
/// byte for the control client is what made the tmux backend slow): the
/// control client is `no-output`, and during a flood none arrives, while
/// the screen still gets every byte.
#[test]
fn no_output_lines_reach_the_control_client_during_a_flood() {
    need_tmux();
    let d = Drover::new();
    let _guard = TmuxGuard(socket(&d));
    tmux_pane(
        &d,
        "flood",
        &[],
        &["sh", "-c", "seq 1 200000; echo flood-done; exec sleep 1000"],
    );
    d.wait_text("flood", "flood-done", LONG);
    let out = tmux(&d, &["list-clients", "-F", "#{client_flags}"]);
    let flags = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        flags.contains("control-mode") && flags.contains("no-output"),
        "{flags}"
    );
    // seq's bytes and a CR per line (the terminal's onlcr), the prompt-less rest.
    let expect: u64 = (1..=200000u64)
        .map(|n| n.to_string().len() as u64 + 2)
        .sum();
    let bytes = d.pane("flood").unwrap()["bytes"].as_u64().unwrap();
    assert!(bytes >= expect, "parsed {bytes} of at least {expect} bytes");
    let log = std::fs::read_to_string(d.state.join("logs").join("supervisor.log")).unwrap();
    assert!(
        !log.contains("%output"),
        "the control client got %output:\n{log}"
    );
}

/// Guards: a killed pane leaving its pipe's reader thread, FIFO or `cat`
/// behind.
#[test]
fn killed_pane_leaves_no_pipe_reader_fifo_or_cat() {
    need_tmux();
    let d = Drover::new();
    let _guard = TmuxGuard(socket(&d));
    tmux_pane(&d, "pk", &["--env", "PS1=$ "], &["sh"]);
    d.ok(&["pane", "send", "pk", "echo hi-$((2+2))"]);
    d.wait_text("pk", "hi-4", LONG);
    let sup = d.server_pid().unwrap();
    let threads = || -> Vec<String> {
        std::fs::read_dir(format!("/proc/{sup}/task"))
            .map(|rd| {
                rd.flatten()
                    .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                    .map(|c| c.trim().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(
        threads().iter().any(|t| t == "tmux-pipe-pk"),
        "{:?}",
        threads()
    );
    let server: i32 =
        String::from_utf8_lossy(&tmux(&d, &["display-message", "-p", "#{pid}"]).stdout)
            .trim()
            .parse()
            .unwrap();
    let cats = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|p| stat(*p).is_some_and(|s| s.ppid == server))
            .filter(|p| cmdline(*p).is_some_and(|c| c.first().is_some_and(|a| a.ends_with("cat"))))
            .count()
    };
    assert_eq!(cats(), 1);
    d.ok(&["pane", "kill", "pk"]);
    let pipes = d.state.join("tmux").join("pipes");
    assert!(
        wait_until(LONG, || {
            !threads().iter().any(|t| t == "tmux-pipe-pk")
                && cats() == 0
                && std::fs::read_dir(&pipes).map_or(0, |r| r.count()) == 0
        }),
        "left behind: threads {:?}, cats {}",
        threads(),
        cats()
    );
}

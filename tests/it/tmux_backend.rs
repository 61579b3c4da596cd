//! The tmux backend's own promises (docs/tmux.md): no env value in any
//! argv, commands and env exactly as given, the operator's attach command,
//! faults contained (tmux killed, its control client killed, a pane closed
//! from tmux, a missing or old tmux, a server drover did not start), and
//! panes that outlive the supervisor and are re-adopted by the next one.
//! These run whatever `DROVER_TEST_BACKEND` says: they pin `--backend tmux`.

use crate::common;
use crate::tmux_common;
use common::*;
use std::process::Command;
use std::time::Duration;
use tmux_common::*;

/// Pids whose argv contains every one of `needles`.
fn pids_with(needles: &[&str]) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            cmdline(*pid).is_some_and(|c| needles.iter().all(|n| c.iter().any(|a| a == n)))
        })
        .collect()
}

/// The control client of this state dir's tmux server.
fn control_clients(d: &Drover) -> Vec<i32> {
    pids_with(&[&socket(d), "-C", "attach-session"])
}

fn environ(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|kv| String::from_utf8_lossy(kv).into_owned())
        .collect()
}

/// A secret given with `--env` reaches the child (its /proc environ has it)
/// and no process on the machine has it in its argv: not the CLI, not the
/// supervisor, not the tmux server or its control client.
#[test]
fn secret_env_is_in_no_process_argv() {
    need_tmux();
    let d = Drover::new();
    let secret = format!("s3cret-{}", std::process::id());
    let info = tmux_pane(
        &d,
        "sec",
        &["--env", &format!("TOKEN={secret}")],
        &["sleep", "1000"],
    );
    assert_eq!(info["env_verified"], true, "{info}");
    let pid = pid_of(&info);
    assert!(environ(pid).contains(&format!("TOKEN={secret}")));
    let mut holders = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let raw = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if raw.windows(secret.len()).any(|w| w == secret.as_bytes()) {
            holders.push(e.file_name());
        }
    }
    assert!(holders.is_empty(), "secret in argv of {holders:?}");
}

/// tmux's parser must not expand `$NAME` or `~` in the command, TMUX and
/// TMUX_PANE are not in the agent's env, and awkward env values (quotes,
/// newlines, `$`) arrive byte for byte.
#[test]
fn command_and_env_arrive_exactly() {
    need_tmux();
    let d = Drover::new();
    let value = "it's \"$HOME\" ~ a\tb";
    let script = r#"printf '[%s][%s]' "$1" "$V"; env | grep -c '^TMUX' ; sleep 1000"#;
    let info = tmux_pane(
        &d,
        "exact",
        &["--env", &format!("V={value}")],
        &["sh", "-c", script, "sh", "$HOME ~/x 'q'"],
    );
    let s = d.wait_text("exact", "]0", T);
    assert!(s.contains(r#"[$HOME ~/x 'q'][it's "$HOME" ~ a"#), "{s}");
    let env = environ(pid_of(&info));
    assert!(env.contains(&format!("V={value}")), "{env:?}");
    assert!(
        !env.iter()
            .any(|kv| kv.starts_with("TMUX=") || kv.starts_with("TMUX_PANE="))
    );
}

/// `pane ls --json` prints the operator's own way in, and it names the
/// pane's real window on drover's socket; the window's size is pinned.
#[test]
fn pane_ls_prints_the_tmux_attach_command() {
    need_tmux();
    let d = Drover::new();
    tmux_pane(&d, "op", &["--size", "100x30"], &["sleep", "1000"]);
    let p = d.pane("op").unwrap();
    assert_eq!(p["backend"], "tmux");
    let id = p["backend_pane_id"].as_str().unwrap().to_string();
    assert!(id.starts_with('%'), "{p}");
    assert_eq!(
        p["attach_command"],
        format!("tmux -L {} attach -t {id}", socket(&d))
    );
    let out = tmux(
        &d,
        &[
            "display-message",
            "-p",
            "-t",
            &id,
            "#{pane_id} #{pane_width}x#{pane_height}",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{id} 100x30")
    );
    let out = tmux(&d, &["show-options", "-w", "-v", "-t", &id, "window-size"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "manual");
}

/// `kill -9` of the control client: a transport error while it is gone,
/// then drover reconnects by itself and the pane keeps being observed.
#[test]
fn killed_control_client_reconnects_and_observation_continues() {
    need_tmux();
    let d = Drover::new();
    tmux_pane(&d, "cc", &["--env", "PS1=$ "], &["sh"]);
    d.ok(&["pane", "send", "cc", "echo one-$((1+1))"]);
    d.wait_text("cc", "one-2", T);
    let before = control_clients(&d);
    assert_eq!(before.len(), 1, "{before:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(before[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(
        wait_until(T, || {
            let now = control_clients(&d);
            now.len() == 1 && now[0] != before[0]
        }),
        "no new control client: {:?}",
        control_clients(&d)
    );
    assert!(wait_until(T, || d.pane("cc").unwrap()["transport_error"].is_null()));
    d.ok(&["pane", "send", "cc", "echo two-$((2+2))"]);
    d.wait_text("cc", "two-4", T);
    assert!(d.read("cc").contains("one-2"), "screen not re-seeded");
    let out = d.wait_state(&["cc"], "idle", 10_000);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `tmux kill-server` under drover: its panes are a transport error
/// (barriers exit 5, `pane ls` says why), no control client is left behind,
/// and a new tmux pane starts a new server.
#[test]
fn tmux_server_killed_under_drover_is_a_transport_error() {
    need_tmux();
    let d = Drover::new();
    tmux_pane(&d, "victim", &[], &["sleep", "1000"]);
    assert_eq!(tmux(&d, &["kill-server"]).status.code(), Some(0));
    assert!(wait_until(T, || {
        !d.pane("victim").unwrap()["transport_error"].is_null()
    }));
    let out = d.wait_state(&["victim"], "idle,working,exited", 5000);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(stderr(&out).contains("tmux"), "{}", stderr(&out));
    let sent = d.run(&["pane", "send", "victim", "x"]);
    assert_eq!(sent.status.code(), Some(5), "{}", stderr(&sent));
    assert!(
        wait_until(T, || control_clients(&d).is_empty()),
        "orphaned control client"
    );
    tmux_pane(&d, "fresh", &["--env", "PS1=$ "], &["sh"]);
    d.ok(&["pane", "send", "fresh", "echo back-$((3+4))"]);
    d.wait_text("fresh", "back-7", T);
    d.ok(&["pane", "kill", "victim"]);
}

/// A pane killed from tmux itself (an operator's `kill-pane`) is gone:
/// barriers on it exit 5; `pane kill` still cleans up.
#[test]
fn pane_closed_from_tmux_is_gone() {
    need_tmux();
    let d = Drover::new();
    let info = tmux_pane(&d, "closed", &[], &["sleep", "1000"]);
    let id = info["backend_pane_id"].as_str().unwrap().to_string();
    assert_eq!(tmux(&d, &["kill-pane", "-t", &id]).status.code(), Some(0));
    assert!(wait_until(T, || {
        !d.pane("closed").unwrap()["transport_error"].is_null()
    }));
    let out = d.wait_state(&["closed"], "exited", 5000);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(wait_until(T, || !pid_alive(pid_of(&info))));
    d.ok(&["pane", "kill", "closed"]);
    assert!(d.pane("closed").is_none());
}

fn fake_tmux(d: &Drover, version: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = d.scratch().join("fake-tmux");
    std::fs::write(&p, format!("#!/bin/sh\necho '{version}'\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// A tmux that is missing or older than 3.2: a clear error naming the
/// version; no pane is created and the supervisor keeps answering.
#[test]
fn missing_or_old_tmux_is_a_clear_error() {
    let d = Drover::new();
    let fake = fake_tmux(&d, "tmux 3.1c");
    let out = d
        .cmd()
        .env("DROVER_TMUX", &fake)
        .args([
            "pane",
            "new",
            "old",
            "--backend",
            "tmux",
            "--",
            "sleep",
            "10",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("tmux 3.1c is too old"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("3.2"), "{}", stderr(&out));
    // No pane, and the supervisor the command started for it is gone too.
    assert_eq!(d.run(&["status"]).status.code(), Some(5));
    let out = d
        .cmd()
        .env("DROVER_TMUX", d.scratch().join("no-such-tmux"))
        .args([
            "pane",
            "new",
            "none",
            "--backend",
            "tmux",
            "--",
            "sleep",
            "10",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("no-such-tmux"), "{}", stderr(&out));
}

/// A tmux server on drover's socket that drover did not start is refused,
/// never touched: it is still running afterwards.
#[test]
fn never_touches_a_tmux_server_it_did_not_start() {
    need_tmux();
    let d = Drover::new();
    let sock = socket(&d);
    let started = Command::new("tmux")
        .args([
            "-L",
            &sock,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "theirs",
            "sleep 1000",
        ])
        .status()
        .unwrap();
    assert!(started.success());
    let out = d.run(&["pane", "new", "x", "--backend", "tmux", "--", "sleep", "10"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("did not start"), "{}", stderr(&out));
    d.ok(&["kill-server"]);
    let alive = tmux(&d, &["has-session", "-t", "theirs"]);
    let _ = tmux(&d, &["kill-server"]);
    assert!(
        alive.status.success(),
        "drover touched a server it did not start"
    );
}

/// The supervisor dies (`kill -9`); its tmux pane keeps running; the next
/// supervisor re-adopts it (same pid, generation, backend id), re-seeds the
/// screen, and keeps observing it: input, output and barriers work, and the
/// old control client did not outlive its supervisor.
#[test]
fn tmux_pane_outlives_the_supervisor_and_is_readopted() {
    need_tmux();
    let d = Drover::new();
    let _guard = TmuxGuard(socket(&d));
    let info = tmux_pane(&d, "keep", &["--env", "PS1=$ "], &["sh"]);
    d.ok(&["pane", "send", "keep", "echo before-$((1+1))"]);
    d.wait_text("keep", "before-2", T);
    let old_clients = control_clients(&d);
    d.kill_supervisor();
    assert!(
        pid_alive(pid_of(&info)),
        "the tmux pane died with the supervisor"
    );
    assert!(
        wait_until(T, || old_clients.iter().all(|p| !pid_alive(*p))),
        "the dead supervisor's control client is still running"
    );
    // A new supervisor re-adopts the pane.
    d.ok(&["serve", "--daemon"]);
    let p = d.pane("keep").expect("pane not re-adopted");
    assert_eq!(p["pid"], info["pid"]);
    assert_eq!(p["generation"], 1);
    assert_eq!(p["backend"], "tmux");
    assert_eq!(p["backend_pane_id"], info["backend_pane_id"]);
    assert!(
        p["lost"].is_null(),
        "a re-adopted pane is listed as lost: {p}"
    );
    assert!(d.read("keep").contains("before-2"), "screen not re-seeded");
    // Its record is its own, not a lost pane's: still there, never ended.
    assert!(d.state.join("panes").join("keep.json").exists());
    assert!(
        pid_alive(pid_of(&info)),
        "re-adoption ended the pane's process"
    );
    d.ok(&["pane", "send", "keep", "echo after-$((2+3))"]);
    d.wait_text("keep", "after-5", T);
    let out = d.wait_state(&["keep"], "idle", 10_000);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    d.ok(&["pane", "send", "keep", "exit 6"]);
    let out = d.wait_state(&["keep"], "exited", 10_000);
    assert!(stdout(&out).contains("\"exit_code\":6"), "{}", stdout(&out));
}

/// Guards: a tmux pane whose server died with its supervisor is not
/// re-adopted but listed as lost, and what still runs of it is ended.
#[test]
fn tmux_pane_whose_server_is_gone_is_lost_and_ended() {
    need_tmux();
    let d = Drover::new();
    let _guard = TmuxGuard(socket(&d));
    let info = tmux_pane(
        &d,
        "orphan",
        &[],
        &["sh", "-c", "trap '' HUP; echo up; exec sleep 1000"],
    );
    d.wait_text("orphan", "up", T);
    d.kill_supervisor();
    let _ = tmux(&d, &["kill-server"]);
    assert!(wait_until(T, || pids_with(&[&socket(&d)]).is_empty()));
    let pid = pid_of(&info);
    assert!(
        pid_alive(pid),
        "the pane's HUP-proof process died with tmux"
    );
    d.ok(&["serve", "--daemon"]);
    let p = d.pane("orphan").expect("the lost tmux pane is not listed");
    assert_eq!(p["observation"]["state"], "lost", "{p}");
    assert_eq!(p["backend"], "tmux", "{p}");
    assert!(
        wait_until(T, || !pid_alive(pid)
            || stat(pid).is_some_and(|s| s.state == 'Z')),
        "the lost tmux pane's process still runs"
    );
    assert!(wait_until(T, || !d
        .state
        .join("panes")
        .join("orphan.json")
        .exists()));
    d.ok(&["pane", "kill", "orphan"]);
    assert!(d.pane("orphan").is_none());
}

/// Guards: `pane kill` of a tmux pane also ends the processes of its tree
/// that left its session and process group (setsid).
#[test]
fn tmux_pane_kill_ends_a_setsid_escapee() {
    need_tmux();
    let d = Drover::new();
    let _guard = TmuxGuard(socket(&d));
    let tag = (300_000 + std::process::id() % 50_000).to_string();
    let script = format!("setsid sleep {tag} & echo started; wait");
    tmux_pane(&d, "esc", &[], &["bash", "-c", &script]);
    d.wait_text("esc", "started", T);
    let mut escapee = Vec::new();
    assert!(wait_until(T, || {
        escapee = pids_with(&["sleep", &tag]);
        !escapee.is_empty()
    }));
    d.ok(&["pane", "kill", "esc"]);
    assert!(
        wait_until(T, || {
            escapee
                .iter()
                .all(|p| !pid_alive(*p) || stat(*p).is_some_and(|s| s.state == 'Z'))
        }),
        "the setsid process of a killed tmux pane still runs: {escapee:?}"
    );
}

/// `kill-server` ends tmux panes and drover's tmux server: nothing left.
#[test]
fn kill_server_leaves_no_tmux_process() {
    need_tmux();
    let d = Drover::new();
    let info = tmux_pane(&d, "bye", &[], &["sleep", "1000"]);
    d.ok(&["kill-server"]);
    assert!(wait_until(T, || !pid_alive(pid_of(&info))));
    assert!(
        wait_until(T, || pids_with(&[&socket(&d)]).is_empty()),
        "{:?}",
        pids_with(&[&socket(&d)])
    );
    let _ = Duration::ZERO;
}

/// Guards: a re-adopted pane's screen was re-seeded as a fresh terminal,
/// losing what the app had set: its title (one of Claude's state signals),
/// cursor-key mode (keys were sent in the wrong encoding), bracketed paste
/// (a prompt was typed, and the real Claude dropped the Enter after a long
/// one) and the alternate screen (leaving it left the app's frame on
/// screen). All come back, and the app leaving the alternate screen shows
/// its primary screen again.
#[test]
fn readopted_pane_keeps_the_apps_title_cursor_keys_paste_and_alternate_screen() {
    need_tmux();
    let d = Drover::new();
    let _guard = TmuxGuard(socket(&d));
    let app = "printf 'primary text\\n'; \
        printf '\\033[?1049h\\033[?1h\\033[?2004h\\033]0;app-title\\007alt frame\\n'; \
        read x; printf '\\033[?1049l'; printf '[%s]\\n' \"$x\" | cat -v; exec sleep 60";
    tmux_pane(&d, "app", &[], &["sh", "-c", app]);
    d.wait_text("app", "alt frame", T);
    d.kill_supervisor();
    d.ok(&["serve", "--daemon"]);
    assert!(d.pane("app").is_some(), "pane not re-adopted");
    let v: serde_json::Value =
        serde_json::from_str(&d.ok(&["pane", "read", "app", "--json"])).unwrap();
    assert_eq!(v["title"], "app-title", "{v}");
    let text = v["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("alt frame") && !text.contains("primary text"),
        "{text}"
    );
    d.ok(&["pane", "keys", "app", "Up"]);
    d.ok(&["pane", "send", "app", "p"]);
    let screen = d.wait_text("app", "[^[", T);
    assert!(
        screen.contains("[^[OA^[[200~p^[[201~]"),
        "cursor keys or paste in the wrong mode: {screen}"
    );
    assert!(screen.contains("primary text"), "{screen}");
    assert!(!screen.contains("alt frame"), "{screen}");
}

/// Guards: a tmux pane resized before a supervisor restart was re-adopted
/// with a screen of the size it was created at, so the app's frame was
/// read at the wrong width and height (the classifier reads the bottom rows).
#[test]
fn readopted_pane_keeps_the_size_it_was_resized_to() {
    need_tmux();
    let d = Drover::new();
    let _guard = TmuxGuard(socket(&d));
    tmux_pane(&d, "rs", &["--env", "PS1=$ "], &["sh"]);
    d.ok(&["pane", "resize", "rs", "90x30"]);
    d.kill_supervisor();
    d.ok(&["serve", "--daemon"]);
    let v: serde_json::Value =
        serde_json::from_str(&d.ok(&["pane", "read", "rs", "--json"])).unwrap();
    assert_eq!(
        (v["cols"].as_u64(), v["rows"].as_u64()),
        (Some(90), Some(30))
    );
    d.ok(&["pane", "send", "rs", "stty size"]);
    d.wait_text("rs", "30 90", T);
}

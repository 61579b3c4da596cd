//! The herdr backend beyond one pane per workspace (docs/herdr.md), on the
//! real herdr where one is installed (else the fake): `pane split` with env at creation, re-adoption by a new
//! supervisor after `kill -9`, resize refused, the title and herdr's paste
//! semantics, and the last output of a pane that exits at once.

use crate::common;
use crate::herdr_common;
use common::*;
use herdr_common::*;
use serde_json::Value;

fn workspace_of(p: &Value) -> String {
    p["backend_pane_id"]
        .as_str()
        .unwrap_or_default()
        .split(':')
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn herdr_split_puts_a_second_pane_in_the_workspace_with_its_env() {
    let fx = herdr();
    let d = drover(&fx);
    let a = herdr_pane(&d, "left", &[], &["sleep", "600"]);
    let secret = format!("split-secret-{}", std::process::id());
    let env = format!("DROVER_T_SPLIT={secret}");
    let b = herdr_pane(
        &d,
        "right",
        &[
            "--split",
            "left",
            "--split-direction",
            "down",
            "--env",
            &env,
        ],
        &["sh", "-c", "echo split-ready; exec sleep 600"],
    );
    assert_eq!(b["env_verified"], true, "{b}");
    assert_eq!(
        workspace_of(&a),
        workspace_of(&b),
        "same workspace: {a} {b}"
    );
    assert_ne!(a["backend_pane_id"], b["backend_pane_id"]);
    d.wait_text("right", "split-ready", LONG);
    let pid = pid_of(&d.pane("right").unwrap());
    assert!(environ(pid).contains(&env), "env at creation");
    assert!(argv_holding(&secret).is_empty(), "no argv holds the value");
    if let Some(log) = fx.log() {
        let text = serde_json::to_string(&log).unwrap();
        assert!(!text.contains(&secret), "nor any herdr call");
        assert!(log.iter().any(|e| e["method"] == "pane.split"));
    }
    // A respawn stays beside the pane it was split from, env set again.
    d.ok(&["pane", "respawn", "right"]);
    let b2 = d.pane("right").unwrap();
    assert_eq!(b2["generation"], 2, "{b2}");
    assert_eq!(workspace_of(&b2), workspace_of(&a), "{b2}");
    assert!(environ(pid_of(&b2)).contains(&env));
    // Killing one pane of the workspace leaves the other running.
    let left_pid = pid_of(&d.pane("left").unwrap());
    d.ok(&["pane", "kill", "right"]);
    assert!(
        pid_alive(left_pid),
        "the other pane of the workspace runs on"
    );
    d.ok(&["pane", "keys", "left", "Enter"]);
}

#[test]
fn herdr_split_refuses_a_pane_that_is_not_on_herdr() {
    let fx = herdr();
    let d = drover(&fx);
    d.new_pane("nat", &["--backend", "native"], &["sleep", "600"]);
    let out = d.run(&[
        "pane",
        "new",
        "x",
        "--backend",
        "herdr",
        "--split",
        "nat",
        "--",
        "true",
    ]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("not herdr"), "{}", stderr(&out));
    let out = d.run(&[
        "pane",
        "new",
        "y",
        "--backend",
        "herdr",
        "--split",
        "nosuch",
        "--",
        "true",
    ]);
    assert_ne!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("no such pane"), "{}", stderr(&out));
    let out = d.run(&[
        "pane",
        "new",
        "z",
        "--backend",
        "native",
        "--split",
        "nat",
        "--",
        "true",
    ]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(d.pane("x").is_none() && d.pane("y").is_none() && d.pane("z").is_none());
}

#[test]
fn herdr_pane_is_readopted_by_a_new_supervisor_and_still_observed() {
    let fx = herdr();
    let d = drover(&fx);
    herdr_pane(
        &d,
        "keep",
        &["--agent", "sim", "--env", "DROVER_T_KEEP=1"],
        &[BIN, "sim-agent", "--profile", "claude"],
    );
    assert_eq!(code(&d.wait_state(&["keep"], "idle", 60_000)), 0);
    d.ok(&["pane", "respawn", "keep"]);
    assert_eq!(code(&d.wait_state(&["keep"], "idle", 60_000)), 0);
    let before = d.pane("keep").unwrap();
    let pid = pid_of(&before);
    assert_eq!(before["generation"], 2);
    d.kill_supervisor();
    assert!(pid_alive(pid), "the herdr pane outlives the supervisor");
    herdr_common::serve(&d, &fx);
    let p = d.pane("keep").expect("listed by the next supervisor");
    assert_eq!(p["backend"], "herdr", "{p}");
    assert_eq!(p["generation"], 2, "{p}");
    assert_eq!(pid_of(&p), pid, "the same process");
    assert_ne!(p["observation"]["state"], "lost", "{p}");
    // Observations continue: a barrier sees a later state change.
    assert_eq!(code(&d.wait_state(&["keep"], "idle", 60_000)), 0);
    d.ok(&["pane", "send", "keep", "after the restart"]);
    let out = d.wait_state(&["keep"], "done", 60_000);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(d.read("keep").contains("after the restart"));
    // A respawn of the re-adopted pane sets its env again.
    d.ok(&["pane", "respawn", "keep"]);
    let p = d.pane("keep").unwrap();
    assert_eq!(p["generation"], 3, "{p}");
    assert!(environ(pid_of(&p)).contains(&"DROVER_T_KEEP=1".to_string()));
    d.ok(&["pane", "kill", "keep"]);
    assert!(wait_until(LONG, || !pid_alive(pid)));
}

#[test]
fn herdr_pane_that_ended_without_a_supervisor_is_lost_not_readopted() {
    let fx = herdr();
    let d = drover(&fx);
    herdr_pane(&d, "gone", &[], &["sleep", "600"]);
    let pid = pid_of(&d.pane("gone").unwrap());
    d.kill_supervisor();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(wait_until(LONG, || !pid_alive(pid)));
    herdr_common::serve(&d, &fx);
    let p = d.pane("gone").expect("listed as lost");
    assert_eq!(p["observation"]["state"], "lost", "{p}");
    assert!(!d.state.join("herdr/panes/gone.json").exists());
}

#[test]
fn herdr_resize_is_refused_with_exit_3() {
    let fx = herdr();
    let d = drover(&fx);
    herdr_pane(&d, "rs", &[], &["sleep", "600"]);
    let out = d.run(&["pane", "resize", "rs", "100x30"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("herdr refuses resize"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn herdr_title_reaches_drovers_screen() {
    let fx = herdr();
    let d = drover(&fx);
    herdr_pane(
        &d,
        "ti",
        &[],
        &[
            "sh",
            "-c",
            "printf '\\033]2;my-agent-title\\007'; echo titled; exec sleep 600",
        ],
    );
    d.wait_text("ti", "titled", LONG);
    assert!(
        wait_until(LONG, || {
            let r: Value =
                serde_json::from_str(&d.ok(&["pane", "read", "ti", "--json"])).unwrap_or_default();
            r["title"] == "my-agent-title"
        }),
        "the title herdr shows is the pane's title"
    );
}

/// Guards: `drover send` on herdr pasted without brackets to an app that
/// had enabled bracketed paste (herdr's `pane.send_text` writes raw bytes;
/// `pane.send_input` brackets by the app's mode).
#[test]
fn herdr_send_is_bracketed_when_the_app_enabled_bracketed_paste() {
    let fx = herdr();
    let d = drover(&fx);
    herdr_pane(
        &d,
        "bp",
        &[],
        &[
            "sh",
            "-c",
            "stty raw -echo; printf '\\033[?2004h'; echo on-now; head -c 15 | od -An -c; sleep 600",
        ],
    );
    d.wait_text("bp", "on-now", LONG);
    d.ok(&["pane", "send", "bp", "hi"]);
    d.wait_text(
        "bp",
        "033   [   2   0   0   ~   h   i 033   [   2   0   1   ~  \\r",
        LONG,
    );
    // Keys are keys, not pastes, with the mode on too.
    herdr_pane(
        &d,
        "bpk",
        &[],
        &[
            "sh",
            "-c",
            "stty raw -echo; printf '\\033[?2004h'; echo keys-now; head -c 3 | od -An -c; sleep 600",
        ],
    );
    d.wait_text("bpk", "keys-now", LONG);
    d.ok(&["pane", "keys", "bpk", "y", "+", "Enter"]);
    d.wait_text("bpk", "y   +  \\r", LONG);
    // Without the mode, the text arrives as typed.
    herdr_pane(
        &d,
        "plain",
        &[],
        &[
            "sh",
            "-c",
            "stty raw -echo; echo off-now; head -c 3 | od -An -c; sleep 600",
        ],
    );
    d.wait_text("plain", "off-now", LONG);
    d.ok(&["pane", "send", "plain", "hi"]);
    d.wait_text("plain", "h   i  \\r", LONG);
}

/// Guards: the last line a command printed just before it exited was lost
/// (herdr closes a pane as soon as its process ends, between two reads).
#[test]
fn herdr_line_printed_right_before_exit_is_in_the_final_screen() {
    let fx = herdr();
    let d = drover(&fx);
    for i in 0..3 {
        let name = format!("last{i}");
        herdr_pane(
            &d,
            &name,
            &[],
            &["sh", "-c", "sleep 0.5; echo the-very-last-line; exit 4"],
        );
        let exit = exit_of(&d, &name);
        assert_eq!(exit["code"], 4, "{exit}");
        let screen = d.read(&name);
        assert!(screen.contains("the-very-last-line"), "{name}: {screen}");
    }
    // The wrapper let herdr close the pane once drover had read it.
    assert!(wait_until(LONG, || {
        let out = fx.cli(&["pane", "list"]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v["result"]["panes"].as_array().is_some_and(Vec::is_empty)
    }));
}

/// Guards: `drover send` on herdr wrote its Enter by `pane.send_text`,
/// which herdr pastes (bracketed) into an app with bracketed paste on, so
/// the agent never saw Enter and the prompt was not submitted.
#[test]
fn herdr_drover_send_submits_to_an_agent_with_bracketed_paste() {
    let fx = herdr();
    let d = drover(&fx);
    herdr_pane(
        &d,
        "ds",
        &["--agent", "sim"],
        &[BIN, "sim-agent", "--profile", "claude"],
    );
    assert_eq!(code(&d.wait_state(&["ds"], "idle", 60_000)), 0);
    let out = d.run(&["send", "ds", "deliver this prompt"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(code(&d.wait_state(&["ds"], "done", 60_000)), 0);
    assert!(d.read("ds").contains("deliver this prompt"));
    if let Some(log) = fx.log() {
        assert!(
            log.iter().any(|e| e["method"] == "pane.send_keys"),
            "Enter went as a key"
        );
    }
}

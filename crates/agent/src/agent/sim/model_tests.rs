//! Tests of the sim agent's state machine.

use super::*;

fn script(t: &str) -> Script {
    Script::parse(t, "t").unwrap()
}

fn submit(m: &mut Model, text: &str, now: Instant) {
    m.key(Key::Paste(text.into()), now);
    m.key(Key::Enter, now);
}

#[test]
fn work_permission_write_report_finish() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(
        r#"
[[turn]]
steps = [ { work = 100 }, { ask = "touch x" }, { write = { path = "x.txt", content = "a\nb\n" } },
      { report = { path = "r.json", fields = { extra = 1 } } }, "finish" ]
"#,
    );
    let t0 = Instant::now();
    let mut m = Model::new(Profile::Codex, s, dir.path().to_path_buf(), t0);
    submit(&mut m, "do it attempt=A7 nonce=N1", t0);
    assert!(matches!(m.mode, Mode::Working { .. }));
    assert_eq!(m.osc, Osc::Working);
    assert!(
        m.transcript
            .iter()
            .any(|l| l == "› do it attempt=A7 nonce=N1")
    );
    assert!(!m.tick(t0 + Duration::from_millis(50)));
    assert!(m.tick(t0 + Duration::from_millis(100)));
    assert_eq!(
        m.mode,
        Mode::Permission {
            cmd: "touch x".into()
        }
    );
    assert_eq!(m.osc, Osc::BlockedPermission);
    assert!(!m.key(Key::Char('x'), t0));
    m.key(Key::Char('y'), t0 + Duration::from_millis(200));
    assert_eq!(m.mode, Mode::Idle);
    assert_eq!(m.osc, Osc::Done);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("x.txt")).unwrap(),
        "a\nb\n"
    );
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["attempt_id"], "A7");
    assert_eq!(r["nonce"], "N1");
    assert_eq!(r["state"], "finalized");
    assert_eq!(r["extra"], 1);
    assert_eq!(r["side_effects"][0]["path"], "x.txt");
    assert!(m.transcript.last().unwrap().starts_with("  Worked for "));
    m.key(Key::Char('h'), t0);
    assert_eq!(m.osc, Osc::Idle, "typing after done sends idle");
}

#[test]
fn deny_and_interrupt_end_without_done() {
    let s = script(
        "[[turn]]\nsteps = [ { ask = \"rm -rf /\" }, \"finish\" ]\n[[turn]]\nsteps = [ { work = 10000 } ]\n",
    );
    let t0 = Instant::now();
    let mut m = Model::new(Profile::Claude, s, PathBuf::from("."), t0);
    submit(&mut m, "first", t0);
    assert!(matches!(m.mode, Mode::Permission { .. }));
    m.key(Key::Esc, t0);
    assert_eq!(m.mode, Mode::Idle);
    assert!(m.transcript.last().unwrap().contains("Interrupted"));
    assert!(!m.transcript.iter().any(|l| l.starts_with("✻ Worked")));
    submit(&mut m, "second", t0);
    assert!(matches!(m.mode, Mode::Working { .. }));
    m.key(Key::Esc, t0);
    assert_eq!(m.mode, Mode::Idle);
    assert_eq!(m.osc, Osc::Idle);
}

#[test]
fn codex_osc_blocked_can_lead_the_dialog() {
    let s =
        script("osc_blocked_lead_ms = 800\n[[turn]]\nsteps = [ { ask = \"ls\" }, \"finish\" ]\n");
    let t0 = Instant::now();
    let mut m = Model::new(Profile::Codex, s, PathBuf::from("."), t0);
    submit(&mut m, "go", t0);
    assert!(
        matches!(m.mode, Mode::Working { .. }),
        "screen still working"
    );
    assert_eq!(m.osc, Osc::BlockedPermission, "OSC already blocked");
    assert!(m.tick(t0 + Duration::from_millis(800)));
    assert_eq!(m.mode, Mode::Permission { cmd: "ls".into() });
    m.key(Key::Char('y'), t0);
    assert_eq!(m.osc, Osc::Done);
}

#[test]
fn exit_step_and_ctrl_d() {
    let s = script("[[turn]]\nsteps = [ { exit = 300 } ]\n");
    let t0 = Instant::now();
    let mut m = Model::new(Profile::Claude, s, PathBuf::from("."), t0);
    submit(&mut m, "bye", t0);
    assert_eq!(m.exit, Some(255));
    let mut m = Model::new(Profile::Claude, Script::default(), PathBuf::from("."), t0);
    assert!(!m.key(Key::Enter, t0), "an empty prompt is not submitted");
    m.key(Key::CtrlD, t0);
    assert_eq!(m.exit, Some(0));
}

#[test]
fn shown_state_follows_a_turn() {
    let s = script(
        "startup_ms = 10\n[[turn]]\nsteps = [ { work = 5 }, { ask = \"ls\" }, \"finish\" ]\n",
    );
    let t0 = Instant::now();
    let mut m = Model::new(Profile::Claude, s, PathBuf::from("."), t0);
    assert_eq!(m.shown_state(), "starting");
    m.tick(t0 + Duration::from_millis(10));
    assert_eq!(m.shown_state(), "idle");
    submit(&mut m, "go", t0);
    assert_eq!(m.shown_state(), "working");
    m.tick(t0 + Duration::from_millis(20));
    assert_eq!(m.shown_state(), "blocked");
    m.key(Key::Enter, t0);
    assert_eq!(m.shown_state(), "done");
    m.key(Key::Char('x'), t0);
    assert_eq!(m.shown_state(), "idle", "typing after done");
}

#[test]
fn starting_ignores_keys_until_ready() {
    let s = script("startup_ms = 100\n");
    let t0 = Instant::now();
    let mut m = Model::new(Profile::Codex, s, PathBuf::from("."), t0);
    assert!(!m.key(Key::Char('a'), t0));
    assert_eq!(m.deadline(), Some(t0 + Duration::from_millis(100)));
    assert!(m.tick(t0 + Duration::from_millis(100)));
    assert_eq!(m.mode, Mode::Idle);
}

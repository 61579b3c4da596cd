//! The herdr backend on the real herdr 0.8.2 only: what broke when drover
//! first ran on it, and what only a real server shows (its own process
//! rules, `herdr server stop`). Ignored by plain `cargo test` (they need
//! herdr: `scripts/install-herdr.sh`, or `DROVER_HERDR` / `herdr` on PATH);
//! run them with `cargo test --test it herdr_real:: -- --ignored`.

use crate::common;
use crate::herdr_common;
use common::*;
use herdr_common::*;
use serde_json::Value;
use std::time::{Duration, Instant};

fn read_json(d: &Drover, name: &str) -> Value {
    serde_json::from_str(&d.ok(&["pane", "read", name, "--json"])).unwrap_or_default()
}

/// Guards: `pane new` failed 2–4 times in 12 on the real herdr ("the shell
/// … ended or did not start the command"): an empty `/proc/PID/cmdline`,
/// read while the shell exec'd the wrapper, was taken for "ended".
#[test]
#[ignore = "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH"]
fn herdr_real_twelve_creations_in_a_row_succeed_five_times() {
    let fx = Real::require();
    let d = drover(&fx);
    for round in 0..5 {
        for i in 0..12 {
            let name = format!("c{round}-{i}");
            let out = d.run(&[
                "pane",
                "new",
                &name,
                "--backend",
                "herdr",
                "--",
                "sh",
                "-c",
                "exec sleep 600",
            ]);
            assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        }
        for i in 0..12 {
            d.ok(&["pane", "kill", &format!("c{round}-{i}")]);
        }
    }
}

/// Guards: a bash pane on herdr was `fg:job` forever (bash takes a process
/// group of its own under the wrapper), so `wait --until idle` never held.
#[test]
#[ignore = "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH"]
fn herdr_real_bash_pane_is_idle_at_its_prompt_and_working_while_sleep_runs() {
    let fx = Real::require();
    let d = drover(&fx);
    herdr_pane(&d, "b", &[], &["bash", "--norc", "--noprofile"]);
    let out = d.wait_state(&["b"], "idle", 30_000);
    assert_eq!(code(&out), 0, "idle at its prompt: {}", stderr(&out));
    let sent = Instant::now();
    d.ok(&["pane", "send", "b", "sleep 3"]);
    let out = d.wait_state(&["b"], "working", 30_000);
    assert_eq!(code(&out), 0, "working while sleep runs: {}", stderr(&out));
    let held = wait_until(Duration::from_secs(2), || {
        d.pane("b").is_some_and(|p| {
            p["observation"]["evidence"]
                .as_array()
                .is_some_and(|e| e.iter().any(|x| x == "fg:job"))
        })
    });
    assert!(held, "the job holds the terminal: {:?}", d.pane("b"));
    let out = d.run(&[
        "wait",
        "b",
        "--fresh",
        "--until",
        "idle",
        "--timeout-ms",
        "30000",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        sent.elapsed() >= Duration::from_millis(2900),
        "idle only once sleep 3 ended: {:?}",
        sent.elapsed()
    );
}

/// Guards: `pane send` to an app with bracketed paste on arrived raw
/// (herdr's `pane.send_text` never brackets; `pane.send_input` does).
#[test]
#[ignore = "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH"]
fn herdr_real_pasted_line_arrives_bracketed() {
    let fx = Real::require();
    let d = drover(&fx);
    herdr_pane(
        &d,
        "bp",
        &[],
        &[
            "sh",
            "-c",
            "stty raw -echo; printf '\\033[?2004h'; echo on-now; head -c 16 | od -An -c; sleep 600",
        ],
    );
    d.wait_text("bp", "on-now", LONG);
    // 16 bytes: one line of od.
    d.ok(&["pane", "send", "bp", "abc"]);
    d.wait_text(
        "bp",
        "033   [   2   0   0   ~   a   b   c 033   [   2   0   1   ~  \\r",
        LONG,
    );
}

/// Guards: a title set after the first read never reached drover (it asked
/// for the title only when `pane.read`'s revision moved: always 0).
#[test]
#[ignore = "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH"]
fn herdr_real_title_set_3s_after_start_is_in_pane_read_json() {
    let fx = Real::require();
    let d = drover(&fx);
    herdr_pane(
        &d,
        "late",
        &[],
        &[
            "sh",
            "-c",
            "echo started; sleep 3; printf '\\033]2;late-title\\007'; exec sleep 600",
        ],
    );
    d.wait_text("late", "started", LONG);
    assert_ne!(read_json(&d, "late")["title"], "late-title");
    assert!(
        wait_until(LONG, || read_json(&d, "late")["title"] == "late-title"),
        "{}",
        read_json(&d, "late")
    );
}

#[test]
#[ignore = "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH"]
fn herdr_real_env_reaches_the_process_and_no_argv() {
    let fx = Real::require();
    let d = drover(&fx);
    let secret = format!("real-secret-{}", std::process::id());
    let env = format!("DROVER_T_REAL={secret}");
    let p = herdr_pane(&d, "env", &["--env", &env], &["sh", "-c", "exec sleep 600"]);
    assert_eq!(p["env_verified"], true, "{p}");
    assert!(environ(pid_of(&p)).contains(&env));
    assert!(argv_holding(&secret).is_empty(), "no argv holds the value");
    let log = std::fs::read_to_string(d.state.join("logs/supervisor.log")).unwrap_or_default();
    assert!(!log.contains(&secret));
}

#[test]
#[ignore = "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH"]
fn herdr_real_supervisor_kill_9_readopts_with_the_same_pid() {
    let fx = Real::require();
    let d = drover(&fx);
    let p = herdr_pane(&d, "keep", &[], &["sh", "-c", "echo kept; exec sleep 600"]);
    let pid = pid_of(&p);
    d.wait_text("keep", "kept", LONG);
    d.kill_supervisor();
    assert!(pid_alive(pid), "the herdr pane outlives the supervisor");
    serve(&d, &fx);
    let p = d.pane("keep").expect("listed by the next supervisor");
    assert_eq!(pid_of(&p), pid, "{p}");
    assert_ne!(p["observation"]["state"], "lost", "{p}");
    d.wait_text("keep", "kept", LONG);
    d.ok(&["pane", "kill", "keep"]);
    assert!(wait_until(LONG, || !pid_alive(pid)));
}

/// `herdr server stop` ends its panes with SIGHUP: drover records herdr
/// going away (a transport error), not just the command's hangup.
#[test]
#[ignore = "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH"]
fn herdr_real_server_stop_is_the_transport_going_away() {
    let mut fx = Real::require();
    let d = drover(&fx);
    quiet_pane_stopped_is_herdr_going_away(&d, || fx.stop());
    d.ok(&["pane", "kill", "st"]);
}

/// herdr starts a pane whose cwd does not exist in $HOME: drover refuses.
#[test]
#[ignore = "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH"]
fn herdr_real_nonexistent_cwd_is_refused() {
    let fx = Real::require();
    let d = drover(&fx);
    let out = d.run(&[
        "pane",
        "new",
        "nc",
        "--backend",
        "herdr",
        "--cwd",
        "/nonexistent/drover-cwd",
        "--",
        "true",
    ]);
    assert_ne!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("/nonexistent/drover-cwd"),
        "{}",
        stderr(&out)
    );
    assert!(d.pane("nc").is_none());
}

#[test]
#[ignore = "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH"]
fn herdr_real_function_keys_reach_the_app() {
    let fx = Real::require();
    let d = drover(&fx);
    herdr_pane(
        &d,
        "fk",
        &[],
        &[
            "sh",
            "-c",
            "stty raw -echo; echo raw-now; head -c 3 | od -An -c; sleep 600",
        ],
    );
    d.wait_text("fk", "raw-now", LONG);
    d.ok(&["pane", "keys", "fk", "F1"]);
    d.wait_text("fk", "033   O   P", LONG);
}

/// Guards: the screen model had the spec's size (120x40) while herdr gave
/// the pane's terminal its layout's (93x39 for a headless server's first
/// pane, 94x39 later), so an agent's text wrapped at 93 was read as rows of a 120-column screen and detection
/// joined none of them (Codex's limit sentence read idle).
#[test]
#[ignore = "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH"]
fn herdr_real_screen_model_has_the_panes_own_size() {
    let fx = Real::require();
    let d = drover(&fx);
    herdr_pane(
        &d,
        "sz",
        &[],
        &["sh", "-c", "echo size: $(stty size); exec sleep 600"],
    );
    d.wait_text("sz", "size: ", LONG);
    let text = read_json(&d, "sz")["text"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let line = text.lines().find(|l| l.starts_with("size: ")).unwrap_or("");
    let mut words = line.split_whitespace().skip(1);
    let rows: u64 = words.next().and_then(|w| w.parse().ok()).expect(line);
    let cols: u64 = words.next().and_then(|w| w.parse().ok()).expect(line);
    let v = read_json(&d, "sz");
    assert_eq!(
        (v["cols"].as_u64(), v["rows"].as_u64()),
        (Some(cols), Some(rows)),
        "{v}"
    );
    d.ok(&["pane", "kill", "sz"]);
}

/// Guards: the pane's shell looked the command up on the herdr server's
/// `PATH`: a program the supervisor found on its own `PATH` (validated
/// there) did not run in the herdr pane.
#[test]
#[ignore = "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH"]
fn herdr_real_the_command_found_on_the_supervisors_path_runs() {
    let fx = Real::require();
    let d = Drover::new();
    let bin = tempfile::tempdir().unwrap();
    let prog = bin.path().join("drover-only-here");
    std::fs::write(
        &prog,
        "#!/bin/sh\necho ran-from-the-supervisors-path\nexec sleep 600\n",
    )
    .unwrap();
    std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // Only the supervisor (and this CLI) have the directory on PATH, not
    // the herdr server.
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    serve_with(&d, &fx, &[("PATH", &path)]);
    let out = d
        .cmd()
        .env("PATH", &path)
        .args([
            "pane",
            "new",
            "onpath",
            "--backend",
            "herdr",
            "--",
            "drover-only-here",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    d.wait_text("onpath", "ran-from-the-supervisors-path", LONG);
    d.ok(&["pane", "kill", "onpath"]);
}

/// Guards the install: a binary whose sha256 is not the pinned one, or a
/// `.sha256` beside it that disagrees with the pin, is not installed.
#[test]
fn install_herdr_refuses_a_binary_that_is_not_the_pinned_one() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let gz = src.join("herdr-0.8.2-x86_64-linux-gnu.gz");
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf '#!/bin/sh\\necho herdr 0.8.2\\n' | gzip > '{}'",
            gz.display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/install-herdr.sh");
    let install = || {
        std::process::Command::new(script)
            .arg(&src)
            .env("DROVER_HERDR_DIR", tmp.path().join("cache"))
            .output()
            .unwrap()
    };
    let out = install();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not installed"));
    std::fs::write(
        src.join("herdr-0.8.2-x86_64-linux-gnu.sha256"),
        format!("{}  x\n", "0".repeat(64)),
    )
    .unwrap();
    let out = install();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not the pinned"));
    assert!(
        !tmp.path().join("cache/0.8.2/herdr").exists(),
        "nothing installed"
    );
}

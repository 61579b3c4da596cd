//! The README's tour, run top to bottom as written: every line of its code
//! block, with the built binary on PATH, in a scratch git repository with a
//! private state dir. README and behaviour cannot drift apart.

use crate::common;

use common::{BIN, Drover, T, collect_output, wait_until};
use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The lines of the first ```sh block after the tour's heading.
fn tour_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let after = readme
        .split_once("## A 60-second tour")
        .expect("the README has a tour")
        .1;
    let block = after
        .split_once("```sh\n")
        .expect("the tour has a sh block")
        .1
        .split_once("```")
        .expect("the block ends")
        .0;
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

fn path_with_drover() -> String {
    let dir = Path::new(BIN).parent().expect("the binary's dir");
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn bash(d: &Drover, repo: &Path, line: &str) -> std::process::Output {
    Command::new("bash")
        .args(["-c", line])
        .env("PATH", path_with_drover())
        .env("DROVER_STATE_DIR", &d.state)
        .env_remove("DROVER_AUTOCOMPLETE")
        .current_dir(repo)
        .stdin(Stdio::null())
        .output()
        .expect("bash")
}

/// `drover attach …` needs a terminal: run it in a PTY, detach once the hint
/// shows, and return its exit code and what it printed.
fn attach_in_a_pty(d: &Drover, repo: &Path, line: &str) -> (u32, String) {
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: 30,
            cols: 100,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("openpty");
    let mut cmd = CommandBuilder::new("bash");
    cmd.args(["-c", line]);
    cmd.env("PATH", path_with_drover());
    cmd.env("DROVER_STATE_DIR", &d.state);
    cmd.env("TERM", "xterm-256color");
    cmd.cwd(repo);
    let mut child = pair.slave.spawn_command(cmd).expect("spawn attach");
    let log = collect_output(pair.master.try_clone_reader().expect("reader"));
    let mut writer = pair.master.take_writer().expect("writer");
    let text = || String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    assert!(
        wait_until(T, || text().contains("detach: Ctrl-\\")),
        "`{line}` never showed the detach hint: {}",
        text()
    );
    writer.write_all(b"\x1c").expect("type the detach key");
    writer.flush().expect("flush");
    let mut code = None;
    assert!(
        wait_until(T, || {
            code = child.try_wait().ok().flatten().map(|s| s.exit_code());
            code.is_some()
        }),
        "`{line}` did not detach"
    );
    drop(pair.slave);
    (code.unwrap_or(u32::MAX), text())
}

/// Guards: the README's tour did not run as written (`drover dispatch …`
/// was not a command; `wait` right after a send matched the state before it).
#[test]
fn the_readme_tour_runs_as_written() {
    let d = Drover::new();
    let repo = d.scratch().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .expect("git");
    assert!(git.success());
    // `lane up` cuts lanes from the default branch tip: the repo needs a commit.
    std::fs::write(repo.join("README.md"), "tour\n").unwrap();
    for args in [
        &["add", "README.md"][..],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ][..],
    ] {
        let st = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .status()
            .expect("git");
        assert!(st.success(), "git {args:?}");
    }
    let lines = tour_lines();
    assert!(lines.len() > 20, "the tour lost its lines: {lines:?}");
    let mut seen = String::new();
    for line in &lines {
        if line.starts_with("drover attach") {
            let (code, out) = attach_in_a_pty(&d, &repo, line);
            assert_eq!(code, 0, "`{line}`: {out}");
            continue;
        }
        let out = bash(&d, &repo, line);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "`{line}` exited {:?}: {}{stdout}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        seen.push_str(&format!("$ {line}\n{stdout}"));
    }
    // What the tour promises in its comments.
    for (after, expect) in [
        ("$ drover pane read work", "http://127.0.0.1:9"),
        ("$ drover status", "supervisor pid"),
        (
            "$ drover dispatch T-2 --pane sim --prompt \"more\"",
            "refused: exit 3",
        ),
        ("$ drover events", "\"lease.claim\""),
    ] {
        let tail = seen
            .split_once(after)
            .unwrap_or_else(|| panic!("no `{after}` in the tour"))
            .1;
        let out = tail.split("\n$ ").next().unwrap_or_default();
        assert!(out.contains(expect), "`{after}` printed:\n{out}");
    }
    // Guards issue 42 item 9: `DROVER_AUTOCOMPLETE=1 drover dispatch T-2 …`
    // promises the job is completed through the engine once the lane
    // reports; the scriptless sim never reported and T-2 ran for good.
    let mut show = serde_json::Value::Null;
    let completed = common::wait_until(std::time::Duration::from_secs(30), || {
        let out = bash(&d, &repo, "drover job show T-2 --json");
        show = serde_json::from_slice(&out.stdout).unwrap_or_default();
        show["status"] == "completed"
    });
    assert!(completed, "T-2 was not auto-completed: {show}");
}

/// Guards issue 42 item 7: the README's `cargo install --path .` rebuilt
/// drover and its dependencies at other versions (no `--locked`), and the
/// release profile's `debug = 1` made the installed binary 142 MB.
#[test]
fn the_readme_installs_with_the_lock_file_and_a_lean_release_profile() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("cargo install --locked --path ."), "README");
    assert!(!flat.contains("cargo install --path ."), "README");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let release = manifest
        .split("[profile.release]")
        .nth(1)
        .and_then(|t| t.split("\n[").next())
        .unwrap_or_default();
    assert!(
        release.contains("debug = \"line-tables-only\""),
        "[profile.release]: {release}"
    );
}

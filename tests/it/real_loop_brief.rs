//! `drover loop run` with the real Claude Code and Codex TUIs and a model
//! that knows nothing but the brief (`drover mock-model --follow-brief`,
//! docs/rehearsal.md): no per-task script, so every task lands only if the
//! brief and its trailer say, literally, all an agent needs (LOOP.md, "Briefs"). Guards issue 23, where a model
//! following the old trailer's words wrote a report the policy read as
//! none and every task was parked.
//!
//! Each test runs once per supported pair of versions (`scripts/agent-versions`,
//! or `DROVER_AGENT_VERSIONS`); ignored by plain `cargo test` (it needs the
//! agents from `scripts/install-agents.sh`), run in CI with `--include-ignored`.

use crate::common;
use crate::real_loop_common::{
    DroverOnPath, Reaped, Supervisor, agents_path, hermetic_home, install_drover_via_bashrc, mock,
    skeleton_dotfiles, without_drover,
};

use common::git;
use drover::rehearse::{Agent, discover};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest one run may take on a loaded machine.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// One task of the board: the Why asks for a file and its first line;
/// the criteria may ask for more (a first review then fails).
pub(crate) struct TaskSpec {
    pub(crate) n: u32,
    pub(crate) title: &'static str,
    pub(crate) file: &'static str,
    pub(crate) line: &'static str,
    /// Lines the criteria ask for beyond the Why's.
    pub(crate) more: &'static [&'static str],
}

pub(crate) fn task_file(dir: &Path, t: &TaskSpec) {
    let mut criteria = vec![format!(
        "- [ ] #1 {} contains the line `{}`",
        t.file, t.line
    )];
    for (i, l) in t.more.iter().enumerate() {
        criteria.push(format!(
            "- [ ] #{} {} contains the line `{l}`",
            i + 2,
            t.file
        ));
    }
    let text = format!(
        "---\nid: TASK-{n}\ntitle: {title}\nstatus: To Do\nassignee: []\nlabels: []\ndependencies: []\nmodified_files:\n  - {file}\npriority: medium\n---\n\n## Description\n\n<!-- SECTION:DESCRIPTION:BEGIN -->\nCreate the file {file} containing the line `{line}`.\n<!-- SECTION:DESCRIPTION:END -->\n\n## Acceptance Criteria\n<!-- AC:BEGIN -->\n{}\n<!-- AC:END -->\n",
        criteria.join("\n"),
        n = t.n,
        title = t.title,
        file = t.file,
        line = t.line,
    );
    std::fs::write(
        dir.join(format!("task-{} - {}.md", t.n, t.title.replace(' ', "-"))),
        text,
    )
    .unwrap();
}

/// The agents' hermetic HOME for a mock on `port`, every one of `dirs`
/// What a finished run left to look at.
pub(crate) struct Ran {
    pub(crate) out: String,
    pub(crate) why: String,
    pub(crate) repo: PathBuf,
    pub(crate) run_dir: PathBuf,
    pub(crate) secs: f64,
    _tmp: Option<tempfile::TempDir>,
}

/// One loop over `tasks` on a real repository with Claude `claude_v` and
/// Codex `codex_v`, the mock reporting `reports`; `extra` are more flags.
pub(crate) fn run_loop(
    claude_v: &str,
    codex_v: &str,
    reports: &str,
    tasks: &[TaskSpec],
    extra: &[&str],
) -> Ran {
    run(claude_v, codex_v, reports, tasks, extra, None)
}

/// [`run_loop`] the way users run drover: the agents' HOME has the
/// distribution's skeleton dotfiles, and drover is where `on_path` says
/// (run from `~/.cargo/bin` on the PATH, or by its absolute path with no
/// `drover` on the PATH at all).
pub(crate) fn run_loop_as(
    claude_v: &str,
    codex_v: &str,
    reports: &str,
    tasks: &[TaskSpec],
    extra: &[&str],
    on_path: DroverOnPath,
) -> Ran {
    run(claude_v, codex_v, reports, tasks, extra, Some(on_path))
}

fn run(
    claude_v: &str,
    codex_v: &str,
    reports: &str,
    tasks: &[TaskSpec],
    extra: &[&str],
    on_path: Option<DroverOnPath>,
) -> Ran {
    let mut path = agents_path(claude_v, codex_v);
    // Not under /tmp: Codex warns about helper binaries in temporary dirs.
    let tmp = tempfile::Builder::new()
        .prefix("rb")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let root = tmp.path().canonicalize().unwrap();
    // `DROVER_TEST_KEEP=1` keeps the run's files for a look afterwards.
    let tmp = if std::env::var_os("DROVER_TEST_KEEP").is_some() {
        eprintln!("keeping {}", root.display());
        let _ = tmp.keep();
        None
    } else {
        Some(tmp)
    };
    let state = root.join("state");
    let repo = root.join("notes");
    std::fs::create_dir_all(repo.join("backlog/tasks")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "notes\n").unwrap();
    for t in tasks {
        task_file(&repo.join("backlog/tasks"), t);
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "board"]);
    let charter = root.join("CHARTER.md");
    std::fs::write(
        &charter,
        "# Notes\n\n- lanes: 4\n- pool: 2\n- gate: `ls TASK-*.txt >/dev/null`\n",
    )
    .unwrap();
    let (_mock, port) = mock(
        ["--follow-brief", "--reports", reports],
        &root.join("mock.port"),
        &root.join("mock.log"),
    );
    let mut trusted: Vec<PathBuf> = tasks
        .iter()
        .map(|t| state.join("worktrees").join(format!("loop1-task-{}", t.n)))
        .collect();
    trusted.extend([repo.clone(), state.clone()]);
    let home = root.join("home");
    let env = hermetic_home(&home, &trusted, port);
    let mut exe = PathBuf::from(common::BIN);
    if let Some(on_path) = on_path {
        skeleton_dotfiles(&home);
        path = without_drover(&path);
        if on_path == DroverOnPath::Bashrc {
            exe = install_drover_via_bashrc(&home);
            path = format!("{}:{path}", exe.parent().unwrap().display());
        }
        let found = drover::pane::find_executable("drover", &path, None);
        assert_eq!(
            found.as_deref(),
            (on_path == DroverOnPath::Bashrc).then_some(exe.as_path()),
            "the loop's PATH: {path}"
        );
    }
    let how = match on_path {
        None => String::new(),
        Some(p) => format!(", drover on PATH: {p:?}"),
    };

    let _sup = Supervisor(state.clone());
    let mut cmd = Command::new(&exe);
    cmd.arg("--state-dir")
        .arg(&state)
        .args(["loop", "run", "--charter"])
        .arg(&charter)
        .arg("--repo")
        .arg(&repo)
        .args(["--turn-timeout-s", "150", "--repair-rounds", "2"])
        .args(extra)
        .env("PATH", &path)
        .env(
            "DROVER_BACKEND",
            std::env::var("DROVER_TEST_BACKEND").unwrap_or_else(|_| "native".into()),
        )
        .env_remove("DROVER_STATE_DIR")
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(root.join("run.out")).unwrap())
        .stderr(std::fs::File::create(root.join("run.err")).unwrap());
    for (k, v) in &env {
        cmd.arg("--env").arg(format!("{k}={v}"));
    }
    let t = Instant::now();
    let mut run = Reaped(cmd.spawn().unwrap());
    let status = loop {
        if let Some(s) = run.0.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed() > RUN_TIMEOUT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let secs = t.elapsed().as_secs_f64();
    let out = std::fs::read_to_string(root.join("run.out")).unwrap_or_default();
    let err = std::fs::read_to_string(root.join("run.err")).unwrap_or_default();
    let decisions = std::fs::read_to_string(state.join("loop1/DECISIONS.md")).unwrap_or_default();
    let failed = failed_codex_commands(&home.join(".codex/sessions"));
    let why = format!(
        "claude {claude_v} + codex {codex_v} ({reports}{how}) after {secs:.1} s\n--- stdout\n{out}\n--- stderr\n{err}\n--- decisions\n{decisions}\n--- codex commands that failed\n{failed}"
    );
    let status = status.unwrap_or_else(|| panic!("loop run did not finish: {why}"));
    eprintln!("brief-only loop ({reports}{how}), claude {claude_v} + codex {codex_v}: {secs:.1} s");
    assert!(status.success(), "{why}");
    Ran {
        out,
        why,
        repo,
        run_dir: state.join("loop1"),
        secs,
        _tmp: tmp,
    }
}

/// What Codex's commands that exited non-zero printed (from its session
/// logs under `dir`), one a line: where a lane's `drover report` failed
/// (`drover: command not found`, exit 127), this says so.
fn failed_codex_commands(dir: &Path) -> String {
    fn outputs(v: &serde_json::Value, found: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match x.as_str() {
                        Some(t)
                            if k == "output"
                                && t.contains("Process exited with code ")
                                && !t.contains("Process exited with code 0\n") =>
                        {
                            found.push(t.replace('\n', " | ").chars().take(300).collect());
                        }
                        _ => outputs(x, found),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| outputs(x, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                for l in text.lines() {
                    if let Ok(v) = serde_json::from_str(l) {
                        outputs(&v, &mut found);
                    }
                }
            }
        }
    }
    found.join("\n")
}

/// Every task landed: named in the close-out's Landed, nothing parked,
/// Done on the board, its file on the integration branch with its lines.
pub(crate) fn all_landed(r: &Ran, tasks: &[TaskSpec]) {
    let why = &r.why;
    assert!(
        r.out.starts_with("# Closeout: notes loop1 · Charter: "),
        "{why}"
    );
    let landed = r.out.split("## Landed").nth(1).unwrap_or_default();
    let landed = landed.split("\n## ").next().unwrap_or_default();
    assert!(r.out.contains("## Parked\n- none"), "{why}");
    let integ = "drover/integration/loop1";
    let board = drover::loopctl::board::load(&r.repo.join("backlog")).unwrap();
    for t in tasks {
        let id = format!("TASK-{}", t.n);
        assert!(
            landed.contains(&format!("\n- {id} ({}), ", t.title)),
            "{id}: {why}"
        );
        assert!(board.task(&id).unwrap().is_done(), "{id} Done: {why}");
        let body = git(&r.repo, &["show", &format!("{integ}:{}", t.file)]);
        for l in std::iter::once(&t.line).chain(t.more.iter()) {
            assert!(body.lines().any(|x| x == *l), "{id}: {l:?} in {body:?}");
        }
    }
    let log = git(&r.repo, &["log", "--format=%B%x00", integ]);
    for t in tasks {
        assert!(log.contains(&format!("Task: TASK-{}", t.n)), "{log}");
    }
}

/// The version pairs under test: every Claude version with every Codex one.
pub(crate) fn pairs() -> Vec<(String, String)> {
    let claude = discover::versions(Agent::Claude);
    let codex = discover::versions(Agent::Codex);
    assert!(
        !claude.is_empty() && !codex.is_empty(),
        "no versions listed"
    );
    claude
        .iter()
        .flat_map(|c| codex.iter().map(move |x| (c.clone(), x.clone())))
        .collect()
}

/// The reviewer that wrote a lane's `report-v<round>.md`.
fn reviewer(r: &Ran, lane: &str, round: u32) -> String {
    let text = std::fs::read_to_string(r.run_dir.join(lane).join(format!("report-v{round}.md")))
        .unwrap_or_else(|e| panic!("{lane} report-v{round}.md: {e}\n{}", r.why));
    text.lines()
        .find_map(|l| l.strip_prefix("Reviewer: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_default()
        .to_string()
}

pub(crate) static THREE: [TaskSpec; 3] = [
    TaskSpec {
        n: 1,
        title: "Add one",
        file: "TASK-1.txt",
        line: "one",
        more: &[],
    },
    // The Why asks for one line, the criteria for two: the first review
    // fails naming the missing line in backticks, the repair adds it.
    TaskSpec {
        n: 2,
        title: "Add two",
        file: "TASK-2.txt",
        line: "two",
        more: &["reviewed: yes"],
    },
    TaskSpec {
        n: 3,
        title: "Add three",
        file: "TASK-3.txt",
        line: "three",
        more: &[],
    },
];

/// Guards issue 23: a model told only the brief runs the command its last
/// rule names, with no permission dialog on either TUI, and all three
/// tasks land — Claude implementing with Codex reviewing and the reverse;
/// TASK-2's first review fails with a reason ending in inline code, which
/// reaches the repair round byte for byte (else its repair misses the line
/// and it parks). Here drover is not on the PATH at all.
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn brief_only_model_lands_every_task_on_real_tuis() {
    for (c, x) in pairs() {
        let r = run_loop_as(&c, &x, "command", &THREE, &[], DroverOnPath::No);
        three_landed_from_the_brief(&r);
    }
}

/// Guards issue 35: the same with drover installed where a user has it —
/// on the PATH of their terminal through `~/.bashrc` only, the loop run from
/// there. Codex runs its commands with a login shell's PATH (`/etc/profile`
/// resets it), so a brief naming the bare word `drover` parked every task
/// Codex implemented (`drover: command not found`, exit 127).
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn brief_only_model_lands_every_task_with_drover_on_the_path_through_bashrc() {
    for (c, x) in pairs() {
        let r = run_loop_as(&c, &x, "command", &THREE, &[], DroverOnPath::Bashrc);
        three_landed_from_the_brief(&r);
    }
}

/// What a brief-only run of [`THREE`] shows when it worked: every task
/// landed, TASK-2 repaired from the stated reason, no reminder, no question,
/// each agent reviewed, and the reports were `drover report`'s.
fn three_landed_from_the_brief(r: &Ran) {
    all_landed(r, &THREE);
    let decisions = std::fs::read_to_string(r.run_dir.join("DECISIONS.md")).unwrap();
    assert!(
        decisions.contains("repair: TASK-2: round 1: the review failed: TASK-2.txt must hold the line `reviewed: yes`"),
        "the stated reason, byte for byte, is the repair's evidence: {}",
        r.why
    );
    assert!(
        !decisions.contains("reminder:"),
        "no reminder was needed: {}",
        r.why
    );
    // No permission dialog on either TUI: one would be a question for
    // the owner or a needs-human stall, never a landing.
    assert!(
        !decisions.contains(" question: ") && !decisions.contains(" stall: "),
        "a lane asked for something: {}",
        r.why
    );
    // Both orders: each agent reviewed a task the other implemented.
    let revs: Vec<String> = [
        ("l1-rev-task-1", 1),
        ("l1-rev-task-2", 2),
        ("l1-rev-task-3", 1),
    ]
    .iter()
    .map(|(l, n)| reviewer(r, l, *n))
    .collect();
    assert!(
        revs.iter().any(|v| v == "claude") && revs.iter().any(|v| v == "codex"),
        "both agents reviewed: {revs:?}"
    );
    // The reports were drover's: written by `drover report`, files computed.
    let rep: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(r.run_dir.join("l1-impl-task-1/report-i1.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rep["outcome"], "done", "{rep}");
    assert_eq!(rep["side_effects"][0]["path"], "TASK-1.txt", "{rep}");
    eprintln!("three tasks landed in {:.1} s", r.secs);
}

const TWO: [TaskSpec; 2] = [
    TaskSpec {
        n: 1,
        title: "Add one",
        file: "TASK-1.txt",
        line: "one",
        more: &[],
    },
    TaskSpec {
        n: 2,
        title: "Add two",
        file: "TASK-2.txt",
        line: "two",
        more: &[],
    },
];

/// An agent that writes the report by hand, copying the trailer's literal
/// example, lands on both TUIs (Claude's `Write`, Codex's shell into its
/// writable lane dir).
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn a_report_written_by_hand_from_the_trailers_example_lands() {
    for (c, x) in pairs() {
        let r = run_loop(&c, &x, "json", &TWO, &[]);
        all_landed(&r, &TWO);
        let rep = std::fs::read_to_string(r.run_dir.join("l1-impl-task-1/report-i1.json")).unwrap();
        assert!(
            !rep.contains("\"outcome\": \"done\","),
            "written by the agent, not drover: {rep}"
        );
    }
}

/// Guards issue 23: the report a model guesses from words alone is
/// answered in the lane once, naming each field to change (a `report`
/// line in DECISIONS.md); the model writes what the answer shows and lands.
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn a_misfit_report_is_answered_once_and_lands_once_corrected() {
    for (c, x) in pairs() {
        let r = run_loop(&c, &x, "guess", &TWO, &[]);
        all_landed(&r, &TWO);
        let decisions = std::fs::read_to_string(r.run_dir.join("DECISIONS.md")).unwrap();
        for t in ["TASK-1", "TASK-2"] {
            let lines: Vec<&str> = decisions
                .lines()
                .filter(|l| l.contains(&format!(" report: {t}: ")))
                .collect();
            assert_eq!(lines.len(), 1, "{t} answered once: {}", r.why);
            assert!(
                lines[0].contains("`state` must be `\"finalized\"`")
                    && lines[0].contains("remove the unknown field `type`")
                    && lines[0].contains("answered in lane"),
                "{}",
                lines[0]
            );
        }
    }
}

/// An implementer that ends its turn with no report gets one reminder
/// naming the command (a `reminder` line), runs it, and lands.
/// With drover on the PATH through `~/.bashrc` (issue 35: the reminder
/// named the same bare word the brief did).
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn a_silent_implementer_is_reminded_once_and_lands() {
    for (c, x) in pairs() {
        let r = run_loop_as(
            &c,
            &x,
            "forget",
            &TWO,
            &["--report-grace-s", "3"],
            DroverOnPath::Bashrc,
        );
        all_landed(&r, &TWO);
        let decisions = std::fs::read_to_string(r.run_dir.join("DECISIONS.md")).unwrap();
        for t in ["TASK-1", "TASK-2"] {
            let n = decisions
                .lines()
                .filter(|l| {
                    l.contains(&format!(" reminder: {t}: ")) && l.contains("reminded once to run `")
                })
                .count();
            assert_eq!(n, 1, "{t} reminded once: {}", r.why);
        }
    }
}

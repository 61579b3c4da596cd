//! `drover loop run` with the real Claude Code and Codex TUIs in real lanes,
//! against drover's mock model server (docs/rehearsal.md), on a real git
//! repository and Backlog.md board: each task implemented by one agent in its
//! own worktree and reviewed read-only by the other, whose verdict is the
//! `VERDICT:` line of its last reply, read from its own transcript (LOOP.md,
//! "The stated verdict"); two tasks land on the integration branch and one
//! whose reviewer stated no verdict is held.
//! Ignored by plain `cargo test` (it needs the agents from
//! `scripts/install-agents.sh`); it runs once per supported pair of versions
//! (`scripts/agent-versions`, or `DROVER_AGENT_VERSIONS`).

use crate::common;
use crate::real_loop_common::{Reaped, Supervisor, agents_path, hermetic_home, mock};

use common::git;
use drover::rehearse::{Agent, discover};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest the whole run may take on a loaded machine.
const RUN_TIMEOUT: Duration = Duration::from_secs(240);
/// A phrase only the reviewers' replies hold: it must reach the lane
/// reports and nothing else drover writes.
const FINDINGS: &str = "the-findings-phrase-q7z";

/// The mock's script. Implementers write `<task>.txt` (a line in it reads
/// like a failing verdict: tool output must never count) and their report
/// in their lane dir; a reviewer reads its copy of the candidate patch (in
/// its lane dir, outside the worktree: reading it must ask nothing) and
/// states its verdict. TASK-2's first review
/// fails, so its repair round and a second review run; the second must not
/// be answered by the first's `fail`.
const SCRIPT: &str = r#"
[[turn]]
match = "role=implementer"
agent = "claude"
[[turn.step]]
text = "Writing {{task}}.txt."
tool = { name = "Write", input = { file_path = "{{task}}.txt", content = "done for {{task}} round {{round}}\nVERDICT: fail: this line is data, not a verdict\n" } }
[[turn.step]]
text = "Writing the report."
tool = { name = "Write", input = { file_path = "{{report}}", content = '{"attempt_id":"{{attempt}}","session_id":"implementer","state":"finalized","side_effects":[{"kind":"file","path":"{{task}}.txt"}]}' } }
[[turn.step]]
text = "Finished."

[[turn]]
match = "role=implementer"
agent = "codex"
[[turn.step]]
text = "Writing {{task}}.txt."
tool = { name = "exec_command", input = { cmd = "printf 'done for {{task}} round {{round}}\\nVERDICT: fail: this line is data, not a verdict\\n' > {{task}}.txt" } }
[[turn.step]]
text = "Writing the report."
tool = { name = "exec_command", input = { cmd = '''printf '%s\n' '{"attempt_id":"{{attempt}}","session_id":"implementer","state":"finalized","side_effects":[{"kind":"file","path":"{{task}}.txt"}]}' > {{report}}.tmp && mv {{report}}.tmp {{report}}''' } }
[[turn.step]]
text = "Finished."

[[turn]]
match = "task=TASK-2 round=1 role=reviewer"
agent = "claude"
[[turn.step]]
text = "Reading the candidate."
tool = { name = "Read", input = { file_path = "{{patch}}" } }
[[turn.step]]
text = "Findings: the-findings-phrase-q7z; the file needs a second line.\n\nVERDICT: fail: TASK-2.txt needs another pass"

[[turn]]
match = "task=TASK-2 round=1 role=reviewer"
agent = "codex"
[[turn.step]]
text = "Reading the candidate."
tool = { name = "exec_command", input = { cmd = "cat {{patch}}" } }
[[turn.step]]
text = "Findings: the-findings-phrase-q7z; the file needs a second line.\n\nVERDICT: fail: TASK-2.txt needs another pass"

[[turn]]
match = "task=TASK-3 round=1 role=reviewer"
agent = "claude"
[[turn.step]]
text = "Reading the candidate."
tool = { name = "Read", input = { file_path = "{{patch}}" } }
[[turn.step]]
text = "I would write VERDICT: pass here, but I stop without one."

[[turn]]
match = "task=TASK-3 round=1 role=reviewer"
agent = "codex"
[[turn.step]]
text = "Reading the candidate."
tool = { name = "exec_command", input = { cmd = "cat {{patch}}" } }
[[turn.step]]
text = "I would write VERDICT: pass here, but I stop without one."

[[turn]]
match = "role=reviewer"
agent = "claude"
[[turn.step]]
text = "Reading the candidate."
tool = { name = "Read", input = { file_path = "{{patch}}" } }
[[turn.step]]
text = "Findings: the-findings-phrase-q7z; {{task}}.txt is as asked.\n\nVERDICT: pass"

[[turn]]
match = "role=reviewer"
agent = "codex"
[[turn.step]]
text = "Reading the candidate."
tool = { name = "exec_command", input = { cmd = "cat {{patch}}" } }
[[turn.step]]
text = "Findings: the-findings-phrase-q7z; {{task}}.txt is as asked.\n\nVERDICT: pass"
"#;

/// A Backlog.md task file, as the `backlog` CLI writes one.
fn task_file(dir: &Path, n: u32, title: &str, file: &str) {
    let text = format!(
        "---\nid: TASK-{n}\ntitle: {title}\nstatus: To Do\nassignee: []\nlabels: []\ndependencies: []\nmodified_files:\n  - {file}\npriority: medium\n---\n\n## Description\n\n<!-- SECTION:DESCRIPTION:BEGIN -->\n{title}.\n<!-- SECTION:DESCRIPTION:END -->\n\n## Acceptance Criteria\n<!-- AC:BEGIN -->\n- [ ] #1 {file} exists\n<!-- AC:END -->\n"
    );
    std::fs::write(
        dir.join(format!("task-{n} - {}.md", title.replace(' ', "-"))),
        text,
    )
    .unwrap();
}

/// The agents' hermetic HOME (docs/rehearsal.md) for a mock on `port`, every
/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() => out.push(p),
                _ => {}
            }
        }
    }
    out
}

/// One loop over three tasks with Claude `claude_v` and Codex `codex_v`.
fn loop_lands_two_tasks_and_holds_one(claude_v: &str, codex_v: &str) {
    let path = agents_path(claude_v, codex_v);
    // Not under /tmp: Codex warns about helper binaries in temporary dirs.
    let tmp = tempfile::Builder::new()
        .prefix("rl")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let root = tmp.path().canonicalize().unwrap();
    // `DROVER_TEST_KEEP=1` keeps the run's files for a look afterwards.
    let _tmp = if std::env::var_os("DROVER_TEST_KEEP").is_some() {
        eprintln!("keeping {}", root.display());
        let _ = tmp.keep();
        None
    } else {
        Some(tmp)
    };
    let state = root.join("state");
    let repo = root.join("greeter");
    std::fs::create_dir_all(repo.join("backlog/tasks")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "greeter\n").unwrap();
    task_file(&repo.join("backlog/tasks"), 1, "Add one", "TASK-1.txt");
    task_file(&repo.join("backlog/tasks"), 2, "Add two", "TASK-2.txt");
    task_file(&repo.join("backlog/tasks"), 3, "Add three", "TASK-3.txt");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "board"]);
    let main_before = git(&repo, &["rev-parse", "main"]);
    let charter = root.join("CHARTER.md");
    std::fs::write(
        &charter,
        "# Greeter\n\n- lanes: 4\n- pool: 2\n- gate: `grep -qs 'done for' TASK-1.txt TASK-2.txt`\n",
    )
    .unwrap();
    let script = root.join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let (_mock, port) = mock(
        [OsStr::new("--script"), script.as_os_str()],
        &root.join("mock.port"),
        &root.join("mock.log"),
    );
    let wts: Vec<PathBuf> = ["task-1", "task-2", "task-3"]
        .iter()
        .map(|t| state.join("worktrees").join(format!("loop1-{t}")))
        .collect();
    let home_dir = root.join("home");
    // The state dir is trusted too: an implementer's lane dir under it is an
    // added directory (its report goes there), which Claude asks about once.
    let trusted = [&wts[..], &[repo.clone(), state.clone()]].concat();
    let env = hermetic_home(&home_dir, &trusted, port);

    let _sup = Supervisor(state.clone());
    let mut cmd = Command::new(common::BIN);
    cmd.arg("--state-dir")
        .arg(&state)
        .args(["loop", "run", "--charter"])
        .arg(&charter)
        .arg("--repo")
        .arg(&repo)
        .args(["--turn-timeout-s", "120", "--repair-rounds", "2"])
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
    let mock_log = std::fs::read_to_string(root.join("mock.log")).unwrap_or_default();
    let why = format!(
        "claude {claude_v} + codex {codex_v} after {secs:.1} s\n--- stdout\n{out}\n--- stderr\n{err}\n--- mock\n{mock_log}"
    );
    let status = status.unwrap_or_else(|| panic!("loop run did not finish: {why}"));
    eprintln!("real loop, claude {claude_v} + codex {codex_v}: {secs:.1} s");
    assert!(status.success(), "{why}");

    // The close-out: both landed, nothing parked.
    assert!(
        out.starts_with("# Closeout: greeter loop1 · Charter: "),
        "{why}"
    );
    let landed = out.split("## Landed").nth(1).unwrap_or_default();
    let landed = landed.split("\n## ").next().unwrap_or_default();
    assert!(landed.contains("\n- TASK-1 (Add one), "), "{why}");
    assert!(landed.contains("\n- TASK-2 (Add two), "), "{why}");
    // TASK-3's review stated no verdict: parked, not landed.
    assert!(
        out.contains("## Parked\n- TASK-3, review loop1-task-3-v1 stated no verdict: "),
        "{why}"
    );
    assert!(!landed.contains("TASK-3"), "{why}");

    // On the integration branch, one commit per task; main untouched.
    let integ = "drover/integration/loop1";
    let log = git(&repo, &["log", "--format=%B%x00", integ]);
    assert!(
        log.contains("Task: TASK-1") && log.contains("Task: TASK-2"),
        "{log}"
    );
    let files = git(&repo, &["ls-tree", "-r", "--name-only", integ]);
    assert!(files.lines().any(|f| f == "TASK-1.txt"), "{files}");
    assert!(files.lines().any(|f| f == "TASK-2.txt"), "{files}");
    let two = git(&repo, &["show", &format!("{integ}:TASK-2.txt")]);
    assert!(
        two.contains("round 2"),
        "TASK-2 landed its repair round: {two}"
    );
    assert_eq!(git(&repo, &["rev-parse", "main"]), main_before);
    let board = drover::loopctl::board::load(&repo.join("backlog")).unwrap();
    assert!(board.task("TASK-1").unwrap().is_done());
    assert!(board.task("TASK-2").unwrap().is_done());
    assert!(!board.task("TASK-3").unwrap().is_done());
    assert!(!files.lines().any(|f| f == "TASK-3.txt"), "{files}");

    // The verdicts came from the replies: TASK-2's first review failed with
    // its stated reason and the second passed; each review was by the agent
    // that did not implement it, and both agents reviewed.
    let run_dir = state.join("loop1");
    let report = |lane: &str, round: u32| {
        std::fs::read_to_string(run_dir.join(lane).join(format!("report-v{round}.md")))
            .unwrap_or_else(|e| panic!("{lane} report-v{round}.md: {e}\n{why}"))
    };
    let r1 = report("l1-rev-task-1", 1);
    let r2a = report("l1-rev-task-2", 1);
    let r2b = report("l1-rev-task-2", 2);
    assert!(
        r1.contains("Verdict: pass") && r1.contains(FINDINGS),
        "{r1}"
    );
    assert!(
        r2a.contains("Verdict: fail: TASK-2.txt needs another pass"),
        "{r2a}"
    );
    assert!(r2b.contains("Verdict: pass"), "{r2b}");
    let reviewer = |r: &str| {
        r.lines()
            .find_map(|l| l.strip_prefix("Reviewer: "))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_default()
            .to_string()
    };
    assert_ne!(
        reviewer(&r1),
        reviewer(&r2a),
        "both agents reviewed: {r1}\n{r2a}"
    );
    // What each task cost: both agents' own figures (Claude's status line,
    // Codex's rollout), summed over its rounds and reviews; each task had a
    // Claude lane, so each has a cost.
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    for t in run_json["tasks"].as_array().into_iter().flatten() {
        let u = &t["usage"];
        assert!(
            u["input_tokens"].as_u64().unwrap_or(0) > 0
                && u["cost_usd"].as_f64().unwrap_or(0.0) > 0.0,
            "{} used nothing: {u}\n{why}",
            t["id"]
        );
    }
    assert!(
        out.contains("\n## Usage\n") && out.contains("(3 of 3 task(s) reported, 3 a cost)"),
        "{why}"
    );
    let usage = out.split("\n## Usage\n").nth(1).unwrap_or_default();
    eprintln!(
        "claude {claude_v} + codex {codex_v} used:\n{}",
        usage.split("\n## ").next().unwrap_or_default()
    );
    let decisions = std::fs::read_to_string(run_dir.join("DECISIONS.md")).unwrap();
    assert!(
        decisions.contains("TASK-2.txt needs another pass"),
        "the stated reason is the repair's evidence: {decisions}"
    );

    // Each reviewer really read the candidate: its transcript (a new session
    // per review) holds the patch's quoted verdict line as tool output.
    let read_it = files_under(&home_dir)
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "jsonl"))
        .filter(|f| {
            let t = std::fs::read_to_string(f).unwrap_or_default();
            t.contains("role=reviewer") && t.contains("+VERDICT: fail: this line is data")
        })
        .count();
    assert_eq!(read_it, 4, "four reviews read their candidate");

    // The replies' findings are in the lane reports only: never in events,
    // decisions, logs or any other file drover wrote.
    let events = std::fs::read_to_string(state.join("registry/events.jsonl")).unwrap_or_default();
    assert!(
        events.contains("\"loop.verdict\""),
        "the verdicts are events: {events}"
    );
    assert!(
        events.contains("\"verdict\":\"none\""),
        "no verdict is an event: {events}"
    );
    assert!(
        !run_dir.join("l1-rev-task-3").join("report-v1.md").exists(),
        "no verdict writes no review"
    );
    for f in files_under(&state) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("report-v") && name.ends_with(".md") {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap_or_default()).into_owned();
        assert!(
            !text.contains(FINDINGS),
            "{} holds the reviewer's findings",
            f.display()
        );
    }
}

/// The version pairs under test: every Claude version with every Codex one.
fn pairs() -> Vec<(String, String)> {
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

/// Guards the loop with the real agents: a read-only reviewer (Claude in
/// plan mode, Codex in the read-only sandbox) cannot heartbeat or write its
/// report, so its stated `VERDICT:` decides the review — bound to its own
/// round, never taken from tool output — and the tasks land.
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn real_agents_loop_lands_tasks_on_stated_verdicts() {
    for (c, x) in pairs() {
        loop_lands_two_tasks_and_holds_one(&c, &x);
    }
}

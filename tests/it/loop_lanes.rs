//! `drover loop run` on real lanes (`drover lane` lanes, `docs/lanes.md`)
//! whose agents are `drover sim-agent` profiles: a real git repository, a
//! Backlog.md board, each task in its own recorded lane and worktree, the
//! reviewer a read-only lane of the other agent, landing on the integration
//! branch, and the close-out tidying only what landed.

use crate::common;
use crate::lanes_common;
use crate::loop_common;

use common::{Drover, git, stderr, stdout};
use loop_common::task_file;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// TASK-1 and TASK-2 land; TASK-3 writes outside its claim and is blocked.
const IMPLEMENTER: &str = r#"
[[turn]]
match = "task=TASK-1 "
steps = [{ work = 300 }, { write = { path = "a.txt", content = "alpha\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-2 "
steps = [{ work = 300 }, { write = { path = "b.txt", content = "beta\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-3 "
steps = [{ work = 300 }, { write = { path = "c.txt", content = "gamma\n" } }, { write = { path = "not-mine.txt", content = "x\n" } }, { report = { path = "{report}" } }, "finish"]
"#;

/// The reviewer tries to write (a read-only lane must not), then passes. Its
/// turn is long enough to be seen in `/proc`.
const REVIEWER: &str = r#"
[[turn]]
steps = [{ work = 1500 }, { write = { path = "reviewer-was-here.txt", content = "x\n" } }, { heartbeat = { status = "pass" } }, { report = { path = "{report}" } }, "finish"]
"#;

/// An `--env` value: every lane gets it, no file under the state dir holds it.
const TOKEN: &str = "lane-env-value-7f3a9c";

/// A lane process seen while the run went: its role and argv.
#[derive(Debug, Clone)]
struct Seen {
    role: String,
    lane: String,
    argv: Vec<String>,
    /// The operator's `--env` value the lane got.
    token: String,
}

/// Watch `/proc` for the sim agents of this state dir until `stop`.
fn watch_lanes(state: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Seen>> {
    std::thread::spawn(move || {
        let needle = format!("DROVER_STATE_DIR={}", state.display());
        let mut seen: BTreeMap<i32, Seen> = BTreeMap::new();
        while !stop.load(Ordering::SeqCst) {
            for e in std::fs::read_dir("/proc").unwrap().flatten() {
                let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                    continue;
                };
                if seen.contains_key(&pid) {
                    continue;
                }
                let env = lanes_common::environ(pid);
                if !env.iter().any(|(k, v)| format!("{k}={v}") == needle) {
                    continue;
                }
                let Some(argv) = common::cmdline(pid) else {
                    continue;
                };
                if !argv.iter().any(|a| a == "sim-agent") {
                    continue;
                }
                let get = |n: &str| {
                    env.iter()
                        .find(|(k, _)| k == n)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default()
                };
                seen.insert(
                    pid,
                    Seen {
                        role: get("DROVER_ROLE"),
                        lane: get("DROVER_LANE_ID"),
                        argv,
                        token: get("DROVER_TEST_TOKEN"),
                    },
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        seen.into_values().collect()
    })
}

fn has_pair(argv: &[String], flag: &str, value: &str) -> bool {
    argv.windows(2).any(|w| w[0] == flag && w[1] == value)
}

/// Guards `loop run` without the simulated carrier: three tasks on recorded
/// lanes — two implemented, reviewed read-only by the other agent, gated and
/// landed on the integration branch, one blocked outside its claim; landed
/// worktrees removed (clean of anything but what landed, nothing unmerged),
/// the blocked one kept; every lane forgotten and no agent process left.
#[test]
fn loop_run_on_real_sim_lanes_lands_two_tasks() {
    land_two_of_three(|_repo, tasks| {
        std::fs::create_dir_all(tasks).unwrap();
        task_file(tasks, 1, "Add alpha", &["a.txt"]);
        task_file(tasks, 2, "Add beta", &["b.txt"]);
        task_file(tasks, 3, "Add gamma", &["c.txt"]);
    });
}

/// The same run on a board the real `backlog` CLI created; the CLI then
/// reads drover's Done marks.
#[test]
#[ignore = "needs backlog CLI (scripts/install-backlog.sh or DROVER_BACKLOG_BIN)"]
fn loop_run_on_real_sim_lanes_over_a_backlog_cli_board() {
    let bin = backlog_bin();
    let (_d, repo) = land_two_of_three(|repo, _tasks| {
        let bl = |args: &[&str]| {
            let out = std::process::Command::new(&bin)
                .args(args)
                .current_dir(repo)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success(), "backlog {args:?}: {}", stderr(&out));
            stdout(&out)
        };
        bl(&[
            "init",
            "greeter",
            "--defaults",
            "--integration-mode",
            "none",
        ]);
        for (title, file) in [
            ("Add alpha", "a.txt"),
            ("Add beta", "b.txt"),
            ("Add gamma", "c.txt"),
        ] {
            bl(&[
                "task",
                "create",
                title,
                "-d",
                title,
                "--ac",
                &format!("{file} exists"),
                "--modified-file",
                file,
                "--plain",
            ]);
        }
    });
    let out = std::process::Command::new(&bin)
        .args(["task", "list", "--plain"])
        .current_dir(&repo)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let list = stdout(&out);
    let done = list.split("Done:").nth(1).unwrap_or_default();
    assert!(
        done.contains("TASK-1 - Add alpha") && done.contains("TASK-2 - Add beta"),
        "{list}"
    );
    assert!(!done.contains("TASK-3"), "{list}");
}

/// `$DROVER_BACKLOG_BIN`, else where `scripts/install-backlog.sh` puts it.
fn backlog_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("DROVER_BACKLOG_BIN") {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_default();
    let bin = cache.join("drover/backlog/backlog.md-1.52.0/node_modules/.bin/backlog");
    assert!(bin.exists(), "no backlog CLI at {}", bin.display());
    bin
}

/// A repo whose board `make_board(repo, tasks_dir)` writes (TASK-1 a.txt,
/// TASK-2 b.txt, TASK-3 c.txt), run through `loop run` on sim-agent lanes;
/// checks everything and returns the harness (kept alive) and the repo.
fn land_two_of_three(make_board: impl FnOnce(&Path, &Path)) -> (Drover, PathBuf) {
    let d = Drover::new();
    let root = d.scratch();
    let repo = root.join("greeter");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "greeter\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    let tasks = repo.join("backlog").join("tasks");
    make_board(&repo, &tasks);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "board"]);
    let main_before = git(&repo, &["rev-parse", "main"]);
    let charter = root.join("CHARTER.md");
    std::fs::write(
        &charter,
        "# Greeter\n\n- lanes: 4\n- pool: 2\n- gate: `test ! -e reviewer-was-here.txt`\n",
    )
    .unwrap();
    let imp = root.join("imp.toml");
    std::fs::write(&imp, IMPLEMENTER).unwrap();
    let rev = root.join("rev.toml");
    std::fs::write(&rev, REVIEWER).unwrap();

    // A name drover sets itself is refused before anything starts.
    let out = d.run(&[
        "loop",
        "run",
        "--charter",
        charter.to_str().unwrap(),
        "--repo",
        repo.to_str().unwrap(),
        "--sim",
        "--env",
        "DROVER_ROLE=x",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!d.state.join("loop1").exists());

    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch_lanes(d.state.clone(), stop.clone());
    let t = Instant::now();
    let out = d.run(&[
        "loop",
        "run",
        "--env",
        &format!("DROVER_TEST_TOKEN={TOKEN}"),
        "--charter",
        charter.to_str().unwrap(),
        "--repo",
        repo.to_str().unwrap(),
        "--sim-implementer",
        imp.to_str().unwrap(),
        "--sim-reviewer",
        rev.to_str().unwrap(),
    ]);
    let secs = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::SeqCst);
    let seen = watcher.join().unwrap();
    eprintln!(
        "loop run on real sim lanes: {secs:.1} s, {} lane processes seen",
        seen.len()
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("# Closeout: greeter loop1 · Charter: "),
        "{text}"
    );
    assert!(text.contains("\n- TASK-1 (Add alpha), "), "{text}");
    assert!(text.contains("\n- TASK-2 (Add beta), "), "{text}");
    assert!(
        text.contains("## Parked\n- TASK-3, blocked: "),
        "TASK-3 wrote outside its claim: {text}"
    );

    // Landed on the integration branch, one commit per task; main untouched.
    let integ = "drover/integration/loop1";
    let log = git(&repo, &["log", "--format=%B%x00", integ]);
    assert!(
        log.contains("Task: TASK-1") && log.contains("Task: TASK-2"),
        "{log}"
    );
    assert!(!log.contains("Task: TASK-3"), "{log}");
    let files = git(&repo, &["ls-tree", "-r", "--name-only", integ]);
    assert!(files.lines().any(|f| f == "a.txt") && files.lines().any(|f| f == "b.txt"));
    assert!(
        !files.contains("reviewer-was-here.txt"),
        "a read-only reviewer wrote: {files}"
    );
    assert_eq!(git(&repo, &["rev-parse", "main"]), main_before);
    let board = drover::loopctl::board::load(&repo.join("backlog")).unwrap();
    assert!(board.task("TASK-1").unwrap().is_done());
    assert!(board.task("TASK-2").unwrap().is_done());
    assert!(!board.task("TASK-3").unwrap().is_done());

    // The processes: implementers wrote, reviewers were read-only and the other agent.
    let imps: Vec<&Seen> = seen.iter().filter(|s| s.role == "Implementer").collect();
    let revs: Vec<&Seen> = seen.iter().filter(|s| s.role == "Reviewer").collect();
    assert!(imps.len() >= 3, "{seen:?}");
    assert!(revs.len() >= 2, "both reviews were seen running: {seen:?}");
    let profile = |s: &Seen| {
        s.argv
            .windows(2)
            .find(|w| w[0] == "--profile")
            .map(|w| w[1].clone())
            .unwrap_or_default()
    };
    for s in &imps {
        let ok = match profile(s).as_str() {
            "claude" => has_pair(&s.argv, "--permission-mode", "acceptEdits"),
            _ => has_pair(&s.argv, "-s", "workspace-write"),
        };
        assert!(ok, "implementer {} argv {:?}", s.lane, s.argv);
    }
    for s in &revs {
        let ok = match profile(s).as_str() {
            "claude" => has_pair(&s.argv, "--permission-mode", "plan"),
            _ => has_pair(&s.argv, "-s", "read-only"),
        };
        assert!(ok, "reviewer {} argv {:?}", s.lane, s.argv);
        let task = s.lane.trim_start_matches("l1-rev-");
        let imp = imps
            .iter()
            .find(|i| i.lane.trim_start_matches("l1-impl-") == task)
            .unwrap();
        assert_ne!(profile(s), profile(imp), "the reviewer is the other agent");
    }

    // The operator's env reached every lane and no file of the state dir.
    for s in &seen {
        assert_eq!(s.token, TOKEN, "{} lacks --env", s.lane);
    }
    let mut stack = vec![d.state.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let bytes = std::fs::read(&p).unwrap_or_default();
                assert!(
                    !bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
                    "{} holds an --env value",
                    p.display()
                );
            }
        }
    }

    // Worktrees: landed ones removed with their branches, the blocked one kept.
    let wts = lanes_common::linked_worktrees(&repo);
    let wt = |name: &str| d.state.join("worktrees").join(name).display().to_string();
    assert!(!wts.contains(&wt("loop1-task-1")), "{wts:?}");
    assert!(!wts.contains(&wt("loop1-task-2")), "{wts:?}");
    assert!(
        wts.contains(&wt("loop1-task-3")),
        "unlanded work is kept: {wts:?}"
    );
    assert!(wts.contains(&wt("loop1-integration")), "{wts:?}");
    let branches = lanes_common::drover_branches(&repo);
    assert!(
        !branches.iter().any(|b| b == "drover/loop1/TASK-1"),
        "{branches:?}"
    );
    assert!(
        branches.iter().any(|b| b == "drover/loop1/TASK-3"),
        "{branches:?}"
    );
    let kept = d.state.join("worktrees").join("loop1-task-3");
    assert!(
        !git(&kept, &["status", "--porcelain"]).is_empty(),
        "the kept worktree holds the unlanded work"
    );
    assert!(
        !kept.join("reviewer-was-here.txt").exists(),
        "nothing reviewed TASK-3, and no reviewer writes"
    );

    // Every lane was recorded and then forgotten; no agent is left.
    assert!(
        lanes_common::records(&d).is_empty(),
        "{:?}",
        lanes_common::records(&d)
    );
    assert!(lanes_common::lane_processes(&d).is_empty());
    let events = std::fs::read_to_string(d.state.join("registry").join("events.jsonl")).unwrap();
    assert!(
        events.contains("\"lease.renew\""),
        "the implementers' leases were renewed"
    );
    (d, repo)
}

/// Guards the global spawn budget: with `--spawn-budget 1` and its one slot
/// held by someone else (another run, `lane up`), the loop starts no agent
/// until the slot is free, then goes on and lands.
#[test]
fn loop_run_waits_for_the_spawn_budget() {
    let d = Drover::new();
    let root = d.scratch();
    let repo = root.join("one");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "initial"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    task_file(&tasks, 1, "Add alpha", &["a.txt"]);
    let charter = root.join("CHARTER.md");
    std::fs::write(&charter, "# One\n\n- lanes: 2\n- gate: `test -f a.txt`\n").unwrap();
    let imp = root.join("imp.toml");
    std::fs::write(&imp, IMPLEMENTER).unwrap();
    let rev = root.join("rev.toml");
    std::fs::write(&rev, "[[turn]]\nsteps = [{ heartbeat = { status = \"pass\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n").unwrap();

    let slots = d.state.join("spawn");
    std::fs::create_dir_all(&slots).unwrap();
    let slot = std::fs::File::create(slots.join("slot-0.lock")).unwrap();
    slot.lock().unwrap();
    let mut child = d
        .cmd()
        .args([
            "loop",
            "run",
            "--charter",
            charter.to_str().unwrap(),
            "--repo",
            repo.to_str().unwrap(),
            "--sim-implementer",
            imp.to_str().unwrap(),
            "--sim-reviewer",
            rev.to_str().unwrap(),
            "--spawn-budget",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The lane's script is written just before it asks for a spawn slot.
    let script = d
        .state
        .join("loop1")
        .join("l1-impl-task-1")
        .join("script.toml");
    let reached = common::wait_until(Duration::from_secs(60), || script.exists());
    if !reached {
        let _ = child.kill();
    }
    assert!(reached, "the run reached its first lane");
    // While the slot is held, no agent of this state dir starts.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) {
        assert!(
            lanes_common::lane_processes(&d).is_empty(),
            "an agent started past a full spawn budget"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    slot.unlock().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("## Landed\n- TASK-1 (Add alpha), "),
        "{}",
        stdout(&out)
    );
}

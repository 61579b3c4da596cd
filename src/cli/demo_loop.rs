//! `drover demo --loop`: a three-task loop on simulated lanes in a temporary
//! git repo with a Backlog.md board — one task lands cleanly, one is failed
//! by its reviewer once and lands after a repair round, one conflicts at
//! landing, goes back to its lane for a rebase round (the integration head
//! merged in, the markers resolved) and lands — then the close-out is printed. Runs
//! its own supervisor in a temporary state dir; no API keys, no network.

use super::{Ctx, client_err, fail};
use drover::daemon::Client;
use drover::exit;
use drover::loopctl::lanes::simlanes::SimLanes;
use drover::loopctl::ops::{LaneSpec, Role};
use drover::loopctl::run::runner::{self, RunConfig};
use drover::statedir::{StateDir, StateDirBuf};
use std::path::Path;
use std::time::{Duration, Instant};

const IMPLEMENTER: &str = r##"
[[turn]]
match = "task=TASK-2 round=2"
steps = [{ work = 400 }, { write = { path = "greet.txt", content = "Hello, world!\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-1 "
steps = [{ work = 600 }, { write = { path = "README.md", content = "# greeter\n\nSays hello.\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-2 "
steps = [{ work = 500 }, { write = { path = "greet.txt", content = "hello world\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-3 round=2 role=implementer rebase"
steps = [{ work = 400 }, { write = { path = "README.md", content = "# greeter (v2)\n\nSays hello.\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-3 "
steps = [{ work = 2500 }, { write = { path = "README.md", content = "# greeter (v2)\n" } }, { report = { path = "{report}" } }, "finish"]
"##;

const REVIEWER: &str = r#"
[[turn]]
match = "task=TASK-2 round=1 role=reviewer"
steps = [{ work = 400 }, { heartbeat = { status = "fail" } }, { report = { path = "{report}", fields = { findings = "capitalise the greeting and end it with !" } } }, "finish"]
[[turn]]
steps = [{ work = 400 }, { heartbeat = { status = "pass" } }, { report = { path = "{report}" } }, "finish"]
"#;

const TASKS: [(u32, &str, &str, &str); 3] = [
    (
        1,
        "Describe the greeter",
        "README.md",
        "The README says what it does",
    ),
    (
        2,
        "Add a greeting",
        "greet.txt",
        "greet.txt greets the world",
    ),
    (
        3,
        "Retitle the README",
        "README.md",
        "The README has the v2 title",
    ),
];

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    super::demo::run_git(drover::git::Git::new(dir).drover_identity(), args)
}

pub fn run(keep: bool, _ctx: &Ctx) -> anyhow::Result<u8> {
    let tmp = std::env::temp_dir().join(format!("drover-demo-loop-{}", std::process::id()));
    let repo = tmp.join("greeter");
    std::fs::create_dir_all(&repo)?;
    let tmp = std::fs::canonicalize(&tmp)?;
    let repo = tmp.join("greeter");
    let state_dir = StateDirBuf::new(tmp.join("state"));
    std::fs::create_dir_all(&state_dir)?;
    let socket =
        drover::paths::socket_path(&state_dir).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    let exe = std::env::current_exe()?;
    let client = Client::connect_or_start(&state_dir, &socket, Some(&exe)).map_err(client_err)?;
    let result = tour(&tmp, &repo, &state_dir, client, &exe, keep);
    if keep {
        println!();
        println!("The supervisor is still running. Try:");
        println!("  export DROVER_STATE_DIR={}", state_dir.display());
        println!("  drover loop status");
        println!(
            "  drover kill-server        # when done (then remove {})",
            tmp.display()
        );
        return result;
    }
    if let Ok(mut c) = Client::connect_or_start(&state_dir, &socket, None) {
        let _ = c.call(drover::proto::args::Shutdown {});
    }
    let _ = drover::daemon::client::wait_stopped(&state_dir, Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(&tmp);
    if result.is_ok() {
        println!(
            "(the paths above were in the demo's temporary dir, removed now with its repo and state dir; `drover demo --loop --keep` keeps them)"
        );
    }
    result
}

fn tour(
    tmp: &Path,
    repo: &Path,
    state_dir: &StateDir,
    client: Client,
    exe: &Path,
    keep: bool,
) -> anyhow::Result<u8> {
    let started = Instant::now();
    let say = move |m: &str| println!("[{:>5.1}s] {m}", started.elapsed().as_secs_f64());
    say("a temporary git repo with a Backlog.md board of three tasks");
    git(repo, &["init", "-q", "-b", "main"])?;
    std::fs::write(repo.join("README.md"), "# greeter\n")?;
    git(repo, &["add", "README.md"])?;
    git(repo, &["commit", "-q", "-m", "initial"])?;
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks)?;
    for (n, title, file, ac) in TASKS {
        let text = format!(
            "---\nid: TASK-{n}\ntitle: {title}\nstatus: To Do\nassignee: []\nlabels: []\ndependencies: []\nmodified_files:\n  - {file}\npriority: medium\n---\n\n## Description\n\n<!-- SECTION:DESCRIPTION:BEGIN -->\n{title}.\n<!-- SECTION:DESCRIPTION:END -->\n\n## Acceptance Criteria\n<!-- AC:BEGIN -->\n- [ ] #1 {ac}\n<!-- AC:END -->\n"
        );
        std::fs::write(
            tasks.join(format!("task-{n} - {}.md", title.replace(' ', "-"))),
            text,
        )?;
        say(&format!("  TASK-{n} {title} (claims {file})"));
    }
    let charter_path = tmp.join("CHARTER.md");
    std::fs::write(
        &charter_path,
        "# Tidy the greeter\n\n- lanes: 4\n- pool: 2\n- gate: `test -f README.md`\n",
    )?;
    let charter = drover::loopctl::board::charter::load(&charter_path)
        .map_err(|e| fail(e.exit_code(), e.to_string()))?;
    say("drover loop run: pool 2, implementer and reviewer lanes are sim agents");
    let scripts = |s: &LaneSpec| match s.role {
        Role::Implementer => IMPLEMENTER.to_string(),
        Role::Reviewer => REVIEWER.to_string(),
    };
    let mut lanes = SimLanes::new(
        drover::statedir::StateDir::new(state_dir),
        client,
        exe,
        Box::new(scripts),
    );
    let cfg = RunConfig {
        state_dir: state_dir.to_path_buf(),
        repo: repo.to_path_buf(),
        board_dir: repo.join("backlog"),
        charter,
        base: None,
        pool: None,
        ship_cmd: None,
        autocomplete: !drover::shadow::auto::forbidden_by_env(),
        repair_rounds: runner::DEFAULT_REPAIR_ROUNDS,
        turn_timeout: Duration::from_secs(60),
        unattended: Default::default(),
    };
    let st = runner::run(&mut lanes, cfg, |m| say(&format!("  {m}")))
        .map_err(|e| fail(e.exit_code(), e.to_string()))?;
    say("close-out");
    println!();
    if keep {
        return super::loopcmd::print_final(&st, false);
    }
    // The files go with the demo's dir: the close-out is shown, not pointed to.
    // Its `## Take the work` names a repository about to go: left out.
    if let Some(p) = &st.closeout {
        let text = std::fs::read_to_string(p)?;
        let shown = text.split("\n## Take the work\n").next().unwrap_or(&text);
        print!("{shown}");
    }
    Ok(exit::OK)
}

//! `drover demo`: the main job on built-in simulated agents — no API keys, no
//! network, under a minute. In a temporary git repo: a four-role registry,
//! three sim-agent lanes, three jobs dispatched (one finishes cleanly, one
//! blocks on a permission prompt, one reports from the wrong attempt), the
//! shadow decisions shown live; then the same with auto-completion on, and a
//! summary table. Runs its own supervisor in a temporary state dir.

use super::{Ctx, client_err, fail};
use drover::agent::State;
use drover::daemon::Client;
use drover::dispatch::{DispatchSpec, dispatch};
use drover::engine::{Action, Actor, Engine, Request};
use drover::exit;
use drover::proto::{Op, PaneSpec, args};
use drover::shadow::ShadowDecision;
use drover::statedir::StateDirBuf;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Leave the supervisor and its panes running at the end (to attach).
    #[arg(long)]
    pub keep: bool,
    /// Run a three-task loop on sim lanes instead and print its close-out.
    #[arg(long = "loop")]
    pub loop_run: bool,
}

/// The lanes: (pane, sim profile, script, what it shows).
const LANES: [(&str, &str, &str, &str); 3] = [
    (
        "clean",
        "claude",
        r#"[[turn]]
steps = [{ work = 700 }, { write = { path = "NOTES.md", content = "done\n" } }, { report = { path = "report.json" } }, "finish"]
"#,
        "finishes cleanly",
    ),
    (
        "asks",
        "codex",
        r#"[[turn]]
steps = [{ work = 400 }, { ask = "rm -rf build/" }, { report = { path = "report.json" } }, "finish"]
"#,
        "blocks on a permission prompt",
    ),
    (
        "stale",
        "claude",
        r#"[[turn]]
steps = [{ work = 500 }, { report = { path = "report.json", fields = { attempt_id = "attempt-from-yesterday" } } }, "finish"]
"#,
        "reports from the wrong attempt",
    ),
];

/// How long a phase may take before the demo gives up on it.
const PHASE_TIMEOUT: Duration = Duration::from_secs(20);

struct Demo {
    client: Client,
    state_dir: StateDirBuf,
    started: Instant,
}

impl Demo {
    fn say(&self, msg: &str) {
        println!("[{:>5.1}s] {msg}", self.started.elapsed().as_secs_f64());
    }

    fn call<O: Op>(&mut self, op: O) -> anyhow::Result<O::Reply> {
        self.client.call(op).map_err(client_err)
    }
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    run_git(
        drover::git::Git::new(dir).identity("drover demo", "demo@drover.invalid"),
        args,
    )
}

/// Run `git` with `args` for a demo: a failure names the command and what
/// git said.
pub(super) fn run_git(git: drover::git::Git, args: &[&str]) -> anyhow::Result<()> {
    let out = git
        .args(args)
        .output()
        .map_err(|e| fail(exit::ERROR, format!("the demo needs git: {e}")))?;
    if !out.status.success() {
        return Err(fail(
            exit::ERROR,
            format!(
                "git {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(())
}

pub fn run(args: DemoArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    if args.loop_run {
        return super::demo_loop::run(args.keep, ctx);
    }
    let tmp = std::env::temp_dir().join(format!("drover-demo-{}", std::process::id()));
    let repo = tmp.join("repo");
    std::fs::create_dir_all(&repo)?;
    let state_dir = StateDirBuf::new(std::fs::canonicalize(&tmp)?.join("state"));
    std::fs::create_dir_all(&state_dir)?;
    let socket =
        drover::paths::socket_path(&state_dir).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    let exe = std::env::current_exe()?;
    let client = Client::connect_or_start(&state_dir, &socket, Some(&exe)).map_err(client_err)?;
    let mut d = Demo {
        client,
        state_dir: state_dir.clone(),
        started: Instant::now(),
    };
    let result = tour(&mut d, &repo, &exe);
    if !args.keep && result.is_ok() {
        println!(
            "Run `drover demo --keep` to look at its three panes afterwards (it prints the commands)."
        );
    }
    if args.keep {
        let sd = drover::shell::quote(&state_dir.display().to_string());
        println!();
        println!("The supervisor and its panes are still running, in the demo's own state dir:");
        println!("  drover --state-dir {sd} status");
        println!(
            "  drover --state-dir {sd} attach asks     # the permission prompt; Ctrl-\\ detaches"
        );
        println!(
            "  drover --state-dir {sd} approve asks    # or deny: answered, confirmed by the dialog leaving"
        );
        println!("  drover --state-dir {sd} kill-server     # when done");
        println!(
            "  rm -rf {}",
            drover::shell::quote(&tmp.display().to_string())
        );
        println!("or, for this shell: export DROVER_STATE_DIR={sd}");
        return result.map(|()| exit::OK);
    }
    let _ = d.call(args::Shutdown {});
    let _ = drover::daemon::client::wait_stopped(&state_dir, Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(&tmp);
    result.map(|()| exit::OK)
}

fn tour(d: &mut Demo, repo: &Path, exe: &Path) -> anyhow::Result<()> {
    d.say("a temporary git repo and a four-role registry");
    git(repo, &["init", "-q", "-b", "main"])?;
    std::fs::write(repo.join("README.md"), "demo repo\n")?;
    git(repo, &["add", "README.md"])?;
    git(repo, &["commit", "-q", "-m", "initial"])?;
    drover::registry::init(
        &d.state_dir,
        &drover::registry::InitRequest {
            topology: drover::registry::Topology::FourRole,
            agent_mix: None,
            force: false,
        },
    )
    .map_err(|e| fail(exit::ERROR, e.to_string()))?;
    let table = drover::registry::view::show(&d.state_dir, chrono::Utc::now())
        .map_err(|e| fail(exit::ERROR, e.to_string()))?;
    for line in table.lines() {
        println!("    {line}");
    }

    d.say("three sim-agent lanes, each in its own worktree");
    for (pane, profile, script, what) in LANES {
        let wt = repo.join(".worktrees").join(pane);
        git(
            repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                &format!("drover/{pane}"),
                &wt.display().to_string(),
            ],
        )?;
        std::fs::write(wt.join("script.toml"), script)?;
        let spec = PaneSpec {
            name: pane.to_string(),
            argv: vec![
                exe.display().to_string(),
                "sim-agent".into(),
                "--profile".into(),
                profile.to_string(),
                "--script".into(),
                "script.toml".into(),
            ],
            env: vec![
                ("DROVER_SESSION_ID".into(), "implementer".into()),
                ("DROVER_LANE_ID".into(), format!("implementer-{pane}")),
            ],
            cwd: Some(wt.clone()),
            cols: 120,
            rows: 40,
            agent: "sim".into(),
        };
        d.call(args::PaneNew {
            spec,
            backend: None,
            split: None,
        })?;
        d.say(&format!("  lane {pane:<6} ({profile} profile): {what}"));
    }
    let panes: Vec<String> = LANES.iter().map(|l| l.0.to_string()).collect();
    let v = d.call(args::Wait::all(panes.clone(), [State::Idle], 10_000))?;
    if v.timed_out {
        return Err(fail(exit::TIMEOUT, "the sim agents did not become idle"));
    }
    d.say("all three agents are idle (a barrier woke on the observation changes)");

    let shadow = phase(d, repo, "shadow", false)?;
    // A lane holds one running job: the shadow round's jobs make way.
    let engine = Engine::open(&d.state_dir).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    for job in shadow.keys() {
        let mut req = Request::new(
            job.clone(),
            Action::Cancel {
                reason: Some("demo: the shadow round is over".into()),
            },
            Actor::operator(),
        );
        req.expected_status = Some(drover::engine::Status::Running);
        let _ = engine.transition(&req);
    }
    d.say("the shadow round's jobs are cancelled: a lane holds one running job at a time");
    // A fresh generation for each lane before the second round.
    for pane in &panes {
        d.call(args::PaneRespawn { pane: pane.clone() })?;
    }
    d.call(args::Wait::all(panes.clone(), [State::Idle], 10_000))?;
    let auto = phase(d, repo, "auto", true)?;
    lanes_round(d, repo, exe)?;

    println!();
    d.say("summary");
    println!(
        "    {:<14} {:<30} {:<22} {:<14} {:<10}",
        "JOB", "EXPECTED", "DECISION", "AFTER ROUND", "NOW"
    );
    for (rows, label) in [(shadow, "shadow"), (auto, "auto-completion")] {
        for (job, (decision, status, expect)) in rows {
            let now = engine
                .show(&job)
                .map(|r| r.status.as_str().to_string())
                .unwrap_or_else(|_| "?".into());
            println!("    {job:<14} {expect:<30} {decision:<22} {status:<14} {now:<10}");
        }
        println!("    ({label} round)");
    }
    println!();
    println!("Shadow mode only records decisions: every job stayed running. With");
    println!("DROVER_AUTOCOMPLETE=1 the clean job was completed through the engine; the");
    println!("blocked one waits for a human and the wrong-attempt report is never trusted.");
    Ok(())
}

/// Lanes: a four-role topology of sim lanes (`lane up --sim`), a job
/// dispatched to each, `lane ls`, and `lane down --all` leaving nothing.
fn lanes_round(d: &mut Demo, repo: &Path, exe: &Path) -> anyhow::Result<()> {
    use drover::lane;
    let lane_err = |e: lane::LaneError| fail(e.exit_code(), e.to_string());
    println!();
    d.say(
        "lanes: `lane up --topology four-role --sim`, a worktree and a pane per (session, agent)",
    );
    let topology = drover::registry::Topology::FourRole;
    for role in topology.roles() {
        for agent in drover::registry::Agent::ALL {
            let id = lane::lane_id(role.session_id, agent);
            let dir = d.state_dir.lane_dir(&id);
            std::fs::create_dir_all(&dir)?;
            let report = d.state_dir.lane_report(&id).display().to_string();
            std::fs::write(
                d.state_dir.lane_sim_script(&id),
                format!(
                    "[[turn]]\nsteps = [{{ work = 400 }}, {{ report = {{ path = {report:?} }} }}, \"finish\"]\n"
                ),
            )?;
        }
    }
    let socket =
        drover::paths::socket_path(&d.state_dir).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    let req = lane::up::UpRequest {
        topology,
        repo: repo.to_path_buf(),
        base: None,
        agents: drover::registry::Agent::ALL.to_vec(),
        sessions: None,
        backend: drover::pane::Backend::Native,
        sim: true,
        exe: exe.to_path_buf(),
        env: Vec::new(),
        socket,
        ready_timeout: PHASE_TIMEOUT,
    };
    let t = Instant::now();
    let report = lane::up::up(&d.state_dir, &mut d.client, &req).map_err(lane_err)?;
    d.say(&format!(
        "  {} lanes ready in {:.2}s, cut from {} at {}",
        report.lanes.len(),
        t.elapsed().as_secs_f64(),
        report.base_ref,
        &report.base_sha[..12]
    ));
    let engine = Engine::open(&d.state_dir).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    let recs = lane::load(&d.state_dir).map_err(lane_err)?.lanes;
    for rec in &recs {
        let job = format!("lane-{}", rec.lane_id);
        engine
            .transition(&Request::new(
                job.clone(),
                Action::Create { deadline: None },
                Actor::operator(),
            ))
            .map_err(|e| fail(exit::ERROR, e.to_string()))?;
        let spec = DispatchSpec {
            job_id: job,
            pane: rec.pane.clone(),
            session_id: rec.session_id.clone(),
            prompt: format!("Review your part of the change as the {}.", rec.role),
            report_path: None,
            worktree: None,
            autocomplete: false,
            ready_timeout_ms: None,
            report_by: Default::default(),
        };
        dispatch(&d.state_dir, &mut d.client, &spec)
            .map_err(|e| fail(exit::ERROR, e.to_string()))?;
    }
    d.say(&format!(
        "  dispatched a job to each of the {} lanes",
        recs.len()
    ));
    let ids: Vec<String> = recs.iter().map(|r| r.lane_id.clone()).collect();
    let v = d.call(args::Wait::all(
        ids,
        [State::Done, State::Idle],
        PHASE_TIMEOUT.as_millis() as u64,
    ))?;
    if v.timed_out {
        return Err(fail(exit::TIMEOUT, "the lanes did not finish their jobs"));
    }
    // The turn ends before the watcher has read the report: wait for its
    // decision, so `lane ls` does not show a lane still `hold_busy`.
    let deadline = Instant::now() + PHASE_TIMEOUT;
    let busy = |rows: &[lane::ls::LaneView]| {
        rows.iter()
            .filter(|r| {
                r.decision
                    .as_deref()
                    .is_some_and(|x| x.starts_with("hold_busy"))
            })
            .count()
    };
    let mut rows = lane::ls::ls(&d.state_dir, Some(&mut d.client)).map_err(lane_err)?;
    while busy(&rows) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        rows = lane::ls::ls(&d.state_dir, Some(&mut d.client)).map_err(lane_err)?;
    }
    match busy(&rows) {
        0 => d.say("  every lane reported and finished its turn; `lane ls`:"),
        n => d.say(&format!(
            "  every lane finished its turn; the watcher has not yet read {n} report(s); `lane ls`:"
        )),
    }
    super::lane::print_ls(&rows, true);
    // The lanes' jobs end with their lanes (cancelled through the engine).
    for rec in &recs {
        let job = format!("lane-{}", rec.lane_id);
        let mut req = Request::new(
            job.clone(),
            Action::Cancel {
                reason: Some("demo: lanes taken down".into()),
            },
            Actor::operator(),
        );
        req.expected_status = Some(drover::engine::Status::Running);
        let status = engine
            .transition(&req)
            .map(|a| a.record().status.as_str().to_string())
            .unwrap_or_else(|e| format!("not cancelled: {e}"));
        println!("    {job} {status}");
    }
    let out = lane::down::down(&d.state_dir, Some(&mut d.client), None).map_err(lane_err)?;
    let removed = out.iter().filter(|o| o.removed).count();
    let left = std::fs::read_dir(d.state_dir.worktrees_dir())
        .map(|r| r.count())
        .unwrap_or(0);
    d.say(&format!(
        "  `lane down --all`: {removed} of {} lanes removed (clean and merged); {left} worktrees left",
        out.len()
    ));
    Ok(())
}

type Row = (String, String, String);

fn phase(
    d: &mut Demo,
    repo: &Path,
    round: &str,
    autocomplete: bool,
) -> anyhow::Result<BTreeMap<String, Row>> {
    println!();
    d.say(&format!(
        "round {round}: dispatching three jobs, auto-completion {}",
        if autocomplete {
            "ON"
        } else {
            "off (shadow mode)"
        }
    ));
    let engine = Engine::open(&d.state_dir).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    let decisions_path = d.state_dir.decisions_log();
    let seen_before = drover::store::read_jsonl::<ShadowDecision>(&decisions_path)
        .map(|r| r.records.len())
        .unwrap_or(0);
    let expect = |pane: &str| match pane {
        "clean" => "complete",
        "asks" => "escalate_blocked",
        _ => "hold_unattributed",
    };
    let mut jobs = Vec::new();
    for (pane, ..) in LANES {
        let job = format!("{round}-{pane}");
        engine
            .transition(&Request::new(
                job.clone(),
                Action::Create { deadline: None },
                Actor::operator(),
            ))
            .map_err(|e| fail(exit::ERROR, e.to_string()))?;
        let wt = repo.join(".worktrees").join(pane);
        let spec = DispatchSpec {
            job_id: job.clone(),
            pane: pane.to_string(),
            session_id: "implementer".into(),
            prompt: format!("Task {job}: update the notes and report back."),
            report_path: Some(wt.join("report.json")),
            worktree: Some(wt),
            autocomplete: autocomplete && !drover::shadow::auto::forbidden_by_env(),
            ready_timeout_ms: None,
            report_by: Default::default(),
        };
        let out = dispatch(&d.state_dir, &mut d.client, &spec)
            .map_err(|e| fail(exit::ERROR, e.to_string()))?;
        d.say(&format!(
            "  dispatched {job} to {pane} (attempt {}…)",
            &out.attempt_id[..8]
        ));
        jobs.push((job, pane));
    }
    // Show decisions as the supervisor's shadow loop appends them, until each
    // job has the decision its scenario leads to.
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    let mut printed = seen_before;
    let deadline = Instant::now() + PHASE_TIMEOUT;
    loop {
        let all = drover::store::read_jsonl::<ShadowDecision>(&decisions_path)
            .map(|r| r.records)
            .unwrap_or_default();
        // Jobs of an earlier round keep being watched; show this round's only.
        for dcs in all
            .iter()
            .skip(printed)
            .filter(|x| x.job_id.starts_with(round))
        {
            let action = dcs
                .action
                .as_deref()
                .map(|a| format!(" → {a}"))
                .unwrap_or_default();
            let mut reason = dcs.reason.clone();
            if reason.len() > 96 {
                let cut = (0..=96)
                    .rev()
                    .find(|i| reason.is_char_boundary(*i))
                    .unwrap_or(0);
                reason.truncate(cut);
                reason.push('…');
            }
            d.say(&format!(
                "  shadow: {:<12} {:<18} {reason}{action}",
                dcs.job_id, dcs.decision
            ));
            last.insert(dcs.job_id.clone(), dcs.decision.clone());
        }
        printed = all.len();
        let settled = jobs.iter().all(|(job, pane)| {
            let want = expect(pane);
            let status = engine
                .show(job)
                .map(|r| r.status.as_str().to_string())
                .unwrap_or_default();
            last.get(job).map(String::as_str) == Some(want)
                && (!autocomplete || want != "complete" || status == "completed")
        });
        if settled || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut rows = BTreeMap::new();
    for (job, pane) in &jobs {
        let status = engine
            .show(job)
            .map(|r| r.status.as_str().to_string())
            .unwrap_or_else(|_| "?".into());
        let decision = last
            .get(job)
            .cloned()
            .unwrap_or_else(|| "(none yet)".into());
        rows.insert(
            job.clone(),
            (decision, status, format!("{} ({pane})", expect(pane))),
        );
    }
    Ok(rows)
}

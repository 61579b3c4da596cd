//! `drover loop status|control`: a run's `run.json` shown, and a control
//! set on a running loop.

use super::loopcmd::{RunArgs, lerr, run_cmd, run_number};
use super::{Ctx, fail};
use clap::Args;
use drover::exit;
use drover::loopctl::run::rundir;
use drover::runstate::status::{self, Question, RunStatus};
use drover::runstate::usage::RunUsage;
use drover::statedir::StateDir;

pub(super) fn control_cmd(a: super::loopcmd::ControlArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    use drover::loopctl::night::control::{self, Control};
    let c = Control::parse(&a.control).ok_or_else(|| {
        fail(
            exit::USAGE,
            super::fmt::unknown(
                "control",
                &a.control,
                &["pause", "resume", "close-out", "emergency-stop"],
            ),
        )
    })?;
    let state_dir = ctx.state_dir()?;
    let n = run_number(&a.run)?;
    let state = drover::statedir::StateDir::new(&state_dir);
    let set = match control::request(state, n, c, &a.reason) {
        Ok(control::Requested::Set(set)) => set,
        // Closed here, without a resume: nothing of it goes on.
        Ok(control::Requested::CloseWithoutResume) => {
            return close_without_resume(n, &a.reason, ctx);
        }
        Err(e) => return Err(fail(e.exit_code(), e.to_string())),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&set)?);
    } else {
        let ruling = set.ruling().map_or("none (running)", |r| r.0.as_str());
        println!("loop{n}: {} set; ruling now: {ruling}", c.as_str());
    }
    Ok(exit::OK)
}

/// `loop control N close-out` on a run whose loop process is gone: the run
/// is closed as `loop run --resume N` would open it (its recorded repo,
/// board, charter and lanes), without starting or re-running anything.
fn close_without_resume(n: u32, reason: &str, ctx: &Ctx) -> anyhow::Result<u8> {
    use clap::FromArgMatches;
    let n = n.to_string();
    let m = RunArgs::augment_args(clap::Command::new("run")).try_get_matches_from([
        "run",
        "--resume",
        n.as_str(),
    ])?;
    let mut args = RunArgs::from_arg_matches(&m)?;
    args.close_only = Some(reason.to_string());
    run_cmd(args, ctx)
}

/// The questions held overnight come first once overnight is over (during
/// it, only how many are held).
fn print_held_questions(st: &RunStatus) {
    let held: Vec<&Question> = st.questions.iter().filter(|q| q.overnight).collect();
    if held.is_empty() {
        return;
    }
    let mode = st.mode.as_str();
    if mode.starts_with("overnight") && st.finished_at.is_none() {
        println!("{mode}: {} question(s) held in QUESTIONS.md", held.len());
        return;
    }
    println!("Questions held overnight ({}):", held.len());
    for q in held {
        println!(
            "- {} {}: {} — recommendation: {}",
            q.at, q.task, q.question, q.recommendation
        );
    }
    println!();
}

pub(super) fn status(a: super::loopcmd::StatusArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let state_dir = ctx.state_dir()?;
    let state = StateDir::new(&state_dir);
    let n = match &a.run {
        Some(r) => run_number(r)?,
        None => match status::runs(state).last() {
            Some(n) => *n,
            None => return Err(fail(exit::USAGE, "no loop runs in this state dir yet")),
        },
    };
    let run = rundir::RunDir::open(state, n).map_err(lerr)?;
    let path = run.file("run.json");
    let missing = || fail(exit::ERROR, format!("{} is missing", path.display()));
    if a.json {
        // The document as the loop wrote it, every key kept, with whether a
        // loop process works it now (a run whose loop died says so).
        let mut v: serde_json::Value = drover::store::read_json(&path)
            .map_err(|e| fail(exit::ERROR, e.to_string()))?
            .ok_or_else(missing)?;
        if let Ok(st) = serde_json::from_value::<RunStatus>(v.clone()) {
            v["live"] = serde_json::Value::Bool(st.is_live());
            v["state"] = serde_json::Value::String(st.live_state().as_str().into());
            // The tasks' usage summed (each task's is under it, as written).
            v["usage"] = serde_json::to_value(RunUsage::of(&st.tasks))?;
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(exit::OK);
    }
    let st = status::read(state, n)
        .map_err(|e| fail(exit::ERROR, e.to_string()))?
        .ok_or_else(missing)?;
    print_held_questions(&st);
    println!(
        "loop{n} · {} · charter {} · pool {} · lanes cap {} · landings {}",
        st.live_state(),
        st.charter_sha256.chars().take(12).collect::<String>(),
        st.pool,
        st.lanes_cap,
        st.landings
    );
    println!("integration branch {}", st.integration_branch);
    let rows: Vec<Vec<String>> = st
        .tasks
        .iter()
        .map(|t| {
            let or_dash = |s: Option<&str>| s.unwrap_or("-").to_string();
            vec![
                t.id.clone(),
                t.kind().to_string(),
                or_dash(t.agent.map(|a| a.as_str())),
                t.round().to_string(),
                or_dash(t.lane()),
                t.sha().map_or("-".into(), |x| x.chars().take(12).collect()),
                or_dash(t.stall.as_deref()),
                or_dash(t.note().reason.as_deref()),
            ]
        })
        .collect();
    print!(
        "{}",
        drover::registry::view::table(
            &[
                "TASK", "PHASE", "AGENT", "ROUND", "LANE", "SHA", "STALL", "REASON"
            ],
            &rows
        )
    );
    let started = st.tasks.iter().filter(|t| t.work().is_some()).count();
    println!("usage: {}", RunUsage::of(&st.tasks).line(started));
    if let Some(s) = &st.stopped_by {
        println!("stopped by {s}");
    }
    if st.live_state() != st.state {
        println!("its loop process is gone: resume it with `drover loop run --resume {n}`");
    }
    if let Some(c) = &st.closeout {
        println!("close-out: {}", c.display());
    }
    Ok(exit::OK)
}

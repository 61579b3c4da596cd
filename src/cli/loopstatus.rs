//! `drover loop status|control`: a run's `run.json` shown, and a control
//! set on a running loop.

use super::loopcmd::{RunArgs, lerr, run_cmd, run_number};
use super::{Ctx, fail};
use clap::Args;
use drover::exit;
use drover::loopctl::run::{rundir, runner::RunStatus};

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
    let set = match control::request(&state_dir, n, c, &a.reason) {
        Ok(control::Requested::Set(set)) => set,
        // Closed here, without a resume: nothing of it goes on.
        Ok(control::Requested::CloseWithoutResume) => {
            return close_without_resume(n, &a.reason, ctx);
        }
        Err(control::ControlError::Loop(e)) => return Err(lerr(e)),
        Err(e) => return Err(fail(exit::REFUSED, e.to_string())),
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
fn print_held_questions(v: &serde_json::Value) {
    let held: Vec<&serde_json::Value> = v["questions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|q| q["overnight"].as_bool() == Some(true))
        .collect();
    if held.is_empty() {
        return;
    }
    let mode = v["mode"].as_str().unwrap_or("");
    if mode.starts_with("overnight") && v["finished_at"].is_null() {
        println!("{mode}: {} question(s) held in QUESTIONS.md", held.len());
        return;
    }
    println!("Questions held overnight ({}):", held.len());
    for q in held {
        let s = |k: &str| q[k].as_str().unwrap_or("?");
        println!(
            "- {} {}: {} — recommendation: {}",
            s("at"),
            s("task"),
            s("question"),
            s("recommendation")
        );
    }
    println!();
}

pub(super) fn status(a: super::loopcmd::StatusArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let state_dir = ctx.state_dir()?;
    let n = match &a.run {
        Some(r) => run_number(r)?,
        None => match rundir::runs(&state_dir).last() {
            Some(n) => *n,
            None => return Err(fail(exit::USAGE, "no loop runs in this state dir yet")),
        },
    };
    let run = rundir::RunDir::open(&state_dir, n).map_err(lerr)?;
    let path = run.file("run.json");
    let mut v: serde_json::Value = drover::store::read_json(&path)
        .map_err(|e| fail(exit::ERROR, e.to_string()))?
        .ok_or_else(|| fail(exit::ERROR, format!("{} is missing", path.display())))?;
    // Whether a loop process works it now: a run whose loop died says so.
    let live = serde_json::from_value::<RunStatus>(v.clone()).ok();
    if let Some(st) = &live {
        v["live"] = serde_json::Value::Bool(st.is_live());
        v["state"] = serde_json::Value::String(st.live_state().as_str().into());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(exit::OK);
    }
    print_held_questions(&v);
    println!(
        "loop{n} · {} · charter {} · pool {} · lanes cap {} · landings {}",
        v["state"].as_str().unwrap_or("?"),
        &v["charter_sha256"]
            .as_str()
            .unwrap_or("?")
            .chars()
            .take(12)
            .collect::<String>(),
        v["pool"],
        v["lanes_cap"],
        v["landings"]
    );
    println!(
        "integration branch {}",
        v["integration_branch"].as_str().unwrap_or("?")
    );
    let rows: Vec<Vec<String>> = v["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let s = |k: &str| t[k].as_str().unwrap_or("-").to_string();
            vec![
                s("id"),
                s("phase"),
                s("agent"),
                t["round"].to_string(),
                s("lane"),
                t["sha"]
                    .as_str()
                    .map_or("-".into(), |x| x.chars().take(12).collect()),
                t["stall"].as_str().unwrap_or("-").to_string(),
                s("reason"),
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
    if let Some(s) = v["stopped_by"].as_str() {
        println!("stopped by {s}");
    }
    if live.as_ref().is_some_and(|st| st.live_state() != st.state) {
        println!("its loop process is gone: resume it with `drover loop run --resume {n}`");
    }
    if let Some(c) = v["closeout"].as_str() {
        println!("close-out: {c}");
    }
    Ok(exit::OK)
}

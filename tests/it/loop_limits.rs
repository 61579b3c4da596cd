//! Usage limits in the loop, with sim agents in real panes on a fast clock:
//! a limit parks the lane (not a blocker) and it resumes and lands; a limit
//! sentence quoted in the agent's output parks nothing.

use crate::common;
use crate::loop_common;

use common::Drover;
use drover::loopctl::lanes::simlanes::SimLanes;
use drover::loopctl::night::clock;
use drover::loopctl::night::guards::Guards;
use drover::loopctl::night::settings::Unattended;
use drover::loopctl::run::runner::{self, Phase, RunConfig};
use loop_common::REVIEWER_PASS as REVIEWER;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A repo with `n` tasks, TASK-k claiming `f<k>.txt`, and a charter.
fn setup(d: &Drover, n: u32, gate: &str) -> (PathBuf, PathBuf) {
    loop_common::board_repo(d, n, &format!("- lanes: 4\n- pool: 1\n- gate: `{gate}`\n"))
}

fn lanes(d: &Drover, imp: String) -> SimLanes {
    loop_common::sim_lanes(d, imp, REVIEWER.into())
}

fn config(d: &Drover, repo: &Path, charter: &Path, u: Unattended) -> RunConfig {
    loop_common::run_config(d, repo, charter, 1, Duration::from_secs(120), u)
}

fn fast() -> Unattended {
    Unattended {
        clock: Arc::new(clock::FastClock::new(chrono::Utc::now(), 600)),
        guards: Guards {
            max_consecutive_blockers: 0,
            ..Guards::default()
        },
        ..Default::default()
    }
}

/// Guards usage-limit parking: TASK-1's lane hits a limit (no reset time on
/// screen), is parked with backoff — re-parked while the limit lasts — then
/// resumed with a "continue" turn, and lands; each park and the resume are
/// DECISIONS.md lines, and the park is no blocker.
#[test]
fn a_limit_parks_the_lane_then_it_resumes_and_lands() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, 1, "true");
    let imp = "[[turn]]\nmatch = \"role=implementer continue\"\nsteps = [{ work = 100 }, { write = { path = \"f1.txt\", content = \"1\\n\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n[[turn]]\nsteps = [{ work = 200 }, { limit = { ms = 2500 } }]\n".to_string();
    let mut ops = lanes(&d, imp);
    let mut cfg = config(&d, &repo, &charter, fast());
    cfg.turn_timeout = Duration::from_secs(24 * 3600);
    let st = runner::run(&mut ops, cfg, |m| eprintln!("loop: {m}")).unwrap();
    let t = &st.tasks[0];
    assert_eq!(t.kind(), Phase::Landed, "{t:?}");
    assert!(t.limit_parks >= 1, "{t:?}");
    assert_eq!(st.state.as_str(), "closed");
    let dec = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap();
    assert!(
        dec.lines()
            .any(|l| l.contains(" park: TASK-1: usage limit on lane l1-impl-task-1")),
        "{dec}"
    );
    assert_eq!(
        dec.lines()
            .filter(|l| l.contains(" resume: TASK-1: lane l1-impl-task-1 after its usage limit"))
            .count(),
        1,
        "{dec}"
    );
    let events = std::fs::read_to_string(d.state.join("registry/events.jsonl")).unwrap_or_default();
    assert!(
        events.contains("loop.limit.park") && events.contains("loop.limit.resume"),
        "{events}"
    );
}

/// Guards the quoted banner: the limit sentence in the agent's own output,
/// followed by more output and a finished turn, is not a limit.
#[test]
fn a_limit_quoted_in_output_parks_nothing() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, 1, "true");
    let imp = "[[turn]]\nsteps = [{ work = 100 }, { say = \"The log says: You've hit your limit · resets 3am (UTC)\" }, { say = \"That was another account; carrying on.\" }, { write = { path = \"f1.txt\", content = \"1\\n\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n".to_string();
    let mut ops = lanes(&d, imp);
    let st = runner::run(&mut ops, config(&d, &repo, &charter, fast()), |m| {
        eprintln!("loop: {m}")
    })
    .unwrap();
    let t = &st.tasks[0];
    assert_eq!(t.kind(), Phase::Landed, "{t:?}");
    assert_eq!(t.limit_parks, 0);
    let dec = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap();
    assert!(!dec.contains("usage limit"), "{dec}");
}

/// Guards usage-limit parking on a Codex lane: the Codex sim's limit screen
/// (the real wording, the reset time, the "Approaching rate limits" popup
/// offering a cheaper model) parks the lane; on resume the loop chooses
/// "Keep current model" by its label — never the first row, which would
/// switch the model — asks it to continue, and the task lands.
#[test]
fn a_codex_limit_with_its_popup_parks_then_keeps_the_model_and_lands() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, 2, "true");
    let resets = (chrono::Local::now() + chrono::Duration::minutes(2))
        .format("%-I:%M %p")
        .to_string();
    let write = |k: u32| {
        format!(
            "{{ write = {{ path = \"f{k}.txt\", content = \"{k}\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\""
        )
    };
    let mut codex = String::new();
    let mut claude = String::new();
    for k in 1..=2 {
        codex.push_str(&format!(
            "[[turn]]\nmatch = \"task=TASK-{k} round=1 role=implementer continue\"\nsteps = [{{ work = 100 }}, {}]\n",
            write(k)
        ));
        codex.push_str(&format!(
            "[[turn]]\nmatch = \"task=TASK-{k} \"\nsteps = [{{ work = 200 }}, {{ limit = {{ ms = 2500, resets = \"{resets}\", menu = [\"Switch to gpt-6-luna\", \"Keep current model\", \"Keep current model (never show again)\"] }} }}]\n"
        ));
        claude.push_str(&format!(
            "[[turn]]\nmatch = \"task=TASK-{k} \"\nsteps = [{{ work = 100 }}, {}]\n",
            write(k)
        ));
    }
    let exe = PathBuf::from(common::BIN);
    let client = drover::daemon::Client::connect_or_start(
        drover::statedir::StateDir::new(&d.state),
        &d.socket(),
        Some(&exe),
    )
    .unwrap();
    let scripts = move |s: &drover::loopctl::ops::LaneSpec| match (s.role, s.agent) {
        (drover::loopctl::ops::Role::Implementer, drover::registry::Agent::Codex) => codex.clone(),
        (drover::loopctl::ops::Role::Implementer, _) => claude.clone(),
        _ => REVIEWER.to_string(),
    };
    let mut ops = SimLanes::new(
        drover::statedir::StateDir::new(&d.state),
        client,
        &exe,
        Box::new(scripts),
    );
    let mut cfg = config(&d, &repo, &charter, fast());
    cfg.turn_timeout = Duration::from_secs(24 * 3600);
    let st = runner::run(&mut ops, cfg, |m| eprintln!("loop: {m}")).unwrap();
    assert!(
        st.tasks.iter().all(|t| t.kind() == Phase::Landed),
        "{:?}",
        st.tasks
    );
    let t = st
        .tasks
        .iter()
        .find(|t| t.agent == Some(drover::registry::Agent::Codex))
        .expect("a task implemented by Codex");
    assert!(t.limit_parks >= 1, "{t:?}");
    let dec = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap();
    let lane = format!("l1-impl-{}", t.id.to_lowercase());
    assert!(
        dec.lines()
            .any(|l| l.contains(&format!(" park: {}: usage limit on lane {lane}", t.id))),
        "{dec}"
    );
    // The popup is answered at the first resume; the limit line may still
    // show then (its reset is real time), and the re-park names the choice.
    assert!(
        dec.lines().any(|l| {
            let at = l.contains(&format!(" resume: {}: lane {lane}", t.id))
                || l.contains(&format!(
                    " park: {}: usage limit on lane {lane} not over yet",
                    t.id
                ));
            at && l.contains("chose \"Keep current model\"")
        }),
        "{dec}"
    );
    assert!(
        dec.lines()
            .any(|l| l.contains(&format!(" resume: {}: lane {lane}", t.id))),
        "{dec}"
    );
}

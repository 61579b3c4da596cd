//! The supervisor's evidence watcher: one task per dispatched job. It repeats
//! barriers on the job's pane (woken by observation changes, not polling),
//! appends every matched snapshot to the job's evidence, records transport
//! failures with the watcher's 1/2/4/8/16 s backoff (docs/agents.md), and asks the shadow
//! runner for a decision whenever the evidence changes. With auto-completion
//! on, a `complete` decision is committed through the engine.

use super::hub::Snapshot;
use super::server::Sup;
use crate::agent::State;
use crate::engine::{Engine, Status};
use crate::evidence::Evidence;
use crate::proto::args::EvidenceWatch;
use crate::proto::reply::Watching;
use crate::shadow::{Runner, RunningJob, auto};
use crate::watch::watcher::BACKOFF;
use std::sync::Arc;
use std::time::Duration;

/// While a job runs, look at its report this often even if the pane is quiet
/// (a lane may finalize its report after its last screen change).
pub const REPORT_RECHECK: Duration = Duration::from_secs(2);

/// What a watch was started with.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    pub job_id: String,
    pub attempt_id: String,
    pub session_id: String,
    pub pane: String,
    pub generation: u64,
    pub autocomplete: bool,
}

fn job_running(engine: &Engine, spec: &WatchSpec) -> bool {
    engine
        .show(&spec.job_id)
        .map(|r| r.status == Status::Running && r.attempt_id.as_deref() == Some(&spec.attempt_id))
        .unwrap_or(false)
}

fn observation(spec: &WatchSpec, s: &Snapshot) -> Evidence {
    Evidence::Observation {
        t_ms: crate::paths::now_ms(),
        state: s.state,
        state_kind: s
            .kind
            .map(|k| k.to_string())
            .or_else(|| s.exit_code.map(|c| c.to_string())),
        session_id: spec.session_id.clone(),
        pane_generation: s.generation,
        screen_hash: s.screen_hash.clone(),
    }
}

/// The agent's own turn end as evidence, when it is one the policy reads
/// (from a hook, notify or a transcript: the screen has its observations)
/// and newer than `after_ms`.
fn turn_end(
    spec: &WatchSpec,
    generation: u64,
    end: &crate::proto::fuse::TurnEnd,
    after_ms: u64,
) -> Option<Evidence> {
    use crate::proto::Source;
    let from_agent = matches!(
        end.at.source,
        Source::Hook | Source::Notify | Source::Transcript
    );
    (from_agent && end.at.at_ms > after_ms).then(|| Evidence::TurnEnd {
        t_ms: end.at.at_ms,
        how: end.how,
        source: end.at.source,
        error: end.error,
        message_sha256: end.message_sha256.clone(),
        session_id: spec.session_id.clone(),
        pane_generation: generation,
    })
}

/// Run the watch until the job leaves `running` for this attempt.
pub(super) async fn watch(sup: Arc<Sup>, spec: WatchSpec) {
    let state_dir = sup.state_dir().to_path_buf();
    let runner = Runner::new(crate::statedir::StateDir::new(&state_dir));
    let engine = match Engine::open(crate::statedir::StateDir::new(&state_dir)) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(job = %spec.job_id, error = %e, "evidence watch cannot open the jobs");
            return;
        }
    };
    let autocomplete = spec.autocomplete && !auto::forbidden_by_env();
    let job = RunningJob {
        job_id: spec.job_id.clone(),
        attempt_id: Some(spec.attempt_id.clone()),
    };
    let mut last: Option<Snapshot> = None;
    // The watcher library's schedule: 1, 2, 4, 8, 16 s, reset by a success.
    let mut backoff = BACKOFF;
    let mut failing = false;
    let mut anchored = false;
    // Turn ends before the dispatch belong to earlier turns (the watch
    // starts after the delivery, which a quick agent's turn can outrun);
    // after that, each is recorded once (by when the supervisor took it).
    let mut turn_seen_ms = runner
        .evidence()
        .read(&spec.job_id)
        .ok()
        .and_then(|evs| crate::evidence::latest_dispatch(&evs).map(Evidence::t_ms))
        .unwrap_or_else(crate::paths::now_ms);
    tracing::info!(job = %spec.job_id, pane = %spec.pane, autocomplete, "evidence watch started");
    while job_running(&engine, &spec) {
        let mut changed = false;
        match sup.entry(&spec.pane) {
            Err(_) => {
                // The pane is gone: a disconnect is not a completion.
                let _ = runner.evidence().append(
                    &spec.job_id,
                    &Evidence::Transport {
                        t_ms: crate::paths::now_ms(),
                        result: "error".into(),
                        detail: "pane gone".into(),
                    },
                );
                last = None;
                failing = true;
                decide(&runner, &engine, &job, autocomplete).await;
                tokio::time::sleep(backoff.next_delay()).await;
                continue;
            }
            Ok(entry) => {
                let prev = last.clone();
                let res = sup
                    .wait_for(&entry, REPORT_RECHECK, move |s| {
                        prev.as_ref().is_none_or(|p| !p.same_state(s))
                    })
                    .await;
                match res {
                    Ok(Some(snap)) => {
                        if failing {
                            let _ = runner.evidence().append(
                                &spec.job_id,
                                &Evidence::Transport {
                                    t_ms: crate::paths::now_ms(),
                                    result: "ok".into(),
                                    detail: "pane reachable again".into(),
                                },
                            );
                            failing = false;
                            backoff.reset();
                        }
                        let _ = runner
                            .evidence()
                            .append(&spec.job_id, &observation(&spec, &snap));
                        if !anchored
                            && snap.generation == spec.generation
                            && matches!(snap.state, State::Working | State::Blocked)
                        {
                            let _ = runner.evidence().append(
                                &spec.job_id,
                                &Evidence::ExecutionAnchor {
                                    t_ms: crate::paths::now_ms(),
                                    attempt_id: spec.attempt_id.clone(),
                                    session_id: spec.session_id.clone(),
                                    pane_generation: snap.generation,
                                    detail:
                                        "watcher saw the agent working on the dispatch's generation"
                                            .into(),
                                },
                            );
                            anchored = true;
                        }
                        last = Some(snap);
                        changed = true;
                    }
                    Ok(None) => {
                        // Quiet pane: a new report deserves a fresh matched snapshot.
                        if runner
                            .collect_report(&spec.job_id, crate::paths::now_ms())
                            .unwrap_or(false)
                        {
                            let snap = sup.snapshot(&entry);
                            let _ = runner
                                .evidence()
                                .append(&spec.job_id, &observation(&spec, &snap));
                            last = Some(snap);
                            changed = true;
                        }
                    }
                    Err(_) => continue,
                }
                if let Some((generation, end)) = super::fusion::turn_end(&entry)
                    && let Some(ev) = turn_end(&spec, generation, &end, turn_seen_ms)
                {
                    turn_seen_ms = end.at.at_ms;
                    let _ = runner.evidence().append(&spec.job_id, &ev);
                    changed = true;
                }
            }
        }
        if changed {
            decide(&runner, &engine, &job, autocomplete).await;
        }
    }
    tracing::info!(job = %spec.job_id, "evidence watch ended: the job left running");
}

async fn decide(runner: &Runner, engine: &Engine, job: &RunningJob, autocomplete: bool) {
    let runner = runner.clone();
    let engine = engine.clone();
    let job = job.clone();
    // File I/O and git: off the async workers.
    let _ = tokio::task::spawn_blocking(move || {
        let now = crate::paths::now_ms();
        if let Err(e) = runner.collect_report(&job.job_id, now) {
            tracing::warn!(job = %job.job_id, error = %e, "cannot collect the report");
        }
        let d = match runner.decide(&job, now) {
            Ok(Some(d)) => d,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(job = %job.job_id, error = %e, "cannot decide");
                return;
            }
        };
        let mut d = d;
        if autocomplete {
            // Recorded before the engine acts on it (auto::commit_and_record).
            if let Err(e) = auto::commit_and_record(&engine, &runner, &mut d) {
                tracing::warn!(job = %job.job_id, error = %e, "cannot commit or record the decision");
            }
        } else if let Err(e) = runner.record(&d) {
            tracing::warn!(job = %job.job_id, error = %e, "cannot record the decision");
        }
        tracing::info!(job = %job.job_id, decision = %d.decision, action = ?d.action, "shadow decision");
    })
    .await;
}

/// The `evidence.watch` op: start a watch task.
pub(super) fn start(
    sup: &Arc<Sup>,
    a: EvidenceWatch,
) -> Result<Watching, super::protocol::Response> {
    super::protocol::args::check_evidence_watch(&a)?;
    let spec = WatchSpec {
        job_id: a.job_id,
        attempt_id: a.attempt_id,
        session_id: a.session_id,
        pane: a.pane,
        generation: a.generation,
        autocomplete: a.autocomplete,
    };
    sup.entry(&spec.pane)?;
    super::report::on_dispatch(sup, &spec.pane, &spec.job_id);
    let out = Watching {
        job_id: spec.job_id.clone(),
        pane: spec.pane.clone(),
        watching: true,
    };
    tokio::spawn(watch(sup.clone(), spec));
    Ok(out)
}

/// At supervisor start: the panes of running jobs died with the previous
/// supervisor, and no watcher follows them any more. Say so in their
/// evidence, so the policy holds on transport doubt (`hold_reconnect`) rather
/// than reasoning from what was seen before the gap.
pub(super) fn mark_restart(state_dir: &std::path::Path) {
    if !crate::statedir::StateDir::new(state_dir)
        .jobs_dir()
        .is_dir()
    {
        return;
    }
    let Ok(engine) = Engine::open(crate::statedir::StateDir::new(state_dir)) else {
        return;
    };
    let runner = Runner::new(crate::statedir::StateDir::new(state_dir));
    let jobs = match engine.list() {
        Ok(j) => j,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list jobs at start");
            return;
        }
    };
    for job in jobs.into_iter().filter(|j| j.status == Status::Running) {
        let Ok(events) = runner.evidence().read(&job.job_id) else {
            continue;
        };
        if crate::evidence::latest_dispatch(&events).is_none() {
            continue;
        }
        let ev = Evidence::Transport {
            t_ms: crate::paths::now_ms(),
            result: "error".into(),
            detail: "supervisor restarted: the job's pane and watcher are gone".into(),
        };
        match runner.evidence().append(&job.job_id, &ev) {
            Ok(()) => tracing::info!(job = %job.job_id, "marked transport doubt after restart"),
            Err(e) => tracing::warn!(job = %job.job_id, error = %e, "cannot mark restart"),
        }
        // Decide again now, so `drover status` does not show the decision
        // made before the gap as if it still held.
        let running = RunningJob {
            job_id: job.job_id.clone(),
            attempt_id: job.attempt_id.clone(),
        };
        let now = crate::paths::now_ms();
        match runner.decide(&running, now) {
            Ok(Some(d)) => match runner.record(&d) {
                Ok(()) => {
                    tracing::info!(job = %job.job_id, decision = %d.decision, "re-decided after restart");
                }
                Err(e) => {
                    tracing::warn!(job = %job.job_id, error = %e, "cannot record the decision")
                }
            },
            Ok(None) => {}
            Err(e) => tracing::warn!(job = %job.job_id, error = %e, "cannot decide after restart"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Source;
    use crate::proto::fuse::{EndHow, Mark, TurnEnd};

    fn spec() -> WatchSpec {
        WatchSpec {
            job_id: "J1".into(),
            attempt_id: "A1".into(),
            session_id: "implementer".into(),
            pane: "p".into(),
            generation: 1,
            autocomplete: false,
        }
    }

    fn end(at_ms: u64, source: Source) -> TurnEnd {
        TurnEnd {
            at: Mark { at_ms, source },
            how: EndHow::Ended,
            error: None,
            message_sha256: Some("0b".repeat(32)),
        }
    }

    #[test]
    fn only_the_agents_own_turn_ends_after_the_dispatch_are_evidence() {
        for source in [Source::Hook, Source::Notify, Source::Transcript] {
            let ev = turn_end(&spec(), 2, &end(100, source), 50);
            assert!(
                matches!(ev, Some(Evidence::TurnEnd { t_ms: 100, pane_generation: 2, source: s, .. }) if s == source),
                "{ev:?}"
            );
        }
        // Before the dispatch (or already recorded): another turn's.
        assert_eq!(turn_end(&spec(), 1, &end(50, Source::Hook), 50), None);
        // The screen, the title, the status line never end a turn here.
        for source in [Source::Screen, Source::Title, Source::Osc, Source::Status] {
            assert_eq!(turn_end(&spec(), 1, &end(100, source), 50), None);
        }
    }
}

//! Watching a real reviewer's job for its stated verdict ([`crate::loopctl::review::verdict`]):
//! while the job has no outcome from the engine (a reviewer that could run
//! `drover session-heartbeat` and write its report completes the usual way),
//! the agent's transcript is read every [`READ_EVERY`]. A stated verdict is
//! recorded as the reviewer's heartbeat (pass or fail, for the task and the
//! lane's agent), its findings go to the lane's `report-v<round>.md` (a run
//! artifact; the reply never reaches events or logs) and the job is
//! completed by the supervisor. A turn that ended without a verdict, or an
//! agent quiet for [`QUIET_NO_VERDICT`] with none, is `no-verdict`: the job
//! is cancelled and the task held, never passed.

use crate::agent::State;
use crate::engine::{Action, Actor, Engine, Request, Status};
use crate::loopctl::LoopError;
use crate::loopctl::ops::{LaneHandle, LaneObs, Outcome};
use crate::loopctl::review::verdict::{self, Reading, Stated};
use crate::registry::heartbeat::{self, HeartbeatRequest};
use crate::statedir::StateDir;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// How often a reviewer's transcript is read while its job runs.
pub const READ_EVERY: Duration = Duration::from_millis(500);
/// How long a reviewer may sit idle (its turn over) with no verdict in any
/// transcript before the review is `no-verdict`.
pub const QUIET_NO_VERDICT: Duration = Duration::from_secs(30);
/// The outcome status of a review that stated no verdict.
pub const NO_VERDICT: &str = "no-verdict";

/// One reviewer job being watched.
#[derive(Debug, Clone)]
pub struct ReviewWatch {
    pub lane: LaneHandle,
    pub job: String,
    pub attempt: String,
    /// The job's report path; the findings go beside it as `.md`.
    pub report: PathBuf,
    /// When the job was dispatched (older transcripts are not read).
    pub since: SystemTime,
    quiet_since: Option<Instant>,
    next_read: Instant,
    root: Option<PathBuf>,
}

impl ReviewWatch {
    pub fn new(
        lane: &LaneHandle,
        job: &str,
        attempt: &str,
        report: &Path,
        since: SystemTime,
    ) -> Self {
        ReviewWatch {
            lane: lane.clone(),
            job: job.to_string(),
            attempt: attempt.to_string(),
            report: report.to_path_buf(),
            since,
            quiet_since: None,
            next_read: Instant::now(),
            root: None,
        }
    }

    /// The transcript root, from the agent process's environment (`pid`),
    /// else the lanes' `--env`, else this process's.
    fn root(&mut self, pid: Option<u32>, user_env: &[(String, String)]) -> Option<PathBuf> {
        if self.root.is_none() {
            let proc_env = pid.map(verdict::process_env).unwrap_or_default();
            let get = |k: &str| {
                proc_env
                    .iter()
                    .chain(user_env)
                    .find(|(n, _)| n == k)
                    .map(|(_, v)| v.clone())
                    .or_else(|| std::env::var(k).ok())
            };
            self.root = verdict::transcript_root(self.lane.agent, &get);
        }
        self.root.clone()
    }

    /// The job's outcome when the reviewer's turn has settled it; `None`
    /// while it has not (or between reads).
    pub fn check(
        &mut self,
        state: &StateDir,
        pid: Option<u32>,
        obs: Option<&LaneObs>,
        user_env: &[(String, String)],
    ) -> Result<Option<Outcome>, LoopError> {
        let now = Instant::now();
        if now < self.next_read {
            return Ok(None);
        }
        self.next_read = now + READ_EVERY;
        let marker = format!("attempt={}", self.attempt);
        let reading = match self.root(pid, user_env) {
            Some(root) => verdict::find(
                self.lane.agent,
                &root,
                &marker,
                self.since,
                Some(&self.lane.cwd),
            ),
            None => Reading::Pending,
        };
        match reading {
            Reading::Stated { verdict, findings } => {
                self.stated(state, &verdict, &findings).map(Some)
            }
            Reading::NoVerdict => self
                .no_verdict(state, "the reviewer's last reply has no `VERDICT:` line")
                .map(Some),
            Reading::Pending => {
                let quiet = obs.is_some_and(|o| matches!(o.state, State::Idle | State::Done));
                if !quiet {
                    self.quiet_since = None;
                    return Ok(None);
                }
                let since = *self.quiet_since.get_or_insert(now);
                if now.duration_since(since) < QUIET_NO_VERDICT {
                    return Ok(None);
                }
                self.no_verdict(
                    state,
                    "the reviewer is idle and no transcript holds a verdict for this round",
                )
                .map(Some)
            }
        }
    }

    fn stated(&self, state: &StateDir, v: &Stated, findings: &str) -> Result<Outcome, LoopError> {
        let md = self.report.with_extension("md");
        let reason = match v {
            Stated::Pass => String::new(),
            Stated::Fail(r) if r.is_empty() => "no reason given".into(),
            Stated::Fail(r) => r.clone(),
        };
        let head = match v {
            Stated::Pass => "pass".to_string(),
            Stated::Fail(_) => format!("fail: {reason}"),
        };
        let body = format!(
            "# Review: {} ({})\n\nVerdict: {head}\nReviewer: {} (stated in its reply)\n\n## Findings\n\n{}\n",
            self.lane.task,
            self.job,
            self.lane.agent,
            if findings.is_empty() {
                "(none)"
            } else {
                findings
            }
        );
        crate::store::write_bytes_atomic(&md, body.as_bytes())?;
        // The loop reads `findings` for a failed review's repair evidence:
        // the one-line reason and where the whole review is.
        let report = serde_json::json!({
            "source": "stated-verdict",
            "verdict": v.status(),
            // The stated one-line reason alone (a fleet host sends it back).
            "reason": reason,
            "findings": match v {
                Stated::Pass => String::new(),
                Stated::Fail(_) => format!("{reason} (review: {})", md.display()),
            },
        });
        crate::store::write_json_atomic(&self.report, &report)?;
        heartbeat::heartbeat(
            state,
            &HeartbeatRequest {
                session_id: self.lane.role.session_id().into(),
                task: Some(self.lane.task.clone()),
                status: v.status().into(),
                agent: Some(self.lane.agent),
                ..Default::default()
            },
            chrono::Utc::now(),
        )?;
        self.finish(
            state,
            Action::Complete {
                reason: Some(format!("the reviewer stated {}", v.status())),
            },
            Status::Completed,
        )?;
        self.event(state, v.status());
        Ok(Outcome::Completed)
    }

    fn no_verdict(&self, state: &StateDir, why: &str) -> Result<Outcome, LoopError> {
        self.finish(
            state,
            Action::Cancel {
                reason: Some(format!("{NO_VERDICT}: {why}")),
            },
            Status::Cancelled,
        )?;
        self.event(state, "none");
        Ok(Outcome::Failed {
            status: NO_VERDICT.into(),
            reason: why.into(),
        })
    }

    /// End the job, unless it already ended that way (a heartbeat and report
    /// from the agent may have completed it meanwhile). Completing is the
    /// supervisor's row of the table; cancelling is an operator's.
    fn finish(&self, state: &StateDir, action: Action, to: Status) -> Result<(), LoopError> {
        let engine = Engine::open(state)?;
        let actor = if to == Status::Cancelled {
            Actor::operator()
        } else {
            Actor::supervisor()
        };
        let req =
            Request::new(self.job.clone(), action, actor).expect_attempt(self.attempt.clone());
        match engine.transition(&req) {
            Ok(_) => Ok(()),
            Err(_) if engine.show(&self.job).is_ok_and(|r| r.status == to) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn event(&self, state: &StateDir, verdict: &str) {
        crate::registry::events::emit_quiet(
            state,
            "loop.verdict",
            serde_json::json!({"job": self.job, "task": self.lane.task,
                               "lane": self.lane.id, "verdict": verdict, "from": "reply"}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Agent;
    use crate::registry::heartbeat::SessionVerdict;
    use serde_json::json;

    /// A running reviewer job on a fresh state dir, and its watch over a
    /// Codex rollout under `<tmp>/codex` whose final reply is `last`.
    fn setup(last: &str) -> (tempfile::TempDir, ReviewWatch, Vec<(String, String)>) {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        crate::registry::init(
            StateDir::new(&state),
            &crate::registry::InitRequest {
                topology: crate::registry::Topology::FourRole,
                agent_mix: None,
                force: false,
            },
        )
        .unwrap();
        let engine = Engine::open(crate::statedir::StateDir::new(&state)).unwrap();
        for a in [
            Action::Create { deadline: None },
            Action::Claim {
                session: "reviewer".into(),
            },
        ] {
            engine
                .transition(&Request::new("J", a, Actor::operator()))
                .unwrap();
        }
        let attempt = engine.show("J").unwrap().attempt_id.unwrap();
        let since = SystemTime::now();
        let day = d.path().join("codex/sessions/2026/12/01");
        std::fs::create_dir_all(&day).unwrap();
        let line = |v: serde_json::Value| format!("{v}\n");
        let prompt = format!("Review. End with `VERDICT: pass`.\n[drover] job=J attempt={attempt}");
        let text = [
            line(
                json!({"type": "response_item", "payload": {"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": prompt}]}}),
            ),
            line(
                json!({"type": "response_item", "payload": {"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": last}]}}),
            ),
            line(json!({"type": "event_msg", "payload": {"type": "task_complete"}})),
        ]
        .concat();
        std::fs::write(day.join("rollout-1.jsonl"), text).unwrap();
        let lane_dir = state.join("loop1").join("l1-rev-task-1");
        std::fs::create_dir_all(&lane_dir).unwrap();
        let lane = LaneHandle {
            id: "l1-rev-task-1".into(),
            role: crate::loopctl::ops::Role::Reviewer,
            agent: Agent::Codex,
            task: "TASK-1".into(),
            pane: "l1-rev-task-1".into(),
            cwd: d.path().join("wt"),
            lane_dir: lane_dir.clone(),
        };
        let w = ReviewWatch::new(
            &lane,
            "J",
            &attempt,
            &lane_dir.join("report-v1.json"),
            since,
        );
        let env = vec![(
            "CODEX_HOME".to_string(),
            d.path().join("codex").display().to_string(),
        )];
        (d, w, env)
    }

    #[test]
    fn a_stated_fail_is_the_reviewers_heartbeat_and_completes_the_job() {
        let (d, mut w, env) = setup("Findings: secret-ish words.\nVERDICT: fail: no test");
        let state = d.path().join("state");
        let o = w.check(StateDir::new(&state), None, None, &env).unwrap();
        assert_eq!(o, Some(Outcome::Completed));
        let engine = Engine::open(crate::statedir::StateDir::new(&state)).unwrap();
        assert_eq!(engine.show("J").unwrap().status, Status::Completed);
        let reg = crate::registry::load_required(StateDir::new(&state)).unwrap();
        let v = heartbeat::verdict(
            reg.session("reviewer").unwrap(),
            "TASK-1",
            chrono::Utc::now(),
        );
        assert!(matches!(v, SessionVerdict::Fail(_)), "{v:?}");
        let md = std::fs::read_to_string(w.report.with_extension("md")).unwrap();
        assert!(md.contains("Verdict: fail: no test") && md.contains("secret-ish words"));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&w.report).unwrap()).unwrap();
        assert!(
            report["findings"]
                .as_str()
                .unwrap()
                .starts_with("no test (review: ")
        );
        // The reply's body reaches no event.
        let events = std::fs::read_to_string(state.join("registry/events.jsonl")).unwrap();
        assert!(events.contains("loop.verdict") && !events.contains("secret-ish"));
    }

    #[test]
    fn a_reply_without_a_verdict_cancels_the_job_and_is_no_verdict() {
        let (d, mut w, env) = setup("Looks fine to me.");
        let state = d.path().join("state");
        let o = w.check(StateDir::new(&state), None, None, &env).unwrap();
        assert!(
            matches!(&o, Some(Outcome::Failed { status, .. }) if status == NO_VERDICT),
            "{o:?}"
        );
        let engine = Engine::open(crate::statedir::StateDir::new(&state)).unwrap();
        assert_eq!(engine.show("J").unwrap().status, Status::Cancelled);
        assert!(!w.report.with_extension("md").exists());
    }
}

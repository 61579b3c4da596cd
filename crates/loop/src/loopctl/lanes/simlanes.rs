//! [`LaneOps`] over what the supervisor runs today: one pane per lane running
//! `drover sim-agent` (the simulated Claude or Codex) in the lane's worktree,
//! jobs through the engine, dispatch with confirmed delivery, and the
//! supervisor's shadow policy deciding. Used by `drover demo --loop`,
//! `drover loop run --sim-*` and the loop's tests; the scripts say what each
//! simulated lane does.

use crate::agent::{State, Until};
use crate::client::{Client, ClientError};
use crate::dispatch::{DispatchSpec, dispatch};
use crate::engine::{Action, Actor, Engine, Request, Status};
use crate::loopctl::LoopError;
use crate::loopctl::land::git;
use crate::loopctl::lanes::gone;
use crate::loopctl::ops::{JobSpec, LaneHandle, LaneObs, LaneOps, LaneSpec, Outcome, Role};
use crate::proto::{PaneEntry, PaneSpec, args};
use crate::shadow::ShadowDecision;
use crate::statedir::StateDir;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a new lane's agent may take to become idle.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How often outcomes are looked for while waiting.
const POLL: Duration = Duration::from_millis(100);
/// The escalating decision of the shadow policy.
const ESCALATE: &str = "escalate_blocked";

/// The script text for a lane (TOML or JSON, docs/agents.md).
pub type ScriptFor = Box<dyn FnMut(&LaneSpec) -> String>;

/// The script of a sim lane that was given none: a minimal obedient agent.
/// An implementer adds one line to the first file its task claims, in that
/// file's comment syntax and keeping all it holds (so the project's gate
/// stays as it was); a claim it cannot comment in (a glob, JSON, an unknown
/// kind) gets a new note file beside it instead, and a task that claims
/// nothing `notes/<TASK>.md`. It reports done and finishes; a reviewer
/// passes the candidate and reports.
pub fn obedient_script(role: Role, task: &str, claimed: &[String]) -> String {
    // A JSON string is a TOML basic string (the same escapes).
    let q = |s: &str| serde_json::Value::from(s).to_string();
    match role {
        Role::Implementer => {
            let said = format!("{task}: done by drover's simulated implementer");
            let (path, content, append) = match claimed.first() {
                None => (format!("notes/{task}.md"), format!("{said}\n"), false),
                Some(f) => match comment_line(f, &said) {
                    Some(line) => (f.clone(), format!("{line}\n"), true),
                    None => (beside(f, task), format!("{said}\n"), false),
                },
            };
            format!(
                "[[turn]]\nsteps = [{{ work = 300 }}, {{ write = {{ path = {}, content = {}, append = {append} }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n",
                q(&path),
                q(&content)
            )
        }
        Role::Reviewer => "[[turn]]\nsteps = [{ work = 300 }, { heartbeat = { status = \"pass\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n".to_string(),
    }
}

/// `text` as a comment line of the file `path` (by its name), or `None`
/// when the file is a glob or of a kind with no line comment drover knows.
fn comment_line(path: &str, text: &str) -> Option<String> {
    if path.contains(['*', '?', '[']) || path.ends_with('/') {
        return None;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    let hash = [
        "Makefile",
        "Dockerfile",
        "Gemfile",
        "Rakefile",
        ".gitignore",
    ];
    let line = match ext.as_deref() {
        _ if hash.contains(&name) => format!("# {text}"),
        Some(
            "py" | "sh" | "bash" | "zsh" | "rb" | "pl" | "toml" | "yaml" | "yml" | "r" | "cfg"
            | "conf" | "mk" | "cmake" | "nix" | "ex" | "exs" | "jl" | "tf",
        ) => format!("# {text}"),
        Some(
            "rs" | "js" | "mjs" | "cjs" | "ts" | "jsx" | "tsx" | "c" | "h" | "cc" | "cpp" | "hpp"
            | "go" | "java" | "kt" | "swift" | "cs" | "scala" | "php" | "dart" | "zig",
        ) => format!("// {text}"),
        Some("sql" | "lua" | "hs" | "elm") => format!("-- {text}"),
        Some("md" | "markdown" | "html" | "htm" | "xml" | "svg") => format!("<!-- {text} -->"),
        Some("css" | "scss" | "less") => format!("/* {text} */"),
        Some("txt" | "rst" | "adoc") => text.to_string(),
        _ => return None,
    };
    Some(line)
}

/// A new note file for `task` in the directory of claim `path` (the part
/// before any glob).
fn beside(path: &str, task: &str) -> String {
    let lit = path.split(['*', '?', '[']).next().unwrap_or("");
    match lit.rfind('/') {
        Some(i) => format!("{}/{task}.drover-sim.md", &lit[..i]),
        None => format!("{task}.drover-sim.md"),
    }
}

/// Simulated lanes on the supervisor.
pub struct SimLanes {
    state_dir: crate::statedir::StateDirBuf,
    client: Client,
    exe: PathBuf,
    scripts: ScriptFor,
    mine: BTreeSet<String>,
    /// The lane and pane each dispatched job runs on.
    on: BTreeMap<String, (String, String)>,
    /// Jobs whose pane the last check found gone: failed only when the next
    /// check still finds them running, so a report written just before the
    /// agent ended is the policy's to complete first.
    gone_once: BTreeSet<String>,
}

pub(in crate::loopctl) fn lane_err(lane: &str, e: impl std::fmt::Display) -> LoopError {
    LoopError::Lane {
        lane: lane.to_string(),
        message: e.to_string(),
    }
}

/// The lanes of `mine` that are live in the live listing (a pane listed
/// `lost` went with an earlier supervisor: not live).
pub(in crate::loopctl) fn live_lanes(
    client: &mut Client,
    mine: &BTreeSet<String>,
) -> Result<Vec<String>, LoopError> {
    let v = client.call(args::PaneLs {}).map_err(|e| lane_err("-", e))?;
    Ok(v.iter()
        .filter_map(PaneEntry::live)
        .filter(|p| p.info.exit.is_none())
        .map(|p| p.info.name.clone())
        .filter(|n| mine.contains(n))
        .collect())
}

/// Kill pane `pane` of lane `lane`; a pane already gone is not an error.
pub(in crate::loopctl) fn kill_pane(
    client: &mut Client,
    lane: &str,
    pane: &str,
) -> Result<(), LoopError> {
    let kill = args::PaneKill {
        pane: pane.to_string(),
    };
    match client.call(kill) {
        Ok(_) => Ok(()),
        Err(e) if e.to_string().contains("no pane named") => Ok(()),
        Err(e) => Err(lane_err(lane, e)),
    }
}

impl SimLanes {
    /// The lane's usage tally as `pane.explain` gives it, after waiting up
    /// to `settle_ms` for its status line to report its last turn.
    fn explained_usage(
        &mut self,
        lane: &LaneHandle,
        settle_ms: Option<u64>,
    ) -> Option<crate::proto::usage::Usage> {
        let ask = args::PaneExplain {
            pane: lane.pane.clone(),
            settle_ms,
        };
        self.client.call(ask).ok().and_then(|e| e.usage)
    }

    /// `exe` is the drover binary (it runs `sim-agent`).
    pub fn new(state_dir: &StateDir, client: Client, exe: &Path, scripts: ScriptFor) -> SimLanes {
        SimLanes {
            state_dir: state_dir.to_path_buf().into(),
            client,
            exe: exe.to_path_buf(),
            scripts,
            mine: BTreeSet::new(),
            on: BTreeMap::new(),
            gone_once: BTreeSet::new(),
        }
    }

    /// Fail each of `jobs` (still running in the engine) whose pane the
    /// live listing shows exited, lost or gone. A supervisor that does not
    /// answer is not judged here: the stall watch sees it.
    fn fail_gone(&mut self, engine: &Engine, jobs: &[String]) -> Result<(), LoopError> {
        let watched: Vec<(&String, &(String, String))> = jobs
            .iter()
            .filter_map(|j| self.on.get(j).map(|lp| (j, lp)))
            .collect();
        if watched.is_empty() {
            return Ok(());
        }
        let Ok(listing) = self.client.call(args::PaneLs {}) else {
            return Ok(());
        };
        let mut now_gone = BTreeSet::new();
        for (job, (lane, pane)) in watched {
            if engine.show(job)?.status.is_terminal() {
                continue;
            }
            if let Some(why) = gone::gone_reason(lane, pane, job, gone::entry(&listing, pane)) {
                if self.gone_once.contains(job) {
                    gone::fail_job(engine, job, &why);
                } else {
                    now_gone.insert(job.clone());
                }
            }
        }
        self.gone_once = now_gone;
        Ok(())
    }

    fn decision_of(&self, job: &str, attempt: Option<&str>) -> Option<ShadowDecision> {
        let path = crate::statedir::StateDir::new(&self.state_dir).decisions_log();
        let all = crate::store::read_jsonl::<ShadowDecision>(&path)
            .ok()?
            .records;
        all.into_iter()
            .rev()
            .find(|d| d.job_id == job && attempt.is_none_or(|a| a == d.attempt_id))
    }
}

impl LaneOps for SimLanes {
    fn up(&mut self, spec: &LaneSpec) -> Result<LaneHandle, LoopError> {
        let cwd = match &spec.worktree {
            Some(w) => {
                git::add_worktree(&w.repo, &w.path, &w.branch, &w.base)?;
                w.path.clone()
            }
            None => spec.cwd.clone(),
        };
        let script = spec.lane_dir.join("script.toml");
        crate::store::write_bytes_atomic(&script, (self.scripts)(spec).as_bytes())?;
        let socket =
            crate::paths::socket_path(&self.state_dir).map_err(|e| lane_err(&spec.id, e))?;
        let role = match spec.role {
            Role::Implementer => "Implementer",
            Role::Reviewer => "Reviewer",
        };
        let env = [
            (
                crate::statedir::env::SESSION_ID,
                spec.role.session_id().to_string(),
            ),
            (crate::statedir::env::LANE_ID, spec.id.clone()),
            (crate::statedir::env::ROLE, role.to_string()),
            (crate::statedir::env::AGENT, spec.agent.as_str().to_string()),
            (
                crate::statedir::env::STATE_DIR,
                self.state_dir.display().to_string(),
            ),
            (crate::statedir::env::SOCKET, socket.display().to_string()),
        ];
        let mut argv = vec![
            self.exe.display().to_string(),
            "sim-agent".into(),
            "--profile".into(),
            spec.agent.as_str().into(),
            "--script".into(),
            script.display().to_string(),
        ];
        if let Some(level) = &spec.effort {
            argv.extend(crate::lane::launch::effort_args(spec.agent, level));
        }
        let pane = PaneSpec {
            name: spec.id.clone(),
            argv,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cwd: Some(cwd.clone()),
            cols: 120,
            rows: 40,
            agent: "sim".into(),
        };
        self.client
            .call(args::PaneNew {
                spec: pane,
                backend: None,
                split: None,
            })
            .map_err(|e| lane_err(&spec.id, e))?;
        self.mine.insert(spec.id.clone());
        let v = self
            .client
            .call(args::Wait {
                panes: vec![spec.id.clone()],
                until: vec![Until {
                    state: State::Idle,
                    kind: None,
                }],
                mode: args::WaitMode::All,
                timeout_ms: Some(READY_TIMEOUT.as_millis() as u64),
                fresh: false,
            })
            .map_err(|e| lane_err(&spec.id, e))?;
        if v.timed_out {
            return Err(lane_err(&spec.id, "the agent did not become ready"));
        }
        Ok(LaneHandle {
            id: spec.id.clone(),
            role: spec.role,
            agent: spec.agent,
            task: spec.task.clone(),
            pane: spec.id.clone(),
            cwd,
            lane_dir: spec.lane_dir.clone(),
        })
    }

    fn live(&mut self) -> Result<Vec<String>, LoopError> {
        live_lanes(&mut self.client, &self.mine)
    }

    fn dispatch(&mut self, lane: &LaneHandle, job: &JobSpec) -> Result<String, LoopError> {
        let engine = Engine::open(&self.state_dir)?;
        engine.transition(&Request::new(
            job.job_id.clone(),
            Action::Create { deadline: None },
            Actor::operator(),
        ))?;
        let spec = DispatchSpec {
            job_id: job.job_id.clone(),
            pane: lane.pane.clone(),
            session_id: lane.role.session_id().to_string(),
            prompt: job.prompt.clone(),
            report_path: Some(job.report_path.clone()),
            worktree: Some(lane.cwd.clone()),
            autocomplete: job.autocomplete && !crate::shadow::auto::forbidden_by_env(),
            ready_timeout_ms: Some(READY_TIMEOUT.as_millis() as u64),
            report_by: match lane.role {
                Role::Implementer => crate::dispatch::ReportBy::Command {
                    cmd: self.report_command(),
                    files: job.report_files.clone(),
                },
                Role::Reviewer => crate::dispatch::ReportBy::Verdict,
            },
        };
        let out = dispatch(&self.state_dir, &mut self.client, &spec)
            .map_err(|e| lane_err(&lane.id, e))?;
        self.on
            .insert(job.job_id.clone(), (lane.id.clone(), lane.pane.clone()));
        Ok(out.attempt_id)
    }

    fn wait_decision(
        &mut self,
        jobs: &[String],
        timeout: Duration,
    ) -> Result<Vec<(String, Outcome)>, LoopError> {
        let engine = Engine::open(&self.state_dir)?;
        let deadline = Instant::now() + timeout;
        let mut checked: Option<Instant> = None;
        loop {
            let mut out = Vec::new();
            // A job whose pane or backend is gone fails now, with the cause.
            if checked.is_none_or(|t| t.elapsed() >= gone::PANE_CHECK_EVERY) {
                checked = Some(Instant::now());
                self.fail_gone(&engine, jobs)?;
            }
            for job in jobs {
                let rec = engine.show(job)?;
                let outcome = match rec.status {
                    Status::Completed => Some(Outcome::Completed),
                    Status::Failed | Status::Cancelled | Status::TimedOut => {
                        let (status, reason) = failed_outcome(&rec);
                        Some(Outcome::Failed { status, reason })
                    }
                    _ => self
                        .decision_of(job, rec.attempt_id.as_deref())
                        .filter(|d| d.decision == ESCALATE)
                        .map(|d| Outcome::Escalated {
                            decision: d.decision,
                            reason: d.reason,
                        }),
                };
                if let Some(o) = outcome {
                    self.on.remove(job);
                    out.push((job.clone(), o));
                }
            }
            if !out.is_empty() || Instant::now() >= deadline {
                return Ok(out);
            }
            std::thread::sleep(POLL.min(deadline.saturating_duration_since(Instant::now())));
        }
    }

    fn down(&mut self, lane: &LaneHandle) -> Result<(), LoopError> {
        kill_pane(&mut self.client, &lane.id, &lane.pane)?;
        self.mine.remove(&lane.id);
        Ok(())
    }

    fn observe(&mut self, lane: &LaneHandle) -> Result<Option<LaneObs>, LoopError> {
        // One read: the screen's rows (output is what moves on them, the
        // spinner and its timer left out) and the observation.
        let read = args::PaneRead {
            pane: lane.pane.clone(),
            raw: false,
            scrollback: None,
        };
        let v = match self.client.call(read) {
            Ok(v) => v,
            // No answer at all: the supervisor holding the lanes is gone, and
            // with it the lane; not a stall to wait out.
            Err(e) if !matches!(e, ClientError::Remote { .. }) => {
                return Err(lane_err(&lane.id, e));
            }
            Err(_) => {
                return Ok(Some(LaneObs {
                    reachable: false,
                    ..Default::default()
                }));
            }
        };
        let o = &v.observation;
        Ok(Some(LaneObs {
            state: o.state,
            kind: o.kind,
            // The snapshot carries it as evidence `resets_at:<RFC 3339>`.
            resets_at: o
                .evidence
                .iter()
                .filter_map(|e| e.strip_prefix("resets_at:"))
                .map(str::to_string)
                .next(),
            output: crate::loopctl::night::stall::progress_hash(&v.lines),
            reachable: true,
        }))
    }

    fn usage(&mut self, lane: &LaneHandle) -> Option<crate::proto::usage::Usage> {
        self.explained_usage(lane, None)
    }

    fn usage_final(&mut self, lane: &LaneHandle) -> Option<crate::proto::usage::Usage> {
        let settle = u64::try_from(crate::loopctl::ops::USAGE_SETTLE.as_millis()).ok();
        self.explained_usage(lane, settle)
    }

    fn answer(&mut self, lane: &LaneHandle, label: &str) -> Result<bool, LoopError> {
        // `pane.answer` chooses the row by its label (docs/protocol.md); no
        // menu showing is `refused`: "not answered".
        Ok(self
            .client
            .call(args::PaneAnswer {
                pane: lane.pane.clone(),
                action: args::AnswerAction::Answer,
                choice: Some(label.to_string()),
            })
            .is_ok())
    }

    fn reap(&mut self, prefix: &str) -> Result<Vec<String>, LoopError> {
        let v = self
            .client
            .call(args::PaneLs {})
            .map_err(|e| lane_err("-", e))?;
        let names: Vec<String> = v
            .iter()
            .map(|p| p.name().to_string())
            .filter(|n| n.starts_with(prefix))
            .collect();
        for n in &names {
            kill_pane(&mut self.client, n, n)?;
            self.mine.remove(n);
        }
        Ok(names)
    }

    fn interrupt(&mut self, lane: &LaneHandle) -> Result<(), LoopError> {
        self.client
            .call(args::PaneKeys {
                pane: lane.pane.clone(),
                keys: vec!["C-c".into()],
            })
            .map_err(|e| lane_err(&lane.id, e))?;
        Ok(())
    }

    fn prompt(&mut self, lane: &LaneHandle, text: &str) -> Result<bool, LoopError> {
        // Confirmed delivery, as a dispatch's; the lane is idle when asked.
        let deliver = args::Deliver {
            pane: lane.pane.clone(),
            text: text.to_string(),
            nonce: None,
            ready_timeout_ms: Some(PROMPT_READY_TIMEOUT.as_millis() as u64),
            confirm_timeout_ms: None,
        };
        match self.client.call(deliver) {
            Ok(_) => Ok(true),
            Err(ClientError::Remote { .. }) => Ok(false),
            Err(e) => Err(lane_err(&lane.id, e)),
        }
    }

    fn report_command(&self) -> String {
        crate::report::command_word(&self.exe)
    }
}

/// How long a reminder waits for an idle lane to take it.
const PROMPT_READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A failed job's status and reason as the loop shows them: the lane's own
/// words when it reported `failed` or `blocked` (the engine's record keeps
/// them as `the lane reported <outcome>: <reason>`), a `blocked` report
/// shown as `blocked`; else the record's reason, else its metadata's.
pub(crate) fn failed_outcome(rec: &crate::engine::JobRecord) -> (String, String) {
    let status = rec.status.as_str().to_string();
    let reason = rec
        .reason
        .clone()
        .filter(|r| !r.trim().is_empty())
        .or_else(|| {
            rec.metadata
                .get("reason")
                .and_then(|r| r.as_str())
                .map(str::to_string)
        })
        .unwrap_or_default();
    for said in ["failed", "blocked"] {
        if let Some(words) = reason.strip_prefix(&format!("the lane reported {said}: ")) {
            return (said.to_string(), words.to_string());
        }
    }
    (status, reason)
}

#[cfg(test)]
mod failed_outcome_tests {
    use super::failed_outcome;

    #[test]
    fn the_lanes_own_words_and_its_blocked_are_kept() {
        let mut rec: crate::engine::JobRecord = serde_json::from_value(serde_json::json!({
            "job_id": "j", "status": "failed", "iteration": 1, "attempt_id": null,
            "session_id": null, "deadline": null, "metadata": {}, "created_at": "2026-01-01T00:00:00.000Z",
            "updated_at": "2026-01-01T00:00:00.000Z", "transition_seq": 1,
            "reason": "the lane reported blocked: needs the staging database URL"
        }))
        .unwrap();
        assert_eq!(
            failed_outcome(&rec),
            ("blocked".into(), "needs the staging database URL".into())
        );
        rec.reason = Some("exhausted".into());
        assert_eq!(failed_outcome(&rec), ("failed".into(), "exhausted".into()));
    }
}

#[cfg(test)]
mod obedient_tests {
    use super::{beside, comment_line};

    #[test]
    fn a_line_in_the_files_own_comment_syntax_or_a_note_beside_it() {
        assert_eq!(comment_line("calc.py", "x").as_deref(), Some("# x"));
        assert_eq!(comment_line("src/a.rs", "x").as_deref(), Some("// x"));
        assert_eq!(
            comment_line("README.md", "x").as_deref(),
            Some("<!-- x -->")
        );
        assert_eq!(comment_line("Makefile", "x").as_deref(), Some("# x"));
        assert_eq!(comment_line("package.json", "x"), None);
        assert_eq!(comment_line("src/**", "x"), None);
        assert_eq!(beside("src/**", "TASK-1"), "src/TASK-1.drover-sim.md");
        assert_eq!(beside("data.json", "TASK-1"), "TASK-1.drover-sim.md");
    }
}

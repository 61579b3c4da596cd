//! One item's lane on this host: its worktree of the host repository at
//! the base, the lane brought up on this host's supervisor with the brief
//! built here ([`super::prompt`]), the wait for its outcome (within the
//! run's turn timeout, the report nudged as on the coordinator, a usage
//! limit seen) and what goes back: the candidate patch or the verdict.

use super::prompt::prompt;
use super::{ItemCtx, LaneEnd, host_repo};
use crate::client::Client;
use crate::engine::{Action, Actor, Engine, Request};
use crate::fleet::work::{self, Finished, Step, WorkItem};
use crate::loopctl::LoopError;
use crate::loopctl::land::git;
use crate::loopctl::lanes::lanes_ops::{LaneOptions, RealLanes};
use crate::loopctl::night::nudge::{self, Nudge};
use crate::loopctl::ops::{JobSpec, LaneHandle, LaneOps, LaneSpec, Outcome, Role};
use crate::registry::Agent;
use crate::registry::heartbeat::{self, SessionVerdict};
use crate::report::schema::Expect;
use crate::statedir::StateDir;
use std::path::Path;
use std::time::Duration;

/// How long one wait for a lane's outcome lasts (it is asked again).
const POLL: Duration = Duration::from_secs(1);
/// A lane's turn timeout when its item names none (an older coordinator):
/// the loop's default.
const TURN_TIMEOUT_S: u64 = 30 * 60;
/// The report grace when its item names none: the loop's default.
const REPORT_GRACE_S: u64 = crate::loopctl::night::settings::DEFAULT_REPORT_GRACE.as_secs();

/// How the wait for a lane's job ended.
enum Ended {
    Outcome(Outcome),
    /// At this host's usage limit (`resets_at` when the screen gave one).
    Limited(Option<String>),
}

impl ItemCtx {
    /// The lane of one attempt, from the bundle to the result.
    pub(super) fn lane(&self, item: &WorkItem, attempt: &str) -> Result<LaneEnd, LoopError> {
        let agent: Agent = match item.agent.as_str() {
            "claude" => Agent::Claude,
            "codex" => Agent::Codex,
            other => {
                return Err(LoopError::usage(
                    "agent",
                    format!("unknown agent {other:?}"),
                ));
            }
        };
        if item.sim_script.is_none() {
            let path = std::env::var("PATH").unwrap_or_default();
            if crate::pane::find_executable(agent.as_str(), &path, None).is_none() {
                return Ok(LaneEnd::Finished(Finished::Failed {
                    status: "refused".into(),
                    reason: format!(
                        "{} is not on host {}'s PATH",
                        agent.as_str(),
                        self.opts.cfg.host
                    ),
                }));
            }
        }
        let short: String = attempt
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(8)
            .collect();
        let id = format!("{}-{short}", item.lane);
        let root = StateDir::new(&self.opts.state_dir)
            .fleet_dir()
            .join("work")
            .join(&item.run);
        let dir = root.join(&id);
        // The lane dir (brief, report, the reviewer's copies of the
        // candidate: an added directory of the agent's) lies in the host
        // repository's own checkout, so trusting that repository covers it.
        let lane_dir = host_repo(crate::statedir::StateDir::new(&self.opts.state_dir))
            .join("lanes")
            .join(&item.run)
            .join(&id);
        let bundle = self.h.block_on(work::retrying(|| {
            work::get_bytes(&self.objects, &item.bundle)
        }))?;
        let branch = format!("drover/fleet/{id}");
        let result = self
            .checkout(item, &dir, &lane_dir, &branch, &bundle)
            .and_then(|()| self.lane_in(item, agent, &id, &dir, &lane_dir));
        // The worktree is this host's scratch copy of the coordinator's
        // tree: its candidate went back as a patch.
        {
            let _held = self.repo.lock().unwrap_or_else(|p| p.into_inner());
            let repo = host_repo(crate::statedir::StateDir::new(&self.opts.state_dir));
            let _ = git::run(
                &repo,
                &["worktree", "remove", "--force", &dir.to_string_lossy()],
            );
            let _ = git::run(&repo, &["worktree", "prune"]);
            let _ = git::run(&repo, &["branch", "-q", "-D", &branch]);
        }
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&lane_dir);
        // The run's dirs go with its last lane here (removed only empty).
        for d in [dir.parent(), lane_dir.parent()].into_iter().flatten() {
            let _ = std::fs::remove_dir(d);
        }
        result
    }

    /// The lane's worktree of this host's repository ([`host_repo`]) on a
    /// branch of its own at the item's base, fetched from the bundle. Its
    /// agents trust it as a worktree of that repository, as they trust a
    /// worktree of a repository on one host (docs/fleet.md).
    fn checkout(
        &self,
        item: &WorkItem,
        dir: &Path,
        lane_dir: &Path,
        branch: &str,
        bundle: &[u8],
    ) -> Result<(), LoopError> {
        let _ = std::fs::remove_dir_all(dir);
        crate::store::create_private_dir(lane_dir)?;
        if let Some(parent) = dir.parent() {
            crate::store::create_private_dir(parent)?;
        }
        let bundle_file = lane_dir.join("base.bundle");
        crate::store::write_bytes_atomic(&bundle_file, bundle)?;
        let _held = self.repo.lock().unwrap_or_else(|p| p.into_inner());
        let repo = host_repo(crate::statedir::StateDir::new(&self.opts.state_dir));
        if !repo.join(".git").exists() {
            crate::store::create_private_dir(&repo)?;
            git::run(&repo, &["init", "-q"])?;
        }
        git::run(
            &repo,
            &[
                "fetch",
                "-q",
                &bundle_file.to_string_lossy(),
                &format!("+{}/*:refs/drover/fleet-base/*", work::BUNDLE_REF),
            ],
        )?;
        let _ = std::fs::remove_file(&bundle_file);
        // A worktree of a host that died mid-lane is registered still.
        let _ = git::run(&repo, &["worktree", "prune"]);
        git::run(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-B",
                branch,
                &dir.to_string_lossy(),
                &item.base,
            ],
        )?;
        Ok(())
    }

    /// An object of the item's, fetched and checked.
    fn object(&self, r: &Option<work::ObjectRef>) -> Result<Option<Vec<u8>>, LoopError> {
        Ok(match r {
            Some(r) => Some(
                self.h
                    .block_on(work::retrying(|| work::get_bytes(&self.objects, r)))?,
            ),
            None => None,
        })
    }

    fn lane_in(
        &self,
        item: &WorkItem,
        agent: Agent,
        id: &str,
        dir: &Path,
        lane_dir: &Path,
    ) -> Result<LaneEnd, LoopError> {
        let candidate = self.object(&item.candidate)?;
        let before = self.object(&item.before_rebase)?;
        // A review reads the candidate, a later round goes on from its work
        // so far: the patch applied on the base. What a round adds is
        // what it sends back, against the tree it started from.
        if let Some(bytes) = candidate.as_ref().filter(|b| !b.is_empty()) {
            let file = lane_dir.join("candidate.patch");
            crate::store::write_bytes_atomic(&file, bytes)?;
            let file = file.to_string_lossy();
            let touched = git::run_bytes(dir, &["apply", "--numstat", "-z", &file])?;
            git::run(dir, &["apply", "--binary", "--index", &file])?;
            let bad = crate::fleet::candidate::escaping_symlinks(
                dir,
                &crate::fleet::candidate::patch_paths(&touched),
            );
            if !bad.is_empty() {
                return Err(LoopError::Lane {
                    lane: id.to_string(),
                    message: crate::fleet::candidate::describe(&bad),
                });
            }
        }
        let start_tree = git::line(dir, &["write-tree"])?;
        let role = match item.step {
            Step::Implement => Role::Implementer,
            Step::Review => Role::Reviewer,
        };
        let socket =
            crate::paths::socket_path(crate::statedir::StateDir::new(&self.opts.state_dir))
                .map_err(|e| LoopError::usage("state dir", e.to_string()))?;
        let connect = || {
            Client::connect(&socket).map_err(|e| LoopError::Lane {
                lane: id.to_string(),
                message: format!("this host's supervisor: {e}"),
            })
        };
        let mut opts = LaneOptions::new(&self.opts.exe);
        opts.backend = self.opts.backend;
        opts.env = self.opts.env.clone();
        if let Some(script) = item.sim_script.clone() {
            opts.sim = true;
            opts.scripts = Some(Box::new(move |_: &LaneSpec| script.clone()));
        }
        let mut lanes = RealLanes::new(
            crate::statedir::StateDir::new(&self.opts.state_dir),
            connect()?,
            connect()?,
            opts,
        );
        let (prompt, from_board) = prompt(
            item,
            role,
            id,
            dir,
            lane_dir,
            candidate.as_deref(),
            before.as_deref(),
            &lanes.report_command(),
        )?;
        (self.say)(&format!(
            "{}: lane {id} ({}, {}): {}",
            item.job,
            item.agent,
            role.as_str(),
            if from_board {
                "its brief built here from the board at the base"
            } else {
                "its task is not on the board at the base: a short prompt naming it"
            }
        ));
        let spec = LaneSpec {
            id: id.to_string(),
            role,
            agent,
            task: item.task.clone(),
            lane_dir: lane_dir.to_path_buf(),
            worktree: None,
            cwd: dir.to_path_buf(),
            effort: None,
            portable: false,
        };
        let handle = lanes.up(&spec)?;
        let job = format!("{}-{}", item.job, id.rsplit('-').next().unwrap_or("a"));
        let report = lane_dir.join("report.json");
        let run = || -> Result<LaneEnd, LoopError> {
            lanes.dispatch(
                &handle,
                &JobSpec {
                    job_id: job.clone(),
                    prompt,
                    report_path: report.clone(),
                    autocomplete: true,
                    report_files: item.report_files.clone(),
                    brief: Default::default(),
                },
            )?;
            let outcome = match self.outcome(&mut lanes, &handle, item, &job, &report)? {
                Ended::Outcome(o) => o,
                Ended::Limited(resets_at) => {
                    self.cancel(&job, "its agent is at its usage limit on this host");
                    return Ok(LaneEnd::Limited(resets_at));
                }
            };
            Ok(LaneEnd::Finished(match outcome {
                Outcome::Completed if role == Role::Reviewer => {
                    let reg = crate::registry::load_required(StateDir::new(&self.opts.state_dir))?;
                    let verdict = reg
                        .session(Role::Reviewer.session_id())
                        .map(|s| heartbeat::verdict(s, &item.task, chrono::Utc::now()))
                        .unwrap_or(SessionVerdict::NoPass("no reviewer session".into()));
                    match verdict {
                        SessionVerdict::Pass => Finished::Reviewed {
                            pass: true,
                            reason: String::new(),
                        },
                        SessionVerdict::Fail(why) | SessionVerdict::NoPass(why) => {
                            Finished::Reviewed {
                                pass: false,
                                reason: stated_reason(&report).unwrap_or(why),
                            }
                        }
                    }
                }
                Outcome::Completed => {
                    git::run(dir, &["add", "-A"])?;
                    let patch = git::run_bytes(
                        dir,
                        &["diff", "--cached", "--binary", "--full-index", &start_tree],
                    )?;
                    let name = format!("patch-{}-{}.patch", item.job, job);
                    // Into this host's own bucket, the one its user may
                    // write and the coordinator reads its candidates from.
                    let js = async_nats::jetstream::new(self.client.clone());
                    let (js, names, host) = (&js, &self.names, self.opts.cfg.host.as_str());
                    let (name, patch) = (name.as_str(), patch.as_slice());
                    let bucket = names.host_objects_bucket(host);
                    let bucket = bucket.as_str();
                    let patch = self.h.block_on(work::retrying(|| async move {
                        let own = work::open_host_objects(js, names, host).await?;
                        work::put_bytes(js, bucket, &own, name, patch).await
                    }))?;
                    Finished::Implemented { patch }
                }
                Outcome::Failed { status, reason } => Finished::Failed { status, reason },
                Outcome::Escalated { decision, reason } => Finished::Escalated { decision, reason },
            }))
        };
        let result = run();
        let _ = lanes.down(&handle);
        result
    }

    /// Wait for the outcome of the lane's job, within the run's turn
    /// timeout; an implementer at the end of its turn with no report that
    /// counts is answered or reminded once, as on the coordinator
    /// ([`crate::loopctl::night::nudge`]), then failed.
    fn outcome(
        &self,
        lanes: &mut RealLanes,
        lane: &LaneHandle,
        item: &WorkItem,
        job: &str,
        report: &Path,
    ) -> Result<Ended, LoopError> {
        let turn = Duration::from_secs(item.turn_timeout_s.unwrap_or(TURN_TIMEOUT_S).max(1));
        let grace = Duration::from_secs(item.report_grace_s.unwrap_or(REPORT_GRACE_S).max(1));
        let started = std::time::Instant::now();
        let mut said = Nudge::default();
        loop {
            if let Some((_, o)) = lanes
                .wait_decision(&[job.to_string()], POLL)?
                .into_iter()
                .next()
            {
                // The policy escalates a lane at a usage limit: on a fleet
                // that is this host's login, not the task's; another host's
                // may have room.
                if matches!(o, Outcome::Escalated { .. })
                    && let Some(obs) = lanes.observe(lane)?
                    && obs.kind == Some(crate::agent::BlockedKind::UsageLimit)
                {
                    return Ok(Ended::Limited(obs.resets_at));
                }
                return Ok(Ended::Outcome(o));
            }
            if started.elapsed() >= turn {
                self.cancel(job, "the turn timed out on this host");
                return Ok(Ended::Outcome(Outcome::Failed {
                    status: "timed-out".into(),
                    reason: format!("no outcome within {} s", turn.as_secs()),
                }));
            }
            if lane.role != Role::Implementer {
                continue;
            }
            let Some(obs) = lanes.observe(lane)? else {
                continue;
            };
            let now = chrono::Utc::now();
            if !matches!(
                obs.state,
                crate::agent::State::Idle | crate::agent::State::Done
            ) {
                said.ended_since = None;
                continue;
            }
            let since = *said.ended_since.get_or_insert(now);
            let attempt = Engine::open(crate::statedir::StateDir::new(&self.opts.state_dir))
                .ok()
                .and_then(|e| e.show(job).ok())
                .and_then(|r| r.attempt_id)
                .unwrap_or_default();
            let expect = Expect {
                attempt_id: &attempt,
                session_id: Role::Implementer.session_id(),
            };
            let found = nudge::found(report, &expect);
            let ended = crate::loopctl::night::clock::since(since, now);
            let cmd = lanes.report_command();
            let shown = report.display().to_string();
            match nudge::step(&said, &found, ended, grace) {
                nudge::Step::Nothing => {}
                nudge::Step::Answer(problems) => {
                    let files: Vec<&str> = item.report_files.iter().map(String::as_str).collect();
                    let example = crate::report::schema::example(&expect, &files);
                    let text = nudge::answer(job, &shown, &problems, &example, &cmd);
                    let sent = lanes.prompt(lane, &text)?;
                    (self.say)(&format!(
                        "{}: the report of {job} does not fit; {}",
                        item.job,
                        if sent {
                            "answered once"
                        } else {
                            "could not be answered"
                        }
                    ));
                    said.answered = true;
                    said.ended_since = None;
                }
                nudge::Step::Remind => {
                    let sent = lanes.prompt(lane, &nudge::reminder(job, &cmd, &shown))?;
                    (self.say)(&format!(
                        "{}: no report from {job}; {}",
                        item.job,
                        if sent {
                            "reminded once"
                        } else {
                            "could not be reminded"
                        }
                    ));
                    said.reminded = Some(now);
                    said.ended_since = None;
                }
                nudge::Step::Park => {
                    self.cancel(job, "no report after a reminder");
                    return Ok(Ended::Outcome(Outcome::Failed {
                        status: "no-report".into(),
                        reason: format!(
                            "no report from lane {} after a reminder; its agent must run `{cmd} report done`",
                            lane.id
                        ),
                    }));
                }
            }
        }
    }

    /// Cancel this host's job of a lane given up.
    fn cancel(&self, job: &str, why: &str) {
        if let Ok(engine) = Engine::open(crate::statedir::StateDir::new(&self.opts.state_dir)) {
            let _ = engine.transition(&Request::new(
                job.to_string(),
                Action::Cancel {
                    reason: Some(why.to_string()),
                },
                Actor::operator(),
            ));
        }
    }
}

/// A reviewer's stated one-line reason, from the report its verdict was
/// written to (the findings stay on this host).
fn stated_reason(report: &Path) -> Option<String> {
    let v: serde_json::Value = crate::store::read_json(report).ok().flatten()?;
    v["reason"]
        .as_str()
        .filter(|r| !r.is_empty())
        .map(str::to_string)
}

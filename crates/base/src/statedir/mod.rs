//! The state dir's layout: every file and folder drover keeps under the
//! state dir is named here once, as a method of [`StateDir`]; [`mod@env`] names
//! the `DROVER_*` environment. Where the state dir is comes from
//! [`crate::paths`]; what is in it, from here.
//!
//! [`StateDir`] is a view of a path, as [`Path`] is of an `OsStr`: a
//! `&Path` becomes a `&StateDir` for free ([`StateDir::new`]) and a
//! `&StateDir` is a `&Path` wherever one is asked for (it derefs to one), so
//! functions move from `state_dir: &Path` to `&StateDir` one at a time.
//! [`StateDirBuf`] is the owned one (as `PathBuf` is of `Path`), for what
//! keeps a state dir: a backend, a store, the CLI's context.

pub mod env;

use std::borrow::Borrow;
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// The file a running loop holds locked in its run dir.
pub const RUN_LOCK: &str = "run.lock";
/// The file that keeps the state dir out of `git status`.
pub const GITIGNORE: &str = ".gitignore";
/// How a job's record file ends in the jobs dir (`<job>.job.json`).
pub const JOB_SUFFIX: &str = ".job.json";
/// The engine's audit log's name in the jobs dir.
pub const AUDIT_FILE: &str = "audit.jsonl";
/// How a job's evidence file ends in the evidence dir (`<job>.jsonl`).
pub const EVIDENCE_SUFFIX: &str = ".jsonl";

/// A state dir, with its layout.
#[derive(Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct StateDir(Path);

impl StateDir {
    /// `path` as a state dir.
    pub fn new<P: AsRef<Path> + ?Sized>(path: &P) -> &StateDir {
        let p: &Path = path.as_ref();
        // SAFETY: StateDir is a repr(transparent) wrapper of Path, so the
        // two have one layout and pointer metadata (as Path over OsStr).
        unsafe { &*(p as *const Path as *const StateDir) }
    }

    /// The state dir itself.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The `.gitignore` of `*` that keeps the state dir out of `git status`.
    pub fn gitignore(&self) -> PathBuf {
        self.0.join(GITIGNORE)
    }

    /// The engine's jobs: one document per job and the audit log.
    pub fn jobs_dir(&self) -> PathBuf {
        self.0.join("jobs")
    }

    /// Job `job_id`'s record.
    pub fn job_record(&self, job_id: &str) -> PathBuf {
        self.jobs_dir().join(format!("{job_id}{JOB_SUFFIX}"))
    }

    /// The engine's audit log, one JSON line per request.
    pub fn jobs_audit(&self) -> PathBuf {
        self.jobs_dir().join(AUDIT_FILE)
    }

    /// The jobs' status mirror.
    pub fn jobs_status(&self) -> PathBuf {
        self.jobs_dir().join("status.json")
    }

    /// The lock every job transition holds.
    pub fn jobs_lock(&self) -> PathBuf {
        self.jobs_dir().join("registry.lock")
    }

    /// Held shared by every transition between its commit and its mirror
    /// step, so the last of a burst knows to write the mirror.
    pub fn jobs_in_flight(&self) -> PathBuf {
        self.jobs_dir().join("inflight.lock")
    }

    /// The hint of the last transition seq given out.
    pub fn jobs_seq_hint(&self) -> PathBuf {
        self.jobs_dir().join("seq.hint")
    }

    /// The seq counter of state dirs written before the hint.
    pub fn jobs_seq_legacy(&self) -> PathBuf {
        self.jobs_dir().join("seq.json")
    }

    /// The shadow policy's folder.
    pub fn shadow_dir(&self) -> PathBuf {
        self.0.join("shadow")
    }

    /// The shadow policy's decisions, one JSON line each.
    pub fn decisions_log(&self) -> PathBuf {
        self.shadow_dir().join("decisions.jsonl")
    }

    /// The registry's folder.
    pub fn registry_dir(&self) -> PathBuf {
        self.0.join("registry")
    }

    /// The session registry.
    pub fn registry_file(&self) -> PathBuf {
        self.registry_dir().join("session_registry.json")
    }

    /// The task leases.
    pub fn leases_file(&self) -> PathBuf {
        self.registry_dir().join("leases.json")
    }

    /// The agent mix.
    pub fn mix_file(&self) -> PathBuf {
        self.registry_dir().join("agent_mix.json")
    }

    /// The registry's events, one JSON line each.
    pub fn registry_events(&self) -> PathBuf {
        self.registry_dir().join("events.jsonl")
    }

    /// A session's assignment.
    pub fn assignment(&self, session_id: &str) -> PathBuf {
        self.registry_dir()
            .join("assignments")
            .join(format!("{session_id}.md"))
    }

    /// The lanes' records.
    pub fn lanes_file(&self) -> PathBuf {
        self.registry_dir().join("lanes.json")
    }

    /// The lock lane operations hold.
    pub fn lanes_op_lock(&self) -> PathBuf {
        self.registry_dir().join("lanes.op.lock")
    }

    /// The supervisor's logs.
    pub fn logs_dir(&self) -> PathBuf {
        self.0.join("logs")
    }

    /// The supervisor's own log.
    pub fn supervisor_log(&self) -> PathBuf {
        self.logs_dir().join("supervisor.log")
    }

    /// The lock the one supervisor of this state dir holds.
    pub fn supervisor_lock(&self) -> PathBuf {
        self.0.join("supervisor.lock")
    }

    /// Lanes' git worktrees.
    pub fn worktrees_dir(&self) -> PathBuf {
        self.0.join("worktrees")
    }

    /// Lane `lane_id`'s worktree.
    pub fn worktree(&self, lane_id: &str) -> PathBuf {
        self.worktrees_dir().join(lane_id)
    }

    /// Lanes' own folders (reports, briefs).
    pub fn lanes_dir(&self) -> PathBuf {
        self.0.join("lanes")
    }

    /// Lane `lane_id`'s folder.
    pub fn lane_dir(&self, lane_id: &str) -> PathBuf {
        self.lanes_dir().join(lane_id)
    }

    /// The lock a dispatch to lane `lane_id` holds.
    pub fn lane_dispatch_lock(&self, lane_id: &str) -> PathBuf {
        self.lane_dir(lane_id).join("dispatch.lock")
    }

    /// The script a sim lane's agent plays.
    pub fn lane_sim_script(&self, lane_id: &str) -> PathBuf {
        self.lane_dir(lane_id).join("sim-script.toml")
    }

    /// The report a lane's agent writes by default.
    pub fn lane_report(&self, lane_id: &str) -> PathBuf {
        self.lane_dir(lane_id).join("report.json")
    }

    /// Loop run `n`'s folder (`loop<n>`).
    pub fn run_dir(&self, n: u32) -> PathBuf {
        self.0.join(format!("loop{n}"))
    }

    /// Loop run `n`'s status.
    pub fn run_file(&self, n: u32) -> PathBuf {
        self.run_dir(n).join("run.json")
    }

    /// The lock the process running loop run `n` holds.
    pub fn run_lock(&self, n: u32) -> PathBuf {
        self.run_dir(n).join(RUN_LOCK)
    }

    /// The loop's console log.
    pub fn loop_log(&self) -> PathBuf {
        self.logs_dir().join("loop.log")
    }

    /// The lock one loop holds on the board whose key starts `key`.
    pub fn board_lock(&self, key: &str) -> PathBuf {
        self.0.join(format!("loop-board-{key}.lock"))
    }

    /// The lock a loop's probe of a new run holds.
    pub fn loop_probe_lock(&self) -> PathBuf {
        self.0.join("loop.probe.lock")
    }

    /// The agents' own signals' wiring, a folder per pane.
    pub fn signals_dir(&self) -> PathBuf {
        self.0.join("signals")
    }

    /// The Claude Code settings file (its hooks and status line) a pane's
    /// agent is started with (`--settings`).
    pub fn claude_settings(&self, pane: &str) -> PathBuf {
        self.signals_dir().join(pane).join("claude-settings.json")
    }

    /// Native panes' records.
    pub fn panes_dir(&self) -> PathBuf {
        self.0.join("panes")
    }

    /// Native pane `name`'s record.
    pub fn pane_record(&self, name: &str) -> PathBuf {
        self.panes_dir().join(format!("{name}.json"))
    }

    /// The herdr backend's folder.
    pub fn herdr_dir(&self) -> PathBuf {
        self.0.join("herdr")
    }

    /// herdr panes' records.
    pub fn herdr_panes_dir(&self) -> PathBuf {
        self.herdr_dir().join("panes")
    }

    /// herdr pane `name`'s record.
    pub fn herdr_pane(&self, name: &str) -> PathBuf {
        self.herdr_panes_dir().join(format!("{name}.json"))
    }

    /// Where herdr panes' exit statuses are written.
    pub fn herdr_exit_dir(&self) -> PathBuf {
        self.herdr_dir().join("exit")
    }

    /// Where herdr pane `name`'s wrapper writes generation `generation`'s
    /// exit status.
    pub fn herdr_exit_file(&self, name: &str, generation: u64) -> PathBuf {
        self.herdr_exit_dir().join(format!("{name}.{generation}"))
    }

    /// The tmux backend's folder.
    pub fn tmux_dir(&self) -> PathBuf {
        self.0.join("tmux")
    }

    /// tmux panes' records.
    pub fn tmux_panes_dir(&self) -> PathBuf {
        self.tmux_dir().join("panes")
    }

    /// The tmux server drover started.
    pub fn tmux_server(&self) -> PathBuf {
        self.tmux_dir().join("server.json")
    }

    /// tmux pane `name`'s record.
    pub fn tmux_pane(&self, name: &str) -> PathBuf {
        self.tmux_panes_dir().join(format!("{name}.json"))
    }

    /// An empty file whose presence says tmux pane `name`'s app enabled
    /// bracketed paste: tmux has no format that tells (checked on 3.3a), and
    /// a re-seeded screen needs it, or a prompt is typed and a fast Enter can
    /// be lost.
    pub fn tmux_paste(&self, name: &str) -> PathBuf {
        self.tmux_panes_dir().join(format!("{name}.paste"))
    }

    /// tmux panes' output pipes.
    pub fn tmux_pipes_dir(&self) -> PathBuf {
        self.tmux_dir().join("pipes")
    }

    /// tmux panes' start gates.
    pub fn tmux_gates_dir(&self) -> PathBuf {
        self.tmux_dir().join("gates")
    }

    /// The fleet's folder (host logs, the fleet's repository copy).
    pub fn fleet_dir(&self) -> PathBuf {
        self.0.join("fleet")
    }

    /// A fleet host's copy of the repository it works on.
    pub fn fleet_repo(&self) -> PathBuf {
        self.fleet_dir().join("repo")
    }

    /// The fleet log of `key`.
    pub fn fleet_log(&self, key: &str) -> PathBuf {
        self.fleet_dir().join(format!("{key}.jsonl"))
    }

    /// The fleet's configuration; there only on a fleet host.
    pub fn fleet_config(&self) -> PathBuf {
        self.0.join("fleet.json")
    }

    /// Evidence files.
    pub fn evidence_dir(&self) -> PathBuf {
        self.0.join("evidence")
    }

    /// Job `job_id`'s evidence, one JSON line per event.
    pub fn evidence_file(&self, job_id: &str) -> PathBuf {
        self.evidence_dir()
            .join(format!("{job_id}{EVIDENCE_SUFFIX}"))
    }

    /// Rehearsal `name`'s folder (its home, its mock's port).
    pub fn rehearsal_dir(&self, name: &str) -> PathBuf {
        self.0.join("rehearse").join(name)
    }

    /// Lanes' spawn records.
    pub fn spawn_dir(&self) -> PathBuf {
        self.0.join("spawn")
    }

    /// The lock of lane spawn slot `slot`.
    pub fn spawn_slot_lock(&self, slot: usize) -> PathBuf {
        self.spawn_dir().join(format!("slot-{slot}.lock"))
    }

    /// What `drover top` has shown already.
    pub fn top_seen(&self) -> PathBuf {
        self.0.join("top").join("seen.json")
    }

    /// `drover web`'s files (its token and audit log).
    pub fn web_dir(&self) -> PathBuf {
        self.0.join("web")
    }

    /// `drover web`'s token (0600).
    pub fn web_token(&self) -> PathBuf {
        self.web_dir().join("token")
    }

    /// What was asked of `drover web`, one JSON line per action.
    pub fn web_audit(&self) -> PathBuf {
        self.web_dir().join("audit.jsonl")
    }

    /// The user's detection rules.
    pub fn rules_file(&self) -> PathBuf {
        self.0.join("rules.toml")
    }
}

impl Deref for StateDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for StateDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

/// An owned state dir: derefs to a [`StateDir`] (and so to a [`Path`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StateDirBuf(PathBuf);

impl StateDirBuf {
    /// `path` as an owned state dir.
    pub fn new(path: impl Into<PathBuf>) -> StateDirBuf {
        StateDirBuf(path.into())
    }

    /// The path, given back.
    pub fn into_path_buf(self) -> PathBuf {
        self.0
    }
}

impl StateDir {
    /// An owned copy.
    pub fn to_buf(&self) -> StateDirBuf {
        StateDirBuf(self.0.to_path_buf())
    }
}

impl From<PathBuf> for StateDirBuf {
    fn from(p: PathBuf) -> Self {
        StateDirBuf(p)
    }
}

impl From<&StateDir> for StateDirBuf {
    fn from(sd: &StateDir) -> Self {
        sd.to_buf()
    }
}

impl Deref for StateDirBuf {
    type Target = StateDir;
    fn deref(&self) -> &StateDir {
        StateDir::new(&self.0)
    }
}

impl Borrow<StateDir> for StateDirBuf {
    fn borrow(&self) -> &StateDir {
        self
    }
}

impl AsRef<StateDir> for StateDirBuf {
    fn as_ref(&self) -> &StateDir {
        self
    }
}

/// Written as its path, as a `Path` is.
impl serde::Serialize for StateDir {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// Written as its path, as a `PathBuf` is.
impl serde::Serialize for StateDirBuf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl AsRef<Path> for StateDirBuf {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_a_state_dir_and_back() {
        let p = Path::new("/s");
        let sd = StateDir::new(p);
        assert_eq!(sd.path(), p);
        let back: &Path = sd;
        assert_eq!(back, p);
        assert_eq!(sd.jobs_dir(), Path::new("/s/jobs"));
        assert_eq!(sd.run_file(3), Path::new("/s/loop3/run.json"));
        assert_eq!(sd.lane_report("l1"), Path::new("/s/lanes/l1/report.json"));
    }

    /// The names on disk are a format: each accessor gives what older
    /// drovers wrote and read.
    #[test]
    fn the_layout_keeps_its_names() {
        let sd = StateDir::new("/s");
        let names: [(PathBuf, &str); 18] = [
            (sd.gitignore(), "/s/.gitignore"),
            (sd.job_record("J1"), "/s/jobs/J1.job.json"),
            (sd.jobs_audit(), "/s/jobs/audit.jsonl"),
            (sd.jobs_status(), "/s/jobs/status.json"),
            (sd.jobs_lock(), "/s/jobs/registry.lock"),
            (sd.jobs_seq_hint(), "/s/jobs/seq.hint"),
            (sd.jobs_in_flight(), "/s/jobs/inflight.lock"),
            (sd.jobs_seq_legacy(), "/s/jobs/seq.json"),
            (sd.evidence_file("J1"), "/s/evidence/J1.jsonl"),
            (sd.pane_record("p"), "/s/panes/p.json"),
            (sd.herdr_pane("p"), "/s/herdr/panes/p.json"),
            (sd.herdr_exit_file("p", 3), "/s/herdr/exit/p.3"),
            (sd.tmux_server(), "/s/tmux/server.json"),
            (sd.tmux_pane("p"), "/s/tmux/panes/p.json"),
            (sd.tmux_paste("p"), "/s/tmux/panes/p.paste"),
            (sd.lane_dispatch_lock("l"), "/s/lanes/l/dispatch.lock"),
            (sd.lane_sim_script("l"), "/s/lanes/l/sim-script.toml"),
            (sd.spawn_slot_lock(2), "/s/spawn/slot-2.lock"),
        ];
        for (got, want) in names {
            assert_eq!(got, Path::new(want));
        }
        assert_eq!(sd.rehearsal_dir("r"), Path::new("/s/rehearse/r"));
    }

    #[test]
    fn an_owned_state_dir_lends_its_layout() {
        let owned = StateDirBuf::new("/s");
        let sd: &StateDir = &owned;
        assert_eq!(sd.panes_dir(), Path::new("/s/panes"));
        let p: &Path = &owned;
        assert_eq!(p, Path::new("/s"));
        assert_eq!(sd.to_buf(), owned);
        assert_eq!(owned.into_path_buf(), PathBuf::from("/s"));
    }
}

//! The state dir's layout: every file and folder drover keeps under the
//! state dir is named here once, as a method of [`StateDir`]; [`env`] names
//! the `DROVER_*` environment. Where the state dir is comes from
//! [`crate::paths`]; what is in it, from here.
//!
//! [`StateDir`] is a view of a path, as [`Path`] is of an `OsStr`: a
//! `&Path` becomes a `&StateDir` for free ([`StateDir::new`]) and a
//! `&StateDir` is a `&Path` wherever one is asked for (it derefs to one), so
//! functions move from `state_dir: &Path` to `&StateDir` one at a time.

pub mod env;

use std::ops::Deref;
use std::path::{Path, PathBuf};

/// The file a running loop holds locked in its run dir.
pub const RUN_LOCK: &str = "run.lock";

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

    /// The engine's jobs: one document per job and the audit log.
    pub fn jobs_dir(&self) -> PathBuf {
        self.0.join("jobs")
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

    /// The herdr backend's folder.
    pub fn herdr_dir(&self) -> PathBuf {
        self.0.join("herdr")
    }

    /// herdr panes' records.
    pub fn herdr_panes_dir(&self) -> PathBuf {
        self.herdr_dir().join("panes")
    }

    /// Where herdr panes' exit statuses are written.
    pub fn herdr_exit_dir(&self) -> PathBuf {
        self.herdr_dir().join("exit")
    }

    /// The tmux backend's folder.
    pub fn tmux_dir(&self) -> PathBuf {
        self.0.join("tmux")
    }

    /// tmux panes' records.
    pub fn tmux_panes_dir(&self) -> PathBuf {
        self.tmux_dir().join("panes")
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

    /// Lanes' spawn records.
    pub fn spawn_dir(&self) -> PathBuf {
        self.0.join("spawn")
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
}

//! Write leases (`leases.json`, docs/registry.md): one per task, held by the Implementer,
//! lent to at most one of Claude and Codex at a time.
//!
//! The rules, each enforced here:
//! - a lease names a task; a lease without `task_id` is never eligible;
//! - only the session with `write_lease_owner` (the Implementer) claims;
//! - `borrow` sets `active_agent` only when it is null; `return` clears it;
//! - an expired lease whose worktree is dirty, detached, on another branch,
//!   missing or uninspectable becomes `recovery-needed` and is never reassigned
//!   (only `release --force` by an operator clears it).

use super::schema::Agent;
use super::worktree::{self, WorktreeCheck};
use super::{RegistryError, validate_id};
use crate::statedir::StateDir;
use crate::store;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use super::expiry::Expiry;
pub use super::lend::{LendOutcome, borrow, give_back};

/// Version of `leases.json`.
pub const LEASES_VERSION: u64 = 1;
/// How long a claim lasts without `--ttl-s`.
pub const DEFAULT_LEASE_TTL_S: u64 = 2 * 3600;
/// The longest a claim may last.
pub const MAX_LEASE_TTL_S: u64 = 7 * 24 * 3600;

/// A lease's state as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeaseState {
    Active,
    Expired,
    RecoveryNeeded,
}

impl LeaseState {
    /// The name on disk.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseState::Active => "active",
            LeaseState::Expired => "expired",
            LeaseState::RecoveryNeeded => "recovery-needed",
        }
    }
}

/// One write lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lease {
    pub lease_id: String,
    pub task_id: Option<String>,
    pub branch: Option<String>,
    pub worktree: Option<String>,
    pub claimed_files: Vec<String>,
    pub owner_session: String,
    pub lease_type: String,
    pub active_agent: Option<Agent>,
    pub expires_at: Expiry,
    pub recovery_command: Option<String>,
    pub state: LeaseState,
    /// Why the lease needs recovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_reason: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl Lease {
    /// Whether this lease can be selected by task at all.
    pub fn eligible(&self) -> bool {
        self.task_id.as_deref().is_some_and(|t| !t.is_empty())
    }

    pub(crate) fn is_for(&self, task: &str) -> bool {
        self.eligible() && self.task_id.as_deref() == Some(task)
    }

    /// Past `expires_at` (an unreadable time counts as past).
    pub fn past_expiry(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_past(now)
    }
}

/// `leases.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseDoc {
    pub schema_version: u64,
    pub leases: Vec<Lease>,
}

impl Default for LeaseDoc {
    fn default() -> Self {
        LeaseDoc {
            schema_version: LEASES_VERSION,
            leases: Vec::new(),
        }
    }
}

fn parse(path: &Path, v: Value) -> Result<LeaseDoc, RegistryError> {
    super::parse_versioned(path, v, LEASES_VERSION)
}

/// Read `leases.json` as stored (`None` when absent).
pub fn load(state_dir: &StateDir) -> Result<Option<LeaseDoc>, RegistryError> {
    let path = state_dir.leases_file();
    match store::read_json::<Value>(&path)? {
        Some(v) => parse(&path, v).map(Some),
        None => Ok(None),
    }
}

/// How to look at a worktree; the real one runs `git`.
pub type Inspector<'a> = &'a dyn Fn(&Path, Option<&str>) -> WorktreeCheck;

/// The real inspector.
pub fn git_inspector() -> impl Fn(&Path, Option<&str>) -> WorktreeCheck {
    worktree::inspect
}

/// Move expired leases on: to `expired` when their worktree is clean (or they
/// name none), else to `recovery-needed`, which is final. Returns whether anything changed.
pub fn refresh(doc: &mut LeaseDoc, now: DateTime<Utc>, inspect: Inspector<'_>) -> bool {
    let mut changed = false;
    for l in &mut doc.leases {
        if l.state != LeaseState::Active || !l.past_expiry(now) {
            continue;
        }
        let check = l
            .worktree
            .as_deref()
            .map(|w| inspect(Path::new(w), l.branch.as_deref()));
        match check {
            Some(c) if c.needs_recovery() => {
                l.state = LeaseState::RecoveryNeeded;
                l.recovery_reason = Some(c.describe());
            }
            _ => l.state = LeaseState::Expired,
        }
        changed = true;
    }
    changed
}

/// The leases with their states brought up to date, without writing.
pub fn list(state_dir: &StateDir, now: DateTime<Utc>) -> Result<Vec<Lease>, RegistryError> {
    let mut doc = load(state_dir)?.unwrap_or_default();
    refresh(&mut doc, now, &git_inspector());
    Ok(doc.leases)
}

/// Change `leases.json` under its lock, after bringing states up to date. The
/// closure's error aborts without writing, unless a lease just moved to
/// `recovery-needed`: that is stored either way.
pub(super) fn update<R>(
    state_dir: &StateDir,
    now: DateTime<Utc>,
    f: impl FnOnce(&mut LeaseDoc) -> Result<R, RegistryError>,
) -> Result<R, RegistryError> {
    let path = state_dir.leases_file();
    let _lock = store::lock_beside(&path)?;
    let mut doc = match store::read_json::<Value>(&path)? {
        Some(v) => parse(&path, v)?,
        None => LeaseDoc::default(),
    };
    let refreshed = refresh(&mut doc, now, &git_inspector());
    let mut before = doc.clone();
    match f(&mut doc) {
        Ok(r) => {
            store::write_json_atomic(&path, &doc)?;
            Ok(r)
        }
        Err(e) => {
            // A refusal writes nothing, except a move to recovery-needed: that is final.
            let mut moved = false;
            for l in &mut before.leases {
                let now_needs = doc
                    .leases
                    .iter()
                    .find(|d| d.lease_id == l.lease_id)
                    .filter(|d| {
                        d.state == LeaseState::RecoveryNeeded
                            && l.state != LeaseState::RecoveryNeeded
                    });
                if let Some(d) = now_needs {
                    l.state = d.state;
                    l.recovery_reason = d.recovery_reason.clone();
                    moved = true;
                }
            }
            if refreshed || moved {
                store::write_json_atomic(&path, &before)?;
            }
            Err(e)
        }
    }
}

/// Before an expired lease's task is claimed again, look at its worktree once
/// more: if it got dirty since it expired, it needs recovery instead.
fn recheck_expired(l: &mut Lease, inspect: Inspector<'_>) {
    if l.state != LeaseState::Expired {
        return;
    }
    if let Some(c) = l
        .worktree
        .as_deref()
        .map(|w| inspect(Path::new(w), l.branch.as_deref()))
        && c.needs_recovery()
    {
        l.state = LeaseState::RecoveryNeeded;
        l.recovery_reason = Some(c.describe());
    }
}

/// A `drover lease claim` request.
#[derive(Debug, Clone, Default)]
pub struct ClaimRequest {
    pub task: String,
    /// Defaults to the registry's write-lease owner.
    pub session: Option<String>,
    pub branch: Option<String>,
    pub worktree: Option<PathBuf>,
    pub files: Vec<String>,
    pub ttl_s: Option<u64>,
}

/// What a claim did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", content = "lease", rename_all = "kebab-case")]
pub enum ClaimOutcome {
    Claimed(Lease),
    /// The owner claimed again: expiry extended, files added.
    Renewed(Lease),
}

pub(crate) fn check_file(field: &str, f: &str) -> Result<String, RegistryError> {
    let bad = |why: &str| RegistryError::usage(field, format!("{f:?} {why}"));
    if f.is_empty() || f.len() > 4096 {
        return Err(bad("must be 1-4096 bytes"));
    }
    if f.contains(['\0', '\n', '\r']) {
        return Err(bad("contains a control character"));
    }
    if f.starts_with('/') {
        return Err(bad("must be relative to the worktree"));
    }
    let f = f.trim_start_matches("./");
    if f.split('/').any(|seg| seg == "..") {
        return Err(bad("must not contain .."));
    }
    Ok(f.to_string())
}

fn resolve_worktree(w: &Path) -> Result<String, RegistryError> {
    let s = w.to_string_lossy();
    if s.is_empty() || s.contains(['\0', '\n', '\r']) {
        return Err(RegistryError::usage(
            "--worktree",
            "must be a path without control characters",
        ));
    }
    let abs = if w.is_absolute() {
        w.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| {
                RegistryError::usage("--worktree", format!("relative, and no current dir: {e}"))
            })?
            .join(w)
    };
    Ok(resolve_path(&abs).to_string_lossy().into_owned())
}

/// `abs` with `.` and `..` resolved and symlinks followed as far as the
/// path exists: a worktree that does not exist yet is still named exactly.
fn resolve_path(abs: &Path) -> PathBuf {
    use std::path::Component;
    let mut lexical = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    let mut rest = Vec::new();
    let mut head = lexical.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(head) {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (head.parent(), head.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                head = parent;
            }
            _ => return lexical,
        }
    }
}

/// Claim the write lease for a task (or renew it for its owner).
pub fn claim(
    state_dir: &StateDir,
    req: &ClaimRequest,
    now: DateTime<Utc>,
) -> Result<ClaimOutcome, RegistryError> {
    validate_id("--task", &req.task)?;
    if let Some(b) = &req.branch {
        validate_id("--branch", b)?;
    }
    let files = req
        .files
        .iter()
        .map(|f| check_file("--file", f))
        .collect::<Result<Vec<_>, _>>()?;
    let ttl = req.ttl_s.unwrap_or(DEFAULT_LEASE_TTL_S);
    if ttl == 0 || ttl > MAX_LEASE_TTL_S {
        return Err(RegistryError::usage(
            "--ttl-s",
            format!("must be 1..={MAX_LEASE_TTL_S}"),
        ));
    }
    let worktree = req.worktree.as_deref().map(resolve_worktree).transpose()?;
    let reg = super::load_required(state_dir)?;
    let session = match &req.session {
        Some(s) => reg.session(s).ok_or_else(|| {
            RegistryError::usage("--session", format!("no session {s:?} in the registry"))
        })?,
        None => reg.write_lease_owner().ok_or_else(|| {
            RegistryError::refused(
                "lease claim",
                "the registry has no write-lease owner session",
            )
        })?,
    };
    let request = format!("lease claim {}", req.task);
    if !session.write_lease_owner {
        return Err(RegistryError::refused(
            request,
            format!(
                "{} ({}) is read-only; only the Implementer holds write leases",
                session.session_id, session.role
            ),
        ));
    }
    let owner = session.session_id.clone();
    let expires_at = Expiry::at(now + chrono::Duration::seconds(ttl as i64));
    let out = update(state_dir, now, |doc| {
        if let Some(i) = doc.leases.iter().position(|l| l.is_for(&req.task)) {
            let l = &mut doc.leases[i];
            recheck_expired(l, &git_inspector());
            match l.state {
                LeaseState::RecoveryNeeded => {
                    return Err(RegistryError::refused(
                        request,
                        format!(
                            "lease {} needs recovery ({}); it is never reassigned; recover with: {}",
                            l.lease_id,
                            l.recovery_reason.as_deref().unwrap_or("unknown"),
                            l.recovery_command
                                .as_deref()
                                .unwrap_or("drover lease inspect")
                        ),
                    ));
                }
                LeaseState::Active if l.owner_session != owner => {
                    return Err(RegistryError::refused(
                        request,
                        format!("held by {} until {}", l.owner_session, l.expires_at),
                    ));
                }
                LeaseState::Active => {
                    let clash = |mine: &Option<String>, want: &Option<String>| {
                        want.is_some() && mine != want
                    };
                    if clash(&l.worktree, &worktree) || clash(&l.branch, &req.branch) {
                        return Err(RegistryError::refused(
                            request,
                            format!(
                                "already held on {} / {}; release it first",
                                l.branch.as_deref().unwrap_or("-"),
                                l.worktree.as_deref().unwrap_or("-")
                            ),
                        ));
                    }
                    l.expires_at = expires_at;
                    for f in files {
                        if !l.claimed_files.contains(&f) {
                            l.claimed_files.push(f);
                        }
                    }
                    return Ok(ClaimOutcome::Renewed(l.clone()));
                }
                LeaseState::Expired => {
                    doc.leases.remove(i);
                }
            }
        }
        let lease = Lease {
            lease_id: format!("lease-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
            task_id: Some(req.task.clone()),
            branch: req.branch.clone(),
            recovery_command: Some(match &worktree {
                Some(w) => format!(
                    "git -C {} status --short; then drover lease release --task {} --force",
                    crate::shell::quote(w),
                    req.task
                ),
                None => format!("drover lease release --task {} --force", req.task),
            }),
            worktree: worktree.clone(),
            claimed_files: files,
            owner_session: owner.clone(),
            lease_type: "write".into(),
            active_agent: None,
            expires_at,
            state: LeaseState::Active,
            recovery_reason: None,
            extra: BTreeMap::new(),
        };
        doc.leases.push(lease.clone());
        Ok(ClaimOutcome::Claimed(lease))
    })?;
    let (kind, l) = match &out {
        ClaimOutcome::Claimed(l) => ("lease.claim", l),
        ClaimOutcome::Renewed(l) => ("lease.renew", l),
    };
    super::events::emit_quiet(
        state_dir,
        kind,
        json!({"task": req.task, "lease_id": l.lease_id, "owner": l.owner_session, "expires_at": l.expires_at}),
    );
    Ok(out)
}

/// Whether a release removed a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReleaseOutcome {
    Released,
    /// There was no lease: an idempotent repeat.
    NotHeld,
}

/// Release a task's lease. A borrowed or recovery-needed lease needs `force`.
pub fn release(
    state_dir: &StateDir,
    task: &str,
    force: bool,
    now: DateTime<Utc>,
) -> Result<ReleaseOutcome, RegistryError> {
    validate_id("--task", task)?;
    let request = format!("lease release {task}");
    let out = update(state_dir, now, |doc| {
        let Some(i) = doc.leases.iter().position(|l| l.is_for(task)) else {
            return Ok(ReleaseOutcome::NotHeld);
        };
        let l = &doc.leases[i];
        if !force {
            if l.state == LeaseState::RecoveryNeeded {
                return Err(RegistryError::refused(
                    request,
                    format!(
                        "lease {} needs recovery ({}); inspect the worktree, then release with --force",
                        l.lease_id,
                        l.recovery_reason.as_deref().unwrap_or("unknown")
                    ),
                ));
            }
            if let Some(a) = l.active_agent {
                return Err(RegistryError::refused(
                    request,
                    format!(
                        "{a} has borrowed it; `drover lease return --task {task} --agent {a}` first"
                    ),
                ));
            }
        }
        doc.leases.remove(i);
        Ok(ReleaseOutcome::Released)
    })?;
    if out == ReleaseOutcome::Released {
        super::events::emit_quiet(
            state_dir,
            "lease.release",
            json!({"task": task, "force": force}),
        );
    }
    Ok(out)
}

/// A lease with a live look at its worktree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inspection {
    pub lease: Lease,
    pub worktree_check: Option<WorktreeCheck>,
}

/// The task's lease and what its worktree looks like now.
pub fn inspect(
    state_dir: &StateDir,
    task: &str,
    now: DateTime<Utc>,
) -> Result<Option<Inspection>, RegistryError> {
    validate_id("TASK", task)?;
    let Some(lease) = list(state_dir, now)?.into_iter().find(|l| l.is_for(task)) else {
        return Ok(None);
    };
    let worktree_check = lease
        .worktree
        .as_deref()
        .map(|w| worktree::inspect(Path::new(w), lease.branch.as_deref()));
    Ok(Some(Inspection {
        lease,
        worktree_check,
    }))
}

#[cfg(test)]
mod tests {

    /// Guards: `lease claim --worktree ../wt` stored `/cwd/../wt`.
    #[test]
    fn a_worktree_path_is_resolved_even_when_missing() {
        let d = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(d.path()).unwrap();
        let got = super::resolve_path(&base.join("a").join("..").join("wt").join("."));
        assert_eq!(got, base.join("wt"));
    }
    use super::*;

    fn lease(task: Option<&str>, expires: &str, wt: Option<&str>) -> Lease {
        Lease {
            lease_id: "lease-1".into(),
            task_id: task.map(Into::into),
            branch: None,
            worktree: wt.map(Into::into),
            claimed_files: vec![],
            owner_session: "implementer".into(),
            lease_type: "write".into(),
            active_agent: None,
            expires_at: serde_json::from_value(json!(expires)).unwrap(),
            recovery_command: None,
            state: LeaseState::Active,
            recovery_reason: None,
            extra: BTreeMap::new(),
        }
    }

    #[test]
    fn expired_dirty_becomes_recovery_needed_and_stays() {
        let now = Utc::now();
        let mut doc = LeaseDoc {
            schema_version: 1,
            leases: vec![lease(Some("T"), "2020-01-01T00:00:00Z", Some("/wt"))],
        };
        let dirty = |_: &Path, _: Option<&str>| WorktreeCheck::Dirty { changes: 2 };
        assert!(refresh(&mut doc, now, &dirty));
        assert_eq!(doc.leases[0].state, LeaseState::RecoveryNeeded);
        let clean = |_: &Path, _: Option<&str>| WorktreeCheck::Clean { branch: "b".into() };
        assert!(!refresh(&mut doc, now, &clean), "recovery-needed is final");
        assert_eq!(doc.leases[0].state, LeaseState::RecoveryNeeded);
    }

    #[test]
    fn expired_clean_or_unnamed_worktree_just_expires() {
        let now = Utc::now();
        let mut doc = LeaseDoc {
            schema_version: 1,
            leases: vec![
                lease(Some("T"), "garbage", None),
                lease(Some("U"), "2999-01-01T00:00:00Z", Some("/wt")),
            ],
        };
        let clean = |_: &Path, _: Option<&str>| WorktreeCheck::Clean { branch: "b".into() };
        refresh(&mut doc, now, &clean);
        assert_eq!(
            doc.leases[0].state,
            LeaseState::Expired,
            "unparseable expiry counts as past"
        );
        assert_eq!(doc.leases[1].state, LeaseState::Active);
    }

    #[test]
    fn recovery_paths_are_quoted() {
        assert_eq!(crate::shell::quote("/srv/wt/T-1"), "/srv/wt/T-1");
        assert_eq!(
            crate::shell::quote("/srv/my wt/it's"),
            "'/srv/my wt/it'\\''s'"
        );
    }

    #[test]
    fn lease_without_task_is_never_eligible() {
        let l = lease(None, "2999-01-01T00:00:00Z", None);
        assert!(!l.eligible());
        assert!(!l.is_for(""));
    }
}

//! The reconcile decision table, row by row.

use super::*;
use crate::registry::Agent;
use std::path::PathBuf;

fn rec(phase: Phase, desired: Desired) -> LaneRecord {
    LaneRecord {
        lane_id: "implementer-claude".into(),
        session_id: "implementer".into(),
        role: "Implementer".into(),
        agent: Agent::Claude,
        desired,
        phase,
        reason: None,
        backend: crate::pane::Backend::Native,
        pane: "implementer-claude".into(),
        generation: 1,
        pane_generation: 1,
        pid: Some(1),
        pid_start: Some(1),
        boot_id: Some("boot-a".into()),
        repo: PathBuf::from("/r"),
        worktree: PathBuf::from("/w"),
        branch: "drover/implementer/claude".into(),
        base_ref: "main".into(),
        base_sha: "abc".into(),
        created_branch: true,
        sim: false,
        argv: vec!["claude".into()],
        resume_argv: Some(vec!["claude".into(), "--continue".into()]),
        env: vec![],
        user_env: vec![],
        agent_version: None,
        worktree_owner: None,
        created_at: chrono::DateTime::UNIX_EPOCH,
        updated_at: chrono::DateTime::UNIX_EPOCH,
    }
}

fn obs(pane: Option<(u64, &str)>, wt: WtObs, boot: &str) -> Observed {
    Observed {
        pane: pane.map(|(g, s)| PaneObs {
            generation: g,
            pid: Some(2),
            state: s.parse().unwrap_or(crate::agent::State::Unknown),
        }),
        worktree: wt,
        orphan: false,
        boot_id: Some(boot.into()),
    }
}

#[test]
fn a_pane_with_the_recorded_generation_is_healthy_whatever_its_state() {
    let r = rec(Phase::Up, Desired::Up);
    for st in ["idle", "working", "blocked", "unknown"] {
        assert_eq!(
            decide(&r, &obs(Some((1, st)), WtObs::Ours, "boot-a")),
            Action::Healthy
        );
    }
}

#[test]
fn a_missing_pane_starts_a_new_generation_resuming_the_conversation() {
    let r = rec(Phase::Up, Desired::Up);
    let a = decide(&r, &obs(None, WtObs::Ours, "boot-a"));
    assert!(matches!(a, Action::StartPane { resume: true, .. }), "{a:?}");
    let mut c = rec(Phase::Creating, Desired::Up);
    c.resume_argv = None;
    assert!(matches!(
        decide(&c, &obs(None, WtObs::Ours, "boot-a")),
        Action::StartPane { resume: false, .. }
    ));
}

#[test]
fn an_exited_pane_is_respawned_and_another_generation_adopted() {
    let r = rec(Phase::Up, Desired::Up);
    assert!(matches!(
        decide(&r, &obs(Some((1, "exited")), WtObs::Ours, "boot-a")),
        Action::Respawn { .. }
    ));
    assert_eq!(
        decide(&r, &obs(Some((3, "idle")), WtObs::Ours, "boot-a")),
        Action::Adopt { pane_generation: 3 }
    );
}

#[test]
fn after_a_reboot_a_surviving_pane_is_respawned_once() {
    let r = rec(Phase::Up, Desired::Up);
    assert!(matches!(
        decide(&r, &obs(Some((1, "idle")), WtObs::Ours, "boot-b")),
        Action::Respawn { .. }
    ));
    let mut after = r.clone();
    after.boot_id = Some("boot-b".into());
    assert_eq!(
        decide(&after, &obs(Some((1, "idle")), WtObs::Ours, "boot-b")),
        Action::Healthy
    );
}

#[test]
fn a_lane_taken_down_is_never_resurrected() {
    let r = rec(Phase::Down, Desired::Down);
    assert_eq!(
        decide(&r, &obs(None, WtObs::Ours, "boot-a")),
        Action::StaysDown
    );
    assert_eq!(
        decide(&r, &obs(None, WtObs::Missing, "boot-b")),
        Action::StaysDown
    );
    assert_eq!(
        decide(&r, &obs(Some((1, "idle")), WtObs::Ours, "boot-a")),
        Action::Stop
    );
}

#[test]
fn a_wrong_worktree_needs_a_human_and_a_missing_one_is_remade() {
    let r = rec(Phase::Up, Desired::Up);
    assert!(matches!(
        decide(
            &r,
            &obs(Some((1, "idle")), WtObs::Wrong("detached".into()), "boot-a")
        ),
        Action::RecoveryNeeded { .. }
    ));
    assert!(matches!(
        decide(&r, &obs(None, WtObs::Missing, "boot-a")),
        Action::MakeWorktree { .. }
    ));
    let rn = LaneRecord {
        phase: Phase::RecoveryNeeded,
        reason: Some("x".into()),
        ..r
    };
    assert_eq!(
        decide(&rn, &obs(None, WtObs::Ours, "boot-a")),
        Action::RecoveryNeeded { reason: "x".into() }
    );
}

/// Guards loop lanes: a worktree owned by a loop run that went missing is
/// left for a human, never re-created by the lane; an unfinished `lane up`
/// of such a lane still makes it.
#[test]
fn a_missing_worktree_owned_by_a_run_needs_a_human() {
    let mut r = rec(Phase::Up, Desired::Up);
    r.worktree_owner = Some("loop3".into());
    let a = decide(&r, &obs(None, WtObs::Missing, "boot-a"));
    assert!(
        matches!(&a, Action::RecoveryNeeded { reason } if reason.contains("loop3")),
        "{a:?}"
    );
    r.phase = Phase::Creating;
    assert!(matches!(
        decide(&r, &obs(None, WtObs::Missing, "boot-a")),
        Action::MakeWorktree { .. }
    ));
}

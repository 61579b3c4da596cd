//! One run per board, a fresh N when the repository already has that run's
//! integration branch, and the state dir private whatever the umask. Sim
//! agents in real panes, real git worktrees and a real board.

use crate::common;
use crate::loop_common;

use common::{Drover, wait_until};
use drover::loopctl::night::settings::Unattended;
use drover::loopctl::run::runner::{self, Phase};
use loop_common::REVIEWER_PASS;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

fn implementer(ms: u64) -> String {
    (1..=2)
        .map(|k| format!("[[turn]]\nmatch = \"task=TASK-{k} \"\nsteps = [{{ work = {ms} }}, {{ write = {{ path = \"f{k}.txt\", content = \"{k}\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"))
        .collect()
}

/// Guards issue 24 item 11: a second `loop run` on a board a run is working
/// is refused, naming the first run and its pid; it makes no run dir.
#[test]
fn a_second_run_on_the_same_board_is_refused_naming_the_first() {
    let d = Drover::new();
    let (repo, charter) = loop_common::board_repo(&d, 2, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
    let cfg = |d: &Drover| {
        loop_common::run_config(
            d,
            &repo,
            &charter,
            1,
            Duration::from_secs(60),
            Unattended::default(),
        )
    };
    let (first_cfg, second_cfg) = (cfg(&d), cfg(&d));
    let (state, socket) = (d.state.clone(), d.socket());
    let first = std::thread::spawn(move || {
        let exe = std::path::PathBuf::from(common::BIN);
        let client = drover::daemon::Client::connect_or_start(
            drover::statedir::StateDir::new(&state),
            &socket,
            Some(&exe),
        )
        .unwrap();
        let imp = implementer(2000);
        let scripts = move |s: &drover::loopctl::ops::LaneSpec| match s.role {
            drover::loopctl::ops::Role::Implementer => imp.clone(),
            drover::loopctl::ops::Role::Reviewer => REVIEWER_PASS.to_string(),
        };
        let mut ops = drover::loopctl::lanes::simlanes::SimLanes::new(
            drover::statedir::StateDir::new(&state),
            client,
            &exe,
            Box::new(scripts),
        );
        runner::run(&mut ops, first_cfg, |m| eprintln!("loop1: {m}")).unwrap()
    });
    assert!(
        wait_until(Duration::from_secs(120), || d
            .state
            .join("loop1/run.json")
            .exists()),
        "the first run started"
    );
    let mut ops = loop_common::sim_lanes(&d, implementer(100), REVIEWER_PASS.into());
    let e = runner::run(&mut ops, second_cfg, |m| eprintln!("loop2: {m}")).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("being worked by loop1 (pid ")
            && msg.contains(&std::process::id().to_string()),
        "{msg}"
    );
    assert!(
        !d.state.join("loop2").exists(),
        "the refused run made no run dir"
    );
    let st = first.join().unwrap();
    assert!(
        st.tasks.iter().all(|t| t.kind() == Phase::Landed),
        "{:?}",
        st.tasks
    );
}

/// Guards issue 24 item 11: a fresh state dir on a repository that already
/// has `drover/integration/loop1` runs as loop2 (no empty loop1 left).
#[test]
fn an_integration_branch_already_in_the_repo_makes_the_run_take_the_next_n() {
    let d = Drover::new();
    let (repo, charter) = loop_common::board_repo(&d, 1, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
    common::git(&repo, &["branch", "drover/integration/loop1"]);
    let mut ops = loop_common::sim_lanes(&d, implementer(100), REVIEWER_PASS.into());
    let cfg = loop_common::run_config(
        &d,
        &repo,
        &charter,
        1,
        Duration::from_secs(60),
        Unattended::default(),
    );
    let st = runner::run(&mut ops, cfg, |m| eprintln!("loop: {m}")).unwrap();
    assert_eq!(st.run, 2);
    assert_eq!(st.tasks[0].kind(), Phase::Landed);
    assert!(!d.state.join("loop1").exists());
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Guards issue 24 item 12: under `umask 000` the lanes' dirs, the
/// worktrees dir and the gate logs are still 0700 / 0600.
#[test]
fn the_state_dir_stays_private_under_umask_000() {
    let d = Drover::new().native();
    let (repo, charter) = loop_common::board_repo(&d, 1, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
    let root = d.scratch();
    let (imp, rev) = (root.join("imp.toml"), root.join("rev.toml"));
    std::fs::write(&imp, implementer(100)).unwrap();
    std::fs::write(&rev, REVIEWER_PASS).unwrap();
    let base = d.cmd();
    let mut c = std::process::Command::new("sh");
    c.arg("-c")
        .arg("umask 000; exec \"$0\" \"$@\"")
        .arg(base.get_program());
    c.args(base.get_args());
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let out = c
        .args(["loop", "run", "--repo"])
        .arg(&repo)
        .arg("--charter")
        .arg(&charter)
        .arg("--sim-implementer")
        .arg(&imp)
        .arg("--sim-reviewer")
        .arg(&rev)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = &d.state;
    assert_eq!(mode(&s.join("worktrees")), 0o700);
    assert_eq!(mode(&s.join("lanes")), 0o700);
    for e in std::fs::read_dir(s.join("lanes")).unwrap().flatten() {
        assert_eq!(mode(&e.path()), 0o700, "{}", e.path().display());
    }
    assert_eq!(mode(&s.join("loop1/l1-rev-task-1/gate.log")), 0o600);
    assert_eq!(mode(&s.join("loop1/gate-evidence/1/gate-1.log")), 0o600);
}

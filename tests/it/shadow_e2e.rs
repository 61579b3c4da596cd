//! Dispatch, the shadow runner and auto-completion end to end, with sim agents
//! in real PTYs, real processes and the real engine.

use crate::common;

use common::Drover;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// A supervisor of its own (stopped on drop) and a worktree for the lane.
struct Env {
    d: Drover,
}

impl Env {
    fn new() -> Self {
        let e = Env { d: Drover::new() };
        std::fs::create_dir_all(e.wt()).unwrap();
        e
    }
    fn state(&self) -> PathBuf {
        self.d.state.clone()
    }
    fn wt(&self) -> PathBuf {
        self.d.scratch().join("wt")
    }
    fn cmd(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = self.d.cmd();
        c.args(args).env_remove("DROVER_AUTOCOMPLETE");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }
    fn ok(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let o = self.cmd(args, env);
        assert!(
            o.status.success(),
            "drover {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }
    fn sim(&self, pane: &str, script: &str) {
        std::fs::write(self.wt().join("script.toml"), script).unwrap();
        let exe = env!("CARGO_BIN_EXE_drover");
        let wt = self.wt().display().to_string();
        self.ok(
            &[
                "pane",
                "new",
                pane,
                "--agent",
                "sim",
                "--cwd",
                &wt,
                "--env",
                "DROVER_SESSION_ID=implementer",
                "--",
                exe,
                "sim-agent",
                "--profile",
                "claude",
                "--script",
                "script.toml",
            ],
            &[],
        );
        self.ok(
            &["wait", pane, "--until", "idle", "--timeout-ms", "10000"],
            &[],
        );
    }
    fn dispatch(&self, job: &str, pane: &str, env: &[(&str, &str)]) -> serde_json::Value {
        self.ok(&["job", "create", job], &[]);
        let report = self.wt().join("report.json").display().to_string();
        let out = self.ok(
            &[
                "dispatch",
                job,
                "--pane",
                pane,
                "--session",
                "implementer",
                "--prompt",
                "update the notes",
                "--report",
                &report,
                "--json",
            ],
            env,
        );
        serde_json::from_str(&out).unwrap()
    }
    /// `drover dispatch JOB --pane lane --session SESSION --prompt x`, not run.
    fn dispatch_cmd(&self, job: &str, session: &str) -> std::process::Command {
        let mut c = self.d.cmd();
        c.args(["dispatch", job, "--pane", "lane", "--session", session])
            .args(["--prompt", "x"])
            .env_remove("DROVER_AUTOCOMPLETE");
        c
    }
    fn status(&self, job: &str) -> String {
        let v: serde_json::Value =
            serde_json::from_str(&self.ok(&["job", "show", job, "--json"], &[])).unwrap();
        v["status"].as_str().unwrap().to_string()
    }
    /// Wait until the shadow runner has decided `decision` about `job`.
    fn wait_decision(&self, job: &str, decision: &str) {
        wait_for(
            &format!("a {decision} decision about {job}"),
            Duration::from_secs(15),
            || {
                self.decisions(job)
                    .iter()
                    .any(|d| d["decision"] == decision)
            },
        );
    }
    fn decisions(&self, job: &str) -> Vec<serde_json::Value> {
        let p = self.state().join("shadow").join("decisions.jsonl");
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|d| d["job_id"] == job)
            .collect()
    }
}

/// Wait (condition, timeout — no settling sleeps) or fail naming what.
fn wait_for(what: &str, timeout: Duration, f: impl FnMut() -> bool) {
    assert!(
        common::wait_until(timeout, f),
        "timed out waiting for {what}"
    );
}

const CLEAN: &str = "[[turn]]\nsteps = [{ work = 300 }, { write = { path = \"out.txt\", content = \"x\" } }, { report = { path = \"report.json\" } }, \"finish\"]\n";

fn hash_tree(root: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let bytes = std::fs::read(&p).unwrap();
                out.insert(p.display().to_string(), drover::paths::fnv1a64(&bytes));
            }
        }
    }
    out
}

/// Shadow mode has no route to a write: registry and jobs are byte-identical
/// around a full shadow run over live sim lanes.
#[test]
fn shadow_run_writes_nothing_under_registry_or_jobs() {
    let e = Env::new();
    e.ok(&["registry", "init", "--topology", "four-role"], &[]);
    e.sim("lane", CLEAN);
    e.dispatch("J1", "lane", &[]);
    e.wait_decision("J1", "complete");
    let before_reg = hash_tree(&e.state().join("registry"));
    let before_jobs = hash_tree(&e.state().join("jobs"));
    assert!(!before_reg.is_empty() && !before_jobs.is_empty());
    let n = e.decisions("J1").len();
    let out = e.ok(&["shadow", "run", "--once", "--json"], &[]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["job_id"], "J1");
    assert!(e.decisions("J1").len() > n, "the run appended its decision");
    assert_eq!(before_reg, hash_tree(&e.state().join("registry")));
    assert_eq!(before_jobs, hash_tree(&e.state().join("jobs")));
    assert_eq!(e.status("J1"), "running", "shadow mode never completes");
}

#[test]
fn autocompletion_commits_a_clean_attempt_through_the_engine() {
    let e = Env::new();
    e.sim("lane", CLEAN);
    let d = e.dispatch("J1", "lane", &[("DROVER_AUTOCOMPLETE", "1")]);
    assert_eq!(d["autocomplete"], true);
    wait_for("the job to complete", Duration::from_secs(15), || {
        e.status("J1") == "completed"
    });
    let audit = e.ok(&["job", "audit", "J1", "--json"], &[]);
    assert!(
        audit.contains("supervisor"),
        "completed with supervisor authority: {audit}"
    );
    let last = e.decisions("J1").last().cloned().unwrap();
    assert_eq!(last["decision"], "complete");
    assert_eq!(last["action"], "completed");
}

#[test]
fn rollback_switch_in_the_supervisor_keeps_it_shadow_only() {
    let e = Env::new();
    // The supervisor is started with the switch off; a dispatcher asking for
    // auto-completion does not get it.
    e.ok(&["serve", "--daemon"], &[("DROVER_AUTOCOMPLETE", "0")]);
    e.sim("lane", CLEAN);
    e.dispatch("J1", "lane", &[("DROVER_AUTOCOMPLETE", "1")]);
    e.wait_decision("J1", "complete");
    assert_eq!(e.status("J1"), "running");
}

#[test]
fn report_from_another_attempt_is_held() {
    let e = Env::new();
    e.sim(
        "lane",
        "[[turn]]\nsteps = [{ work = 200 }, { report = { path = \"report.json\", fields = { attempt_id = \"someone-else\" } } }, \"finish\"]\n",
    );
    e.dispatch("J1", "lane", &[("DROVER_AUTOCOMPLETE", "1")]);
    e.wait_decision("J1", "hold_unattributed");
    assert!(
        e.decisions("J1")
            .iter()
            .all(|d| d["decision"] != "complete")
    );
    assert_eq!(e.status("J1"), "running");
}

/// A pane respawned mid-flight is a new generation: even a finalized report
/// naming the right attempt, written by the new generation, never completes.
#[test]
fn pane_respawned_mid_flight_is_never_completed_across_generations() {
    let e = Env::new();
    e.sim(
        "lane",
        "[[turn]]\nsteps = [{ work = 400 }, { write = { path = \"out.txt\", content = \"x\" } }, { report = { path = \"report.json\" } }, \"finish\"]\n",
    );
    let d = e.dispatch("J1", "lane", &[("DROVER_AUTOCOMPLETE", "1")]);
    let attempt = d["attempt_id"].as_str().unwrap().to_string();
    e.ok(&["pane", "respawn", "lane"], &[]);
    e.ok(
        &["wait", "lane", "--until", "idle", "--timeout-ms", "10000"],
        &[],
    );
    // The new generation does the work and reports for the old attempt.
    e.ok(
        &["send", "lane", &format!("redo it attempt={attempt}")],
        &[],
    );
    e.ok(
        &["wait", "lane", "--until", "done", "--timeout-ms", "10000"],
        &[],
    );
    wait_for(
        "a decision after the report",
        Duration::from_secs(15),
        || {
            e.decisions("J1")
                .iter()
                .any(|d| d["summary"]["report"] == "finalized")
        },
    );
    let ds = e.decisions("J1");
    assert!(ds.iter().all(|d| d["decision"] != "complete"), "{ds:?}");
    assert!(ds.iter().any(|d| d["decision"] == "hold_unattributed"));
    assert_eq!(e.status("J1"), "running");
}

#[test]
fn undelivered_prompt_exits_3_and_fails_the_job() {
    let e = Env::new();
    e.ok(
        &[
            "pane", "new", "mute", "--agent", "sim", "--", "sleep", "100",
        ],
        &[],
    );
    e.ok(&["job", "create", "J1"], &[]);
    let o = e.cmd(
        &[
            "dispatch",
            "J1",
            "--pane",
            "mute",
            "--prompt",
            "hi",
            "--ready-timeout-ms",
            "300",
        ],
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("not delivered"));
    assert_eq!(e.status("J1"), "failed");
}

/// A supervisor restart is a disconnect, never a completion: the running
/// job's evidence gets a transport error and the policy holds on it.
#[test]
fn supervisor_restart_is_transport_doubt_not_completion() {
    let e = Env::new();
    e.sim("lane", CLEAN);
    e.dispatch("J1", "lane", &[]);
    e.wait_decision("J1", "complete");
    e.ok(&["kill-server"], &[]);
    e.ok(&["serve", "--daemon"], &[]);
    let evidence = std::fs::read_to_string(e.state().join("evidence").join("J1.jsonl")).unwrap();
    assert!(evidence.contains("supervisor restarted"), "{evidence}");
    // Guards: `status` showed the decision from before the restart until
    // someone ran `shadow run`; the new supervisor decides again at start.
    let v: serde_json::Value = serde_json::from_str(&e.ok(&["status", "--json"], &[])).unwrap();
    assert_eq!(v["jobs"][0]["decision"], "hold_reconnect", "{v}");
    let out = e.ok(
        &["shadow", "run", "--once", "--json"],
        &[("DROVER_AUTOCOMPLETE", "1")],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["decision"], "hold_reconnect", "{v}");
    assert_eq!(e.status("J1"), "running");
}

/// `drover status` shows the pane's state and the running job's latest decision.
#[test]
fn status_shows_panes_and_running_jobs_with_their_decision() {
    let e = Env::new();
    e.sim("lane", CLEAN);
    let d = e.dispatch("J1", "lane", &[]);
    e.wait_decision("J1", "complete");
    let v: serde_json::Value = serde_json::from_str(&e.ok(&["status", "--json"], &[])).unwrap();
    assert_eq!(v["panes"][0]["name"], "lane");
    assert_eq!(v["jobs"][0]["job_id"], "J1");
    assert_eq!(v["jobs"][0]["attempt_id"], d["attempt_id"]);
    assert_eq!(v["jobs"][0]["decision"], "complete");
    let human = e.ok(&["status"], &[]);
    assert!(
        human.contains("J1") && human.contains("complete"),
        "{human}"
    );
}

/// Guards: a second dispatch to a pane with a running job was accepted, and
/// the first job's evidence then recorded the second's observations.
#[test]
fn a_second_job_on_a_busy_pane_is_refused_naming_the_running_one() {
    let e = Env::new();
    e.sim("lane", CLEAN);
    e.dispatch("J1", "lane", &[]);
    e.ok(&["job", "create", "J2"], &[]);
    let out = e.dispatch_cmd("J2", "implementer").output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("J1"),
        "{}",
        common::stderr(&out)
    );
    assert_eq!(e.status("J2"), "pending");
    // Once J1 is done with, the lane takes J2.
    e.ok(&["job", "cancel", "J1", "--reason", "make way"], &[]);
    let o = e.dispatch_cmd("J2", "implementer").output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(e.status("J2"), "running");
}

/// Guards: dispatches racing to one pane could all pass the busy check before
/// any of them claimed, and the pane then held several running jobs.
#[test]
fn dispatches_racing_to_one_pane_start_exactly_one_job() {
    let e = Env::new();
    e.sim("lane", CLEAN);
    let jobs = ["R1", "R2", "R3", "R4"];
    for j in jobs {
        e.ok(&["job", "create", j], &[]);
    }
    let children: Vec<_> = jobs
        .iter()
        .map(|j| {
            e.dispatch_cmd(j, "implementer")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let codes: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .map(|o| (o.status.code(), common::stderr(&o)))
        .collect();
    let won = codes.iter().filter(|(c, _)| *c == Some(0)).count();
    let refused = codes.iter().filter(|(c, _)| *c == Some(3)).count();
    assert_eq!((won, refused), (1, 3), "{codes:?}");
    let running: Vec<_> = jobs.iter().filter(|j| e.status(j) == "running").collect();
    assert_eq!(running.len(), 1, "{running:?} {codes:?}");
}

/// Guards: dispatch accepted a session the registry does not have.
#[test]
fn dispatch_refuses_a_session_the_registry_does_not_have() {
    let e = Env::new();
    e.sim("lane", CLEAN);
    e.ok(&["registry", "init", "--topology", "four-role"], &[]);
    e.ok(&["job", "create", "J1"], &[]);
    let out = e.dispatch_cmd("J1", "ghost").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("implementer"),
        "{}",
        common::stderr(&out)
    );
    assert_eq!(e.status("J1"), "pending");
}

/// `status`: a header naming the supervisor and the state dir, human times,
/// running jobs only unless `--all`.
#[test]
fn status_has_a_header_human_times_and_all() {
    let e = Env::new();
    e.sim("lane", CLEAN);
    e.dispatch("J1", "lane", &[]);
    e.wait_decision("J1", "complete");
    let human = e.ok(&["status"], &[]);
    let first = human.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("supervisor pid ") && first.contains(e.state().to_str().unwrap()),
        "{human}"
    );
    assert!(human.contains(" ago"), "{human}");
    // The reason is readable in full: wrapped to the terminal, or on one line.
    let v: serde_json::Value = serde_json::from_str(&e.ok(&["status", "--json"], &[])).unwrap();
    let reason = v["jobs"][0]["reason"].as_str().unwrap().to_string();
    let narrow = e.ok(&["status"], &[("COLUMNS", "120")]);
    assert!(narrow.lines().all(|l| l.chars().count() <= 120), "{narrow}");
    let words: Vec<&str> = narrow
        .split_once("REASON")
        .unwrap()
        .1
        .lines()
        .skip(1)
        .map(|l| l.get(71..).unwrap_or_default())
        .flat_map(str::split_whitespace)
        .collect();
    assert_eq!(
        words.join(" "),
        reason.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    assert!(
        e.ok(&["status", "--wide"], &[("COLUMNS", "120")])
            .contains(&reason)
    );
    e.ok(&["job", "cancel", "J1"], &[]);
    // No job row names it (the header's state dir is a random temp path,
    // which held `J1` once: the whole text is not searched).
    let after = e.ok(&["status"], &[]);
    assert!(
        !after
            .lines()
            .any(|l| l.split_whitespace().next() == Some("J1")),
        "{after}"
    );
    let all = e.ok(&["status", "--all"], &[]);
    assert!(all.contains("J1") && all.contains("cancelled"), "{all}");
}

//! What `drover top` shows, as plain data: one row per pane (and per lane
//! without a pane), built by a pure function from what the supervisor and
//! the state dir hold. Lane fields are optional: they fill in from
//! `lane ls`'s rows ([`LaneCells`], typed so a renamed field cannot leave a
//! column silently empty).

use crate::agent::State;
use crate::lane::ls::WorktreeState;
use crate::proto::PaneEntry;
use crate::top::runs::RunCell;
use crate::top::state::RowState;
use serde_json::Value;
use std::collections::BTreeMap;

/// Why a row needs a human, most urgent first. Rows sort by this.
/// Written as its lowercase word (the page's `attention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Attention {
    /// The agent asks for a permission or an answer.
    Blocked,
    /// Parked by the loop (e.g. a rate limit) until a reset time.
    Parked,
    /// Its job runs but its heartbeat went stale, or its state is unknown.
    Stalled,
    /// Finished and not yet looked at ("done until seen").
    Done,
    /// The agent exited.
    Exited,
    /// Nothing to do.
    None,
}

impl Attention {
    /// Whether the row belongs to the "needs you" group.
    pub fn needs_human(self) -> bool {
        matches!(
            self,
            Attention::Blocked | Attention::Parked | Attention::Stalled | Attention::Done
        )
    }

    /// Its word.
    pub fn as_str(self) -> &'static str {
        match self {
            Attention::Blocked => "blocked",
            Attention::Parked => "parked",
            Attention::Stalled => "stalled",
            Attention::Done => "done",
            Attention::Exited => "exited",
            Attention::None => "none",
        }
    }

    /// The one-character mark in the first column.
    pub fn mark(self) -> &'static str {
        match self {
            Attention::Blocked => "!",
            Attention::Parked => "P",
            Attention::Stalled => "?",
            Attention::Done => "*",
            Attention::Exited => "x",
            Attention::None => " ",
        }
    }
}

/// A job's cell: the running job on the row's session and the shadow
/// policy's latest word on it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobCell {
    pub job_id: String,
    pub status: String,
    pub decision: Option<String>,
}

/// A session heartbeat as the row shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Heartbeat {
    pub status: String,
    /// When it was written (ms since the epoch), if it parses.
    pub at_ms: Option<u64>,
    pub stale: bool,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The pane's name (or the lane id of a lane without a pane).
    pub pane: String,
    pub has_pane: bool,
    pub agent: String,
    pub agent_version: Option<String>,
    pub state: RowState,
    /// Why a blocked agent waits (the observation's kind).
    pub state_kind: Option<crate::agent::BlockedKind>,
    pub exit_code: Option<i32>,
    /// When the pane entered its state (ms since the epoch).
    pub since_ms: u64,
    pub generation: u64,
    pub session: Option<String>,
    pub job: Option<JobCell>,
    pub lease: Option<String>,
    pub heartbeat: Option<Heartbeat>,
    // Lane fields: `None` until the registry holds lane records.
    pub lane_id: Option<String>,
    pub worktree_state: Option<WorktreeState>,
    pub ahead_behind: Option<(u64, u64)>,
    /// A parked lane's reset time, as the loop wrote it.
    pub parked_until: Option<String>,
    /// What the pane's agent used across its sessions, as its signals
    /// reported it (`None`: not reported).
    pub usage: Option<crate::proto::usage::Usage>,
    pub attention: Attention,
}

/// The gate's verdict for the header.
#[derive(Debug, Clone, PartialEq)]
pub struct GateCell {
    pub ready: bool,
    pub reasons: usize,
    /// What it says, in words ([`super::shipgate::words`]).
    pub words: String,
}

/// Everything one screen of `top` shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct View {
    pub rows: Vec<Row>,
    pub gate: Option<GateCell>,
    /// The loop's runs to show, the ones that need a human first.
    pub runs: Vec<RunCell>,
    /// Older closed runs left out.
    pub older_runs: usize,
    /// The selected pane's last screen lines.
    pub detail: Vec<String>,
    /// The newest feed seq this view reflects.
    pub seq: u64,
    /// When it was built (ms since the epoch): "since" columns count from here.
    pub now_ms: u64,
    /// A problem gathering the data (shown in the footer, never fatal).
    pub warning: Option<String>,
}

/// What `top` takes from one `lane ls` row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LaneCells {
    pub lane_id: String,
    pub session_id: String,
    pub pane: String,
    pub agent: String,
    pub agent_version: Option<String>,
    /// The pane's agent state when the supervisor has the pane, else the
    /// lane's phase (`creating`, `up`, `recovery-needed`, `down`).
    pub state: RowState,
    /// `clean|dirty|detached|missing|inspection-failed`.
    pub worktree_state: WorktreeState,
    pub ahead: Option<u64>,
    pub behind: Option<u64>,
}

impl From<&crate::lane::ls::LaneView> for LaneCells {
    fn from(l: &crate::lane::ls::LaneView) -> Self {
        LaneCells {
            lane_id: l.lane_id.clone(),
            session_id: l.session_id.clone(),
            pane: l.pane.clone(),
            agent: l.agent.clone(),
            agent_version: l.agent_version.as_deref().map(version_number),
            state: match &l.agent_state {
                Some(word) => RowState::of_observation(Some(word)),
                None => RowState::Lane(l.phase),
            },
            worktree_state: l.worktree_state,
            ahead: l.ahead,
            behind: l.behind,
        }
    }
}

/// Lanes the loop parked at a usage limit and has not resumed, from the
/// registry's events in order: lane → when it resumes (`resume_at`, else
/// `resets_at`, else `?`). A park ends with `loop.limit.resume` of its lane,
/// or with the end of its run (`loop.closeout`) or a new run (`loop.start`).
pub fn parked_lanes<'a>(
    events: impl IntoIterator<Item = (&'a str, &'a serde_json::Map<String, Value>)>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (kind, f) in events {
        let lane = f.get("lane").and_then(Value::as_str);
        match (kind, lane) {
            ("loop.limit.park", Some(l)) => {
                let at = ["resume_at", "resets_at"]
                    .iter()
                    .find_map(|k| f.get(*k).and_then(Value::as_str))
                    .unwrap_or("?");
                out.insert(l.to_string(), at.to_string());
            }
            ("loop.limit.resume", Some(l)) => {
                out.remove(l);
            }
            ("loop.closeout" | "loop.start", _) => out.clear(),
            _ => {}
        }
    }
    out
}

/// The version in an agent's `--version` line (`2.1.197 (Claude Code)`,
/// `codex-cli 0.171.0`, `drover 0.1.0`): its first word that starts with a
/// digit, else the line.
pub fn version_number(line: &str) -> String {
    line.split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or(line)
        .to_string()
}

/// What the view is built from, as read (pure input to [`build`]).
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// `pane.ls` of the supervisor.
    pub panes: Vec<PaneEntry>,
    /// Running jobs: (job_id, session_id, status).
    pub jobs: Vec<(String, String, String)>,
    /// Latest decision per job: job_id → (decision, pane).
    pub decisions: BTreeMap<String, (String, Option<String>)>,
    /// Leases: (owner_session, task or lease id, state, worktree).
    pub leases: Vec<(String, String, String, Option<String>)>,
    /// Sessions: session_id → heartbeat.
    pub heartbeats: BTreeMap<String, Heartbeat>,
    /// The lanes, as `lane ls` shows them.
    pub lanes: Vec<LaneCells>,
    pub gate: Option<GateCell>,
    /// Lanes parked at a usage limit: lane id (a loop lane's pane name) →
    /// when it resumes ([`parked_lanes`]).
    pub parked: BTreeMap<String, String>,
    /// Panes the operator has looked at since they finished: name → since_ms seen.
    pub seen: BTreeMap<String, u64>,
    /// The loop's runs, by number.
    pub runs: BTreeMap<u32, RunCell>,
    pub now_ms: u64,
}

/// Which need, if any, a row has (pure).
pub fn attention(row: &Row, seen_since: Option<u64>) -> Attention {
    if row.parked_until.is_some() {
        return Attention::Parked;
    }
    let by_state = row.state.agent().map_or(Attention::None, |s| {
        state_attention(s, seen_since == Some(row.since_ms))
    });
    match by_state {
        Attention::None if row.job.is_some() && row.heartbeat.as_ref().is_some_and(|h| h.stale) => {
            Attention::Stalled
        }
        a => a,
    }
}

/// The need a pane's state alone tells (pure): `done` needs a human until
/// it was seen.
pub fn state_attention(state: State, done_seen: bool) -> Attention {
    match state {
        State::Blocked => Attention::Blocked,
        State::Done if !done_seen => Attention::Done,
        State::Exited => Attention::Exited,
        State::Unknown => Attention::Stalled,
        _ => Attention::None,
    }
}

/// Build the rows from the inputs: needs-a-human first, then by name.
pub fn build(inp: &Inputs) -> View {
    let lane_of_pane: BTreeMap<&str, &LaneCells> =
        inp.lanes.iter().map(|l| (l.pane.as_str(), l)).collect();
    let ahead_behind = |l: &LaneCells| Some((l.ahead?, l.behind?));
    let mut rows: Vec<Row> = Vec::new();
    for p in &inp.panes {
        let name = p.name().to_string();
        let usage = p.live().and_then(|v| v.usage);
        let (agent, state, state_kind, exit_code, since_ms, generation) = match p {
            PaneEntry::Live(v) => {
                let o = &v.observation;
                (
                    v.info.agent.clone(),
                    RowState::Agent(o.state),
                    o.kind,
                    o.exit_code,
                    o.since_ms,
                    v.info.generation,
                )
            }
            PaneEntry::Lost(l) => (
                l.agent.clone(),
                RowState::Lost,
                None,
                None,
                l.observation.since_ms,
                l.generation,
            ),
        };
        let lane = lane_of_pane.get(name.as_str()).copied();
        let session = lane
            .map(|l| l.session_id.clone())
            .or_else(|| inp.heartbeats.contains_key(&name).then(|| name.clone()));
        rows.push(Row {
            has_pane: true,
            agent,
            agent_version: lane.and_then(|l| l.agent_version.clone()),
            state,
            state_kind,
            exit_code,
            since_ms,
            generation,
            session,
            job: None,
            lease: None,
            heartbeat: None,
            lane_id: lane.map(|l| l.lane_id.clone()),
            worktree_state: lane.map(|l| l.worktree_state),
            ahead_behind: lane.and_then(ahead_behind),
            parked_until: None,
            usage,
            attention: Attention::None,
            pane: name,
        });
    }
    // Lanes whose pane is gone still deserve a row.
    for l in &inp.lanes {
        if rows.iter().any(|r| r.pane == l.pane) {
            continue;
        }
        rows.push(Row {
            pane: l.pane.clone(),
            has_pane: false,
            agent: l.agent.clone(),
            agent_version: l.agent_version.clone(),
            state: l.state,
            state_kind: None,
            exit_code: None,
            since_ms: 0,
            generation: 0,
            session: Some(l.session_id.clone()),
            job: None,
            lease: None,
            heartbeat: None,
            lane_id: Some(l.lane_id.clone()),
            worktree_state: Some(l.worktree_state),
            ahead_behind: ahead_behind(l),
            parked_until: None,
            usage: None,
            attention: Attention::None,
        });
    }
    for r in &mut rows {
        r.parked_until = r
            .lane_id
            .as_ref()
            .and_then(|id| inp.parked.get(id))
            .or_else(|| inp.parked.get(&r.pane))
            .cloned();
        // A job is this row's when its latest decision names the pane, else
        // when it runs on the row's session.
        let job = inp
            .jobs
            .iter()
            .find(|(id, _, _)| {
                inp.decisions
                    .get(id)
                    .and_then(|(_, p)| p.as_deref())
                    .is_some_and(|p| p == r.pane)
            })
            .or_else(|| {
                // By session only when no decision places the job on a pane.
                inp.jobs.iter().find(|(id, sess, _)| {
                    r.session.as_deref() == Some(sess.as_str())
                        && inp.decisions.get(id).is_none_or(|(_, p)| p.is_none())
                })
            });
        r.job = job.map(|(id, _, status)| JobCell {
            job_id: id.clone(),
            status: status.clone(),
            decision: inp.decisions.get(id).map(|(d, _)| d.clone()),
        });
        if let Some(sess) = r.session.clone() {
            r.lease = inp
                .leases
                .iter()
                .find(|(owner, ..)| *owner == sess)
                .map(|(_, task, state, _)| format!("{task}:{state}"));
            r.heartbeat = inp.heartbeats.get(&sess).cloned();
        }
        r.attention = attention(r, inp.seen.get(&r.pane).copied());
    }
    rows.sort_by(|a, b| a.attention.cmp(&b.attention).then(a.pane.cmp(&b.pane)));
    let (runs, older_runs) = super::runs::shown(&inp.runs);
    View {
        rows,
        gate: inp.gate.clone(),
        runs,
        older_runs,
        detail: Vec::new(),
        seq: 0,
        now_ms: inp.now_ms,
        warning: None,
    }
}

/// "3s", "4m", "2h", "5d": how long ago, short enough for a column.
pub fn ago(now_ms: u64, then_ms: u64) -> String {
    if then_ms == 0 {
        return "-".into();
    }
    let s = now_ms.saturating_sub(then_ms) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// A live sim pane in `state` since `since` (ms), as `pane.ls` lists it
/// (for tests, here and in the crates above behind `test-support`).
#[cfg(any(test, feature = "test-support"))]
pub fn test_pane(name: &str, state: &str, since: u64) -> PaneEntry {
    let v = serde_json::json!({
        "name": name, "backend": "native", "pid": 1, "generation": 1, "cols": 80,
        "rows": 24, "agent": "sim", "argv": [], "env_names": [], "env_verified": true,
        "started_at_ms": 0, "bytes": 0, "exit": null, "attached": false,
        "observation": {"pane": name, "generation": 1, "state": state, "kind": null,
            "exit_code": null, "since_ms": since, "since": "", "evidence": [],
            "screen_hash": ""}
    });
    match serde_json::from_value(v) {
        Ok(p) => p,
        Err(e) => panic!("a test pane: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pane(name: &str, state: &str, since: u64) -> PaneEntry {
        test_pane(name, state, since)
    }

    /// An attention is written as the word the page always showed.
    #[test]
    fn an_attention_serializes_as_its_old_word() {
        for (a, w) in [
            (Attention::Blocked, "blocked"),
            (Attention::Parked, "parked"),
            (Attention::Stalled, "stalled"),
            (Attention::Done, "done"),
            (Attention::Exited, "exited"),
            (Attention::None, "none"),
        ] {
            assert_eq!(serde_json::to_value(a).ok(), Some(json!(w)));
            assert_eq!(a.as_str(), w);
        }
    }

    #[test]
    fn rows_needing_a_human_come_first_and_done_stays_until_seen() {
        let mut inp = Inputs {
            panes: vec![
                pane("a", "idle", 1),
                pane("b", "done", 2),
                pane("c", "blocked", 3),
                pane("d", "working", 4),
            ],
            now_ms: 10_000,
            ..Default::default()
        };
        let order: Vec<String> = build(&inp).rows.into_iter().map(|r| r.pane).collect();
        assert_eq!(order, ["c", "b", "a", "d"]);
        inp.seen.insert("b".into(), 2);
        let v = build(&inp);
        assert_eq!(v.rows[0].pane, "c");
        assert_eq!(
            v.rows.iter().find(|r| r.pane == "b").unwrap().attention,
            Attention::None
        );
    }

    #[test]
    fn lane_records_fill_the_lane_fields_and_a_lane_without_a_pane_gets_a_row() {
        let inp = Inputs {
            panes: vec![pane("l1", "idle", 1)],
            lanes: vec![
                LaneCells {
                    lane_id: "impl-claude".into(),
                    pane: "l1".into(),
                    session_id: "impl".into(),
                    worktree_state: WorktreeState::Clean,
                    ahead: Some(2),
                    behind: Some(0),
                    ..Default::default()
                },
                LaneCells {
                    lane_id: "rev-codex".into(),
                    pane: "gone".into(),
                    agent: "codex".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let v = build(&inp);
        let l1 = v.rows.iter().find(|r| r.pane == "l1").unwrap();
        assert_eq!(l1.lane_id.as_deref(), Some("impl-claude"));
        assert_eq!(l1.ahead_behind, Some((2, 0)));
        let gone = v.rows.iter().find(|r| r.pane == "gone").unwrap();
        assert!(!gone.has_pane);
        assert_eq!(gone.state.as_str(), "down");
    }

    #[test]
    fn version_number_takes_the_version_out_of_the_line() {
        assert_eq!(version_number("2.1.197 (Claude Code)"), "2.1.197");
        assert_eq!(version_number("codex-cli 0.171.0"), "0.171.0");
        assert_eq!(version_number("drover 0.1.0"), "0.1.0");
        assert_eq!(version_number("weird"), "weird");
    }

    #[test]
    fn a_limit_park_lasts_until_its_resume_or_the_end_of_its_run() {
        let ev = |kind: &str, f: Value| (kind.to_string(), f.as_object().unwrap().clone());
        let log = [
            ev("loop.start", json!({"run": 1})),
            ev(
                "loop.limit.park",
                json!({"lane": "a", "resets_at": "T1", "resume_at": "T2"}),
            ),
            ev(
                "loop.limit.park",
                json!({"lane": "b", "resets_at": null, "resume_at": null}),
            ),
            ev("loop.limit.park", json!({"lane": "c", "resets_at": "T3"})),
            ev("loop.limit.resume", json!({"lane": "b"})),
            ev("session.heartbeat", json!({"lane": "c"})),
        ];
        let it = || log.iter().map(|(k, f)| (k.as_str(), f));
        let parked = parked_lanes(it());
        assert_eq!(parked.get("a").map(String::as_str), Some("T2"));
        assert_eq!(parked.get("b"), None);
        assert_eq!(parked.get("c").map(String::as_str), Some("T3"));
        let closed = ev("loop.closeout", json!({"run": 1}));
        assert!(parked_lanes(it().chain([(closed.0.as_str(), &closed.1)])).is_empty());
        // A loop lane is a pane named by its lane id.
        let mut inp = Inputs {
            panes: vec![pane("a", "idle", 1), pane("z", "idle", 1)],
            parked,
            ..Default::default()
        };
        let v = build(&inp);
        assert_eq!(v.rows[0].pane, "a");
        assert_eq!(v.rows[0].attention, Attention::Parked);
        assert_eq!(v.rows[0].parked_until.as_deref(), Some("T2"));
        assert_eq!(v.rows[1].attention, Attention::None);
        inp.parked.clear();
        assert_eq!(build(&inp).rows[0].attention, Attention::None);
    }

    #[test]
    fn ago_is_short() {
        assert_eq!(ago(61_000, 1_000), "1m");
        assert_eq!(ago(5_000, 0), "-");
        assert_eq!(ago(3_601_000, 1_000), "1h");
    }
}
